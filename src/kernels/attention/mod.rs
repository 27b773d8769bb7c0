//! Fused scaled-dot-product attention (FlashAttention-2 style) and its backward.
//!
//! Operands are 4-D views `[batch, heads, seq, dim]` with a unit last stride (any other
//! strides): `q [B, Hq, L, E]`, `k [B, Hk, S, E]`, `v [B, Hk, S, Ev]`, `Hq` a multiple of `Hk`
//! (grouped-query attention: query head `h` reads key/value head `h / (Hq / Hk)`). The optional
//! additive mask is a view `[B, Hq, L, S]` of any strides (the glue broadcasts it with zero
//! strides, so a `[L, S]` mask is never copied); a bool mask (true = attend) is accepted too.
//!
//! Forward: one task per (batch, query head, block of `BQ` queries). Scores of a block of `BK`
//! keys (and of a last block of at most `PAD` keys with it) are one small product `Q K^T` on
//! packed blocks, masked, and folded into the output with an online softmax (running max `m`,
//! running sum `l`, rescaling the accumulated output when the max grows). Blocks that a causal mask hides entirely are skipped. The log-sum-exp of
//! each row is saved for the backward, which recomputes the probabilities block by block.
//!
//! Backward: one task per (batch, key/value head): it packs that head's keys and values once,
//! then for every query head of its group and every query block computes `S`, `P`, `dP = dO V^T`
//! and `dS = P (dP - rowsum(dO * O))`, accumulating `dV += P^T dO`, `dK += dS^T Q` (for the
//! whole head, in a fixed order) and `dQ += dS K` (per query block). Every sum runs in an order
//! fixed by the shapes, so results do not depend on the thread count.
//!
//! Dropout draws one Philox word per element of the virtual `[B, Hq, L, S]` probability matrix
//! (element `i` reads word `offset + i` of the stream of `seed`), so the backward regenerates
//! the forward's mask from the same (seed, offset).
//!
//! Math runs in f32 for f16/bf16/f32 storage and in f64 for f64. The block products are
//! register-tiled loops (rows x 64 columns of accumulators) compiled for AVX-512, AVX2+FMA and
//! the baseline target, picked at run time like the other nn kernels.

pub mod qkv;

use crate::dtype::DType;
use crate::error::FooResult;
use crate::invalid_arg;
use crate::kernels::core::float::{FloatStore, Math};
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::kernels::core::philox::fill_blocks;
use crate::kernels::core::simd::{self, FastExp, Isa};
use crate::tensor::{TensorMut, TensorRef};

/// Query rows per block.
pub const BQ: usize = 64;
/// Keys per block.
pub const BK: usize = 64;
/// Column padding of packed rows (the product tiles are 64, 32 or 16 columns wide).
const PAD: usize = 16;
/// The widest span of keys the forward scores at once: a block, and a last block of at most
/// `PAD` keys with it.
const SPAN: usize = BK + PAD;

/// The math type of the kernels: f32 or f64.
pub trait AttnMath: Math + FastExp {
    const DTYPE: DType;
}
impl AttnMath for f32 {
    const DTYPE: DType = DType::F32;
}
impl AttnMath for f64 {
    const DTYPE: DType = DType::F64;
}

/// Dropout of the attention probabilities: keep with probability `1 - p`, scale kept ones by
/// `1 / (1 - p)`. `seed`/`offset` name the Philox stream (see the module doc).
#[derive(Clone, Copy, Debug)]
pub struct Dropout {
    pub p: f64,
    pub seed: u64,
    pub offset: u64,
}

impl Dropout {
    /// A word `w` keeps its element when `w >= threshold` (probability `1 - p`).
    fn threshold(&self) -> u64 {
        (self.p * 4_294_967_296.0).ceil() as u64
    }
}

/// The scalar parameters of a call.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub scale: f64,
    pub causal: bool,
    pub dropout: Option<Dropout>,
}

/// A strided 4-D operand (element strides; `last` is the stride of the last dim).
#[derive(Clone, Copy)]
struct View {
    ptr: SendPtr<u8>,
    dtype: DType,
    s: [isize; 3],
    last: isize,
}

impl View {
    fn of(ptr: SendPtr<u8>, dtype: DType, strides: &[isize]) -> View {
        View {
            ptr,
            dtype,
            s: [strides[0], strides[1], strides[2]],
            last: strides[3],
        }
    }
    fn r(t: &TensorRef) -> View {
        View::of(SendPtr::of(t.ptr), t.dtype, &t.strides)
    }
    fn m(t: &TensorMut) -> View {
        View::of(SendPtr::of(t.ptr), t.dtype, &t.strides)
    }
    /// Element offset of `[b, h, i, 0]`.
    #[inline(always)]
    fn off(&self, b: usize, h: usize, i: usize) -> isize {
        b as isize * self.s[0] + h as isize * self.s[1] + i as isize * self.s[2]
    }
}

/// Sizes of a call; `ep`/`evp` are `e`/`ev` rounded up to `PAD`, `sp` is `s` rounded up to `BK`.
#[derive(Clone, Copy, Debug)]
struct Geo {
    b: usize,
    hq: usize,
    hk: usize,
    l: usize,
    s: usize,
    e: usize,
    ev: usize,
    ep: usize,
    evp: usize,
    sp: usize,
    nkb: usize,
    nqb: usize,
}

impl Geo {
    fn group(&self) -> usize {
        self.hq / self.hk
    }
    /// Key blocks a query block starting at `i0` with `bq` rows needs.
    #[inline(always)]
    fn key_blocks(&self, causal: bool, i0: usize, bq: usize) -> usize {
        if causal {
            (i0 + bq).div_ceil(BK).min(self.nkb)
        } else {
            self.nkb
        }
    }
    /// Keys `j0 .. j0 + valid` of a block of `kn` keys that query row `i` may attend.
    #[inline(always)]
    fn valid(causal: bool, i: usize, j0: usize, kn: usize) -> usize {
        if causal {
            (i + 1).saturating_sub(j0).min(kn)
        } else {
            kn
        }
    }
}

fn dims4(what: &str, shape: &[usize]) -> FooResult<[usize; 4]> {
    match shape {
        [a, b, c, d] => Ok([*a, *b, *c, *d]),
        _ => invalid_arg!("attention: {what} must be 4-D [batch, heads, seq, dim], got {shape:?}"),
    }
}

fn unit_last(what: &str, shape: &[usize], strides: &[isize]) -> FooResult<()> {
    if shape[3] > 1 && strides[3] != 1 {
        return invalid_arg!("attention: {what} needs a unit stride in its last dim");
    }
    Ok(())
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
}

/// Checks shapes and dtypes of q, k, v and the mask; returns the geometry.
fn geometry(
    q: &TensorRef,
    k: &TensorRef,
    v: &TensorRef,
    mask: Option<&TensorRef>,
) -> FooResult<Geo> {
    let [b, hq, l, e] = dims4("query", &q.shape)?;
    let [bk, hk, s, ek] = dims4("key", &k.shape)?;
    let [bv, hv, sv, ev] = dims4("value", &v.shape)?;
    if !is_float(q.dtype) {
        return invalid_arg!(
            "attention: query of dtype {} is not floating point",
            q.dtype.name()
        );
    }
    if k.dtype != q.dtype || v.dtype != q.dtype {
        return invalid_arg!(
            "attention: query, key and value must share a dtype, got {}, {} and {}",
            q.dtype.name(),
            k.dtype.name(),
            v.dtype.name()
        );
    }
    if bk != b || bv != b || hv != hk || sv != s || ek != e {
        return invalid_arg!(
            "attention: incompatible shapes query {:?}, key {:?}, value {:?}",
            q.shape,
            k.shape,
            v.shape
        );
    }
    if hk == 0 || hq % hk != 0 {
        return invalid_arg!(
            "attention: {hq} query heads are not a multiple of {hk} key/value heads"
        );
    }
    unit_last("query", &q.shape, &q.strides)?;
    unit_last("key", &k.shape, &k.strides)?;
    unit_last("value", &v.shape, &v.strides)?;
    if let Some(m) = mask {
        let ms = dims4("attn_mask", &m.shape)?;
        if ms != [b, hq, l, s] {
            return invalid_arg!(
                "attention: attn_mask of shape {:?} is not [{b}, {hq}, {l}, {s}]",
                m.shape
            );
        }
        if !is_float(m.dtype) && m.dtype != DType::Bool {
            return invalid_arg!(
                "attention: attn_mask of dtype {} is neither bool nor floating point",
                m.dtype.name()
            );
        }
    }
    let nkb = s.div_ceil(BK);
    Ok(Geo {
        b,
        hq,
        hk,
        l,
        s,
        e,
        ev,
        ep: e.div_ceil(PAD) * PAD,
        evp: ev.div_ceil(PAD) * PAD,
        sp: nkb * BK,
        nkb,
        nqb: l.div_ceil(BQ),
    })
}

fn check_out(what: &str, t: &TensorMut, shape: [usize; 4], dtype: DType) -> FooResult<()> {
    if t.shape.as_slice() != shape {
        return invalid_arg!(
            "attention: {what} has shape {:?}, expected {shape:?}",
            t.shape
        );
    }
    if t.dtype != dtype {
        return invalid_arg!(
            "attention: {what} has dtype {}, expected {}",
            t.dtype.name(),
            dtype.name()
        );
    }
    unit_last(what, &t.shape, &t.strides)
}

/// `lse` is `[B, Hq, L]` of the math dtype.
fn check_lse(lse: &[usize], strides: &[isize], dtype: DType, g: &Geo, q: DType) -> FooResult<()> {
    let want = if q == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    if lse != [g.b, g.hq, g.l] || dtype != want || strides.len() != 3 {
        return invalid_arg!(
            "attention: logsumexp must be {} of shape [{}, {}, {}], got {} {lse:?}",
            want.name(),
            g.b,
            g.hq,
            g.l,
            dtype.name()
        );
    }
    Ok(())
}

fn lse_view(ptr: SendPtr<u8>, dtype: DType, strides: &[isize]) -> View {
    View::of(ptr, dtype, &[strides[0], strides[1], strides[2], 0])
}

// ---- row loads and stores ------------------------------------------------------------------

/// `dst[j] = src[j] * mul` for the `dst.len()` elements of a row of `v` at element `off`.
///
/// # Safety
/// The row lies inside `v`'s live memory.
#[inline(always)]
unsafe fn load_row<M: Math>(v: &View, off: isize, dst: &mut [M], mul: M) {
    let n = dst.len();
    crate::dispatch!(float: v.dtype, F => {
        let p = v.ptr.cast::<F>().at(off) as *const F;
        if v.last == 1 || n <= 1 {
            // SAFETY: a contiguous row of n elements inside the view (caller's contract).
            let src = unsafe { std::slice::from_raw_parts(p, n) };
            for (d, &x) in dst.iter_mut().zip(src) {
                *d = M::from_f64c(x.load().to_f64c()) * mul;
            }
        } else {
            for (j, d) in dst.iter_mut().enumerate() {
                // SAFETY: element j of the row (caller's contract).
                let x = unsafe { *p.offset(j as isize * v.last) };
                *d = M::from_f64c(x.load().to_f64c()) * mul;
            }
        }
    }, _ => unreachable!("attention operands are floating point (checked)"))
}

/// `dst[j] += mask[j]` for a row of the mask at element `off` (a bool mask adds 0 or -inf).
///
/// # Safety
/// The row lies inside `v`'s live memory.
#[inline(always)]
unsafe fn add_mask_row<M: Math>(v: &View, off: isize, dst: &mut [M]) {
    if v.dtype == DType::Bool {
        let p = v.ptr.at(off) as *const u8;
        for (j, d) in dst.iter_mut().enumerate() {
            // SAFETY: element j of the row (caller's contract); bools are stored as 0/1 bytes.
            let keep = unsafe { *p.offset(j as isize * v.last) } != 0;
            *d = if keep { *d } else { M::neg_infinity() };
        }
        return;
    }
    crate::dispatch!(float: v.dtype, F => {
        let p = v.ptr.cast::<F>().at(off) as *const F;
        if v.last == 1 {
            // SAFETY: a contiguous row inside the view (caller's contract).
            let src = unsafe { std::slice::from_raw_parts(p, dst.len()) };
            for (d, &x) in dst.iter_mut().zip(src) {
                *d = *d + M::from_f64c(x.load().to_f64c());
            }
        } else {
            for (j, d) in dst.iter_mut().enumerate() {
                // SAFETY: element j of the row (caller's contract).
                let x = unsafe { *p.offset(j as isize * v.last) };
                *d = *d + M::from_f64c(x.load().to_f64c());
            }
        }
    }, _ => unreachable!("masks are bool or floating point (checked)"))
}

/// Writes `src[j] * mul` to a row of `v` at element `off`.
///
/// # Safety
/// The row lies inside `v`'s live memory and nobody else writes it meanwhile.
#[inline(always)]
unsafe fn store_row<M: Math>(v: &View, off: isize, src: &[M], mul: M) {
    crate::dispatch!(float: v.dtype, F => {
        let p = v.ptr.cast::<F>().at(off);
        if v.last == 1 || src.len() <= 1 {
            // SAFETY: a contiguous row of the view written only by this task (caller's contract).
            let dst = unsafe { std::slice::from_raw_parts_mut(p, src.len()) };
            for (d, &x) in dst.iter_mut().zip(src) {
                *d = F::store(<F as FloatStore>::M::from_f64c((x * mul).to_f64c()));
            }
        } else {
            for (j, &x) in src.iter().enumerate() {
                // SAFETY: element j of the row (caller's contract).
                unsafe { *p.offset(j as isize * v.last) = F::store(<F as FloatStore>::M::from_f64c((x * mul).to_f64c())) };
            }
        }
    }, _ => unreachable!("attention outputs are floating point (checked)"))
}

/// The Philox words of elements `idx .. idx + n` (n <= SPAN) of the probability matrix.
#[inline(always)]
fn dropout_words(d: &Dropout, idx: u64, n: usize, buf: &mut [u32; SPAN + 8]) -> usize {
    let w0 = d.offset.wrapping_add(idx);
    let lane0 = (w0 % 4) as usize;
    let blocks = (lane0 + n).div_ceil(4);
    fill_blocks(
        w0 / 4,
        [d.seed as u32, (d.seed >> 32) as u32],
        &mut buf[..blocks * 4],
    );
    lane0
}

// ---- block products --------------------------------------------------------------------------

#[inline(always)]
fn fma<M: Math, const F: bool>(a: M, b: M, c: M) -> M {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `C[i][j] (+)= sum_p a(i, p) * B[p][j]` for an `R x W` tile, `a(i, p) = A[i][p]` (or
/// `A[p][i]` when `TA`). Accumulators stay in registers for the whole inner dimension.
///
/// # Safety
/// Every element read or written lies in the buffers; `C` is not aliased.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<M: Math, const R: usize, const W: usize, const TA: bool, const F: bool>(
    k: usize,
    a: *const M,
    lda: usize,
    b: *const M,
    ldb: usize,
    c: *mut M,
    ldc: usize,
    acc: bool,
) {
    let mut t = [[M::zero(); W]; R];
    if acc {
        for (i, row) in t.iter_mut().enumerate() {
            // SAFETY: row i of the C tile (caller's contract).
            *row = unsafe { *(c.add(i * ldc) as *const [M; W]) };
        }
    }
    for p in 0..k {
        // SAFETY: row p of B's tile (caller's contract).
        let brow = unsafe { &*(b.add(p * ldb) as *const [M; W]) };
        for (i, row) in t.iter_mut().enumerate() {
            // SAFETY: a(i, p) lies in A (caller's contract).
            let av = unsafe {
                if TA {
                    *a.add(p * lda + i)
                } else {
                    *a.add(i * lda + p)
                }
            };
            for j in 0..W {
                row[j] = fma::<M, F>(av, brow[j], row[j]);
            }
        }
    }
    for (i, row) in t.iter().enumerate() {
        // SAFETY: row i of the C tile, not aliased (caller's contract).
        unsafe { *(c.add(i * ldc) as *mut [M; W]) = *row };
    }
}

/// Rows `i .. i + R` of `C (+)= op(A) B`, across `n` columns (a multiple of `PAD`).
///
/// # Safety
/// As [`tile`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn panel<M: Math, const R: usize, const TA: bool, const F: bool>(
    i: usize,
    n: usize,
    k: usize,
    a: *const M,
    lda: usize,
    b: *const M,
    ldb: usize,
    c: *mut M,
    ldc: usize,
    acc: bool,
) {
    // SAFETY: (every call below) the tiles cover rows i..i+R and columns j..j+W <= n of C
    // (caller's contract).
    unsafe {
        let ai = if TA { a.add(i) } else { a.add(i * lda) };
        let ci = c.add(i * ldc);
        let mut j = 0;
        while j + 64 <= n {
            tile::<M, R, 64, TA, F>(k, ai, lda, b.add(j), ldb, ci.add(j), ldc, acc);
            j += 64;
        }
        if j + 32 <= n {
            tile::<M, R, 32, TA, F>(k, ai, lda, b.add(j), ldb, ci.add(j), ldc, acc);
            j += 32;
        }
        if j + 16 <= n {
            tile::<M, R, 16, TA, F>(k, ai, lda, b.add(j), ldb, ci.add(j), ldc, acc);
        }
    }
}

/// `C[m x n] (+)= op(A)[m x k] B[k x n]` with row-major buffers; `op(A) = A^T` when `TA`
/// (then `A` is `k x m`). `n` is a multiple of `PAD`. `WIDE`: 32 vector registers (AVX-512),
/// so taller tiles fit. Every element of `C` is the same chain of multiply-adds (over `p` in
/// order) whatever tile it falls in, so the result does not depend on how rows are grouped.
///
/// # Safety
/// The buffers hold every element the shapes and leading dimensions reach; `C` is not aliased.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm<M: Math, const TA: bool, const F: bool, const WIDE: bool>(
    m: usize,
    n: usize,
    k: usize,
    a: *const M,
    lda: usize,
    b: *const M,
    ldb: usize,
    c: *mut M,
    ldc: usize,
    acc: bool,
) {
    debug_assert!(n % PAD == 0);
    let f32 = std::mem::size_of::<M>() == 4;
    if F && !WIDE {
        // SAFETY: the caller's contract.
        return unsafe { gemm_strips::<M, TA>(m, n, k, a, lda, b, ldb, c, ldc, acc) };
    }
    let mut i = 0;
    // SAFETY: every panel covers rows below m (caller's contract for the rest).
    unsafe {
        // Tiles of 6 x 64 f32 (3 x 64 f64) keep 24 of the 32 AVX-512 registers accumulating.
        if WIDE && f32 {
            while i + 6 <= m {
                panel::<M, 6, TA, F>(i, n, k, a, lda, b, ldb, c, ldc, acc);
                i += 6;
            }
        }
        if WIDE && !f32 {
            while i + 3 <= m {
                panel::<M, 3, TA, F>(i, n, k, a, lda, b, ldb, c, ldc, acc);
                i += 3;
            }
        }
        if WIDE && f32 {
            while i + 4 <= m {
                panel::<M, 4, TA, F>(i, n, k, a, lda, b, ldb, c, ldc, acc);
                i += 4;
            }
        }
        if WIDE || f32 {
            while i + 2 <= m {
                panel::<M, 2, TA, F>(i, n, k, a, lda, b, ldb, c, ldc, acc);
                i += 2;
            }
        }
        while i < m {
            panel::<M, 1, TA, F>(i, n, k, a, lda, b, ldb, c, ldc, acc);
            i += 1;
        }
    }
}

/// [`gemm`] for AVX2 (16 vector registers): strips of 16 columns, each down all the rows in
/// tiles of 6 rows (f32; 3 for f64), so 12 registers accumulate and the strip's row of `B` and
/// the broadcast of `A` fit beside them. The 64-column tiles meant for AVX-512 spilled their
/// accumulators here (2 x 64 f32 is all 16 registers). Each element of `C` is the same chain
/// of multiply-adds as in [`gemm`], so both give the same bits.
///
/// # Safety
/// As [`gemm`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_strips<M: Math, const TA: bool>(
    m: usize,
    n: usize,
    k: usize,
    a: *const M,
    lda: usize,
    b: *const M,
    ldb: usize,
    c: *mut M,
    ldc: usize,
    acc: bool,
) {
    let f32 = std::mem::size_of::<M>() == 4;
    let a_row = |i: usize| if TA { i } else { i * lda };
    let mut j = 0;
    // SAFETY: every tile covers rows below m and columns j..j+16 <= n (caller's contract).
    unsafe {
        while j + 16 <= n {
            let (bj, cj) = (b.add(j), c.add(j));
            let mut i = 0;
            if f32 {
                while i + 6 <= m {
                    tile::<M, 6, 16, TA, true>(
                        k,
                        a.add(a_row(i)),
                        lda,
                        bj,
                        ldb,
                        cj.add(i * ldc),
                        ldc,
                        acc,
                    );
                    i += 6;
                }
            }
            while i + 3 <= m {
                tile::<M, 3, 16, TA, true>(
                    k,
                    a.add(a_row(i)),
                    lda,
                    bj,
                    ldb,
                    cj.add(i * ldc),
                    ldc,
                    acc,
                );
                i += 3;
            }
            while i < m {
                tile::<M, 1, 16, TA, true>(
                    k,
                    a.add(a_row(i)),
                    lda,
                    bj,
                    ldb,
                    cj.add(i * ldc),
                    ldc,
                    acc,
                );
                i += 1;
            }
            j += 16;
        }
    }
}

/// [`gemm`] as a function of its own for each instruction set (`F` and `WIDE` name it, as in
/// the bodies that call it). Inlined into the large attention bodies, LLVM left some tile
/// widths (32 columns: head dimension 32) as scalar code with accumulators on the stack; alone
/// it vectorizes every tile.
///
/// # Safety
/// As [`gemm`]; `F` and `WIDE` only as [`dispatch_isa`] picks them (the CPU has the features).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_isa<M: Math, const TA: bool, const F: bool, const WIDE: bool>(
    m: usize,
    n: usize,
    k: usize,
    a: *const M,
    lda: usize,
    b: *const M,
    ldb: usize,
    c: *mut M,
    ldc: usize,
    acc: bool,
) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
        #[inline(never)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn v3<M: Math, const TA: bool>(
            m: usize,
            n: usize,
            k: usize,
            a: *const M,
            lda: usize,
            b: *const M,
            ldb: usize,
            c: *mut M,
            ldc: usize,
            acc: bool,
        ) {
            // SAFETY: forwarded from the caller.
            unsafe { gemm::<M, TA, true, true>(m, n, k, a, lda, b, ldb, c, ldc, acc) }
        }
        #[target_feature(enable = "avx2,fma")]
        #[inline(never)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn v2<M: Math, const TA: bool>(
            m: usize,
            n: usize,
            k: usize,
            a: *const M,
            lda: usize,
            b: *const M,
            ldb: usize,
            c: *mut M,
            ldc: usize,
            acc: bool,
        ) {
            // SAFETY: forwarded from the caller.
            unsafe { gemm::<M, TA, true, false>(m, n, k, a, lda, b, ldb, c, ldc, acc) }
        }
        match (F, WIDE) {
            // SAFETY: the caller runs in `dispatch_isa`'s AVX-512 branch (checked at run time).
            (true, true) => return unsafe { v3::<M, TA>(m, n, k, a, lda, b, ldb, c, ldc, acc) },
            // SAFETY: the caller runs in the AVX2+FMA branch (checked at run time).
            (true, false) => return unsafe { v2::<M, TA>(m, n, k, a, lda, b, ldb, c, ldc, acc) },
            _ => {}
        }
    }
    // SAFETY: the caller's contract.
    unsafe { gemm::<M, TA, F, WIDE>(m, n, k, a, lda, b, ldb, c, ldc, acc) }
}

/// [`gemm_isa`] on slices, their extents checked once per block:
/// `c (m x n, rows ldc apart) (+)= a @ b` with `a` m x k (k x m when `TA`, rows lda apart) and
/// `b` k x n (rows ldb apart).
///
/// # Safety
/// `F` and `WIDE` only as [`dispatch_isa`] picks them (the CPU has the features).
#[inline(always)]
unsafe fn block_mm<M: Math, const TA: bool, const F: bool, const WIDE: bool>(
    (m, n, k): (usize, usize, usize),
    (a, lda): (&[M], usize),
    (b, ldb): (&[M], usize),
    (c, ldc): (&mut [M], usize),
    acc: bool,
) {
    let extent = |rows: usize, cols: usize, ld: usize| {
        if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * ld + cols
        }
    };
    let (ar, ac) = if TA { (k, m) } else { (m, k) };
    assert!(a.len() >= extent(ar, ac, lda) && b.len() >= extent(k, n, ldb));
    assert!(c.len() >= extent(m, n, ldc));
    // SAFETY: the three extents were checked above; `F`/`WIDE` are the caller's contract.
    unsafe {
        gemm_isa::<M, TA, F, WIDE>(
            m,
            n,
            k,
            a.as_ptr(),
            lda,
            b.as_ptr(),
            ldb,
            c.as_mut_ptr(),
            ldc,
            acc,
        )
    }
}

/// Runs `$body::<M, FMA, WIDE>(args)` compiled for AVX-512, AVX2+FMA or the baseline target.
macro_rules! dispatch_isa {
    ($body:ident::<$M:ty>($($a:expr),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
            unsafe fn v3<M: AttnMath>(a: &Job<M>, s: usize, e: usize) {
                $body::<M, true, true>(a, s, e)
            }
            #[target_feature(enable = "avx2,fma")]
            unsafe fn v2<M: AttnMath>(a: &Job<M>, s: usize, e: usize) {
                $body::<M, true, false>(a, s, e)
            }
            match simd::level() {
                // SAFETY: the CPU has AVX-512 F/VL/BW/DQ, AVX2 and FMA (checked at run time).
                3 => return unsafe { v3::<$M>($($a),*) },
                // SAFETY: the CPU has AVX2 and FMA (checked at run time).
                2 => return unsafe { v2::<$M>($($a),*) },
                _ => {}
            }
        }
        $body::<$M, false, false>($($a),*)
    }};
}

// ---- the jobs ----------------------------------------------------------------------------------

/// Everything a task reads: operands and outputs.
#[derive(Clone, Copy)]
struct Ops {
    g: Geo,
    p: Params,
    q: View,
    k: View,
    v: View,
    mask: Option<View>,
    /// Forward: output, lse. Backward: the forward output and lse (read).
    out: View,
    lse: View,
    /// Backward only.
    dout: Option<View>,
    dq: Option<View>,
    dk: Option<View>,
    dv: Option<View>,
    /// Backward: dense `[B, Hq, L, S]` of the math dtype receiving dS, if wanted.
    dbias: Option<SendPtr<u8>>,
}

/// The operands and the packed keys and values of every (b, hk): for the forward, keys as
/// blocks `[kb][E][BK]` then values as rows `[Sp][Evp]`; for the backward see
/// [`bwd_pack_lens`]. The packed buffer is the caller's workspace (foo memory from the caching
/// allocator, so no page faults call after call) or, without one, owned here.
struct Job<M> {
    o: Ops,
    packed: SendPtr<M>,
    packed_len: usize,
    owned: Vec<M>,
    /// Backward: how tasks divide the work.
    split: Split,
}

impl<M> std::ops::Deref for Job<M> {
    type Target = Ops;
    fn deref(&self) -> &Ops {
        &self.o
    }
}

impl<M: AttnMath> Job<M> {
    fn new(o: Ops) -> Self {
        Job {
            o,
            packed: SendPtr::new(std::ptr::null_mut()),
            packed_len: 0,
            owned: Vec::new(),
            split: Split::Fused,
        }
    }
    fn kt_len(&self) -> usize {
        self.g.nkb * self.g.e * BK
    }
    fn vr_len(&self) -> usize {
        self.g.sp * self.g.evp
    }
    /// Points the packed buffer at `len` elements of the workspace (or a new allocation).
    fn workspace(&mut self, ws: Option<&TensorMut>, len: usize) -> FooResult<()> {
        match ws {
            Some(t) => {
                let bytes = t.numel() * t.dtype.size();
                let align = std::mem::align_of::<M>();
                if !t.is_contiguous()
                    || bytes < len * std::mem::size_of::<M>()
                    || t.ptr as usize % align != 0
                {
                    return invalid_arg!(
                        "attention: the workspace must be a dense, {align}-byte aligned tensor of at least {} bytes",
                        len * std::mem::size_of::<M>()
                    );
                }
                self.packed = SendPtr::of(t.ptr);
            }
            None => {
                self.owned = vec![M::zero(); len];
                self.packed = SendPtr::new(self.owned.as_mut_ptr());
            }
        }
        self.packed_len = len;
        Ok(())
    }
    fn packed(&self) -> &[M] {
        // SAFETY: `packed` points to `packed_len` elements (set by `workspace`) that live as long
        // as the job (owned) or the call (the caller's workspace); tasks only read it after the
        // packing pass.
        unsafe { std::slice::from_raw_parts(self.packed.get(), self.packed_len) }
    }
}

/// Rows `0..Sw` of head (b, h) of `x` (zero past row `s`) transposed per block of `BK` rows
/// into `[kb][rows_per_blk][BK]`, columns `cols..rows_per_blk` zero. `Sw` is `s` rounded up to
/// [`PAD`]: the block products read a last block's columns up to its keys' whole tiles only
/// (packing and zeroing up to `Sp`, 65 keys took 63 rows of zeros, had cost 1/3 of the
/// forward's extra time over 64 keys).
/// Eight rows at a time: loaded into `rows` (`[8][cols]`), then written as runs of 8 per
/// column, 8 x 8 blocks through registers for float32. One row at a time scattered every
/// element to a cache line of its own, and the packing took as long as the block products
/// (perf, `[8, 4, 64, 64]`).
///
/// # Safety
/// `dst` holds `nkb * rows_per_blk * BK` elements, `rows` at least `8 * cols`; the view is live.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pack_t<M: Math>(
    g: &Geo,
    x: &View,
    b: usize,
    h: usize,
    cols: usize,
    rows_per_blk: usize,
    dst: &mut [M],
    rows: &mut [M],
) {
    const G: usize = 8;
    const { assert!(BK % G == 0) };
    #[cfg(target_arch = "x86_64")]
    let registers = std::mem::size_of::<M>() == 4 && crate::kernels::core::transpose::avx2();
    #[cfg(not(target_arch = "x86_64"))]
    let registers = false;
    let rows = &mut rows[..G * cols];
    // PAD and BK are multiples of G, so groups of G rows never straddle a block.
    const { assert!(PAD % G == 0) };
    for j0 in (0..g.s.next_multiple_of(PAD)).step_by(G) {
        for (r, row) in rows.chunks_exact_mut(cols).enumerate() {
            if j0 + r < g.s {
                // SAFETY: row j0 + r of head (b, h).
                unsafe { load_row(x, x.off(b, h, j0 + r), row, M::one()) };
            } else {
                row.fill(M::zero());
            }
        }
        let (kb, jj) = (j0 / BK, j0 % BK);
        let blk = &mut dst[kb * rows_per_blk * BK..(kb + 1) * rows_per_blk * BK];
        let mut c = 0;
        #[cfg(target_arch = "x86_64")]
        if registers {
            while c + G <= cols {
                // SAFETY: M is f32 (4 bytes, checked) and AVX2 is present; the 8 x 8 block of
                // `rows` at column c and its transpose at blk[c * BK + jj ..] (8 runs of 8, BK
                // apart, the last ending inside blk since c + 8 <= cols <= rows_per_blk).
                unsafe {
                    crate::kernels::core::transpose::transpose8x8_32(
                        rows.as_ptr().add(c) as *const f32,
                        cols as isize,
                        blk.as_mut_ptr().add(c * BK + jj) as *mut f32,
                        BK,
                    )
                };
                c += G;
            }
        }
        for c in c..cols {
            for (r, v) in blk[c * BK + jj..c * BK + jj + G].iter_mut().enumerate() {
                *v = rows[r * cols + c];
            }
        }
        for c in cols..rows_per_blk {
            blk[c * BK + jj..c * BK + jj + G].fill(M::zero());
        }
    }
}

/// Rows `0..s` of head (b, h) of `x` as rows of a `[Sp][ld]` buffer, zero past column `cols`
/// (the block products read a block's keys only, as in [`pack_t`]).
///
/// # Safety
/// `dst` holds `Sp * ld` elements; the view is live.
#[inline(always)]
unsafe fn pack_rows<M: Math>(
    g: &Geo,
    x: &View,
    b: usize,
    h: usize,
    cols: usize,
    ld: usize,
    dst: &mut [M],
) {
    for j in 0..g.s {
        let r = &mut dst[j * ld..(j + 1) * ld];
        // SAFETY: row j of head (b, h).
        unsafe { load_row(x, x.off(b, h, j), &mut r[..cols], M::one()) };
        r[cols..].fill(M::zero());
    }
}

fn pack_forward<M: AttnMath>(job: &mut Job<M>, ws: Option<&TensorMut>) -> FooResult<()> {
    let g = job.g;
    job.workspace(ws, g.b * g.hk * (job.kt_len() + job.vr_len()))?;
    parallel_for(g.b * g.hk, 1, &|s, e| pack_fwd_range(job, s, e));
    Ok(())
}

/// Packs keys and values of (b, hk) for tasks `s..e` (the layout of [`Job`]).
#[inline(always)]
fn pack_fwd_body<M: AttnMath, const F: bool, const WIDE: bool>(job: &Job<M>, s: usize, e: usize) {
    let g = job.g;
    let (ktl, vrl) = (job.kt_len(), job.vr_len());
    let per = ktl + vrl;
    let mut row = vec![M::zero(); 8 * g.e];
    for t in s..e {
        let (b, hk) = (t / g.hk, t % g.hk);
        // SAFETY: task t owns elements t*per .. (t+1)*per of the packed buffer, which nobody
        // reads during the packing pass.
        let dst: &mut [M] = unsafe { job.packed.slice_mut(t * per, per) };
        let (kt, vr) = dst.split_at_mut(ktl);
        // SAFETY: k and v are live views of head (b, hk); the buffers have the sizes above.
        unsafe {
            pack_t(&g, &job.k, b, hk, g.e, g.e, kt, &mut row);
            pack_rows(&g, &job.v, b, hk, g.ev, g.evp, vr);
        }
    }
}

fn pack_fwd_range<M: AttnMath>(job: &Job<M>, s: usize, e: usize) {
    dispatch_isa!(pack_fwd_body::<M>(job, s, e))
}

/// Forward tasks `s..e` (each a (b, h, query block)).
#[inline(always)]
fn fwd_body<M: AttnMath, const F: bool, const WIDE: bool>(job: &Job<M>, s: usize, e: usize) {
    let g = job.g;
    let (ktl, vrl) = (job.kt_len(), job.vr_len());
    let mut qb = vec![M::zero(); BQ * g.ep];
    let mut sb = vec![M::zero(); BQ * SPAN];
    let mut ob = vec![M::zero(); BQ * g.evp];
    let mut mx = [M::neg_infinity(); BQ];
    let mut sum = [M::zero(); BQ];
    let mut words = [0u32; SPAN + 8];
    let scale = M::from_f64c(job.p.scale);
    let drop = job
        .p
        .dropout
        .map(|d| (d, d.threshold(), M::from_f64c(1.0 / (1.0 - d.p))));
    for t in s..e {
        let qblk = t % g.nqb;
        let h = (t / g.nqb) % g.hq;
        let b = t / (g.nqb * g.hq);
        let hk = h / g.group();
        let i0 = qblk * BQ;
        let bq = BQ.min(g.l - i0);
        for r in 0..bq {
            // SAFETY: query row i0 + r of head (b, h).
            unsafe {
                load_row(
                    &job.q,
                    job.q.off(b, h, i0 + r),
                    &mut qb[r * g.ep..r * g.ep + g.e],
                    scale,
                )
            };
        }
        ob[..bq * g.evp].fill(M::zero());
        mx.fill(M::neg_infinity());
        sum.fill(M::zero());
        let pk = &job.packed()[(b * g.hk + hk) * (ktl + vrl)..][..ktl + vrl];
        let (kt, vr) = pk.split_at(ktl);
        let nkb = g.key_blocks(job.p.causal, i0, bq);
        let mut kb = 0;
        while kb < nkb {
            let j0 = kb * BK;
            // A last block of at most PAD keys joins the one before it: one pass of the
            // softmax and one value product for both (65 keys as blocks of 64 and 1 took 1.5x
            // the time of 64 keys). Block kb is whole when another follows it.
            let merge = kb + 2 == nkb && g.s - (j0 + BK) <= PAD;
            let kn = if merge { g.s - j0 } else { BK.min(g.s - j0) };
            // SAFETY: F and WIDE as dispatch_isa picked them (block_mm checks the extents).
            // Scores of the span's keys only, in whole tiles (the rest of each row is set to
            // -inf below): a last block of 1 key (65 keys) had cost a whole block.
            unsafe {
                block_mm::<M, false, F, WIDE>(
                    (bq, kn.min(BK).next_multiple_of(PAD), g.e),
                    (&qb, g.ep),
                    (&kt[kb * g.e * BK..], BK),
                    (&mut sb, SPAN),
                    false,
                );
                if merge {
                    block_mm::<M, false, F, WIDE>(
                        (bq, (kn - BK).next_multiple_of(PAD), g.e),
                        (&qb, g.ep),
                        (&kt[(kb + 1) * g.e * BK..], BK),
                        (&mut sb[BK..], SPAN),
                        false,
                    );
                }
            };
            // Row maxima first, for all rows: each is a chain of dependent instructions, and
            // rows next to each other let the core overlap them (per row, max, exp and the
            // exp pass took 4x the block products' time at 64 x 64 x 32). Keys a causal mask
            // hides are -inf, so the exp pass can run over whole 16-lane chunks and write 0
            // there (exp(-inf) = 0).
            let mut block_max = [M::neg_infinity(); BQ];
            for (r, bm) in block_max.iter_mut().enumerate().take(bq) {
                let i = i0 + r;
                let row = &mut sb[r * SPAN..(r + 1) * SPAN];
                if let Some(m) = &job.mask {
                    // SAFETY: mask row (b, h, i), keys j0 .. j0 + kn.
                    unsafe {
                        add_mask_row(m, m.off(b, h, i) + j0 as isize * m.last, &mut row[..kn])
                    };
                }
                row[Geo::valid(job.p.causal, i, j0, kn)..].fill(M::neg_infinity());
                *bm = simd::max(row);
            }
            for r in 0..bq {
                let i = i0 + r;
                let row = &mut sb[r * SPAN..(r + 1) * SPAN];
                let n = Geo::valid(job.p.causal, i, j0, kn);
                let m_new = if block_max[r] > mx[r] {
                    block_max[r]
                } else {
                    mx[r]
                };
                if m_new == M::neg_infinity() {
                    // Nothing attended yet: no contribution.
                    row.fill(M::zero());
                    continue;
                }
                // exp(-inf) and exp(0) without the polynomial: a row's first block, and every
                // block that does not raise its max.
                let alpha = if mx[r] == M::neg_infinity() {
                    M::zero()
                } else if mx[r] == m_new {
                    M::one()
                } else {
                    (mx[r] - m_new).fexp(Isa::with_fma(F))
                };
                // Whole 16-lane chunks (the -inf keys in them give 0), zeros after.
                let width = n.next_multiple_of(16).min(SPAN);
                let bs = simd::exp_sub_store_flushed(Isa::with_fma(F), &mut row[..width], m_new);
                row[width..].fill(M::zero());
                sum[r] = sum[r] * alpha + bs;
                mx[r] = m_new;
                if alpha != M::one() {
                    for o in &mut ob[r * g.evp..(r + 1) * g.evp] {
                        *o = *o * alpha;
                    }
                }
                if let Some((d, thr, ds)) = &drop {
                    let idx = (((b * g.hq + h) * g.l + i) * g.s + j0) as u64;
                    let lane0 = dropout_words(d, idx, n, &mut words);
                    for (x, &w) in row[..n].iter_mut().zip(&words[lane0..lane0 + n]) {
                        *x = if w as u64 >= *thr {
                            *x * *ds
                        } else {
                            M::zero()
                        };
                    }
                }
            }
            // SAFETY: as above; sb's columns kn.. are zero.
            unsafe {
                block_mm::<M, false, F, WIDE>(
                    (bq, g.evp, kn),
                    (&sb, SPAN),
                    (&vr[j0 * g.evp..], g.evp),
                    (&mut ob, g.evp),
                    true,
                )
            };
            kb += if merge { 2 } else { 1 };
        }
        for r in 0..bq {
            let i = i0 + r;
            let inv = if sum[r] == M::zero() {
                M::zero()
            } else {
                M::one() / sum[r]
            };
            // SAFETY: output row (b, h, i) belongs to this task alone.
            unsafe {
                store_row(
                    &job.out,
                    job.out.off(b, h, i),
                    &ob[r * g.evp..r * g.evp + g.ev],
                    inv,
                )
            };
            let lse = if sum[r] == M::zero() {
                M::neg_infinity()
            } else {
                mx[r] + sum[r].ln()
            };
            // SAFETY: lse element (b, h, i), of the math dtype, belongs to this task alone.
            unsafe { *job.lse.ptr.cast::<M>().at(job.lse.off(b, h, i)) = lse };
        }
    }
}

fn fwd_range<M: AttnMath>(job: &Job<M>, s: usize, e: usize) {
    dispatch_isa!(fwd_body::<M>(job, s, e))
}

/// How the backward splits its work (see [`attention_backward`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Split {
    /// One task per (b, key/value head): dQ, dK and dV together.
    Fused,
    /// One task per (b, query head, query block): dQ only.
    Dq,
    /// One task per (b, key/value head, key block): dK and dV only.
    Dkv,
}

/// Backward tasks `s..e` of `job.split`. Every mode computes each gradient element with the
/// same operations in the same order (dQ over key blocks, dK/dV over query heads then query
/// blocks), so the modes give the same bits.
#[inline(always)]
fn bwd_body<M: AttnMath, const F: bool, const WIDE: bool>(job: &Job<M>, s: usize, e: usize) {
    let g = job.g;
    let (dout, dqv, dkv, dvv) = match (job.dout, job.dq, job.dk, job.dv) {
        (Some(a), Some(b), Some(c), Some(d)) => (a, b, c, d),
        _ => unreachable!("backward jobs carry their gradients"),
    };
    let (ktl, krl, vtl) = bwd_pack_lens(&g);
    let do_dq = job.split != Split::Dkv;
    let do_dkv = job.split != Split::Dq;
    let mut dk = vec![M::zero(); if do_dkv { g.sp * g.ep } else { 0 }];
    let mut dv = vec![M::zero(); if do_dkv { g.sp * g.evp } else { 0 }];
    let mut qb = vec![M::zero(); BQ * g.ep];
    let mut dob = vec![M::zero(); BQ * g.evp];
    let mut pb = vec![M::zero(); BQ * BK];
    let mut dsb = vec![M::zero(); BQ * BK];
    let mut dqb = vec![M::zero(); if do_dq { BQ * g.ep } else { 0 }];
    let mut orow = vec![M::zero(); g.ev];
    let mut dvec = [M::zero(); BQ];
    let mut lse = [M::zero(); BQ];
    let mut words = [0u32; SPAN + 8];
    let scale = M::from_f64c(job.p.scale);
    let drop = job
        .p
        .dropout
        .map(|d| (d, d.threshold(), M::from_f64c(1.0 / (1.0 - d.p))));
    let group = g.group();
    for t in s..e {
        let (b, hk, heads, qblks, kbs) = match job.split {
            Split::Fused => {
                let hk = t % g.hk;
                (
                    t / g.hk,
                    hk,
                    hk * group..(hk + 1) * group,
                    0..g.nqb,
                    0..g.nkb,
                )
            }
            Split::Dq => {
                let qblk = t % g.nqb;
                let h = (t / g.nqb) % g.hq;
                (
                    t / (g.nqb * g.hq),
                    h / group,
                    h..h + 1,
                    qblk..qblk + 1,
                    0..g.nkb,
                )
            }
            Split::Dkv => {
                let kb = t % g.nkb;
                let hk = (t / g.nkb) % g.hk;
                (
                    t / (g.nkb * g.hk),
                    hk,
                    hk * group..(hk + 1) * group,
                    0..g.nqb,
                    kb..kb + 1,
                )
            }
        };
        let pk = &job.packed()[(b * g.hk + hk) * (ktl + krl + vtl)..][..ktl + krl + vtl];
        let (kt, rest) = pk.split_at(ktl);
        let (kr, vt) = rest.split_at(krl);
        if do_dkv {
            dk[kbs.start * BK * g.ep..kbs.end * BK * g.ep].fill(M::zero());
            dv[kbs.start * BK * g.evp..kbs.end * BK * g.evp].fill(M::zero());
        }
        for h in heads {
            for qblk in qblks.clone() {
                let i0 = qblk * BQ;
                let bq = BQ.min(g.l - i0);
                let kb_hi = kbs.end.min(g.key_blocks(job.p.causal, i0, bq));
                if kbs.start >= kb_hi {
                    continue;
                }
                for r in 0..bq {
                    let i = i0 + r;
                    // SAFETY: rows (b, h, i) of q, dout, out and element (b, h, i) of lse.
                    unsafe {
                        load_row(
                            &job.q,
                            job.q.off(b, h, i),
                            &mut qb[r * g.ep..r * g.ep + g.e],
                            scale,
                        );
                        load_row(
                            &dout,
                            dout.off(b, h, i),
                            &mut dob[r * g.evp..r * g.evp + g.ev],
                            M::one(),
                        );
                        load_row(&job.out, job.out.off(b, h, i), &mut orow, M::one());
                        let l = *job.lse.ptr.cast::<M>().at(job.lse.off(b, h, i));
                        // A row that attended nothing has lse -inf and zero probabilities.
                        lse[r] = if l == M::neg_infinity() {
                            M::infinity()
                        } else {
                            l
                        };
                    }
                    dvec[r] = simd::sum_zip(&dob[r * g.evp..r * g.evp + g.ev], &orow, |x, y| x * y);
                }
                if do_dq {
                    dqb[..bq * g.ep].fill(M::zero());
                }
                for kb in kbs.start..kb_hi {
                    let j0 = kb * BK;
                    let kn = BK.min(g.s - j0);
                    // The block's keys only, in whole tiles, as in the forward (the rest of each
                    // row is set to 0 below; dK and dV get rows for the block's keys only).
                    let kw = kn.next_multiple_of(PAD);
                    // SAFETY: F and WIDE as dispatch_isa picked them (block_mm checks the extents).
                    unsafe {
                        block_mm::<M, false, F, WIDE>(
                            (bq, kw, g.e),
                            (&qb, g.ep),
                            (&kt[kb * g.e * BK..], BK),
                            (&mut pb, BK),
                            false,
                        );
                        block_mm::<M, false, F, WIDE>(
                            (bq, kw, g.ev),
                            (&dob, g.evp),
                            (&vt[kb * g.evp * BK..], BK),
                            (&mut dsb, BK),
                            false,
                        );
                    }
                    for r in 0..bq {
                        let i = i0 + r;
                        let prow = &mut pb[r * BK..(r + 1) * BK];
                        let drow = &mut dsb[r * BK..(r + 1) * BK];
                        if let Some(m) = &job.mask {
                            // SAFETY: mask row (b, h, i), keys j0 .. j0 + kn.
                            unsafe {
                                add_mask_row(
                                    m,
                                    m.off(b, h, i) + j0 as isize * m.last,
                                    &mut prow[..kn],
                                )
                            };
                        }
                        let n = Geo::valid(job.p.causal, i, j0, kn);
                        for x in &mut prow[..n] {
                            *x = (*x - lse[r]).fexp(Isa::with_fma(F));
                        }
                        prow[n..].fill(M::zero());
                        let dr = dvec[r];
                        if let Some((d, thr, ds)) = &drop {
                            let idx = (((b * g.hq + h) * g.l + i) * g.s + j0) as u64;
                            let lane0 = dropout_words(d, idx, n, &mut words);
                            for ((p, dp), &w) in prow[..n]
                                .iter_mut()
                                .zip(drow[..n].iter_mut())
                                .zip(&words[lane0..lane0 + n])
                            {
                                let z = if w as u64 >= *thr { *ds } else { M::zero() };
                                let pv = *p;
                                *dp = pv * (*dp * z - dr);
                                *p = pv * z;
                            }
                        } else {
                            for (p, dp) in prow[..n].iter().zip(drow[..n].iter_mut()) {
                                *dp = *p * (*dp - dr);
                            }
                        }
                        drow[n..].fill(M::zero());
                        if let (Some(db), true) = (job.dbias, do_dq) {
                            let at = ((b * g.hq + h) * g.l + i) * g.s + j0;
                            // SAFETY: the dense dbias row (b, h, i) belongs to this task alone.
                            let dst: &mut [M] = unsafe { db.cast().slice_mut(at, kn) };
                            dst.copy_from_slice(&drow[..kn]);
                        }
                    }
                    // SAFETY: as above.
                    unsafe {
                        if do_dkv {
                            block_mm::<M, true, F, WIDE>(
                                (kn, g.evp, bq),
                                (&pb, BK),
                                (&dob, g.evp),
                                (&mut dv[j0 * g.evp..], g.evp),
                                true,
                            );
                            block_mm::<M, true, F, WIDE>(
                                (kn, g.ep, bq),
                                (&dsb, BK),
                                (&qb, g.ep),
                                (&mut dk[j0 * g.ep..], g.ep),
                                true,
                            );
                        }
                        if do_dq {
                            block_mm::<M, false, F, WIDE>(
                                (bq, g.ep, kn),
                                (&dsb, BK),
                                (&kr[j0 * g.ep..], g.ep),
                                (&mut dqb, g.ep),
                                true,
                            );
                        }
                    }
                }
                if do_dq {
                    for r in 0..bq {
                        // SAFETY: dq row (b, h, i0 + r) belongs to this task alone.
                        unsafe {
                            store_row(
                                &dqv,
                                dqv.off(b, h, i0 + r),
                                &dqb[r * g.ep..r * g.ep + g.e],
                                scale,
                            )
                        };
                    }
                }
            }
        }
        if do_dkv {
            for j in kbs.start * BK..(kbs.end * BK).min(g.s) {
                // SAFETY: dk/dv rows (b, hk, j) belong to this task alone.
                unsafe {
                    store_row(
                        &dkv,
                        dkv.off(b, hk, j),
                        &dk[j * g.ep..j * g.ep + g.e],
                        M::one(),
                    );
                    store_row(
                        &dvv,
                        dvv.off(b, hk, j),
                        &dv[j * g.evp..j * g.evp + g.ev],
                        M::one(),
                    );
                }
            }
        }
    }
}

/// Packed lengths per (b, hk) for the backward: keys as `[kb][E][BK]`, keys as rows
/// `[Sp][Ep]`, values as `[kb][Evp][BK]`.
fn bwd_pack_lens(g: &Geo) -> (usize, usize, usize) {
    (g.nkb * g.e * BK, g.sp * g.ep, g.nkb * g.evp * BK)
}

fn pack_backward<M: AttnMath>(job: &mut Job<M>, ws: Option<&TensorMut>) -> FooResult<()> {
    let g = job.g;
    let (ktl, krl, vtl) = bwd_pack_lens(&g);
    job.workspace(ws, g.b * g.hk * (ktl + krl + vtl))?;
    parallel_for(g.b * g.hk, 1, &|s, e| pack_bwd_range(job, s, e));
    Ok(())
}

/// Packs keys (blocks and rows) and values (blocks) of (b, hk) for tasks `s..e`.
#[inline(always)]
fn pack_bwd_body<M: AttnMath, const F: bool, const WIDE: bool>(job: &Job<M>, s: usize, e: usize) {
    let g = job.g;
    let (ktl, krl, vtl) = bwd_pack_lens(&g);
    let per = ktl + krl + vtl;
    let mut row = vec![M::zero(); 8 * g.e.max(g.ev)];
    for t in s..e {
        let (b, hk) = (t / g.hk, t % g.hk);
        // SAFETY: task t owns elements t*per .. (t+1)*per of the packed buffer, which nobody
        // reads during the packing pass.
        let dst: &mut [M] = unsafe { job.packed.slice_mut(t * per, per) };
        let (kt, rest) = dst.split_at_mut(ktl);
        let (kr, vt) = rest.split_at_mut(krl);
        // SAFETY: k and v are live views of head (b, hk); the buffers have the sizes above.
        unsafe {
            pack_t(&g, &job.k, b, hk, g.e, g.e, kt, &mut row);
            pack_rows(&g, &job.k, b, hk, g.e, g.ep, kr);
            pack_t(&g, &job.v, b, hk, g.ev, g.evp, vt, &mut row);
        }
    }
}

fn pack_bwd_range<M: AttnMath>(job: &Job<M>, s: usize, e: usize) {
    dispatch_isa!(pack_bwd_body::<M>(job, s, e))
}

fn bwd_range<M: AttnMath>(job: &Job<M>, s: usize, e: usize) {
    dispatch_isa!(bwd_body::<M>(job, s, e))
}

fn math_of(d: DType) -> DType {
    if d == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

fn check_params(p: &Params) -> FooResult<()> {
    if let Some(d) = p.dropout {
        if !(0.0..1.0).contains(&d.p) {
            return invalid_arg!(
                "attention: dropout probability must be in [0, 1), got {}",
                d.p
            );
        }
    }
    if !p.scale.is_finite() {
        return invalid_arg!("attention: scale must be finite, got {}", p.scale);
    }
    Ok(())
}

/// Forward: `out [B, Hq, L, Ev]` and `lse [B, Hq, L]` (f32, or f64 for f64 operands).
/// `workspace` (at least [`attention_workspace`] bytes) holds the packed keys and values; without
/// one they are allocated here.
#[allow(clippy::too_many_arguments)]
pub fn attention_forward(
    out: &TensorMut,
    lse: &TensorMut,
    q: &TensorRef,
    k: &TensorRef,
    v: &TensorRef,
    mask: Option<&TensorRef>,
    p: Params,
    workspace: Option<&TensorMut>,
) -> FooResult<()> {
    let g = geometry(q, k, v, mask)?;
    check_params(&p)?;
    check_out("output", out, [g.b, g.hq, g.l, g.ev], q.dtype)?;
    check_lse(&lse.shape, &lse.strides, lse.dtype, &g, q.dtype)?;
    if g.b * g.hq * g.l == 0 || g.ev == 0 {
        return Ok(());
    }
    if g.s == 0 {
        return invalid_arg!("attention: empty key sequence (the glue fills zeros)");
    }
    let ops = Ops {
        g,
        p,
        q: View::r(q),
        k: View::r(k),
        v: View::r(v),
        mask: mask.map(View::r),
        out: View::m(out),
        lse: lse_view(SendPtr::of(lse.ptr), lse.dtype, &lse.strides),
        dout: None,
        dq: None,
        dk: None,
        dv: None,
        dbias: None,
    };
    if math_of(q.dtype) == DType::F64 {
        run_forward(Job::<f64>::new(ops), workspace)
    } else {
        run_forward(Job::<f32>::new(ops), workspace)
    }
}

fn run_forward<M: AttnMath>(mut job: Job<M>, ws: Option<&TensorMut>) -> FooResult<()> {
    pack_forward(&mut job, ws)?;
    parallel_for(job.g.b * job.g.hq * job.g.nqb, 1, &|s, e| {
        fwd_range(&job, s, e)
    });
    Ok(())
}

/// Bytes of workspace the forward (or backward) needs for these operands: their keys and
/// values packed in the math dtype.
pub fn attention_workspace(
    q: &TensorRef,
    k: &TensorRef,
    v: &TensorRef,
    backward: bool,
) -> FooResult<usize> {
    let g = geometry(q, k, v, None)?;
    let per = if backward {
        let (a, b, c) = bwd_pack_lens(&g);
        a + b + c
    } else {
        g.nkb * g.e * BK + g.sp * g.evp
    };
    let size = if math_of(q.dtype) == DType::F64 { 8 } else { 4 };
    Ok(g.b * g.hk * per * size)
}

#[cfg(test)]
thread_local! {
    /// Tests force either way of splitting the backward.
    static FORCE_SPLIT: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

fn split_backward(g: &Geo) -> bool {
    #[cfg(test)]
    if let Some(f) = FORCE_SPLIT.with(|c| c.get()) {
        return f;
    }
    g.b * g.hk < 2 * crate::runtime::pool::num_threads()
}

/// Runs the backward: one task per (b, key/value head) when there are enough of them to keep
/// every thread busy, else a dK/dV pass over (b, key/value head, key block) and a dQ pass over
/// (b, query head, query block), which recompute the scores twice but give the same bits.
fn run_backward<M: AttnMath>(mut job: Job<M>, ws: Option<&TensorMut>) -> FooResult<()> {
    pack_backward(&mut job, ws)?;
    let g = job.g;
    if !split_backward(&g) {
        parallel_for(g.b * g.hk, 1, &|s, e| bwd_range(&job, s, e));
    } else {
        job.split = Split::Dkv;
        parallel_for(g.b * g.hk * g.nkb, 1, &|s, e| bwd_range(&job, s, e));
        job.split = Split::Dq;
        parallel_for(g.b * g.hq * g.nqb, 1, &|s, e| bwd_range(&job, s, e));
    }
    Ok(())
}

/// The tensors of a backward call.
pub struct Grads<'a> {
    pub dq: &'a TensorMut,
    pub dk: &'a TensorMut,
    pub dv: &'a TensorMut,
    /// Dense `[B, Hq, L, S]` of the math dtype: receives the gradient of the scores (the
    /// glue sums it to the mask's shape).
    pub dbias: Option<&'a TensorMut>,
}

/// Backward of [`attention_forward`] given its output `out` and `lse`.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    grads: Grads,
    dout: &TensorRef,
    q: &TensorRef,
    k: &TensorRef,
    v: &TensorRef,
    out: &TensorRef,
    lse: &TensorRef,
    mask: Option<&TensorRef>,
    p: Params,
    workspace: Option<&TensorMut>,
) -> FooResult<()> {
    let g = geometry(q, k, v, mask)?;
    check_params(&p)?;
    let dt = q.dtype;
    let oshape = [g.b, g.hq, g.l, g.ev];
    for (what, t) in [("output", out), ("grad_out", dout)] {
        if t.shape.as_slice() != oshape || t.dtype != dt {
            return invalid_arg!(
                "attention backward: {what} is {} {:?}, expected {} {oshape:?}",
                t.dtype.name(),
                t.shape,
                dt.name()
            );
        }
        unit_last(what, &t.shape, &t.strides)?;
    }
    check_lse(&lse.shape, &lse.strides, lse.dtype, &g, dt)?;
    check_out("grad_query", grads.dq, [g.b, g.hq, g.l, g.e], dt)?;
    check_out("grad_key", grads.dk, [g.b, g.hk, g.s, g.e], dt)?;
    check_out("grad_value", grads.dv, [g.b, g.hk, g.s, g.ev], dt)?;
    if let Some(db) = grads.dbias {
        if db.shape.as_slice() != [g.b, g.hq, g.l, g.s]
            || db.dtype != math_of(dt)
            || !db.is_contiguous()
        {
            return invalid_arg!(
                "attention backward: grad_bias must be a dense {} [{}, {}, {}, {}]",
                math_of(dt).name(),
                g.b,
                g.hq,
                g.l,
                g.s
            );
        }
    }
    if g.b * g.hk * g.l == 0 || g.s == 0 {
        return invalid_arg!("attention backward: empty operands (the glue handles them)");
    }
    let ops = Ops {
        g,
        p,
        q: View::r(q),
        k: View::r(k),
        v: View::r(v),
        mask: mask.map(View::r),
        out: View::r(out),
        lse: lse_view(SendPtr::of(lse.ptr), lse.dtype, &lse.strides),
        dout: Some(View::r(dout)),
        dq: Some(View::m(grads.dq)),
        dk: Some(View::m(grads.dk)),
        dv: Some(View::m(grads.dv)),
        dbias: grads.dbias.map(|t| SendPtr::of(t.ptr)),
    };
    if math_of(dt) == DType::F64 {
        run_backward(Job::<f64>::new(ops), workspace)
    } else {
        run_backward(Job::<f32>::new(ops), workspace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::uniform;
    use crate::runtime::rng::philox4x32_10;
    use crate::tensor::contiguous_strides;

    struct Case {
        b: usize,
        hq: usize,
        hk: usize,
        l: usize,
        s: usize,
        e: usize,
        ev: usize,
        causal: bool,
        mask: bool,
        dropout: Option<f64>,
    }

    fn tref<T>(data: &[T], shape: &[usize], dtype: DType) -> TensorRef {
        TensorRef {
            ptr: data.as_ptr() as *const u8,
            shape: shape.into(),
            strides: contiguous_strides(shape),
            dtype,
        }
    }

    fn tmut<T>(data: &mut [T], shape: &[usize], dtype: DType) -> TensorMut {
        TensorMut {
            ptr: data.as_mut_ptr() as *mut u8,
            shape: shape.into(),
            strides: contiguous_strides(shape),
            dtype,
        }
    }

    fn keep(d: &Dropout, idx: u64) -> bool {
        let w = d.offset + idx;
        let blk = w / 4;
        let word = philox4x32_10(
            [blk as u32, (blk >> 32) as u32, 0, 0],
            [d.seed as u32, (d.seed >> 32) as u32],
        )[(w % 4) as usize];
        word as u64 >= d.threshold()
    }

    struct Ref {
        out: Vec<f64>,
        dq: Vec<f64>,
        dk: Vec<f64>,
        dv: Vec<f64>,
        dmask: Vec<f64>,
    }

    /// Attention and its gradients, one row at a time in f64 with the same dropout words.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        c: &Case,
        q: &[f64],
        k: &[f64],
        v: &[f64],
        mask: &[f64],
        dout: &[f64],
        scale: f64,
        d: Option<Dropout>,
    ) -> Ref {
        let (g, l, s, e, ev) = (c.hq / c.hk, c.l, c.s, c.e, c.ev);
        let mut r = Ref {
            out: vec![0.0; c.b * c.hq * l * ev],
            dq: vec![0.0; c.b * c.hq * l * e],
            dk: vec![0.0; c.b * c.hk * s * e],
            dv: vec![0.0; c.b * c.hk * s * ev],
            dmask: vec![0.0; c.b * c.hq * l * s],
        };
        for b in 0..c.b {
            for h in 0..c.hq {
                let hk = h / g;
                for i in 0..l {
                    let qi = &q[((b * c.hq + h) * l + i) * e..][..e];
                    let row = ((b * c.hq + h) * l + i) * s;
                    let mut sc: Vec<f64> = (0..s)
                        .map(|j| {
                            let kj = &k[((b * c.hk + hk) * s + j) * e..][..e];
                            let dot: f64 = qi.iter().zip(kj).map(|(x, y)| x * y).sum();
                            let m = if c.mask { mask[row + j] } else { 0.0 };
                            if c.causal && j > i {
                                f64::NEG_INFINITY
                            } else {
                                dot * scale + m
                            }
                        })
                        .collect();
                    let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    if mx == f64::NEG_INFINITY {
                        sc.iter_mut().for_each(|x| *x = 0.0);
                    } else {
                        let tot: f64 = sc.iter().map(|x| (x - mx).exp()).sum();
                        sc.iter_mut().for_each(|x| *x = (*x - mx).exp() / tot);
                    }
                    let z: Vec<f64> = (0..s)
                        .map(|j| match &d {
                            Some(d) if keep(d, (row + j) as u64) => 1.0 / (1.0 - d.p),
                            Some(_) => 0.0,
                            None => 1.0,
                        })
                        .collect();
                    let doi = &dout[((b * c.hq + h) * l + i) * ev..][..ev];
                    let mut dp = vec![0.0; s];
                    for j in 0..s {
                        let vj = &v[((b * c.hk + hk) * s + j) * ev..][..ev];
                        for cc in 0..ev {
                            r.out[((b * c.hq + h) * l + i) * ev + cc] += sc[j] * z[j] * vj[cc];
                            r.dv[((b * c.hk + hk) * s + j) * ev + cc] += sc[j] * z[j] * doi[cc];
                        }
                        dp[j] = doi.iter().zip(vj).map(|(x, y)| x * y).sum::<f64>() * z[j];
                    }
                    let dsum: f64 = (0..s).map(|j| sc[j] * dp[j]).sum();
                    for j in 0..s {
                        let ds = sc[j] * (dp[j] - dsum);
                        r.dmask[row + j] = ds;
                        let kj = &k[((b * c.hk + hk) * s + j) * e..][..e];
                        for cc in 0..e {
                            r.dq[((b * c.hq + h) * l + i) * e + cc] += scale * ds * kj[cc];
                            r.dk[((b * c.hk + hk) * s + j) * e + cc] += scale * ds * qi[cc];
                        }
                    }
                }
            }
        }
        r
    }

    fn max_rel(got: &[f64], want: &[f64]) -> f64 {
        let scale = want.iter().fold(1e-3f64, |m, x| m.max(x.abs()));
        got.iter()
            .zip(want)
            .fold(0.0, |m, (a, b)| m.max((a - b).abs() / scale))
    }

    /// Runs forward and backward in `T`'s math and compares with the f64 reference.
    fn check<T: Copy + 'static>(
        c: &Case,
        dtype: DType,
        to: fn(f64) -> T,
        from: fn(T) -> f64,
        tol: f64,
    ) {
        let qs = [c.b, c.hq, c.l, c.e];
        let ks = [c.b, c.hk, c.s, c.e];
        let vs = [c.b, c.hk, c.s, c.ev];
        let os = [c.b, c.hq, c.l, c.ev];
        let ms = [c.b, c.hq, c.l, c.s];
        let n = |s: &[usize]| s.iter().product::<usize>();
        let q: Vec<f64> = uniform(n(&qs), 1, -2.0, 2.0);
        let k: Vec<f64> = uniform(n(&ks), 2, -2.0, 2.0);
        let v: Vec<f64> = uniform(n(&vs), 3, -1.0, 1.0);
        let dout: Vec<f64> = uniform(n(&os), 4, -1.0, 1.0);
        let mut mask: Vec<f64> = uniform(n(&ms), 5, -1.0, 1.0);
        for (i, m) in mask.iter_mut().enumerate() {
            if i % 7 == 3 {
                *m = f64::NEG_INFINITY;
            }
        }
        // One row fully masked.
        if c.mask {
            mask[..c.s].iter_mut().for_each(|m| *m = f64::NEG_INFINITY);
        }
        let cast = |x: &[f64]| x.iter().map(|&y| to(y)).collect::<Vec<T>>();
        let back = |x: &[T]| x.iter().map(|&y| from(y)).collect::<Vec<f64>>();
        // The reference sees the inputs after rounding to T.
        let (qt, kt, vt, dt, mt) = (cast(&q), cast(&k), cast(&v), cast(&dout), cast(&mask));
        let (q, k, v, dout, mask) = (back(&qt), back(&kt), back(&vt), back(&dt), back(&mt));
        let scale = 1.0 / (c.e as f64).sqrt();
        let d = c.dropout.map(|p| Dropout {
            p,
            seed: 0x1234_5678_9abc,
            offset: 8,
        });
        let p = Params {
            scale,
            causal: c.causal,
            dropout: d,
        };
        let want = reference(c, &q, &k, &v, &mask, &dout, scale, d);

        let math = math_of(dtype);
        let mut out = vec![to(0.0); n(&os)];
        let mut lse64 = vec![0f64; c.b * c.hq * c.l];
        let mut lse32 = vec![0f32; c.b * c.hq * c.l];
        let ls = [c.b, c.hq, c.l];
        let lse_m = if math == DType::F64 {
            tmut(&mut lse64, &ls, math)
        } else {
            tmut(&mut lse32, &ls, math)
        };
        let (qr, kr, vr, mr) = (
            tref(&qt, &qs, dtype),
            tref(&kt, &ks, dtype),
            tref(&vt, &vs, dtype),
            tref(&mt, &ms, dtype),
        );
        let mref = c.mask.then_some(&mr);
        attention_forward(
            &tmut(&mut out, &os, dtype),
            &lse_m,
            &qr,
            &kr,
            &vr,
            mref,
            p,
            None,
        )
        .unwrap();
        {
            // A caller's workspace holding garbage gives the same bits.
            let bytes = attention_workspace(&qr, &kr, &vr, false).unwrap();
            let mut ws = vec![0x7fu8; bytes + 8];
            let off = ws.as_ptr().align_offset(8);
            let wsm = tmut(&mut ws[off..off + bytes], &[bytes], DType::U8);
            let mut out2 = vec![to(0.0); n(&os)];
            attention_forward(
                &tmut(&mut out2, &os, dtype),
                &lse_m,
                &qr,
                &kr,
                &vr,
                mref,
                p,
                Some(&wsm),
            )
            .unwrap();
            let bits = |x: &[T]| back(x).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&out) == bits(&out2),
                "forward with a workspace differs"
            );
        }
        let err = max_rel(&back(&out), &want.out);
        assert!(err < tol, "forward error {err}");

        let (mut dq, mut dk, mut dv) = (
            vec![to(0.0); n(&qs)],
            vec![to(0.0); n(&ks)],
            vec![to(0.0); n(&vs)],
        );
        let mut db64 = vec![0f64; n(&ms)];
        let mut db32 = vec![0f32; n(&ms)];
        let dbm = if math == DType::F64 {
            tmut(&mut db64, &ms, math)
        } else {
            tmut(&mut db32, &ms, math)
        };
        let (dqm, dkm, dvm) = (
            tmut(&mut dq, &qs, dtype),
            tmut(&mut dk, &ks, dtype),
            tmut(&mut dv, &vs, dtype),
        );
        let grads = Grads {
            dq: &dqm,
            dk: &dkm,
            dv: &dvm,
            dbias: Some(&dbm),
        };
        let bwd = |grads: Grads, split: bool, ws: Option<&TensorMut>| {
            FORCE_SPLIT.with(|c| c.set(Some(split)));
            let r = attention_backward(
                grads,
                &tref(&dt, &os, dtype),
                &qr,
                &kr,
                &vr,
                &tref(&out, &os, dtype),
                &lse_m.as_ref(),
                mref,
                p,
                ws,
            );
            FORCE_SPLIT.with(|c| c.set(None));
            r.unwrap();
        };
        bwd(grads, false, None);
        {
            // The split backward (dK/dV pass, then dQ pass) gives the same bits, also with a
            // caller's workspace full of garbage.
            let (mut dq2, mut dk2, mut dv2) = (
                vec![to(0.0); n(&qs)],
                vec![to(0.0); n(&ks)],
                vec![to(0.0); n(&vs)],
            );
            let (dqm2, dkm2, dvm2) = (
                tmut(&mut dq2, &qs, dtype),
                tmut(&mut dk2, &ks, dtype),
                tmut(&mut dv2, &vs, dtype),
            );
            let bytes = attention_workspace(&qr, &kr, &vr, true).unwrap();
            let mut ws = vec![0xa5u8; bytes + 8];
            let off = ws.as_ptr().align_offset(8);
            let wsm = tmut(&mut ws[off..off + bytes], &[bytes], DType::U8);
            bwd(
                Grads {
                    dq: &dqm2,
                    dk: &dkm2,
                    dv: &dvm2,
                    dbias: None,
                },
                true,
                Some(&wsm),
            );
            let bits = |x: &[T]| back(x).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert!(bits(&dq) == bits(&dq2), "split backward: dq differs");
            assert!(
                bits(&dk) == bits(&dk2) && bits(&dv) == bits(&dv2),
                "split backward: dk/dv differ"
            );
        }
        let db: Vec<f64> = if math == DType::F64 {
            db64
        } else {
            db32.iter().map(|&x| x as f64).collect()
        };
        for (name, got, want) in [
            ("dq", back(&dq), &want.dq),
            ("dk", back(&dk), &want.dk),
            ("dv", back(&dv), &want.dv),
            ("dbias", db, &want.dmask),
        ] {
            let err = max_rel(&got, want);
            assert!(err < tol * 10.0, "{name} error {err}");
        }
    }

    fn cases() -> Vec<Case> {
        let base = Case {
            b: 2,
            hq: 4,
            hk: 2,
            l: 70,
            s: 130,
            e: 24,
            ev: 40,
            causal: false,
            mask: false,
            dropout: None,
        };
        vec![
            Case { ..base },
            Case {
                causal: true,
                ..base
            },
            Case {
                causal: true,
                l: 150,
                s: 90,
                hk: 4,
                ..base
            },
            Case { mask: true, ..base },
            Case {
                dropout: Some(0.3),
                causal: true,
                ..base
            },
            Case {
                dropout: Some(0.5),
                mask: true,
                e: 64,
                ev: 64,
                l: 64,
                s: 64,
                hk: 1,
                ..base
            },
            // The forward scores a last block of at most PAD keys with the one before it (80
            // keys: 64 + 16), and a longer one on its own (81: 64 + 17).
            Case {
                s: 80,
                l: 80,
                causal: true,
                mask: true,
                dropout: Some(0.2),
                ..base
            },
            Case {
                s: 81,
                mask: true,
                ..base
            },
            Case {
                b: 1,
                hq: 1,
                hk: 1,
                l: 1,
                s: 1,
                e: 1,
                ev: 1,
                ..base
            },
        ]
    }

    #[test]
    fn attention_f64_matches_reference() {
        for c in cases() {
            check::<f64>(&c, DType::F64, |x| x, |x| x, 1e-12);
        }
    }

    #[test]
    fn attention_f32_matches_reference() {
        for c in cases() {
            check::<f32>(&c, DType::F32, |x| x as f32, |x| x as f64, 2e-6);
        }
    }

    #[test]
    fn attention_bf16_matches_reference() {
        for c in cases() {
            check::<half::bf16>(
                &c,
                DType::BF16,
                half::bf16::from_f64,
                half::bf16::to_f64,
                1e-2,
            );
        }
    }

    #[test]
    fn attention_bool_mask_and_strides() {
        // A bool mask broadcast with zero strides equals the additive mask it stands for.
        let (b, h, l, s, e) = (1usize, 2usize, 5usize, 67usize, 8usize);
        let q: Vec<f32> = uniform(b * h * l * e, 7, -1.0, 1.0)
            .iter()
            .map(|&x| x as f32)
            .collect();
        let k: Vec<f32> = uniform(b * h * s * e, 8, -1.0, 1.0)
            .iter()
            .map(|&x| x as f32)
            .collect();
        let keep: Vec<bool> = (0..l * s).map(|i| i % 5 != 1).collect();
        let add: Vec<f32> = keep
            .iter()
            .map(|&k| if k { 0.0 } else { f32::NEG_INFINITY })
            .collect();
        let shape = [b, h, l, s];
        let bcast = |ptr: *const u8, dtype| TensorRef {
            ptr,
            shape: shape.as_slice().into(),
            strides: [0, 0, s as isize, 1].as_slice().into(),
            dtype,
        };
        let qs = [b, h, l, e];
        let ks = [b, h, s, e];
        let p = Params {
            scale: 0.3,
            causal: false,
            dropout: None,
        };
        let run = |m: &TensorRef| {
            let mut out = vec![0f32; b * h * l * e];
            let mut lse = vec![0f32; b * h * l];
            attention_forward(
                &tmut(&mut out, &qs, DType::F32),
                &tmut(&mut lse, &[b, h, l], DType::F32),
                &tref(&q, &qs, DType::F32),
                &tref(&k, &ks, DType::F32),
                &tref(&k, &ks, DType::F32),
                Some(m),
                p,
                None,
            )
            .unwrap();
            out
        };
        assert_eq!(
            run(&bcast(keep.as_ptr() as *const u8, DType::Bool)),
            run(&bcast(add.as_ptr() as *const u8, DType::F32))
        );
    }

    #[test]
    fn attention_rejects_bad_shapes() {
        let x = vec![0f32; 64];
        let t = tref(&x, &[1, 3, 4, 4], DType::F32);
        let k = tref(&x, &[1, 2, 4, 4], DType::F32);
        let mut o = vec![0f32; 64];
        let mut l = vec![0f32; 16];
        let p = Params {
            scale: 1.0,
            causal: false,
            dropout: None,
        };
        let err = attention_forward(
            &tmut(&mut o, &[1, 3, 4, 4], DType::F32),
            &tmut(&mut l, &[1, 3, 4], DType::F32),
            &t,
            &k,
            &k,
            None,
            p,
            None,
        );
        assert!(err.is_err());
        let bad = Params {
            dropout: Some(Dropout {
                p: 1.0,
                seed: 0,
                offset: 0,
            }),
            ..p
        };
        let t4 = tref(&x, &[1, 1, 4, 4], DType::F32);
        assert!(attention_forward(
            &tmut(&mut o, &[1, 1, 4, 4], DType::F32),
            &tmut(&mut l, &[1, 1, 4], DType::F32),
            &t4,
            &t4,
            &t4,
            None,
            bad,
            None
        )
        .is_err());
    }

    /// Block products: these register tiles against the `gemm` crate on the 64 x 64 x 64 f32
    /// products the kernels run (`cargo test --release --lib block_product_speed -- --ignored
    /// --nocapture`).
    #[test]
    #[ignore]
    fn block_product_speed() {
        let (m, n, k) = (64usize, 64usize, 64usize);
        let a: Vec<f32> = uniform(m * k, 1, -1.0, 1.0)
            .iter()
            .map(|&x| x as f32)
            .collect();
        let b: Vec<f32> = uniform(k * n, 2, -1.0, 1.0)
            .iter()
            .map(|&x| x as f32)
            .collect();
        let mut c = vec![0f32; m * n];
        let reps = 20_000;
        let flops = 2.0 * (m * n * k * reps) as f64;
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
            unsafe fn tiles(a: &[f32], b: &[f32], c: &mut [f32], reps: usize) {
                for _ in 0..reps {
                    // SAFETY: 64 x 64 row-major buffers.
                    unsafe {
                        gemm::<f32, false, true, true>(
                            64,
                            64,
                            64,
                            a.as_ptr(),
                            64,
                            b.as_ptr(),
                            64,
                            c.as_mut_ptr(),
                            64,
                            true,
                        )
                    };
                }
            }
            if simd::level() == 3 {
                let t = std::time::Instant::now();
                // SAFETY: AVX-512 checked above.
                unsafe { tiles(&a, &b, &mut c, reps) };
                println!(
                    "register tiles: {:.1} GFLOP/s",
                    flops / t.elapsed().as_secs_f64() / 1e9
                );
            }
        }
        let t = std::time::Instant::now();
        for _ in 0..reps {
            // SAFETY: 64 x 64 row-major buffers (column stride 1, row stride 64).
            unsafe {
                ::gemm::gemm(
                    m,
                    n,
                    k,
                    c.as_mut_ptr(),
                    1,
                    64,
                    true,
                    a.as_ptr(),
                    1,
                    64,
                    b.as_ptr(),
                    1,
                    64,
                    1.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    ::gemm::Parallelism::None,
                )
            };
        }
        println!(
            "gemm crate:     {:.1} GFLOP/s",
            flops / t.elapsed().as_secs_f64() / 1e9
        );
        assert!(c.iter().all(|x| x.is_finite()));
    }
}
