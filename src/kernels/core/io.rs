//! Small tensors read whole into vectors and written back (parameters, statistics, targets),
//! and one element read back as a scalar.

use super::element::Element;
use super::float::Math;
use super::parallel::SendPtr;
use crate::error::FooResult;
use crate::invalid_arg;
use crate::tensor::{Scalar, TensorMut, TensorRef};

/// Fails unless `t` is contiguous with `dtype`-independent shape `shape` (when given).
pub(crate) fn require_contiguous(what: &str, shape: &[usize], strides: &[isize]) -> FooResult<()> {
    if !crate::tensor::is_contiguous(shape, strides) {
        return invalid_arg!("nn kernel: {what} must be contiguous");
    }
    Ok(())
}

/// A small float vector (weights, statistics) of any float dtype, read in math type `M`.
pub(crate) fn read_vec<M: Math>(t: &TensorRef) -> FooResult<Vec<M>> {
    require_contiguous("parameter", &t.shape, &t.strides)?;
    let n = t.numel();
    crate::dispatch!(float: t.dtype, F => {
        // SAFETY: contiguous live tensor of n elements of F.
        let s: &[F] = unsafe { SendPtr::of(t.ptr).slice(0, n) };
        Ok(s.iter().map(|v| M::from_f64c(v.to_f64())).collect())
    }, _ => invalid_arg!("nn kernel: parameter of dtype {} is not floating point", t.dtype.name()))
}

/// Writes `v` into a small float tensor of any float dtype.
pub(crate) fn write_vec<M: Math>(t: &TensorMut, v: &[M]) -> FooResult<()> {
    require_contiguous("statistic", &t.shape, &t.strides)?;
    if t.numel() != v.len() {
        return invalid_arg!(
            "nn kernel: statistic has {} elements, expected {}",
            t.numel(),
            v.len()
        );
    }
    crate::dispatch!(float: t.dtype, F => {
        // SAFETY: contiguous live tensor of v.len() elements of F, written only here.
        let s: &mut [F] = unsafe { SendPtr::of(t.ptr).slice_mut(0, v.len()) };
        for (o, x) in s.iter_mut().zip(v) {
            *o = F::from_f64(x.to_f64c());
        }
        Ok(())
    }, _ => invalid_arg!("nn kernel: statistic of dtype {} is not floating point", t.dtype.name()))
}

/// Target / index values as i64 (int64, int32 or uint8 tensors), contiguous.
pub(crate) fn read_index(t: &TensorRef) -> FooResult<Vec<i64>> {
    require_contiguous("index", &t.shape, &t.strides)?;
    let n = t.numel();
    crate::dispatch!(int: t.dtype, I => {
        // SAFETY: contiguous live tensor of n elements of I.
        let s: &[I] = unsafe { SendPtr::of(t.ptr).slice(0, n) };
        Ok(s.iter().map(|v| v.to_i64()).collect())
    }, _ => invalid_arg!("nn kernel: index of dtype {} is not an integer type", t.dtype.name()))
}

/// Reads element 0 of a one-element tensor.
pub fn read_scalar(src: &TensorRef) -> FooResult<Scalar> {
    if src.numel() != 1 {
        return invalid_arg!(
            "a Tensor with {} elements cannot be converted to Scalar",
            src.numel()
        );
    }
    Ok(crate::dispatch!(all: src.dtype, T => {
        // SAFETY: a one-element tensor's data pointer addresses one valid T (possibly unaligned
        // inside a byte storage view, so read unaligned).
        unsafe { (src.ptr as *const T).read_unaligned() }.to_scalar()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn read_scalar_rejects_many() {
        let data = [1.0f32, 2.0];
        let t = TensorRef {
            ptr: data.as_ptr() as *const u8,
            shape: smallvec::smallvec![2],
            strides: smallvec::smallvec![1],
            dtype: DType::F32,
        };
        assert!(read_scalar(&t).is_err());
    }
}
