//! The reduction ops: one small accumulator type per op family, generic over the element type.
//! Contiguous rows use lane-parallel folds (16 independent accumulators, so the compiler
//! vectorizes them; sums are pairwise over 1024-element blocks for accuracy). Float16 and
//! bfloat16 accumulate in float32, integers and bool sum/multiply in int64.

use super::engine::{self, Reducer};
use crate::dtype::DType;
use crate::error::{FooError, FooResult};
use crate::kernels::core::element::Element;
use crate::kernels::core::float::{FloatStore, Math};
use crate::kernels::core::parallel::SendPtr;
use crate::kernels::core::simd::{FastExp, Isa};
use crate::tensor::{Scalar, TensorMut, TensorRef};
use half::{bf16, f16};
use num_traits::{Float, One, Zero};

/// `foo_reduce`'s op codes.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
pub enum ReduceOp {
    Sum = 0,
    Mean = 1,
    NanSum = 2,
    Prod = 3,
    Max = 4,
    Min = 5,
    ArgMax = 6,
    ArgMin = 7,
    Var = 8,
    Std = 9,
    Norm = 10,
    All = 11,
    Any = 12,
    LogSumExp = 13,
}

/// Real element types with an order (NaN-aware for floats) and identities for max/min.
pub trait Real: Element + PartialOrd {
    const LOWEST: Self;
    const HIGHEST: Self;
    /// Whether the type has NaN (floats).
    const FLOAT: bool;
    fn nan(self) -> bool;
    /// `acc + (x - x)`: stays finite unless some `x` was NaN or infinite (a vectorizable probe).
    fn probe(acc: Self, x: Self) -> Self;
    /// The type compared in vector loops: float32 for float16/bfloat16, whose own comparisons
    /// are scalar conversions (a bfloat16 `amax` took 2-6x the CPU's time), else itself.
    type Wide: Real;
    /// `self` exactly, as [`Real::Wide`].
    fn widen(self) -> Self::Wide;
    /// A value of [`Real::widen`]'s back (exact for those).
    fn narrow(w: Self::Wide) -> Self;
}

macro_rules! real_int {
    ($($t:ty),*) => {$(
        impl Real for $t {
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            const FLOAT: bool = false;
            #[inline(always)]
            fn nan(self) -> bool { false }
            #[inline(always)]
            fn probe(acc: Self, _x: Self) -> Self { acc }
            type Wide = Self;
            #[inline(always)]
            fn widen(self) -> Self { self }
            #[inline(always)]
            fn narrow(w: Self) -> Self { w }
        }
    )*};
}
real_int!(u8, i8, i16, i32, i64, u16, u32, u64);

macro_rules! real_float {
    ($($t:ty => $wide:ty, $widen:expr, $narrow:expr);*) => {$(
        impl Real for $t {
            type Wide = $wide;
            #[inline(always)]
            fn widen(self) -> $wide { $widen(self) }
            #[inline(always)]
            fn narrow(w: $wide) -> Self { $narrow(w) }
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            const FLOAT: bool = true;
            #[inline(always)]
            #[allow(clippy::eq_op)]
            fn nan(self) -> bool { self != self }
            #[inline(always)]
            #[allow(clippy::eq_op)]
            fn probe(acc: Self, x: Self) -> Self { acc + (x - x) }
        }
    )*};
}
real_float!(
    f32 => f32, |x| x, |w| w;
    f64 => f64, |x| x, |w| w;
    f16 => f32, f16::to_f32, f16::from_f32;
    bf16 => f32, bf16::to_f32, bf16::from_f32
);

impl Real for bool {
    const LOWEST: Self = false;
    const HIGHEST: Self = true;
    const FLOAT: bool = false;
    #[inline(always)]
    fn nan(self) -> bool {
        false
    }
    #[inline(always)]
    fn probe(acc: Self, _x: Self) -> Self {
        acc
    }
    type Wide = Self;
    #[inline(always)]
    fn widen(self) -> Self {
        self
    }
    #[inline(always)]
    fn narrow(w: Self) -> Self {
        w
    }
}

/// `x` should replace `cur` as the running max (or min): strictly better, or the first NaN.
#[inline(always)]
fn better<T: Real>(max: bool, x: T, cur: T) -> bool {
    (if max { x > cur } else { x < cur }) || (x.nan() && !cur.nan())
}

const LANES: usize = 32;

/// The max (or min) of a non-empty dense block, NaN if it holds a NaN (the first one): a
/// vectorizable compare-select pass plus an arithmetic NaN probe; only a block whose probe
/// trips (a NaN or an infinity) is rescanned for NaN.
#[inline(always)]
fn extreme<T: Real>(max: bool, xs: &[T]) -> T {
    let v = if max {
        fold_lanes(
            xs,
            T::Wide::LOWEST,
            T::widen,
            |a, b| if b > a { b } else { a },
        )
    } else {
        fold_lanes(
            xs,
            T::Wide::HIGHEST,
            T::widen,
            |a, b| if b < a { b } else { a },
        )
    };
    if T::FLOAT {
        let p = fold_lanes(xs, T::Wide::default(), T::widen, T::Wide::probe);
        if p.nan() {
            if let Some(&n) = xs.iter().find(|x| x.nan()) {
                return n;
            }
        }
    }
    T::narrow(v)
}
const BLOCK: usize = 4096;

/// Folds `g(x)` over `xs` with `op` in `L` independent lanes (vectorizable), then combines
/// them in a halving tree (see `BARRIER` below).
#[inline(always)]
fn fold_lanes_generic<const L: usize, const BARRIER: bool, S: Copy, A: Copy>(
    xs: &[S],
    id: A,
    g: impl Fn(S) -> A,
    op: impl Fn(A, A) -> A,
) -> A {
    let mut lanes = [id; L];
    let mut chunks = xs.chunks_exact(L);
    for c in &mut chunks {
        let c: &[S; L] = c.try_into().expect("chunks_exact yields full chunks");
        let v: [A; L] = std::array::from_fn(|i| g(c[i]));
        for i in 0..L {
            lanes[i] = op(lanes[i], v[i]);
        }
    }
    // The remainder in 16-wide steps into the first lanes, then one at a time: a 1000-element
    // row leaves 40 after the 64-lane loop, and a serial chain of 40 adds cost more than the
    // vector loop itself.
    const STEP: usize = 16;
    let mut rest = chunks.remainder().chunks_exact(STEP);
    if L >= STEP {
        for c in &mut rest {
            let c: &[S; STEP] = c.try_into().expect("chunks_exact yields full chunks");
            for i in 0..STEP {
                lanes[i] = op(lanes[i], g(c[i]));
            }
        }
    }
    let tail_elems = if L >= STEP {
        rest.remainder()
    } else {
        chunks.remainder()
    };
    let mut tail = id;
    for &x in tail_elems {
        tail = op(tail, g(x));
    }
    // `BARRIER` keeps the tree below out of LLVM's view of the loop above: with it in view,
    // the AVX2 copy paired the lanes into 2-wide vectors with spills (a 1000x1000 sum took 1.75x
    // the CPU's time on a Zen 3; 3x faster with the barrier). The AVX-512 copy does without:
    // behind the barrier its tree became 2-wide loads of the vectors just stored, which stall
    // store forwarding (Zen 4, one thread, float32 sums of 8192 rows of 64: 114 -> 55 us, of
    // 1000 rows of 1000: 58 -> 49; the same tree, so the same bits).
    let mut lanes = if BARRIER {
        std::hint::black_box(lanes)
    } else {
        lanes
    };
    let mut w = L;
    while w > 1 {
        w /= 2;
        for i in 0..w {
            lanes[i] = op(lanes[i], lanes[i + w]);
        }
    }
    op(lanes[0], tail)
}

/// [`fold_lanes_generic`] compiled for AVX2 + FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fold_lanes_avx2<S: Copy, A: Copy>(
    xs: &[S],
    id: A,
    g: impl Fn(S) -> A,
    op: impl Fn(A, A) -> A,
) -> A {
    fold_lanes_generic::<LANES, true, S, A>(xs, id, g, op)
}

/// [`fold_lanes_generic`] compiled for AVX-512 (twice the lanes, to hide the add latency).
/// `#[inline]`, as [`FloatAcc`]'s `row`: both inline into the AVX-512 copy of the engine's
/// dense-rows loop (a call per 1000-float row took 7% of a 1000x1000 `sum(dim=-1)`, 50 -> 46
/// us on one Zen 4 thread, the same bits).
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL/DQ, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
#[inline]
unsafe fn fold_lanes_avx512<S: Copy, A: Copy>(
    xs: &[S],
    id: A,
    g: impl Fn(S) -> A,
    op: impl Fn(A, A) -> A,
) -> A {
    fold_lanes_generic::<{ 2 * LANES }, false, S, A>(xs, id, g, op)
}

/// Folds `g(x)` over `xs` with `op` in 16 lanes, with AVX2 code where the CPU has it (the
/// crate is built for baseline x86-64, as PyTorch's own kernels dispatch at run time).
#[inline(always)]
fn fold_lanes<S: Copy, A: Copy>(xs: &[S], id: A, g: impl Fn(S) -> A, op: impl Fn(A, A) -> A) -> A {
    // Under one 16-wide step the lanes would all stay `id` and `xs` be folded in order as
    // their tail: that, without the feature checks and the call, which cost more than a short
    // row (a mean over 2x2 planes took 1.7x the CPU's time).
    if xs.len() < 16 {
        return op(id, xs.iter().fold(id, |a, &x| op(a, g(x))));
    }
    #[cfg(target_arch = "x86_64")]
    {
        let level = crate::kernels::core::simd::level();
        if level >= 3 && std::mem::size_of::<A>() <= 8 {
            // SAFETY: the AVX-512 features are available (checked at run time).
            return unsafe { fold_lanes_avx512(xs, id, g, op) };
        }
        if level >= 2 {
            // SAFETY: AVX2 and FMA are available (checked at run time).
            return unsafe { fold_lanes_avx2(xs, id, g, op) };
        }
    }
    fold_lanes_generic::<LANES, true, S, A>(xs, id, g, op)
}

/// Pairwise sum of `g(x)` over `xs`: blocks of [`BLOCK`] folded in lanes, block sums merged
/// pairwise (a binary counter), so the error grows with log(len) rather than len.
#[inline(always)]
fn fold_sum<S: Copy, A: Copy + std::ops::Add<Output = A>>(
    xs: &[S],
    zero: A,
    g: impl Fn(S) -> A + Copy,
) -> A {
    if xs.len() <= BLOCK {
        return fold_lanes(xs, zero, g, |a, b| a + b);
    }
    let mut stack = [zero; 64];
    let mut nb = 0usize;
    for block in xs.chunks(BLOCK) {
        let mut s = fold_lanes(block, zero, g, |a, b| a + b);
        let mut k = nb;
        let mut lvl = 0;
        while k & 1 == 1 {
            s = stack[lvl] + s;
            k >>= 1;
            lvl += 1;
        }
        stack[lvl] = s;
        nb += 1;
    }
    let mut total = zero;
    for (lvl, &v) in stack.iter().enumerate().rev() {
        if (nb >> lvl) & 1 == 1 {
            total = total + v;
        }
    }
    total
}

/// `len` elements at `p` with stride `s`, as a slice when dense.
///
/// # Safety
/// The elements must be readable.
#[inline(always)]
unsafe fn each<T: Copy>(p: *const T, len: usize, s: isize, mut f: impl FnMut(usize, T)) {
    for i in 0..len {
        // SAFETY: caller's contract.
        f(i, unsafe { *p.offset(i as isize * s) });
    }
}

#[inline(always)]
unsafe fn write<T>(base: SendPtr<u8>, off: isize, v: T) {
    // SAFETY: caller's contract (offset of an output element).
    unsafe { *base.cast::<T>().at(off) = v };
}

// ---- sum / mean / nansum / prod on floats ------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum FOp {
    Sum,
    Mean,
    NanSum,
    Prod,
}

struct FloatAcc<F> {
    out: SendPtr<u8>,
    op: FOp,
    _t: std::marker::PhantomData<F>,
}

/// `accs[j] += sum over k < rows of p[k * rs + j]`, `B` columns at a time in registers; the
/// columns past the last whole block go through [`Reducer::cols`].
///
/// # Safety
/// As [`Reducer::cols_rows`].
#[inline(always)]
unsafe fn sum_cols_blocked<F: FloatStore, const B: usize>(
    r: &FloatAcc<F>,
    accs: &mut [F::M],
    p: *const F,
    rows: usize,
    rs: isize,
    idx: usize,
) {
    let l = accs.len();
    if short_rows(l, rs) && rows >= 2 * (RUN / l) {
        // SAFETY: forwarded.
        unsafe { sum_short_rows(r, accs, p, rows, idx) };
        return;
    }
    let mut blocks = accs.chunks_exact_mut(B);
    let mut c = 0;
    for block in &mut blocks {
        let mut a: [F::M; B] = std::array::from_fn(|j| block[j]);
        for k in 0..rows {
            // SAFETY: columns c..c + B of row k (caller's contract).
            let xs =
                unsafe { std::slice::from_raw_parts(p.offset(k as isize * rs + c as isize), B) };
            for (a, x) in a.iter_mut().zip(xs) {
                *a = *a + x.load();
            }
        }
        block.copy_from_slice(&a);
        c += B;
    }
    let tail = blocks.into_remainder();
    if !tail.is_empty() {
        for k in 0..rows {
            // SAFETY: the remaining columns of row k (caller's contract).
            unsafe { r.cols(tail, p.offset(k as isize * rs + c as isize), idx + k) };
        }
    }
}

/// Elements [`sum_short_rows`] folds per step.
const RUN: usize = 256;

/// Whether rows of `cols` columns, `rs` apart, are [`sum_short_rows`]'s: narrower than a
/// register block of [`sum_cols_blocked`], and each row right after the previous one.
fn short_rows(cols: usize, rs: isize) -> bool {
    cols > 0 && cols < 64 && rs == cols as isize
}

/// [`sum_cols_blocked`] for rows of `l = accs.len()` columns that follow each other (row `k`
/// at `p + k * l`): `g = RUN / l` rows are one run of `g * l` elements, folded into as many
/// accumulators, whose `g` partial sums of each column are then added in order. One short row
/// at a time, `[100000, 8].sum(0)` took 2.5x the CPU's time on one thread. Its cascades are
/// `RUN / l` times longer ([`Reducer::cascade_rows`]), so that each accumulator still adds
/// [`engine::CASCADE`] values before the block is merged.
///
/// # Safety
/// As [`Reducer::cols_rows`] with `rs == l`.
#[inline(always)]
unsafe fn sum_short_rows<F: FloatStore>(
    r: &FloatAcc<F>,
    accs: &mut [F::M],
    p: *const F,
    rows: usize,
    idx: usize,
) {
    let l = accs.len();
    let g = RUN / l;
    let w = g * l;
    let mut a = [F::M::zero(); RUN];
    let a = &mut a[..w];
    let runs = rows / g;
    for k in 0..runs {
        // SAFETY: rows k * g..(k + 1) * g, one dense run of w elements (caller's contract).
        let xs = unsafe { std::slice::from_raw_parts(p.add(k * w), w) };
        for (a, x) in a.iter_mut().zip(xs) {
            *a = *a + x.load();
        }
    }
    for part in a.chunks_exact(l) {
        for (acc, &v) in accs.iter_mut().zip(part) {
            *acc = *acc + v;
        }
    }
    for k in runs * g..rows {
        // SAFETY: row k (caller's contract).
        unsafe { r.cols(accs, p.add(k * l), idx + k) };
    }
}

impl<F: FloatStore> Reducer for FloatAcc<F> {
    type In = F;
    type Acc = F::M;
    fn init(&self) -> F::M {
        if self.op == FOp::Prod {
            F::M::one()
        } else {
            F::M::zero()
        }
    }
    #[inline(always)]
    unsafe fn row(&self, acc: &mut F::M, p: *const F, len: usize, s: isize, _idx: usize) {
        let z = F::M::zero();
        if s == 1 {
            // SAFETY: caller's contract.
            let xs = unsafe { std::slice::from_raw_parts(p, len) };
            *acc = match self.op {
                FOp::Sum | FOp::Mean => *acc + fold_sum(xs, z, |x: F| x.load()),
                FOp::NanSum => {
                    *acc + fold_sum(xs, z, |x: F| {
                        let v = x.load();
                        if v.is_nan() {
                            z
                        } else {
                            v
                        }
                    })
                }
                FOp::Prod => *acc * fold_lanes(xs, F::M::one(), |x: F| x.load(), |a, b| a * b),
            };
            return;
        }
        let mut a = *acc;
        // SAFETY: caller's contract.
        unsafe {
            match self.op {
                FOp::Sum | FOp::Mean => each(p, len, s, |_, x| a = a + x.load()),
                FOp::NanSum => each(p, len, s, |_, x| {
                    if !x.load().is_nan() {
                        a = a + x.load()
                    }
                }),
                FOp::Prod => each(p, len, s, |_, x| a = a * x.load()),
            }
        }
        *acc = a;
    }
    fn cascade_rows(&self, cols: usize, rs: isize) -> usize {
        // sum_short_rows adds RUN / cols rows into each of its accumulators' one.
        match matches!(self.op, FOp::Sum | FOp::Mean) && short_rows(cols, rs) {
            true => engine::CASCADE * (RUN / cols),
            false => engine::CASCADE,
        }
    }
    #[inline(always)]
    unsafe fn cols_rows(&self, accs: &mut [F::M], p: *const F, rows: usize, rs: isize, idx: usize) {
        if !matches!(self.op, FOp::Sum | FOp::Mean) {
            for k in 0..rows {
                // SAFETY: caller's contract.
                unsafe { self.cols(accs, p.offset(k as isize * rs), idx + k) };
            }
            return;
        }
        // Sums: a block of 64 accumulators (4 AVX-512 vectors of f32) stays in registers while
        // the rows stream past, one load per input vector (measured on 1000x1000 f32, one
        // thread: 144 us with one dispatched call per row, 63 us; 128 columns or software
        // prefetch: no gain).
        // SAFETY: caller's contract.
        unsafe { sum_cols_blocked::<F, 64>(self, accs, p, rows, rs, idx) }
    }
    #[inline(always)]
    unsafe fn cols(&self, accs: &mut [F::M], p: *const F, _idx: usize) {
        // SAFETY: caller's contract.
        let xs = unsafe { std::slice::from_raw_parts(p, accs.len()) };
        match self.op {
            FOp::Sum | FOp::Mean => accs
                .iter_mut()
                .zip(xs)
                .for_each(|(a, x)| *a = *a + x.load()),
            FOp::NanSum => accs.iter_mut().zip(xs).for_each(|(a, x)| {
                let v = x.load();
                *a = *a + if v.is_nan() { F::M::zero() } else { v }
            }),
            FOp::Prod => accs
                .iter_mut()
                .zip(xs)
                .for_each(|(a, x)| *a = *a * x.load()),
        }
    }
    fn merge(&self, a: F::M, b: F::M) -> F::M {
        if self.op == FOp::Prod {
            a * b
        } else {
            a + b
        }
    }
    unsafe fn finish(&self, acc: F::M, n: usize, o1: isize, _o2: isize) {
        let v = if self.op == FOp::Mean {
            // As the CPU backend: the sum divided in the accumulation type (f32 for f16/bf16),
            // then rounded once. Rounding the sum first overflowed f16 (1e5 tens: inf).
            F::store(acc / F::M::from_f64c(n as f64))
        } else {
            F::store(acc)
        };
        // SAFETY: caller's contract.
        unsafe { write(self.out, o1, v) };
    }
}

// ---- sum / prod on integers and bool (int64 accumulation) -----------------------------------

struct IntAcc<T> {
    out: SendPtr<u8>,
    prod: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: Element> Reducer for IntAcc<T> {
    type In = T;
    type Acc = i64;
    fn init(&self) -> i64 {
        self.prod as i64
    }
    unsafe fn row(&self, acc: &mut i64, p: *const T, len: usize, s: isize, _idx: usize) {
        if s == 1 {
            // SAFETY: caller's contract.
            let xs = unsafe { std::slice::from_raw_parts(p, len) };
            *acc = if self.prod {
                acc.wrapping_mul(fold_lanes(xs, 1i64, |x: T| x.to_i64(), i64::wrapping_mul))
            } else {
                acc.wrapping_add(fold_lanes(xs, 0i64, |x: T| x.to_i64(), i64::wrapping_add))
            };
            return;
        }
        let mut a = *acc;
        // SAFETY: caller's contract.
        unsafe {
            if self.prod {
                each(p, len, s, |_, x| a = a.wrapping_mul(x.to_i64()));
            } else {
                each(p, len, s, |_, x| a = a.wrapping_add(x.to_i64()));
            }
        }
        *acc = a;
    }
    #[inline(always)]
    unsafe fn cols(&self, accs: &mut [i64], p: *const T, _idx: usize) {
        // SAFETY: caller's contract.
        let xs = unsafe { std::slice::from_raw_parts(p, accs.len()) };
        if self.prod {
            accs.iter_mut()
                .zip(xs)
                .for_each(|(a, x)| *a = a.wrapping_mul(x.to_i64()));
        } else {
            accs.iter_mut()
                .zip(xs)
                .for_each(|(a, x)| *a = a.wrapping_add(x.to_i64()));
        }
    }
    fn merge(&self, a: i64, b: i64) -> i64 {
        if self.prod {
            a.wrapping_mul(b)
        } else {
            a.wrapping_add(b)
        }
    }
    unsafe fn finish(&self, acc: i64, _n: usize, o1: isize, _o2: isize) {
        // SAFETY: caller's contract.
        unsafe { write(self.out, o1, acc) };
    }
}

// ---- max / min (values) ---------------------------------------------------------------------

struct MinMax<T> {
    out: SendPtr<u8>,
    max: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: Real> MinMax<T> {
    #[inline(always)]
    fn pick(&self, a: T, b: T) -> T {
        if better(self.max, b, a) {
            b
        } else {
            a
        }
    }
}

impl<T: Real> Reducer for MinMax<T> {
    type In = T;
    type Acc = T;
    fn init(&self) -> T {
        if self.max {
            T::LOWEST
        } else {
            T::HIGHEST
        }
    }
    unsafe fn row(&self, acc: &mut T, p: *const T, len: usize, s: isize, _idx: usize) {
        if s == 1 {
            // SAFETY: caller's contract.
            let xs = unsafe { std::slice::from_raw_parts(p, len) };
            for block in xs.chunks(BLOCK) {
                *acc = self.pick(*acc, extreme(self.max, block));
            }
            return;
        }
        let mut a = *acc;
        // SAFETY: caller's contract.
        unsafe { each(p, len, s, |_, x| a = self.pick(a, x)) };
        *acc = a;
    }
    #[inline(always)]
    unsafe fn cols(&self, accs: &mut [T], p: *const T, _idx: usize) {
        // SAFETY: caller's contract.
        let xs = unsafe { std::slice::from_raw_parts(p, accs.len()) };
        // Selects (not branches), so the loop vectorizes; NaN sticks once taken.
        if self.max {
            accs.iter_mut()
                .zip(xs)
                .for_each(|(a, &x)| *a = if x > *a || x.nan() { x } else { *a });
        } else {
            accs.iter_mut()
                .zip(xs)
                .for_each(|(a, &x)| *a = if x < *a || x.nan() { x } else { *a });
        }
    }
    fn merge(&self, a: T, b: T) -> T {
        self.pick(a, b)
    }
    unsafe fn finish(&self, acc: T, _n: usize, o1: isize, _o2: isize) {
        // SAFETY: caller's contract.
        unsafe { write(self.out, o1, acc) };
    }
}

// ---- argmax / argmin (first occurrence; the first NaN wins) ---------------------------------

struct Arg<T> {
    /// Values output (0 when only indices are wanted) and indices output.
    vals: SendPtr<u8>,
    idx: SendPtr<u8>,
    max: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: Real> Arg<T> {
    #[inline(always)]
    fn take(&self, x: T, cur: (T, i64)) -> bool {
        cur.1 < 0 || better(self.max, x, cur.0)
    }
}

impl<T: Real> Reducer for Arg<T> {
    type In = T;
    type Acc = (T, i64);
    fn init(&self) -> (T, i64) {
        (T::default(), -1)
    }
    unsafe fn row(&self, acc: &mut (T, i64), p: *const T, len: usize, s: isize, idx: usize) {
        if s == 1 {
            // SAFETY: caller's contract.
            let xs = unsafe { std::slice::from_raw_parts(p, len) };
            for (b, block) in xs.chunks(BLOCK).enumerate() {
                let v = extreme(self.max, block);
                if self.take(v, *acc) {
                    let vn = v.nan();
                    if let Some(j) = block.iter().position(|&x| x == v || (vn && x.nan())) {
                        *acc = (v, (idx + b * BLOCK + j) as i64);
                    }
                }
            }
            return;
        }
        let mut a = *acc;
        // SAFETY: caller's contract.
        unsafe {
            each(p, len, s, |i, x| {
                if self.take(x, a) {
                    a = (x, (idx + i) as i64)
                }
            })
        };
        *acc = a;
    }
    #[inline(always)]
    unsafe fn cols(&self, accs: &mut [(T, i64)], p: *const T, idx: usize) {
        // SAFETY: caller's contract.
        let xs = unsafe { std::slice::from_raw_parts(p, accs.len()) };
        for (a, &x) in accs.iter_mut().zip(xs) {
            if self.take(x, *a) {
                *a = (x, idx as i64);
            }
        }
    }
    fn merge(&self, a: (T, i64), b: (T, i64)) -> (T, i64) {
        if b.1 >= 0 && self.take(b.0, a) {
            b
        } else {
            a
        }
    }
    unsafe fn finish(&self, acc: (T, i64), _n: usize, o1: isize, o2: isize) {
        let i = acc.1.max(0);
        // SAFETY: caller's contract.
        unsafe {
            if !self.vals.get().is_null() {
                write(self.vals, o1, acc.0);
                write(self.idx, o2, i);
            } else {
                write(self.idx, o1, i);
            }
        }
    }
}

// ---- var / std (float64 Welford/Chan accumulators; dense blocks use two passes) ---------------

#[derive(Clone, Copy)]
struct Moments {
    n: f64,
    mean: f64,
    m2: f64,
}

impl Moments {
    const ZERO: Moments = Moments {
        n: 0.0,
        mean: 0.0,
        m2: 0.0,
    };
    #[inline(always)]
    fn merge(a: Moments, b: Moments) -> Moments {
        if a.n == 0.0 {
            return b;
        }
        if b.n == 0.0 {
            return a;
        }
        let n = a.n + b.n;
        let d = b.mean - a.mean;
        Moments {
            n,
            mean: a.mean + d * (b.n / n),
            m2: a.m2 + b.m2 + d * d * (a.n * b.n / n),
        }
    }
    #[inline(always)]
    fn push(self, x: f64) -> Moments {
        let n = self.n + 1.0;
        let d = x - self.mean;
        let mean = self.mean + d / n;
        Moments {
            n,
            mean,
            m2: self.m2 + d * (x - mean),
        }
    }
}

struct Var<F> {
    out: SendPtr<u8>,
    /// Mean output (var_mean / std_mean), or 0.
    mean_out: SendPtr<u8>,
    correction: f64,
    std: bool,
    _t: std::marker::PhantomData<F>,
}

impl<F: FloatStore> Reducer for Var<F> {
    type In = F;
    type Acc = Moments;
    fn init(&self) -> Moments {
        Moments::ZERO
    }
    unsafe fn row(&self, acc: &mut Moments, p: *const F, len: usize, s: isize, _idx: usize) {
        if s == 1 {
            // SAFETY: caller's contract.
            let xs = unsafe { std::slice::from_raw_parts(p, len) };
            for block in xs.chunks(BLOCK) {
                let n = block.len() as f64;
                let mean = fold_lanes(block, 0.0, |x: F| x.load().to_f64c(), |a, b| a + b) / n;
                let m2 = fold_lanes(
                    block,
                    0.0,
                    |x: F| {
                        let d = x.load().to_f64c() - mean;
                        d * d
                    },
                    |a, b| a + b,
                );
                *acc = Moments::merge(*acc, Moments { n, mean, m2 });
            }
            return;
        }
        let mut a = *acc;
        // SAFETY: caller's contract.
        unsafe { each(p, len, s, |_, x| a = a.push(x.load().to_f64c())) };
        *acc = a;
    }
    #[inline(always)]
    unsafe fn cols(&self, accs: &mut [Moments], p: *const F, _idx: usize) {
        // SAFETY: caller's contract.
        let xs = unsafe { std::slice::from_raw_parts(p, accs.len()) };
        for (a, x) in accs.iter_mut().zip(xs) {
            *a = a.push(x.load().to_f64c());
        }
    }
    fn merge(&self, a: Moments, b: Moments) -> Moments {
        Moments::merge(a, b)
    }
    unsafe fn finish(&self, acc: Moments, _n: usize, o1: isize, o2: isize) {
        let dof = (acc.n - self.correction).max(0.0);
        let mut v = acc.m2 / dof;
        if self.std {
            v = v.sqrt();
        }
        // SAFETY: caller's contract.
        unsafe {
            write(self.out, o1, F::store(F::M::from_f64c(v)));
            if !self.mean_out.get().is_null() {
                let m = if acc.n == 0.0 { f64::NAN } else { acc.mean };
                write(self.mean_out, o2, F::store(F::M::from_f64c(m)));
            }
        }
    }
}

// ---- vector norms ------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum NormKind {
    Two,
    One,
    Inf,
    NegInf,
    Zero,
    P(f64),
}

struct Norm<F: FloatStore> {
    out: SendPtr<u8>,
    kind: NormKind,
    p: F::M,
}

#[inline(always)]
fn nanmax<M: Float>(a: M, b: M) -> M {
    if b > a || (b.is_nan() && !a.is_nan()) {
        b
    } else {
        a
    }
}

#[inline(always)]
fn nanmin<M: Float>(a: M, b: M) -> M {
    if b < a || (b.is_nan() && !a.is_nan()) {
        b
    } else {
        a
    }
}

impl<F: FloatStore> Norm<F> {
    #[inline(always)]
    fn term(&self, x: F::M) -> F::M {
        match self.kind {
            NormKind::Two => x * x,
            NormKind::One | NormKind::Inf | NormKind::NegInf => x.abs(),
            NormKind::Zero => {
                if x != F::M::zero() {
                    F::M::one()
                } else {
                    F::M::zero()
                }
            }
            NormKind::P(_) => x.abs().powf(self.p),
        }
    }
    #[inline(always)]
    fn comb(&self, a: F::M, b: F::M) -> F::M {
        match self.kind {
            NormKind::Inf => nanmax(a, b),
            NormKind::NegInf => nanmin(a, b),
            _ => a + b,
        }
    }
}

impl<F: FloatStore> Reducer for Norm<F> {
    type In = F;
    type Acc = F::M;
    fn init(&self) -> F::M {
        if self.kind == NormKind::NegInf {
            F::M::infinity()
        } else {
            F::M::zero()
        }
    }
    unsafe fn row(&self, acc: &mut F::M, p: *const F, len: usize, s: isize, _idx: usize) {
        if s == 1 {
            // SAFETY: caller's contract.
            let xs = unsafe { std::slice::from_raw_parts(p, len) };
            let z = F::M::zero();
            let v = match self.kind {
                NormKind::Two => fold_sum(xs, z, |x: F| {
                    let v = x.load();
                    v * v
                }),
                NormKind::One => fold_sum(xs, z, |x: F| x.load().abs()),
                NormKind::Zero => {
                    fold_sum(xs, z, |x: F| if x.load() != z { F::M::one() } else { z })
                }
                NormKind::Inf => fold_lanes(xs, z, |x: F| x.load().abs(), nanmax),
                NormKind::NegInf => fold_lanes(xs, F::M::infinity(), |x: F| x.load().abs(), nanmin),
                NormKind::P(_) => fold_sum(xs, z, |x: F| x.load().abs().powf(self.p)),
            };
            *acc = self.comb(*acc, v);
            return;
        }
        let mut a = *acc;
        // SAFETY: caller's contract.
        unsafe { each(p, len, s, |_, x| a = self.comb(a, self.term(x.load()))) };
        *acc = a;
    }
    #[inline(always)]
    unsafe fn cols(&self, accs: &mut [F::M], p: *const F, _idx: usize) {
        // SAFETY: caller's contract.
        let xs = unsafe { std::slice::from_raw_parts(p, accs.len()) };
        for (a, x) in accs.iter_mut().zip(xs) {
            *a = self.comb(*a, self.term(x.load()));
        }
    }
    fn merge(&self, a: F::M, b: F::M) -> F::M {
        self.comb(a, b)
    }
    unsafe fn finish(&self, acc: F::M, _n: usize, o1: isize, _o2: isize) {
        let v = match self.kind {
            NormKind::Two => acc.sqrt(),
            NormKind::P(_) => acc.powf(F::M::one() / self.p),
            _ => acc,
        };
        // SAFETY: caller's contract.
        unsafe { write(self.out, o1, F::store(v)) };
    }
}

// ---- all / any ---------------------------------------------------------------------------

struct AllAny<T> {
    out: SendPtr<u8>,
    all: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: Element> Reducer for AllAny<T> {
    type In = T;
    type Acc = bool;
    fn init(&self) -> bool {
        self.all
    }
    unsafe fn row(&self, acc: &mut bool, p: *const T, len: usize, s: isize, _idx: usize) {
        if *acc != self.all {
            return; // already decided
        }
        let z = T::default();
        if s == 1 {
            // SAFETY: caller's contract.
            let xs = unsafe { std::slice::from_raw_parts(p, len) };
            *acc = if self.all {
                xs.iter().all(|&x| x != z)
            } else {
                xs.iter().any(|&x| x != z)
            };
            return;
        }
        for i in 0..len as isize {
            // SAFETY: caller's contract.
            let x = unsafe { *p.offset(i * s) };
            if (x != z) != self.all {
                *acc = !self.all;
                return;
            }
        }
    }
    #[inline(always)]
    unsafe fn cols(&self, accs: &mut [bool], p: *const T, _idx: usize) {
        // SAFETY: caller's contract.
        let xs = unsafe { std::slice::from_raw_parts(p, accs.len()) };
        let z = T::default();
        if self.all {
            accs.iter_mut().zip(xs).for_each(|(a, &x)| *a &= x != z);
        } else {
            accs.iter_mut().zip(xs).for_each(|(a, &x)| *a |= x != z);
        }
    }
    fn merge(&self, a: bool, b: bool) -> bool {
        if self.all {
            a && b
        } else {
            a || b
        }
    }
    unsafe fn finish(&self, acc: bool, _n: usize, o1: isize, _o2: isize) {
        // SAFETY: caller's contract.
        unsafe { write(self.out, o1, acc) };
    }
}

// ---- logsumexp ---------------------------------------------------------------------------

/// Running max `m`, the finite shift in use (`m`, or 0 when `m` is infinite) and
/// `s = sum(exp(x - shift))`.
#[derive(Clone, Copy)]
struct Lse<M> {
    m: M,
    shift: M,
    s: M,
}

struct LogSumExp<F> {
    out: SendPtr<u8>,
    _t: std::marker::PhantomData<F>,
}

#[inline(always)]
fn lse_merge<M: Float>(a: Lse<M>, b: Lse<M>) -> Lse<M> {
    let m = nanmax(a.m, b.m);
    let shift = if m.is_finite() { m } else { M::zero() };
    let part = |x: Lse<M>| {
        if x.s == M::zero() {
            M::zero()
        } else {
            x.s * (x.shift - shift).exp()
        }
    };
    Lse {
        m,
        shift,
        s: part(a) + part(b),
    }
}

#[inline(always)]
fn lse_one<M: Float>(x: M) -> Lse<M> {
    let shift = if x.is_finite() { x } else { M::zero() };
    Lse {
        m: x,
        shift,
        s: (x - shift).exp(),
    }
}

impl<F: FloatStore> Reducer for LogSumExp<F>
where
    F::M: FastExp,
{
    type In = F;
    type Acc = Lse<F::M>;
    fn init(&self) -> Lse<F::M> {
        Lse {
            m: F::M::neg_infinity(),
            shift: F::M::zero(),
            s: F::M::zero(),
        }
    }
    unsafe fn row(&self, acc: &mut Lse<F::M>, p: *const F, len: usize, s: isize, _idx: usize) {
        if s == 1 {
            // SAFETY: caller's contract.
            let xs = unsafe { std::slice::from_raw_parts(p, len) };
            for block in xs.chunks(BLOCK) {
                let m = fold_lanes(block, F::M::neg_infinity(), |x: F| x.load(), nanmax);
                let shift = if m.is_finite() { m } else { F::M::zero() };
                // The vectorizable exp (libm's is a call per element, which kept this loop
                // scalar: 2.6x the CPU's time on 1000x1000 float32), with FMA where the
                // lanes' copy has it.
                let s = if crate::kernels::core::simd::level() >= 2 {
                    fold_sum(block, F::M::zero(), |x: F| {
                        (x.load() - shift).fexp(Isa::FMA)
                    })
                } else {
                    fold_sum(block, F::M::zero(), |x: F| {
                        (x.load() - shift).fexp(Isa::BASELINE)
                    })
                };
                *acc = lse_merge(*acc, Lse { m, shift, s });
            }
            return;
        }
        // Short strided rows (longer ones arrive gathered, see engine::row_dense) are gathered
        // too and folded as one block: merged element by element, the sum of exponentials was
        // a sequential float32 sum (25389 terms near 1 came out 2e-5 off, the CPU's cascade sum
        // 4e-8).
        let mut buf = [F::default(); 64];
        for start in (0..len).step_by(buf.len()) {
            let n = (len - start).min(buf.len());
            // SAFETY: elements start..start + n of the row (caller's contract).
            unsafe { each(p.offset(start as isize * s), n, s, |i, x| buf[i] = x) };
            // SAFETY: the buffer holds n dense elements.
            unsafe { self.row(acc, buf.as_ptr(), n, 1, 0) };
        }
    }
    #[inline(always)]
    unsafe fn cols(&self, accs: &mut [Lse<F::M>], p: *const F, _idx: usize) {
        // SAFETY: caller's contract.
        let xs = unsafe { std::slice::from_raw_parts(p, accs.len()) };
        for (a, x) in accs.iter_mut().zip(xs) {
            *a = lse_merge(*a, lse_one(x.load()));
        }
    }
    fn merge(&self, a: Lse<F::M>, b: Lse<F::M>) -> Lse<F::M> {
        lse_merge(a, b)
    }
    unsafe fn finish(&self, acc: Lse<F::M>, _n: usize, o1: isize, _o2: isize) {
        let v = if acc.m.is_nan() {
            acc.m
        } else {
            acc.s.ln() + acc.shift
        };
        // SAFETY: caller's contract.
        unsafe { write(self.out, o1, F::store(v)) };
    }
}

// ---- entry point -------------------------------------------------------------------------

fn expect(what: &str, t: &TensorMut, dt: DType) -> FooResult<()> {
    if t.dtype != dt {
        return Err(FooError::Runtime(format!(
            "reduce: {what} has dtype {} but the kernel writes {}",
            t.dtype.name(),
            dt.name()
        )));
    }
    Ok(())
}

fn unsupported<T>(op: ReduceOp, dt: DType) -> FooResult<T> {
    Err(FooError::NotImplemented(format!(
        "reduction {op:?} is not implemented for dtype {} on foo",
        dt.name()
    )))
}

fn param(params: &[Scalar], i: usize, default: f64) -> f64 {
    params.get(i).map_or(default, |s| match s.tag {
        Scalar::TAG_INT | Scalar::TAG_BOOL => s.i as f64,
        Scalar::TAG_UINT => s.i as u64 as f64,
        _ => s.f,
    })
}

/// Reduces `input` into `out` (and `out2`): both have the input's rank, with size 1 at the
/// reduced dims. Params: var/std take the correction, norm takes the order p.
pub fn reduce(
    op: ReduceOp,
    out: &TensorMut,
    out2: Option<&TensorMut>,
    input: &TensorRef,
    params: &[Scalar],
) -> FooResult<()> {
    let plan = engine::plan(input, out, out2)?;
    let dt = input.dtype;
    let (o1, o2) = (
        SendPtr::of(out.ptr),
        SendPtr::of(out2.map_or(std::ptr::null_mut(), |o| o.ptr)),
    );
    let src = input.ptr;
    use std::marker::PhantomData as P;
    match op {
        ReduceOp::Sum | ReduceOp::Mean | ReduceOp::NanSum | ReduceOp::Prod => {
            let fop = match op {
                ReduceOp::Sum => FOp::Sum,
                ReduceOp::Mean => FOp::Mean,
                ReduceOp::NanSum => FOp::NanSum,
                _ => FOp::Prod,
            };
            crate::dispatch!(float: dt, F => {
                expect("output", out, dt)?;
                engine::run(&FloatAcc::<F> { out: o1, op: fop, _t: P }, &plan, src);
            }, _ => {
                if op == ReduceOp::Mean || dt.kind() == crate::dtype::Kind::Complex {
                    return unsupported(op, dt);
                }
                expect("output", out, DType::I64)?;
                let prod = op == ReduceOp::Prod;
                crate::dispatch!(real: dt, T => engine::run(&IntAcc::<T> { out: o1, prod, _t: P }, &plan, src),
                    _ => return unsupported(op, dt))
            })
        }
        ReduceOp::Max | ReduceOp::Min => {
            expect("output", out, dt)?;
            let max = op == ReduceOp::Max;
            crate::dispatch!(real: dt, T => engine::run(&MinMax::<T> { out: o1, max, _t: P }, &plan, src),
                _ => return unsupported(op, dt))
        }
        ReduceOp::ArgMax | ReduceOp::ArgMin => {
            let max = op == ReduceOp::ArgMax;
            let (vals, idx) = match out2 {
                Some(o) => {
                    expect("values", out, dt)?;
                    expect("indices", o, DType::I64)?;
                    (o1, o2)
                }
                None => {
                    expect("indices", out, DType::I64)?;
                    (SendPtr::new(std::ptr::null_mut()), o1)
                }
            };
            crate::dispatch!(real: dt, T => engine::run(&Arg::<T> { vals, idx, max, _t: P }, &plan, src),
                _ => return unsupported(op, dt))
        }
        ReduceOp::Var | ReduceOp::Std => {
            let correction = param(params, 0, 1.0);
            let std = op == ReduceOp::Std;
            crate::dispatch!(float: dt, F => {
                expect("output", out, dt)?;
                if let Some(o) = out2 { expect("mean", o, dt)?; }
                engine::run(&Var::<F> { out: o1, mean_out: o2, correction, std, _t: P }, &plan, src);
            }, _ => return unsupported(op, dt))
        }
        ReduceOp::Norm => {
            let p = param(params, 0, 2.0);
            let kind = if p == 2.0 {
                NormKind::Two
            } else if p == 1.0 {
                NormKind::One
            } else if p == f64::INFINITY {
                NormKind::Inf
            } else if p == f64::NEG_INFINITY {
                NormKind::NegInf
            } else if p == 0.0 {
                NormKind::Zero
            } else {
                NormKind::P(p)
            };
            crate::dispatch!(float: dt, F => {
                expect("output", out, dt)?;
                let p = <F as FloatStore>::M::from_f64c(p);
                engine::run(&Norm::<F> { out: o1, kind, p }, &plan, src);
            }, _ => return unsupported(op, dt))
        }
        ReduceOp::All | ReduceOp::Any => {
            expect("output", out, DType::Bool)?;
            let all = op == ReduceOp::All;
            crate::dispatch!(real: dt, T => engine::run(&AllAny::<T> { out: o1, all, _t: P }, &plan, src),
                _ => return unsupported(op, dt))
        }
        ReduceOp::LogSumExp => crate::dispatch!(float: dt, F => {
            expect("output", out, dt)?;
            engine::run(&LogSumExp::<F> { out: o1, _t: P }, &plan, src);
        }, _ => return unsupported(op, dt)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    fn red<T: Element>(shape: &[usize], reduced: &[usize]) -> Owned<T> {
        let s: Vec<usize> = shape
            .iter()
            .enumerate()
            .map(|(d, &n)| if reduced.contains(&d) { 1 } else { n })
            .collect();
        Owned::zeros(&s)
    }

    #[test]
    fn sum_inner_outer_full() {
        let (r, c) = (37, 300);
        let a = Owned::new((0..r * c).map(|x| (x % 7) as f32).collect(), &[r, c]);
        for dims in [vec![0], vec![1], vec![0, 1]] {
            let mut o = red::<f32>(&[r, c], &dims);
            reduce(ReduceOp::Sum, &o.m(), None, &a.r(), &[]).unwrap();
            let expect: Vec<f32> = match dims.len() {
                2 => vec![(0..r * c).map(|x| (x % 7) as f32).sum()],
                _ if dims[0] == 0 => (0..c)
                    .map(|j| (0..r).map(|i| ((i * c + j) % 7) as f32).sum())
                    .collect(),
                _ => (0..r)
                    .map(|i| (0..c).map(|j| ((i * c + j) % 7) as f32).sum())
                    .collect(),
            };
            assert_eq!(o.data, expect, "dims {dims:?}");
        }
    }

    #[test]
    fn large_full_sum_is_thread_independent_and_int_promotes() {
        let n = 3 * engine::SPLIT + 17;
        let a = Owned::new((0..n).map(|x| (x % 5) as i32 - 2).collect(), &[n]);
        let mut o = Owned::<i64>::zeros(&[1]);
        reduce(ReduceOp::Sum, &o.m(), None, &a.r(), &[]).unwrap();
        let expect: i64 = (0..n).map(|x| (x % 5) as i64 - 2).sum();
        assert_eq!(o.data[0], expect);
    }

    #[test]
    fn argmax_first_occurrence_and_nan() {
        let a = Owned::new(vec![1.0f32, 3.0, 3.0, 2.0, f32::NAN, 5.0, f32::NAN], &[7]);
        let mut o = Owned::<i64>::zeros(&[1]);
        reduce(ReduceOp::ArgMax, &o.m(), None, &a.r(), &[]).unwrap();
        assert_eq!(o.data[0], 4);
        let a = Owned::new(vec![1.0f32, 3.0, 3.0, 2.0], &[4]);
        reduce(ReduceOp::ArgMax, &o.m(), None, &a.r(), &[]).unwrap();
        assert_eq!(o.data[0], 1);
        let mut v = Owned::<f32>::zeros(&[1]);
        let mut i = Owned::<i64>::zeros(&[1]);
        reduce(ReduceOp::ArgMin, &v.m(), Some(&i.m()), &a.r(), &[]).unwrap();
        assert_eq!((v.data[0], i.data[0]), (1.0, 0));
    }

    #[test]
    fn var_norm_lse() {
        let a = Owned::new(vec![1.0f64, 2.0, 3.0, 4.0], &[4]);
        let mut o = Owned::<f64>::zeros(&[1]);
        reduce(
            ReduceOp::Var,
            &o.m(),
            None,
            &a.r(),
            &[Scalar::from_f64(1.0)],
        )
        .unwrap();
        assert!((o.data[0] - 5.0 / 3.0).abs() < 1e-12);
        reduce(
            ReduceOp::Norm,
            &o.m(),
            None,
            &a.r(),
            &[Scalar::from_f64(2.0)],
        )
        .unwrap();
        assert!((o.data[0] - 30f64.sqrt()).abs() < 1e-12);
        reduce(ReduceOp::LogSumExp, &o.m(), None, &a.r(), &[]).unwrap();
        let e: f64 = [1.0f64, 2.0, 3.0, 4.0]
            .iter()
            .map(|x| x.exp())
            .sum::<f64>()
            .ln();
        assert!((o.data[0] - e).abs() < 1e-12);
    }
}
