//! Builds the C++ dispatcher glue (src/glue/*.cpp) against the installed torch, but only for the
//! Python extension (feature `python`, which maturin enables). `cargo test` / `cargo bench`
//! build the pure-Rust crate and need neither Python nor torch.
//!
//! The glue reaches Rust through `foo_ffi.h`, which is not written by hand: cbindgen generates
//! it here from the `extern "C"` functions of src/ffi and the `#[repr(C)]` types and code enums
//! they use (settings in cbindgen.toml), into `$OUT_DIR/glue-gen/foo_ffi.h`.

use std::path::{Path, PathBuf};
use std::process::Command;

const PROBE: &str = r#"
import torch, torch.utils.cpp_extension as ext
print(torch.__version__)
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(ext.library_paths()[0])
import os, torchgen
print(os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native", "native_functions.yaml"))
# kineto compiled in, with the registry for a PrivateUse1 activity profiler (torch >= 2.10).
registry = os.path.join(ext.include_paths()[0], "torch", "csrc", "profiler", "standalone", "privateuse1_profiler.h")
print(int(torch.autograd.profiler.kineto_available() and os.path.exists(registry)))
for p in ext.include_paths():
    print(p)
# Python's headers: src/glue/distributed.cpp is a pybind11 class, as torch's C++ extensions are.
import sysconfig
print(sysconfig.get_paths()["include"])
"#;

fn python() -> String {
    for key in ["FOO_RS_PYTHON", "PYO3_PYTHON"] {
        if let Ok(p) = std::env::var(key) {
            if !p.is_empty() {
                return p;
            }
        }
    }
    if let Ok(venv) = std::env::var("VIRTUAL_ENV") {
        let p = PathBuf::from(venv).join("bin/python");
        if p.exists() {
            return p.to_string_lossy().into_owned();
        }
    }
    "python3".to_string()
}

/// Bump when compiler flags change, to invalidate cached objects.
const BUILD_FLAGS_VERSION: &str = "1";

fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for p in parts {
        for b in p.bytes().chain([0xff]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}

/// The text of `src` and of every `#include "..."` it reaches, transitively, found in src/glue
/// or in `generated` (foo_ffi.h, device_check_nocheck.inc). Comment lines of the generated
/// files are left out: a changed doc comment in src/ffi does not recompile the glue, a changed
/// declaration does.
fn local_closure(src: &Path, generated: &Path) -> String {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    let mut text = String::new();
    while let Some(p) = stack.pop() {
        if seen.contains(&p) {
            continue;
        }
        let body = std::fs::read_to_string(&p).unwrap_or_default();
        for line in body.lines() {
            if let Some(rest) = line.trim().strip_prefix("#include \"") {
                if let Some(name) = rest.split('"').next() {
                    let glue = Path::new("src/glue").join(name);
                    let gen = generated.join(name);
                    stack.push(if !glue.exists() && gen.exists() {
                        gen
                    } else {
                        glue
                    });
                }
            }
        }
        if p.starts_with(generated) {
            for line in body.lines().filter(|l| !l.trim_start().starts_with("//")) {
                text.push_str(line);
                text.push('\n');
            }
        } else {
            text.push_str(&body);
        }
        seen.push(p);
    }
    text
}

/// Writes the glue's C header, `dir/foo_ffi.h`, from the Rust declarations (cbindgen.toml says
/// which and how). The file is rewritten only when its text changes.
#[cfg(feature = "python")]
fn generate_ffi_header(dir: &Path) {
    let config = cbindgen::Config::from_file("cbindgen.toml")
        .unwrap_or_else(|e| panic!("foo_rs: cannot read cbindgen.toml: {e}"));
    cbindgen::Builder::new()
        .with_config(config)
        .with_src("src/lib.rs")
        .generate()
        .unwrap_or_else(|e| panic!("foo_rs: cbindgen could not generate foo_ffi.h: {e}"))
        .write_to_file(dir.join("foo_ffi.h"));
}

#[cfg(not(feature = "python"))]
fn generate_ffi_header(_dir: &Path) {
    unreachable!("the glue (and its header) is built with feature `python` only")
}

/// The ops whose entry in torch's native_functions.yaml says `device_check: NoCheck`, sorted.
/// PyTorch's generated CUDA wrappers check that every tensor argument is on one device, except
/// for these ops, whose kernels check for themselves (TensorIterator lets CPU 0-dim tensors in
/// as scalars; indexing takes CPU indices; copies cross devices). The glue applies the same rule
/// to foo's kernels and to the CPU fallback (src/glue/device_check.cpp).
fn no_device_check_ops(yaml: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut current: Option<&str> = None;
    for line in yaml.lines() {
        if let Some(rest) = line.strip_prefix("- func:") {
            current = rest.trim().split('(').next();
        } else if let Some(value) = line.trim_start().strip_prefix("device_check:") {
            if let (Some(name), true) = (current, value.trim_start().starts_with("NoCheck")) {
                names.push(name.to_string());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=FOO_RS_PYTHON");
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    if std::env::var_os("CARGO_FEATURE_PYTHON").is_none() {
        return;
    }
    // src: the glue, and the Rust declarations foo_ffi.h is generated from.
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");

    let py = python();
    // Autoload off: the venv may hold an editable foo_rs whose extension is not built yet (this
    // very build), and torch would fail to import while loading it.
    let probe = Command::new(&py)
        .args(["-c", PROBE])
        .env("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
        .output()
        .unwrap_or_else(|e| {
        panic!("foo_rs: cannot run {py} to locate torch: {e}. Set FOO_RS_PYTHON to a Python with torch installed.")
    });
    if !probe.status.success() {
        panic!(
            "foo_rs: {py} could not import torch (set FOO_RS_PYTHON to the project's venv python):\n{}",
            String::from_utf8_lossy(&probe.stderr)
        );
    }
    let text = String::from_utf8_lossy(&probe.stdout).into_owned();
    let mut lines = text.lines();
    let version = lines.next().expect("torch version");
    let cxx11_abi = lines.next().expect("cxx11 abi flag");
    let lib_dir = lines.next().expect("torch lib dir").to_string();
    let yaml_path = lines
        .next()
        .expect("native_functions.yaml path")
        .to_string();
    let kineto = lines.next().expect("kineto flag") == "1";
    let includes: Vec<&str> = lines.collect();
    println!("cargo:rustc-env=FOO_RS_TORCH_VERSION={version}");
    println!("cargo:rerun-if-changed={yaml_path}");

    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let generated = out_dir.join("glue-gen");
    std::fs::create_dir_all(&generated).expect("glue-gen dir");
    generate_ffi_header(&generated);
    let yaml = std::fs::read_to_string(&yaml_path)
        .unwrap_or_else(|e| panic!("foo_rs: cannot read torch's {yaml_path}: {e}"));
    let no_check: String = no_device_check_ops(&yaml)
        .iter()
        .map(|name| format!("\"{name}\",\n"))
        .collect();
    assert!(
        !no_check.is_empty(),
        "foo_rs: no `device_check: NoCheck` op in {yaml_path}"
    );
    std::fs::write(generated.join("device_check_nocheck.inc"), &no_check)
        .expect("write device_check_nocheck.inc");

    let mut glue = cc::Build::new();
    glue.cpp(true)
        .std("c++20")
        .define("_GLIBCXX_USE_CXX11_ABI", cxx11_abi)
        .flag_if_supported("-fvisibility=hidden")
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-missing-field-initializers")
        .flag_if_supported("-Wno-interference-size")
        .warnings(true)
        .include("src/glue")
        .include(&generated);
    for inc in &includes {
        glue.include(inc);
    }
    // profiler_kineto.cpp: foo's kernels as kineto device activity, where torch has kineto.
    glue.define("FOO_RS_KINETO", if kineto { "1" } else { "0" });
    if kineto {
        glue.include(PathBuf::from(includes[0]).join("kineto"));
    }
    let mut sources: Vec<PathBuf> = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir("src/glue")
        .expect("src/glue")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        println!("cargo:rerun-if-changed={}", p.display());
        if p.extension().is_some_and(|x| x == "cpp") {
            sources.push(p);
        }
    }
    // cc recompiles every file on every build; the glue's files each parse ATen's headers, so
    // keep one object per source keyed by a hash of (source, the glue headers it includes,
    // torch, profile) and recompile only what changed.
    // Beside the profile's build dirs (target/<profile>/foo-glue-objects), not inside this build's
    // OUT_DIR: another clone building into the same target dir reuses the objects.
    let cache = out_dir
        .ancestors()
        .nth(3)
        .unwrap_or(&out_dir)
        .join("foo-glue-objects");
    std::fs::create_dir_all(&cache).expect("object cache dir");
    let profile = std::env::var("PROFILE").unwrap_or_default()
        + &std::env::var("OPT_LEVEL").unwrap_or_default();
    let stale: Vec<(PathBuf, PathBuf)> = sources
        .iter()
        .map(|src| {
            // The source plus the glue headers it includes, transitively (foo_ffi.h too).
            let text = local_closure(src, &generated);
            let key = fnv1a(&[
                text.as_str(),
                no_check.as_str(),
                if kineto { "kineto" } else { "no-kineto" },
                version,
                cxx11_abi,
                &profile,
                BUILD_FLAGS_VERSION,
            ]);
            let stem = src.file_stem().unwrap().to_string_lossy();
            (src.clone(), cache.join(format!("{stem}-{key:016x}.o")))
        })
        .collect();
    let todo: Vec<&(PathBuf, PathBuf)> = stale.iter().filter(|(_, obj)| !obj.exists()).collect();
    if !todo.is_empty() {
        let mut b = glue.clone();
        for (src, _) in &todo {
            b.file(src);
        }
        let objects = b.compile_intermediates();
        for ((_, cached), obj) in todo.iter().zip(objects) {
            std::fs::copy(&obj, cached).expect("cache object");
        }
    }
    let lib = out_dir.join("libfoo_glue.a");
    let _ = std::fs::remove_file(&lib);
    let ar = Command::new("ar")
        .arg("crs")
        .arg(&lib)
        .args(stale.iter().map(|(_, o)| o))
        .status()
        .expect("run ar");
    assert!(ar.success(), "ar failed to archive the glue objects");
    println!("cargo:rustc-link-search=native={}", out_dir.display());
    // The TORCH_LIBRARY_IMPL registrations are static initializers that nothing references:
    // link the whole archive so the linker keeps them.
    println!("cargo:rustc-link-lib=static:+whole-archive=foo_glue");
    println!("cargo:rustc-link-lib=dylib=stdc++");

    println!("cargo:rustc-link-search=native={lib_dir}");
    // torch_python: pybind11's casters for torch's types (src/glue/distributed.cpp).
    for lib in ["c10", "torch_cpu", "torch", "torch_python"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
}
