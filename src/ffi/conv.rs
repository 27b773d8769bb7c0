//! C ABI of the conv family (see kernels::conv): convolution and pooling.

use super::{guard, tensor_mut, tensor_ref};
use crate::error::{FooError, FooResult};
use crate::kernels::conv::pool::{self, Pool2dParams};
use crate::kernels::conv::{self, ConvParams};
use crate::tensor::{FooTensor, TensorRef};

fn params<'a, T>(p: *const T) -> FooResult<&'a T> {
    // SAFETY: the caller passes a valid pointer or null (checked).
    unsafe { p.as_ref() }.ok_or_else(|| FooError::InvalidArgument("null parameters".into()))
}

/// # Safety
/// `t` must be null or a valid descriptor of live memory.
unsafe fn optional(t: *const FooTensor) -> FooResult<Option<TensorRef>> {
    if t.is_null() {
        Ok(None)
    } else {
        // SAFETY: caller's contract.
        Ok(Some(unsafe { tensor_ref(t)? }))
    }
}

/// `out = conv(input, weight) + bias` (`bias` may be null). Every tensor of the convolutions is
/// 5-D `[N, C, D, H, W]`, the weight `[O, C/groups, kD, kH, kW]`; inputs may be strided, the
/// weight, `grad_output` and every written tensor must be contiguous; float32/float64.
///
/// # Safety
/// Descriptors must describe live memory (out writable); `p` must point to parameters.
#[no_mangle]
pub unsafe extern "C" fn foo_conv_forward(
    out: *const FooTensor,
    input: *const FooTensor,
    weight: *const FooTensor,
    bias: *const FooTensor,
    p: *const ConvParams,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, x, w, b) = unsafe {
            (
                tensor_mut(out)?,
                tensor_ref(input)?,
                tensor_ref(weight)?,
                optional(bias)?,
            )
        };
        let p = params(p)?;
        conv::conv_forward(&o, &x, &w, b.as_ref(), p)
    })
}

/// `grad_input = conv_transpose(grad_output, weight) (+ bias)` (shapes of the forward conv).
///
/// # Safety
/// As `foo_conv_forward`.
#[no_mangle]
pub unsafe extern "C" fn foo_conv_backward_input(
    grad_input: *const FooTensor,
    grad_output: *const FooTensor,
    weight: *const FooTensor,
    bias: *const FooTensor,
    p: *const ConvParams,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, go, w, b) = unsafe {
            (
                tensor_mut(grad_input)?,
                tensor_ref(grad_output)?,
                tensor_ref(weight)?,
                optional(bias)?,
            )
        };
        let p = params(p)?;
        conv::conv_backward_input(&gi, &go, &w, b.as_ref(), p)
    })
}

/// `grad_weight = sum_n grad_output[n] (x) input[n]` (the weight gradient of a convolution).
///
/// # Safety
/// As `foo_conv_forward`.
#[no_mangle]
pub unsafe extern "C" fn foo_conv_backward_weight(
    grad_weight: *const FooTensor,
    input: *const FooTensor,
    grad_output: *const FooTensor,
    p: *const ConvParams,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gw, x, go) = unsafe {
            (
                tensor_mut(grad_weight)?,
                tensor_ref(input)?,
                tensor_ref(grad_output)?,
            )
        };
        let p = params(p)?;
        conv::conv_backward_weight(&gw, &x, &go, p)
    })
}

/// `grad_bias[o] = sum of grad_output[:, o]`.
///
/// # Safety
/// As `foo_conv_forward`.
#[no_mangle]
pub unsafe extern "C" fn foo_conv_backward_bias(
    grad_bias: *const FooTensor,
    grad_output: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gb, go) = unsafe { (tensor_mut(grad_bias)?, tensor_ref(grad_output)?) };
        conv::conv_backward_bias(&gb, &go)
    })
}

/// Max pooling with int64 flat indices into each input plane. The pooling functions take 4-D
/// `[N, C, H, W]` tensors and write contiguous outputs.
///
/// # Safety
/// As `foo_conv_forward`.
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
/// As `foo_conv_forward`.
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
/// As `foo_conv_forward`.
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
/// As `foo_conv_forward`.
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
/// As `foo_conv_forward`.
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
/// As `foo_conv_forward`.
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
