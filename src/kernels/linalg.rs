//! Matrix products (mm, bmm, addmm, baddbmm, addmv, mv, dot) on the GEMM engine of
//! [`super::core::gemm`].
//!
//! One entry point, [`matmul`]: `out[b] = beta * c[b] + alpha * (a[b] @ b[b])` over 3-D operands
//! `[B, M, K] x [B, K, N] -> [B, M, N]` with arbitrary strides (zero strides for broadcast batch
//! dims, any order for transposed operands: the `gemm` crate packs them, so no copies are made).
//! The glue turns mm/mv/dot/addmv into this shape with metadata-only views. float32/float64 and
//! complex64/complex128 run on `gemm`; integer dtypes on a simple exact kernel (wrapping
//! arithmetic, as the CPU's integer GEMM); float16/bfloat16 are widened to float32
//! ([`super::core::reduced`]), multiplied by the float32 GEMM and rounded once, except bfloat16
//! products on AVX512-BF16 CPUs, which follow that instruction ([`bf16_product`]).

use super::core::copy::copy;
use super::core::element::Element;
use super::core::gemm::{self, bf16, gemm_raw, GemmElem, Mat, GEMM_DEPTH, GEMM_SPLIT_FLOPS};
use super::core::layout::GRAIN;
use super::core::parallel::{par_chunks_mut, parallel_for, SendPtr};
use super::core::reduced::{
    convert_bits, dense_convert, par_convert, store_f32, widen_into, widened_len, Bf16Flushed,
};
use super::core::scratch::with_scratch;
use crate::dtype::{DType, Kind};
use crate::error::FooResult;
use crate::tensor::{contiguous_strides, Scalar, TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use num_complex::{Complex32, Complex64};

/// bfloat16 products of at most this many multiply-adds are widened to float32 even where the
/// CPU multiplies bfloat16 natively: ATen hands a bfloat16 product to oneDNN (whose AVX512-BF16
/// and AMX instructions read subnormals as zero, so `inf * 1e-40` is nan) only above
/// `mkldnn_gemm_min_size` (16 * 16 * 16, `checksize` in mkldnn/Matmul.cpp) and widens smaller
/// ones; foo follows, so both give the same values on either side of the threshold.
pub const BF16_NATIVE_MIN_MACS: usize = 16 * 16 * 16;

fn check3(what: &str, t_shape: &[usize], want: [usize; 3]) -> FooResult<()> {
    if t_shape != want {
        return invalid_arg!("matmul: {what} has shape {t_shape:?}, expected {want:?}");
    }
    Ok(())
}

/// `out = beta * c + alpha * (a @ b)` over 3-D operands (see the module docs). `c` is ignored
/// when absent or when `beta == 0` (so NaN/inf in `c` do not propagate, as in PyTorch). When
/// `c` is the output itself (same pointer and strides, in-place addmm_) it is read in place.
pub fn matmul(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: Option<&TensorRef>,
    beta: &Scalar,
    alpha: &Scalar,
) -> FooResult<()> {
    if out.ndim() != 3 || a.ndim() != 3 || b.ndim() != 3 {
        return invalid_arg!("matmul: operands must be 3-D");
    }
    let (bs, m, k, n) = (a.shape[0], a.shape[1], a.shape[2], b.shape[2]);
    check3("mat2", &b.shape, [bs, k, n])?;
    check3("out", &out.shape, [bs, m, n])?;
    if let Some(c) = c {
        check3("self", &c.shape, [bs, m, n])?;
        if c.dtype != out.dtype {
            return invalid_arg!("matmul: self dtype differs from the output dtype");
        }
    }
    if a.dtype != out.dtype || b.dtype != out.dtype {
        return invalid_arg!("matmul: operand dtypes differ from the output dtype");
    }
    if out.numel() == 0 {
        return Ok(());
    }
    let dtype = out.dtype;
    match dtype.kind() {
        Kind::Float | Kind::Complex => match dtype {
            DType::F32 => gemm_batched::<f32>(out, a, b, c, beta, alpha),
            DType::F64 => gemm_batched::<f64>(out, a, b, c, beta, alpha),
            DType::C64 => complex_matmul::<Complex32>(out, a, b, c, beta, alpha),
            DType::C128 => complex_matmul::<Complex64>(out, a, b, c, beta, alpha),
            // AVX512-BF16 CPUs multiply bfloat16 with its semantics (see core::gemm::bf16); others
            // widen. Small products widen everywhere, as the CPU's do (see BF16_NATIVE_MIN_MACS).
            DType::BF16 if bf16::available() && bs * m * k * n > BF16_NATIVE_MIN_MACS => {
                let route = match bf16::native_pays() {
                    true => Bf16Route::Native,
                    false => Bf16Route::ViaF32,
                };
                bf16_product(out, a, b, c, beta, alpha, route)
            }
            DType::F16 | DType::BF16 => widened(out, a, b, c, beta, alpha),
            _ => not_implemented!("matmul: dtype {} is not supported", dtype.name()),
        },
        Kind::Signed | Kind::Unsigned => {
            crate::dispatch!(all: dtype, T => int_matmul::<T>(out, a, b, c, beta, alpha))
        }
        Kind::Bool => not_implemented!("\"addmm_impl_cpu_\" not implemented for 'Bool'"),
    }
}

/// How a bfloat16 product runs where the CPU has AVX512-BF16 (see [`bf16_product`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bf16Route {
    /// The `vdpbf16ps` kernel.
    Native,
    /// Widened to float32 with that instruction's semantics, multiplied on float32 FMAs.
    ViaF32,
}

/// A bfloat16 product above [`BF16_NATIVE_MIN_MACS`] on an AVX512-BF16 CPU, with the semantics
/// of the CPU backend's oneDNN kernel there (`vdpbf16ps`: subnormal operands read as zero,
/// subnormal results flushed to zero, float32 accumulation, one rounding), by the route that is
/// faster on this CPU (`bf16::native_pays`). `alpha == 0` keeps the native kernel, whose
/// `0 * sum` the float32 route would skip.
pub(crate) fn bf16_product(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: Option<&TensorRef>,
    beta: &Scalar,
    alpha: &Scalar,
    route: Bf16Route,
) -> FooResult<()> {
    if route == Bf16Route::Native || f32::from_scalar(alpha) == 0.0 {
        return bf16::matmul(out, a, b, c, beta, alpha);
    }
    let (bs, m, n) = (out.shape[0], out.shape[1], out.shape[2]);
    with_scratch::<f32, _>(a.numel(), |wa| {
        with_scratch::<f32, _>(b.numel(), |wb| {
            with_scratch::<f32, _>(bs * m * n, |acc| {
                let (va, vb) = (widen_flushed(a, wa)?, widen_flushed(b, wb)?);
                let acc_mut = TensorMut {
                    ptr: acc.as_mut_ptr() as *mut u8,
                    shape: out.shape.clone(),
                    strides: crate::tensor::contiguous_strides(&out.shape),
                    dtype: DType::F32,
                };
                let acc_ref = TensorRef {
                    ptr: acc_mut.ptr as *const u8,
                    shape: acc_mut.shape.clone(),
                    strides: acc_mut.strides.clone(),
                    dtype: DType::F32,
                };
                let use_c = c.filter(|_| f32::from_scalar(beta) != 0.0);
                if let Some(c) = use_c {
                    copy(&acc_mut, c)?;
                }
                gemm_batched::<f32>(&acc_mut, &va, &vb, use_c.map(|_| &acc_ref), beta, alpha)?;
                if out.is_contiguous() {
                    let convert = convert_bits::<f32, Bf16Flushed>;
                    // SAFETY: `out` is a contiguous bfloat16 tensor of `acc.len()` elements,
                    // distinct from the scratch `acc`.
                    unsafe {
                        par_convert(
                            out.ptr,
                            acc.as_ptr() as *const u8,
                            acc.len(),
                            [2, 4],
                            convert,
                        )
                    };
                    return Ok(());
                }
                flush_subnormals(acc);
                store_f32(out, acc)
            })
        })
    })
}

/// `t` (bfloat16) widened into `buf` with subnormals read as zero, as a float32 operand: in
/// `t`'s own memory order when `t` is a permutation of a dense block (`w.t()` stays a strided
/// view of a dense conversion, not an element-by-element gather), contiguous otherwise.
fn widen_flushed(t: &TensorRef, buf: &mut [f32]) -> FooResult<TensorRef> {
    let n = t.numel();
    let buf = &mut buf[..n];
    // Dense up to a permutation of its dims: strides, sorted, are the running products of sizes.
    let mut dims: Vec<usize> = (0..t.ndim()).filter(|&d| t.shape[d] > 1).collect();
    dims.sort_by_key(|&d| t.strides[d]);
    let mut dense = true;
    let mut next = 1isize;
    for &d in &dims {
        dense &= t.strides[d] == next;
        next *= t.shape[d] as isize;
    }
    if dense {
        // Widened in `t`'s memory order, one dense run, and viewed with its strides.
        let convert = convert_bits::<Bf16Flushed, f32>;
        // SAFETY: `t` is a dense block of `n` bfloat16 from its pointer (strides checked
        // above), `buf` is `n` floats of scratch.
        unsafe { par_convert(buf.as_mut_ptr() as *mut u8, t.ptr, n, [4, 2], convert) };
        return Ok(TensorRef {
            ptr: buf.as_ptr() as *const u8,
            shape: t.shape.clone(),
            strides: t.strides.clone(),
            dtype: DType::F32,
        });
    }
    // Gathered into row-major order.
    let dst = TensorMut {
        ptr: buf.as_mut_ptr() as *mut u8,
        shape: t.shape.clone(),
        strides: crate::tensor::contiguous_strides(&t.shape),
        dtype: DType::F32,
    };
    copy(&dst, t)?;
    flush_subnormals(buf);
    Ok(dst.as_ref())
}

/// Subnormal values become zeros of their sign (`vdpbf16ps`'s treatment of its operands and
/// results).
fn flush_subnormals(xs: &mut [f32]) {
    par_chunks_mut(xs, GRAIN, &|_, d| {
        for v in d {
            if v.abs() < f32::MIN_POSITIVE {
                *v = 0f32.copysign(*v);
            }
        }
    });
}

/// float16/bfloat16: widen the operands to float32, multiply with float32 accumulation (and
/// `beta * c` in float32), round once into the output. The operands keep their layouts
/// ([`widened_len`]), so the float32 product takes the paths it takes for float32 operands of
/// these layouts: `a @ w.t()` packs `w` in place, and an `addmm` bias row is added in the
/// kernel's epilogue instead of being widened into a whole matrix first. The float32 copies
/// are scratch buffers kept between calls: fresh ones cost a page fault per 4 KiB, which had
/// made a bfloat16 `a @ w.t()` 1.5 times the float32 one (520 x 256 @ (768 x 256)^T, Zen 3).
fn widened(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: Option<&TensorRef>,
    beta: &Scalar,
    alpha: &Scalar,
) -> FooResult<()> {
    let use_c = c.filter(|_| f32::from_scalar(beta) != 0.0);
    if widened_on_linear(out, a, b, use_c, beta, alpha)? {
        return Ok(());
    }
    with_widened(a, |a32| {
        with_widened(b, |b32| match use_c {
            Some(c) => with_widened(c, |c32| {
                widened_product(out, &a32, &b32, Some(&c32), beta, alpha)
            }),
            None => widened_product(out, &a32, &b32, None, beta, alpha),
        })
    })
}

/// [`widened`] on the linear kernel where it takes the float32 product
/// ([`gemm::linear_widened`]): `a` (rows dense) widened into scratch,
/// `b` widened as the kernel packs it, a
/// bias row (`c`, already dropped by the caller when `beta == 0`) widened into `n` floats and
/// added in the epilogue, and the sums rounded into `out` there (for depths over one piece,
/// through a float32 scratch matrix). The same bits as the float32 product of the widened
/// operands rounded once. False, with nothing written, where the kernel does not take it.
fn widened_on_linear(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: Option<&TensorRef>,
    beta: &Scalar,
    alpha: &Scalar,
) -> FooResult<bool> {
    let (bs, m, k, n) = (a.shape[0], a.shape[1], a.shape[2], b.shape[2]);
    let bias_row = c.map_or(true, |c| {
        f32::from_scalar(beta) == 1.0
            && (c.strides[1] == 0 || m == 1)
            && (c.strides[2] == 1 || n == 1)
    });
    // A transposed `a` (the weight gradient's `x.t()`) stays on the unfused path: turning its
    // widened copy row-major costs what fusing saves (measured on Zen 3, session 40).
    let takes = bs == 1
        && (a.strides[2] == 1 || k == 1)
        && f32::from_scalar(alpha) == 1.0
        && bias_row
        && (out.strides[2] == 1 || n == 1)
        && gemm::linear_takes(m, n, k, b.strides[1], b.strides[2]);
    let half = |t: DType| match t {
        DType::BF16 => Some(gemm::Half::Bf16),
        DType::F16 => Some(gemm::Half::F16),
        _ => None,
    };
    let (Some(rhs_half), Some(out_half), true) = (half(b.dtype), half(out.dtype), takes) else {
        return Ok(false);
    };
    let rhs = Mat {
        ptr: b.ptr as *const u16,
        rs: b.strides[1],
        cs: b.strides[2],
    };
    with_scratch::<f32, _>(c.map_or(0, |_| n), |bias| {
        if let Some(c) = c {
            let widen_c = dense_convert(DType::F32, c.dtype).expect("a 16-bit bias");
            // SAFETY: the bias row holds `n` adjacent 16-bit elements (checked above), `bias`
            // room for `n` floats.
            unsafe { widen_c(bias.as_mut_ptr().cast(), c.ptr, n) };
        }
        let bias = match c {
            Some(_) => bias.as_ptr(),
            None => std::ptr::null(),
        };
        with_widened(a, |a32| {
            // Widening keeps `a`'s rows dense (`widen_into` keeps block layouts).
            debug_assert!(a32.strides[2] == 1 || k == 1);
            let lhs = Mat {
                ptr: a32.ptr as *const f32,
                rs: a32.strides[1],
                cs: 1,
            };
            if k <= GEMM_DEPTH {
                // SAFETY: the operands are live tensors of `matmul`'s checked shapes, `out`
                // (16-bit, rows dense) overlaps none of them; `bias` is null or `n` floats.
                let done = unsafe {
                    gemm::linear_widened(
                        m,
                        n,
                        k,
                        out.ptr,
                        out.strides[1],
                        Some(out_half),
                        lhs,
                        rhs,
                        rhs_half,
                        bias,
                        true,
                    )
                };
                assert!(done, "linear_widened refused a product linear_takes took");
                return Ok(true);
            }
            with_scratch::<f32, _>(m * n, |acc| {
                // SAFETY: as above, into the float32 scratch `acc` of `m x n`.
                let done = unsafe {
                    gemm::linear_widened(
                        m,
                        n,
                        k,
                        acc.as_mut_ptr().cast(),
                        n as isize,
                        None,
                        lhs,
                        rhs,
                        rhs_half,
                        bias,
                        true,
                    )
                };
                assert!(done, "linear_widened refused a product linear_takes took");
                store_f32(out, acc)?;
                Ok(true)
            })
        })
    })
}

/// Calls `f` with a float32 view of a float16/bfloat16 `t` ([`widen_into`]) in scratch memory.
fn with_widened<R>(t: &TensorRef, f: impl FnOnce(TensorRef) -> FooResult<R>) -> FooResult<R> {
    with_scratch::<f32, _>(widened_len(t), |buf| {
        let strides = widen_into(t, buf)?;
        f(TensorRef {
            ptr: buf.as_ptr() as *const u8,
            shape: t.shape.clone(),
            strides,
            dtype: DType::F32,
        })
    })
}

/// [`widened`] on the float32 operands: the product in a float32 scratch matrix, rounded into
/// `out`.
fn widened_product(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: Option<&TensorRef>,
    beta: &Scalar,
    alpha: &Scalar,
) -> FooResult<()> {
    with_scratch::<f32, _>(out.numel(), |acc| {
        let acc_mut = TensorMut {
            ptr: acc.as_mut_ptr() as *mut u8,
            shape: out.shape.clone(),
            strides: contiguous_strides(&out.shape),
            dtype: DType::F32,
        };
        if f32::from_scalar(alpha) == 0.0 {
            // `gemm` skips the product when alpha is 0; the CPU's own kernel for half types
            // adds `0 * sum`, which is nan where the float32 sum overflowed or met inf.
            let mut prod = vec![0f32; out.numel()];
            let prod_mut = TensorMut {
                ptr: prod.as_mut_ptr() as *mut u8,
                ..acc_mut.clone()
            };
            let one = Scalar::from_f64(1.0);
            gemm_batched::<f32>(&prod_mut, a, b, None, beta, &one)?;
            match c {
                Some(c) => {
                    copy(&acc_mut, c)?;
                    let b = f32::from_scalar(beta);
                    if b != 1.0 {
                        acc.iter_mut().for_each(|v| *v *= b);
                    }
                }
                None => acc.fill(0.0),
            }
            acc.iter_mut().zip(&prod).for_each(|(v, p)| *v += 0.0 * p);
            return store_f32(out, acc);
        }
        gemm_batched::<f32>(&acc_mut, a, b, c, beta, alpha)?;
        store_f32(out, acc)
    })
}

fn gemm_batched<T: GemmElem>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: Option<&TensorRef>,
    beta: &Scalar,
    alpha: &Scalar,
) -> FooResult<()> {
    let (bs, m, k, n) = (a.shape[0], a.shape[1], a.shape[2], b.shape[2]);
    let beta_v = T::from_scalar(beta);
    let alpha_v = T::from_scalar(alpha);
    let use_c = c.filter(|_| beta_v != T::ZERO);
    if let Some(bias) = use_c.filter(|_| bs == 1 && beta_v == T::ONE && k > 0) {
        // SAFETY: as for `gemm_raw` below; the bias row is `n` elements of `c`.
        if unsafe { linear_with_bias_row::<T>(out, a, b, bias, alpha_v) } {
            return Ok(());
        }
    }
    // Stage `beta * c` in `out`, then accumulate the product onto it.
    if let Some(c) = use_c {
        let in_place = std::ptr::eq(c.ptr, out.ptr as *const u8) && c.strides == out.strides;
        if !in_place {
            copy(out, c)?;
        }
        if beta_v != T::ONE {
            scale::<T>(out, beta_v);
        }
    }
    let read_dst = use_c.is_some();
    if k == 0 {
        if !read_dst {
            fill::<T>(out, T::ZERO);
        }
        return Ok(());
    }
    let (o, pa, pb) = (
        SendPtr::<T>::of(out.ptr),
        SendPtr::<T>::of(a.ptr),
        SendPtr::<T>::of(b.ptr),
    );
    let (os, as_, bs_) = (&out.strides, &a.strides, &b.strides);
    let one = |i: usize, parallel: bool| {
        let op = o.at(i as isize * os[0]);
        let lhs = Mat {
            ptr: pa.at(i as isize * as_[0]),
            rs: as_[1],
            cs: as_[2],
        };
        let rhs = Mat {
            ptr: pb.at(i as isize * bs_[0]),
            rs: bs_[1],
            cs: bs_[2],
        };
        // SAFETY: the descriptors come from live tensors of the checked shapes; batch `i` of
        // the output is written by this call only and does not overlap the inputs (glue check).
        unsafe {
            gemm_raw(
                m, n, k, op, os[1], os[2], read_dst, lhs, rhs, alpha_v, parallel,
            )
        };
    };
    let flops = m * n * k;
    let threads = crate::runtime::pool::num_threads();
    if bs > 1 && (flops < (1 << 21) || bs >= 2 * threads) && bs * flops >= GEMM_SPLIT_FLOPS {
        // Many (small) products: one thread per matrix.
        parallel_for(bs, 1, &|s, e| (s..e).for_each(|i| one(i, false)));
    } else {
        (0..bs).for_each(|i| one(i, true));
    }
    Ok(())
}

/// `out = bias + a @ b` in one pass when `c` is a row repeated down the output (addmm's
/// expanded bias, as `nn.Linear` calls it) and the product is float32 `a @ w.t()` that
/// [`gemm::linear_with_bias`] runs: the bias is added in the kernel's epilogue instead of being
/// copied into the output first. False, with nothing written, otherwise.
///
/// # Safety
/// The operands are live tensors of [`matmul`]'s checked shapes, a single batch, and the output
/// overlaps none of them.
unsafe fn linear_with_bias_row<T: GemmElem>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: &TensorRef,
    alpha: T,
) -> bool {
    let (m, n, k) = (a.shape[1], b.shape[2], a.shape[2]);
    let row = (c.strides[1] == 0 || m == 1) && (c.strides[2] == 1 || n == 1);
    if T::DTYPE != DType::F32 || alpha != T::ONE || !row || out.strides[2] != 1 && n > 1 {
        return false;
    }
    let mat = |t: &TensorRef| Mat {
        ptr: t.ptr as *const f32,
        rs: t.strides[1],
        cs: t.strides[2],
    };
    // SAFETY: forwarded; the output's rows are dense (checked).
    unsafe {
        gemm::linear_with_bias(
            m,
            n,
            k,
            out.ptr as *mut f32,
            out.strides[1],
            mat(a),
            mat(b),
            c.ptr as *const f32,
            true,
        )
    }
}

/// Visits every element of a 3-D output: `f(offset)` in elements.
fn for_each_3d(t: &TensorMut, f: &(dyn Fn(isize) + Sync)) {
    let (s0, s1, s2) = (t.strides[0], t.strides[1], t.strides[2]);
    let (m, n) = (t.shape[1], t.shape[2]);
    parallel_for(t.shape[0] * m, (1 << 15) / n.max(1) + 1, &|s, e| {
        for r in s..e {
            let base = (r / m) as isize * s0 + (r % m) as isize * s1;
            for j in 0..n {
                f(base + j as isize * s2);
            }
        }
    });
}

fn scale<T: GemmElem>(out: &TensorMut, v: T) {
    let o = SendPtr::<T>::of(out.ptr);
    for_each_3d(out, &|off| {
        let p = o.at(off);
        // SAFETY: `off` is an in-bounds element of the output, visited exactly once.
        unsafe { *p = *p * v };
    });
}

fn fill<T: GemmElem>(out: &TensorMut, v: T) {
    let o = SendPtr::<T>::of(out.ptr);
    for_each_3d(out, &|off| {
        // SAFETY: as in `scale`.
        unsafe { *o.at(off) = v };
    });
}

/// The accumulator of [`exact_matmul`] for element type `T`.
trait ExactAcc<T>: Copy + Send + Sync {
    const ZERO: Self;
    fn load(v: T) -> Self;
    fn store(self) -> T;
    /// `self + a * b`.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// `self * by`.
    fn scale(self, by: Self) -> Self;
    fn add(self, b: Self) -> Self;
}

/// Integers: 64-bit wrapping arithmetic, then wrapped into the element type, which is what the
/// element type's own wrapping arithmetic gives (the CPU's integer GEMM).
impl<T: Element> ExactAcc<T> for i64 {
    const ZERO: i64 = 0;
    fn load(v: T) -> i64 {
        v.to_i64()
    }
    fn store(self) -> T {
        T::from_i64(self)
    }
    fn mul_add(self, a: i64, b: i64) -> i64 {
        self.wrapping_add(a.wrapping_mul(b))
    }
    fn scale(self, by: i64) -> i64 {
        self.wrapping_mul(by)
    }
    fn add(self, b: i64) -> i64 {
        self.wrapping_add(b)
    }
}

/// Complex numbers: the textbook product (re = ar * br - ai * bi, ...) summed in order, which
/// is what the CPU's BLAS gives for non-finite operands (`gemm`'s kernel multiplies every sum by
/// `alpha`, and `(1 + 0i) * (inf - inf i)` is nan), and no scaling by a unit `alpha`.
macro_rules! exact_complex {
    ($t:ty) => {
        impl ExactAcc<$t> for $t {
            const ZERO: $t = <$t>::new(0.0, 0.0);
            fn load(v: $t) -> $t {
                v
            }
            fn store(self) -> $t {
                self
            }
            fn mul_add(self, a: $t, b: $t) -> $t {
                self + a * b
            }
            fn scale(self, by: $t) -> $t {
                if by == <$t>::new(1.0, 0.0) {
                    self
                } else {
                    self * by
                }
            }
            fn add(self, b: $t) -> $t {
                self + b
            }
        }
    };
}
exact_complex!(Complex32);
exact_complex!(Complex64);

/// The unblocked product `alpha * a @ b (+ beta * c)`, one output row per task, each sum taken
/// in order over k in the accumulator `A`.
#[allow(clippy::too_many_arguments)]
fn exact_matmul<T: Element, A: ExactAcc<T>>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: Option<&TensorRef>,
    alpha: A,
    beta: Option<A>,
) -> FooResult<()> {
    let (m, k, n) = (a.shape[1], a.shape[2], b.shape[2]);
    let use_c = c.zip(beta);
    let (o, pa, pb) = (
        SendPtr::<T>::of(out.ptr),
        SendPtr::<T>::of(a.ptr),
        SendPtr::<T>::of(b.ptr),
    );
    let pc = SendPtr::<T>::of(use_c.map_or(std::ptr::null(), |(c, _)| c.ptr));
    let cs = use_c.map(|(c, beta)| (c.strides.clone(), beta));
    let (os, as_, bs_) = (&out.strides, &a.strides, &b.strides);
    parallel_for(out.shape[0] * m, (1 << 15) / (n * k).max(1) + 1, &|s, e| {
        let mut acc = vec![A::ZERO; n];
        for r in s..e {
            let (bi, i) = ((r / m) as isize, (r % m) as isize);
            acc.iter_mut().for_each(|x| *x = A::ZERO);
            for p in 0..k as isize {
                // SAFETY: (bi, i, p) is in bounds of `a`.
                let av = A::load(unsafe { *pa.at(bi * as_[0] + i * as_[1] + p * as_[2]) });
                let brow = pb.at(bi * bs_[0] + p * bs_[1]);
                for (j, x) in acc.iter_mut().enumerate() {
                    // SAFETY: (bi, p, j) is in bounds of `b`.
                    let bv = A::load(unsafe { *brow.wrapping_offset(j as isize * bs_[2]) });
                    *x = x.mul_add(av, bv);
                }
            }
            for (j, x) in acc.iter().enumerate() {
                let j = j as isize;
                let mut v = x.scale(alpha);
                if let Some((cs, beta)) = &cs {
                    // SAFETY: (bi, i, j) is in bounds of `c`.
                    let cv = A::load(unsafe { *pc.at(bi * cs[0] + i * cs[1] + j * cs[2]) });
                    v = v.add(cv.scale(*beta));
                }
                // SAFETY: (bi, i, j) is in bounds of the output; rows are disjoint per chunk.
                unsafe { *o.at(bi * os[0] + i * os[1] + j * os[2]) = v.store() };
            }
        }
    });
    Ok(())
}

/// Exact integer product with wrapping arithmetic in 64 bits.
fn int_matmul<T: Element>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: Option<&TensorRef>,
    beta: &Scalar,
    alpha: &Scalar,
) -> FooResult<()> {
    let beta_v = T::from_scalar(beta).to_i64();
    let alpha_v = T::from_scalar(alpha).to_i64();
    exact_matmul::<T, i64>(out, a, b, c, alpha_v, Some(beta_v).filter(|&v| v != 0))
}

/// Whether every element of a 3-D operand is finite (complex: both parts).
fn all_finite<T: GemmElem>(t: &TensorRef) -> bool {
    let p = SendPtr::<T>::of(t.ptr);
    let (s0, s1, s2) = (t.strides[0], t.strides[1], t.strides[2]);
    (0..t.shape[0] as isize).all(|q| {
        (0..t.shape[1] as isize).all(|i| {
            (0..t.shape[2] as isize).all(|j| {
                // SAFETY: (q, i, j) is in bounds of `t`.
                unsafe { *p.at(q * s0 + i * s1 + j * s2) }.finite()
            })
        })
    })
}

/// complex64/complex128: `gemm`'s kernel, unless an operand holds inf or nan, where the exact
/// kernel gives the CPU's values (see [`ExactAcc`] for complex).
fn complex_matmul<T: GemmElem + ExactAcc<T>>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: Option<&TensorRef>,
    beta: &Scalar,
    alpha: &Scalar,
) -> FooResult<()> {
    if all_finite::<T>(a) && all_finite::<T>(b) {
        return gemm_batched::<T>(out, a, b, c, beta, alpha);
    }
    let beta_v = T::from_scalar(beta);
    exact_matmul::<T, T>(
        out,
        a,
        b,
        c,
        T::from_scalar(alpha),
        Some(beta_v).filter(|v| *v != <T as GemmElem>::ZERO),
    )
}

#[cfg(all(test, target_arch = "x86_64"))]
mod bf16_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::gemm::NT_PACK_ROWS;
    use crate::kernels::core::map::testing::Owned;

    fn naive(a: &[f64], b: &[f64], bs: usize, m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut out = vec![0.0; bs * m * n];
        for q in 0..bs {
            for i in 0..m {
                for j in 0..n {
                    out[q * m * n + i * n + j] = (0..k)
                        .map(|p| a[q * m * k + i * k + p] * b[q * k * n + p * n + j])
                        .sum();
                }
            }
        }
        out
    }

    fn data(n: usize, seed: u64) -> Vec<f64> {
        (0..n)
            .map(|i| ((i as u64 * 2654435761 + seed) % 17) as f64 - 8.0)
            .collect()
    }

    #[test]
    fn linalg_f64_batched_with_bias() {
        let (bs, m, k, n) = (3, 5, 7, 4);
        let a = Owned::new(data(bs * m * k, 1), &[bs, m, k]);
        let b = Owned::new(data(bs * k * n, 2), &[bs, k, n]);
        let c = Owned::new(data(n, 3), &[n]);
        let mut out = Owned::<f64>::zeros(&[bs, m, n]);
        matmul(
            &out.m(),
            &a.r(),
            &b.r(),
            Some(&c.bcast(&[bs, m, n])),
            &Scalar::from_f64(0.5),
            &Scalar::from_f64(2.0),
        )
        .unwrap();
        let want = naive(&a.data, &b.data, bs, m, k, n);
        for (i, (&g, &w)) in out.data.iter().zip(&want).enumerate() {
            assert_eq!(g, 2.0 * w + 0.5 * c.data[i % n]);
        }
    }

    #[test]
    fn linalg_linear_layout_every_path() {
        // a @ w.t() with w stored n x k: few rows (transposed product), NT_PACK_ROWS rows
        // (w transposed into scratch), and a w too large for the scratch path, with a bias
        // (beta 1) and alpha 2; more rows than columns (w.t() read in place).
        for &(m, k, n) in &[
            (3, 5, 7),
            (40, 7, 5),
            (NT_PACK_ROWS, 9, 33),
            (NT_PACK_ROWS, 1024, 1024),
        ] {
            let a = Owned::new(data(m * k, 1), &[1, m, k]);
            let w = Owned::new(data(n * k, 2), &[1, n, k]);
            let mut wt = w.r();
            wt.shape = smallvec::smallvec![1, k, n];
            wt.strides = smallvec::smallvec![0, 1, k as isize];
            let c = Owned::new(data(m * n, 3), &[1, m, n]);
            let mut out = Owned::<f64>::zeros(&[1, m, n]);
            let (one, two) = (Scalar::from_f64(1.0), Scalar::from_f64(2.0));
            matmul(&out.m(), &a.r(), &wt, Some(&c.r()), &one, &two).unwrap();
            let w_t: Vec<f64> = (0..k * n).map(|x| w.data[(x % n) * k + x / n]).collect();
            let want = naive(&a.data, &w_t, 1, m, k, n);
            for (i, (got, want)) in out.data.iter().zip(&want).enumerate() {
                let want = c.data[i] + 2.0 * want;
                assert!(
                    (got - want).abs() < 1e-9 * want.abs().max(1.0),
                    "{m}x{k}x{n} [{i}]"
                );
            }
        }
    }

    #[test]
    fn linalg_transposed_operand_and_int() {
        let (m, k, n) = (4, 3, 2);
        // a stored as k x m (transposed view).
        let at = Owned::new(data(m * k, 5), &[1, k, m]);
        let mut a = at.r();
        a.shape = smallvec::smallvec![1, m, k];
        a.strides = smallvec::smallvec![0, 1, m as isize];
        let b = Owned::new(data(k * n, 6), &[1, k, n]);
        let mut out = Owned::<f64>::zeros(&[1, m, n]);
        let one = Scalar::from_f64(1.0);
        matmul(&out.m(), &a, &b.r(), None, &one, &one).unwrap();
        let a_dense: Vec<f64> = (0..m * k).map(|x| at.data[(x % k) * m + x / k]).collect();
        assert_eq!(out.data, naive(&a_dense, &b.data, 1, m, k, n));

        let ai = Owned::new(a_dense.iter().map(|&x| x as i32).collect(), &[1, m, k]);
        let bi = Owned::new(b.data.iter().map(|&x| x as i32).collect(), &[1, k, n]);
        let mut oi = Owned::<i32>::zeros(&[1, m, n]);
        let onei = Scalar::from_i64(1);
        matmul(&oi.m(), &ai.r(), &bi.r(), None, &onei, &onei).unwrap();
        assert_eq!(
            oi.data,
            out.data.iter().map(|&x| x as i32).collect::<Vec<_>>()
        );
    }

    #[test]
    fn linalg_k_zero_and_beta_zero_ignores_nan() {
        let a = Owned::<f32>::zeros(&[1, 2, 0]);
        let b = Owned::<f32>::zeros(&[1, 0, 3]);
        let c = Owned::new(vec![f32::NAN; 6], &[1, 2, 3]);
        let mut out = Owned::new(vec![7.0f32; 6], &[1, 2, 3]);
        matmul(
            &out.m(),
            &a.r(),
            &b.r(),
            Some(&c.r()),
            &Scalar::from_f64(0.0),
            &Scalar::from_f64(1.0),
        )
        .unwrap();
        assert_eq!(out.data, vec![0.0; 6]);
    }
}
