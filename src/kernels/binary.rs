//! Elementwise binary ops: arithmetic (with PyTorch's integer and float division semantics),
//! comparisons and logical ops (bool output), bitwise ops and shifts, masked_fill, and the
//! activation backward kernels (grad, saved tensor) -> grad_input.

use super::core::element::Element;
use super::core::float::{FloatStore, Math};
use super::core::int::IntElem;
use super::core::map::map2;
use super::core::simd::Isa;
use super::core::vmath_avx512::{self as avx512, VecOp2};
use super::core::widened::{map1_float, map2_float, Blocks, Vectors};
use crate::error::{FooError, FooResult};
use crate::not_implemented;
use crate::tensor::{Scalar, TensorMut, TensorRef};
use num_traits::{Float, One, Zero};
use std::sync::atomic::{AtomicBool, Ordering};

/// `foo_binary`'s op codes; `p0`, `p1`, ... are its scalar `params`.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
pub enum BinaryOp {
    /// p0: alpha (out = a + alpha * b)
    Add = 0,
    /// p0: alpha (out = a - alpha * b)
    Sub = 1,
    /// p0, when given: the second operand as a number, taken in the opmath type (float32 for
    /// float16/bfloat16) unrounded, `b` unread: the CPU's product by a Python number or
    /// one-element tensor that the dtype cannot hold (float16 1e-5 * 1e6 is 10).
    Mul = 2,
    /// p0: as Mul's.
    Div = 3,
    DivTrunc = 4,
    DivFloor = 5,
    Remainder = 6,
    Fmod = 7,
    Pow = 8,
    Maximum = 9,
    Minimum = 10,
    Atan2 = 11,
    Eq = 12,
    Ne = 13,
    Lt = 14,
    Le = 15,
    Gt = 16,
    Ge = 17,
    LogicalAnd = 18,
    LogicalOr = 19,
    LogicalXor = 20,
    BitAnd = 21,
    BitOr = 22,
    BitXor = 23,
    Shl = 24,
    Shr = 25,
    Fmax = 26,
    Fmin = 27,
    Hypot = 28,
    Copysign = 29,
    Xlogy = 30,
    /// a = grad, b = self; p0: threshold (grad where self > threshold else 0)
    ThresholdBackward = 31,
    /// a = grad, b = output
    SigmoidBackward = 32,
    /// a = grad, b = output
    TanhBackward = 33,
    /// a = grad, b = self
    SiluBackward = 34,
    /// a = grad, b = self; p0: approximate (0 none, 1 tanh)
    GeluBackward = 35,
    /// a = grad, b = self; p0: beta, p1: threshold
    SoftplusBackward = 36,
    /// a = grad, b = self; p0: negative slope
    LeakyReluBackward = 37,
    /// a = self, b = mask (bool); p0: value
    MaskedFill = 38,
    /// a = grad, b = self; p0: min, p1: max (grad where min < self < max)
    HardtanhBackward = 39,
    /// a = grad, b = self
    HardswishBackward = 40,
    /// a = grad, b = self
    HardsigmoidBackward = 41,
    /// a = grad, b = self
    MishBackward = 42,
    LogAddExp = 43,
}

impl BinaryOp {
    /// Ops that write bool whatever their inputs.
    pub fn is_predicate(self) -> bool {
        use BinaryOp::*;
        matches!(
            self,
            Eq | Ne | Lt | Le | Gt | Ge | LogicalAnd | LogicalOr | LogicalXor
        )
    }
}

fn pf(p: &[Scalar], i: usize, default: f64) -> f64 {
    p.get(i)
        .filter(|s| s.tag >= 0)
        .map(f64::from_scalar)
        .unwrap_or(default)
}

/// `out = op(a, b)`; `a` and `b` share a dtype (except MaskedFill's bool mask), `out` has it
/// too, or bool for comparisons and logical ops.
pub fn binary(
    op: BinaryOp,
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    p: &[Scalar],
) -> FooResult<()> {
    if op == BinaryOp::MaskedFill {
        return crate::dispatch!(all: a.dtype, T => {
            let v = p.first().map(T::from_scalar).unwrap_or_default();
            map2(out, a, b, move |x: T, m: bool| if m { v } else { x })
        });
    }
    if op.is_predicate() {
        return crate::dispatch!(all: a.dtype, T => predicate::<T>(op, out, a, b));
    }
    crate::dispatch!(float: a.dtype, F => float_binary::<F>(op, out, a, b, p),
    _ => crate::dispatch!(int: a.dtype, I => int_binary::<I>(op, out, a, b, p),
        _ => match a.dtype {
            crate::DType::Bool => bool_binary(op, out, a, b),
            other => crate::unsupported!("foo {op:?} has no kernel for dtype {}", other.name()),
        }))
}

fn predicate<T: Element>(
    op: BinaryOp,
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
) -> FooResult<()> {
    use BinaryOp::*;
    let ordered = !matches!(T::KIND, crate::dtype::Kind::Complex);
    match op {
        Eq => map2(out, a, b, move |x: T, y: T| x == y),
        Ne => map2(out, a, b, move |x: T, y: T| x != y),
        Lt | Le | Gt | Ge if !ordered => {
            not_implemented!("{op:?} is not supported for complex tensors")
        }
        Lt => map2(out, a, b, move |x: T, y: T| lt_exact(x, y)),
        Le => map2(out, a, b, move |x: T, y: T| x == y || lt_exact(x, y)),
        Gt => map2(out, a, b, move |x: T, y: T| lt_exact(y, x)),
        Ge => map2(out, a, b, move |x: T, y: T| x == y || lt_exact(y, x)),
        LogicalAnd => map2(out, a, b, move |x: T, y: T| x.to_bool() && y.to_bool()),
        LogicalOr => map2(out, a, b, move |x: T, y: T| x.to_bool() || y.to_bool()),
        LogicalXor => map2(out, a, b, move |x: T, y: T| x.to_bool() != y.to_bool()),
        _ => unreachable!("not a predicate"),
    }
}

/// `x < y` without losing precision: integers compare as i64/u64, floats as f64 (exact for
/// every float dtype; NaN compares false).
#[inline(always)]
fn lt_exact<T: Element>(x: T, y: T) -> bool {
    match T::KIND {
        crate::dtype::Kind::Unsigned => x.to_u64() < y.to_u64(),
        crate::dtype::Kind::Signed | crate::dtype::Kind::Bool => x.to_i64() < y.to_i64(),
        _ => x.to_f64() < y.to_f64(),
    }
}

#[inline(always)]
fn float_div_floor<M: Math>(a: M, b: M) -> M {
    if b == M::zero() {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != M::zero() && ((b < M::zero()) != (m < M::zero())) {
        div = div - M::one();
    }
    if div != M::zero() {
        let f = div.floor();
        if div - f > M::from_f64c(0.5) {
            f + M::one()
        } else {
            f
        }
    } else {
        M::zero().copysign(a / b)
    }
}

#[inline(always)]
fn sigmoid<M: Math>(isa: Isa, x: M) -> M {
    x.vsigmoid(isa)
}

fn float_binary<F: FloatStore>(
    op: BinaryOp,
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    p: &[Scalar],
) -> FooResult<()> {
    use BinaryOp::*;
    type Mf<F> = <F as FloatStore>::M;
    let c = |v: f64| Mf::<F>::from_f64c(v);
    macro_rules! m {
        (|$x:ident, $y:ident| $e:expr) => {
            m!(@run Blocks, |$x, $y, _isa| $e)
        };
        // `$isa`: the loop copy's instruction set, for the `Math::v*` functions.
        (|$x:ident, $y:ident, $isa:ident| $e:expr) => {
            m!(@run Blocks, |$x, $y, $isa| $e)
        };
        (@run $s:ident, |$x:ident, $y:ident, $isa:ident| $e:expr) => {
            // Always inlined: LLVM left large bodies (exact GELU's backward: erf and exp) as
            // a call per element, scalar (2.2 ms against the CPU's 0.13 for 262K elements).
            map2_float::<F, $s>(
                out,
                a,
                b,
                #[inline(always)]
                move |$x: Mf<F>, $y: Mf<F>, $isa: Isa| $e,
            )
        };
    }
    // Arithmetic: float16 in vectors (`core::widened::Vectors`).
    macro_rules! mv {
        (|$x:ident, $y:ident| $e:expr) => {
            m!(@run Vectors, |$x, $y, _isa| $e)
        };
    }
    let zero = Mf::<F>::zero();
    let one = Mf::<F>::one();
    match op {
        Add => {
            let alpha = pf(p, 0, 1.0);
            if alpha == 1.0 {
                mv!(|x, y| x + y)
            } else {
                let al = c(alpha);
                mv!(|x, y| x + al * y)
            }
        }
        Sub => {
            let alpha = pf(p, 0, 1.0);
            if alpha == 1.0 {
                mv!(|x, y| x - y)
            } else {
                let al = c(alpha);
                mv!(|x, y| x - al * y)
            }
        }
        Mul | Div if p.first().is_some_and(|s| s.tag >= 0) => {
            let s = c(pf(p, 0, 1.0));
            if op == Mul {
                map1_float::<F, Vectors>(out, a, move |x, _| x * s)
            } else {
                map1_float::<F, Vectors>(out, a, move |x, _| x / s)
            }
        }
        Mul => mv!(|x, y| x * y),
        Div => mv!(|x, y| x / y),
        // Like ATen's AVX2 kernels, the quotient is rounded to the storage type before truncating
        // (matters for float16/bfloat16: bf16 1.0 / 0.1 is 10; the CPU's AVX-512 kernels give 9).
        DivTrunc => m!(|x, y| F::store(x / y).load().trunc()),
        DivFloor => m!(|x, y| float_div_floor(x, y)),
        Remainder => m!(|x, y| {
            let r = x % y;
            if r != zero && ((y < zero) != (r < zero)) {
                r + y
            } else {
                r
            }
        }),
        Fmod => m!(|x, y| x % y),
        Pow => m!(|x, y| x.powf(y)),
        Maximum => m!(|x, y| if x.is_nan() || y.is_nan() {
            x + y
        } else {
            x.max(y)
        }),
        Minimum => m!(|x, y| if x.is_nan() || y.is_nan() {
            x + y
        } else {
            x.min(y)
        }),
        Fmax => m!(|x, y| x.max(y)),
        Fmin => m!(|x, y| x.min(y)),
        Atan2 => m!(|x, y| x.atan2(y)),
        Hypot => m!(|x, y| x.hypot(y)),
        Copysign => m!(|x, y| x.copysign(y)),
        // The CPU's scalar kernel takes the logarithm in the storage type (c10's `std::log` of a
        // Half returns a Half), so for float16/bfloat16 it is rounded before the product.
        Xlogy => m!(|x, y| if y.is_nan() {
            y
        } else if x == zero {
            zero
        } else {
            x * F::store(y.ln()).load()
        }),
        LogAddExp => m!(|x, y| {
            if x.is_infinite() && x == y {
                x
            } else {
                let mx = x.max(y);
                mx + (-(x - y).abs()).exp().ln_1p()
            }
        }),
        ThresholdBackward => {
            let t = c(pf(p, 0, 0.0));
            m!(|g, s| if s <= t { zero } else { g })
        }
        SigmoidBackward => m!(|g, y| g * (one - y) * y),
        TanhBackward => m!(|g, y| g * (one - y * y)),
        SiluBackward => m!(|g, x, isa| {
            let s = sigmoid(isa, x);
            g * s * (one + x * (one - s))
        }),
        GeluBackward if pf(p, 0, 0.0) != 0.0 => {
            let k_beta = c((2.0 / std::f64::consts::PI).sqrt());
            let k_kappa = c(0.044715);
            let (half, three) = (c(0.5), c(3.0));
            m!(|g, x, isa| {
                let x_sq = x * x;
                let inner = k_beta * (x + k_kappa * x_sq * x);
                let t = inner.vtanh(isa);
                let left = half * x;
                let right = one + t;
                let left_d = half * right;
                let tanh_d = one - t * t;
                let inner_d = k_beta * (one + three * k_kappa * x_sq);
                let right_d = left * tanh_d * inner_d;
                g * (left_d + right_d)
            })
        }
        // Dense float32/bfloat16/float16 of one shape take the AVX-512 form (the same bits).
        GeluBackward if avx512::map2(VecOp2::GeluBackward, out, a, b) => Ok(()),
        GeluBackward => {
            let k_beta =
                c(2.0 / std::f64::consts::PI.sqrt() * std::f64::consts::FRAC_1_SQRT_2 * 0.5);
            let half = c(0.5);
            m!(|g, x, isa| {
                let cdf = x.vnormal_cdf(isa);
                let pdf = k_beta * (-(half * x * x)).vexp(isa);
                g * (cdf + x * pdf)
            })
        }
        SoftplusBackward => {
            let beta = c(pf(p, 0, 1.0));
            let threshold = c(pf(p, 1, 20.0));
            m!(|g, x| {
                let z = (x * beta).exp();
                if x * beta > threshold {
                    g
                } else {
                    g * z / (z + one)
                }
            })
        }
        LeakyReluBackward => {
            let slope = c(pf(p, 0, 0.01));
            m!(|g, x| if x > zero { g } else { g * slope })
        }
        HardtanhBackward => {
            let lo = c(pf(p, 0, -1.0));
            let hi = c(pf(p, 1, 1.0));
            m!(|g, x| if x <= lo || x >= hi { zero } else { g })
        }
        HardswishBackward => {
            let (three, half) = (c(3.0), c(0.5));
            // The CPU backend's bounds: the gradient at -3 is 0 and at 3 is `g`; a nan x takes
            // the middle branch (nan), as in the CPU's vectorized kernel.
            m!(|g, x| if x <= -three {
                zero
            } else if x >= three {
                g
            } else {
                g * (x / three + half)
            })
        }
        HardsigmoidBackward => {
            let (three, sixth) = (c(3.0), c(1.0 / 6.0));
            m!(|g, x| if x > -three && x < three {
                g * sixth
            } else {
                zero
            })
        }
        MishBackward => m!(|g, x, isa| {
            let sp = x.exp().ln_1p();
            let t = sp.tanh();
            g * (t + x * sigmoid(isa, x) * (one - t * t))
        }),
        BitAnd | BitOr | BitXor | Shl | Shr => {
            not_implemented!("{op:?} is only defined for integer and bool tensors")
        }
        Eq | Ne | Lt | Le | Gt | Ge | LogicalAnd | LogicalOr | LogicalXor | MaskedFill => {
            unreachable!("dispatched earlier")
        }
    }
}

fn int_binary<I: IntElem>(
    op: BinaryOp,
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    p: &[Scalar],
) -> FooResult<()> {
    use BinaryOp::*;
    // Division by zero is an error for integers (ZeroDivisionError in PyTorch); the kernels
    // write 0 there and flag it, and the whole op reports it.
    let zero_div = AtomicBool::new(false);
    let flag = |r: Option<I>| {
        r.unwrap_or_else(|| {
            zero_div.store(true, Ordering::Relaxed);
            I::zero()
        })
    };
    let res = match op {
        Add | Sub => {
            let alpha = p
                .first()
                .filter(|s| s.tag >= 0)
                .map(I::from_scalar)
                .unwrap_or(I::one());
            match (op, alpha == I::one()) {
                (Add, true) => map2(out, a, b, move |x: I, y: I| x.wrapping_add(&y)),
                (Add, false) => map2(out, a, b, move |x: I, y: I| {
                    x.wrapping_add(&alpha.wrapping_mul(&y))
                }),
                (_, true) => map2(out, a, b, move |x: I, y: I| x.wrapping_sub(&y)),
                (_, false) => map2(out, a, b, move |x: I, y: I| {
                    x.wrapping_sub(&alpha.wrapping_mul(&y))
                }),
            }
        }
        Mul => map2(out, a, b, move |x: I, y: I| x.wrapping_mul(&y)),
        DivTrunc => map2(out, a, b, move |x: I, y: I| flag(x.div_trunc_torch(y))),
        DivFloor => map2(out, a, b, move |x: I, y: I| flag(x.div_floor_torch(y))),
        Remainder => map2(out, a, b, move |x: I, y: I| flag(x.remainder(y))),
        Fmod => map2(out, a, b, move |x: I, y: I| flag(x.fmod(y))),
        Pow => map2(out, a, b, move |x: I, y: I| x.ipow(y)),
        Maximum | Fmax => map2(out, a, b, move |x: I, y: I| x.max(y)),
        Minimum | Fmin => map2(out, a, b, move |x: I, y: I| x.min(y)),
        BitAnd => map2(out, a, b, move |x: I, y: I| x & y),
        BitOr => map2(out, a, b, move |x: I, y: I| x | y),
        BitXor => map2(out, a, b, move |x: I, y: I| x ^ y),
        Shl => map2(out, a, b, move |x: I, y: I| x.shl_torch(y)),
        Shr => map2(out, a, b, move |x: I, y: I| x.shr_torch(y)),
        ThresholdBackward => {
            let t = p.first().map(I::from_scalar).unwrap_or(I::zero());
            map2(
                out,
                a,
                b,
                move |g: I, s: I| if s <= t { I::zero() } else { g },
            )
        }
        _ => not_implemented!(
            "foo {op:?} is not defined for integer dtype {} (the glue promotes to float)",
            a.dtype.name()
        ),
    };
    res?;
    if zero_div.load(Ordering::Relaxed) {
        return Err(FooError::Runtime("ZeroDivisionError".into()));
    }
    Ok(())
}

fn bool_binary(op: BinaryOp, out: &TensorMut, a: &TensorRef, b: &TensorRef) -> FooResult<()> {
    use BinaryOp::*;
    match op {
        Add | BitOr | Maximum | Fmax => map2(out, a, b, move |x: bool, y: bool| x | y),
        Mul | BitAnd | Minimum | Fmin => map2(out, a, b, move |x: bool, y: bool| x & y),
        BitXor => map2(out, a, b, move |x: bool, y: bool| x ^ y),
        // x ** y in {0, 1}: x ** 0 is 1, x ** 1 is x.
        Pow => map2(out, a, b, move |x: bool, y: bool| x | !y),
        _ => not_implemented!("foo {op:?} is not defined for bool tensors"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    #[test]
    fn arithmetic_and_division_modes() {
        let a = Owned::new(vec![7.0f32, -7.0, 5.0, 1.0], &[4]);
        let b = Owned::new(vec![2.0f32, 2.0, 0.0, -3.0], &[4]);
        let mut o = Owned::<f32>::zeros(&[4]);
        binary(BinaryOp::DivFloor, &o.m(), &a.r(), &b.r(), &[]).unwrap();
        assert_eq!(&o.data[..2], &[3.0, -4.0]);
        assert_eq!(o.data[2], f32::INFINITY);
        assert_eq!(o.data[3], -1.0);
        binary(BinaryOp::Remainder, &o.m(), &a.r(), &b.r(), &[]).unwrap();
        assert_eq!(o.data[1], 1.0);
        assert_eq!(o.data[3], -2.0);
        binary(
            BinaryOp::Add,
            &o.m(),
            &a.r(),
            &b.r(),
            &[Scalar::from_f64(2.0)],
        )
        .unwrap();
        assert_eq!(o.data, vec![11.0, -3.0, 5.0, -5.0]);
    }

    #[test]
    fn int_zero_division_is_an_error() {
        let a = Owned::new(vec![7i32, -7], &[2]);
        let b = Owned::new(vec![2i32, 0], &[2]);
        let mut o = Owned::<i32>::zeros(&[2]);
        let e = binary(BinaryOp::DivFloor, &o.m(), &a.r(), &b.r(), &[]).unwrap_err();
        assert!(e.message().contains("ZeroDivisionError"));
    }

    #[test]
    fn comparisons_are_exact() {
        let a = Owned::new(vec![i64::MAX, 1, -2], &[3]);
        let b = Owned::new(vec![i64::MAX - 1, 1, 3], &[3]);
        let mut o = Owned::<bool>::zeros(&[3]);
        binary(BinaryOp::Gt, &o.m(), &a.r(), &b.r(), &[]).unwrap();
        assert_eq!(o.data, vec![true, false, false]);
        binary(BinaryOp::Le, &o.m(), &a.r(), &b.r(), &[]).unwrap();
        assert_eq!(o.data, vec![false, true, true]);
        let f = Owned::new(vec![f32::NAN, 1.0], &[2]);
        let mut fo = Owned::<bool>::zeros(&[2]);
        binary(BinaryOp::Lt, &fo.m(), &f.r(), &f.r(), &[]).unwrap();
        assert_eq!(fo.data, vec![false, false]);
    }
}
