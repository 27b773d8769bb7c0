//! C ABI of the conv family (see kernels::conv).

use super::{guard, opt_ref, params, tensor_mut, tensor_ref};
use crate::kernels::conv::{self, ConvParams};
use crate::tensor::FooTensor;

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
                opt_ref(bias)?,
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
                opt_ref(bias)?,
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
