//! C ABI of the conv family (see kernels::conv).

use super::args::{OptTensorIn, ParamsIn, TensorIn, TensorOut};
use super::guard;
use crate::kernels::conv::{self, ConvParams};

/// `out = conv(input, weight) + bias` (`bias` may be null). Every tensor of the convolutions is
/// 5-D `[N, C, D, H, W]`, the weight `[O, C/groups, kD, kH, kW]`; inputs (the forward's weight
/// too) may be strided, outputs contiguous or channels-last (other strides go through a
/// temporary), a backward's weight contiguous, `grad_weight` contiguous or channels-last;
/// float32/float64.
///
/// # Safety
/// Descriptors must describe live memory (out writable); `p` must point to parameters.
#[no_mangle]
pub unsafe extern "C" fn foo_conv_forward(
    out: TensorOut,
    input: TensorIn,
    weight: TensorIn,
    bias: OptTensorIn,
    p: ParamsIn<ConvParams>,
) -> i32 {
    guard(|| {
        let p = p.get()?;
        conv::conv_forward(
            &out.get()?,
            &input.get()?,
            &weight.get()?,
            bias.get()?.as_ref(),
            p,
        )
    })
}

/// `grad_input = conv_transpose(grad_output, weight) (+ bias)` (shapes of the forward conv).
///
/// # Safety
/// As `foo_conv_forward`.
#[no_mangle]
pub unsafe extern "C" fn foo_conv_backward_input(
    grad_input: TensorOut,
    grad_output: TensorIn,
    weight: TensorIn,
    bias: OptTensorIn,
    p: ParamsIn<ConvParams>,
) -> i32 {
    guard(|| {
        let p = p.get()?;
        conv::conv_backward_input(
            &grad_input.get()?,
            &grad_output.get()?,
            &weight.get()?,
            bias.get()?.as_ref(),
            p,
        )
    })
}

/// `grad_weight = sum_n grad_output[n] (x) input[n]` (the weight gradient of a convolution).
///
/// # Safety
/// As `foo_conv_forward`.
#[no_mangle]
pub unsafe extern "C" fn foo_conv_backward_weight(
    grad_weight: TensorOut,
    input: TensorIn,
    grad_output: TensorIn,
    p: ParamsIn<ConvParams>,
) -> i32 {
    guard(|| {
        let p = p.get()?;
        conv::conv_backward_weight(&grad_weight.get()?, &input.get()?, &grad_output.get()?, p)
    })
}

/// `grad_bias[o] = sum of grad_output[:, o]`.
///
/// # Safety
/// As `foo_conv_forward`.
#[no_mangle]
pub unsafe extern "C" fn foo_conv_backward_bias(
    grad_bias: TensorOut,
    grad_output: TensorIn,
) -> i32 {
    guard(|| conv::conv_backward_bias(&grad_bias.get()?, &grad_output.get()?))
}
