//! Concatenation: each input is copied (with dtype conversion) into its slice of the output.

use super::iter::FirstError;
use crate::error::FooResult;
use crate::invalid_arg;
use crate::kernels::core::copy::copy;
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::parallel_for;
use crate::tensor::{TensorMut, TensorRef};

/// `out = cat(inputs, dim)`: inputs have out's rank and shape except along `dim`, where their
/// sizes add up to out's. Inputs may have other dtypes (converted) and any strides.
pub fn cat(out: &TensorMut, inputs: &[TensorRef], dim: usize) -> FooResult<()> {
    if dim >= out.ndim() {
        return invalid_arg!("cat: dim {dim} out of range for a {}-d output", out.ndim());
    }
    let mut pieces: Vec<(TensorMut, &TensorRef)> = Vec::with_capacity(inputs.len());
    let mut offset = 0usize;
    for (i, t) in inputs.iter().enumerate() {
        let same = t.ndim() == out.ndim()
            && t.shape
                .iter()
                .zip(&out.shape)
                .enumerate()
                .all(|(d, (a, b))| d == dim || a == b);
        if !same {
            return invalid_arg!(
                "cat: input {i} has shape {:?}, incompatible with the output shape {:?} along dim {dim}",
                t.shape,
                out.shape
            );
        }
        let n = t.shape[dim];
        if offset + n > out.shape[dim] {
            return invalid_arg!("cat: inputs are larger than the output along dim {dim}");
        }
        let byte_offset = (offset as isize) * out.strides[dim] * out.dtype.size() as isize;
        if t.numel() > 0 {
            pieces.push((
                TensorMut {
                    ptr: out.ptr.wrapping_offset(byte_offset),
                    shape: t.shape.clone(),
                    strides: out.strides.clone(),
                    dtype: out.dtype,
                },
                t,
            ));
        }
        offset += n;
    }
    if offset != out.shape[dim] {
        return invalid_arg!(
            "cat: inputs cover {offset} of the output's {} entries along dim {dim}",
            out.shape[dim]
        );
    }
    let total: usize = pieces.iter().map(|(_, t)| t.numel()).sum();
    let all_small = pieces.iter().all(|(_, t)| t.numel() < GRAIN);
    if pieces.len() > 1 && all_small && total >= GRAIN {
        // Many small pieces: one piece per task (each copy stays on its thread).
        let err = FirstError::default();
        let grain = (GRAIN * pieces.len() / total).max(1);
        parallel_for(pieces.len(), grain, &|s, e| {
            for (i, (dst, src)) in pieces.iter().enumerate().take(e).skip(s) {
                if let Err(m) = copy(dst, src) {
                    err.record(i, m.message().to_string());
                    return;
                }
            }
        });
        return err.into_result();
    }
    // Large pieces: one after the other, each copy parallel inside.
    for (dst, src) in &pieces {
        copy(dst, src)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::kernels::core::map::testing::Owned;

    #[test]
    fn cat_dim1_with_conversion() {
        let a = Owned::new(vec![1f32, 2., 3., 4.], &[2, 2]);
        let b = Owned::new(vec![5i32, 6], &[2, 1]);
        let mut out = Owned::<f32>::zeros(&[2, 3]);
        cat(&out.m(), &[a.r(), b.r()], 1).unwrap();
        assert_eq!(out.data, vec![1., 2., 5., 3., 4., 6.]);
        assert_eq!(b.r().dtype, DType::I32);
    }

    #[test]
    fn cat_many_small_pieces_in_parallel() {
        let n = 3000usize;
        let pieces: Vec<Owned<i64>> = (0..n)
            .map(|i| Owned::new(vec![i as i64; 16], &[1, 16]))
            .collect();
        let refs: Vec<TensorRef> = pieces.iter().map(|p| p.r()).collect();
        let mut out = Owned::<i64>::zeros(&[n, 16]);
        cat(&out.m(), &refs, 0).unwrap();
        assert!(out
            .data
            .chunks(16)
            .enumerate()
            .all(|(i, c)| c.iter().all(|&v| v == i as i64)));
    }

    #[test]
    fn cat_rejects_mismatch() {
        let a = Owned::new(vec![1f32, 2.], &[1, 2]);
        let mut out = Owned::<f32>::zeros(&[2, 2]);
        assert!(cat(&out.m(), &[a.r()], 0).is_err());
    }
}
