//! Builds the C++ dispatcher glue (src/glue/*.cpp) against the installed torch, but only for the
//! Python extension (feature `python`, which maturin enables). `cargo test` / `cargo bench`
//! build the pure-Rust crate and need neither Python nor torch.

use std::path::PathBuf;
use std::process::Command;

const PROBE: &str = r#"
import torch, torch.utils.cpp_extension as ext
print(torch.__version__)
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(ext.library_paths()[0])
for p in ext.include_paths():
    print(p)
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

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=FOO_RS_PYTHON");
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    if std::env::var_os("CARGO_FEATURE_PYTHON").is_none() {
        return;
    }
    println!("cargo:rerun-if-changed=src/glue");

    let py = python();
    let probe = Command::new(&py).args(["-c", PROBE]).output().unwrap_or_else(|e| {
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
    let includes: Vec<&str> = lines.collect();
    println!("cargo:rustc-env=FOO_RS_TORCH_VERSION={version}");

    let mut glue = cc::Build::new();
    glue.cpp(true)
        .std("c++20")
        .define("_GLIBCXX_USE_CXX11_ABI", cxx11_abi)
        .flag_if_supported("-fvisibility=hidden")
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-missing-field-initializers")
        .flag_if_supported("-Wno-interference-size")
        .warnings(true)
        .include("src/glue");
    for inc in &includes {
        glue.include(inc);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir("src/glue")
        .expect("src/glue")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cpp"))
        .collect();
    files.sort();
    for f in &files {
        glue.file(f);
    }
    for h in std::fs::read_dir("src/glue").expect("src/glue").filter_map(|e| e.ok()) {
        println!("cargo:rerun-if-changed={}", h.path().display());
    }
    // The TORCH_LIBRARY_IMPL registrations are static initializers that nothing references:
    // link the whole archive so the linker keeps them.
    glue.link_lib_modifier("+whole-archive");
    glue.compile("foo_glue");

    println!("cargo:rustc-link-search=native={lib_dir}");
    for lib in ["c10", "torch_cpu", "torch"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
}
