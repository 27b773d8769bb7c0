//! Floating-point element types: how each is stored and which type its math runs in.
//! float16/bfloat16 compute in float32 (PyTorch's "opmath" type); float32 and float64 in
//! themselves.

use super::element::Element;
use super::simd::Isa;
use half::{bf16, f16};
use num_traits::Float;

/// The math type of a float storage type: `num_traits::Float` plus what it lacks.
pub trait Math: Float + Send + Sync + Copy + std::fmt::Debug + 'static {
    fn erf(self) -> Self;
    fn erfc(self) -> Self;
    /// `asinh`/`acosh` over the whole range: std's forms compute `x + x` first and overflow
    /// to inf above half the type's maximum (asinh(3e38) is 89.3); libm's do not.
    fn asinh_wide(self) -> Self;
    fn acosh_wide(self) -> Self;
    /// `atanh` accurate near +-1: std's form takes `ln_1p` of a value near -1, whose rounding
    /// error it magnifies (float32 atanh(-0.999999) was -7.2192, not -7.2477); libm's is not.
    fn atanh_accurate(self) -> Self;
    fn from_f64c(v: f64) -> Self;
    fn to_f64c(self) -> f64;
    fn round_even(self) -> Self;
    /// `exp`, `ln`, `tanh` and the logistic function in a form whose loops vectorize
    /// (`kernels::core::vmath` for f32, with FMA where `isa` has it; f64 keeps libm's
    /// correctly rounded scalar versions).
    fn vexp(self, isa: Isa) -> Self;
    /// `2^x`, as [`Math::vexp`] (`vmath::exp2` for f32, libm for f64).
    fn vexp2(self, isa: Isa) -> Self;
    /// `Φ(x)`, the standard normal distribution function, for GELU: `vmath::normal_cdf` for
    /// f32 (piecewise polynomials, absolute error 6.1e-8), libm's `erf` for f64.
    fn vnormal_cdf(self, isa: Isa) -> Self;
    fn vln(self, isa: Isa) -> Self;
    fn vtanh(self, isa: Isa) -> Self;
    fn vsigmoid(self, isa: Isa) -> Self;
    /// `erf` and `erfc` whose loops vectorize (`vmath::erf`/`erfc` for f32, within 2 ulp;
    /// libm for f64).
    fn verf(self, isa: Isa) -> Self;
    fn verfc(self, isa: Isa) -> Self;
    /// `sin`/`cos` whose loops vectorize (`vmath::sin`/`cos` for f32, libm for f64), exact
    /// below [`Math::TRIG_FAST_LIMIT`] in magnitude; a tensor with a larger finite element
    /// takes `sin`/`cos` (libm) instead.
    fn vsin(self, isa: Isa) -> Self;
    fn vcos(self, isa: Isa) -> Self;
    const TRIG_FAST_LIMIT: f64;
    /// `if take { a } else { b }` through bit masks: LLVM turns a float `select` into a branch
    /// (even under `select_unpredictable`), which mispredicts half the time on data-dependent
    /// choices such as a running max.
    fn pick(take: bool, a: Self, b: Self) -> Self;
}

impl Math for f32 {
    #[inline(always)]
    fn erf(self) -> f32 {
        libm::erff(self)
    }
    #[inline(always)]
    fn erfc(self) -> f32 {
        libm::erfcf(self)
    }
    #[inline(always)]
    fn asinh_wide(self) -> f32 {
        libm::asinhf(self)
    }
    #[inline(always)]
    fn acosh_wide(self) -> f32 {
        // libm's acosh branches on |x|, so acosh(-100) came out -2.208; below 1 it is undefined.
        if self < 1.0 {
            f32::NAN
        } else {
            libm::acoshf(self)
        }
    }
    #[inline(always)]
    fn atanh_accurate(self) -> f32 {
        libm::atanhf(self)
    }
    #[inline(always)]
    fn from_f64c(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn to_f64c(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn round_even(self) -> f32 {
        self.round_ties_even()
    }
    #[inline(always)]
    fn vexp(self, isa: Isa) -> f32 {
        super::vmath::exp(isa, self)
    }
    #[inline(always)]
    fn vexp2(self, isa: Isa) -> f32 {
        super::vmath::exp2(isa, self)
    }
    #[inline(always)]
    fn vnormal_cdf(self, isa: Isa) -> f32 {
        super::vmath::normal_cdf(isa, self)
    }
    #[inline(always)]
    fn vln(self, isa: Isa) -> f32 {
        super::vmath::ln(isa, self)
    }
    #[inline(always)]
    fn vtanh(self, isa: Isa) -> f32 {
        super::vmath::tanh(isa, self)
    }
    #[inline(always)]
    fn vsigmoid(self, isa: Isa) -> f32 {
        super::vmath::sigmoid(isa, self)
    }
    #[inline(always)]
    fn vsin(self, isa: Isa) -> f32 {
        super::vmath::sin(isa, self)
    }
    #[inline(always)]
    fn vcos(self, isa: Isa) -> f32 {
        super::vmath::cos(isa, self)
    }
    #[inline(always)]
    fn verf(self, isa: Isa) -> f32 {
        super::vmath::erf(isa, self)
    }
    #[inline(always)]
    fn verfc(self, isa: Isa) -> f32 {
        super::vmath::erfc(isa, self)
    }
    const TRIG_FAST_LIMIT: f64 = super::vmath::TRIG_FAST_LIMIT as f64;
    #[inline(always)]
    fn pick(take: bool, a: f32, b: f32) -> f32 {
        let m = 0u32.wrapping_sub(take as u32);
        f32::from_bits((a.to_bits() & m) | (b.to_bits() & !m))
    }
}

impl Math for f64 {
    #[inline(always)]
    fn erf(self) -> f64 {
        libm::erf(self)
    }
    #[inline(always)]
    fn erfc(self) -> f64 {
        libm::erfc(self)
    }
    #[inline(always)]
    fn asinh_wide(self) -> f64 {
        libm::asinh(self)
    }
    #[inline(always)]
    fn acosh_wide(self) -> f64 {
        // As for f32: libm branches on |x|.
        if self < 1.0 {
            f64::NAN
        } else {
            libm::acosh(self)
        }
    }
    #[inline(always)]
    fn atanh_accurate(self) -> f64 {
        libm::atanh(self)
    }
    #[inline(always)]
    fn from_f64c(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn to_f64c(self) -> f64 {
        self
    }
    #[inline(always)]
    fn round_even(self) -> f64 {
        self.round_ties_even()
    }
    #[inline(always)]
    fn vexp(self, _: Isa) -> f64 {
        self.exp()
    }
    #[inline(always)]
    fn vexp2(self, _: Isa) -> f64 {
        self.exp2()
    }
    #[inline(always)]
    fn vnormal_cdf(self, _: Isa) -> f64 {
        0.5 * (1.0 + libm::erf(self * std::f64::consts::FRAC_1_SQRT_2))
    }
    #[inline(always)]
    fn vln(self, _: Isa) -> f64 {
        self.ln()
    }
    #[inline(always)]
    fn vtanh(self, _: Isa) -> f64 {
        self.tanh()
    }
    #[inline(always)]
    fn vsigmoid(self, _: Isa) -> f64 {
        1.0 / (1.0 + (-self).exp())
    }
    #[inline(always)]
    fn vsin(self, _: Isa) -> f64 {
        self.sin()
    }
    #[inline(always)]
    fn vcos(self, _: Isa) -> f64 {
        self.cos()
    }
    #[inline(always)]
    fn verf(self, _: Isa) -> f64 {
        libm::erf(self)
    }
    #[inline(always)]
    fn verfc(self, _: Isa) -> f64 {
        libm::erfc(self)
    }
    const TRIG_FAST_LIMIT: f64 = f64::INFINITY;
    #[inline(always)]
    fn pick(take: bool, a: f64, b: f64) -> f64 {
        let m = 0u64.wrapping_sub(take as u64);
        f64::from_bits((a.to_bits() & m) | (b.to_bits() & !m))
    }
}

/// A float storage type and its math type.
/// Elements of [`FloatStore::load_lanes`]: one AVX2 register of float32.
pub const LANES: usize = 8;

pub trait FloatStore: Element + PartialOrd {
    type M: Math;
    fn load(self) -> Self::M;
    fn store(m: Self::M) -> Self;
    /// Largest and smallest finite values of the storage type (nan_to_num defaults).
    fn max_finite() -> Self;
    fn min_finite() -> Self;
    /// The slice itself when the storage type is its own math type (f32, f64), so row kernels
    /// can skip widening it into a scratch buffer.
    #[inline(always)]
    fn as_math(_xs: &[Self]) -> Option<&[Self::M]> {
        None
    }
    /// The mutable counterpart of [`FloatStore::as_math`], for kernels that compute in place
    /// in their output.
    #[inline(always)]
    fn as_math_mut(_xs: &mut [Self]) -> Option<&mut [Self::M]> {
        None
    }
    /// Whether the elementwise loops widen dense runs in blocks ([`FloatStore::load_run`],
    /// `core::widened`) rather than element by element: where a run converts in far fewer
    /// instructions than the per-element conversions LLVM vectorizes (float16 on AVX-512).
    const WIDENS_IN_BLOCKS: bool = false;
    /// Widens the `n` elements at `src` into `dst`, with the instructions of `isa`'s copy.
    ///
    /// # Safety
    /// `src` holds `n` elements and `dst` room for `n`.
    #[inline(always)]
    unsafe fn load_run(_isa: Isa, src: *const Self, dst: *mut Self::M, n: usize) {
        for i in 0..n {
            // SAFETY: i < n (the caller's contract).
            unsafe { *dst.add(i) = (*src.add(i)).load() };
        }
    }
    /// Widens the [`LANES`] elements at `src` (`core::widened::Vectors`).
    ///
    /// # Safety
    /// `src` holds `LANES` elements.
    #[inline(always)]
    unsafe fn load_lanes(_isa: Isa, src: *const Self) -> [Self::M; LANES] {
        // SAFETY: k < LANES (the caller's contract).
        std::array::from_fn(|k| unsafe { (*src.add(k)).load() })
    }
    /// Narrows `v` into the [`LANES`] elements at `dst`.
    ///
    /// # Safety
    /// `dst` has room for `LANES` elements.
    #[inline(always)]
    unsafe fn store_lanes(_isa: Isa, v: [Self::M; LANES], dst: *mut Self) {
        for (k, v) in v.into_iter().enumerate() {
            // SAFETY: k < LANES (the caller's contract).
            unsafe { *dst.add(k) = Self::store(v) };
        }
    }
    /// Narrows the `n` values at `src` into `dst` (as [`FloatStore::store`]).
    ///
    /// # Safety
    /// As [`FloatStore::load_run`].
    #[inline(always)]
    unsafe fn store_run(_isa: Isa, src: *const Self::M, dst: *mut Self, n: usize) {
        for i in 0..n {
            // SAFETY: i < n (the caller's contract).
            unsafe { *dst.add(i) = Self::store(*src.add(i)) };
        }
    }
}

impl FloatStore for f32 {
    type M = f32;
    #[inline(always)]
    fn load(self) -> f32 {
        self
    }
    #[inline(always)]
    fn store(m: f32) -> f32 {
        m
    }
    fn max_finite() -> f32 {
        f32::MAX
    }
    fn min_finite() -> f32 {
        f32::MIN
    }
    #[inline(always)]
    fn as_math(xs: &[f32]) -> Option<&[f32]> {
        Some(xs)
    }
    #[inline(always)]
    fn as_math_mut(xs: &mut [f32]) -> Option<&mut [f32]> {
        Some(xs)
    }
}

impl FloatStore for f64 {
    type M = f64;
    #[inline(always)]
    fn load(self) -> f64 {
        self
    }
    #[inline(always)]
    fn store(m: f64) -> f64 {
        m
    }
    fn max_finite() -> f64 {
        f64::MAX
    }
    fn min_finite() -> f64 {
        f64::MIN
    }
    #[inline(always)]
    fn as_math(xs: &[f64]) -> Option<&[f64]> {
        Some(xs)
    }
    #[inline(always)]
    fn as_math_mut(xs: &mut [f64]) -> Option<&mut [f64]> {
        Some(xs)
    }
}

impl FloatStore for f16 {
    type M = f32;
    #[inline(always)]
    fn load(self) -> f32 {
        super::reduced::f16_from_bits(self.to_bits())
    }
    #[inline(always)]
    fn store(m: f32) -> f16 {
        f16::from_bits(super::reduced::f16_bits(m))
    }
    fn max_finite() -> f16 {
        f16::MAX
    }
    fn min_finite() -> f16 {
        f16::MIN
    }
    const WIDENS_IN_BLOCKS: bool = true;
    #[inline(always)]
    unsafe fn load_run(isa: Isa, src: *const f16, dst: *mut f32, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { super::reduced::f16_run_to_f32(isa, dst, src, n) }
    }
    #[inline(always)]
    unsafe fn store_run(isa: Isa, src: *const f32, dst: *mut f16, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { super::reduced::f16_run_from_f32(isa, dst, src, n) }
    }
    #[inline(always)]
    unsafe fn load_lanes(isa: Isa, src: *const f16) -> [f32; LANES] {
        // SAFETY: the caller's contract.
        unsafe { super::reduced::f16_lanes_to_f32(isa, src) }
    }
    #[inline(always)]
    unsafe fn store_lanes(isa: Isa, v: [f32; LANES], dst: *mut f16) {
        // SAFETY: the caller's contract.
        unsafe { super::reduced::f16_lanes_from_f32(isa, v, dst) }
    }
}

/// The elementwise kernels' loops convert through these (the same values as `half`'s, in fewer
/// instructions per vector: a bfloat16 product of 262K elements spent most of its time
/// converting).
impl FloatStore for bf16 {
    type M = f32;
    #[inline(always)]
    fn load(self) -> f32 {
        super::reduced::bf16_from_bits(self.to_bits())
    }
    #[inline(always)]
    fn store(m: f32) -> bf16 {
        bf16::from_bits(super::reduced::bf16_bits(m))
    }
    fn max_finite() -> bf16 {
        bf16::MAX
    }
    fn min_finite() -> bf16 {
        bf16::MIN
    }
}
