//! `fill_` / `zero_` and `_local_scalar_dense` (reading one element back as a scalar).

use super::element::Element;
use super::layout::{coalesce, view_mut, GRAIN};
use crate::error::FooResult;
use crate::invalid_arg;
use crate::tensor::{Scalar, TensorMut, TensorRef};
use ndarray::Zip;
use rayon::prelude::*;

/// Sets every element of `dst` to `value` converted to `dst`'s dtype.
pub fn fill(dst: &TensorMut, value: &Scalar) -> FooResult<()> {
    if dst.numel() == 0 {
        return Ok(());
    }
    let layout = coalesce(&dst.shape, [&dst.strides]);
    crate::dispatch_all!(dst.dtype, T => {
        let v = T::from_scalar(value);
        // SAFETY: `dst` describes live, writable, non-self-overlapping memory of type T.
        unsafe { fill_typed::<T>(dst.ptr as *mut T, &layout.shape, &layout.strides[0], v) };
    });
    Ok(())
}

/// # Safety
/// `ptr` with `shape`/`strides` must describe a writable region of `T` without internal overlap.
unsafe fn fill_typed<T: Element>(ptr: *mut T, shape: &[usize], strides: &[isize], v: T) {
    let n: usize = shape.iter().product();
    if shape.len() == 1 && strides[0] == 1 {
        // SAFETY: dense region of n elements (caller's contract).
        let d = unsafe { std::slice::from_raw_parts_mut(ptr, n) };
        if n < GRAIN {
            d.fill(v);
        } else {
            d.par_chunks_mut(GRAIN).for_each(|c| c.fill(v));
        }
        return;
    }
    // SAFETY: forwarded caller's contract.
    let d = unsafe { view_mut(ptr, shape, strides) };
    if n < GRAIN {
        Zip::from(d).for_each(|x| *x = v);
    } else {
        Zip::from(d).par_for_each(|x| *x = v);
    }
}

/// Reads element 0 of a one-element tensor.
pub fn read_scalar(src: &TensorRef) -> FooResult<Scalar> {
    if src.numel() != 1 {
        return invalid_arg!(
            "a Tensor with {} elements cannot be converted to Scalar",
            src.numel()
        );
    }
    Ok(crate::dispatch_all!(src.dtype, T => {
        // SAFETY: a one-element tensor's data pointer addresses one valid T (may be unaligned
        // for views into byte storages, so read unaligned).
        unsafe { (src.ptr as *const T).read_unaligned() }.to_scalar()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn fill_strided_and_read_back() {
        let mut data = vec![0i32; 12];
        // every other column of a 3x4 matrix
        let t = TensorMut { ptr: data.as_mut_ptr() as *mut u8, shape: vec![3, 2], strides: vec![4, 2], dtype: DType::I32 };
        fill(&t, &Scalar::from_f64(7.9)).unwrap();
        assert_eq!(data, vec![7, 0, 7, 0, 7, 0, 7, 0, 7, 0, 7, 0]);
        let one = TensorRef { ptr: data.as_ptr() as *const u8, shape: vec![], strides: vec![], dtype: DType::I32 };
        assert_eq!(read_scalar(&one).unwrap(), Scalar::from_i64(7));
    }

    #[test]
    fn read_scalar_rejects_many() {
        let data = [1.0f32, 2.0];
        let t = TensorRef { ptr: data.as_ptr() as *const u8, shape: vec![2], strides: vec![1], dtype: DType::F32 };
        assert!(read_scalar(&t).is_err());
    }
}
