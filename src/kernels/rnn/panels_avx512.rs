//! The packing of a member's rows of the recurrent weight into the AVX-512 panels of the LSTM
//! layer's recurrent product (layer.rs), once per call: 16 x 16 register transposes, each
//! reading 64 bytes of 16 weight rows and writing one gate's 64 bytes of 16 panel rows, with
//! the rows' next lines asked for ahead. The 8 x 8 transposes before (`transpose_strided`) left
//! the loads waiting on each new line of the 16 rows: 78 us a member for a [1024, 256] weight
//! (Zen 5, 2 threads), 3% of a 2-layer `nn.LSTM(256, 256)` inference; see [`pack`].

// The AVX-512 intrinsics are stable since Rust 1.89 (see gemm/bf16/microkernel.rs).
#![allow(clippy::incompatible_msrv)]

use crate::kernels::core::transpose::transpose16x16_regs;
use std::arch::x86_64::*;

/// Units per panel (one register of float32) and a panel row's floats (its four gates).
pub(super) const LANES: usize = 16;
const COLS: usize = 4 * LANES;

/// Floats ahead in each weight row whose line a block asks for (4 lines: 128 was slower).
const AHEAD: usize = 64;

/// Panel `p` of `packed` (`[H][64]`) gets gate `g`'s rows of units `j0 + 16 p + u` of the
/// dense `[4H, H]` weight at `w`, transposed: `packed[(p H + k) 64 + 16 g + u] = w[(g H + j0 +
/// 16 p + u) H + k]`, zero for units past `n`. `zero_state[g gs + 16 p + u]` (`gs = 16
/// panels`) gets the product of a zero state with that weight row as [`product_avx512`] sums
/// it (a multiply-add chain from +0): +0, or NaN where the row holds an infinity or a NaN.
/// Zen 5, 2 threads, `nn.LSTM(256, 256, 2)` inference, medians of 7 alternating rounds:
/// 4.98 -> 4.84 ms (4.82 with no packing at all).
///
/// [`product_avx512`]: crate::kernels::core::gemm::rows::product_avx512
///
/// # Safety
/// The CPU has AVX-512F; `w` addresses the dense `[4H, H]` weight and `j0 + n <= H`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn pack(
    w: *const f32,
    h: usize,
    (j0, n): (usize, usize),
    packed: &mut [f32],
    zero_state: &mut [f32],
) {
    let panels = n.div_ceil(LANES);
    let gs = panels * LANES;
    assert!(packed.len() >= panels * h * COLS && zero_state.len() >= 4 * gs);
    let rows_at = |p: usize, g: usize| w.wrapping_add((g * h + j0 + p * LANES) * h);
    let zero = _mm512_setzero_ps();
    for p in 0..panels {
        let units = LANES.min(n - p * LANES);
        let panel = packed[p * h * COLS..].as_mut_ptr();
        for g in 0..4 {
            let src = rows_at(p, g);
            // The block after this one, where the lines asked for ahead run on to.
            let next = if g < 3 {
                rows_at(p, g + 1)
            } else {
                rows_at(p + 1, 0)
            };
            // The bits of every `w * 0` ORed: +-0, or a NaN once one is.
            let mut nan = _mm512_setzero_si512();
            let mut k0 = 0;
            while units == LANES && k0 + LANES <= h {
                let (at, k) = match k0 + AHEAD {
                    k if k < h => (src, k),
                    k => (next, k - h),
                };
                for u in 0..LANES {
                    // A prefetch reads nothing architecturally and never faults.
                    _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(u * h + k).cast());
                }
                // SAFETY: rows u < 16 of the block at columns k0..k0 + 16 <= H, within the
                // weight; panel rows k0..k0 + 16 at gate g's 16 floats, within `packed`.
                unsafe {
                    let rows = std::array::from_fn(|u| _mm512_loadu_ps(src.add(u * h + k0)));
                    for (i, v) in transpose16x16_regs(rows).into_iter().enumerate() {
                        _mm512_storeu_ps(panel.add((k0 + i) * COLS + g * LANES), v);
                        let m = _mm512_castps_si512(_mm512_mul_ps(v, zero));
                        nan = _mm512_or_si512(nan, m);
                    }
                }
                k0 += LANES;
            }
            let mut tail = [0.0f32; LANES];
            for k in k0..h {
                for (u, t) in tail.iter_mut().enumerate() {
                    // Units past n read nothing (zeros: their sums are dropped).
                    let v = match u < units {
                        // SAFETY: row u < units of the block at column k < H, in the weight.
                        true => unsafe { *src.add(u * h + k) },
                        false => 0.0,
                    };
                    // SAFETY: panel row k < H at gate g's unit u, within `packed`.
                    unsafe { *panel.add(k * COLS + g * LANES + u) = v };
                    *t += v * 0.0;
                }
            }
            // SAFETY: 16 floats of `tail`.
            let tail = unsafe { _mm512_loadu_ps(tail.as_ptr()) };
            let sums = _mm512_add_ps(_mm512_add_ps(zero, _mm512_castsi512_ps(nan)), tail);
            // SAFETY: gate g's 16 floats of panel p, within `zero_state` (asserted).
            unsafe { _mm512_storeu_ps(zero_state[g * gs + p * LANES..].as_mut_ptr(), sums) };
        }
    }
}
