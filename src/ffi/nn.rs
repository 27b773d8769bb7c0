//! C ABI of the nn family (see kernels::nn). Optional tensors are null pointers.

use super::{guard, opt_mut, opt_ref, tensor_mut, tensor_ref};
use crate::kernels::nn;
use crate::tensor::FooTensor;

/// softmax (`log == 0`) or log_softmax along `dim` of contiguous operands. Like it, every
/// function of the nn family takes contiguous operands, null for an optional tensor, and a
/// `reduction` in ATen's codes (0 none, 1 mean, 2 sum).
///
/// # Safety
/// Descriptors must describe live memory (`out` writable) for the call.
#[no_mangle]
pub unsafe extern "C" fn foo_softmax(
    out: *const FooTensor,
    input: *const FooTensor,
    dim: i64,
    log: i32,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, x) = unsafe { (tensor_mut(out)?, tensor_ref(input)?) };
        nn::softmax(&o, &x, dim.max(0) as usize, log != 0)
    })
}

/// # Safety
/// As `foo_softmax`.
#[no_mangle]
pub unsafe extern "C" fn foo_softmax_backward(
    grad_input: *const FooTensor,
    grad_output: *const FooTensor,
    output: *const FooTensor,
    dim: i64,
    log: i32,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, go, y) = unsafe {
            (
                tensor_mut(grad_input)?,
                tensor_ref(grad_output)?,
                tensor_ref(output)?,
            )
        };
        nn::softmax_backward(&gi, &go, &y, dim.max(0) as usize, log != 0)
    })
}

/// # Safety
/// As `foo_softmax`; `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_nll_loss(
    output: *const FooTensor,
    total_weight: *const FooTensor,
    input: *const FooTensor,
    target: *const FooTensor,
    weight: *const FooTensor,
    reduction: i64,
    ignore_index: i64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, tw, x, t, w) = unsafe {
            (
                tensor_mut(output)?,
                tensor_mut(total_weight)?,
                tensor_ref(input)?,
                tensor_ref(target)?,
                opt_ref(weight)?,
            )
        };
        nn::nll_loss(&o, &tw, &x, &t, w.as_ref(), reduction, ignore_index)
    })
}

/// # Safety
/// As `foo_softmax`; `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_nll_loss_backward(
    grad_input: *const FooTensor,
    grad_output: *const FooTensor,
    target: *const FooTensor,
    weight: *const FooTensor,
    total_weight: *const FooTensor,
    reduction: i64,
    ignore_index: i64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, go, t, w, tw) = unsafe {
            (
                tensor_mut(grad_input)?,
                tensor_ref(grad_output)?,
                tensor_ref(target)?,
                opt_ref(weight)?,
                tensor_ref(total_weight)?,
            )
        };
        nn::nll_loss_backward(&gi, &go, &t, w.as_ref(), &tw, reduction, ignore_index)
    })
}

/// # Safety
/// As `foo_softmax`.
#[no_mangle]
pub unsafe extern "C" fn foo_mse_loss(
    out: *const FooTensor,
    input: *const FooTensor,
    target: *const FooTensor,
    reduction: i64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, x, t) = unsafe { (tensor_mut(out)?, tensor_ref(input)?, tensor_ref(target)?) };
        nn::mse_loss(&o, &x, &t, reduction)
    })
}

/// # Safety
/// As `foo_softmax`.
#[no_mangle]
pub unsafe extern "C" fn foo_mse_loss_backward(
    grad_input: *const FooTensor,
    grad_output: *const FooTensor,
    input: *const FooTensor,
    target: *const FooTensor,
    reduction: i64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, g, x, t) = unsafe {
            (
                tensor_mut(grad_input)?,
                tensor_ref(grad_output)?,
                tensor_ref(input)?,
                tensor_ref(target)?,
            )
        };
        nn::mse_loss_backward(&gi, &g, &x, &t, reduction)
    })
}

/// # Safety
/// As `foo_softmax`; `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_bce_loss(
    out: *const FooTensor,
    input: *const FooTensor,
    target: *const FooTensor,
    weight: *const FooTensor,
    reduction: i64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, x, t, w) = unsafe {
            (
                tensor_mut(out)?,
                tensor_ref(input)?,
                tensor_ref(target)?,
                opt_ref(weight)?,
            )
        };
        nn::bce_loss(&o, &x, &t, w.as_ref(), reduction)
    })
}

/// # Safety
/// As `foo_softmax`; `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_bce_loss_backward(
    grad_input: *const FooTensor,
    grad_output: *const FooTensor,
    input: *const FooTensor,
    target: *const FooTensor,
    weight: *const FooTensor,
    reduction: i64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, g, x, t, w) = unsafe {
            (
                tensor_mut(grad_input)?,
                tensor_ref(grad_output)?,
                tensor_ref(input)?,
                tensor_ref(target)?,
                opt_ref(weight)?,
            )
        };
        nn::bce_loss_backward(&gi, &g, &x, &t, w.as_ref(), reduction)
    })
}

/// layer_norm over rows of a `[M, N]` input; `mean`, `rstd`, `weight`, `bias` may be null.
///
/// # Safety
/// As `foo_softmax`.
#[no_mangle]
pub unsafe extern "C" fn foo_layer_norm(
    out: *const FooTensor,
    mean: *const FooTensor,
    rstd: *const FooTensor,
    input: *const FooTensor,
    weight: *const FooTensor,
    bias: *const FooTensor,
    eps: f64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, m, r, x, w, b) = unsafe {
            (
                tensor_mut(out)?,
                opt_mut(mean)?,
                opt_mut(rstd)?,
                tensor_ref(input)?,
                opt_ref(weight)?,
                opt_ref(bias)?,
            )
        };
        nn::layer_norm(&o, m.as_ref(), r.as_ref(), &x, w.as_ref(), b.as_ref(), eps)
    })
}

/// # Safety
/// As `foo_softmax`; the three outputs and `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_layer_norm_backward(
    grad_input: *const FooTensor,
    grad_weight: *const FooTensor,
    grad_bias: *const FooTensor,
    grad_out: *const FooTensor,
    input: *const FooTensor,
    mean: *const FooTensor,
    rstd: *const FooTensor,
    weight: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, gw, gb, go, x, m, r, w) = unsafe {
            (
                opt_mut(grad_input)?,
                opt_mut(grad_weight)?,
                opt_mut(grad_bias)?,
                tensor_ref(grad_out)?,
                tensor_ref(input)?,
                tensor_ref(mean)?,
                tensor_ref(rstd)?,
                opt_ref(weight)?,
            )
        };
        {
            nn::layer_norm_backward(
                gi.as_ref(),
                gw.as_ref(),
                gb.as_ref(),
                &go,
                &x,
                &m,
                &r,
                w.as_ref(),
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
    out: *const FooTensor,
    mean: *const FooTensor,
    rstd: *const FooTensor,
    input: *const FooTensor,
    weight: *const FooTensor,
    bias: *const FooTensor,
    groups: i64,
    eps: f64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, m, r, x, w, b) = unsafe {
            (
                tensor_mut(out)?,
                tensor_mut(mean)?,
                tensor_mut(rstd)?,
                tensor_ref(input)?,
                opt_ref(weight)?,
                opt_ref(bias)?,
            )
        };
        let Ok(g) = usize::try_from(groups) else {
            return crate::invalid_arg!("group_norm: {groups} groups");
        };
        nn::group_norm(&o, &m, &r, &x, w.as_ref(), b.as_ref(), g, eps)
    })
}

/// # Safety
/// As `foo_softmax`; the three outputs and `weight` may be null.
#[no_mangle]
pub unsafe extern "C" fn foo_group_norm_backward(
    grad_input: *const FooTensor,
    grad_weight: *const FooTensor,
    grad_bias: *const FooTensor,
    grad_out: *const FooTensor,
    input: *const FooTensor,
    mean: *const FooTensor,
    rstd: *const FooTensor,
    weight: *const FooTensor,
    groups: i64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, gw, gb, go, x, m, r, w) = unsafe {
            (
                opt_mut(grad_input)?,
                opt_mut(grad_weight)?,
                opt_mut(grad_bias)?,
                tensor_ref(grad_out)?,
                tensor_ref(input)?,
                tensor_ref(mean)?,
                tensor_ref(rstd)?,
                opt_ref(weight)?,
            )
        };
        let Ok(g) = usize::try_from(groups) else {
            return crate::invalid_arg!("group_norm: {groups} groups");
        };
        nn::group_norm_backward(
            gi.as_ref(),
            gw.as_ref(),
            gb.as_ref(),
            &go,
            &x,
            &m,
            &r,
            w.as_ref(),
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
    out: *const FooTensor,
    save_mean: *const FooTensor,
    save_invstd: *const FooTensor,
    input: *const FooTensor,
    weight: *const FooTensor,
    bias: *const FooTensor,
    running_mean: *const FooTensor,
    running_var: *const FooTensor,
    training: i32,
    momentum: f64,
    eps: f64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, sm, si, x, w, b, rm, rv) = unsafe {
            (
                tensor_mut(out)?,
                opt_mut(save_mean)?,
                opt_mut(save_invstd)?,
                tensor_ref(input)?,
                opt_ref(weight)?,
                opt_ref(bias)?,
                opt_mut(running_mean)?,
                opt_mut(running_var)?,
            )
        };
        {
            nn::batch_norm(
                &o,
                sm.as_ref(),
                si.as_ref(),
                &x,
                w.as_ref(),
                b.as_ref(),
                rm.as_ref(),
                rv.as_ref(),
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
    grad_input: *const FooTensor,
    grad_weight: *const FooTensor,
    grad_bias: *const FooTensor,
    grad_out: *const FooTensor,
    input: *const FooTensor,
    weight: *const FooTensor,
    mean: *const FooTensor,
    invstd_or_var: *const FooTensor,
    training: i32,
    eps: f64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, gw, gb, go, x, w, m, v) = unsafe {
            (
                opt_mut(grad_input)?,
                opt_mut(grad_weight)?,
                opt_mut(grad_bias)?,
                tensor_ref(grad_out)?,
                tensor_ref(input)?,
                opt_ref(weight)?,
                tensor_ref(mean)?,
                tensor_ref(invstd_or_var)?,
            )
        };
        {
            nn::batch_norm_backward(
                gi.as_ref(),
                gw.as_ref(),
                gb.as_ref(),
                &go,
                &x,
                w.as_ref(),
                &m,
                &v,
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
    grad_weight: *const FooTensor,
    grad: *const FooTensor,
    indices: *const FooTensor,
    padding_idx: i64,
    scale_grad_by_freq: i32,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gw, g, i) = unsafe {
            (
                tensor_mut(grad_weight)?,
                tensor_ref(grad)?,
                tensor_ref(indices)?,
            )
        };
        nn::embedding_dense_backward(&gw, &g, &i, padding_idx, scale_grad_by_freq != 0)
    })
}
