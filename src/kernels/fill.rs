//! `fill_` / `zero_` (`_local_scalar_dense`, reading one element back, is
//! [`super::core::io::read_scalar`]).

use super::core::element::Element;
use super::core::layout::coalesce;
use super::core::map::drive_rows;
use super::core::parallel::SendPtr;
use crate::error::FooResult;
use crate::tensor::{Scalar, TensorMut};

/// Sets every element of `dst` to `value` converted to `dst`'s dtype.
pub fn fill(dst: &TensorMut, value: &Scalar) -> FooResult<()> {
    if dst.numel() == 0 {
        return Ok(());
    }
    let l = coalesce(&dst.shape, [&dst.strides]);
    crate::dispatch!(all: dst.dtype, T => {
        let v = T::from_scalar(value);
        let base = SendPtr::<T>::of(dst.ptr);
        let stride = l.strides[0].last().copied().unwrap_or(1);
        drive_rows(&l, &|off, len| {
            let p = base.at(off[0]);
            // SAFETY: rows of a live, writable tensor without internal overlap.
            unsafe {
                if stride == 1 {
                    fill_dense(std::slice::from_raw_parts_mut(p, len), v);
                } else {
                    for i in 0..len as isize {
                        *p.offset(i * stride) = v;
                    }
                }
            }
        });
    });
    Ok(())
}

crate::multiversion!(fn fill_dense<T: Element>(dst: &mut [T], v: T) => fill_dense_body);

/// A dense run set to `v`, in the widest stores the CPU has: `slice::fill` in the crate's
/// baseline x86-64 code stored 16 bytes at a time, and filling 4 MB (a gradient of ones,
/// `[32, 32, 32, 32]`) took 41-69 us on 2 threads against the CPU backend's 26-35 (Zen 4).
#[inline(always)]
fn fill_dense_body<T: Element>(dst: &mut [T], v: T) {
    // A `for` loop: `fill` is a std function that need not be inlined into this copy.
    for x in dst.iter_mut() {
        *x = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::kernels::core::io::read_scalar;
    use crate::tensor::TensorRef;

    #[test]
    fn fill_strided_and_read_back() {
        let mut data = vec![0i32; 12];
        let t = TensorMut {
            ptr: data.as_mut_ptr() as *mut u8,
            shape: smallvec::smallvec![3, 2],
            strides: smallvec::smallvec![4, 2],
            dtype: DType::I32,
        };
        fill(&t, &Scalar::from_f64(7.9)).unwrap();
        assert_eq!(data, vec![7, 0, 7, 0, 7, 0, 7, 0, 7, 0, 7, 0]);
        let one = TensorRef {
            ptr: data.as_ptr() as *const u8,
            shape: smallvec::smallvec![],
            strides: smallvec::smallvec![],
            dtype: DType::I32,
        };
        assert_eq!(read_scalar(&one).unwrap(), Scalar::from_i64(7));
    }
}
