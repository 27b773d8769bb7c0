//! Packing of operands into the `k`-pair layout of the microkernel: a panel of `L` lines (rows
//! of A, columns of B) becomes `pairs` groups of `L` u32, each u32 holding one line's elements
//! `2p` (low half) and `2p + 1` (high half). Lines past the matrix edge and the odd `k` tail are
//! zero, so they add nothing to the product. Three loops: `k` contiguous (A row-major, B of a
//! linear layer's `weight.t()`), lines contiguous (B row-major, A transposed), and any strides.

// The AVX-512 intrinsics are stable since Rust 1.89 (see microkernel.rs).
#![allow(clippy::incompatible_msrv)]

use crate::kernels::core::transpose::{transpose8x8_32, transpose8x8_regs};
use std::arch::x86_64::*;

/// Packs `lines <= L` lines of `k` bfloat16 (raw bits): element `(l, q)` is at
/// `src + l * ls + q * ks`. `dst` receives `k.div_ceil(2) * L` u32.
///
/// # Safety
/// Every element `(l, q)` for `l < lines`, `q < k` must be readable; the CPU must support
/// AVX512F/BW (the loops are compiled for it, so they vectorize).
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn panel<const L: usize>(
    src: *const u16,
    ls: isize,
    ks: isize,
    lines: usize,
    k: usize,
    dst: &mut [u32],
) {
    let pairs = k.div_ceil(2);
    debug_assert!(lines <= L && dst.len() >= pairs * L);
    let full = k / 2;
    let at = |l: usize, q: usize| src.wrapping_offset(l as isize * ls + q as isize * ks);
    if lines < L {
        dst[..pairs * L].fill(0);
    }
    if ks == 1 && ls >= 0 && ls % 2 == 0 {
        // SAFETY: forwarded.
        unsafe { transpose_pairs::<L>(src as *const u32, ls as usize / 2, lines, full, dst) };
    } else if ks == 1 {
        // Pair p of every line per step: `lines` sequential streams, contiguous stores.
        for (p, out) in dst.chunks_exact_mut(L).take(full).enumerate() {
            for (l, d) in out[..lines].iter_mut().enumerate() {
                // SAFETY: elements 2p and 2p + 1 of line l are readable and adjacent (ks == 1).
                *d = unsafe { (at(l, 2 * p) as *const u32).read_unaligned() };
            }
        }
    } else if ls == 1 {
        for p in 0..full {
            let (lo, hi) = (at(0, 2 * p), at(0, 2 * p + 1));
            let out = &mut dst[p * L..p * L + lines];
            for (l, d) in out.iter_mut().enumerate() {
                // SAFETY: elements (l, 2p) and (l, 2p + 1) are readable (caller's contract).
                *d = unsafe { u32::from(*lo.add(l)) | u32::from(*hi.add(l)) << 16 };
            }
        }
    } else {
        for p in 0..full {
            for l in 0..lines {
                // SAFETY: as above.
                dst[p * L + l] =
                    unsafe { u32::from(*at(l, 2 * p)) | u32::from(*at(l, 2 * p + 1)) << 16 };
            }
        }
    }
    if k % 2 == 1 {
        for l in 0..lines {
            // SAFETY: element (l, k - 1) is readable.
            dst[full * L + l] = u32::from(unsafe { *at(l, k - 1) });
        }
    }
}

/// One pair of every line of a panel whose lines are contiguous (`ls == 1`: B row-major, A
/// transposed): `dst[l] = lo[l] | hi[l] << 16` for `l < lines`, zeros up to `L`; `hi` is `None`
/// for the odd `k` tail. [`super::imp`] calls it pair by pair over all panels, so each row of
/// the operand is read from start to end once; panel by panel, every pair read 2 short pieces
/// of rows a row's length apart (B's packing was 15% of a 256x1024 by 1024x256 `addmm`).
///
/// # Safety
/// `lo` (and `hi`) readable for `lines <= L` elements, `dst` writable for `L`; the CPU must
/// support AVX512F/BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn line_pair<const L: usize>(
    lo: *const u16,
    hi: Option<*const u16>,
    lines: usize,
    dst: *mut u32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        pair_run(lo, hi, lines, dst);
        for l in lines..L {
            *dst.add(l) = 0;
        }
    }
}

/// `dst[l] = lo[l] | hi[l] << 16` for `l < n` (`hi` `None`: the odd `k` tail, zeros): one pair
/// of `n` adjacent lines (a transposed A's rows, see `rows.rs`), vectorized.
///
/// # Safety
/// `lo` (and `hi`) readable and `dst` writable for `n` elements; the CPU must support
/// AVX512F/BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn pair_run(lo: *const u16, hi: Option<*const u16>, n: usize, dst: *mut u32) {
    // SAFETY: the caller's contract.
    unsafe {
        match hi {
            Some(hi) => {
                for l in 0..n {
                    *dst.add(l) = u32::from(*lo.add(l)) | u32::from(*hi.add(l)) << 16;
                }
            }
            None => {
                for l in 0..n {
                    *dst.add(l) = u32::from(*lo.add(l));
                }
            }
        }
    }
}

/// [`panel`]'s `full` whole pairs of `lines` lines whose pairs are adjacent u32 (`ks == 1`), lines
/// `ls32` u32 apart (the u32 may be unaligned): the transpose of a `lines x full` u32 matrix, in 8 x 8 blocks through
/// registers, 8 lines at a time. One u32 per line and pair, pair by pair, read all `L` lines at
/// once: B's 64 lines of a linear layer's weight lie 2 KiB apart, in two sets of L1, which
/// evicted each other on every pair (2 ns a pair, a quarter of a 256 x 1024 x 256 product).
///
/// # Safety
/// As [`panel`], and the CPU has AVX512VL (as every AVX512-BF16 CPU).
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl")]
unsafe fn transpose_pairs<const L: usize>(
    src: *const u32,
    ls32: usize,
    lines: usize,
    full: usize,
    dst: &mut [u32],
) {
    let blocks = full - full % 8;
    let at = |l: usize, p: usize| src.wrapping_add(l * ls32 + p);
    for g in (0..lines).step_by(8) {
        let n = (lines - g).min(8);
        for p in (0..blocks).step_by(8) {
            if n == 8 {
                // SAFETY: lines g..g + 8 hold pairs p..p + 8; the panel's pairs p..p + 8 hold
                // lines g..g + 8 (g + 8 <= lines <= L).
                unsafe {
                    transpose8x8_32(
                        at(g, p) as *const f32,
                        ls32 as isize,
                        dst[p * L + g..].as_mut_ptr() as *mut f32,
                        L,
                    )
                };
                continue;
            }
            // A group of fewer than 8 lines (A's 6 rows): its last line read again in place of
            // the missing ones, and only the group's `n` lanes of each pair stored (through a
            // stack block and a copy, this was most of the packing of A).
            // SAFETY: lines g..g + n hold pairs p..p + 8 (32 bytes each, maybe not 4-byte
            // aligned); the panel's pairs p..p + 8 have lanes g..g + n (g + n <= lines <= L).
            unsafe {
                let mut rows = [_mm256_setzero_ps(); 8];
                for (l, r) in rows.iter_mut().enumerate() {
                    *r = _mm256_loadu_ps(at(g + l.min(n - 1), p) as *const f32);
                }
                let mask = (1u8 << n) - 1;
                for (i, v) in transpose8x8_regs(rows).into_iter().enumerate() {
                    let d = dst[(p + i) * L + g..].as_mut_ptr() as *mut f32;
                    _mm256_mask_storeu_ps(d, mask, v);
                }
            }
        }
        for p in blocks..full {
            for l in g..g + n {
                // SAFETY: pair p of line l.
                dst[p * L + l] = unsafe { at(l, p).read_unaligned() };
            }
        }
    }
}
