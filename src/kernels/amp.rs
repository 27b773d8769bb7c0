//! GradScaler's kernels (`torch.amp.GradScaler`), with the semantics of ATen's CPU and CUDA
//! versions (aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp, cuda/AmpKernels.cu):
//!
//! * [`unscale`]: multiplies a gradient by `inv_scale` in place, in the opmath type (float32
//!   for float16/bfloat16, which round once on the way back), and reports whether any element
//!   was inf or NaN before scaling. `inv_scale == 1` leaves the values untouched.
//! * [`update_scale`]: backs the scale off after a step with inf/NaN gradients, grows it after
//!   `growth_interval` consecutive clean steps (never past float32's range).

use super::core::float::{FloatStore, Math};
use super::core::layout::coalesce;
use super::core::map::drive_rows;
use super::core::parallel::SendPtr;
use crate::dtype::DType;
use crate::error::FooResult;
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use num_traits::Float;
use std::sync::atomic::{AtomicBool, Ordering};

/// `grad *= inv_scale` in place; returns whether `grad` held an inf or NaN.
pub fn unscale(grad: &TensorMut, inv_scale: f32) -> FooResult<bool> {
    crate::dispatch!(float: grad.dtype, F => unscale_impl::<F>(grad, inv_scale),
    _ => not_implemented!(
        "_amp_foreach_non_finite_check_and_unscale_: gradients must be floating point, got {}",
        grad.dtype.name()
    ))
}

fn unscale_impl<F: FloatStore>(g: &TensorMut, inv_scale: f32) -> FooResult<bool> {
    if g.numel() == 0 {
        return Ok(false);
    }
    let inv = F::M::from_f64c(inv_scale as f64);
    let scale = inv_scale != 1.0;
    let found = AtomicBool::new(false);
    let l = coalesce(&g.shape, [&g.strides]);
    let inner = l.strides[0].last().copied().unwrap_or(0);
    let base = SendPtr::<F>::of(g.ptr);
    drive_rows(&l, &|off, len| {
        let row = base.at(off[0]);
        let mut bad = false;
        for i in 0..len as isize {
            let p = row.wrapping_offset(i * inner);
            // SAFETY: the row offset plus i * inner stride (i < len) addresses an element of
            // `g` (the layout came from its shape and strides); each element is visited by one
            // row of one thread, and `g` has no internal overlap (glue check).
            unsafe {
                let v = (*p).load();
                bad |= !v.is_finite();
                if scale {
                    *p = F::store(v * inv);
                }
            }
        }
        if bad {
            found.store(true, Ordering::Relaxed);
        }
    });
    Ok(found.into_inner())
}

fn one_element(what: &str, shape: &[usize], dtype: DType, want: DType) -> FooResult<()> {
    if shape.iter().product::<usize>() != 1 {
        return invalid_arg!("{what} must be a 1-element tensor.");
    }
    if dtype != want {
        let kind = if want == DType::F32 {
            "a float"
        } else {
            "an int"
        };
        return invalid_arg!("{what} must be {kind} tensor.");
    }
    Ok(())
}

/// Reads the float32 value of a 1-element tensor (`inv_scale`, `found_inf`).
pub fn read_scalar_f32(what: &str, t: &TensorRef) -> FooResult<f32> {
    one_element(what, &t.shape, t.dtype, DType::F32)?;
    // SAFETY: a live 1-element float32 tensor: its one element is at `ptr`.
    Ok(unsafe { *(t.ptr as *const f32) })
}

/// Writes `v` into a 1-element float32 tensor (`found_inf`).
pub fn write_scalar_f32(what: &str, t: &TensorMut, v: f32) -> FooResult<()> {
    one_element(what, &t.shape, t.dtype, DType::F32)?;
    // SAFETY: a live, writable 1-element float32 tensor: its one element is at `ptr`.
    unsafe { *(t.ptr as *mut f32) = v };
    Ok(())
}

/// `_amp_update_scale_`: `scale` (float32) and `growth_tracker` (int32) are updated in place
/// from `found_inf` (float32), exactly as ATen's kernels do.
pub fn update_scale(
    scale: &TensorMut,
    growth_tracker: &TensorMut,
    found_inf: &TensorRef,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: i64,
) -> FooResult<()> {
    one_element("current_scale", &scale.shape, scale.dtype, DType::F32)?;
    one_element(
        "growth_tracker",
        &growth_tracker.shape,
        growth_tracker.dtype,
        DType::I32,
    )?;
    let found = read_scalar_f32("found_inf", found_inf)?;
    let (sp, tp) = (scale.ptr as *mut f32, growth_tracker.ptr as *mut i32);
    // SAFETY: live, writable 1-element tensors of the checked dtypes (element at `ptr`).
    let (s, t) = unsafe { (*sp, *tp) };
    let (new_s, new_t) = next_scale(s, t, found, growth_factor, backoff_factor, growth_interval);
    // SAFETY: as above.
    unsafe {
        *sp = new_s;
        *tp = new_t;
    }
    Ok(())
}

/// The arithmetic of `_amp_update_scale_` on plain values: (new scale, new growth tracker).
pub fn next_scale(
    scale: f32,
    tracker: i32,
    found_inf: f32,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: i64,
) -> (f32, i32) {
    if found_inf != 0.0 {
        return ((scale as f64 * backoff_factor) as f32, 0);
    }
    // A successful step: the tracker counts it before comparing with the interval.
    let successful = tracker.wrapping_add(1);
    if successful as i64 == growth_interval {
        let grown = (scale as f64 * growth_factor) as f32;
        // Never grow past float32's range to inf.
        (if grown.is_finite() { grown } else { scale }, 0)
    } else {
        (scale, successful)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;
    use half::{bf16, f16};

    #[test]
    fn amp_unscale_scales_and_flags_non_finite() {
        let mut g = Owned::new(vec![2.0f32, -4.0, 8.0, 1.0], &[4]);
        assert!(!unscale(&g.m(), 0.5).unwrap());
        assert_eq!(g.data, vec![1.0, -2.0, 4.0, 0.5]);
        let mut g = Owned::new(vec![2.0f32, f32::INFINITY, 8.0, f32::NAN], &[2, 2]);
        assert!(unscale(&g.m(), 0.25).unwrap());
        assert_eq!(g.data[0], 0.5);
        assert_eq!(g.data[2], 2.0);
    }

    #[test]
    fn amp_unscale_reduced_and_strided() {
        let mut h = Owned::new(vec![f16::from_f32(3.0), f16::from_f32(-6.0)], &[2]);
        assert!(!unscale(&h.m(), 1.0 / 3.0).unwrap());
        assert_eq!(h.data[0], f16::from_f32(1.0));
        assert_eq!(h.data[1], f16::from_f32(-2.0));
        // A transposed 2x2 view of bfloat16 with an inf.
        let mut b = Owned::new(
            vec![
                bf16::from_f32(4.0),
                bf16::INFINITY,
                bf16::from_f32(2.0),
                bf16::from_f32(8.0),
            ],
            &[2, 2],
        );
        let mut m = b.m();
        m.strides = smallvec::smallvec![1, 2];
        assert!(unscale(&m, 0.5).unwrap());
        assert_eq!(b.data[0], bf16::from_f32(2.0));
        assert_eq!(b.data[3], bf16::from_f32(4.0));
        // Integer gradients are refused.
        let mut i = Owned::new(vec![1i32], &[1]);
        assert!(unscale(&i.m(), 0.5).is_err());
    }

    #[test]
    fn amp_next_scale_backs_off_grows_and_caps() {
        assert_eq!(next_scale(1024.0, 5, 1.0, 2.0, 0.5, 10), (512.0, 0));
        assert_eq!(next_scale(1024.0, 5, 0.0, 2.0, 0.5, 10), (1024.0, 6));
        assert_eq!(next_scale(1024.0, 9, 0.0, 2.0, 0.5, 10), (2048.0, 0));
        assert_eq!(next_scale(f32::MAX, 0, 0.0, 2.0, 0.5, 1), (f32::MAX, 0));
    }
}
