//! Winograd F(2x2, 3x3) for float32 3x3 stride-1 convolutions of small planes: 2.25x fewer
//! multiply-adds than the direct and im2col paths.
//!
//! The output is cut into 2x2 tiles, each computed from the 4x4 input patch around it. In the
//! transformed domain a tile's 3x3 convolution is 16 independent products: with `U = G g G^T`
//! per (output channel, input channel) weight `g` and `V = B^T d B` per (input channel, tile)
//! patch `d`, point `xi` of every tile's result is `M[xi] = U[xi] @ V[xi]`, an `[o, c] @ [c,
//! tiles]` GEMM, and the tile is `A^T M A` (Lavin and Gray, "Fast Algorithms for Convolutional
//! Neural Networks", 2015). The input and output transforms are additions only; `G` has
//! halves, exact in binary.
//!
//! Where it pays ([`applies`]): the other paths run these convolutions at 80-90% of the FMA
//! peak, so fewer products is the only large gain left, but the transforms cost memory passes
//! per channel and tile (input, output) and per channel pair (weight), so it takes wide layers
//! (96+ channels), 64+ tiles per chunk of samples, and matrices that stay in cache (the
//! samples go in chunks). Zen 4, 1 thread, thread CPU time against the previous paths, two
//! runs, forward / input gradient: [8,128,8,8] 0.77-0.84 / 0.71-0.75, [8,128,16,16]
//! 0.79-0.81 / 0.86-0.92, [8,128,28,28] 0.75-0.85 / 0.66-0.74, [16,256,14,14] 0.68-0.70 /
//! 0.68, [32,128,8,8] 0.85-0.94 / 0.82-0.90; on 2 threads 0.65-0.93 for the same shapes.
//! Narrower layers ([8,64,16,16] 1.15) and fewer tiles ([1,256,4,4] 4x) lose. The transforms
//! run a vector of tiles of one channel at a time, so tiny planes use few lanes: vectorizing
//! over channels instead (channels-last transforms) is what would widen this range.
//!
//! The rounding differs from a direct sum (the transforms add and subtract before the
//! products), by a few units in the last place of the inputs' magnitudes: within the
//! tolerances PyTorch's tests give float32 convolution. Every element is computed by the same
//! operations in the same order whatever the thread count (each GEMM runs on one thread).

use super::Geometry;
use crate::kernels::core::gemm::{gemm_raw, Mat};
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::kernels::core::scratch::with_scratch;
#[cfg(target_arch = "x86_64")]
use crate::kernels::core::transpose::{avx2, transpose8x8_32};
use crate::runtime::{pool, team};
use crate::tensor::{TensorMut, TensorRef};

/// Points of the transformed domain per tile: (2 + 3 - 1)^2.
pub(super) const XI: usize = 16;

/// Fewer channels than this: the input and output transforms (per channel and tile) cost more
/// than the products they save (per channel pair and tile). Zen 4, 1 thread, thread CPU time
/// against the previous paths: [32,64,8,8] level, [8,96,8,8] 0.88, [8,128,8,8] 0.78.
const MIN_CHANNELS: usize = 96;

/// Fewer tiles than this (per chunk of samples): the weight transform, per channel pair, costs
/// more than the products save ([1,256,4,4]: 4 tiles, 4x the time). Zen 4, 1 thread, thread
/// CPU time against the batched GEMM and padded-grid paths, forward / input gradient:
/// [8,256,4,4] (32 tiles) 0.87 / 0.77-0.80, [2,128,8,8] (32) 0.86 / 0.76, [1,256,14,14] (49)
/// 0.83-0.85 / 0.75-0.80, [12,256,4,4] (48) 0.75 / 0.64; 2 threads, forward, wall medians in a
/// quiet spell: [8,256,4,4] 0.80 -> 0.65 ms, [1,256,14,14] 1.29 -> 0.99 ms.
const MIN_TILES: usize = 32;

/// Output planes below 4x4 positions are one tile per sample: left to the batched GEMM; above
/// 32x32 the other kernels are not measured to lose.
const MIN_POSITIONS: usize = 16;
const MAX_POSITIONS: usize = 1024;

/// Largest transformed weight, input or output (elements of one of the 16 points' matrices;
/// the samples go in chunks to stay within it): beyond it they no longer stay in cache between
/// the transforms and the GEMMs, and a buffer above the kept-scratch size faults in fresh pages
/// every call ([8,128,32,32] in one chunk: 1.5x the time).
const MAX_POINT_MATRIX: usize = 1 << 16;

/// A 3x3 weight as strided taps: element `(o, c, a, b)` at `ptr + o*so + c*sc + a*sa + b*sb`.
/// The input gradient reads the forward weight transposed and flipped through negative strides.
#[derive(Clone, Copy)]
pub(super) struct Taps {
    pub ptr: *const f32,
    pub so: isize,
    pub sc: isize,
    pub sa: isize,
    pub sb: isize,
}

// SAFETY: a `Taps` addresses a weight that is only read while a convolution runs (its tensor
// outlives the call), so the members of a parallel region may all read through it.
unsafe impl Send for Taps {}
// SAFETY: as for `Send`.
unsafe impl Sync for Taps {}

impl Taps {
    /// The forward weight `[o, c, 1, 3, 3]` with its strides.
    pub(super) fn forward(w: &TensorRef) -> Taps {
        Taps {
            ptr: w.ptr as *const f32,
            so: w.strides[0],
            sc: w.strides[1],
            sa: w.strides[3],
            sb: w.strides[4],
        }
    }

    /// The weight of the input gradient as a forward convolution: `w'[c, o, a, b] =
    /// w[o, c, 2 - a, 2 - b]`.
    pub(super) fn turned(w: &TensorRef) -> Taps {
        let (sa, sb) = (w.strides[3], w.strides[4]);
        Taps {
            ptr: (w.ptr as *const f32).wrapping_offset(2 * sa + 2 * sb),
            so: w.strides[1],
            sc: w.strides[0],
            sa: -sa,
            sb: -sb,
        }
    }
}

/// Whether [`forward`] takes this float32 convolution: one [`kernel_fits`], with channels and
/// planes where it pays ([`MIN_CHANNELS`], [`MIN_POSITIONS`]).
pub(super) fn applies(g: &Geometry) -> bool {
    let (th, tw) = tiles(g);
    kernel_fits(g)
        && g.c >= MIN_CHANNELS
        && g.o >= MIN_CHANNELS
        && g.ip() > 0 // (an empty plane: the output is the bias; ATen refuses it anyway)
        && g.op() >= MIN_POSITIONS
        && g.op() <= MAX_POSITIONS
        && g.o * g.c <= MAX_POINT_MATRIX
        && g.c.max(g.o) * th * tw <= MAX_POINT_MATRIX
        && chunk_samples(g) * th * tw >= MIN_TILES
}

/// Whether `g` is a convolution F(2x2, 3x3) computes: 2-D, one group, a 3x3 kernel, stride
/// and dilation 1, padding of at most 2 (the input patch reaches no further).
pub(super) fn kernel_fits(g: &Geometry) -> bool {
    g.groups == 1
        && g.ksp == [1, 3, 3]
        && g.isp[0] == 1
        && g.osp[0] == 1
        && g.padding[0] == 0
        && g.stride == [1, 1, 1]
        && g.dilation == [1, 1, 1]
        && (1..3).all(|i| (0..=2).contains(&g.padding[i]))
}

/// What a chunk of samples keeps V and M within: [`MAX_POINT_MATRIX`], smaller in the unit
/// tests so that their small layers (exact sums against a naive loop) take several chunks.
const CHUNK_POINT_MATRIX: usize = if cfg!(test) {
    1 << 13
} else {
    MAX_POINT_MATRIX
};

/// Samples transformed and multiplied together: as many as keep V and M within
/// [`CHUNK_POINT_MATRIX`] elements per point.
fn chunk_samples(g: &Geometry) -> usize {
    let (th, tw) = tiles(g);
    (CHUNK_POINT_MATRIX / (g.c.max(g.o) * th * tw).max(1)).clamp(1, g.n.max(1))
}

/// Elements from one point's matrix (of U, V or M) to the next: a whole number of cache lines
/// and one more, so that the 16 points of an element are not a power of two apart (at 64 KiB
/// apart, the transforms' 16 loads or stores per element all fell in one L1 set and evicted
/// each other: the weight transform took three times the GEMMs' time).
pub(super) fn point_stride(len: usize) -> usize {
    len.next_multiple_of(16) + 16
}

/// Tiles of a plane: (rows, columns).
pub(super) fn tiles(g: &Geometry) -> (usize, usize) {
    (g.osp[1].div_ceil(2), g.osp[2].div_ceil(2))
}

/// `out = conv(input, w) (+ bias)` for a convolution [`applies`] holds for. `out` and `input`
/// may have any strides.
pub(super) fn forward(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    w: Taps,
    bias: Option<&[f32]>,
) {
    let (th, tw) = tiles(g);
    let chunk = chunk_samples(g);
    let tc = chunk * th * tw;
    let (c, o) = (g.c, g.o);
    let (su, sv, sm) = (
        point_stride(o * c),
        point_stride(c * tc),
        point_stride(o * tc),
    );
    with_scratch(XI * su, |u: &mut [f32]| {
        with_scratch(XI * sv, |v: &mut [f32]| {
            with_scratch(XI * sm, |m: &mut [f32]| {
                let (up, vp, mp) = (
                    SendPtr::new(u.as_mut_ptr()),
                    SendPtr::new(v.as_mut_ptr()),
                    SendPtr::new(m.as_mut_ptr()),
                );
                let blocks = o.div_ceil(LANES);
                for s0 in (0..g.n).step_by(chunk) {
                    let samples = s0..(s0 + chunk).min(g.n);
                    let t = samples.len() * th * tw;
                    transform_input(g, input, v, sv, samples.clone());
                    // Each member transforms the weights of its own output channels (with the
                    // first chunk) and multiplies those rows of U at all 16 points: the 16 x o x c
                    // transformed weights never cross cores. Split by points (each GEMM on one
                    // thread, every point's rows of U transformed by both), a member read half its
                    // U from the other core: Zen 5, 2 threads, [8,256,4,4] -> 256, 8 runs of
                    // alternating rounds: 608-610 -> 355-371 us in the 2 runs where the host had
                    // the vCPUs far apart, 301-308 -> 303-315 in the others (the static split
                    // balances less well). A GEMM sums its depth in one piece whatever its rows
                    // (`gemm_raw`), so the bits do not depend on the split.
                    team::run_fn(pool::num_threads(), &|tid, size| {
                        let per = blocks.div_ceil(size);
                        let (b0, b1) = ((tid * per).min(blocks), ((tid + 1) * per).min(blocks));
                        if b0 == b1 {
                            return;
                        }
                        if s0 == 0 {
                            transform_weight_blocks(g, w, up, su, b0..b1);
                        }
                        let (o0, o1) = (b0 * LANES, (b1 * LANES).min(o));
                        for xi in 0..XI {
                            // SAFETY: rows o0..o1 of point xi's [o, c] block of U, written above
                            // (or with the first chunk) by this member, and its [c, t] block of
                            // V, read only; those rows of its [o, t] block of M, written only
                            // here.
                            unsafe {
                                gemm_raw(
                                    o1 - o0,
                                    t,
                                    c,
                                    mp.at((xi * sm + o0 * t) as isize),
                                    t as isize,
                                    1,
                                    false,
                                    Mat {
                                        ptr: up.at((xi * su + o0 * c) as isize) as *const f32,
                                        rs: c as isize,
                                        cs: 1,
                                    },
                                    Mat {
                                        ptr: vp.at((xi * sv) as isize) as *const f32,
                                        rs: t as isize,
                                        cs: 1,
                                    },
                                    1.0,
                                    false,
                                )
                            };
                        }
                    });
                    transform_output(g, m, sm, out, bias, samples);
                }
            })
        })
    })
}

/// Input channels whose weights are transformed side by side (one AVX-512 vector).
const LANES: usize = 16;

/// `U[xi, o, c] = (G g G^T)[xi]` for every (output channel, input channel) weight `g`, with
/// `G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]`: per output channel,
/// [`LANES`] input channels at a time, through small tap-major blocks that the arithmetic
/// reads and writes a vector at a time (element by element it took longer than the GEMMs).
pub(super) fn transform_weight(g: &Geometry, w: Taps, u: &mut [f32], su: usize) {
    let up = SendPtr::new(u.as_mut_ptr());
    // Blocks of LANES output channels, so that the taps a block reads (LANES x LANES weights)
    // come from a few cache lines in either layout: the input gradient's transposed weight,
    // read one output channel at a time across all input channels, streamed the whole weight
    // from L3 once per output channel.
    parallel_for(g.o.div_ceil(LANES), 1, &|b0, b1| {
        transform_weight_blocks(g, w, up, su, b0..b1)
    });
}

/// [`transform_weight`] for the output channels of `LANES`-channel blocks `blocks`, into U at
/// `up` (no one else accesses those rows of U meanwhile).
fn transform_weight_blocks(
    g: &Geometry,
    w: Taps,
    up: SendPtr<f32>,
    su: usize,
    blocks: std::ops::Range<usize>,
) {
    let (c, o) = (g.c, g.o);
    let Taps {
        ptr,
        so,
        sc,
        sa,
        sb,
    } = w;
    let wp = SendPtr::<f32>::of(ptr);
    // Each weight's 9 taps in a run (a dense forward weight): the taps of 8 weights are an
    // 8 x 8 register transpose and a column, where a load and a store per tap and weight took
    // as long as the whole transform's arithmetic and half the GEMMs' time ([8,256,4,4]).
    #[cfg(target_arch = "x86_64")]
    let whole_taps = sb == 1 && sa == 3 && avx2();
    #[cfg(not(target_arch = "x86_64"))]
    let whole_taps = false;
    {
        let mut k = [[0f32; LANES]; 9];
        let mut out = [[0f32; LANES]; XI];
        for ob in blocks {
            let (cbs, ois) = (c.div_ceil(LANES), LANES.min(o - ob * LANES));
            for i in 0..cbs * ois {
                // A dense forward weight is read in order, an output channel's run at a time
                // (block by block, 16 runs at once, its loads had waited on memory).
                let (cb, oi) = match whole_taps {
                    true => (i % cbs * LANES, ob * LANES + i / cbs),
                    false => (i / ois * LANES, ob * LANES + i % ois),
                };
                let n = LANES.min(c - cb);
                {
                    let base = oi as isize * so + cb as isize * sc;
                    if whole_taps && n == LANES {
                        // SAFETY: AVX2 (checked); each 8x8 block reads taps 0..8 of 8 weights
                        // (oi, cb + l), each a run of 9 floats inside the weight, and writes
                        // `k`'s rows 0..8 at lanes l..l + 8.
                        #[cfg(target_arch = "x86_64")]
                        unsafe {
                            for l in [0, 8] {
                                transpose8x8_32(
                                    wp.at(base + l as isize * sc),
                                    sc,
                                    k.as_mut_ptr().cast::<f32>().add(l),
                                    LANES,
                                );
                            }
                        }
                        for (l, tap) in k[8].iter_mut().enumerate() {
                            // SAFETY: tap 8 of weight (oi, cb + l), as above.
                            *tap = unsafe { *wp.at(base + l as isize * sc + 8) };
                        }
                    } else {
                        for l in 0..n {
                            let base = base + l as isize * sc;
                            for (tap, row) in k.iter_mut().enumerate() {
                                let (a, b) = ((tap / 3) as isize, (tap % 3) as isize);
                                // SAFETY: a tap of weight (oi, cb + l), inside the weight by
                                // the caller's strides.
                                row[l] = unsafe { *wp.at(base + a * sa + b * sb) };
                            }
                        }
                    }
                    weight_lanes::<f32>(&k, &mut out);
                    for (xi, row) in out.iter().enumerate() {
                        // SAFETY: elements (xi, oi, cb..cb + n) of U; the rows of block ob
                        // are this task's.
                        let dst = unsafe { up.slice_mut(xi * su + oi * c + cb, n) };
                        if let (Ok(d), Ok(r)) = (
                            <&mut [f32; LANES]>::try_from(&mut *dst),
                            <&[f32; LANES]>::try_from(&row[..n]),
                        ) {
                            *d = *r; // a whole vector: no library call
                        } else {
                            dst.copy_from_slice(&row[..n]);
                        }
                    }
                }
            }
        }
    }
}

/// [`transform_weight`]'s arithmetic on [`LANES`] weights: `k[3 a + b][lane]` in,
/// `u[xi][lane]` out.
// `F` only because the multiversion macros take a type parameter.
#[allow(clippy::extra_unused_type_parameters)]
#[inline(always)]
fn weight_lanes_body<F>(k: &[[f32; LANES]; 9], u: &mut [[f32; LANES]; XI]) {
    for l in 0..LANES {
        // G g: rows combined.
        let mut r = [[0f32; 3]; 4];
        for b in 0..3 {
            let (g0, g1, g2) = (k[b][l], k[3 + b][l], k[6 + b][l]);
            r[0][b] = g0;
            r[1][b] = 0.5 * (g0 + g1 + g2);
            r[2][b] = 0.5 * (g0 - g1 + g2);
            r[3][b] = g2;
        }
        // (G g) G^T: columns combined.
        for (i, ri) in r.iter().enumerate() {
            u[i * 4][l] = ri[0];
            u[i * 4 + 1][l] = 0.5 * (ri[0] + ri[1] + ri[2]);
            u[i * 4 + 2][l] = 0.5 * (ri[0] - ri[1] + ri[2]);
            u[i * 4 + 3][l] = ri[2];
        }
    }
}

crate::multiversion!(fn weight_lanes<F: Copy>(k: &[[f32; LANES]; 9], u: &mut [[f32; LANES]; XI]) => weight_lanes_body);

/// `V[xi, c, t] = (B^T d B)[xi]` for every (input channel, tile) patch `d` (zeros outside the
/// input), with `B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]`. Tile `t`
/// is `(sample * rows + row) * columns + column`, so a plane's tiles are one run of each row
/// of V: per (sample, channel), the plane is copied dense with a zero after it, and the
/// transform reads each tile's 16 patch elements through one index map for every plane
/// ([`patch_map`]), a vector of tiles at a time ([`input_lanes`]).
fn transform_input(
    g: &Geometry,
    input: &TensorRef,
    v: &mut [f32],
    sv: usize,
    samples: std::ops::Range<usize>,
) {
    let (th, tw) = tiles(g);
    let (t, nt) = (samples.len() * th * tw, th * tw);
    let c = g.c;
    let (ih, iw) = (g.isp[1], g.isp[2]);
    let ip = ih * iw;
    let map = patch_map(g);
    let xs = &input.strides;
    let xp = SendPtr::<f32>::of(input.ptr);
    let vp = SendPtr::new(v.as_mut_ptr());
    // Units channel by channel, a channel's samples side by side: a task then writes whole
    // rows of V (sample by sample, tasks wrote interleaved pieces of each row's cache lines,
    // and on 2 threads this transform took 7x its 1-thread CPU time).
    let ns = samples.len();
    parallel_for(ns * c, 1, &|u0, u1| {
        let mut plane = vec![0f32; ip + 1];
        for unit in u0..u1 {
            let (ci, nl) = (unit / ns, unit % ns);
            let ni = samples.start + nl;
            let x0 = ni as isize * xs[0] + ci as isize * xs[1];
            for (y, row) in plane[..ip].chunks_exact_mut(iw).enumerate() {
                let src = x0 + y as isize * xs[3];
                for (x, e) in row.iter_mut().enumerate() {
                    // SAFETY: element (y, x) of this channel's input plane, with its strides.
                    *e = unsafe { *xp.at(src + x as isize * xs[4]) };
                }
            }
            // SAFETY: `map` has 16 * nt entries, each at most `ip` (the zero at the end of
            // `plane`); the 16 runs (xi, ci, nl * nt..) of V are this (sample, channel)'s.
            unsafe {
                input_lanes::<f32>(
                    plane.as_ptr(),
                    map.as_ptr(),
                    vp.at((ci * t + nl * nt) as isize),
                    sv,
                    nt,
                )
            };
        }
    });
}

/// For patch element `k = 4 i + j` of tile `(ty, tx)`: entry `k * tiles + ty * columns + tx`
/// is the index in a dense input plane of the element it reads, input row `2 ty + i - pad`,
/// column `2 tx + j - pad`, or the plane's size (the zero after it) where that is padding.
fn patch_map(g: &Geometry) -> Vec<u32> {
    let (th, tw) = tiles(g);
    let (ih, iw) = (g.isp[1] as isize, g.isp[2] as isize);
    let (ph, pw) = (g.padding[1], g.padding[2]);
    let zero = (ih * iw) as u32;
    let mut map = Vec::with_capacity(XI * th * tw);
    for k in 0..XI {
        let (i, j) = ((k / 4) as isize, (k % 4) as isize);
        for ty in 0..th as isize {
            for tx in 0..tw as isize {
                let (y, x) = (2 * ty + i - ph, 2 * tx + j - pw);
                let inside = (0..ih).contains(&y) && (0..iw).contains(&x);
                map.push(if inside { (y * iw + x) as u32 } else { zero });
            }
        }
    }
    map
}

/// [`transform_input`]'s arithmetic over `n` tiles: patch element `k` of tile `x` is
/// `plane[map[k n + x]]`; `V[xi]` of tile `x` goes to `v[xi * stride + x]`. Raw reads and
/// writes: with slices (bounds checks) or closures (not inlined into the AVX-512 copy) the
/// loop did not vectorize.
///
/// # Safety
/// `map` has `16 n` entries that index `plane`; `v + xi * stride + x` is writable for every
/// `xi < 16`, `x < n`.
// `F` only because the multiversion macros take a type parameter.
#[allow(clippy::extra_unused_type_parameters)]
#[inline(always)]
unsafe fn input_lanes_body<F>(
    plane: *const f32,
    map: *const u32,
    v: *mut f32,
    stride: usize,
    n: usize,
) {
    for x in 0..n {
        macro_rules! at {
            ($k:expr) => {
                // SAFETY: map[k n + x] (k < 16, x < n) indexes `plane`: the caller's contract.
                unsafe { *plane.add(*map.add($k * n + x) as usize) }
            };
        }
        macro_rules! put {
            ($k:expr, $val:expr) => {
                // SAFETY: writable for k < 16, x < n: the caller's contract.
                unsafe { *v.add($k * stride + x) = $val }
            };
        }
        for i in 0..4 {
            // Row i of B^T d, columns 0..4; then its columns combined.
            let (a, b, e, f) = match i {
                0 => (
                    at!(0) - at!(8),
                    at!(1) - at!(9),
                    at!(2) - at!(10),
                    at!(3) - at!(11),
                ),
                1 => (
                    at!(4) + at!(8),
                    at!(5) + at!(9),
                    at!(6) + at!(10),
                    at!(7) + at!(11),
                ),
                2 => (
                    at!(8) - at!(4),
                    at!(9) - at!(5),
                    at!(10) - at!(6),
                    at!(11) - at!(7),
                ),
                _ => (
                    at!(4) - at!(12),
                    at!(5) - at!(13),
                    at!(6) - at!(14),
                    at!(7) - at!(15),
                ),
            };
            put!(i * 4, a - e);
            put!(i * 4 + 1, b + e);
            put!(i * 4 + 2, e - b);
            put!(i * 4 + 3, b - f);
        }
    }
}

crate::unsafe_multiversion!(unsafe fn input_lanes<F: Copy>(plane: *const f32, map: *const u32, v: *mut f32, stride: usize, n: usize) => input_lanes_body);

/// `out[n, o, 2 ty + i, 2 tx + j] = (A^T M A)[i, j] (+ bias[o])` for every tile, with
/// `A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]`; positions past an odd output size are dropped. Per
/// (output channel, sample), the plane's tiles are one run of each row of M: the transform
/// runs on those runs a vector at a time ([`output_lanes`]), then the plane is written.
fn transform_output(
    g: &Geometry,
    m: &[f32],
    sm: usize,
    out: &TensorMut,
    bias: Option<&[f32]>,
    samples: std::ops::Range<usize>,
) {
    let (th, tw) = tiles(g);
    let (ns, nt) = (samples.len(), th * tw);
    let t = ns * nt;
    let o = g.o;
    let (oh, ow) = (g.osp[1], g.osp[2]);
    let os = &out.strides;
    let op = SendPtr::<f32>::of(out.ptr);
    assert!(m.len() >= (XI - 1) * sm + o * t);
    let mp = SendPtr::<f32>::of(m.as_ptr());
    parallel_for(o * ns, 1, &|u0, u1| {
        let mut y = vec![0f32; 4 * nt];
        for unit in u0..u1 {
            let (oi, nl) = (unit / ns, unit % ns);
            let ni = samples.start + nl;
            // SAFETY: the runs (xi, oi, nl * nt..) of M, inside `m` (asserted above); `y` has
            // 4 nt elements.
            unsafe {
                output_lanes::<f32>(
                    mp.at((oi * t + nl * nt) as isize),
                    sm,
                    y.as_mut_ptr(),
                    nt,
                    bias.map_or(0.0, |b| b[oi]),
                )
            };
            let base = ni as isize * os[0] + oi as isize * os[1];
            for py in 0..oh {
                let (ty, qi) = (py / 2, py % 2);
                let dst = base + py as isize * os[3];
                for px in 0..ow {
                    let (tx, qj) = (px / 2, px % 2);
                    // SAFETY: element (ni, oi, py, px) of `out` (in bounds, with its
                    // strides), of this task's (output channel, sample).
                    unsafe {
                        *op.at(dst + px as isize * os[4]) = y[(qi * 2 + qj) * nt + ty * tw + tx]
                    };
                }
            }
        }
    });
}

/// [`transform_output`]'s arithmetic over `n` tiles: `M[xi]` of tile `x` is
/// `m[xi * stride + x]`; output (i, j) of the tile, plus `bias`, goes to `y[(2 i + j) n + x]`.
/// Raw, as [`input_lanes_body`].
///
/// # Safety
/// `m + xi * stride + x` is readable for every `xi < 16`, `x < n`; `y` has `4 n` elements.
// `F` only because the multiversion macros take a type parameter.
#[allow(clippy::extra_unused_type_parameters)]
#[inline(always)]
unsafe fn output_lanes_body<F>(m: *const f32, stride: usize, y: *mut f32, n: usize, bias: f32) {
    for x in 0..n {
        macro_rules! at {
            ($k:expr) => {
                // SAFETY: readable for k < 16, x < n: the caller's contract.
                unsafe { *m.add($k * stride + x) }
            };
        }
        // A^T M: the rows combined (s: output row 0, r: row 1); then the columns.
        let (s0, s1, s2, s3) = (
            at!(0) + at!(4) + at!(8),
            at!(1) + at!(5) + at!(9),
            at!(2) + at!(6) + at!(10),
            at!(3) + at!(7) + at!(11),
        );
        let (r0, r1, r2, r3) = (
            at!(4) - at!(8) - at!(12),
            at!(5) - at!(9) - at!(13),
            at!(6) - at!(10) - at!(14),
            at!(7) - at!(11) - at!(15),
        );
        // SAFETY: q * n + x < 4 n, the caller's contract.
        unsafe {
            *y.add(x) = s0 + s1 + s2 + bias;
            *y.add(n + x) = s1 - s2 - s3 + bias;
            *y.add(2 * n + x) = r0 + r1 + r2 + bias;
            *y.add(3 * n + x) = r1 - r2 - r3 + bias;
        }
    }
}

crate::unsafe_multiversion!(unsafe fn output_lanes<F: Copy>(m: *const f32, stride: usize, y: *mut f32, n: usize, bias: f32) => output_lanes_body);
