//! Depthwise convolutions of short output rows (MobileNet's last stages: 8x8, 4x4 and 2x2
//! planes under 3x3 and 5x5 kernels), computed with the channels innermost. The plane loops of
//! the parent module run along a row of output positions, so a 4-wide row costs a loop's
//! overhead for 4 multiply-adds: mobilenet_v3_small's [8, 240, 4, 4] 5x5 gradients took 2.6x the
//! CPU's time that way. Here a block of [`BLOCK`] channels is turned position-major (a small
//! copy), and every (output position, input position, tap) pair of the convolution becomes one
//! vector multiply-add across the block's channels.
//!
//! Summation order: an output (or input-gradient) element sums its pairs in the fixed order of
//! [`pairs`]; a weight-gradient element sums over samples, then pairs, in one task per channel
//! block: no result depends on the thread count.

use super::{grain, nan_over_padding, nan_taps_of_nonfinite_grads, DwFloat, Taps};
use crate::kernels::conv::Geometry;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::kernels::core::scratch::with_scratch2;
use crate::kernels::core::transpose::transpose_into;

/// Channels per block: the length of the vector loops (two AVX2 float32 vectors) and the unit
/// of the weight gradient's split over threads.
const BLOCK: usize = 16;

/// Output rows shorter than this go through the lanes.
const SHORT_ROW: usize = 16;

/// Whether the lanes take this depthwise convolution: one output channel per input channel,
/// and short output rows or strided ones (which the plane loops read element by element:
/// mobilenet_v3_small's [8,16,32,32] 3x3 stride-2 weight gradient took 402 us there).
pub(super) fn applies(g: &Geometry) -> bool {
    g.og() == 1 && (g.osp[2] < SHORT_ROW || g.stride[2] > 1)
}

/// Every (output position, input position, tap) with the tap reading a real input element
/// (not padding), by output position and then tap; positions are flat over D, H, W.
fn pairs(g: &Geometry) -> Vec<[u32; 3]> {
    let [od_n, oh_n, ow_n] = g.osp;
    let [kd, kh, kw] = g.ksp;
    let [id_n, ih_n, iw_n] = g.isp;
    let input = |o: usize, k: usize, i: usize, len: usize| -> Option<usize> {
        let v = o as isize * g.stride[i] + k as isize * g.dilation[i] - g.padding[i];
        (0..len as isize).contains(&v).then_some(v as usize)
    };
    let mut out = Vec::with_capacity(g.op() * g.kk());
    for (op, (od, oh, ow)) in (0..od_n)
        .flat_map(|d| (0..oh_n).flat_map(move |h| (0..ow_n).map(move |w| (d, h, w))))
        .enumerate()
    {
        for (t, (a, b, e)) in (0..kd)
            .flat_map(|a| (0..kh).flat_map(move |b| (0..kw).map(move |e| (a, b, e))))
            .enumerate()
        {
            let (Some(id), Some(ih), Some(iw)) = (
                input(od, a, 0, id_n),
                input(oh, b, 1, ih_n),
                input(ow, e, 2, iw_n),
            ) else {
                continue;
            };
            out.push([op as u32, ((id * ih_n + ih) * iw_n + iw) as u32, t as u32]);
        }
    }
    out
}

/// The weight `[C, taps]` turned `[taps, C]`, so a tap's block of channels is contiguous.
fn taps_by_channel<T: DwFloat>(w: &[T], c: usize, kk: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; w.len()];
    for ch in 0..c {
        for t in 0..kk {
            out[t * c + ch] = w[ch * kk + t];
        }
    }
    out
}

/// The strides of contiguous `[N, C, 1, 1, plane]` planes.
fn dense(plane: usize) -> [isize; 5] {
    [0, plane as isize, plane as isize, plane as isize, 1]
}

/// The channel blocks `[c0, c1)` of `c` channels, `size` each (the last one partial).
fn blocks(c: usize, size: usize) -> impl Fn(usize) -> (usize, usize) {
    move |b| (b * size, ((b + 1) * size).min(c))
}

/// The weight gradient's channel blocks: its only split over threads, so a few channels go in
/// blocks of 8 (one AVX2 float32 vector) to keep 2 threads busy. A function of the shape
/// alone: the sums do not depend on the thread count.
fn weight_block(c: usize) -> usize {
    if c <= 2 * BLOCK {
        8
    } else {
        BLOCK
    }
}

/// `dst[pos * nb + k] = x[k * xs[1] + position pos]` for `nb` channels of a tensor with
/// element strides `xs` (`[N, C, D, H, W]`; `x` at the first channel) over planes of size
/// `sp`: a blocked transpose when each channel's plane is dense.
///
/// # Safety
/// `x` addresses the `nb` channels' whole planes with those strides.
unsafe fn gather<T: DwFloat>(
    dst: &mut [T],
    nb: usize,
    sp: [usize; 3],
    xs: [isize; 5],
    x: *const T,
) {
    let plane = sp.iter().product::<usize>();
    let dense = (xs[4] == 1 || sp[2] == 1)
        && (xs[3] == sp[2] as isize || sp[1] == 1)
        && (xs[2] == (sp[1] * sp[2]) as isize || sp[0] == 1);
    if dense {
        // SAFETY: an nb x plane matrix, rows xs[1] apart (the caller's contract).
        unsafe { transpose_into(x, xs[1], nb, plane, &mut dst[..nb * plane], false) };
        return;
    }
    for k in 0..nb {
        let mut pos = 0;
        for d in 0..sp[0] {
            for h in 0..sp[1] {
                for w in 0..sp[2] {
                    let off = k as isize * xs[1]
                        + d as isize * xs[2]
                        + h as isize * xs[3]
                        + w as isize * xs[4];
                    // SAFETY: inside the channel's plane (the caller's contract).
                    dst[pos * nb + k] = unsafe { *x.offset(off) };
                    pos += 1;
                }
            }
        }
    }
}

/// The position-major `[plane, nb]` block `src` written to `nb` dense channel planes at
/// `dst` (`[nb, plane]`).
///
/// # Safety
/// `dst` addresses `nb * plane` elements that only this call writes.
unsafe fn scatter<T: DwFloat>(dst: *mut T, src: &[T], nb: usize, plane: usize) {
    // SAFETY: the caller's contract.
    let dst = unsafe { std::slice::from_raw_parts_mut(dst, nb * plane) };
    // SAFETY: src holds the dense plane x nb matrix.
    unsafe { transpose_into(src.as_ptr(), nb as isize, plane, nb, dst, false) };
}

/// The members of an (output position, input position, tap) pair.
const OUT: usize = 0;
const IN: usize = 1;
const TAP: usize = 2;

/// For every pair, `dst`'s row += `a`'s row * `b`'s row elementwise over the block's `nb`
/// channels; pair member `D` (`A`, `B`) picks the operand's row and `ds` (`sa`, `sb`) is its
/// row stride.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn multiply_pairs<T: DwFloat, const D: usize, const A: usize, const B: usize>(
    pairs: &[[u32; 3]],
    nb: usize,
    dst: &mut [T],
    ds: usize,
    a: &[T],
    sa: usize,
    b: &[T],
    sb: usize,
) {
    for pair in pairs {
        let (i, j, k) = (
            pair[D] as usize * ds,
            pair[A] as usize * sa,
            pair[B] as usize * sb,
        );
        for ((d, &x), &y) in dst[i..i + nb]
            .iter_mut()
            .zip(&a[j..j + nb])
            .zip(&b[k..k + nb])
        {
            *d = *d + x * y;
        }
    }
}

// The three products, each compiled for its pair members (runtime members cost 10-15%).
crate::unsafe_multiversion!(
    unsafe fn forward_pairs<T: DwFloat>(
        pairs: &[[u32; 3]],
        nb: usize,
        out: &mut [T],
        wt: &[T],
        wc: usize,
        xt: &[T],
    ) {
        multiply_pairs::<T, OUT, TAP, IN>(pairs, nb, out, nb, wt, wc, xt, nb)
    }
);
crate::unsafe_multiversion!(
    unsafe fn input_pairs<T: DwFloat>(
        pairs: &[[u32; 3]],
        nb: usize,
        gi: &mut [T],
        wt: &[T],
        wc: usize,
        gt: &[T],
    ) {
        multiply_pairs::<T, IN, TAP, OUT>(pairs, nb, gi, nb, wt, wc, gt, nb)
    }
);
crate::unsafe_multiversion!(
    unsafe fn weight_pairs<T: DwFloat>(
        pairs: &[[u32; 3]],
        nb: usize,
        acc: &mut [T],
        gt: &[T],
        xt: &[T],
    ) {
        multiply_pairs::<T, TAP, OUT, IN>(pairs, nb, acc, nb, gt, nb, xt, nb)
    }
);

/// As the parent's [`super::forward`], for the convolutions [`applies`] takes.
pub(super) fn forward<T: DwFloat>(
    g: &Geometry,
    out: SendPtr<T>,
    x: SendPtr<T>,
    xs: &[isize],
    w: &[T],
    bias: Option<&[T]>,
) {
    let (c, kk, p, ip) = (g.o, g.kk(), g.op(), g.ip());
    let (pairs, wt, tp) = (pairs(g), taps_by_channel(w, c, kk), Taps::new(g));
    let (nblocks, block) = (c.div_ceil(BLOCK), blocks(c, BLOCK));
    let strides = [xs[0], xs[1], xs[2], xs[3], xs[4]];
    parallel_for(g.n * nblocks, grain(pairs.len() * BLOCK), &|s, e| {
        with_scratch2::<T, T, _>(ip * BLOCK, p * BLOCK, |xt, ot| {
            for task in s..e {
                let (ni, (c0, c1)) = (task / nblocks, block(task % nblocks));
                let nb = c1 - c0;
                let src = x.at(ni as isize * xs[0] + c0 as isize * xs[1]) as *const T;
                // SAFETY: channels c0..c1 of sample ni, with the input's strides.
                unsafe { gather(xt, nb, g.isp, strides, src) };
                for row in ot[..p * nb].chunks_mut(nb) {
                    match bias {
                        Some(b) => row.copy_from_slice(&b[c0..c1]),
                        None => row.fill(T::ZERO),
                    }
                }
                // SAFETY: slices only.
                unsafe { forward_pairs(&pairs, nb, ot, &wt[c0..], c, xt) };
                // SAFETY: planes (ni, c0..c1) of the contiguous output, written only by this task.
                unsafe { scatter(out.at(((ni * c + c0) * p) as isize), ot, nb, p) };
                for oc in c0..c1 {
                    let taps = &w[oc * kk..(oc + 1) * kk];
                    if taps.iter().any(|v| !v.is_finite()) {
                        // SAFETY: plane (ni, oc), as above.
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(out.at(((ni * c + oc) * p) as isize), p)
                        };
                        nan_over_padding(g, &tp, dst, |t| !taps[t].is_finite());
                    }
                }
            }
        })
    });
}

/// As the parent's [`super::backward_input`], for the convolutions [`applies`] takes.
pub(super) fn backward_input<T: DwFloat>(
    g: &Geometry,
    gi: SendPtr<T>,
    go: SendPtr<T>,
    w: &[T],
    bias: Option<&[T]>,
) {
    let (c, kk, p, ip) = (g.o, g.kk(), g.op(), g.ip());
    let (pairs, wt) = (pairs(g), taps_by_channel(w, c, kk));
    let (nblocks, block) = (c.div_ceil(BLOCK), blocks(c, BLOCK));
    parallel_for(g.n * nblocks, grain(pairs.len() * BLOCK), &|s, e| {
        with_scratch2::<T, T, _>(ip * BLOCK, p * BLOCK, |git, gt| {
            for task in s..e {
                let (ni, (c0, c1)) = (task / nblocks, block(task % nblocks));
                let nb = c1 - c0;
                let src = go.at(((ni * c + c0) * p) as isize) as *const T;
                // SAFETY: planes (ni, c0..c1) of the contiguous grad_output.
                unsafe { gather(gt, nb, [1, 1, p], dense(p), src) };
                git[..ip * nb].fill(T::ZERO);
                // SAFETY: slices only.
                unsafe { input_pairs(&pairs, nb, git, &wt[c0..], c, gt) };
                let at = gi.at(((ni * c + c0) * ip) as isize);
                // SAFETY: planes (ni, c0..c1) of the contiguous grad_input, written only here.
                unsafe { scatter(at, git, nb, ip) };
                if let Some(b) = bias {
                    // SAFETY: as above.
                    let dst = unsafe { std::slice::from_raw_parts_mut(at, nb * ip) };
                    for (plane, &b) in dst.chunks_mut(ip).zip(&b[c0..c1]) {
                        plane.iter_mut().for_each(|v| *v = *v + b);
                    }
                }
            }
        })
    });
}

/// As the parent's [`super::backward_weight`], for the convolutions [`applies`] takes.
pub(super) fn backward_weight<T: DwFloat>(
    g: &Geometry,
    gw: &mut [T],
    x: SendPtr<T>,
    xs: &[isize],
    go: SendPtr<T>,
) {
    let (c, kk, p, ip) = (g.o, g.kk(), g.op(), g.ip());
    let (pairs, tp) = (pairs(g), Taps::new(g));
    let wb = weight_block(c);
    let (nblocks, block) = (c.div_ceil(wb), blocks(c, wb));
    let strides = [xs[0], xs[1], xs[2], xs[3], xs[4]];
    let gwa = SendPtr::of(gw.as_mut_ptr());
    parallel_for(nblocks, grain(g.n * pairs.len() * wb), &|s, e| {
        with_scratch2::<T, T, _>(ip * wb, (p + kk) * wb, |xt, rest| {
            let (gt, acc) = rest.split_at_mut(p * wb);
            for blk in s..e {
                let (c0, c1) = block(blk);
                let nb = c1 - c0;
                acc[..kk * nb].fill(T::ZERO);
                let mut nonfinite = vec![false; nb];
                for ni in 0..g.n {
                    let src = x.at(ni as isize * xs[0] + c0 as isize * xs[1]) as *const T;
                    // SAFETY: channels c0..c1 of sample ni, with the input's strides.
                    unsafe { gather(xt, nb, g.isp, strides, src) };
                    let src = go.at(((ni * c + c0) * p) as isize) as *const T;
                    // SAFETY: planes (ni, c0..c1) of the contiguous grad_output.
                    unsafe { gather(gt, nb, [1, 1, p], dense(p), src) };
                    for (k, flag) in nonfinite.iter_mut().enumerate() {
                        *flag |= (0..p).any(|pos| !gt[pos * nb + k].is_finite());
                    }
                    // SAFETY: slices only.
                    unsafe { weight_pairs(&pairs, nb, acc, gt, xt) };
                }
                for (k, &flag) in nonfinite.iter().enumerate() {
                    let oc = c0 + k;
                    // SAFETY: channel oc's taps of the contiguous grad_weight, written only by
                    // this block's task.
                    let taps =
                        unsafe { std::slice::from_raw_parts_mut(gwa.at((oc * kk) as isize), kk) };
                    for (t, v) in taps.iter_mut().enumerate() {
                        *v = acc[t * nb + k];
                    }
                    if flag {
                        nan_taps_of_nonfinite_grads(g, &tp, taps, go, oc);
                    }
                }
            }
        })
    });
}
