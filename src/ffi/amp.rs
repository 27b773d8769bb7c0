//! C ABI of GradScaler's kernels (see kernels::amp).

use super::args::{TensorIn, TensorListOut, TensorOut};
use super::guard;
use crate::kernels::amp;

/// Multiplies each of `grads[0..n]` by `inv_scale` in place (opmath: float32 for
/// float16/bfloat16) and sets `found_inf` to 1.0 when any gradient holds an inf or NaN (it is
/// left alone otherwise: zeroing it is the caller's job). `found_inf` and `inv_scale` are
/// 1-element float32 tensors.
///
/// # Safety
/// `grads` must point to `n` descriptors of live, writable tensors (none overlapping another
/// or itself); `found_inf` (writable) and `inv_scale` must describe live 1-element tensors.
#[no_mangle]
pub unsafe extern "C" fn foo_amp_unscale(
    grads: TensorListOut,
    n: i64,
    found_inf: TensorOut,
    inv_scale: TensorIn,
) -> i32 {
    guard(|| {
        let inv = inv_scale.get()?;
        let inv = amp::read_scalar_f32("inv_scale", &inv)?;
        let mut any = false;
        for g in grads.get(n)? {
            any |= amp::unscale(&g, inv)?;
        }
        if any {
            amp::write_scalar_f32("found_inf", &found_inf.get()?, 1.0)?;
        }
        Ok(())
    })
}

/// `_amp_update_scale_`: updates `scale` (float32) and `growth_tracker` (int32) in place from
/// `found_inf` (float32).
///
/// # Safety
/// The descriptors must describe live 1-element tensors (`scale`, `growth_tracker` writable).
#[no_mangle]
pub unsafe extern "C" fn foo_amp_update_scale(
    scale: TensorOut,
    growth_tracker: TensorOut,
    found_inf: TensorIn,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: i64,
) -> i32 {
    guard(|| {
        amp::update_scale(
            &scale.get()?,
            &growth_tracker.get()?,
            &found_inf.get()?,
            growth_factor,
            backoff_factor,
            growth_interval,
        )
    })
}
