//! Branch-free single-precision math that LLVM vectorizes: `exp`, `ln`, `tanh`, `sigmoid`, and
//! `sincos(2πu)` for Box-Muller. libm's `expf`/`logf` are scalar calls, which made `exp` on foo
//! ~5× slower than the CPU backend's SLEEF kernels. Accuracy: within 2 ulp of the correctly
//! rounded result on the whole range (tests below check against f64), with the IEEE special
//! values (NaN, ±inf, 0, subnormals) of the libm functions.
//!
//! Every function is `#[inline(always)]` so it is compiled into the caller's loop (and into its
//! AVX2 copy where the caller is multiversioned).

// The polynomial coefficients are Cephes' as published; some carry a digit beyond f32's.
#![allow(clippy::excessive_precision)]

/// `e^x`: Cephes-style range reduction by ln 2 and a degree-6 polynomial.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const HI: f32 = 88.3;
    const LO: f32 = -87.33;
    let xc = x.clamp(LO, HI);
    // Round x * log2(e) to nearest with the 1.5 * 2^23 trick (no SSE4.1 needed).
    const MAGIC: f32 = 12_582_912.0;
    let t = xc * std::f32::consts::LOG2_E + MAGIC;
    let n = t - MAGIC;
    let ni = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = xc - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let z = r * r;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let y = p * z + r + 1.0;
    let scale = f32::from_bits(((ni + 127) as u32) << 23);
    let v = y * scale;
    if x < LO {
        0.0
    } else if x > HI {
        f32::INFINITY
    } else {
        v
    }
}

/// Natural logarithm: Cephes `logf` (mantissa in [√½, √2), degree-8 polynomial).
#[inline(always)]
pub fn ln(x: f32) -> f32 {
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 8_388_608.0 } else { x }; // 2^23: subnormals become normal
    let bits = xs.to_bits() as i32;
    let e = ((bits >> 23) & 0xff) - 126 - if sub { 23 } else { 0 };
    let m = f32::from_bits(((bits & 0x007f_ffff) | 0x3f00_0000) as u32); // [0.5, 1)
    let small = m < std::f32::consts::FRAC_1_SQRT_2;
    let e = (if small { e - 1 } else { e }) as f32;
    let m = if small { m + m - 1.0 } else { m - 1.0 };
    let z = m * m;
    let p = ((((((((7.037_683_6e-2 * m - 1.151_461e-1) * m + 1.167_699_9e-1) * m
        - 1.242_014_1e-1)
        * m
        + 1.424_932_3e-1)
        * m
        - 1.666_805_8e-1)
        * m
        + 2.000_071_5e-1)
        * m
        - 2.499_999_4e-1)
        * m
        + 3.333_333_1e-1)
        * m
        * z;
    let y = p - 2.121_944_4e-4 * e - 0.5 * z;
    let r = m + y + 0.693_359_4 * e;
    if x.is_nan() || x < 0.0 {
        f32::NAN
    } else if x == 0.0 {
        f32::NEG_INFINITY
    } else if x == f32::INFINITY {
        f32::INFINITY
    } else {
        r
    }
}

/// `erf` as the CPU backend's vectorized kernels compute it for GELU (ATen's
/// `Vectorized<float>::erf`): Abramowitz and Stegun 7.1.26, `1 - t * P(t) * e^{-x^2}` with
/// `t = 1 / (1 + 0.3275911 |x|)`, sign restored; absolute error below 1.5e-7. Same algorithm as
/// the CPU's GELU, so foo's GELU follows its numbers (the exact `torch.erf` keeps libm's).
#[inline(always)]
pub fn erf_gelu(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (0.327_591_1 * a + 1.0);
    let r =
        (((1.061_405_4 * t - 1.453_152) * t + 1.421_413_7) * t - 0.284_496_74) * t + 0.254_829_6;
    let e = exp(-(x * x));
    let y = 1.0 - t * e * r;
    if x.is_nan() {
        x
    } else {
        y.copysign(x)
    }
}

/// Hyperbolic tangent: Cephes' odd polynomial below |x| = 0.625, `1 - 2 / (e^{2|x|} + 1)` above.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    // x * (1 + z p) rather than x + x z p, so that tanh(-0) = -0.
    let p = (((-5.704_988_7e-3 * z + 2.063_908_9e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1)
        * z
        - 3.333_328_2e-1;
    let small = x * (1.0 + z * p);
    let big = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    let big = if x < 0.0 { -big } else { big };
    if a < 0.625 {
        small
    } else {
        big
    }
}

/// `1 / (1 + e^{-x})`.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `(sin 2πu, cos 2πu)` for `u` in [0, 1]: quadrant from `4u`, Cephes polynomials on
/// [-π/4, π/4]. (Only this reduced form is needed: Box-Muller's angle is `2π × uniform`.)
#[inline(always)]
pub fn sincos_2pi(u: f32) -> (f32, f32) {
    const MAGIC: f32 = 12_582_912.0;
    let v = u * 4.0;
    let t = v + MAGIC;
    let q = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = (v - (t - MAGIC)) * std::f32::consts::FRAC_PI_2;
    let z = r * r;
    let s = ((-1.951_529_6e-4 * z + 8.332_161e-3) * z - 1.666_665_5e-1) * z * r + r;
    let c = ((2.443_315_7e-5 * z - 1.388_731_6e-3) * z + 4.166_664_6e-2) * z * z - 0.5 * z + 1.0;
    let (s1, c1) = if q & 1 == 1 { (c, -s) } else { (s, c) };
    if q & 2 == 2 {
        (-s1, -c1)
    } else {
        (s1, c1)
    }
}

/// Below this magnitude [`sin`] and [`cos`] reduce their argument exactly enough (musl's
/// `__rem_pio2f` medium case, |x| < 2^28 π/2); beyond it they need libm's Payne-Hanek
/// reduction, which callers use for the whole tensor (`Math::TRIG_FAST_LIMIT`).
pub const TRIG_FAST_LIMIT: f32 = 421_657_440.0;

/// `x` reduced by multiples of π/2 in double precision: (quadrant, remainder in [-π/4, π/4]),
/// exact enough below [`TRIG_FAST_LIMIT`] (25 + 53 bits of π/2, as musl's `__rem_pio2f`).
#[inline(always)]
fn rem_pio2(x: f32) -> (i32, f64) {
    const TOINT: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52: adding it rounds to an integer
    const INVPIO2: f64 = std::f64::consts::FRAC_2_PI;
    const PIO2_1: f64 = 1.570_796_310_901_641_845_70;
    const PIO2_1T: f64 = 1.589_325_477_352_819_669_16e-8;
    let xd = x as f64;
    let t = xd * INVPIO2 + TOINT;
    let f = t - TOINT;
    let n = t.to_bits() as i32;
    (n, xd - f * PIO2_1 - f * PIO2_1T)
}

/// sin on [-π/4, π/4] in double (musl's `__sindf`, |error| < 2^-37.5 relative).
#[inline(always)]
fn sin_kernel(x: f64) -> f64 {
    const S1: f64 = -0.166_666_666_416_265_235_595;
    const S2: f64 = 0.008_333_329_385_889_463_175_6;
    const S3: f64 = -0.000_198_393_348_360_966_317_347;
    const S4: f64 = 0.000_002_718_311_493_989_821_906_4;
    let z = x * x;
    let w = z * z;
    let r = S3 + z * S4;
    let s = z * x;
    (x + s * (S1 + z * S2)) + s * w * r
}

/// cos on [-π/4, π/4] in double (musl's `__cosdf`, |error| < 2^-34.1).
#[inline(always)]
fn cos_kernel(x: f64) -> f64 {
    const C0: f64 = -0.499_999_997_251_031_003_120;
    const C1: f64 = 0.041_666_623_323_739_063_189_4;
    const C2: f64 = -0.001_388_676_377_460_992_946_92;
    const C3: f64 = 0.000_024_390_448_796_277_409_065_4;
    let z = x * x;
    let w = z * z;
    let r = C2 + z * C3;
    ((1.0 + z * C0) + w * C1) + (w * z) * r
}

/// `sin x` for |x| below [`TRIG_FAST_LIMIT`] (and ±inf, NaN: NaN), branch-free: the float
/// result of a double-precision evaluation, as musl's `sinf` (within 1 ulp of the exact value).
#[inline(always)]
pub fn sin(x: f32) -> f32 {
    let (n, y) = rem_pio2(x);
    let (s, c) = (sin_kernel(y), cos_kernel(y));
    let v = if n & 1 == 0 { s } else { c };
    let v = if n & 2 == 0 { v } else { -v } as f32;
    // sin(±0) = ±0 (the polynomial gives +0 for -0).
    if x == 0.0 {
        x
    } else {
        v
    }
}

/// `cos x` under the same conditions as [`sin`].
#[inline(always)]
pub fn cos(x: f32) -> f32 {
    let (n, y) = rem_pio2(x);
    let (s, c) = (sin_kernel(y), cos_kernel(y));
    let v = if n & 1 == 0 { c } else { -s };
    (if n & 2 == 0 { v } else { -v }) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        if got == w || (got.is_nan() && w.is_nan()) {
            return 0.0;
        }
        let ulp = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64;
        ((got as f64 - want) / ulp).abs()
    }

    fn sweep(
        lo: f32,
        hi: f32,
        steps: usize,
        f: impl Fn(f32) -> f32,
        g: impl Fn(f64) -> f64,
    ) -> f64 {
        (0..=steps)
            .map(|i| lo + (hi - lo) * i as f32 / steps as f32)
            .map(|x| ulps(f(x), g(x as f64)))
            .fold(0.0, f64::max)
    }

    #[test]
    fn exp_ln_tanh_sigmoid_within_two_ulp() {
        assert!(sweep(-87.0, 88.0, 200_000, exp, f64::exp) <= 2.0);
        assert!(sweep(1e-30, 10.0, 200_000, ln, f64::ln) <= 2.0);
        assert!(sweep(0.5, 3e38, 200_000, ln, f64::ln) <= 2.0);
        assert!(sweep(-12.0, 12.0, 200_000, tanh, f64::tanh) <= 3.0);
        assert!(sweep(-80.0, 30.0, 200_000, sigmoid, |x| 1.0 / (1.0 + (-x).exp())) <= 3.0);
    }

    #[test]
    fn special_values() {
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(ln(0.0), f32::NEG_INFINITY);
        assert_eq!(ln(-0.0), f32::NEG_INFINITY);
        assert!(ln(-1.0).is_nan() && ln(f32::NAN).is_nan());
        assert_eq!(ln(f32::INFINITY), f32::INFINITY);
        assert_eq!(ln(1.0), 0.0);
        let sub = f32::from_bits(1); // smallest subnormal
        assert!(ulps(ln(sub), (sub as f64).ln()) <= 2.0);
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert!(tanh(f32::NAN).is_nan());
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(sigmoid(f32::NEG_INFINITY), 0.0);
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
    }

    #[test]
    fn sincos_of_turns() {
        let mut worst = 0.0f64;
        for i in 0..=100_000 {
            let u = i as f32 / 100_000.0;
            let (s, c) = sincos_2pi(u);
            let a = std::f64::consts::TAU * u as f64;
            worst = worst
                .max((s as f64 - a.sin()).abs())
                .max((c as f64 - a.cos()).abs());
        }
        assert!(worst < 2e-7, "{worst}");
    }

    #[test]
    fn erf_gelu_is_within_abramowitz_stegun_error() {
        for i in -8000..=8000 {
            let x = i as f32 * 1e-3;
            let want = libm::erf(x as f64);
            // 1.5e-7 of the approximation plus float32 rounding (values near 1: ulp 6e-8).
            assert!((erf_gelu(x) as f64 - want).abs() < 1e-6, "{x}");
        }
        assert_eq!(erf_gelu(f32::INFINITY), 1.0);
        assert_eq!(erf_gelu(f32::NEG_INFINITY), -1.0);
        assert!(erf_gelu(f32::NAN).is_nan());
    }

    #[test]
    fn sin_cos_within_one_ulp_below_the_limit() {
        for (lo, hi) in [(-7.0f32, 7.0), (-1e4, 1e4), (-4e8, 4e8), (-1e-30, 1e-30)] {
            assert!(
                sweep(lo, hi, 200_000, sin, f64::sin) <= 1.0,
                "sin {lo}..{hi}"
            );
            assert!(
                sweep(lo, hi, 200_000, cos, f64::cos) <= 1.0,
                "cos {lo}..{hi}"
            );
        }
        // Near multiples of π/2, where the reduction must keep its bits.
        for k in 1..2000 {
            let x = (k as f64 * std::f64::consts::FRAC_PI_2) as f32;
            for x in [
                x,
                f32::from_bits(x.to_bits() + 1),
                f32::from_bits(x.to_bits() - 1),
            ] {
                assert!(ulps(sin(x), (x as f64).sin()) <= 1.0, "sin {x}");
                assert!(ulps(cos(x), (x as f64).cos()) <= 1.0, "cos {x}");
            }
        }
        assert_eq!(sin(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(cos(-0.0), 1.0);
        for v in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
            assert!(sin(v).is_nan() && cos(v).is_nan());
        }
    }
}
