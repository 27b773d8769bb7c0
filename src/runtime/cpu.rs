//! What the host CPU offers foo's kernels: the instruction-set extensions they dispatch on at
//! run time, and the x86-64 microarchitecture level (psABI x86-64-v1..v4) the host reaches,
//! which `torch.foo.get_device_capability()` reports as its (major, minor) pair.

/// The extensions foo's kernels (and the `gemm` crate under them) choose code paths by, in the
/// order `torch.foo.get_device_properties()` lists them, with whether this host has each.
pub fn kernel_features() -> Vec<(&'static str, bool)> {
    #[cfg(target_arch = "x86_64")]
    {
        vec![
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("fma", std::arch::is_x86_feature_detected!("fma")),
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
            ("avx512bw", std::arch::is_x86_feature_detected!("avx512bw")),
            ("avx512dq", std::arch::is_x86_feature_detected!("avx512dq")),
            ("avx512vl", std::arch::is_x86_feature_detected!("avx512vl")),
            (
                "avx512bf16",
                std::arch::is_x86_feature_detected!("avx512bf16"),
            ),
        ]
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Vec::new()
    }
}

/// Whether the host has bfloat16 arithmetic instructions the kernels use (AVX512-BF16's dot
/// products in the bf16 GEMM). Without them bfloat16 is computed through float32.
pub fn native_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The highest x86-64 psABI microarchitecture level this host satisfies: 1 (baseline), 2
/// (SSE4.2, POPCNT, ...), 3 (AVX2, FMA, BMI, ...), 4 (AVX-512 F/BW/CD/DQ/VL); 0 off x86-64.
pub fn x86_64_level() -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let v2 = has!("cmpxchg16b")
            && has!("popcnt")
            && has!("sse3")
            && has!("sse4.1")
            && has!("sse4.2")
            && has!("ssse3");
        let v3 = v2
            && has!("avx")
            && has!("avx2")
            && has!("bmi1")
            && has!("bmi2")
            && has!("f16c")
            && has!("fma")
            && has!("lzcnt")
            && has!("movbe")
            && has!("xsave");
        let v4 = v3
            && has!("avx512f")
            && has!("avx512bw")
            && has!("avx512cd")
            && has!("avx512dq")
            && has!("avx512vl");
        1 + u32::from(v2) + u32::from(v3) + u32::from(v4)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Whether the host is an AMD CPU (CPUID's vendor string). Its AVX-512 cores so far (Zen 4)
/// run a 512-bit multiply-add on two 256-bit units, and stream a kernel's packed operand from
/// L2 at the FMA rate, so blocking that keeps it in L1 (which Intel's cores repay) only adds
/// the blocks' loads and stores there.
pub fn amd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static AMD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AMD.get_or_init(|| {
            // Leaf 0: the vendor string in EBX, EDX, ECX.
            let id = std::arch::x86_64::__cpuid(0);
            [id.ebx, id.edx, id.ecx]
                .iter()
                .flat_map(|r| r.to_le_bytes())
                .eq(*b"AuthenticAMD")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The CPU's model name from /proc/cpuinfo, if there is one.
pub fn model_name() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendor_agrees_with_cpuinfo() {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        if cfg!(target_arch = "x86_64") && info.contains("vendor_id") {
            assert_eq!(amd(), info.contains("AuthenticAMD"));
        }
    }

    #[test]
    fn level_agrees_with_the_features() {
        let level = x86_64_level();
        let has = |name: &str| {
            kernel_features()
                .iter()
                .any(|&(n, present)| n == name && present)
        };
        if cfg!(target_arch = "x86_64") {
            assert!((1..=4).contains(&level));
            if level >= 3 {
                assert!(has("avx2") && has("fma"));
            }
            if level == 4 {
                assert!(has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl"));
            }
            assert_eq!(native_bf16(), has("avx512bf16"));
        } else {
            assert_eq!(level, 0);
        }
    }
}
