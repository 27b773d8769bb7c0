//! C ABI of the pooling family (see kernels::pool).

use super::{guard, params, tensor_mut, tensor_ref};
use crate::kernels::pool::{self, Pool2dParams};
use crate::tensor::FooTensor;

/// Max pooling with int64 flat indices into each input plane. The pooling functions take 4-D
/// `[N, C, H, W]` tensors and write contiguous outputs.
///
/// # Safety
/// Descriptors must describe live memory (outputs writable); `p` must point to parameters.
#[no_mangle]
pub unsafe extern "C" fn foo_max_pool2d(
    out: *const FooTensor,
    indices: *const FooTensor,
    input: *const FooTensor,
    p: *const Pool2dParams,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, i, x) = unsafe { (tensor_mut(out)?, tensor_mut(indices)?, tensor_ref(input)?) };
        let p = params(p)?;
        pool::max_pool2d(&o, &i, &x, p)
    })
}

/// The gradient of `foo_max_pool2d` through its indices (`grad_output` and `indices`
/// contiguous).
///
/// # Safety
/// As `foo_max_pool2d`.
#[no_mangle]
pub unsafe extern "C" fn foo_max_pool2d_backward(
    grad_input: *const FooTensor,
    grad_output: *const FooTensor,
    indices: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, go, i) = unsafe {
            (
                tensor_mut(grad_input)?,
                tensor_ref(grad_output)?,
                tensor_ref(indices)?,
            )
        };
        pool::max_pool2d_backward(&gi, &go, &i)
    })
}

/// # Safety
/// As `foo_max_pool2d`.
#[no_mangle]
pub unsafe extern "C" fn foo_avg_pool2d(
    out: *const FooTensor,
    input: *const FooTensor,
    p: *const Pool2dParams,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, x) = unsafe { (tensor_mut(out)?, tensor_ref(input)?) };
        let p = params(p)?;
        pool::avg_pool2d(&o, &x, p)
    })
}

/// # Safety
/// As `foo_max_pool2d`.
#[no_mangle]
pub unsafe extern "C" fn foo_avg_pool2d_backward(
    grad_input: *const FooTensor,
    grad_output: *const FooTensor,
    p: *const Pool2dParams,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, go) = unsafe { (tensor_mut(grad_input)?, tensor_ref(grad_output)?) };
        let p = params(p)?;
        pool::avg_pool2d_backward(&gi, &go, p)
    })
}

/// # Safety
/// As `foo_max_pool2d`.
#[no_mangle]
pub unsafe extern "C" fn foo_adaptive_avg_pool2d(
    out: *const FooTensor,
    input: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, x) = unsafe { (tensor_mut(out)?, tensor_ref(input)?) };
        pool::adaptive_avg_pool2d(&o, &x)
    })
}

/// # Safety
/// As `foo_max_pool2d`.
#[no_mangle]
pub unsafe extern "C" fn foo_adaptive_avg_pool2d_backward(
    grad_input: *const FooTensor,
    grad_output: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, go) = unsafe { (tensor_mut(grad_input)?, tensor_ref(grad_output)?) };
        pool::adaptive_avg_pool2d_backward(&gi, &go)
    })
}
