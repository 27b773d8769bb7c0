//! Losses: nll_loss (1-D, 2-D and the spatial `[N, C, S]` form of nll_loss2d), mse_loss and
//! binary_cross_entropy, with their backward. Reductions: 0 none, 1 mean, 2 sum (ATen's enum).

use crate::error::{FooError, FooResult};
use crate::kernels::core::element::Element;
use crate::kernels::core::float::{FloatStore, Math};
use crate::kernels::core::io::{read_index, read_vec, require_contiguous};
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use num_traits::{One, Zero};
use std::sync::atomic::{AtomicBool, Ordering};

pub const REDUCTION_NONE: i64 = 0;
pub const REDUCTION_MEAN: i64 = 1;
pub const REDUCTION_SUM: i64 = 2;

fn nsc(shape: &[usize]) -> FooResult<(usize, usize, usize)> {
    match shape.len() {
        1 => Ok((1, shape[0], 1)),
        2 => Ok((shape[0], shape[1], 1)),
        3 => Ok((shape[0], shape[1], shape[2])),
        r => invalid_arg!("nll_loss: input of rank {r} (expected [C], [N, C] or [N, C, S])"),
    }
}

/// Levels of the CPU's cascade sum in nll_loss's reductions.
const CASCADE_LEVELS: usize = 8;

/// `ceil(log2(x))`, 1 for `x <= 2` (ATen's `utils::CeilLog2`).
fn ceil_log2(x: usize) -> u32 {
    if x <= 2 {
        1
    } else {
        usize::BITS - (x - 1).leading_zeros()
    }
}

fn class_of(t: i64, ignore: i64, c: usize) -> FooResult<Option<usize>> {
    if t == ignore {
        return Ok(None);
    }
    if t < 0 || t as usize >= c {
        return Err(FooError::InvalidArgument(format!(
            "Target {t} is out of bounds."
        )));
    }
    Ok(Some(t as usize))
}

/// nll_loss forward. `input` is `[C]`, `[N, C]` or `[N, C, S]` (contiguous), `target` has
/// `N * S` class indices (int64 or uint8), `weight` `[C]`. Writes `output` (`N * S` losses for
/// reduction none, else one value) and `total_weight` (one value, the sum of the weights of
/// the non-ignored targets).
pub fn nll_loss(
    output: &TensorMut,
    total_weight: &TensorMut,
    input: &TensorRef,
    target: &TensorRef,
    weight: Option<&TensorRef>,
    reduction: i64,
    ignore_index: i64,
) -> FooResult<()> {
    require_contiguous("nll_loss input", &input.shape, &input.strides)?;
    require_contiguous("nll_loss output", &output.shape, &output.strides)?;
    let (n, c, s) = nsc(&input.shape)?;
    let t = read_index(target)?;
    if t.len() != n * s {
        return invalid_arg!(
            "nll_loss: target has {} elements, expected {}",
            t.len(),
            n * s
        );
    }
    crate::dispatch!(float: input.dtype, F => {
        let w: Option<Vec<<F as FloatStore>::M>> = weight.map(read_vec).transpose()?;
        if w.as_ref().is_some_and(|w| w.len() != c) {
            return invalid_arg!("weight tensor should be defined either for all {c} classes or no classes");
        }
        let wt = |k: usize| w.as_ref().map_or(<F as FloatStore>::M::one(), |w| w[k]);
        // SAFETY: contiguous input of n * c * s elements.
        let x: &[F] = unsafe { SendPtr::<F>::of(input.ptr).slice(0, n * c * s) };
        let xv = |i: usize, k: usize| x[(i / s) * c * s + k * s + i % s].load();
        let tw_out: &mut [F] = {
            if total_weight.numel() != 1 {
                return invalid_arg!("nll_loss: total_weight must have one element");
            }
            // SAFETY: one element, written only here.
            unsafe { SendPtr::<F>::of(total_weight.ptr).slice_mut(0, 1) }
        };
        if reduction == REDUCTION_NONE {
            if output.numel() != n * s {
                return invalid_arg!("nll_loss: output has {} elements, expected {}", output.numel(), n * s);
            }
            // SAFETY: contiguous output of n * s elements, written only here.
            let o: &mut [F] = unsafe { SendPtr::<F>::of(output.ptr).slice_mut(0, n * s) };
            for (i, (o, &ti)) in o.iter_mut().zip(&t).enumerate() {
                *o = match class_of(ti, ignore_index, c)? {
                    None => F::store(<F as FloatStore>::M::zero()),
                    Some(k) => F::store(-(wt(k) * xv(i, k))),
                };
            }
            tw_out[0] = F::store(<F as FloatStore>::M::zero());
            return Ok(());
        }
        if output.numel() != 1 {
            return invalid_arg!("nll_loss: output must have one element for a reduction");
        }
        // The CPU's cascade sum (LossNLL.cpp, LossNLL2d.cpp), in the storage type: every
        // product, sum and the division round to it, as its scalar_t arithmetic does (bfloat16
        // sums differ by percents from a wide accumulation).
        let round = |v: <F as FloatStore>::M| F::store(v).load();
        let mut losses = [<F as FloatStore>::M::zero(); CASCADE_LEVELS];
        let mut weights = [<F as FloatStore>::M::zero(); CASCADE_LEVELS];
        let level_power = 4.max(ceil_log2(t.len()) / CASCADE_LEVELS as u32);
        let level_mask = (1usize << level_power) - 1;
        let mut ignored = 0usize;
        for (i, &ti) in t.iter().enumerate() {
            let Some(k) = class_of(ti, ignore_index, c)? else {
                ignored += 1;
                continue;
            };
            if w.is_some() {
                losses[0] = round(losses[0] - round(xv(i, k) * wt(k)));
                weights[0] = round(weights[0] + wt(k));
            } else {
                losses[0] = round(losses[0] - xv(i, k));
            }
            for j in 0..CASCADE_LEVELS - 1 {
                if i & (level_mask << (j as u32 * level_power)) != 0 {
                    break;
                }
                losses[j + 1] = round(losses[j + 1] + losses[j]);
                weights[j + 1] = round(weights[j + 1] + weights[j]);
                losses[j] = <F as FloatStore>::M::zero();
                weights[j] = <F as FloatStore>::M::zero();
            }
        }
        let tw = if w.is_some() {
            weights.iter().fold(<F as FloatStore>::M::zero(), |a, &b| round(a + b))
        } else {
            round(<F as FloatStore>::M::from_f64c((t.len() - ignored) as f64))
        };
        let mut total = losses.iter().fold(<F as FloatStore>::M::zero(), |a, &b| round(a + b));
        if reduction == REDUCTION_MEAN {
            total = round(total / tw);
        }
        // SAFETY: one element, written only here.
        let o: &mut [F] = unsafe { SendPtr::<F>::of(output.ptr).slice_mut(0, 1) };
        o[0] = F::store(total);
        tw_out[0] = F::store(tw);
        Ok(())
    }, _ => not_implemented!("nll_loss: no kernel for dtype {}", input.dtype.name()))
}

/// nll_loss backward: fills `grad_input` (shape of the forward input) with zeros and writes
/// `-weight[t] * grad` (divided by `total_weight` for mean) at each non-ignored target.
pub fn nll_loss_backward(
    grad_input: &TensorMut,
    grad_output: &TensorRef,
    target: &TensorRef,
    weight: Option<&TensorRef>,
    total_weight: &TensorRef,
    reduction: i64,
    ignore_index: i64,
) -> FooResult<()> {
    require_contiguous("grad_input", &grad_input.shape, &grad_input.strides)?;
    require_contiguous("grad_output", &grad_output.shape, &grad_output.strides)?;
    let (n, c, s) = nsc(&grad_input.shape)?;
    let t = read_index(target)?;
    if t.len() != n * s {
        return invalid_arg!(
            "nll_loss backward: target has {} elements, expected {}",
            t.len(),
            n * s
        );
    }
    crate::dispatch!(float: grad_input.dtype, F => {
        let w: Option<Vec<<F as FloatStore>::M>> = weight.map(read_vec).transpose()?;
        let wt = |k: usize| w.as_ref().map_or(<F as FloatStore>::M::one(), |w| w[k]);
        // SAFETY: contiguous grad_input of n * c * s elements, written only here.
        let gi: &mut [F] = unsafe { SendPtr::<F>::of(grad_input.ptr).slice_mut(0, n * c * s) };
        gi.fill(F::store(<F as FloatStore>::M::zero()));
        let go: Vec<<F as FloatStore>::M> = read_vec(grad_output)?;
        let scale = if reduction == REDUCTION_MEAN {
            let tw: Vec<<F as FloatStore>::M> = read_vec(total_weight)?;
            <F as FloatStore>::M::one() / *tw.first().ok_or_else(|| FooError::InvalidArgument("empty total_weight".into()))?
        } else {
            <F as FloatStore>::M::one()
        };
        let none = reduction == REDUCTION_NONE;
        if (none && go.len() != n * s) || (!none && go.len() != 1) {
            return invalid_arg!("nll_loss backward: grad_output has {} elements", go.len());
        }
        for (i, &ti) in t.iter().enumerate() {
            if let Some(k) = class_of(ti, ignore_index, c)? {
                let g = if none { go[i] } else { go[0] * scale };
                gi[(i / s) * c * s + k * s + i % s] = F::store(-(wt(k) * g));
            }
        }
        Ok(())
    }, _ => not_implemented!("nll_loss backward: no kernel for dtype {}", grad_input.dtype.name()))
}

/// Deterministic parallel sum of `f(i)` over `0..n` in f64 (fixed blocks, summed in order).
fn block_sum(n: usize, f: &(dyn Fn(usize, usize) -> f64 + Sync)) -> f64 {
    const BLOCK: usize = 1 << 14;
    let nb = n.div_ceil(BLOCK);
    let mut parts = vec![0.0f64; nb];
    let pp = SendPtr::new(parts.as_mut_ptr());
    parallel_for(nb, (GRAIN / BLOCK).max(1), &|s, e| {
        for b in s..e {
            // SAFETY: slot b of `parts`, written by this block only.
            unsafe { pp.cast::<f64>().slice_mut(b, 1)[0] = f(b * BLOCK, ((b + 1) * BLOCK).min(n)) };
        }
    });
    parts.iter().sum()
}

fn same_shapes(what: &str, ts: &[&[usize]]) -> FooResult<()> {
    if ts.windows(2).any(|w| w[0] != w[1]) {
        return invalid_arg!("{what}: operand shapes differ: {ts:?}");
    }
    Ok(())
}

/// `(a - b)^2` with the difference rounded to the storage type first, as the CPU's kernel
/// computes it in `scalar_t` (float16/bfloat16 included).
#[inline(always)]
fn squared_difference<F: FloatStore>(a: F, b: F) -> F {
    let d = F::store(a.load() - b.load()).load();
    F::store(d * d)
}

/// mse_loss: `(x - t)^2`, elementwise (reduction none, `out` shaped like x) or summed/averaged
/// into one value. Operands contiguous, same shape and dtype.
pub fn mse_loss(out: &TensorMut, x: &TensorRef, t: &TensorRef, reduction: i64) -> FooResult<()> {
    same_shapes("mse_loss", &[&x.shape, &t.shape])?;
    require_contiguous("mse_loss input", &x.shape, &x.strides)?;
    require_contiguous("mse_loss target", &t.shape, &t.strides)?;
    require_contiguous("mse_loss output", &out.shape, &out.strides)?;
    let n = x.numel();
    crate::dispatch!(float: x.dtype, F => {
        let (px, pt, po) = (SendPtr::<F>::of(x.ptr), SendPtr::<F>::of(t.ptr), SendPtr::<F>::of(out.ptr));
        if reduction == REDUCTION_NONE {
            parallel_for(n, GRAIN, &|s, e| {
                // SAFETY: elements s..e of the same-shaped contiguous operands.
                let (a, b, o): (&[F], &[F], &mut [F]) =
                    unsafe { (px.slice(s, e - s), pt.slice(s, e - s), po.slice_mut(s, e - s)) };
                for ((o, &a), &b) in o.iter_mut().zip(a).zip(b) {
                    *o = squared_difference(a, b);
                }
            });
            return Ok(());
        }
        let total = block_sum(n, &|s, e| {
            // SAFETY: elements s..e, read only.
            let (a, b): (&[F], &[F]) = unsafe { (px.slice(s, e - s), pt.slice(s, e - s)) };
            a.iter().zip(b).map(|(&a, &b)| squared_difference(a, b).to_f64()).sum()
        });
        let v = if reduction == REDUCTION_MEAN { total / n as f64 } else { total };
        // SAFETY: one element.
        unsafe { po.slice_mut(0, 1)[0] = F::from_f64(v) };
        Ok(())
    }, _ => not_implemented!("mse_loss: no kernel for dtype {}", x.dtype.name()))
}

/// mse_loss backward: `grad_input = norm * (x - t) * g` with norm 2 (2/numel for mean); `g` is
/// the (expanded, contiguous) grad_output.
pub fn mse_loss_backward(
    grad_input: &TensorMut,
    g: &TensorRef,
    x: &TensorRef,
    t: &TensorRef,
    reduction: i64,
) -> FooResult<()> {
    same_shapes(
        "mse_loss backward",
        &[&grad_input.shape, &g.shape, &x.shape, &t.shape],
    )?;
    for (w, s, st) in [
        ("grad_output", &g.shape, &g.strides),
        ("input", &x.shape, &x.strides),
        ("target", &t.shape, &t.strides),
        ("grad_input", &grad_input.shape, &grad_input.strides),
    ] {
        require_contiguous(w, s, st)?;
    }
    let n = x.numel();
    let norm = if reduction == REDUCTION_MEAN {
        2.0 / n as f64
    } else {
        2.0
    };
    crate::dispatch!(float: x.dtype, F => {
        let (pg, px, pt, po) = (SendPtr::<F>::of(g.ptr), SendPtr::<F>::of(x.ptr), SendPtr::<F>::of(t.ptr), SendPtr::<F>::of(grad_input.ptr));
        // In the storage type, each operation rounded (norm included), as the CPU's kernel.
        let r = |v: <F as FloatStore>::M| F::store(v).load();
        let nm = r(<F as FloatStore>::M::from_f64c(norm));
        parallel_for(n, GRAIN, &|s, e| {
            let l = e - s;
            // SAFETY: elements s..e of same-shaped contiguous operands.
            let (g, a, b, o): (&[F], &[F], &[F], &mut [F]) = unsafe {
                (pg.slice(s, l), px.slice(s, l), pt.slice(s, l), po.slice_mut(s, l))
            };
            for i in 0..l {
                o[i] = F::store(r(nm * r(a[i].load() - b[i].load())) * g[i].load());
            }
        });
        Ok(())
    }, _ => not_implemented!("mse_loss backward: no kernel for dtype {}", x.dtype.name()))
}

/// `std::max(a, b)` as C++ defines it (`a < b ? b : a`): a nan `a` is kept, where Rust's
/// `max` would drop it.
#[inline(always)]
fn cpp_max<M: Math>(a: M, b: M) -> M {
    if a < b {
        b
    } else {
        a
    }
}

/// binary_cross_entropy: `w * ((t - 1) * max(log1p(-x), -100) - t * max(log x, -100))`,
/// elementwise or reduced. Each operation is rounded to the storage type, as the CPU's kernel
/// does in `scalar_t` arithmetic (half types included), and the weight multiplies afterwards.
/// Fails if some x or t is outside [0, 1].
pub fn bce_loss(
    out: &TensorMut,
    x: &TensorRef,
    t: &TensorRef,
    w: Option<&TensorRef>,
    reduction: i64,
) -> FooResult<()> {
    same_shapes("binary_cross_entropy", &[&x.shape, &t.shape])?;
    require_contiguous("input", &x.shape, &x.strides)?;
    require_contiguous("target", &t.shape, &t.strides)?;
    require_contiguous("output", &out.shape, &out.strides)?;
    if let Some(w) = w {
        same_shapes("binary_cross_entropy weight", &[&x.shape, &w.shape])?;
        require_contiguous("weight", &w.shape, &w.strides)?;
    }
    let n = x.numel();
    crate::dispatch!(float: x.dtype, F => {
        let (px, pt, po) = (SendPtr::<F>::of(x.ptr), SendPtr::<F>::of(t.ptr), SendPtr::<F>::of(out.ptr));
        let pw = w.map(|t| SendPtr::<F>::of(t.ptr));
        let (bad_x, bad_t) = (AtomicBool::new(false), AtomicBool::new(false));
        let r = |v: <F as FloatStore>::M| F::store(v).load();
        let loss = |i: usize| -> F {
            // SAFETY: i < n, contiguous operands of n elements.
            let (a, b) = unsafe { (px.slice(i, 1)[0].load(), pt.slice(i, 1)[0].load()) };
            let (zero, one) = (<F as FloatStore>::M::zero(), <F as FloatStore>::M::one());
            if !(a >= zero && a <= one) {
                bad_x.store(true, Ordering::Relaxed);
            } else if !(b >= zero && b <= one) {
                bad_t.store(true, Ordering::Relaxed);
            }
            let floor = <F as FloatStore>::M::from_f64c(-100.0);
            let l = r(r(r(b - one) * cpp_max(r((-a).ln_1p()), floor)) - r(b * cpp_max(r(a.ln()), floor)));
            // SAFETY: as above.
            let l = pw.map_or(l, |p| r(l * unsafe { p.slice(i, 1)[0].load() }));
            F::store(l)
        };
        if reduction == REDUCTION_NONE {
            parallel_for(n, GRAIN, &|s, e| {
                for i in s..e {
                    // SAFETY: element i of the contiguous output, written once.
                    unsafe { po.slice_mut(i, 1)[0] = loss(i) };
                }
            });
        } else {
            let total = block_sum(n, &|s, e| (s..e).map(|i| loss(i).to_f64()).sum());
            let v = if reduction == REDUCTION_MEAN { total / n as f64 } else { total };
            // SAFETY: one element.
            unsafe { po.slice_mut(0, 1)[0] = F::from_f64(v) };
        }
        // RuntimeErrors, as the CPU's TORCH_CHECKs.
        if bad_x.into_inner() {
            return Err(FooError::Runtime("all elements of input should be between 0 and 1".into()));
        }
        if bad_t.into_inner() {
            return Err(FooError::Runtime("all elements of target should be between 0 and 1".into()));
        }
        Ok(())
    }, _ => not_implemented!("binary_cross_entropy: no kernel for dtype {}", x.dtype.name()))
}

/// binary_cross_entropy backward: `g * (x - t) / max((1 - x) * x, 1e-12)`, then `* w`, then
/// `/ numel` for mean, each operation rounded to the storage type as in the CPU's kernel (in
/// half, 1e-12 rounds to 0).
pub fn bce_loss_backward(
    grad_input: &TensorMut,
    g: &TensorRef,
    x: &TensorRef,
    t: &TensorRef,
    w: Option<&TensorRef>,
    reduction: i64,
) -> FooResult<()> {
    same_shapes(
        "binary_cross_entropy backward",
        &[&grad_input.shape, &g.shape, &x.shape, &t.shape],
    )?;
    for (what, s, st) in [
        ("grad_output", &g.shape, &g.strides),
        ("input", &x.shape, &x.strides),
        ("target", &t.shape, &t.strides),
        ("grad_input", &grad_input.shape, &grad_input.strides),
    ] {
        require_contiguous(what, s, st)?;
    }
    if let Some(w) = w {
        same_shapes("binary_cross_entropy weight", &[&x.shape, &w.shape])?;
        require_contiguous("weight", &w.shape, &w.strides)?;
    }
    let n = x.numel();
    crate::dispatch!(float: x.dtype, F => {
        let (pg, px, pt, po) = (SendPtr::<F>::of(g.ptr), SendPtr::<F>::of(x.ptr), SendPtr::<F>::of(t.ptr), SendPtr::<F>::of(grad_input.ptr));
        let pw = w.map(|t| SendPtr::<F>::of(t.ptr));
        let r = |v: <F as FloatStore>::M| F::store(v).load();
        // ATen's EPSILON is a float constant: its double value is 1e-12 rounded to float32.
        let eps = r(<F as FloatStore>::M::from_f64c(1e-12f32 as f64));
        let numel = <F as FloatStore>::M::from_f64c(n as f64);
        parallel_for(n, GRAIN, &|s, e| {
            let l = e - s;
            // SAFETY: elements s..e of same-shaped contiguous operands.
            let (g, a, b, o): (&[F], &[F], &[F], &mut [F]) = unsafe {
                (pg.slice(s, l), px.slice(s, l), pt.slice(s, l), po.slice_mut(s, l))
            };
            // SAFETY: as above.
            let wv: Option<&[F]> = pw.map(|p| unsafe { p.slice(s, l) });
            let one = <F as FloatStore>::M::one();
            for i in 0..l {
                let (x, t) = (a[i].load(), b[i].load());
                let mut v = r(r(g[i].load() * r(x - t)) / cpp_max(r(r(one - x) * x), eps));
                if let Some(w) = wv {
                    v = r(v * w[i].load());
                }
                if reduction == REDUCTION_MEAN {
                    v = r(v / numel);
                }
                o[i] = F::store(v);
            }
        });
        Ok(())
    }, _ => not_implemented!("binary_cross_entropy backward: no kernel for dtype {}", x.dtype.name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    #[test]
    fn nll_mean_weighted_and_ignored() {
        let x = Owned::new(vec![-1.0f32, -2.0, -3.0, -4.0, -5.0, -6.0], &[2, 3]);
        let t = Owned::new(vec![2i64, -100], &[2]);
        let w = Owned::new(vec![1.0f32, 2.0, 3.0], &[3]);
        let mut o = Owned::<f32>::zeros(&[]);
        let mut tw = Owned::<f32>::zeros(&[]);
        nll_loss(
            &o.m(),
            &tw.m(),
            &x.r(),
            &t.r(),
            Some(&w.r()),
            REDUCTION_MEAN,
            -100,
        )
        .unwrap();
        assert_eq!((o.data[0], tw.data[0]), (3.0, 3.0));
        let all_ignored = Owned::new(vec![-100i64, -100], &[2]);
        nll_loss(
            &o.m(),
            &tw.m(),
            &x.r(),
            &all_ignored.r(),
            None,
            REDUCTION_MEAN,
            -100,
        )
        .unwrap();
        assert!(o.data[0].is_nan());
        let bad = Owned::new(vec![3i64, 0], &[2]);
        assert!(nll_loss(&o.m(), &tw.m(), &x.r(), &bad.r(), None, REDUCTION_SUM, -100).is_err());
        let mut gi = Owned::<f32>::zeros(&[2, 3]);
        let g = Owned::new(vec![1.0f32], &[]);
        let tw = Owned::new(vec![3.0f32], &[]);
        nll_loss_backward(
            &gi.m(),
            &g.r(),
            &t.r(),
            Some(&w.r()),
            &tw.r(),
            REDUCTION_MEAN,
            -100,
        )
        .unwrap();
        assert_eq!(gi.data, vec![0.0, 0.0, -1.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn mse_and_bce() {
        let x = Owned::new(vec![0.25f64, 0.5, 0.75], &[3]);
        let t = Owned::new(vec![0.0f64, 1.0, 1.0], &[3]);
        let mut o = Owned::<f64>::zeros(&[]);
        mse_loss(&o.m(), &x.r(), &t.r(), REDUCTION_SUM).unwrap();
        assert!((o.data[0] - (0.0625 + 0.25 + 0.0625)).abs() < 1e-12);
        bce_loss(&o.m(), &x.r(), &t.r(), None, REDUCTION_MEAN).unwrap();
        let want = -((0.75f64).ln() + 0.5f64.ln() + 0.75f64.ln()) / 3.0;
        assert!((o.data[0] - want).abs() < 1e-12);
    }
}
