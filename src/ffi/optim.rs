//! C ABI of the fused optimizer steps (see kernels::optim). Each call takes the op's tensor
//! lists as arrays of `n` descriptors, skips the whole step when `found_inf` holds 1.0 (AMP
//! found an inf or NaN), and divides gradients by `grad_scale` when one is given.

use super::{guard, opt_ref, tensor_mut};
use crate::error::{FooError, FooResult};
use crate::kernels::amp::read_scalar_f32;
use crate::kernels::optim::{self, AdagradArgs, AdamArgs, SgdArgs};
use crate::tensor::{FooTensor, TensorMut};

/// Whether to skip the step (`found_inf == 1`), and the gradient scale to divide by.
///
/// # Safety
/// Each pointer is null or describes a live tensor.
unsafe fn amp_inputs(
    grad_scale: *const FooTensor,
    found_inf: *const FooTensor,
) -> FooResult<(bool, Option<f32>)> {
    // SAFETY: caller's contract (`found_inf` is null or a live tensor).
    let skip = match unsafe { opt_ref(found_inf)? } {
        Some(t) => read_scalar_f32("found_inf", &t)? == 1.0,
        None => false,
    };
    // SAFETY: as above, for `grad_scale`.
    let scale = match unsafe { opt_ref(grad_scale)? } {
        Some(t) => Some(read_scalar_f32("grad_scale", &t)?),
        None => None,
    };
    Ok((skip, scale))
}

/// Descriptor `i` of a list, as a writable view; an error for a null list.
///
/// # Safety
/// `list` is null or points to more than `i` descriptors of live, writable tensors.
unsafe fn item(list: *const FooTensor, i: usize, what: &str) -> FooResult<TensorMut> {
    if list.is_null() {
        return Err(FooError::InvalidArgument(format!("null {what} list")));
    }
    // SAFETY: caller's contract.
    unsafe { tensor_mut(list.add(i)) }
}

/// `_fused_adam_` / `_fused_adamw_` (`args.decoupled`) over `n` parameters.
/// `max_exp_avg_sqs` is read only when `args.amsgrad`. Like it, each fused step takes lists of
/// `n` descriptors of dense (contiguous) tensors; `grad_scale` and `found_inf` are null or
/// 1-element float32 tensors, and the whole step is skipped when `found_inf` holds 1.0.
///
/// # Safety
/// Every non-null list points to `n` descriptors of live tensors (all but `steps` writable;
/// no two overlapping); `args` points to valid arguments; `grad_scale`/`found_inf` are null or
/// describe live tensors.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn foo_fused_adam(
    params: *const FooTensor,
    grads: *const FooTensor,
    exp_avgs: *const FooTensor,
    exp_avg_sqs: *const FooTensor,
    max_exp_avg_sqs: *const FooTensor,
    steps: *const FooTensor,
    n: i64,
    args: *const AdamArgs,
    grad_scale: *const FooTensor,
    found_inf: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let a = *unsafe { args.as_ref() }
            .ok_or_else(|| FooError::InvalidArgument("null Adam arguments".into()))?;
        // SAFETY: caller's contract.
        let (skip, scale) = unsafe { amp_inputs(grad_scale, found_inf)? };
        if skip {
            return Ok(());
        }
        for i in 0..n.max(0) as usize {
            // SAFETY: caller's contract: every list holds `n` descriptors.
            unsafe {
                let vmax = if a.amsgrad {
                    Some(item(max_exp_avg_sqs, i, "max_exp_avg_sqs")?)
                } else {
                    None
                };
                let step = optim::read_step(&item(steps, i, "state_steps")?.as_ref())?;
                optim::adam(
                    &item(params, i, "params")?,
                    &item(grads, i, "grads")?,
                    &item(exp_avgs, i, "exp_avgs")?,
                    &item(exp_avg_sqs, i, "exp_avg_sqs")?,
                    vmax.as_ref(),
                    step,
                    &a,
                    scale,
                )?;
            }
        }
        Ok(())
    })
}

/// `_fused_sgd_` over `n` parameters (`momentum_buffers` is read only when momentum != 0).
///
/// # Safety
/// As `foo_fused_adam`.
#[no_mangle]
pub unsafe extern "C" fn foo_fused_sgd(
    params: *const FooTensor,
    grads: *const FooTensor,
    momentum_buffers: *const FooTensor,
    n: i64,
    args: *const SgdArgs,
    grad_scale: *const FooTensor,
    found_inf: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let a = *unsafe { args.as_ref() }
            .ok_or_else(|| FooError::InvalidArgument("null SGD arguments".into()))?;
        // SAFETY: caller's contract.
        let (skip, scale) = unsafe { amp_inputs(grad_scale, found_inf)? };
        if skip {
            return Ok(());
        }
        for i in 0..n.max(0) as usize {
            // SAFETY: caller's contract: every list holds `n` descriptors.
            unsafe {
                let buf = if a.momentum != 0.0 {
                    Some(item(momentum_buffers, i, "momentum_buffer_list")?)
                } else {
                    None
                };
                optim::sgd(
                    &item(params, i, "params")?,
                    &item(grads, i, "grads")?,
                    buf.as_ref(),
                    &a,
                    scale,
                )?;
            }
        }
        Ok(())
    })
}

/// `_fused_adagrad_` over `n` parameters.
///
/// # Safety
/// As `foo_fused_adam`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn foo_fused_adagrad(
    params: *const FooTensor,
    grads: *const FooTensor,
    state_sums: *const FooTensor,
    steps: *const FooTensor,
    n: i64,
    args: *const AdagradArgs,
    grad_scale: *const FooTensor,
    found_inf: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let a = *unsafe { args.as_ref() }
            .ok_or_else(|| FooError::InvalidArgument("null Adagrad arguments".into()))?;
        // SAFETY: caller's contract.
        let (skip, scale) = unsafe { amp_inputs(grad_scale, found_inf)? };
        if skip {
            return Ok(());
        }
        for i in 0..n.max(0) as usize {
            // SAFETY: caller's contract: every list holds `n` descriptors.
            unsafe {
                let step = optim::read_step(&item(steps, i, "state_steps")?.as_ref())?;
                optim::adagrad(
                    &item(params, i, "params")?,
                    &item(grads, i, "grads")?,
                    &item(state_sums, i, "state_sums")?,
                    step,
                    &a,
                    scale,
                )?;
            }
        }
        Ok(())
    })
}
