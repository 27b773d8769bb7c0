//! Channels-last float32 weight gradient of stride-1, one-group convolutions on AVX-512 and AVX2
//! CPUs:
//! the output gradient read where it lies, the input from its channel-blocked padded copy
//! ([`PaddedGrid`], as the forward's: blocks of 16 channels, or of 1-4 or 8 for inputs of at
//! most 8, as an RGB stem's).
//!
//! `grad_weight[o][k] = sum over samples and output pixels of grad_output[pixel][o] *
//! x[pixel + tap][c]` for `k = (c, tap)` in the grid's blocked order. Along an output row the
//! pixels are consecutive in both operands: a channels-last gradient's pixel holds its `O`
//! channels in one run, and the copy's pixel its 16 channels of a block, so a register tile
//! of 32 output channels x 12 columns does 24 FMAs per pixel from 2 vector loads and 12
//! broadcasts, at constant offsets, with no dropped grid columns and no copy of the gradient
//! (the planar kernel, `super::direct`, transposed both operands first). On AVX-512, with
//! 16-channel input blocks and output channels in blocks of 8, the tile is turned around
//! ([`tile_turned`]): 8 output channels x 3 vectors of 16 `k`s (a block's 16 channels at one
//! tap are one vector of the copy's pixel), 24 FMAs per pixel from 3 loads and 8 broadcasts.
//!
//! A contiguous output gradient is transposed to channels-last by the caller first: over 9
//! resnet/unet-sized 3x3 shapes this took 0.68-1.00 of the direct kernel's time in NCHW, and
//! 0.53-0.82 in channels-last (`docs/PERFORMANCE.md`).
//!
//! Samples are cut into chunks by size alone (their gradient and copy in about 1 MB); each
//! (chunk, tile) sums its pixels in order into the chunk's partial gradient, and the partials
//! are added in chunk order: the bits do not depend on the thread count.

// The AVX-512 intrinsics are stable since Rust 1.89 (see gemm/bf16/microkernel.rs).
#![allow(clippy::incompatible_msrv)]

use super::packed::{copy_grid_row, PaddedGrid};
use super::{direct, Geometry};
use crate::kernels::core::parallel::{parallel_for, parallel_units, SendPtr};
use crate::kernels::core::scratch::with_scratch2;
use crate::kernels::core::simd;
use crate::tensor::{TensorMut, TensorRef};
use std::arch::x86_64::*;

/// Columns (`k`s) of the register tile.
const W: usize = 12;

/// Bytes of gradient and input copy a chunk of samples aims for: every tile of the chunk
/// passes over them, so they should stay in a core's L2.
const CHUNK_BYTES: usize = 1 << 20;

/// Floats of partial gradients at most (16 MB): chunks grow beyond [`CHUNK_BYTES`] to keep
/// their partials below this.
const PARTIAL_FLOATS: usize = 1 << 22;

/// Whether [`weight_gradient`] takes this float32 weight gradient: an AVX-512 or AVX2 CPU, the
/// direct kernel's shapes ([`direct::suits`]), stride 1 and one group (the grid), and a dense
/// channels-last output gradient (the caller makes one from a contiguous gradient).
pub(super) fn applies(g: &Geometry) -> bool {
    let cpu = match simd::level() {
        3 => true,
        2 => g.op() >= AVX2_MIN_POSITIONS,
        _ => false,
    };
    let narrow = g.c <= 8 && g.og() >= 16 && !g.is_pointwise();
    let lanes = PaddedGrid::lanes_for(g.c);
    cpu && (direct::suits(g) || narrow) && PaddedGrid::layout(g, lanes).is_some()
}

/// Output positions per sample from which the AVX2 tiles beat im2col and GEMM. Measured on a
/// Zen 3, batch 8, 3x3, ms grid / GEMM: 64x64 planes 0.35-0.54 of GEMM's time, 32x32 0.92-0.98;
/// but [8,64,16,16] -> 64 1.44 / 1.12 and [8,128,8,8] -> 128 1.47 / 1.23 (channels-last).
const AVX2_MIN_POSITIONS: usize = 1024;

/// `grad_weight = sum over samples and pixels of grad_output x input` ([`applies`] holds;
/// `grad_weight` contiguous and overwritten, `grad_output` dense channels-last, `input` any
/// strides).
pub(super) fn weight_gradient(
    g: &Geometry,
    grad_weight: &TensorMut,
    input: &TensorRef,
    grad_output: &TensorRef,
) {
    let Some(grid) = PaddedGrid::layout(g, PaddedGrid::lanes_for(g.c)) else {
        unreachable!("grid_weight::weight_gradient without its grid (applies)");
    };
    let (o, kk, p) = (g.o, g.kk(), g.op());
    let lanes_in = grid.lanes;
    let kp = grid.c16 * lanes_in * kk;
    let per_sample = (p * o + grid.sample_len()) * 4;
    let mut spc = (CHUNK_BYTES / per_sample).clamp(1, g.n);
    spc = spc.max(g.n.div_ceil((PARTIAL_FLOATS / (o * kp)).max(1)));
    let chunks = g.n.div_ceil(spc);
    let (otiles, ctiles) = (o.div_ceil(32), kp.div_ceil(W));
    let mut cols = vec![0usize; kp];
    for (k, col) in cols.iter_mut().enumerate() {
        let (cb, tap, c) = (k / (lanes_in * kk), k / lanes_in % kk, k % lanes_in);
        *col = (cb * grid.plane + grid.taps[tap]) * lanes_in + c;
    }
    let go = SendPtr::<f32>::of(grad_output.ptr);
    with_scratch2(
        g.n * grid.sample_len(),
        chunks * o * kp,
        |xs: &mut [f32], partial: &mut [f32]| {
            let xsp = SendPtr::new(xs.as_mut_ptr());
            let rows = grid.dims[0] * grid.dims[1];
            parallel_for(g.n * rows, 1, &|i0, i1| {
                for i in i0..i1 {
                    let (n, row) = (i / rows, i % rows);
                    // SAFETY: row `row` of sample n's copy, written by this task only.
                    unsafe {
                        copy_grid_row(
                            g,
                            &grid,
                            input,
                            n,
                            row,
                            xsp.at((n * grid.sample_len()) as isize),
                        )
                    };
                }
            });
            let pp = SendPtr::new(partial.as_mut_ptr());
            if turned_tiles(g, lanes_in) {
                let vtiles = (kp / 16).div_ceil(CV);
                let otiles = o / 8;
                parallel_units(chunks * otiles * vtiles, &|u0, u1| {
                    for u in u0..u1 {
                        let (chunk, rest) = (u / (otiles * vtiles), u % (otiles * vtiles));
                        let (o0, v0) = (rest / vtiles * 8, rest % vtiles * CV);
                        let n0 = chunk * spc;
                        let n1 = (n0 + spc).min(g.n);
                        // Column vector v (16 ks from 16 v) is channel block v / kk's tap
                        // v % kk; past the last, the last again (computed, not stored).
                        let last = kp / 16 - 1;
                        let vecs: [(usize, usize); CV] = std::array::from_fn(|i| {
                            let v = (v0 + i).min(last);
                            (v, (v / kk * grid.plane + grid.taps[v % kk]) * 16)
                        });
                        let dst = pp.at(((chunk * o + o0) * kp) as isize);
                        // SAFETY: the CPU has AVX-512 (turned_tiles); the copy holds samples
                        // n0..n1 and every column vector's pixels; the gradient is dense
                        // channels-last with 8 channels from o0 on; rows o0..o0 + 8 of the
                        // chunk's partial ([o][kp]) are this unit's to write at its vectors.
                        unsafe {
                            tile_turned(
                                g,
                                &grid,
                                xsp.get(),
                                &vecs,
                                v0,
                                go.get(),
                                o0,
                                n0,
                                n1,
                                dst,
                                kp,
                            )
                        };
                    }
                });
            } else {
                parallel_units(chunks * otiles * ctiles, &|u0, u1| {
                    let mut sums = [[0f32; 32]; W];
                    for u in u0..u1 {
                        let (chunk, rest) = (u / (otiles * ctiles), u % (otiles * ctiles));
                        let (ot, ct) = (rest / ctiles, rest % ctiles);
                        let o0 = ot * 32;
                        let lanes = (o - o0).min(32);
                        let tile_cols: [usize; W] =
                            std::array::from_fn(|j| cols[(ct * W + j).min(kp - 1)]);
                        let n0 = chunk * spc;
                        let n1 = (n0 + spc).min(g.n);
                        let tile: Tile = match (simd::level() >= 3, lanes > 16) {
                            (true, true) => tile::<2>,
                            (true, false) => tile::<1>,
                            (false, true) => tile_avx2::<2>,
                            (false, false) => tile_avx2::<1>,
                        };
                        // SAFETY: the CPU has AVX-512 or AVX2 (applies, the level); the copy holds samples n0..n1 and
                        // every column read; the gradient is dense channels-last, `lanes` channels
                        // from o0 on.
                        unsafe {
                            tile(
                                g,
                                &grid,
                                xsp.get(),
                                &tile_cols,
                                go.get(),
                                o0,
                                lanes,
                                n0,
                                n1,
                                &mut sums,
                            )
                        };
                        for (j, col) in sums.iter().enumerate() {
                            let k = ct * W + j;
                            if k >= kp {
                                break;
                            }
                            for (l, &v) in col.iter().enumerate().take(lanes) {
                                // SAFETY: element (o0 + l, k) of this chunk's partial, written by
                                // this unit only.
                                unsafe { *pp.at(((chunk * o + o0 + l) * kp + k) as isize) = v };
                            }
                        }
                    }
                });
            }
            // Partials added in chunk order, into the contiguous [o, c, taps] gradient.
            let (c, gw) = (g.c, SendPtr::<f32>::of(grad_weight.ptr));
            let partial = &*partial;
            parallel_for(o, 1, &|o0, o1| {
                for oi in o0..o1 {
                    for ci in 0..c {
                        for t in 0..kk {
                            let k = ((ci / lanes_in) * kk + t) * lanes_in + ci % lanes_in;
                            let mut v = partial[oi * kp + k];
                            for ch in 1..chunks {
                                v += partial[(ch * o + oi) * kp + k];
                            }
                            // SAFETY: element (oi, ci, t) of the contiguous gradient, written
                            // by this task only.
                            unsafe { *gw.at(((oi * c + ci) * kk + t) as isize) = v };
                        }
                    }
                }
            });
        },
    );
}

/// [`tile`] for one number of channel vectors.
type Tile = unsafe fn(
    &Geometry,
    &PaddedGrid,
    *const f32,
    &[usize; W],
    *const f32,
    usize,
    usize,
    usize,
    usize,
    &mut [[f32; 32]; W],
);

/// `sums[j][l] = sum over samples n0..n1 and output pixels q of
/// go[(n * p + q) * o + o0 + l] * xs[n * sample + cols[j] + L * grid(q)]` for `l < lanes`, in
/// order of n and q, where `grid(q)` is pixel q's grid index (rows read pixel by pixel) and `L`
/// the copy's channels per block.
///
/// # Safety
/// The CPU must support AVX-512F; `xs` must hold the copies of samples `n0..n1` (and every
/// column's pixels), `go` the dense channels-last gradient, `lanes <= 16 V`.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<const V: usize>(
    g: &Geometry,
    grid: &PaddedGrid,
    xs: *const f32,
    cols: &[usize; W],
    go: *const f32,
    o0: usize,
    lanes: usize,
    n0: usize,
    n1: usize,
    sums: &mut [[f32; 32]; W],
) {
    let [o_0, o1, o2] = g.osp;
    let [_, hp, wp] = grid.dims;
    let o = g.o;
    let masks: [__mmask16; V] = std::array::from_fn(|v| {
        let n = lanes.saturating_sub(16 * v).min(16);
        if n == 16 {
            !0
        } else {
            (1u16 << n) - 1
        }
    });
    let mut acc = [[_mm512_setzero_ps(); V]; W];
    for n in n0..n1 {
        let sample = xs.wrapping_add(n * grid.sample_len());
        for z in 0..o_0 {
            for y in 0..o1 {
                let xrow = sample.wrapping_add((z * hp + y) * wp * grid.lanes);
                let xr: [*const f32; W] = std::array::from_fn(|j| xrow.wrapping_add(cols[j]));
                let mut gr = go.wrapping_add((((n * o_0 + z) * o1 + y) * o2) * o + o0);
                for x in 0..o2 {
                    let mut gv = [_mm512_setzero_ps(); V];
                    for (v, gv) in gv.iter_mut().enumerate() {
                        // SAFETY: `lanes` channels from o0 of output pixel (n, z, y, x).
                        *gv = unsafe { _mm512_maskz_loadu_ps(masks[v], gr.add(16 * v)) };
                    }
                    for j in 0..W {
                        // SAFETY: column j's element at grid pixel (z, y, x) of sample n.
                        let xv = _mm512_set1_ps(unsafe { *xr[j].add(x * grid.lanes) });
                        for v in 0..V {
                            acc[j][v] = _mm512_fmadd_ps(gv[v], xv, acc[j][v]);
                        }
                    }
                    gr = gr.wrapping_add(o);
                }
            }
        }
    }
    for (col, row) in sums.iter_mut().zip(&acc) {
        for (v, a) in row.iter().enumerate() {
            // SAFETY: 16 floats of the column's 32.
            unsafe { _mm512_storeu_ps(col.as_mut_ptr().add(16 * v), *a) };
        }
    }
}

/// Column vectors (16 `k`s each) of [`tile_turned`]'s register tile.
const CV: usize = 3;

/// Whether [`weight_gradient`] runs [`tile_turned`]: AVX-512, 16-channel input blocks and
/// output channels in blocks of 8. [`tile`]'s 12 columns x 1 or 2 vectors of output channels
/// load 13 floats per 12 multiply-adds (16 channels) or 14 per 24; measured on an Intel Xeon
/// (AVX-512, 1 thread, channels-last 3x3), [`tile`] / turned: [32,32,32,32] -> 16 3.50 / 2.47
/// ms (CPU 2.05), -> 32 4.82 / 4.43 (CPU 3.97), [8,32,56,56] -> 48 5.87 / 4.84 (CPU 4.52),
/// [8,64,28,28] -> 128 7.57 / 6.52 (CPU 5.77), [8,128,14,14] -> 256 8.51 / 7.29 (CPU 6.13).
fn turned_tiles(g: &Geometry, lanes_in: usize) -> bool {
    simd::level() >= 3 && lanes_in == 16 && g.o % 8 == 0
}

/// [`tile`] turned around, for 8 of the output channels: the register tile is 8 channels x [`CV`]
/// vectors of 16 consecutive `k`s (a channel block's 16 channels at one tap: one vector of the
/// padded copy's pixel), each pixel 3 vector loads and 8 broadcasts of the gradient for 24
/// multiply-adds. `dst[l * ld + 16 v + i]` for `l < 8` and the tile's column vectors `v =
/// v0..` (`vecs[j] = (v, offset of its pixel run in the copy)`, a repeated last one not
/// stored) gets the sum over samples `n0..n1` and output pixels of `go[.. o0 + l] *` element
/// `16 v + i` of the column, in [`tile`]'s order: the same bits.
///
/// # Safety
/// The CPU must support AVX-512F; `xs` must hold the copies of samples `n0..n1` (and every
/// vector's pixels), `go` the dense channels-last gradient with 8 channels from `o0`, `dst`
/// 8 rows of `ld` floats with room for the vectors.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_turned(
    g: &Geometry,
    grid: &PaddedGrid,
    xs: *const f32,
    vecs: &[(usize, usize); CV],
    v0: usize,
    go: *const f32,
    o0: usize,
    n0: usize,
    n1: usize,
    dst: *mut f32,
    ld: usize,
) {
    let [o_0, o1, o2] = g.osp;
    let [_, hp, wp] = grid.dims;
    let o = g.o;
    let mut acc = [[_mm512_setzero_ps(); CV]; 8];
    for n in n0..n1 {
        let sample = xs.wrapping_add(n * grid.sample_len());
        for z in 0..o_0 {
            for y in 0..o1 {
                let xrow = sample.wrapping_add((z * hp + y) * wp * 16);
                let xr: [*const f32; CV] = std::array::from_fn(|j| xrow.wrapping_add(vecs[j].1));
                let mut gr = go.wrapping_add((((n * o_0 + z) * o1 + y) * o2) * o + o0);
                for x in 0..o2 {
                    let mut xv = [_mm512_setzero_ps(); CV];
                    for (j, v) in xv.iter_mut().enumerate() {
                        // SAFETY: vector j's 16 floats at grid pixel (z, y, x) of sample n.
                        *v = unsafe { _mm512_loadu_ps(xr[j].add(x * 16)) };
                    }
                    for (l, row) in acc.iter_mut().enumerate() {
                        // SAFETY: channel o0 + l of output pixel (n, z, y, x).
                        let gv = _mm512_set1_ps(unsafe { *gr.add(l) });
                        for j in 0..CV {
                            row[j] = _mm512_fmadd_ps(xv[j], gv, row[j]);
                        }
                    }
                    gr = gr.wrapping_add(o);
                }
            }
        }
    }
    for (l, row) in acc.iter().enumerate() {
        for (j, a) in row.iter().enumerate() {
            if vecs[j].0 != v0 + j {
                break;
            }
            // SAFETY: row l's 16 floats of vector v0 + j (the caller's contract).
            unsafe { _mm512_storeu_ps(dst.add(l * ld + 16 * (v0 + j)), *a) };
        }
    }
}

/// Columns of an AVX2 sub-tile: 6 columns x 16 channels in 12 of the 16 ymm registers, with
/// the gradient's 2 and a broadcast.
const W2: usize = 6;

/// [`tile`] on AVX2: the tile in sub-tiles of 16 channels x [`W2`] columns, each over all of
/// the pixels in the same order (the same sums, bit for bit).
///
/// # Safety
/// As [`tile`], with AVX2 and FMA instead of AVX-512F.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_avx2<const V: usize>(
    g: &Geometry,
    grid: &PaddedGrid,
    xs: *const f32,
    cols: &[usize; W],
    go: *const f32,
    o0: usize,
    lanes: usize,
    n0: usize,
    n1: usize,
    sums: &mut [[f32; 32]; W],
) {
    let [o_0, o1, o2] = g.osp;
    let [_, hp, wp] = grid.dims;
    let o = g.o;
    let index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for v in 0..V {
        let here = lanes.saturating_sub(16 * v).min(16);
        let full = here == 16;
        // Lane l of half h loads while 8h + l < here (all-zero masks load nothing).
        let masks = [0, 8].map(|h| _mm256_cmpgt_epi32(_mm256_set1_epi32(here as i32 - h), index));
        for j0 in (0..W).step_by(W2) {
            let mut acc = [[_mm256_setzero_ps(); 2]; W2];
            for n in n0..n1 {
                let sample = xs.wrapping_add(n * grid.sample_len());
                for z in 0..o_0 {
                    for y in 0..o1 {
                        let xrow = sample.wrapping_add((z * hp + y) * wp * grid.lanes);
                        let xr: [*const f32; W2] =
                            std::array::from_fn(|j| xrow.wrapping_add(cols[j0 + j]));
                        let mut gr =
                            go.wrapping_add((((n * o_0 + z) * o1 + y) * o2) * o + o0 + 16 * v);
                        for x in 0..o2 {
                            // SAFETY: `here` channels from o0 + 16v of output pixel (n, z, y,
                            // x).
                            let gv = unsafe {
                                if full {
                                    [_mm256_loadu_ps(gr), _mm256_loadu_ps(gr.add(8))]
                                } else {
                                    [
                                        _mm256_maskload_ps(gr, masks[0]),
                                        _mm256_maskload_ps(gr.add(8), masks[1]),
                                    ]
                                }
                            };
                            for (j, row) in acc.iter_mut().enumerate() {
                                // SAFETY: column j0 + j's element at grid pixel (z, y, x).
                                let xv =
                                    _mm256_broadcast_ss(unsafe { &*xr[j].add(x * grid.lanes) });
                                row[0] = _mm256_fmadd_ps(gv[0], xv, row[0]);
                                row[1] = _mm256_fmadd_ps(gv[1], xv, row[1]);
                            }
                            gr = gr.wrapping_add(o);
                        }
                    }
                }
            }
            for (j, row) in acc.iter().enumerate() {
                // SAFETY: 16 floats of column j0 + j's 32, from 16v.
                unsafe {
                    let p = sums[j0 + j].as_mut_ptr().add(16 * v);
                    _mm256_storeu_ps(p, row[0]);
                    _mm256_storeu_ps(p.add(8), row[1]);
                }
            }
        }
    }
}
