//! float16/bfloat16 <-> float32 conversion: of dense runs ([`dense_convert`], which `copy` uses
//! for `x.to(dtype)` and autocast's casts), and of whole tensors, for kernels that compute reduced
//! floats in float32 (matrix products, convolutions): a dense parallel fast path on the same
//! conversions, the generic strided copy otherwise.

use super::layout::GRAIN;
use super::parallel::{par_chunks_mut, SendPtr};
use super::simd::Isa;
use crate::dtype::DType;
use crate::error::FooResult;
use crate::tensor::{contiguous_strides, is_dense, Strides, TensorMut, TensorRef};
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// Converts `len` dense elements at `src` into `dst` (see [`dense_convert`]).
pub type DenseConvert = unsafe fn(dst: *mut u8, src: *const u8, len: usize);

/// The dense-run conversion from `from` to `to`, for the pairs that have one: float32 to and from
/// bfloat16 and float16. The generic element-wise cast goes through float64 and, for float16,
/// `half`'s scalar software conversion: 3.6x (bfloat16) and 13x (float16) the CPU's time for 1M
/// elements, which autocast pays on every weight of every forward.
pub fn dense_convert(to: DType, from: DType) -> Option<DenseConvert> {
    match (to, from) {
        (DType::BF16, DType::F32) => Some(convert_bits::<f32, bf16>),
        (DType::F32, DType::BF16) => Some(convert_bits::<bf16, f32>),
        (DType::F16, DType::F32) => Some(f16_from_f32),
        (DType::F32, DType::F16) => Some(f16_to_f32),
        _ => None,
    }
}

/// float32 -> bfloat16 bits, round-to-nearest-even; NaN stays NaN (made quiet), as
/// `half::bf16::from_f32` does, in selects rather than branches (LLVM vectorizes it).
#[inline(always)]
pub fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let rounded = (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16;
    if b & 0x7FFF_FFFF > 0x7F80_0000 {
        (b >> 16) as u16 | 0x0040
    } else {
        rounded
    }
}

/// bfloat16 bits -> float32, exactly (a NaN stays a NaN; `half::bf16::to_f32` also sets its
/// quiet bit, which costs a compare and a blend per vector in the elementwise loops).
#[inline(always)]
pub fn bf16_from_bits(x: u16) -> f32 {
    f32::from_bits(u32::from(x) << 16)
}

/// float16 bits -> float32, exactly, in selects (LLVM vectorizes it; `half`'s software path,
/// taken without F16C at compile time, is branches per element: 9-38x the CPU's time for
/// float16 elementwise ops). Subnormals go through an integer-to-float conversion and a power
/// of two, so flush-to-zero modes do not touch them.
#[inline(always)]
pub fn f16_from_bits(h: u16) -> f32 {
    let h = u32::from(h);
    let sign = (h & 0x8000) << 16;
    let exp = (h >> 10) & 0x1f;
    let man = h & 0x3ff;
    let normal = f32::from_bits(sign | ((exp + 112) << 23) | (man << 13));
    let special = f32::from_bits(sign | 0x7f80_0000 | (man << 13));
    let small = f32::from_bits(sign | (man as f32 * f32::from_bits(0x3380_0000)).to_bits());
    match exp {
        0 => small,
        31 => special,
        _ => normal,
    }
}

/// float32 -> float16 bits, round-to-nearest-even as `vcvtps2ph` and `half` (NaN stays NaN,
/// quiet; its payload is not kept), in selects (see [`f16_from_bits`]). F. Giesen's
/// `float_to_half_fast3_rtne`: results below float16's normal range come from one float32
/// addition of a magic number, which rounds them to the nearest even subnormal.
#[inline(always)]
pub fn f16_bits(x: f32) -> u16 {
    const F32_INF: u32 = 255 << 23;
    const F16_MAX: u32 = (127 + 16) << 23;
    const DENORM_MAGIC: u32 = ((127 - 15) + (23 - 10) + 1) << 23;
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let u = b & 0x7fff_ffff;
    let big = if u > F32_INF { 0x7e00 } else { 0x7c00 };
    let tiny = (f32::from_bits(u) + f32::from_bits(DENORM_MAGIC))
        .to_bits()
        .wrapping_sub(DENORM_MAGIC) as u16;
    let rounded = (u
        .wrapping_add(((15u32.wrapping_sub(127)) << 23).wrapping_add(0xfff))
        .wrapping_add((u >> 13) & 1)
        >> 13) as u16;
    sign | if u >= F16_MAX {
        big
    } else if u < (113 << 23) {
        tiny
    } else {
        rounded
    }
}

/// float16 into float32 for the elementwise engine's block loops (`core::widened`):
/// `vcvtph2ps` in the multiversioned copies (`isa`: 16 at a time with AVX-512, 8 with F16C),
/// [`f16_from_bits`] for the tail and in the baseline copy.
///
/// # Safety
/// `src` holds `n` elements and `dst` room for `n`; `isa` is the calling copy's, whose
/// features the CPU has (`simd::level` requires F16C for the AVX2 and AVX-512 copies).
#[inline(always)]
pub unsafe fn f16_run_to_f32(isa: Isa, dst: *mut f32, src: *const f16, n: usize) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::AVX512 {
        // SAFETY: the AVX-512 copy runs only where the CPU has AVX-512 F; the caller's contract.
        done = unsafe { x86::f16_to_f32(dst, src as *const u16, n) };
    } else if isa == Isa::FMA {
        // SAFETY: the AVX2 copy runs only where the CPU has AVX and F16C; as above.
        done = unsafe { x86::f16_to_f32_f16c(dst, src as *const u16, n) };
    }
    for i in done..n {
        // SAFETY: i < n (the caller's contract).
        unsafe { *dst.add(i) = f16_from_bits((*src.add(i)).to_bits()) };
    }
}

/// The narrowing counterpart of [`f16_run_to_f32`] (`vcvtps2ph`, [`f16_bits`]).
///
/// # Safety
/// As [`f16_run_to_f32`].
#[inline(always)]
pub unsafe fn f16_run_from_f32(isa: Isa, dst: *mut f16, src: *const f32, n: usize) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::AVX512 {
        // SAFETY: as in `f16_run_to_f32`.
        done = unsafe { x86::f16_from_f32(dst as *mut u16, src, n) };
    } else if isa == Isa::FMA {
        // SAFETY: as in `f16_run_to_f32`.
        done = unsafe { x86::f16_from_f32_f16c(dst as *mut u16, src, n) };
    }
    for i in done..n {
        // SAFETY: i < n (the caller's contract).
        unsafe { *dst.add(i) = f16::from_bits(f16_bits(*src.add(i))) };
    }
}

/// Eight float16 at `src` as float32: one `vcvtph2ps` in the multiversioned copies (`isa`),
/// [`f16_from_bits`] in the baseline one (`core::widened::Vectors`).
///
/// # Safety
/// `src` holds 8 elements; `isa` as in [`f16_run_to_f32`].
#[inline(always)]
pub unsafe fn f16_lanes_to_f32(isa: Isa, src: *const f16) -> [f32; 8] {
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::BASELINE {
        // SAFETY: the AVX2 and AVX-512 copies run where the CPU has F16C; the caller's
        // contract.
        return unsafe { x86::f16_lanes_to_f32(src as *const u16) };
    }
    // SAFETY: k < 8 (the caller's contract).
    std::array::from_fn(|k| f16_from_bits(unsafe { (*src.add(k)).to_bits() }))
}

/// The narrowing counterpart of [`f16_lanes_to_f32`] (`vcvtps2ph`, [`f16_bits`]).
///
/// # Safety
/// `dst` has room for 8 elements; `isa` as in [`f16_run_to_f32`].
#[inline(always)]
pub unsafe fn f16_lanes_from_f32(isa: Isa, v: [f32; 8], dst: *mut f16) {
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::BASELINE {
        // SAFETY: as in `f16_lanes_to_f32`.
        return unsafe { x86::f16_lanes_from_f32(v, dst as *mut u16) };
    }
    for (k, v) in v.into_iter().enumerate() {
        // SAFETY: k < 8 (the caller's contract).
        unsafe { *dst.add(k) = f16::from_bits(f16_bits(v)) };
    }
}

/// float32 and bfloat16 converted as the CPU's vectorized copy does (`cvtfp32_bf16`: round to
/// nearest even, every nan becomes 0xFFFF), written as integer operations that LLVM vectorizes.
pub trait Bits32: Copy {
    fn widen(self) -> f32;
    fn narrow(v: f32) -> Self;
}

impl Bits32 for f32 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
    #[inline(always)]
    fn narrow(v: f32) -> f32 {
        v
    }
}

impl Bits32 for bf16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        f32::from_bits((self.to_bits() as u32) << 16)
    }
    #[inline(always)]
    fn narrow(v: f32) -> bf16 {
        let u = v.to_bits();
        let rounded = (u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16) as u16;
        bf16::from_bits(if v.is_nan() { 0xffff } else { rounded })
    }
}

/// bfloat16 as `vdpbf16ps` reads and writes it: a subnormal operand is read as a zero of its
/// sign, a subnormal float32 result is flushed to one before rounding. (Storage: bfloat16.)
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Bf16Flushed(u16);

impl Bits32 for Bf16Flushed {
    #[inline(always)]
    fn widen(self) -> f32 {
        let u = (self.0 as u32) << 16;
        f32::from_bits(if u & 0x7f80_0000 == 0 {
            u & 0x8000_0000
        } else {
            u
        })
    }
    #[inline(always)]
    fn narrow(v: f32) -> Self {
        let u = v.to_bits();
        let flushed = if u & 0x7f80_0000 == 0 {
            u & 0x8000_0000
        } else {
            u
        };
        Bf16Flushed(bf16::narrow(f32::from_bits(flushed)).to_bits())
    }
}

/// Runs the dense conversion `convert` over `n` elements in parallel chunks; `sizes` are the
/// destination's and the source's element sizes in bytes.
///
/// # Safety
/// `src` holds `n` readable elements and `dst` room for `n`, of the types `convert` expects;
/// they do not overlap.
pub unsafe fn par_convert(
    dst: *mut u8,
    src: *const u8,
    n: usize,
    sizes: [usize; 2],
    convert: DenseConvert,
) {
    let (d, s) = (SendPtr::new(dst), SendPtr::of(src));
    super::parallel::parallel_for(n, GRAIN, &|a, e| {
        // SAFETY: elements a..e of both, inside the `n` of the caller's contract.
        unsafe {
            convert(
                d.at((a * sizes[0]) as isize),
                s.at((a * sizes[1]) as isize),
                e - a,
            )
        }
    });
}

crate::unsafe_multiversion!(
    /// `len` elements of `I` at `src` into `O` at `dst`.
    ///
    /// # Safety
    /// `src` holds `len` readable `I`s and `dst` room for `len` `O`s; they do not overlap.
    pub unsafe fn convert_bits<I: Bits32, O: Bits32>(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract.
        let (d, s) = unsafe {
            (
                std::slice::from_raw_parts_mut(dst as *mut O, len),
                std::slice::from_raw_parts(src as *const I, len),
            )
        };
        for (d, &s) in d.iter_mut().zip(s) {
            *d = O::narrow(s.widen());
        }
    }
);

/// float32 into float16, rounding to nearest even: `vcvtps2ph` 16 at a time on AVX-512 CPUs, 8
/// at a time with F16C, `half`'s slice conversion (software) elsewhere and for the tail.
///
/// # Safety
/// As [`convert_bits`].
unsafe fn f16_from_f32(dst: *mut u8, src: *const u8, len: usize) {
    let (d, s) = (dst as *mut f16, src as *const f32);
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if super::simd::level() >= 3 {
        // SAFETY: the CPU has AVX-512 F (checked); the rest is the caller's contract.
        done = unsafe { x86::f16_from_f32(d as *mut u16, s, len) };
    } else if x86::has_f16c() {
        // SAFETY: the CPU has AVX and F16C (checked); the rest is the caller's contract.
        done = unsafe { x86::f16_from_f32_f16c(d as *mut u16, s, len) };
    }
    // SAFETY: the caller's contract, for the elements from `done` on.
    let (d, s) = unsafe {
        (
            std::slice::from_raw_parts_mut(d.add(done), len - done),
            std::slice::from_raw_parts(s.add(done), len - done),
        )
    };
    d.convert_from_f32_slice(s);
}

/// float16 into float32 (exact), as [`f16_from_f32`] with `vcvtph2ps`.
///
/// # Safety
/// As [`convert_bits`].
unsafe fn f16_to_f32(dst: *mut u8, src: *const u8, len: usize) {
    let (d, s) = (dst as *mut f32, src as *const f16);
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if super::simd::level() >= 3 {
        // SAFETY: as in `f16_from_f32`.
        done = unsafe { x86::f16_to_f32(d, s as *const u16, len) };
    } else if x86::has_f16c() {
        // SAFETY: as in `f16_from_f32`.
        done = unsafe { x86::f16_to_f32_f16c(d, s as *const u16, len) };
    }
    // SAFETY: the caller's contract, for the elements from `done` on.
    let (d, s) = unsafe {
        (
            std::slice::from_raw_parts_mut(d.add(done), len - done),
            std::slice::from_raw_parts(s.add(done), len - done),
        )
    };
    s.convert_to_f32_slice(d);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    // The AVX-512 intrinsics are stable since Rust 1.89, the crate's real minimum (see
    // `gemm::bf16::microkernel`).
    #![allow(clippy::incompatible_msrv)]
    use std::arch::x86_64::*;

    /// Converts the whole 16-element blocks of `len`; returns how many elements it did.
    ///
    /// # Safety
    /// AVX-512 F; `src` holds `len` floats and `dst` room for `len` halves.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub unsafe fn f16_from_f32(dst: *mut u16, src: *const f32, len: usize) -> usize {
        let blocks = len / 16 * 16;
        for i in (0..blocks).step_by(16) {
            // SAFETY: elements i..i + 16 < len of both (the caller's contract).
            unsafe {
                let v = _mm512_loadu_ps(src.add(i));
                let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
                _mm256_storeu_si256(dst.add(i) as *mut __m256i, h);
            }
        }
        blocks
    }

    /// The widening counterpart of [`f16_from_f32`].
    ///
    /// # Safety
    /// As [`f16_from_f32`], with the roles swapped.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub unsafe fn f16_to_f32(dst: *mut f32, src: *const u16, len: usize) -> usize {
        let blocks = len / 16 * 16;
        for i in (0..blocks).step_by(16) {
            // SAFETY: as in `f16_from_f32`.
            unsafe {
                let h = _mm256_loadu_si256(src.add(i) as *const __m256i);
                _mm512_storeu_ps(dst.add(i), _mm512_cvtph_ps(h));
            }
        }
        blocks
    }

    /// Eight float16 widened (`vcvtph2ps`).
    ///
    /// # Safety
    /// AVX and F16C; `src` holds 8 halves.
    #[target_feature(enable = "avx,f16c")]
    #[inline]
    pub unsafe fn f16_lanes_to_f32(src: *const u16) -> [f32; 8] {
        // SAFETY: 8 halves at `src` (the caller's contract); __m256 is [f32; 8]'s layout.
        unsafe {
            std::mem::transmute::<__m256, [f32; 8]>(_mm256_cvtph_ps(_mm_loadu_si128(
                src as *const __m128i,
            )))
        }
    }

    /// Eight float32 narrowed to float16, to nearest even (`vcvtps2ph`).
    ///
    /// # Safety
    /// AVX and F16C; `dst` has room for 8 halves.
    #[target_feature(enable = "avx,f16c")]
    #[inline]
    pub unsafe fn f16_lanes_from_f32(v: [f32; 8], dst: *mut u16) {
        // SAFETY: as above.
        unsafe { store_cvtps_ph(dst, std::mem::transmute::<[f32; 8], __m256>(v)) }
    }

    /// `vcvtps2ph` into a register, then a store of the 8 halves at `dst`. LLVM folds
    /// `_mm256_cvtps_ph` and the store into the memory form, `vcvtps2ph m128, ymm`, which Zen 3
    /// runs slower than the two instructions: float32 -> float16 of 1e6 elements took 133 us
    /// on one thread, the CPU's 117 (its compiler keeps the register form).
    ///
    /// # Safety
    /// AVX and F16C; `dst` has room for 8 halves.
    #[target_feature(enable = "avx,f16c")]
    #[inline]
    unsafe fn store_cvtps_ph(dst: *mut u16, v: __m256) {
        let h: __m128i;
        // SAFETY: F16C (this function's features); registers only. Immediate 0: to nearest
        // even, as `_MM_FROUND_TO_NEAREST_INT`.
        unsafe {
            std::arch::asm!(
                "vcvtps2ph {h}, {v}, 0",
                h = lateout(xmm_reg) h,
                v = in(ymm_reg) v,
                options(pure, nomem, nostack, preserves_flags)
            );
            _mm_storeu_si128(dst as *mut __m128i, h);
        }
    }

    /// Whether the CPU converts float16 8 at a time (`vcvtps2ph`/`vcvtph2ps` on ymm).
    pub fn has_f16c() -> bool {
        is_x86_feature_detected!("avx") && is_x86_feature_detected!("f16c")
    }

    /// [`f16_from_f32`] 8 at a time with F16C (`half`'s own F16C path converts each 8 in a
    /// call of its own: 2.25x the CPU's time on a Zen 3).
    ///
    /// # Safety
    /// AVX and F16C; as [`f16_from_f32`].
    #[target_feature(enable = "avx,f16c")]
    #[inline]
    pub unsafe fn f16_from_f32_f16c(dst: *mut u16, src: *const f32, len: usize) -> usize {
        let blocks = len / 8 * 8;
        for i in (0..blocks).step_by(8) {
            // SAFETY: elements i..i + 8 < len of both (the caller's contract).
            unsafe {
                store_cvtps_ph(dst.add(i), _mm256_loadu_ps(src.add(i)));
            }
        }
        blocks
    }

    /// The widening counterpart of [`f16_from_f32_f16c`].
    ///
    /// # Safety
    /// As [`f16_from_f32_f16c`], with the roles swapped.
    #[target_feature(enable = "avx,f16c")]
    #[inline]
    pub unsafe fn f16_to_f32_f16c(dst: *mut f32, src: *const u16, len: usize) -> usize {
        let blocks = len / 8 * 8;
        for i in (0..blocks).step_by(8) {
            // SAFETY: as in `f16_from_f32_f16c`.
            unsafe {
                let h = _mm_loadu_si128(src.add(i) as *const __m128i);
                _mm256_storeu_ps(dst.add(i), _mm256_cvtph_ps(h));
            }
        }
        blocks
    }
}

/// A contiguous float32 copy of `t` (any float dtype, any strides).
pub fn to_f32_vec(t: &TensorRef) -> FooResult<Vec<f32>> {
    let n = t.numel();
    let mut buf = vec![0f32; n];
    match t.dtype {
        DType::F16 | DType::BF16 if t.is_contiguous() => widen_block(&mut buf, t.ptr, t.dtype),
        _ => {
            copy_row_major(t, &mut buf)?;
        }
    }
    Ok(buf)
}

/// Copies `t` (any float dtype, any strides) into `dst` (`t.numel()` floats) in row-major order
/// and returns those strides.
fn copy_row_major(t: &TensorRef, dst: &mut [f32]) -> FooResult<Strides> {
    let view = TensorMut {
        ptr: dst.as_mut_ptr() as *mut u8,
        shape: t.shape.clone(),
        strides: contiguous_strides(&t.shape),
        dtype: DType::F32,
    };
    super::copy::copy(&view, t)?;
    Ok(view.strides)
}

/// The float32 copy of a float16/bfloat16 `t` that [`widen_into`] makes: `t`'s own layout where
/// that layout fills one block of memory once broadcast (stride 0) dims are set aside
/// (contiguous, transposed, permuted, an expanded row), widened as it lies, so that a transposed
/// operand reaches a GEMM as a transposed view (which its packing reads directly) instead of
/// being turned row-major by a strided copy, and an expanded bias row stays one row; other
/// layouts get a contiguous copy. Returns the copy's length in elements.
pub fn widened_len(t: &TensorRef) -> usize {
    block_len(t).unwrap_or(t.numel())
}

/// Widens `t` into `dst` (of [`widened_len`] elements) and returns the strides of the float32
/// view of `dst` that holds `t`'s values.
pub fn widen_into(t: &TensorRef, dst: &mut [f32]) -> FooResult<Strides> {
    if block_len(t).is_some() {
        widen_block(dst, t.ptr, t.dtype);
        return Ok(t.strides.clone());
    }
    copy_row_major(t, dst)
}

/// The length of the block a float16/bfloat16 `t` fills from its first element once broadcast
/// dims are set aside, if it fills one (see [`widened_len`]).
fn block_len(t: &TensorRef) -> Option<usize> {
    let (shape, strides): (Vec<usize>, Vec<isize>) = t
        .shape
        .iter()
        .zip(t.strides.iter())
        .filter(|(&n, &s)| n != 1 && s != 0)
        .map(|(&n, &s)| (n, s))
        .unzip();
    let block = matches!(t.dtype, DType::F16 | DType::BF16)
        && t.numel() > 0
        && strides.iter().all(|&s| s > 0)
        && is_dense(&shape, &strides);
    block.then(|| shape.iter().product())
}

/// Widens the `dst.len()` float16/bfloat16 (`dtype`) elements at `src` into `dst`, in parallel.
fn widen_block(dst: &mut [f32], src: *const u8, dtype: DType) {
    let convert = dense_convert(DType::F32, dtype).expect("a float16 conversion");
    let src = SendPtr::<u16>::of(src);
    par_chunks_mut(dst, GRAIN, &|s, d| {
        // SAFETY: elements s..s + d.len() of the caller's block at `src` (live, 16-bit, read by
        // nobody who writes it during the call), into `d`.
        unsafe {
            convert(
                d.as_mut_ptr() as *mut u8,
                src.at(s as isize) as *const u8,
                d.len(),
            )
        }
    });
}

/// Writes the contiguous float32 values `src` (in `out`'s logical order) into `out`, rounding to
/// nearest-even for float16/bfloat16.
pub fn store_f32(out: &TensorMut, src: &[f32]) -> FooResult<()> {
    let n = out.numel();
    assert_eq!(src.len(), n, "store_f32: length mismatch");
    if n == 0 {
        return Ok(());
    }
    match out.dtype {
        DType::BF16 | DType::F16 if out.is_contiguous() => store_dense(out, src),
        _ => {
            let view = TensorRef {
                ptr: src.as_ptr() as *const u8,
                shape: out.shape.clone(),
                strides: contiguous_strides(&out.shape),
                dtype: DType::F32,
            };
            super::copy::copy(out, &view)
        }
    }
}

/// [`store_f32`] into a contiguous float16/bfloat16 `out` of `src.len() > 0` elements, in
/// parallel chunks of the output.
fn store_dense(out: &TensorMut, src: &[f32]) -> FooResult<()> {
    let convert = dense_convert(out.dtype, DType::F32).expect("a float16 conversion");
    // SAFETY: `out` is a live, writable, contiguous tensor of `src.len() > 0` 16-bit elements
    // (the caller checked its dtype and layout), which nothing else reads or writes during the
    // call.
    let dst = unsafe { std::slice::from_raw_parts_mut(out.ptr as *mut u16, src.len()) };
    par_chunks_mut(dst, GRAIN, &|a, d| {
        // SAFETY: `d` has room for the d.len() floats of src from a.
        unsafe {
            convert(
                d.as_mut_ptr() as *mut u8,
                src[a..].as_ptr() as *const u8,
                d.len(),
            )
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    /// `widen_into` keeps a layout that fills one block (contiguous, transposed, permuted, with
    /// broadcast dims) and copies any other into row-major order; either way the float32 view
    /// it returns holds `t`'s values at every index.
    #[test]
    fn widen_into_keeps_block_layouts() {
        let bits: Vec<u16> = (0..64u16)
            .map(|i| bf16::from_f32(i as f32 - 20.0).to_bits())
            .collect();
        let value = |t: &TensorRef, idx: &[usize]| -> f32 {
            let off: isize = idx
                .iter()
                .zip(t.strides.iter())
                .map(|(&i, &s)| i as isize * s)
                .sum();
            // SAFETY: an index inside the view of the owned buffer.
            bf16::from_bits(unsafe { *(t.ptr as *const u16).offset(off) }).to_f32()
        };
        // (shape, strides, offset, kept): a 4 x 6 matrix and its transpose, a batch-permuted
        // 2 x 3 x 4, a row expanded to 5 x 6, a column slice (strided), a 0-size view.
        let cases: [(&[usize], &[isize], usize, bool); 6] = [
            (&[4, 6], &[6, 1], 0, true),
            (&[6, 4], &[1, 6], 0, true),
            (&[2, 3, 4], &[4, 8, 1], 0, true),
            (&[5, 6], &[0, 1], 3, true),
            (&[4, 3], &[6, 2], 1, false),
            (&[0, 3], &[1, 4], 0, false),
        ];
        for (shape, strides, offset, kept) in cases {
            let t = TensorRef {
                ptr: bits[offset..].as_ptr() as *const u8,
                shape: shape.into(),
                strides: strides.into(),
                dtype: DType::BF16,
            };
            let mut buf = vec![f32::NAN; widened_len(&t)];
            let out_strides = widen_into(&t, &mut buf).unwrap();
            assert_eq!(
                out_strides.as_slice() == strides,
                kept,
                "{shape:?} {strides:?}"
            );
            let wide = TensorRef {
                ptr: buf.as_ptr() as *const u8,
                strides: out_strides,
                ..t.clone()
            };
            let numel: usize = shape.iter().product();
            for flat in 0..numel {
                let mut idx = vec![0; shape.len()];
                let mut rest = flat;
                for d in (0..shape.len()).rev() {
                    idx[d] = rest % shape[d];
                    rest /= shape[d];
                }
                let off: isize = idx
                    .iter()
                    .zip(wide.strides.iter())
                    .map(|(&i, &s)| i as isize * s)
                    .sum();
                assert_eq!(
                    buf[off as usize],
                    value(&t, &idx),
                    "{shape:?} {strides:?} at {idx:?}"
                );
            }
        }
    }

    /// The elementwise loops' float16 conversions give `half`'s values: every float16 widened
    /// exactly, and float32 narrowed with its rounding over a sweep of all exponents (ties,
    /// overflow to inf, subnormals, zeros); NaN stays NaN.
    #[test]
    fn f16_conversions_match_half() {
        for h in 0..=u16::MAX {
            let (got, want) = (f16_from_bits(h), f16::from_bits(h).to_f32());
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{h:#x}"
            );
        }
        let edges = [
            0.0f32,
            -0.0,
            65504.0,
            65519.99,
            65520.0,
            -65520.0,
            6.1035156e-5,
            5.9604645e-8,
            2.9802322e-8,
            2.9802326e-8,
            8.940697e-8,
            1.0 + 2f32.powi(-11),
            1.0 + 3.0 * 2f32.powi(-11),
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
            1e-45,
            f32::MAX,
        ];
        let sweep = (0..=u32::MAX).step_by(997).map(f32::from_bits);
        for x in edges.into_iter().chain(sweep) {
            let (got, want) = (f16_bits(x), f16::from_f32(x).to_bits());
            let nan = |b: u16| f16::from_bits(b).is_nan();
            assert!(
                got == want || (nan(got) && nan(want)),
                "{x:e} ({:#x}): {got:#x} != {want:#x}",
                x.to_bits()
            );
        }
    }

    #[test]
    fn reduced_round_trip_dense_and_strided() {
        let vals: Vec<f32> = (0..100_000).map(|i| (i as f32 - 5e4) * 0.37).collect();
        let b = Owned::new(
            vals.iter().map(|&v| bf16::from_f32(v)).collect(),
            &[100, 1000],
        );
        let w = to_f32_vec(&b.r()).unwrap();
        assert!(w.iter().zip(&b.data).all(|(&x, &y)| x == y.to_f32()));
        let mut t = b.r();
        t.shape = smallvec::smallvec![1000, 100];
        t.strides = smallvec::smallvec![1, 1000];
        let wt = to_f32_vec(&t).unwrap();
        assert_eq!(wt[1], b.data[1000].to_f32());
        let mut h = Owned::<f16>::zeros(&[100, 1000]);
        store_f32(&h.m(), &vals).unwrap();
        assert!(h
            .data
            .iter()
            .zip(&vals)
            .all(|(&x, &v)| x == f16::from_f32(v)));
    }
}
