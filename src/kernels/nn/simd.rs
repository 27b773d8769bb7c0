//! Vectorization helpers for the row kernels: a branch-free `exp` for f32 that LLVM
//! vectorizes, multi-lane sums and maxima, and [`multiversion!`], which compiles a row loop a
//! second and third time with AVX2+FMA / AVX-512 enabled and picks one at run time.

use crate::kernels::float::Math;

use std::sync::atomic::{AtomicU8, Ordering};

/// 0 unknown, 1 baseline, 2 AVX2+FMA, 3 AVX-512 F/VL/BW/DQ (+AVX2+FMA).
static LEVEL: AtomicU8 = AtomicU8::new(0);

/// The widest instruction set the row kernels may use on this CPU.
#[inline]
pub fn level() -> u8 {
    let l = LEVEL.load(Ordering::Relaxed);
    if l != 0 {
        return l;
    }
    let l = detect();
    LEVEL.store(l, Ordering::Relaxed);
    l
}

#[cfg(target_arch = "x86_64")]
fn detect() -> u8 {
    if std::env::var_os("FOO_RS_NO_SIMD").is_some() {
        1
    } else if is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512dq")
        && is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
    {
        3
    } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        2
    } else {
        1
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> u8 {
    1
}

/// Defines `fn $name<$F: $bound>(args)` that calls `$body::<$F>(args)` compiled for the best
/// instruction set available (`$body` and everything it calls must be `#[inline(always)]`).
#[macro_export]
macro_rules! nn_multiversion {
    ($vis:vis fn $name:ident<$($F:ident: $B:path),+>($($a:ident: $t:ty),* $(,)?) => $body:ident) => {
        $vis fn $name<$($F: $B),+>($($a: $t),*) {
            $crate::unsafe_multiversion!(unsafe fn dispatch<$($F: $B),+>($($a: $t),*) => $body);
            // SAFETY: `$body` is a safe function; the dispatcher only adds target features that
            // it checks at run time.
            unsafe { dispatch::<$($F),+>($($a),*) }
        }
    };
}

/// Defines `unsafe fn $name<$F: $bound>(args)` whose body (a block, or `=> f` for a call of
/// the `#[inline(always)]` function `f::<$F>(args)`) is compiled with AVX-512 F/VL/BW/DQ, with
/// AVX2+FMA, and for the baseline target, and runs in whichever [`level`] allows. The crate is
/// built for baseline x86-64 and, like PyTorch's own kernels, picks at run time. Everything
/// the body calls must be `#[inline(always)]` to inherit the features.
#[macro_export]
macro_rules! unsafe_multiversion {
    ($(#[$m:meta])* $vis:vis unsafe fn $name:ident<$($F:ident: $B:path),+>($($a:ident: $t:ty),* $(,)?) => $body:ident) => {
        $crate::unsafe_multiversion!($(#[$m])* $vis unsafe fn $name<$($F: $B),+>($($a: $t),*) {
            // SAFETY: `$name`'s contract is `$body`'s.
            unsafe { $body::<$($F),+>($($a),*) }
        });
    };
    ($(#[$m:meta])* $vis:vis unsafe fn $name:ident<$($F:ident: $B:path),+>($($a:ident: $t:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        #[inline(always)]
        #[allow(unused_unsafe)]
        $vis unsafe fn $name<$($F: $B),+>($($a: $t),*) {
            #[inline(always)]
            #[allow(unused_unsafe, clippy::too_many_arguments)]
            unsafe fn body<$($F: $B),+>($($a: $t),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn v3<$($F: $B),+>($($a: $t),*) {
                    // SAFETY: forwarded from the caller.
                    unsafe { body::<$($F),+>($($a),*) }
                }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn v2<$($F: $B),+>($($a: $t),*) {
                    // SAFETY: forwarded from the caller.
                    unsafe { body::<$($F),+>($($a),*) }
                }
                match $crate::kernels::nn::simd::level() {
                    // SAFETY: the CPU has AVX-512 F/VL/BW/DQ, AVX2 and FMA (checked at run
                    // time); the rest is the caller's contract.
                    3 => return unsafe { v3::<$($F),+>($($a),*) },
                    // SAFETY: the CPU has AVX2 and FMA (checked at run time); as above.
                    2 => return unsafe { v2::<$($F),+>($($a),*) },
                    _ => {}
                }
            }
            // SAFETY: the caller's contract.
            unsafe { body::<$($F),+>($($a),*) }
        }
    };
}

/// Math types with a vectorizable `exp`.
pub trait FastExp: Math {
    fn fexp(self) -> Self;
}

impl FastExp for f32 {
    #[inline(always)]
    fn fexp(self) -> f32 {
        crate::kernels::vmath::exp(self)
    }
}

impl FastExp for f64 {
    #[inline(always)]
    fn fexp(self) -> f64 {
        self.exp()
    }
}

/// Accumulators of the sums and maxima: four AVX-512 registers of f32 (eight of f64), enough to
/// hide the add latency. With 16, LLVM's SLP vectorizer built the loops from 2-wide pieces
/// (layer_norm ran at 0.9x CPU speed because of it).
const LANES: usize = 64;
/// Lanes of the exp passes (their polynomial needs registers of its own) and of maxima.
const EXP_LANES: usize = 16;

/// `x` as `LANES`-element arrays and the remainder (`as_chunks` without its 1.88 MSRV): the
/// helpers below index fixed-size arrays, which keeps bounds checks out of their inner loops.
#[inline(always)]
fn lanes<const L: usize, M>(x: &[M]) -> (impl Iterator<Item = &[M; L]>, &[M]) {
    let c = x.chunks_exact(L);
    let rem = c.remainder();
    (c.map(|c| c.try_into().expect("a LANES-long chunk")), rem)
}

/// The mutable counterpart of [`lanes`].
#[inline(always)]
fn lanes_mut<const L: usize, M>(x: &mut [M]) -> (impl Iterator<Item = &mut [M; L]>, &mut [M]) {
    let full = x.len() / L * L;
    let (body, rem) = x.split_at_mut(full);
    (
        body.chunks_exact_mut(L)
            .map(|c| c.try_into().expect("a LANES-long chunk")),
        rem,
    )
}

/// Sum with `LANES` independent accumulators (vectorizes; pairwise-ish rounding).
#[inline(always)]
pub fn sum<M: Math>(x: &[M]) -> M {
    let mut acc = [M::zero(); LANES];
    let (chunks, rem) = lanes::<LANES, M>(x);
    for c in chunks {
        let v: [M; LANES] = std::array::from_fn(|j| c[j]);
        for j in 0..LANES {
            acc[j] = acc[j] + v[j];
        }
    }
    fold(acc, rem.iter().fold(M::zero(), |s, &v| s + v))
}

/// Sum of `f(x[i])`, as [`sum`].
#[inline(always)]
pub fn sum_map<M: Math>(x: &[M], f: impl Fn(M) -> M) -> M {
    let mut acc = [M::zero(); LANES];
    let (chunks, rem) = lanes::<LANES, M>(x);
    for c in chunks {
        let v: [M; LANES] = std::array::from_fn(|j| f(c[j]));
        for j in 0..LANES {
            acc[j] = acc[j] + v[j];
        }
    }
    fold(acc, rem.iter().fold(M::zero(), |s, &v| s + f(v)))
}

/// Sum of `f(x[i], y[i])`, as [`sum`].
#[inline(always)]
pub fn sum_zip<M: Math>(x: &[M], y: &[M], f: impl Fn(M, M) -> M) -> M {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &y[..n]);
    let mut acc = [M::zero(); LANES];
    let ((cx, rx), (cy, ry)) = (lanes::<LANES, M>(x), lanes::<LANES, M>(y));
    for (a, b) in cx.zip(cy) {
        for j in 0..LANES {
            acc[j] = acc[j] + f(a[j], b[j]);
        }
    }
    let tail = rx.iter().zip(ry).fold(M::zero(), |s, (&a, &b)| s + f(a, b));
    fold(acc, tail)
}

#[inline(always)]
fn fold<const L: usize, M: Math>(mut acc: [M; L], tail: M) -> M {
    let mut w = L;
    while w > 1 {
        w /= 2;
        for j in 0..w {
            acc[j] = acc[j] + acc[j + w];
        }
    }
    acc[0] + tail
}

/// `x` as `EXP_LANES`-element arrays, the last one filled up with `pad` (a row of 65 floats
/// is four whole chunks and one padded chunk): a scalar remainder loop would run the exp
/// polynomial element by element, and it cost as much as all of a short row's vectors (softmax
/// of 63-wide rows took 2.5x the time of 64-wide ones).
#[inline(always)]
fn padded<M: Copy>(
    x: &[M],
    pad: M,
) -> (
    impl Iterator<Item = &[M; EXP_LANES]>,
    Option<[M; EXP_LANES]>,
) {
    let (chunks, rem) = lanes::<EXP_LANES, M>(x);
    let last = (!rem.is_empty())
        .then(|| std::array::from_fn(|j| if j < rem.len() { rem[j] } else { pad }));
    (chunks, last)
}

/// Maximum ignoring NaN (a NaN row still yields NaN later through `x - max`); -inf if empty.
#[inline(always)]
pub fn max<M: Math>(x: &[M]) -> M {
    // 16 lanes: with 64 the compare-selects did not vectorize (softmax 40% slower).
    let mut acc = [M::neg_infinity(); EXP_LANES];
    let step = |acc: &mut [M; EXP_LANES], c: &[M; EXP_LANES]| {
        for j in 0..EXP_LANES {
            acc[j] = if c[j] > acc[j] { c[j] } else { acc[j] };
        }
    };
    let (chunks, rem) = lanes::<EXP_LANES, M>(x);
    for c in chunks {
        step(&mut acc, c);
    }
    if !rem.is_empty() {
        // The last EXP_LANES elements again (a maximum may see an element twice), or a padded
        // chunk for a row shorter than that.
        match overlapping(x) {
            Some(c) => step(&mut acc, c),
            None => step(
                &mut acc,
                &padded(rem, M::neg_infinity()).1.expect("a remainder"),
            ),
        }
    }
    let mut m = M::neg_infinity();
    for &v in acc.iter() {
        m = if v > m { v } else { m };
    }
    m
}

/// The last `EXP_LANES` elements of `x` when it has that many: a row's remainder is done as
/// a whole chunk that overlaps the previous one, the lanes already done masked off
/// ([`fresh`]), with no copy and no scalar loop.
#[inline(always)]
fn overlapping<M>(x: &[M]) -> Option<&[M; EXP_LANES]> {
    x.len()
        .checked_sub(EXP_LANES)
        .map(|start| x[start..].try_into().expect("EXP_LANES elements"))
}

/// `v` in the lanes an overlapping last chunk adds (the last `rem` ones), `zero` elsewhere.
#[inline(always)]
fn fresh<M: Copy>(v: [M; EXP_LANES], rem: usize, zero: M) -> [M; EXP_LANES] {
    let skip = EXP_LANES - rem;
    let mut out = v;
    for j in 0..EXP_LANES {
        out[j] = if j >= skip { v[j] } else { zero };
    }
    out
}

/// `exp(c - m)` for one chunk, added into `acc`. Padding lanes hold -inf, whose exp is 0 (a
/// finite or +inf `m`; with `m` = -inf or NaN every real lane is NaN already).
#[inline(always)]
fn exp_sub_chunk<M: FastExp>(c: &[M; EXP_LANES], m: M, acc: &mut [M; EXP_LANES]) -> [M; EXP_LANES] {
    let mut e = [M::zero(); EXP_LANES];
    for j in 0..EXP_LANES {
        e[j] = (c[j] - m).fexp();
        acc[j] = acc[j] + e[j];
    }
    e
}

/// `buf[i] = exp(buf[i] - m)`, returning the sum.
#[inline(always)]
pub fn exp_sub_store<M: FastExp>(buf: &mut [M], m: M) -> M {
    let mut acc = [M::zero(); EXP_LANES];
    let full = buf.len() / EXP_LANES * EXP_LANES;
    let (body, rem) = buf.split_at_mut(full);
    for c in body.chunks_exact_mut(EXP_LANES) {
        let c: &mut [M; EXP_LANES] = c.try_into().expect("an EXP_LANES-long chunk");
        *c = exp_sub_chunk(c, m, &mut acc);
    }
    let last = padded(rem, M::neg_infinity()).1;
    if let Some(last) = last {
        let e = exp_sub_chunk(&last, m, &mut acc);
        rem.copy_from_slice(&e[..rem.len()]);
    }
    fold(acc, M::zero())
}

/// `y[i] = exp(x[i] - m)`, returning the sum (the exp pass of a softmax that writes its
/// output directly; `y` and `x` do not overlap).
#[inline(always)]
pub fn exp_sub_into<M: FastExp>(y: &mut [M], x: &[M], m: M) -> M {
    let n = y.len().min(x.len());
    let (y, x) = (&mut y[..n], &x[..n]);
    let mut acc = [M::zero(); EXP_LANES];
    let (xs, rem) = lanes::<EXP_LANES, M>(x);
    let (ys, yr) = lanes_mut::<EXP_LANES, M>(y);
    for (c, d) in ys.zip(xs) {
        *c = exp_sub_chunk(d, m, &mut acc);
    }
    let r = rem.len();
    if r == 0 {
        return fold(acc, M::zero());
    }
    match overlapping(x) {
        Some(last) => {
            // Recomputes the overlapped outputs (the same values) and adds only the new ones.
            let mut none = [M::zero(); EXP_LANES];
            let e = exp_sub_chunk(last, m, &mut none);
            let e_new = fresh(e, r, M::zero());
            for j in 0..EXP_LANES {
                acc[j] = acc[j] + e_new[j];
            }
            let y_last: &mut [M; EXP_LANES] =
                (&mut y[n - EXP_LANES..]).try_into().expect("EXP_LANES");
            *y_last = e;
        }
        None => {
            let e = exp_sub_chunk(
                &padded(rem, M::neg_infinity()).1.expect("a remainder"),
                m,
                &mut acc,
            );
            yr.copy_from_slice(&e[..r]);
        }
    }
    fold(acc, M::zero())
}

/// The sum of `exp(x[i] - m)` (log_softmax's normalizer).
#[inline(always)]
pub fn exp_sub_sum<M: FastExp>(x: &[M], m: M) -> M {
    let mut acc = [M::zero(); EXP_LANES];
    let (xs, rem) = lanes::<EXP_LANES, M>(x);
    for c in xs {
        exp_sub_chunk(c, m, &mut acc);
    }
    if !rem.is_empty() {
        let last = match overlapping(x) {
            Some(c) => fresh(*c, rem.len(), M::neg_infinity()),
            None => padded(rem, M::neg_infinity()).1.expect("a remainder"),
        };
        exp_sub_chunk(&last, m, &mut acc);
    }
    fold(acc, M::zero())
}

/// `y[i] *= k`, the remainder as an overlapping chunk whose already scaled lanes are kept.
#[inline(always)]
pub fn scale<M: Math>(y: &mut [M], k: M) {
    let n = y.len();
    let (ys, yr) = lanes_mut::<EXP_LANES, M>(y);
    let r = yr.len();
    for c in ys {
        for v in c.iter_mut() {
            *v = *v * k;
        }
    }
    if r == 0 {
        return;
    }
    if n >= EXP_LANES {
        let skip = EXP_LANES - r;
        let last: &mut [M; EXP_LANES] = (&mut y[n - EXP_LANES..]).try_into().expect("EXP_LANES");
        for (j, v) in last.iter_mut().enumerate() {
            *v = if j >= skip { *v * k } else { *v };
        }
    } else {
        for v in y.iter_mut() {
            *v = *v * k;
        }
    }
}

/// Softmax backward's elementwise pass, `out[i] = y[i] * (g[i] - s)`.
#[inline(always)]
pub fn softmax_grad_into<M: Math>(out: &mut [M], g: &[M], y: &[M], s: M) {
    let n = out.len().min(g.len()).min(y.len());
    let (out, g, y) = (&mut out[..n], &g[..n], &y[..n]);
    for ((o, &a), &b) in out.iter_mut().zip(g).zip(y) {
        *o = b * (a - s);
    }
}

/// log_softmax backward's elementwise pass, `out[i] = g[i] - exp(y[i]) * s`, in `EXP_LANES`
/// chunks with a padded last one (see [`padded`]).
#[inline(always)]
pub fn log_softmax_grad_into<M: FastExp>(out: &mut [M], g: &[M], y: &[M], s: M) {
    let n = out.len().min(g.len()).min(y.len());
    let (out, g, y) = (&mut out[..n], &g[..n], &y[..n]);
    let (os, or) = lanes_mut::<EXP_LANES, M>(out);
    let ((gs, gl), (ys, yl)) = (padded(g, M::zero()), padded(y, M::neg_infinity()));
    for ((o, a), b) in os.zip(gs).zip(ys) {
        for j in 0..EXP_LANES {
            o[j] = a[j] - b[j].fexp() * s;
        }
    }
    if let (Some(a), Some(b)) = (gl, yl) {
        let mut r = [M::zero(); EXP_LANES];
        for j in 0..EXP_LANES {
            r[j] = a[j] - b[j].fexp() * s;
        }
        or.copy_from_slice(&r[..or.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_exp_accuracy() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let got = x.fexp() as f64;
            let want = (x as f64).exp();
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
        assert_eq!(f32::NEG_INFINITY.fexp(), 0.0);
        assert_eq!(f32::INFINITY.fexp(), f32::INFINITY);
        assert!(f32::NAN.fexp().is_nan());
        assert_eq!(0.0f32.fexp(), 1.0);
    }

    #[test]
    fn lane_sums() {
        let v: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        assert_eq!(sum(&v), 499_500.0);
        assert_eq!(sum_map(&v[..37], |x| 2.0 * x), 1332.0);
        assert_eq!(sum_zip(&v[..20], &v[..20], |x, y| x * y), 2470.0);
        assert_eq!(max(&v[..33]), 32.0);
        assert_eq!(max::<f32>(&[]), f32::NEG_INFINITY);
    }

    #[test]
    fn padded_tails_match_elementwise() {
        for n in [0usize, 1, 15, 16, 17, 63, 65, 100] {
            let x: Vec<f32> = (0..n).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
            let m = max(&x);
            let want: Vec<f32> = x.iter().map(|&v| (v - m).fexp()).collect();
            let mut y = vec![0.0f32; n];
            let s = exp_sub_into(&mut y, &x, m);
            assert_eq!(y, want, "exp_sub_into, n = {n}");
            let mut b = x.clone();
            // In place, the remainder is a padded chunk (other lanes: another summation order).
            let s_store = exp_sub_store(&mut b, m);
            assert!((s_store - s).abs() <= 1e-6 * s.max(1.0), "n = {n}");
            assert_eq!(b, want);
            let mut scaled = y.clone();
            scale(&mut scaled, 0.25);
            let w: Vec<f32> = y.iter().map(|v| v * 0.25).collect();
            assert_eq!(scaled, w, "scale, n = {n}");
            assert_eq!(exp_sub_sum(&x, m), s, "n = {n}");
            assert!(
                (s - want.iter().sum::<f32>()).abs() <= 1e-5 * s.max(1.0),
                "n = {n}"
            );
            let mut o = vec![0.0f32; n];
            log_softmax_grad_into(&mut o, &x, &y, 0.5);
            let w: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a - b.fexp() * 0.5).collect();
            assert_eq!(o, w, "log_softmax_grad_into, n = {n}");
        }
        // A row of -inf except one element: the padding adds nothing.
        let x = [f32::NEG_INFINITY, 3.0, f32::NEG_INFINITY];
        assert_eq!(exp_sub_sum(&x, 3.0), 1.0);
    }
}
