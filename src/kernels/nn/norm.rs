//! layer_norm and batch_norm, forward and backward (group_norm: `group_norm.rs`).
//!
//! layer_norm sees its input as `[M, N]` rows (N = the normalized size); batch_norm as
//! `[N, C, S]` (S = spatial size). Statistics are computed two-pass on a row buffer in the
//! math type; weights/biases and statistics may have another float dtype than the input
//! (mixed precision: float32 parameters for a bfloat16 input), so they are read and written
//! through small vectors ([`read_vec`], [`write_vec`]).

use crate::error::FooResult;
use crate::kernels::core::float::{FloatStore, Math};
use crate::kernels::core::io::{read_vec, require_contiguous, write_vec};
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::kernels::core::scratch::with_scratch;
use crate::kernels::core::simd;
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, multiversion, not_implemented};
use num_traits::{One, Zero};

fn rows_cols(t: &TensorRef) -> FooResult<(usize, usize)> {
    match t.shape.len() {
        2 => Ok((t.shape[0], t.shape[1])),
        r => invalid_arg!("layer_norm kernel: expected a [M, N] input, got rank {r}"),
    }
}

/// A normalization backward's operand checks: `grad_out` and `grad_input` (when given) are
/// contiguous, with the input's shape and dtype.
pub(super) fn check_backward_operands(
    what: &str,
    input: &TensorRef,
    grad_out: &TensorRef,
    grad_input: Option<&TensorMut>,
) -> FooResult<()> {
    require_contiguous("grad_out", &grad_out.shape, &grad_out.strides)?;
    if grad_out.shape != input.shape || grad_out.dtype != input.dtype {
        return invalid_arg!("{what} backward: grad_out differs from input in shape or dtype");
    }
    if let Some(g) = grad_input {
        require_contiguous("grad_input", &g.shape, &g.strides)?;
        if g.shape != input.shape || g.dtype != input.dtype {
            return invalid_arg!("{what} backward: bad grad_input");
        }
    }
    Ok(())
}

pub(super) fn opt_vec<M: Math>(
    t: Option<&TensorRef>,
    n: usize,
    what: &str,
) -> FooResult<Option<Vec<M>>> {
    let v = t.map(read_vec::<M>).transpose()?;
    if let Some(v) = &v {
        if v.len() != n {
            return invalid_arg!("{what} has {} elements, expected {n}", v.len());
        }
    }
    Ok(v)
}

/// layer_norm forward over rows of `input` `[M, N]`: writes `out` `[M, N]` and, when given,
/// `mean`/`rstd` (`M` elements each, any float dtype).
pub fn layer_norm(
    out: &TensorMut,
    mean: Option<&TensorMut>,
    rstd: Option<&TensorMut>,
    input: &TensorRef,
    weight: Option<&TensorRef>,
    bias: Option<&TensorRef>,
    eps: f64,
) -> FooResult<()> {
    let (m, n) = rows_cols(input)?;
    require_contiguous("layer_norm input", &input.shape, &input.strides)?;
    require_contiguous("layer_norm output", &out.shape, &out.strides)?;
    if out.shape != input.shape {
        return invalid_arg!("layer_norm: output shape differs from input shape");
    }
    crate::dispatch!(float: input.dtype, F => {
        type M = <F as FloatStore>::M;
        let w: Vec<M> = opt_vec(weight, n, "weight")?.unwrap_or_else(|| vec![M::one(); n]);
        let b: Vec<M> = opt_vec(bias, n, "bias")?.unwrap_or_else(|| vec![M::zero(); n]);
        let mut stats = vec![M::zero(); 2 * m];
        let ps = SendPtr::of(stats.as_mut_ptr());
        let (pi, po) = (SendPtr::of(input.ptr), SendPtr::of(out.ptr));
        let e = M::from_f64c(eps);
        let a = LnArgs { pi, po, ps, w: &w, b: &b, n, m, eps: e };
        parallel_for(m, (GRAIN / n.max(1)).max(1), &|s, e| ln_rows::<F>(&a, s, e));
        if let Some(t) = mean {
            write_vec(t, &stats[..m])?;
        }
        if let Some(t) = rstd {
            write_vec(t, &stats[m..])?;
        }
        Ok(())
    }, _ => not_implemented!("layer_norm: no kernel for dtype {}", input.dtype.name()))
}

struct LnArgs<'a, M> {
    pi: SendPtr<u8>,
    po: SendPtr<u8>,
    ps: SendPtr<u8>,
    w: &'a [M],
    b: &'a [M],
    n: usize,
    m: usize,
    eps: M,
}

/// Mean and `1 / sqrt(var + eps)` of one row (biased variance in the math type, from the mean
/// corrected by a second pass over the deviations: the plain `sum * (1 / n)` of a constant row
/// `[-2.1787894; 3]` is 1 ulp off its value, so `x - mean` was 1e-7 instead of the CPU's exact 0
/// (its Welford mean is exact there), and with eps 0 or an inf weight foo gave +-inf or 3e6
/// where the CPU gives 0 * inf = nan).
///
/// A row with an inf or nan gives a nan variance, and so a nan row, as on the CPU. Where the
/// variance overflows (float32 values beyond about 1.8e19) the CPU's Welford updates decide: a
/// difference of two values that overflows (`[3e38, -3e38, 1]`) is inf - inf, and a mean whose
/// square overflows (`[3.4e38, -0.3]`) meets `delta * delta * 0` when the lanes are combined, so
/// nan; squares that overflow alone (`[1e20, -1e20, 1]`) make the variance inf, rstd 0 and the
/// row 0. foo gives the same answers by the same two tests. (The CPU's lane combine also turns
/// some rows of constant huge values to nan, depending on the row length and its SIMD width;
/// foo gives their exact 0.)
#[inline(always)]
pub(super) fn row_stats<M: Math>(xm: &[M], eps: M) -> (M, M) {
    let inv_n = M::one() / M::from_f64c(xm.len() as f64);
    let mean0 = simd::sum(xm) * inv_n;
    let mean = mean0 + simd::sum_map(xm, |v| v - mean0) * inv_n;
    let var = simd::sum_map(xm, |v| (v - mean) * (v - mean)) * inv_n;
    let nan = var == M::infinity() && ((mean * mean).is_infinite() || range_overflows(xm));
    let var = if nan { M::nan() } else { var };
    (mean, M::one() / (var + eps).sqrt())
}

/// Whether max - min of the row is infinite (only asked on the rare overflow path).
#[inline(always)]
fn range_overflows<M: Math>(xm: &[M]) -> bool {
    let (lo, hi) = xm
        .iter()
        .fold((M::infinity(), M::neg_infinity()), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    (hi - lo).is_infinite()
}

multiversion!(fn ln_rows<F: FloatStore>(a: &LnArgs<F::M>, s: usize, e: usize) => ln_body);

#[inline(always)]
fn ln_body<F: FloatStore>(a: &LnArgs<F::M>, s: usize, e: usize) {
    let n = a.n;
    let mut buf = vec![F::M::zero(); if F::as_math(&[]).is_some() { 0 } else { n }];
    for r in s..e {
        // SAFETY: row r of the contiguous [M, N] operands; rows are disjoint across chunks.
        let (x, y): (&[F], &mut [F]) =
            unsafe { (a.pi.cast().slice(r * n, n), a.po.cast().slice_mut(r * n, n)) };
        let xm: &[F::M] = match F::as_math(x) {
            Some(xm) => xm,
            None => {
                for (b, &v) in buf.iter_mut().zip(x) {
                    *b = v.load();
                }
                &buf
            }
        };
        let (mean, rstd) = row_stats(xm, a.eps);
        for (((o, &v), &w), &b) in y.iter_mut().zip(xm).zip(a.w).zip(a.b) {
            *o = F::store((v - mean) * rstd * w + b);
        }
        // SAFETY: slots r and m + r of the statistics buffer, written by this row only.
        unsafe {
            a.ps.cast::<F::M>().slice_mut(r, 1)[0] = mean;
            a.ps.cast::<F::M>().slice_mut(a.m + r, 1)[0] = rstd;
        }
    }
}

/// At most this many blocks of rows for column reductions (a count fixed by the row count:
/// results independent of the thread count).
const COL_BLOCKS: usize = 64;
/// Rows per block at least (gpt2's [256, 256] rows were 64 blocks of 4 rows: zeroing and adding
/// up 64 partial sums of 2 x 256 columns took longer than the rows themselves).
const COL_BLOCK_ROWS: usize = 16;

/// layer_norm backward. `grad_out`, `input` `[M, N]`; `mean`, `rstd` `M` elements; writes the
/// outputs that are given: `grad_input` `[M, N]`, `grad_weight`/`grad_bias` `N` elements.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_backward(
    grad_input: Option<&TensorMut>,
    grad_weight: Option<&TensorMut>,
    grad_bias: Option<&TensorMut>,
    grad_out: &TensorRef,
    input: &TensorRef,
    mean: &TensorRef,
    rstd: &TensorRef,
    weight: Option<&TensorRef>,
) -> FooResult<()> {
    let (m, n) = rows_cols(input)?;
    require_contiguous("layer_norm input", &input.shape, &input.strides)?;
    check_backward_operands("layer_norm", input, grad_out, grad_input)?;
    crate::dispatch!(float: input.dtype, F => {
        type M = <F as FloatStore>::M;
        let w: Vec<M> = opt_vec(weight, n, "weight")?.unwrap_or_else(|| vec![M::one(); n]);
        let mu: Vec<M> = read_vec(mean)?;
        let rs: Vec<M> = read_vec(rstd)?;
        if mu.len() != m || rs.len() != m {
            return invalid_arg!("layer_norm backward: mean/rstd must have {m} elements");
        }
        let cols = grad_weight.is_some() || grad_bias.is_some();
        let nb = if cols { m.div_ceil(COL_BLOCK_ROWS).clamp(1, COL_BLOCKS) } else { 0 };
        // Each block zeroes its own partial sums (a fresh 128 KB `vec!` per call was page
        // faults and a zeroing on the calling thread while the helpers waited).
        with_scratch::<M, _>(2 * nb * n, |parts| {
            let a = LnBwd {
                pg: SendPtr::of(grad_out.ptr),
                px: SendPtr::of(input.ptr),
                pdx: grad_input.map(|t| SendPtr::of(t.ptr)),
                parts: SendPtr::of(parts.as_mut_ptr()),
                w: &w,
                mu: &mu,
                rs: &rs,
                n,
                m,
                nb,
            };
            if nb > 0 {
                let rows_per = m.div_ceil(nb);
                parallel_for(nb, (GRAIN / (rows_per * n).max(1)).max(1), &|s, e| {
                    ln_bwd_rows::<F>(&a, s, e, rows_per)
                });
            } else {
                parallel_for(m, (GRAIN / n.max(1)).max(1), &|s, e| ln_bwd_rows::<F>(&a, s, e, 0));
            }
            if cols {
                let mut sums = vec![M::zero(); 2 * n];
                add_blocks(parts, &mut sums);
                let (gw, gb) = sums.split_at(n);
                if let Some(t) = grad_weight {
                    write_vec(t, gw)?;
                }
                if let Some(t) = grad_bias {
                    write_vec(t, gb)?;
                }
            }
            Ok(())
        })
    }, _ => not_implemented!("layer_norm backward: no kernel for dtype {}", input.dtype.name()))
}

multiversion!(fn add_blocks<M: Math>(parts: &[M], sums: &mut [M]) => add_blocks_body);

/// `sums += ` each `sums.len()`-long block of `parts`, in order (vectorised: the scalar loop
/// was as slow as the rows' own pass).
#[inline(always)]
fn add_blocks_body<M: Math>(parts: &[M], sums: &mut [M]) {
    if sums.is_empty() {
        return;
    }
    for blk in parts.chunks_exact(sums.len()) {
        for (o, &v) in sums.iter_mut().zip(blk) {
            *o = *o + v;
        }
    }
}

struct LnBwd<'a, M> {
    pg: SendPtr<u8>,
    px: SendPtr<u8>,
    pdx: Option<SendPtr<u8>>,
    parts: SendPtr<u8>,
    w: &'a [M],
    mu: &'a [M],
    rs: &'a [M],
    n: usize,
    m: usize,
    nb: usize,
}

multiversion!(fn ln_bwd_rows<F: FloatStore>(a: &LnBwd<F::M>, s: usize, e: usize, rows_per: usize) => ln_bwd_body);

/// Blocks `s..e` of `rows_per` rows each when the column sums are wanted (`a.nb > 0`), else
/// rows `s..e`: the row buffers are allocated once for the whole range (once per block, they
/// were 128 allocations per call at 64 blocks).
#[inline(always)]
fn ln_bwd_body<F: FloatStore>(a: &LnBwd<F::M>, s: usize, e: usize, rows_per: usize) {
    let n = a.n;
    let mut xh = vec![F::M::zero(); if F::as_math(&[]).is_some() { 0 } else { n }];
    let mut gb = vec![F::M::zero(); n];
    if a.nb == 0 {
        ln_bwd_block::<F>(a, 0, s, e, &mut xh, &mut gb);
        return;
    }
    for blk in s..e {
        let rows = (blk * rows_per, ((blk + 1) * rows_per).min(a.m));
        ln_bwd_block::<F>(a, blk, rows.0, rows.1, &mut xh, &mut gb);
    }
}

/// Rows `s..e`, whose column sums (if wanted) go to block `blk`'s partial sums.
#[inline(always)]
fn ln_bwd_block<F: FloatStore>(
    a: &LnBwd<F::M>,
    blk: usize,
    s: usize,
    e: usize,
    xh: &mut [F::M],
    gb: &mut [F::M],
) {
    let n = a.n;
    let inv_n = F::M::one() / F::M::from_f64c(n as f64);
    let (pw, pb): (&mut [F::M], &mut [F::M]) = if a.nb > 0 {
        // SAFETY: this block's own 2 * n partial sums (blocks are disjoint).
        unsafe {
            (
                a.parts.cast().slice_mut(2 * blk * n, n),
                a.parts.cast().slice_mut(2 * blk * n + n, n),
            )
        }
    } else {
        (&mut [], &mut [])
    };
    pw.fill(F::M::zero());
    pb.fill(F::M::zero());
    for r in s..e {
        // SAFETY: row r of contiguous [M, N] operands, read only.
        let (g, x): (&[F], &[F]) =
            unsafe { (a.pg.cast().slice(r * n, n), a.px.cast().slice(r * n, n)) };
        let (mu, rs) = (a.mu[r], a.rs[r]);
        let xm: &[F::M] = match F::as_math(x) {
            Some(xm) => xm,
            None => {
                for (h, &v) in xh.iter_mut().zip(x) {
                    *h = v.load();
                }
                &*xh
            }
        };
        // One pass for the column sums (dy * (x - mean) * rstd and dy) and dy * w.
        if a.nb > 0 {
            let cols = pw.iter_mut().zip(pb.iter_mut());
            for (((pw, pb), b), ((&xv, &gv), &w)) in
                cols.zip(gb.iter_mut()).zip(xm.iter().zip(g).zip(a.w))
            {
                let gv = gv.load();
                *pw = *pw + gv * ((xv - mu) * rs);
                *pb = *pb + gv;
                *b = gv * w;
            }
        } else {
            for ((b, &gv), &w) in gb.iter_mut().zip(g).zip(a.w) {
                *b = gv.load() * w;
            }
        }
        if let Some(pdx) = a.pdx {
            // The CPU's formula term by term (ds and db over the raw x, then dx = rstd * dy * w +
            // b * x + c), so that an inf weight gives its nan and the rounding is its own.
            let db = simd::sum(gb);
            let ds = simd::sum_zip(gb, xm, |b, v| b * v);
            let cb = (db * mu - ds) * rs * rs * rs * inv_n;
            let cc = -cb * mu - db * rs * inv_n;
            // SAFETY: row r of grad_input, written by this row only.
            let dx: &mut [F] = unsafe { pdx.cast().slice_mut(r * n, n) };
            for ((o, &b), &v) in dx.iter_mut().zip(gb.iter()).zip(xm) {
                *o = F::store(rs * b + cb * v + cc);
            }
        }
    }
}

fn ncs(t: &TensorRef) -> FooResult<(usize, usize, usize)> {
    match t.shape.len() {
        3 => Ok((t.shape[0], t.shape[1], t.shape[2])),
        r => invalid_arg!("batch_norm kernel: expected a [N, C, S] input, got rank {r}"),
    }
}

/// batch_norm forward on `input` `[N, C, S]`. Training: batch statistics per channel, written
/// to `save_mean`/`save_invstd` (when given) and blended into `running_mean`/`running_var`
/// (unbiased variance) with `momentum`. Eval: normalizes with the running statistics.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    out: &TensorMut,
    save_mean: Option<&TensorMut>,
    save_invstd: Option<&TensorMut>,
    input: &TensorRef,
    weight: Option<&TensorRef>,
    bias: Option<&TensorRef>,
    running_mean: Option<&TensorMut>,
    running_var: Option<&TensorMut>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> FooResult<()> {
    let (nn, c, s) = ncs(input)?;
    require_contiguous("batch_norm input", &input.shape, &input.strides)?;
    require_contiguous("batch_norm output", &out.shape, &out.strides)?;
    if out.shape != input.shape {
        return invalid_arg!("batch_norm: output shape differs from input shape");
    }
    crate::dispatch!(float: input.dtype, F => {
        type M = <F as FloatStore>::M;
        let w: Vec<M> = opt_vec(weight, c, "weight")?.unwrap_or_else(|| vec![M::one(); c]);
        let b: Vec<M> = opt_vec(bias, c, "bias")?.unwrap_or_else(|| vec![M::zero(); c]);
        let (pi, po) = (SendPtr::of(input.ptr), SendPtr::of(out.ptr));
        let count = nn * s;
        if training {
            // Per channel: mean, sum of squared deviations, invstd and the mean for the running
            // update; then normalize.
            let mut stats = vec![M::zero(); 4 * c];
            let ps = SendPtr::of(stats.as_mut_ptr());
            // float16/bfloat16 with parameters of the same dtype: the CPU keeps its statistics
            // in that dtype (ATen's param_t), so they are rounded before they are used.
            // float16 keeps the sum of squares and the variance in float32 (measured: every
            // invstd of 2000 channels equals the CPU's so, and bfloat16's only when rounded).
            let round = matches!(input.dtype, crate::DType::F16 | crate::DType::BF16) && save_mean.is_some_and(|t| t.dtype == input.dtype);
            let round_var = round && input.dtype == crate::DType::BF16;
            let wide = input.dtype == crate::DType::F32;
            let a = BnArgs { pi, po, w: &w, b: &b, nn, c, s, round, round_var, wide };
            parallel_for(c, (GRAIN / count.max(1)).max(1), &|c0, c1| {
                bn_train_channels::<F>(&a, ps, eps, c0, c1)
            });
            let (mean, rest) = stats.split_at(c);
            let (var_sum, rest) = rest.split_at(c);
            let (invstd, update_mean) = rest.split_at(c);
            if let Some(t) = save_mean {
                write_vec(t, mean)?;
            }
            if let Some(t) = save_invstd {
                write_vec(t, invstd)?;
            }
            // The CPU's update (batch_norm_cpu_update_stats_template) in its types: param_t
            // arithmetic (rounded to half in the non-mixed case), and the unbiased variance's
            // product and sum in acc_type (double for float32 inputs).
            // float16 updates them in float32 from the unrounded mean (measured as above).
            let rv = |v: M| if round_var { F::store(v).load() } else { v };
            let (one, m) = (M::one(), rv(M::from_f64c(momentum)));
            if let Some(t) = running_mean {
                let old: Vec<M> = read_vec(&t.as_ref())?;
                let new: Vec<M> = old.iter().zip(update_mean).map(|(&o, &v)| rv(rv(m * v) + rv(rv(one - m) * o))).collect();
                write_vec(t, &new)?;
            }
            if let Some(t) = running_var {
                let old: Vec<M> = read_vec(&t.as_ref())?;
                let n1 = rv(M::from_f64c(count as f64 - 1.0));
                let new: Vec<M> = old
                    .iter()
                    .zip(var_sum)
                    .map(|(&o, &v)| {
                        let (unbiased, kept) = (rv(v / n1), rv(rv(one - m) * o));
                        if wide {
                            M::from_f64c(m.to_f64c() * unbiased.to_f64c() + kept.to_f64c())
                        } else {
                            m * unbiased + kept
                        }
                    })
                    .collect();
                write_vec(t, &new)?;
            }
        } else {
            let (Some(rm), Some(rv)) = (running_mean, running_var) else {
                return invalid_arg!("running_mean and running_var must be defined in evaluation mode");
            };
            let mean: Vec<M> = read_vec(&rm.as_ref())?;
            let var: Vec<M> = read_vec(&rv.as_ref())?;
            if mean.len() != c || var.len() != c {
                return invalid_arg!("batch_norm: running statistics must have {c} elements");
            }
            let e = M::from_f64c(eps);
            // y = x * scale + shift per channel.
            // As the CPU's batch_norm_cpu_collect_linear_and_constant_terms: alpha = invstd * w.
            let scale: Vec<M> = (0..c).map(|k| M::one() / (var[k] + e).sqrt() * w[k]).collect();
            let shift: Vec<M> = (0..c).map(|k| bn_shift::<F>(mean[k], scale[k], b[k])).collect();
            if s < SPREAD_BELOW {
                // Small planes (resnet18's [8, 512, 2, 2]): the constants spread over a sample's
                // positions, one fused loop over each sample's whole run. Plane by plane, a
                // channel's 4 elements cost a loop, a slice and a division each: 24 us a call
                // against the CPU's 12 (Zen 5, 2 threads).
                let spread = |v: &[M]| -> Vec<M> { v.iter().flat_map(|&x| std::iter::repeat(x).take(s)).collect() };
                let (scale, shift) = (spread(&scale), spread(&shift));
                let a = BnArgs { pi, po, w: &scale, b: &shift, nn, c: 1, s: c * s, round: false, round_var: false, wide: false };
                parallel_for(nn, (GRAIN / (c * s).max(1)).max(1), &|r0, r1| bn_spread_rows::<F>(&a, r0, r1));
            } else {
                let a = BnArgs { pi, po, w: &scale, b: &shift, nn, c, s, round: false, round_var: false, wide: false };
                parallel_for(nn * c, (GRAIN / s.max(1)).max(1), &|r0, r1| bn_affine_rows::<F>(&a, r0, r1));
            }
            if let Some(t) = save_mean {
                write_vec::<M>(t, &[])?;
            }
            if let Some(t) = save_invstd {
                write_vec::<M>(t, &[])?;
            }
        }
        Ok(())
    }, _ => not_implemented!("batch_norm: no kernel for dtype {}", input.dtype.name()))
}

/// batch_norm's constant term `b - mean * scale` as the CPU computes it: fused into one
/// rounding for float32/float64 (its kernels are built with -ffp-contract=fast), two for half
/// types, whose kernel variant is not contracted (measured bit for bit against the CPU).
#[inline(always)]
fn bn_shift<F: FloatStore>(mean: F::M, scale: F::M, b: F::M) -> F::M {
    if std::mem::size_of::<F>() == 2 {
        b - mean * scale
    } else {
        num_traits::Float::mul_add(-mean, scale, b)
    }
}

struct BnArgs<'a, M> {
    pi: SendPtr<u8>,
    po: SendPtr<u8>,
    w: &'a [M],
    b: &'a [M],
    nn: usize,
    c: usize,
    s: usize,
    /// Round the mean and invstd to the storage type (see `batch_norm`).
    round: bool,
    /// Round the sum of squared deviations and the variance too.
    round_var: bool,
    /// Sum in f64 (float32 inputs).
    wide: bool,
}

multiversion!(fn bn_train_channels<F: FloatStore>(a: &BnArgs<F::M>, ps: SendPtr<u8>, eps: f64, c0: usize, c1: usize) => bn_train_body);

/// Elements of the planes of one block of channels in the statistics passes (at least one
/// channel): the block's per-position sums stay in the L1 cache while the samples pass.
const BN_BLOCK: usize = 2048;

/// Planes below this many elements take their channels' constants from arrays spread over
/// the positions (one loop over a sample's whole run of the block vectorizes across channels);
/// larger planes run a loop per channel with its constants in registers (the spread arrays'
/// extra reads made a [8, 64, 32, 32] backward 1.4x slower).
const SPREAD_BELOW: usize = 16;

/// The channels `c0..c1` in blocks of whole channels of at most [`BN_BLOCK`] plane elements
/// (one channel where its plane is larger): `(k0, k1)`.
fn bn_blocks(c0: usize, c1: usize, s: usize) -> impl Iterator<Item = (usize, usize)> {
    let per = (BN_BLOCK / s.max(1)).max(1);
    (c0..c1)
        .step_by(per)
        .map(move |k0| (k0, (k0 + per).min(c1)))
}

/// Batch norm's statistics and output for channels `c0..c1`, a block of channels at a time: per
/// position of the block's planes (`(k - k0) * S + j`), the sums over the samples, a sample's
/// part of the block being one contiguous run; then per channel the sum over its positions.
/// (Summed plane by plane, each plane cost a lane tree, planes under 64 elements ran scalar,
/// and a [256, 512] input was read column by column: 13x the CPU's time.)
#[inline(always)]
fn bn_train_body<F: FloatStore>(a: &BnArgs<F::M>, ps: SendPtr<u8>, eps: f64, c0: usize, c1: usize) {
    let (nn, c, s) = (a.nn, a.c, a.s);
    let rs = |v: F::M| if a.round { F::store(v).load() } else { v };
    let rv = |v: F::M| if a.round_var { F::store(v).load() } else { v };
    let count = F::M::from_f64c((nn * s) as f64);
    let len = BN_BLOCK.max(s);
    let (mut acc, mut acc_wide) = (vec![F::M::zero(); len], vec![0f64; len]);
    // Per position: the channel's mean (then its scale), and its shift.
    let (mut at_mean, mut at_shift) = (vec![F::M::zero(); len], vec![F::M::zero(); len]);
    let run = |i: usize, k0: usize, n: usize| -> &[F] {
        // SAFETY: channels k0.. of sample i of the contiguous [N, C, S] input, n elements.
        unsafe { a.pi.cast().slice((i * c + k0) * s, n) }
    };
    for (k0, k1) in bn_blocks(c0, c1, s) {
        let n = (k1 - k0) * s;
        // float32 sums in double, as the CPU's (acc_type); other dtypes in their math type.
        let (acc, acc_wide) = (&mut acc[..n], &mut acc_wide[..n]);
        let (at_mean, at_shift) = (&mut at_mean[..n], &mut at_shift[..n]);
        let total = |acc: &[F::M], acc_wide: &[f64], k: usize| {
            let at = (k - k0) * s..(k - k0 + 1) * s;
            if a.wide {
                F::M::from_f64c(simd::sum(&acc_wide[at]))
            } else {
                simd::sum(&acc[at])
            }
        };
        acc.fill(F::M::zero());
        acc_wide.fill(0.0);
        for i in 0..nn {
            let x = run(i, k0, n);
            if a.wide {
                for (t, &v) in acc_wide.iter_mut().zip(x) {
                    *t += v.load().to_f64c();
                }
            } else {
                for (t, &v) in acc.iter_mut().zip(x) {
                    *t = *t + v.load();
                }
            }
        }
        for k in k0..k1 {
            let mean = if nn * s == 0 {
                F::M::zero()
            } else if a.wide {
                let at = (k - k0) * s..(k - k0 + 1) * s;
                F::M::from_f64c(simd::sum(&acc_wide[at]) / (nn * s) as f64)
            } else {
                total(acc, acc_wide, k) / count
            };
            at_mean[(k - k0) * s..(k - k0 + 1) * s].fill(mean);
        }
        acc.fill(F::M::zero());
        acc_wide.fill(0.0);
        for i in 0..nn {
            let x = run(i, k0, n);
            if s >= SPREAD_BELOW {
                for k in k0..k1 {
                    let at = (k - k0) * s..(k - k0 + 1) * s;
                    let (m, x) = (at_mean[at.start], &x[at.clone()]);
                    if a.wide {
                        for (t, &v) in acc_wide[at].iter_mut().zip(x) {
                            let d = v.load() - m;
                            *t += (d * d).to_f64c();
                        }
                    } else {
                        for (t, &v) in acc[at].iter_mut().zip(x) {
                            let d = v.load() - m;
                            *t = *t + d * d;
                        }
                    }
                }
                continue;
            }
            if a.wide {
                for ((t, &v), &m) in acc_wide.iter_mut().zip(x).zip(&*at_mean) {
                    let d = v.load() - m;
                    *t += (d * d).to_f64c();
                }
            } else {
                for ((t, &v), &m) in acc.iter_mut().zip(x).zip(&*at_mean) {
                    let d = v.load() - m;
                    *t = *t + d * d;
                }
            }
        }
        for k in k0..k1 {
            let at = (k - k0) * s..(k - k0 + 1) * s;
            let mean = at_mean.get(at.start).copied().unwrap_or(F::M::zero());
            let sq = total(acc, acc_wide, k);
            // The deviations above use the unrounded mean, as the CPU's collect_stats does.
            let (update_mean, mean, sq) = (rv(mean), rs(mean), rv(sq));
            let var = if nn * s > 0 {
                rv(sq / rv(count))
            } else {
                F::M::zero()
            };
            // ATen's InvStd: in double (var + eps is a double sum), 0 when both are 0.
            let invstd = if var != F::M::zero() || eps != 0.0 {
                rs(F::M::from_f64c(1.0 / (var.to_f64c() + eps).sqrt()))
            } else {
                F::M::zero()
            };
            let scale = invstd * a.w[k];
            at_mean[at.clone()].fill(scale);
            at_shift[at].fill(bn_shift::<F>(mean, scale, a.b[k]));
            // SAFETY: slot k of each of the four c-long parts of the statistics buffer,
            // written by this channel only.
            unsafe {
                ps.cast::<F::M>().slice_mut(k, 1)[0] = mean;
                ps.cast::<F::M>().slice_mut(c + k, 1)[0] = sq;
                ps.cast::<F::M>().slice_mut(2 * c + k, 1)[0] = invstd;
                ps.cast::<F::M>().slice_mut(3 * c + k, 1)[0] = update_mean;
            }
        }
        for i in 0..nn {
            let x = run(i, k0, n);
            // SAFETY: channels k0..k1 of sample i of the output, written by this block only.
            let y: &mut [F] = unsafe { a.po.cast().slice_mut((i * c + k0) * s, n) };
            if s >= SPREAD_BELOW {
                for k in k0..k1 {
                    let at = (k - k0) * s..(k - k0 + 1) * s;
                    let (sc, sh) = (at_mean[at.start], at_shift[at.start]);
                    for (o, &v) in y[at.clone()].iter_mut().zip(&x[at]) {
                        *o = F::store(num_traits::Float::mul_add(v.load(), sc, sh));
                    }
                }
                continue;
            }
            for (((o, &v), &sc), &sh) in y.iter_mut().zip(x).zip(&*at_mean).zip(&*at_shift) {
                *o = F::store(num_traits::Float::mul_add(v.load(), sc, sh));
            }
        }
    }
}

multiversion!(fn bn_affine_rows<F: FloatStore>(a: &BnArgs<F::M>, r0: usize, r1: usize) => bn_affine_body);

#[inline(always)]
fn bn_affine_body<F: FloatStore>(a: &BnArgs<F::M>, r0: usize, r1: usize) {
    let s = a.s;
    for r in r0..r1 {
        let k = r % a.c;
        let (scale, shift) = (a.w[k], a.b[k]);
        // SAFETY: plane r of the contiguous [N*C, S] operands; planes are disjoint.
        let (x, y): (&[F], &mut [F]) =
            unsafe { (a.pi.cast().slice(r * s, s), a.po.cast().slice_mut(r * s, s)) };
        for (o, &v) in y.iter_mut().zip(x) {
            *o = F::store(num_traits::Float::mul_add(v.load(), scale, shift));
        }
    }
}

multiversion!(fn bn_spread_rows<F: FloatStore>(a: &BnArgs<F::M>, r0: usize, r1: usize) => bn_spread_body);

/// [`bn_affine_body`] with the constants per element of a row (`a.w`, `a.b` of `a.s` each).
#[inline(always)]
fn bn_spread_body<F: FloatStore>(a: &BnArgs<F::M>, r0: usize, r1: usize) {
    let s = a.s;
    for r in r0..r1 {
        // SAFETY: row r of the contiguous [N, S] operands; rows are disjoint.
        let (x, y): (&[F], &mut [F]) =
            unsafe { (a.pi.cast().slice(r * s, s), a.po.cast().slice_mut(r * s, s)) };
        for ((o, &v), (&scale, &shift)) in y.iter_mut().zip(x).zip(a.w.iter().zip(a.b)) {
            *o = F::store(num_traits::Float::mul_add(v.load(), scale, shift));
        }
    }
}

/// batch_norm backward on `[N, C, S]`. `mean`/`invstd` are the saved batch statistics when
/// `training`, else the running mean and running variance (invstd is derived with `eps`).
#[allow(clippy::too_many_arguments)]
pub fn batch_norm_backward(
    grad_input: Option<&TensorMut>,
    grad_weight: Option<&TensorMut>,
    grad_bias: Option<&TensorMut>,
    grad_out: &TensorRef,
    input: &TensorRef,
    weight: Option<&TensorRef>,
    mean: &TensorRef,
    invstd_or_var: &TensorRef,
    training: bool,
    eps: f64,
) -> FooResult<()> {
    let (nn, c, s) = ncs(input)?;
    require_contiguous("batch_norm input", &input.shape, &input.strides)?;
    require_contiguous("grad_out", &grad_out.shape, &grad_out.strides)?;
    if grad_out.shape != input.shape || grad_out.dtype != input.dtype {
        return invalid_arg!("batch_norm backward: grad_out differs from input in shape or dtype");
    }
    if let Some(g) = grad_input {
        require_contiguous("grad_input", &g.shape, &g.strides)?;
        if g.shape != input.shape || g.dtype != input.dtype {
            return invalid_arg!("batch_norm backward: bad grad_input");
        }
    }
    crate::dispatch!(float: input.dtype, F => {
        type M = <F as FloatStore>::M;
        let w: Vec<M> = opt_vec(weight, c, "weight")?.unwrap_or_else(|| vec![M::one(); c]);
        let mu: Vec<M> = read_vec(mean)?;
        let sv: Vec<M> = read_vec(invstd_or_var)?;
        if mu.len() != c || sv.len() != c {
            return invalid_arg!("batch_norm backward: statistics must have {c} elements");
        }
        let e = M::from_f64c(eps);
        let invstd: Vec<M> = if training { sv } else { sv.iter().map(|&v| M::one() / (v + e).sqrt()).collect() };
        let mut sums = vec![M::zero(); 2 * c];
        let a = BnBwd {
            pg: SendPtr::of(grad_out.ptr),
            px: SendPtr::of(input.ptr),
            pdx: grad_input.map(|t| SendPtr::of(t.ptr)),
            sums: SendPtr::of(sums.as_mut_ptr()),
            w: &w,
            mu: &mu,
            invstd: &invstd,
            nn,
            c,
            s,
            training,
        };
        parallel_for(c, (GRAIN / (nn * s).max(1)).max(1), &|c0, c1| bn_bwd_channels::<F>(&a, c0, c1));
        let (sum_dy, dot) = sums.split_at(c);
        if let Some(t) = grad_weight {
            let gw: Vec<M> = dot.iter().zip(&invstd).map(|(&d, &i)| d * i).collect();
            write_vec(t, &gw)?;
        }
        if let Some(t) = grad_bias {
            write_vec(t, sum_dy)?;
        }
        Ok(())
    }, _ => not_implemented!("batch_norm backward: no kernel for dtype {}", input.dtype.name()))
}

struct BnBwd<'a, M> {
    pg: SendPtr<u8>,
    px: SendPtr<u8>,
    pdx: Option<SendPtr<u8>>,
    sums: SendPtr<u8>,
    w: &'a [M],
    mu: &'a [M],
    invstd: &'a [M],
    nn: usize,
    c: usize,
    s: usize,
    training: bool,
}

multiversion!(fn bn_bwd_channels<F: FloatStore>(a: &BnBwd<F::M>, c0: usize, c1: usize) => bn_bwd_body);

/// Batch norm's backward for channels `c0..c1`, a block of channels at a time as
/// [`bn_train_body`]: the per-position sums over the samples, then per channel the sums over
/// its positions, then the input gradient sample by sample.
#[inline(always)]
fn bn_bwd_body<F: FloatStore>(a: &BnBwd<F::M>, c0: usize, c1: usize) {
    let (nn, c, s) = (a.nn, a.c, a.s);
    let len = BN_BLOCK.max(s);
    let zero = F::M::zero();
    let (mut sums_dy, mut dots) = (vec![zero; len], vec![zero; len]);
    // Per position: the channel's mean, then its input gradient's terms.
    let (mut at_mu, mut at_gmean, mut at_proj, mut at_wi) = (
        vec![zero; len],
        vec![zero; len],
        vec![zero; len],
        vec![zero; len],
    );
    let run = |p: SendPtr<u8>, i: usize, k0: usize, n: usize| -> &[F] {
        // SAFETY: channels k0.. of sample i of a contiguous [N, C, S] operand, n elements.
        unsafe { p.cast().slice((i * c + k0) * s, n) }
    };
    for (k0, k1) in bn_blocks(c0, c1, s) {
        let n = (k1 - k0) * s;
        let (sums_dy, dots) = (&mut sums_dy[..n], &mut dots[..n]);
        let (at_mu, at_gmean) = (&mut at_mu[..n], &mut at_gmean[..n]);
        let (at_proj, at_wi) = (&mut at_proj[..n], &mut at_wi[..n]);
        for k in k0..k1 {
            at_mu[(k - k0) * s..(k - k0 + 1) * s].fill(a.mu[k]);
        }
        sums_dy.fill(zero);
        dots.fill(zero);
        for i in 0..nn {
            let (g, x) = (run(a.pg, i, k0, n), run(a.px, i, k0, n));
            if s >= SPREAD_BELOW {
                for k in k0..k1 {
                    let (at, mu) = ((k - k0) * s..(k - k0 + 1) * s, a.mu[k]);
                    let (sd, dt) = (&mut sums_dy[at.clone()], &mut dots[at.clone()]);
                    for (((sd, dt), &g), &x) in
                        sd.iter_mut().zip(dt).zip(&g[at.clone()]).zip(&x[at])
                    {
                        let g = g.load();
                        *sd = *sd + g;
                        *dt = *dt + g * (x.load() - mu);
                    }
                }
                continue;
            }
            for ((((sd, dt), &g), &x), &mu) in sums_dy
                .iter_mut()
                .zip(dots.iter_mut())
                .zip(g)
                .zip(x)
                .zip(&*at_mu)
            {
                let g = g.load();
                *sd = *sd + g;
                *dt = *dt + g * (x.load() - mu);
            }
        }
        for k in k0..k1 {
            let at = (k - k0) * s..(k - k0 + 1) * s;
            let (sum_dy, dot) = (
                simd::sum(&sums_dy[at.clone()]),
                simd::sum(&dots[at.clone()]),
            );
            // SAFETY: slots k and c + k, written by this channel only.
            unsafe {
                a.sums.cast::<F::M>().slice_mut(k, 1)[0] = sum_dy;
                a.sums.cast::<F::M>().slice_mut(c + k, 1)[0] = dot;
            }
            let inv = a.invstd[k];
            let count = F::M::from_f64c((nn * s) as f64);
            let (gmean, proj) = if a.training && nn * s > 0 {
                (sum_dy / count, dot * inv * inv / count)
            } else {
                (zero, zero)
            };
            at_gmean[at.clone()].fill(gmean);
            at_proj[at.clone()].fill(proj);
            at_wi[at].fill(a.w[k] * inv);
        }
        let Some(pdx) = a.pdx else { continue };
        for i in 0..nn {
            let (g, x) = (run(a.pg, i, k0, n), run(a.px, i, k0, n));
            // SAFETY: channels k0..k1 of sample i of grad_input, written by this block only.
            let dx: &mut [F] = unsafe { pdx.cast().slice_mut((i * c + k0) * s, n) };
            if s >= SPREAD_BELOW {
                for k in k0..k1 {
                    let at = (k - k0) * s..(k - k0 + 1) * s;
                    let (mu, gmean, proj, wi) = (
                        a.mu[k],
                        at_gmean[at.start],
                        at_proj[at.start],
                        at_wi[at.start],
                    );
                    let (dx, g, x) = (&mut dx[at.clone()], &g[at.clone()], &x[at]);
                    if a.training {
                        for ((o, &g), &x) in dx.iter_mut().zip(g).zip(x) {
                            let xm = x.load() - mu;
                            *o = F::store((g.load() - gmean - xm * proj) * wi);
                        }
                    } else {
                        for (o, &g) in dx.iter_mut().zip(g) {
                            *o = F::store(g.load() * wi);
                        }
                    }
                }
                continue;
            }
            if a.training {
                let terms = at_mu.iter().zip(&*at_gmean).zip(&*at_proj).zip(&*at_wi);
                for (((o, &g), &x), (((&mu, &gmean), &proj), &wi)) in
                    dx.iter_mut().zip(g).zip(x).zip(terms)
                {
                    let xm = x.load() - mu;
                    *o = F::store((g.load() - gmean - xm * proj) * wi);
                }
            } else {
                // Eval mode: the gradient does not read x (a nan in x stays out of it, as on the CPU).
                for ((o, &g), &wi) in dx.iter_mut().zip(g).zip(&*at_wi) {
                    *o = F::store(g.load() * wi);
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
    fn layer_norm_rows() {
        let x = Owned::new(vec![1.0f64, 2.0, 3.0, 4.0, 4.0, 4.0], &[2, 3]);
        let mut y = Owned::<f64>::zeros(&[2, 3]);
        let mut mu = Owned::<f64>::zeros(&[2]);
        let mut rs = Owned::<f64>::zeros(&[2]);
        layer_norm(
            &y.m(),
            Some(&mu.m()),
            Some(&rs.m()),
            &x.r(),
            None,
            None,
            0.0,
        )
        .unwrap();
        let r = (1.5f64).sqrt();
        assert!((y.data[0] + r).abs() < 1e-12 && y.data[1].abs() < 1e-12);
        assert_eq!(mu.data, vec![2.0, 4.0]);
        let g = Owned::new(vec![1.0f64; 6], &[2, 3]);
        let mut gx = Owned::<f64>::zeros(&[2, 3]);
        let mut gb = Owned::<f64>::zeros(&[3]);
        let rs1 = Owned::new(vec![rs.data[0], 1.0], &[2]);
        layer_norm_backward(
            Some(&gx.m()),
            None,
            Some(&gb.m()),
            &g.r(),
            &x.r(),
            &mu.r(),
            &rs1.r(),
            None,
        )
        .unwrap();
        assert!(gx.data.iter().all(|v| v.abs() < 1e-9));
        assert_eq!(gb.data, vec![2.0, 2.0, 2.0]);
    }

    #[test]
    fn batch_norm_training_updates_running_stats() {
        let x = Owned::new(
            vec![1.0f32, 3.0, 10.0, 10.0, 3.0, 5.0, 20.0, 20.0],
            &[2, 2, 2],
        );
        let mut y = Owned::<f32>::zeros(&[2, 2, 2]);
        let mut rm = Owned::new(vec![0.0f32, 0.0], &[2]);
        let mut rv = Owned::new(vec![1.0f32, 1.0], &[2]);
        let mut sm = Owned::<f32>::zeros(&[2]);
        batch_norm(
            &y.m(),
            Some(&sm.m()),
            None,
            &x.r(),
            None,
            None,
            Some(&rm.m()),
            Some(&rv.m()),
            true,
            0.5,
            0.0,
        )
        .unwrap();
        assert_eq!(sm.data, vec![3.0, 15.0]);
        assert_eq!(rm.data, vec![1.5, 7.5]);
        // channel 0: values 1,3,3,5 -> biased var 2, unbiased 8/3.
        assert!((rv.data[0] - (0.5 + 0.5 * 8.0 / 3.0)).abs() < 1e-6);
        assert!((y.data[0] + 2.0f32.sqrt()).abs() < 1e-6);
    }
}
