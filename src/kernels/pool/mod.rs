//! 2-D pooling, forward and backward, with the CPU backend's exact window and divisor rules:
//! max (padding, dilation, flat argmax indices into each input plane; NaN wins), average
//! (count_include_pad, divisor_override; ceil_mode only changes the output size, which the glue
//! computes), adaptive average. Tensors are 4-D `[N, C, H, W]`; inputs may be strided, every
//! written tensor is contiguous. Work is split over the `N * C` planes.

use crate::dtype::DType;
use crate::error::FooResult;
use crate::kernels::core::float::{FloatStore, Math};
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use num_traits::{Float, Zero};
use std::sync::atomic::{AtomicBool, Ordering};

/// 2-D pooling window parameters (H, W); `divisor_override == 0` means none.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Pool2dParams {
    pub kernel: [i64; 2],
    pub stride: [i64; 2],
    pub padding: [i64; 2],
    pub dilation: [i64; 2],
    pub count_include_pad: i32,
    pub divisor_override: i64,
}

/// Planes and per-plane geometry of a pooling call.
struct Planes {
    n: usize,
    c: usize,
    ih: usize,
    iw: usize,
    oh: usize,
    ow: usize,
}

fn planes(what: &str, input: &[usize], output: &[usize]) -> FooResult<Planes> {
    if input.len() != 4 || output.len() != 4 || input[..2] != output[..2] {
        return invalid_arg!(
            "{what}: expected 4-D input {input:?} and output {output:?} with equal N, C"
        );
    }
    Ok(Planes {
        n: input[0],
        c: input[1],
        ih: input[2],
        iw: input[3],
        oh: output[2],
        ow: output[3],
    })
}

fn contiguous(what: &str, t: &TensorMut) -> FooResult<()> {
    if !t.is_contiguous() {
        return invalid_arg!("{what}: outputs must be contiguous");
    }
    Ok(())
}

/// Offset (elements) of plane `b` (= n * C + c) of a 4-D tensor with strides `s`.
fn plane_offset(b: usize, c: usize, s: &[isize]) -> isize {
    (b / c) as isize * s[0] + (b % c) as isize * s[1]
}

fn grain(per_plane: usize) -> usize {
    GRAIN / per_plane.max(1) + 1
}

// ---- max pooling ---------------------------------------------------------------------------------

/// `out`, `indices` (int64) = max over each window of `input`.
pub fn max_pool2d(
    out: &TensorMut,
    indices: &TensorMut,
    input: &TensorRef,
    p: &Pool2dParams,
) -> FooResult<()> {
    let g = planes("max_pool2d", &input.shape, &out.shape)?;
    contiguous("max_pool2d", out)?;
    contiguous("max_pool2d", indices)?;
    if indices.dtype != DType::I64 || indices.shape != out.shape || out.dtype != input.dtype {
        return invalid_arg!("max_pool2d: bad output/indices dtype or shape");
    }
    crate::dispatch!(float: input.dtype, T => max_fwd::<T>(&g, out, indices, input, p), _ => not_implemented!("max_pool2d: dtype {} is not supported", input.dtype.name()))
}

fn max_fwd<T: FloatStore>(
    g: &Planes,
    out: &TensorMut,
    indices: &TensorMut,
    input: &TensorRef,
    p: &Pool2dParams,
) -> FooResult<()> {
    let a = MaxArgs {
        xo: SendPtr::of(input.ptr),
        oo: SendPtr::of(out.ptr),
        io: SendPtr::of(indices.ptr),
        xs: [
            input.strides[0],
            input.strides[1],
            input.strides[2],
            input.strides[3],
        ],
        c: g.c,
        ih: g.ih as i64,
        iw: g.iw as i64,
        oh: g.oh,
        ow: g.ow,
        p: *p,
    };
    let per = g.oh * g.ow;
    let taps = (p.kernel[0] * p.kernel[1]) as usize;
    parallel_for(g.n * g.c, grain(per * taps), &|s, e| {
        max_planes::<T>(&a, s, e)
    });
    Ok(())
}

/// Everything [`max_planes`] needs (plain data, so the multiversioned function takes one
/// reference).
struct MaxArgs<T> {
    xo: SendPtr<T>,
    oo: SendPtr<T>,
    io: SendPtr<i64>,
    xs: [isize; 4],
    c: usize,
    ih: i64,
    iw: i64,
    oh: usize,
    ow: usize,
    p: Pool2dParams,
}

impl<T> MaxArgs<T> {
    /// The first in-bounds tap of a window starting at `start` (windows are never empty: the
    /// glue checks padding <= kernel / 2).
    #[inline(always)]
    fn first(mut start: i64, d: i64) -> i64 {
        while start < 0 {
            start += d;
        }
        start
    }

    /// A 2x2 window at stride 2 without padding or dilation over dense rows, each window
    /// inside the plane: [`max_2x2_row`] handles it.
    fn is_2x2_pairs(&self) -> bool {
        let p = &self.p;
        p.kernel == [2, 2]
            && p.stride == [2, 2]
            && p.padding == [0, 0]
            && p.dilation == [1, 1]
            && self.xs[3] == 1
            && 2 * self.ow as i64 <= self.iw
            && 2 * self.oh as i64 <= self.ih
    }

    /// Window tap j of output column xw is column xw * sw - pw + j * dw: the columns xw whose
    /// tap j is inside the plane form one range `lo..hi`, so each tap is one branch-free pass
    /// over a row. Returns (lo, hi, column offset).
    #[inline(always)]
    fn cols(&self, j: i64) -> (usize, usize, i64) {
        let (sw, pw, dw, iw, ow) = (
            self.p.stride[1],
            self.p.padding[1],
            self.p.dilation[1],
            self.iw,
            self.ow as i64,
        );
        let off = j * dw - pw;
        let lo = if off < 0 { (-off + sw - 1) / sw } else { 0 };
        let hi = if iw - off <= 0 {
            0
        } else {
            ((iw - off + sw - 1) / sw).min(ow)
        };
        (lo.min(ow) as usize, hi.max(lo.min(ow)) as usize, off)
    }
}

// One dispatch per chunk of planes: with narrow rows (16 outputs in a CNN), a dispatched call
// per window tap and row cost more than the taps themselves.
crate::multiversion!(fn max_planes<T: FloatStore>(a: &MaxArgs<T>, s: usize, e: usize) => max_planes_body);

/// Max pooling of planes `s..e`.
#[inline(always)]
fn max_planes_body<T: FloatStore>(a: &MaxArgs<T>, s: usize, e: usize) {
    let [kh, kw] = a.p.kernel;
    let [sh, sw] = a.p.stride;
    let [ph, pw] = a.p.padding;
    let [dh, dw] = a.p.dilation;
    let (ih, iw, xs) = (a.ih, a.iw, &a.xs);
    let per = a.oh * a.ow;
    let mut best = vec![T::M::neg_infinity(); a.ow];
    let mut arg = vec![0i64; a.ow];
    let pairs = a.is_2x2_pairs();
    for b in s..e {
        let x = plane_offset(b, a.c, xs);
        for y in 0..a.oh {
            if pairs {
                let o = (b * per + y * a.ow) as isize;
                let r0 = x + (2 * y) as isize * xs[2];
                // SAFETY: input rows 2y and 2y + 1 of plane b hold at least 2 * ow dense
                // elements (`is_2x2_pairs`); row y of plane b of the contiguous outputs is
                // written by this chunk only.
                unsafe {
                    max_2x2_row::<T>(
                        a.xo.at(r0),
                        a.xo.at(r0 + xs[2]),
                        std::slice::from_raw_parts_mut(a.oo.at(o), a.ow),
                        std::slice::from_raw_parts_mut(a.io.at(o), a.ow),
                        2 * y as i64 * iw,
                        iw,
                    )
                };
                continue;
            }
            let h0 = y as i64 * sh - ph;
            let first_h = MaxArgs::<T>::first(h0, dh);
            for (xw, (bv, av)) in best.iter_mut().zip(arg.iter_mut()).enumerate() {
                *bv = T::M::neg_infinity();
                *av = first_h * iw + MaxArgs::<T>::first(xw as i64 * sw - pw, dw);
            }
            // Taps in the CPU backend's order (row-major in the window), so ties and NaNs pick
            // the same index: a later tap wins only if strictly greater or NaN.
            for i in 0..kh {
                let h = h0 + i * dh;
                if h < 0 || h >= ih {
                    continue;
                }
                let row = x + h as isize * xs[2];
                for j in 0..kw {
                    let (lo, hi, off) = a.cols(j);
                    let at = row + (lo as i64 * sw + off) as isize * xs[3];
                    let (step, n) = (sw as isize * xs[3], hi - lo);
                    let (flat, best, arg) = (
                        h * iw + lo as i64 * sw + off,
                        &mut best[lo..hi],
                        &mut arg[lo..hi],
                    );
                    if step > 0 && n > 0 {
                        // SAFETY: element k * step of this slice is column (lo + k) * sw + off of
                        // row h, inside the plane for k < n (see `cols`).
                        let x = unsafe {
                            std::slice::from_raw_parts(
                                a.xo.at(at) as *const T,
                                (n - 1) * step as usize + 1,
                            )
                        };
                        max_taps_body::<T>(x, step as usize, best, arg, flat, sw);
                    } else {
                        // SAFETY: as above, for a zero stride (an expanded view).
                        unsafe { max_taps_raw::<T, 0>(a.xo.at(at), step, best, arg, flat, sw) };
                    }
                }
            }
            let o = (b * per + y * a.ow) as isize;
            // SAFETY: row y of plane b of the contiguous outputs (ow elements), written by this
            // chunk only.
            let (orow, irow) = unsafe {
                (
                    std::slice::from_raw_parts_mut(a.oo.at(o), a.ow),
                    std::slice::from_raw_parts_mut(a.io.at(o), a.ow),
                )
            };
            for ((dst, di), (&bv, &av)) in orow.iter_mut().zip(irow).zip(best.iter().zip(&arg)) {
                *dst = T::store(bv);
                *di = av;
            }
        }
    }
}

/// One output row of a 2x2 pooling with stride 2 over dense rows `r0`, `r1` (flat index of
/// `r0[0]` is `flat`, of `r1[0]` `flat + iw`): the window's taps in the CPU backend's order.
/// Both rows are read whole, in blocks of 16 input columns, and every element is used, so
/// LLVM deinterleaves them with shuffles; the generic tap loop's read at a step of 2 became a
/// `vgather` (about 6 ns per output, 3x slower than CPU for a CNN's pooling).
///
/// # Safety
/// `r0` and `r1` must be readable for `2 * out.len()` elements.
#[inline(always)]
unsafe fn max_2x2_row<T: FloatStore>(
    r0: *const T,
    r1: *const T,
    out: &mut [T],
    idx: &mut [i64],
    flat: i64,
    iw: i64,
) {
    /// A later tap wins only if strictly greater or NaN (the CPU backend's rule).
    #[inline(always)]
    fn tap<M: Math>(v: M, bv: &mut M, av: &mut i64, at: i64) {
        let take = (v > *bv) | v.is_nan();
        let keep = take as i64 - 1;
        *av = (*av & keep) | (at & !keep);
        *bv = M::pick(take, v, *bv);
    }
    let n = out.len().min(idx.len());
    // SAFETY: both rows hold 2n readable elements (the caller's contract).
    let (a, b) = unsafe {
        (
            std::slice::from_raw_parts(r0, 2 * n),
            std::slice::from_raw_parts(r1, 2 * n),
        )
    };
    // A plain loop that uses both elements of every pair: LLVM's loop vectorizer loads the
    // rows whole and deinterleaves them with shuffles.
    for (k, ((o, ix), (pa, pb))) in out[..n]
        .iter_mut()
        .zip(&mut idx[..n])
        .zip(a.chunks_exact(2).zip(b.chunks_exact(2)))
        .enumerate()
    {
        let f = flat + 2 * k as i64;
        let (mut bv, mut av) = (pa[0].load(), f);
        tap(pa[1].load(), &mut bv, &mut av, f + 1);
        tap(pb[0].load(), &mut bv, &mut av, f + iw);
        tap(pb[1].load(), &mut bv, &mut av, f + iw + 1);
        *o = T::store(bv);
        *ix = av;
    }
}

/// One window tap for a row of outputs: output k compares `x[k * step]` (flat index
/// `flat + k * flat_step`) with its running max. Unit and 2-element steps (stride 1 and 2 on
/// contiguous rows) get their own loops, which vectorize into loads and shuffles; other steps
/// gather.
#[inline(always)]
fn max_taps_body<T: FloatStore>(
    x: &[T],
    step: usize,
    best: &mut [T::M],
    arg: &mut [i64],
    flat: i64,
    flat_step: i64,
) {
    let n = best.len().min(arg.len());
    assert!(
        n == 0 || (n - 1) * step < x.len(),
        "max_pool2d: tap row out of bounds"
    );
    // SAFETY: x[k * step] is in bounds for k < n (asserted above).
    unsafe {
        match step {
            1 => max_taps_raw::<T, 1>(x.as_ptr(), 1, best, arg, flat, flat_step),
            2 => max_taps_raw::<T, 2>(x.as_ptr(), 2, best, arg, flat, flat_step),
            _ => max_taps_raw::<T, 0>(x.as_ptr(), step as isize, best, arg, flat, flat_step),
        }
    }
}

/// The loop of [`max_taps_body`] with the step a constant (`S > 0`) or `step` (`S == 0`).
///
/// # Safety
/// `x + k * step` must be readable for every `k < min(best.len(), arg.len())`.
#[inline(always)]
unsafe fn max_taps_raw<T: FloatStore, const S: isize>(
    x: *const T,
    step: isize,
    best: &mut [T::M],
    arg: &mut [i64],
    flat: i64,
    flat_step: i64,
) {
    let step = if S > 0 { S } else { step };
    // A later tap wins only if strictly greater or NaN (the CPU backend's rule). Random data
    // makes this a coin flip: masks, not a branch.
    #[inline(always)]
    fn tap<M: crate::kernels::core::float::Math>(v: M, bv: &mut M, av: &mut i64, idx: i64) {
        let take = (v > *bv) | v.is_nan();
        let keep = take as i64 - 1;
        *av = (*av & keep) | (idx & !keep);
        *bv = M::pick(take, v, *bv);
    }
    // Blocks of 8 outputs as fixed-size arrays, which LLVM turns into vector code even for the
    // short rows of a CNN (16 outputs), where its loop vectorizer leaves everything scalar.
    const B: usize = 8;
    let n = best.len().min(arg.len());
    let mut k = 0;
    while k + B <= n {
        // SAFETY: the caller guarantees `x + i * step` is readable for i < n.
        let v: [T::M; B] =
            std::array::from_fn(|i| unsafe { *x.offset((k + i) as isize * step) }.load());
        let (bb, ab) = (&mut best[k..k + B], &mut arg[k..k + B]);
        for i in 0..B {
            tap(
                v[i],
                &mut bb[i],
                &mut ab[i],
                flat + (k + i) as i64 * flat_step,
            );
        }
        k += B;
    }
    for i in k..n {
        // SAFETY: as above.
        let v = unsafe { *x.offset(i as isize * step) }.load();
        tap(v, &mut best[i], &mut arg[i], flat + i as i64 * flat_step);
    }
}

/// `grad_input[plane][indices] += grad_output` (grad_input overwritten; grad_output and
/// indices contiguous).
pub fn max_pool2d_backward(
    grad_input: &TensorMut,
    grad_output: &TensorRef,
    indices: &TensorRef,
) -> FooResult<()> {
    let g = planes("max_pool2d_backward", &grad_input.shape, &grad_output.shape)?;
    contiguous("max_pool2d_backward", grad_input)?;
    if !grad_output.is_contiguous() || !indices.is_contiguous() || indices.dtype != DType::I64 {
        return invalid_arg!(
            "max_pool2d_backward: grad_output/indices must be contiguous (int64 indices)"
        );
    }
    if indices.shape != grad_output.shape || grad_input.dtype != grad_output.dtype {
        return invalid_arg!("max_pool2d_backward: indices/grad_output mismatch");
    }
    crate::dispatch!(float: grad_input.dtype, T => max_bwd::<T>(&g, grad_input, grad_output, indices), _ => not_implemented!("max_pool2d_backward: dtype {} is not supported", grad_input.dtype.name()))
}

fn max_bwd<T: FloatStore>(
    g: &Planes,
    gi: &TensorMut,
    go: &TensorRef,
    idx: &TensorRef,
) -> FooResult<()> {
    let (gio, goo, io) = (
        SendPtr::<T>::of(gi.ptr),
        SendPtr::<T>::of(go.ptr),
        SendPtr::<i64>::of(idx.ptr),
    );
    let (ip, op) = (g.ih * g.iw, g.oh * g.ow);
    let bad = AtomicBool::new(false);
    parallel_for(g.n * g.c, grain(ip + op), &|s, e| {
        for b in s..e {
            // SAFETY: plane b of the contiguous grad_input, written by this chunk only; plane b
            // of grad_output/indices.
            let (dst, src, ind) = unsafe {
                (
                    std::slice::from_raw_parts_mut(gio.at((b * ip) as isize), ip),
                    std::slice::from_raw_parts(goo.at((b * op) as isize) as *const T, op),
                    std::slice::from_raw_parts(io.at((b * op) as isize) as *const i64, op),
                )
            };
            dst.fill(T::store(T::M::zero()));
            for (&v, &i) in src.iter().zip(ind) {
                match dst.get_mut(i as usize) {
                    Some(t) if i >= 0 => *t = T::store(t.load() + v.load()),
                    _ => bad.store(true, Ordering::Relaxed),
                }
            }
        }
    });
    if bad.into_inner() {
        return invalid_arg!("max_pool2d_backward: found an invalid max index");
    }
    Ok(())
}

// ---- average pooling -----------------------------------------------------------------------------

/// The window of output (y, x) clipped to the input, and its divisor (CPU rules).
#[inline]
fn avg_window(p: &Pool2dParams, y: usize, x: usize, ih: i64, iw: i64) -> Option<([i64; 4], i64)> {
    let h0 = y as i64 * p.stride[0] - p.padding[0];
    let w0 = x as i64 * p.stride[1] - p.padding[1];
    let h1 = (h0 + p.kernel[0]).min(ih + p.padding[0]);
    let w1 = (w0 + p.kernel[1]).min(iw + p.padding[1]);
    let pool = (h1 - h0) * (w1 - w0);
    let (h0, w0, h1, w1) = (h0.max(0), w0.max(0), h1.min(ih), w1.min(iw));
    if h0 >= h1 || w0 >= w1 {
        return None;
    }
    // Any non-zero override, negative ones included (the CPU divides by -2 too).
    let div = if p.divisor_override != 0 {
        p.divisor_override
    } else if p.count_include_pad != 0 {
        pool
    } else {
        (h1 - h0) * (w1 - w0)
    };
    Some(([h0, h1, w0, w1], div))
}

pub fn avg_pool2d(out: &TensorMut, input: &TensorRef, p: &Pool2dParams) -> FooResult<()> {
    let g = planes("avg_pool2d", &input.shape, &out.shape)?;
    contiguous("avg_pool2d", out)?;
    if out.dtype != input.dtype {
        return invalid_arg!("avg_pool2d: output dtype differs from the input's");
    }
    crate::dispatch!(float: input.dtype, T => avg_fwd::<T>(&g, out, input, p), _ => not_implemented!("avg_pool2d: dtype {} is not supported", input.dtype.name()))
}

fn avg_fwd<T: FloatStore>(
    g: &Planes,
    out: &TensorMut,
    input: &TensorRef,
    p: &Pool2dParams,
) -> FooResult<()> {
    let (xo, oo) = (SendPtr::<T>::of(input.ptr), SendPtr::<T>::of(out.ptr));
    let xs = &input.strides;
    let per = g.oh * g.ow;
    parallel_for(
        g.n * g.c,
        grain(per * (p.kernel[0] * p.kernel[1]) as usize),
        &|s, e| {
            for b in s..e {
                let x = plane_offset(b, g.c, xs);
                for y in 0..g.oh {
                    for xw in 0..g.ow {
                        let v = match avg_window(p, y, xw, g.ih as i64, g.iw as i64) {
                            None => T::M::zero(),
                            Some(([h0, h1, w0, w1], div)) => {
                                let mut sum = T::M::zero();
                                for hh in h0..h1 {
                                    for ww in w0..w1 {
                                        // SAFETY: (hh, ww) is inside the plane.
                                        sum = sum
                                            + unsafe {
                                                *xo.at(x
                                                    + hh as isize * xs[2]
                                                    + ww as isize * xs[3])
                                            }
                                            .load();
                                    }
                                }
                                sum / T::M::from_f64c(div as f64)
                            }
                        };
                        // SAFETY: element of the contiguous output, written by this chunk only.
                        unsafe { *oo.at((b * per + y * g.ow + xw) as isize) = T::store(v) };
                    }
                }
            }
        },
    );
    Ok(())
}

/// Input gradient of `avg_pool2d` (grad_input overwritten; grad_output may be strided).
pub fn avg_pool2d_backward(
    grad_input: &TensorMut,
    grad_output: &TensorRef,
    p: &Pool2dParams,
) -> FooResult<()> {
    let g = planes("avg_pool2d_backward", &grad_input.shape, &grad_output.shape)?;
    contiguous("avg_pool2d_backward", grad_input)?;
    if grad_input.dtype != grad_output.dtype {
        return invalid_arg!("avg_pool2d_backward: dtype mismatch");
    }
    crate::dispatch!(float: grad_input.dtype, T => avg_bwd::<T>(&g, grad_input, grad_output, p), _ => not_implemented!("avg_pool2d_backward: dtype {} is not supported", grad_input.dtype.name()))
}

fn avg_bwd<T: FloatStore>(
    g: &Planes,
    gi: &TensorMut,
    go: &TensorRef,
    p: &Pool2dParams,
) -> FooResult<()> {
    let (gio, goo) = (SendPtr::<T>::of(gi.ptr), SendPtr::<T>::of(go.ptr));
    let gs = &go.strides;
    let ip = g.ih * g.iw;
    parallel_for(g.n * g.c, grain(ip + g.oh * g.ow * 4), &|s, e| {
        for b in s..e {
            let src = plane_offset(b, g.c, gs);
            // SAFETY: plane b of the contiguous grad_input, written by this chunk only.
            let dst = unsafe { std::slice::from_raw_parts_mut(gio.at((b * ip) as isize), ip) };
            dst.fill(T::store(T::M::zero()));
            for y in 0..g.oh {
                for xw in 0..g.ow {
                    let Some(([h0, h1, w0, w1], div)) =
                        avg_window(p, y, xw, g.ih as i64, g.iw as i64)
                    else {
                        continue;
                    };
                    // SAFETY: (y, xw) is inside the grad_output plane.
                    let v =
                        unsafe { *goo.at(src + y as isize * gs[2] + xw as isize * gs[3]) }.load();
                    let delta = v / T::M::from_f64c(div as f64);
                    for hh in h0..h1 {
                        for ww in w0..w1 {
                            let t = &mut dst[(hh * g.iw as i64 + ww) as usize];
                            *t = T::store(t.load() + delta);
                        }
                    }
                }
            }
        }
    });
    Ok(())
}

// ---- adaptive average pooling --------------------------------------------------------------------

fn start_index(a: usize, b: usize, c: usize) -> usize {
    (a * c) / b
}

fn end_index(a: usize, b: usize, c: usize) -> usize {
    ((a + 1) * c).div_ceil(b)
}

pub fn adaptive_avg_pool2d(out: &TensorMut, input: &TensorRef) -> FooResult<()> {
    let g = planes("adaptive_avg_pool2d", &input.shape, &out.shape)?;
    contiguous("adaptive_avg_pool2d", out)?;
    if out.dtype != input.dtype {
        return invalid_arg!("adaptive_avg_pool2d: output dtype differs from the input's");
    }
    crate::dispatch!(float: input.dtype, T => adaptive_fwd::<T>(&g, out, input), _ => not_implemented!("adaptive_avg_pool2d: dtype {} is not supported", input.dtype.name()))
}

fn adaptive_fwd<T: FloatStore>(g: &Planes, out: &TensorMut, input: &TensorRef) -> FooResult<()> {
    let (xo, oo) = (SendPtr::<T>::of(input.ptr), SendPtr::<T>::of(out.ptr));
    let xs = &input.strides;
    let per = g.oh * g.ow;
    parallel_for(g.n * g.c, grain(g.ih * g.iw + per), &|s, e| {
        for b in s..e {
            let x = plane_offset(b, g.c, xs);
            for y in 0..g.oh {
                let (h0, h1) = (start_index(y, g.oh, g.ih), end_index(y, g.oh, g.ih));
                for xw in 0..g.ow {
                    let (w0, w1) = (start_index(xw, g.ow, g.iw), end_index(xw, g.ow, g.iw));
                    let mut sum = T::M::zero();
                    for hh in h0..h1 {
                        for ww in w0..w1 {
                            // SAFETY: (hh, ww) is inside the plane.
                            sum = sum
                                + unsafe { *xo.at(x + hh as isize * xs[2] + ww as isize * xs[3]) }
                                    .load();
                        }
                    }
                    let v =
                        sum / T::M::from_f64c((h1 - h0) as f64) / T::M::from_f64c((w1 - w0) as f64);
                    // SAFETY: element of the contiguous output, written by this chunk only.
                    unsafe { *oo.at((b * per + y * g.ow + xw) as isize) = T::store(v) };
                }
            }
        }
    });
    Ok(())
}

pub fn adaptive_avg_pool2d_backward(
    grad_input: &TensorMut,
    grad_output: &TensorRef,
) -> FooResult<()> {
    let g = planes(
        "adaptive_avg_pool2d_backward",
        &grad_input.shape,
        &grad_output.shape,
    )?;
    contiguous("adaptive_avg_pool2d_backward", grad_input)?;
    if grad_input.dtype != grad_output.dtype {
        return invalid_arg!("adaptive_avg_pool2d_backward: dtype mismatch");
    }
    crate::dispatch!(float: grad_input.dtype, T => adaptive_bwd::<T>(&g, grad_input, grad_output), _ => not_implemented!("adaptive_avg_pool2d_backward: dtype {} is not supported", grad_input.dtype.name()))
}

fn adaptive_bwd<T: FloatStore>(g: &Planes, gi: &TensorMut, go: &TensorRef) -> FooResult<()> {
    let (gio, goo) = (SendPtr::<T>::of(gi.ptr), SendPtr::<T>::of(go.ptr));
    let gs = &go.strides;
    let ip = g.ih * g.iw;
    parallel_for(g.n * g.c, grain(ip + g.oh * g.ow), &|s, e| {
        for b in s..e {
            let src = plane_offset(b, g.c, gs);
            // SAFETY: plane b of the contiguous grad_input, written by this chunk only.
            let dst = unsafe { std::slice::from_raw_parts_mut(gio.at((b * ip) as isize), ip) };
            dst.fill(T::store(T::M::zero()));
            for y in 0..g.oh {
                let (h0, h1) = (start_index(y, g.oh, g.ih), end_index(y, g.oh, g.ih));
                for xw in 0..g.ow {
                    let (w0, w1) = (start_index(xw, g.ow, g.iw), end_index(xw, g.ow, g.iw));
                    // SAFETY: (y, xw) is inside the grad_output plane.
                    let v =
                        unsafe { *goo.at(src + y as isize * gs[2] + xw as isize * gs[3]) }.load();
                    let delta =
                        v / T::M::from_f64c((h1 - h0) as f64) / T::M::from_f64c((w1 - w0) as f64);
                    for hh in h0..h1 {
                        for ww in w0..w1 {
                            let t = &mut dst[hh * g.iw + ww];
                            *t = T::store(t.load() + delta);
                        }
                    }
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    fn params(k: i64, s: i64, pad: i64) -> Pool2dParams {
        Pool2dParams {
            kernel: [k, k],
            stride: [s, s],
            padding: [pad, pad],
            dilation: [1, 1],
            count_include_pad: 1,
            divisor_override: 0,
        }
    }

    #[test]
    fn conv_pool_max_and_avg() {
        let x = Owned::new((0..16).map(|v| v as f32).collect(), &[1, 1, 4, 4]);
        let mut out = Owned::<f32>::zeros(&[1, 1, 2, 2]);
        let mut idx = Owned::<i64>::zeros(&[1, 1, 2, 2]);
        max_pool2d(&out.m(), &idx.m(), &x.r(), &params(2, 2, 0)).unwrap();
        assert_eq!(out.data, vec![5.0, 7.0, 13.0, 15.0]);
        assert_eq!(idx.data, vec![5, 7, 13, 15]);
        let mut gi = Owned::<f32>::zeros(&[1, 1, 4, 4]);
        let go = Owned::new(vec![1.0f32; 4], &[1, 1, 2, 2]);
        max_pool2d_backward(&gi.m(), &go.r(), &idx.r()).unwrap();
        assert_eq!(gi.data.iter().sum::<f32>(), 4.0);
        assert_eq!(gi.data[5], 1.0);

        // 3x3 windows, stride 1, padding 1, count_include_pad: corners divide by 9.
        let mut avg = Owned::<f32>::zeros(&[1, 1, 4, 4]);
        avg_pool2d(&avg.m(), &x.r(), &params(3, 1, 1)).unwrap();
        assert_eq!(avg.data[0], (0.0 + 1.0 + 4.0 + 5.0) / 9.0);
        let mut ad = Owned::<f32>::zeros(&[1, 1, 3, 3]);
        adaptive_avg_pool2d(&ad.m(), &x.r()).unwrap();
        assert_eq!(ad.data[0], (0.0 + 1.0 + 4.0 + 5.0) / 4.0);
    }
}
