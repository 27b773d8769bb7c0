//! The float32 weight gradient from a channels-last output gradient, as GEMMs over a
//! channels-last column matrix: `part[o, k] += go[q, o]^T @ cols[q, k]` over the output
//! positions `q` (flattened over the samples), `k = tap * c + channel` (tap-major: a tap's
//! channels are one run of a channels-last input pixel), then the parts are summed and
//! reordered into a contiguous `[o, c, taps]` gradient (a channels-last one takes them as they
//! are).
//!
//! The positions are cut into at most [`BLOCKS`] blocks, one task each: a task builds its
//! block's column matrix in pieces that stay in its core's cache and multiplies each piece
//! as soon as it is built, into the block's part. Both operands are read in the layout `gemm`
//! packs fastest (the reduction dim strided, the other contiguous), so nothing is transposed;
//! the NCHW path it replaces for channels-last gradients copied the gradient to NCHW and ran
//! one GEMM per sample. The blocks and pieces are fixed by the shapes, the parts summed in
//! order, and `gemm` splits a product over its output, not its reduction: the bits do not
//! depend on the thread count.

use super::Geometry;
use crate::kernels::core::gemm::{gemm_raw, Mat};
use crate::kernels::core::parallel::{parallel_for, parallel_units, SendPtr};
use crate::kernels::core::scratch::with_scratch;
use crate::tensor::{TensorMut, TensorRef};

/// Blocks of positions at most (enough for 16 threads).
const BLOCKS: usize = 16;

/// Positions per block at least.
const MIN_BLOCK: usize = 256;

/// Floats of the blocks' parts at most (16 MB): fewer blocks for big weights.
const PARTS_MAX: usize = 1 << 22;

/// Floats of one piece of a block's column matrix (256 KB: it stays in L2 for its GEMM).
const PIECE: usize = 1 << 16;

/// Whether [`weight_gradient`] takes this weight gradient: one group, not depthwise, a dense
/// channels-last output gradient (the caller checks that and the dtype).
pub(super) fn applies(g: &Geometry) -> bool {
    g.groups == 1 && g.n > 0 && g.op() > 0
}

/// `grad_weight = sum over samples and positions of grad_output x input patches` (overwritten;
/// `grad_weight` dense channels-last if `channels_last` (the parts' own order, copied whole),
/// else contiguous; `grad_output` dense channels-last, `input` any strides).
pub(super) fn weight_gradient(
    g: &Geometry,
    grad_weight: &TensorMut,
    input: &TensorRef,
    grad_output: &TensorRef,
    channels_last: bool,
) {
    let (o, c, kk, p) = (g.o, g.c, g.kk(), g.op());
    let (k, total) = (c * kk, g.n * p);
    let blocks = BLOCKS
        .min(total.div_ceil(MIN_BLOCK))
        .min(PARTS_MAX / (o * k))
        .max(1);
    let per_block = total.div_ceil(blocks);
    let piece = (PIECE / k).max(16);
    // Fewer blocks than threads: each block's GEMMs go parallel too (over their output).
    let parallel = blocks < crate::runtime::pool::num_threads();
    let go = SendPtr::<f32>::of(grad_output.ptr);
    with_scratch(blocks * o * k, |parts: &mut [f32]| {
        let partp = SendPtr::new(parts.as_mut_ptr());
        parallel_units(blocks, &|b0, b1| {
            with_scratch(piece.min(per_block) * k, |cols: &mut [f32]| {
                for b in b0..b1 {
                    // SAFETY: block b's part, written by this task only.
                    let part = unsafe { partp.slice_mut(b * o * k, o * k) };
                    let (q0, q1) = (b * per_block, ((b + 1) * per_block).min(total));
                    for (i, s) in (q0..q1).step_by(piece).enumerate() {
                        let e = (s + piece).min(q1);
                        let [_, o1, o2] = g.osp;
                        let (n, r) = (s / p, s % p);
                        let mut at = (n, [r / (o1 * o2), r / o2 % o1, r % o2]);
                        for row in cols.chunks_exact_mut(k).take(e - s) {
                            // SAFETY: the input's strides describe it.
                            unsafe { patch(g, input, at.0, at.1, row) };
                            next_position(g, &mut at);
                        }
                        let lhs = Mat {
                            // Rows s..e of the [n * p, o] gradient (dense channels-last: row q
                            // at q * o), transposed.
                            ptr: go.at((s * o) as isize) as *const f32,
                            rs: 1,
                            cs: o as isize,
                        };
                        let rhs = Mat {
                            ptr: cols.as_ptr(),
                            rs: k as isize,
                            cs: 1,
                        };
                        // SAFETY: part is an owned [o, k] matrix; lhs rows of the gradient,
                        // rhs the piece's column matrix.
                        unsafe {
                            gemm_raw(
                                o,
                                k,
                                e - s,
                                part.as_mut_ptr(),
                                k as isize,
                                1,
                                i > 0,
                                lhs,
                                rhs,
                                1.0,
                                parallel,
                            )
                        };
                    }
                }
            });
        });
        let parts = &*parts;
        // SAFETY: the dense [o, c, taps] or [o, taps, c] gradient, written only here.
        let gw = SendPtr::<f32>::of(grad_weight.ptr);
        parallel_for(o, 1, &|o0, o1| {
            with_scratch(k, |sum: &mut [f32]| {
                for oi in o0..o1 {
                    sum.copy_from_slice(&parts[oi * k..][..k]);
                    for b in 1..blocks {
                        let part = &parts[(b * o + oi) * k..][..k];
                        sum.iter_mut().zip(part).for_each(|(s, &v)| *s += v);
                    }
                    // SAFETY: row oi of the contiguous gradient, written by this task only.
                    let dst = unsafe { gw.slice_mut(oi * k, k) };
                    if channels_last {
                        dst.copy_from_slice(sum);
                        continue;
                    }
                    for (tap, run) in sum.chunks_exact(c).enumerate() {
                        for (ci, &v) in run.iter().enumerate() {
                            dst[ci * kk + tap] = v;
                        }
                    }
                }
            });
        });
    });
}

/// The output position after `(sample, [z, y, x])`.
#[inline]
fn next_position(g: &Geometry, (n, at): &mut (usize, [usize; 3])) {
    for i in (0..3).rev() {
        at[i] += 1;
        if at[i] < g.osp[i] {
            return;
        }
        at[i] = 0;
    }
    *n += 1;
}

/// Writes output position `at` of sample `n`'s patch into `row` (`kk * c` floats, tap-major):
/// each tap's input channels, zeros where the tap reads padding.
///
/// # Safety
/// `input`'s pointer and strides must describe a live tensor of `g`'s input shape.
unsafe fn patch(g: &Geometry, input: &TensorRef, n: usize, at: [usize; 3], row: &mut [f32]) {
    let xs = &input.strides;
    let base = (input.ptr as *const f32).wrapping_offset(n as isize * xs[0]);
    let ([kd, kh, kw], c) = (g.ksp, g.c);
    let coord = |i: usize, t: usize| {
        at[i] as isize * g.stride[i] - g.padding[i] + t as isize * g.dilation[i]
    };
    let inside = |i: usize, v: isize| (0..g.isp[i] as isize).contains(&v);
    // The taps along W that read the input: an interval.
    let e0 = (0..kw).find(|&e| inside(2, coord(2, e))).unwrap_or(kw);
    let e1 = (e0..kw).find(|&e| !inside(2, coord(2, e))).unwrap_or(kw);
    // A kernel row's taps are one run of the input when its pixels are dense channels.
    let run = xs[1] == 1 && xs[4] == c as isize && g.dilation[2] == 1;
    let rows_inside = inside(0, coord(0, 0))
        && inside(0, coord(0, kd - 1))
        && inside(1, coord(1, 0))
        && inside(1, coord(1, kh - 1));
    if run && rows_inside && e0 == 0 && e1 == kw {
        // The whole window reads the input (most positions): a run per kernel row.
        let len = kw * c;
        let first =
            base.wrapping_offset(coord(0, 0) * xs[2] + coord(1, 0) * xs[3] + coord(2, 0) * xs[4]);
        for (i, line) in row.chunks_exact_mut(len).enumerate() {
            let (a, b) = ((i / kh) as isize, (i % kh) as isize);
            let src = first.wrapping_offset(a * g.dilation[0] * xs[2] + b * g.dilation[1] * xs[3]);
            // SAFETY: the kernel row's pixels, one dense run inside the input.
            copy_run(line, unsafe { std::slice::from_raw_parts(src, len) });
        }
        return;
    }
    for a in 0..kd {
        let zi = coord(0, a);
        for b in 0..kh {
            let yi = coord(1, b);
            let line = &mut row[(a * kh + b) * kw * c..][..kw * c];
            if !inside(0, zi) || !inside(1, yi) || e0 == e1 {
                line.fill(0.0);
                continue;
            }
            line[..e0 * c].fill(0.0);
            line[e1 * c..].fill(0.0);
            let first = base.wrapping_offset(zi * xs[2] + yi * xs[3] + coord(2, e0) * xs[4]);
            let taps = &mut line[e0 * c..e1 * c];
            if run {
                // SAFETY: the taps' pixels, one dense run (the caller's contract).
                copy_run(taps, unsafe {
                    std::slice::from_raw_parts(first, taps.len())
                });
                continue;
            }
            for (e, px) in taps.chunks_exact_mut(c).enumerate() {
                let src = first.wrapping_offset(e as isize * g.dilation[2] * xs[4]);
                for (ci, v) in px.iter_mut().enumerate() {
                    // SAFETY: channel ci of an input pixel (the caller's contract).
                    *v = unsafe { *src.offset(ci as isize * xs[1]) };
                }
            }
        }
    }
}

/// `dst.copy_from_slice(src)` for the short runs of a few channels (an RGB stem's kernel row is
/// 9 floats): in 4-float pieces rather than a `memmove` call per run (which took a third of
/// the time of the [16,3,32,32] 3x3 weight gradient's column matrix).
#[inline]
fn copy_run(dst: &mut [f32], src: &[f32]) {
    if dst.len() > 32 {
        dst.copy_from_slice(src);
        return;
    }
    let mut d = dst.chunks_exact_mut(4);
    let mut s = src.chunks_exact(4);
    for (d, s) in (&mut d).zip(&mut s) {
        let v: [f32; 4] = s.try_into().unwrap();
        d.copy_from_slice(&v);
    }
    for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = s;
    }
}
