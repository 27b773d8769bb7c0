//! Branch-free single-precision math that LLVM vectorizes: `exp`, `ln`, `tanh`, `sigmoid`,
//! `erf`, `erfc`, `sin`, `cos`, and `sincos(2πu)` for Box-Muller. libm's `expf`/`logf`/`erff`
//! are scalar calls, which made `exp` on foo ~5× slower than the CPU backend's SLEEF kernels
//! (`erf` 20×). Accuracy: within 2 ulp of the correctly rounded result on the whole range
//! (`sigmoid` 2.5; tests below check against f64, `worst_ulps` every float), with the IEEE
//! special values (NaN, ±inf, ±0, subnormals) of the libm functions.
//!
//! Every function is `#[inline(always)]` so it is compiled into the caller's loop (and into its
//! AVX2 / AVX-512 copies where the caller is multiversioned). Each takes the [`Isa`] of the
//! copy it is compiled into: polynomials are evaluated with [`Isa::mul_add`], fused where the
//! copy has FMA, a multiply and an add in the baseline one (where `f32::mul_add` would be a
//! call to libm's `fmaf`). Both evaluations are within the stated accuracy (the tests run both).

// Cephes' polynomial coefficients are as published, some with a digit beyond f32's; the others
// are minimax fits (Remez, in high precision) rounded to f32.
#![allow(clippy::excessive_precision)]

use super::simd::Isa;

/// `c[0] x^(N-1) + c[1] x^(N-2) + ... + c[N-1]` by Horner's rule, with `isa`'s multiply-add.
#[inline(always)]
fn poly<const N: usize>(isa: Isa, x: f32, c: [f32; N]) -> f32 {
    let mut acc = c[0];
    for &ck in &c[1..] {
        acc = isa.mul_add(acc, x, ck);
    }
    acc
}

/// Rounds `t - MAGIC` to an integer: `t` is `x + MAGIC` (or `fma(x, c, MAGIC)`), |x| < 2^22,
/// which rounds `x` to the nearest integer (the 1.5 * 2^23 trick: no SSE4.1 needed). Returns
/// that integer as f32 and as i32.
#[inline(always)]
fn round_int(t: f32) -> (f32, i32) {
    let n = t - MAGIC;
    (n, (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32))
}

pub(super) const MAGIC: f32 = 12_582_912.0;

/// `expm1_kernel`'s `P`.
pub(super) const EXPM1_P: [f32; 5] = [
    1.381_419_1e-3,
    8.368_914e-3,
    4.166_840_8e-2,
    1.666_652e-1,
    4.999_999_4e-1,
];

/// [`normal_cdf`]'s intervals: `|x| = i W + r`, `i` the nearest integer to `|x| / W`, `|r| <= W / 2`.
pub(super) const CDF_W: f32 = 0.375;
pub(super) const CDF_INV_W: f32 = 1.0 / CDF_W;
/// `|x|` is clamped here, into the last interval, where `Φ(|x|) - 1/2` is 1/2: `Φ` rounds to 1
/// from 14.5 W = 5.4375 up (`Φ(-5.4375)` = 2.7e-8, under half an ulp below 1).
pub(super) const CDF_LIM: f32 = 15.0 * CDF_W;
/// [`normal_cdf`]'s polynomials in `r`, the coefficient of `r^5` first (Horner's order), one
/// column per interval (a row is one AVX-512 vector): minimax fits of `Φ(i W + r) - 1/2` (odd in
/// `r` on the first interval), absolute error 3e-8 in float32 arithmetic, rounded to float32
/// from the highest degree down, refitting the lower coefficients after each rounding.
pub(super) const CDF_P: [[f32; 16]; 6] = [
    [
        0.009899378754198551,
        0.0066958037205040455,
        -0.0001226347521878779,
        -0.005222857464104891,
        -0.005828908644616604,
        -0.003285569604486227,
        -0.0004806277574971318,
        0.0009525858913548291,
        0.0011018940713256598,
        0.0007202949491329491,
        0.0003441149019636214,
        0.00012934532423969358,
        3.95312781620305e-05,
        1.0002486305893399e-05,
        2.1188732262089616e-06,
        0.0,
    ],
    [
        0.0,
        0.01647254079580307,
        0.02277534082531929,
        0.017155146226286888,
        0.0061060767620801926,
        -0.0026961539406329393,
        -0.006083900574594736,
        -0.005398490000516176,
        -0.00332974037155509,
        -0.0015928178327158093,
        -0.0006165925296954811,
        -0.00019736199465114623,
        -5.290032640914433e-05,
        -1.1971029380219989e-05,
        -2.300008191014058e-06,
        0.0,
    ],
    [
        -0.06648905575275421,
        -0.05325949192047119,
        -0.021958455443382263,
        0.009378684684634209,
        0.026981985196471214,
        0.028840050101280212,
        0.021490788087248802,
        0.01249257568269968,
        0.0059092603623867035,
        0.002322499407455325,
        0.0007675843080505729,
        0.00021495170949492604,
        5.12663355038967e-05,
        1.0451734851812944e-05,
        1.8263440324517433e-06,
        0.0,
    ],
    [
        0.0,
        -0.06972093880176544,
        -0.11292435228824615,
        -0.11917967349290848,
        -0.0971386656165123,
        -0.06448813527822495,
        -0.03570782393217087,
        -0.016700705513358116,
        -0.006647694390267134,
        -0.002262998605147004,
        -0.0006610210984945297,
        -0.00016606964345555753,
        -3.594721056288108e-05,
        -6.712938102282351e-06,
        -1.0826198604263482e-06,
        0.0,
    ],
    [
        0.3989422619342804,
        0.37185508012771606,
        0.30113744735717773,
        0.21187664568424225,
        0.1295175999403,
        0.06878627836704254,
        0.031739648431539536,
        0.012724179774522781,
        0.004431847482919693,
        0.0013411189429461956,
        0.0003525959327816963,
        8.05406307335943e-05,
        1.5983825505827554e-05,
        2.755971308943117e-06,
        4.1285483121100697e-07,
        0.0,
    ],
    [
        0.0,
        0.1461697667837143,
        0.2733726501464844,
        0.369705468416214,
        0.43319278955459595,
        0.46960362792015076,
        0.4877755343914032,
        0.49566754698753357,
        0.49865010380744934,
        0.4996309280395508,
        0.4999115765094757,
        0.49998146295547485,
        0.4999966025352478,
        0.499999463558197,
        0.49999991059303284,
        0.5,
    ],
];

/// `erf_small`'s polynomial in `x²`.
pub(super) const ERF_SMALL_P: [f32; 7] = [
    7.889_122e-5,
    -8.020_842e-4,
    5.189_535e-3,
    -2.685_444_4e-2,
    1.128_36e-1,
    -3.761_262_6e-1,
    1.283_791_7e-1,
];

/// `erfc_big`'s `Q`.
pub(super) const ERFC_Q: [f32; 11] = [
    -439.070_7,
    311.669_56,
    -53.161_564,
    -26.437_054,
    22.208_9,
    -7.965_756_4,
    7.844_869e-2,
    2.086_126_1,
    -1.574_387_7,
    1.489_750_3e-1,
    2.489_335_1e-1,
];

/// `tanh`'s Cephes polynomial in `x²`, below 0.625.
pub(super) const TANH_P: [f32; 5] = [
    -5.704_988_7e-3,
    2.063_908_9e-2,
    -5.373_971_6e-2,
    1.333_144_2e-1,
    -3.333_328_2e-1,
];

/// ln 2 split for Cody-Waite reduction: `LN2_HI` has 9 significant bits, so `n * LN2_HI` is
/// exact for |n| < 2^15.
pub(super) const LN2_HI: f32 = 0.693_359_375;
pub(super) const LN2_LO: f32 = -2.121_944_4e-4;

/// `x = n ln 2 + r`, |r| <= ln(2)/2 (|x| < 2^15): `(r, n)`.
#[inline(always)]
fn exp_reduce(isa: Isa, x: f32) -> (f32, i32) {
    let (n, ni) = round_int(isa.mul_add(x, std::f32::consts::LOG2_E, MAGIC));
    (isa.mul_add(n, -LN2_LO, isa.mul_add(n, -LN2_HI, x)), ni)
}

/// `2^n` for `n` in [-126, 127].
#[inline(always)]
fn pow2(n: i32) -> f32 {
    f32::from_bits(((n + 127) as u32) << 23)
}

/// `e^r - 1` for |r| <= ln(2)/2 + 0.001: `r + r² P(r)`, `P` minimax for the relative error of
/// `e^r` (3.1e-9; Cephes' `expf` has one degree more).
#[inline(always)]
fn expm1_kernel(isa: Isa, r: f32) -> f32 {
    let p = poly(isa, r, EXPM1_P);
    isa.mul_add(p, r * r, r)
}

/// `e^x`: range reduction by ln 2 (Cody-Waite) and a degree-6 polynomial, within 1.1 ulp on the
/// whole range: subnormal results below `e^-87.3`, 0 below `e^-104`, +inf above `e^88.72`.
#[inline(always)]
pub fn exp(isa: Isa, x: f32) -> f32 {
    // Beyond these e^x rounds to 0 or overflows; clamping keeps n in [-150, 128] (NaN stays).
    let xc = x.clamp(-104.0, 89.0);
    let (r, n) = exp_reduce(isa, xc);
    // 2 e^r 2^(n-1): for n = 128, 2^(n-1) is finite and the product overflows to inf.
    let y2 = isa.mul_add(expm1_kernel(isa, r), 2.0, 2.0);
    // Subnormal results (n <= -125): 2^(n-1+32), then 2^-32, so that they round once.
    let sub = x < -86.5;
    let v = y2 * pow2(n - 1 + if sub { 32 } else { 0 });
    if sub {
        v * pow2(-32)
    } else {
        v
    }
}

/// `2^x`: `x = n + f` with `n` the nearest integer (`f` exact, |f| <= 1/2), `2^f = e^r` with
/// `r = f ln 2` rounded once (`ln 2` in two parts), then [`exp`]'s polynomial and scaling:
/// within 1.5 ulp on the whole range, subnormal results below `2^-126`, 0 below `2^-150`, +inf
/// from `2^128`. (libm's scalar `exp2f` had this op at 8.6x the CPU's time.)
#[inline(always)]
pub fn exp2(isa: Isa, x: f32) -> f32 {
    // ln 2 = LN2 + LN2_TAIL (LN2 is ln 2 rounded to float32).
    const LN2: f32 = std::f32::consts::LN_2;
    const LN2_TAIL: f32 = -1.904_654_3e-9;
    // Beyond these 2^x rounds to 0 or overflows; clamping keeps n in [-151, 128] (NaN stays).
    let xc = x.clamp(-151.0, 128.0);
    let (n, ni) = round_int(xc + MAGIC);
    let f = xc - n;
    let r = isa.mul_add(f, LN2, f * LN2_TAIL);
    // 2 e^r 2^(n-1): for n = 128, 2^(n-1) is finite and the product overflows to inf.
    let y2 = isa.mul_add(expm1_kernel(isa, r), 2.0, 2.0);
    // Subnormal results (n <= -125): 2^(n-1+32), then 2^-32, so that they round once.
    let sub = x < -124.5;
    let v = y2 * pow2(ni - 1 + if sub { 32 } else { 0 });
    if sub {
        v * pow2(-32)
    } else {
        v
    }
}

/// `e^x` for `x <= 0` (or NaN, which it returns) as [`exp`] gives it for `x >= -87`, and 0
/// below (where `e^x < 1.7e-38`, about the smallest normal float): no subnormal path.
#[inline(always)]
pub fn exp_flushed(isa: Isa, x: f32) -> f32 {
    let xc = if x < -87.0 { -87.0 } else { x };
    let v = exp_normal(isa, xc);
    if x < -87.0 {
        0.0
    } else {
        v
    }
}

/// `e^x` for `x` in [-87.3, 88.3] (callers clamp; NaN gives NaN): [`exp`] without its range
/// handling.
#[inline(always)]
fn exp_normal(isa: Isa, x: f32) -> f32 {
    let (r, n) = exp_reduce(isa, x);
    (expm1_kernel(isa, r) + 1.0) * pow2(n)
}

/// Natural logarithm: Cephes `logf` (mantissa in [√½, √2), degree-8 polynomial).
#[inline(always)]
pub fn ln(isa: Isa, x: f32) -> f32 {
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 8_388_608.0 } else { x }; // 2^23: subnormals become normal
    let bits = xs.to_bits() as i32;
    let e = ((bits >> 23) & 0xff) - 126 - if sub { 23 } else { 0 };
    let m = f32::from_bits(((bits & 0x007f_ffff) | 0x3f00_0000) as u32); // [0.5, 1)
    let small = m < std::f32::consts::FRAC_1_SQRT_2;
    let e = (if small { e - 1 } else { e }) as f32;
    let m = if small { m + m - 1.0 } else { m - 1.0 };
    let z = m * m;
    let p = poly(
        isa,
        m,
        [
            7.037_683_6e-2,
            -1.151_461e-1,
            1.167_699_9e-1,
            -1.242_014_1e-1,
            1.424_932_3e-1,
            -1.666_805_8e-1,
            2.000_071_5e-1,
            -2.499_999_4e-1,
            3.333_333_1e-1,
        ],
    ) * m
        * z;
    let y = isa.mul_add(z, -0.5, isa.mul_add(e, LN2_LO, p));
    let r = isa.mul_add(e, LN2_HI, m + y);
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

/// `Φ(x)`, the standard normal distribution function `(1 + erf(x / √2)) / 2`, for GELU
/// (`x Φ(x)`) and its gradient: `1/2 ± P_i(r)`, one of 16 polynomials of degree 5 in `r` picked
/// by `i` where `|x| = i W + r`; absolute error 6.1e-8 (GELU within 1.6 ulp for positive `x`;
/// for negative `x` the subtraction from 1/2 leaves an absolute error, as in the CPU backend's
/// forms). No exp and no division (ATen's Abramowitz-Stegun erf has both: 1.21x the time of
/// the CPU backend's oneDNN GELU on a Zen 5; this form, 18 instructions a vector, 0.61-0.66x);
/// the table is one vector per coefficient, looked up with a permute
/// (`vmath_avx512::normal_cdf`, same bits).
#[inline(always)]
pub fn normal_cdf(isa: Isa, x: f32) -> f32 {
    let a = x.abs();
    // NaN fails the comparison and stays NaN through every step.
    let a = if a > CDF_LIM { CDF_LIM } else { a };
    let t = isa.mul_add(a, CDF_INV_W, MAGIC);
    let (n, _) = round_int(t);
    let r = isa.mul_add(n, -CDF_W, a);
    // The low 4 bits of `t` are `i` (MAGIC's are 0): the lanes the vector form permutes by.
    let i = (t.to_bits() & 15) as usize;
    let mut acc = CDF_P[0][i];
    for row in &CDF_P[1..] {
        acc = isa.mul_add(acc, r, row[i]);
    }
    0.5 + acc.copysign(x)
}

/// `erf(x) / x - 1` for |x| <= 1, as a polynomial in `x²` (minimax, absolute error 1.2e-9).
#[inline(always)]
fn erf_small(isa: Isa, x: f32) -> f32 {
    poly(isa, x * x, ERF_SMALL_P)
}

/// The error function, within 1.2 ulp on the whole range with FMA, 1.5 without (SLEEF's
/// `erff_u1`, which the CPU backend uses, is within 1): `x + x P(x²)` below 1, `1 - e^{L(|x|)}`
/// above, `L` a minimax polynomial for `ln erfc` in `|x| - 1` on [1, 3.93] (absolute error of
/// `erfc` 1e-9); beyond 3.93 `erf` rounds to ±1.
#[inline(always)]
pub fn erf(isa: Isa, x: f32) -> f32 {
    let small = isa.mul_add(x, erf_small(isa, x), x);
    let a = x.abs();
    let l = poly(
        isa,
        (if a > 3.93 { 3.93 } else { a }) - 1.0, // NaN stays
        [
            1.855_736_8e-4,
            -1.826_162e-3,
            9.890_891e-3,
            -4.150_068_8e-2,
            -8.431_183e-1,
            -2.638_966_8,
            -1.849_605_6,
        ],
    );
    // erfc = 2^n (1 + em1), n in [-26, -2]; 1 - erfc with one rounding (1 - 2^n is exact for
    // n >= -24, and erf rounds to ±1 below).
    let (r, n) = exp_reduce(isa, l);
    let s = pow2(n);
    let big = isa.mul_add(-s, expm1_kernel(isa, r), 1.0 - s).copysign(x);
    if a < 1.0 {
        small
    } else {
        big
    }
}

/// Below this |x|, [`erfc`] is `1 - x - x P(x²)`; above, [`erfc_big`].
pub(super) const ERFC_SPLIT: f32 = 0.75;

/// [`ERFC_Q`] is a polynomial in `t - ERFC_TM`.
pub(super) const ERFC_TM: f32 = 0.223_674_24;

/// Beyond this, `erfc` is below 2^-150 (rounds to 0).
pub(super) const ERFC_MAX: f32 = 10.06;

/// `erfc(a)` for `a` in [[`ERFC_SPLIT`], [`ERFC_MAX`]] (callers clamp; NaN gives NaN), within
/// 1.7 ulp, subnormal results included (0 above 10.0542). With `t = 1 / (1 + 2a)`,
/// `erfc(a) = t e^{Q(t) - a²}`, `Q` a minimax polynomial in `t - ERFC_TM` (absolute error 4e-9).
/// The exponent is summed without losing bits (`a²` splits into an exact `z²` and a small
/// `d`; `ln 2` into `LN2_HI + LN2_LO`), and `t` carries the rounding errors of `1 + 2a` and of
/// the division as a correction `c`: no cancellation, and relative accuracy down to the
/// smallest subnormal.
#[inline(always)]
fn erfc_big(isa: Isa, a: f32) -> f32 {
    let a2 = a + a;
    let den = a2 + 1.0;
    let den_lo = (a2 - den) + 1.0; // den + den_lo = 1 + 2a exactly (Fast2Sum: 2a >= 1)
    let t = 1.0 / den;
    let q = poly(isa, t - ERFC_TM, ERFC_Q);
    // a² = z² + d: z keeps a's top 12 significant bits, so z² is exact, and d is small.
    let z = f32::from_bits(a.to_bits() & 0xffff_f000);
    let d = (a - z) * (a + z);
    let zz = z * z;
    // e^{q - a²} = 2^n e^r. z² and n LN2_HI are multiples of 2^-24 and the exact part of r is
    // below 1: exact.
    let qd = q - d;
    let (n, ni) = round_int(isa.mul_add(qd - zz, std::f32::consts::LOG2_E, MAGIC));
    let r = (-zz - n * LN2_HI) + isa.mul_add(n, -LN2_LO, qd);
    let em1 = expm1_kernel(isa, r);
    // 1 / (1 + 2a) = t (1 + e), e = 1 - t (den + den_lo).
    let e = isa.mul_add(-t, den_lo, isa.mul_add_exact(-t, den, 1.0));
    let c = t * e;
    // t (1 + e) e^r = t + (t em1 + c (1 + em1)).
    let m = t + isa.mul_add(t, em1, isa.mul_add(c, em1, c));
    // m 2^n, n in [-151, 0]: through 2^(n+64) (normal), then 2^-64, so that subnormal results
    // round once.
    m * pow2(ni + 64) * pow2(-64)
}

/// The complementary error function, within 1.7 ulp with FMA, 1.8 without (relative: no
/// cancellation for large `x`, subnormal results down to `erfc(10.05)`; SLEEF's `erfcf_u15`,
/// the CPU backend's, is within 1.5): `1 - x - x P(x²)` below 0.75 in magnitude,
/// [`erfc_big`] and `2 - erfc(|x|)` above.
#[inline(always)]
pub fn erfc(isa: Isa, x: f32) -> f32 {
    // 1 - x = hi + lo exactly (Fast2Sum: |x| < 1 where it is used).
    let hi = 1.0 - x;
    let lo = (1.0 - hi) - x;
    let small = hi + isa.mul_add(-x, erf_small(isa, x), lo);
    let a = x.abs();
    let e = erfc_big(isa, if a > ERFC_MAX { ERFC_MAX } else { a }); // NaN stays
    let big = if x < 0.0 { 2.0 - e } else { e };
    if a < ERFC_SPLIT {
        small
    } else {
        big
    }
}

/// Below this |x|, [`tanh`] is its odd polynomial ([`TANH_P`]).
pub(super) const TANH_SPLIT: f32 = 0.625;

/// Beyond this |x|, `tanh` rounds to ±1.
pub(super) const TANH_MAX: f32 = 9.1;

/// Hyperbolic tangent, within 1.3 ulp: Cephes' odd polynomial below |x| = 0.625,
/// `1 - 2 / (e^{2|x|} + 1)` above (1 beyond 9.1).
#[inline(always)]
pub fn tanh(isa: Isa, x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let p = poly(isa, z, TANH_P);
    // x (1 + z p) keeps tanh(-0) = -0.
    let small = x * isa.mul_add(z, p, 1.0);
    // e^{2a} + 1 = 2^n (1 + em1) + 1, n in [0, 26], without exp's range handling.
    let (r, n) = exp_reduce(isa, 2.0 * if a > TANH_MAX { TANH_MAX } else { a }); // NaN stays
    let s = pow2(n);
    let big = (1.0 - 2.0 / isa.mul_add(s, expm1_kernel(isa, r), s + 1.0)).copysign(x);
    if a < TANH_SPLIT {
        small
    } else {
        big
    }
}

/// `1 / (1 + e^{-x})`, within 2.5 ulp (0 below -88.7, as the CPU's).
#[inline(always)]
pub fn sigmoid(isa: Isa, x: f32) -> f32 {
    1.0 / (1.0 + exp(isa, -x))
}

/// `(sin 2πu, cos 2πu)` for `u` in [0, 1]: quadrant from `4u`, Cephes polynomials on
/// [-π/4, π/4]. (Only this reduced form is needed: Box-Muller's angle is `2π × uniform`.)
#[inline(always)]
pub fn sincos_2pi(isa: Isa, u: f32) -> (f32, f32) {
    const MAGIC: f32 = 12_582_912.0;
    let v = u * 4.0;
    let t = v + MAGIC;
    let q = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = (v - (t - MAGIC)) * std::f32::consts::FRAC_PI_2;
    let z = r * r;
    let ps = poly(isa, z, [-1.951_529_6e-4, 8.332_161e-3, -1.666_665_5e-1]);
    let s = isa.mul_add(ps * z, r, r);
    let pc = poly(isa, z, [2.443_315_7e-5, -1.388_731_6e-3, 4.166_664_6e-2]);
    let c = isa.mul_add(pc * z, z, -0.5 * z) + 1.0;
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
fn rem_pio2(isa: Isa, x: f32) -> (i32, f64) {
    const TOINT: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52: adding it rounds to an integer
    const INVPIO2: f64 = std::f64::consts::FRAC_2_PI;
    const PIO2_1: f64 = 1.570_796_310_901_641_845_70;
    const PIO2_1T: f64 = 1.589_325_477_352_819_669_16e-8;
    let xd = x as f64;
    let t = isa.mul_add(xd, INVPIO2, TOINT);
    let f = t - TOINT;
    let n = t.to_bits() as i32;
    (n, isa.mul_add(f, -PIO2_1T, isa.mul_add(f, -PIO2_1, xd)))
}

/// sin on [-π/4, π/4] in double (musl's `__sindf`, |error| < 2^-37.5 relative).
#[inline(always)]
fn sin_kernel(isa: Isa, x: f64) -> f64 {
    const S1: f64 = -0.166_666_666_416_265_235_595;
    const S2: f64 = 0.008_333_329_385_889_463_175_6;
    const S3: f64 = -0.000_198_393_348_360_966_317_347;
    const S4: f64 = 0.000_002_718_311_493_989_821_906_4;
    let z = x * x;
    let w = z * z;
    let r = isa.mul_add(z, S4, S3);
    let s = z * x;
    isa.mul_add(s * w, r, isa.mul_add(s, isa.mul_add(z, S2, S1), x))
}

/// cos on [-π/4, π/4] in double (musl's `__cosdf`, |error| < 2^-34.1).
#[inline(always)]
fn cos_kernel(isa: Isa, x: f64) -> f64 {
    const C0: f64 = -0.499_999_997_251_031_003_120;
    const C1: f64 = 0.041_666_623_323_739_063_189_4;
    const C2: f64 = -0.001_388_676_377_460_992_946_92;
    const C3: f64 = 0.000_024_390_448_796_277_409_065_4;
    let z = x * x;
    let w = z * z;
    let r = isa.mul_add(z, C3, C2);
    isa.mul_add(w * z, r, isa.mul_add(w, C1, isa.mul_add(z, C0, 1.0)))
}

/// `sin x` for |x| below [`TRIG_FAST_LIMIT`] (and ±inf, NaN: NaN), branch-free: the float
/// result of a double-precision evaluation, as musl's `sinf` (within 1 ulp of the exact value).
#[inline(always)]
pub fn sin(isa: Isa, x: f32) -> f32 {
    let (n, y) = rem_pio2(isa, x);
    let (s, c) = (sin_kernel(isa, y), cos_kernel(isa, y));
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
pub fn cos(isa: Isa, x: f32) -> f32 {
    let (n, y) = rem_pio2(isa, x);
    let (s, c) = (sin_kernel(isa, y), cos_kernel(isa, y));
    let v = if n & 1 == 0 { c } else { -s };
    (if n & 2 == 0 { v } else { -v }) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both evaluations: with FMA (in these baseline-compiled tests `f32::mul_add` is libm's
    /// exact `fmaf`, so the numbers are those of the FMA copies) and without.
    const ISAS: [Isa; 2] = [Isa::BASELINE, Isa::FMA];

    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        if got == w || (got.is_nan() && w.is_nan()) {
            return 0.0;
        }
        // The ulp of the wanted value's binade (the subnormal ulp below f32::MIN_POSITIVE).
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

    /// The worst error over `n` consecutive floats from `x0` upwards (`x0 >= 0`), and over
    /// their negatives.
    fn run(x0: f32, n: u32, f: impl Fn(f32) -> f32, g: impl Fn(f64) -> f64) -> (f64, f32) {
        let mut worst = (0.0, 0.0);
        for i in 0..n {
            let x = f32::from_bits(x0.to_bits() + i);
            for x in [x, -x] {
                let u = ulps(f(x), g(x as f64));
                if u > worst.0 {
                    worst = (u, x);
                }
            }
        }
        worst
    }

    #[test]
    fn exp_ln_tanh_sigmoid_within_two_ulp() {
        for isa in ISAS {
            let e = |x| exp(isa, x);
            assert!(sweep(-104.0, 89.0, 200_000, e, f64::exp) <= 2.0);
            // Subnormal results, and the largest finite ones.
            assert!(run(87.0, 20_000, e, f64::exp).0 <= 2.0);
            assert!(run(88.7, 20_000, e, f64::exp).0 <= 2.0);
            assert!(run(103.9, 20_000, |x| e(-x), |x| (-x).exp()).0 <= 2.0);
            assert!(sweep(1e-30, 10.0, 200_000, |x| ln(isa, x), f64::ln) <= 2.0);
            assert!(sweep(0.5, 3e38, 200_000, |x| ln(isa, x), f64::ln) <= 2.0);
            assert!(sweep(-12.0, 12.0, 200_000, |x| tanh(isa, x), f64::tanh) <= 2.0);
            assert!(run(0.62, 100_000, |x| tanh(isa, x), f64::tanh).0 <= 2.0);
            let s = |x: f64| 1.0 / (1.0 + (-x).exp());
            assert!(sweep(-88.0, 30.0, 200_000, |x| sigmoid(isa, x), s) <= 3.0);
        }
    }

    #[test]
    fn exp2_within_two_ulp_and_its_special_values() {
        for isa in ISAS {
            let e = |x| exp2(isa, x);
            assert!(sweep(-151.0, 128.0, 200_000, e, f64::exp2) <= 2.0);
            // Subnormal results, near-halves (the nearest integer's ties), the largest finite.
            assert!(run(125.0, 20_000, |x| e(-x), |x| (-x).exp2()).0 <= 2.0);
            assert!(run(149.0, 20_000, |x| e(-x), |x| (-x).exp2()).0 <= 2.0);
            assert!(run(0.5, 20_000, e, f64::exp2).0 <= 2.0);
            assert!(run(127.9, 20_000, e, f64::exp2).0 <= 2.0);
            for n in -149..=127 {
                assert_eq!(e(n as f32), (n as f32).exp2(), "2^{n}");
            }
            assert_eq!(e(128.0), f32::INFINITY);
            assert_eq!(e(f32::INFINITY), f32::INFINITY);
            assert_eq!(e(-150.0), 0.0);
            assert_eq!(e(f32::NEG_INFINITY), 0.0);
            assert!(e(f32::NAN).is_nan());
            assert_eq!(e(-0.0), 1.0);
        }
    }

    /// The worst errors over every float (both signs) of each function's range:
    /// `cargo test --release --lib worst_ulps -- --ignored --nocapture` (about 10 minutes).
    #[test]
    #[ignore]
    fn worst_ulps() {
        type Case = (&'static str, fn(Isa, f32) -> f32, fn(f64) -> f64, f32);
        let cases: [Case; 6] = [
            ("exp", exp, f64::exp, 104.0),
            ("exp2", exp2, f64::exp2, 151.0),
            ("tanh", tanh, f64::tanh, 10.0),
            ("sigmoid", sigmoid, |x| 1.0 / (1.0 + (-x).exp()), 88.0),
            ("erf", erf, libm::erf, 4.0),
            ("erfc", erfc, libm::erfc, 10.1),
        ];
        for isa in ISAS {
            for (name, f, g, hi) in cases {
                let w = run(0.0, hi.to_bits(), |x| f(isa, x), g);
                println!("{isa:?} {name}: {:.3} ulp at {:e}", w.0, w.1);
            }
        }
    }

    #[test]
    fn flushed_exp_is_exp_where_normal_and_zero_below() {
        for isa in ISAS {
            for i in 0..=100_000 {
                let x = -(i as f32) * 0.00087;
                assert_eq!(exp_flushed(isa, x).to_bits(), exp(isa, x).to_bits(), "{x}");
            }
            for x in [-87.001, -90.0, -103.9, -104.5, -1e30, f32::NEG_INFINITY] {
                assert_eq!(exp_flushed(isa, x), 0.0, "{x}");
            }
            assert!(exp_flushed(isa, f32::NAN).is_nan());
        }
    }

    #[test]
    fn special_values() {
        for isa in ISAS {
            assert_eq!(exp(isa, f32::NEG_INFINITY), 0.0);
            assert_eq!(exp(isa, f32::INFINITY), f32::INFINITY);
            assert!(exp(isa, f32::NAN).is_nan());
            assert_eq!(exp(isa, 0.0), 1.0);
            assert_eq!(ln(isa, 0.0), f32::NEG_INFINITY);
            assert_eq!(ln(isa, -0.0), f32::NEG_INFINITY);
            assert!(ln(isa, -1.0).is_nan() && ln(isa, f32::NAN).is_nan());
            assert_eq!(ln(isa, f32::INFINITY), f32::INFINITY);
            assert_eq!(ln(isa, 1.0), 0.0);
            let sub = f32::from_bits(1); // smallest subnormal
            assert!(ulps(ln(isa, sub), (sub as f64).ln()) <= 2.0);
            assert_eq!(tanh(isa, f32::INFINITY), 1.0);
            assert_eq!(tanh(isa, f32::NEG_INFINITY), -1.0);
            assert!(tanh(isa, f32::NAN).is_nan());
            assert_eq!(tanh(isa, -0.0).to_bits(), (-0.0f32).to_bits());
            assert!(ulps(exp(isa, 88.72), (88.72f32 as f64).exp()) <= 1.0);
            assert_eq!(exp(isa, 88.73), f32::INFINITY);
            assert_eq!(exp(isa, -104.0), 0.0);
            assert_eq!(exp(isa, -103.9), f32::from_bits(1));
            assert_eq!(sigmoid(isa, f32::NEG_INFINITY), 0.0);
            assert_eq!(sigmoid(isa, f32::INFINITY), 1.0);
        }
    }

    #[test]
    fn sincos_of_turns() {
        for isa in ISAS {
            let mut worst = 0.0f64;
            for i in 0..=100_000 {
                let u = i as f32 / 100_000.0;
                let (s, c) = sincos_2pi(isa, u);
                let a = std::f64::consts::TAU * u as f64;
                worst = worst
                    .max((s as f64 - a.sin()).abs())
                    .max((c as f64 - a.cos()).abs());
            }
            assert!(worst < 2e-7, "{worst}");
        }
    }

    #[test]
    fn normal_cdf_is_within_its_error_bound() {
        for isa in ISAS {
            // Every 64th float of |x| < 6 (both signs), then the specials.
            let mut worst = 0.0f64;
            for b in (0..0x40c0_0000u32).step_by(64) {
                for x in [f32::from_bits(b), -f32::from_bits(b)] {
                    let want = 0.5 * libm::erfc(-(x as f64) * std::f64::consts::FRAC_1_SQRT_2);
                    worst = worst.max((normal_cdf(isa, x) as f64 - want).abs());
                }
            }
            // Rounding to float32 (values just under 1: half an ulp is 3e-8) plus the fit's 3e-8.
            assert!(worst < 6.5e-8, "{isa:?}: {worst}");
            assert_eq!(normal_cdf(isa, 6.0), 1.0);
            assert_eq!(normal_cdf(isa, f32::INFINITY), 1.0);
            assert_eq!(normal_cdf(isa, f32::NEG_INFINITY), 0.0);
            assert_eq!(normal_cdf(isa, -7.0), 0.0);
            assert_eq!(normal_cdf(isa, 0.0), 0.5);
            assert_eq!(normal_cdf(isa, -0.0), 0.5);
            assert!(normal_cdf(isa, f32::NAN).is_nan());
        }
    }

    #[test]
    fn erf_erfc_within_two_ulp() {
        for isa in ISAS {
            let f = |x| erf(isa, x);
            let g = |x| erfc(isa, x);
            // Every 64th float of the whole range (both signs), then every float around the
            // switch between the two forms and at the ends of erfc's subnormal range.
            let mut worst = [(0.0, 0.0); 2];
            for i in (0..0x4121_0000u32).step_by(61) {
                let x = f32::from_bits(i);
                for x in [x, -x] {
                    let e = (ulps(f(x), libm::erf(x as f64)), x);
                    let c = (ulps(g(x), libm::erfc(x as f64)), x);
                    if e.0 > worst[0].0 {
                        worst[0] = e;
                    }
                    if c.0 > worst[1].0 {
                        worst[1] = c;
                    }
                }
            }
            assert!(worst[0].0 <= 2.0, "{isa:?} erf {worst:?}");
            assert!(worst[1].0 <= 2.0, "{isa:?} erfc {worst:?}");
            for x0 in [0.74f32, 0.99, 3.9, 9.1, 10.0] {
                let e = run(x0, 200_000, f, libm::erf);
                let c = run(x0, 200_000, g, libm::erfc);
                assert!(e.0 <= 2.0 && c.0 <= 2.0, "{isa:?} {x0}: {e:?} {c:?}");
            }
        }
    }

    #[test]
    fn erf_erfc_special_values() {
        for isa in ISAS {
            assert_eq!(erf(isa, 0.0).to_bits(), 0.0f32.to_bits());
            assert_eq!(erf(isa, -0.0).to_bits(), (-0.0f32).to_bits());
            assert_eq!(erf(isa, f32::INFINITY), 1.0);
            assert_eq!(erf(isa, f32::NEG_INFINITY), -1.0);
            assert_eq!(erf(isa, 5.0), 1.0);
            assert!(erf(isa, f32::NAN).is_nan());
            let sub = f32::from_bits(7);
            assert!(ulps(erf(isa, sub), libm::erf(sub as f64)) <= 1.0);
            assert_eq!(erfc(isa, 0.0), 1.0);
            assert_eq!(erfc(isa, -0.0), 1.0);
            assert_eq!(erfc(isa, f32::INFINITY), 0.0);
            assert_eq!(erfc(isa, f32::NEG_INFINITY), 2.0);
            assert_eq!(erfc(isa, 10.06), 0.0);
            assert_eq!(erfc(isa, 1e30), 0.0);
            assert_eq!(erfc(isa, -5.0), 2.0);
            assert!(erfc(isa, f32::NAN).is_nan());
            // erfc(10) = 2.088e-45, subnormal: no cancellation, no flush to 0.
            assert!(ulps(erfc(isa, 10.0), libm::erfc(10.0)) <= 1.0);
            assert!(erfc(isa, 10.0) > 0.0);
        }
    }

    #[test]
    fn sin_cos_within_one_ulp_below_the_limit() {
        for isa in ISAS {
            let (s, c) = (|x| sin(isa, x), |x| cos(isa, x));
            for (lo, hi) in [(-7.0f32, 7.0), (-1e4, 1e4), (-4e8, 4e8), (-1e-30, 1e-30)] {
                assert!(sweep(lo, hi, 200_000, s, f64::sin) <= 1.0, "sin {lo}..{hi}");
                assert!(sweep(lo, hi, 200_000, c, f64::cos) <= 1.0, "cos {lo}..{hi}");
            }
            // Near multiples of π/2, where the reduction must keep its bits.
            for k in 1..2000 {
                let x = (k as f64 * std::f64::consts::FRAC_PI_2) as f32;
                for x in [
                    x,
                    f32::from_bits(x.to_bits() + 1),
                    f32::from_bits(x.to_bits() - 1),
                ] {
                    assert!(ulps(s(x), (x as f64).sin()) <= 1.0, "sin {x}");
                    assert!(ulps(c(x), (x as f64).cos()) <= 1.0, "cos {x}");
                }
            }
            assert_eq!(s(-0.0).to_bits(), (-0.0f32).to_bits());
            assert_eq!(c(-0.0), 1.0);
            for v in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
                assert!(s(v).is_nan() && c(v).is_nan());
            }
        }
    }
}
