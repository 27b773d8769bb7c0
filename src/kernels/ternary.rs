//! Elementwise ternary ops: where, lerp, addcmul, addcdiv.

use super::element::Element;
use super::float::{FloatStore, Math};
use super::int::IntElem;
use super::map::map3;
use crate::error::FooResult;
use crate::tensor::{Scalar, TensorMut, TensorRef};
use crate::{dispatch_float, dispatch_int, not_implemented};
use num_traits::{Float, One};

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
        return crate::dispatch_all!(b.dtype, T => map3(out, a, b, c, move |m: bool, x: T, y: T| if m { x } else { y }));
    }
    dispatch_float!(a.dtype, F => float_ternary::<F>(op, out, a, b, c, p),
        _ => dispatch_int!(a.dtype, I => int_ternary::<I>(op, out, a, b, c, p),
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
    let half = Mf::<F>::from_f64c(0.5);
    let one = Mf::<F>::one();
    match op {
        // PyTorch's lerp: start + w * (end - start) for |w| < 0.5, else end - (end - start) * (1 - w).
        TernaryOp::Lerp => map3(out, a, b, c, move |s: F, e: F, w: F| {
            let (s, e, w) = (s.load(), e.load(), w.load());
            let d = e - s;
            F::store(if w.abs() < half {
                s + w * d
            } else {
                e - d * (one - w)
            })
        }),
        TernaryOp::Addcmul => map3(out, a, b, c, move |x: F, y: F, z: F| {
            F::store(x.load() + value * y.load() * z.load())
        }),
        TernaryOp::Addcdiv => map3(out, a, b, c, move |x: F, y: F, z: F| {
            F::store(x.load() + value * (y.load() / z.load()))
        }),
        TernaryOp::Where => unreachable!(),
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
    use crate::kernels::map::testing::Owned;

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
