//! Winograd F(2x2, 3x3) for float32 3x3 stride-1 convolutions of narrow layers (16-channel
//! multiples from 32 channels, `c * o` up to 8192) on AVX-512 CPUs: the arithmetic of
//! [`super::winograd`] (the same transforms, hence the same rounding), vectorized over
//! channels instead of tiles, and fused per run of tiles so that nothing leaves the core's L2.
//!
//! The planar form transforms a whole chunk of samples, then runs 16 GEMMs, then transforms
//! the output: with 32-64 channels its transforms (one channel's plane at a time) cost more
//! than the products they save. Here a work unit takes [`TILES`] tiles: it transforms each
//! tile's 4x4 input patch 16 channels at a time (16 vector loads of a channels-last input,
//! additions only) into `V[xi][tile][c]`, multiplies each point's `[tiles, c]` block by the
//! transformed weights `U[xi]` (`[c, o]`, packed once per call in panels of up to 64 output
//! channels, all 16 points in L2) with the row kernel of the LSTM's recurrent product
//! ([`product_avx512`], one chain over `c` per element), and transforms the `[tiles, o]`
//! result back into the tiles' output pixels, 16 channels at a time, with the bias.
//!
//! Zen 4, 2 threads, forward, ms against the padded-grid kernel (CPU's oneDNN in brackets),
//! channels-last / contiguous: [8,64,16,16] -> 64 0.70 -> 0.46 (0.72) / 0.75 -> 0.53-0.62
//! (0.73-0.76), [8,128,16,16] -> 64 1.45 -> 0.99 (1.41) / 1.57 -> 0.96 (1.40),
//! [8,64,32,32] -> 32 1.40 -> 1.16 (1.49) / 1.67 -> 1.40 (1.65), [8,32,32,32] -> 32 0.72 ->
//! 0.67 / 0.88 -> 0.71. With 16 channels in or out it did not pay ([8,32,64,64] -> 16 1.54 ->
//! 1.77); from 96 channels the planar form is as fast or faster ([8,128,16,16] -> 128 2.18
//! there, 2.45 here).
//!
//! Every element is computed by the same operations in the same order whatever the thread
//! count (a tile belongs to one unit; its sums run over the channels in order).

// The AVX-512 intrinsics are stable since Rust 1.89 (see gemm/bf16/microkernel.rs).
#![allow(clippy::incompatible_msrv)]

use super::winograd::{self, point_stride, tiles, transform_weight, Taps, XI};
use super::Geometry;
use crate::kernels::core::gemm::rows::{product_avx512, Dst};
use crate::kernels::core::parallel::{parallel_for, parallel_units, SendPtr};
use crate::kernels::core::scratch::with_scratch;
use crate::kernels::core::simd;
use crate::tensor::{TensorMut, TensorRef};
use std::arch::x86_64::*;

/// Channels per vector.
const L: usize = 16;

/// Tiles per work unit: their `V` and `M` (16 points x 32 tiles x 64 channels each, 128 KB at
/// 64 channels) stay in L2 beside the transformed weights.
const TILES: usize = 32;

/// Output channels per GEMM panel (4 vectors: the row kernel's widest register tile).
const PANEL: usize = 64;

/// Fewer channels than this (in or out): the transforms and the `V`, `M` round trips cost more
/// than the products save (see the module's notes).
const MIN_CHANNELS: usize = 32;

/// Largest `c * o`: the transformed weights (16 points, 4 bytes each: 512 KB) stay in L2.
const MAX_PAIRS: usize = 8192;

/// Fewer output positions per sample than this: too few tiles per weight transform.
const MIN_POSITIONS: usize = 64;

/// Whether [`forward`] takes this float32 convolution: an AVX-512 CPU, a convolution
/// F(2x2, 3x3) computes ([`winograd::kernel_fits`]) with whole vectors of channels in the
/// range where it pays, and one the planar form ([`winograd::applies`]) does not take.
pub(super) fn applies(g: &Geometry) -> bool {
    simd::level() >= 3
        && winograd::kernel_fits(g)
        && g.c % L == 0
        && g.o % L == 0
        && g.c >= MIN_CHANNELS
        && g.o >= MIN_CHANNELS
        && g.c * g.o <= MAX_PAIRS
        && g.op() >= MIN_POSITIONS
        && !winograd::applies(g)
}

/// The sizes and strides a unit needs.
struct Plan {
    c: usize,
    o: usize,
    /// Input plane, padding, output plane, tiles per row and column.
    ih: isize,
    iw: isize,
    ph: isize,
    pw: isize,
    oh: usize,
    ow: usize,
    th: usize,
    tw: usize,
    /// Tiles per work unit (at most [`TILES`]).
    per: usize,
    /// Input and output strides (floats) of a sample, row and column; channels dense.
    xs: [isize; 3],
    os: [isize; 3],
}

/// `out = conv(input, w) (+ bias)` for a convolution [`applies`] holds for: `input` and `out`
/// with dense channels (`strides[1] == 1`, e.g. channels-last), any other strides.
pub(super) fn forward(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    w: Taps,
    bias: Option<&[f32]>,
) {
    debug_assert!(input.strides[1] == 1 && out.strides[1] == 1);
    let (c, o) = (g.c, g.o);
    let (th, tw) = tiles(g);
    let plan = Plan {
        c,
        o,
        ih: g.isp[1] as isize,
        iw: g.isp[2] as isize,
        ph: g.padding[1],
        pw: g.padding[2],
        oh: g.osp[1],
        ow: g.osp[2],
        th,
        tw,
        per: units_of(g.n * th * tw),
        xs: [input.strides[0], input.strides[3], input.strides[4]],
        os: [out.strides[0], out.strides[3], out.strides[4]],
    };
    let su = point_stride(o * c);
    with_scratch(XI * su, |u: &mut [f32]| {
        with_scratch(XI * c * o, |up: &mut [f32]| {
            transform_weight(g, w, u, su);
            pack_weights(u, su, c, o, up);
            let total = g.n * th * tw;
            let (xp, opp, upp) = (
                SendPtr::<f32>::of(input.ptr),
                SendPtr::<f32>::of(out.ptr),
                SendPtr::new(up.as_mut_ptr()),
            );
            let per = plan.per;
            parallel_units(total.div_ceil(per), &|u0, u1| {
                with_scratch(XI * per * (c + o), |buf: &mut [f32]| {
                    let (v, m) = buf.split_at_mut(XI * per * c);
                    for unit in u0..u1 {
                        let t0 = unit * per;
                        let n = per.min(total - t0);
                        // SAFETY: the CPU has AVX-512 (applies); the input's and output's
                        // pixels by the plan's strides, channels dense; `up` the packed
                        // weights, read only; the unit's tiles' output pixels are its own.
                        unsafe {
                            transform_input(&plan, xp.at(0) as *const f32, t0, n, v);
                            multiply(&plan, v, upp.at(0) as *const f32, n, m);
                            transform_output(&plan, m, t0, n, bias, opp.at(0));
                        }
                    }
                });
            });
        })
    })
}

/// Tiles per work unit for `total` tiles: [`TILES`], fewer where that would leave a thread
/// without two units.
fn units_of(total: usize) -> usize {
    let threads = crate::runtime::pool::num_threads().max(1);
    total.div_ceil(2 * threads).clamp(8, TILES)
}

/// `U[xi][o][c]` (point stride `su`) into panels: point `xi`'s panel `p` (output channels
/// `64p..64p + width`) at `xi * c * o + 64p * c`, as `[c][width]`.
fn pack_weights(u: &[f32], su: usize, c: usize, o: usize, up: &mut [f32]) {
    let upp = SendPtr::new(up.as_mut_ptr());
    parallel_for(XI, 1, &|x0, x1| {
        for xi in x0..x1 {
            for p0 in (0..o).step_by(PANEL) {
                let width = PANEL.min(o - p0);
                // SAFETY: point xi's panel p0, within `up` (XI * c * o floats); this task's.
                let panel = unsafe { upp.slice_mut(xi * c * o + p0 * c, c * width) };
                for (ci, row) in panel.chunks_exact_mut(width).enumerate() {
                    for (k, e) in row.iter_mut().enumerate() {
                        *e = u[xi * su + (p0 + k) * c + ci];
                    }
                }
            }
        }
    });
}

/// Tile `t` (over the batch): its sample and tile row and column.
#[inline]
fn tile_place(p: &Plan, t: usize) -> (usize, usize, usize) {
    let per = p.th * p.tw;
    (t / per, t % per / p.tw, t % p.tw)
}

/// `V[xi][i][c] = (B^T d B)[xi]` for tiles `t0..t0 + n` (`i` the tile's place in the unit),
/// `d` its 4x4 patch of 16 channels at a time (zeros outside the input), with the planar form's
/// arithmetic ([`winograd`]'s `input_lanes`).
///
/// # Safety
/// AVX-512F; `x` the input of the plan's strides (channels dense); `v` has `16 * per * c`.
#[target_feature(enable = "avx512f")]
unsafe fn transform_input(p: &Plan, x: *const f32, t0: usize, n: usize, v: &mut [f32]) {
    let (c, vs) = (p.c, p.per * p.c);
    let v = v.as_mut_ptr();
    for i in 0..n {
        let (ni, ty, tx) = tile_place(p, t0 + i);
        let (y0, x0) = (2 * ty as isize - p.ph, 2 * tx as isize - p.pw);
        // Offsets of the patch's 16 pixels, or None over padding.
        let mut at = [None; XI];
        for (k, a) in at.iter_mut().enumerate() {
            let (y, xx) = (y0 + (k / 4) as isize, x0 + (k % 4) as isize);
            if (0..p.ih).contains(&y) && (0..p.iw).contains(&xx) {
                *a = Some(ni as isize * p.xs[0] + y * p.xs[1] + xx * p.xs[2]);
            }
        }
        for cb in (0..c).step_by(L) {
            let mut d = [_mm512_setzero_ps(); XI];
            for (dk, a) in d.iter_mut().zip(&at) {
                if let Some(off) = *a {
                    // SAFETY: 16 channels of an input pixel inside the plane (the caller's
                    // contract).
                    *dk = unsafe { _mm512_loadu_ps(x.offset(off).add(cb)) };
                }
            }
            // SAFETY: tile i's channels cb.. of point 0, inside `v`.
            let dst = unsafe { v.add(i * c + cb) };
            // Macros, not closures: a closure may not get the function's target features.
            macro_rules! col {
                ($r:expr, $j:expr) => {
                    match $r {
                        0 => _mm512_sub_ps(d[$j], d[8 + $j]),
                        1 => _mm512_add_ps(d[4 + $j], d[8 + $j]),
                        2 => _mm512_sub_ps(d[8 + $j], d[4 + $j]),
                        _ => _mm512_sub_ps(d[4 + $j], d[12 + $j]),
                    }
                };
            }
            for r in 0..4 {
                // Row r of B^T d, columns 0..4; then its columns combined.
                let (a, b, e, f) = (col!(r, 0), col!(r, 1), col!(r, 2), col!(r, 3));
                // SAFETY: points 4r..4r + 4 of tile i, channels cb..cb + 16: inside `v`.
                unsafe {
                    _mm512_storeu_ps(dst.add(4 * r * vs), _mm512_sub_ps(a, e));
                    _mm512_storeu_ps(dst.add((4 * r + 1) * vs), _mm512_add_ps(b, e));
                    _mm512_storeu_ps(dst.add((4 * r + 2) * vs), _mm512_sub_ps(e, b));
                    _mm512_storeu_ps(dst.add((4 * r + 3) * vs), _mm512_sub_ps(b, f));
                }
            }
        }
    }
}

/// `M[xi][i][o] = V[xi][i][..] @ U[xi]` for the unit's `n` tiles, panel by panel.
///
/// # Safety
/// AVX-512F; `up` the packed weights ([`pack_weights`]); `v` as [`transform_input`] wrote it
/// for `n` tiles; `m` has `16 * per * o`.
#[target_feature(enable = "avx512f")]
unsafe fn multiply(p: &Plan, v: &[f32], up: *const f32, n: usize, m: &mut [f32]) {
    let (c, o) = (p.c, p.o);
    let m = m.as_mut_ptr();
    /// The tiles' rows through a register tile of `S` rows and `J` vectors.
    ///
    /// # Safety
    /// As [`multiply`], `w` a panel of `16J` columns, `dst` its first column of tile 0.
    #[inline(always)]
    unsafe fn panel<const S: usize, const J: usize>(
        rows: &[*const f32],
        c: usize,
        w: *const f32,
        dst: *mut f32,
        ld: usize,
    ) {
        let null = std::ptr::null();
        for (s, chunk) in rows.chunks(S).enumerate() {
            // Rows past the tiles read tile 0's; their results are dropped.
            let at: [*const f32; S] = std::array::from_fn(|r| *chunk.get(r).unwrap_or(&rows[0]));
            // SAFETY: each row `c` floats of V; `w` c rows of 16J packed weights; rows
            // s * S.. of dst (< n) hold `o` floats from the panel's column.
            unsafe {
                product_avx512::<S, S, J>(
                    &at,
                    c,
                    w,
                    dst.add(s * S * ld),
                    ld,
                    L,
                    chunk.len(),
                    null,
                    Dst::Write,
                )
            };
        }
    }
    let mut rows = [std::ptr::null::<f32>(); TILES];
    for xi in 0..XI {
        for (i, r) in rows.iter_mut().enumerate().take(n) {
            *r = v[(xi * p.per + i) * c..].as_ptr();
        }
        let rows = &rows[..n];
        for p0 in (0..o).step_by(PANEL) {
            // SAFETY: point xi's panel p0 of the packed weights, and its columns of the tiles'
            // rows of M (the caller's contract); the panel is (o - p0).min(64) columns wide.
            unsafe {
                let w = up.add(xi * c * o + p0 * c);
                let dst = m.add(xi * p.per * o + p0);
                match (o - p0).min(PANEL) / L {
                    4 => panel::<4, 4>(rows, c, w, dst, o),
                    3 => panel::<4, 3>(rows, c, w, dst, o),
                    2 => panel::<8, 2>(rows, c, w, dst, o),
                    _ => panel::<8, 1>(rows, c, w, dst, o),
                }
            }
        }
    }
}

/// `out[pixel] = (A^T M A)[i, j] (+ bias)` for the unit's `n` tiles, 16 channels at a time,
/// with the planar form's arithmetic ([`winograd`]'s `output_lanes`); positions past an odd
/// output size are dropped.
///
/// # Safety
/// AVX-512F; `m` as [`multiply`] wrote it; `out` the output of the plan's strides (channels
/// dense), the tiles' pixels writable; `bias` (if any) `o` floats.
#[target_feature(enable = "avx512f")]
unsafe fn transform_output(
    p: &Plan,
    m: &[f32],
    t0: usize,
    n: usize,
    bias: Option<&[f32]>,
    out: *mut f32,
) {
    let (o, ms) = (p.o, p.per * p.o);
    for i in 0..n {
        let (ni, ty, tx) = tile_place(p, t0 + i);
        let (y, x) = (2 * ty, 2 * tx);
        let base = ni as isize * p.os[0] + y as isize * p.os[1] + x as isize * p.os[2];
        let (down, right) = (y + 1 < p.oh, x + 1 < p.ow);
        for ob in (0..o).step_by(L) {
            let src = m[i * o + ob..].as_ptr();
            let b = match bias {
                // SAFETY: 16 of the o floats of the bias.
                Some(b) => unsafe { _mm512_loadu_ps(b.as_ptr().add(ob)) },
                None => _mm512_setzero_ps(),
            };
            // Macros, not closures: a closure may not get the function's target features.
            macro_rules! at {
                ($k:expr) => {
                    // SAFETY: point k of tile i, channels ob..ob + 16: inside `m`.
                    unsafe { _mm512_loadu_ps(src.add($k * ms)) }
                };
            }
            macro_rules! add3 {
                ($a:expr, $b:expr, $c:expr) => {
                    _mm512_add_ps(_mm512_add_ps($a, $b), $c)
                };
            }
            macro_rules! sub3 {
                ($a:expr, $b:expr, $c:expr) => {
                    _mm512_sub_ps(_mm512_sub_ps($a, $b), $c)
                };
            }
            macro_rules! put {
                ($dy:expr, $dx:expr, $val:expr) => {{
                    let off = base + $dy as isize * p.os[1] + $dx as isize * p.os[2];
                    // SAFETY: 16 channels of an output pixel inside the plane, this unit's.
                    unsafe { _mm512_storeu_ps(out.offset(off).add(ob), _mm512_add_ps($val, b)) }
                }};
            }
            // A^T M: the rows combined (s: output row 0, r: row 1); then the columns.
            let s = [
                add3!(at!(0), at!(4), at!(8)),
                add3!(at!(1), at!(5), at!(9)),
                add3!(at!(2), at!(6), at!(10)),
                add3!(at!(3), at!(7), at!(11)),
            ];
            let r = [
                sub3!(at!(4), at!(8), at!(12)),
                sub3!(at!(5), at!(9), at!(13)),
                sub3!(at!(6), at!(10), at!(14)),
                sub3!(at!(7), at!(11), at!(15)),
            ];
            put!(0, 0, add3!(s[0], s[1], s[2]));
            if right {
                put!(0, 1, sub3!(s[1], s[2], s[3]));
            }
            if down {
                put!(1, 0, add3!(r[0], r[1], r[2]));
                if right {
                    put!(1, 1, sub3!(r[1], r[2], r[3]));
                }
            }
        }
    }
}
