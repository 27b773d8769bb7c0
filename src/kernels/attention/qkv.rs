//! `_transform_bias_rescale_qkv`, the input split of nn.MultiheadAttention's inference fast
//! path: the packed projection `qkv [B, T, 3D]` plus `bias [3D]` becomes
//! `q_k_v [3, B, heads, T, D / heads]`, q scaled by `1 / sqrt(D / heads)`. One pass over `qkv`:
//! each element is `(x + bias) * s` (q) or `x + bias` (k, v) in the math type, rounded once to
//! the storage type, as the CPU's kernel computes it (composed of add, mul and copy kernels it
//! took three passes and rounded f16/bf16 twice).

use crate::error::FooResult;
use crate::kernels::core::float::{FloatStore, Math};
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::tensor::{is_contiguous, TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use num_traits::Float;

/// `q_k_v [3, B, heads, T, D / heads]` from `qkv [B, T, 3D]` and `bias [3D]` (all contiguous,
/// one float dtype).
pub fn transform_bias_rescale_qkv(
    q_k_v: &TensorMut,
    qkv: &TensorRef,
    bias: &TensorRef,
    heads: usize,
) -> FooResult<()> {
    let what = "_transform_bias_rescale_qkv";
    let &[b, t, d3] = qkv.shape.as_slice() else {
        return invalid_arg!("{what}: expected a 3-D qkv, got {:?}", qkv.shape);
    };
    if d3 % 3 != 0 || heads == 0 || (d3 / 3) % heads != 0 {
        return invalid_arg!("{what}: qkv's last dim {d3} is not 3 x heads ({heads}) x head dim");
    }
    let dh = d3 / 3 / heads;
    if bias.shape.as_slice() != [d3] || q_k_v.shape.as_slice() != [3, b, heads, t, dh] {
        return invalid_arg!(
            "{what}: bias {:?} and q_k_v {:?} must be [{d3}] and [3, {b}, {heads}, {t}, {dh}]",
            bias.shape,
            q_k_v.shape
        );
    }
    if qkv.dtype != bias.dtype || qkv.dtype != q_k_v.dtype {
        return invalid_arg!("{what}: qkv, bias and q_k_v must have one dtype");
    }
    for (name, shape, strides) in [
        ("qkv", &qkv.shape, &qkv.strides),
        ("bias", &bias.shape, &bias.strides),
        ("q_k_v", &q_k_v.shape, &q_k_v.strides),
    ] {
        if !is_contiguous(shape, strides) {
            return invalid_arg!("{what}: {name} must be contiguous");
        }
    }
    crate::dispatch!(float: qkv.dtype, F => {
        run::<F>(q_k_v, qkv, bias, [b, t, heads, dh]);
        Ok(())
    }, _ => not_implemented!("{what}: no kernel for dtype {}", qkv.dtype.name()))
}

struct Split<M> {
    x: SendPtr<u8>,
    bias: SendPtr<u8>,
    out: SendPtr<u8>,
    /// B, T, heads, head dim.
    dims: [usize; 4],
    scale: M,
}

fn run<F: FloatStore>(q_k_v: &TensorMut, qkv: &TensorRef, bias: &TensorRef, dims: [usize; 4]) {
    let [b, t, heads, dh] = dims;
    // The CPU's scale: the square root in the math type, its reciprocal in double.
    let root = F::M::from_f64c(dh as f64).sqrt();
    let scale = F::M::from_f64c(1.0 / root.to_f64c());
    let a = Split {
        x: SendPtr::of(qkv.ptr),
        bias: SendPtr::of(bias.ptr),
        out: SendPtr::of(q_k_v.ptr as *const u8),
        dims,
        scale,
    };
    // Over qkv's rows (sample, position), read in order; each row's 3 x heads runs of dh go to
    // their slots (writes spread over a few lines are cheaper than reads that jump rows: the
    // output's order read qkv 3D apart and ran at 1.4x the CPU's time).
    parallel_for(
        b * t,
        (GRAIN / (3 * heads * dh).max(1)).max(1),
        &|r0, r1| split_rows::<F>(&a, r0, r1),
    );
}

crate::multiversion!(fn split_rows<F: FloatStore>(a: &Split<F::M>, r0: usize, r1: usize) => split_body);

#[inline(always)]
fn split_body<F: FloatStore>(a: &Split<F::M>, r0: usize, r1: usize) {
    let [b, t, heads, dh] = a.dims;
    let d = heads * dh;
    let part = b * heads * t * dh;
    let (x, bias, out) = (a.x.cast::<F>(), a.bias.cast::<F>(), a.out.cast::<F>());
    for r in r0..r1 {
        let (n, p) = (r / t, r % t);
        for which in 0..3 {
            for h in 0..heads {
                let from = which * d + h * dh;
                // SAFETY: dh elements of qkv's row r and of the bias, read only, inside the
                // contiguous [B, T, 3D] and [3D] tensors `transform_bias_rescale_qkv` checked.
                let (xs, bs) = unsafe { (x.slice(r * 3 * d + from, dh), bias.slice(from, dh)) };
                // SAFETY: row (n, h, p) of part `which` of the contiguous q_k_v: written by
                // qkv's row r only.
                let os =
                    unsafe { out.slice_mut(which * part + ((n * heads + h) * t + p) * dh, dh) };
                if which == 0 {
                    for ((o, &x), &b) in os.iter_mut().zip(xs).zip(bs) {
                        *o = F::store((x.load() + b.load()) * a.scale);
                    }
                } else {
                    for ((o, &x), &b) in os.iter_mut().zip(xs).zip(bs) {
                        *o = F::store(x.load() + b.load());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    #[test]
    fn splits_heads_adds_the_bias_and_scales_q() {
        // B = 1, T = 2, heads = 2, head dim 4: D = 8, qkv [1, 2, 24].
        let x: Vec<f32> = (0..48).map(|i| i as f32).collect();
        let bias: Vec<f32> = (0..24).map(|i| 0.5 * i as f32).collect();
        let qkv = Owned::new(x.clone(), &[1, 2, 24]);
        let b = Owned::new(bias.clone(), &[24]);
        let mut out = Owned::<f32>::zeros(&[3, 1, 2, 2, 4]);
        transform_bias_rescale_qkv(&out.m(), &qkv.r(), &b.r(), 2).unwrap();
        for which in 0..3 {
            for h in 0..2 {
                for p in 0..2 {
                    for e in 0..4 {
                        let i = p * 24 + which * 8 + h * 4 + e;
                        let v = x[i] + bias[which * 8 + h * 4 + e];
                        let want = if which == 0 { v * 0.5 } else { v };
                        assert_eq!(out.data[((which * 2 + h) * 2 + p) * 4 + e], want);
                    }
                }
            }
        }
    }

    #[test]
    fn rejects_shapes_that_do_not_split() {
        let qkv = Owned::new(vec![0f32; 12], &[1, 1, 12]);
        let b = Owned::new(vec![0f32; 12], &[12]);
        // 3 heads do not divide D = 4.
        let mut out = Owned::<f32>::zeros(&[3, 1, 3, 1, 1]);
        assert!(transform_bias_rescale_qkv(&out.m(), &qkv.r(), &b.r(), 3).is_err());
        let mut out = Owned::<f32>::zeros(&[3, 1, 2, 1, 2]);
        assert!(transform_bias_rescale_qkv(&out.m(), &qkv.r(), &b.r(), 2).is_ok());
        assert!(transform_bias_rescale_qkv(&out.m(), &qkv.r(), &b.r(), 0).is_err());
    }
}
