//! C ABI of the reduce family (see kernels::reduce).

use super::{guard, scalars, tensor_mut, tensor_ref};
use crate::error::FooError;
use crate::kernels::reduce::{reduce, scan, ReduceOp, ScanOp};
use crate::tensor::{FooTensor, Scalar};

/// `out (, out2) = op(input)` over the dims where `out` has size 1 and `input` does not.
/// `out` and `out2` have the input's rank (the glue restrides keepdim=False results);
/// `out2` may be null (indices of max/min, the mean of var_mean/std_mean).
///
/// # Safety
/// Descriptors must describe live memory (outputs writable, not overlapping the input);
/// `params` holds `nparams` scalars.
#[no_mangle]
pub unsafe extern "C" fn foo_reduce(
    op: i32,
    out: *const FooTensor,
    out2: *const FooTensor,
    input: *const FooTensor,
    params: *const Scalar,
    nparams: i32,
) -> i32 {
    guard(|| {
        let op = ReduceOp::from_repr(op)
            .ok_or_else(|| FooError::InvalidArgument(format!("unknown reduce op code {op}")))?;
        // SAFETY: caller's contract.
        let (o, a, p) = unsafe {
            (
                tensor_mut(out)?,
                tensor_ref(input)?,
                scalars(params, nparams),
            )
        };
        let o2 = if out2.is_null() {
            None
        } else {
            // SAFETY: caller's contract.
            Some(unsafe { tensor_mut(out2)? })
        };
        reduce(op, &o, o2.as_ref(), &a, p)
    })
}

/// `out = cumsum/cumprod(input, dim)`; same shapes, `out` does not overlap `input`.
///
/// # Safety
/// As `foo_reduce`.
#[no_mangle]
pub unsafe extern "C" fn foo_scan(
    op: i32,
    out: *const FooTensor,
    input: *const FooTensor,
    dim: i32,
) -> i32 {
    guard(|| {
        let op = ScanOp::from_repr(op)
            .ok_or_else(|| FooError::InvalidArgument(format!("unknown scan op code {op}")))?;
        // SAFETY: caller's contract.
        let (o, a) = unsafe { (tensor_mut(out)?, tensor_ref(input)?) };
        scan(op, &o, &a, dim.max(0) as usize)
    })
}
