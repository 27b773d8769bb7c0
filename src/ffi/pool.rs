//! C ABI of the pooling family (see kernels::pool).

use super::args::{ParamsIn, TensorIn, TensorOut};
use super::guard;
use crate::kernels::pool::{self, Pool2dParams};

/// Max pooling with int64 flat indices into each input plane. The pooling functions take 4-D
/// `[N, C, H, W]` tensors and write contiguous outputs.
///
/// # Safety
/// Descriptors must describe live memory (outputs writable); `p` must point to parameters.
#[no_mangle]
pub unsafe extern "C" fn foo_max_pool2d(
    out: TensorOut,
    indices: TensorOut,
    input: TensorIn,
    p: ParamsIn<Pool2dParams>,
) -> i32 {
    guard(|| {
        let p = p.get()?;
        pool::max_pool2d(&out.get()?, &indices.get()?, &input.get()?, p)
    })
}

/// The gradient of `foo_max_pool2d` through its indices (`grad_output` and `indices`
/// contiguous).
///
/// # Safety
/// As `foo_max_pool2d`.
#[no_mangle]
pub unsafe extern "C" fn foo_max_pool2d_backward(
    grad_input: TensorOut,
    grad_output: TensorIn,
    indices: TensorIn,
) -> i32 {
    guard(|| pool::max_pool2d_backward(&grad_input.get()?, &grad_output.get()?, &indices.get()?))
}

/// # Safety
/// As `foo_max_pool2d`.
#[no_mangle]
pub unsafe extern "C" fn foo_avg_pool2d(
    out: TensorOut,
    input: TensorIn,
    p: ParamsIn<Pool2dParams>,
) -> i32 {
    guard(|| {
        let p = p.get()?;
        pool::avg_pool2d(&out.get()?, &input.get()?, p)
    })
}

/// # Safety
/// As `foo_max_pool2d`.
#[no_mangle]
pub unsafe extern "C" fn foo_avg_pool2d_backward(
    grad_input: TensorOut,
    grad_output: TensorIn,
    p: ParamsIn<Pool2dParams>,
) -> i32 {
    guard(|| {
        let p = p.get()?;
        pool::avg_pool2d_backward(&grad_input.get()?, &grad_output.get()?, p)
    })
}

/// # Safety
/// As `foo_max_pool2d`.
#[no_mangle]
pub unsafe extern "C" fn foo_adaptive_avg_pool2d(out: TensorOut, input: TensorIn) -> i32 {
    guard(|| pool::adaptive_avg_pool2d(&out.get()?, &input.get()?))
}

/// # Safety
/// As `foo_max_pool2d`.
#[no_mangle]
pub unsafe extern "C" fn foo_adaptive_avg_pool2d_backward(
    grad_input: TensorOut,
    grad_output: TensorIn,
) -> i32 {
    guard(|| pool::adaptive_avg_pool2d_backward(&grad_input.get()?, &grad_output.get()?))
}
