//! AVX-512 forms of [`vmath`](super::vmath)'s `exp`, `tanh`, `sigmoid`, `erfc`, GELU and GELU's
//! gradient, written with intrinsics, and [`map1`]/[`map2`], which run them over dense float32,
//! bfloat16 and float16 tensors.
//!
//! Same algorithms and same roundings as the scalar forms, so the same bits (the tests below
//! compare them on every 1021st float, and on every bfloat16 and float16 value), in fewer
//! instructions than LLVM's vectorization of the scalar forms: `vscalefps` multiplies by 2^n in
//! one rounding, subnormal results included, where the scalar forms build 2^n from integer bits
//! and multiply (twice, for subnormal results); `vpternlogd` restores a sign in one
//! instruction; `vpermps` looks up a table of 16 coefficients held in a register; a run's last
//! partial vector goes under a mask instead of through a scalar loop. `exp` is 15 vector
//! instructions here, 22 auto-vectorized: 1e6 of them took 1.12x the CPU's (SLEEF's) time,
//! `tanh` 1.23x, `erfc` 1.78x. bfloat16 and float16 are widened and narrowed in the same loop
//! (a [`Lanes`] type each) instead of in blocks through the scalar loops: LLVM makes gathers of
//! GELU's table lookups there.

// The AVX-512 intrinsics are stable since Rust 1.89 (see gemm/bf16/microkernel.rs).
#![allow(clippy::incompatible_msrv)]

#[cfg(target_arch = "x86_64")]
use {
    super::layout::coalesce,
    super::map::drive_dense_rows,
    super::parallel::SendPtr,
    super::simd::level,
    super::vmath::{
        CDF_INV_W, CDF_LIM, CDF_P, CDF_W, ERFC_MAX, ERFC_Q, ERFC_SPLIT, ERFC_TM, ERF_SMALL_P,
        EXPM1_P, LN2_HI, LN2_LO, MAGIC, TANH_MAX, TANH_P, TANH_SPLIT,
    },
    std::arch::x86_64::*,
};

use crate::dtype::DType;
use crate::tensor::{TensorMut, TensorRef};
use half::{bf16, f16};

/// The ops with an AVX-512 form: [`UnaryOp`](crate::kernels::unary::UnaryOp)'s of the same
/// names (`GeluTanh` is GELU with `approximate="tanh"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VecOp {
    Exp,
    Tanh,
    Sigmoid,
    Silu,
    Erfc,
    Gelu,
    GeluTanh,
}

/// The two-input ops with an AVX-512 form: [`BinaryOp`](crate::kernels::binary::BinaryOp)'s of
/// the same names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VecOp2 {
    /// `g * (Φ(x) + x φ(x))`, exact GELU's gradient (`g` the first operand).
    GeluBackward,
}

/// `out = op(a)` where both are float32, bfloat16 or float16, of one dtype and shape, dense
/// along their innermost coalesced dimension, and the CPU has AVX-512: returns whether it ran
/// (the caller runs the scalar form otherwise).
pub fn map1(op: VecOp, out: &TensorMut, a: &TensorRef) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let run: Run1 = match out.dtype {
            DType::F32 => run1::<f32>,
            DType::BF16 if native_bf16() => run1_bf16::<Bf16Native>,
            DType::BF16 => run1::<bf16>,
            DType::F16 => run1::<f16>,
            _ => return false,
        };
        // SAFETY: `run` reads and writes `len` elements of the operands' dtype at each.
        dense_rows(out, [a], &|[o, x], len| unsafe { run(op, o, x, len) })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (op, out, a);
        false
    }
}

/// `out = op(a, b)` where all three are float32, bfloat16 or float16, of one dtype and shape,
/// dense along their innermost coalesced dimension, and the CPU has AVX-512: returns whether
/// it ran (the caller runs the scalar form otherwise).
pub fn map2(op: VecOp2, out: &TensorMut, a: &TensorRef, b: &TensorRef) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let run: Run2 = match out.dtype {
            DType::F32 => run2::<f32>,
            DType::BF16 if native_bf16() => run2_bf16::<Bf16Native>,
            DType::BF16 => run2::<bf16>,
            DType::F16 => run2::<f16>,
            _ => return false,
        };
        // SAFETY: `run` reads and writes `len` elements of the operands' dtype at each.
        dense_rows(out, [a, b], &|[o, x, y], len| unsafe {
            run(op, o, x, y, len)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (op, out, a, b);
        false
    }
}

/// Calls `f(pointers, len)` for every dense run of `out` and `inputs` (the output's pointer
/// first) where they all have the output's dtype and shape, each is dense along the innermost
/// coalesced dimension, and the CPU has AVX-512 (level 3); returns whether it did.
///
/// `f` must be safe to call with pointers to `len` elements of that dtype, in bounds (their
/// shapes and strides), the output's written by the calling chunk only and overlapping the
/// inputs only elementwise (the glue's contract).
#[cfg(target_arch = "x86_64")]
fn dense_rows<const I: usize, const N: usize>(
    out: &TensorMut,
    inputs: [&TensorRef; I],
    f: &(dyn Fn([*mut u8; N], usize) + Sync),
) -> bool {
    let same = |t: &&TensorRef| t.dtype == out.dtype && t.shape == out.shape;
    if I + 1 != N || !inputs.iter().all(same) || level() < 3 || out.numel() == 0 {
        return false;
    }
    let strides: [&[isize]; N] = std::array::from_fn(|k| match k {
        0 => &out.strides[..],
        _ => &inputs[k - 1].strides[..],
    });
    let l = coalesce(&out.shape, strides);
    if l.strides[1..].iter().any(|s| s.last() != Some(&1)) {
        return false;
    }
    let size = out.dtype.size() as isize;
    let p: [SendPtr<u8>; N] = std::array::from_fn(|k| match k {
        0 => SendPtr::of(out.ptr),
        _ => SendPtr::of(inputs[k - 1].ptr),
    });
    drive_dense_rows(&l, &|off, rows, len, outer| {
        for r in 0..rows as isize {
            f(
                std::array::from_fn(|k| p[k].at((off[k] + r * outer[k]) * size)),
                len,
            );
        }
    })
}

#[cfg(target_arch = "x86_64")]
type V = __m512;

/// Whether the CPU narrows to bfloat16 in one instruction (checked once; std caches it).
#[cfg(target_arch = "x86_64")]
fn native_bf16() -> bool {
    std::arch::is_x86_feature_detected!("avx512bf16")
}

#[cfg(target_arch = "x86_64")]
type Run1 = unsafe fn(VecOp, *mut u8, *const u8, usize);
#[cfg(target_arch = "x86_64")]
type Run2 = unsafe fn(VecOp2, *mut u8, *const u8, *const u8, usize);

/// A storage type's 16 lanes as float32, converted as the scalar loops convert
/// (`FloatStore::load`/`store`), so that the vector forms give their bits: bfloat16 widened
/// exactly and narrowed to nearest even with NaN made quiet (`reduced::bf16_bits`), float16
/// through `vcvtph2ps`/`vcvtps2ph` (as `widened`'s runs).
#[cfg(target_arch = "x86_64")]
trait Lanes: Copy {
    /// # Safety
    /// The CPU has AVX-512 (F, BW, VL) and F16C; the lanes of `m` address readable elements.
    unsafe fn load(p: *const Self, m: __mmask16) -> V;
    /// # Safety
    /// As `load`, the lanes of `m` writable.
    unsafe fn store(p: *mut Self, m: __mmask16, v: V);
}

#[cfg(target_arch = "x86_64")]
impl Lanes for f32 {
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load(p: *const f32, m: __mmask16) -> V {
        // SAFETY: the caller's contract.
        unsafe { _mm512_maskz_loadu_ps(m, p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store(p: *mut f32, m: __mmask16, v: V) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_mask_storeu_ps(p, m, v) }
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for bf16 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load(p: *const bf16, m: __mmask16) -> V {
        // SAFETY: the caller's contract.
        let h = unsafe { load_halves(p as *const i16, m) };
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn store(p: *mut bf16, m: __mmask16, v: V) {
        // `reduced::bf16_bits` in the upper half of each lane, which a word permute gathers:
        // `vpmovdw` (the lower halves) into memory stalled the loop (a Zen 5: GELU took 2x
        // float32's time).
        let b = _mm512_castps_si512(v);
        let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(b), _mm512_set1_epi32(1));
        let rounded = _mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
        let magnitude = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFF_FFFF));
        let nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7F80_0000));
        let quiet = _mm512_or_si512(b, _mm512_set1_epi32(0x0040_0000));
        let w = _mm512_mask_blend_epi32(nan, rounded, quiet);
        let upper = _mm512_set_epi16(
            31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1, 31, 29, 27, 25, 23, 21, 19,
            17, 15, 13, 11, 9, 7, 5, 3, 1,
        );
        let h = _mm512_castsi512_si256(_mm512_permutexvar_epi16(upper, w));
        // SAFETY: the caller's contract.
        unsafe { store_halves(p as *mut i16, m, h) }
    }
}

/// bfloat16 narrowed by `vcvtneps2bf16` (AVX512-BF16), one instruction for `bf16`'s eight
/// (GELU of 1M elements, one thread of a Zen 5: 205 -> 171 us; float32 114): the same rounding to
/// nearest even and quiet NaN, but subnormal inputs flushed to zero, so a vector with a
/// subnormal lane (a check, rarely taken) narrows as `bf16` does.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
#[repr(transparent)]
struct Bf16Native(bf16);

#[cfg(target_arch = "x86_64")]
impl Lanes for Bf16Native {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load(p: *const Bf16Native, m: __mmask16) -> V {
        // SAFETY: the caller's contract; the same layout.
        unsafe { bf16::load(p as *const bf16, m) }
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
    unsafe fn store(p: *mut Bf16Native, m: __mmask16, v: V) {
        const SUBNORMAL: i32 = 0x20;
        if _mm512_fpclass_ps_mask::<SUBNORMAL>(v) != 0 {
            // SAFETY: the caller's contract; the same layout.
            return unsafe { bf16::store(p as *mut bf16, m, v) };
        }
        // SAFETY: `__m256bh` is 16 bfloat16 bit patterns, as `__m256i` holds them.
        let h: __m256i = unsafe { std::mem::transmute(_mm512_cvtneps_pbh(v)) };
        // SAFETY: the caller's contract.
        unsafe { store_halves(p as *mut i16, m, h) }
    }
}

/// 16 two-byte elements, the lanes of `m`; a whole vector's (a constant `m` of all ones, once
/// inlined) a plain load.
///
/// # Safety
/// The lanes of `m` address readable elements.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn load_halves(p: *const i16, m: __mmask16) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe {
        if m == !0 {
            _mm256_loadu_si256(p as *const __m256i)
        } else {
            _mm256_maskz_loadu_epi16(m, p)
        }
    }
}

/// Stores the lanes of `m` of `h` (see [`load_halves`]).
///
/// # Safety
/// The lanes of `m` address writable elements.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn store_halves(p: *mut i16, m: __mmask16, h: __m256i) {
    // SAFETY: the caller's contract.
    unsafe {
        if m == !0 {
            _mm256_storeu_si256(p as *mut __m256i, h)
        } else {
            _mm256_mask_storeu_epi16(p, m, h)
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for f16 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load(p: *const f16, m: __mmask16) -> V {
        // SAFETY: the caller's contract.
        _mm512_cvtph_ps(unsafe { load_halves(p as *const i16, m) })
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn store(p: *mut f16, m: __mmask16, v: V) {
        let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
        // SAFETY: the caller's contract.
        unsafe { store_halves(p as *mut i16, m, h) }
    }
}

/// `o[i] = f(x[i], y[i])` for `i < len` (`f(x[i])` without `y`): whole vectors, then the rest
/// under a mask, so that every element goes through the same instructions wherever a thread's
/// chunk starts. (The whole vectors' mask is a constant: LLVM makes those plain loads and
/// stores.)
#[cfg(target_arch = "x86_64")]
macro_rules! run_with {
    ($T:ty, $f:expr, $o:expr, $len:expr, $($x:expr),+) => {{
        let (o, len) = ($o, $len);
        let mut i = 0;
        while i + 32 <= len {
            // SAFETY: elements i..i + 32 (the caller's contract), read before written.
            unsafe {
                let v0 = $f($(<$T>::load($x.add(i), !0)),+);
                let v1 = $f($(<$T>::load($x.add(i + 16), !0)),+);
                <$T>::store(o.add(i), !0, v0);
                <$T>::store(o.add(i + 16), !0, v1);
            }
            i += 32;
        }
        while i + 16 <= len {
            // SAFETY: elements i..i + 16 (the caller's contract), read before written.
            unsafe { <$T>::store(o.add(i), !0, $f($(<$T>::load($x.add(i), !0)),+)) };
            i += 16;
        }
        if i < len {
            let m: __mmask16 = ((1u32 << (len - i)) - 1) as __mmask16;
            // SAFETY: the masked lanes are elements i..len; the others are not touched.
            unsafe { <$T>::store(o.add(i), m, $f($(<$T>::load($x.add(i), m)),+)) };
        }
    }};
}

/// `run1` and `run2` for the features of each `Lanes` type's instructions (`run1_bf16`, with
/// AVX512-BF16, for [`Bf16Native`]): the math inlines into both.
#[cfg(target_arch = "x86_64")]
macro_rules! runners {
    ($run1:ident, $run2:ident, $features:literal) => {
        /// `o[i] = op(x[i])` for `i < len`, elements of type `T`.
        ///
        /// # Safety
        /// The CPU has the enabled features; `o` and `x` address `len` elements of `T`, `o`
        /// overlapping `x` only elementwise.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $run1<T: Lanes>(op: VecOp, o: *mut u8, x: *const u8, len: usize) {
            let (o, x) = (o as *mut T, x as *const T);
            match op {
                VecOp::Exp => run_with!(T, exp, o, len, x),
                VecOp::Tanh => run_with!(T, tanh, o, len, x),
                VecOp::Sigmoid => run_with!(T, sigmoid, o, len, x),
                VecOp::Silu => run_with!(T, |v| _mm512_mul_ps(v, sigmoid(v)), o, len, x),
                VecOp::Erfc => run_with!(T, erfc, o, len, x),
                VecOp::Gelu => run_with!(T, |v| _mm512_mul_ps(v, normal_cdf(v)), o, len, x),
                VecOp::GeluTanh => {
                    let half = splat(0.5);
                    let k = splat((2.0 / std::f64::consts::PI).sqrt() as f32);
                    let k1 = splat(0.044715f64 as f32);
                    // x + k1 x x x, as the scalar form groups it: ((k1 x) x) x.
                    let g = |v| {
                        let c = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(k1, v), v), v);
                        let t = tanh(_mm512_mul_ps(k, _mm512_add_ps(v, c)));
                        _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(splat(1.0), t))
                    };
                    run_with!(T, g, o, len, x)
                }
            }
        }

        /// `o[i] = op(x[i], y[i])` for `i < len`, elements of type `T`.
        ///
        /// # Safety
        /// As [`run1`], for both inputs.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $run2<T: Lanes>(op: VecOp2, o: *mut u8, x: *const u8, y: *const u8, len: usize) {
            let (o, x, y) = (o as *mut T, x as *const T, y as *const T);
            match op {
                VecOp2::GeluBackward => {
                    // The scalar form's constants (binary.rs), rounded from f64 as it rounds them.
                    let k =
                        2.0 / std::f64::consts::PI.sqrt() * std::f64::consts::FRAC_1_SQRT_2 * 0.5;
                    let (k, half) = (splat(k as f32), splat(0.5));
                    // g * (cdf + x * pdf), pdf = k exp(-(x x / 2)): unfused, as the scalar form.
                    let f = |g, v| {
                        let pdf =
                            _mm512_mul_ps(k, exp(neg(_mm512_mul_ps(_mm512_mul_ps(half, v), v))));
                        _mm512_mul_ps(g, _mm512_add_ps(normal_cdf(v), _mm512_mul_ps(v, pdf)))
                    };
                    run_with!(T, f, o, len, x, y)
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
runners!(
    run1,
    run2,
    "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c"
);
#[cfg(target_arch = "x86_64")]
runners!(
    run1_bf16,
    run2_bf16,
    "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c,avx512bf16"
);

#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn splat(c: f32) -> V {
    _mm512_set1_ps(c)
}

/// `-v` (the sign flipped, as Rust's `-x`).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn neg(v: V) -> V {
    _mm512_xor_ps(v, splat(-0.0))
}

/// `|mag|` with `sign`'s sign bit (Rust's `mag.copysign(sign)`): one `vpternlogd`, which takes
/// the bits of `sign` where the mask has them, of `mag` elsewhere.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn copysign(mag: V, sign: V) -> V {
    let m = _mm512_set1_epi32(i32::MIN);
    let (a, b) = (_mm512_castps_si512(mag), _mm512_castps_si512(sign));
    _mm512_castsi512_ps(_mm512_ternarylogic_epi32::<0xd8>(a, b, m))
}

/// `if x < c { a } else { b }` per lane (false for NaN, as the scalar comparison).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn lt_select(x: V, c: f32, a: V, b: V) -> V {
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, splat(c)), b, a)
}

/// `min(c, v)` keeping a NaN `v` (as the scalar `if v > c { c } else { v }`).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn at_most(c: f32, v: V) -> V {
    // `vminps` returns its second operand when either is NaN.
    _mm512_min_ps(splat(c), v)
}

/// `max(c, v)` keeping a NaN `v` (as the scalar `if v < c { c } else { v }`).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn at_least(c: f32, v: V) -> V {
    _mm512_max_ps(splat(c), v)
}

/// `vmath::poly`: Horner's rule with fused multiply-adds.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn poly<const N: usize>(x: V, c: [f32; N]) -> V {
    let mut acc = splat(c[0]);
    for &ck in &c[1..] {
        acc = _mm512_fmadd_ps(acc, x, splat(ck));
    }
    acc
}

/// `vmath::exp_reduce`: `(r, n)`, `n` as a float.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn exp_reduce(x: V) -> (V, V) {
    let t = _mm512_fmadd_ps(x, splat(std::f32::consts::LOG2_E), splat(MAGIC));
    let n = _mm512_sub_ps(t, splat(MAGIC));
    let r = _mm512_fmadd_ps(n, splat(-LN2_LO), _mm512_fmadd_ps(n, splat(-LN2_HI), x));
    (r, n)
}

/// `vmath::expm1_kernel`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn expm1_kernel(r: V) -> V {
    _mm512_fmadd_ps(poly(r, EXPM1_P), _mm512_mul_ps(r, r), r)
}

/// `vmath::exp`: [`exp_normal`] of `x` clamped to [-104, 89], where the scalar form scales
/// `2 (1 + em1)` by `2^(n-1)` (its `fma(em1, 2, 2)` is twice `1 + em1` rounded), in two steps
/// for subnormal results: one rounding either way.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn exp(x: V) -> V {
    exp_normal(at_most(89.0, at_least(-104.0, x)))
}

/// `vmath::exp_normal` (`(1 + em1) 2^n`), whose one `vscalefps` rounding also gives [`exp`]'s
/// subnormal and overflowing results.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn exp_normal(x: V) -> V {
    let (r, n) = exp_reduce(x);
    _mm512_scalef_ps(_mm512_add_ps(expm1_kernel(r), splat(1.0)), n)
}

/// `vmath::tanh`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
pub(crate) fn tanh(x: V) -> V {
    let a = _mm512_abs_ps(x);
    let z = _mm512_mul_ps(x, x);
    let small = _mm512_mul_ps(x, _mm512_fmadd_ps(z, poly(z, TANH_P), splat(1.0)));
    let (r, n) = exp_reduce(_mm512_mul_ps(splat(2.0), at_most(TANH_MAX, a)));
    let s = _mm512_scalef_ps(splat(1.0), n);
    let den = _mm512_fmadd_ps(s, expm1_kernel(r), _mm512_add_ps(s, splat(1.0)));
    let big = copysign(_mm512_sub_ps(splat(1.0), _mm512_div_ps(splat(2.0), den)), x);
    lt_select(a, TANH_SPLIT, small, big)
}

/// `vmath::sigmoid`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
pub(crate) fn sigmoid(x: V) -> V {
    _mm512_div_ps(splat(1.0), _mm512_add_ps(splat(1.0), exp(neg(x))))
}

/// `vmath::normal_cdf`: the coefficients of the 16 polynomials are one vector each, indexed by
/// the low 4 bits of `|x| / W + MAGIC` (a permute, no table in memory).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn normal_cdf(x: V) -> V {
    // `min(LIM, a)` returns `a` where it is NaN (the second operand), as the scalar form.
    let a = _mm512_min_ps(splat(CDF_LIM), _mm512_abs_ps(x));
    let t = _mm512_fmadd_ps(a, splat(CDF_INV_W), splat(MAGIC));
    let r = _mm512_fnmadd_ps(_mm512_sub_ps(t, splat(MAGIC)), splat(CDF_W), a);
    let i = _mm512_castps_si512(t);
    // SAFETY: each row is 16 floats.
    let row = |k: usize| _mm512_permutexvar_ps(i, unsafe { _mm512_loadu_ps(CDF_P[k].as_ptr()) });
    let mut acc = row(0);
    for k in 1..CDF_P.len() {
        acc = _mm512_fmadd_ps(acc, r, row(k));
    }
    _mm512_add_ps(splat(0.5), copysign(acc, x))
}

/// `vmath::erfc_big`; the scalar form's `m 2^(n+64) 2^-64` in one scaling.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn erfc_big(a: V) -> V {
    let one = splat(1.0);
    let a2 = _mm512_add_ps(a, a);
    let den = _mm512_add_ps(a2, one);
    let den_lo = _mm512_add_ps(_mm512_sub_ps(a2, den), one);
    let t = _mm512_div_ps(one, den);
    let q = poly(_mm512_sub_ps(t, splat(ERFC_TM)), ERFC_Q);
    let z = _mm512_and_ps(
        a,
        _mm512_castsi512_ps(_mm512_set1_epi32(0xffff_f000u32 as i32)),
    );
    let d = _mm512_mul_ps(_mm512_sub_ps(a, z), _mm512_add_ps(a, z));
    let zz = _mm512_mul_ps(z, z);
    let qd = _mm512_sub_ps(q, d);
    let nt = _mm512_fmadd_ps(
        _mm512_sub_ps(qd, zz),
        splat(std::f32::consts::LOG2_E),
        splat(MAGIC),
    );
    let n = _mm512_sub_ps(nt, splat(MAGIC));
    let r = _mm512_add_ps(
        _mm512_sub_ps(neg(zz), _mm512_mul_ps(n, splat(LN2_HI))),
        _mm512_fmadd_ps(n, splat(-LN2_LO), qd),
    );
    let em1 = expm1_kernel(r);
    let e = _mm512_fnmadd_ps(t, den_lo, _mm512_fnmadd_ps(t, den, one));
    let c = _mm512_mul_ps(t, e);
    let m = _mm512_add_ps(t, _mm512_fmadd_ps(t, em1, _mm512_fmadd_ps(c, em1, c)));
    _mm512_scalef_ps(m, n)
}

/// `vmath::erfc`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn erfc(x: V) -> V {
    let one = splat(1.0);
    let hi = _mm512_sub_ps(one, x);
    let lo = _mm512_sub_ps(_mm512_sub_ps(one, hi), x);
    let p = poly(_mm512_mul_ps(x, x), ERF_SMALL_P);
    let small = _mm512_add_ps(hi, _mm512_fnmadd_ps(x, p, lo));
    let a = _mm512_abs_ps(x);
    let e = erfc_big(at_most(ERFC_MAX, a));
    let big = lt_select(x, 0.0, _mm512_sub_ps(splat(2.0), e), e);
    lt_select(a, ERFC_SPLIT, small, big)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::simd::Isa;
    use super::super::vmath;
    use super::*;

    /// The scalar form of `op`, as unary.rs writes it for float32 (with FMA).
    fn scalar(op: VecOp, x: f32) -> f32 {
        let isa = Isa::AVX512;
        match op {
            VecOp::Exp => vmath::exp(isa, x),
            VecOp::Tanh => vmath::tanh(isa, x),
            VecOp::Sigmoid => vmath::sigmoid(isa, x),
            VecOp::Silu => x * vmath::sigmoid(isa, x),
            VecOp::Erfc => vmath::erfc(isa, x),
            VecOp::Gelu => x * vmath::normal_cdf(isa, x),
            VecOp::GeluTanh => {
                let k = (2.0 / std::f64::consts::PI).sqrt() as f32;
                let k1 = 0.044715f64 as f32;
                0.5 * x * (1.0 + vmath::tanh(isa, k * (x + k1 * x * x * x)))
            }
        }
    }

    const OPS: [VecOp; 7] = [
        VecOp::Exp,
        VecOp::Tanh,
        VecOp::Sigmoid,
        VecOp::Silu,
        VecOp::Erfc,
        VecOp::Gelu,
        VecOp::GeluTanh,
    ];

    const OPS2: [VecOp2; 1] = [VecOp2::GeluBackward];

    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    /// [`run1`] on float32.
    ///
    /// # Safety
    /// As [`run1`].
    unsafe fn run(op: VecOp, o: *mut f32, x: *const f32, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { run1::<f32>(op, o as *mut u8, x as *const u8, len) }
    }

    /// The scalar form of `op`, as binary.rs writes it for float32 (with FMA).
    fn scalar2(op: VecOp2, g: f32, x: f32) -> f32 {
        let isa = Isa::AVX512;
        match op {
            VecOp2::GeluBackward => {
                let k = (2.0 / std::f64::consts::PI.sqrt() * std::f64::consts::FRAC_1_SQRT_2 * 0.5)
                    as f32;
                let pdf = k * vmath::exp(isa, -(0.5 * x * x));
                g * (vmath::normal_cdf(isa, x) + x * pdf)
            }
        }
    }

    /// The two-input forms: every 1021st float as `x` (4.2 million) against gradients of
    /// every magnitude, at a length that leaves a partial last vector.
    #[test]
    fn two_input_forms_same_bits_as_the_scalar_forms() {
        if level() < 3 {
            return;
        }
        let mut xs: Vec<f32> = (0..u32::MAX).step_by(1021).map(f32::from_bits).collect();
        xs.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            CDF_LIM,
            -CDF_LIM,
        ]);
        let gs: Vec<f32> = (0..xs.len())
            .map(|i| f32::from_bits((i as u32).wrapping_mul(2_654_435_761)))
            .collect();
        let mut out = vec![0.0f32; xs.len()];
        for op in OPS2 {
            let n = xs.len();
            // SAFETY: level 3 (checked); all three have n elements.
            unsafe {
                run2::<f32>(
                    op,
                    out.as_mut_ptr() as *mut u8,
                    gs.as_ptr() as *const u8,
                    xs.as_ptr() as *const u8,
                    n,
                )
            };
            let bad: Vec<_> = (0..n)
                .filter(|&i| !same(out[i], scalar2(op, gs[i], xs[i])))
                .take(5)
                .map(|i| (gs[i], xs[i], out[i], scalar2(op, gs[i], xs[i])))
                .collect();
            assert!(bad.is_empty(), "{op:?}: (g, x, vector, scalar) {bad:?}");
        }
    }

    /// bfloat16 and float16: every one of the 65536 values through each op (and as `x` of the
    /// two-input ops), widened, computed and narrowed as the scalar loops do
    /// (`FloatStore::load`/`store`): the same values (NaN for NaN).
    #[test]
    fn reduced_floats_same_bits_as_the_scalar_loops() {
        use super::super::reduced::{bf16_bits, bf16_from_bits, f16_bits, f16_from_bits};
        if level() < 3 {
            return;
        }
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let gs: Vec<u16> = all.iter().map(|&h| h.rotate_left(7)).collect();
        type Convert = (fn(u16) -> f32, fn(f32) -> u16, Run1, Run2);
        let kinds: [(&str, Convert); 2] = [
            (
                "bf16",
                (bf16_from_bits, bf16_bits, run1::<bf16>, run2::<bf16>),
            ),
            ("f16", (f16_from_bits, f16_bits, run1::<f16>, run2::<f16>)),
        ];
        let native: [(&str, Convert); 1] = [(
            "bf16 native",
            (
                bf16_from_bits,
                bf16_bits,
                run1_bf16::<Bf16Native>,
                run2_bf16::<Bf16Native>,
            ),
        )];
        let kinds = kinds
            .iter()
            .chain(if native_bf16() { &native[..] } else { &[] });
        for &(name, (load, store, r1, r2)) in kinds {
            let same16 = |a: u16, b: u16| a == b || (load(a).is_nan() && load(b).is_nan());
            let mut out = vec![0u16; all.len()];
            for op in OPS {
                // SAFETY: level 3 (checked); both have 65536 elements.
                unsafe {
                    r1(
                        op,
                        out.as_mut_ptr() as *mut u8,
                        all.as_ptr() as *const u8,
                        all.len(),
                    )
                };
                for (&h, &y) in all.iter().zip(&out) {
                    let want = store(scalar(op, load(h)));
                    assert!(
                        same16(y, want),
                        "{name} {op:?} {h:#06x}: {y:#06x} != {want:#06x}"
                    );
                }
            }
            for op in OPS2 {
                let (o, g, x) = (
                    out.as_mut_ptr() as *mut u8,
                    gs.as_ptr() as *const u8,
                    all.as_ptr() as *const u8,
                );
                // SAFETY: level 3 (checked); all three have 65536 elements.
                unsafe { r2(op, o, g, x, all.len()) };
                for i in 0..all.len() {
                    let want = store(scalar2(op, load(gs[i]), load(all[i])));
                    assert!(same16(out[i], want), "{name} {op:?} {:#06x}", all[i]);
                }
            }
        }
    }

    /// Every 1021st float of both signs (4.2 million), the special values and the ranges' edges:
    /// the same bits as the scalar forms.
    #[test]
    fn same_bits_as_the_scalar_forms() {
        if level() < 3 {
            return;
        }
        let mut xs: Vec<f32> = (0..u32::MAX).step_by(1021).map(f32::from_bits).collect();
        xs.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::MIN_POSITIVE,
            -104.0,
            89.0,
            88.72,
            -87.0,
            -86.5,
            ERFC_MAX,
            ERFC_SPLIT,
            -ERFC_SPLIT,
            TANH_MAX,
            TANH_SPLIT,
            -TANH_SPLIT,
        ]);
        let mut out = vec![0.0f32; xs.len()];
        for op in OPS {
            // SAFETY: level 3 (checked); both runs have xs.len() elements.
            unsafe { run(op, out.as_mut_ptr(), xs.as_ptr(), xs.len()) };
            let bad: Vec<_> = xs
                .iter()
                .zip(&out)
                .filter(|&(&x, &y)| !same(y, scalar(op, x)))
                .take(5)
                .map(|(&x, &y)| (x, y, scalar(op, x)))
                .collect();
            assert!(bad.is_empty(), "{op:?}: (x, vector, scalar) {bad:?}");
        }
    }

    /// Runs of every length up to 40 at every offset up to 16, in place too: the masked last
    /// vector writes its elements and nothing past them.
    #[test]
    fn partial_vectors_and_in_place() {
        if level() < 3 {
            return;
        }
        let src: Vec<f32> = (0..64).map(|i| (i as f32 - 30.0) * 0.37).collect();
        for op in OPS {
            for start in 0..16 {
                for len in 0..=40 {
                    let mut out = vec![7.0f32; 64];
                    // SAFETY: level 3; elements start..start + len of both, within 64.
                    unsafe {
                        run(
                            op,
                            out.as_mut_ptr().add(start),
                            src.as_ptr().add(start),
                            len,
                        )
                    };
                    for (i, (&y, &x)) in out.iter().zip(&src).enumerate() {
                        let want = if (start..start + len).contains(&i) {
                            scalar(op, x)
                        } else {
                            7.0
                        };
                        assert!(same(y, want), "{op:?} start {start} len {len} at {i}");
                    }
                    let mut inplace = src.clone();
                    let p = inplace.as_mut_ptr();
                    // SAFETY: as above, the output the input itself.
                    unsafe { run(op, p.add(start), p.add(start), len) };
                    for i in start..start + len {
                        assert!(same(inplace[i], scalar(op, src[i])));
                    }
                }
            }
        }
    }
}
