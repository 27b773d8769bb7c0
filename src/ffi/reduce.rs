//! C ABI of the reduce family (see kernels::reduce).

use super::args::{OptTensorOut, ScalarsIn, TensorIn, TensorOut};
use super::guard;
use crate::error::FooError;
use crate::kernels::reduce::{reduce, scan, ReduceOp, ScanOp};

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
    out: TensorOut,
    out2: OptTensorOut,
    input: TensorIn,
    params: ScalarsIn,
    nparams: i32,
) -> i32 {
    guard(|| {
        let op = ReduceOp::from_repr(op)
            .ok_or_else(|| FooError::InvalidArgument(format!("unknown reduce op code {op}")))?;
        let (o, a, p) = (out.get()?, input.get()?, params.get(nparams));
        reduce(op, &o, out2.get()?.as_ref(), &a, p)
    })
}

/// `out = cumsum/cumprod(input, dim)`; same shapes, `out` does not overlap `input`.
///
/// # Safety
/// As `foo_reduce`.
#[no_mangle]
pub unsafe extern "C" fn foo_scan(op: i32, out: TensorOut, input: TensorIn, dim: i32) -> i32 {
    guard(|| {
        let op = ScanOp::from_repr(op)
            .ok_or_else(|| FooError::InvalidArgument(format!("unknown scan op code {op}")))?;
        scan(op, &out.get()?, &input.get()?, dim.max(0) as usize)
    })
}
