//! Whether `vdpbf16ps` pays on this CPU: it does twice the multiply-adds of a float32 FMA per
//! instruction, but CPUs issue it at different rates. Measured on the development machine's
//! Intel Xeon (AVX512-BF16, no AMX): 44 GMAC/s per core against 91 for `vfmadd231ps`, so there
//! a bfloat16 product widened to float32 runs in about half the time of the native kernel
//! (1024^3: 7.3 against 14.1 ms on 2 threads). AMD's Zen 4 issues it at the FMA's rate, twice
//! the multiply-adds. A model number cannot tell which: both loops are timed once instead.

// The AVX-512 intrinsics are stable since Rust 1.89, the crate's real minimum (see
// `microkernel`).
#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;
use std::time::Instant;

/// Instructions per timed run: 12 chains of `ROUNDS`, 3 µs of float32 FMAs on this machine.
const ROUNDS: usize = 1024;
/// Independent accumulators, more than either instruction's latency times its issue rate.
const CHAINS: usize = 12;

/// `ROUNDS x CHAINS` float32 FMAs (16 multiply-adds each) in registers.
///
/// # Safety
/// AVX-512 F.
#[target_feature(enable = "avx512f")]
unsafe fn fma_run() -> f32 {
    let a = _mm512_set1_ps(1e-3);
    let mut acc = [_mm512_setzero_ps(); CHAINS];
    for _ in 0..ROUNDS {
        for x in acc.iter_mut() {
            *x = _mm512_fmadd_ps(a, a, *x);
        }
    }
    acc.iter().map(|&x| _mm512_reduce_add_ps(x)).sum()
}

/// `ROUNDS x CHAINS` `vdpbf16ps` (32 multiply-adds each) in registers.
///
/// # Safety
/// AVX-512 F and BF16.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn dot_run() -> f32 {
    // SAFETY: both are plain 512-bit vectors; every bit pattern is valid for either.
    let a = unsafe { std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi16(0x3a83)) };
    let mut acc = [_mm512_setzero_ps(); CHAINS];
    for _ in 0..ROUNDS {
        for x in acc.iter_mut() {
            *x = _mm512_dpbf16_ps(*x, a, a);
        }
    }
    acc.iter().map(|&x| _mm512_reduce_add_ps(x)).sum()
}

/// Multiply-adds per second of `vdpbf16ps` over those of float32 FMAs on the calling core: the
/// best of 5 timed runs of each (preemption only ever slows a run down).
pub fn dot_over_fma() -> f64 {
    let best = |run: &dyn Fn() -> f32| {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(run());
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
            .max(1e-9)
    };
    // SAFETY: callers check AVX-512 F and BF16 (`super::available`).
    let fma = best(&|| unsafe { fma_run() });
    // SAFETY: as above.
    let dot = best(&|| unsafe { dot_run() });
    // Twice the multiply-adds per `vdpbf16ps`.
    2.0 * fma / dot
}
