//! C ABI of the linalg family (see kernels::linalg).

use super::args::{OptTensorIn, ScalarIn, TensorIn, TensorOut};
use super::guard;
use crate::kernels::linalg::matmul;

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
    out: TensorOut,
    a: TensorIn,
    b: TensorIn,
    c: OptTensorIn,
    beta: ScalarIn,
    alpha: ScalarIn,
) -> i32 {
    guard(|| {
        let (out, a, b) = (out.get()?, a.get()?, b.get()?);
        let c = c.get()?;
        let (beta, alpha) = (beta.get()?, alpha.get()?);
        // Parallel products split from this thread (`kernels::core::gemm::gemm_raw`).
        matmul(&out, &a, &b, c.as_ref(), beta, alpha)
    })
}
