//! Strided copy with dtype conversion: the kernel behind `_copy_from` (CPU <-> foo, foo <-> foo,
//! any dtype pair, broadcast sources, non-contiguous sources and destinations).

use super::element::Element;
use super::layout::{coalesce, view, view_mut, GRAIN};
use crate::error::FooResult;
use crate::invalid_arg;
use crate::tensor::{TensorMut, TensorRef};
use ndarray::Zip;
use rayon::prelude::*;

/// `dst[i] = cast(src[i])` for every index. Shapes must match (the glue expands `src` first);
/// `dst` must not overlap itself or `src` (the glue stages overlapping copies).
pub fn copy(dst: &TensorMut, src: &TensorRef) -> FooResult<()> {
    if dst.shape != src.shape {
        return invalid_arg!(
            "copy: destination shape {:?} does not match source shape {:?}",
            dst.shape,
            src.shape
        );
    }
    if dst.numel() == 0 {
        return Ok(());
    }
    let layout = coalesce(&dst.shape, [&dst.strides, &src.strides]);
    if dst.dtype == src.dtype && layout.is_flat_contiguous() {
        let nbytes = layout.numel() * dst.dtype.size();
        // SAFETY: both regions are `nbytes` long, dense, and do not overlap (caller's contract).
        let (d, s) = unsafe {
            (
                std::slice::from_raw_parts_mut(dst.ptr, nbytes),
                std::slice::from_raw_parts(src.ptr, nbytes),
            )
        };
        copy_bytes(d, s);
        return Ok(());
    }
    crate::dispatch_all!(dst.dtype, D => crate::dispatch_all!(src.dtype, S => {
        // SAFETY: the descriptors come from live tensors of these dtypes and this layout.
        unsafe { convert::<D, S>(dst.ptr as *mut D, src.ptr as *const S, &layout.shape, &layout.strides) };
    }));
    Ok(())
}

fn copy_bytes(d: &mut [u8], s: &[u8]) {
    const CHUNK: usize = 1 << 20;
    if d.len() < 4 * GRAIN {
        d.copy_from_slice(s);
    } else {
        d.par_chunks_mut(CHUNK).zip(s.par_chunks(CHUNK)).for_each(|(d, s)| d.copy_from_slice(s));
    }
}

/// # Safety
/// `dst`/`src` with `shape` and the two stride vectors must describe valid, non-overlapping
/// regions of `D` and `S`.
unsafe fn convert<D: Element, S: Element>(dst: *mut D, src: *const S, shape: &[usize], strides: &[Vec<isize>; 2]) {
    let n: usize = shape.iter().product();
    if shape.len() == 1 && strides[0][0] == 1 && strides[1][0] == 1 {
        // SAFETY: dense regions of n elements (caller's contract).
        let (d, s) = unsafe { (std::slice::from_raw_parts_mut(dst, n), std::slice::from_raw_parts(src, n)) };
        if n < GRAIN {
            d.iter_mut().zip(s).for_each(|(d, s)| *d = s.cast());
        } else {
            d.par_chunks_mut(GRAIN).zip(s.par_chunks(GRAIN)).for_each(|(d, s)| {
                d.iter_mut().zip(s).for_each(|(d, s)| *d = s.cast());
            });
        }
        return;
    }
    // SAFETY: forwarded caller's contract.
    let (d, s) = unsafe { (view_mut(dst, shape, &strides[0]), view(src, shape, &strides[1])) };
    let zip = Zip::from(d).and(s);
    if n < GRAIN {
        zip.for_each(|d, s| *d = s.cast());
    } else {
        zip.par_for_each(|d, s| *d = s.cast());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::tensor::contiguous_strides;

    fn tref<T>(data: &[T], shape: &[usize], strides: &[isize], dtype: DType) -> TensorRef {
        TensorRef { ptr: data.as_ptr() as *const u8, shape: shape.to_vec(), strides: strides.to_vec(), dtype }
    }
    fn tmut<T>(data: &mut [T], shape: &[usize], dtype: DType) -> TensorMut {
        TensorMut { ptr: data.as_mut_ptr() as *mut u8, shape: shape.to_vec(), strides: contiguous_strides(shape), dtype }
    }

    #[test]
    fn transposed_convert() {
        let src: Vec<f32> = (0..6).map(|x| x as f32 + 0.5).collect();
        let mut dst = vec![0i64; 6];
        // src viewed as the 3x2 transpose of a 2x3 matrix.
        copy(&tmut(&mut dst, &[3, 2], DType::I64), &tref(&src, &[3, 2], &[1, 3], DType::F32)).unwrap();
        assert_eq!(dst, vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn broadcast_source() {
        let src = [1u8, 2, 3];
        let mut dst = vec![0u8; 6];
        copy(&tmut(&mut dst, &[2, 3], DType::U8), &tref(&src, &[2, 3], &[0, 1], DType::U8)).unwrap();
        assert_eq!(dst, vec![1, 2, 3, 1, 2, 3]);
    }

    #[test]
    fn large_parallel_same_dtype() {
        let n = 3 * GRAIN + 7;
        let src: Vec<f64> = (0..n).map(|x| x as f64).collect();
        let mut dst = vec![0f64; n];
        copy(&tmut(&mut dst, &[n], DType::F64), &tref(&src, &[n], &[1], DType::F64)).unwrap();
        assert_eq!(dst, src);
        // Reversed (negative stride) source, converted, parallel path.
        let mut dst32 = vec![0f32; n];
        // SAFETY-free: the descriptor below starts at the last element and walks backwards.
        let rev = TensorRef { ptr: src[n - 1..].as_ptr() as *const u8, shape: vec![n], strides: vec![-1], dtype: DType::F64 };
        copy(&tmut(&mut dst32, &[n], DType::F32), &rev).unwrap();
        assert_eq!(dst32[0], (n - 1) as f32);
        assert_eq!(dst32[n - 1], 0.0);
    }

    #[test]
    fn mismatched_shapes_error() {
        let src = [1u8, 2, 3];
        let mut dst = vec![0u8; 2];
        assert!(copy(&tmut(&mut dst, &[2], DType::U8), &tref(&src, &[3], &[1], DType::U8)).is_err());
    }
}
