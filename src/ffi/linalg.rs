//! C ABI of the linalg family (see kernels::linalg).

use super::{guard, opt_ref, tensor_mut, tensor_ref};
use crate::error::FooError;
use crate::kernels::core::gemm::GEMM_RAYON_FLOPS;
use crate::kernels::linalg::matmul;
use crate::runtime::pool;
use crate::tensor::{FooTensor, Scalar};

/// `out = beta * c + alpha * (a @ b)` over 3-D descriptors `[B,M,K] x [B,K,N] -> [B,M,N]`;
/// `c` may be null (then `beta` is ignored), or broadcast (zero strides) to `[B,M,N]`;
/// `c == out` (same data and strides) is read in place. Dtypes: float32/64 and complex (gemm),
/// float16/bfloat16 (computed in float32), integers; all the same dtype.
///
/// # Safety
/// Descriptors must describe live memory (out writable, not overlapping a/b); `beta` and
/// `alpha` must point to scalars.
#[no_mangle]
pub unsafe extern "C" fn foo_matmul(
    out: *const FooTensor,
    a: *const FooTensor,
    b: *const FooTensor,
    c: *const FooTensor,
    beta: *const Scalar,
    alpha: *const Scalar,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, a, b) = unsafe { (tensor_mut(out)?, tensor_ref(a)?, tensor_ref(b)?) };
        // SAFETY: caller's contract (`c` is null, meaning absent, or a live tensor).
        let c = unsafe { opt_ref(c)? };
        // SAFETY: caller's contract; null is checked.
        let (beta, alpha) = unsafe { (beta.as_ref(), alpha.as_ref()) };
        let (beta, alpha) = beta
            .zip(alpha)
            .ok_or_else(|| FooError::InvalidArgument("null scalar".into()))?;
        let work = a
            .numel()
            .saturating_mul(b.shape.last().copied().unwrap_or(0));
        // Large products run on a pool worker so that `gemm` splits them itself; the rest
        // split from this thread (see `kernels::core::gemm::gemm_raw`).
        pool::install(work >= GEMM_RAYON_FLOPS, || {
            matmul(&o, &a, &b, c.as_ref(), beta, alpha)
        })
    })
}
