//! Depthwise convolutions over channels-last tensors (ConvNeXt's 7x7 blocks, whose input is a
//! permuted view, and any depthwise layer after `.to(memory_format=torch.channels_last)`). The
//! plane loops of the parent module read one channel at a time, which here is a walk at the
//! stride of the channel count (and the output went through NCHW copies): ConvNeXt-T's
//! [1,192,28,28] 7x7 forward took 5.5x the CPU's time. Here the channels are the vector: where
//! every tap reads real input, a block of [`LANES`] channels of [`PIX`] output pixels stays in
//! registers across all the taps, each tap one weight vector (the taps stored tap-major) and
//! one input vector per pixel; pixels whose taps reach into padding go one at a time, testing
//! each tap (with those tests in the block loop the accumulators spilled: 1.6x the time).
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
// (`block_inside` names its four accumulators.)
const _: () = assert!(PIX == 4);

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
    let (step, ed) = (g.stride[2] * xs[4], g.dilation[2] * xs[4]);
    // Output columns where every tap column reads a real input column: blocks of PIX pixels
    // there take no tests (and keep their accumulators in registers); the other pixels, and
    // the channels past the last whole block, go one pixel at a time.
    let (in_lo, in_hi) = rw
        .iter()
        .fold((0, ow_n), |(l, h), &(lo, hi)| (l.max(lo), h.min(hi)));
    let whole = c - c % LANES;
    let pixel = |ow: usize, cb: usize, n: usize| {
        let mut acc = [T::ZERO; LANES];
        acc[..n].copy_from_slice(&bias[cb..cb + n]);
        for &(t0, xrow) in &rows {
            for (e, &(lo, hi)) in rw.iter().enumerate() {
                if (lo..hi).contains(&ow) {
                    let w = &wt[(t0 + e) * c + cb..][..n];
                    // SAFETY: channels cb..cb + n of a real input pixel (the tap's range).
                    let xv = unsafe {
                        std::slice::from_raw_parts(
                            xrow.wrapping_offset(iw(ow, e) * xs[4] + cb as isize),
                            n,
                        )
                    };
                    for ((a, &wl), &xl) in acc.iter_mut().zip(w).zip(xv) {
                        *a = *a + wl * xl;
                    }
                }
            }
        }
        // SAFETY: pixel ow of the row, channels cb..cb + n.
        unsafe {
            std::slice::from_raw_parts_mut(dst.add(ow * c + cb), n).copy_from_slice(&acc[..n])
        };
    };
    for cb in (0..whole).step_by(LANES) {
        let mut ow = 0;
        while ow < ow_n {
            if ow >= in_lo && ow + PIX <= in_hi {
                // SAFETY: every tap of the block's pixels reads a real input pixel; the
                // weights and bias hold channels cb..cb + LANES; the row holds the block.
                unsafe {
                    block_inside(
                        &rows,
                        wt.as_ptr().add(cb),
                        bias.as_ptr().add(cb),
                        c,
                        kw,
                        iw(ow, 0) * xs[4] + cb as isize,
                        ed,
                        step,
                        dst.add(ow * c + cb),
                    )
                };
                ow += PIX;
            } else {
                pixel(ow, cb, LANES);
                ow += 1;
            }
        }
    }
    if whole < c {
        for ow in 0..ow_n {
            pixel(ow, whole, c - whole);
        }
    }
}

/// [`PIX`] output pixels (`c` elements apart at `dst`) of [`LANES`] channels whose every tap
/// reads a real input pixel: bias plus the taps, in the rows' order and then by column, each
/// pixel's input `step` after the previous one's, tap columns `ed` apart, from `xoff` past
/// each row's address.
///
/// # Safety
/// `wt + t * c` and `bias` hold [`LANES`] readable elements for every tap `t` of `rows`; each
/// row's `xoff + e * ed + p * step` does for every tap column `e < kw` and pixel `p < PIX`;
/// `dst + p * c` holds [`LANES`] writable elements for `p < PIX`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn block_inside<T: DwFloat>(
    rows: &[(usize, *const T)],
    wt: *const T,
    bias: *const T,
    c: usize,
    kw: usize,
    xoff: isize,
    ed: isize,
    step: isize,
    dst: *mut T,
) {
    // SAFETY: the caller's contract, throughout.
    unsafe {
        let b = std::ptr::read_unaligned(bias as *const [T; LANES]);
        let (mut a0, mut a1, mut a2, mut a3) = (b, b, b, b);
        for &(t0, xrow) in rows {
            let (mut w, mut x) = (wt.add(t0 * c), xrow.wrapping_offset(xoff));
            for _ in 0..kw {
                let wv = std::ptr::read_unaligned(w as *const [T; LANES]);
                madd(&mut a0, &wv, x);
                madd(&mut a1, &wv, x.wrapping_offset(step));
                madd(&mut a2, &wv, x.wrapping_offset(2 * step));
                madd(&mut a3, &wv, x.wrapping_offset(3 * step));
                w = w.add(c);
                x = x.wrapping_offset(ed);
            }
        }
        for (p, a) in [a0, a1, a2, a3].iter().enumerate() {
            std::ptr::write_unaligned(dst.add(p * c) as *mut [T; LANES], *a);
        }
    }
}

/// `acc += w * x[..LANES]`.
///
/// # Safety
/// `x` holds [`LANES`] readable elements.
#[inline(always)]
unsafe fn madd<T: DwFloat>(acc: &mut [T; LANES], w: &[T; LANES], x: *const T) {
    // SAFETY: the caller's contract.
    let xv = unsafe { std::ptr::read_unaligned(x as *const [T; LANES]) };
    for l in 0..LANES {
        acc[l] = acc[l] + w[l] * xv[l];
    }
}
