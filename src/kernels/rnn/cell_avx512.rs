//! The LSTM layer's cell on one block of 16 units (one AVX-512 register of float32) for every
//! batch row, run by the recurrent product (layer.rs) right after it finishes the block's gate
//! sums: the sums are still in L1 then, and each row's four gates and states stay in registers
//! (the cell over all of a member's units afterwards read the sums back from L2 and stored and
//! reloaded each activated gate). The math is `lstm_row`'s with `vmath_avx512`'s forms of the
//! sigmoid and tanh, which give the scalar forms' bits, in the same order: the same results.

// The AVX-512 intrinsics are stable since Rust 1.89 (see gemm/bf16/microkernel.rs).
#![allow(clippy::incompatible_msrv)]

use crate::kernels::core::vmath_avx512::{sigmoid, tanh};
use std::arch::x86_64::*;

/// Units per block: one register of float32.
pub(super) const UNITS: usize = 16;

/// One block's operands, every pointer at the block's first unit (gates `xg_gate` floats apart
/// in `xg`, `gate` in the biases and `ws`, `gs` in `sums`). Rows are `xg_ld` apart in `xg`,
/// `4 gate` in `ws`, `ld` in `sums`, `c_ld` in `c`, `out_ld` in `out` and `cs`.
pub(super) struct Block {
    pub rows: usize,
    pub units: usize,
    pub gate: usize,
    pub xg: *const f32,
    pub xg_ld: usize,
    pub xg_gate: usize,
    pub sums: *const f32,
    pub ld: usize,
    pub gs: usize,
    pub b1: *const f32,
    pub b2: *const f32,
    pub c: *mut f32,
    pub c_ld: usize,
    pub out: *mut f32,
    pub out_ld: usize,
    /// The step's cell states and activated gates for a backward, or null (inference).
    pub cs: *mut f32,
    pub ws: *mut f32,
}

/// For each row: gate `g`'s `act(x + y + b1 + b2)` (tanh for the cell gate, else the sigmoid),
/// `c = f * c + i * g` (in place), `out = o * tanh(c)`, and `cs`, `ws` when not null.
///
/// # Safety
/// The CPU has AVX-512F and DQ; `0 < units <= 16`; each pointer addresses `units` floats at
/// each of its rows (and gates), the outputs writable and overlapping no input.
#[target_feature(enable = "avx512f,avx512dq")]
pub(super) unsafe fn lstm_block(k: &Block) {
    let m: __mmask16 = (u32::MAX >> (32 - k.units)) as __mmask16;
    // SAFETY: every load and store below takes the masked lanes, the block's `units` floats of
    // row r (and gate g) of the operand named, within it by the caller's contract.
    unsafe {
        let mut bias = [(_mm512_setzero_ps(), _mm512_setzero_ps()); 4];
        for (g, b) in bias.iter_mut().enumerate() {
            *b = (
                _mm512_maskz_loadu_ps(m, k.b1.add(g * k.gate)),
                _mm512_maskz_loadu_ps(m, k.b2.add(g * k.gate)),
            );
        }
        for r in 0..k.rows {
            let (x, y) = (k.xg.add(r * k.xg_ld), k.sums.add(r * k.ld));
            let mut act = [_mm512_setzero_ps(); 4];
            for (g, a) in act.iter_mut().enumerate() {
                let xv = _mm512_maskz_loadu_ps(m, x.add(g * k.xg_gate));
                let s = _mm512_add_ps(xv, _mm512_maskz_loadu_ps(m, y.add(g * k.gs)));
                let s = _mm512_add_ps(_mm512_add_ps(s, bias[g].0), bias[g].1);
                *a = if g == 2 { tanh(s) } else { sigmoid(s) };
            }
            let [i, f, g, o] = act;
            let c = k.c.add(r * k.c_ld);
            // `f * c + i * g` rounds each product, as the scalar form (Rust does not contract it).
            let cy = _mm512_add_ps(
                _mm512_mul_ps(f, _mm512_maskz_loadu_ps(m, c)),
                _mm512_mul_ps(i, g),
            );
            _mm512_mask_storeu_ps(c, m, cy);
            _mm512_mask_storeu_ps(k.out.add(r * k.out_ld), m, _mm512_mul_ps(o, tanh(cy)));
            if !k.cs.is_null() {
                _mm512_mask_storeu_ps(k.cs.add(r * k.out_ld), m, cy);
            }
            if !k.ws.is_null() {
                for (gi, a) in act.iter().enumerate() {
                    _mm512_mask_storeu_ps(k.ws.add(r * 4 * k.gate + gi * k.gate), m, *a);
                }
            }
        }
    }
}

/// Asks for the lines of `k.xg` that [`lstm_block`] will read (each row's four gates) to be
/// brought into L2: the layer asks for the next block's while the product of that block runs.
/// `xg` came from the input product over all steps (4 MB for 32 steps of a batch of 32 at
/// H = 256), so the lines are in L3 (or, in the caller's `[T, B, 4H]` layout, in the other
/// core's L2, a row's gates 1 KB apart, which the hardware prefetcher does not follow). Zen 5, 2 threads, 2 layers, medians of 7 alternating
/// rounds: level while the vCPUs are near (4.83-5.30 ms either way), 6.42-7.50 -> 5.99-6.90 ms
/// while they are far apart (a cache line's round trip 400+ ns).
pub(super) fn prefetch_xg(k: &Block) {
    let last = k.units.max(1) - 1;
    for r in 0..k.rows {
        for g in 0..4 {
            let at = k.xg.wrapping_add(r * k.xg_ld + g * k.xg_gate);
            // SAFETY: a prefetch reads nothing architecturally and never faults, whatever the
            // address.
            unsafe {
                _mm_prefetch::<_MM_HINT_T1>(at.cast());
                _mm_prefetch::<_MM_HINT_T1>(at.wrapping_add(last).cast());
            }
        }
    }
}
