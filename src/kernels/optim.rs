//! Fused optimizer steps: `torch.optim.Adam/AdamW/SGD/Adagrad(..., fused=True)` on foo
//! (`_fused_adam_`, `_fused_adamw_`, `_fused_sgd_`, `_fused_adagrad_`), with the arithmetic of
//! ATen's CPU kernels (aten/src/ATen/native/cpu/Fused{Adam,SGD,Adagrad}Kernel.cpp): coefficients
//! in double, the update in the opmath type (float32 for float16/bfloat16, which round once on
//! the way back), the same operation order. The foreach path makes ~10 passes over every state
//! tensor per step (lerp, mul, addcmul, sqrt, div, add, addcdiv...); this makes one.
//!
//! Dense: every tensor of a parameter is contiguous with the same element count and dtype (the
//! glue makes contiguous copies otherwise). Each parameter's checked operands become an
//! [`Update`], and [`run_updates`] runs a whole list of them in one parallel pass.

use super::core::element::Element;
use super::core::float::{FloatStore, Math};
use super::core::io::read_scalar;
use super::core::layout::GRAIN;
use super::core::parallel::{parallel_segments, SendPtr};
use crate::error::FooResult;
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use num_traits::{Float, One};

/// Adam's and AdamW's hyper-parameters (`_fused_adam(w)_`'s keyword arguments).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AdamArgs {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub weight_decay: f64,
    pub eps: f64,
    pub amsgrad: bool,
    pub maximize: bool,
    /// AdamW: the weight decay scales the parameter instead of adding to the gradient.
    pub decoupled: bool,
}

/// SGD's hyper-parameters (`_fused_sgd_`'s keyword arguments).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SgdArgs {
    pub lr: f64,
    pub weight_decay: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub nesterov: bool,
    pub maximize: bool,
    pub is_first_step: bool,
}

/// Adagrad's hyper-parameters (`_fused_adagrad_`'s keyword arguments).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AdagradArgs {
    pub lr: f64,
    pub lr_decay: f64,
    pub weight_decay: f64,
    pub eps: f64,
    pub maximize: bool,
}

/// A state step as ATen reads it (`state_step.item<float>()`): any dtype, through float32.
pub fn read_step(step: &TensorRef) -> FooResult<f64> {
    Ok(f64::from_scalar(&read_scalar(step)?) as f32 as f64)
}

/// The address of `t`, a dense tensor like `like` (each parallel chunk then takes its own range
/// of elements).
fn check_dense(name: &str, like: &TensorMut, t: &TensorMut) -> FooResult<SendPtr<u8>> {
    if t.dtype != like.dtype || t.numel() != like.numel() || !t.is_contiguous() {
        return invalid_arg!(
            "fused optimizer: {name} must be a contiguous {} tensor of {} elements like its parameter",
            like.dtype.name(),
            like.numel()
        );
    }
    Ok(SendPtr::of(t.ptr))
}

fn unsupported<T>(p: &TensorMut) -> FooResult<T> {
    not_implemented!(
        "fused optimizers on foo take floating-point parameters, got {}",
        p.dtype.name()
    )
}

/// One parameter's share of a fused step: its element count and the update of a range of its
/// elements.
pub struct Update {
    n: usize,
    run: Box<dyn Fn(usize, usize) + Sync>,
}

/// Runs the updates of every parameter in one parallel pass over all their elements (the
/// tensors they were built from must still be live and not otherwise in use): on
/// ResNet-18's 62 parameters (40 of them a few hundred elements) a pass each cost 62 calls and
/// 22 fork-joins, each ending on its slowest chunk.
pub fn run_updates(updates: &[Update]) {
    let lens: Vec<usize> = updates.iter().map(|u| u.n).collect();
    parallel_segments(&lens, GRAIN / 4, &|i, s, e| (updates[i].run)(s, e));
}

/// One Adam/AdamW step of one parameter. `grad_scale` (AMP): the gradient is divided by it and
/// the unscaled gradient written back, as ATen does.
#[allow(clippy::too_many_arguments)]
pub fn adam(
    param: &TensorMut,
    grad: &TensorMut,
    exp_avg: &TensorMut,
    exp_avg_sq: &TensorMut,
    max_exp_avg_sq: Option<&TensorMut>,
    step: f64,
    args: &AdamArgs,
    grad_scale: Option<f32>,
) -> FooResult<Update> {
    let p = check_dense("param", param, param)?;
    let g = check_dense("grad", param, grad)?;
    let m = check_dense("exp_avg", param, exp_avg)?;
    let v = check_dense("exp_avg_sq", param, exp_avg_sq)?;
    let vmax = match (args.amsgrad, max_exp_avg_sq) {
        (true, Some(t)) => Some(check_dense("max_exp_avg_sq", param, t)?),
        (true, None) => return invalid_arg!("fused Adam with amsgrad needs max_exp_avg_sq"),
        (false, _) => None,
    };
    let n = param.numel();
    let flags = AdamFlags {
        l2: !args.decoupled && args.weight_decay != 0.0,
        ams: vmax.is_some(),
        scale: grad_scale.is_some(),
    };
    // Without amsgrad the loop never touches `vmax`; any address will do.
    let vmax = vmax.unwrap_or(p);
    crate::dispatch!(float: param.dtype, F => {
        let k = AdamCoefficients::<<F as FloatStore>::M>::new(step, args, grad_scale);
        Ok(Update { n, run: Box::new(move |s, e| {
            // SAFETY: `s..e` is this chunk's range of elements of dense tensors of `n` elements
            // (checked above); chunks are disjoint and the tensors do not overlap each other
            // (`vmax` is touched only under amsgrad, when it is a tensor of its own).
            let (p, g, m, v, vmax) = unsafe {
                (
                    p.cast::<F>().slice_mut(s, e - s),
                    g.cast::<F>().slice_mut(s, e - s),
                    m.cast::<F>().slice_mut(s, e - s),
                    v.cast::<F>().slice_mut(s, e - s),
                    if flags.ams { vmax.cast::<F>().slice_mut(s, e - s) } else { &mut [] },
                )
            };
            adam_dense::<F>(p, g, m, v, vmax, &k, flags);
        }) })
    }, _ => unsupported(param))
}

/// Calls `$f::<$T, b1, b2, ...>(args)` with each run-time bool as a const generic argument, so
/// that every combination of an optimizer's options gets its own branch-free loop.
macro_rules! with_const_bools {
    ($f:ident::<$T:ty $(, $done:literal)*>($($a:expr),*); ) => {
        $f::<$T $(, $done)*>($($a),*)
    };
    ($f:ident::<$T:ty $(, $done:literal)*>($($a:expr),*); $b:expr $(, $rest:expr)*) => {
        if $b {
            with_const_bools!($f::<$T $(, $done)*, true>($($a),*); $($rest),*)
        } else {
            with_const_bools!($f::<$T $(, $done)*, false>($($a),*); $($rest),*)
        }
    };
}

/// Which of Adam's options are on: `l2`, weight decay added to the gradient (Adam, not AdamW);
/// `ams`, amsgrad; `scale`, AMP's gradient scale (the gradient is unscaled and written back).
#[derive(Clone, Copy)]
struct AdamFlags {
    l2: bool,
    ams: bool,
    scale: bool,
}

/// Adam's per-step constants in the math type (ATen computes them in double, then narrows).
#[derive(Clone, Copy)]
struct AdamCoefficients<M> {
    neg_step_size: M,
    bc2_sqrt: M,
    /// lerp's weight, 1 - beta1, and whether it is below 0.5 (lerp's two stable forms).
    w: M,
    small_weight: bool,
    beta2: M,
    w2: M,
    eps: M,
    wd: M,
    /// 1 - lr * weight_decay (AdamW; exactly 1 for Adam or no decay, so multiplying is a no-op).
    decay: M,
    /// -1 to maximize, else 1 (multiplying by +-1 is exact, as ATen's `grad * -1`).
    sign: M,
    scale: M,
}

impl<M: Math> AdamCoefficients<M> {
    fn new(step: f64, a: &AdamArgs, grad_scale: Option<f32>) -> Self {
        let c = M::from_f64c;
        let bias_correction1 = 1.0 - a.beta1.powf(step);
        let bias_correction2 = 1.0 - a.beta2.powf(step);
        let w = c(1.0 - a.beta1);
        AdamCoefficients {
            neg_step_size: c(-(a.lr / bias_correction1)),
            bc2_sqrt: c(bias_correction2.sqrt()),
            w,
            small_weight: w.abs() < c(0.5),
            beta2: c(a.beta2),
            w2: c(1.0 - a.beta2),
            eps: c(a.eps),
            wd: c(a.weight_decay),
            decay: if a.decoupled && a.weight_decay != 0.0 {
                c(1.0 - a.lr * a.weight_decay)
            } else {
                M::one()
            },
            sign: if a.maximize { -M::one() } else { M::one() },
            scale: c(grad_scale.unwrap_or(1.0) as f64),
        }
    }
}

/// The gradient as the CPU's fused kernels prepare it, for every optimizer: divided by AMP's
/// scale and written back (`SCALE`), negated to maximize (`sign`), plus L2 weight decay `wd * p`
/// (`L2`).
#[inline(always)]
fn prepared_grad<F: FloatStore, const SCALE: bool, const L2: bool>(
    g: &mut F,
    p: F::M,
    scale: F::M,
    sign: F::M,
    wd: F::M,
) -> F::M {
    let mut gi = g.load();
    if SCALE {
        gi = gi / scale;
        *g = F::store(gi);
    }
    gi = gi * sign;
    if L2 {
        gi + p * wd
    } else {
        gi
    }
}

crate::multiversion!(fn adam_dense<F: FloatStore>(p: &mut [F], g: &mut [F], m: &mut [F], v: &mut [F], vmax: &mut [F], k: &AdamCoefficients<F::M>, flags: AdamFlags) => adam_dense_body);

#[inline(always)]
fn adam_dense_body<F: FloatStore>(
    p: &mut [F],
    g: &mut [F],
    m: &mut [F],
    v: &mut [F],
    vmax: &mut [F],
    k: &AdamCoefficients<F::M>,
    f: AdamFlags,
) {
    with_const_bools!(adam_loop::<F>(p, g, m, v, vmax, *k); f.l2, f.ams, f.scale, k.small_weight)
}

/// One Adam step over dense slices. The options are constants so that the loop has no branches
/// and vectorizes; `k` is taken by value so that its fields stay in registers. `SMALL`: lerp's
/// weight 1 - beta1 is below 0.5 (lerp's two numerically stable forms, as ATen picks them).
#[inline(always)]
fn adam_loop<
    F: FloatStore,
    const L2: bool,
    const AMS: bool,
    const SCALE: bool,
    const SMALL: bool,
>(
    p: &mut [F],
    g: &mut [F],
    m: &mut [F],
    v: &mut [F],
    vmax: &mut [F],
    k: AdamCoefficients<F::M>,
) {
    let one = F::M::one();
    let len = p.len();
    let (g, m, v) = (&mut g[..len], &mut m[..len], &mut v[..len]);
    let vmax = if AMS { &mut vmax[..len] } else { vmax };
    for i in 0..len {
        let mut pi = p[i].load();
        let gi = prepared_grad::<F, SCALE, L2>(&mut g[i], pi, k.scale, k.sign, k.wd);
        pi = pi * k.decay;
        // exp_avg.lerp_(grad, 1 - beta1).
        let mi = m[i].load();
        let mi = if SMALL {
            mi + k.w * (gi - mi)
        } else {
            gi - (gi - mi) * (one - k.w)
        };
        let vi = v[i].load() * k.beta2 + k.w2 * gi * gi;
        m[i] = F::store(mi);
        v[i] = F::store(vi);
        let top = if AMS {
            let t = vmax[i].load().max(vi);
            vmax[i] = F::store(t);
            t
        } else {
            vi
        };
        let denom = top.sqrt() / k.bc2_sqrt + k.eps;
        p[i] = F::store(pi + k.neg_step_size * mi / denom);
    }
}

/// One SGD step of one parameter (`momentum_buffer` is read only when `momentum != 0`).
pub fn sgd(
    param: &TensorMut,
    grad: &TensorMut,
    momentum_buffer: Option<&TensorMut>,
    args: &SgdArgs,
    grad_scale: Option<f32>,
) -> FooResult<Update> {
    let p = check_dense("param", param, param)?;
    let g = check_dense("grad", param, grad)?;
    let buf = match (args.momentum != 0.0, momentum_buffer) {
        (true, Some(t)) => Some(check_dense("momentum_buffer", param, t)?),
        (true, None) => return invalid_arg!("fused SGD with momentum needs momentum_buffer_list"),
        (false, _) => None,
    };
    let n = param.numel();
    let l2 = args.weight_decay != 0.0;
    crate::dispatch!(float: param.dtype, F => {
        let c = <<F as FloatStore>::M as Math>::from_f64c;
        let k = SgdCoefficients {
            wd: c(args.weight_decay),
            momentum: c(args.momentum),
            keep: c(1.0 - args.dampening),
            lr: c(args.lr),
            sign: c(if args.maximize { -1.0 } else { 1.0 }),
            scale: c(grad_scale.unwrap_or(1.0) as f64),
            nesterov: args.nesterov,
            first: args.is_first_step,
            momentum_on: buf.is_some(),
        };
        let scale = grad_scale.is_some();
        let buf = buf.unwrap_or(p);
        Ok(Update { n, run: Box::new(move |s, e| {
            // SAFETY: disjoint ranges of dense, non-overlapping tensors of `n` elements (checked
            // above); `buf` is touched only with momentum, when it is a tensor of its own.
            let (p, g, buf) = unsafe {
                (
                    p.cast::<F>().slice_mut(s, e - s),
                    g.cast::<F>().slice_mut(s, e - s),
                    if k.momentum_on { buf.cast::<F>().slice_mut(s, e - s) } else { &mut [] },
                )
            };
            sgd_dense::<F>(p, g, buf, &k, l2, scale);
        }) })
    }, _ => unsupported(param))
}

#[derive(Clone, Copy)]
struct SgdCoefficients<M> {
    wd: M,
    momentum: M,
    /// 1 - dampening.
    keep: M,
    lr: M,
    sign: M,
    scale: M,
    nesterov: bool,
    first: bool,
    /// `momentum != 0`: the momentum buffer is read and written.
    momentum_on: bool,
}

crate::multiversion!(fn sgd_dense<F: FloatStore>(p: &mut [F], g: &mut [F], buf: &mut [F], k: &SgdCoefficients<F::M>, l2: bool, scale: bool) => sgd_dense_body);

#[inline(always)]
fn sgd_dense_body<F: FloatStore>(
    p: &mut [F],
    g: &mut [F],
    buf: &mut [F],
    k: &SgdCoefficients<F::M>,
    l2: bool,
    scale: bool,
) {
    with_const_bools!(sgd_loop::<F>(p, g, buf, *k); l2, k.momentum_on, scale, k.first, k.nesterov)
}

/// One SGD step over dense slices (see [`adam_loop`]). `L2`: weight decay; `BUF`: momentum;
/// `SCALE`: AMP's unscale; `FIRST`: the buffer starts as the gradient; `NESTEROV`.
#[inline(always)]
fn sgd_loop<
    F: FloatStore,
    const L2: bool,
    const BUF: bool,
    const SCALE: bool,
    const FIRST: bool,
    const NESTEROV: bool,
>(
    p: &mut [F],
    g: &mut [F],
    buf: &mut [F],
    k: SgdCoefficients<F::M>,
) {
    let len = p.len();
    let g = &mut g[..len];
    let buf = if BUF { &mut buf[..len] } else { buf };
    for i in 0..len {
        let pi = p[i].load();
        let mut gi = prepared_grad::<F, SCALE, L2>(&mut g[i], pi, k.scale, k.sign, k.wd);
        if BUF {
            let bi = if FIRST {
                gi
            } else {
                buf[i].load() * k.momentum + gi * k.keep
            };
            buf[i] = F::store(bi);
            gi = if NESTEROV { gi + bi * k.momentum } else { bi };
        }
        p[i] = F::store(pi - gi * k.lr);
    }
}

/// One Adagrad step of one parameter.
pub fn adagrad(
    param: &TensorMut,
    grad: &TensorMut,
    state_sum: &TensorMut,
    step: f64,
    args: &AdagradArgs,
    grad_scale: Option<f32>,
) -> FooResult<Update> {
    let p = check_dense("param", param, param)?;
    let g = check_dense("grad", param, grad)?;
    let sum = check_dense("state_sum", param, state_sum)?;
    let n = param.numel();
    let l2 = args.weight_decay != 0.0;
    crate::dispatch!(float: param.dtype, F => {
        let c = <<F as FloatStore>::M as Math>::from_f64c;
        let k = AdagradCoefficients {
            neg_clr: c(-(args.lr / (1.0 + (step - 1.0) * args.lr_decay))),
            wd: c(args.weight_decay),
            eps: c(args.eps),
            sign: c(if args.maximize { -1.0 } else { 1.0 }),
            scale: c(grad_scale.unwrap_or(1.0) as f64),
        };
        let scale = grad_scale.is_some();
        Ok(Update { n, run: Box::new(move |s, e| {
            // SAFETY: disjoint ranges of dense, non-overlapping tensors of `n` elements (checked
            // above).
            let (p, g, sum) =
                unsafe { (p.cast::<F>().slice_mut(s, e - s), g.cast::<F>().slice_mut(s, e - s), sum.cast::<F>().slice_mut(s, e - s)) };
            adagrad_dense::<F>(p, g, sum, &k, l2, scale);
        }) })
    }, _ => unsupported(param))
}

#[derive(Clone, Copy)]
struct AdagradCoefficients<M> {
    /// -lr / (1 + (step - 1) * lr_decay).
    neg_clr: M,
    wd: M,
    eps: M,
    sign: M,
    scale: M,
}

crate::multiversion!(fn adagrad_dense<F: FloatStore>(p: &mut [F], g: &mut [F], sum: &mut [F], k: &AdagradCoefficients<F::M>, l2: bool, scale: bool) => adagrad_dense_body);

#[inline(always)]
fn adagrad_dense_body<F: FloatStore>(
    p: &mut [F],
    g: &mut [F],
    sum: &mut [F],
    k: &AdagradCoefficients<F::M>,
    l2: bool,
    scale: bool,
) {
    with_const_bools!(adagrad_loop::<F>(p, g, sum, *k); l2, scale)
}

/// One Adagrad step over dense slices (see [`adam_loop`]).
#[inline(always)]
fn adagrad_loop<F: FloatStore, const L2: bool, const SCALE: bool>(
    p: &mut [F],
    g: &mut [F],
    sum: &mut [F],
    k: AdagradCoefficients<F::M>,
) {
    let len = p.len();
    let (g, sum) = (&mut g[..len], &mut sum[..len]);
    for i in 0..len {
        let pi = p[i].load();
        let gi = prepared_grad::<F, SCALE, L2>(&mut g[i], pi, k.scale, k.sign, k.wd);
        let si = sum[i].load() + gi * gi;
        sum[i] = F::store(si);
        let std = si.sqrt() + k.eps;
        p[i] = F::store(pi + k.neg_clr * gi / std);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::tensor::contiguous_strides;

    fn view(data: &mut [f32]) -> TensorMut {
        let shape: crate::tensor::Dims = [data.len()].into_iter().collect();
        TensorMut {
            ptr: data.as_mut_ptr() as *mut u8,
            strides: contiguous_strides(&shape),
            shape,
            dtype: DType::F32,
        }
    }

    /// Adam written out in f64 from the paper's update (L2 weight decay, no amsgrad).
    #[test]
    fn adam_matches_the_textbook_update() {
        let n = 70_000; // above the parallel grain
        let mut p: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut g: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
        let mut m: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 0.01).collect();
        let mut v: Vec<f32> = (0..n).map(|i| 0.01 + (i % 5) as f32 * 0.02).collect();
        let (p0, g0, m0, v0) = (p.clone(), g.clone(), m.clone(), v.clone());
        let a = AdamArgs {
            lr: 1e-2,
            beta1: 0.9,
            beta2: 0.999,
            weight_decay: 0.1,
            eps: 1e-8,
            amsgrad: false,
            maximize: false,
            decoupled: false,
        };
        let step = 3.0;
        run_updates(&[adam(
            &view(&mut p),
            &view(&mut g),
            &view(&mut m),
            &view(&mut v),
            None,
            step,
            &a,
            None,
        )
        .unwrap()]);
        for i in 0..n {
            let gi = g0[i] as f64 + a.weight_decay * p0[i] as f64;
            let mi = 0.9 * m0[i] as f64 + 0.1 * gi;
            let vi = 0.999 * v0[i] as f64 + 0.001 * gi * gi;
            let mhat = mi / (1.0 - 0.9f64.powf(step));
            let vhat = vi / (1.0 - 0.999f64.powf(step));
            let want = p0[i] as f64 - a.lr * mhat / (vhat.sqrt() + a.eps);
            assert!((p[i] as f64 - want).abs() < 1e-5, "{i}: {} vs {want}", p[i]);
            assert!((m[i] as f64 - mi).abs() < 1e-6);
            assert_eq!(g[i], g0[i], "the gradient is written only when unscaled");
        }
    }

    #[test]
    fn sgd_momentum_and_grad_scale() {
        let mut p = vec![1.0f32, 2.0, -3.0];
        let mut g = vec![2.0f32, 4.0, 8.0];
        let mut b = vec![0.5f32, 0.5, 0.5];
        let a = SgdArgs {
            lr: 0.1,
            weight_decay: 0.0,
            momentum: 0.9,
            dampening: 0.0,
            nesterov: false,
            maximize: false,
            is_first_step: false,
        };
        run_updates(&[sgd(
            &view(&mut p),
            &view(&mut g),
            Some(&view(&mut b)),
            &a,
            Some(2.0),
        )
        .unwrap()]);
        assert_eq!(g, [1.0, 2.0, 4.0]); // unscaled in place
        assert_eq!(b, [0.45 + 1.0, 0.45 + 2.0, 0.45 + 4.0]);
        let want = [1.0 - 0.1 * 1.45f32, 2.0 - 0.1 * 2.45, -3.0 - 0.1 * 4.45];
        for (x, w) in p.iter().zip(want) {
            assert!((x - w).abs() < 1e-6);
        }
    }

    #[test]
    fn mismatched_or_integer_tensors_are_errors() {
        let mut p = vec![0.0f32; 4];
        let mut g = vec![0.0f32; 3];
        let mut s = vec![0.0f32; 4];
        let a = AdagradArgs {
            lr: 0.1,
            lr_decay: 0.0,
            weight_decay: 0.0,
            eps: 1e-10,
            maximize: false,
        };
        assert!(adagrad(&view(&mut p), &view(&mut g), &view(&mut s), 1.0, &a, None).is_err());
        let mut ints = [0i32; 4];
        let mut t = view(&mut p);
        t.ptr = ints.as_mut_ptr() as *mut u8;
        t.dtype = DType::I32;
        assert!(adagrad(&t, &t, &t, 1.0, &a, None).is_err());
    }
}
