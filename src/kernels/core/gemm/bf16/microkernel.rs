//! The register-blocked inner kernel: an `MR x NR` float32 tile of the product accumulated with
//! `vdpbf16ps`, which multiplies 16 pairs of bfloat16 and adds both products of each pair to
//! one float32 lane. Lanes run along the output's columns, so one instruction advances 16
//! columns of one row by two steps of `k`: B is packed with each column's `k`-pairs adjacent
//! (one u32 per column and pair), A with each row's `k`-pair as one u32 that is broadcast.

// The AVX-512 intrinsics are stable since Rust 1.89, like the `avx512*` target features the
// crate already enables elsewhere (nn/simd.rs, reduce), so the crate's real minimum is 1.89
// whatever `rust-version` says; raising that is left to a change of its own.
#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

/// Rows of the register tile (one broadcast of A each per `k`-pair).
pub const MR: usize = 6;
/// zmm vectors per row of the tile; `MR * NV` accumulators plus `NV` B vectors fit in the 32
/// vector registers with room for the broadcasts.
pub const NV: usize = 4;
/// Columns of the register tile.
pub const NR: usize = NV * 16;

/// `c[r * ldc + j] (+)= sum_p a_r[p] . b[p * NR + j]` for `r < MR`, `j < NR`, `p < pairs`,
/// where `a_r[p]` is the u32 at `rows[r] + p * step` (a packed A panel: `rows[r] = a + r`,
/// `step = MR`; A's rows read in place: each row's pointer and `step = 1`, its bfloat16 pairs
/// adjacent) and `.` is the two-element bfloat16 dot product of a pair, in float32. With `first`
/// the tile starts from zero instead of `c`.
///
/// # Safety
/// The CPU must support AVX512-BF16 and AVX512F; each `rows[r]` must be readable (maybe
/// unaligned) at `p * step` for `p < pairs`, `b` for `pairs * NR` u32, and `c` writable for `MR`
/// rows of `NR` floats at stride `ldc`.
#[target_feature(enable = "avx512bf16,avx512f,avx512bw,avx512vl")]
pub unsafe fn tile(
    pairs: usize,
    rows: &[*const u32; MR],
    step: usize,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    first: bool,
) {
    let mut acc = [[_mm512_setzero_ps(); NV]; MR];
    if !first {
        for (r, row) in acc.iter_mut().enumerate() {
            for (v, x) in row.iter_mut().enumerate() {
                // SAFETY: row r, columns 16v..16v+16 of the tile (caller's contract).
                *x = unsafe { _mm512_loadu_ps(c.add(r * ldc + v * 16)) };
            }
        }
    }
    for p in 0..pairs {
        let mut bv = [_mm512_setzero_si512(); NV];
        for (v, x) in bv.iter_mut().enumerate() {
            // SAFETY: pair p's NR u32 of the B panel (caller's contract).
            *x = unsafe { _mm512_loadu_si512(b.add(p * NR + v * 16) as *const _) };
        }
        for (row, a) in acc.iter_mut().zip(rows) {
            // SAFETY: pair p of the tile's row (caller's contract).
            let av = _mm512_set1_epi32(unsafe { a.add(p * step).read_unaligned() } as i32);
            for (v, x) in row.iter_mut().enumerate() {
                *x = _mm512_dpbf16_ps(*x, bh(av), bh(bv[v]));
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (v, x) in row.iter().enumerate() {
            // SAFETY: as for the loads.
            unsafe { _mm512_storeu_ps(c.add(r * ldc + v * 16), *x) };
        }
    }
}

/// The same 512 bits seen as 32 bfloat16 (the operand type of `vdpbf16ps`).
#[inline(always)]
fn bh(x: __m512i) -> __m512bh {
    // SAFETY: both are plain 512-bit vectors; every bit pattern is valid for either.
    unsafe { std::mem::transmute::<__m512i, __m512bh>(x) }
}
