//! Packing of operands into the `k`-pair layout of the microkernel: a panel of `L` lines (rows
//! of A, columns of B) becomes `pairs` groups of `L` u32, each u32 holding one line's elements
//! `2p` (low half) and `2p + 1` (high half). Lines past the matrix edge and the odd `k` tail are
//! zero, so they add nothing to the product. Three loops: `k` contiguous (A row-major, B of a
//! linear layer's `weight.t()`), lines contiguous (B row-major, A transposed), and any strides.

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
    if ks == 1 {
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
