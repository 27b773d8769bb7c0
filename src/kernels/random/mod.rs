//! Random kernels on the counter-based Philox4x32-10 generator.
//!
//! Element `i` of a random op reads the 32-bit words `offset + i*W .. offset + i*W + W` of the
//! stream of (seed, offset) — `W` words per element (1, 2 or 4) — so a value depends only on
//! the seed, the generator offset at the start of the op and `i`: the same with 1 thread or 16.
//! The output must be dense (the glue stages non-contiguous outputs).

use super::core::element::Element;
use crate::error::{FooError, FooResult};
use crate::runtime::rng::reserve;
use crate::tensor::{Scalar, TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};

mod batch;

use batch::{generate, generate_batches, NormalBatch, UniformBatch, BATCH};

/// `foo_random`'s op codes (distributions); `p0`, `p1` are its scalar `params`.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
pub enum RandomOp {
    /// p0: from, p1: to
    Uniform = 0,
    /// p0: mean, p1: std
    Normal = 1,
    /// p0: probability of 1
    Bernoulli = 2,
    /// p0: from (int), p1: range (u64 as int; 0 means 2^64)
    RandomRange = 3,
    /// p0: lambda
    Exponential = 4,
    /// p0: p
    Geometric = 5,
    /// p0: mean, p1: std of the underlying normal
    LogNormal = 6,
    /// p0: median, p1: sigma
    Cauchy = 7,
}

const TWO_PI: f64 = std::f64::consts::TAU;

/// A uniform double in [0, 1) from 53 random bits.
#[inline(always)]
fn unit_f64(w0: u32, w1: u32) -> f64 {
    let bits = ((w0 as u64) << 21) ^ (w1 as u64 >> 11);
    (bits & ((1u64 << 53) - 1)) as f64 * (1.0 / (1u64 << 53) as f64)
}

fn param(p: &[Scalar], i: usize, default: f64) -> f64 {
    p.get(i).map(f64::from_scalar).unwrap_or(default)
}

/// Fills the dense tensor `out` from generator `gen` with values of distribution `op`.
pub fn random(op: RandomOp, out: &TensorMut, gen: u64, p: &[Scalar]) -> FooResult<()> {
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    if !out.is_contiguous() {
        return invalid_arg!("random kernels write dense outputs (the glue stages strided ones)");
    }
    let float = matches!(out.dtype.kind(), crate::dtype::Kind::Float);
    let double = out.dtype == crate::DType::F64;
    match op {
        RandomOp::RandomRange => {
            let from = p.first().map(i64::from_scalar).unwrap_or(0);
            let range = p.get(1).map(|s| s.i as u64).unwrap_or(0);
            let (seed, offset) = reserve(gen, 2 * n as u64)?;
            crate::dispatch!(all: out.dtype, T => generate::<T, 2>(out, seed, offset, |w| {
                let r = ((w[0] as u64) << 32) | w[1] as u64;
                let v = if range == 0 { r } else { r % range };
                T::from_i64(from.wrapping_add(v as i64))
            }));
            Ok(())
        }
        RandomOp::Bernoulli => {
            let prob = param(p, 0, 0.5);
            if !(0.0..=1.0).contains(&prob) {
                return invalid_arg!("bernoulli_ expects p to be in [0, 1], but got p={prob}");
            }
            let (seed, offset) = reserve(gen, 2 * n as u64)?;
            crate::dispatch!(all: out.dtype, T => generate::<T, 2>(out, seed, offset, |w| T::from_bool(unit_f64(w[0], w[1]) < prob)));
            Ok(())
        }
        _ if !float => not_implemented!(
            "{op:?} is only defined for floating-point tensors, got {}",
            out.dtype.name()
        ),
        RandomOp::Uniform => {
            let (from, to) = (param(p, 0, 0.0), param(p, 1, 1.0));
            if double {
                let (seed, offset) = reserve(gen, 2 * n as u64)?;
                generate::<f64, 2>(out, seed, offset, |w| {
                    from + (to - from) * unit_f64(w[0], w[1])
                });
            } else {
                let (seed, offset) = reserve(gen, n as u64)?;
                let (f, t) = (from as f32, to as f32);
                let make = UniformBatch::new(f, t, from, to);
                crate::dispatch!(float: out.dtype, F => generate_batches::<F, _>(out, seed, offset, 1, &make), _ => unreachable!())
            }
            Ok(())
        }
        RandomOp::Normal | RandomOp::LogNormal => {
            let (mean, std) = (param(p, 0, 0.0), param(p, 1, 1.0));
            if std < 0.0 {
                return invalid_arg!("normal expects std >= 0.0, but found std {std}");
            }
            let log = op == RandomOp::LogNormal;
            if double {
                // Box-Muller on two 53-bit uniforms per element.
                let (seed, offset) = reserve(gen, 4 * n as u64)?;
                generate::<f64, 4>(out, seed, offset, |w| {
                    let u1 = 1.0 - unit_f64(w[0], w[1]); // (0, 1]
                    let u2 = unit_f64(w[2], w[3]);
                    let z = mean + std * (-2.0 * u1.ln()).sqrt() * (TWO_PI * u2).cos();
                    if log {
                        z.exp()
                    } else {
                        z
                    }
                });
                return Ok(());
            }
            // One word per element, paired within whole batches (see `normal_batch`).
            let (seed, offset) = reserve(gen, n.div_ceil(BATCH) as u64 * BATCH as u64)?;
            let make = NormalBatch {
                mean: mean as f32,
                std: std as f32,
                log,
            };
            crate::dispatch!(float: out.dtype, F => generate_batches::<F, _>(out, seed, offset, 1, &make), _ => unreachable!());
            Ok(())
        }
        RandomOp::Exponential => {
            let lambda = param(p, 0, 1.0);
            if lambda <= 0.0 {
                return invalid_arg!(
                    "exponential_ expects lambda > 0.0, but found lambda={lambda}"
                );
            }
            let (seed, offset) = reserve(gen, 2 * n as u64)?;
            crate::dispatch!(float: out.dtype, F => generate::<F, 2>(out, seed, offset, |w| {
                F::from_f64(-(1.0 - unit_f64(w[0], w[1])).ln() / lambda)
            }), _ => unreachable!());
            Ok(())
        }
        RandomOp::Geometric => {
            let prob = param(p, 0, 0.5);
            if !(prob > 0.0 && prob < 1.0) {
                return invalid_arg!("geometric_ expects p to be in (0, 1), but got p={prob}");
            }
            let (seed, offset) = reserve(gen, 2 * n as u64)?;
            let denom = (1.0 - prob).ln();
            crate::dispatch!(float: out.dtype, F => generate::<F, 2>(out, seed, offset, |w| {
                F::from_f64(((1.0 - unit_f64(w[0], w[1])).ln() / denom).ceil().max(1.0))
            }), _ => unreachable!());
            Ok(())
        }
        RandomOp::Cauchy => {
            let (median, sigma) = (param(p, 0, 0.0), param(p, 1, 1.0));
            let (seed, offset) = reserve(gen, 2 * n as u64)?;
            crate::dispatch!(float: out.dtype, F => generate::<F, 2>(out, seed, offset, |w| {
                F::from_f64(median + sigma * (std::f64::consts::PI * (unit_f64(w[0], w[1]) - 0.5)).tan())
            }), _ => unreachable!());
            Ok(())
        }
    }
}

/// `out[i] = uniform() < p[i]` (p read as f64, same shape as out, any layout for p).
pub fn bernoulli_tensor(out: &TensorMut, prob: &TensorRef, gen: u64) -> FooResult<()> {
    let n = out.numel();
    if prob.shape != out.shape {
        return invalid_arg!(
            "bernoulli: p shape {:?} differs from the output shape {:?}",
            prob.shape,
            out.shape
        );
    }
    if n == 0 {
        return Ok(());
    }
    // Draw the uniforms first (dense f64 scratch), then compare elementwise with p.
    let mut u = vec![0f64; n];
    let scratch = TensorMut {
        ptr: u.as_mut_ptr() as *mut u8,
        shape: smallvec::smallvec![n],
        strides: smallvec::smallvec![1],
        dtype: crate::DType::F64,
    };
    let (seed, offset) = reserve(gen, 2 * n as u64)?;
    generate::<f64, 2>(&scratch, seed, offset, |w| unit_f64(w[0], w[1]));
    let uniform = TensorRef {
        ptr: u.as_ptr() as *const u8,
        shape: out.shape.clone(),
        strides: crate::tensor::contiguous_strides(&out.shape),
        dtype: crate::DType::F64,
    };
    crate::dispatch!(all: prob.dtype, P => crate::dispatch!(all: out.dtype, T => super::core::map::map2(out, &uniform, prob, move |u: f64, p: P| {
        T::from_bool(u < p.to_f64())
    })))
}

/// Inverted dropout: `mask[i] = uniform() >= p`, `out[i] = input[i] * mask[i] / (1 - p)`.
pub fn dropout(
    out: &TensorMut,
    mask: &TensorMut,
    input: &TensorRef,
    p: f64,
    gen: u64,
) -> FooResult<()> {
    if mask.dtype != crate::DType::Bool || !mask.is_contiguous() || mask.shape != input.shape {
        return Err(FooError::InvalidArgument(
            "dropout mask must be a dense bool tensor shaped like the input".into(),
        ));
    }
    random(RandomOp::Bernoulli, mask, gen, &[Scalar::from_f64(1.0 - p)])?;
    let scale = if p < 1.0 { 1.0 / (1.0 - p) } else { 0.0 };
    let mref = mask.as_ref();
    crate::dispatch!(float: input.dtype, F => {
        let s = <F as super::core::float::FloatStore>::M::from_f64c(scale);
        use super::core::float::{FloatStore, Math};
        super::core::map::map2(out, input, &mref, move |x: F, m: bool| if m { F::store(x.load() * s) } else { F::store(x.load() * <F as FloatStore>::M::from_f64c(0.0)) })
    }, _ => not_implemented!("dropout is only defined for floating-point tensors, got {}", input.dtype.name()))
}

/// A random permutation of 0..n into a dense int64 `out`: sort indices by 64-bit random keys.
pub fn randperm(out: &TensorMut, gen: u64) -> FooResult<()> {
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    let mut keys = vec![0u64; n];
    let kt = TensorMut {
        ptr: keys.as_mut_ptr() as *mut u8,
        shape: smallvec::smallvec![n],
        strides: smallvec::smallvec![1],
        dtype: crate::DType::U64,
    };
    let (seed, offset) = reserve(gen, 2 * n as u64)?;
    generate::<u64, 2>(&kt, seed, offset, |w| ((w[0] as u64) << 32) | w[1] as u64);
    let mut idx: Vec<u64> = (0..n as u64).collect();
    // Ties (probability ~n^2/2^65) are broken by index, so the result is still a permutation.
    idx.sort_unstable_by_key(|&i| (keys[i as usize], i));
    crate::dispatch!(int: out.dtype, I => {
        let o = out.ptr as *mut I;
        for (k, &v) in idx.iter().enumerate() {
            // SAFETY: the output is dense with n elements.
            unsafe { o.add(k).write(I::from_u64(v)) };
        }
    }, _ => return not_implemented!("randperm output dtype {} is not supported", out.dtype.name()));
    Ok(())
}

/// `torch.multinomial`: `out` is a dense int64 [rows, samples] tensor; `prob` a [rows, cats]
/// tensor of non-negative weights (any layout, any float dtype). With replacement each sample
/// inverts the row's CDF at a fresh uniform; without replacement the `samples` categories with the
/// largest `w / Exp(1)` keys are taken (the exponential-race trick ATen's CPU kernel also uses).
pub fn multinomial(
    out: &TensorMut,
    prob: &TensorRef,
    samples: usize,
    replacement: bool,
    gen: u64,
) -> FooResult<()> {
    let (rows, cats) = match prob.shape.as_slice() {
        [c] => (1, *c),
        [r, c] => (*r, *c),
        _ => return invalid_arg!("prob_dist must be 1 or 2 dim"),
    };
    if out.numel() != rows * samples || !out.is_contiguous() || out.dtype != crate::DType::I64 {
        return Err(FooError::Runtime(
            "multinomial writes a dense int64 [rows, samples] output".into(),
        ));
    }
    if !replacement && samples > cats {
        return invalid_arg!(
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
        );
    }
    let (rs, cs) = match prob.strides.as_slice() {
        [c] => (0, *c),
        [r, c] => (*r, *c),
        _ => unreachable!(),
    };
    // Weights as f64 rows, validated like ATen.
    let mut w = vec![0f64; rows * cats];
    crate::dispatch!(all: prob.dtype, P => {
        let base = prob.ptr as *const P;
        for r in 0..rows {
            for c in 0..cats {
                // SAFETY: (r, c) is inside prob's shape; the offset follows its strides.
                w[r * cats + c] = unsafe { *base.offset(r as isize * rs + c as isize * cs) }.to_f64();
            }
        }
    });
    for r in 0..rows {
        let row = &w[r * cats..(r + 1) * cats];
        // ATen checks the whole tensor up front, except when it samples more than once with
        // replacement: then its kernel checks each entry, with its own messages.
        if replacement && samples > 1 {
            if let Some(x) = row.iter().find(|x| !(**x >= 0.0 && x.is_finite())) {
                let what = if *x >= 0.0 {
                    "= infinity or NaN"
                } else {
                    "< 0"
                };
                return Err(FooError::Runtime(format!(
                    "invalid multinomial distribution (encountering probability entry {what})"
                )));
            }
        } else if row.iter().any(|x| !x.is_finite() || *x < 0.0) {
            return Err(FooError::Runtime(
                "probability tensor contains either `inf`, `nan` or element < 0".into(),
            ));
        }
        if row.iter().sum::<f64>() <= 0.0 {
            return Err(FooError::Runtime(
                "invalid multinomial distribution (sum of probabilities <= 0)".into(),
            ));
        }
    }
    let draws = if replacement {
        rows * samples
    } else {
        rows * cats
    };
    let mut u = vec![0f64; draws];
    let ut = TensorMut {
        ptr: u.as_mut_ptr() as *mut u8,
        shape: smallvec::smallvec![draws],
        strides: smallvec::smallvec![1],
        dtype: crate::DType::F64,
    };
    let (seed, offset) = reserve(gen, 2 * draws as u64)?;
    generate::<f64, 2>(&ut, seed, offset, |x| unit_f64(x[0], x[1]));
    let o = out.ptr as *mut i64;
    for r in 0..rows {
        let row = &w[r * cats..(r + 1) * cats];
        if replacement {
            let total: f64 = row.iter().sum();
            let mut cdf = Vec::with_capacity(cats);
            let mut acc = 0.0;
            for x in row {
                acc += x / total;
                cdf.push(acc);
            }
            for s in 0..samples {
                let target = u[r * samples + s];
                let mut k = cdf.partition_point(|&c| c <= target).min(cats - 1);
                while row[k] == 0.0 && k > 0 {
                    k -= 1; // never pick a zero-weight category through rounding at the top
                }
                // SAFETY: the output is dense [rows, samples].
                unsafe { o.add(r * samples + s).write(k as i64) };
            }
        } else {
            let mut keys: Vec<(f64, usize)> = (0..cats)
                .map(|c| {
                    let e = -(1.0 - u[r * cats + c]).ln(); // Exp(1)
                    (if row[c] > 0.0 { row[c] / e } else { -1.0 }, c)
                })
                .collect();
            keys.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            if keys[samples - 1].0 < 0.0 && samples > 0 {
                return Err(FooError::Runtime("invalid multinomial distribution (with replacement=False, not enough non-negative category to sample)".into()));
            }
            for (s, &(_, c)) in keys.iter().take(samples).enumerate() {
                // SAFETY: the output is dense [rows, samples].
                unsafe { o.add(r * samples + s).write(c as i64) };
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::layout::GRAIN;
    use crate::kernels::core::map::testing::Owned;
    use crate::runtime::rng::{manual_seed, new_generator};

    #[test]
    fn same_seed_same_stream_and_thread_independent() {
        let g = new_generator(0).unwrap();
        manual_seed(g, 7).unwrap();
        let mut a = Owned::<f32>::zeros(&[3 * GRAIN + 5]);
        random(RandomOp::Uniform, &a.m(), g, &[]).unwrap();
        manual_seed(g, 7).unwrap();
        let mut b = Owned::<f32>::zeros(&[3 * GRAIN + 5]);
        // Single-threaded pool: same values.
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| {
                random(RandomOp::Uniform, &b.m(), g, &[]).unwrap();
            });
        assert_eq!(a.data, b.data);
        assert!(a.data.iter().all(|&x| (0.0..1.0).contains(&x)));
        let mean: f32 = a.data.iter().sum::<f32>() / a.data.len() as f32;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
    }

    #[test]
    fn normal_moments_and_randperm() {
        let g = new_generator(0).unwrap();
        manual_seed(g, 1).unwrap();
        let mut x = Owned::<f64>::zeros(&[200_000]);
        random(
            RandomOp::Normal,
            &x.m(),
            g,
            &[Scalar::from_f64(2.0), Scalar::from_f64(3.0)],
        )
        .unwrap();
        let n = x.data.len() as f64;
        let mean = x.data.iter().sum::<f64>() / n;
        let var = x.data.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        assert!(
            (mean - 2.0).abs() < 0.05 && (var - 9.0).abs() < 0.2,
            "{mean} {var}"
        );
        let mut p = Owned::<i64>::zeros(&[1000]);
        randperm(&p.m(), g).unwrap();
        let mut sorted = p.data.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_ne!(p.data, sorted);
    }
}
