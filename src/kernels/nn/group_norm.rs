//! group_norm forward and backward.
//!
//! The input is `[N, C, S]` (S = spatial size), its C channels split into G groups of D = C / G.
//! Each (sample, group) is one contiguous row of D * S values: its statistics are layer_norm's
//! ([`row_stats`], math type, so float16/bfloat16 statistics do not overflow at |x| >= 256). The
//! affine step and the gradients follow the CPU's kernel formula by formula (per channel
//! `x * scale + shift` with `scale = rstd * w`, `shift = b - mean * scale`), so an inf weight gives
//! the CPU's nan and the gradients its rounding.

use super::norm::{check_backward_operands, opt_vec, row_stats};
use crate::error::FooResult;
use crate::kernels::core::float::{FloatStore, Math};
use crate::kernels::core::io::{read_vec, require_contiguous, write_vec};
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::kernels::core::simd;
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, multiversion, not_implemented};
use num_traits::{One, Zero};

/// `[N, C, S]` and the group count, checked against the input.
#[derive(Clone, Copy)]
struct Geom {
    n: usize,
    c: usize,
    s: usize,
    g: usize,
    d: usize,
}

fn geom(input: &TensorRef, groups: usize) -> FooResult<Geom> {
    let &[n, c, s] = input.shape.as_slice() else {
        return invalid_arg!(
            "group_norm kernel: expected an [N, C, S] input, got rank {}",
            input.shape.len()
        );
    };
    if groups == 0 || c % groups != 0 {
        return invalid_arg!("group_norm kernel: {c} channels do not split into {groups} groups");
    }
    require_contiguous("group_norm input", &input.shape, &input.strides)?;
    Ok(Geom {
        n,
        c,
        s,
        g: groups,
        d: c / groups,
    })
}

/// group_norm forward: writes `out` (the input's shape) and `mean`/`rstd` (N * G elements each,
/// any float dtype).
#[allow(clippy::too_many_arguments)]
pub fn group_norm(
    out: &TensorMut,
    mean: &TensorMut,
    rstd: &TensorMut,
    input: &TensorRef,
    weight: Option<&TensorRef>,
    bias: Option<&TensorRef>,
    groups: usize,
    eps: f64,
) -> FooResult<()> {
    let geo = geom(input, groups)?;
    require_contiguous("group_norm output", &out.shape, &out.strides)?;
    if out.shape != input.shape || out.dtype != input.dtype {
        return invalid_arg!("group_norm: output differs from input in shape or dtype");
    }
    crate::dispatch!(float: input.dtype, F => {
        type M = <F as FloatStore>::M;
        let w: Vec<M> = opt_vec(weight, geo.c, "weight")?.unwrap_or_else(|| vec![M::one(); geo.c]);
        let b: Vec<M> = opt_vec(bias, geo.c, "bias")?.unwrap_or_else(|| vec![M::zero(); geo.c]);
        let rows = geo.n * geo.g;
        let mut stats = vec![M::zero(); 2 * rows];
        let a = GnArgs { geo, px: SendPtr::of(input.ptr), po: SendPtr::of(out.ptr), ps: SendPtr::of(stats.as_mut_ptr()), w: &w, b: &b,
                         eps: M::from_f64c(eps) };
        let len = geo.d * geo.s;
        parallel_for(rows, (GRAIN / len.max(1)).max(1), &|s, e| gn_rows::<F>(&a, s, e));
        write_vec(mean, &stats[..rows])?;
        write_vec(rstd, &stats[rows..])
    }, _ => not_implemented!("\"GroupNormKernelImpl\" not implemented for '{}'", input.dtype.name()))
}

struct GnArgs<'a, M> {
    geo: Geom,
    px: SendPtr<u8>,
    po: SendPtr<u8>,
    ps: SendPtr<u8>,
    w: &'a [M],
    b: &'a [M],
    eps: M,
}

multiversion!(fn gn_rows<F: FloatStore>(a: &GnArgs<F::M>, s: usize, e: usize) => gn_body);

#[inline(always)]
fn gn_body<F: FloatStore>(a: &GnArgs<F::M>, s: usize, e: usize) {
    let Geom { n, g, d, s: hw, .. } = a.geo;
    let len = d * hw;
    let mut buf = vec![F::M::zero(); if F::as_math(&[]).is_some() { 0 } else { len }];
    for r in s..e {
        // SAFETY: row r (sample r / G, group r % G) of the contiguous [N, C, S] operands; rows are
        // disjoint across chunks.
        let (x, y): (&[F], &mut [F]) = unsafe {
            (
                a.px.cast().slice(r * len, len),
                a.po.cast().slice_mut(r * len, len),
            )
        };
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
        let c0 = (r % g) * d;
        for (j, (xs, ys)) in xm
            .chunks(hw.max(1))
            .zip(y.chunks_mut(hw.max(1)))
            .enumerate()
        {
            let scale = rstd * a.w[c0 + j];
            let shift = a.b[c0 + j] - mean * scale;
            for (o, &v) in ys.iter_mut().zip(xs) {
                *o = F::store(v * scale + shift);
            }
        }
        // SAFETY: slots r and N * G + r of the statistics buffer, written by this row only.
        unsafe {
            a.ps.cast::<F::M>().slice_mut(r, 1)[0] = mean;
            a.ps.cast::<F::M>().slice_mut(n * g + r, 1)[0] = rstd;
        }
    }
}

/// group_norm backward. `grad_out`, `input` `[N, C, S]`; `mean`, `rstd` N * G elements; writes the
/// outputs that are given: `grad_input` (the input's shape), `grad_weight`/`grad_bias` C elements.
/// The per-channel sums are reduced over samples in sample order, whatever the thread count.
#[allow(clippy::too_many_arguments)]
pub fn group_norm_backward(
    grad_input: Option<&TensorMut>,
    grad_weight: Option<&TensorMut>,
    grad_bias: Option<&TensorMut>,
    grad_out: &TensorRef,
    input: &TensorRef,
    mean: &TensorRef,
    rstd: &TensorRef,
    weight: Option<&TensorRef>,
    groups: usize,
) -> FooResult<()> {
    let geo = geom(input, groups)?;
    check_backward_operands("group_norm", input, grad_out, grad_input)?;
    crate::dispatch!(float: input.dtype, F => {
        type M = <F as FloatStore>::M;
        let rows = geo.n * geo.g;
        let w: Option<Vec<M>> = opt_vec(weight, geo.c, "weight")?;
        let mu: Vec<M> = read_vec(mean)?;
        let rs: Vec<M> = read_vec(rstd)?;
        if mu.len() != rows || rs.len() != rows {
            return invalid_arg!("group_norm backward: mean/rstd must have {rows} elements");
        }
        // ds[n, c] = sum_s dy * x and db[n, c] = sum_s dy, then dx row by row.
        let mut sums = vec![M::zero(); 2 * geo.n * geo.c];
        let a = GnBwd { geo, pg: SendPtr::of(grad_out.ptr), px: SendPtr::of(input.ptr), pdx: grad_input.map(|t| SendPtr::of(t.ptr)),
                        psums: SendPtr::of(sums.as_mut_ptr()), w: w.as_deref(), mu: &mu, rs: &rs };
        let len = geo.d * geo.s;
        parallel_for(rows, (GRAIN / len.max(1)).max(1), &|s, e| gn_bwd_rows::<F>(&a, s, e));
        let nc = geo.n * geo.c;
        if let Some(t) = grad_weight {
            let gw: Vec<M> = (0..geo.c)
                .map(|c| {
                    (0..geo.n).fold(M::zero(), |acc, n| {
                        let i = n * geo.g + c / geo.d;
                        acc + (sums[n * geo.c + c] - sums[nc + n * geo.c + c] * mu[i]) * rs[i]
                    })
                })
                .collect();
            write_vec(t, &gw)?;
        }
        if let Some(t) = grad_bias {
            let gb: Vec<M> =
                (0..geo.c).map(|c| (0..geo.n).fold(M::zero(), |acc, n| acc + sums[nc + n * geo.c + c])).collect();
            write_vec(t, &gb)?;
        }
        Ok(())
    }, _ => not_implemented!("\"GroupNormBackwardKernelImpl\" not implemented for '{}'", input.dtype.name()))
}

struct GnBwd<'a, M> {
    geo: Geom,
    pg: SendPtr<u8>,
    px: SendPtr<u8>,
    pdx: Option<SendPtr<u8>>,
    psums: SendPtr<u8>,
    w: Option<&'a [M]>,
    mu: &'a [M],
    rs: &'a [M],
}

multiversion!(fn gn_bwd_rows<F: FloatStore>(a: &GnBwd<F::M>, s: usize, e: usize) => gn_bwd_body);

#[inline(always)]
fn gn_bwd_body<F: FloatStore>(a: &GnBwd<F::M>, s: usize, e: usize) {
    let Geom { n, c, s: hw, g, d } = a.geo;
    let len = d * hw;
    let scale = F::M::one() / F::M::from_f64c(len as f64);
    let scratch = if F::as_math(&[]).is_some() { 0 } else { hw };
    let (mut gm, mut xm) = (vec![F::M::zero(); scratch], vec![F::M::zero(); scratch]);
    for r in s..e {
        let (sample, c0) = (r / g, (r % g) * d);
        // SAFETY: row r of the contiguous [N, C, S] operands, read only.
        let (gy, x): (&[F], &[F]) = unsafe {
            (
                a.pg.cast().slice(r * len, len),
                a.px.cast().slice(r * len, len),
            )
        };
        // SAFETY: this row's D channels of ds and of db; rows own disjoint channel ranges.
        let (ds, db): (&mut [F::M], &mut [F::M]) = unsafe {
            (
                a.psums.cast().slice_mut(sample * c + c0, d),
                a.psums.cast().slice_mut(n * c + sample * c + c0, d),
            )
        };
        for j in 0..d {
            let (gj, xj) = (&gy[j * hw..(j + 1) * hw], &x[j * hw..(j + 1) * hw]);
            // float32/float64 are read where they lie; 16-bit floats widened into gm, xm.
            let (gj, xj): (&[F::M], &[F::M]) = match (F::as_math(gj), F::as_math(xj)) {
                (Some(gj), Some(xj)) => (gj, xj),
                _ => {
                    for ((gv, xv), (&gs, &xs)) in
                        gm.iter_mut().zip(xm.iter_mut()).zip(gj.iter().zip(xj))
                    {
                        *gv = gs.load();
                        *xv = xs.load();
                    }
                    (&gm, &xm)
                }
            };
            (ds[j], db[j]) = simd::sum_zip_and_sum(gj, xj, |p, q| p * q);
        }
        let Some(pdx) = a.pdx else { continue };
        let gamma = |j: usize| a.w.map_or(F::M::one(), |w| w[c0 + j]);
        let (mut ds_g, mut db_g) = (F::M::zero(), F::M::zero());
        for j in 0..d {
            ds_g = ds_g + ds[j] * gamma(j);
            db_g = db_g + db[j] * gamma(j);
        }
        let (mean, rstd) = (a.mu[r], a.rs[r]);
        let c2 = (db_g * mean - ds_g) * rstd * rstd * rstd * scale;
        let c3 = -c2 * mean - db_g * rstd * scale;
        // SAFETY: row r of grad_input, written by this row only.
        let dx: &mut [F] = unsafe { pdx.cast().slice_mut(r * len, len) };
        for j in 0..d {
            let c1 = rstd * gamma(j);
            let range = j * hw..(j + 1) * hw;
            for ((o, &gs), &xs) in dx[range.clone()]
                .iter_mut()
                .zip(&gy[range.clone()])
                .zip(&x[range])
            {
                *o = F::store(c1 * gs.load() + c2 * xs.load() + c3);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    /// The definition, in f64: per (sample, group) mean and biased variance, then the affine.
    fn reference(
        x: &[f64],
        (n, c, s, g): (usize, usize, usize, usize),
        w: &[f64],
        b: &[f64],
    ) -> Vec<f64> {
        let d = c / g;
        let mut y = vec![0.0; x.len()];
        for i in 0..n * g {
            let row = &x[i * d * s..(i + 1) * d * s];
            let m = row.iter().sum::<f64>() / row.len() as f64;
            let v = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / row.len() as f64;
            for (k, &xv) in row.iter().enumerate() {
                let ch = (i % g) * d + k / s;
                y[i * d * s + k] = (xv - m) / (v + 1e-5).sqrt() * w[ch] + b[ch];
            }
        }
        y
    }

    #[test]
    fn group_norm_matches_definition_and_gradients() {
        let (n, c, s, g) = (3, 4, 5, 2);
        let data: Vec<f64> = (0..n * c * s)
            .map(|i| ((i * 37) % 23) as f64 * 0.3 - 2.0)
            .collect();
        let x = Owned::new(data.clone(), &[n, c, s]);
        let (w, b) = (vec![0.5, -1.0, 2.0, 1.5], vec![0.1, 0.2, -0.3, 0.0]);
        let (wt, bt) = (Owned::new(w.clone(), &[c]), Owned::new(b.clone(), &[c]));
        let mut y = Owned::<f64>::zeros(&[n, c, s]);
        let (mut mu, mut rs) = (Owned::<f64>::zeros(&[n * g]), Owned::<f64>::zeros(&[n * g]));
        group_norm(
            &y.m(),
            &mu.m(),
            &rs.m(),
            &x.r(),
            Some(&wt.r()),
            Some(&bt.r()),
            g,
            1e-5,
        )
        .unwrap();
        for (a, e) in y.data.iter().zip(reference(&data, (n, c, s, g), &w, &b)) {
            assert!((a - e).abs() < 1e-12, "{a} vs {e}");
        }
        // Without a weight, dx of any dy sums to zero over each group (the mean's gradient);
        // grad_bias is dy summed over samples and positions.
        let dyv: Vec<f64> = (0..n * c * s)
            .map(|i| ((i * 11) % 7) as f64 - 3.0)
            .collect();
        let dy = Owned::new(dyv.clone(), &[n, c, s]);
        let mut dx = Owned::<f64>::zeros(&[n, c, s]);
        let mut db = Owned::<f64>::zeros(&[c]);
        group_norm_backward(
            Some(&dx.m()),
            None,
            Some(&db.m()),
            &dy.r(),
            &x.r(),
            &mu.r(),
            &rs.r(),
            None,
            g,
        )
        .unwrap();
        for row in dx.data.chunks(c / g * s) {
            assert!(row.iter().sum::<f64>().abs() < 1e-9);
        }
        for (ch, got) in db.data.iter().enumerate() {
            let want: f64 = (0..n)
                .map(|i| {
                    dyv[(i * c + ch) * s..(i * c + ch + 1) * s]
                        .iter()
                        .sum::<f64>()
                })
                .sum();
            assert!((got - want).abs() < 1e-12);
        }
    }
}
