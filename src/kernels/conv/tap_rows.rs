//! Float32 3x3 stride-1 convolutions with 16 output channels (one AVX-512 vector), channels
//! dense (channels-last), on AVX-512 CPUs: every input pixel times all 9 taps' weights at once,
//! `Z[q][tap][o] = sum over c of x[q][c] * w[o][c][tap]` (a product with 9 vectors of columns),
//! then each output pixel's 9 partial sums gathered from its neighbours' rows of `Z`.
//!
//! The pointer-row kernel ([`super::packed`]) holds one vector of output channels per position
//! there, so each multiply-add needs a broadcast of its own: it reached ~40% of the FMA peak.
//! Here a broadcast feeds 3 vectors (tiles of 8 pixels x 48 columns). Zen 5, 2 threads, medians
//! of 5 alternating rounds, against that kernel (the CPU's oneDNN in brackets): the input
//! gradient of [32,16,32,32] -> 32 (a 32 -> 16 product) 863 -> 713 us (696), the forward of
//! [8,32,64,64] -> 16 800 -> 667 (625), of [8,64,32,32] -> 16 389 -> 327 (339). NCHW operands
//! come through channels-last copies (`conv::on_channels_last`), as they do to that kernel:
//! the input gradient of [32,16,32,32] -> 32, 1051 -> 898 us (803); the forward of
//! [32,32,32,32] -> 16 989 -> 845 (995), of [8,64,32,32] -> 16 458 -> 411 (512).
//!
//! `Z` is kept for a ring of input rows per sample: an output row needs three; a sample's rows
//! are computed once, in order. Every output element is the sum of its in-range taps in tap
//! order (each a chain over the input channels, in order), plus the bias: the bits do not
//! depend on the thread count (a sample belongs to one unit).

// The AVX-512 intrinsics are stable since Rust 1.89 (see gemm/bf16/microkernel.rs).
#![allow(clippy::incompatible_msrv)]

use super::winograd::Taps;
use super::Geometry;
use crate::kernels::core::gemm::rows::{product_avx512, Dst};
use crate::kernels::core::parallel::{parallel_units, SendPtr};
use crate::kernels::core::scratch::with_scratch;
use crate::kernels::core::simd;
use crate::tensor::{TensorMut, TensorRef};
use std::arch::x86_64::*;

/// Output channels: one vector.
const O: usize = 16;

/// Taps of the 3x3 kernel.
const TAPS: usize = 9;

/// Columns of `Z` per pixel.
const COLS: usize = TAPS * O;

/// Vectors of columns per product call (3 calls cover the 9 taps).
const J: usize = 3;

/// Fewer input channels than this: the products' depth is too short for the tiles' set-up and
/// `Z`'s round trip (Zen 5, 2 threads, [8,16,64,64] -> 16: forward 389 -> 407 us, input
/// gradient 368 -> 409), left to [`super::packed`].
const MIN_CHANNELS: usize = 32;

/// Pixels per product tile (8 x 3 accumulators, 3 weight vectors and a broadcast).
const R: usize = 8;

/// Whether [`forward`] takes this float32 convolution: an AVX-512 CPU, 2-D, one group, 3x3,
/// stride and dilation 1, padding up to 1 (output planes no larger than the input's), 16 output
/// channels from at least [`MIN_CHANNELS`], and at least two samples per thread (a sample is a
/// unit).
pub(super) fn applies(g: &Geometry) -> bool {
    let threads = crate::runtime::pool::num_threads().max(1);
    simd::level() >= 3
        && super::winograd::kernel_fits(g)
        && (1..3).all(|i| g.padding[i] <= 1)
        && g.o == O
        && g.c >= MIN_CHANNELS
        && g.n >= 2 * threads
}

/// `out = conv(input, w) (+ bias)` for a convolution [`applies`] holds for: `input` and `out`
/// with dense channels (`strides[1] == 1`), any other strides.
pub(super) fn forward(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    w: Taps,
    bias: Option<&[f32]>,
) {
    debug_assert!(input.strides[1] == 1 && out.strides[1] == 1);
    let c = g.c;
    // Panel p holds taps 3p..3p + 3: `[k][tap][o]`, 48 floats per input channel.
    let panel = c * J * O;
    with_scratch(3 * panel, |wp: &mut [f32]| {
        for (p, block) in wp.chunks_exact_mut(panel).enumerate() {
            for (k, row) in block.chunks_exact_mut(J * O).enumerate() {
                for (t, taps) in row.chunks_exact_mut(O).enumerate() {
                    let tap = 3 * p + t;
                    let (a, b) = ((tap / 3) as isize, (tap % 3) as isize);
                    for (o, v) in taps.iter_mut().enumerate() {
                        let at = o as isize * w.so + k as isize * w.sc + a * w.sa + b * w.sb;
                        // SAFETY: tap (a, b) of weight (o, k), inside the weight by its strides.
                        *v = unsafe { *w.ptr.offset(at) };
                    }
                }
            }
        }
        let (xp, op, wpp) = (
            SendPtr::<f32>::of(input.ptr),
            SendPtr::<f32>::of(out.ptr),
            SendPtr::new(wp.as_mut_ptr()),
        );
        let (ih, iw) = (g.isp[1], g.isp[2]);
        // Rows of Z kept: the three an output row reads, and more to run whole tiles.
        let ring = ih.min(8);
        parallel_units(g.n, &|s0, s1| {
            with_scratch(ring * iw * COLS, |z: &mut [f32]| {
                for s in s0..s1 {
                    // SAFETY: the CPU has AVX-512 (applies); sample s's pixels of both tensors
                    // by their strides, channels dense; the packed weights read only; sample s's
                    // output pixels are this unit's alone.
                    unsafe {
                        sample(
                            g,
                            (input, xp.at(0) as *const f32),
                            (out, op.at(0)),
                            wpp.at(0) as *const f32,
                            bias,
                            s,
                            (ring, z),
                        )
                    };
                }
            })
        });
    })
}

/// One sample: rows of `Z` into the ring as the output rows need them, then the gathers.
///
/// # Safety
/// As [`forward`]'s body says.
#[target_feature(enable = "avx512f")]
unsafe fn sample(
    g: &Geometry,
    (input, x): (&TensorRef, *const f32),
    (out, y): (&TensorMut, *mut f32),
    wp: *const f32,
    bias: Option<&[f32]>,
    s: usize,
    (ring, z): (usize, &mut [f32]),
) {
    let (c, ih, iw, oh, ow) = (g.c, g.isp[1], g.isp[2], g.osp[1], g.osp[2]);
    let (ph, pw) = (g.padding[1], g.padding[2]);
    let [xs_n, _, _, xs_h, xs_w] = input.strides[..] else {
        unreachable!("5-D")
    };
    let [os_n, _, _, os_h, os_w] = out.strides[..] else {
        unreachable!("5-D")
    };
    let bias = bias.map(|b| {
        // SAFETY: the bias holds the 16 output channels.
        unsafe { _mm512_loadu_ps(b.as_ptr()) }
    });
    let zp = z.as_mut_ptr();
    let mut computed = 0; // input rows 0..computed are in the ring (the last `ring` of them)
    let mut rows = [std::ptr::null::<f32>(); R];
    for oy in 0..oh {
        // Input rows oy - ph .. oy - ph + 3 that exist.
        let last = ((oy as isize - ph + 2).max(-1) + 1).min(ih as isize) as usize;
        while computed < last {
            let iy = computed;
            let zrow = zp.wrapping_add((iy % ring) * iw * COLS);
            let xrow = x.wrapping_offset(s as isize * xs_n + iy as isize * xs_h);
            for q0 in (0..iw).step_by(R) {
                let n = R.min(iw - q0);
                for (r, p) in rows.iter_mut().enumerate() {
                    // Pixels past the row read its first; their results are dropped.
                    let q = if r < n { q0 + r } else { 0 };
                    *p = xrow.wrapping_offset(q as isize * xs_w);
                }
                for p in 0..3 {
                    // SAFETY: each row pointer addresses a pixel's c dense channels; panel p's
                    // c x 48 packed weights; the ring row's pixels q0..q0 + n, columns 48p..
                    // (the ring holds `ring * iw` pixels of 144 floats).
                    unsafe {
                        product_avx512::<R, R, J>(
                            &rows,
                            c,
                            wp.add(p * c * J * O),
                            zrow.add(q0 * COLS + p * J * O),
                            COLS,
                            O,
                            n,
                            std::ptr::null(),
                            Dst::Write,
                        )
                    };
                }
            }
            computed += 1;
        }
        let yrow = y.wrapping_offset(s as isize * os_n + oy as isize * os_h);
        // The ring rows of the three input rows this output row reads (None: padding).
        let zrows: [Option<*const f32>; 3] = std::array::from_fn(|a| {
            let iy = oy as isize - ph + a as isize;
            (0..ih as isize)
                .contains(&iy)
                .then(|| zp.wrapping_add((iy as usize % ring) * iw * COLS) as *const f32)
        });
        let valid: Vec<(usize, *const f32)> = zrows
            .iter()
            .enumerate()
            .filter_map(|(a, z)| z.map(|z| (a, z)))
            .collect();
        // Output pixels whose three column taps are all inside the row.
        let lo = pw as usize;
        let hi = (iw + pw as usize).saturating_sub(2).min(ow).max(lo);
        for ox in lo..hi {
            let base = (ox - lo) * COLS;
            let mut acc = _mm512_setzero_ps();
            for (i, &(a, zrow)) in valid.iter().enumerate() {
                // SAFETY: pixels ox - pw .. ox - pw + 3 of a computed ring row, in the row.
                let (v0, v1, v2) = unsafe {
                    (
                        _mm512_loadu_ps(zrow.add(base + 3 * a * O)),
                        _mm512_loadu_ps(zrow.add(base + COLS + (3 * a + 1) * O)),
                        _mm512_loadu_ps(zrow.add(base + 2 * COLS + (3 * a + 2) * O)),
                    )
                };
                let first = if i == 0 { v0 } else { _mm512_add_ps(acc, v0) };
                acc = _mm512_add_ps(_mm512_add_ps(first, v1), v2);
            }
            if let Some(b) = bias {
                acc = _mm512_add_ps(acc, b);
            }
            // SAFETY: output pixel (oy, ox) of sample s, 16 dense channels.
            unsafe { _mm512_storeu_ps(yrow.wrapping_offset(ox as isize * os_w), acc) };
        }
        for ox in (0..lo).chain(hi..ow) {
            let mut acc: Option<__m512> = None;
            for (a, zrow) in zrows.iter().enumerate() {
                let Some(zrow) = *zrow else { continue };
                for b in 0..3 {
                    let ix = ox as isize - pw + b as isize;
                    if ix < 0 || ix >= iw as isize {
                        continue;
                    }
                    let at = ix as usize * COLS + (3 * a + b) * O;
                    // SAFETY: a ring row computed above (the last `ring` input rows include the
                    // three this output row reads), pixel ix, the tap's 16 columns.
                    let v = unsafe { _mm512_loadu_ps(zrow.add(at)) };
                    acc = Some(acc.map_or(v, |s| _mm512_add_ps(s, v)));
                }
            }
            let mut v = acc.unwrap_or(_mm512_setzero_ps());
            if let Some(b) = bias {
                v = _mm512_add_ps(v, b);
            }
            // SAFETY: output pixel (oy, ox) of sample s, 16 dense channels.
            unsafe { _mm512_storeu_ps(yrow.wrapping_offset(ox as isize * os_w), v) };
        }
    }
}
