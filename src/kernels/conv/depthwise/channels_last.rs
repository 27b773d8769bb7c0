//! Depthwise convolutions over channels-last tensors (ConvNeXt's 7x7 blocks, whose input is a
//! permuted view, and any depthwise layer after `.to(memory_format=torch.channels_last)`). The
//! plane loops of the parent module read one channel at a time, which here is a walk at the
//! stride of the channel count (and the output went through NCHW copies): ConvNeXt-T's
//! [1,192,28,28] 7x7 forward took 5.5x the CPU's time. Here the channels are the vector: a
//! block of [`LANES`] channels of [`PIX`] output pixels stays in registers across all the taps,
//! each tap one weight vector (the taps stored tap-major) and one input vector per pixel.
//!
//! Summation order: an output element adds the bias, then its taps in (depth, row, column)
//! order, the parent's plane loops' order, so both layouts give the same bits on any thread
//! count.

use super::{grain, DwFloat, Taps};
use crate::kernels::conv::Geometry;
use crate::kernels::core::parallel::{parallel_for, SendPtr};

/// Channels per register block.
const LANES: usize = 16;

/// Output pixels per register block.
const PIX: usize = 4;

/// Whether [`forward`] takes this depthwise convolution: one output channel per input channel
/// and the input's channels dense (element strides `xs` for N, C, D, H, W).
pub(in crate::kernels::conv) fn applies(g: &Geometry, xs: &[isize]) -> bool {
    g.og() == 1 && g.c > 1 && xs[1] == 1
}

/// `out[n, d, h, w, c] = bias[c] + sum over taps of w[c, tap] * x[n, c, shifted]` into a dense
/// channels-last `out` ([N, D, H, W, C] in memory); `w` contiguous `[c, 1, kd, kh, kw]`, `x`
/// with element strides `xs` and dense channels ([`applies`]). Taps that read padding are
/// skipped, so the caller keeps non-finite weights (nan over padding on the CPU) elsewhere.
pub(in crate::kernels::conv) fn forward<T: DwFloat>(
    g: &Geometry,
    out: SendPtr<T>,
    x: SendPtr<T>,
    xs: &[isize],
    w: &[T],
    bias: Option<&[T]>,
) {
    let (c, kk) = (g.c, g.kk());
    let mut wt = vec![T::ZERO; kk * c];
    for (ch, taps) in w.chunks_exact(kk).enumerate() {
        for (t, &v) in taps.iter().enumerate() {
            wt[t * c + ch] = v;
        }
    }
    let bias = bias.map_or_else(|| vec![T::ZERO; c], <[T]>::to_vec);
    let tp = Taps::new(g);
    let [od_n, oh_n, ow_n] = g.osp;
    let xs5 = [xs[0], xs[1], xs[2], xs[3], xs[4]];
    parallel_for(g.n * od_n * oh_n, grain(ow_n * c * kk), &|r0, r1| {
        for r in r0..r1 {
            // SAFETY: output row r (of N, D, H) of the dense channels-last output, written only
            // here; the input is read inside its extents through its strides.
            unsafe {
                row::<T>(
                    g,
                    &tp,
                    &wt,
                    &bias,
                    out.at((r * ow_n * c) as isize),
                    x.get(),
                    xs5,
                    r,
                )
            };
        }
    });
}

crate::unsafe_multiversion!(#[allow(clippy::too_many_arguments)] unsafe fn row<T: DwFloat>(g: &Geometry, tp: &Taps, wt: &[T], bias: &[T], dst: *mut T, x: *const T, xs: [isize; 5], r: usize) => row_body);

/// Output row `r` (flat over N, D, H) of [`forward`]: `ow * c` elements at `dst`.
///
/// # Safety
/// `dst` holds the row; `x` is the input (strides `xs`, channels dense).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn row_body<T: DwFloat>(
    g: &Geometry,
    tp: &Taps,
    wt: &[T],
    bias: &[T],
    dst: *mut T,
    x: *const T,
    xs: [isize; 5],
    r: usize,
) {
    let c = g.c;
    let [od_n, oh_n, ow_n] = g.osp;
    let [_, kh, kw] = g.ksp;
    let (ni, od, oh) = (r / (od_n * oh_n), r / oh_n % od_n, r % oh_n);
    let [rd, rh, rw] = &tp.ranges;
    // The (tap row, input row address) pairs that read real input rows, in tap order.
    let mut rows: Vec<(usize, *const T)> = Vec::with_capacity(g.ksp[0] * kh);
    for (a, &(dlo, dhi)) in rd.iter().enumerate() {
        if od < dlo || od >= dhi {
            continue;
        }
        let id = od as isize * g.stride[0] + a as isize * g.dilation[0] - g.padding[0];
        for (b, &(hlo, hhi)) in rh.iter().enumerate() {
            if oh >= hlo && oh < hhi {
                let ih = oh as isize * g.stride[1] + b as isize * g.dilation[1] - g.padding[1];
                let off = ni as isize * xs[0] + id * xs[2] + ih * xs[3];
                rows.push(((a * kh + b) * kw, x.wrapping_offset(off)));
            }
        }
    }
    let iw =
        |ow: usize, e: usize| ow as isize * g.stride[2] + e as isize * g.dilation[2] - g.padding[2];
    let step = g.stride[2] * xs[4];
    for cb in (0..c).step_by(LANES) {
        let n = LANES.min(c - cb);
        for ow in (0..ow_n).step_by(PIX) {
            let np = PIX.min(ow_n - ow);
            let mut acc = [[T::ZERO; LANES]; PIX];
            for a in acc.iter_mut() {
                a[..n].copy_from_slice(&bias[cb..cb + n]);
            }
            for &(t0, xrow) in &rows {
                for (e, &(lo, hi)) in rw.iter().enumerate() {
                    let w = wt.as_ptr().wrapping_add((t0 + e) * c + cb);
                    let x0 = xrow.wrapping_offset(iw(ow, e) * xs[4] + cb as isize);
                    // Pixel p reads a real input column (the tap's valid range); a constant
                    // trip count, so the accumulators stay in registers.
                    let valid = |p: usize| p < np && (lo..hi).contains(&(ow + p));
                    if n == LANES {
                        // SAFETY: LANES tap-major weights of channels cb.. (n == LANES).
                        let wv = unsafe { std::ptr::read_unaligned(w as *const [T; LANES]) };
                        // Inside the plane (every pixel of the block real): no tests.
                        let inside = np == PIX && ow >= lo && ow + PIX <= hi;
                        for (p, a) in acc.iter_mut().enumerate() {
                            if inside || valid(p) {
                                // SAFETY: channels cb..cb + LANES of a real input pixel.
                                let xv = unsafe {
                                    std::ptr::read_unaligned(
                                        x0.wrapping_offset(p as isize * step) as *const [T; LANES]
                                    )
                                };
                                for l in 0..LANES {
                                    a[l] = a[l] + wv[l] * xv[l];
                                }
                            }
                        }
                    } else {
                        for (p, a) in acc.iter_mut().enumerate() {
                            if valid(p) {
                                for (l, v) in a.iter_mut().enumerate().take(n) {
                                    // SAFETY: weight cb + l of the tap, channel cb + l of a
                                    // real input pixel.
                                    *v = *v
                                        + unsafe {
                                            *w.add(l)
                                                * *x0
                                                    .wrapping_offset(p as isize * step + l as isize)
                                        };
                                }
                            }
                        }
                    }
                }
            }
            for (p, a) in acc.iter().enumerate().take(np) {
                // SAFETY: pixel ow + p of the row, channels cb..cb + n.
                unsafe {
                    std::slice::from_raw_parts_mut(dst.add((ow + p) * c + cb), n)
                        .copy_from_slice(&a[..n])
                };
            }
        }
    }
}
