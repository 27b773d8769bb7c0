//! Direct float32 convolution forward on AVX-512 CPUs, without an im2col matrix.
//!
//! The input of a chunk of samples is copied once, zero-padded and split by stride phase, into
//! `xs` (`[n, c, phase, Q0, Q1, Q2]`: phase `(a, b, e)` holds the padded elements whose
//! coordinates are `a`, `b`, `e` modulo the stride). An output position `(z, y, x)` is computed
//! at grid index `t = (z * Q1 + y) * Q2 + x`, and for every (channel, tap) `k` the element it
//! multiplies is `xs[koff[k] + t]`: one constant offset per `k` for all positions, whatever
//! the stride and dilation. Grid columns `x >= O2` (a few per row) are computed and dropped.
//!
//! The register tile holds 16 or 32 output channels (one or two zmm) for 24 or 12 consecutive
//! grid positions: per `k` it loads the packed weights of its channels and broadcasts one input
//! element per position (`vfmadd231ps` with a `{1to16}` memory operand), so it runs at the FMA
//! ports' speed with no column matrix to write and read back (im2col cost as much as the GEMM
//! for resnet-sized 3x3 convolutions, most for stride 2). The tile is then written out
//! channel by channel, with the bias.
//!
//! Every output element is one tile's sum over `k` in a fixed order, so the bits do not depend
//! on the thread count; zero padding is multiplied like any element, as in the GEMM paths (a
//! non-finite weight over padding gives nan there, as on the CPU).

// The AVX-512 intrinsics are stable since Rust 1.89 (see gemm/bf16/microkernel.rs).
#![allow(clippy::incompatible_msrv)]

use super::{depthwise, Geometry};
use crate::kernels::core::parallel::{parallel_for, parallel_units, SendPtr};
use crate::kernels::core::scratch::{with_scratch, with_scratch2};
use crate::kernels::core::simd;
use crate::kernels::core::transpose::{transpose16x16_regs, transpose_into, transpose_strided};
use crate::tensor::{TensorMut, TensorRef};
use std::arch::x86_64::*;

/// Grid positions per parallel work unit (a multiple of both tiles' widths).
const UNIT_POSITIONS: usize = 96;

/// Elements of the phase-split input copied per chunk of samples (8 MB of f32).
const CHUNK_ELEMENTS: usize = 1 << 21;

/// Fewer multiply-adds per output than this leave the tile's write-out (a transpose, element
/// by element) a large part of the work: the im2col/GEMM paths do better (measured: the
/// [16,3,32,32] 3x3 convolution, 27 per output, 0.25 ms there against 0.38 ms here).
const MIN_DEPTH: usize = 64;

/// Output planes smaller than this (4x4 and below) take the batched im2col/GEMM path, which
/// puts the samples side by side in one GEMM: here each 4x4 plane is two tiles that each read
/// the whole packed weight of their channels, a third of it for dropped grid columns (measured:
/// [8,256,4,4] 3x3, 2 threads, 0.82 ms there against 1.17 ms here; [8,128,8,8] 1.02 there
/// against 0.75 here).
pub(super) const MIN_POSITIONS: usize = 64;

/// Positions of the register tile with two channel vectors (12 x 2 accumulators) and with
/// one (24 x 1).
const R2: usize = 12;
const R1: usize = 24;

/// Positions of the narrow tile ([`narrow_kernel`]): 3 vectors of 16, times up to 8 channels.
const RN: usize = 48;

/// Whether [`forward`] takes this grouped float32 convolution of 16 or fewer output channels
/// per group (RegNet's and ResNeXt's grouped 3x3 layers, 4-16 channels a group), whatever its
/// plane's size. Under 16 channels the channel-vector tile would be mostly padding: the narrow
/// tile ([`narrow_kernel`]) puts positions in the vectors instead, up to 8 channels at a time.
/// 16-channel groups too, as two narrow blocks (against one 16-channel vector tile, Zen 5, 2
/// threads: [1,512,14,14] 135 -> 123 us, [1,64,112,112] stride 2 299 -> 261). Those layers
/// had taken one GEMM of 4-8 rows per group over an im2col matrix, 16-channel groups the
/// packed kernel through channels-last copies. Zen 5, 2 threads, foo/CPU before -> after, 3x3
/// into 8-channel groups: [1,48,112,112] stride 2 2.62 -> 0.85, [1,208,28,28] stride 2 3.49
/// -> 0.94, [1,104,28,28] 2.18 -> 0.60, [1,440,7,7] 2.33 -> 0.57, [8,64,32,32] 0.19 -> 0.65
/// (the CPU's own path is slow there).
pub(super) fn grouped_applies(g: &Geometry) -> bool {
    simd::level() >= 3
        && g.og() <= 16
        && g.groups > 1
        && g.ck() > 0
        && !g.is_pointwise()
        && !depthwise::applies(g)
        && g.padding.iter().all(|&p| p >= 0)
}

/// Whether the direct kernel takes this float32 convolution: an AVX-512 CPU, at least 16
/// output channels per group (the tile's vector), and not a shape another path does better
/// (depthwise; pointwise, whose column matrix is the input itself).
pub(super) fn applies(g: &Geometry) -> bool {
    simd::level() >= 3 && suits(g)
}

/// Whether `g` is in this kernel's shape range (the CPU aside): enough output channels,
/// depth and positions for its tiles; not pointwise or depthwise; no negative padding.
pub(super) fn suits(g: &Geometry) -> bool {
    g.og() >= 16
        && g.ck() >= MIN_DEPTH
        && g.op() >= MIN_POSITIONS
        && !g.is_pointwise()
        && !depthwise::applies(g)
        && g.padding.iter().all(|&p| p >= 0)
}

/// The padded, phase-split input layout and the output grid of one convolution.
struct Layout {
    /// Stride per dim.
    s: [usize; 3],
    /// Padded extent read per dim and its size per phase (`ceil(e / s)`).
    ext: [usize; 3],
    q: [usize; 3],
    /// Elements of one phase plane, of one channel (all phases), of one sample (with slack).
    plane: usize,
    channel: usize,
    sample: usize,
    /// Grid positions computed (a multiple of 48, covering the last real output).
    m: usize,
}

impl Layout {
    fn new(g: &Geometry) -> Self {
        let s = g.stride.map(|v| v as usize);
        let d = g.dil();
        let ext = [0, 1, 2].map(|i| s[i] * (g.osp[i] - 1) + (g.ksp[i] - 1) * d[i] + 1);
        let q = [0, 1, 2].map(|i| ext[i].div_ceil(s[i]));
        let plane = q.iter().product::<usize>();
        let channel = plane * s.iter().product::<usize>();
        let last = ((g.osp[0] - 1) * q[1] + g.osp[1] - 1) * q[2] + g.osp[2];
        // A multiple of both tiles' widths and of the weight gradient's 16 lanes.
        let m = last.next_multiple_of(48);
        // The positions past `last` read up to `m - last` elements past the end of the last
        // channel's last plane: zeros.
        let sample = g.c * channel + m;
        Layout {
            s,
            ext,
            q,
            plane,
            channel,
            sample,
            m,
        }
    }

    /// Offset in a sample's copy of the element that tap `(a, b, e)` of channel `c` reads for
    /// grid position 0.
    fn koff(&self, g: &Geometry, c: usize, tap: [usize; 3]) -> usize {
        let d = g.dil();
        let r = [0, 1, 2].map(|i| tap[i] * d[i]);
        let phase =
            ((r[0] % self.s[0]) * self.s[1] + r[1] % self.s[1]) * self.s[2] + r[2] % self.s[2];
        let shift =
            ((r[0] / self.s[0]) * self.q[1] + r[1] / self.s[1]) * self.q[2] + r[2] / self.s[2];
        c * self.channel + phase * self.plane + shift
    }

    /// [`Layout::koff`] of every (group-local channel, tap), in the weight's order.
    fn koffs(&self, g: &Geometry) -> Vec<usize> {
        let [_, kh, kw] = g.ksp;
        (0..g.cg())
            .flat_map(|c| {
                (0..g.kk()).map(move |t| self.koff(g, c, [t / (kh * kw), t / kw % kh, t % kw]))
            })
            .collect()
    }

    /// What each tile of `r` grid positions writes: per tile `i`, the runs
    /// `list[start[i]..start[i + 1]]` of `(first position in the tile, first output position,
    /// length)`, consecutive in both (a run ends at a dropped column).
    fn runs(&self, g: &Geometry, r: usize) -> Runs {
        let [o0, o1, o2] = g.osp;
        let mut runs = Runs {
            start: vec![0],
            list: Vec::new(),
        };
        for t0 in (0..self.m).step_by(r) {
            let mut open: Option<(usize, usize, usize)> = None;
            for t in t0..t0 + r {
                let (x, rest) = (t % self.q[2], t / self.q[2]);
                let (y, z) = (rest % self.q[1], rest / self.q[1]);
                let target = (x < o2 && y < o1 && z < o0).then(|| (z * o1 + y) * o2 + x);
                match (target, &mut open) {
                    (Some(pos), Some((_, p0, len))) if *p0 + *len == pos => *len += 1,
                    (Some(pos), _) => {
                        runs.list.extend(open.take());
                        open = Some((t - t0, pos, 1));
                    }
                    (None, _) => runs.list.extend(open.take()),
                }
            }
            runs.list.extend(open);
            runs.start.push(runs.list.len());
        }
        runs
    }
}

/// See [`Layout::runs`].
#[derive(Default)]
struct Runs {
    start: Vec<usize>,
    list: Vec<(usize, usize, usize)>,
}

/// `out = conv(input, weight) + bias` for float32 operands ([`applies`] holds; `out` and
/// `weight` contiguous; channels-last outputs take [`super::packed`]).
pub(super) fn forward(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    weight: &TensorRef,
    bias: Option<&[f32]>,
) {
    let lay = Layout::new(g);
    let (cg, og, kk, p) = (g.cg(), g.og(), g.kk(), g.op());
    // Per group-local channel and tap, in the packed weight's order.
    let koff = lay.koffs(g);
    // Channel blocks of each group: 32-wide while more than 16 remain, then one 16-wide;
    // under 16 channels (and for 16-channel groups), narrow blocks of 8 (4 for 4 or fewer).
    let narrow = og < 16 || og == 16 && g.groups > 1;
    let runs = if narrow {
        [lay.runs(g, RN), Runs::default()]
    } else {
        [lay.runs(g, R1), lay.runs(g, R2)]
    };
    // The runs of each unit's positions, which its channel-vector tiles write at once.
    let unit_runs = lay.runs(g, UNIT_POSITIONS);
    let mut blocks = Vec::new();
    let mut o0 = 0;
    while o0 < og {
        let width = match og - o0 {
            _ if narrow && og <= 4 => 4,
            _ if narrow => 8,
            17.. => 32,
            _ => 16,
        };
        blocks.push((o0, width));
        o0 += width;
    }
    let ck = cg * kk;
    let packed_len = g.groups * blocks.iter().map(|b| b.1).sum::<usize>() * ck;
    let chunk = (CHUNK_ELEMENTS / lay.sample).clamp(1, g.n);
    // SAFETY: the contiguous weight [o, cg, kd, kh, kw].
    let wt = unsafe { std::slice::from_raw_parts(weight.ptr as *const f32, g.o * ck) };
    with_scratch2(
        chunk * lay.sample,
        packed_len,
        |xs: &mut [f32], wp: &mut [f32]| {
            // Weights as [group][block][k][width], zero past the group's channels.
            let mut at = 0;
            let mut block_at = Vec::with_capacity(g.groups * blocks.len());
            for gi in 0..g.groups {
                for &(b0, width) in &blocks {
                    block_at.push(at);
                    let rows = &wt[(gi * og + b0) * ck..];
                    let dst = &mut wp[at..at + ck * width];
                    if b0 + width <= og {
                        // SAFETY: `rows` holds the block's `width` rows of `ck` weights.
                        unsafe { transpose_into(rows.as_ptr(), ck as isize, width, ck, dst, true) };
                    } else {
                        for (k, d) in dst.chunks_exact_mut(width).enumerate() {
                            for (j, v) in d.iter_mut().enumerate() {
                                *v = if b0 + j < og { rows[j * ck + k] } else { 0.0 };
                            }
                        }
                    }
                    at += ck * width;
                }
            }
            let units_per_block = lay.m.div_ceil(UNIT_POSITIONS);
            let per_sample = g.groups * blocks.len() * units_per_block;
            let (xsp, wpp, outp) = (
                SendPtr::new(xs.as_mut_ptr()),
                SendPtr::new(wp.as_mut_ptr()),
                SendPtr::<f32>::of(out.ptr),
            );
            for s0 in (0..g.n).step_by(chunk) {
                let samples = chunk.min(g.n - s0);
                // SAFETY: xs holds chunk >= samples sample copies.
                unsafe { copy_samples(g, &lay, input, s0, samples, xsp) };
                parallel_units(samples * per_sample, &|u0, u1| {
                    let mut tile = [0f32; 32 * R2];
                    let mut unit_out = vec![0f32; 32 * UNIT_STRIDE];
                    for u in u0..u1 {
                        // Samples vary faster than channel blocks: a thread's run of units
                        // reuses one block's packed weights from its cache (for [8,256,4,4]
                        // 3x3 the weights are 2.4 MB and every sample has 2 tiles per block:
                        // 1.47 -> 1.38 ms against blocks outermost).
                        let (gb, rest) = (
                            u / (samples * units_per_block),
                            u % (samples * units_per_block),
                        );
                        let (ni, unit) = (rest / units_per_block, rest % units_per_block);
                        let (gi, bi) = (gb / blocks.len(), gb % blocks.len());
                        let (b0, width) = blocks[bi];
                        let x = xsp.at((ni * lay.sample + gi * cg * lay.channel) as isize)
                            as *const f32;
                        let w = wpp.at(block_at[gb] as isize) as *const f32;
                        let valid = width.min(og - b0);
                        let first = (s0 + ni) * g.o + gi * og + b0;
                        let (r, runs) = match width {
                            32 => (R2, &runs[1]),
                            16 => (R1, &runs[0]),
                            _ => (RN, &runs[0]),
                        };
                        let t_start = unit * UNIT_POSITIONS;
                        let t_end = ((unit + 1) * UNIT_POSITIONS).min(lay.m);
                        // The unit's tiles that write something: (offset in the unit, runs).
                        let mut tiles = [(0, &[][..]); UNIT_POSITIONS / R2];
                        let mut count = 0;
                        for t0 in (t_start..t_end).step_by(r) {
                            let list = &runs.list[runs.start[t0 / r]..runs.start[t0 / r + 1]];
                            if !list.is_empty() {
                                tiles[count] = (t0 - t_start, list);
                                count += 1;
                            }
                        }
                        let valid_bias = bias.map(|b| &b[gi * og + b0..gi * og + b0 + valid]);
                        let row0 = outp.at((first * p) as isize);
                        for &(t, list) in &tiles[..count] {
                            let tp = tile.as_mut_ptr();
                            let t0 = t_start + t;
                            // SAFETY: the CPU has AVX-512 (applies); x + koff[k] + t0 + r - 1 is
                            // inside this sample's copy (Layout: the slack covers t < m), w holds
                            // ck * width packed weights, tile 32 * R2 = 16 * R1 = 8 * RN floats;
                            // output channels first..first + valid of this sample at the runs'
                            // positions (< p) are written by this unit only.
                            unsafe {
                                match width {
                                    32 => tile_kernel::<2, R2>(x.add(t0), &koff, w, tp),
                                    16 => tile_kernel::<1, R1>(x.add(t0), &koff, w, tp),
                                    8 => narrow_kernel::<8>(x.add(t0), &koff, w, tp),
                                    _ => narrow_kernel::<4>(x.add(t0), &koff, w, tp),
                                }
                                match narrow {
                                    true => write_runs(&tile, RN, list, valid_bias, valid, row0, p),
                                    false => channel_major(&tile, width, r, &mut unit_out, t),
                                }
                            }
                        }
                        if !narrow {
                            let list =
                                &unit_runs.list[unit_runs.start[unit]..unit_runs.start[unit + 1]];
                            // SAFETY: as above; unit_out holds every tile's channels at their
                            // offsets, which cover the unit's runs.
                            unsafe {
                                write_runs(&unit_out, UNIT_STRIDE, list, valid_bias, valid, row0, p)
                            };
                        }
                    }
                });
            }
        },
    );
}

/// `grad_input = conv_transpose(grad_output, weight) (+ bias)` for a stride-1 convolution `g`
/// whose [`Geometry::input_gradient_geometry`] is `gt` (and [`applies`] to it): [`forward`] with the
/// weight `w'[gi * cg + c, o, tap] = w[gi * og + o, c, flipped tap]`.
pub(super) fn input_gradient(
    g: &Geometry,
    gt: &Geometry,
    grad_input: &TensorMut,
    grad_output: &TensorRef,
    weight: &TensorRef,
    bias: Option<&[f32]>,
) {
    let (cg, og, kk) = (g.cg(), g.og(), g.kk());
    // SAFETY: the contiguous weight [o, cg, kd, kh, kw].
    let wt = unsafe { std::slice::from_raw_parts(weight.ptr as *const f32, g.o * cg * kk) };
    // A kept buffer: a layer's weight is megabytes, which fresh pages would fault in.
    with_scratch(g.c * og * kk, |turned: &mut [f32]| {
        for gi in 0..g.groups {
            for o in 0..og {
                for c in 0..cg {
                    let src = &wt[((gi * og + o) * cg + c) * kk..][..kk];
                    let dst = &mut turned[((gi * cg + c) * og + o) * kk..][..kk];
                    dst.iter_mut()
                        .zip(src.iter().rev())
                        .for_each(|(d, &v)| *d = v);
                }
            }
        }
        let shape = [g.c, og, g.ksp[0], g.ksp[1], g.ksp[2]];
        let w = TensorRef {
            ptr: turned.as_ptr() as *const u8,
            shape: shape.to_vec().into(),
            strides: crate::tensor::contiguous_strides(&shape),
            dtype: crate::dtype::DType::F32,
        };
        super::forward_f32(gt, grad_input, grad_output, &w, bias);
    })
}

/// (channel, tap) columns of the weight gradient's register tile, and its output-channel
/// vectors at most (4 x 16 channels).
const WC: usize = 6;
const WV: usize = 4;

/// Elements of input and output-gradient copies per chunk of samples of the weight gradient
/// (1 MB of f32): every tile passes over the whole chunk, which should stay in the caches.
const WEIGHT_CHUNK_ELEMENTS: usize = 1 << 18;

/// `grad_weight = sum over samples and positions of grad_output x input` ([`applies`] holds;
/// `grad_weight` contiguous, `grad_output` contiguous or channels-last; `grad_weight` is
/// overwritten).
///
/// The output gradient is copied onto the grid transposed (`[n, group, m, og16]`, channels
/// padded to a multiple of 16, zero at dropped positions), so that at grid position `t` the
/// gradient of 16 output channels is one vector, and column `(c, tap)` of the product is the
/// input copy at `koff[(c, tap)] + t`: a register tile of 64 output channels x 6 columns does
/// 24 FMAs per position from 4 vector loads and 6 broadcasts, summing over the chunk's samples
/// and positions in order; chunks are added in order (the bits do not depend on the thread
/// count).
pub(super) fn weight_gradient(
    g: &Geometry,
    grad_weight: &TensorMut,
    input: &TensorRef,
    grad_output: &TensorRef,
) {
    let go_channels_last = super::is_channels_last(&grad_output.shape, &grad_output.strides);
    let lay = Layout::new(g);
    let (cg, og, ck, p, m) = (g.cg(), g.og(), g.ck(), g.op(), lay.m);
    let og16 = og.next_multiple_of(16);
    let koff = lay.koffs(g);
    let per_sample_go = g.groups * m * og16;
    let chunk = (WEIGHT_CHUNK_ELEMENTS / (lay.sample + per_sample_go)).clamp(1, g.n);
    let (otiles, ctiles) = (og16.div_ceil(16 * WV), ck.div_ceil(WC));
    let units = g.groups * otiles * ctiles;
    let gw = SendPtr::<f32>::of(grad_weight.ptr);
    let go_at = SendPtr::<f32>::of(grad_output.ptr);
    let [_, o1, o2] = g.osp;
    let grid_row = |q: usize| {
        let (zy, x) = (q / o2, q % o2);
        ((zy / o1) * lay.q[1] + zy % o1) * lay.q[2] + x
    };
    with_scratch2(
        chunk * lay.sample,
        chunk * per_sample_go,
        |xs: &mut [f32], gos: &mut [f32]| {
            let (xsp, gosp) = (
                SendPtr::new(xs.as_mut_ptr()),
                SendPtr::new(gos.as_mut_ptr()),
            );
            for s0 in (0..g.n).step_by(chunk) {
                let samples = chunk.min(g.n - s0);
                // SAFETY: xs holds chunk >= samples sample copies.
                unsafe { copy_samples(g, &lay, input, s0, samples, xsp) };
                // The gradient of each (sample, group) spread onto the grid rows: a
                // channels-last gradient's pixels are those rows already, a contiguous one's
                // output rows are transposed onto them. In parallel: on the calling thread this
                // had been a sixth of a ResNet stem's weight gradient ([8, 3, 64, 64] -> 64
                // channels, 7 x 7, stride 2; Zen 5, 2 threads, three alternating runs: 621-669
                // -> 514-533 us).
                parallel_for(samples * g.groups, 1, &|i0, i1| {
                    for i in i0..i1 {
                        // SAFETY: this (sample, group)'s [m, og16] block of gos, its task's only.
                        let block = unsafe { gosp.slice_mut(i * m * og16, m * og16) };
                        block.fill(0.0);
                        let (n, gi) = (s0 + i / g.groups, i % g.groups);
                        if go_channels_last {
                            for q in 0..p {
                                let src = go_at.at(((n * p + q) * g.o + gi * og) as isize);
                                // SAFETY: channels gi * og.. + og of pixel q of sample n.
                                let row = unsafe { std::slice::from_raw_parts(src, og) };
                                let t = grid_row(q);
                                block[t * og16..t * og16 + og].copy_from_slice(row);
                            }
                            continue;
                        }
                        let src = go_at.at(((n * g.groups + gi) * og * p) as isize) as *const f32;
                        for q in (0..p).step_by(o2) {
                            // SAFETY: the og x o2 block of output row q / o2 in the contiguous
                            // [og, p] gradient of this sample and group, transposed into the
                            // grid rows grid_row(q).. (o2 of them, og16 floats apart) of block.
                            unsafe {
                                transpose_strided(
                                    src.add(q),
                                    p as isize,
                                    og,
                                    o2,
                                    block[grid_row(q) * og16..].as_mut_ptr(),
                                    og16,
                                    false,
                                )
                            };
                        }
                    }
                });
                parallel_units(units, &|u0, u1| {
                    for u in u0..u1 {
                        let (gi, rest) = (u / (otiles * ctiles), u % (otiles * ctiles));
                        let (ot, ct) = (rest / ctiles, rest % ctiles);
                        let o0 = ot * 16 * WV;
                        let vectors = ((og16 - o0) / 16).min(WV);
                        let xoff: [usize; WC] = std::array::from_fn(|j| {
                            gi * cg * lay.channel + koff[(ct * WC + j).min(ck - 1)]
                        });
                        let mut sums = [[0f32; 16 * WV]; WC];
                        let go = gosp.at((gi * m * og16 + o0) as isize) as *const f32;
                        // SAFETY: the CPU has AVX-512 (applies); every x row read (koff + t
                        // for t < m) is inside its sample's copy; the gradient rows hold og16
                        // floats from o0 + 16 * vectors <= og16 on.
                        unsafe {
                            let tile: WeightTile = match vectors {
                                4 => weight_tile::<4>,
                                3 => weight_tile::<3>,
                                2 => weight_tile::<2>,
                                _ => weight_tile::<1>,
                            };
                            tile(
                                xsp.get(),
                                lay.sample,
                                &xoff,
                                go,
                                per_sample_go,
                                og16,
                                samples,
                                m,
                                &mut sums,
                            )
                        }
                        for (j, col_sums) in sums.iter().enumerate() {
                            let col = ct * WC + j;
                            if col >= ck {
                                break;
                            }
                            for (o, &v) in col_sums
                                .iter()
                                .enumerate()
                                .take(og.saturating_sub(o0).min(16 * vectors))
                            {
                                // SAFETY: element (gi * og + o0 + o, col) of the contiguous
                                // [o, ck] gradient, written by this unit only.
                                let d = unsafe {
                                    &mut *gw.at(((gi * og + o0 + o) * ck + col) as isize)
                                };
                                *d = if s0 == 0 { v } else { *d + v };
                            }
                        }
                    }
                });
            }
        },
    );
}

/// `sums[j][16v + l] = sum over samples n, positions t < m of go[n * gstride + t * ld + 16v + l]
/// * x[n * xstride + xoff[j] + t]` for `v < V`, in order of n and t.
///
/// # Safety
/// The CPU must support AVX-512F; every `x` row read (`m` elements from each offset) and every
/// gradient row (`16 V` floats at each `t`) must be readable.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn weight_tile<const V: usize>(
    x: *const f32,
    xstride: usize,
    xoff: &[usize; WC],
    go: *const f32,
    gstride: usize,
    ld: usize,
    samples: usize,
    m: usize,
    sums: &mut [[f32; 16 * WV]; WC],
) {
    let mut acc = [[_mm512_setzero_ps(); V]; WC];
    for n in 0..samples {
        let mut xr = [x; WC];
        for j in 0..WC {
            // SAFETY: the caller's contract (rows inside the copies).
            xr[j] = unsafe { x.add(n * xstride + xoff[j]) };
        }
        // SAFETY: as above.
        let mut gr = unsafe { go.add(n * gstride) };
        for t in 0..m {
            let mut gv = [_mm512_setzero_ps(); V];
            for (v, g) in gv.iter_mut().enumerate() {
                // SAFETY: 16 channels of position t's gradient row.
                *g = unsafe { _mm512_loadu_ps(gr.add(16 * v)) };
            }
            for j in 0..WC {
                // SAFETY: element t of column j's row.
                let xv = _mm512_set1_ps(unsafe { *xr[j].add(t) });
                for v in 0..V {
                    acc[j][v] = _mm512_fmadd_ps(gv[v], xv, acc[j][v]);
                }
            }
            gr = gr.wrapping_add(ld);
        }
    }
    for (col, row) in sums.iter_mut().zip(&acc) {
        for (v, a) in row.iter().enumerate() {
            // SAFETY: 16 floats of the column's sums (16 V <= 16 WV).
            unsafe { _mm512_storeu_ps(col.as_mut_ptr().add(16 * v), *a) };
        }
    }
}

/// [`weight_tile`] for one number of channel vectors.
type WeightTile = unsafe fn(
    *const f32,
    usize,
    &[usize; WC],
    *const f32,
    usize,
    usize,
    usize,
    usize,
    &mut [[f32; 16 * WV]; WC],
);

/// Where the input's rows land in a channel's padded, phase-split region: per row read, its
/// offset from the channel's first element in the input and where each of its column phases
/// starts (`phases` of them). The same for every channel and sample, so computed once a call:
/// per row and channel, the divisions by the strides had taken a third of the copy.
struct RowMap {
    src: Vec<isize>,
    at: Vec<usize>,
    phases: usize,
    width: usize,
}

impl RowMap {
    fn new(g: &Geometry, lay: &Layout, xs: &[isize]) -> Self {
        let lo = g.padding.map(|v| v as usize);
        let [s0, s1, s2] = lay.s;
        let width = g.isp[2].min(lay.ext[2].saturating_sub(lo[2]));
        let phases = s2.min(width);
        let (mut src, mut at) = (Vec::new(), Vec::new());
        for iz in (0..g.isp[0]).take_while(|iz| iz + lo[0] < lay.ext[0]) {
            let pz = iz + lo[0];
            for iy in (0..g.isp[1]).take_while(|iy| iy + lo[1] < lay.ext[1]) {
                let py = iy + lo[1];
                src.push(iz as isize * xs[2] + iy as isize * xs[3]);
                let phase_zy = (pz % s0) * s1 + py % s1;
                let base_zy = ((pz / s0) * lay.q[1] + py / s1) * lay.q[2];
                // Input columns w = e, e + s2, ... land in phase (.., (e + lo) % s2), from
                // (e + lo) / s2 on.
                at.extend((0..phases).map(|e| {
                    let px0 = e + lo[2];
                    (phase_zy * s2 + px0 % s2) * lay.plane + base_zy + px0 / s2
                }));
            }
        }
        RowMap {
            src,
            at,
            phases,
            width,
        }
    }
}

/// Copies samples `s0..s0 + samples` of the input into `xs` (one [`Layout::sample`] each), in
/// parallel over channels.
///
/// # Safety
/// `xs` must be writable for `samples` sample copies that nobody else accesses meanwhile.
unsafe fn copy_samples(
    g: &Geometry,
    lay: &Layout,
    input: &TensorRef,
    s0: usize,
    samples: usize,
    xs: SendPtr<f32>,
) {
    let map = RowMap::new(g, lay, &input.strides);
    parallel_for(samples * g.c, 1, &|i0, i1| {
        for i in i0..i1 {
            let (n, c) = (i / g.c, i % g.c);
            // SAFETY: channel c of sample n's copy: its own region of xs.
            unsafe {
                copy_channel(
                    g,
                    lay,
                    &map,
                    input,
                    s0 + n,
                    c,
                    xs.at((n * lay.sample + c * lay.channel) as isize),
                )
            };
        }
    });
}

/// Copies channel `c` of sample `n` into its zero-padded, phase-split region at `dst`
/// (`lay.channel` elements, plus the sample's slack after the last channel).
///
/// # Safety
/// `dst` must be writable for `lay.channel` elements (`lay.sample - (c_count - 1) *
/// lay.channel` for the last channel) that nobody else accesses meanwhile.
unsafe fn copy_channel(
    g: &Geometry,
    lay: &Layout,
    map: &RowMap,
    input: &TensorRef,
    n: usize,
    c: usize,
    dst: *mut f32,
) {
    let len = if c + 1 == g.c {
        lay.sample - c * lay.channel
    } else {
        lay.channel
    };
    // SAFETY: the caller's region.
    let dst = unsafe { std::slice::from_raw_parts_mut(dst, len) };
    dst.fill(0.0);
    let xs = &input.strides;
    let (s2, width, phases) = (lay.s[2], map.width, map.phases);
    let src = (input.ptr as *const f32).wrapping_offset(n as isize * xs[0] + c as isize * xs[1]);
    for (&off, at) in map.src.iter().zip(map.at.chunks_exact(phases.max(1))) {
        let row = src.wrapping_offset(off);
        if xs[4] == 1 && s2 <= 2 {
            // SAFETY: the dense run (n, c, iz, iy, 0..width) of the input.
            let src = unsafe { std::slice::from_raw_parts(row, width) };
            if s2 == 1 {
                dst[at[0]..at[0] + width].copy_from_slice(src);
            } else {
                // Both phases in one pass over the row.
                let (d0, d1) = phase_pair(dst, at[0], at.get(1).copied(), width);
                // SAFETY: the CPU has AVX-512F (the kernels that copy need it); d0 and d1 hold
                // the row's `width / 2` pairs' elements.
                unsafe { deinterleave(src.as_ptr(), width / 2, d0.as_mut_ptr(), d1.as_mut_ptr()) };
                if width % 2 == 1 {
                    d0[width / 2] = src[width - 1];
                }
            }
            continue;
        }
        for (e, &a) in at.iter().enumerate() {
            let out = &mut dst[a..];
            for (i, w) in (e..width).step_by(s2).enumerate() {
                // SAFETY: (n, c, iz, iy, w) is inside the input (w < its width).
                out[i] = unsafe { *row.offset(w as isize * xs[4]) };
            }
        }
    }
}

/// `d0[i] = src[2i]`, `d1[i] = src[2i + 1]` for `i < pairs`, 16 pairs a step (two loads, two
/// permutes, two stores; LLVM's loop moved one float at a time).
///
/// # Safety
/// The CPU must support AVX-512F; `src` readable for `2 pairs` floats, `d0` and `d1` writable
/// for `pairs` each.
#[target_feature(enable = "avx512f")]
unsafe fn deinterleave(src: *const f32, pairs: usize, d0: *mut f32, d1: *mut f32) {
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    // The first `n` lanes (up to all 16).
    let mask = |n: usize| ((1u32 << n.min(16)) - 1) as __mmask16;
    for i in (0..pairs).step_by(16) {
        let m = (pairs - i).min(16);
        // SAFETY: pairs i..i + m: floats 2i..2i + 2m of src, i..i + m of d0 and d1 (masked).
        unsafe {
            let lo = _mm512_maskz_loadu_ps(mask(2 * m), src.add(2 * i));
            let hi = _mm512_maskz_loadu_ps(mask(2 * m - 2 * m.min(8)), src.add(2 * i + 16));
            _mm512_mask_storeu_ps(d0.add(i), mask(m), _mm512_permutex2var_ps(lo, even, hi));
            _mm512_mask_storeu_ps(d1.add(i), mask(m), _mm512_permutex2var_ps(lo, odd, hi));
        }
    }
}

/// The two column phases of a stride-2 row, `ceil(width / 2)` elements at `a0` and
/// `width / 2` at `a1` (none when the row has one column), disjoint parts of `dst`.
fn phase_pair(
    dst: &mut [f32],
    a0: usize,
    a1: Option<usize>,
    width: usize,
) -> (&mut [f32], &mut [f32]) {
    let (n0, n1) = (width.div_ceil(2), width / 2);
    match a1 {
        Some(a1) if a1 > a0 => {
            let (lo, hi) = dst.split_at_mut(a1);
            (&mut lo[a0..a0 + n0], &mut hi[..n1])
        }
        Some(a1) => {
            let (lo, hi) = dst.split_at_mut(a0);
            (&mut hi[..n0], &mut lo[a1..a1 + n1])
        }
        None => (&mut dst[a0..a0 + n0], &mut []),
    }
}

/// Floats per channel of a unit's output gathered by [`channel_major`]: its positions and the
/// slack of the last tile's transposes (16 positions each, of which 12 or 8 are the tile's).
const UNIT_STRIDE: usize = UNIT_POSITIONS + 16;

/// The channel-vector tile `tile` (`[r][width]`, position-major, as [`tile_kernel`] writes it)
/// turned channel-major into `unit` (channel `j` at `j * UNIT_STRIDE`), its positions at
/// `at..at + r`, by 16 x 16 register transposes (16 positions each: the positions past `r`
/// are zeros that the next tile overwrites). A unit's tiles gathered there are then written
/// channel by channel, whole runs of positions as vectors ([`write_runs`]): the write-out had
/// read each tile element by element, `width` floats apart, and stored each tile's few
/// positions of 16-32 output planes a plane apart, whose lines (4 KB apart for a 32 x 32
/// plane) shared one L1 set and came back from L2 for every tile: 22% of a ResNet stem's time
/// (3 -> 64 channels, 7 x 7, stride 2, depth 147), 11% now. Zen 5, medians of 9, three
/// alternating runs each: [8, 3, 64, 64] 1 thread 915-932 -> 789-817 us, 2 threads 474-489 ->
/// 413-423; [1, 3, 224, 224] 2 threads 749-771 -> 693-710; a 3 x 3 of depth 576 level.
///
/// # Safety
/// The CPU has AVX-512F; `(width, r)` is `(32, R2)` or `(16, R1)`; `at + r <= UNIT_POSITIONS`.
#[target_feature(enable = "avx512f")]
unsafe fn channel_major(
    tile: &[f32; 32 * R2],
    width: usize,
    r: usize,
    unit: &mut [f32],
    at: usize,
) {
    assert!(unit.len() >= width * UNIT_STRIDE);
    for v in 0..width / 16 {
        for p0 in (0..r).step_by(16) {
            let rows: [__m512; 16] = std::array::from_fn(|i| match p0 + i < r {
                // SAFETY: position p0 + i < r of the tile, channels 16v.. (width floats a row).
                true => unsafe { _mm512_loadu_ps(tile.as_ptr().add((p0 + i) * width + 16 * v)) },
                false => _mm512_setzero_ps(),
            });
            // SAFETY: AVX-512F (this function's features).
            let cols = unsafe { transpose16x16_regs(rows) };
            for (j, c) in cols.iter().enumerate() {
                // SAFETY: channel 16v + j < width's positions at + p0..at + p0 + 16 <=
                // UNIT_POSITIONS + 16 = UNIT_STRIDE: within `unit` (asserted).
                unsafe {
                    _mm512_storeu_ps(
                        unit.as_mut_ptr().add((16 * v + j) * UNIT_STRIDE + at + p0),
                        *c,
                    )
                };
            }
        }
    }
}

/// Writes channel `j < valid` of a channel-major tile (`src[j * stride + position]`) to output
/// plane `j` (at `row0 + j * p`), plus its bias: a run `(r0, pos, len)` of `list` copies
/// positions `r0..r0 + len` to plane positions `pos..pos + len`, 16 at a time under a mask.
///
/// # Safety
/// The CPU has AVX-512F; `src` holds `valid` rows of `stride` floats covering every run; each
/// plane holds `pos + len` floats for every run, written by no one else meanwhile.
#[target_feature(enable = "avx512f")]
unsafe fn write_runs(
    src: &[f32],
    stride: usize,
    list: &[(usize, usize, usize)],
    bias: Option<&[f32]>,
    valid: usize,
    row0: *mut f32,
    p: usize,
) {
    for j in 0..valid {
        let b = _mm512_set1_ps(bias.map_or(0.0, |b| b[j]));
        let (from, dst) = (src[j * stride..].as_ptr(), row0.wrapping_add(j * p));
        for &(r0, pos, len) in list {
            for i in (0..len).step_by(16) {
                let m = (u32::MAX >> (32 - (len - i).min(16))) as __mmask16;
                // SAFETY: the masked positions r0 + i.. are within channel j's row and pos +
                // i.. are the run's in its plane (the caller's contract).
                unsafe {
                    let v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, from.add(r0 + i)), b);
                    _mm512_mask_storeu_ps(dst.add(pos + i), m, v);
                }
            }
        }
    }
}

/// `tile[r * 16V + j] = sum_k w[k * 16V + j] * x[koff[k] + r]` for `r < R`, `j < 16V`.
///
/// # Safety
/// The CPU must support AVX-512F; `x + koff[k] + r` must be readable for every `k`, `r < R`;
/// `w` must hold `koff.len() * 16V` floats and `tile` `R * 16V`.
#[target_feature(enable = "avx512f")]
unsafe fn tile_kernel<const V: usize, const R: usize>(
    x: *const f32,
    koff: &[usize],
    w: *const f32,
    tile: *mut f32,
) {
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    for (k, &off) in koff.iter().enumerate() {
        let mut wv = [_mm512_setzero_ps(); V];
        for (v, x) in wv.iter_mut().enumerate() {
            // SAFETY: k's 16V packed weights (the caller's contract).
            *x = unsafe { _mm512_loadu_ps(w.add((k * V + v) * 16)) };
        }
        // SAFETY: the caller's contract.
        let xk = unsafe { x.add(off) };
        for (r, row) in acc.iter_mut().enumerate() {
            // SAFETY: the caller's contract.
            let xv = _mm512_set1_ps(unsafe { *xk.add(r) });
            for (v, a) in row.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(wv[v], xv, *a);
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (v, a) in row.iter().enumerate() {
            // SAFETY: the caller's contract.
            unsafe { _mm512_storeu_ps(tile.add((r * V + v) * 16), *a) };
        }
    }
}

/// `tile[j * RN + r] = sum_k w[k * W + j] * x[koff[k] + r]` for `r < RN`, `j < W`: the
/// [`tile_kernel`] turned around for narrow groups, positions in the vectors (per `k`, 3 loads
/// of input and `W` broadcast weights for `3W` multiply-adds). Each element is the same chain
/// over `k` as there, so the bits are the same as the channel-vector tiles'.
///
/// # Safety
/// The CPU must support AVX-512F; `x + koff[k] + r` must be readable for every `k`, `r < RN`;
/// `w` must hold `koff.len() * W` floats and `tile` `W * RN`.
#[target_feature(enable = "avx512f")]
unsafe fn narrow_kernel<const W: usize>(
    x: *const f32,
    koff: &[usize],
    w: *const f32,
    tile: *mut f32,
) {
    const P: usize = RN / 16;
    let mut acc = [[_mm512_setzero_ps(); P]; W];
    for (k, &off) in koff.iter().enumerate() {
        // SAFETY: the caller's contract.
        let xk = unsafe { x.add(off) };
        // SAFETY: positions 16p..16p + 16 < RN of k's input (the caller's contract).
        let xv: [__m512; P] = std::array::from_fn(|p| unsafe { _mm512_loadu_ps(xk.add(16 * p)) });
        for (j, row) in acc.iter_mut().enumerate() {
            // SAFETY: k's weight of channel j (the caller's contract).
            let wv = _mm512_set1_ps(unsafe { *w.add(k * W + j) });
            for (a, &v) in row.iter_mut().zip(&xv) {
                *a = _mm512_fmadd_ps(wv, v, *a);
            }
        }
    }
    for (j, row) in acc.iter().enumerate() {
        for (p, a) in row.iter().enumerate() {
            // SAFETY: the caller's contract.
            unsafe { _mm512_storeu_ps(tile.add(j * RN + 16 * p), *a) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{int_case, ints, IntCase, KernelCase as Case};
    use super::super::{backward_input_impl, backward_weight_impl, forward_impl, hw_exchanged};
    use super::*;
    use crate::dtype::DType;
    use crate::kernels::core::map::testing::Owned;

    /// The direct kernel gives the im2col/GEMM path's bits: small integers make every sum
    /// exact in float32, whatever the order.
    #[test]
    fn direct_forward_matches_the_gemm_path() {
        if simd::level() < 3 {
            return;
        }
        #[rustfmt::skip]
        let cases: [Case; 16] = [
            // Samples too large for one chunk of the weight gradient (chunks added in order).
            (3, 16, [1, 100, 100], 32, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (2, 8, [1, 12, 11], 40, [1, 3, 3], [1, 1, 1], [0, 2, 1], [1, 2, 2], 1),
            (2, 4, [3, 5, 6], 16, [3, 3, 3], [1, 1, 1], [1, 1, 0], [1, 1, 1], 1),
            (2, 3, [1, 9, 11], 32, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (3, 5, [1, 10, 9], 48, [1, 3, 3], [1, 2, 2], [0, 1, 1], [1, 1, 1], 1),
            (1, 4, [1, 7, 12], 20, [1, 3, 5], [1, 2, 3], [0, 2, 1], [1, 2, 1], 1),
            (2, 6, [1, 6, 6], 32, [1, 3, 3], [1, 1, 1], [0, 0, 0], [1, 1, 1], 2),
            (2, 3, [4, 5, 6], 16, [2, 3, 3], [2, 1, 2], [1, 0, 1], [1, 1, 1], 1),
            (2, 8, [1, 1, 30], 17, [1, 1, 5], [1, 1, 2], [0, 0, 2], [1, 1, 1], 1),
            (4, 16, [1, 4, 4], 64, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            // Narrow groups (under 16 channels): 8, 4, 6 (padded to 8) and 12 (8 + 4 padded).
            (2, 16, [1, 9, 10], 16, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 2),
            (1, 12, [1, 11, 7], 24, [1, 3, 3], [1, 2, 2], [0, 1, 1], [1, 1, 1], 3),
            (2, 8, [3, 5, 6], 8, [3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1], 2),
            (1, 6, [1, 8, 8], 12, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 2, 1], 2),
            (2, 24, [1, 6, 6], 24, [1, 3, 3], [1, 1, 1], [0, 2, 0], [1, 1, 1], 2),
            // Stride-2 rows of more than 16 pairs (the copy's vector deinterleave), odd width.
            (1, 16, [1, 6, 45], 16, [1, 3, 3], [1, 2, 2], [0, 1, 1], [1, 1, 1], 2),
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
            let c = xshape[1];
            let g = Geometry::new(&xshape, &wshape, &oshape, &params).unwrap();
            // forward() directly: applies() also routes by cost, which these small shapes fail.
            // The same input stored with H and W exchanged (a strided view).
            let (xt, xt_strides) = hw_exchanged(&x.data, &xshape);
            let xt_ref = TensorRef {
                ptr: xt.as_ptr() as *const u8,
                shape: xshape.to_vec().into(),
                strides: xt_strides,
                dtype: DType::F32,
            };
            for bias in [None, Some(b.r())] {
                let mut want = Owned::<f32>::zeros(&oshape);
                forward_impl::<f32>(&g, &want.m(), &x.r(), &w.r(), bias.as_ref()).unwrap();
                let bv: Option<Vec<f32>> = bias.as_ref().map(|_| b.data.clone());
                for xr in [x.r(), xt_ref.clone()] {
                    let mut got = Owned::<f32>::zeros(&oshape);
                    forward(&g, &got.m(), &xr, &w.r(), bv.as_deref());
                    assert_eq!(got.data, want.data, "forward {what}");
                }
            }
            // The weight gradient (overwritten: start from garbage).
            let gy = Owned::new(ints(oshape.iter().product(), 6), &oshape);
            let mut want = Owned::<f32>::zeros(&wshape);
            backward_weight_impl::<f32>(&g, &want.m(), &x.r(), &gy.r()).unwrap();
            for xr in [x.r(), xt_ref.clone()] {
                let mut got = Owned::new(vec![f32::NAN; want.data.len()], &wshape);
                weight_gradient(&g, &got.m(), &xr, &gy.r());
                let bad = got
                    .data
                    .iter()
                    .zip(&want.data)
                    .filter(|(a, b)| a != b)
                    .count();
                assert_eq!(bad, 0, "weight gradient {what}");
            }
            // The input gradient, for stride 1 (with a bias per input channel, as the forward
            // of a transposed convolution has).
            let Some(gt) = g.input_gradient_geometry() else {
                continue;
            };
            let gy = Owned::new(ints(oshape.iter().product(), 4), &oshape);
            let bx = Owned::new(ints(c, 5), &[c]);
            for bias in [None, Some(bx.r())] {
                let mut want = Owned::<f32>::zeros(&xshape);
                backward_input_impl::<f32>(&g, &want.m(), &gy.r(), &w.r(), bias.as_ref()).unwrap();
                let mut got = Owned::<f32>::zeros(&xshape);
                let bv: Option<Vec<f32>> = bias.as_ref().map(|_| bx.data.clone());
                input_gradient(&g, &gt, &got.m(), &gy.r(), &w.r(), bv.as_deref());
                assert_eq!(got.data, want.data, "input gradient {what}");
            }
        }
    }
}
