//! C ABI of the nn family (see kernels::nn). Optional tensors are null pointers.

use super::args::{OptTensorIn, OptTensorOut, TensorIn, TensorOut};
use super::guard;
use crate::kernels::nn;

/// softmax (`log == 0`) or log_softmax along `dim` of contiguous operands. Like it, every
/// function of the nn family takes contiguous operands, null for an optional tensor, and a
/// `reduction` in ATen's codes (0 none, 1 mean, 2 sum).
///
/// # Safety
/// Descriptors must describe live memory (`out` writable) for the call.
#[no_mangle]
pub unsafe extern "C" fn foo_softmax(out: TensorOut, input: TensorIn, dim: i64, log: i32) -> i32 {
    guard(|| nn::softmax(&out.get()?, &input.get()?, dim.max(0) as usize, log != 0))
}

/// # Safety
/// As `foo_softmax`.
#[no_mangle]
pub unsafe extern "C" fn foo_softmax_backward(
    grad_input: TensorOut,
    grad_output: TensorIn,
    output: TensorIn,
    dim: i64,
    log: i32,
) -> i32 {
    guard(|| {
        nn::softmax_backward(
            &grad_input.get()?,
            &grad_output.get()?,
            &output.get()?,
            dim.max(0) as usize,
            log != 0,
        )
    })
}

/// # Safety
/// As `foo_softmax`; `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_nll_loss(
    output: TensorOut,
    total_weight: TensorOut,
    input: TensorIn,
    target: TensorIn,
    weight: OptTensorIn,
    reduction: i64,
    ignore_index: i64,
) -> i32 {
    guard(|| {
        nn::nll_loss(
            &output.get()?,
            &total_weight.get()?,
            &input.get()?,
            &target.get()?,
            weight.get()?.as_ref(),
            reduction,
            ignore_index,
        )
    })
}

/// # Safety
/// As `foo_softmax`; `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_nll_loss_backward(
    grad_input: TensorOut,
    grad_output: TensorIn,
    target: TensorIn,
    weight: OptTensorIn,
    total_weight: TensorIn,
    reduction: i64,
    ignore_index: i64,
) -> i32 {
    guard(|| {
        nn::nll_loss_backward(
            &grad_input.get()?,
            &grad_output.get()?,
            &target.get()?,
            weight.get()?.as_ref(),
            &total_weight.get()?,
            reduction,
            ignore_index,
        )
    })
}

/// # Safety
/// As `foo_softmax`.
#[no_mangle]
pub unsafe extern "C" fn foo_mse_loss(
    out: TensorOut,
    input: TensorIn,
    target: TensorIn,
    reduction: i64,
) -> i32 {
    guard(|| nn::mse_loss(&out.get()?, &input.get()?, &target.get()?, reduction))
}

/// # Safety
/// As `foo_softmax`.
#[no_mangle]
pub unsafe extern "C" fn foo_mse_loss_backward(
    grad_input: TensorOut,
    grad_output: TensorIn,
    input: TensorIn,
    target: TensorIn,
    reduction: i64,
) -> i32 {
    guard(|| {
        nn::mse_loss_backward(
            &grad_input.get()?,
            &grad_output.get()?,
            &input.get()?,
            &target.get()?,
            reduction,
        )
    })
}

/// # Safety
/// As `foo_softmax`; `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_bce_loss(
    out: TensorOut,
    input: TensorIn,
    target: TensorIn,
    weight: OptTensorIn,
    reduction: i64,
) -> i32 {
    guard(|| {
        nn::bce_loss(
            &out.get()?,
            &input.get()?,
            &target.get()?,
            weight.get()?.as_ref(),
            reduction,
        )
    })
}

/// # Safety
/// As `foo_softmax`; `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_bce_loss_backward(
    grad_input: TensorOut,
    grad_output: TensorIn,
    input: TensorIn,
    target: TensorIn,
    weight: OptTensorIn,
    reduction: i64,
) -> i32 {
    guard(|| {
        nn::bce_loss_backward(
            &grad_input.get()?,
            &grad_output.get()?,
            &input.get()?,
            &target.get()?,
            weight.get()?.as_ref(),
            reduction,
        )
    })
}

/// layer_norm over rows of a `[M, N]` input; `mean`, `rstd`, `weight`, `bias` may be null.
///
/// # Safety
/// As `foo_softmax`.
#[no_mangle]
pub unsafe extern "C" fn foo_layer_norm(
    out: TensorOut,
    mean: OptTensorOut,
    rstd: OptTensorOut,
    input: TensorIn,
    weight: OptTensorIn,
    bias: OptTensorIn,
    eps: f64,
) -> i32 {
    guard(|| {
        nn::layer_norm(
            &out.get()?,
            mean.get()?.as_ref(),
            rstd.get()?.as_ref(),
            &input.get()?,
            weight.get()?.as_ref(),
            bias.get()?.as_ref(),
            eps,
        )
    })
}

/// # Safety
/// As `foo_softmax`; the three outputs and `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_layer_norm_backward(
    grad_input: OptTensorOut,
    grad_weight: OptTensorOut,
    grad_bias: OptTensorOut,
    grad_out: TensorIn,
    input: TensorIn,
    mean: TensorIn,
    rstd: TensorIn,
    weight: OptTensorIn,
) -> i32 {
    guard(|| {
        {
            nn::layer_norm_backward(
                grad_input.get()?.as_ref(),
                grad_weight.get()?.as_ref(),
                grad_bias.get()?.as_ref(),
                &grad_out.get()?,
                &input.get()?,
                &mean.get()?,
                &rstd.get()?,
                weight.get()?.as_ref(),
            )
        }
    })
}

/// group_norm of a `[N, C, S]` input in `groups` groups; `weight`, `bias` may be null.
///
/// # Safety
/// As `foo_softmax`.
#[no_mangle]
pub unsafe extern "C" fn foo_group_norm(
    out: TensorOut,
    mean: TensorOut,
    rstd: TensorOut,
    input: TensorIn,
    weight: OptTensorIn,
    bias: OptTensorIn,
    groups: i64,
    eps: f64,
) -> i32 {
    guard(|| {
        let Ok(g) = usize::try_from(groups) else {
            return crate::invalid_arg!("group_norm: {groups} groups");
        };
        nn::group_norm(
            &out.get()?,
            &mean.get()?,
            &rstd.get()?,
            &input.get()?,
            weight.get()?.as_ref(),
            bias.get()?.as_ref(),
            g,
            eps,
        )
    })
}

/// # Safety
/// As `foo_softmax`; the three outputs and `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_group_norm_backward(
    grad_input: OptTensorOut,
    grad_weight: OptTensorOut,
    grad_bias: OptTensorOut,
    grad_out: TensorIn,
    input: TensorIn,
    mean: TensorIn,
    rstd: TensorIn,
    weight: OptTensorIn,
    groups: i64,
) -> i32 {
    guard(|| {
        let Ok(g) = usize::try_from(groups) else {
            return crate::invalid_arg!("group_norm: {groups} groups");
        };
        nn::group_norm_backward(
            grad_input.get()?.as_ref(),
            grad_weight.get()?.as_ref(),
            grad_bias.get()?.as_ref(),
            &grad_out.get()?,
            &input.get()?,
            &mean.get()?,
            &rstd.get()?,
            weight.get()?.as_ref(),
            g,
        )
    })
}

/// batch_norm on a `[N, C, S]` input; every tensor but `out` and `input` may be null.
///
/// # Safety
/// As `foo_softmax`.
#[no_mangle]
pub unsafe extern "C" fn foo_batch_norm(
    out: TensorOut,
    save_mean: OptTensorOut,
    save_invstd: OptTensorOut,
    input: TensorIn,
    weight: OptTensorIn,
    bias: OptTensorIn,
    running_mean: OptTensorOut,
    running_var: OptTensorOut,
    training: i32,
    momentum: f64,
    eps: f64,
) -> i32 {
    guard(|| {
        {
            nn::batch_norm(
                &out.get()?,
                save_mean.get()?.as_ref(),
                save_invstd.get()?.as_ref(),
                &input.get()?,
                weight.get()?.as_ref(),
                bias.get()?.as_ref(),
                running_mean.get()?.as_ref(),
                running_var.get()?.as_ref(),
                training != 0,
                momentum,
                eps,
            )
        }
    })
}

/// # Safety
/// As `foo_softmax`; the three outputs and `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_batch_norm_backward(
    grad_input: OptTensorOut,
    grad_weight: OptTensorOut,
    grad_bias: OptTensorOut,
    grad_out: TensorIn,
    input: TensorIn,
    weight: OptTensorIn,
    mean: TensorIn,
    invstd_or_var: TensorIn,
    training: i32,
    eps: f64,
) -> i32 {
    guard(|| {
        {
            nn::batch_norm_backward(
                grad_input.get()?.as_ref(),
                grad_weight.get()?.as_ref(),
                grad_bias.get()?.as_ref(),
                &grad_out.get()?,
                &input.get()?,
                weight.get()?.as_ref(),
                &mean.get()?,
                &invstd_or_var.get()?,
                training != 0,
                eps,
            )
        }
    })
}

/// # Safety
/// As `foo_softmax`.
#[no_mangle]
pub unsafe extern "C" fn foo_embedding_backward(
    grad_weight: TensorOut,
    grad: TensorIn,
    indices: TensorIn,
    padding_idx: i64,
    scale_grad_by_freq: i32,
) -> i32 {
    guard(|| {
        nn::embedding_dense_backward(
            &grad_weight.get()?,
            &grad.get()?,
            &indices.get()?,
            padding_idx,
            scale_grad_by_freq != 0,
        )
    })
}
