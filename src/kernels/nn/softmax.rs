//! softmax / log_softmax along one dim, and their backward.
//!
//! Operands are contiguous, seen as `[outer, d, inner]` with the softmax dim in the middle.
//! When `inner == 1` each row is contiguous (one row per work item); otherwise a work item is
//! a tile of up to `TILE` inner positions across all `d`, so the loops run along `inner`
//! (contiguous) and vectorize.

use crate::error::FooResult;
use crate::kernels::core::float::{FloatStore, Math};
use crate::kernels::core::io::require_contiguous;
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::kernels::core::simd::{self, FastExp, Isa};
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, multiversion, not_implemented};
use num_traits::{Float, One, Zero};

/// Math type with the vectorizable exp.
pub trait SoftmaxMath: Math + FastExp {}
impl<T: Math + FastExp> SoftmaxMath for T {}

/// A float storage type whose math type has [`FastExp`].
pub trait Store: FloatStore<M = <Self as Store>::N> {
    type N: SoftmaxMath;
}
impl<F: FloatStore> Store for F
where
    F::M: FastExp,
{
    type N = F::M;
}

const TILE: usize = 64;

#[derive(Clone, Copy)]
struct Geom {
    outer: usize,
    d: usize,
    inner: usize,
}

impl Geom {
    fn new(shape: &[usize], dim: usize) -> FooResult<Geom> {
        if shape.is_empty() {
            return Ok(Geom {
                outer: 1,
                d: 1,
                inner: 1,
            });
        }
        if dim >= shape.len() {
            return invalid_arg!("softmax: dim {dim} out of range for rank {}", shape.len());
        }
        Ok(Geom {
            outer: shape[..dim].iter().product(),
            d: shape[dim],
            inner: shape[dim + 1..].iter().product(),
        })
    }
    fn tiles(self) -> usize {
        self.inner.div_ceil(TILE)
    }
    fn units(self) -> usize {
        if self.inner == 1 {
            self.outer
        } else {
            self.outer * self.tiles()
        }
    }
    fn grain(self) -> usize {
        let per = if self.inner == 1 {
            self.d
        } else {
            self.d * TILE.min(self.inner)
        };
        (GRAIN / per.max(1)).max(1)
    }
    /// Element offset of tile `u`'s first element and its width.
    fn tile(self, u: usize) -> (usize, usize) {
        let nt = self.tiles();
        let (o, t) = (u / nt, u % nt);
        let j0 = t * TILE;
        (o * self.d * self.inner + j0, TILE.min(self.inner - j0))
    }
}

/// `out = softmax(inp, dim)` (or log_softmax). `out` may be float32 for a float16/bfloat16
/// input (half_to_float); otherwise both share a float dtype.
pub fn softmax(out: &TensorMut, inp: &TensorRef, dim: usize, log: bool) -> FooResult<()> {
    if out.shape != inp.shape {
        return invalid_arg!(
            "softmax: output shape {:?} != input shape {:?}",
            out.shape,
            inp.shape
        );
    }
    require_contiguous("softmax input", &inp.shape, &inp.strides)?;
    require_contiguous("softmax output", &out.shape, &out.strides)?;
    let g = Geom::new(&inp.shape, dim)?;
    if inp.numel() == 0 {
        return Ok(());
    }
    use crate::dtype::DType::*;
    let (pi, po) = (SendPtr::of(inp.ptr), SendPtr::of(out.ptr));
    match (inp.dtype, out.dtype) {
        (F32, F32) => fwd::<f32, f32>(pi, po, g, log),
        (F64, F64) => fwd::<f64, f64>(pi, po, g, log),
        (F16, F16) => fwd::<half::f16, half::f16>(pi, po, g, log),
        (BF16, BF16) => fwd::<half::bf16, half::bf16>(pi, po, g, log),
        (F16, F32) => fwd::<half::f16, f32>(pi, po, g, log),
        (BF16, F32) => fwd::<half::bf16, f32>(pi, po, g, log),
        (i, o) => return not_implemented!("softmax: no kernel from {} to {}", i.name(), o.name()),
    }
    Ok(())
}

fn fwd<I: Store, O: Store<N = I::N>>(pi: SendPtr<u8>, po: SendPtr<u8>, g: Geom, log: bool) {
    parallel_for(g.units(), g.grain(), &|s, e| {
        fwd_units::<I, O>(pi, po, g, log, s, e)
    });
}

multiversion!(fn fwd_units<I: Store, O: Store>(pi: SendPtr<u8>, po: SendPtr<u8>, g: Geom, log: bool, s: usize, e: usize) => isa fwd_body);

#[inline(always)]
fn fwd_body<I: Store, O: Store>(
    isa: Isa,
    pi: SendPtr<u8>,
    po: SendPtr<u8>,
    g: Geom,
    log: bool,
    s: usize,
    e: usize,
) {
    // O::N == I::N by construction (fwd's bound); convert through f64-free casts.
    let d = g.d;
    if g.inner == 1 {
        let direct = I::as_math(&[]).is_some() && O::as_math_mut(&mut []).is_some();
        let mut buf = vec![I::N::zero(); if direct { 0 } else { d }];
        // `_softmax.out(x, out=x)` (nn.MultiheadAttention's inference path) computes in place:
        // then only the output slice is formed (an input slice beside it would alias it, and the
        // compiler's alias check sent the exp loop to its scalar version: 5x slower).
        let in_place = pi.get() == po.get();
        for r in s..e {
            if direct && in_place {
                // SAFETY: row r of a contiguous [outer, d] tensor, which is both input and output;
                // rows are disjoint across units.
                let y: &mut [O] = unsafe { po.cast().slice_mut(r * d, d) };
                if let Some(ym) = O::as_math_mut(y) {
                    let ym: &mut [I::N] = same_slice_mut(ym);
                    let m = simd::max(ym);
                    if log {
                        let ls = simd::sum_map(ym, |v| (v - m).fexp(isa)).ln();
                        for o in ym.iter_mut() {
                            *o = (*o - m) - ls;
                        }
                    } else {
                        let inv = I::N::one() / simd::exp_sub_store(isa, ym, m);
                        for o in ym.iter_mut() {
                            *o = *o * inv;
                        }
                    }
                }
                continue;
            }
            // SAFETY: row r of a contiguous [outer, d] tensor; rows are disjoint across units.
            let x: &[I] = unsafe { pi.cast().slice(r * d, d) };
            if direct {
                // SAFETY: as above, output side (a different buffer: not in place).
                let y: &mut [O] = unsafe { po.cast().slice_mut(r * d, d) };
                if let (Some(xm), Some(ym)) = (I::as_math(x), O::as_math_mut(y)) {
                    // f32/f64 in and out: read the input where it lies and compute in the
                    // output (three passes over a row in L1 instead of four, one of them a copy).
                    let ym: &mut [I::N] = same_slice_mut(ym);
                    let m = simd::max(xm);
                    if log {
                        // (v - m) - ln(sum), as the CPU: v - (m + ln(sum)) rounds ln(sum) away
                        // when |m| is large (logits near 1e8 gave 0 instead of -ln 3).
                        let ls = simd::sum_map(xm, |v| (v - m).fexp(isa)).ln();
                        for (o, &v) in ym.iter_mut().zip(xm) {
                            *o = (v - m) - ls;
                        }
                    } else {
                        let inv = I::N::one() / simd::exp_sub_into(isa, ym, xm, m);
                        for o in ym.iter_mut() {
                            *o = *o * inv;
                        }
                    }
                }
                continue;
            }
            for (b, &v) in buf.iter_mut().zip(x) {
                *b = v.load();
            }
            // SAFETY: as above, output side; formed after the input row is read (in place, the
            // same memory).
            let y: &mut [O] = unsafe { po.cast().slice_mut(r * d, d) };
            let m = simd::max(&buf);
            if log {
                let mut ls = simd::sum_map(&buf, |v| (v - m).fexp(isa));
                if O::as_math_mut(&mut []).is_none() {
                    // Half in, half out: the CPU's last-dim kernel keeps the row's sum and its
                    // log in the half type (SoftMaxKernel.cpp's tmp_sum_scalar), each rounded.
                    ls = I::store(I::store(ls).load().ln()).load();
                } else {
                    ls = ls.ln();
                }
                for (o, &b) in y.iter_mut().zip(&buf) {
                    *o = O::store(same((b - m) - ls));
                }
            } else {
                let sum = simd::exp_sub_store(isa, &mut buf, m);
                let inv = I::N::one() / sum;
                for (o, &b) in y.iter_mut().zip(&buf) {
                    *o = O::store(same(b * inv));
                }
            }
        }
        return;
    }
    let inner = g.inner;
    let mut tile = vec![I::N::zero(); d * TILE];
    let mut mx = [I::N::zero(); TILE];
    let mut acc = [I::N::zero(); TILE];
    for u in s..e {
        let (base, w) = g.tile(u);
        let (mx, acc) = (&mut mx[..w], &mut acc[..w]);
        mx.fill(I::N::neg_infinity());
        for k in 0..d {
            // SAFETY: w elements of row k of the tile, in bounds of the contiguous input.
            let x: &[I] = unsafe { pi.cast().slice(base + k * inner, w) };
            let t = &mut tile[k * w..(k + 1) * w];
            for ((t, &v), m) in t.iter_mut().zip(x).zip(mx.iter_mut()) {
                *t = v.load();
                *m = if *t > *m { *t } else { *m };
            }
        }
        acc.fill(I::N::zero());
        for k in 0..d {
            let t = &mut tile[k * w..(k + 1) * w];
            for ((t, &m), a) in t.iter_mut().zip(mx.iter()).zip(acc.iter_mut()) {
                let ex = (*t - m).fexp(isa);
                *a = *a + ex;
                if !log {
                    *t = ex;
                }
            }
        }
        for a in acc.iter_mut() {
            *a = if log { a.ln() } else { I::N::one() / *a };
        }
        for k in 0..d {
            // SAFETY: as above, output side; tiles of different units are disjoint.
            let y: &mut [O] = unsafe { po.cast().slice_mut(base + k * inner, w) };
            let t = &tile[k * w..(k + 1) * w];
            for (((o, &t), &a), &m) in y.iter_mut().zip(t).zip(acc.iter()).zip(mx.iter()) {
                *o = O::store(same(if log { (t - m) - a } else { t * a }));
            }
        }
    }
}

/// Identity between two math types that are the same type (checked by the callers' bounds).
#[inline(always)]
fn same<A: Math, B: Math>(v: A) -> B {
    if std::mem::size_of::<A>() == std::mem::size_of::<B>() {
        // SAFETY: A and B are both f32 or both f64 here (math types of matching dtypes).
        unsafe { std::mem::transmute_copy(&v) }
    } else {
        B::from_f64c(v.to_f64c())
    }
}

/// The same slice seen as another math type that is the same type (see [`same`]).
#[inline(always)]
fn same_slice_mut<A: Math, B: Math>(v: &mut [A]) -> &mut [B] {
    assert_eq!(std::mem::size_of::<A>(), std::mem::size_of::<B>());
    // SAFETY: A and B are the same float type here (math types of matching dtypes), so the
    // layout, length and alignment carry over.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut B, v.len()) }
}

/// Backward of softmax (`grad_input = y * (g - sum(g * y))`) or log_softmax
/// (`grad_input = g - exp(y) * sum(g)`), with `y` the forward output. `grad_output` and
/// `output` share a dtype; `grad_input` has it too, or float16/bfloat16 when they are float32.
pub fn softmax_backward(
    grad_input: &TensorMut,
    grad_output: &TensorRef,
    output: &TensorRef,
    dim: usize,
    log: bool,
) -> FooResult<()> {
    if grad_input.shape != output.shape || grad_output.shape != output.shape {
        return invalid_arg!(
            "softmax backward: shapes differ: grad_input {:?}, grad_output {:?}, output {:?}",
            grad_input.shape,
            grad_output.shape,
            output.shape
        );
    }
    if grad_output.dtype != output.dtype {
        return invalid_arg!("softmax backward: grad_output and output dtypes differ");
    }
    require_contiguous("grad_output", &grad_output.shape, &grad_output.strides)?;
    require_contiguous("output", &output.shape, &output.strides)?;
    require_contiguous("grad_input", &grad_input.shape, &grad_input.strides)?;
    let g = Geom::new(&output.shape, dim)?;
    if output.numel() == 0 {
        return Ok(());
    }
    use crate::dtype::DType::*;
    let (pg, py, po) = (
        SendPtr::of(grad_output.ptr),
        SendPtr::of(output.ptr),
        SendPtr::of(grad_input.ptr),
    );
    match (output.dtype, grad_input.dtype) {
        (F32, F32) => bwd::<f32, f32>(pg, py, po, g, log),
        (F64, F64) => bwd::<f64, f64>(pg, py, po, g, log),
        (F16, F16) => bwd::<half::f16, half::f16>(pg, py, po, g, log),
        (BF16, BF16) => bwd::<half::bf16, half::bf16>(pg, py, po, g, log),
        (F32, F16) => bwd::<f32, half::f16>(pg, py, po, g, log),
        (F32, BF16) => bwd::<f32, half::bf16>(pg, py, po, g, log),
        (i, o) => {
            return not_implemented!(
                "softmax backward: no kernel from {} to {}",
                i.name(),
                o.name()
            )
        }
    }
    Ok(())
}

fn bwd<I: Store, O: Store<N = I::N>>(
    pg: SendPtr<u8>,
    py: SendPtr<u8>,
    po: SendPtr<u8>,
    g: Geom,
    log: bool,
) {
    parallel_for(g.units(), g.grain(), &|s, e| {
        bwd_units::<I, O>(pg, py, po, g, log, s, e)
    });
}

multiversion!(fn bwd_units<I: Store, O: Store>(pg: SendPtr<u8>, py: SendPtr<u8>, po: SendPtr<u8>, g: Geom, log: bool, s: usize, e: usize) => isa bwd_body);

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn bwd_body<I: Store, O: Store>(
    isa: Isa,
    pg: SendPtr<u8>,
    py: SendPtr<u8>,
    po: SendPtr<u8>,
    g: Geom,
    log: bool,
    s: usize,
    e: usize,
) {
    let d = g.d;
    if g.inner == 1 {
        // f32/f64 rows are read where they lie; other dtypes are widened into scratch rows.
        let direct = I::as_math(&[]).is_some();
        let scratch = if direct { 0 } else { d };
        let (mut gb, mut yb) = (vec![I::N::zero(); scratch], vec![I::N::zero(); scratch]);
        for r in s..e {
            // SAFETY: row r of contiguous [outer, d] tensors; output rows are disjoint.
            let (gr, yr, out): (&[I], &[I], &mut [O]) = unsafe {
                (
                    pg.cast().slice(r * d, d),
                    py.cast().slice(r * d, d),
                    po.cast().slice_mut(r * d, d),
                )
            };
            let (gm, ym): (&[I::N], &[I::N]) = match (I::as_math(gr), I::as_math(yr)) {
                (Some(gm), Some(ym)) => (gm, ym),
                _ => {
                    for ((a, b), (&u, &v)) in
                        gb.iter_mut().zip(yb.iter_mut()).zip(gr.iter().zip(yr))
                    {
                        *a = u.load();
                        *b = v.load();
                    }
                    (&gb, &yb)
                }
            };
            if log {
                let s = simd::sum(gm);
                for ((o, &a), &b) in out.iter_mut().zip(gm).zip(ym) {
                    *o = O::store(same(a - b.fexp(isa) * s));
                }
            } else {
                let s = simd::sum_zip(gm, ym, |a, b| a * b);
                for ((o, &a), &b) in out.iter_mut().zip(gm).zip(ym) {
                    *o = O::store(same(b * (a - s)));
                }
            }
        }
        return;
    }
    let inner = g.inner;
    let mut acc = [I::N::zero(); TILE];
    for u in s..e {
        let (base, w) = g.tile(u);
        let acc = &mut acc[..w];
        acc.fill(I::N::zero());
        for k in 0..d {
            // SAFETY: w elements of row k of the tile, in bounds.
            let (gr, yr): (&[I], &[I]) = unsafe {
                (
                    pg.cast().slice(base + k * inner, w),
                    py.cast().slice(base + k * inner, w),
                )
            };
            for ((a, &u), &v) in acc.iter_mut().zip(gr).zip(yr) {
                *a = *a + if log { u.load() } else { u.load() * v.load() };
            }
        }
        for k in 0..d {
            // SAFETY: as above; tiles of different units are disjoint.
            let (gr, yr, out): (&[I], &[I], &mut [O]) = unsafe {
                (
                    pg.cast().slice(base + k * inner, w),
                    py.cast().slice(base + k * inner, w),
                    po.cast().slice_mut(base + k * inner, w),
                )
            };
            for (((o, &u), &v), &a) in out.iter_mut().zip(gr).zip(yr).zip(acc.iter()) {
                let (u, v) = (u.load(), v.load());
                *o = O::store(same(if log {
                    u - v.fexp(isa) * a
                } else {
                    v * (u - a)
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    fn reference(x: &[f64], log: bool) -> Vec<f64> {
        let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = x.iter().map(|v| (v - m).exp()).sum();
        x.iter()
            .map(|v| {
                if log {
                    v - m - s.ln()
                } else {
                    (v - m).exp() / s
                }
            })
            .collect()
    }

    #[test]
    fn softmax_any_dim_matches_reference() {
        let shape = [3usize, 5, 70];
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32) / 10.0 - 5.0)
            .collect();
        let x = Owned::new(data.clone(), &shape);
        for dim in 0..3 {
            for log in [false, true] {
                let mut y = Owned::<f32>::zeros(&shape);
                softmax(&y.m(), &x.r(), dim, log).unwrap();
                let strides = crate::tensor::contiguous_strides(&shape);
                // Check every line along `dim`.
                for base in 0..n {
                    let idx = (base / strides[dim] as usize) % shape[dim];
                    if idx != 0 {
                        continue;
                    }
                    let line: Vec<usize> = (0..shape[dim])
                        .map(|k| base + k * strides[dim] as usize)
                        .collect();
                    let xs: Vec<f64> = line.iter().map(|&i| data[i] as f64).collect();
                    let want = reference(&xs, log);
                    for (&i, w) in line.iter().zip(want) {
                        assert!((y.data[i] as f64 - w).abs() < 1e-5, "dim {dim} log {log}");
                    }
                }
                // Backward of softmax with g = 1 is zero; of log_softmax is 1 - d * softmax.
                let ones = Owned::new(vec![1.0f32; n], &shape);
                let mut gi = Owned::<f32>::zeros(&shape);
                softmax_backward(&gi.m(), &ones.r(), &y.r(), dim, log).unwrap();
                if !log {
                    assert!(gi.data.iter().all(|v| v.abs() < 1e-5));
                }
            }
        }
    }
}
