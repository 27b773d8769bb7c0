//! float16/bfloat16 <-> float32 conversion of whole tensors, for kernels that compute reduced
//! floats in float32 (matrix products, convolutions): a dense parallel fast path using `half`'s
//! slice conversions (SIMD where the CPU has it), the generic strided copy otherwise.

use super::layout::GRAIN;
use super::parallel::{par_chunks_mut, SendPtr};
use crate::dtype::DType;
use crate::error::FooResult;
use crate::tensor::{contiguous_strides, TensorMut, TensorRef};
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// A contiguous float32 copy of `t` (any float dtype, any strides).
pub fn to_f32_vec(t: &TensorRef) -> FooResult<Vec<f32>> {
    let n = t.numel();
    let mut buf = vec![0f32; n];
    match t.dtype {
        DType::F16 | DType::BF16 if t.is_contiguous() => {
            let bf = t.dtype == DType::BF16;
            let src = SendPtr::<u16>::of(t.ptr);
            par_chunks_mut(&mut buf, GRAIN, &|s, d| {
                // SAFETY: elements s..s + d.len() of the contiguous n-element source, which
                // nothing writes during the call.
                unsafe {
                    if bf {
                        src.cast::<bf16>().slice(s, d.len()).convert_to_f32_slice(d)
                    } else {
                        src.cast::<f16>().slice(s, d.len()).convert_to_f32_slice(d)
                    }
                }
            });
        }
        _ => {
            let view = TensorMut {
                ptr: buf.as_mut_ptr() as *mut u8,
                shape: t.shape.clone(),
                strides: contiguous_strides(&t.shape),
                dtype: DType::F32,
            };
            super::copy::copy(&view, t)?;
        }
    }
    Ok(buf)
}

/// Writes the contiguous float32 values `src` (in `out`'s logical order) into `out`, rounding to
/// nearest-even for float16/bfloat16.
pub fn store_f32(out: &TensorMut, src: &[f32]) -> FooResult<()> {
    let n = out.numel();
    assert_eq!(src.len(), n, "store_f32: length mismatch");
    if n == 0 {
        return Ok(());
    }
    match out.dtype {
        DType::BF16 if out.is_contiguous() => store_dense::<bf16>(out, src),
        DType::F16 if out.is_contiguous() => store_dense::<f16>(out, src),
        _ => {
            let view = TensorRef {
                ptr: src.as_ptr() as *const u8,
                shape: out.shape.clone(),
                strides: contiguous_strides(&out.shape),
                dtype: DType::F32,
            };
            super::copy::copy(out, &view)
        }
    }
}

/// [`store_f32`] into a contiguous float16/bfloat16 `out` of `src.len() > 0` elements, in
/// parallel chunks of the output.
fn store_dense<H: Send>(out: &TensorMut, src: &[f32]) -> FooResult<()>
where
    [H]: HalfFloatSliceExt,
{
    // SAFETY: `out` is a live, writable, contiguous tensor of `src.len() > 0` elements of `H`
    // (the caller checked its dtype and layout), which nothing else reads or writes during the
    // call.
    let dst = unsafe { std::slice::from_raw_parts_mut(out.ptr as *mut H, src.len()) };
    par_chunks_mut(dst, GRAIN, &|a, d| {
        d.convert_from_f32_slice(&src[a..a + d.len()])
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    #[test]
    fn reduced_round_trip_dense_and_strided() {
        let vals: Vec<f32> = (0..100_000).map(|i| (i as f32 - 5e4) * 0.37).collect();
        let b = Owned::new(
            vals.iter().map(|&v| bf16::from_f32(v)).collect(),
            &[100, 1000],
        );
        let w = to_f32_vec(&b.r()).unwrap();
        assert!(w.iter().zip(&b.data).all(|(&x, &y)| x == y.to_f32()));
        let mut t = b.r();
        t.shape = smallvec::smallvec![1000, 100];
        t.strides = smallvec::smallvec![1, 1000];
        let wt = to_f32_vec(&t).unwrap();
        assert_eq!(wt[1], b.data[1000].to_f32());
        let mut h = Owned::<f16>::zeros(&[100, 1000]);
        store_f32(&h.m(), &vals).unwrap();
        assert!(h
            .data
            .iter()
            .zip(&vals)
            .all(|(&x, &v)| x == f16::from_f32(v)));
    }
}
