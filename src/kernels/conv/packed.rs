//! Channels-last float32 convolution forward on AVX-512 and AVX2 CPUs: the input patches of 12
//! output positions packed once, then multiplied by every output channel's weights.
//!
//! The reduction index is `k = tap * cg + c` (tap-major: in a channels-last input a tap's
//! channels are one contiguous run of the pixel). For a tile of [`R`] consecutive output
//! positions (flattened over samples, so small planes leave no lanes idle), the packer copies
//! each position's runs into `a` as `[k / 16][position][k % 16]`, zeros where a tap reads
//! padding; the register tile then holds 16 or 32 output channels of the 12 positions and
//! per `k` loads the packed weights of its channels and broadcasts one element per position
//! at a constant offset in the panel (a `{1to16}` memory operand of `vfmadd231ps`). A tile's
//! rows are its positions' output pixels, written whole. Against the planar direct kernel
//! ([`super::direct`]) this computes no dropped grid columns and needs no transposed
//! write-out, and the packing (one copy per position and tap) is shared by all channel
//! blocks.
//!
//! Stride-1 convolutions of one group skip the packing where that pays ([`PaddedGrid`]): the
//! tile kernel then reads its 12 positions straight from a zero-padded copy of the input in
//! 16-channel blocks, at the price of a few dropped grid columns.
//!
//! Every output element is one tile's sum over `k` in a fixed order: the bits do not depend
//! on the thread count.

// The AVX-512 intrinsics are stable since Rust 1.89 (see gemm/bf16/microkernel.rs).
#![allow(clippy::incompatible_msrv)]

use super::{depthwise, Geometry};
use crate::kernels::core::gemm::rows;
use crate::kernels::core::parallel::{parallel_for, parallel_units, SendPtr};
use crate::kernels::core::scratch::with_scratch;
use crate::kernels::core::simd;
use crate::kernels::core::transpose::transpose_into;
use crate::tensor::{TensorMut, TensorRef};
use std::arch::x86_64::*;

/// Output positions per register tile.
const R: usize = 12;

/// Reduction indices per packed block.
pub(super) const KB: usize = 16;

/// Packed weights of the channel blocks one work unit multiplies (512 KB of f32: the blocks
/// stay in a core's L2 while the unit's panels pass over them).
const UNIT_WEIGHTS: usize = 1 << 17;

/// Whether this float32 convolution runs here: an AVX-512 or AVX2 CPU, not depthwise (one
/// channel per group: [`depthwise`] does it), no negative padding, and the input's channels
/// dense (`input_stride_c == 1`, a channels-last tensor; the caller copies others).
pub(super) fn applies(g: &Geometry) -> bool {
    simd::level() >= 2 && !depthwise::applies(g) && g.padding.iter().all(|&p| p >= 0)
}

/// Whether [`forward`] needs the input's channels dense (`input_stride_c == 1`); the
/// blocked-grid form ([`PaddedGrid`]) copies the input itself and reads any strides.
pub(super) fn needs_dense_channels(g: &Geometry) -> bool {
    PaddedGrid::new(g).is_none()
}

/// Whether [`forward`] reads the input where it lies (through pointers or from the padded
/// grid) rather than packing each position's patch: then it also beats the planar direct
/// kernel on contiguous tensors, through channels-last copies (see `forward_f32`).
pub(super) fn reads_in_place(g: &Geometry) -> bool {
    applies(g) && (points_rows(g) || PaddedGrid::new(g).is_some())
}

/// `out = conv(input, weight) + bias` ([`applies`] holds; `input`'s channel stride 1 where
/// [`needs_dense_channels`], `out` dense channels-last, `weight` any strides).
pub(super) fn forward(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    weight: &TensorRef,
    bias: Option<&[f32]>,
) {
    match PaddedGrid::new(g) {
        Some(grid) => forward_grid(g, &grid, out, input, weight, bias),
        None => forward_packed(g, out, input, weight, bias),
    }
}

/// [`forward`] on patches packed per tile of positions.
fn forward_packed(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    weight: &TensorRef,
    bias: Option<&[f32]>,
) {
    debug_assert!(input.strides[1] == 1 || g.c == 1);
    let bl = Blocks::new(g.og(), (g.cg() * g.kk()).next_multiple_of(KB));
    with_scratch(g.groups * bl.group_len, |wp: &mut [f32]| {
        pack_weights_into(g, weight, &bl, KOrder::TapMajor, wp);
        multiply_packed(g, out, input, &bl, wp, bias)
    })
}

/// The products of [`forward_packed`] with the weights packed (`wp`, [`KOrder::TapMajor`]).
fn multiply_packed(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    bl: &Blocks,
    wp: &[f32],
    bias: Option<&[f32]>,
) {
    let (cg, og, kk, p) = (g.cg(), g.og(), g.kk(), g.op());
    let (k_len, kp) = (cg * kk, bl.kp);
    let (blocks, block_at, group_len) = (&bl.list, &bl.at, bl.group_len);
    // Units: (group, channel-block range, run of tiles).
    let per_unit_blocks = (UNIT_WEIGHTS / (kp * 32)).clamp(1, blocks.len());
    let block_runs = blocks.len().div_ceil(per_unit_blocks);
    let tiles = (g.n * p).div_ceil(R);
    let threads = crate::runtime::pool::num_threads().max(1);
    let run = (tiles / (8 * threads)).clamp(1, 4);
    let tile_runs = tiles.div_ceil(run);
    let units = g.groups * block_runs * tile_runs;
    let outp = SendPtr::<f32>::of(out.ptr);
    let wpp = SendPtr::of(wp.as_ptr());
    let pointed = points_rows(g);
    // A tile's pointers to its positions' pixels, one per tap (`pointed`), or its packed panel.
    let per_tile = if pointed { kk * R } else { kp * R };
    parallel_units(units, &|u0, u1| {
        let mut panels = vec![0f32; if pointed { 0 } else { run * per_tile }];
        let mut rows = vec![std::ptr::null::<f32>(); if pointed { run * per_tile } else { 0 }];
        let mut tile = [0f32; R * 32];
        let mut blocks_of = Vec::with_capacity(kp / KB);
        for u in u0..u1 {
            // Tile runs vary fastest: a thread's consecutive units share channel blocks.
            let (gb, tr) = (u / tile_runs, u % tile_runs);
            let (gi, br) = (gb / block_runs, gb % block_runs);
            let t0 = tr * run;
            let t1 = (t0 + run).min(tiles);
            for t in t0..t1 {
                if pointed {
                    point_rows(
                        g,
                        input,
                        gi,
                        t * R,
                        &mut rows[(t - t0) * per_tile..][..per_tile],
                    );
                    continue;
                }
                let panel = &mut panels[(t - t0) * per_tile..][..per_tile];
                // SAFETY: the CPU has AVX2 (applies); the input's channels are dense.
                unsafe { pack_panel(g, input, gi, t * R, k_len, panel) };
            }
            for (bi, &(b0, width)) in blocks
                .iter()
                .enumerate()
                .skip(br * per_unit_blocks)
                .take(per_unit_blocks)
            {
                let w = wpp.at((gi * group_len + block_at[bi]) as isize) as *const f32;
                let first = gi * og + b0;
                let valid = width.min(og - b0);
                for t in t0..t1 {
                    let positions = R.min(g.n * p - t * R);
                    if pointed {
                        let rows = &rows[(t - t0) * per_tile..][..per_tile];
                        let whole = valid == width;
                        let (dst, ld, b) = match whole {
                            // Straight into the output's pixels t * R.. (pixel q at q * o).
                            true => (
                                outp.at(((t * R) * g.o + first) as isize),
                                g.o,
                                bias.map_or(std::ptr::null(), |b| b[first..].as_ptr()),
                            ),
                            false => (tile.as_mut_ptr(), width, std::ptr::null()),
                        };
                        let n = if whole { positions } else { R };
                        // SAFETY: the CPU has AVX2 (points_rows); each row pointer addresses a
                        // pixel's cg channels (point_rows), w kp * width packed weights; dst
                        // the unit's own `width` channels of pixels t * R.. (n of them), or
                        // the tile; the bias (if any) `width` floats.
                        unsafe { tile_kernel_rows_any(width, rows, g.cg() / KB, w, dst, ld, n, b) };
                        if whole {
                            continue;
                        }
                    } else {
                        let panel = panels[(t - t0) * per_tile..].as_ptr();
                        blocks_of.clear();
                        blocks_of.extend((0..kp / KB).map(|kb| panel.wrapping_add(kb * R * KB)));
                        // SAFETY: the CPU has AVX2 (applies); the panel holds kp * R packed
                        // floats (kp / 16 blocks of R rows of 16), w kp * width packed
                        // weights, tile R * 32 floats.
                        unsafe {
                            tile_kernel_any(
                                width,
                                R,
                                KB,
                                &blocks_of,
                                w,
                                TileOut::Tile(tile.as_mut_ptr()),
                            )
                        };
                    }
                    let b = bias.map(|b| b[first..first + valid].as_ptr());
                    for r in 0..positions {
                        let px = outp.at(((t * R + r) * g.o + first) as isize);
                        let row = tile[r * width..].as_ptr();
                        // SAFETY: channels first..first + valid of output pixel t * R + r
                        // (dense channels-last: pixel q at q * o), written by this unit only;
                        // the tile row holds `width` floats.
                        unsafe { write_row_any(width, row, px, b, valid) };
                    }
                }
            }
        }
    });
}

/// A stride-1, one-group convolution read straight from a zero-padded copy of its input in
/// blocks of `L` channels, `[n][c / L][Dp][Hp][Wp][L]` (oneDNN's `nChw16c` for `L = 16`,
/// padded, the last block's missing channels zero): no per-tile packing. `L` is 16, or, for
/// inputs of at most 8 channels, the channel count rounded up to 1, 2, 3, 4 or 8 (an RGB
/// stem's pixels stay 3 floats: 16-channel blocks would multiply 13 zeros per tap).
///
/// An output position `(z, y, x)` is computed at grid index `t = (z * Hp + y) * Wp + x` of its
/// sample, as in [`super::grid`]: a tap is a constant pixel offset of the padded plane, and
/// the 12 positions of a tile are 12 consecutive pixels, `L` floats apart, of each channel
/// block's plane, so the tile kernel reads them where they lie. Grid columns `x >= O2` (and,
/// in 3-D, rows `y >= O1`) are computed and dropped, except on AVX-512 with 16-channel blocks,
/// where each output row is cut into pieces of at most 12 positions instead ([`Self::pieces`]:
/// the tile kernel comes in every width 1-12 there). The reduction index is
/// `k = ((c / L) * kk + tap) * L + c % L` ([`KOrder::Blocked`]).
///
/// Where it pays: packing costs about as much as a tile's products over 16 output channels
/// (measured: half the kernel's time for 32 output channels), so the grid is chosen while the
/// work it computes and drops stays below that ([`PaddedGrid::new`]).
#[derive(Clone)]
pub(super) struct PaddedGrid {
    /// Channels per block (`L`).
    pub lanes: usize,
    /// Channel blocks.
    pub c16: usize,
    /// Padded input dims (Dp, Hp, Wp).
    pub dims: [usize; 3],
    /// Pixels of one (sample, channel block) plane.
    pub plane: usize,
    /// Grid positions of a sample up to its last output, `((O0 - 1) * Hp + O1 - 1) * Wp + O2`.
    span: usize,
    /// Tiles of a sample.
    tiles: usize,
    /// Tiles of an output row, or 0 where a tile is `R` consecutive grid positions of any
    /// rows. Cutting rows into even pieces computes no dropped grid columns: those were 6% of
    /// a [32,16,32,32] -> 32 3x3 forward's multiply-adds (Wp 34 for 32 outputs).
    pieces: usize,
    /// Each tap's pixel offset in a plane.
    pub taps: Vec<usize>,
    /// Output size (D, H, W).
    osp: [usize; 3],
}

/// Elements of the blocked copy made per chunk of samples (8 MB of f32).
const GRID_CHUNK_ELEMENTS: usize = 1 << 21;

impl PaddedGrid {
    /// The grid of `g` where it applies and pays.
    ///
    /// On AVX-512 reading pixels through pointers ([`points_rows`]) beats the grid from two
    /// 16-channel blocks up, which the cost model below (grid against packing) does not see.
    /// Zen 4, 2 threads, channels-last 3x3, ms grid -> pointers (CPU's oneDNN in brackets):
    /// [1,64,56,56] -> 64 1.64 -> 1.26 (1.16); [16,128,28,28] -> 128 19.3 -> 17.2 (16.3);
    /// [8,64,32,32] -> 64 3.34 -> 2.96 (2.84); [8,32,32,32] -> 64 1.78 -> 1.58 (1.60);
    /// [8,32,32,32] -> 32 0.84 -> 0.79 (0.71). With one block (16 channels) the grid stays
    /// ahead: [8,16,64,64] -> 16 0.82 against 1.08. On AVX2 the same holds for 32 output
    /// channels or more; one 16-channel block of outputs per pointer tile does not pay (its
    /// pointer and broadcast loads outnumber the multiply-adds). Zen 3, 2 threads, 3x3,
    /// foo/CPU grid -> pointers: channels-last [8,32,32,32] -> 64 forward 1.18 -> 1.05 and input
    /// gradient 1.18 -> 1.07, [8,64,32,32] -> 64 1.15 -> 1.05 and 1.15 -> 1.06, [1,64,56,56]
    /// -> 64 1.19 -> 1.02 and 1.16 -> 0.91, [8,256,8,8] -> 256 input gradient 1.30 -> 1.14;
    /// but the [32,32,32,32] -> 16 of a [32,16,32,32] -> 32 input gradient 1.11 -> 2.45.
    fn new(g: &Geometry) -> Option<Self> {
        let wide_out = simd::level() >= 3 || g.og() >= 2 * KB;
        if points_rows(g) && g.cg() >= 2 * KB && wide_out {
            return None;
        }
        Self::layout(g, Self::lanes_for(g.c)).filter(|grid| grid.pays(g))
    }

    /// Channels per block for an input of `c` channels.
    pub(super) fn lanes_for(c: usize) -> usize {
        match c {
            1..=4 => c,
            5..=8 => 8,
            _ => KB,
        }
    }

    /// Whether the grid costs less than packing, in multiply-adds per 16 output channels: it
    /// computes `tiles * R` positions of `c16 * 16 * kk` and copies the padded input once;
    /// packing computes the outputs' packed `k`s and copies each of them once per position.
    /// A copied float costs about one multiply-add of a 16-channel block (measured: packing
    /// took half the kernel's time for 32 output channels), hence the `16 / og` weights.
    /// Measured grid/packed, 2 threads: [32,16,32,32]->32 3x3 0.83; [8,64,16,16]->64 0.91;
    /// [1,64,56,56]->64 0.96; [16,128,28,28]->128 0.84; but [8,128,8,8]->128 1.13 (grid
    /// columns 2 of 10) and [8,64,16,16]->256 1x1 1.11, which this model sends to packing.
    fn pays(&self, g: &Geometry) -> bool {
        let (kk, copy) = (g.kk(), KB as f64 / g.og() as f64);
        let lanes = self.c16 * self.lanes;
        let computed = match self.pieces {
            0 => self.tiles * R,
            _ => self.osp.iter().product(),
        };
        let grid = (computed * lanes * kk) as f64 + (self.plane * lanes) as f64 * copy;
        let packed = (g.op() * (g.c * kk).next_multiple_of(KB)) as f64 * (1.0 + copy);
        grid <= packed
    }

    /// The grid of `g` in blocks of `lanes` channels if it applies: stride 1, one group, no
    /// negative padding.
    pub(super) fn layout(g: &Geometry, lanes: usize) -> Option<Self> {
        if g.groups != 1
            || g.stride != [1, 1, 1]
            || g.padding.iter().any(|&p| p < 0)
            || g.ksp.contains(&0)
            || g.osp.contains(&0)
        {
            return None;
        }
        let dims: [usize; 3] = std::array::from_fn(|i| g.isp[i] + 2 * g.padding[i] as usize);
        // At stride 1 the outputs' taps read exactly the padded input.
        if (0..3).any(|i| dims[i] != g.osp[i] + g.dilation[i] as usize * (g.ksp[i] - 1)) {
            return None;
        }
        let [_, kh, kw] = g.ksp;
        let d = g.dilation.map(|v| v as usize);
        let taps = (0..g.kk())
            .map(|t| {
                let (a, b, e) = (t / (kh * kw), t / kw % kh, t % kw);
                (a * d[0] * dims[1] + b * d[1]) * dims[2] + e * d[2]
            })
            .collect();
        Some(Self::of(g.c, lanes, dims, taps, g.osp))
    }

    /// The grid of a padded copy of `c` channels in blocks of `lanes`, `dims` padded pixels,
    /// whose outputs (`osp`, all non-zero) read `taps` (pixel offsets, in the kernel's order).
    pub(super) fn of(
        c: usize,
        lanes: usize,
        dims: [usize; 3],
        taps: Vec<usize>,
        osp: [usize; 3],
    ) -> Self {
        let [o0, o1, o2] = osp;
        let span = ((o0 - 1) * dims[1] + o1 - 1) * dims[2] + o2;
        let pieces = match lanes == KB && simd::level() >= 3 {
            true => o2.div_ceil(R),
            false => 0,
        };
        PaddedGrid {
            lanes,
            c16: c.div_ceil(lanes),
            dims,
            plane: dims.iter().product(),
            span,
            tiles: match pieces {
                0 => span.div_ceil(R),
                _ => o0 * o1 * pieces,
            },
            pieces,
            taps,
            osp,
        }
    }

    /// Floats of one sample's copy.
    pub(super) fn sample_len(&self) -> usize {
        self.c16 * self.plane * self.lanes
    }

    /// Where tile `t` (over the samples of a chunk) lies: the divisions, once per run of
    /// tiles ([`TileAt::next`] counts on).
    fn tile_at(&self, t: usize) -> TileAt {
        let [_, hp, wp] = self.dims;
        let (ns, i) = (t / self.tiles, t % self.tiles);
        if self.pieces > 0 {
            let (piece, row) = (i % self.pieces, i / self.pieces);
            let [_, o1, _] = self.osp;
            let (x, end) = self.piece(piece);
            let (y, z) = (row % o1, row / o1);
            return TileAt {
                ns,
                first: (z * hp + y) * wp + x,
                x,
                y,
                z,
                piece,
                len: end - x,
            };
        }
        let first = i * R;
        let (x, rest) = (first % wp, first / wp);
        TileAt {
            ns,
            first,
            x,
            y: rest % hp,
            z: rest / hp,
            piece: 0,
            len: R,
        }
    }

    /// Where piece `i` of an output row starts and ends: `O2` cut evenly into [`Self::pieces`].
    #[inline]
    fn piece(&self, i: usize) -> (usize, usize) {
        let o2 = self.osp[2];
        (i * o2 / self.pieces, (i + 1) * o2 / self.pieces)
    }

    /// Calls `f(r, [z, y, x])` for each position `r` of the tile at `at` that computes an
    /// output pixel, `(z, y, x)` of its sample.
    #[inline]
    fn for_each_pixel(&self, at: &TileAt, mut f: impl FnMut(usize, [usize; 3])) {
        if self.pieces > 0 {
            for r in 0..at.len {
                f(r, [at.z, at.y, at.x + r]);
            }
            return;
        }
        let [_, hp, wp] = self.dims;
        let [_, o1, o2] = self.osp;
        let (mut x, mut y, mut z) = (at.x, at.y, at.z);
        for r in 0..R.min(self.span.saturating_sub(at.first)) {
            if x < o2 && y < o1 {
                f(r, [z, y, x]);
            }
            x += 1;
            if x == wp {
                x = 0;
                y += 1;
                if y == hp {
                    y = 0;
                    z += 1;
                }
            }
        }
    }
}

/// A tile's place in a [`PaddedGrid`]: its sample in the chunk, its first grid position, and
/// that position's padded coordinates; where rows are cut into pieces, which piece and its
/// positions (else `R`).
#[derive(Clone, Copy)]
struct TileAt {
    ns: usize,
    first: usize,
    x: usize,
    y: usize,
    z: usize,
    piece: usize,
    len: usize,
}

impl TileAt {
    /// The next tile's place (`R` positions on, or the next piece, or the next sample's first).
    #[inline]
    fn next(&mut self, grid: &PaddedGrid) {
        let [_, hp, wp] = grid.dims;
        if grid.pieces > 0 {
            let [o0, o1, _] = grid.osp;
            self.piece += 1;
            if self.piece == grid.pieces {
                self.piece = 0;
                self.y += 1;
                if self.y == o1 {
                    self.y = 0;
                    self.z += 1;
                    if self.z == o0 {
                        self.z = 0;
                        self.ns += 1;
                    }
                }
            }
            let (x, end) = grid.piece(self.piece);
            (self.x, self.len) = (x, end - x);
            self.first = (self.z * hp + self.y) * wp + x;
            return;
        }
        self.first += R;
        if self.first >= grid.tiles * R {
            *self = TileAt {
                ns: self.ns + 1,
                first: 0,
                x: 0,
                y: 0,
                z: 0,
                piece: 0,
                len: R,
            };
            return;
        }
        self.x += R;
        while self.x >= wp {
            self.x -= wp;
            self.y += 1;
            if self.y == hp {
                self.y = 0;
                self.z += 1;
            }
        }
    }
}

/// [`forward`] on the blocked grid ([`PaddedGrid`]).
fn forward_grid(
    g: &Geometry,
    grid: &PaddedGrid,
    out: &TensorMut,
    input: &TensorRef,
    weight: &TensorRef,
    bias: Option<&[f32]>,
) {
    let pass = GridPass::new(g, grid.clone(), weight, OutPixels::dense(out));
    run_grid(g, input, &[pass], out.ptr as *mut f32, bias);
}

/// Where a grid pass writes output pixel `(n, z, y, x)` (of the whole batch): its `o` channels
/// from float `at + n * strides[0] + z * strides[1] + y * strides[2] + x * strides[3]` on.
#[derive(Clone, Copy)]
pub(super) struct OutPixels {
    pub at: isize,
    pub strides: [isize; 4],
}

impl OutPixels {
    /// Every pixel of the dense channels-last `out`.
    pub(super) fn dense(out: &TensorMut) -> Self {
        let s = &out.strides;
        OutPixels {
            at: 0,
            strides: [s[0], s[2], s[3], s[4]],
        }
    }
}

/// One convolution the grid's tiles compute from a shared padded copy: the grid (its taps and
/// output size), the packed weights of its `og` output channels, where its pixels go.
pub(super) struct GridPass {
    grid: PaddedGrid,
    og: usize,
    blocks: Blocks,
    weights: Vec<f32>,
    out: OutPixels,
}

impl GridPass {
    /// The pass of `g` (stride 1, one group: `weight` is `[o, c, kd, kh, kw]`, the order of
    /// `grid.taps`) on `grid`.
    pub(super) fn new(g: &Geometry, grid: PaddedGrid, weight: &TensorRef, out: OutPixels) -> Self {
        let kp = grid.c16 * g.kk() * grid.lanes;
        let blocks = Blocks::new(g.og(), kp);
        let weights = pack_weights(g, weight, &blocks, KOrder::Blocked(grid.lanes));
        GridPass {
            grid,
            og: g.og(),
            blocks,
            weights,
            out,
        }
    }

    /// Channel blocks per work unit (their packed weights stay in a core's L2), and the runs
    /// of them.
    fn block_runs(&self) -> (usize, usize) {
        let per_unit = (UNIT_WEIGHTS / (self.blocks.kp * 32)).clamp(1, self.blocks.list.len());
        (per_unit, self.blocks.list.len().div_ceil(per_unit))
    }
}

/// Runs `passes` (all on grids of the same padded copy) over a padded copy of `input`, whose
/// padding and sizes `g` gives ([`copy_grid_row`]), in chunks of samples, writing into `out`.
pub(super) fn run_grid(
    g: &Geometry,
    input: &TensorRef,
    passes: &[GridPass],
    out: *mut f32,
    bias: Option<&[f32]>,
) {
    let grid = &passes[0].grid;
    let (lanes, sample_len) = (grid.lanes, grid.sample_len());
    let chunk = (GRID_CHUNK_ELEMENTS / sample_len).clamp(1, g.n);
    let threads = crate::runtime::pool::num_threads().max(1);
    let outp = SendPtr::new(out);
    // R pixels of slack after the last sample: a last tile's dropped positions read past it.
    with_scratch(chunk * sample_len + R * lanes, |xp: &mut [f32]| {
        let xpp = SendPtr::new(xp.as_mut_ptr());
        for s0 in (0..g.n).step_by(chunk) {
            let samples = chunk.min(g.n - s0);
            xp[samples * sample_len..][..R * lanes].fill(0.0);
            let rows = grid.dims[0] * grid.dims[1];
            parallel_for(samples * rows, 1, &|i0, i1| {
                for i in i0..i1 {
                    let (ns, row) = (i / rows, i % rows);
                    // SAFETY: row `row` of every channel block of sample ns's copy, written by
                    // this task only.
                    unsafe {
                        copy_grid_row(
                            g,
                            grid,
                            input,
                            s0 + ns,
                            row,
                            xpp.at((ns * sample_len) as isize),
                        )
                    };
                }
            });
            // Units: (pass, channel-block run, run of tiles), numbered pass after pass.
            let runs: Vec<(usize, usize)> = passes
                .iter()
                .map(|pass| {
                    let tiles = samples * pass.grid.tiles;
                    let run = (tiles / (8 * threads)).clamp(1, 8);
                    (run, tiles.div_ceil(run))
                })
                .collect();
            let mut first_unit = vec![0];
            for (pass, &(_, tile_runs)) in passes.iter().zip(&runs) {
                first_unit.push(first_unit.last().unwrap() + pass.block_runs().1 * tile_runs);
            }
            parallel_units(*first_unit.last().unwrap(), &|u0, u1| {
                let mut tile = [0f32; R * 32];
                let mut blocks_of = Vec::new();
                for u in u0..u1 {
                    let pi = first_unit.partition_point(|&f| f <= u) - 1;
                    let (pass, (run, tile_runs)) = (&passes[pi], runs[pi]);
                    let (grid, bl, og) = (&pass.grid, &pass.blocks, pass.og);
                    let (br, tr) = (
                        (u - first_unit[pi]) / tile_runs,
                        (u - first_unit[pi]) % tile_runs,
                    );
                    let t0 = tr * run;
                    let t1 = (t0 + run).min(samples * grid.tiles);
                    let (per_unit, _) = pass.block_runs();
                    let [ns_, zs, ys, xs] = pass.out.strides;
                    for (bi, &(b0, width)) in bl
                        .list
                        .iter()
                        .enumerate()
                        .skip(br * per_unit)
                        .take(per_unit)
                    {
                        let w = pass.weights[bl.at[bi]..].as_ptr();
                        let valid = width.min(og - b0);
                        let b = bias.map(|b| b[b0..b0 + valid].as_ptr());
                        let mut at = grid.tile_at(t0);
                        for _ in t0..t1 {
                            let (ns, first) = (at.ns, at.first);
                            let sample = xpp.at((ns * sample_len) as isize) as *const f32;
                            blocks_of.clear();
                            for cb in 0..grid.c16 {
                                let at = sample.wrapping_add((cb * grid.plane + first) * lanes);
                                blocks_of
                                    .extend(grid.taps.iter().map(|&o| at.wrapping_add(o * lanes)));
                            }
                            let base = pass.out.at + (s0 + ns) as isize * ns_ + b0 as isize;
                            let mut pixels = [std::ptr::null_mut(); R];
                            grid.for_each_pixel(&at, |r, [z, y, x]| {
                                pixels[r] = outp
                                    .at(base + z as isize * zs + y as isize * ys + x as isize * xs);
                            });
                            // SAFETY: the CPU has AVX2 (applies); each block pointer has R
                            // pixels of `lanes` floats in the copy (its slack past the last
                            // sample), w kp * width packed weights; channels b0..b0 + valid
                            // of the output pixels (dense channels) are this unit's only.
                            unsafe {
                                tile_into_pixels(
                                    width, at.len, lanes, &blocks_of, w, &mut tile, &pixels, b,
                                    valid,
                                )
                            };
                            at.next(grid);
                        }
                    }
                }
            });
        }
    });
}

/// Writes padded row `row` (`zp * Hp + yp`) of every channel block of sample `n`'s blocked
/// copy at `dst` ([`PaddedGrid`]): zeros where it is padding, else the input's pixels.
///
/// # Safety
/// `dst` must be writable for one sample's copy, whose row `row` nobody else accesses
/// meanwhile.
pub(super) unsafe fn copy_grid_row(
    g: &Geometry,
    grid: &PaddedGrid,
    input: &TensorRef,
    n: usize,
    row: usize,
    dst: *mut f32,
) {
    let [_, hp, wp] = grid.dims;
    let pad = g.padding.map(|v| v as usize);
    let (z, y) = (
        (row / hp) as isize - pad[0] as isize,
        (row % hp) as isize - pad[1] as isize,
    );
    let inside = (0..g.isp[0] as isize).contains(&z) && (0..g.isp[1] as isize).contains(&y);
    let xs = &input.strides;
    let (width, l) = (g.isp[2], grid.lanes);
    for cb in 0..grid.c16 {
        let line = dst.wrapping_add((cb * grid.plane + row * wp) * l);
        if !inside {
            // SAFETY: this row of block cb (the caller's contract).
            unsafe { line.write_bytes(0, wp * l) };
            continue;
        }
        // SAFETY: as above: the left and right padding of the row.
        unsafe {
            line.write_bytes(0, pad[2] * l);
            line.add((pad[2] + width) * l)
                .write_bytes(0, (wp - pad[2] - width) * l);
        }
        let lanes = l.min(g.c - cb * l);
        let src = (input.ptr as *const f32).wrapping_offset(
            n as isize * xs[0] + z * xs[2] + y * xs[3] + (cb * l) as isize * xs[1],
        );
        // SAFETY: the row's pixels of block cb (the caller's contract).
        let out = unsafe { std::slice::from_raw_parts_mut(line.add(pad[2] * l), width * l) };
        if l == KB && xs[1] != 1 && xs[4] == 1 && lanes == KB {
            // A contiguous input's block: 16 rows of `width` pixels, transposed.
            // SAFETY: channels cb * 16.. + 16 of the row's pixels.
            unsafe { transpose_into(src, xs[1], KB, width, out, false) };
            continue;
        }
        if lanes == l && (xs[1] == 1 || l == 1) && xs[4] == l as isize {
            // Dense channels-last pixels that fill the block: the row is one run.
            // SAFETY: the row's `width` pixels of `l` channels.
            out.copy_from_slice(unsafe { std::slice::from_raw_parts(src, width * l) });
            continue;
        }
        for (x, px_out) in out.chunks_exact_mut(l).enumerate() {
            let px = src.wrapping_offset(x as isize * xs[4]);
            if xs[1] == 1 && lanes == l {
                // SAFETY: the block's channels of input pixel (n, z, y, x).
                px_out.copy_from_slice(unsafe { std::slice::from_raw_parts(px, l) });
                continue;
            }
            let (real, missing) = px_out.split_at_mut(lanes);
            for (c, v) in real.iter_mut().enumerate() {
                // SAFETY: channel cb * l + c < c_in of the pixel.
                *v = unsafe { *px.offset(c as isize * xs[1]) };
            }
            missing.fill(0.0);
        }
    }
}

/// The output-channel blocks of a group: 32-wide while more than 16 channels remain, then one
/// 16-wide; with each block's offset in a group's packed weights (`kp` k's a channel).
pub(super) struct Blocks {
    /// (first channel, width).
    list: Vec<(usize, usize)>,
    at: Vec<usize>,
    group_len: usize,
    kp: usize,
}

impl Blocks {
    fn new(og: usize, kp: usize) -> Self {
        let (mut list, mut at, mut o0, mut len) = (Vec::new(), Vec::new(), 0, 0);
        while o0 < og {
            let width = if og - o0 > 16 { 32 } else { 16 };
            list.push((o0, width));
            at.push(len);
            o0 += width;
            len += kp * width;
        }
        Blocks {
            list,
            at,
            group_len: len,
            kp,
        }
    }
}

/// The order of the reduction index `k` over (input channel `c`, tap `t`) in packed weights.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KOrder {
    /// `k = t * cg + c`: a tap's channels are one run of a channels-last pixel ([`forward_packed`]).
    TapMajor,
    /// `k = ((c / L) * kk + t) * L + c % L`: the blocked grid's order ([`PaddedGrid`]) in
    /// blocks of `L` channels.
    Blocked(usize),
}

impl KOrder {
    #[inline]
    fn k(self, c: usize, t: usize, cg: usize, kk: usize) -> usize {
        match self {
            KOrder::TapMajor => t * cg + c,
            KOrder::Blocked(l) => ((c / l) * kk + t) * l + c % l,
        }
    }
}

/// Weights as `[group][block][k][width]` (`k` in `order`), zero past the group's channels and
/// past the last `k` up to `kp`, in parallel over blocks. A channels-last weight (`[o, tap,
/// c]` in memory) has its rows in tap-major order: each block is one transpose; a contiguous
/// one (`[o, c, tap]`) is transposed, then its rows are put in order; other strides are read
/// element by element.
fn pack_weights(g: &Geometry, weight: &TensorRef, bl: &Blocks, order: KOrder) -> Vec<f32> {
    let mut wp = vec![0f32; g.groups * bl.group_len];
    pack_weights_into(g, weight, bl, order, &mut wp);
    wp
}

/// [`pack_weights`] into `wp` (`groups * bl.group_len` floats, any contents: each block is
/// zeroed before it is written), for callers that keep the buffer between calls: a layer's
/// weights are megabytes (512 x 512 x 3 x 3 is 9.4 MB), and fresh pages cost a fault each.
fn pack_weights_into(g: &Geometry, weight: &TensorRef, bl: &Blocks, order: KOrder, wp: &mut [f32]) {
    let (cg, og, kk) = (g.cg(), g.og(), g.kk());
    let ck = cg * kk;
    let ws = &weight.strides;
    let [_, kh, kw] = g.ksp;
    let tap_at = |t: usize| {
        (t / (kh * kw)) as isize * ws[2]
            + (t / kw % kh) as isize * ws[3]
            + (t % kw) as isize * ws[4]
    };
    // Whether each row holds its (c, tap) elements densely in tap-major order (a
    // channels-last weight), and whether that is `order` (blocked order is when a group has
    // one block's channels).
    let tap_major = ws[1] == 1 && (0..kk).all(|t| tap_at(t) == (t * cg) as isize);
    let in_order = tap_major && (order == KOrder::TapMajor || order == KOrder::Blocked(cg));
    let contiguous = weight.is_contiguous();
    // Row of the transposed block that holds element (c, t).
    let turned_row = |c: usize, t: usize| if tap_major { t * cg + c } else { c * kk + t };
    let (blocks, block_at, group_len, kp) = (&bl.list, &bl.at, bl.group_len, bl.kp);
    assert_eq!(wp.len(), g.groups * group_len);
    let wpp = SendPtr::new(wp.as_mut_ptr());
    let base = SendPtr::<f32>::of(weight.ptr);
    parallel_for(g.groups * blocks.len(), 1, &|u0, u1| {
        let mut turned = Vec::new();
        for u in u0..u1 {
            let (gi, bi) = (u / blocks.len(), u % blocks.len());
            let (b0, width) = blocks[bi];
            let rows = width.min(og - b0);
            let o0 = gi * og + b0;
            // SAFETY: this unit's block of wp.
            let dst = unsafe { wpp.slice_mut(gi * group_len + block_at[bi], kp * width) };
            dst.fill(0.0);
            let first = base.at(o0 as isize * ws[0]) as *const f32;
            if rows == width && (tap_major || contiguous) {
                turned.resize(ck * width, 0.0);
                // SAFETY: `width` rows of ck dense weights, ws[0] apart.
                unsafe { transpose_into(first, ws[0], width, ck, &mut turned, false) };
                if in_order {
                    dst[..ck * width].copy_from_slice(&turned);
                } else {
                    for c in 0..cg {
                        for t in 0..kk {
                            dst[order.k(c, t, cg, kk) * width..][..width]
                                .copy_from_slice(&turned[turned_row(c, t) * width..][..width]);
                        }
                    }
                }
                continue;
            }
            for j in 0..rows {
                let row = first.wrapping_offset(j as isize * ws[0]);
                for c in 0..cg {
                    for t in 0..kk {
                        // SAFETY: element (o0 + j, c, tap t) of the weight.
                        dst[order.k(c, t, cg, kk) * width + j] =
                            unsafe { *row.offset(c as isize * ws[1] + tap_at(t)) };
                    }
                }
            }
        }
    });
}

/// Channels of a group at most for [`point_rows`]: the length of [`ZEROS`].
const POINTED_CHANNELS: usize = 1024;

/// Zeros standing in for a padding pixel's channels in [`point_rows`].
static ZEROS: [f32; POINTED_CHANNELS] = [0.0; POINTED_CHANNELS];

/// Whether [`forward_packed`] reads its positions through pointers ([`point_rows`]) rather
/// than packed panels: whole 16-channel blocks per group, on AVX2 and AVX-512. A channels-last
/// pixel's 16 channels are then the same 16 floats a panel would hold, read where they lie, as
/// oneDNN's kernels read them, so a tile costs one pointer per tap and position instead of
/// `kp * 12` copied floats (packing was a tenth of the time of a [16,32,32,32] 3x3 stride-2
/// forward to 64 channels on a Zen 3; on a Zen 4 with AVX-512, 2 threads, the pointers took
/// [8,256,4,4] 3x3 to 256 channels from 1.21 to 0.96 ms and the other cases 0-2% less time).
fn points_rows(g: &Geometry) -> bool {
    simd::level() >= 2 && g.cg() % KB == 0 && g.cg() <= POINTED_CHANNELS
}

/// Sample and output coordinates of position `q` (flattened over the samples).
fn out_position(g: &Geometry, q: usize) -> (usize, [usize; 3]) {
    let [_, o1, o2] = g.osp;
    let (n, pos) = (q / g.op(), q % g.op());
    (n, [pos / (o1 * o2), pos / o2 % o1, pos % o2])
}

/// The output position after `out` of sample `n`.
#[inline]
fn next_out(g: &Geometry, n: &mut usize, out: &mut [usize; 3]) {
    for i in (0..3).rev() {
        out[i] += 1;
        if out[i] < g.osp[i] {
            return;
        }
        out[i] = 0;
    }
    *n += 1;
}

/// `rows[tap * R + r]`: where the `cg` channels of group `gi` of the input pixel that tap
/// `tap` of output position `q0 + r` (flattened over samples) reads lie, or [`ZEROS`] for
/// padding and for positions past the last. K-block `kb` of a position is then its
/// `kb % (cg / 16)`-th 16 channels of tap `kb / (cg / 16)` ([`KOrder::TapMajor`]).
fn point_rows(g: &Geometry, input: &TensorRef, gi: usize, q0: usize, rows: &mut [*const f32]) {
    let p = g.op();
    let [kd, kh, kw] = g.ksp;
    let xs = &input.strides;
    let base = (input.ptr as *const f32).wrapping_add(gi * g.cg());
    let zero = ZEROS.as_ptr();
    let inside = |v: isize, len: usize| (0..len as isize).contains(&v);
    // Each position's window corner, and whether the whole window lies inside the input.
    let reach: [isize; 3] = std::array::from_fn(|i| (g.ksp[i] as isize - 1) * g.dilation[i]);
    let mut corner = [zero; R];
    let mut whole = [false; R];
    let mut first = [[0isize; 3]; R];
    let (mut n, mut out) = out_position(g, q0);
    for r in 0..R {
        if r > 0 {
            next_out(g, &mut n, &mut out);
        }
        if q0 + r >= g.n * p {
            continue;
        }
        let at0: [isize; 3] = std::array::from_fn(|i| out[i] as isize * g.stride[i] - g.padding[i]);
        let sample = base.wrapping_offset(n as isize * xs[0]);
        corner[r] = sample.wrapping_offset(at0[0] * xs[2] + at0[1] * xs[3] + at0[2] * xs[4]);
        whole[r] = (0..3).all(|i| at0[i] >= 0 && at0[i] + reach[i] < g.isp[i] as isize);
        first[r] = at0;
    }
    // Every position's pointers at the tap's fixed offset from its corner, a tap's R pointers
    // in one run (a bounds check per position and tap took a fifth of a 32 -> 16 channel
    // input gradient's time) ...
    let mut taps = rows.chunks_exact_mut(R);
    for a in 0..kd as isize {
        for b in 0..kh as isize {
            for e in 0..kw as isize {
                let off = a * g.dilation[0] * xs[2]
                    + b * g.dilation[1] * xs[3]
                    + e * g.dilation[2] * xs[4];
                let tap = taps.next().expect("kk taps of R pointers");
                for (t, c) in tap.iter_mut().zip(&corner) {
                    *t = c.wrapping_offset(off);
                }
            }
        }
    }
    // ... then the positions whose window leaves the input, or past the last, tap by tap.
    for r in (0..R).filter(|&r| !whole[r]) {
        let at0 = first[r];
        let live = q0 + r < g.n * p;
        let corner = corner[r];
        let mut tap = 0;
        for a in 0..kd {
            let z = at0[0] + a as isize * g.dilation[0];
            for b in 0..kh {
                let y = at0[1] + b as isize * g.dilation[1];
                let row_in = live && inside(z, g.isp[0]) && inside(y, g.isp[1]);
                for e in 0..kw {
                    let x = at0[2] + e as isize * g.dilation[2];
                    let off = (z - at0[0]) * xs[2] + (y - at0[1]) * xs[3] + (x - at0[2]) * xs[4];
                    rows[tap * R + r] = if row_in && inside(x, g.isp[2]) {
                        corner.wrapping_offset(off)
                    } else {
                        zero
                    };
                    tap += 1;
                }
            }
        }
    }
}

/// The tile over positions given by pointers ([`point_rows`]) for a block of 16 output
/// channels or two (`width`), written to `n` rows `ld` floats apart at `dst`, plus `bias`
/// unless null: the products in the packed tile's order, so its bits.
///
/// # Safety
/// As [`rows::product_avx2`] with `rows` of `R` positions per tap, `16 c16` channels each.
#[allow(clippy::too_many_arguments)]
unsafe fn tile_kernel_rows_any(
    width: usize,
    rows: &[*const f32],
    c16: usize,
    w: *const f32,
    dst: *mut f32,
    ld: usize,
    n: usize,
    bias: *const f32,
) {
    let (depth, to) = (c16 * KB, rows::Dst::Write);
    // SAFETY: the caller's contract.
    unsafe {
        match (simd::level() >= 3, width == 32) {
            (true, true) => {
                rows::product_avx512::<R, R2, 2>(rows, depth, w, dst, ld, 16, n, bias, to)
            }
            // All 12 positions in one sub-tile: 12 accumulators (6 left the two FMA units
            // idle for part of each multiply-add's latency).
            (true, false) => {
                rows::product_avx512::<R, R, 1>(rows, depth, w, dst, ld, 16, n, bias, to)
            }
            (false, true) => {
                rows::product_avx2::<R, R3, 4>(rows, depth, w, dst, ld, 8, n, bias, to)
            }
            (false, false) => {
                rows::product_avx2::<R, R2, 2>(rows, depth, w, dst, ld, 8, n, bias, to)
            }
        }
    }
}

/// Rows of a 32-channel AVX2 sub-tile: 3 rows x 32 channels in 12 ymm registers with their 3
/// broadcasts and a weight register: half the broadcasts of two [`R2`] x 16 sub-tiles per
/// multiply-add.
const R3: usize = 3;

/// Packs the patches of output positions `q0..q0 + R` (flattened over samples; zeros past the
/// last) of group `gi` into `panel` as `[k / 16][r][k % 16]`.
///
/// A kernel row's taps (`kw` pixels) are one run of `kw * cg` floats of the input when the
/// pixels are dense and hold only this group's channels (no groups, no dilation along W) and
/// none of them is padding: one copy for the row (7 taps of an RGB 7x7 input in one).
///
/// # Safety
/// The CPU must support AVX2 and FMA; `input`'s channel stride must be 1.
unsafe fn pack_panel(
    g: &Geometry,
    input: &TensorRef,
    gi: usize,
    q0: usize,
    k_len: usize,
    panel: &mut [f32],
) {
    /// [`pack_panel_body`] with AVX-512's masked moves.
    #[target_feature(enable = "avx512f")]
    unsafe fn masked(g: &Geometry, x: &TensorRef, gi: usize, q0: usize, k: usize, p: &mut [f32]) {
        // SAFETY: the CPU has AVX-512F; the rest is forwarded.
        unsafe { pack_panel_body::<true>(g, x, gi, q0, k, p) }
    }
    #[target_feature(enable = "avx2,fma")]
    unsafe fn plain(g: &Geometry, x: &TensorRef, gi: usize, q0: usize, k: usize, p: &mut [f32]) {
        // SAFETY: the CPU has AVX2; the rest is forwarded.
        unsafe { pack_panel_body::<false>(g, x, gi, q0, k, p) }
    }
    // SAFETY: the level says which features the CPU has; the rest is the caller's contract.
    unsafe {
        if simd::level() >= 3 {
            masked(g, input, gi, q0, k_len, panel)
        } else {
            plain(g, input, gi, q0, k_len, panel)
        }
    }
}

/// [`pack_panel`]'s body; [`put`] with masked AVX-512 moves if `MASKED`.
///
/// # Safety
/// As [`pack_panel`], and the CPU must support AVX-512F if `MASKED`.
#[inline(always)]
unsafe fn pack_panel_body<const MASKED: bool>(
    g: &Geometry,
    input: &TensorRef,
    gi: usize,
    q0: usize,
    k_len: usize,
    panel: &mut [f32],
) {
    let cg = g.cg();
    let p = g.op();
    let [kd, kh, kw] = g.ksp;
    let xs = &input.strides;
    let whole_rows = g.groups == 1 && g.dilation[2] == 1 && (xs[4] == cg as isize || g.isp[2] == 1);
    let base = (input.ptr as *const f32).wrapping_add(gi * cg);
    let kpad = panel.len() / R;
    let lanes = panel.as_mut_ptr();
    // Short rows without masked moves (an RGB stem: 27 k's): each position's k's are first
    // written as one contiguous row, in whole vectors, and all rows are moved into the
    // panel's blocks at the end (by then the row stores have left the store buffer; reading
    // each row back at once had stalled on store forwarding).
    let by_rows = !MASKED && kpad <= SHORT_ROW;
    let mut rows = [std::mem::MaybeUninit::<f32>::uninit(); R * (SHORT_ROW + 8)];
    let rows_ptr = rows.as_mut_ptr() as *mut f32;
    // A macro, not a closure: a closure is a function of its own, compiled without the AVX2 of
    // the `plain` copy this body is inlined into (its intrinsics became calls).
    macro_rules! put_at {
        ($r:expr, $k:expr, $src:expr, $len:expr) => {
            // SAFETY: position r's lanes of the panel, or its row of `rows` (`kpad + 8`
            // floats, see put_row), from `src`'s `len` floats (the call sites' comments say
            // why they are readable); this body runs with AVX2 (pack_panel).
            unsafe {
                if by_rows {
                    put_row(rows_ptr.add($r * (kpad + 8)), $k, $src, $len)
                } else {
                    put::<MASKED>(lanes, $r, $k, $src, $len)
                }
            }
        };
    }
    let inside = |v: isize, len: usize| (0..len as isize).contains(&v);
    // The output coordinates of position q0 + r, counted up from q0's (no divisions per
    // position).
    let (mut n, mut out) = out_position(g, q0);
    for r in 0..R {
        if r > 0 {
            next_out(g, &mut n, &mut out);
        }
        if q0 + r >= g.n * p {
            // SAFETY: position r's lanes of the panel.
            put_at!(r, 0, None, kpad);
            continue;
        }
        let at0: [isize; 3] = std::array::from_fn(|i| out[i] as isize * g.stride[i] - g.padding[i]);
        let sample = base.wrapping_offset(n as isize * xs[0]);
        for a in 0..kd {
            let z = at0[0] + a as isize * g.dilation[0];
            for b in 0..kh {
                let y = at0[1] + b as isize * g.dilation[1];
                let k = (a * kh + b) * kw * cg;
                let row = (inside(z, g.isp[0]) && inside(y, g.isp[1]))
                    .then(|| sample.wrapping_offset(z * xs[2] + y * xs[3]));
                let x0 = at0[2];
                let x_last = x0 + (kw as isize - 1) * g.dilation[2];
                match row {
                    Some(row) if whole_rows && x0 >= 0 && x_last < g.isp[2] as isize => {
                        // The row's kw dense pixels of cg channels.
                        put_at!(r, k, Some(row.wrapping_offset(x0 * xs[4])), kw * cg);
                    }
                    Some(row) => {
                        for e in 0..kw {
                            let x = x0 + e as isize * g.dilation[2];
                            let src = inside(x, g.isp[2]).then(|| row.wrapping_offset(x * xs[4]));
                            // `src` has cg dense channels of an input pixel (stride 1).
                            put_at!(r, k + e * cg, src, cg);
                        }
                    }
                    None => put_at!(r, k, None, kw * cg),
                }
            }
        }
        put_at!(r, k_len, None, kpad - k_len);
    }
    if by_rows {
        for r in 0..R {
            for kb in 0..kpad / KB {
                // SAFETY: k's kb * 16 .. + 16 of row r (all kpad written above) into position
                // r's lanes of block kb.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        rows_ptr.add(r * (kpad + 8) + kb * KB),
                        lanes.add(kb * R * KB + r * KB),
                        KB,
                    )
                };
            }
        }
    }
}

/// The longest row of k's [`pack_panel_body`] builds position by position (see `by_rows`).
const SHORT_ROW: usize = 64;

/// Writes `len` floats from `src` (zeros if `None`) to `row[k .. k + len]` in whole 8-lane
/// vectors: up to 7 floats past `k + len` are overwritten too, which the next run (written
/// after this one, at `k + len`) or the row's slack takes.
///
/// # Safety
/// The CPU must support AVX2; `row` must hold `k + len + 8` floats; `src` must be readable for
/// `len` floats (the last vector's load is masked to them and faults on no lane past them).
#[inline(always)]
unsafe fn put_row(row: *mut f32, k: usize, src: Option<*const f32>, len: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        let dst = row.add(k);
        let mut i = 0;
        while i < len {
            let v = match src {
                Some(s) if len - i >= 8 => _mm256_loadu_ps(s.add(i)),
                Some(s) => {
                    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                    let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((len - i) as i32), lanes);
                    _mm256_maskload_ps(s.add(i), mask)
                }
                None => _mm256_setzero_ps(),
            };
            _mm256_storeu_ps(dst.add(i), v);
            i += 8;
        }
    }
}

/// Writes `len` floats from `src` (zeros if `None`) to k's `k..k + len` of position `r` of a
/// panel (`[k / 16][r][k % 16]`), 16-lane block by block with masked moves (a tap's run of
/// channels is often shorter than a block: 3 for an RGB input).
///
/// # Safety
/// The CPU must support AVX-512F if `MASKED`, else AVX2; the panel at `panel` must hold the k's up to
/// `k + len`; `src` must be readable for `len` floats.
#[inline(always)]
unsafe fn put<const MASKED: bool>(
    panel: *mut f32,
    r: usize,
    k: usize,
    src: Option<*const f32>,
    len: usize,
) {
    if k % KB == 0 && len % KB == 0 {
        // Whole blocks (channels in multiples of 16): plain moves.
        for i in 0..len / KB {
            // SAFETY: position r's lanes of block k / 16 + i.
            let dst = unsafe { panel.add((k / KB + i) * R * KB + r * KB) };
            // SAFETY: 16 floats at dst and at src + 16i (the caller's contract).
            unsafe {
                match src {
                    Some(s) => std::ptr::copy_nonoverlapping(s.add(i * KB), dst, KB),
                    None => dst.write_bytes(0, KB),
                }
            }
        }
        return;
    }
    let (mut k, mut done) = (k, 0);
    while done < len {
        let n = (KB - k % KB).min(len - done);
        if !MASKED && r + 1 < R {
            // Whole 8-lane vectors, the last load masked to the run: up to 7 lanes past the
            // run are overwritten, in this position's block or the next position's lanes of
            // it, which are written after these (every position writes all its lanes, in
            // order). A `memmove` call per run of 3-9 floats (an RGB input) had taken 40% of
            // the stem convolution's time. The last position, whose next lanes are the next
            // block's first position, copies exactly.
            // SAFETY: lanes k % 16 .. + n of position r in block k / 16 and the next 7 (in
            // the panel: position r + 1 follows), src + done .. + n (the caller's contract).
            unsafe {
                put_row(
                    panel.add((k / KB) * R * KB + r * KB + k % KB),
                    0,
                    src.map(|s| s.add(done)),
                    n,
                )
            };
            k += n;
            done += n;
            continue;
        }
        if !MASKED {
            // SAFETY: lanes k % 16 .. + n of position r in block k / 16, and src + done ..
            // + n (the caller's contract).
            unsafe {
                let dst = panel.add((k / KB) * R * KB + r * KB + k % KB);
                match src {
                    Some(s) => std::ptr::copy_nonoverlapping(s.add(done), dst, n),
                    None => dst.write_bytes(0, n),
                }
            }
            k += n;
            done += n;
            continue;
        }
        let mask: __mmask16 = if n == 16 { !0 } else { (1u16 << n) - 1 };
        let v = match src {
            // SAFETY: src + done .. src + done + n (the caller's contract).
            Some(s) => unsafe { _mm512_maskz_loadu_ps(mask, s.add(done)) },
            // SAFETY: MASKED: the CPU has AVX-512F (the caller's contract).
            None => unsafe { _mm512_setzero_ps() },
        };
        // SAFETY: lanes k % 16 .. + n of position r in block k / 16.
        unsafe { _mm512_mask_storeu_ps(panel.add((k / KB) * R * KB + r * KB + k % KB), mask, v) };
        k += n;
        done += n;
    }
}

/// Rows `r` of a tile (`width` floats a row) plus `bias` into `valid` channels at
/// `pixels[r]`, for each pixel that is not null: on AVX2 in one call per tile (a call per row
/// copied 128 bytes each through `memcpy`, 16K times for an RGB stem's [16,32,32,32] output).
///
/// # Safety
/// As [`write_row`] for each non-null pixel, on an AVX2 CPU.
unsafe fn write_tile(
    width: usize,
    tile: &[f32; R * 32],
    pixels: &[*mut f32; R],
    bias: Option<*const f32>,
    valid: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        match (simd::level() < 3 && valid == width, width) {
            (true, 32) => write_tile_avx2::<4>(tile, pixels, bias),
            (true, _) => write_tile_avx2::<2>(tile, pixels, bias),
            (false, _) => {
                for (r, &px) in pixels.iter().enumerate() {
                    if !px.is_null() {
                        write_row_any(width, tile[r * width..].as_ptr(), px, bias, valid);
                    }
                }
            }
        }
    }
}

/// [`write_tile`] for `8J` valid channels.
///
/// # Safety
/// As [`write_tile`] with `width = valid = 8J`.
#[target_feature(enable = "avx2")]
unsafe fn write_tile_avx2<const J: usize>(
    tile: &[f32; R * 32],
    pixels: &[*mut f32; R],
    bias: Option<*const f32>,
) {
    let b: [__m256; J] = std::array::from_fn(|j| match bias {
        // SAFETY: 8J floats of bias (the caller's contract).
        Some(b) => unsafe { _mm256_loadu_ps(b.add(8 * j)) },
        None => _mm256_setzero_ps(),
    });
    for (r, &px) in pixels.iter().enumerate() {
        if px.is_null() {
            continue;
        }
        for (j, &bj) in b.iter().enumerate() {
            // SAFETY: row r of the tile; 8J floats at px (the caller's contract).
            unsafe {
                let v = _mm256_loadu_ps(tile.as_ptr().add(r * 8 * J + 8 * j));
                let v = if bias.is_some() {
                    _mm256_add_ps(v, bj)
                } else {
                    v
                };
                _mm256_storeu_ps(px.add(8 * j), v);
            }
        }
    }
}

/// [`write_row`] for a block of `width` (16 or 32) output channels.
///
/// # Safety
/// As [`write_row`].
#[inline]
unsafe fn write_row_any(
    width: usize,
    row: *const f32,
    dst: *mut f32,
    bias: Option<*const f32>,
    valid: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        if simd::level() < 3 {
            write_row_plain(row, dst, bias, valid);
        } else if width == 32 {
            write_row::<2>(row, dst, bias, valid);
        } else {
            write_row::<1>(row, dst, bias, valid);
        }
    }
}

/// [`write_row`] without masked moves, compiled for AVX2 (its caller is not: as baseline SSE
/// code the bias add took 8% of an RGB stem convolution's time).
///
/// # Safety
/// The CPU must support AVX2; `row`, `dst` and `bias` (if any) must hold `valid` floats.
#[target_feature(enable = "avx2")]
unsafe fn write_row_plain(row: *const f32, dst: *mut f32, bias: Option<*const f32>, valid: usize) {
    // SAFETY: the caller's contract.
    let (row, dst) = unsafe {
        (
            std::slice::from_raw_parts(row, valid),
            std::slice::from_raw_parts_mut(dst, valid),
        )
    };
    match bias {
        Some(b) => {
            // SAFETY: as above.
            let b = unsafe { std::slice::from_raw_parts(b, valid) };
            for ((d, &x), &b) in dst.iter_mut().zip(row).zip(b) {
                *d = x + b;
            }
        }
        None => dst.copy_from_slice(row),
    }
}

/// Row `r` of a tile (`16V` floats a row) plus `bias` into `valid <= 16V` channels at `dst`.
///
/// # Safety
/// The CPU must support AVX-512F; `row` must hold `16V` floats, `dst` and `bias` (if any)
/// `valid`.
#[target_feature(enable = "avx512f")]
unsafe fn write_row<const V: usize>(
    row: *const f32,
    dst: *mut f32,
    bias: Option<*const f32>,
    valid: usize,
) {
    for v in 0..V {
        let n = valid.saturating_sub(16 * v).min(16);
        if n == 0 {
            break;
        }
        let mask: __mmask16 = if n == 16 { !0 } else { (1u16 << n) - 1 };
        // SAFETY: the caller's contract.
        unsafe {
            let mut x = _mm512_loadu_ps(row.add(16 * v));
            if let Some(b) = bias {
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask, b.add(16 * v)));
            }
            _mm512_mask_storeu_ps(dst.add(16 * v), mask, x);
        }
    }
}

/// Where a tile kernel stores its rows: the tile (`R` rows of `16V` floats), or, on AVX2,
/// straight into output pixels (null: a dropped grid position) plus the bias unless null.
#[derive(Clone, Copy)]
enum TileOut<'a> {
    Tile(*mut f32),
    Pixels(&'a [*mut f32; R], *const f32),
}

/// The tile of `a` and `w` plus `bias` into `valid` channels of each non-null pixel: whole
/// blocks straight from the registers (through the tile and [`write_tile`] the copy took 5%
/// of a [32,16,32,32] -> 32 forward on a Zen 3, 7% on a Zen 4), else through `tile`.
///
/// # Safety
/// As [`tile_kernel_any`] and [`write_tile`].
#[allow(clippy::too_many_arguments)]
unsafe fn tile_into_pixels(
    width: usize,
    n: usize,
    lanes: usize,
    a: &[*const f32],
    w: *const f32,
    tile: &mut [f32; R * 32],
    pixels: &[*mut f32; R],
    bias: Option<*const f32>,
    valid: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        if valid == width {
            let b = bias.unwrap_or(std::ptr::null());
            tile_kernel_any(width, n, lanes, a, w, TileOut::Pixels(pixels, b));
        } else {
            tile_kernel_any(width, n, lanes, a, w, TileOut::Tile(tile.as_mut_ptr()));
            write_tile(width, tile, pixels, bias, valid);
        }
    }
}

/// [`tile_kernel`] for a block of `width` (16 or 32) output channels, `n` rows (`R`, or any
/// of 1-11 for 16 lanes on AVX-512: a [`PaddedGrid`]'s pieces of rows) and `lanes` k's per
/// pointer of `a` (16, or a narrow [`PaddedGrid`]'s 1, 2, 3, 4 or 8), on AVX-512 or AVX2
/// (the same bits).
///
/// # Safety
/// As [`tile_kernel`]; each non-null pixel of `out` writable for `width` floats, the bias
/// (unless null) readable for `width`.
#[inline]
unsafe fn tile_kernel_any(
    width: usize,
    n: usize,
    lanes: usize,
    a: &[*const f32],
    w: *const f32,
    out: TileOut,
) {
    /// The instance for a constant `L`: the rows' offsets are constants of the code.
    ///
    /// # Safety
    /// As [`tile_kernel_any`].
    #[inline]
    unsafe fn with<const L: usize>(
        width: usize,
        n: usize,
        a: &[*const f32],
        w: *const f32,
        out: TileOut,
    ) {
        debug_assert!(n == R || (L == KB && simd::level() >= 3));
        // SAFETY: the caller's contract; the level says which features the CPU has.
        unsafe {
            match (out, width == 32) {
                (out, true) if n < R && simd::level() >= 3 => tile_kernel_short::<2>(n, a, w, out),
                (out, false) if n < R && simd::level() >= 3 => tile_kernel_short::<1>(n, a, w, out),
                (out, true) if simd::level() >= 3 => tile_kernel::<2, L, R>(a, w, out),
                (out, false) if simd::level() >= 3 => tile_kernel::<1, L, R>(a, w, out),
                (out, true) => tile_kernel_avx2::<2, L>(a, w, out),
                (out, false) => tile_kernel_avx2::<1, L>(a, w, out),
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe {
        match lanes {
            KB => with::<KB>(width, n, a, w, out),
            1 => with::<1>(width, n, a, w, out),
            2 => with::<2>(width, n, a, w, out),
            3 => with::<3>(width, n, a, w, out),
            4 => with::<4>(width, n, a, w, out),
            8 => with::<8>(width, n, a, w, out),
            _ => unreachable!("tile_kernel_any: {lanes} lanes"),
        }
    }
}

/// [`tile_kernel`] of `n < R` rows, 16 lanes, on AVX-512: an instance per row count (the
/// accumulators are registers).
///
/// # Safety
/// As [`tile_kernel`] with `N = n`, `L = 16`.
#[inline]
unsafe fn tile_kernel_short<const V: usize>(
    n: usize,
    a: &[*const f32],
    w: *const f32,
    out: TileOut,
) {
    // SAFETY: the caller's contract.
    unsafe {
        match n {
            1 => tile_kernel::<V, KB, 1>(a, w, out),
            2 => tile_kernel::<V, KB, 2>(a, w, out),
            3 => tile_kernel::<V, KB, 3>(a, w, out),
            4 => tile_kernel::<V, KB, 4>(a, w, out),
            5 => tile_kernel::<V, KB, 5>(a, w, out),
            6 => tile_kernel::<V, KB, 6>(a, w, out),
            7 => tile_kernel::<V, KB, 7>(a, w, out),
            8 => tile_kernel::<V, KB, 8>(a, w, out),
            9 => tile_kernel::<V, KB, 9>(a, w, out),
            10 => tile_kernel::<V, KB, 10>(a, w, out),
            11 => tile_kernel::<V, KB, 11>(a, w, out),
            _ => unreachable!("tile_kernel_short: {n} rows"),
        }
    }
}

/// Rows of an AVX2 sub-tile: 6 rows x 16 channels in 12 of the 16 ymm registers, with the
/// weights' 2 and a broadcast.
const R2: usize = 6;

/// [`tile_kernel`] on AVX2: the tile in sub-tiles of [`R2`] rows x 16 channels (32 channels:
/// [`R3`] rows x 32), each over all of `k` in the same order (the same sums, bit for bit).
///
/// # Safety
/// As [`tile_kernel_any`], with AVX2 and FMA instead of AVX-512F.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_kernel_avx2<const V: usize, const L: usize>(
    a: &[*const f32],
    w: *const f32,
    out: TileOut,
) {
    if V == 2 {
        // SAFETY: the caller's contract.
        unsafe { tile_kernel_avx2_32::<L>(a, w, out) };
        return;
    }
    for v in 0..V {
        for r0 in (0..R).step_by(R2) {
            let mut acc = [[_mm256_setzero_ps(); 2]; R2];
            for (kb, &ab) in a.iter().enumerate() {
                // SAFETY: block kb of the weights (the caller's contract).
                let wb = unsafe { w.add((kb * L * V + v) * 16) };
                // SAFETY: rows r0.. of the block (the caller's contract).
                let ab = unsafe { ab.add(r0 * L) };
                for kk in 0..L {
                    // SAFETY: k's 16 packed weights of channels 16v..16v + 16.
                    let (w0, w1) = unsafe {
                        let p = wb.add(kk * V * 16);
                        (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
                    };
                    for (r, row) in acc.iter_mut().enumerate() {
                        // SAFETY: row r0 + r's element kk of block kb.
                        let xv = _mm256_broadcast_ss(unsafe { &*ab.add(r * L + kk) });
                        row[0] = _mm256_fmadd_ps(w0, xv, row[0]);
                        row[1] = _mm256_fmadd_ps(w1, xv, row[1]);
                    }
                }
            }
            for (r, row) in acc.iter().enumerate() {
                let (p, bias) = match out {
                    TileOut::Tile(tile) => {
                        // SAFETY: row r0 + r of the tile (the caller's contract).
                        (unsafe { tile.add((r0 + r) * 16 * V) }, std::ptr::null())
                    }
                    TileOut::Pixels(pixels, bias) => (pixels[r0 + r], bias),
                };
                if p.is_null() {
                    continue;
                }
                // SAFETY: the caller's contract: 16V floats at p, and at the bias unless null.
                unsafe {
                    let (p, mut x) = (p.add(16 * v), *row);
                    if !bias.is_null() {
                        // As write_tile: `+ bias` only where there is one (-0.0 + 0.0 is 0.0).
                        x[0] = _mm256_add_ps(x[0], _mm256_loadu_ps(bias.add(16 * v)));
                        x[1] = _mm256_add_ps(x[1], _mm256_loadu_ps(bias.add(16 * v + 8)));
                    }
                    _mm256_storeu_ps(p, x[0]);
                    _mm256_storeu_ps(p.add(8), x[1]);
                }
            }
        }
    }
}

/// [`tile_kernel_avx2`] for 32 channels: sub-tiles of [`R3`] rows x 4 vectors, whose 3
/// broadcasts serve 12 multiply-adds (the 6 x 2 sub-tiles' 6 broadcasts and 2 weights served
/// 12). Measured on a Zen 3, 2 threads, channels-last conv2d [32, 16, 32, 32] -> 32, 3x3,
/// foo/CPU: see docs/PERFORMANCE.md.
///
/// # Safety
/// As [`tile_kernel_avx2`] with `V == 2`.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_kernel_avx2_32<const L: usize>(a: &[*const f32], w: *const f32, out: TileOut) {
    const _: () = assert!(R % R3 == 0);
    for r0 in (0..R).step_by(R3) {
        let mut acc = [[_mm256_setzero_ps(); 4]; R3];
        for (kb, &ab) in a.iter().enumerate() {
            // SAFETY: block kb of the weights, 32 per k (the caller's contract).
            let wb = unsafe { w.add(kb * L * 32) };
            // SAFETY: rows r0.. of the block (the caller's contract).
            let ab = unsafe { ab.add(r0 * L) };
            for kk in 0..L {
                let xv: [__m256; R3] = std::array::from_fn(|r| {
                    // SAFETY: row r0 + r's element kk of block kb.
                    _mm256_broadcast_ss(unsafe { &*ab.add(r * L + kk) })
                });
                for j in 0..4 {
                    // SAFETY: k's packed weights of channels 8j..8j + 8.
                    let wv = unsafe { _mm256_loadu_ps(wb.add(kk * 32 + 8 * j)) };
                    for (row, &x) in acc.iter_mut().zip(&xv) {
                        row[j] = _mm256_fmadd_ps(wv, x, row[j]);
                    }
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            let (p, bias) = match out {
                // SAFETY: row r0 + r of the tile (the caller's contract).
                TileOut::Tile(tile) => (unsafe { tile.add((r0 + r) * 32) }, std::ptr::null()),
                TileOut::Pixels(pixels, bias) => (pixels[r0 + r], bias),
            };
            if p.is_null() {
                continue;
            }
            for (j, &x) in row.iter().enumerate() {
                // SAFETY: the caller's contract: 32 floats at p, and at the bias unless null.
                unsafe {
                    // As write_tile: `+ bias` only where there is one (-0.0 + 0.0 is 0.0).
                    let x = match bias.is_null() {
                        true => x,
                        false => _mm256_add_ps(x, _mm256_loadu_ps(bias.add(8 * j))),
                    };
                    _mm256_storeu_ps(p.add(8 * j), x);
                }
            }
        }
    }
}

/// `tile[r * 16V + j] = sum_k w[k * 16V + j] * a[k / L][r * L + k % L]` for `r < N`,
/// `j < 16V`, over `a.len() * L` k's: `a` holds one pointer per block of `L` k's, to `R` rows
/// of `L` floats (a packed panel's block, or 12 consecutive pixels of the blocked grid);
/// or row `r` plus the bias (unless null) straight from the registers into pixel `r` unless
/// null ([`TileOut::Pixels`]: through the tile and [`write_tile`] the copy took 7% of a
/// [32,16,32,32] -> 32 forward on a Zen 4).
///
/// # Safety
/// The CPU must support AVX-512F; each `a[kb]` must be readable for `LN` floats, `w` for
/// `a.len() * L * 16V`; a tile writable for `R * 16V`, each non-null pixel for `16V` floats,
/// the bias (unless null) readable for `16V`.
#[target_feature(enable = "avx512f")]
unsafe fn tile_kernel<const V: usize, const L: usize, const N: usize>(
    a: &[*const f32],
    w: *const f32,
    out: TileOut,
) {
    let mut acc = [[_mm512_setzero_ps(); V]; N];
    for (kb, &ab) in a.iter().enumerate() {
        // SAFETY: block kb of the weights (the caller's contract).
        let wb = unsafe { w.add(kb * L * 16 * V) };
        for kk in 0..L {
            let mut wv = [_mm512_setzero_ps(); V];
            for (v, x) in wv.iter_mut().enumerate() {
                // SAFETY: k's 16V packed weights.
                *x = unsafe { _mm512_loadu_ps(wb.add((kk * V + v) * 16)) };
            }
            for (r, row) in acc.iter_mut().enumerate() {
                // SAFETY: row r's element kk of block kb (the caller's contract).
                let xv = _mm512_set1_ps(unsafe { *ab.add(r * L + kk) });
                for (v, acc) in row.iter_mut().enumerate() {
                    *acc = _mm512_fmadd_ps(wv[v], xv, *acc);
                }
            }
        }
    }
    match out {
        TileOut::Tile(tile) => {
            for (r, row) in acc.iter().enumerate() {
                for (v, acc) in row.iter().enumerate() {
                    // SAFETY: the caller's contract.
                    unsafe { _mm512_storeu_ps(tile.add((r * V + v) * 16), *acc) };
                }
            }
        }
        TileOut::Pixels(pixels, bias) => {
            for (row, &p) in acc.iter().zip(pixels) {
                if p.is_null() {
                    continue;
                }
                for (v, &x) in row.iter().enumerate() {
                    // SAFETY: the caller's contract: 16V floats at p, and at the bias unless
                    // null.
                    unsafe {
                        // As write_tile: `+ bias` only where there is one (-0.0 + 0.0 is 0.0).
                        let x = match bias.is_null() {
                            true => x,
                            false => _mm512_add_ps(x, _mm512_loadu_ps(bias.add(16 * v))),
                        };
                        _mm512_storeu_ps(p.add(16 * v), x);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{int_case, ints, IntCase, KernelCase as Case};
    use super::super::{
        conv_backward_bias, conv_backward_input, conv_backward_weight, conv_forward,
    };
    use super::*;
    use crate::dtype::DType;
    use crate::kernels::core::map::testing::Owned;

    /// `data` (contiguous `[n, c, d, h, w]`) stored channels-last, and its strides.
    fn to_channels_last(data: &[f32], shape: &[usize; 5]) -> (Vec<f32>, Vec<isize>) {
        let [_, c, d, h, w] = *shape;
        let mut out = vec![0f32; data.len()];
        for (i, &v) in data.iter().enumerate() {
            let (ni, ci, s) = (i / (c * d * h * w), i / (d * h * w) % c, i % (d * h * w));
            out[(ni * d * h * w + s) * c + ci] = v;
        }
        let strides = [d * h * w * c, 1, h * w * c, w * c, c].map(|s| s as isize);
        (out, strides.to_vec())
    }

    fn view(data: &[f32], shape: &[usize; 5], strides: &[isize]) -> TensorRef {
        TensorRef {
            ptr: data.as_ptr() as *const u8,
            shape: shape.to_vec().into(),
            strides: strides.into(),
            dtype: DType::F32,
        }
    }

    fn view_mut(data: &mut [f32], shape: &[usize; 5], strides: &[isize]) -> TensorMut {
        TensorMut {
            ptr: data.as_mut_ptr() as *mut u8,
            shape: shape.to_vec().into(),
            strides: strides.into(),
            dtype: DType::F32,
        }
    }

    /// The blocked grid gives the packed form's bits (small integers: exact sums in any order)
    /// with one or several channel blocks, a partial last one, narrow blocks (1-8 channels),
    /// dilation, 3-D, a weight of any layout, an input with strided channels, samples split
    /// into chunks, and (16-channel blocks on AVX-512) rows cut into one to three pieces.
    #[test]
    fn grid_matches_packing() {
        if simd::level() < 2 {
            return;
        }
        #[rustfmt::skip]
        let cases: [Case; 12] = [
            (2, 1, [1, 9, 11], 16, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (2, 2, [1, 7, 13], 32, [1, 5, 5], [1, 1, 1], [0, 2, 2], [1, 1, 1], 1),
            (3, 4, [2, 6, 5], 48, [2, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 2], 1),
            (2, 5, [1, 8, 8], 20, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (2, 3, [1, 9, 11], 32, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (3, 20, [1, 10, 9], 48, [1, 3, 3], [1, 1, 1], [0, 2, 1], [1, 2, 1], 1),
            (2, 16, [3, 5, 6], 16, [2, 3, 3], [1, 1, 1], [1, 1, 0], [2, 1, 1], 1),
            (4, 40, [1, 4, 4], 64, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (2, 32, [1, 5, 5], 16, [1, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 1], 1),
            (300, 16, [1, 23, 21], 8, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            // Rows of 25 and 12 outputs: three pieces of 8-9 positions, one whole piece.
            (2, 16, [1, 3, 25], 32, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (1, 17, [1, 2, 12], 16, [1, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 1], 1),
        ];
        for case in cases {
            let c = int_case(case);
            let g = Geometry::new(&c.xshape, &c.wshape, &c.oshape, &c.params).unwrap();
            let narrow = PaddedGrid::lanes_for(g.c);
            let grids = [KB, narrow][..if narrow == KB { 1 } else { 2 }]
                .iter()
                .map(|&l| PaddedGrid::layout(&g, l).expect(&c.what))
                .collect::<Vec<_>>();
            let (x_cl, x_st) = to_channels_last(&c.x.data, &c.xshape);
            let (w_cl, w_st) = to_channels_last(&c.w.data, &c.wshape);
            let len = c.oshape.iter().product();
            let (_, o_st) = to_channels_last(&vec![0.0; len], &c.oshape);
            let x_views = [c.x.r(), view(&x_cl, &c.xshape, &x_st)];
            let w_views = [c.w.r(), view(&w_cl, &c.wshape, &w_st)];
            let bias = Some(&c.b.data[..]);
            let mut want = vec![f32::NAN; len];
            let out = view_mut(&mut want, &c.oshape, &o_st);
            forward_packed(&g, &out, &x_views[1], &w_views[0], bias);
            for grid in &grids {
                for (xr, wr) in x_views
                    .iter()
                    .flat_map(|x| w_views.iter().map(move |w| (x, w)))
                {
                    let mut got = vec![f32::NAN; len];
                    forward_grid(
                        &g,
                        grid,
                        &view_mut(&mut got, &c.oshape, &o_st),
                        xr,
                        wr,
                        bias,
                    );
                    assert_eq!(got, want, "{} in blocks of {}", c.what, grid.lanes);
                }
            }
        }
    }

    /// Channels-last convolutions (the packed forward, and the backward through it and
    /// through the channels-last gradient copies) give the bits of the contiguous ones: small
    /// integers make every sum exact in float32, whatever the order.
    #[test]
    fn channels_last_matches_contiguous() {
        if simd::level() < 2 {
            return;
        }
        #[rustfmt::skip]
        let cases: [Case; 19] = [
            // Narrow grids with planes large enough for the AVX2 grid weight gradient.
            (2, 3, [1, 33, 32], 24, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (1, 6, [1, 32, 34], 16, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            // Strided (the grid's phases): a 1x1 downsample (phases without taps), a 4x4 kernel
            // at strides 3 and 2, and a partial third block of output-gradient channels.
            (2, 16, [1, 7, 8], 32, [1, 1, 1], [1, 2, 2], [0, 0, 0], [1, 1, 1], 1),
            (3, 8, [1, 9, 10], 24, [1, 4, 4], [1, 3, 2], [0, 2, 1], [1, 1, 1], 1),
            (2, 5, [1, 11, 9], 40, [1, 3, 3], [1, 2, 2], [0, 1, 1], [1, 1, 1], 1),
            (3, 20, [1, 10, 9], 48, [1, 3, 3], [1, 1, 1], [0, 2, 1], [1, 2, 1], 1),
            (2, 16, [3, 6, 8], 16, [2, 3, 3], [1, 1, 1], [1, 1, 0], [2, 1, 1], 1),
            (40, 16, [1, 23, 21], 32, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (2, 3, [1, 9, 11], 32, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (3, 16, [1, 10, 9], 48, [1, 3, 3], [1, 2, 2], [0, 1, 1], [1, 1, 1], 1),
            (1, 4, [1, 7, 12], 20, [1, 3, 5], [1, 2, 3], [0, 2, 1], [1, 2, 1], 1),
            (2, 6, [1, 6, 6], 34, [1, 3, 3], [1, 1, 1], [0, 0, 0], [1, 1, 1], 2),
            (2, 3, [4, 5, 6], 16, [2, 3, 3], [2, 1, 2], [1, 0, 1], [1, 1, 1], 1),
            (4, 64, [1, 4, 4], 64, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (3, 3, [1, 13, 13], 8, [1, 7, 7], [1, 2, 2], [0, 3, 3], [1, 1, 1], 1),
            (2, 32, [1, 5, 5], 16, [1, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 1], 1),
            (5, 24, [1, 3, 3], 40, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 4),
            // Whole 16-channel blocks per group, read through pointers (AVX2, AVX-512): groups,
            // dilation and 3-D padding, positions running over rows and samples.
            (3, 32, [1, 7, 6], 48, [1, 3, 3], [1, 2, 1], [0, 1, 2], [1, 1, 2], 2),
            (2, 16, [3, 5, 6], 16, [2, 3, 3], [2, 2, 2], [1, 1, 1], [1, 2, 1], 1),
        ];
        for case in cases {
            let IntCase {
                xshape,
                wshape,
                oshape,
                params,
                x,
                w,
                b,
                what,
            } = int_case(case);
            let o = oshape[1];
            let gy = Owned::new(ints(oshape.iter().product(), 4), &oshape);
            let (x_cl, x_st) = to_channels_last(&x.data, &xshape);
            let (w_cl, w_st) = to_channels_last(&w.data, &wshape);
            let (gy_cl, gy_st) = to_channels_last(&gy.data, &oshape);
            // Forward: contiguous and channels-last inputs and weights, into a channels-last
            // output.
            let mut want = Owned::<f32>::zeros(&oshape);
            conv_forward(&want.m(), &x.r(), &w.r(), Some(&b.r()), &params).unwrap();
            let (want_cl, o_st) = to_channels_last(&want.data, &oshape);
            for xr in [x.r(), view(&x_cl, &xshape, &x_st)] {
                for wr in [w.r(), view(&w_cl, &wshape, &w_st)] {
                    let mut got = vec![f32::NAN; want_cl.len()];
                    let out = view_mut(&mut got, &oshape, &o_st);
                    conv_forward(&out, &xr, &wr, Some(&b.r()), &params).unwrap();
                    assert_eq!(got, want_cl, "forward {what}");
                }
            }
            // Input gradient into a channels-last tensor from a channels-last output gradient.
            let mut want = Owned::<f32>::zeros(&xshape);
            conv_backward_input(&want.m(), &gy.r(), &w.r(), None, &params).unwrap();
            let (want_cl, _) = to_channels_last(&want.data, &xshape);
            let mut got = vec![f32::NAN; want_cl.len()];
            let gi = view_mut(&mut got, &xshape, &x_st);
            conv_backward_input(&gi, &view(&gy_cl, &oshape, &gy_st), &w.r(), None, &params)
                .unwrap();
            assert_eq!(got, want_cl, "input gradient {what}");
            // Weight and bias gradients from channels-last operands.
            let mut want = Owned::<f32>::zeros(&wshape);
            conv_backward_weight(&want.m(), &x.r(), &gy.r(), &params).unwrap();
            let mut got = Owned::new(vec![f32::NAN; want.data.len()], &wshape);
            let (xr, gyr) = (view(&x_cl, &xshape, &x_st), view(&gy_cl, &oshape, &gy_st));
            conv_backward_weight(&got.m(), &xr, &gyr, &params).unwrap();
            assert_eq!(got.data, want.data, "weight gradient {what}");
            // And into a channels-last weight gradient (the CPU's layout when the input or
            // the weight is channels-last), from either gradient layout.
            let (want_cl, _) = to_channels_last(&want.data, &wshape);
            for gyr in [gy.r(), gyr.clone()] {
                let mut got = vec![f32::NAN; want_cl.len()];
                let gw = view_mut(&mut got, &wshape, &w_st);
                conv_backward_weight(&gw, &xr, &gyr, &params).unwrap();
                assert_eq!(got, want_cl, "channels-last weight gradient {what}");
            }
            let mut want = Owned::<f32>::zeros(&[o]);
            conv_backward_bias(&want.m(), &gy.r()).unwrap();
            let mut got = Owned::<f32>::zeros(&[o]);
            conv_backward_bias(&got.m(), &gyr).unwrap();
            assert_eq!(got.data, want.data, "bias gradient {what}");
        }
    }
}
