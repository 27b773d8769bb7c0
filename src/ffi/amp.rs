//! C ABI of GradScaler's kernels (see kernels::amp).

use super::{guard, tensor_mut, tensor_ref};
use crate::error::FooError;
use crate::kernels::amp;
use crate::tensor::FooTensor;

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
    grads: *const FooTensor,
    n: i64,
    found_inf: *const FooTensor,
    inv_scale: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (fi, inv) = unsafe { (tensor_mut(found_inf)?, tensor_ref(inv_scale)?) };
        let inv = amp::read_scalar_f32("inv_scale", &inv)?;
        if n > 0 && grads.is_null() {
            return Err(FooError::InvalidArgument("null gradient list".into()));
        }
        let mut any = false;
        for i in 0..n.max(0) as usize {
            // SAFETY: caller's contract: `grads` holds `n` descriptors.
            let g = unsafe { tensor_mut(grads.add(i))? };
            any |= amp::unscale(&g, inv)?;
        }
        if any {
            amp::write_scalar_f32("found_inf", &fi, 1.0)?;
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
    scale: *const FooTensor,
    growth_tracker: *const FooTensor,
    found_inf: *const FooTensor,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: i64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (s, t, f) = unsafe {
            (
                tensor_mut(scale)?,
                tensor_mut(growth_tracker)?,
                tensor_ref(found_inf)?,
            )
        };
        amp::update_scale(&s, &t, &f, growth_factor, backoff_factor, growth_interval)
    })
}
