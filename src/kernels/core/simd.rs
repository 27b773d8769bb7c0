//! SIMD for every family: the instruction-set level of this CPU ([`level`]), multiversioning
//! ([`multiversion!`](crate::multiversion) and
//! [`unsafe_multiversion!`](crate::unsafe_multiversion), which compile a row loop a second and
//! third time with AVX2+FMA / AVX-512 enabled and pick one at run time), and vectorization
//! helpers for row kernels: a branch-free `exp` for f32 that LLVM vectorizes, multi-lane sums
//! and maxima.

use crate::kernels::core::float::Math;

use std::sync::atomic::{AtomicU8, Ordering};

/// 0 unknown, 1 baseline, 2 AVX2+FMA+F16C, 3 AVX-512 F/VL/BW/DQ (+AVX2+FMA+F16C). (F16C, the
/// float16 conversions, came with AVX2 on every Intel and AMD core that has it.)
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
        && is_x86_feature_detected!("f16c")
    {
        3
    } else if is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
    {
        2
    } else {
        1
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> u8 {
    1
}

/// What the math in a multiversioned copy may assume of the instruction set it is compiled for:
/// whether a fused multiply-add is one instruction. `f32::mul_add` is always fused, so in the
/// baseline x86-64 copy it is a call to libm's `fmaf`; [`Isa::mul_add`] fuses only where that
/// is cheap. The copies get it as a constant ([`multiversion!`](crate::multiversion)'s
/// `=> isa body` form), so after inlining its branch folds away and each copy has either
/// `vfmadd` or `vmulps` + `vaddps`. (`cfg!(target_feature = "fma")` cannot tell: it is the
/// crate's setting, the same in a `#[target_feature(enable = "fma")]` function.) Code outside
/// multiversioned copies passes [`Isa::BASELINE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Isa {
    fma: bool,
    masked_stores: bool,
}

impl Isa {
    /// Baseline x86-64 (and other targets): no FMA.
    pub const BASELINE: Isa = Isa {
        fma: false,
        masked_stores: false,
    };
    /// Code compiled with FMA enabled (the AVX2 copies, and attention's AVX-512 ones).
    pub const FMA: Isa = Isa {
        fma: true,
        masked_stores: false,
    };
    /// The AVX-512 copies: FMA, and masked stores as cheap as plain ones.
    pub const AVX512: Isa = Isa {
        fma: true,
        masked_stores: true,
    };

    /// [`Isa::FMA`] when `fma` (attention's `const F: bool` copies), else baseline.
    #[inline(always)]
    pub const fn with_fma(fma: bool) -> Isa {
        Isa {
            fma,
            masked_stores: false,
        }
    }

    /// Whether a vectorized loop may store under a mask: AVX-512's masked `vmovups` costs a
    /// plain store, AVX2's `vmaskmovps` store is microcoded (about 12 cycles on a Zen 3),
    /// slower than the scalar loop.
    #[inline(always)]
    pub const fn masked_stores(self) -> bool {
        self.masked_stores
    }

    /// `a * b + c`: fused (one rounding) where the copy has FMA, a multiply and an add else.
    #[inline(always)]
    pub fn mul_add<M: num_traits::Float>(self, a: M, b: M, c: M) -> M {
        if self.fma {
            a.mul_add(b, c)
        } else {
            a * b + c
        }
    }

    /// `a * b + c` rounded once, for products that nearly cancel `c` (a residual such as
    /// `1 - t * d` with `t ≈ 1 / d`): fused with FMA; without, Dekker's exact product, whose
    /// high part cancels `c` exactly. (Products that neither overflow nor underflow.)
    #[inline(always)]
    pub fn mul_add_exact(self, a: f32, b: f32, c: f32) -> f32 {
        if self.fma {
            a.mul_add(b, c)
        } else {
            // 12 + 12 bits: the partial products are exact, and so is p + c.
            let p = a * b;
            let hi = |v: f32| f32::from_bits(v.to_bits() & 0xffff_f000);
            let (ah, bh) = (hi(a), hi(b));
            let (al, bl) = (a - ah, b - bh);
            let e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
            (p + c) + e
        }
    }
}

/// Defines `fn $name<$F: $bound>(args)` that calls `$body::<$F>(args)` compiled for the best
/// instruction set available (`$body` and everything it calls must be `#[inline(always)]`).
/// With `=> isa $body`, it calls `$body::<$F>(isa, args)`, `isa` the copy's [`Isa`].
#[macro_export]
macro_rules! multiversion {
    ($vis:vis fn $name:ident<$($F:ident: $B:path),+>($($a:ident: $t:ty),* $(,)?) => isa $body:ident) => {
        $vis fn $name<$($F: $B),+>($($a: $t),*) {
            $crate::unsafe_multiversion!(unsafe fn dispatch<$($F: $B),+>($($a: $t),*) => isa $body);
            // SAFETY: `$body` is a safe function; the dispatcher only adds target features that
            // it checks at run time.
            unsafe { dispatch::<$($F),+>($($a),*) }
        }
    };
    ($vis:vis fn $name:ident<$($F:ident: $B:path),+>($($a:ident: $t:ty),* $(,)?) => $body:ident) => {
        $vis fn $name<$($F: $B),+>($($a: $t),*) {
            $crate::unsafe_multiversion!(unsafe fn dispatch<$($F: $B),+>($($a: $t),*) => $body);
            // SAFETY: `$body` is a safe function; the dispatcher only adds target features that
            // it checks at run time.
            unsafe { dispatch::<$($F),+>($($a),*) }
        }
    };
}

/// Defines `unsafe fn $name<$F: $bound>(args)` whose body (a block, `=> f` for a call of the
/// `#[inline(always)]` function `f::<$F>(args)`, or `=> isa f` for `f::<$F>(isa, args)` with
/// the copy's [`Isa`]) is compiled with AVX-512 F/VL/BW/DQ, with AVX2+FMA, and for the
/// baseline target, and runs in whichever [`level`] allows. The crate is built for baseline
/// x86-64 and, like PyTorch's own kernels, picks at run time. Everything the body calls must
/// be `#[inline(always)]` to inherit the features.
#[macro_export]
macro_rules! unsafe_multiversion {
    ($(#[$m:meta])* $vis:vis unsafe fn $name:ident<$($F:ident: $B:path),+>($($a:ident: $t:ty),* $(,)?) => isa $body:ident) => {
        $crate::unsafe_multiversion!(@emit [$(#[$m])*] $vis $name [$($F: $B),+] [$($a: $t),*] isa {
            // SAFETY: `$name`'s contract is `$body`'s.
            unsafe { $body::<$($F),+>(isa, $($a),*) }
        });
    };
    ($(#[$m:meta])* $vis:vis unsafe fn $name:ident<$($F:ident: $B:path),+>($($a:ident: $t:ty),* $(,)?) => $body:ident) => {
        $crate::unsafe_multiversion!(@emit [$(#[$m])*] $vis $name [$($F: $B),+] [$($a: $t),*] _isa {
            // SAFETY: `$name`'s contract is `$body`'s.
            unsafe { $body::<$($F),+>($($a),*) }
        });
    };
    ($(#[$m:meta])* $vis:vis unsafe fn $name:ident<$($F:ident: $B:path),+>($($a:ident: $t:ty),* $(,)?) $body:block) => {
        $crate::unsafe_multiversion!(@emit [$(#[$m])*] $vis $name [$($F: $B),+] [$($a: $t),*] _isa $body);
    };
    (@emit [$(#[$m:meta])*] $vis:vis $name:ident [$($F:ident: $B:path),+] [$($a:ident: $t:ty),*] $isa:ident $body:block) => {
        $(#[$m])*
        #[inline(always)]
        #[allow(unused_unsafe)]
        $vis unsafe fn $name<$($F: $B),+>($($a: $t),*) {
            #[inline(always)]
            #[allow(unused_unsafe, clippy::too_many_arguments)]
            unsafe fn body<$($F: $B),+>($isa: $crate::kernels::core::simd::Isa, $($a: $t),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn v3<$($F: $B),+>($($a: $t),*) {
                    // SAFETY: forwarded from the caller.
                    unsafe { body::<$($F),+>($crate::kernels::core::simd::Isa::AVX512, $($a),*) }
                }
                #[target_feature(enable = "avx2,fma,f16c")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn v2<$($F: $B),+>($($a: $t),*) {
                    // SAFETY: forwarded from the caller.
                    unsafe { body::<$($F),+>($crate::kernels::core::simd::Isa::FMA, $($a),*) }
                }
                match $crate::kernels::core::simd::level() {
                    // SAFETY: the CPU has AVX-512 F/VL/BW/DQ, AVX2, FMA and F16C (checked at
                    // run time); the rest is the caller's contract.
                    3 => return unsafe { v3::<$($F),+>($($a),*) },
                    // SAFETY: the CPU has AVX2, FMA and F16C (checked at run time); as above.
                    2 => return unsafe { v2::<$($F),+>($($a),*) },
                    _ => {}
                }
            }
            // SAFETY: the caller's contract.
            unsafe { body::<$($F),+>($crate::kernels::core::simd::Isa::BASELINE, $($a),*) }
        }
    };
}

/// Math types with a vectorizable `exp`.
pub trait FastExp: Math {
    fn fexp(self, isa: Isa) -> Self;
    /// `e^self` for `self <= 0` (or NaN), 0 where [`FastExp::fexp`] would be subnormal: the
    /// exp pass of attention's online softmax, where such terms vanish next to the max's 1.
    fn fexp_flushed(self, isa: Isa) -> Self {
        self.fexp(isa)
    }
}

impl FastExp for f32 {
    #[inline(always)]
    fn fexp(self, isa: Isa) -> f32 {
        crate::kernels::core::vmath::exp(isa, self)
    }
    #[inline(always)]
    fn fexp_flushed(self, isa: Isa) -> f32 {
        crate::kernels::core::vmath::exp_flushed(isa, self)
    }
}

impl FastExp for f64 {
    #[inline(always)]
    fn fexp(self, _: Isa) -> f64 {
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

/// Sum of `f(x[i])` accumulated in f64 (ATen's `acc_type` for float32), in lanes: the order
/// differs from a sequential double sum by far less than a float32 rounding.
#[inline(always)]
pub fn sum_map_f64<M: Math>(x: &[M], f: impl Fn(M) -> M) -> f64 {
    let mut acc = [0f64; LANES];
    let (chunks, rem) = lanes::<LANES, M>(x);
    for c in chunks {
        let v: [f64; LANES] = std::array::from_fn(|j| f(c[j]).to_f64c());
        for j in 0..LANES {
            acc[j] += v[j];
        }
    }
    acc.iter().sum::<f64>() + rem.iter().map(|&v| f(v).to_f64c()).sum::<f64>()
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

/// `(sum_zip(x, y, f), sum(x))` in one pass over both, with the bits of those two calls.
#[inline(always)]
pub fn sum_zip_and_sum<M: Math>(x: &[M], y: &[M], f: impl Fn(M, M) -> M) -> (M, M) {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &y[..n]);
    let (mut acc, mut acc_x) = ([M::zero(); LANES], [M::zero(); LANES]);
    let ((cx, rx), (cy, ry)) = (lanes::<LANES, M>(x), lanes::<LANES, M>(y));
    for (a, b) in cx.zip(cy) {
        for j in 0..LANES {
            acc[j] = acc[j] + f(a[j], b[j]);
            acc_x[j] = acc_x[j] + a[j];
        }
    }
    let tail = rx.iter().zip(ry).fold(M::zero(), |s, (&a, &b)| s + f(a, b));
    let tail_x = rx.iter().fold(M::zero(), |s, &a| s + a);
    (fold(acc, tail), fold(acc_x, tail_x))
}

#[inline(always)]
fn fold<const L: usize, M: Math>(acc: [M; L], tail: M) -> M {
    // A barrier between the lanes' loop and this tree, as in `reduce::ops::fold_lanes_generic`:
    // in view of the tree, LLVM vectorized the AVX2 copies' lanes 2-wide.
    let mut acc = std::hint::black_box(acc);
    let mut w = L;
    while w > 1 {
        w /= 2;
        for j in 0..w {
            acc[j] = acc[j] + acc[j + w];
        }
    }
    acc[0] + tail
}

/// Maximum ignoring NaN (a NaN row still yields NaN later through `x - max`); -inf if empty.
#[inline(always)]
pub fn max<M: Math>(x: &[M]) -> M {
    // 16 lanes: with 64 the compare-selects did not vectorize (softmax 40% slower).
    let mut acc = [M::neg_infinity(); EXP_LANES];
    let (chunks, rem) = lanes::<EXP_LANES, M>(x);
    for c in chunks {
        for j in 0..EXP_LANES {
            acc[j] = if c[j] > acc[j] { c[j] } else { acc[j] };
        }
    }
    // The lanes as a tree (no NaN reaches them: `NaN > x` is false), 4 dependent steps
    // instead of 16; then the remainder, where a NaN is skipped the same way.
    let mut acc = std::hint::black_box(acc);
    let mut width = EXP_LANES / 2;
    while width > 0 {
        for j in 0..width {
            acc[j] = if acc[j + width] > acc[j] {
                acc[j + width]
            } else {
                acc[j]
            };
        }
        width /= 2;
    }
    let mut m = acc[0];
    for &v in rem {
        m = if v > m { v } else { m };
    }
    m
}

/// `buf[i] = exp(buf[i] - m)`, returning the sum.
#[inline(always)]
pub fn exp_sub_store<M: FastExp>(isa: Isa, buf: &mut [M], m: M) -> M {
    exp_sub_store_with(buf, m, |x| x.fexp(isa))
}

/// [`exp_sub_store`] with [`FastExp::fexp_flushed`].
#[inline(always)]
pub fn exp_sub_store_flushed<M: FastExp>(isa: Isa, buf: &mut [M], m: M) -> M {
    exp_sub_store_with(buf, m, |x| x.fexp_flushed(isa))
}

#[inline(always)]
fn exp_sub_store_with<M: Math>(buf: &mut [M], m: M, exp: impl Fn(M) -> M) -> M {
    let mut acc = [M::zero(); EXP_LANES];
    let mut chunks = buf.chunks_exact_mut(EXP_LANES);
    for c in &mut chunks {
        for j in 0..EXP_LANES {
            let e = exp(c[j] - m);
            c[j] = e;
            acc[j] = acc[j] + e;
        }
    }
    let mut tail = M::zero();
    for v in chunks.into_remainder() {
        let e = exp(*v - m);
        *v = e;
        tail = tail + e;
    }
    fold(acc, tail)
}

/// `y[i] = exp(x[i] - m)`, returning the sum (the exp pass of a softmax that writes its
/// output directly).
#[inline(always)]
pub fn exp_sub_into<M: FastExp>(isa: Isa, y: &mut [M], x: &[M], m: M) -> M {
    let n = y.len().min(x.len());
    let (y, x) = (&mut y[..n], &x[..n]);
    let mut acc = [M::zero(); EXP_LANES];
    let ((ys, yr), (xs, xr)) = (lanes_mut::<EXP_LANES, M>(y), lanes::<EXP_LANES, M>(x));
    for (c, d) in ys.zip(xs) {
        for j in 0..EXP_LANES {
            let e = (d[j] - m).fexp(isa);
            c[j] = e;
            acc[j] = acc[j] + e;
        }
    }
    let mut tail = M::zero();
    for (v, &u) in yr.iter_mut().zip(xr) {
        let e = (u - m).fexp(isa);
        *v = e;
        tail = tail + e;
    }
    fold(acc, tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fused pass gives the bits of the two sums it replaces, tails included.
    #[test]
    fn sum_zip_and_sum_has_the_separate_sums_bits() {
        for n in [0, 1, 7, LANES, LANES + 3, 1000] {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013)
                .collect();
            let y: Vec<f32> = (0..n)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.021)
                .collect();
            let (zip, plain) = sum_zip_and_sum(&x, &y, |p, q| p * q);
            assert_eq!(
                zip.to_bits(),
                sum_zip(&x, &y, |p, q| p * q).to_bits(),
                "{n}"
            );
            assert_eq!(plain.to_bits(), sum(&x).to_bits(), "{n}");
        }
    }

    #[test]
    fn fast_exp_accuracy() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let got = x.fexp(Isa::BASELINE) as f64;
            let want = (x as f64).exp();
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
        assert_eq!(f32::NEG_INFINITY.fexp(Isa::BASELINE), 0.0);
        assert_eq!(f32::INFINITY.fexp(Isa::BASELINE), f32::INFINITY);
        assert!(f32::NAN.fexp(Isa::BASELINE).is_nan());
        assert_eq!(0.0f32.fexp(Isa::BASELINE), 1.0);
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
}
