//! embedding_dense_backward: `grad_weight[idx[i]] += grad[i]` (rows of length D), skipping
//! `padding_idx`, optionally scaled by 1 / (occurrences of idx[i]). Deterministic: positions
//! are bucketed per weight row (counting sort) and each row sums its positions in order, in
//! parallel over rows.

use crate::error::FooResult;
use crate::kernels::core::float::{FloatStore, Math};
use crate::kernels::core::io::{read_index, require_contiguous};
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use num_traits::{One, Zero};

/// `grad_weight` `[W, D]`, `grad` `[K, D]`, `indices` `K` integers (all contiguous).
pub fn embedding_dense_backward(
    grad_weight: &TensorMut,
    grad: &TensorRef,
    indices: &TensorRef,
    padding_idx: i64,
    scale_grad_by_freq: bool,
) -> FooResult<()> {
    require_contiguous("grad_weight", &grad_weight.shape, &grad_weight.strides)?;
    require_contiguous("grad", &grad.shape, &grad.strides)?;
    if grad_weight.shape.len() != 2
        || grad.shape.len() != 2
        || grad.shape[1] != grad_weight.shape[1]
    {
        return invalid_arg!(
            "embedding backward: grad_weight {:?} and grad {:?} must be [W, D] and [K, D]",
            grad_weight.shape,
            grad.shape
        );
    }
    if grad.dtype != grad_weight.dtype {
        return invalid_arg!("embedding backward: grad and grad_weight dtypes differ");
    }
    let (w, d, k) = (grad_weight.shape[0], grad.shape[1], grad.shape[0]);
    let idx = read_index(indices)?;
    if idx.len() != k {
        return invalid_arg!(
            "embedding backward: {} indices for {k} gradient rows",
            idx.len()
        );
    }
    // Counting sort of positions by index.
    let mut start = vec![0usize; w + 1];
    for &i in &idx {
        if i < 0 || i as usize >= w {
            return invalid_arg!("index {i} is out of bounds for dimension 0 with size {w}");
        }
        start[i as usize + 1] += 1;
    }
    for r in 0..w {
        start[r + 1] += start[r];
    }
    let mut fill = start.clone();
    let mut pos = vec![0usize; k];
    for (p, &i) in idx.iter().enumerate() {
        pos[fill[i as usize]] = p;
        fill[i as usize] += 1;
    }
    crate::dispatch!(float: grad.dtype, F => {
        let (pg, po) = (SendPtr::<F>::of(grad.ptr), SendPtr::<F>::of(grad_weight.ptr));
        let avg = (k / w.max(1)).max(1);
        parallel_for(w, (GRAIN / (d * avg).max(1)).max(1), &|r0, r1| {
            let mut acc = vec![<F as FloatStore>::M::zero(); d];
            for r in r0..r1 {
                acc.fill(<F as FloatStore>::M::zero());
                let ps = &pos[start[r]..start[r + 1]];
                if r as i64 != padding_idx {
                    for &p in ps {
                        // SAFETY: row p of the contiguous [K, D] grad, read only.
                        let g: &[F] = unsafe { pg.slice(p * d, d) };
                        for (a, &v) in acc.iter_mut().zip(g) {
                            *a += v.load();
                        }
                    }
                    if scale_grad_by_freq && ps.len() > 1 {
                        let s = <F as FloatStore>::M::one() / <F as FloatStore>::M::from_f64c(ps.len() as f64);
                        for a in acc.iter_mut() {
                            *a *= s;
                        }
                    }
                }
                // SAFETY: row r of grad_weight, written by this row only.
                let o: &mut [F] = unsafe { po.slice_mut(r * d, d) };
                for (o, &a) in o.iter_mut().zip(&acc) {
                    *o = F::store(a);
                }
            }
        });
        Ok(())
    }, _ => not_implemented!("embedding backward: no kernel for dtype {}", grad.dtype.name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    #[test]
    fn accumulates_scales_and_pads() {
        let g = Owned::new(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
        let idx = Owned::new(vec![1i64, 0, 1], &[3]);
        let mut gw = Owned::<f32>::zeros(&[3, 2]);
        embedding_dense_backward(&gw.m(), &g.r(), &idx.r(), -1, false).unwrap();
        assert_eq!(gw.data, vec![3.0, 4.0, 6.0, 8.0, 0.0, 0.0]);
        embedding_dense_backward(&gw.m(), &g.r(), &idx.r(), 0, true).unwrap();
        assert_eq!(gw.data, vec![0.0, 0.0, 3.0, 4.0, 0.0, 0.0]);
    }
}
