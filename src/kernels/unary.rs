//! Elementwise unary ops (and their scalar parameters). The glue picks the computation dtype
//! (e.g. integer inputs of `exp` are promoted to float first); predicates write bool.

use super::core::element::Element;
use super::core::float::{FloatStore, Math};
use super::core::int::IntElem;
use super::core::map::{any1, map1};
use super::core::simd::Isa;
use super::core::vmath_avx512::{self as avx512, VecOp};
use super::core::widened::{map1_float, Blocks, Vectors};
use crate::error::{FooError, FooResult};
use crate::not_implemented;
use crate::tensor::{Scalar, TensorMut, TensorRef};
use num_traits::{Float, One, Zero};

/// `foo_unary`'s op codes; `p0`, `p1`, ... are its scalar `params`.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
pub enum UnaryOp {
    Neg = 0,
    Abs = 1,
    Sign = 2,
    Exp = 3,
    Exp2 = 4,
    Expm1 = 5,
    Log = 6,
    Log2 = 7,
    Log10 = 8,
    Log1p = 9,
    Sqrt = 10,
    Rsqrt = 11,
    Reciprocal = 12,
    Sin = 13,
    Cos = 14,
    Tan = 15,
    Tanh = 16,
    Sigmoid = 17,
    Relu = 18,
    /// p0: approximate (0 = none, 1 = tanh)
    Gelu = 19,
    Silu = 20,
    /// p0: beta, p1: threshold
    Softplus = 21,
    Erf = 22,
    Floor = 23,
    Ceil = 24,
    /// p0: decimals
    Round = 25,
    Trunc = 26,
    Frac = 27,
    /// p0: min, p1: max; a parameter with tag -1 is absent
    Clamp = 28,
    LogicalNot = 29,
    BitwiseNot = 30,
    IsNan = 31,
    IsInf = 32,
    IsFinite = 33,
    /// p0: nan, p1: posinf, p2: neginf (tag -1: dtype default)
    NanToNum = 34,
    Asin = 35,
    Acos = 36,
    Atan = 37,
    Sinh = 38,
    Cosh = 39,
    Asinh = 40,
    Acosh = 41,
    Atanh = 42,
    Erfc = 43,
    /// p0: negative slope
    LeakyRelu = 44,
    /// p0: alpha, p1: scale, p2: input scale
    Elu = 45,
    Hardsigmoid = 46,
    Hardswish = 47,
    Mish = 48,
    Signbit = 49,
    IsPosInf = 50,
    IsNegInf = 51,
    Square = 52,
    Sgn = 53,
    Erfinv = 54,
    /// p0: threshold, p1: value (`x <= threshold ? value : x`)
    Threshold = 55,
    Sinc = 56,
    /// `x * x * x` with the square rounded to the dtype first, as the CPU's `pow(x, 3)`
    Cube = 57,
}

impl UnaryOp {
    /// Ops whose output is bool whatever the input.
    pub fn is_predicate(self) -> bool {
        use UnaryOp::*;
        matches!(
            self,
            LogicalNot | IsNan | IsInf | IsFinite | Signbit | IsPosInf | IsNegInf
        )
    }
}

fn param(p: &[Scalar], i: usize) -> Option<&Scalar> {
    p.get(i).filter(|s| s.tag >= 0)
}

fn pf(p: &[Scalar], i: usize, default: f64) -> f64 {
    param(p, i).map(f64::from_scalar).unwrap_or(default)
}

/// Runs `op` elementwise: `out = op(a)`. `out` has `a`'s dtype, or bool for predicates.
pub fn unary(op: UnaryOp, out: &TensorMut, a: &TensorRef, p: &[Scalar]) -> FooResult<()> {
    if op.is_predicate() {
        return crate::dispatch!(all: a.dtype, T => predicate::<T>(op, out, a));
    }
    if let (UnaryOp::Neg | UnaryOp::Abs, crate::DType::F16 | crate::DType::BF16) = (op, a.dtype) {
        return sign_bit_16(op, out, a);
    }
    crate::dispatch!(float: a.dtype, F => float_unary::<F>(op, out, a, p),
    _ => crate::dispatch!(int: a.dtype, I => int_unary::<I>(op, out, a, p),
        _ => match a.dtype {
            crate::DType::Bool => bool_unary(op, out, a),
            other => crate::unsupported!("foo {op:?} has no kernel for dtype {}", other.name()),
        }))
}

/// Negation and magnitude of float16 and bfloat16 flip or clear the sign bit of each 16-bit
/// value, as the CPU's vectorized loops do (a NaN keeps its payload there too): widening them to
/// float32 and back took 1.9-3.1x the CPU's time ([256,1024] on a Zen 3, 2 threads).
fn sign_bit_16(op: UnaryOp, out: &TensorMut, a: &TensorRef) -> FooResult<()> {
    let (keep, flip) = if op == UnaryOp::Neg {
        (0xffff, 0x8000)
    } else {
        (0x7fff, 0)
    };
    match a.dtype {
        crate::DType::F16 => map1(out, a, move |x: half::f16| {
            half::f16::from_bits((x.to_bits() & keep) ^ flip)
        }),
        _ => map1(out, a, move |x: half::bf16| {
            half::bf16::from_bits((x.to_bits() & keep) ^ flip)
        }),
    }
}

fn predicate<T: Element>(op: UnaryOp, out: &TensorMut, a: &TensorRef) -> FooResult<()> {
    use UnaryOp::*;
    // Float predicates look at the value as f64 (exact for every float dtype); integers and
    // bools are always finite and never NaN.
    let is_float = matches!(T::KIND, crate::dtype::Kind::Float);
    let is_complex = matches!(T::KIND, crate::dtype::Kind::Complex);
    match op {
        LogicalNot => map1(out, a, move |x: T| !x.to_bool()),
        IsNan if is_complex => map1(out, a, move |x: T| {
            x.to_c64().re.is_nan() || x.to_c64().im.is_nan()
        }),
        IsNan => map1(out, a, move |x: T| is_float && x.to_f64().is_nan()),
        IsInf if is_complex => map1(out, a, move |x: T| {
            x.to_c64().re.is_infinite() || x.to_c64().im.is_infinite()
        }),
        IsInf => map1(out, a, move |x: T| is_float && x.to_f64().is_infinite()),
        IsFinite if is_complex => map1(out, a, move |x: T| {
            x.to_c64().re.is_finite() && x.to_c64().im.is_finite()
        }),
        IsFinite => map1(out, a, move |x: T| !is_float || x.to_f64().is_finite()),
        IsPosInf => map1(out, a, move |x: T| is_float && x.to_f64() == f64::INFINITY),
        IsNegInf => map1(out, a, move |x: T| {
            is_float && x.to_f64() == f64::NEG_INFINITY
        }),
        Signbit if is_float => map1(out, a, move |x: T| x.to_f64().is_sign_negative()),
        Signbit => map1(out, a, move |x: T| x.to_i64() < 0),
        _ => unreachable!("not a predicate"),
    }
}

/// Inverse error function: Giles' single-precision approximation ("Approximating the erfinv
/// function", GPU Computing Gems, 2011) refined by two Newton steps on erf, for f64 accuracy.
pub fn erfinv(y: f64) -> f64 {
    if y.is_nan() || !(-1.0..=1.0).contains(&y) {
        return f64::NAN;
    }
    if y == 1.0 {
        return f64::INFINITY;
    }
    if y == -1.0 {
        return f64::NEG_INFINITY;
    }
    let w = -((1.0 - y) * (1.0 + y)).ln();
    let mut x = if w < 5.0 {
        let w = w - 2.5;
        let mut p = 2.810_226_36e-08;
        for c in [
            3.432_739_39e-07,
            -3.523_387_7e-06,
            -4.391_506_54e-06,
            0.000_218_580_87,
            -0.001_253_725_03,
            -0.004_177_681_64,
            0.246_640_727,
            1.501_409_41,
        ] {
            p = c + p * w;
        }
        p * y
    } else {
        let w = w.sqrt() - 3.0;
        let mut p = -0.000_200_214_257;
        for c in [
            0.000_100_950_558,
            0.001_349_343_22,
            -0.003_673_428_44,
            0.005_739_507_73,
            -0.007_622_461_3,
            0.009_438_870_47,
            1.001_674_06,
            2.832_976_82,
        ] {
            p = c + p * w;
        }
        p * y
    };
    // Newton: f(x) = erf(x) - y, f'(x) = 2/sqrt(pi) * exp(-x^2).
    for _ in 0..2 {
        let err = libm::erf(x) - y;
        x -= err / (std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp());
    }
    x
}

/// Whether `a` has a finite element too large for `Math::vsin`/`vcos`'s argument reduction.
fn beyond_trig_fast_range<F: FloatStore>(a: &TensorRef) -> bool {
    type M<F> = <F as FloatStore>::M;
    let limit = M::<F>::TRIG_FAST_LIMIT;
    if !limit.is_finite() {
        return false;
    }
    let (limit, inf) = (M::<F>::from_f64c(limit), M::<F>::infinity());
    any1::<F>(a, |v| {
        let x = v.load().abs();
        x >= limit && x < inf
    })
}

fn float_unary<F: FloatStore>(
    op: UnaryOp,
    out: &TensorMut,
    a: &TensorRef,
    p: &[Scalar],
) -> FooResult<()> {
    use UnaryOp::*;
    type Mf<F> = <F as FloatStore>::M;
    let c = |v: f64| Mf::<F>::from_f64c(v);
    macro_rules! m {
        (|$x:ident| $e:expr) => {
            m!(@run Blocks, |$x, _isa| $e)
        };
        // `$isa`: the loop copy's instruction set, for the `Math::v*` functions.
        (|$x:ident, $isa:ident| $e:expr) => {
            m!(@run Blocks, |$x, $isa| $e)
        };
        (@run $s:ident, |$x:ident, $isa:ident| $e:expr) => {
            // Always inlined, as binary.rs's `m!`.
            map1_float::<F, $s>(
                out,
                a,
                #[inline(always)]
                move |$x: Mf<F>, $isa: Isa| $e,
            )
        };
    }
    // Dense float32, bfloat16 and float16 with an AVX-512 form of their math
    // (`core::vmath_avx512`, the same bits) take that; the rest, and other CPUs, the scalar form.
    macro_rules! v {
        ($op:ident, |$x:ident, $isa:ident| $e:expr) => {
            if avx512::map1(VecOp::$op, out, a) {
                Ok(())
            } else {
                m!(|$x, $isa| $e)
            }
        };
    }
    // Arithmetic: float16 in vectors (`core::widened::Vectors`).
    macro_rules! mv {
        (|$x:ident| $e:expr) => {
            m!(@run Vectors, |$x, _isa| $e)
        };
    }
    let zero = Mf::<F>::zero();
    let one = Mf::<F>::one();
    match op {
        Neg => mv!(|x| -x),
        Abs => mv!(|x| x.abs()),
        Sign => m!(|x| if x > zero {
            one
        } else if x < zero {
            -one
        } else {
            zero
        }),
        // sgn(NaN) is 0 on CPU, like sign.
        Sgn => m!(|x| if x > zero {
            one
        } else if x < zero {
            -one
        } else {
            zero
        }),
        Exp => v!(Exp, |x, isa| x.vexp(isa)),
        Exp2 => m!(|x, isa| x.vexp2(isa)),
        Expm1 => m!(|x| x.exp_m1()),
        Log => m!(|x, isa| x.vln(isa)),
        Log2 => m!(|x| x.log2()),
        Log10 => m!(|x| x.log10()),
        Log1p => m!(|x| x.ln_1p()),
        Sqrt => m!(|x| x.sqrt()),
        Rsqrt => m!(|x| one / x.sqrt()),
        Reciprocal => m!(|x| one / x),
        // The vectorized forms, unless some finite element is beyond their exact range.
        Sin | Cos if beyond_trig_fast_range::<F>(a) => match op {
            Sin => m!(|x| x.sin()),
            _ => m!(|x| x.cos()),
        },
        Sin => m!(|x, isa| x.vsin(isa)),
        Cos => m!(|x, isa| x.vcos(isa)),
        Tan => m!(|x| x.tan()),
        Tanh => v!(Tanh, |x, isa| x.vtanh(isa)),
        Asin => m!(|x| x.asin()),
        Acos => m!(|x| x.acos()),
        Atan => m!(|x| x.atan()),
        Sinh => m!(|x| x.sinh()),
        Cosh => m!(|x| x.cosh()),
        Asinh => m!(|x| x.asinh_wide()),
        Acosh => m!(|x| x.acosh_wide()),
        Atanh => m!(|x| x.atanh_accurate()),
        Sigmoid => v!(Sigmoid, |x, isa| x.vsigmoid(isa)),
        // As the CPU: NaN and -0.0 fail `x < 0` and pass through. Vectorized as a max and a
        // blend. NaN has an arm of its own (`x + 0` keeps it): where every arm but one returns
        // `x`, `relu_` writes only the other arm, a conditional store, which AVX2 does with
        // microcoded `vmaskmovps` (6.3x the CPU's time on a Zen 3). (The `x > 0 || x.is_nan()`
        // spelling did not vectorize: 2x abs's time.)
        Relu => m!(|x| if x.is_nan() {
            x + zero
        } else if x < zero {
            zero
        } else {
            x
        }),
        Gelu if pf(p, 0, 0.0) != 0.0 => {
            let k = c((2.0 / std::f64::consts::PI).sqrt());
            let k1 = c(0.044715);
            let half = c(0.5);
            v!(GeluTanh, |x, isa| half
                * x
                * (one + (k * (x + k1 * x * x * x)).vtanh(isa)))
        }
        Gelu => v!(Gelu, |x, isa| x * x.vnormal_cdf(isa)),
        Silu => v!(Silu, |x, isa| x * x.vsigmoid(isa)),
        Mish => m!(|x| x * x.exp().ln_1p().tanh()),
        Softplus => {
            let beta = c(pf(p, 0, 1.0));
            let threshold = c(pf(p, 1, 20.0));
            m!(|x| if x * beta > threshold {
                x
            } else {
                (x * beta).exp().ln_1p() / beta
            })
        }
        Erf => m!(|x, isa| x.verf(isa)),
        Erfc => v!(Erfc, |x, isa| x.verfc(isa)),
        Erfinv => m!(|x| Mf::<F>::from_f64c(erfinv(x.to_f64c()))),
        // The CPU's formula: 1 at 0, else sin(pi x) / (pi x) in the math type.
        Sinc => {
            let pi = c(std::f64::consts::PI);
            m!(|x| if x == zero {
                one
            } else {
                let y = pi * x;
                y.sin() / y
            })
        }
        Floor => m!(|x| x.floor()),
        Ceil => m!(|x| x.ceil()),
        Trunc => m!(|x| x.trunc()),
        Frac => m!(|x| x - x.trunc()),
        Round => {
            let decimals = param(p, 0).map(i64::from_scalar).unwrap_or(0);
            if decimals == 0 {
                m!(|x| x.round_even())
            } else {
                let ten = c(10f64.powi(decimals.unsigned_abs() as i32));
                if decimals > 0 {
                    m!(|x| (x * ten).round_even() / ten)
                } else {
                    m!(|x| (x / ten).round_even() * ten)
                }
            }
        }
        Clamp => {
            let lo = param(p, 0).map(|s| c(f64::from_scalar(s)));
            let hi = param(p, 1).map(|s| c(f64::from_scalar(s)));
            // torch.clamp: NaN inputs stay NaN; a NaN bound makes the result NaN.
            m!(|x| {
                let mut y = x;
                if let Some(l) = lo {
                    y = if y.is_nan() || l.is_nan() {
                        y + l
                    } else if y < l {
                        l
                    } else {
                        y
                    };
                }
                if let Some(h) = hi {
                    y = if y.is_nan() || h.is_nan() {
                        y + h
                    } else if y > h {
                        h
                    } else {
                        y
                    };
                }
                y
            })
        }
        NanToNum => {
            let nan = c(pf(p, 0, 0.0));
            let pos = param(p, 1)
                .map(|s| c(f64::from_scalar(s)))
                .unwrap_or(F::max_finite().load());
            let neg = param(p, 2)
                .map(|s| c(f64::from_scalar(s)))
                .unwrap_or(F::min_finite().load());
            m!(|x| if x.is_nan() {
                nan
            } else if x == Mf::<F>::infinity() {
                pos
            } else if x == Mf::<F>::neg_infinity() {
                neg
            } else {
                x
            })
        }
        LeakyRelu => {
            let slope = c(pf(p, 0, 0.01));
            // NaN in an arm of its own, as Relu's (in place, a conditional store otherwise).
            m!(|x| if x.is_nan() {
                x + zero
            } else if x > zero {
                x
            } else {
                x * slope
            })
        }
        Elu => {
            let alpha = c(pf(p, 0, 1.0));
            let scale = c(pf(p, 1, 1.0));
            let input_scale = c(pf(p, 2, 1.0));
            m!(|x| if x > zero {
                scale * x
            } else {
                scale * alpha * ((x * input_scale).exp() - one)
            })
        }
        Hardsigmoid => {
            let (three, six) = (c(3.0), c(6.0));
            // `max`/`min` drop a NaN operand; the CPU backend returns NaN for NaN.
            m!(|x| if x.is_nan() {
                x
            } else {
                ((x + three).max(zero)).min(six) / six
            })
        }
        Hardswish => {
            let (three, six) = (c(3.0), c(6.0));
            m!(|x| x * ((x + three).max(zero)).min(six) / six)
        }
        Square => mv!(|x| x * x),
        Cube => m!(|x| F::store(x * x).load() * x),
        Threshold => {
            let (th, value) = (c(pf(p, 0, 0.0)), c(pf(p, 1, 0.0)));
            // NaN is not <= anything: it passes through, as on CPU (its own arm, as Relu's).
            m!(|x| if x.is_nan() {
                x + zero
            } else if x <= th {
                value
            } else {
                x
            })
        }
        BitwiseNot => not_implemented!("bitwise_not is only defined for integer and bool tensors"),
        LogicalNot | IsNan | IsInf | IsFinite | Signbit | IsPosInf | IsNegInf => {
            unreachable!("predicates are dispatched earlier")
        }
    }
}

fn int_unary<I: IntElem>(
    op: UnaryOp,
    out: &TensorMut,
    a: &TensorRef,
    p: &[Scalar],
) -> FooResult<()> {
    use UnaryOp::*;
    match op {
        Neg => map1(out, a, move |x: I| x.wrapping_neg()),
        Abs => map1(out, a, move |x: I| x.wabs()),
        Sign | Sgn => map1(out, a, move |x: I| x.sign()),
        // A max, not a compare and select: in place the select is a conditional store (Relu).
        Relu => map1(out, a, move |x: I| x.max(I::zero())),
        Floor | Ceil | Round | Trunc => map1(out, a, move |x: I| x),
        Square => map1(out, a, move |x: I| x.wrapping_mul(&x)),
        Threshold => {
            // The CPU converts both scalars to the tensor's type first (0.5 -> 0).
            let th = param(p, 0).map(I::from_scalar).unwrap_or(I::zero());
            let value = param(p, 1).map(I::from_scalar).unwrap_or(I::zero());
            map1(out, a, move |x: I| if x <= th { value } else { x })
        }
        BitwiseNot => map1(out, a, move |x: I| !x),
        Clamp => {
            // Compare in i128 so that a bound outside the dtype's range (clamp(uint8, -3, 7)) acts
            // as on CPU instead of wrapping around.
            let bound = |s: &Scalar| -> i128 {
                if s.tag == Scalar::TAG_UINT {
                    s.i as u64 as i128
                } else {
                    i64::from_scalar(s) as i128
                }
            };
            let lo = param(p, 0).map(bound);
            let hi = param(p, 1).map(bound);
            let wide = |x: I| -> i128 {
                if I::SIGNED {
                    Element::to_i64(x) as i128
                } else {
                    Element::to_u64(x) as i128
                }
            };
            map1(out, a, move |x: I| {
                let mut y = wide(x);
                if let Some(l) = lo {
                    y = y.max(l);
                }
                if let Some(h) = hi {
                    y = y.min(h);
                }
                if I::SIGNED {
                    I::from_i64(y as i64)
                } else {
                    I::from_u64(y as u64)
                }
            })
        }
        NanToNum => map1(out, a, move |x: I| x),
        _ => not_implemented!(
            "foo {op:?} is not defined for integer dtype {} (the glue promotes to float)",
            a.dtype.name()
        ),
    }
}

fn bool_unary(op: UnaryOp, out: &TensorMut, a: &TensorRef) -> FooResult<()> {
    use UnaryOp::*;
    match op {
        BitwiseNot => map1(out, a, move |x: bool| !x),
        Abs | Relu | Floor | Ceil | Trunc | Round | Sign | Sgn | NanToNum => {
            map1(out, a, move |x: bool| x)
        }
        // ATen's own check, word for word (users grep for it).
        Neg => Err(FooError::NotImplemented(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to \
             invert a mask, use the `~` or `logical_not()` operator instead."
                .into(),
        )),
        _ => not_implemented!("foo {op:?} is not defined for bool tensors"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    #[test]
    fn float_and_half() {
        let a = Owned::new(vec![-1.5f32, 0.0, 2.5, f32::NAN], &[4]);
        let mut o = Owned::<f32>::zeros(&[4]);
        unary(UnaryOp::Relu, &o.m(), &a.r(), &[]).unwrap();
        assert_eq!(&o.data[..3], &[0.0, 0.0, 2.5]);
        assert!(o.data[3].is_nan());
        unary(UnaryOp::Round, &o.m(), &a.r(), &[]).unwrap();
        assert_eq!(&o.data[..3], &[-2.0, 0.0, 2.0]);
        let h = Owned::new(vec![half::f16::from_f32(0.5)], &[1]);
        let mut ho = Owned::<half::f16>::zeros(&[1]);
        unary(UnaryOp::Exp, &ho.m(), &h.r(), &[]).unwrap();
        assert_eq!(ho.data[0], half::f16::from_f32(0.5f32.exp()));
    }

    #[test]
    fn erfinv_inverts_erf() {
        for &y in &[-0.999, -0.5, -1e-8, 0.0, 0.3, 0.9, 0.999_999] {
            assert!((libm::erf(erfinv(y)) - y).abs() < 1e-14, "{y}");
        }
        assert!(erfinv(1.5).is_nan());
        assert_eq!(erfinv(1.0), f64::INFINITY);
    }

    #[test]
    fn predicates_and_ints() {
        let a = Owned::new(vec![1.0f64, f64::INFINITY, f64::NAN], &[3]);
        let mut o = Owned::<bool>::zeros(&[3]);
        unary(UnaryOp::IsFinite, &o.m(), &a.r(), &[]).unwrap();
        assert_eq!(o.data, vec![true, false, false]);
        let i = Owned::new(vec![-3i64, 0, 7], &[3]);
        let mut io = Owned::<i64>::zeros(&[3]);
        unary(
            UnaryOp::Clamp,
            &io.m(),
            &i.r(),
            &[Scalar::from_i64(-1), Scalar::from_i64(5)],
        )
        .unwrap();
        assert_eq!(io.data, vec![-1, 0, 5]);
        assert!(unary(UnaryOp::Exp, &io.m(), &i.r(), &[]).is_err());
    }
}
