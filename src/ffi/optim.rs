//! C ABI of the fused optimizer steps (see kernels::optim). Each call takes the op's tensor
//! lists as arrays of `n` descriptors, skips the whole step when `found_inf` holds 1.0 (AMP
//! found an inf or NaN), and divides gradients by `grad_scale` when one is given.

use super::args::{OptTensorIn, ParamsIn, TensorListOut};
use super::guard;
use crate::error::FooResult;
use crate::kernels::amp::read_scalar_f32;
use crate::kernels::optim::{self, AdagradArgs, AdamArgs, SgdArgs};

/// Whether to skip the step (`found_inf == 1`), and the gradient scale to divide by.
fn amp_inputs(grad_scale: &OptTensorIn, found_inf: &OptTensorIn) -> FooResult<(bool, Option<f32>)> {
    let skip = match found_inf.get()? {
        Some(t) => read_scalar_f32("found_inf", &t)? == 1.0,
        None => false,
    };
    let scale = match grad_scale.get()? {
        Some(t) => Some(read_scalar_f32("grad_scale", &t)?),
        None => None,
    };
    Ok((skip, scale))
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
    params: TensorListOut,
    grads: TensorListOut,
    exp_avgs: TensorListOut,
    exp_avg_sqs: TensorListOut,
    max_exp_avg_sqs: TensorListOut,
    steps: TensorListOut,
    n: i64,
    args: ParamsIn<AdamArgs>,
    grad_scale: OptTensorIn,
    found_inf: OptTensorIn,
) -> i32 {
    guard(|| {
        let a = *args.get()?;
        let (skip, scale) = amp_inputs(&grad_scale, &found_inf)?;
        if skip {
            return Ok(());
        }
        let (p, g, m, v) = (
            params.get(n)?,
            grads.get(n)?,
            exp_avgs.get(n)?,
            exp_avg_sqs.get(n)?,
        );
        let vmax = if a.amsgrad {
            Some(max_exp_avg_sqs.get(n)?)
        } else {
            None
        };
        let mut updates = Vec::with_capacity(p.len());
        for (i, step) in steps.get(n)?.iter().enumerate() {
            let vmax = vmax.as_ref().map(|l| &l[i]);
            let step = optim::read_step(&step.as_ref())?;
            updates.push(optim::adam(
                &p[i], &g[i], &m[i], &v[i], vmax, step, &a, scale,
            )?);
        }
        optim::run_updates(&updates);
        Ok(())
    })
}

/// `_fused_sgd_` over `n` parameters (`momentum_buffers` is read only when momentum != 0).
///
/// # Safety
/// As `foo_fused_adam`.
#[no_mangle]
pub unsafe extern "C" fn foo_fused_sgd(
    params: TensorListOut,
    grads: TensorListOut,
    momentum_buffers: TensorListOut,
    n: i64,
    args: ParamsIn<SgdArgs>,
    grad_scale: OptTensorIn,
    found_inf: OptTensorIn,
) -> i32 {
    guard(|| {
        let a = *args.get()?;
        let (skip, scale) = amp_inputs(&grad_scale, &found_inf)?;
        if skip {
            return Ok(());
        }
        let bufs = if a.momentum != 0.0 {
            Some(momentum_buffers.get(n)?)
        } else {
            None
        };
        let updates = (params.get(n)?.iter().zip(&grads.get(n)?).enumerate())
            .map(|(i, (p, g))| optim::sgd(p, g, bufs.as_ref().map(|l| &l[i]), &a, scale))
            .collect::<FooResult<Vec<_>>>()?;
        optim::run_updates(&updates);
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
    params: TensorListOut,
    grads: TensorListOut,
    state_sums: TensorListOut,
    steps: TensorListOut,
    n: i64,
    args: ParamsIn<AdagradArgs>,
    grad_scale: OptTensorIn,
    found_inf: OptTensorIn,
) -> i32 {
    guard(|| {
        let a = *args.get()?;
        let (skip, scale) = amp_inputs(&grad_scale, &found_inf)?;
        if skip {
            return Ok(());
        }
        let (p, g, sums) = (params.get(n)?, grads.get(n)?, state_sums.get(n)?);
        let mut updates = Vec::with_capacity(p.len());
        for (i, step) in steps.get(n)?.iter().enumerate() {
            let step = optim::read_step(&step.as_ref())?;
            updates.push(optim::adagrad(&p[i], &g[i], &sums[i], step, &a, scale)?);
        }
        optim::run_updates(&updates);
        Ok(())
    })
}
