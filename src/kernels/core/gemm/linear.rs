//! The linear layer's product in float32, `dst = a @ w.t() (+ bias) (+ dst)` with `a`'s and
//! `w`'s rows dense (`w` stored `n x k`, as `nn.Linear` keeps it), on the pointer-row kernel of
//! [`super::rows`]: the rows of `a` are read where they lie, and `w` is packed once per call
//! into `[k][W]` panels of `W` output columns, so there is neither the transposed copy of `w`
//! that `gemm` needs to read it fast ([`super::nt`]) nor `gemm`'s own packing of both operands
//! after it, and the bias is added in the kernel's epilogue instead of being copied into the
//! output first. On a Zen 4 (2 threads, BERT's layers, weights not in the caches) the copy
//! and the two packings had been a tenth of a linear layer's time.
//!
//! Each output element is one fused multiply-add chain per [`GEMM_DEPTH`] piece of the depth,
//! in order, then `+ bias`, then added to the running total: the bits of [`super::gemm_raw`]'s
//! `gemm` path, whatever the split over threads.
//!
//! float16/bfloat16 products (on CPUs without bfloat16 arithmetic) run here too: a 16-bit `w`
//! is widened as it is packed, and a 16-bit output is rounded into from the tile's float32 sums
//! in the epilogue, so neither goes through a float32 copy of its own (a bf16 256 x 256 @ 256
//! x 768 had spent an eighth of its time widening `w` and rounding a float32 output matrix).

use super::rows::{product_avx2, product_avx512, Dst};
use super::{depth_pieces, GEMM_DEPTH, GEMM_SPLIT_FLOPS};
use crate::kernels::core::parallel::parallel_for;
use crate::kernels::core::reduced::{f16_run_from_f32, f16_run_to_f32, Bits32};
use crate::kernels::core::scratch::with_scratch;
use crate::kernels::core::simd;
use crate::kernels::core::simd::Isa;
use crate::kernels::core::transpose::transpose8x8_32;
use half::{bf16, f16};
use std::ops::Range;

/// Rows of `a` per kernel call on AVX-512, in sub-tiles of 8 rows x 2 vectors: 16
/// accumulators, 8 broadcasts and 2 weight vectors per depth index, each panel read twice per
/// tile. The 4 x 2 sub-tile (the LSTM's) read each panel four times and, past a depth whose
/// panel leaves L1, from L2: on an Intel Xeon with two AVX-512 FMA units (1 thread, foo/CPU
/// against MKL), 256 x 768 -> 256 1.70 -> 1.10, 256 x 1024 -> 256 1.68 -> 1.09, 256 x 256 ->
/// 256 1.18 -> 1.06-1.14. 6 x 2 in 24-row tiles ran as 8 x 2, and so did 12 x 2 once the
/// kernel broadcast one row at a time (with all of a depth index's broadcasts first, 12 x 2
/// spilled: 1.7x the time). 64-column panels in 6 x 4 sub-tiles (24 accumulators, as `gemm`'s
/// 4 x 6) lost 1.1-1.5x to this.
const TILE_ROWS_AVX512: usize = 16;
/// Rows of `a` per kernel call on AVX2, in sub-tiles of 3 rows x 4 vectors: 12 accumulators,
/// 3 broadcasts and a weight in the 16 ymm registers (the channels-last convolution's AVX2
/// tile). The 4 x 2 tile of AVX-512 had 8 accumulators for 6 loads per depth index; measured
/// on a Zen 3 against it, 2 threads, `F.linear` with bias, foo/CPU: 520 x 256 -> 512 1.56 ->
/// 1.02, 520 x 512 -> 256 1.44 -> 0.96, 256 x 1024 -> 1024 1.56 -> 1.36.
const TILE_ROWS_AVX2: usize = 24;
/// The largest of the tiles' rows (the edge buffer's size).
const TILE_ROWS_MAX: usize = 24;
/// Bytes of `a`'s rows one pass over the panels reads, so that they stay in a core's L2.
const ROWS_BYTES: usize = 256 << 10;

/// A product `dst = a @ w.t() (+ bias) (+ dst)`: `a` is `m x k` (rows `lda` apart), `w` is
/// `n x k` (rows `ldw` apart), `dst` is `m x n` (rows `ldd` apart); the elements of each row
/// are adjacent. `w` and `dst` hold float32 unless `w_half` or `dst_half` say otherwise;
/// strides count elements of the type they hold.
#[derive(Clone, Copy)]
pub struct Linear {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: *const f32,
    pub lda: isize,
    pub w: *const f32,
    pub ldw: isize,
    /// Elements of one row of `w` are this far apart: 1 for `nn.Linear`'s weight; for `a @ b`
    /// with a row-major `b` (`w = b.t()`), `b`'s row length, and `ldw` 1.
    pub wk: isize,
    pub dst: *mut f32,
    pub ldd: isize,
    /// `n` floats added to every row, or null.
    pub bias: *const f32,
    /// The product is added to what `dst` holds (float32 `dst` only).
    pub add_dst: bool,
    /// `w` holds 16-bit floats of this kind, widened as they are packed.
    pub w_half: Option<Half>,
    /// `dst` holds 16-bit floats of this kind, rounded into (nearest even) from the float32
    /// sums; the depth is then one piece (`k <= GEMM_DEPTH`: no partial sums to keep).
    pub dst_half: Option<Half>,
}

/// A 16-bit float type an operand or the output holds (see [`Linear`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    Bf16,
    F16,
}

impl Half {
    /// `n` elements at `src` widened into `dst`, inlined into the packing's AVX2 code (the
    /// conversions' multiversioned entry points cost a call per run of 32).
    ///
    /// # Safety
    /// `src` holds `n` elements, `dst` room for `n`; the CPU has AVX2, FMA and F16C.
    #[inline(always)]
    unsafe fn widen_run(self, dst: *mut f32, src: *const u16, n: usize) {
        match self {
            Half::Bf16 => {
                for i in 0..n {
                    // SAFETY: i < n (the caller's contract).
                    unsafe { *dst.add(i) = bf16::from_bits(*src.add(i)).widen() };
                }
            }
            // SAFETY: forwarded; the CPU has F16C.
            Half::F16 => unsafe { f16_run_to_f32(Isa::FMA, dst, src.cast::<f16>(), n) },
        }
    }

    /// `n` floats at `src` rounded into `dst` as `x.to(dtype)` rounds them.
    ///
    /// # Safety
    /// As [`Half::widen_run`], the other way round.
    #[inline(always)]
    unsafe fn round_run(self, dst: *mut u16, src: *const f32, n: usize) {
        match self {
            Half::Bf16 => {
                for i in 0..n {
                    // SAFETY: i < n (the caller's contract).
                    unsafe { *dst.add(i) = <bf16 as Bits32>::narrow(*src.add(i)).to_bits() };
                }
            }
            // SAFETY: forwarded; the CPU has F16C.
            Half::F16 => unsafe { f16_run_from_f32(Isa::FMA, dst.cast::<f16>(), src, n) },
        }
    }
}

/// The panel width: 32 columns (2 AVX-512 vectors, 4 AVX2 ones); none without AVX2 and FMA.
pub fn panel_width() -> Option<usize> {
    (simd::level() >= 2).then_some(32)
}

/// Computes `p`, split over the helper threads when `parallel` (from a thread that is not one of
/// rayon's) and the product is large enough.
///
/// # Safety
/// The three matrices (and the bias) must be live memory of the given extents; `dst` must not
/// overlap the operands nor itself; the CPU must have a [`panel_width`].
pub unsafe fn product(p: Linear, parallel: bool) {
    assert!(
        p.dst_half.is_none() || (p.k <= GEMM_DEPTH && !p.add_dst),
        "linear::product: a 16-bit output takes one depth piece and no running total"
    );
    let threads = crate::runtime::pool::num_threads();
    let in_pool = rayon::current_thread_index().is_some();
    let parts = match parallel && !in_pool && p.m * p.n * p.k >= GEMM_SPLIT_FLOPS {
        true => threads,
        false => 1,
    };
    // SAFETY: forwarded.
    unsafe { split_product(p, parts) }
}

// SAFETY: a `Linear` is shared between the threads of one product, which read its operands and
// write disjoint blocks of its output ([`split_product`]).
unsafe impl Sync for Linear {}

/// [`product`] cut into about `parts` blocks, run with [`parallel_for`].
///
/// # Safety
/// As [`product`].
unsafe fn split_product(p: Linear, parts: usize) {
    let Some(width) = panel_width() else {
        unreachable!("linear::product without AVX2")
    };
    if p.m == 0 || p.n == 0 {
        return;
    }
    let panels = p.n.div_ceil(width);
    // Columns first: each block packs only its own columns of `w`. Rows too when there are
    // fewer panels than parts, or many more rows than columns (each block reads all the rows
    // of `a` that it multiplies).
    let col_blocks = match 8 * p.n >= p.m {
        true => parts.min(panels),
        false => 1,
    };
    let row_blocks = (parts / col_blocks).clamp(1, p.m.div_ceil(TILE_ROWS_AVX512));
    let panels_per_block = panels.div_ceil(col_blocks);
    let col_blocks = panels.div_ceil(panels_per_block);
    let rows_per_block = p.m.div_ceil(row_blocks).next_multiple_of(4);
    let row_blocks = p.m.div_ceil(rows_per_block);
    let run = |s: usize, e: usize| {
        for blk in s..e {
            let (bi, bj) = (blk / col_blocks, blk % col_blocks);
            let (r0, c0) = (bi * rows_per_block, bj * panels_per_block * width);
            let rows = r0..(r0 + rows_per_block).min(p.m);
            let cols = c0..(c0 + panels_per_block * width).min(p.n);
            // SAFETY: the blocks partition dst; the rest is the caller's contract.
            unsafe {
                match simd::level() >= 3 {
                    true => block_product::<TILE_ROWS_AVX512>(&p, rows, cols, width, LANES),
                    false => block_product::<TILE_ROWS_AVX2>(&p, rows, cols, width, LANES),
                }
            };
        }
    };
    match row_blocks * col_blocks {
        1 => run(0, 1),
        blocks => parallel_for(blocks, 1, &run),
    }
}

/// Floats per AVX-512 vector: the unit of [`product_blocks`]'s output blocks.
const LANES: usize = 16;

/// `p` on the calling thread, its output laid out in blocks of 16 columns `vs` floats apart:
/// element `(r, c)` at `p.dst + r * p.ldd + (c / 16) * vs + c % 16` (`vs = 16` is `p`'s own
/// row-major layout). The LSTM layer keeps each block of its hidden units' input gates in
/// one run this way (`rnn::layer`). AVX-512 only, and `p.n` a whole number of panels when
/// `vs` is not 16 (a partial panel goes through a row-major buffer).
///
/// # Safety
/// As [`product`], for every element's place in that layout.
pub unsafe fn product_blocks(p: &Linear, vs: usize) {
    let width = panel_width().filter(|_| simd::level() >= 3);
    let Some(width) = width else {
        unreachable!("linear::product_blocks without AVX-512")
    };
    assert!(
        vs == LANES || p.n % width == 0,
        "linear::product_blocks: a partial panel"
    );
    if p.m > 0 && p.n > 0 {
        // SAFETY: forwarded.
        unsafe { block_product::<TILE_ROWS_AVX512>(p, 0..p.m, 0..p.n, width, vs) }
    }
}

/// Rows `rows` x columns `cols` of `p`'s output, on the calling thread, its blocks of 16
/// columns `vs` floats apart ([`product_blocks`]).
///
/// # Safety
/// As [`product`]; the block's part of `dst` is written only here.
unsafe fn block_product<const TR: usize>(
    p: &Linear,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    width: usize,
    vs: usize,
) {
    let panels = cols.len().div_ceil(width);
    for (k0, k1) in depth_pieces(p.k) {
        let depth = k1 - k0;
        let block_rows = (ROWS_BYTES / (4 * depth)).next_multiple_of(TR);
        // SAFETY: the caller's contract, for each panel packed below.
        let multiply = |i: usize, panel: &[f32], r: usize, r_end: usize| unsafe {
            multiply_panel::<TR>(p, (k0, depth), &cols, (width, vs), i, panel, r..r_end)
        };
        if rows.len() <= block_rows {
            // One pass over the rows: each panel is packed just before its only use, while
            // it is still in L1/L2 (all of a wide `w` packed first, 2 MB for 2048 x 256,
            // went out to L3 and came back).
            with_scratch::<f32, _>(width * depth, |panel| {
                for i in 0..panels {
                    let c = cols.start + i * width;
                    let panel_cols = c..(c + width).min(cols.end);
                    // SAFETY: rows panel_cols of `w`, depths k0..k1, exist (the caller's
                    // contract).
                    unsafe { pack(p, panel_cols, k0, depth, width, panel) };
                    multiply(i, panel, rows.start, rows.end);
                }
            });
            continue;
        }
        with_scratch::<f32, _>(panels * width * depth, |packed| {
            // SAFETY: rows cols of `w`, depths k0..k1, exist (the caller's contract).
            unsafe { pack(p, cols.clone(), k0, depth, width, packed) };
            let mut r = rows.start;
            while r < rows.end {
                let r_end = (r + block_rows).min(rows.end);
                for (i, panel) in packed.chunks_exact(width * depth).enumerate() {
                    multiply(i, panel, r, r_end);
                }
                r = r_end;
            }
        });
    }
}

/// Panel `i` of columns `cols` (packed: depths `k0..k0 + depth` of `width` columns) times
/// `rows` of `a`, into `dst`: written (plus the bias) by the first depth piece, added to by the
/// others, or added to throughout with `add_dst`.
///
/// # Safety
/// As [`block_product`]: the rows' depths exist, the panel holds `depth * width` floats, and
/// the tile's part of `dst` is written only here.
unsafe fn multiply_panel<const TR: usize>(
    p: &Linear,
    (k0, depth): (usize, usize),
    cols: &std::ops::Range<usize>,
    (width, vs): (usize, usize),
    i: usize,
    panel: &[f32],
    rows: std::ops::Range<usize>,
) {
    let c = cols.start + i * width;
    let n = (cols.end - c).min(width);
    let bias = match p.bias.is_null() || k0 > 0 {
        true => std::ptr::null(),
        false => p.bias.wrapping_add(c),
    };
    let add = match p.add_dst || k0 > 0 {
        true => Dst::Add,
        false => Dst::Write,
    };
    for t in rows.clone().step_by(TR) {
        let tile = (rows.end - t).min(TR);
        // Rows past the block's end read its last row; their results are dropped.
        let ptrs: [*const f32; TR] = std::array::from_fn(|j| {
            let row = (t + j.min(tile - 1)) as isize;
            p.a.wrapping_offset(row * p.lda).wrapping_add(k0)
        });
        let at = t as isize * p.ldd + ((c / LANES) * vs + c % LANES) as isize;
        let dst = match p.dst_half {
            Some(half) => Out::Half(p.dst.cast::<u16>().wrapping_offset(at), half),
            None => Out::F32(p.dst.wrapping_offset(at)),
        };
        // SAFETY: the tile's rows of `a` hold depths k0..k0 + depth, the panel `depth *
        // width` floats, dst rows t..t + tile at columns c..c + n.
        unsafe { tile_product(&ptrs, depth, panel, dst, (p.ldd, vs), tile, n, bias, add) };
    }
}

/// Floats [`pack_whole`] writes for `p`'s `w`: every depth piece's panels.
pub fn packed_len(p: &Linear) -> usize {
    panel_width().map_or(0, |width| p.n.div_ceil(width) * width * p.k)
}

/// `p`'s `w` packed whole into `out` ([`packed_len`] floats), depth piece after piece, for
/// several products with it ([`product_packed`]): a step-by-step product (the LSTM layer's
/// backward) would otherwise pack the same weight at every step.
///
/// # Safety
/// As [`product`] for `w` (`p.w_half` none).
pub unsafe fn pack_whole(p: &Linear, out: &mut [f32]) {
    let Some(width) = panel_width() else {
        unreachable!("linear::pack_whole without AVX2")
    };
    let panels = p.n.div_ceil(width);
    let mut at = 0;
    for (k0, k1) in depth_pieces(p.k) {
        let len = panels * width * (k1 - k0);
        // SAFETY: forwarded; `out` holds every piece.
        unsafe { pack(p, 0..p.n, k0, k1 - k0, width, &mut out[at..at + len]) };
        at += len;
    }
}

/// [`product`] on the calling thread with `p`'s `w` packed by [`pack_whole`] (`packed`):
/// the same bits.
///
/// # Safety
/// As [`product`] for `a`, `dst` and the bias; `packed` is [`pack_whole`]'s for this `w`.
pub unsafe fn product_packed(p: &Linear, packed: &[f32]) {
    let Some(width) = panel_width() else {
        unreachable!("linear::product_packed without AVX2")
    };
    let panels = p.n.div_ceil(width);
    type Multiply = unsafe fn(
        &Linear,
        (usize, usize),
        &Range<usize>,
        (usize, usize),
        usize,
        &[f32],
        Range<usize>,
    );
    let multiply: Multiply = match simd::level() >= 3 {
        true => multiply_panel::<TILE_ROWS_AVX512>,
        false => multiply_panel::<TILE_ROWS_AVX2>,
    };
    let mut at = 0;
    for (k0, k1) in depth_pieces(p.k) {
        let len = panels * width * (k1 - k0);
        let piece = &packed[at..at + len];
        for (i, panel) in piece.chunks_exact(width * (k1 - k0)).enumerate() {
            // SAFETY: forwarded; each panel is this piece's i-th.
            unsafe {
                multiply(
                    p,
                    (k0, k1 - k0),
                    &(0..p.n),
                    (width, LANES),
                    i,
                    panel,
                    0..p.m,
                )
            };
        }
        at += len;
    }
}

/// Where a tile's results go: float32, or 16-bit floats of a kind, at a pointer.
#[derive(Clone, Copy)]
enum Out {
    F32(*mut f32),
    Half(*mut u16, Half),
}

/// One kernel call: `tile` rows of `n <= width` columns at `dst`; a panel of fewer columns
/// than its width, or a 16-bit output, goes through a tile-sized buffer (the kernel writes
/// whole float32 vectors).
///
/// # Safety
/// As [`block_product`]'s calls: `bias`, if not null, holds `n` floats; `add` only with a
/// float32 `dst`.
#[allow(clippy::too_many_arguments)]
unsafe fn tile_product<const TR: usize>(
    rows: &[*const f32; TR],
    depth: usize,
    panel: &[f32],
    dst: Out,
    (ldd, vs): (isize, usize),
    tile: usize,
    n: usize,
    bias: *const f32,
    add: Dst,
) {
    let width = panel.len() / depth;
    let w = panel.as_ptr();
    // SAFETY: the CPU has the kernel's features (panel_width); the caller's contract.
    let kernel = |dst: *mut f32, ld: usize, vs: usize, bias: *const f32| unsafe {
        match simd::level() >= 3 {
            true => product_avx512::<TR, 8, 2>(rows, depth, w, dst, ld, vs, tile, bias, add),
            false => product_avx2::<TR, 3, 4>(rows, depth, w, dst, ld, 8, tile, bias, add),
        }
    };
    if let Out::F32(dst) = dst {
        if n == width {
            kernel(dst, ldd as usize, vs, bias);
            return;
        }
    }
    let mut buf = [0f32; TILE_ROWS_MAX * 32];
    let mut padded = [0f32; 32];
    if let (Out::F32(dst), Dst::Add) = (dst, add) {
        for r in 0..tile {
            // SAFETY: row r of the tile's dst, n floats.
            let src = unsafe { std::slice::from_raw_parts(dst.offset(r as isize * ldd), n) };
            buf[r * width..r * width + n].copy_from_slice(src);
        }
    }
    if !bias.is_null() {
        // SAFETY: n floats of bias.
        padded[..n].copy_from_slice(unsafe { std::slice::from_raw_parts(bias, n) });
    }
    let bias = match bias.is_null() {
        true => std::ptr::null(),
        false => padded.as_ptr(),
    };
    kernel(buf.as_mut_ptr(), width, LANES, bias);
    match dst {
        Out::F32(dst) => {
            for r in 0..tile {
                // SAFETY: row r of the tile's dst, n floats, written only here.
                let out =
                    unsafe { std::slice::from_raw_parts_mut(dst.offset(r as isize * ldd), n) };
                out.copy_from_slice(&buf[r * width..r * width + n]);
            }
        }
        // SAFETY: rows 0..tile of the tile's dst, n 16-bit elements each, written only here;
        // the CPU has the linear kernel's features.
        Out::Half(dst, half) => unsafe { round_rows(half, &buf, width, tile, n, dst, ldd) },
    }
}

/// Rows `0..tile` of `n` floats, `width` apart in `buf`, rounded into the 16-bit rows of `dst`
/// (`ldd` apart): AVX2 code, 8 lanes at a time (a quarter of a tile's time as baseline code).
///
/// # Safety
/// `dst` holds those rows; the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn round_rows(
    half: Half,
    buf: &[f32],
    width: usize,
    tile: usize,
    n: usize,
    dst: *mut u16,
    ldd: isize,
) {
    for r in 0..tile {
        let row = &buf[r * width..r * width + n];
        // SAFETY: row r of dst, n elements (the caller's contract).
        unsafe { half.round_run(dst.offset(r as isize * ldd), row.as_ptr(), n) };
    }
}

/// Packs rows `cols` of `w`, depths `k0..k0 + depth`, into `[depth][width]` panels: panel `i`
/// holds columns `cols.start + i * width..`, zeros past `cols.end`.
///
/// # Safety
/// The CPU has AVX2; those elements of `w` exist; `out` holds the panels.
#[target_feature(enable = "avx2")]
unsafe fn pack(
    p: &Linear,
    cols: std::ops::Range<usize>,
    k0: usize,
    depth: usize,
    width: usize,
    out: &mut [f32],
) {
    if let Some(half) = p.w_half {
        // SAFETY: forwarded.
        return unsafe { pack_widened(p, half, cols, k0, depth, width, out) };
    }
    if p.wk != 1 {
        // `w` read along its columns (`b` of a row-major `a @ b`): a run of `n` floats per depth.
        for (i, panel) in out.chunks_exact_mut(width * depth).enumerate() {
            let c = cols.start + i * width;
            let n = (cols.end - c).min(width);
            for k in 0..depth {
                let at =
                    p.w.wrapping_offset((k0 + k) as isize * p.wk + c as isize * p.ldw);
                let dst = &mut panel[k * width..(k + 1) * width];
                if p.ldw == 1 {
                    // SAFETY: elements (c..c + n, k0 + k) of `w`, adjacent.
                    dst[..n].copy_from_slice(unsafe { std::slice::from_raw_parts(at, n) });
                    dst[n..].fill(0.0);
                    continue;
                }
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = match j < n {
                        // SAFETY: element (c + j, k0 + k) of `w`.
                        true => unsafe { *at.wrapping_offset(j as isize * p.ldw) },
                        false => 0.0,
                    };
                }
            }
        }
        return;
    }
    let whole = depth - depth % 8;
    for (i, panel) in out.chunks_exact_mut(width * depth).enumerate() {
        let c = cols.start + i * width;
        let n = (cols.end - c).min(width);
        let row = |j: usize| {
            p.w.wrapping_offset((c + j) as isize * p.ldw)
                .wrapping_add(k0)
        };
        let eights = match n == width {
            true => width,
            false => 0,
        };
        for j in (0..eights).step_by(8) {
            for k in (0..whole).step_by(8) {
                // SAFETY: rows c + j..c + j + 8 of `w` at depths k0 + k..k0 + k + 8, and the
                // panel's depths k..k + 8 at columns j..j + 8.
                unsafe {
                    transpose8x8_32(
                        row(j).add(k),
                        p.ldw,
                        panel.as_mut_ptr().add(k * width + j),
                        width,
                    )
                };
            }
        }
        for j in 0..width {
            let from = match j < eights {
                true => whole,
                false => 0,
            };
            for k in from..depth {
                panel[k * width + j] = match j < n {
                    // SAFETY: element k0 + k of row c + j of `w`.
                    true => unsafe { *row(j).add(k) },
                    false => 0.0,
                };
            }
        }
    }
}

/// [`pack`] for a 16-bit `w` of kind `half`: a row-major `b` (`w = b.t()`) straight into
/// the panels' rows; `nn.Linear`'s layout through a panel's rows widened into a float32 stage
/// that [`pack`] then turns as it turns a float32 `w` (the 16-bit rows cannot go through the
/// 8 x 8 float32 transposes as they lie).
///
/// # Safety
/// As [`pack`], with `w` holding 16-bit elements.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_widened(
    p: &Linear,
    half: Half,
    cols: std::ops::Range<usize>,
    k0: usize,
    depth: usize,
    width: usize,
    out: &mut [f32],
) {
    let w = p.w.cast::<u16>();
    let at =
        |col: usize, k: usize| w.wrapping_offset(col as isize * p.ldw + (k0 + k) as isize * p.wk);
    if p.wk != 1 {
        for (i, panel) in out.chunks_exact_mut(width * depth).enumerate() {
            let c = cols.start + i * width;
            let n = (cols.end - c).min(width);
            for k in 0..depth {
                let dst = &mut panel[k * width..(k + 1) * width];
                dst[n..].fill(0.0);
                match p.ldw == 1 {
                    // SAFETY: elements (c..c + n, k0 + k) of `w`, adjacent, into n floats.
                    true => unsafe { half.widen_run(dst.as_mut_ptr(), at(c, k), n) },
                    false => {
                        for (j, d) in dst[..n].iter_mut().enumerate() {
                            // SAFETY: element (c + j, k0 + k) of `w`, into one float.
                            unsafe { half.widen_run(d, at(c + j, k), 1) };
                        }
                    }
                }
            }
        }
        return;
    }
    with_scratch::<f32, _>(width * depth, |stage| {
        // SAFETY: forwarded; the stage holds a panel's rows.
        unsafe { pack_staged(p, half, cols, k0, depth, width, out, stage) }
    });
}

/// [`pack_widened`] for `nn.Linear`'s layout: each panel's rows of `w` widened into `stage`
/// (`width * depth` floats), then packed from there by [`pack`].
///
/// # Safety
/// As [`pack_widened`].
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_staged(
    p: &Linear,
    half: Half,
    cols: std::ops::Range<usize>,
    k0: usize,
    depth: usize,
    width: usize,
    out: &mut [f32],
    stage: &mut [f32],
) {
    for (i, panel) in out.chunks_exact_mut(width * depth).enumerate() {
        let c = cols.start + i * width;
        let n = (cols.end - c).min(width);
        for j in 0..n {
            let row =
                p.w.cast::<u16>()
                    .wrapping_offset((c + j) as isize * p.ldw)
                    .wrapping_add(k0);
            // SAFETY: row c + j of `w` at depths k0..k0 + depth, into `depth` floats.
            unsafe { half.widen_run(stage[j * depth..].as_mut_ptr(), row, depth) };
        }
        let staged = Linear {
            w: stage.as_ptr(),
            ldw: depth as isize,
            wk: 1,
            w_half: None,
            ..*p
        };
        // SAFETY: the stage holds rows 0..n of `depth` floats; one panel.
        unsafe { pack(&staged, 0..n, 0, depth, width, panel) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::gemm::{gemm_plain, Mat};

    /// [`product_blocks`] writes [`product`]'s bits, each block of 16 columns `vs` floats
    /// apart: over one and two depth pieces, with rows past a tile's.
    #[test]
    fn blocks_hold_the_products_bits() {
        if panel_width().is_none() || simd::level() < 3 {
            return;
        }
        for (m, n, k) in [(37, 64, 70), (5, 32, 600), (16, 96, 1)] {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 113) as f32 / 17.0 - 3.0)
                .collect();
            let w: Vec<f32> = (0..n * k)
                .map(|i| ((i * 104729) % 97) as f32 / 13.0 - 3.5)
                .collect();
            let p = |dst: &mut [f32], ldd: usize| Linear {
                m,
                n,
                k,
                a: a.as_ptr(),
                lda: k as isize,
                w: w.as_ptr(),
                ldw: k as isize,
                wk: 1,
                dst: dst.as_mut_ptr(),
                ldd: ldd as isize,
                bias: std::ptr::null(),
                add_dst: false,
                w_half: None,
                dst_half: None,
            };
            let mut want = vec![0f32; m * n];
            // SAFETY: a [m, k], w [n, k], want [m, n], all dense.
            unsafe { product(p(&mut want, n), false) };
            let vs = m * 16 + 5;
            let mut got = vec![f32::NAN; vs * n / 16];
            // SAFETY: element (r, c) at r * 16 + (c / 16) vs + c % 16 < vs n / 16.
            unsafe { product_blocks(&p(&mut got, 16), vs) };
            for r in 0..m {
                for c in 0..n {
                    let g = got[r * 16 + (c / 16) * vs + c % 16];
                    assert_eq!(
                        g.to_bits(),
                        want[r * n + c].to_bits(),
                        "{m}x{n}x{k} ({r}, {c})"
                    );
                }
            }
        }
    }

    /// The product has the bits of `gemm` over the same depth pieces (with the bias and the
    /// output's values added as `gemm_raw`'s staging adds them), for ragged shapes, depths over
    /// one piece, any split over threads, strided rows, and `w` stored either way round; so has
    /// it with `w` packed once ([`pack_whole`], [`product_packed`]).
    #[test]
    fn matches_gemm_bit_for_bit() {
        if panel_width().is_none() {
            return;
        }
        let val = |i: usize, s: usize| ((i * 7919 + s * 104729) % 1000) as f32 * 1e-3 - 0.5;
        for (m, n, k) in [(37, 45, 19), (64, 96, 600), (9, 33, 1030), (130, 16, 256)] {
            let (lda, ldw, ldd) = (k + 3, k + 1, n + 5);
            let a: Vec<f32> = (0..m * lda).map(|i| val(i, 1)).collect();
            let w: Vec<f32> = (0..n * ldw).map(|i| val(i, 2)).collect();
            let bias: Vec<f32> = (0..n).map(|i| val(i, 3)).collect();
            let init: Vec<f32> = (0..m * ldd).map(|i| val(i, 4)).collect();
            for (with_bias, add_dst) in [(false, false), (true, false), (false, true)] {
                // gemm_raw's staging: the bias (or the old output) in dst, then gemm adds.
                let mut want = match (with_bias, add_dst) {
                    (true, _) => (0..m * ldd).map(|i| bias[(i % ldd).min(n - 1)]).collect(),
                    (_, true) => init.clone(),
                    _ => vec![0.0; m * ldd],
                };
                for (k0, k1) in depth_pieces(k) {
                    let mut piece = vec![0f32; m * n];
                    // SAFETY: owned matrices of the product's extents.
                    unsafe {
                        gemm_plain(
                            m,
                            n,
                            k1 - k0,
                            piece.as_mut_ptr(),
                            n as isize,
                            1,
                            Mat {
                                ptr: a.as_ptr().add(k0),
                                rs: lda as isize,
                                cs: 1,
                            },
                            Mat {
                                ptr: w.as_ptr().add(k0),
                                rs: 1,
                                cs: ldw as isize,
                            },
                        )
                    };
                    let first = k0 == 0 && !with_bias && !add_dst;
                    for i in 0..m {
                        for j in 0..n {
                            let v = piece[i * n + j];
                            let d = &mut want[i * ldd + j];
                            *d = if first { v } else { *d + v };
                        }
                    }
                }
                // The same `w` stored as the row-major `k x n` matrix `b` of `a @ b`.
                let ldb = n + 2;
                let b: Vec<f32> = (0..k * ldb)
                    .map(|e| w[(e % ldb).min(n - 1) * ldw + e / ldb])
                    .collect();
                let layouts = [(w.as_ptr(), ldw as isize, 1), (b.as_ptr(), 1, ldb as isize)];
                for (parts, (wp, ldw, wk)) in [1, 2, 3, 5].into_iter().zip(layouts.iter().cycle()) {
                    let mut dst = init.clone();
                    let p = Linear {
                        m,
                        n,
                        k,
                        a: a.as_ptr(),
                        lda: lda as isize,
                        w: *wp,
                        ldw: *ldw,
                        wk: *wk,
                        dst: dst.as_mut_ptr(),
                        ldd: ldd as isize,
                        bias: match with_bias {
                            true => bias.as_ptr(),
                            false => std::ptr::null(),
                        },
                        add_dst,
                        w_half: None,
                        dst_half: None,
                    };
                    // Split over threads, then with `w` packed once (pack_whole).
                    for packed_once in [false, true] {
                        dst.copy_from_slice(&init);
                        // SAFETY: owned matrices of the product's extents.
                        unsafe {
                            if packed_once {
                                let mut packed = vec![f32::NAN; packed_len(&p)];
                                pack_whole(&p, &mut packed);
                                product_packed(&p, &packed);
                            } else {
                                split_product(p, parts);
                            }
                        }
                        for i in 0..m {
                            for j in 0..ldd {
                                let (got, exp) = (dst[i * ldd + j], want[i * ldd + j]);
                                let exp = if j < n { exp } else { init[i * ldd + j] };
                                assert_eq!(
                                    got.to_bits(),
                                    exp.to_bits(),
                                    "{m}x{n}x{k} bias {with_bias} add {add_dst} in {parts}, \
                                     wk {wk}, packed once {packed_once} ({i}, {j})"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// With `w` and `dst` in 16-bit floats the product has the bits of the float32 product of
    /// the widened `w`, rounded once as `x.to(dtype)` rounds, for both kinds, `w` stored
    /// either way round, a bias row, ragged shapes and any split over threads.
    #[test]
    fn half_operands_match_the_widened_product_rounded() {
        if panel_width().is_none() {
            return;
        }
        let val = |i: usize, s: usize| ((i * 7919 + s * 104729) % 1000) as f32 * 1e-2 - 5.0;
        for half in [Half::Bf16, Half::F16] {
            let to_bits = |x: f32| match half {
                Half::Bf16 => bf16::from_f32(x).to_bits(),
                Half::F16 => f16::from_f32(x).to_bits(),
            };
            let widen = |b: u16| match half {
                Half::Bf16 => bf16::from_bits(b).to_f32(),
                Half::F16 => f16::from_bits(b).to_f32(),
            };
            for (m, n, k) in [(37, 45, 19), (5, 70, 300), (66, 33, 1)] {
                let (lda, ldd) = (k + 3, n + 5);
                let a: Vec<f32> = (0..m * lda).map(|i| val(i, 1)).collect();
                let w16: Vec<u16> = (0..n * k).map(|i| to_bits(val(i, 2))).collect();
                let w32: Vec<f32> = w16.iter().map(|&b| widen(b)).collect();
                let wt16: Vec<u16> = (0..k * n).map(|e| w16[(e % n) * k + e / n]).collect();
                let bias: Vec<f32> = (0..n).map(|i| val(i, 3)).collect();
                for with_bias in [false, true] {
                    let bias_ptr = match with_bias {
                        true => bias.as_ptr(),
                        false => std::ptr::null(),
                    };
                    let mut want = vec![0f32; m * ldd];
                    let f32_product = Linear {
                        m,
                        n,
                        k,
                        a: a.as_ptr(),
                        lda: lda as isize,
                        w: w32.as_ptr(),
                        ldw: k as isize,
                        wk: 1,
                        dst: want.as_mut_ptr(),
                        ldd: ldd as isize,
                        bias: bias_ptr,
                        add_dst: false,
                        w_half: None,
                        dst_half: None,
                    };
                    // SAFETY: owned matrices of the product's extents.
                    unsafe { split_product(f32_product, 1) };
                    let layouts = [
                        (w16.as_ptr(), k as isize, 1),
                        (wt16.as_ptr(), 1, n as isize),
                    ];
                    for (parts, (wp, ldw, wk)) in [1, 2, 3].into_iter().zip(layouts.iter().cycle())
                    {
                        let mut dst = vec![0xAAAAu16; m * ldd];
                        let p = Linear {
                            w: wp.cast(),
                            ldw: *ldw,
                            wk: *wk,
                            dst: dst.as_mut_ptr().cast(),
                            w_half: Some(half),
                            dst_half: Some(half),
                            ..f32_product
                        };
                        // SAFETY: owned matrices of the product's extents; 16-bit `w`, `dst`.
                        unsafe { split_product(p, parts) };
                        for i in 0..m {
                            for j in 0..ldd {
                                let exp = match j < n {
                                    true => to_bits(want[i * ldd + j]),
                                    false => 0xAAAA,
                                };
                                assert_eq!(
                                    dst[i * ldd + j],
                                    exp,
                                    "{half:?} {m}x{n}x{k} bias {with_bias} in {parts}, wk {wk} ({i}, {j})"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
