//! Depthwise convolutions (`groups == C > 1`, each output channel reading one input channel:
//! MobileNet's, EfficientNet's and ConvNeXt's 3x3 to 7x7 convolutions), forward and both
//! gradients. The GEMM formulation gives them one-row GEMMs per group, mostly call and packing
//! overhead; here each (sample, channel) plane is a direct loop over the taps whose innermost
//! loop runs along a row of output positions (contiguous for stride 1, where it vectorizes).
//! Work is split over planes (over channels for the weight gradient), so every element is
//! summed in one fixed order whatever the thread count.
//!
//! Padding: the GEMM paths multiply every tap by the zero padding, so a non-finite weight over
//! padding (for the weight gradient: a non-finite output gradient) gives nan there, as the
//! CPU's float64 and `slow_conv2d` paths do. The direct loops skip padded taps, which is the
//! same number for finite values, and then write nan where a non-finite factor meets padding.

pub(super) mod channels_last;
mod lanes;

use super::{valid_range, Geometry};
use crate::kernels::core::float::Math;
use crate::kernels::core::gemm::GemmElem;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::kernels::core::simd;

/// The element types of the direct loops (f32, f64).
pub(super) trait DwFloat: GemmElem + Math {}
impl<T: GemmElem + Math> DwFloat for T {}

/// Whether the direct loops take this convolution.
pub(super) fn applies(g: &Geometry) -> bool {
    g.groups > 1 && g.cg() == 1
}

/// Whether [`forward`] runs this convolution on its channels-innermost lanes (short or strided
/// output rows) rather than the plane loops.
pub(super) fn forward_takes_lanes(g: &Geometry) -> bool {
    lanes::applies(g)
}

/// Planes per parallel chunk: about 32k multiply-adds each.
fn grain(per_plane: usize) -> usize {
    (32768 / per_plane.max(1)).max(1)
}

/// Per spatial dim and tap, the half-open range of output positions where the tap reads a
/// real input element (not padding); computed once per call.
struct Taps {
    ranges: [Vec<(usize, usize)>; 3],
}

impl Taps {
    fn new(g: &Geometry) -> Self {
        let dim = |i: usize| -> Vec<(usize, usize)> {
            (0..g.ksp[i])
                .map(|k| {
                    let off = k as isize * g.dilation[i] - g.padding[i];
                    valid_range(g.osp[i], g.stride[i], off, g.isp[i])
                })
                .collect()
        };
        Taps {
            ranges: [dim(0), dim(1), dim(2)],
        }
    }
}

/// The taps of a forward-oriented loop nest: calls `f(out_row, in_row_offset, tap, lo, hi,
/// in_col)` for every output row (d, h), tap (a, b) reading a real input row, and tap column e,
/// with the valid output columns `lo..hi` and the input column of `lo`.
#[inline(always)]
fn for_each_tap(
    g: &Geometry,
    taps: &Taps,
    xs: [isize; 3],
    mut f: impl FnMut(usize, isize, usize, usize, usize, isize),
) {
    let [od_n, oh_n, ow_n] = g.osp;
    let [_, kh, kw] = g.ksp;
    let [rd, rh, rw] = &taps.ranges;
    for od in 0..od_n {
        for (a, &(dlo, dhi)) in rd.iter().enumerate() {
            if od < dlo || od >= dhi {
                continue;
            }
            let id = od as isize * g.stride[0] + a as isize * g.dilation[0] - g.padding[0];
            for oh in 0..oh_n {
                let out_row = (od * oh_n + oh) * ow_n;
                for (b, &(hlo, hhi)) in rh.iter().enumerate() {
                    if oh < hlo || oh >= hhi {
                        continue;
                    }
                    let ih = oh as isize * g.stride[1] + b as isize * g.dilation[1] - g.padding[1];
                    for (e, &(lo, hi)) in rw.iter().enumerate() {
                        if lo < hi {
                            let iw = lo as isize * g.stride[2] + e as isize * g.dilation[2]
                                - g.padding[2];
                            f(
                                out_row,
                                id * xs[0] + ih * xs[1],
                                (a * kh + b) * kw + e,
                                lo,
                                hi,
                                iw,
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Sets to nan the positions of the `[od, oh, ow]` plane `dst` where tap `t` (of the plane's
/// taps) reads padding, for every tap with `nonfinite(t)`.
fn nan_over_padding<T: DwFloat>(
    g: &Geometry,
    taps: &Taps,
    dst: &mut [T],
    nonfinite: impl Fn(usize) -> bool,
) {
    let [kd, kh, kw] = g.ksp;
    let [od_n, oh_n, ow_n] = g.osp;
    let [rd, rh, rw] = &taps.ranges;
    for t in (0..kd * kh * kw).filter(|&t| nonfinite(t)) {
        let ((dlo, dhi), (hlo, hhi), (wlo, whi)) = (rd[t / (kh * kw)], rh[t / kw % kh], rw[t % kw]);
        for od in 0..od_n {
            for oh in 0..oh_n {
                let row = &mut dst[(od * oh_n + oh) * ow_n..][..ow_n];
                let inside = (dlo..dhi).contains(&od) && (hlo..hhi).contains(&oh);
                for (ow, v) in row.iter_mut().enumerate() {
                    if !inside || !(wlo..whi).contains(&ow) {
                        *v = T::nan();
                    }
                }
            }
        }
    }
}

/// `dst[i] += a * x[i * stride]`.
///
/// # Safety
/// `x` is readable at `i * stride` for `i < dst.len()`.
#[inline(always)]
unsafe fn axpy<T: DwFloat>(dst: &mut [T], a: T, x: *const T, stride: isize) {
    if stride == 1 {
        // SAFETY: the caller's contract, contiguous.
        let x = unsafe { std::slice::from_raw_parts(x, dst.len()) };
        for (d, &v) in dst.iter_mut().zip(x) {
            *d = *d + a * v;
        }
    } else {
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: the caller's contract.
            *d = *d + a * unsafe { *x.offset(i as isize * stride) };
        }
    }
}

crate::unsafe_multiversion!(unsafe fn forward_plane<T: DwFloat>(g: &Geometry, tp: &Taps, dst: &mut [T], x: *const T, xs: [isize; 3], taps: &[T], bias: T) => forward_plane_body);

/// One output plane: `dst = bias + sum over taps of taps[t] * x[shifted]`.
///
/// # Safety
/// `x` is one channel of one sample of the input, with element strides `xs` for D, H, W.
#[inline(always)]
unsafe fn forward_plane_body<T: DwFloat>(
    g: &Geometry,
    tp: &Taps,
    dst: &mut [T],
    x: *const T,
    xs: [isize; 3],
    taps: &[T],
    bias: T,
) {
    dst.fill(bias);
    let sw = g.stride[2] * xs[2];
    for_each_tap(g, tp, xs, |out_row, in_row, t, lo, hi, iw| {
        // SAFETY: output columns lo..hi read input columns iw, iw + stride, ... inside the row.
        unsafe {
            axpy(
                &mut dst[out_row + lo..out_row + hi],
                taps[t],
                x.wrapping_offset(in_row + iw * xs[2]),
                sw,
            )
        };
    });
}

/// `out[n, o] = bias[o] + depthwise(x[n, o / og], w[o])`; `out` and `w` contiguous.
pub(super) fn forward<T: DwFloat>(
    g: &Geometry,
    out: SendPtr<T>,
    x: SendPtr<T>,
    xs: &[isize],
    w: &[T],
    bias: Option<&[T]>,
) {
    if lanes::applies(g) {
        return lanes::forward(g, out, x, xs, w, bias);
    }
    let (og, kk, p) = (g.og(), g.kk(), g.op());
    let tp = Taps::new(g);
    parallel_for(g.n * g.o, grain(p * kk), &|s, e| {
        for plane in s..e {
            let (ni, oc) = (plane / g.o, plane % g.o);
            // SAFETY: plane `plane` of the contiguous output, written only by this call.
            let dst = unsafe { std::slice::from_raw_parts_mut(out.at((plane * p) as isize), p) };
            let src = x.at(ni as isize * xs[0] + (oc / og) as isize * xs[1]) as *const T;
            let taps = &w[oc * kk..(oc + 1) * kk];
            let b = bias.map_or(T::ZERO, |b| b[oc]);
            // SAFETY: src is channel oc / og of sample ni of the input, strides xs[2..].
            unsafe { forward_plane(g, &tp, dst, src, [xs[2], xs[3], xs[4]], taps, b) };
            if taps.iter().any(|v| !v.is_finite()) {
                nan_over_padding(g, &tp, dst, |t| !taps[t].is_finite());
            }
        }
    });
}

crate::unsafe_multiversion!(unsafe fn input_plane<T: DwFloat>(g: &Geometry, tp: &Taps, dst: &mut [T], go: &[T], taps: &[T]) => input_plane_body);

/// Adds one output channel's share of the input gradient: `dst[shifted] += taps[t] * go`.
///
/// # Safety
/// None beyond the types (`unsafe` for the multiversioned features).
#[inline(always)]
unsafe fn input_plane_body<T: DwFloat>(
    g: &Geometry,
    tp: &Taps,
    dst: &mut [T],
    go: &[T],
    taps: &[T],
) {
    let [_, ih_n, iw_n] = g.isp;
    let xs = [(ih_n * iw_n) as isize, iw_n as isize, 1];
    let sw = g.stride[2] as usize;
    for_each_tap(g, tp, xs, |out_row, in_row, t, lo, hi, iw| {
        let a = taps[t];
        let src = &go[out_row + lo..out_row + hi];
        let start = (in_row + iw) as usize;
        if sw == 1 {
            for (d, &v) in dst[start..start + src.len()].iter_mut().zip(src) {
                *d = *d + a * v;
            }
        } else {
            for (i, &v) in src.iter().enumerate() {
                let d = &mut dst[start + i * sw];
                *d = *d + a * v;
            }
        }
    });
}

/// `grad_input[n, c] = bias[c] + sum over the og output channels o of c of
/// depthwise_transpose(grad_output[n, o], w[o])`; every operand contiguous.
pub(super) fn backward_input<T: DwFloat>(
    g: &Geometry,
    gi: SendPtr<T>,
    go: SendPtr<T>,
    w: &[T],
    bias: Option<&[T]>,
) {
    if lanes::applies(g) {
        return lanes::backward_input(g, gi, go, w, bias);
    }
    let (og, kk, p, ip) = (g.og(), g.kk(), g.op(), g.ip());
    let tp = Taps::new(g);
    parallel_for(g.n * g.c, grain(og * p * kk), &|s, e| {
        for plane in s..e {
            let (ni, ic) = (plane / g.c, plane % g.c);
            // SAFETY: plane `plane` of the contiguous grad_input, written only by this call.
            let dst = unsafe { std::slice::from_raw_parts_mut(gi.at((plane * ip) as isize), ip) };
            dst.fill(T::ZERO);
            for oc in ic * og..(ic + 1) * og {
                // SAFETY: plane (ni, oc) of the contiguous grad_output.
                let src =
                    unsafe { std::slice::from_raw_parts(go.at(((ni * g.o + oc) * p) as isize), p) };
                // SAFETY: slices only.
                unsafe { input_plane(g, &tp, dst, src, &w[oc * kk..(oc + 1) * kk]) };
            }
            if let Some(b) = bias {
                dst.iter_mut().for_each(|v| *v = *v + b[ic]);
            }
        }
    });
}

crate::unsafe_multiversion!(unsafe fn weight_plane<T: DwFloat>(g: &Geometry, tp: &Taps, acc: &mut [T], go: &[T], x: *const T, xs: [isize; 3], row: &mut Vec<T>) => weight_plane_body);

/// Adds one (sample, channel) plane's share of the weight gradient:
/// `acc[t] += sum over positions of go * x[shifted]`.
///
/// # Safety
/// `x` is one channel of one sample of the input, with element strides `xs` for D, H, W.
#[inline(always)]
unsafe fn weight_plane_body<T: DwFloat>(
    g: &Geometry,
    tp: &Taps,
    acc: &mut [T],
    go: &[T],
    x: *const T,
    xs: [isize; 3],
    row: &mut Vec<T>,
) {
    let sw = g.stride[2] * xs[2];
    for_each_tap(g, tp, xs, |out_row, in_row, t, lo, hi, iw| {
        let src = x.wrapping_offset(in_row + iw * xs[2]);
        let grads = &go[out_row + lo..out_row + hi];
        let xs_row: &[T] = if sw == 1 {
            // SAFETY: input columns iw.. of this row, inside it.
            unsafe { std::slice::from_raw_parts(src, grads.len()) }
        } else {
            row.clear();
            // SAFETY: as above, every sw-th element.
            row.extend((0..grads.len()).map(|i| unsafe { *src.offset(i as isize * sw) }));
            row
        };
        acc[t] = acc[t] + simd::sum_zip(grads, xs_row, |a, b| a * b);
    });
}

/// `grad_weight[o] = sum over samples of the correlation of grad_output[n, o] with
/// x[n, o / og]` (overwritten); grad_weight and grad_output contiguous.
pub(super) fn backward_weight<T: DwFloat>(
    g: &Geometry,
    gw: &mut [T],
    x: SendPtr<T>,
    xs: &[isize],
    go: SendPtr<T>,
) {
    if lanes::applies(g) {
        return lanes::backward_weight(g, gw, x, xs, go);
    }
    let (og, kk, p) = (g.og(), g.kk(), g.op());
    let gwa = SendPtr::of(gw.as_mut_ptr());
    let tp = Taps::new(g);
    parallel_for(g.o, grain(g.n * p * kk), &|s, e| {
        let mut row = Vec::new();
        for oc in s..e {
            // SAFETY: channel oc's taps of the contiguous grad_weight, written only here.
            let acc = unsafe { std::slice::from_raw_parts_mut(gwa.at((oc * kk) as isize), kk) };
            acc.fill(T::ZERO);
            let mut nonfinite_grad = false;
            for ni in 0..g.n {
                // SAFETY: plane (ni, oc) of the contiguous grad_output.
                let grads =
                    unsafe { std::slice::from_raw_parts(go.at(((ni * g.o + oc) * p) as isize), p) };
                let src = x.at(ni as isize * xs[0] + (oc / og) as isize * xs[1]) as *const T;
                // SAFETY: src is channel oc / og of sample ni of the input, strides xs[2..].
                unsafe { weight_plane(g, &tp, acc, grads, src, [xs[2], xs[3], xs[4]], &mut row) };
                nonfinite_grad |= grads.iter().any(|v| !v.is_finite());
            }
            if nonfinite_grad {
                nan_taps_of_nonfinite_grads(g, &tp, acc, go, oc);
            }
        }
    });
}

/// The GEMM paths' `grad * 0` over padding: tap `t` becomes nan when a non-finite output
/// gradient sits at a position where `t` reads padding.
fn nan_taps_of_nonfinite_grads<T: DwFloat>(
    g: &Geometry,
    tp: &Taps,
    acc: &mut [T],
    go: SendPtr<T>,
    oc: usize,
) {
    let p = g.op();
    let mut pad = vec![T::ZERO; p];
    for (t, tap) in acc.iter_mut().enumerate() {
        pad.fill(T::ZERO);
        // pad marks (as nan) the positions where tap t reads padding.
        nan_over_padding(g, tp, &mut pad, |u| u == t);
        for ni in 0..g.n {
            // SAFETY: plane (ni, oc) of the contiguous grad_output.
            let grads =
                unsafe { std::slice::from_raw_parts(go.at(((ni * g.o + oc) * p) as isize), p) };
            if grads
                .iter()
                .zip(&pad)
                .any(|(v, m)| m.is_nan() && !v.is_finite())
            {
                *tap = T::nan();
            }
        }
    }
}
