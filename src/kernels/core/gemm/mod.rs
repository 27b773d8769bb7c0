//! The GEMM engine every matrix product runs on: float32/float64/complex products on the
//! `gemm` crate ([`gemm_raw`]: one call, split over the calling thread's pool or under rayon by
//! size, `a @ w.t()` packed or turned around first, see [`nt`]) and the native bfloat16 product
//! for AVX512-BF16 CPUs ([`bf16`]). Users: `linalg` (mm/bmm/addmm...) and `conv` (im2col GEMMs).

pub mod bf16;
pub mod linear;
pub use linear::Half;
pub mod nt;
pub mod rows;
pub mod skinny;

use super::element::Element;
use super::parallel::{parallel_for, SendPtr};
use super::scratch::with_scratch;
use super::simd;
use super::transpose::transpose_into;
use crate::dtype::DType;
use num_complex::{Complex32, Complex64};
use std::ops::{Add, Mul};

/// Element types `gemm` multiplies natively.
pub trait GemmElem: Element + Add<Output = Self> + Mul<Output = Self> {
    const ZERO: Self;
    const ONE: Self;
    /// Neither inf nor nan (complex: in either part).
    fn finite(self) -> bool;
}

macro_rules! gemm_elem {
    ($t:ty, $zero:expr, $one:expr) => {
        impl GemmElem for $t {
            const ZERO: Self = $zero;
            const ONE: Self = $one;
            #[inline(always)]
            fn finite(self) -> bool {
                self.is_finite()
            }
        }
    };
}
gemm_elem!(f32, 0.0, 1.0);
gemm_elem!(f64, 0.0, 1.0);
gemm_elem!(
    Complex32,
    Complex32::new(0.0, 0.0),
    Complex32::new(1.0, 0.0)
);
gemm_elem!(
    Complex64,
    Complex64::new(0.0, 0.0),
    Complex64::new(1.0, 0.0)
);

/// Multiply-adds below which a matrix product stays on one thread. Handing a call to the pool
/// costs about 12 us here (measured: a 64x64x64 mm takes 3.8 us on the calling thread, 16 us via
/// the pool), as much as 2.5M multiply-adds on one core, so only clearly larger products go
/// parallel (`gemm` itself does not split below 48 * 48 * 256 per block either).
pub const GEMM_PARALLEL_FLOPS: usize = 1 << 22;

/// Multiply-adds from which a product called from a plain thread is split into one
/// single-threaded `gemm` call per thread over column (or row) blocks of the output, with
/// `pool::fork_join`: the caller starts at once and a helper joins within a microsecond when
/// one is polling, so this pays off from a few microseconds of work. Larger products split the
/// same way: `gemm`'s own rayon split, which shares packed panels between threads, waited on
/// workers that slept between calls and lost to it at every size measured but 2048^3 on 8
/// threads (16 threads, 2048^3: 21.0 against 16.6 ms, see `benches/kernels.rs`).
pub const GEMM_SPLIT_FLOPS: usize = 1 << 18;

/// `a @ w.t()` transposes `w` into a scratch matrix first ([`nt::with_transposed`]) from
/// this many rows of `a`, for a `w` of fewer than [`NT_PACK_ELEMENTS`] elements (twice that
/// from twice the rows). Measured on 2
/// threads against `gemm` reading `w.t()` in place: 128 x 64 x 256 0.050 -> 0.036 ms,
/// 256 x 1024 x 256 0.95 -> 0.70 ms, 512 x 768 x 768 3.5 -> 3.0 ms; but 64 x 256 x 256
/// 0.068 -> 0.087 ms, and a `w` beyond the caches (768 x 3072) 3.5 -> 5.2 ms at 128 rows.
pub const NT_PACK_ROWS: usize = 128;
/// See [`NT_PACK_ROWS`].
pub const NT_PACK_ELEMENTS: usize = 1 << 20;

/// A strided matrix: element `(i, j)` is at `ptr + i * rs + j * cs` (elements of `T`).
#[derive(Clone, Copy, Debug)]
pub struct Mat<T> {
    pub ptr: *const T,
    pub rs: isize,
    pub cs: isize,
}

impl<T> Mat<T> {
    /// The row-major matrix at `ptr` whose rows are `rs` elements apart.
    pub fn rows(ptr: *const T, rs: usize) -> Self {
        Mat {
            ptr,
            rs: rs as isize,
            cs: 1,
        }
    }
}

/// `dst = (read_dst ? dst : 0) + alpha * lhs @ rhs` with `lhs: m x k`, `rhs: k x n`.
/// `parallel`: products of [`GEMM_SPLIT_FLOPS`] or more split over the helper threads (from a
/// thread that is not a rayon worker; on one, `gemm` splits over that rayon pool).
///
/// # Safety
/// The three matrices must describe live memory of the given extents; `dst` must be writable,
/// have no internal overlap and not overlap `lhs`/`rhs`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_raw<T: GemmElem>(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    dst_rs: isize,
    dst_cs: isize,
    read_dst: bool,
    lhs: Mat<T>,
    rhs: Mat<T>,
    alpha: T,
    parallel: bool,
) {
    let p = Product {
        m,
        n,
        k,
        dst,
        dst_rs,
        dst_cs,
        read_dst,
        lhs,
        rhs,
        alpha,
    };
    if m == 0 || n == 0 {
        return;
    }
    // `a @ w.t()` in float32 on AVX2/AVX-512 (and `a @ b` on AVX2): the right operand packed
    // straight into the kernel's panels.
    if let Some(q) = linear_product(&p, std::ptr::null()) {
        // SAFETY: forwarded (T is f32).
        unsafe { linear::product(q, parallel) };
        return;
    }
    // `a @ w.t()` with many rows: `w` transposed, then the row-major product.
    if lhs.cs == 1
        && rhs.rs == 1
        && k > 1
        && (m >= NT_PACK_ROWS && n * k < NT_PACK_ELEMENTS
            || m >= 2 * NT_PACK_ROWS && n * k <= 2 * NT_PACK_ELEMENTS)
    {
        if let Some(parts) = split_parts(&p, parallel).filter(|_| 8 * n >= m) {
            // Split over columns: each thread transposes only its own rows of `w`, into its
            // own scratch, which its product then reads from its own cache (for 256 x 256 @
            // (2048 x 256)^T, 1.12 -> 1.0 ms on 2 threads; 520 x 512 @ (256 x 512)^T, a
            // linear layer of a ViT, 0.57-0.67 -> 0.46-0.58 ms against a row split after one
            // shared transpose). Each thread then packs all of `a`, which costs more than that
            // from 8 times more rows than columns (16384 x 256 @ (64 x 256)^T: 1.80 ms split
            // over rows, 2.14 over columns).
            // SAFETY: forwarded; the blocks partition dst.
            unsafe { gemm_split(p, parts, true) };
            return;
        }
        // SAFETY: `rhs` is `w.t()`: `w` is n x k with rows rhs.cs apart, inside the caller's
        // operand; the scratch is a dense k x n matrix.
        unsafe {
            nt::with_transposed(rhs.ptr, rhs.cs, n, k, true, |wt| {
                gemm_core(
                    Product {
                        rhs: dense(wt, n),
                        ..p
                    },
                    parallel,
                )
            })
        };
        return;
    }
    // `a @ w.t()` with a few rows of `a`, float32/float64: dot products streaming `w`.
    if lhs.cs == 1
        && rhs.rs == 1
        && m <= skinny::SKINNY_ROWS
        && k >= 16
        && matches!(T::DTYPE, DType::F32 | DType::F64)
    {
        // SAFETY: forwarded; `a`'s rows and `w`'s rows (`rhs`'s columns) are dense.
        unsafe {
            skinny::nt_rows(
                m, n, k, p.dst, p.dst_rs, p.dst_cs, p.read_dst, lhs.ptr, lhs.rs, rhs.ptr, rhs.cs,
                p.alpha, parallel,
            )
        };
        return;
    }
    // SAFETY: forwarded.
    if unsafe { gemm_nt(p, parallel) } {
        return;
    }
    // SAFETY: forwarded.
    unsafe { gemm_core(p, parallel) }
}

/// `p` as a [`linear::Linear`] product with `bias` (null or `n` floats) if it is one this CPU
/// runs on the pointer-row kernel: float32 `a @ w.t()` with the rows of `a`, `w` and the output
/// dense, a unit `alpha`, and the shapes where `w` was transposed for `gemm` before
/// ([`NT_PACK_ROWS`]) but no more rows than 8 times the columns. Measured on a Zen 4 against
/// that path, weights out of the caches, bias included, 2 threads: 256 x 1024 @ (256 x
/// 1024)^T 0.74-0.76 -> 0.67-0.70 ms, 1024 x 256 @ (256 x 256)^T 0.67-0.81 -> 0.63-0.69 ms,
/// 256 x 256 @ (2048 x 256)^T 1.42-1.47 -> 1.39-1.44 ms; elsewhere the packing of all of `w`
/// costs more than it saves (16 x 256 @ (1024 x 256)^T 0.086 -> 0.123 ms against the turned
/// product of [`gemm_nt`], 16384 x 256 @ (64 x 256)^T 5.6 -> 6.0 ms against a split over rows).
/// On AVX2 also `a @ b` with a row-major `b` (the linear layer's input gradient), whose panels
/// are plain copies of `b`'s rows: on a Zen 3, 2 threads, foo/CPU against `gemm`'s own packing,
/// 520 x 512 @ 512 x 256 1.43 -> 0.86, 520 x 256 @ 256 x 512 1.07 -> 0.94, 256 x 1024 @ 1024 x
/// 1024 1.00 -> 0.91. On AVX-512 for a `b` of at most [`AB_AVX512_ELEMENTS`].
fn linear_product<T: GemmElem>(p: &Product<T>, bias: *const f32) -> Option<linear::Linear> {
    let Product {
        m, n, k, lhs, rhs, ..
    } = *p;
    let fits = T::DTYPE == DType::F32
        && p.alpha == T::ONE
        && linear_fits(m, n, k, p.dst_cs, lhs.cs, rhs.rs, rhs.cs);
    fits.then(|| linear::Linear {
        m,
        n,
        k,
        a: lhs.ptr.cast(),
        lda: lhs.rs,
        w: rhs.ptr.cast(),
        ldw: rhs.cs,
        wk: rhs.rs,
        dst: p.dst.cast(),
        ldd: p.dst_rs,
        bias,
        add_dst: p.read_dst,
        w_half: None,
        dst_half: None,
    })
}

/// The most elements of a row-major `b` whose `a @ b` runs on [`linear::product`] on AVX-512
/// CPUs (1 MiB of floats); `gemm` takes larger ones. On a Zen 4, `addmm` with a bias against
/// `gemm`, same bits, medians of 7 alternating rounds, 2 threads: GPT-2's `Conv1D` 256 x 256 @
/// 256 x 768 0.471 -> 0.451 ms, 256 x 1024 @ 1024 x 256 0.608 -> 0.604, a ViT layer's input
/// gradient 520 x 512 @ 512 x 256 0.637 -> 0.600, 520 x 256 @ 256 x 512 0.643 -> 0.604 (and
/// 3-21% where the host had placed the two vCPUs apart); but 1024 x 1024 @ 1024 x 1024 9.74 ->
/// 10.05 and 256 x 1024 @ 1024 x 1024 2.46 -> 2.51 (on 1 thread 3-4% slower too).
const AB_AVX512_ELEMENTS: usize = 1 << 18;

/// Whether [`linear::product`] takes an `m x k` @ `k x n` product of these strides on this CPU
/// (see [`linear_product`]).
fn linear_fits(
    m: usize,
    n: usize,
    k: usize,
    dst_cs: isize,
    lhs_cs: isize,
    rhs_rs: isize,
    rhs_cs: isize,
) -> bool {
    let shape = (m >= NT_PACK_ROWS && n * k < NT_PACK_ELEMENTS
        || m >= 2 * NT_PACK_ROWS && n * k <= 2 * NT_PACK_ELEMENTS)
        && 8 * n >= m;
    dst_cs == 1
        && lhs_cs == 1
        && (rhs_rs == 1 || rhs_cs == 1 && (simd::level() == 2 || n * k <= AB_AVX512_ELEMENTS))
        && k > 1
        && shape
        && linear::panel_width().is_some()
}

/// Whether [`linear_widened`] takes an `m x k` @ `k x n` product with a row-major `lhs` and
/// `rhs` of these strides on this CPU.
pub fn linear_takes(m: usize, n: usize, k: usize, rhs_rs: isize, rhs_cs: isize) -> bool {
    linear_fits(m, n, k, 1, 1, rhs_rs, rhs_cs)
}

/// `dst = lhs @ rhs (+ bias)` with a float32 `lhs` and a 16-bit `rhs` of kind `rhs_half` (a
/// float16/bfloat16 product with float32 arithmetic), on [`linear::product`] if it runs this
/// product on this CPU (the float32 product's paths, [`linear_product`]): `rhs` is widened as
/// it is packed, and with `dst_half` the float32 sums are rounded into a 16-bit `dst` in the
/// epilogue (depths up to [`GEMM_DEPTH`]; `dst` is float32 without it). False otherwise, with
/// nothing written.
///
/// # Safety
/// As [`gemm_raw`], with `rhs` (and `dst` with `round`) holding 16-bit elements; `bias` is null
/// or holds `n` floats.
#[allow(clippy::too_many_arguments)]
pub unsafe fn linear_widened(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut u8,
    dst_rs: isize,
    dst_half: Option<Half>,
    lhs: Mat<f32>,
    rhs: Mat<u16>,
    rhs_half: Half,
    bias: *const f32,
    parallel: bool,
) -> bool {
    let depth_fits = dst_half.is_none() || k <= GEMM_DEPTH;
    if m == 0 || n == 0 || !depth_fits || !linear_fits(m, n, k, 1, lhs.cs, rhs.rs, rhs.cs) {
        return false;
    }
    let q = linear::Linear {
        m,
        n,
        k,
        a: lhs.ptr,
        lda: lhs.rs,
        w: rhs.ptr.cast(),
        ldw: rhs.cs,
        wk: rhs.rs,
        dst: dst.cast(),
        ldd: dst_rs,
        bias,
        add_dst: false,
        w_half: Some(rhs_half),
        dst_half,
    };
    // SAFETY: forwarded.
    unsafe { linear::product(q, parallel) };
    true
}

/// `dst = a @ w.t() + bias` (each row of `dst` gets the `n` floats at `bias`), if
/// [`linear::product`] runs it on this CPU; false otherwise, with nothing written.
///
/// # Safety
/// As [`gemm_raw`], and `bias` holds `n` floats.
#[allow(clippy::too_many_arguments)]
pub unsafe fn linear_with_bias(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    dst_rs: isize,
    lhs: Mat<f32>,
    rhs: Mat<f32>,
    bias: *const f32,
    parallel: bool,
) -> bool {
    let p = Product {
        m,
        n,
        k,
        dst,
        dst_rs,
        dst_cs: 1,
        read_dst: false,
        lhs,
        rhs,
        alpha: 1.0,
    };
    match linear_product(&p, bias) {
        Some(q) => {
            // SAFETY: forwarded.
            unsafe { linear::product(q, parallel) };
            true
        }
        None => false,
    }
}

/// `dst = lhs @ rhs` (`dst` is not read) as plain `gemm` calls on the calling thread, in the
/// layouts given: none of [`gemm_raw`]'s shape-dependent strategies, so an output element is
/// summed the same way wherever it lies in the product. For callers that split one product by
/// hand and must get the same bits from any split (`kernels::rnn`'s layer teams).
///
/// # Safety
/// As [`gemm_raw`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_plain<T: GemmElem>(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    dst_rs: isize,
    dst_cs: isize,
    lhs: Mat<T>,
    rhs: Mat<T>,
) {
    if m == 0 || n == 0 {
        return;
    }
    let p = Product {
        m,
        n,
        k,
        dst,
        dst_rs,
        dst_cs,
        read_dst: false,
        lhs,
        rhs,
        alpha: T::ONE,
    };
    // SAFETY: forwarded; not parallel, so no split.
    unsafe { gemm_core(p, false) }
}

/// The arguments of one [`gemm_raw`] call, passed whole between its strategies.
#[derive(Clone, Copy)]
struct Product<T> {
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    dst_rs: isize,
    dst_cs: isize,
    read_dst: bool,
    lhs: Mat<T>,
    rhs: Mat<T>,
    alpha: T,
}

/// `a @ w.t()` with row-major `a`, `w` and output (the linear layer) and fewer output rows than
/// columns: `gemm` packs the column-major right operand slowly in that orientation, 4x1024 @
/// 1024x1024 took 3-7 ms against 0.1 ms for `a @ b`, 65x1024 8.6 ms against 1.4 ms (measured,
/// one thread; with more rows than columns it is as fast as `a @ b`). The transposed product
/// `w @ a.t()` is computed instead, the orientation `gemm` does fast, into a scratch matrix that
/// is then transposed into the output in 8 x 8 blocks (`m * n` copies against `m * n * k`
/// multiply-adds; a fresh zeroed matrix and an element-by-element transpose had cost 32 x 256
/// @ (1024 x 256)^T 0.099 ms where the CPU takes 0.080, now 0.072 on 2 threads).
/// Returns false for every other layout.
///
/// # Safety
/// As [`gemm_raw`].
unsafe fn gemm_nt<T: GemmElem>(p: Product<T>, parallel: bool) -> bool {
    let Product {
        m, n, k, lhs, rhs, ..
    } = p;
    let nt = p.dst_cs == 1 && lhs.cs == 1 && rhs.rs == 1 && rhs.cs == k as isize;
    if !nt || m < 2 || m >= n || k < 2 {
        return false;
    }
    with_scratch::<T, _>(n * m, |t| {
        let turned = Product {
            m: n,
            n: m,
            k,
            dst: t.as_mut_ptr(),
            dst_rs: m as isize,
            dst_cs: 1,
            read_dst: false,
            lhs: Mat {
                ptr: rhs.ptr,
                rs: rhs.cs,
                cs: 1,
            },
            rhs: Mat {
                ptr: lhs.ptr,
                rs: 1,
                cs: lhs.rs,
            },
            alpha: p.alpha,
        };
        // SAFETY: t is a scratch row-major [n, m] matrix, written whole by the product (it does
        // not read its destination); the operands are the caller's, read transposed.
        unsafe { gemm_core(turned, parallel) };
        if !p.read_dst && p.dst_rs == n as isize {
            // SAFETY: the caller's output is a dense row-major [m, n] matrix (dst_cs == 1,
            // dst_rs == n) that only this call writes; t is [n, m], rows m apart.
            let out = unsafe { std::slice::from_raw_parts_mut(p.dst, m * n) };
            // SAFETY: t holds the n x m matrix.
            unsafe { transpose_into(t.as_ptr(), m as isize, n, m, out, parallel) };
            return;
        }
        // Rows apart or added to the output (addmm's staged bias): transposed densely first,
        // then added row by row.
        with_scratch::<T, _>(m * n, |u| {
            // SAFETY: as above, into the scratch u.
            unsafe { transpose_into(t.as_ptr(), m as isize, n, m, u, parallel) };
            let (d, u, read_dst, dst_rs) = (SendPtr::new(p.dst), &*u, p.read_dst, p.dst_rs);
            parallel_for(m, (1 << 14) / n + 1, &|i0, i1| {
                for i in i0..i1 {
                    // SAFETY: row i of the caller's row-major output (n elements, dst_cs == 1),
                    // written only here.
                    let row =
                        unsafe { std::slice::from_raw_parts_mut(d.at(i as isize * dst_rs), n) };
                    let src = &u[i * n..(i + 1) * n];
                    if read_dst {
                        row.iter_mut().zip(src).for_each(|(v, &x)| *v = *v + x);
                    } else {
                        row.copy_from_slice(src);
                    }
                }
            });
        });
    });
    true
}

/// [`gemm_raw`] for any layout, as `gemm` (or [`gemm_split`]) does it.
///
/// # Safety
/// As [`gemm_raw`].
unsafe fn gemm_core<T: GemmElem>(p: Product<T>, parallel: bool) {
    let Product { m, n, k, .. } = p;
    if let Some(parts) = split_parts(&p, parallel) {
        // SAFETY: forwarded; the blocks partition dst.
        unsafe { gemm_split(p, parts, false) };
        return;
    }
    let in_pool = rayon::current_thread_index().is_some();
    let par = if parallel && in_pool && m * n * k >= GEMM_PARALLEL_FLOPS {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    let Product { lhs, rhs, .. } = p;
    for (k0, k1) in depth_pieces(k) {
        let (i, read_dst) = (k0 as isize, p.read_dst || k0 > 0);
        // SAFETY: caller's contract, over depths k0..k1 of the operands; gemm computes
        // dst := 1 * dst + alpha * lhs @ rhs (its `alpha` scales dst, its `beta` the product)
        // and ignores dst when read_dst is false.
        unsafe {
            gemm::gemm(
                m,
                n,
                k1 - k0,
                p.dst,
                p.dst_cs,
                p.dst_rs,
                read_dst,
                lhs.ptr.offset(i * lhs.cs),
                lhs.cs,
                lhs.rs,
                rhs.ptr.offset(i * rhs.rs),
                rhs.cs,
                rhs.rs,
                T::ONE,
                p.alpha,
                false,
                false,
                false,
                par,
            )
        }
    }
}

/// The most depth one `gemm` call gets: its cache blocking sums at most this much depth into
/// each output element before it adds the running total (`kc`), and picks `kc` by the output's
/// shape: `min(k, 512)` for outputs up to 64 x 64, `k / ceil(k / 512)` (here) for larger ones.
/// So two blocks of one product (the threads' blocks of [`gemm_split`]) could sum in different
/// orders; with the depth cut here, every call has `kc == k`, and a product's bits are the same
/// whatever its blocks, hence whatever the thread count.
pub const GEMM_DEPTH: usize = 512;

/// `0..k` in `ceil(k / GEMM_DEPTH)` near-equal pieces (what `gemm` cuts a large output's
/// depth into on this project's machines, so its speed is unchanged).
fn depth_pieces(k: usize) -> impl Iterator<Item = (usize, usize)> {
    let pieces = k.div_ceil(GEMM_DEPTH).max(1);
    let step = k.div_ceil(pieces).max(1);
    (0..pieces).map(move |i| (i * step, ((i + 1) * step).min(k)))
}

/// The dense row-major `k x n` matrix in `t`.
fn dense<T>(t: &[T], n: usize) -> Mat<T> {
    Mat {
        ptr: t.as_ptr(),
        rs: n as isize,
        cs: 1,
    }
}

/// Into how many blocks [`gemm_split`] cuts `p` on the calling thread, if it does.
fn split_parts<T>(p: &Product<T>, parallel: bool) -> Option<usize> {
    let threads = crate::runtime::pool::num_threads();
    let in_pool = rayon::current_thread_index().is_some();
    (parallel && !in_pool && threads > 1 && p.m * p.n * p.k >= GEMM_SPLIT_FLOPS).then_some(threads)
}

/// How [`gemm_split`] tiles an `m x n` output for `parts` threads: (row blocks, column
/// blocks) from a divisor pair of `parts`, a side cut at most into whole 16-wide microkernel
/// tiles. The most blocks win (each thread gets one), then the fewest copies: each block packs
/// its own rows of `lhs` and columns of `rhs`, `k * (m * columns + n * rows)` in all. So 2
/// threads cut the longer side in two, and 16 threads a square output 4 x 4 (a 1 x 16 cut
/// would pack all of `lhs` 16 times).
fn split_grid(m: usize, n: usize, parts: usize) -> (usize, usize) {
    (1..=parts)
        .filter(|r| parts % r == 0)
        .map(|r| (r.min((m / 16).max(1)), (parts / r).min((n / 16).max(1))))
        .min_by_key(|&(r, c)| (usize::MAX - r * c, m * c + n * r))
        .unwrap_or((1, 1))
}

/// `len` cut into at most `parts` blocks of whole 16-wide microkernel tiles: (block length,
/// blocks); the last block takes the rest, and a rest under 16 joins the block before it (a
/// block 1 wide would take `gemm`'s matrix-vector path, which sums in another order).
fn cuts(len: usize, parts: usize) -> (usize, usize) {
    let step = len.div_ceil(parts.max(1)).next_multiple_of(16);
    let blocks = len.div_ceil(step);
    match blocks > 1 && len - (blocks - 1) * step < 16 {
        true => (step, blocks - 1),
        false => (step, blocks),
    }
}

/// [`gemm_raw`] as single-threaded products over a grid of output blocks (see [`split_grid`]),
/// about one per thread of `parts`, run with [`parallel_for`] from the calling thread.
/// `transpose_rhs`: `rhs` is `w.t()` (rows 1 apart) and the blocks are column blocks; each
/// block's rows of `w` are transposed into the block's own scratch first.
///
/// # Safety
/// As [`gemm_raw`].
unsafe fn gemm_split<T: GemmElem>(p: Product<T>, parts: usize, transpose_rhs: bool) {
    let (rows, cols) = match transpose_rhs {
        true => (1, parts.min(p.n.div_ceil(16))),
        false => split_grid(p.m, p.n, parts),
    };
    let (row_step, row_blocks) = cuts(p.m, rows);
    let (col_step, col_blocks) = cuts(p.n, cols);
    let (d, a, b) = (
        SendPtr::new(p.dst),
        SendPtr::of(p.lhs.ptr),
        SendPtr::of(p.rhs.ptr),
    );
    parallel_for(row_blocks * col_blocks, 1, &|s, e| {
        for blk in s..e {
            let (bi, bj) = (blk / col_blocks, blk % col_blocks);
            let (i0, j0) = (bi * row_step, bj * col_step);
            let i1 = if bi + 1 == row_blocks {
                p.m
            } else {
                i0 + row_step
            };
            let j1 = if bj + 1 == col_blocks {
                p.n
            } else {
                j0 + col_step
            };
            let (i, j) = (i0 as isize, j0 as isize);
            // The pointers are re-derived from the Send wrappers inside the worker.
            let block = Product {
                m: i1 - i0,
                n: j1 - j0,
                dst: d.at(i * p.dst_rs + j * p.dst_cs),
                lhs: Mat {
                    ptr: a.at(i * p.lhs.rs) as *const T,
                    ..p.lhs
                },
                rhs: Mat {
                    ptr: b.at(j * p.rhs.cs) as *const T,
                    ..p.rhs
                },
                ..p
            };
            if transpose_rhs {
                let nb = block.n;
                // SAFETY: the block's rhs is `w.t()` for rows j0..j1 of `w` (rows rhs.cs
                // apart, k elements each), inside the caller's operand.
                unsafe {
                    nt::with_transposed(block.rhs.ptr, block.rhs.cs, nb, p.k, false, |wt| {
                        gemm_core(
                            Product {
                                rhs: dense(wt, nb),
                                ..block
                            },
                            false,
                        )
                    })
                };
                continue;
            }
            // SAFETY: a block of dst (disjoint between blocks) and the matching rows of lhs and
            // columns of rhs, inside the caller's matrices.
            unsafe { gemm_core(block, false) };
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A product split into any grid of blocks has the bits of the whole product (so results do
    /// not depend on the thread count), depths over [`GEMM_DEPTH`] and blocks of 64 x 64 or less
    /// included; and the grids cut as documented.
    #[test]
    fn split_products_have_the_whole_products_bits() {
        for (m, n, k) in [
            (64, 130, 600),
            (128, 128, 1000),
            (200, 33, 1500),
            (17, 300, 513),
        ] {
            let lhs: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5)
                .collect();
            let rhs: Vec<f32> = (0..k * n)
                .map(|i| ((i * 104729) % 997) as f32 * 1e-3)
                .collect();
            let product = |parts: Option<usize>| {
                let mut dst = vec![0.0f32; m * n];
                let p = Product {
                    m,
                    n,
                    k,
                    dst: dst.as_mut_ptr(),
                    dst_rs: n as isize,
                    dst_cs: 1,
                    read_dst: false,
                    lhs: dense(&lhs, k),
                    rhs: dense(&rhs, n),
                    alpha: 1.0,
                };
                // SAFETY: owned row-major matrices of the product's shapes.
                unsafe {
                    match parts {
                        Some(parts) => gemm_split(p, parts, false),
                        None => gemm_core(p, false),
                    }
                };
                dst
            };
            let whole = product(None);
            for parts in [2, 3, 4, 6, 8, 16] {
                let split = product(Some(parts));
                let same = whole
                    .iter()
                    .zip(&split)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{m}x{n}x{k} in {parts} parts");
            }
        }
        assert_eq!(split_grid(2048, 2048, 16), (4, 4));
        assert_eq!(split_grid(512, 1024, 2), (1, 2));
        assert_eq!(split_grid(1000, 16, 2), (2, 1));
        assert_eq!(split_grid(16, 4096, 16), (1, 16));
        // A rest under one tile joins the block before it.
        assert_eq!(cuts(100, 2), (64, 2));
        assert_eq!(cuts(130, 2), (80, 2));
        assert_eq!(cuts(33, 2), (32, 1));
        assert_eq!(
            depth_pieces(1000).collect::<Vec<_>>(),
            [(0, 500), (500, 1000)]
        );
        assert_eq!(depth_pieces(512).collect::<Vec<_>>(), [(0, 512)]);
    }
}
