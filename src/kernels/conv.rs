//! Convolution (1d/2d/3d, forward and backward, groups, stride, padding, dilation).
//!
//! float32 3x3 stride-1 layers of 96+ channels over small planes run Winograd F(2x2, 3x3)
//! ([`winograd`]: 2.25x fewer products), forward and input gradient.
//! Other float32 convolutions with enough channels run on register-tiled kernels: forwards (and
//! stride-1 input gradients, as forwards) on the packed one ([`packed`]), in channels-last,
//! contiguous tensors through channels-last copies; the direct AVX-512 kernel ([`direct`])
//! does weight gradients and the forwards the packed one would pack patch by patch (strided
//! stems); the rest use im2col + GEMM
//! (`gemm` crate) per sample. Every tensor is 5-D `[N, C, D, H, W]` (the glue adds unit
//! spatial dims for 1d/2d). Inputs may have any strides; written tensors are contiguous or
//! channels-last (NDHWC), and a path that needs another layout gets a temporary copy
//! ([`contiguous`], [`channels_last`], [`into_contiguous`]); a backward's weight and the
//! weight gradient are contiguous. Work is split over samples (one single-threaded GEMM per
//! sample and thread) when there are enough samples, else the GEMM itself goes parallel.
//!
//! Transposed convolution is the same three primitives with roles swapped (the glue does it):
//! its forward is [`conv_backward_input`] (+ bias), its input gradient [`conv_forward`], its
//! weight gradient [`conv_backward_weight`] with input and output gradient exchanged.

mod cl_weight;
mod depthwise;
#[cfg(target_arch = "x86_64")]
mod direct;
mod grid;
#[cfg(target_arch = "x86_64")]
mod grid_input;
#[cfg(target_arch = "x86_64")]
mod grid_weight;
#[cfg(target_arch = "x86_64")]
mod packed;
mod patches;
#[cfg(target_arch = "x86_64")]
mod tap_rows;
mod winograd;
#[cfg(target_arch = "x86_64")]
mod winograd_cl;

use super::core::gemm::skinny::SKINNY_ROWS;
use super::core::gemm::{gemm_raw, GemmElem, Mat};
use super::core::parallel::{parallel_for, SendPtr};
use super::core::scratch::{with_scratch, with_scratch2, KeptBuffer};
use super::core::transpose::{transpose, transpose_into};
use crate::dtype::DType;
use crate::error::FooResult;
use crate::kernels::core::copy::copy;
use crate::kernels::core::float::Math;
use crate::tensor::{contiguous_strides, Strides, TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use grid::Grid;
use std::sync::Mutex;

/// Convolution hyper-parameters for the three spatial dims (D, H, W); 1-D/2-D convolutions use 1
/// (0 for padding) for the missing leading dims.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ConvParams {
    pub stride: [i64; 3],
    pub padding: [i64; 3],
    pub dilation: [i64; 3],
    pub groups: i64,
}

/// Shapes of one convolution, in the orientation of a forward pass.
#[derive(Debug, Clone)]
struct Geometry {
    n: usize,
    c: usize,
    o: usize,
    groups: usize,
    /// Input spatial size, kernel size, output spatial size.
    isp: [usize; 3],
    ksp: [usize; 3],
    osp: [usize; 3],
    stride: [isize; 3],
    padding: [isize; 3],
    dilation: [isize; 3],
}

impl Geometry {
    fn new(input: &[usize], weight: &[usize], output: &[usize], p: &ConvParams) -> FooResult<Self> {
        if input.len() != 5 || weight.len() != 5 || output.len() != 5 {
            return invalid_arg!("convolution: operands must be 5-D (N, C, D, H, W)");
        }
        let groups = p.groups.max(1) as usize;
        let g = Geometry {
            n: input[0],
            c: input[1],
            o: weight[0],
            groups,
            isp: [input[2], input[3], input[4]],
            ksp: [weight[2], weight[3], weight[4]],
            osp: [output[2], output[3], output[4]],
            stride: p.stride.map(|v| v as isize),
            padding: p.padding.map(|v| v as isize),
            dilation: p.dilation.map(|v| v as isize),
        };
        if g.c % groups != 0 || g.o % groups != 0 || weight[1] * groups != g.c {
            return invalid_arg!(
                "convolution: channels (input {}, weight {:?}) do not match groups {groups}",
                g.c,
                weight
            );
        }
        if output[0] != g.n || output[1] != g.o {
            return invalid_arg!("convolution: output shape {output:?} does not match");
        }
        if g.stride.iter().any(|&s| s <= 0) || g.dilation.iter().any(|&d| d <= 0) {
            return invalid_arg!("convolution: stride and dilation must be positive");
        }
        // Output sizes need no check here: every access is bounded by `valid_range`.
        Ok(g)
    }
    fn cg(&self) -> usize {
        self.c / self.groups
    }
    fn og(&self) -> usize {
        self.o / self.groups
    }
    fn kk(&self) -> usize {
        self.ksp.iter().product()
    }
    /// Rows of the column matrix of one group.
    fn ck(&self) -> usize {
        self.cg() * self.kk()
    }
    fn op(&self) -> usize {
        self.osp.iter().product()
    }
    fn ip(&self) -> usize {
        self.isp.iter().product()
    }
    /// True when the column matrix is the input itself (1x1 kernel, stride 1, no padding).
    fn is_pointwise(&self) -> bool {
        self.ksp == [1, 1, 1] && self.stride == [1, 1, 1] && self.padding == [0, 0, 0]
    }
    fn stride_one(&self) -> bool {
        self.stride == [1, 1, 1]
    }
    fn dil(&self) -> [usize; 3] {
        self.dilation.map(|d| d as usize)
    }
    /// The padded grid of the forward pass (stride 1, not pointwise), if worth it.
    fn forward_grid(&self) -> Option<Grid> {
        if !self.stride_one() || self.is_pointwise() {
            return None;
        }
        Grid::new(
            self.cg(),
            self.og(),
            self.isp,
            self.padding,
            self.osp,
            self.ksp,
            self.dil(),
        )
    }
    /// The padded grid of the input gradient (stride 1): a forward convolution of the
    /// output gradient, padded by `d * (k - 1) - p`, with the flipped, transposed weight.
    fn input_grid(&self) -> Option<Grid> {
        if !self.stride_one() || self.is_pointwise() {
            return None;
        }
        let lo = [0, 1, 2].map(|i| (self.ksp[i] as isize - 1) * self.dilation[i] - self.padding[i]);
        Grid::new(
            self.og(),
            self.cg(),
            self.osp,
            lo,
            self.isp,
            self.ksp,
            self.dil(),
        )
    }
    /// The input gradient of a stride-1 convolution as a forward one: the output gradient
    /// convolved with the flipped, transposed weight, padded by `(k - 1) * d - p` before (after,
    /// whatever reaches past it: the layouts read zeros there). `None` for other strides and for
    /// padding wider than the kernel's reach.
    fn input_gradient_geometry(&self) -> Option<Geometry> {
        let lo = [0, 1, 2].map(|i| (self.ksp[i] as isize - 1) * self.dilation[i] - self.padding[i]);
        (self.stride_one() && lo.iter().all(|&v| v >= 0)).then_some(Geometry {
            n: self.n,
            c: self.o,
            o: self.c,
            groups: self.groups,
            isp: self.osp,
            ksp: self.ksp,
            osp: self.isp,
            stride: [1; 3],
            padding: lo,
            dilation: self.dilation,
        })
    }
    /// Whether the per-sample GEMMs are too shallow (small outputs) and samples go side by side
    /// in one GEMM (see [`BATCH_TARGET_K`]). Grouped convolutions keep their per-group paths
    /// (depthwise groups would make GEMMs of one row), pointwise ones read the input directly
    /// unless their planes are tiny (see [`SMALL_POINTWISE`]).
    fn batched(&self) -> bool {
        self.op() < BATCH_TARGET_K
            && self.n > 1
            && self.groups == 1
            && (!self.is_pointwise() || self.op() <= SMALL_POINTWISE)
    }
    /// Whether the weight gradient puts samples side by side ([`backward_weight_batched`]): as
    /// [`Self::batched`], and also for pointwise planes of more than [`SMALL_POINTWISE`]
    /// positions and for groups, whose per-sample GEMMs reduce over one plane's positions as
    /// well (16 at 4x4: ResNeXt-50's [8,1024,4,4] 1x1 -> 1024 weight gradient ran at 8
    /// GFLOP/s, 34 ms against the CPU's 4.7; Zen 5, 2 threads).
    fn batched_weight(&self) -> bool {
        self.op() < BATCH_TARGET_K && self.n > 1
    }
    /// Whether the kernel tiles the input in patches (kernel == stride, no padding or dilation;
    /// ViT's patch embedding, ConvNeXt's stem and downsampling): the column matrix is then the
    /// input itself, de-interleaved, no larger. Below [`PATCHES_PER_SAMPLE`] output positions
    /// a sample, these take the batched GEMMs (Zen 4, 1 thread, thread CPU time, ViT's
    /// [8,3,64,64] 8x8 stride 8 -> 256: forward 0.72 -> 0.54 ms, weight gradient 0.91 -> 0.57
    /// against the CPU's 0.51 / 0.62; the direct kernel's grid ran 96 positions for the plane's
    /// 64 and the gather into columns cost a third of the GEMM; ConvNeXt's [8,192,28,28] 2x2
    /// stride 2 weight gradient 13.5 -> 9.7).
    fn patchify(&self) -> bool {
        self.groups == 1
            && !self.is_pointwise()
            && (0..3).all(|i| {
                self.stride[i] == self.ksp[i] as isize
                    && self.padding[i] == 0
                    && self.dilation[i] == 1
            })
    }
    /// A convolution in patches with [`PATCHES_PER_SAMPLE`] output positions a sample or more:
    /// its forward and weight gradient go sample by sample (per thread, the sample's column
    /// matrix, its input de-interleaved, stays in cache; the forward's product writes the
    /// output in place), not batched, where the chunk's column matrix went through L3 and the
    /// forward's result was copied into the output afterwards.
    fn patches_per_sample(&self) -> bool {
        self.patchify() && self.op() >= PATCHES_PER_SAMPLE
    }
    /// One sample of a small output plane ([`SMALL_PLANE`] positions or fewer), neither
    /// pointwise nor grouped: it takes the batched paths' one GEMM over its column matrix, not
    /// the padded grid or the packed kernel, which gather the whole weight into their own
    /// layout on every call (for few positions that gather outweighs the product: Zen 4, 1
    /// thread, thread CPU time, resnet50's [1,512,7,7] 3x3 forward at 224 px, 9.9 ms through
    /// the grid, its weight packing half of that).
    fn single_small_plane(&self) -> bool {
        self.n == 1 && self.groups == 1 && !self.is_pointwise() && self.op() <= SMALL_PLANE
    }
    /// Whether to split samples across threads (else each GEMM goes parallel).
    fn split_samples(&self) -> bool {
        let threads = crate::runtime::pool::num_threads();
        threads > 1 && self.n >= threads
    }
}

/// Output positions `o` in `0..out_len` whose input index `o * stride + offset` is in
/// `0..in_len`, as a half-open range.
fn valid_range(out_len: usize, stride: isize, offset: isize, in_len: usize) -> (usize, usize) {
    let lo = if offset >= 0 {
        0
    } else {
        ((-offset) + stride - 1) / stride
    };
    let room = in_len as isize - offset;
    let hi = if room <= 0 {
        0
    } else {
        (room + stride - 1) / stride
    };
    let hi = (hi.max(0) as usize).min(out_len);
    ((lo as usize).min(hi), hi)
}

/// Fills `col` (`ck x op`, row-major) from channels `c0..c0+cg` of one sample at `x`
/// (element strides `xs` for C, D, H, W).
fn im2col<T: GemmElem>(g: &Geometry, x: SendPtr<T>, xs: &[isize], c0: usize, col: &mut [T]) {
    assert!(col.len() >= g.ck() * g.op());
    // SAFETY: col holds the ck x op matrix, rows op apart.
    unsafe { im2col_ld::<T>(g, x, xs, c0, SendPtr::of(col.as_mut_ptr()), g.op()) };
}

/// [`im2col`] into the first `op` columns of a row-major matrix at `col` whose rows are `ld`
/// apart.
///
/// # Safety
/// `col + r * ld .. col + r * ld + op` must be writable, for every row `r < ck`, and not
/// accessed by anyone else meanwhile.
unsafe fn im2col_ld<T: GemmElem>(
    g: &Geometry,
    x: SendPtr<T>,
    xs: &[isize],
    c0: usize,
    col: SendPtr<T>,
    ld: usize,
) {
    let [od, oh, ow] = g.osp;
    let [kd, kh, kw] = g.ksp;
    let p = g.op();
    if g.patchify() {
        // SAFETY: the function's contract, for a convolution in patches.
        unsafe { patches::columns(g, x, xs, c0, col, ld) };
        return;
    }
    // (The plane copy costs at most what the gather does.)
    if ow < SHORT_ROW
        && g.kk() * p <= GATHER_MAP_MAX
        && g.isp.iter().product::<usize>() <= g.kk() * p
    {
        let map = gather_map(g);
        let [id, ih, iw] = g.isp;
        // Each channel's plane, dense, then one zero that the padding taps read: the gather
        // below is a plain indexed load per element, without a branch.
        let mut plane = vec![T::ZERO; id * ih * iw + 1];
        for ci in 0..g.cg() {
            let xc = x.at((c0 + ci) as isize * xs[0]) as *const T;
            let mut dense = plane.iter_mut();
            for zd in 0..id as isize {
                for zh in 0..ih as isize {
                    for zw in 0..iw as isize {
                        // SAFETY: an element of channel c0 + ci, inside its spatial size.
                        let v = unsafe { *xc.offset(zd * xs[1] + zh * xs[2] + zw * xs[3]) };
                        *dense.next().expect("the plane holds every input element") = v;
                    }
                }
            }
            for (t, taps) in map.chunks_exact(p).enumerate() {
                // SAFETY: row `ci * kk + t` of the caller's matrix (the function's contract).
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(col.at(((ci * g.kk() + t) * ld) as isize), p)
                };
                for (d, &i) in dst.iter_mut().zip(taps) {
                    // SAFETY: `gather_map`'s indices are at most the plane's size, the index
                    // of its trailing zero.
                    *d = unsafe { *plane.get_unchecked(i as usize) };
                }
            }
        }
        return;
    }
    // Stride 1 in H and W over dense input planes as wide as the output (3x3 "same" padding):
    // each (channel, tap) row is the input plane at a constant shift.
    let shifted_plane = g.stride[1] == 1
        && g.stride[2] == 1
        && xs[3] == 1
        && g.isp[2] == ow
        && xs[2] == ow as isize;
    let mut row = 0;
    for ci in 0..g.cg() {
        let xc = (c0 + ci) as isize * xs[0];
        for a in 0..kd {
            let offd = a as isize * g.dilation[0] - g.padding[0];
            let (d0, d1) = valid_range(od, g.stride[0], offd, g.isp[0]);
            for b in 0..kh {
                let offh = b as isize * g.dilation[1] - g.padding[1];
                let (h0, h1) = valid_range(oh, g.stride[1], offh, g.isp[1]);
                for e in 0..kw {
                    let offw = e as isize * g.dilation[2] - g.padding[2];
                    let (w0, w1) = valid_range(ow, g.stride[2], offw, g.isp[2]);
                    // SAFETY: row `row` of the caller's matrix (the function's contract).
                    let dst =
                        unsafe { std::slice::from_raw_parts_mut(col.at((row * ld) as isize), p) };
                    row += 1;
                    if d0 == d1 || h0 == h1 || w0 == w1 {
                        dst.fill(T::ZERO);
                        continue;
                    }
                    for zd in 0..od {
                        let drow = &mut dst[zd * oh * ow..(zd + 1) * oh * ow];
                        if zd < d0 || zd >= d1 {
                            drow.fill(T::ZERO);
                            continue;
                        }
                        let xd = xc + (zd as isize * g.stride[0] + offd) * xs[1];
                        if shifted_plane {
                            // Output position zh * ow + w reads input (zh + offh) * ow + w +
                            // offw: one copy at a constant shift, then the columns outside
                            // w0..w1 (which read the neighbouring rows) zeroed.
                            drow[..h0 * ow].fill(T::ZERO);
                            drow[h1 * ow..].fill(T::ZERO);
                            if h0 < h1 && w0 < w1 {
                                let (start, end) = (h0 * ow + w0, (h1 - 1) * ow + w1);
                                let base = xd + (h0 as isize + offh) * xs[2] + w0 as isize + offw;
                                // SAFETY: input rows h0+offh..h1+offh of this plane, from column
                                // w0+offw to w1-1+offw: inside the dense plane by valid_range.
                                let src = unsafe {
                                    std::slice::from_raw_parts(x.at(base) as *const T, end - start)
                                };
                                drow[start..end].copy_from_slice(src);
                            }
                            for r in drow[h0 * ow..h1 * ow].chunks_exact_mut(ow) {
                                r[..w0].fill(T::ZERO);
                                r[w1..].fill(T::ZERO);
                            }
                            continue;
                        }
                        for zh in 0..oh {
                            let r = &mut drow[zh * ow..(zh + 1) * ow];
                            if zh < h0 || zh >= h1 {
                                r.fill(T::ZERO);
                                continue;
                            }
                            let xh = xd + (zh as isize * g.stride[1] + offh) * xs[2];
                            r[..w0].fill(T::ZERO);
                            r[w1..].fill(T::ZERO);
                            let step = g.stride[2] * xs[3];
                            let base = xh + (w0 as isize * g.stride[2] + offw) * xs[3];
                            if step == 1 {
                                // SAFETY: the run (c, d, h, w0..w1) is inside the input and dense.
                                let src = unsafe {
                                    std::slice::from_raw_parts(x.at(base) as *const T, w1 - w0)
                                };
                                r[w0..w1].copy_from_slice(src);
                            } else {
                                for (i, v) in r[w0..w1].iter_mut().enumerate() {
                                    // SAFETY: (c, d, h, w) is inside the input by `valid_range`.
                                    *v = unsafe { *x.at(base + i as isize * step) };
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Output rows narrower than this are im2col'd through a gather map: the row-run copies and
/// zero fills below cost a library call per few elements there (resnet18's 4x4 and 2x2 stages
/// at 64 px: im2col took a quarter of the GEMM's time).
const SHORT_ROW: usize = 16;

/// Largest gather map (taps x output positions) built per call.
const GATHER_MAP_MAX: usize = 1 << 14;

/// For [`im2col_ld`]'s short rows: the index into a channel's dense plane (D, H, W) that each
/// (tap, output position) reads, or the plane's size (where [`im2col_ld`] keeps a zero) where it
/// reads padding; built once per call and applied to every channel.
///
/// Why a dense copy and a branch-free index: with element offsets into the channel and `None`
/// for padding, the gather's per-element branch made im2col 20% of the GEMM's time in
/// resnet18's 4x4 stage ([8,256,4,4] 3x3 forward, 1 thread, perf samples), 14% this way.
fn gather_map(g: &Geometry) -> Vec<u32> {
    let [od, oh, ow] = g.osp;
    let [kd, kh, kw] = g.ksp;
    let zero = g.isp.iter().product::<usize>() as u32;
    let plane_strides = [g.isp[1] * g.isp[2], g.isp[2], 1].map(|v| v as isize);
    let mut map = Vec::with_capacity(g.kk() * g.op());
    for a in 0..kd {
        for b in 0..kh {
            for e in 0..kw {
                let tap = [a, b, e];
                for zd in 0..od {
                    for zh in 0..oh {
                        for zw in 0..ow {
                            let mut off = Some(0isize);
                            for (k, z) in [zd, zh, zw].into_iter().enumerate() {
                                let i = z as isize * g.stride[k] + tap[k] as isize * g.dilation[k]
                                    - g.padding[k];
                                off = off.filter(|_| (0..g.isp[k] as isize).contains(&i));
                                off = off.map(|o| o + i * plane_strides[k]);
                            }
                            map.push(off.map_or(zero, |o| o as u32));
                        }
                    }
                }
            }
        }
    }
    map
}

/// col2im as a gather, for short rows (as [`gather_map`]): for each element of an input plane,
/// the (output position, tap) sums it receives, in col2im's order (by tap), as offsets into a
/// position-major column matrix (`[positions, ck]`, `ck` apart) from a channel's first tap.
/// resnet18's [8,512,2,2] 3x3 input gradient, Zen 4, 1 thread: col2im over 2-element runs, and
/// the transpose back to im2col's layout that it needs, took 26% of the product's time (perf
/// samples), this gather 3%; on 2 threads the whole input gradient 1.42-2.20 -> 0.84-1.00 ms.
struct ScatterMap {
    /// Entries of plane element `j`: `entries[starts[j]..starts[j + 1]]`.
    starts: Vec<u32>,
    entries: Vec<u32>,
}

impl ScatterMap {
    fn new(g: &Geometry) -> Option<Self> {
        let (p, ck, ip) = (g.op(), g.ck(), g.ip());
        let fits = g.osp[2] < SHORT_ROW
            && g.kk() * p <= GATHER_MAP_MAX
            && p.checked_mul(ck).is_some_and(|n| n < u32::MAX as usize);
        if !fits {
            return None;
        }
        let map = gather_map(g);
        let mut counts = vec![0u32; ip + 1];
        map.iter()
            .filter(|&&j| (j as usize) < ip)
            .for_each(|&j| counts[j as usize + 1] += 1);
        let starts: Vec<u32> = counts
            .iter()
            .scan(0u32, |acc, &n| {
                *acc += n;
                Some(*acc)
            })
            .collect();
        let mut fill = starts.clone();
        let mut entries = vec![0u32; *starts.last().unwrap_or(&0) as usize];
        // Tap by tap, as col2im adds them.
        for (t, taps) in map.chunks_exact(p).enumerate() {
            for (pos, &j) in taps.iter().enumerate() {
                if (j as usize) < ip {
                    entries[fill[j as usize] as usize] = (pos * ck + t) as u32;
                    fill[j as usize] += 1;
                }
            }
        }
        Some(Self { starts, entries })
    }

    /// `plane[j] = sum of its entries in `cols` (+ bias)`: the same sums, in the same order, as
    /// col2im into a zeroed plane (then the bias).
    fn sum_into<T: GemmElem>(&self, cols: &[T], plane: &mut [T], bias: Option<T>) {
        for (j, v) in plane.iter_mut().enumerate() {
            let (a, b) = (self.starts[j] as usize, self.starts[j + 1] as usize);
            let acc = self.entries[a..b]
                .iter()
                .fold(T::ZERO, |acc, &e| acc + cols[e as usize]);
            *v = bias.map_or(acc, |b| acc + b);
        }
    }
}

/// Adds `col` (`ck x op`) back into channels `c0..c0+cg` of one contiguous sample at `x`./// Adds `col` (`ck x op`) back into channels `c0..c0+cg` of one contiguous sample at `x`.
fn col2im<T: GemmElem>(g: &Geometry, x: &mut [T], c0: usize, col: &[T]) {
    col2im_ld(g, x, c0, col, g.op());
}

/// [`col2im`] from the first `op` columns of a row-major matrix whose rows are `ld` apart.
fn col2im_ld<T: GemmElem>(g: &Geometry, x: &mut [T], c0: usize, col: &[T], ld: usize) {
    let [od, oh, ow] = g.osp;
    let [kd, kh, kw] = g.ksp;
    let [_, ih, iw] = g.isp;
    let p = g.op();
    let mut row = 0;
    for ci in 0..g.cg() {
        let xc = (c0 + ci) * g.ip();
        for a in 0..kd {
            let offd = a as isize * g.dilation[0] - g.padding[0];
            let (d0, d1) = valid_range(od, g.stride[0], offd, g.isp[0]);
            for b in 0..kh {
                let offh = b as isize * g.dilation[1] - g.padding[1];
                let (h0, h1) = valid_range(oh, g.stride[1], offh, g.isp[1]);
                for e in 0..kw {
                    let offw = e as isize * g.dilation[2] - g.padding[2];
                    let (w0, w1) = valid_range(ow, g.stride[2], offw, g.isp[2]);
                    let src = &col[row * ld..row * ld + p];
                    row += 1;
                    // A tap that reads only padding adds nothing; its first input address
                    // would lie before the input (a kernel wider than input plus padding).
                    if d0 == d1 || h0 == h1 || w0 == w1 {
                        continue;
                    }
                    for zd in d0..d1 {
                        let xd = xc + (zd as isize * g.stride[0] + offd) as usize * ih * iw;
                        for zh in h0..h1 {
                            let xh = xd + (zh as isize * g.stride[1] + offh) as usize * iw;
                            let s = &src[(zd * oh + zh) * ow..(zd * oh + zh + 1) * ow];
                            let st = g.stride[2] as usize;
                            let first = xh + (w0 as isize * g.stride[2] + offw) as usize;
                            if st == 1 {
                                let dst = &mut x[first..first + (w1 - w0)];
                                dst.iter_mut()
                                    .zip(&s[w0..w1])
                                    .for_each(|(t, &v)| *t = *t + v);
                            } else {
                                for (i, &v) in s[w0..w1].iter().enumerate() {
                                    let t = &mut x[first + i * st];
                                    *t = *t + v;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn check_dtypes(what: &str, ts: &[DType]) -> FooResult<DType> {
    let d = ts[0];
    if ts.iter().any(|&t| t != d) {
        return invalid_arg!("{what}: operands have different dtypes {ts:?}");
    }
    Ok(d)
}

fn require_contiguous(what: &str, shape: &[usize], strides: &[isize]) -> FooResult<()> {
    if !crate::tensor::is_contiguous(shape, strides) {
        return invalid_arg!("convolution: {what} must be contiguous");
    }
    Ok(())
}

/// Whether a 5-D `[N, C, D, H, W]` tensor is dense channels-last (`[N, D, H, W, C]` in memory;
/// strides of size-1 dims aside) with more than one channel and more than one position (with
/// one of either, it is also contiguous, and the planar kernels take it: the packed
/// channels-last kernel ran mobilenet_v3_small's [8,576,1,1] -> 144 1x1 input gradient in
/// 288 us, the batched GEMM in 56-60).
fn is_channels_last(shape: &[usize], strides: &[isize]) -> bool {
    if shape.len() != 5 || shape[1] < 2 || shape.contains(&0) || shape[2..].iter().all(|&s| s == 1)
    {
        return false;
    }
    let mut expected = 1isize;
    for d in [1, 4, 3, 2, 0] {
        if shape[d] != 1 && strides[d] != expected {
            return false;
        }
        expected *= shape[d] as isize;
    }
    true
}

/// A temporary tensor of `t`'s shape and dtype with the given strides (dense), contents
/// unspecified, and the buffer that owns it: a kept scratch buffer, since fresh pages would
/// cost a fault per 4 KiB on every call (a [8,64,32,32] channels-last copy is 512 of them).
fn temporary(t: &TensorRef, strides: Strides) -> (KeptBuffer, TensorMut) {
    let mut buf = KeptBuffer::new(t.numel() * t.dtype.size());
    let dense = TensorMut {
        ptr: buf.as_mut_ptr(),
        shape: t.shape.clone(),
        strides,
        dtype: t.dtype,
    };
    (buf, dense)
}

/// A contiguous copy of `t` in a temporary (none if `t` is contiguous): for the paths that
/// read one operand densely in NCHW order, given a channels-last (or other) tensor.
fn contiguous(t: &TensorRef) -> (KeptBuffer, TensorRef) {
    if t.is_contiguous() {
        return (KeptBuffer::none(), t.clone());
    }
    let (buf, dense) = temporary(t, contiguous_strides(&t.shape));
    #[cfg(target_arch = "x86_64")]
    if t.dtype == DType::F32 && is_channels_last(&t.shape, &t.strides) {
        // One transpose per sample (or output channel of a weight): `copy` went element by
        // element, 1.4 ms for a channels-last [512,512,3,3] weight.
        let [n, c] = [t.shape[0], t.shape[1]];
        let p = t.numel() / n.max(1) / c.max(1);
        transpose_samples(t.ptr as *const f32, dense.ptr as *mut f32, n, p, c);
        return (buf, dense.as_ref());
    }
    copy(&dense, t).expect("same shape and dtype");
    (buf, dense.as_ref())
}

/// A dense channels-last copy of the 5-D `t` in a temporary: a contiguous float32 `t` one
/// transpose per sample (the elementwise copy took 0.5 ms for a [32,32,32,32] gradient, as
/// long as the weight gradient it fed), anything else through `copy`.
#[cfg(target_arch = "x86_64")]
fn channels_last(t: &TensorRef) -> (KeptBuffer, TensorRef) {
    let (buf, dense) = temporary(t, channels_last_strides(&t.shape));
    if t.dtype != DType::F32 || !t.is_contiguous() {
        copy(&dense, t).expect("same shape and dtype");
        return (buf, dense.as_ref());
    }
    let [n, c] = [t.shape[0], t.shape[1]];
    transpose_samples(
        t.ptr as *const f32,
        dense.ptr as *mut f32,
        n,
        c,
        t.numel() / n.max(1) / c.max(1),
    );
    (buf, dense.as_ref())
}

/// Runs `f` on a dense float32 temporary of `out`'s shape in the other layout (channels-last
/// for a contiguous `out`: the packed kernel, which has no planar form; contiguous for a dense
/// channels-last `out`: the direct kernel's narrow groups), then transposes it into `out`, one
/// sample per task.
#[cfg(target_arch = "x86_64")]
fn via_other_layout(out: &TensorMut, f: impl FnOnce(&TensorMut)) {
    let to_nchw = !out.is_contiguous();
    let strides = match to_nchw {
        true => contiguous_strides(&out.shape),
        false => channels_last_strides(&out.shape),
    };
    let (_buf, tmp) = temporary(&out.as_ref(), strides);
    f(&tmp);
    let [n, c] = [out.shape[0], out.shape[1]];
    let p = out.numel() / n.max(1) / c.max(1);
    let (rows, cols) = if to_nchw { (c, p) } else { (p, c) };
    transpose_samples(tmp.ptr as *const f32, out.ptr as *mut f32, n, rows, cols);
}

/// The dense channels-last strides of a 5-D shape.
#[cfg(target_arch = "x86_64")]
fn channels_last_strides(shape: &[usize]) -> Strides {
    let [c, d, h, w] = [shape[1], shape[2], shape[3], shape[4]];
    [d * h * w * c, 1, h * w * c, w * c, c]
        .map(|s| s as isize)
        .to_vec()
        .into()
}

/// `dst[i] = src[i]^T` for `n` samples, each a dense `rows x cols` float32 matrix (NCHW
/// `[c, p]` to channels-last `[p, c]` or back), one sample per task.
#[cfg(target_arch = "x86_64")]
fn transpose_samples(src: *const f32, dst: *mut f32, n: usize, rows: usize, cols: usize) {
    let (src, dst, len) = (
        SendPtr::<f32>::of(src as *const u8),
        SendPtr::<f32>::of(dst as *const u8),
        rows * cols,
    );
    parallel_for(n, 1, &|n0, n1| {
        for i in n0..n1 {
            // SAFETY: sample i's block of both buffers (the callers' dense tensors of n
            // samples); each task writes only its samples of `dst`.
            unsafe {
                let out = dst.slice_mut(i * len, len);
                transpose_into(
                    src.at((i * len) as isize) as *const f32,
                    cols as isize,
                    rows,
                    cols,
                    out,
                    false,
                )
            };
        }
    });
}

/// Runs `f` on `out` if it is contiguous, else on a contiguous temporary that is then copied
/// into `out` (a channels-last output of a path that writes NCHW).
fn into_contiguous(out: &TensorMut, f: impl FnOnce(&TensorMut) -> FooResult<()>) -> FooResult<()> {
    if out.is_contiguous() {
        return f(out);
    }
    let (mut buf, dense) = temporary(&out.as_ref(), contiguous_strides(&out.shape));
    // Zeroed: not every path writes every element (some accumulate into it).
    // SAFETY: the buffer holds the dense temporary's bytes.
    unsafe { std::ptr::write_bytes(buf.as_mut_ptr(), 0, out.numel() * out.dtype.size()) };
    f(&dense)?;
    copy(out, &dense.as_ref())
}

/// `out = conv(input, weight) + bias`. `out` may be contiguous or channels-last (any other
/// strides work too, through a temporary), `input` and `weight` any strides.
pub fn conv_forward(
    out: &TensorMut,
    input: &TensorRef,
    weight: &TensorRef,
    bias: Option<&TensorRef>,
    p: &ConvParams,
) -> FooResult<()> {
    let g = Geometry::new(&input.shape, &weight.shape, &out.shape, p)?;
    let mut dts = vec![out.dtype, input.dtype, weight.dtype];
    dts.extend(bias.map(|b| b.dtype));
    let dtype = check_dtypes("convolution", &dts)?;
    if dtype == DType::F32 && winograd::applies(&g) {
        if out.numel() > 0 {
            let bias = bias_values(bias);
            winograd::forward(
                &g,
                out,
                input,
                winograd::Taps::forward(weight),
                bias.as_deref(),
            );
        }
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if dtype == DType::F32
        && [WINOGRAD_CL, TAP_ROWS]
            .into_iter()
            .any(|k| on_channels_last(k, &g, out, input, winograd::Taps::forward(weight), bias))
    {
        return Ok(());
    }
    if matches!(dtype, DType::F32 | DType::F64)
        && depthwise::applies(&g)
        && depthwise::channels_last::applies(&g, &input.strides)
        && is_channels_last(&out.shape, &out.strides)
    {
        let (_keep, weight) = contiguous(weight);
        let done = if dtype == DType::F32 {
            depthwise_channels_last::<f32>(&g, out, input, &weight, bias)
        } else {
            depthwise_channels_last::<f64>(&g, out, input, &weight, bias)
        };
        if done {
            return Ok(());
        }
    }
    // Contiguous float32, stride 1, rows of 16+ outputs under kernels of 25+ taps or rows under
    // 32: the plane loops run one channel's row at a time (a 7x7 kernel is 49 passes over it);
    // through channels-last copies of the input and output the taps run across channels
    // instead. Zen 4, 1 thread, thread CPU time: [1,96,56,56] 7x7 1.90-2.02 -> 1.04-1.05 ms,
    // [8,96,16,16] 3x3 0.64-0.66 -> 0.27-0.29; the copies lose under 3x3 kernels on long rows
    // ([1,96,56,56] 0.40 -> 0.45-0.48, [8,32,112,112] 3.5 -> 8.4-8.7).
    #[cfg(target_arch = "x86_64")]
    if dtype == DType::F32
        && depthwise::applies(&g)
        && g.og() == 1
        && !depthwise::forward_takes_lanes(&g)
        && (g.kk() >= 25 || g.osp[2] < 32)
        && out.is_contiguous()
        && out.numel() > 0
    {
        let (_keep, weight) = contiguous(weight);
        if finite_weights::<f32>(&g, &weight) {
            let (_keep_x, x) = channels_last(input);
            via_other_layout(out, |cl| {
                depthwise_channels_last::<f32>(&g, cl, &x, &weight, bias);
            });
            return Ok(());
        }
    }
    #[cfg(target_arch = "x86_64")]
    if dtype == DType::F32 && native_f32(&g, out) {
        if out.numel() > 0 {
            forward_f32(&g, out, input, weight, bias_values(bias).as_deref());
        }
        return Ok(());
    }
    let (_keep, weight) = contiguous(weight);
    // im2col reads any strides, but a channels-last input's pixels one channel at a time.
    let (_keep_input, input) = contiguous(input);
    let (weight, input) = (&weight, &input);
    match dtype {
        DType::F32 => into_contiguous(out, |o| forward_impl::<f32>(&g, o, input, weight, bias)),
        DType::F64 => into_contiguous(out, |o| forward_impl::<f64>(&g, o, input, weight, bias)),
        d => not_implemented!(
            "convolution: dtype {} (the glue computes it in float32)",
            d.name()
        ),
    }
}

/// A depthwise convolution from channels-last input into a channels-last `out`
/// ([`depthwise::channels_last`]), unless a weight is not finite (false, nothing written): the
/// plane loops write nan where such a tap meets padding, as the CPU does.
fn depthwise_channels_last<T: depthwise::DwFloat>(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    weight: &TensorRef,
    bias: Option<&TensorRef>,
) -> bool {
    if !finite_weights::<T>(g, weight) {
        return false;
    }
    // SAFETY: the contiguous weight [o, 1, kd, kh, kw].
    let wt = unsafe { std::slice::from_raw_parts(weight.ptr as *const T, g.o * g.kk()) };
    if out.numel() > 0 {
        depthwise::channels_last::forward(
            g,
            SendPtr::of(out.ptr),
            SendPtr::of(input.ptr),
            &input.strides,
            wt,
            bias_values::<T>(bias).as_deref(),
        );
    }
    true
}

/// Whether every value of a contiguous depthwise weight `[o, 1, kd, kh, kw]` is finite.
fn finite_weights<T: depthwise::DwFloat>(g: &Geometry, weight: &TensorRef) -> bool {
    // SAFETY: the contiguous weight [o, 1, kd, kh, kw].
    let wt = unsafe { std::slice::from_raw_parts(weight.ptr as *const T, g.o * g.kk()) };
    wt.iter().all(|v| v.is_finite())
}

/// Planes of fewer output positions than the direct kernel takes (4x4 and below), batched
/// (and batched patches, see [`Geometry::patchify`]):
/// they go to the batched im2col GEMMs in either layout, since the packed and grid kernels
/// repack a layer's whole weight on every call for few positions (Zen 4, 1 thread, thread CPU
/// time, [8,512,2,2] 3x3 -> 512: forward 3.27 ms packed against 1.65 batched, input gradient
/// 6.39 against 3.62; the stride-2 [8,256,4,4] -> 512 input gradient 7.15 on the phase grids
/// against 1.97).
#[cfg(target_arch = "x86_64")]
fn tiny_planes(g: &Geometry) -> bool {
    (g.batched() || g.single_small_plane()) && !g.is_pointwise() && g.op() < direct::MIN_POSITIONS
        || g.patchify()
}

/// Whether [`forward_f32`] takes this float32 convolution into `out`.
#[cfg(target_arch = "x86_64")]
fn native_f32(g: &Geometry, out: &TensorMut) -> bool {
    let channels_last = is_channels_last(&out.shape, &out.strides);
    if direct::grouped_applies(g) {
        return out.is_contiguous() || channels_last;
    }
    if channels_last {
        packed::applies(g) && !tiny_planes(g)
    } else {
        out.is_contiguous()
            && !tiny_planes(g)
            && (direct::applies(g) || (packed::applies(g) && (direct::suits(g) || g.groups > 1)))
    }
}

/// A float32 convolution on the register-tiled kernels ([`native_f32`] holds): the packed one
/// into a channels-last `out` (from a channels-last copy of `input` unless its channels are
/// dense). A contiguous `out` takes the packed one too, through channels-last copies, wherever
/// it reads the input in place (pointers or the padded grid), since the planar direct kernel
/// computes dropped grid columns (96 positions for an 8x8 plane's 64). Zen 4, 1 thread, thread
/// CPU time, 3x3 forward direct -> packed: [8,128,8,8] 1.89 -> 1.44 ms, [16,64,8,8] 0.98 ->
/// 0.71, [8,64,16,16] 1.73 -> 1.47, [16,32,32,32] stride 2 2.01 -> 1.77, [8,64,32,32] 6.31 ->
/// 6.18, [2,64,56,56] level. The direct kernel keeps the rest (a strided RGB stem, which the
/// packed one packs: 1.94 against 2.40 ms). AVX2 has no direct kernel (on a Zen 3, the
/// [8,32,32,32] 3x3 forward took 1.38 ms through im2col and GEMM, 0.96 ms packed).
#[cfg(target_arch = "x86_64")]
fn forward_f32(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    weight: &TensorRef,
    bias: Option<&[f32]>,
) {
    if direct::grouped_applies(g) {
        // Into an NCHW copy of a channels-last `out`: the packed kernel's vectors of a group's
        // few channels would be mostly padding (its 2-3x the CPU's time).
        let (_keep, weight) = contiguous(weight);
        if out.is_contiguous() {
            return direct::forward(g, out, input, &weight, bias);
        }
        return via_other_layout(out, |o| direct::forward(g, o, input, &weight, bias));
    }
    if !is_channels_last(&out.shape, &out.strides) {
        if !direct::applies(g) || packed::reads_in_place(g) {
            return via_other_layout(out, |cl| forward_f32(g, cl, input, weight, bias));
        }
        let (_keep, weight) = contiguous(weight);
        return direct::forward(g, out, input, &weight, bias);
    }
    if input.strides[1] == 1 || g.c == 1 || !packed::needs_dense_channels(g) {
        return packed::forward(g, out, input, weight, bias);
    }
    let (_keep, x) = channels_last(input);
    packed::forward(g, out, &x, weight, bias)
}

fn bias_values<T: GemmElem>(bias: Option<&TensorRef>) -> Option<Vec<T>> {
    bias.map(|b| {
        (0..b.shape[0])
            .map(|i| {
                // SAFETY: i < len of the 1-D bias.
                unsafe { *(b.ptr as *const T).offset(i as isize * b.strides[0]) }
            })
            .collect()
    })
}

fn forward_impl<T: depthwise::DwFloat>(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    weight: &TensorRef,
    bias: Option<&TensorRef>,
) -> FooResult<()> {
    if out.numel() == 0 {
        return Ok(());
    }
    let bias = bias_values::<T>(bias);
    if depthwise::applies(g) {
        // SAFETY: the contiguous weight [o, 1, kd, kh, kw].
        let wt = unsafe { std::slice::from_raw_parts(weight.ptr as *const T, g.o * g.kk()) };
        depthwise::forward(
            g,
            SendPtr::of(out.ptr),
            SendPtr::of(input.ptr),
            &input.strides,
            wt,
            bias.as_deref(),
        );
        return Ok(());
    }
    // Output planes of 8x8 and below go batched even where the padded grid applies: the grid's
    // per-sample GEMMs are narrow there (80 positions for 8x8, a fifth of them padding), where
    // one deep GEMM over the samples side by side ran resnet18's [8,128,8,8] 3x3 forward in
    // 0.93-0.96 ms instead of 1.48-1.51 (2 threads, two runs each).
    if !g.patches_per_sample()
        && (g.batched() && (g.forward_grid().is_none() || g.op() <= SMALL_PLANE)
            || g.single_small_plane()
            || g.patchify())
    {
        forward_batched(g, out, input, weight, bias.as_deref());
        return Ok(());
    }
    let (og, ck, p) = (g.og(), g.ck(), g.op());
    let (xo, wo, oo) = (
        SendPtr::of(input.ptr),
        SendPtr::of(weight.ptr),
        SendPtr::of(out.ptr),
    );
    let xs = &input.strides;
    // Pointwise convolutions read the input as the column matrix when its spatial dims are dense.
    let direct = g.is_pointwise()
        && (g.isp[2] == 1 || xs[4] == 1)
        && (g.isp[1] == 1 || xs[3] == g.isp[2] as isize)
        && (g.isp[0] == 1 || xs[2] == (g.isp[1] * g.isp[2]) as isize);
    let split = g.split_samples();
    let grid = g.forward_grid();
    let kk = g.kk();
    let [_, kh, kw] = g.ksp;
    // SAFETY: the contiguous weight [o, cg, kd, kh, kw].
    let wt = unsafe { std::slice::from_raw_parts(weight.ptr as *const T, g.o * ck) };
    let packed: Vec<Vec<T>> = match &grid {
        Some(gr) => (0..g.groups)
            .map(|gi| {
                gr.pack_weight(|o, c, a, b, e| {
                    wt[(gi * og + o) * ck + c * kk + (a * kh + b) * kw + e]
                })
            })
            .collect(),
        None => Vec::new(),
    };
    let xs4 = [xs[1], xs[2], xs[3], xs[4]];
    let sample = |ni: usize, bufs: &mut [Vec<T>; 3]| {
        let xn = SendPtr::new(xo.at(ni as isize * xs[0]));
        if let Some(gr) = &grid {
            let [xp, cols, acc] = bufs;
            for (gi, wpk) in packed.iter().enumerate() {
                let xg = SendPtr::new(xn.at((gi * g.cg()) as isize * xs[1]));
                // SAFETY: channels gi*cg.. of sample ni of the input, with its strides.
                let c = unsafe { gr.columns(xg, xs4, xp, cols) };
                gr.multiply(wpk, c, acc, !split);
                // SAFETY: this sample/group's [og, p] block of the contiguous output, written
                // only here.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(
                        oo.at(((ni * g.o + gi * og) * p) as isize),
                        og * p,
                    )
                };
                gr.write_out(acc, dst, bias.as_ref().map(|b| &b[gi * og..(gi + 1) * og]));
            }
            return;
        }
        let col = &mut bufs[0];
        for gi in 0..g.groups {
            let dst = oo.at(((ni * g.o + gi * og) * p) as isize);
            let read_dst = if let Some(b) = &bias {
                for oc in 0..og {
                    // SAFETY: row `oc` of this sample/group block of the contiguous output.
                    let row = unsafe { std::slice::from_raw_parts_mut(dst.add(oc * p), p) };
                    row.fill(b[gi * og + oc]);
                }
                true
            } else {
                false
            };
            let rhs = if direct {
                Mat {
                    ptr: xn.at((gi * g.cg()) as isize * xs[1]) as *const T,
                    rs: xs[1],
                    cs: 1,
                }
            } else {
                col.resize(ck * p, T::ZERO);
                im2col(g, xn, &xs[1..], gi * g.cg(), col);
                Mat::rows(col.as_ptr(), p)
            };
            let lhs = Mat::rows(wo.at((gi * og * ck) as isize) as *const T, ck);
            // SAFETY: dst is this sample/group's [og, p] block (written only here); lhs/rhs
            // are in-bounds reads of the weight and the column matrix.
            unsafe {
                gemm_raw(
                    og,
                    p,
                    ck,
                    dst,
                    p as isize,
                    1,
                    read_dst,
                    lhs,
                    rhs,
                    T::ONE,
                    !split,
                )
            };
        }
    };
    run_samples(g, split, &sample);
    Ok(())
}

/// The forward of convolutions with small outputs: per group, for chunks of samples, one GEMM
/// `res[og, K] = w[og, ck] @ col[ck, K]` over the chunk's column matrices side by side
/// (`K = samples * positions`, see [`BATCH_TARGET_K`]), then each sample's block is copied
/// (with the bias) into the output.
fn forward_batched<T: GemmElem>(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    weight: &TensorRef,
    bias: Option<&[T]>,
) {
    let (og, ck, p) = (g.og(), g.ck(), g.op());
    let chunk = batch_chunk(g);
    let (xo, wo, oo) = (
        SendPtr::of(input.ptr),
        SendPtr::of(weight.ptr),
        SendPtr::of(out.ptr),
    );
    let xs = &input.strides;
    // Kept scratch (see kernels::core::scratch): im2col writes every element of col, the GEMM every
    // element of res.
    with_scratch2(
        ck * chunk * p,
        og * chunk * p,
        |col: &mut [T], res: &mut [T]| {
            for gi in 0..g.groups {
                for s in (0..g.n).step_by(chunk) {
                    let e = (s + chunk).min(g.n);
                    let k = (e - s) * p;
                    let cola = SendPtr::new(col.as_mut_ptr());
                    parallel_for(e - s, 1, &|i0, i1| {
                        for i in i0..i1 {
                            let xn = SendPtr::new(xo.at((s + i) as isize * xs[0]));
                            // SAFETY: columns i*p..(i+1)*p of every row of the [ck, k] column matrix:
                            // this sample's part, written only here.
                            unsafe {
                                im2col_ld::<T>(
                                    g,
                                    xn,
                                    &xs[1..],
                                    gi * g.cg(),
                                    SendPtr::new(cola.at((i * p) as isize)),
                                    k,
                                )
                            };
                        }
                    });
                    let lhs = Mat::rows(wo.at((gi * og * ck) as isize) as *const T, ck);
                    let rhs = Mat::rows(col.as_ptr(), k);
                    // SAFETY: res is an owned [og, k] matrix; lhs is group gi's block of the contiguous
                    // weight, rhs the chunk's column matrix.
                    unsafe {
                        gemm_raw(
                            og,
                            k,
                            ck,
                            res.as_mut_ptr(),
                            k as isize,
                            1,
                            false,
                            lhs,
                            rhs,
                            T::ONE,
                            true,
                        )
                    };
                    let res = &*res;
                    parallel_for(e - s, 1, &|i0, i1| {
                        for i in i0..i1 {
                            // SAFETY: sample s+i, group gi's [og, p] block of the contiguous output,
                            // written only here.
                            let dst = unsafe {
                                std::slice::from_raw_parts_mut(
                                    oo.at((((s + i) * g.o + gi * og) * p) as isize),
                                    og * p,
                                )
                            };
                            for (o, row) in dst.chunks_mut(p).enumerate() {
                                let src = &res[o * k + i * p..o * k + (i + 1) * p];
                                match bias {
                                    Some(b) => {
                                        let bo = b[gi * og + o];
                                        row.iter_mut().zip(src).for_each(|(d, &v)| *d = v + bo);
                                    }
                                    None => row.copy_from_slice(src),
                                }
                            }
                        }
                    });
                }
            }
        },
    );
}

/// The input gradient of convolutions with small outputs: per group, for chunks of samples, one
/// GEMM `col[K, ck] = go[K, og] @ w[og, ck]` over the chunk's output gradients stacked (each
/// sample's `[og, p]` block transposed), every operand row-major, the orientation `gemm` runs at
/// full speed; for short rows each input element then gathers its sums from `col` where they
/// lie ([`ScatterMap`]), else `col` is transposed back to im2col's `[ck, K]` in cache and each
/// sample's columns are added into its input gradient (col2im). (`w^T @ go` into `[ck, K]` directly ran at half
/// that speed: resnet18's [8,512,2,2] 3x3, Zen 4, 3.45-3.67 -> 2.17 ms on 1 thread, 1.96-2.00 ->
/// 1.27 on 2, the CPU's oneDNN 2.12 and 1.23-1.28.)
fn backward_input_batched<T: GemmElem>(
    g: &Geometry,
    gi_t: &TensorMut,
    go_t: &TensorRef,
    weight: &TensorRef,
    bias: Option<&[T]>,
) {
    let (og, cg, ck, p, ip) = (g.og(), g.cg(), g.ck(), g.op(), g.ip());
    let chunk = batch_chunk(g);
    let (gio, goo, wo) = (
        SendPtr::of(gi_t.ptr),
        SendPtr::of(go_t.ptr),
        SendPtr::of(weight.ptr),
    );
    // Sample n of the contiguous grad_input, [c, ip].
    let sample_grad = |n: usize| {
        // SAFETY: sample n < g.n of grad_input, written only by the task given that sample.
        unsafe { std::slice::from_raw_parts_mut(gio.at((n * g.c * ip) as isize), g.c * ip) }
    };
    // Short rows: each input element gathers its taps' sums from the product where they lie.
    let scatter = ScatterMap::new(g);
    // Kept scratch: the transposes write every element of got and col, the GEMM every element
    // of colt.
    with_scratch2(
        ck * chunk * p,
        og * chunk * p,
        |col: &mut [T], got: &mut [T]| {
            with_scratch(chunk * p * ck, |colt: &mut [T]| {
                for s in (0..g.n).step_by(chunk) {
                    let e = (s + chunk).min(g.n);
                    let k = (e - s) * p;
                    for gi in 0..g.groups {
                        let gota = SendPtr::new(got.as_mut_ptr());
                        parallel_for(e - s, 1, &|i0, i1| {
                            for i in i0..i1 {
                                // SAFETY: group gi's [og, p] block of sample s+i of the
                                // contiguous grad_output (read), and rows i*p..(i+1)*p of the
                                // [k, og] chunk matrix (written only here).
                                unsafe {
                                    let src = std::slice::from_raw_parts(
                                        goo.at((((s + i) * g.o + gi * og) * p) as isize)
                                            as *const T,
                                        og * p,
                                    );
                                    let dst = std::slice::from_raw_parts_mut(
                                        gota.at((i * p * og) as isize),
                                        p * og,
                                    );
                                    transpose(src, og, p, dst);
                                }
                            }
                        });
                        let lhs = Mat::rows(got.as_ptr(), og);
                        let rhs = Mat::rows(wo.at((gi * og * ck) as isize) as *const T, ck);
                        // SAFETY: colt is an owned [k, ck] matrix; lhs is the chunk's output
                        // gradients [k, og], rhs group gi's weight block [og, ck].
                        unsafe {
                            gemm_raw(
                                k,
                                ck,
                                og,
                                colt.as_mut_ptr(),
                                ck as isize,
                                1,
                                false,
                                lhs,
                                rhs,
                                T::ONE,
                                true,
                            )
                        };
                        if let Some(sm) = scatter.as_ref().filter(|_| g.groups == 1) {
                            let colt = &*colt;
                            parallel_for(e - s, 1, &|i0, i1| {
                                for i in i0..i1 {
                                    let gin = sample_grad(s + i);
                                    let sample = &colt[i * p * ck..(i + 1) * p * ck];
                                    for (c, plane) in gin.chunks_mut(ip).enumerate() {
                                        let b = bias.map(|b| b[c]);
                                        sm.sum_into(&sample[c * g.kk()..], plane, b);
                                    }
                                }
                            });
                            continue;
                        }
                        transpose(&colt[..k * ck], k, ck, &mut col[..ck * k]);
                        let col = &*col;
                        parallel_for(e - s, 1, &|i0, i1| {
                            for i in i0..i1 {
                                let gin = sample_grad(s + i);
                                if gi == 0 {
                                    gin.fill(T::ZERO);
                                }
                                col2im_ld(g, gin, gi * cg, &col[i * p..], k);
                                if gi + 1 == g.groups {
                                    if let Some(b) = bias {
                                        for (c, plane) in gin.chunks_mut(ip).enumerate() {
                                            plane.iter_mut().for_each(|v| *v = *v + b[c]);
                                        }
                                    }
                                }
                            }
                        });
                    }
                }
            })
        },
    );
}

/// Runs `sample(ni, scratch)` for every sample: split across threads, or in order with
/// parallel GEMMs (see [`Geometry::split_samples`]).
fn run_samples<T: Send>(
    g: &Geometry,
    split: bool,
    sample: &(dyn Fn(usize, &mut [Vec<T>; 3]) + Sync),
) {
    if split {
        parallel_for(g.n, 1, &|s, e| {
            let mut bufs = [Vec::new(), Vec::new(), Vec::new()];
            (s..e).for_each(|ni| sample(ni, &mut bufs));
        });
    } else {
        let mut bufs = [Vec::new(), Vec::new(), Vec::new()];
        (0..g.n).for_each(|ni| sample(ni, &mut bufs));
    }
}

/// A 3x3 kernel on operands with dense channels and the weight as [`winograd::Taps`]:
/// [`winograd_cl::forward`] or [`tap_rows::forward`].
#[cfg(target_arch = "x86_64")]
struct TapsKernel {
    applies: fn(&Geometry) -> bool,
    forward: fn(&Geometry, &TensorMut, &TensorRef, winograd::Taps, Option<&[f32]>),
}

#[cfg(target_arch = "x86_64")]
const WINOGRAD_CL: TapsKernel = TapsKernel {
    applies: winograd_cl::applies,
    forward: winograd_cl::forward,
};

#[cfg(target_arch = "x86_64")]
const TAP_ROWS: TapsKernel = TapsKernel {
    applies: tap_rows::applies,
    forward: tap_rows::forward,
};

/// Runs `out = conv(input, w) (+ bias)` on `kernel` if it takes `g` and `out` is contiguous or
/// channels-last (through a channels-last temporary for a contiguous one, and a channels-last
/// copy of an input whose channels are not dense); says whether it did. The packed kernel
/// that a contiguous `out` otherwise takes makes the same copies (`forward_f32`).
#[cfg(target_arch = "x86_64")]
fn on_channels_last(
    kernel: TapsKernel,
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    w: winograd::Taps,
    bias: Option<&TensorRef>,
) -> bool {
    let cl = is_channels_last(&out.shape, &out.strides);
    if !(kernel.applies)(g) || !(cl || out.is_contiguous()) {
        return false;
    }
    if out.numel() == 0 {
        return true;
    }
    let bias = bias_values(bias);
    let run = |out: &TensorMut| match input.strides[1] == 1 {
        true => (kernel.forward)(g, out, input, w, bias.as_deref()),
        false => {
            let (_keep, x) = channels_last(input);
            (kernel.forward)(g, out, &x, w, bias.as_deref())
        }
    };
    match cl {
        true => run(out),
        false => via_other_layout(out, run),
    }
    true
}

/// `grad_input = conv_transpose(grad_output, weight) (+ bias per input channel)`: the input
/// gradient of a convolution (and the forward of a transposed one). `grad_input` is
/// overwritten; shapes are those of the forward convolution.
pub fn conv_backward_input(
    grad_input: &TensorMut,
    grad_output: &TensorRef,
    weight: &TensorRef,
    bias: Option<&TensorRef>,
    p: &ConvParams,
) -> FooResult<()> {
    let g = Geometry::new(&grad_input.shape, &weight.shape, &grad_output.shape, p)?;
    let mut dts = vec![grad_input.dtype, grad_output.dtype, weight.dtype];
    dts.extend(bias.map(|b| b.dtype));
    require_contiguous("weight", &weight.shape, &weight.strides)?;
    let winograd = g.input_gradient_geometry().filter(winograd::applies);
    #[cfg(target_arch = "x86_64")]
    let turned = g
        .input_gradient_geometry()
        .filter(|gt| native_f32(gt, grad_input));
    let dtype = check_dtypes("convolution_backward", &dts)?;
    if let (DType::F32, Some(gt)) = (dtype, &winograd) {
        if grad_input.numel() > 0 {
            let bias = bias_values(bias);
            let w = winograd::Taps::turned(weight);
            winograd::forward(gt, grad_input, grad_output, w, bias.as_deref());
        }
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if let (DType::F32, Some(gt)) = (dtype, g.input_gradient_geometry()) {
        let w = winograd::Taps::turned(weight);
        if [WINOGRAD_CL, TAP_ROWS]
            .into_iter()
            .any(|k| on_channels_last(k, &gt, grad_input, grad_output, w, bias))
        {
            return Ok(());
        }
    }
    #[cfg(target_arch = "x86_64")]
    if let (DType::F32, Some(gt)) = (dtype, turned) {
        if grad_input.numel() > 0 {
            let bias = bias_values(bias);
            direct::input_gradient(&g, &gt, grad_input, grad_output, weight, bias.as_deref());
        }
        return Ok(());
    }
    // Strided, into channels-last: a grid pass per phase (measured on a Zen 3, 2 threads: the
    // [16,32,32,32] 3x3 stride-2 -> 64 input gradient took 1.87 ms through NCHW copies and
    // the planar path, the CPU's oneDNN 1.01).
    #[cfg(target_arch = "x86_64")]
    if dtype == DType::F32
        && is_channels_last(&grad_input.shape, &grad_input.strides)
        && grid_input::applies(&g)
        && !tiny_planes(&g)
    {
        if grad_input.numel() > 0 {
            let bias = bias_values(bias);
            grid_input::input_gradient(&g, grad_input, grad_output, weight, bias.as_deref());
        }
        return Ok(());
    }
    let (_keep, go) = contiguous(grad_output);
    into_contiguous(grad_input, |gi| match dtype {
        DType::F32 => backward_input_impl::<f32>(&g, gi, &go, weight, bias),
        DType::F64 => backward_input_impl::<f64>(&g, gi, &go, weight, bias),
        d => not_implemented!("convolution_backward: dtype {}", d.name()),
    })
}

fn backward_input_impl<T: depthwise::DwFloat>(
    g: &Geometry,
    gi_t: &TensorMut,
    go_t: &TensorRef,
    weight: &TensorRef,
    bias: Option<&TensorRef>,
) -> FooResult<()> {
    if gi_t.numel() == 0 {
        return Ok(());
    }
    let bias = bias_values::<T>(bias);
    if depthwise::applies(g) {
        // SAFETY: the contiguous weight [o, 1, kd, kh, kw].
        let wt = unsafe { std::slice::from_raw_parts(weight.ptr as *const T, g.o * g.kk()) };
        depthwise::backward_input(
            g,
            SendPtr::of(gi_t.ptr),
            SendPtr::of(go_t.ptr),
            wt,
            bias.as_deref(),
        );
        return Ok(());
    }
    if g.batched() && (g.input_grid().is_none() || g.is_pointwise()) || g.single_small_plane() {
        backward_input_batched(g, gi_t, go_t, weight, bias.as_deref());
        return Ok(());
    }
    let (og, cg, ck, p, ip) = (g.og(), g.cg(), g.ck(), g.op(), g.ip());
    let (gio, goo, wo) = (
        SendPtr::of(gi_t.ptr),
        SendPtr::of(go_t.ptr),
        SendPtr::of(weight.ptr),
    );
    let direct = g.is_pointwise();
    let split = g.split_samples();
    let grid = g.input_grid();
    let [kd, kh, kw] = g.ksp;
    // SAFETY: the contiguous weight [o, cg, kd, kh, kw].
    let wt = unsafe { std::slice::from_raw_parts(weight.ptr as *const T, g.o * ck) };
    // The grid convolves the output gradient with the weight transposed (grid input channel
    // = output channel) and flipped.
    let packed: Vec<Vec<T>> = match &grid {
        Some(gr) => (0..g.groups)
            .map(|gi| {
                gr.pack_weight(|c, o, a, b, e| {
                    let tap = ((kd - 1 - a) * kh + kh - 1 - b) * kw + kw - 1 - e;
                    wt[(gi * og + o) * ck + c * g.kk() + tap]
                })
            })
            .collect(),
        None => Vec::new(),
    };
    let osp = g.osp;
    let gos = [p as isize, (osp[1] * osp[2]) as isize, osp[2] as isize, 1];
    let sample = |ni: usize, bufs: &mut [Vec<T>; 3]| {
        // SAFETY: sample `ni` of the contiguous grad_input, written only by this call.
        let gin =
            unsafe { std::slice::from_raw_parts_mut(gio.at((ni * g.c * ip) as isize), g.c * ip) };
        if let Some(gr) = &grid {
            let [xp, cols, acc] = bufs;
            for (gi, wpk) in packed.iter().enumerate() {
                let src = SendPtr::new(goo.at(((ni * g.o + gi * og) * p) as isize));
                // SAFETY: group gi's [og, osp] block of sample ni of the contiguous
                // grad_output.
                let c = unsafe { gr.columns(src, gos, xp, cols) };
                gr.multiply(wpk, c, acc, !split);
                let b = bias.as_ref().map(|b| &b[gi * cg..(gi + 1) * cg]);
                gr.write_out(acc, &mut gin[gi * cg * ip..(gi + 1) * cg * ip], b);
            }
            return;
        }
        let col = &mut bufs[0];
        if !direct {
            gin.fill(T::ZERO);
        }
        for gi in 0..g.groups {
            let lhs = Mat {
                ptr: wo.at((gi * og * ck) as isize) as *const T,
                rs: 1,
                cs: ck as isize,
            };
            let rhs = Mat::rows(goo.at(((ni * g.o + gi * og) * p) as isize) as *const T, p);
            if direct {
                let dst = gin[gi * cg * ip..].as_mut_ptr();
                // SAFETY: dst is this group's [cg, ip] block of the sample (ip == p here).
                unsafe {
                    gemm_raw(
                        ck,
                        p,
                        og,
                        dst,
                        p as isize,
                        1,
                        false,
                        lhs,
                        rhs,
                        T::ONE,
                        !split,
                    )
                };
            } else {
                col.resize(ck * p, T::ZERO);
                // SAFETY: col is an owned [ck, p] buffer.
                unsafe {
                    gemm_raw(
                        ck,
                        p,
                        og,
                        col.as_mut_ptr(),
                        p as isize,
                        1,
                        false,
                        lhs,
                        rhs,
                        T::ONE,
                        !split,
                    )
                };
                col2im(g, gin, gi * cg, col);
            }
        }
        if let Some(b) = &bias {
            for (c, plane) in gin.chunks_mut(ip).enumerate() {
                plane.iter_mut().for_each(|v| *v = *v + b[c]);
            }
        }
    };
    run_samples(g, split, &sample);
    Ok(())
}

/// `grad_weight = sum_n grad_output[n] @ im2col(input[n])^T` (overwritten).
pub fn conv_backward_weight(
    grad_weight: &TensorMut,
    input: &TensorRef,
    grad_output: &TensorRef,
    p: &ConvParams,
) -> FooResult<()> {
    let g = Geometry::new(&input.shape, &grad_weight.shape, &grad_output.shape, p)?;
    let dtype = check_dtypes(
        "convolution_backward",
        &[grad_weight.dtype, input.dtype, grad_output.dtype],
    )?;
    let cl_grad_weight =
        !grad_weight.is_contiguous() && is_channels_last(&grad_weight.shape, &grad_weight.strides);
    if !cl_grad_weight {
        require_contiguous("grad_weight", &grad_weight.shape, &grad_weight.strides)?;
    }
    if grad_weight.numel() == 0 {
        return Ok(());
    }
    let go_cl = is_channels_last(&grad_output.shape, &grad_output.strides);
    let go_layout = grad_output.is_contiguous() || go_cl;
    #[cfg(target_arch = "x86_64")]
    let native = dtype == DType::F32 && go_layout && g.n > 0;
    #[cfg(target_arch = "x86_64")]
    let grid = native && grid_weight::applies(&g);
    // A channels-last gradient otherwise: GEMMs over a channels-last column matrix (measured
    // on a Zen 3, 2 threads, against the NCHW path's copies and per-sample GEMMs, ms, CPU's
    // oneDNN in brackets: [16,3,32,32] 3x3 -> 32 0.62 -> 0.52 (0.29); [16,32,32,32] 3x3
    // stride 2 -> 64 1.73 -> 1.18-1.23 (1.19-1.23); [16,64,8,8] 3x3 -> 64 0.74 -> 0.60 (0.65)).
    let cl_gemm_suits =
        dtype == DType::F32 && go_cl && !depthwise::applies(&g) && cl_weight::applies(&g);
    // ... also before the direct kernel, from CL_GEMM_MIN_CHANNELS input channels.
    #[cfg(target_arch = "x86_64")]
    let direct = native
        && !grid
        && direct::applies(&g)
        && !(cl_gemm_suits && g.c >= CL_GEMM_MIN_CHANNELS)
        && !g.patchify();
    #[cfg(not(target_arch = "x86_64"))]
    let (grid, direct) = (false, false);
    let gemm_cl = !grid && !direct && cl_gemm_suits;
    if gemm_cl {
        // Its sums come out tap-major, in channels-last order: either layout is one pass.
        cl_weight::weight_gradient(&g, grad_weight, input, grad_output, cl_grad_weight);
        return Ok(());
    }
    if cl_grad_weight {
        // The other kernels write a contiguous gradient (the forward's channels-last layout
        // is what a channels-last weight or input asks of it, as the CPU's).
        let (buf, dense) = temporary(
            &grad_weight.as_ref(),
            contiguous_strides(&grad_weight.shape),
        );
        conv_backward_weight(&dense, input, grad_output, p)?;
        copy(grad_weight, &dense.as_ref())?;
        drop(buf);
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if grid {
        if go_cl {
            grid_weight::weight_gradient(&g, grad_weight, input, grad_output);
        } else {
            // A contiguous gradient is transposed to channels-last first (NCHW, measured
            // against the direct kernel: 0.68-1.00 of its time over 9 resnet/unet-sized
            // shapes; 2.34 -> 1.88 ms for [32,16,32,32] 3x3 to 32 channels).
            let (_keep, go) = channels_last(grad_output);
            grid_weight::weight_gradient(&g, grad_weight, input, &go);
        }
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if direct {
        direct::weight_gradient(&g, grad_weight, input, grad_output);
        return Ok(());
    }
    let (_keep, go) = contiguous(grad_output);
    match dtype {
        DType::F32 => backward_weight_impl::<f32>(&g, grad_weight, input, &go),
        DType::F64 => backward_weight_impl::<f64>(&g, grad_weight, input, &go),
        d => not_implemented!("convolution_backward: dtype {}", d.name()),
    }
}

/// Input channels from which a channels-last weight gradient the direct kernel could take runs on
/// [`cl_weight`]'s GEMMs instead: the direct kernel copies the input to planes and transposes the
/// gradient first. Measured on a Zen 4 (ms direct -> GEMMs, 2 threads, 1 thread): [16,32,32,32]
/// 3x3 stride 2 -> 64 1.25 -> 1.01, 1.90 -> 1.79; [8,64,16,16] 3x3 stride 2 -> 128 0.73 -> 0.43,
/// 1.34 -> 0.81; [8,64,16,16] 1x1 stride 2 -> 128 0.19 -> 0.06; [2,32,64,64] 4x4 stride 2 -> 64
/// 0.91 -> 0.76, 1.60 -> 1.54; [4,64,56,56] 3x3 stride 2 -> 128 level. An RGB stem ([8,3,64,64]
/// 7x7 stride 2 -> 64: 3-channel runs) stays direct: 1.27 -> 1.34, 1.84 -> 2.30.
const CL_GEMM_MIN_CHANNELS: usize = 8;

/// Sample blocks of the weight gradient (see `backward_weight_impl`): enough for 16 threads.
const WEIGHT_GRAD_BLOCKS: usize = 16;

/// Output positions per sample from which convolutions in patches go sample by sample
/// ([`Geometry::patches_per_sample`]). Zen 4, 2 threads, ms batched -> per sample (CPU's
/// oneDNN), forward / weight gradient: a U-Net's 2x2 stride-2 transposed convolutions'
/// backward, [8,16,64,64] -> 32 channels at 32x32 0.55 / 0.80 -> 0.25 / 0.32 (0.30 / 0.30),
/// [8,32,32,32] -> 64 at 16x16 0.40 / 0.55 -> 0.25 / 0.29-0.30 (0.25 / 0.26), but at 8x8 (64
/// positions) the weight gradient lost (0.42 -> 0.48); ConvNeXt's 4x4 stride-4 stem,
/// [8,3,224,224] -> 96, 3.00 / 3.14 -> 1.95 / 2.35 (8.38 / 1.86), its [8,96,56,56] 2x2
/// merge 6.36 / 6.70 -> 5.06 / 5.72 (5.92 / 5.86). U-Net's training step 50.9 -> 49.6 ms.
const PATCHES_PER_SAMPLE: usize = 256;

/// Reduction depth the batched weight gradient aims for: a per-sample GEMM reduces over one
/// image's output positions, 4 at resnet18's last stage at 64 px, where it ran at 2% of peak
/// (206 ms for the [8,512,2,2] 3x3 weight gradient); samples side by side make K deep.
const BATCH_TARGET_K: usize = 512;

/// Pointwise (1x1) convolutions with planes up to this many positions go batched: per sample
/// they are GEMMs a few columns wide. mobilenet_v3_small's [8,96,2,2] -> 576 (2 threads, Zen
/// 3): the weight gradient 422 -> 67 us, the forward 79 -> 39 us (the CPU's: 149, 128). At
/// 4x4 batching had made the forward and input gradient 2x slower on that Zen 3 (240 -> 40
/// channels); on a Zen 5 with today's GEMMs it makes them faster (2 threads, foo/CPU, forward
/// / input gradient: ResNeXt-50's [8,512,4,4] -> 1024 1.55 / 1.63 -> 0.91 / 0.98, [8,1024,4,4]
/// -> 512 1.52 / 2.11 -> 1.01 / 1.07, -> 1024 1.65 / 2.12 -> 0.97 / 0.97), so 4x4 goes batched.
const SMALL_POINTWISE: usize = 16;

/// Output planes up to this many positions take the batched forward rather than the padded grid.
const SMALL_PLANE: usize = 64;

/// Elements of one chunk's column matrix (8 MB of f32): bounds the batched path's scratch.
const BATCH_MAX_COL: usize = 1 << 21;

/// Samples per chunk of the batched weight gradient (fixed by the shapes alone, so the
/// summation order, and the bits, do not depend on the thread count).
fn batch_chunk(g: &Geometry) -> usize {
    let p = g.op().max(1);
    let by_k = BATCH_TARGET_K.div_ceil(p);
    let by_mem = (BATCH_MAX_COL / (g.ck() * p).max(1)).max(1);
    by_k.min(by_mem).clamp(1, g.n.max(1))
}

/// The weight gradient of convolutions with small outputs: per group, for chunks of samples,
/// one GEMM `gw[og, ck] += go[og, K] @ col[K, ck]` over `K = samples * positions`, the chunk's
/// output gradients side by side (`go`) and its column matrices stacked (`col`, im2col's
/// `[ck, K]` transposed: in cache, it costs a fraction of the product), every operand and the
/// result row-major, the orientation `gemm` runs at full speed, accumulated in chunk order.
/// (It had run the product into a column-major `[og, ck]` and transposed that into `gw`: for
/// resnet18's [8,512,2,2] 3x3 weight gradient the transpose of the 9.4 MB result took as long
/// as the product; Zen 4, 1 thread: 4.06 -> 1.73-1.86 ms, the plain `mm` of its shape 1.41; 2
/// threads 2.27 -> 1.08-1.24.) Every
/// output element is one GEMM's sum per chunk, so the bits do not depend on the thread count.
fn backward_weight_batched<T: GemmElem>(
    g: &Geometry,
    gw: &mut [T],
    input: &TensorRef,
    go_t: &TensorRef,
) {
    let (og, ck, p) = (g.og(), g.ck(), g.op());
    let chunk = batch_chunk(g);
    let (xo, goo) = (SendPtr::of(input.ptr), SendPtr::of(go_t.ptr));
    let xs = &input.strides;
    let kmax = chunk * p;
    // Kept scratch: im2col writes every element of col, the transpose every element of colt,
    // the copies every element of goc.
    with_scratch2(ck * kmax, kmax * ck, |col: &mut [T], colt: &mut [T]| {
        with_scratch(og * kmax, |goc: &mut [T]| {
            for gi in 0..g.groups {
                for s in (0..g.n).step_by(chunk) {
                    let e = (s + chunk).min(g.n);
                    let k = (e - s) * p;
                    let (cola, goca) = (
                        SendPtr::new(col.as_mut_ptr()),
                        SendPtr::new(goc.as_mut_ptr()),
                    );
                    parallel_for(e - s, 1, &|i0, i1| {
                        for i in i0..i1 {
                            let ni = s + i;
                            let xn = SendPtr::new(xo.at(ni as isize * xs[0]));
                            // SAFETY: columns i*p..(i+1)*p of every row of the [ck, k] column matrix:
                            // this sample's part, written only here.
                            unsafe {
                                im2col_ld::<T>(
                                    g,
                                    xn,
                                    &xs[1..],
                                    gi * g.cg(),
                                    SendPtr::new(cola.at((i * p) as isize)),
                                    k,
                                )
                            };
                            for o in 0..og {
                                // SAFETY: row o of group gi of sample ni of the contiguous
                                // grad_output (read), and its place in the [og, k] chunk matrix
                                // (written only here).
                                unsafe {
                                    let src = std::slice::from_raw_parts(
                                        goo.at(((ni * g.o + gi * og + o) * p) as isize) as *const T,
                                        p,
                                    );
                                    std::slice::from_raw_parts_mut(
                                        goca.at((o * k + i * p) as isize),
                                        p,
                                    )
                                    .copy_from_slice(src);
                                }
                            }
                        }
                    });
                    transpose(&col[..ck * k], ck, k, &mut colt[..k * ck]);
                    let lhs = Mat::rows(goc.as_ptr(), k);
                    let rhs = Mat::rows(colt.as_ptr(), ck);
                    // SAFETY: group gi's row-major [og, ck] block of gw; the operands are the
                    // chunk's [og, k] and [k, ck] matrices built above.
                    unsafe {
                        gemm_raw(
                            og,
                            ck,
                            k,
                            gw[gi * og * ck..].as_mut_ptr(),
                            ck as isize,
                            1,
                            s > 0,
                            lhs,
                            rhs,
                            T::ONE,
                            true,
                        )
                    };
                }
            }
        })
    });
}

fn backward_weight_impl<T: depthwise::DwFloat>(
    g: &Geometry,
    gw_t: &TensorMut,
    input: &TensorRef,
    go_t: &TensorRef,
) -> FooResult<()> {
    let total = gw_t.numel();
    if total == 0 {
        return Ok(());
    }
    // SAFETY: the contiguous grad_weight, written only here.
    let gw = unsafe { std::slice::from_raw_parts_mut(gw_t.ptr as *mut T, total) };
    gw.fill(T::ZERO);
    let (og, ck, p) = (g.og(), g.ck(), g.op());
    if g.n == 0 || p == 0 {
        return Ok(());
    }
    if depthwise::applies(g) {
        depthwise::backward_weight(
            g,
            gw,
            SendPtr::of(input.ptr),
            &input.strides,
            SendPtr::of(go_t.ptr),
        );
        return Ok(());
    }
    if !g.patches_per_sample() && (g.batched_weight() || g.patchify()) {
        backward_weight_batched(g, gw, input, go_t);
        return Ok(());
    }
    let (xo, goo) = (SendPtr::of(input.ptr), SendPtr::of(go_t.ptr));
    let xs = &input.strides;
    let split = g.split_samples();
    // Accumulates the samples `s..e` into `acc`: per group an [og, ck] block stored column-major
    // (element (o, r) at `r * og + o`). Both GEMM operands arrive with the reduction dim
    // (positions) contiguous, which `gemm` packs by gathering at a page-sized stride (8x slower
    // for the column matrix with a row-major destination, 1.5x for grad_output with a
    // column-major one; measured). So the destination is column-major and grad_output is
    // transposed first (og x p, the smaller operand): both are then read contiguously.
    let grid = g.forward_grid();
    let xs4 = [xs[1], xs[2], xs[3], xs[4]];
    // On the grid: per group, [gemms, rows, og] (the gradient of GEMM e's weights, column-major).
    let accumulate_grid = |gr: &Grid, s: usize, e: usize, acc: &mut [T], parallel: bool| {
        let (mut xp, mut cols, mut got) = (Vec::new(), Vec::new(), Vec::new());
        for ni in s..e {
            let xn = SendPtr::new(xo.at(ni as isize * xs[0]));
            for gi in 0..g.groups {
                let xg = SendPtr::new(xn.at((gi * g.cg()) as isize * xs[1]));
                // SAFETY: channels gi*cg.. of sample ni of the input, with its strides.
                let c = unsafe { gr.columns(xg, xs4, &mut xp, &mut cols) };
                // SAFETY: group gi's [og, p] block of sample ni of the contiguous grad_output.
                let go = unsafe {
                    std::slice::from_raw_parts(
                        goo.at(((ni * g.o + gi * og) * p) as isize) as *const T,
                        og * p,
                    )
                };
                if gr.horizontal_weight() {
                    gr.gather(go, &mut got);
                    gr.multiply_weight_h(&got, c, &mut acc[gi * og * ck..], ni == s, parallel);
                } else {
                    gr.gather_transposed(go, &mut got);
                    gr.multiply_weight(&got, c, &mut acc[gi * og * ck..], ni == s, parallel);
                }
            }
        }
    };
    // A pointwise convolution's column matrix is the input itself: with few output channels
    // per group, the sums are dot products of grad_output's rows and the input's, both read
    // where they lie (`gemm_raw`'s skinny path), without the copy of the input and the
    // transpose of grad_output that `gemm` needs. Zen 4, 1 thread, thread CPU time: a U-Net's
    // head, [8,16,64,64] -> 4, 441-463 us through those and `gemm`, 116 us as dot products
    // (the CPU's oneDNN: 165-168).
    let dense_positions = {
        let [d, h, w] = g.isp;
        (xs[4] == 1 || w == 1)
            && (xs[3] == w as isize || h == 1)
            && (xs[2] == (h * w) as isize || d == 1)
    };
    let dot_rows = g.is_pointwise() && og <= SKINNY_ROWS && dense_positions;
    // Adds lhs [og, p] times rhs [p, ck] into group gi's column-major [og, ck] block of the
    // accumulator; `accumulate` false overwrites it (the first sample needs no zero-fill).
    // Its callers build lhs and rhs over [og, p] and [p, ck] readable elements.
    let add_group_product =
        |acc: &mut [T], gi: usize, accumulate: bool, lhs: Mat<T>, rhs: Mat<T>, parallel: bool| {
            let dst = acc[gi * og * ck..(gi + 1) * og * ck].as_mut_ptr();
            // SAFETY: dst is the [og, ck] block, bounds-checked by the slice; both callers build
            // lhs and rhs over [og, p] and [p, ck] readable elements (see there).
            unsafe {
                gemm_raw(
                    og,
                    ck,
                    p,
                    dst,
                    1,
                    og as isize,
                    accumulate,
                    lhs,
                    rhs,
                    T::ONE,
                    parallel,
                )
            }
        };
    let accumulate_dots = |s: usize, e: usize, acc: &mut [T], parallel: bool| {
        for ni in s..e {
            for gi in 0..g.groups {
                let lhs = Mat::rows(goo.at(((ni * g.o + gi * og) * p) as isize) as *const T, p);
                let rhs = Mat {
                    ptr: xo.at(ni as isize * xs[0] + (gi * g.cg()) as isize * xs[1]) as *const T,
                    rs: 1,
                    cs: xs[1],
                };
                // The operands: group gi's [og, p] rows of sample ni of the contiguous
                // grad_output and its ck = cg channels of the input, p dense positions each.
                add_group_product(acc, gi, ni > s, lhs, rhs, parallel);
            }
        }
    };
    let accumulate = |s: usize, e: usize, acc: &mut [T], parallel: bool| {
        if let Some(gr) = &grid {
            return accumulate_grid(gr, s, e, acc, parallel);
        }
        if dot_rows {
            return accumulate_dots(s, e, acc, parallel);
        }
        let mut col = vec![T::ZERO; ck * p];
        let mut got = vec![T::ZERO; og * p];
        for ni in s..e {
            let xn = SendPtr::new(xo.at(ni as isize * xs[0]));
            for gi in 0..g.groups {
                im2col(g, xn, &xs[1..], gi * g.cg(), &mut col);
                // SAFETY: group gi's [og, p] block of sample ni of the contiguous grad_output.
                let go = unsafe {
                    std::slice::from_raw_parts(
                        goo.at(((ni * g.o + gi * og) * p) as isize) as *const T,
                        og * p,
                    )
                };
                transpose(go, og, p, &mut got);
                let lhs = Mat {
                    ptr: got.as_ptr(),
                    rs: 1,
                    cs: og as isize,
                };
                let rhs = Mat {
                    ptr: col.as_ptr(),
                    rs: 1,
                    cs: p as isize,
                };
                add_group_product(acc, gi, ni > s, lhs, rhs, parallel);
            }
        }
    };
    // Adds the column-major blocks of `acc` into the row-major grad_weight.
    let add_transposed = |gw: &mut [T], acc: &[T]| {
        if let Some(gr) = &grid {
            let rows = gr.rows();
            for (gwb, accb) in gw.chunks_mut(og * ck).zip(acc.chunks(og * ck)) {
                for (e, blk) in accb.chunks(rows * og).enumerate() {
                    for (r, col) in blk.chunks(og).enumerate() {
                        let tap = gr.tap_index(r, e);
                        for (o, &v) in col.iter().enumerate() {
                            gwb[o * ck + tap] = gwb[o * ck + tap] + v;
                        }
                    }
                }
            }
            return;
        }
        for (gwb, accb) in gw.chunks_mut(og * ck).zip(acc.chunks(og * ck)) {
            for (o, row) in gwb.chunks_mut(ck).enumerate() {
                row.iter_mut()
                    .enumerate()
                    .for_each(|(r, v)| *v = *v + accb[r * og + o]);
            }
        }
    };
    // Fixed blocks of samples, summed in block order: the bits do not depend on the thread
    // count or on which thread finishes first (a shared accumulator added to in completion order
    // differed from run to run). Each block's partial is a sum of samples in sample order.
    let nb = g.n.min(WEIGHT_GRAD_BLOCKS);
    let block = |b: usize| (b * g.n / nb, (b + 1) * g.n / nb);
    if split {
        // Waves of as many blocks as threads, computed in parallel and added in order.
        let wave = crate::runtime::pool::num_threads().min(nb);
        let partials: Vec<Mutex<Vec<T>>> = (0..wave)
            .map(|_| Mutex::new(vec![T::ZERO; total]))
            .collect();
        for w0 in (0..nb).step_by(wave) {
            let w1 = (w0 + wave).min(nb);
            parallel_for(w1 - w0, 1, &|s, e| {
                for (i, slot) in partials.iter().enumerate().take(e).skip(s) {
                    let mut acc = slot.lock().unwrap_or_else(|e| e.into_inner());
                    let (bs, be) = block(w0 + i);
                    accumulate(bs, be, &mut acc, false);
                }
            });
            for acc in &partials[..w1 - w0] {
                add_transposed(gw, &acc.lock().unwrap_or_else(|e| e.into_inner()));
            }
        }
    } else {
        let mut acc = vec![T::ZERO; total];
        for b in 0..nb {
            let (bs, be) = block(b);
            accumulate(bs, be, &mut acc, true);
            add_transposed(gw, &acc);
        }
    }
    Ok(())
}

/// `grad_bias[o] = sum over n and positions of grad_output[n, o]` (contiguous `[N, O, ...]`).
pub fn conv_backward_bias(grad_bias: &TensorMut, grad_output: &TensorRef) -> FooResult<()> {
    if grad_output.ndim() < 2 || grad_bias.shape[..] != [grad_output.shape[1]] {
        return invalid_arg!("convolution_backward: bias gradient shape mismatch");
    }
    let dtype = check_dtypes(
        "convolution_backward",
        &[grad_bias.dtype, grad_output.dtype],
    )?;
    if is_channels_last(&grad_output.shape, &grad_output.strides) {
        return match dtype {
            DType::F32 => bias_channels_last::<f32>(grad_bias, grad_output),
            DType::F64 => bias_channels_last::<f64>(grad_bias, grad_output),
            d => not_implemented!("convolution_backward: dtype {}", d.name()),
        };
    }
    let (_keep, go) = contiguous(grad_output);
    match dtype {
        DType::F32 => bias_impl::<f32>(grad_bias, &go),
        DType::F64 => bias_impl::<f64>(grad_bias, &go),
        d => not_implemented!("convolution_backward: dtype {}", d.name()),
    }
}

/// Channels of a channels-last bias gradient summed per work unit.
const BIAS_BLOCK: usize = 64;

/// [`bias_impl`] for a channels-last `go`: per sample and block of channels (the work units),
/// the sample's pixels are added in order in `T` (vectorized across channels); then the samples'
/// sums are added in order in f64, as the planar path does per plane. The sums are the same
/// whichever thread takes a unit ([16, 32, 32, 32] on 2 threads: 42 us; one unit per channel
/// block, on one thread, with the sums through memory: 106 us).
fn bias_channels_last<T: GemmElem + Math>(gb: &TensorMut, go: &TensorRef) -> FooResult<()> {
    let (n, o) = (go.shape[0], go.shape[1]);
    let p: usize = go.shape[2..].iter().product();
    let blocks = o.div_ceil(BIAS_BLOCK);
    let (gbo, goo) = (SendPtr::of(gb.ptr), SendPtr::of(go.ptr));
    let s = gb.strides[0];
    // Units of at least 32K elements in all go parallel.
    let grain = ((1usize << 15) / (p * o.min(BIAS_BLOCK)).max(1)).max(1);
    with_scratch::<T, _>(n * o, |sums| {
        let part = SendPtr::new(sums.as_mut_ptr());
        parallel_for(n * blocks, grain, &|a, b| {
            for unit in a..b {
                let (ni, blk) = (unit / blocks, unit % blocks);
                let (c0, c1) = (blk * BIAS_BLOCK, ((blk + 1) * BIAS_BLOCK).min(o));
                // SAFETY: sample ni's sums of channels c0..c1, written by this unit only.
                let row = unsafe {
                    std::slice::from_raw_parts_mut(part.at((ni * o + c0) as isize), c1 - c0)
                };
                // SAFETY: the p pixels of sample ni (dense channels-last, o channels each).
                let sample = unsafe {
                    std::slice::from_raw_parts(goo.at((ni * p * o) as isize) as *const T, p * o)
                };
                add_pixels(sample, o, c0, row);
            }
        });
        let sums = &*sums;
        parallel_for(o, (1 << 14) / n.max(1) + 1, &|a, b| {
            for c in a..b {
                let mut total = 0f64;
                for ni in 0..n {
                    total += sums[ni * o + c].to_f64c();
                }
                // SAFETY: element c of grad_bias, written by this chunk only.
                unsafe { *gbo.at(c as isize * s) = T::from_f64c(total) };
            }
        });
    });
    Ok(())
}

crate::multiversion!(fn add_pixels<M: Math>(sample: &[M], o: usize, c0: usize, row: &mut [M]) => add_pixels_body);

/// `row` = the sum over the pixels of `sample` (`o` channels each) of channels `c0..`, in
/// pixel order.
/// 16 channels at a time, summed in registers (a running sum kept in `row` goes through memory
/// at every pixel).
#[inline(always)]
fn add_pixels_body<M: Math>(sample: &[M], o: usize, c0: usize, row: &mut [M]) {
    const LANES: usize = 16;
    for (k, sums) in row.chunks_mut(LANES).enumerate() {
        let c = c0 + k * LANES;
        if sums.len() == LANES {
            let mut acc = [M::zero(); LANES];
            for px in sample.chunks_exact(o) {
                let v = &px[c..c + LANES];
                for i in 0..LANES {
                    acc[i] = acc[i] + v[i];
                }
            }
            sums.copy_from_slice(&acc);
        } else {
            let w = sums.len();
            sums.fill(M::zero());
            for px in sample.chunks_exact(o) {
                sums.iter_mut()
                    .zip(&px[c..c + w])
                    .for_each(|(r, &v)| *r = *r + v);
            }
        }
    }
}

fn bias_impl<T: GemmElem + Math>(gb: &TensorMut, go: &TensorRef) -> FooResult<()> {
    let (n, o) = (go.shape[0], go.shape[1]);
    let p: usize = go.shape[2..].iter().product();
    let (gbo, goo) = (SendPtr::of(gb.ptr), SendPtr::of(go.ptr));
    let s = gb.strides[0];
    parallel_for(o, (1 << 14) / (n * p).max(1) + 1, &|a, b| {
        for oc in a..b {
            // SAFETY: the [p] planes (ni, oc) of the contiguous grad_output.
            let plane = |ni: usize| unsafe {
                std::slice::from_raw_parts(goo.at(((ni * o + oc) * p) as isize) as *const T, p)
            };
            // Each plane is summed in T with many lanes (vectorized), the planes in f64.
            let sum: f64 = (0..n).map(|ni| plane_sum(plane(ni)).to_f64c()).sum();
            // SAFETY: element oc of grad_bias, written by this chunk only.
            unsafe { *gbo.at(oc as isize * s) = T::from_f64c(sum) };
        }
    });
    Ok(())
}

fn plane_sum<M: Math>(x: &[M]) -> M {
    let mut total = M::zero();
    plane_sum_into(x, &mut total);
    total
}

crate::multiversion!(fn plane_sum_into<M: Math>(x: &[M], total: &mut M) => plane_sum_body);

#[inline(always)]
fn plane_sum_body<M: Math>(x: &[M], total: &mut M) {
    *total = crate::kernels::core::simd::sum(x);
}

/// For tests: dense `[n, c, d, h, w]` data stored as `[n, c, d, w, h]`, and the strides that
/// view the copy as the original shape (an input no dense fast path takes).
#[cfg(test)]
pub(crate) fn hw_exchanged<T: Copy>(
    data: &[T],
    shape: &[usize; 5],
) -> (Vec<T>, crate::tensor::Strides) {
    let [_, c, id, ih, iw] = *shape;
    let copy = (0..data.len())
        .map(|i| {
            let (hh, ww, rest) = (i % ih, i / ih % iw, i / (ih * iw));
            data[(rest * ih + hh) * iw + ww]
        })
        .collect();
    let strides = [c * id * ih * iw, id * ih * iw, ih * iw, 1, ih];
    (copy, strides.iter().map(|&v| v as isize).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    /// (n, c, input dhw, o, kernel, stride, padding, dilation, groups)
    pub(super) type KernelCase = (
        usize,
        usize,
        [usize; 3],
        usize,
        [usize; 3],
        [usize; 3],
        [usize; 3],
        [usize; 3],
        usize,
    );

    /// Small integers in [-4, 4]: every sum of the kernels' tests is exact in float32, whatever
    /// the order, so paths can be compared bit for bit.
    pub(super) fn ints(len: usize, seed: usize) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 7919 + seed) % 9) as f32 - 4.0)
            .collect()
    }

    /// A [`KernelCase`] with its shapes, parameters and small-integer input, weight and bias.
    pub(super) struct IntCase {
        pub xshape: [usize; 5],
        pub wshape: [usize; 5],
        pub oshape: [usize; 5],
        pub params: ConvParams,
        pub x: Owned<f32>,
        pub w: Owned<f32>,
        pub b: Owned<f32>,
        /// The case, for assertion messages.
        pub what: String,
    }

    pub(super) fn int_case((n, c, isp, o, k, s, p, d, groups): KernelCase) -> IntCase {
        let osp = [0, 1, 2].map(|i| (isp[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) / s[i] + 1);
        let xshape = [n, c, isp[0], isp[1], isp[2]];
        let wshape = [o, c / groups, k[0], k[1], k[2]];
        IntCase {
            xshape,
            wshape,
            oshape: [n, o, osp[0], osp[1], osp[2]],
            params: ConvParams {
                stride: s.map(|v| v as i64),
                padding: p.map(|v| v as i64),
                dilation: d.map(|v| v as i64),
                groups: groups as i64,
            },
            x: Owned::new(ints(xshape.iter().product(), 1), &xshape),
            w: Owned::new(ints(wshape.iter().product(), 2), &wshape),
            b: Owned::new(ints(o, 3), &[o]),
            what: format!("{xshape:?} {wshape:?} s{s:?} p{p:?} d{d:?} g{groups}"),
        }
    }

    fn data(n: usize, seed: u64) -> Vec<f64> {
        (0..n)
            .map(|i| ((i as u64 * 2654435761 + seed) % 13) as f64 - 6.0)
            .collect()
    }

    /// One test case: shapes `[n, c, d, h, w]`, `o` output channels, kernel `[kd, kh, kw]`,
    /// and per-dim stride, padding, dilation.
    #[derive(Clone, Copy, Debug)]
    struct Case {
        x: [usize; 5],
        o: usize,
        k: [usize; 3],
        s: [usize; 3],
        p: [usize; 3],
        d: [usize; 3],
        groups: usize,
    }

    impl Case {
        /// A 2-D case (D = 1) with square kernel and equal hyper-parameters in H and W.
        #[allow(clippy::too_many_arguments)]
        fn d2(
            n: usize,
            c: usize,
            h: usize,
            w: usize,
            o: usize,
            k: usize,
            s: usize,
            p: usize,
            d: usize,
            groups: usize,
        ) -> Self {
            Case {
                x: [n, c, 1, h, w],
                o,
                k: [1, k, k],
                s: [1, s, s],
                p: [0, p, p],
                d: [1, d, d],
                groups,
            }
        }
        fn params(&self) -> ConvParams {
            ConvParams {
                stride: self.s.map(|v| v as i64),
                padding: self.p.map(|v| v as i64),
                dilation: self.d.map(|v| v as i64),
                groups: self.groups as i64,
            }
        }
        fn osp(&self) -> [usize; 3] {
            [0, 1, 2].map(|i| {
                (self.x[i + 2] + 2 * self.p[i] - self.d[i] * (self.k[i] - 1) - 1) / self.s[i] + 1
            })
        }
        /// Input index of output position `y` and tap `a` in dim `i`, if inside.
        fn src(&self, i: usize, y: usize, a: usize) -> Option<usize> {
            let v = (y * self.s[i] + a * self.d[i]) as isize - self.p[i] as isize;
            (v >= 0 && v < self.x[i + 2] as isize).then_some(v as usize)
        }
        /// The input gradient of a 2-D 3x3 one-group case as the reference: the adjoint of
        /// [`Self::naive`], element by element.
        fn naive_input_gradient_3x3(&self, w: &[f64], gy: &[f64]) -> Vec<f64> {
            let [n, c, _, ih, iw] = self.x;
            let (o, [_, oh, ow]) = (self.o, self.osp());
            let mut gx = vec![0.0; n * c * ih * iw];
            for (ni, oc, ci, a, e) in (0..n).flat_map(|ni| {
                (0..o).flat_map(move |oc| {
                    (0..c).flat_map(move |ci| (0..9).map(move |t| (ni, oc, ci, t / 3, t % 3)))
                })
            }) {
                for (y, xw) in (0..oh).flat_map(|y| (0..ow).map(move |xw| (y, xw))) {
                    if let (Some(sy), Some(sx)) = (self.src(1, y, a), self.src(2, xw, e)) {
                        gx[((ni * c + ci) * ih + sy) * iw + sx] += w[(oc * c + ci) * 9 + a * 3 + e]
                            * gy[((ni * o + oc) * oh + y) * ow + xw];
                    }
                }
            }
            gx
        }
        /// Direct convolution as the reference.
        fn naive(&self, x: &[f64], w: &[f64]) -> Vec<f64> {
            let [n, c, id, ih, iw] = self.x;
            let [od, oh, ow] = self.osp();
            let [kd, kh, kw] = self.k;
            let (cg, og) = (c / self.groups, self.o / self.groups);
            let mut out = vec![0.0; n * self.o * od * oh * ow];
            let mut idx = 0;
            for ni in 0..n {
                for oc in 0..self.o {
                    let gi = oc / og;
                    for z in 0..od {
                        for y in 0..oh {
                            for xw in 0..ow {
                                let mut acc = 0.0;
                                for ci in 0..cg {
                                    for a in 0..kd {
                                        for b in 0..kh {
                                            for e in 0..kw {
                                                let (Some(sz), Some(sy), Some(sx)) = (
                                                    self.src(0, z, a),
                                                    self.src(1, y, b),
                                                    self.src(2, xw, e),
                                                ) else {
                                                    continue;
                                                };
                                                let xv = x[(((ni * c + gi * cg + ci) * id + sz)
                                                    * ih
                                                    + sy)
                                                    * iw
                                                    + sx];
                                                acc += xv
                                                    * w[(((oc * cg + ci) * kd + a) * kh + b) * kw
                                                        + e];
                                            }
                                        }
                                    }
                                }
                                out[idx] = acc;
                                idx += 1;
                            }
                        }
                    }
                }
            }
            out
        }
    }

    #[test]
    fn winograd_is_exact_on_small_integers() {
        // Winograd's transforms of small integers are exact in float32 (halves and quarters,
        // sums far below 2^24), so forward and input gradient must equal the direct sums bit
        // for bit, on the calling thread and on a 2-thread pool: odd and non-square planes
        // (half tiles), padding 0 and 2 (whose samples go in chunks of 3 and 1 under test).
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for case in [
            Case::d2(4, 96, 9, 7, 100, 3, 1, 1, 1, 1),
            Case::d2(16, 96, 6, 6, 96, 3, 1, 0, 1, 1),
            Case::d2(4, 96, 7, 7, 96, 3, 1, 2, 1, 1),
        ] {
            let [n, c, _, ih, iw] = case.x;
            let (o, [_, oh, ow]) = (case.o, case.osp());
            let (x, w) = (data(n * c * ih * iw, 1), data(o * c * 9, 2));
            let g = Geometry::new(
                &case.x,
                &[o, c, 1, 3, 3],
                &[n, o, 1, oh, ow],
                &case.params(),
            )
            .unwrap();
            assert!(winograd::applies(&g), "{case:?}");
            assert!(g
                .input_gradient_geometry()
                .is_some_and(|gt| winograd::applies(&gt)));
            let want = case.naive(&x, &w);
            let gy = data(want.len(), 3);
            let want_gx = case.naive_input_gradient_3x3(&w, &gy);
            let f32s = |v: &[f64], shape: &[usize]| {
                Owned::new(v.iter().map(|&a| a as f32).collect(), shape)
            };
            let (xo, wo, gyo) = (
                f32s(&x, &case.x),
                f32s(&w, &[o, c, 1, 3, 3]),
                f32s(&gy, &[n, o, 1, oh, ow]),
            );
            let run = || {
                let mut out = Owned::<f32>::zeros(&[n, o, 1, oh, ow]);
                conv_forward(&out.m(), &xo.r(), &wo.r(), None, &case.params()).unwrap();
                let mut gx = Owned::<f32>::zeros(&case.x);
                conv_backward_input(&gx.m(), &gyo.r(), &wo.r(), None, &case.params()).unwrap();
                (out.data, gx.data)
            };
            let (out, gx) = run();
            let as64 = |v: &[f32]| v.iter().map(|&a| a as f64).collect::<Vec<_>>();
            assert_eq!(as64(&out), want, "{case:?} forward");
            assert_eq!(as64(&gx), want_gx, "{case:?} input gradient");
            assert_eq!(pool.install(run), (out, gx), "{case:?} on 2 threads");
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn channels_last_winograd_is_exact_on_small_integers() {
        // As winograd_is_exact_on_small_integers, for the channels-last form: 16-channel
        // multiples from 32 to 112 (panels of 64 output channels and a narrower last one), odd
        // and non-square planes (half tiles), padding 0 to 2, a bias; forward and input
        // gradient, each with channels-last and contiguous operands; on the calling thread and
        // on 2 threads.
        if crate::kernels::core::simd::level() < 3 {
            return; // AVX-512 only (winograd_cl::applies)
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        // A [n, ch, plane] tensor (NCHW values) laid out channels-last or contiguous.
        let laid = |v: &[f64], n: usize, ch: usize, cl: bool| -> Vec<f32> {
            let p = v.len() / (n * ch);
            let mut out = vec![0f32; v.len()];
            for (i, &a) in v.iter().enumerate() {
                let (ni, c, pos) = (i / (ch * p), i / p % ch, i % p);
                out[if cl { (ni * p + pos) * ch + c } else { i }] = a as f32;
            }
            out
        };
        let strides = |shape: [usize; 5], cl: bool| -> Strides {
            match cl {
                true => channels_last_strides(&shape),
                false => contiguous_strides(&shape),
            }
        };
        for case in [
            Case::d2(3, 32, 9, 11, 48, 3, 1, 1, 1, 1),
            Case::d2(2, 64, 10, 11, 32, 3, 1, 0, 1, 1),
            Case::d2(1, 48, 10, 7, 112, 3, 1, 2, 1, 1),
            Case::d2(5, 32, 16, 16, 64, 3, 1, 1, 1, 1),
        ] {
            let [n, c, _, ih, iw] = case.x;
            let (o, [_, oh, ow]) = (case.o, case.osp());
            let (xshape, yshape) = (case.x, [n, o, 1, oh, ow]);
            let g = Geometry::new(&xshape, &[o, c, 1, 3, 3], &yshape, &case.params()).unwrap();
            assert!(winograd_cl::applies(&g), "{case:?}");
            assert!(g
                .input_gradient_geometry()
                .is_some_and(|gt| winograd_cl::applies(&gt)));
            let (x, w, b) = (data(n * c * ih * iw, 1), data(o * c * 9, 2), data(o, 3));
            let mut want = case.naive(&x, &w);
            for (i, v) in want.iter_mut().enumerate() {
                *v += b[i / (oh * ow) % o];
            }
            let gy = data(want.len(), 4);
            let want_gx = case.naive_input_gradient_3x3(&w, &gy);
            let wo = Owned::new(laid(&w, o, c, false), &[o, c, 1, 3, 3]);
            let bo = Owned::new(laid(&b, 1, o, false), &[o]);
            for (in_cl, out_cl) in [(true, true), (false, true), (true, false), (false, false)] {
                let (xl, gyl) = (laid(&x, n, c, in_cl), laid(&gy, n, o, in_cl));
                let run = || {
                    let at = |v: &[f32], shape: [usize; 5], cl: bool| TensorRef {
                        ptr: v.as_ptr() as *const u8,
                        shape: shape.to_vec().into(),
                        strides: strides(shape, cl),
                        dtype: DType::F32,
                    };
                    let mut y = vec![0f32; want.len()];
                    let mut gx = vec![0f32; x.len()];
                    let at_mut = |v: &mut [f32], shape: [usize; 5]| TensorMut {
                        ptr: v.as_mut_ptr() as *mut u8,
                        shape: shape.to_vec().into(),
                        strides: strides(shape, out_cl),
                        dtype: DType::F32,
                    };
                    let (xr, ym) = (at(&xl, xshape, in_cl), at_mut(&mut y, yshape));
                    conv_forward(&ym, &xr, &wo.r(), Some(&bo.r()), &case.params()).unwrap();
                    let (gyr, gxm) = (at(&gyl, yshape, in_cl), at_mut(&mut gx, xshape));
                    conv_backward_input(&gxm, &gyr, &wo.r(), None, &case.params()).unwrap();
                    (y, gx)
                };
                let (y, gx) = run();
                let layout = format!("{case:?} operands cl {in_cl} results cl {out_cl}");
                // (Not assert_eq: its message would print every element.)
                assert!(y == laid(&want, n, o, out_cl), "{layout} forward");
                assert!(
                    gx == laid(&want_gx, n, c, out_cl),
                    "{layout} input gradient"
                );
                assert!(pool.install(run) == (y, gx), "{layout} on 2 threads");
            }
        }
    }

    #[test]
    fn conv_forward_and_grads_match_naive() {
        // Each on the calling thread and on a 2-thread pool (samples split across threads; one
        // sample: parallel GEMMs). Stride-1 cases take the padded grid (with the width taps in
        // the rows when there are few channels, or one GEMM per width tap), others im2col.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for case in [
            Case::d2(2, 4, 7, 6, 6, 3, 2, 1, 2, 2),
            Case::d2(1, 4, 9, 8, 4, 3, 1, 1, 1, 1),
            Case::d2(5, 6, 8, 7, 9, 2, 1, 0, 1, 3),
            Case::d2(5, 24, 8, 7, 27, 2, 1, 0, 1, 3),
            // Grid, one GEMM per width tap forward (36 rows), full rows backward.
            Case::d2(3, 12, 7, 9, 8, 3, 1, 1, 1, 1),
            // Dilation 2, groups: grid with 54 rows for the input gradient.
            Case::d2(2, 16, 6, 14, 36, 3, 1, 1, 2, 2),
            // Padding wider than the kernel: the input gradient's grid crops its source.
            Case::d2(2, 8, 8, 9, 8, 2, 1, 2, 1, 1),
            // 32 output channels: vertical GEMM kernels for the weight gradient (fewer:
            // horizontal ones).
            Case::d2(3, 8, 6, 7, 32, 3, 1, 1, 1, 1),
            // One sample, large enough for split GEMMs.
            Case::d2(1, 16, 20, 20, 32, 3, 1, 1, 1, 1),
            // Too much grid padding (narrow input), too few output channels: im2col.
            Case::d2(2, 3, 5, 3, 4, 3, 1, 1, 1, 1),
            // 1 x k kernel with many channels: GEMMs straight on the padded planes.
            Case {
                x: [2, 33, 1, 3, 10],
                o: 8,
                k: [1, 1, 3],
                s: [1; 3],
                p: [0, 1, 1],
                d: [1; 3],
                groups: 1,
            },
            // 3-D, stride 1 (grid) and mixed strides (im2col).
            Case {
                x: [2, 8, 4, 5, 6],
                o: 8,
                k: [2, 3, 2],
                s: [1; 3],
                p: [1, 0, 1],
                d: [1, 1, 2],
                groups: 1,
            },
            Case {
                x: [3, 4, 5, 5, 6],
                o: 6,
                k: [3, 2, 3],
                s: [1, 2, 1],
                p: [1, 1, 0],
                d: [2, 1, 1],
                groups: 2,
            },
            // Depthwise (groups == C): output rows under 16 take the channel lanes, 3x3 stride
            // 1 and 2, 5x5 with padding wider than the input, dilation, 3-D, and 20 channels
            // (a full and a partial block of 16); a channel multiplier of 2 and rows of 18 take
            // the plane loops.
            Case::d2(2, 20, 5, 5, 20, 5, 1, 2, 1, 20),
            Case::d2(2, 3, 5, 18, 3, 3, 1, 1, 1, 3),
            Case::d2(1, 4, 6, 36, 4, 3, 2, 1, 1, 4),
            Case::d2(3, 8, 9, 7, 8, 3, 1, 1, 1, 8),
            Case::d2(2, 6, 9, 8, 6, 3, 2, 1, 1, 6),
            Case::d2(2, 4, 3, 2, 4, 5, 1, 3, 1, 4),
            Case::d2(1, 5, 9, 9, 5, 3, 1, 2, 2, 5),
            Case::d2(2, 3, 6, 7, 6, 3, 2, 1, 1, 3),
            Case {
                x: [2, 4, 4, 5, 6],
                o: 4,
                k: [3, 3, 2],
                s: [1, 2, 1],
                p: [1, 1, 0],
                d: [1, 1, 2],
                groups: 4,
            },
        ] {
            for strided in [false, true] {
                forward_and_grads_case(case, strided);
                pool.install(|| forward_and_grads_case(case, strided));
            }
        }
    }

    #[test]
    fn depthwise_channels_last_forward_matches_naive() {
        // Channels-last input and output: blocks of 16 channels and a tail by 4 pixels, taps
        // over padding skipped, strided and dilated; on the calling thread and on 2 threads.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for case in [
            Case::d2(2, 20, 9, 9, 20, 7, 1, 3, 1, 20),
            Case::d2(1, 16, 7, 10, 16, 3, 2, 1, 1, 16),
            Case::d2(2, 8, 11, 11, 8, 5, 1, 4, 2, 8),
            // Rows with untested blocks of 4 pixels inside, tested pixels at the edges.
            Case::d2(1, 32, 6, 20, 32, 3, 1, 1, 1, 32),
            Case::d2(2, 16, 9, 16, 16, 7, 1, 3, 1, 16),
        ] {
            let run = || {
                let [n, c, _, ih, iw] = case.x;
                let [_, oh, ow] = case.osp();
                let (ip, op) = (ih * iw, oh * ow);
                let x = data(n * c * ip, 1);
                let [_, kh, kw] = case.k;
                let wt = Owned::new(data(c * kh * kw, 2), &[c, 1, 1, kh, kw]);
                let want = case.naive(&x, &wt.data);
                let mut xcl = vec![0f64; x.len()];
                for (i, &v) in x.iter().enumerate() {
                    let (ni, ch, pos) = (i / (c * ip), i / ip % c, i % ip);
                    xcl[(ni * ip + pos) * c + ch] = v;
                }
                let cl = |p: usize, w: usize| -> Strides {
                    [p * c, 1, p * c, w * c, c]
                        .map(|s| s as isize)
                        .to_vec()
                        .into()
                };
                let xr = TensorRef {
                    ptr: xcl.as_ptr() as *const u8,
                    shape: case.x.to_vec().into(),
                    strides: cl(ip, iw),
                    dtype: DType::F64,
                };
                let mut out = vec![0f64; n * c * op];
                let om = TensorMut {
                    ptr: out.as_mut_ptr() as *mut u8,
                    shape: vec![n, c, 1, oh, ow].into(),
                    strides: cl(op, ow),
                    dtype: DType::F64,
                };
                conv_forward(&om, &xr, &wt.r(), None, &case.params()).unwrap();
                for (i, &v) in want.iter().enumerate() {
                    let (ni, ch, pos) = (i / (c * op), i / op % c, i % op);
                    assert_eq!(out[(ni * op + pos) * c + ch], v, "{case:?}");
                }
            };
            run();
            pool.install(run);
        }
    }

    /// `strided`: the input is a view with W and H exchanged in memory.
    fn forward_and_grads_case(case: Case, strided: bool) {
        let [n, c, id, ih, iw] = case.x;
        let o = case.o;
        let [kd, kh, kw] = case.k;
        let [od, oh, ow] = case.osp();
        let x = Owned::new(data(n * c * id * ih * iw, 1), &case.x);
        let wt = Owned::new(
            data(o * (c / case.groups) * kd * kh * kw, 2),
            &[o, c / case.groups, kd, kh, kw],
        );
        let want = case.naive(&x.data, &wt.data);
        let (xt, xt_strides) = hw_exchanged(&x.data, &case.x);
        let xr = if strided {
            TensorRef {
                ptr: xt.as_ptr() as *const u8,
                shape: case.x.to_vec().into(),
                strides: xt_strides,
                dtype: DType::F64,
            }
        } else {
            x.r()
        };
        let p = ConvParams {
            stride: case.s.map(|v| v as i64),
            padding: case.p.map(|v| v as i64),
            dilation: case.d.map(|v| v as i64),
            groups: case.groups as i64,
        };
        let mut out = Owned::<f64>::zeros(&[n, o, od, oh, ow]);
        conv_forward(&out.m(), &xr, &wt.r(), None, &p).unwrap();
        assert_eq!(out.data, want, "{case:?}");
        // With a bias.
        let bias = Owned::new((0..o).map(|i| i as f64 - 2.0).collect(), &[o]);
        let mut outb = Owned::<f64>::zeros(&[n, o, od, oh, ow]);
        conv_forward(&outb.m(), &xr, &wt.r(), Some(&bias.r()), &p).unwrap();
        let op = od * oh * ow;
        for (i, (&got, &w)) in outb.data.iter().zip(&want).enumerate() {
            assert_eq!(got, w + bias.data[i / op % o], "{case:?} bias, element {i}");
        }

        // Adjoint checks: <conv(x, w), gy> == <x, grad_input(gy)> == <w, grad_weight(x, gy)>.
        let gy = Owned::new(data(out.data.len(), 3), &[n, o, od, oh, ow]);
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let lhs = dot(&out.data, &gy.data);
        let mut gx = Owned::<f64>::zeros(&case.x);
        conv_backward_input(&gx.m(), &gy.r(), &wt.r(), None, &p).unwrap();
        assert_eq!(dot(&gx.data, &x.data), lhs, "{case:?}");
        // Element by element: gx[ni, cin, z, y, x] = sum of gy * the weight that joined them.
        let (cg, og) = (c / case.groups, o / case.groups);
        let mut want_gx = vec![0.0; gx.data.len()];
        for ni in 0..n {
            for oc in 0..o {
                for ci in 0..cg {
                    let cin = oc / og * cg + ci;
                    for (a, b, e) in (0..kd)
                        .flat_map(|a| (0..kh).flat_map(move |b| (0..kw).map(move |e| (a, b, e))))
                    {
                        let wv = wt.data[(((oc * cg + ci) * kd + a) * kh + b) * kw + e];
                        for z in 0..od {
                            for y in 0..oh {
                                for xw in 0..ow {
                                    let (Some(sz), Some(sy), Some(sx)) =
                                        (case.src(0, z, a), case.src(1, y, b), case.src(2, xw, e))
                                    else {
                                        continue;
                                    };
                                    want_gx[(((ni * c + cin) * id + sz) * ih + sy) * iw + sx] +=
                                        wv * gy.data[(((ni * o + oc) * od + z) * oh + y) * ow + xw];
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(gx.data, want_gx, "{case:?} grad_input");
        let mut gxb = Owned::<f64>::zeros(&case.x);
        let cbias = Owned::new((0..c).map(|i| i as f64 + 1.0).collect(), &[c]);
        conv_backward_input(&gxb.m(), &gy.r(), &wt.r(), Some(&cbias.r()), &p).unwrap();
        let ip = id * ih * iw;
        for (i, (&got, &w)) in gxb.data.iter().zip(&want_gx).enumerate() {
            assert_eq!(
                got,
                w + cbias.data[i / ip % c],
                "{case:?} grad_input bias, element {i}"
            );
        }

        let mut gw = Owned::<f64>::zeros(&wt.shape);
        conv_backward_weight(&gw.m(), &xr, &gy.r(), &p).unwrap();
        assert_eq!(dot(&gw.data, &wt.data), lhs, "{case:?}");
        // Element by element: gw[oc, ci, a, b, e] = sum over n and outputs of gy * the input
        // it touched.
        let kk = kd * kh * kw;
        for (i, &got) in gw.data.iter().enumerate() {
            let (oc, ci, a, b, e) = (
                i / (cg * kk),
                i / kk % cg,
                i / (kh * kw) % kd,
                i / kw % kh,
                i % kw,
            );
            let cin = oc / og * cg + ci;
            let mut want = 0.0;
            for ni in 0..n {
                for z in 0..od {
                    for y in 0..oh {
                        for xw in 0..ow {
                            let (Some(sz), Some(sy), Some(sx)) =
                                (case.src(0, z, a), case.src(1, y, b), case.src(2, xw, e))
                            else {
                                continue;
                            };
                            want += gy.data[(((ni * o + oc) * od + z) * oh + y) * ow + xw]
                                * x.data[(((ni * c + cin) * id + sz) * ih + sy) * iw + sx];
                        }
                    }
                }
            }
            assert_eq!(got, want, "{case:?} grad_weight element {i}");
        }
        let mut gb = Owned::<f64>::zeros(&[o]);
        conv_backward_bias(&gb.m(), &gy.r()).unwrap();
        let per: f64 = (0..n)
            .map(|ni| gy.data[ni * o * op..][..op].iter().sum::<f64>())
            .sum();
        assert_eq!(gb.data[0], per);
    }

    #[test]
    fn channels_last_bias_gradient_is_the_f64_sum_whatever_the_threads() {
        // Channel counts around the 16-lane chunks and the 64-channel units: tails of 8 and 2,
        // two and three units. Each on the calling thread and on pools of 2 and 3 threads.
        use crate::kernels::core::map::testing::uniform;
        for (n, o, p) in [(3, 8, 5), (2, 40, 7), (4, 80, 6), (2, 130, 3), (1, 16, 2)] {
            let data: Vec<f32> = uniform(n * o * p, o as u64, -2.0, 2.0)
                .into_iter()
                .map(|v| v as f32)
                .collect();
            // [n, o, 1, 1, p] stored channels-last: element (ni, c, q) at (ni * p + q) * o + c.
            let go = TensorRef {
                ptr: data.as_ptr() as *const u8,
                shape: [n, o, 1, 1, p].as_slice().into(),
                strides: [
                    (o * p) as isize,
                    1,
                    (o * p) as isize,
                    (o * p) as isize,
                    o as isize,
                ]
                .as_slice()
                .into(),
                dtype: DType::F32,
            };
            assert!(is_channels_last(&go.shape, &go.strides));
            let run = || {
                let mut gb = Owned::<f32>::zeros(&[o]);
                conv_backward_bias(&gb.m(), &go).unwrap();
                gb.data
            };
            let here = run();
            for threads in [2, 3] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let there = pool.install(run);
                let same = here
                    .iter()
                    .zip(&there)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "n {n} o {o} p {p}: {threads} threads");
            }
            for (c, &got) in here.iter().enumerate() {
                let want: f64 = (0..n * p).map(|i| data[i * o + c] as f64).sum();
                assert!(
                    (got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "channel {c}"
                );
            }
        }
    }

    #[test]
    fn conv_valid_range_edges() {
        assert_eq!(valid_range(5, 1, -1, 5), (1, 5));
        assert_eq!(valid_range(3, 2, -1, 5), (1, 3));
        assert_eq!(valid_range(4, 1, 2, 5), (0, 3));
        assert_eq!(valid_range(4, 1, 9, 5), (0, 0));
    }
}
