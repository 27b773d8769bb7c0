//! Elementwise ternary ops: where, lerp, addcmul, addcdiv.

use super::core::element::Element;
use super::core::float::{FloatStore, Math};
use super::core::int::IntElem;
use super::core::layout::GRAIN;
use super::core::map::map3;
use super::core::parallel::{parallel_for, SendPtr};
use crate::error::FooResult;
use crate::not_implemented;
use crate::tensor::{Scalar, TensorMut, TensorRef};
use num_traits::Float;

/// `foo_ternary`'s op codes; `p0` is its first scalar `params`.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
pub enum TernaryOp {
    /// a = condition (bool), b = where true, c = where false
    Where = 0,
    /// a = start, b = end, c = weight
    Lerp = 1,
    /// out = a + p0 * b * c
    Addcmul = 2,
    /// out = a + p0 * b / c
    Addcdiv = 3,
}

/// `out = op(a, b, c)`. For Where, `a` is bool and `b`, `c`, `out` share a dtype; otherwise
/// all four share one.
pub fn ternary(
    op: TernaryOp,
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: &TensorRef,
    p: &[Scalar],
) -> FooResult<()> {
    if op == TernaryOp::Where {
        return crate::dispatch!(all: b.dtype, T => map3(out, a, b, c, move |m: bool, x: T, y: T| if m { x } else { y }));
    }
    crate::dispatch!(float: a.dtype, F => float_ternary::<F>(op, out, a, b, c, p),
        _ => crate::dispatch!(int: a.dtype, I => int_ternary::<I>(op, out, a, b, c, p),
            _ => crate::unsupported!("foo {op:?} has no kernel for dtype {}", a.dtype.name())))
}

fn float_ternary<F: FloatStore>(
    op: TernaryOp,
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: &TensorRef,
    p: &[Scalar],
) -> FooResult<()> {
    type Mf<F> = <F as FloatStore>::M;
    let value = Mf::<F>::from_f64c(p.first().map(f64::from_scalar).unwrap_or(1.0));
    match op {
        // Dense operands (the weight dense too, or one value): a loop compiled with FMA.
        TernaryOp::Lerp if dense_lerp_operands(out, a, b, c) => {
            let w_one = scalar_weight::<F>(c, p);
            // SAFETY: dense chunks of the operands (the weight is not read when w_one is given).
            dense_chunks::<F>(out, a, b, c, &|o, x, y, z, n| unsafe {
                lerp_dense::<F>(o, x, y, z, w_one, n)
            });
            Ok(())
        }
        TernaryOp::Lerp => match scalar_weight::<F>(c, p) {
            Some(w) => map3(out, a, b, c, move |s: F, e: F, _: F| {
                F::store(lerp(s.load(), e.load(), w))
            }),
            None => map3(out, a, b, c, move |s: F, e: F, w: F| {
                F::store(lerp(s.load(), e.load(), w.load()))
            }),
        },
        // The CPU's kernels compute fma(value * y, z, x), one rounding for the product and the
        // sum: bit for bit its numbers (Adam's second moment), and inf + (-huge) stays inf.
        // Dense operands take a loop compiled with FMA (AVX2/AVX-512); others the general
        // engine, whose mul_add is a libm call on this baseline-x86-64 build.
        TernaryOp::Addcmul if all_dense(out, [a, b, c]) => {
            // SAFETY: dense chunks of four same-shaped operands.
            dense_chunks::<F>(out, a, b, c, &|o, x, y, z, n| unsafe {
                addcmul_dense::<F>(o, x, y, z, n, value)
            });
            Ok(())
        }
        TernaryOp::Addcmul => map3(out, a, b, c, move |x: F, y: F, z: F| {
            F::store((value * y.load()).mul_add(z.load(), x.load()))
        }),
        // The CPU's order, (value * y) / z: value 0 over a tiny z adds 0, not 0 * inf = nan.
        TernaryOp::Addcdiv => map3(out, a, b, c, move |x: F, y: F, z: F| {
            F::store(x.load() + value * y.load() / z.load())
        }),
        TernaryOp::Where => unreachable!(),
    }
}

/// Runs `chunk(o, x, y, z, len)` on parallel chunks of dense operands of dtype F, each pointer
/// advanced to the chunk's first element (`z` only by address arithmetic: a one-value weight
/// is not read past its first element). The output chunk is the call's alone; it may be `a`'s.
fn dense_chunks<F: FloatStore>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: &TensorRef,
    chunk: &(dyn Fn(*mut F, *const F, *const F, *const F, usize) + Sync),
) {
    let (po, pa, pb, pc) = (
        SendPtr::<F>::of(out.ptr),
        SendPtr::<F>::of(a.ptr),
        SendPtr::<F>::of(b.ptr),
        SendPtr::<F>::of(c.ptr),
    );
    parallel_for(out.numel(), GRAIN, &|s, e| {
        let s = s as isize;
        chunk(po.at(s), pa.at(s), pb.at(s), pc.at(s), e - s as usize)
    });
}

/// PyTorch's lerp (`lerp_vec`): `start + w * (end - start)` for |w| < 0.5, else
/// `end + (w - 1) * (end - start)`, each one fused multiply-add as the CPU's vectorized kernel
/// computes it (bit for bit its numbers, Adam's `exp_avg.lerp_` included).
#[inline(always)]
fn lerp<M: Math>(s: M, e: M, w: M) -> M {
    let d = e - s;
    if w.abs() < M::from_f64c(0.5) {
        w.mul_add(d, s)
    } else {
        (w - M::one()).mul_add(d, e)
    }
}

/// lerp's weight when it is one value for all elements: the Scalar the glue passes for
/// `lerp(self, end, weight: Scalar)` (kept in the math type: the CPU's half-type kernels do not
/// round it to half), else a broadcast one-element weight tensor.
fn scalar_weight<F: FloatStore>(c: &TensorRef, p: &[Scalar]) -> Option<F::M> {
    if let Some(v) = p.first() {
        return Some(F::M::from_f64c(f64::from_scalar(v)));
    }
    if c.strides.iter().all(|&s| s == 0) && c.numel() > 0 {
        // SAFETY: a non-empty tensor whose elements all alias its first.
        return Some(unsafe { (*(c.ptr as *const F)).load() });
    }
    None
}

/// Output, start and end dense with one shape and one layout (contiguous or channels-last, see
/// [`crate::tensor::is_dense`]); the weight too, or a single value.
fn dense_lerp_operands(out: &TensorMut, a: &TensorRef, b: &TensorRef, c: &TensorRef) -> bool {
    let same =
        |t: &TensorRef| t.shape == out.shape && same_layout(&out.strides, &t.strides, &t.shape);
    crate::tensor::is_dense(&out.shape, &out.strides)
        && same(a)
        && same(b)
        && (same(c) || c.strides.iter().all(|&s| s == 0))
}

/// Whether two tensors of `shape` lay their elements out alike (strides of size-1 dims aside).
fn same_layout(x: &[isize], y: &[isize], shape: &[usize]) -> bool {
    x.iter()
        .zip(y)
        .zip(shape)
        .all(|((a, b), &n)| n == 1 || a == b)
}

crate::unsafe_multiversion!(unsafe fn lerp_dense<F: FloatStore>(o: *mut F, x: *const F, y: *const F, z: *const F, w_one: Option<F::M>, n: usize) => lerp_dense_body);

/// `o[i] = lerp(x[i], y[i], z[i])` (or with `w_one` for every element) for `i < n`; in place
/// on `x` over slices, as [`addcmul_dense_body`].
///
/// # Safety
/// The pointers address `n` elements each (`z` is not read when `w_one` is given); `o` may
/// equal `x`, `y` or `z` but overlaps none of them otherwise.
#[inline(always)]
unsafe fn lerp_dense_body<F: FloatStore>(
    o: *mut F,
    x: *const F,
    y: *const F,
    z: *const F,
    w_one: Option<F::M>,
    n: usize,
) {
    let apart = |p: *const F| (p as usize).abs_diff(o as usize) >= n * std::mem::size_of::<F>();
    if std::ptr::eq(o, x) && apart(y) && (w_one.is_some() || apart(z)) {
        // SAFETY: `o` is `x` and overlaps neither `y` nor `z`: one exclusive slice and shared
        // ones of n elements.
        let (os, ys) = unsafe {
            (
                std::slice::from_raw_parts_mut(o, n),
                std::slice::from_raw_parts(y, n),
            )
        };
        if let Some(w) = w_one {
            for (ov, yv) in os.iter_mut().zip(ys) {
                *ov = F::store(lerp(ov.load(), yv.load(), w));
            }
        } else {
            // SAFETY: as above.
            let zs = unsafe { std::slice::from_raw_parts(z, n) };
            for ((ov, yv), zv) in os.iter_mut().zip(ys).zip(zs) {
                *ov = F::store(lerp(ov.load(), yv.load(), zv.load()));
            }
        }
        return;
    }
    for i in 0..n {
        // SAFETY: i < n, caller's contract; each element is read before it is written.
        unsafe {
            let w = w_one.unwrap_or_else(|| (*z.add(i)).load());
            *o.add(i) = F::store(lerp((*x.add(i)).load(), (*y.add(i)).load(), w));
        }
    }
}

/// All four operands dense with one shape and one layout (an optimizer's channels-last
/// weights and their state too).
fn all_dense(out: &TensorMut, ins: [&TensorRef; 3]) -> bool {
    crate::tensor::is_dense(&out.shape, &out.strides)
        && ins
            .iter()
            .all(|t| t.shape == out.shape && same_layout(&out.strides, &t.strides, &t.shape))
}

crate::unsafe_multiversion!(unsafe fn addcmul_dense<F: FloatStore>(o: *mut F, x: *const F, y: *const F, z: *const F, n: usize, value: F::M) => addcmul_dense_body);

/// `o[i] = fma(value * y[i], z[i], x[i])` for `i < n`.
///
/// In place on `x` (Adam's `exp_avg_sq.addcmul_`) the loop runs over slices: through raw
/// pointers the compiler's run-time alias check fails for `o == x` and the loop stays scalar.
///
/// # Safety
/// The four pointers address `n` elements each; `o` may equal `x`, `y` or `z` but overlaps
/// none of them otherwise.
#[inline(always)]
unsafe fn addcmul_dense_body<F: FloatStore>(
    o: *mut F,
    x: *const F,
    y: *const F,
    z: *const F,
    n: usize,
    value: F::M,
) {
    let apart = |p: *const F| (p as usize).abs_diff(o as usize) >= n * std::mem::size_of::<F>();
    if std::ptr::eq(o, x) && apart(y) && apart(z) {
        // SAFETY: `o` is `x` and overlaps neither `y` nor `z`: one exclusive and two shared
        // slices of n elements each.
        let (os, ys, zs) = unsafe {
            (
                std::slice::from_raw_parts_mut(o, n),
                std::slice::from_raw_parts(y, n),
                std::slice::from_raw_parts(z, n),
            )
        };
        for ((ov, yv), zv) in os.iter_mut().zip(ys).zip(zs) {
            *ov = F::store((value * yv.load()).mul_add(zv.load(), ov.load()));
        }
        return;
    }
    for i in 0..n {
        // SAFETY: i < n, caller's contract; each element is read before it is written.
        unsafe {
            let v = (value * (*y.add(i)).load()).mul_add((*z.add(i)).load(), (*x.add(i)).load());
            *o.add(i) = F::store(v);
        }
    }
}

fn int_ternary<I: IntElem>(
    op: TernaryOp,
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: &TensorRef,
    p: &[Scalar],
) -> FooResult<()> {
    let value = p.first().map(I::from_scalar).unwrap_or(I::one());
    match op {
        TernaryOp::Addcmul => map3(out, a, b, c, move |x: I, y: I, z: I| {
            x.wrapping_add(&value.wrapping_mul(&y).wrapping_mul(&z))
        }),
        _ => not_implemented!(
            "foo {op:?} is not defined for integer dtype {}",
            a.dtype.name()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    #[test]
    fn where_and_lerp() {
        let m = Owned::new(vec![true, false, true], &[3]);
        let x = Owned::new(vec![1.0f32, 2.0, 3.0], &[3]);
        let y = Owned::new(vec![-1.0f32], &[1]);
        let mut o = Owned::<f32>::zeros(&[3]);
        ternary(
            TernaryOp::Where,
            &o.m(),
            &m.r(),
            &x.r(),
            &y.bcast(&[3]),
            &[],
        )
        .unwrap();
        assert_eq!(o.data, vec![1.0, -1.0, 3.0]);
        let w = Owned::new(vec![0.25f32, 0.75, 1.0], &[3]);
        ternary(TernaryOp::Lerp, &o.m(), &x.r(), &y.bcast(&[3]), &w.r(), &[]).unwrap();
        assert_eq!(o.data, vec![0.5, -0.25, -1.0]);
        ternary(
            TernaryOp::Addcdiv,
            &o.m(),
            &x.r(),
            &x.r(),
            &w.r(),
            &[Scalar::from_f64(0.5)],
        )
        .unwrap();
        assert_eq!(o.data[0], 1.0 + 0.5 * 4.0);
    }
}
