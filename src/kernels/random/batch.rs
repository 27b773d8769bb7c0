//! The batch driver of the random kernels: a dense output is filled in batches of [`BATCH`]
//! elements; each batch gets its stream words from one vectorized Philox call
//! ([`philox::fill_blocks`]) and turns them into values with a [`Batch`] transform, compiled
//! for the baseline target, with AVX2+FMA and with AVX-512F (picked at run time).
//!
//! Element `i` reads words `offset + i*w ..` of the stream for a `w`-word-per-element
//! transform, so values depend only on (seed, offset, i), never on the thread count.

use crate::kernels::core::element::Element;
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::par_rows_mut;
use crate::kernels::core::philox;
use crate::kernels::core::simd::Isa;
use crate::kernels::core::vmath;
use crate::tensor::TensorMut;

/// Elements per batch. Batches start at multiples of it, so a transform that pairs elements
/// (Box-Muller) always sees the same pairs.
pub const BATCH: usize = 64;

/// Turns a batch's `BATCH * w` stream words into its (up to `BATCH`) output values. The method
/// is `#[inline(always)]` in every impl so that it is compiled into the AVX2 copy of the loop
/// (a closure would be called out of line, at baseline width).
pub trait Batch<T>: Sync {
    fn fill(&self, words: &[u32], out: &mut [T]);
}

/// A uniform float in [0, 1) from 24 random bits.
#[inline(always)]
pub fn unit_f32(w: u32) -> f32 {
    (w >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
}

#[inline(always)]
fn fill_body<T, B: Batch<T>>(b: &B, words: &[u32], out: &mut [T]) {
    b.fill(words, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fill_avx2<T, B: Batch<T>>(b: &B, words: &[u32], out: &mut [T]) {
    b.fill(words, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn fill_avx512<T, B: Batch<T>>(b: &B, words: &[u32], out: &mut [T]) {
    b.fill(words, out)
}

#[inline(always)]
fn fill<T, B: Batch<T>>(b: &B, words: &[u32], out: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    match crate::kernels::core::simd::level() {
        // SAFETY: the CPU supports AVX-512F, AVX2 and FMA (checked at run time).
        3 => return unsafe { fill_avx512(b, words, out) },
        // SAFETY: the CPU supports AVX2 and FMA (checked at run time).
        2 => return unsafe { fill_avx2(b, words, out) },
        _ => {}
    }
    fill_body(b, words, out)
}

/// Fills the dense `out` batch by batch with `make`, `w` words per element.
pub fn generate_batches<T: Element, B: Batch<T>>(
    out: &TensorMut,
    seed: u64,
    offset: u64,
    w: usize,
    make: &B,
) {
    debug_assert!((1..=4).contains(&w));
    let n = out.numel();
    if n == 0 {
        return;
    }
    // SAFETY: `out` is a live, dense, writable tensor of n > 0 elements of T that nothing else
    // reads or writes during the call.
    let out = unsafe { std::slice::from_raw_parts_mut(out.ptr as *mut T, n) };
    let key = [seed as u32, (seed >> 32) as u32];
    par_rows_mut(out, BATCH, (GRAIN / BATCH).max(1), &|bs, rows| {
        // Up to 4 words per element, plus up to 3 leading words of a partly used block.
        let mut buf = [0u32; 4 * (BATCH + 1)];
        for (b, o) in (bs..).zip(rows.chunks_mut(BATCH)) {
            let e0 = b * BATCH;
            let word = offset.wrapping_add((e0 * w) as u64);
            let lane0 = (word % 4) as usize;
            let blocks = (lane0 + BATCH * w).div_ceil(4);
            philox::fill_blocks(word / 4, key, &mut buf[..blocks * 4]);
            fill(make, &buf[lane0..lane0 + BATCH * w], o);
        }
    });
}

/// A per-element transform `make([u32; W]) -> T`.
struct PerElement<F, const W: usize>(F);

impl<T, F: Fn([u32; W]) -> T + Sync, const W: usize> Batch<T> for PerElement<F, W> {
    #[inline(always)]
    fn fill(&self, words: &[u32], out: &mut [T]) {
        for (o, w) in out.iter_mut().zip(words.chunks_exact(W)) {
            *o = (self.0)(w.try_into().expect("W words"));
        }
    }
}

/// Runs `make(words) -> T` for every element of a dense output, `W` words per element.
pub fn generate<T: Element, const W: usize>(
    out: &TensorMut,
    seed: u64,
    offset: u64,
    make: impl Fn([u32; W]) -> T + Sync,
) {
    generate_batches::<T, _>(out, seed, offset, W, &PerElement::<_, W>(make));
}

/// `from + (to - from) * u` in f32 from one word, kept inside [from, to) after rounding to
/// the storage type (as the CPU backend does).
pub struct UniformBatch {
    from32: f32,
    span32: f32,
    from: f64,
    to: f64,
}

impl UniformBatch {
    pub fn new(from32: f32, to32: f32, from: f64, to: f64) -> Self {
        UniformBatch {
            from32,
            span32: to32 - from32,
            from,
            to,
        }
    }
}

impl<T: Element> Batch<T> for UniformBatch {
    #[inline(always)]
    fn fill(&self, words: &[u32], out: &mut [T]) {
        for (o, &w) in out.iter_mut().zip(words) {
            *o = T::from_f64((self.from32 + self.span32 * unit_f32(w)) as f64);
        }
        if self.to > self.from {
            for o in out.iter_mut() {
                if o.to_f64() >= self.to {
                    *o = T::from_f64(self.from);
                }
            }
        }
    }
}

/// Normal (or log-normal) values by Box-Muller in f32: elements k and k + BATCH/2 of a batch
/// are `r cos θ` and `r sin θ`, with `r = sqrt(-2 ln u1)` from word k and `θ = 2π u2` from word
/// k + BATCH/2 (24-bit uniforms; u1 in (0, 1], so |z| <= 5.77, like the CPU backend's float
/// path). Pairing the halves of a batch keeps loads and stores contiguous, so it vectorizes.
pub struct NormalBatch {
    pub mean: f32,
    pub std: f32,
    pub log: bool,
}

impl<T: Element> Batch<T> for NormalBatch {
    #[inline(always)]
    fn fill(&self, words: &[u32], out: &mut [T]) {
        const H: usize = BATCH / 2;
        const SCALE: f32 = 1.0 / (1u32 << 24) as f32;
        let mut z = [0f32; BATCH];
        let (w1, w2) = words[..BATCH].split_at(H);
        let (z1, z2) = z.split_at_mut(H);
        // Without FMA in every copy: the same numbers for a seed on every CPU.
        let isa = Isa::BASELINE;
        for k in 0..H {
            let u1 = ((w1[k] >> 8) + 1) as f32 * SCALE;
            let u2 = (w2[k] >> 8) as f32 * SCALE;
            let r = (-2.0 * vmath::ln(isa, u1)).sqrt();
            let (s, c) = vmath::sincos_2pi(isa, u2);
            z1[k] = self.mean + self.std * r * c;
            z2[k] = self.mean + self.std * r * s;
        }
        if self.log {
            for z in z.iter_mut() {
                *z = vmath::exp(isa, *z);
            }
        }
        for (o, &z) in out.iter_mut().zip(&z) {
            *o = T::from_f64(z as f64);
        }
    }
}
