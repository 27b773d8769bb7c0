//! Channels-last float32 convolution forward on AVX-512 CPUs: the input patches of 12 output
//! positions packed once, then multiplied by every output channel's weights.
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
//! Every output element is one tile's sum over `k` in a fixed order: the bits do not depend
//! on the thread count.

// The AVX-512 intrinsics are stable since Rust 1.89 (see gemm/bf16/microkernel.rs).
#![allow(clippy::incompatible_msrv)]

use super::{depthwise, Geometry};
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::kernels::core::simd;
use crate::kernels::core::transpose::transpose_into;
use crate::tensor::{TensorMut, TensorRef};
use std::arch::x86_64::*;

/// Output positions per register tile.
const R: usize = 12;

/// Reduction indices per packed block.
const KB: usize = 16;

/// Packed weights of the channel blocks one work unit multiplies (512 KB of f32: the blocks
/// stay in a core's L2 while the unit's panels pass over them).
const UNIT_WEIGHTS: usize = 1 << 17;

/// Whether this float32 convolution runs here: an AVX-512 CPU, not depthwise (one channel per
/// group: [`depthwise`] does it), no negative padding, and the input's channels dense
/// (`input_stride_c == 1`, a channels-last tensor; the caller copies others).
pub(super) fn applies(g: &Geometry) -> bool {
    simd::level() >= 3 && !depthwise::applies(g) && g.padding.iter().all(|&p| p >= 0)
}

/// `out = conv(input, weight) + bias` ([`applies`] holds; `input`'s channel stride 1, `out`
/// dense channels-last, `weight` any strides).
pub(super) fn forward(
    g: &Geometry,
    out: &TensorMut,
    input: &TensorRef,
    weight: &TensorRef,
    bias: Option<&[f32]>,
) {
    debug_assert!(input.strides[1] == 1 || g.c == 1);
    let (cg, og, kk, p) = (g.cg(), g.og(), g.kk(), g.op());
    let k_len = cg * kk;
    let kp = k_len.next_multiple_of(KB);
    let bl = Blocks::new(og, kp);
    let (blocks, block_at, group_len) = (&bl.list, &bl.at, bl.group_len);
    let wp = pack_weights(g, weight, &bl);
    // Units: (group, channel-block range, run of tiles).
    let per_unit_blocks = (UNIT_WEIGHTS / (kp * 32)).clamp(1, blocks.len());
    let block_runs = blocks.len().div_ceil(per_unit_blocks);
    let tiles = (g.n * p).div_ceil(R);
    let threads = crate::runtime::pool::num_threads().max(1);
    let run = (tiles / (8 * threads)).clamp(1, 4);
    let tile_runs = tiles.div_ceil(run);
    let units = g.groups * block_runs * tile_runs;
    let outp = SendPtr::<f32>::of(out.ptr);
    let wpp = SendPtr::of(wp.as_ptr() as *mut f32);
    parallel_for(units, 1, &|u0, u1| {
        let mut panels = vec![0f32; run * kp * R];
        let mut tile = [0f32; R * 32];
        for u in u0..u1 {
            // Tile runs vary fastest: a thread's consecutive units share channel blocks.
            let (gb, tr) = (u / tile_runs, u % tile_runs);
            let (gi, br) = (gb / block_runs, gb % block_runs);
            let t0 = tr * run;
            let t1 = (t0 + run).min(tiles);
            for t in t0..t1 {
                let panel = &mut panels[(t - t0) * kp * R..][..kp * R];
                // SAFETY: the CPU has AVX-512 (applies); the input's channels are dense.
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
                    let panel = panels[(t - t0) * kp * R..].as_ptr();
                    // SAFETY: the CPU has AVX-512 (applies); the panel holds kp * R packed
                    // floats, w kp * width packed weights, tile R * 32 floats.
                    unsafe {
                        if width == 32 {
                            tile_kernel::<2>(panel, w, kp / KB, tile.as_mut_ptr());
                        } else {
                            tile_kernel::<1>(panel, w, kp / KB, tile.as_mut_ptr());
                        }
                    }
                    let positions = R.min(g.n * p - t * R);
                    let b = bias.map(|b| b[first..first + valid].as_ptr());
                    for r in 0..positions {
                        let px = outp.at(((t * R + r) * g.o + first) as isize);
                        let row = tile[r * width..].as_ptr();
                        // SAFETY: channels first..first + valid of output pixel t * R + r
                        // (dense channels-last: pixel q at q * o), written by this unit only;
                        // the tile row holds `width` floats.
                        unsafe {
                            if width == 32 {
                                write_row::<2>(row, px, b, valid);
                            } else {
                                write_row::<1>(row, px, b, valid);
                            }
                        }
                    }
                }
            }
        }
    });
}

/// The output-channel blocks of a group: 32-wide while more than 16 channels remain, then one
/// 16-wide; with each block's offset in a group's packed weights (`kp` k's a channel).
struct Blocks {
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

/// Weights as `[group][block][k][width]` (`k = tap * cg + c`), zero past the group's channels
/// and past `cg * kk` up to `kp`, in parallel over blocks. A channels-last weight (`[o, tap,
/// c]` in memory) has its rows in this k order: each block is one transpose; a contiguous one
/// (`[o, c, tap]`) is transposed, then its rows are put in tap-major order; other strides are
/// read element by element.
fn pack_weights(g: &Geometry, weight: &TensorRef, bl: &Blocks) -> Vec<f32> {
    let (cg, og, kk) = (g.cg(), g.og(), g.kk());
    let ck = cg * kk;
    let ws = &weight.strides;
    let [_, kh, kw] = g.ksp;
    let tap_at = |t: usize| {
        (t / (kh * kw)) as isize * ws[2]
            + (t / kw % kh) as isize * ws[3]
            + (t % kw) as isize * ws[4]
    };
    // Offset of element k (tap-major) of row 0, if the rows are dense in that order.
    let tap_major = ws[1] == 1 && (0..kk).all(|t| tap_at(t) == (t * cg) as isize);
    let contiguous = weight.is_contiguous();
    let (blocks, block_at, group_len, kp) = (&bl.list, &bl.at, bl.group_len, bl.kp);
    let mut wp = vec![0f32; g.groups * group_len];
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
            let first = base.at(o0 as isize * ws[0]) as *const f32;
            if rows == width && (tap_major || contiguous) {
                turned.resize(ck * width, 0.0);
                // SAFETY: `width` rows of ck dense weights, ws[0] apart.
                unsafe { transpose_into(first, ws[0], width, ck, &mut turned, false) };
                if tap_major {
                    dst[..ck * width].copy_from_slice(&turned);
                } else {
                    for c in 0..cg {
                        for t in 0..kk {
                            dst[(t * cg + c) * width..][..width]
                                .copy_from_slice(&turned[(c * kk + t) * width..][..width]);
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
                        dst[(t * cg + c) * width + j] =
                            unsafe { *row.offset(c as isize * ws[1] + tap_at(t)) };
                    }
                }
            }
        }
    });
    wp
}

/// Packs the patches of output positions `q0..q0 + R` (flattened over samples; zeros past the
/// last) of group `gi` into `panel` as `[k / 16][r][k % 16]`.
///
/// A kernel row's taps (`kw` pixels) are one run of `kw * cg` floats of the input when the
/// pixels are dense and hold only this group's channels (no groups, no dilation along W) and
/// none of them is padding: one copy for the row (7 taps of an RGB 7x7 input in one).
///
/// # Safety
/// The CPU must support AVX-512F (an AVX-512 function, so that [`put`] inlines); `input`'s
/// channel stride must be 1.
#[target_feature(enable = "avx512f")]
unsafe fn pack_panel(
    g: &Geometry,
    input: &TensorRef,
    gi: usize,
    q0: usize,
    k_len: usize,
    panel: &mut [f32],
) {
    let cg = g.cg();
    let p = g.op();
    let [_, o1, o2] = g.osp;
    let [kd, kh, kw] = g.ksp;
    let xs = &input.strides;
    let whole_rows = g.groups == 1 && g.dilation[2] == 1 && (xs[4] == cg as isize || g.isp[2] == 1);
    let base = (input.ptr as *const f32).wrapping_add(gi * cg);
    let kpad = panel.len() / R;
    let lanes = panel.as_mut_ptr();
    let inside = |v: isize, len: usize| (0..len as isize).contains(&v);
    // The output coordinates of position q0 + r, counted up from q0's (no divisions per
    // position).
    let (mut n, pos) = (q0 / p, q0 % p);
    let mut out = [pos / (o1 * o2), pos / o2 % o1, pos % o2];
    for r in 0..R {
        if r > 0 {
            out[2] += 1;
            if out[2] == o2 {
                out[2] = 0;
                out[1] += 1;
                if out[1] == o1 {
                    out[1] = 0;
                    out[0] += 1;
                    if out[0] == g.osp[0] {
                        out[0] = 0;
                        n += 1;
                    }
                }
            }
        }
        if q0 + r >= g.n * p {
            // SAFETY: position r's lanes of the panel.
            unsafe { put(lanes, r, 0, None, kpad) };
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
                        // SAFETY: position r's lanes; the row's kw dense pixels of cg channels.
                        unsafe { put(lanes, r, k, Some(row.wrapping_offset(x0 * xs[4])), kw * cg) };
                    }
                    Some(row) => {
                        for e in 0..kw {
                            let x = x0 + e as isize * g.dilation[2];
                            let src = inside(x, g.isp[2]).then(|| row.wrapping_offset(x * xs[4]));
                            // SAFETY: position r's lanes; `src` has cg dense channels of an
                            // input pixel (channel stride 1).
                            unsafe { put(lanes, r, k + e * cg, src, cg) };
                        }
                    }
                    // SAFETY: position r's lanes.
                    None => unsafe { put(lanes, r, k, None, kw * cg) },
                }
            }
        }
        // SAFETY: as above.
        unsafe { put(lanes, r, k_len, None, kpad - k_len) };
    }
}

/// Writes `len` floats from `src` (zeros if `None`) to k's `k..k + len` of position `r` of a
/// panel (`[k / 16][r][k % 16]`), 16-lane block by block with masked moves (a tap's run of
/// channels is often shorter than a block: 3 for an RGB input).
///
/// # Safety
/// The CPU must support AVX-512F; the panel at `panel` must hold the k's up to `k + len`;
/// `src` must be readable for `len` floats.
#[target_feature(enable = "avx512f")]
unsafe fn put(panel: *mut f32, r: usize, k: usize, src: Option<*const f32>, len: usize) {
    if k % KB == 0 && len % KB == 0 {
        // Whole blocks (channels in multiples of 16): plain moves.
        for i in 0..len / KB {
            let v = match src {
                // SAFETY: src + 16i .. + 16 (the caller's contract).
                Some(s) => unsafe { _mm512_loadu_ps(s.add(i * KB)) },
                None => _mm512_setzero_ps(),
            };
            // SAFETY: position r's lanes of block k / 16 + i.
            unsafe { _mm512_storeu_ps(panel.add((k / KB + i) * R * KB + r * KB), v) };
        }
        return;
    }
    let (mut k, mut done) = (k, 0);
    while done < len {
        let n = (KB - k % KB).min(len - done);
        let mask: __mmask16 = if n == 16 { !0 } else { (1u16 << n) - 1 };
        let v = match src {
            // SAFETY: src + done .. src + done + n (the caller's contract).
            Some(s) => unsafe { _mm512_maskz_loadu_ps(mask, s.add(done)) },
            None => _mm512_setzero_ps(),
        };
        // SAFETY: lanes k % 16 .. + n of position r in block k / 16.
        unsafe { _mm512_mask_storeu_ps(panel.add((k / KB) * R * KB + r * KB + k % KB), mask, v) };
        k += n;
        done += n;
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

/// `tile[r * 16V + j] = sum_k w[k * 16V + j] * a[(k / 16) * 16R + r * 16 + k % 16]` for
/// `r < R`, `j < 16V`, over `kblocks * 16` k's.
///
/// # Safety
/// The CPU must support AVX-512F; `a` must hold `kblocks * 16 * R` floats, `w`
/// `kblocks * 16 * 16V` and `tile` `R * 16V`.
#[target_feature(enable = "avx512f")]
unsafe fn tile_kernel<const V: usize>(
    a: *const f32,
    w: *const f32,
    kblocks: usize,
    tile: *mut f32,
) {
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    for kb in 0..kblocks {
        // SAFETY: block kb of the panel and of the weights (the caller's contract).
        let (ab, wb) = unsafe { (a.add(kb * R * KB), w.add(kb * KB * 16 * V)) };
        for kk in 0..KB {
            let mut wv = [_mm512_setzero_ps(); V];
            for (v, x) in wv.iter_mut().enumerate() {
                // SAFETY: k's 16V packed weights.
                *x = unsafe { _mm512_loadu_ps(wb.add((kk * V + v) * 16)) };
            }
            for (r, row) in acc.iter_mut().enumerate() {
                // SAFETY: position r's element k of the panel.
                let xv = _mm512_set1_ps(unsafe { *ab.add(r * KB + kk) });
                for (v, acc) in row.iter_mut().enumerate() {
                    *acc = _mm512_fmadd_ps(wv[v], xv, *acc);
                }
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (v, acc) in row.iter().enumerate() {
            // SAFETY: the caller's contract.
            unsafe { _mm512_storeu_ps(tile.add((r * V + v) * 16), *acc) };
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

    /// Channels-last convolutions (the packed forward, and the backward through it and
    /// through the channels-last gradient copies) give the bits of the contiguous ones: small
    /// integers make every sum exact in float32, whatever the order.
    #[test]
    fn channels_last_matches_contiguous() {
        if simd::level() < 3 {
            return;
        }
        #[rustfmt::skip]
        let cases: [Case; 9] = [
            (2, 3, [1, 9, 11], 32, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (3, 16, [1, 10, 9], 48, [1, 3, 3], [1, 2, 2], [0, 1, 1], [1, 1, 1], 1),
            (1, 4, [1, 7, 12], 20, [1, 3, 5], [1, 2, 3], [0, 2, 1], [1, 2, 1], 1),
            (2, 6, [1, 6, 6], 34, [1, 3, 3], [1, 1, 1], [0, 0, 0], [1, 1, 1], 2),
            (2, 3, [4, 5, 6], 16, [2, 3, 3], [2, 1, 2], [1, 0, 1], [1, 1, 1], 1),
            (4, 64, [1, 4, 4], 64, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),
            (3, 3, [1, 13, 13], 8, [1, 7, 7], [1, 2, 2], [0, 3, 3], [1, 1, 1], 1),
            (2, 32, [1, 5, 5], 16, [1, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 1], 1),
            (5, 24, [1, 3, 3], 40, [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1], 4),
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
            let mut want = Owned::<f32>::zeros(&[o]);
            conv_backward_bias(&want.m(), &gy.r()).unwrap();
            let mut got = Owned::<f32>::zeros(&[o]);
            conv_backward_bias(&got.m(), &gyr).unwrap();
            assert_eq!(got.data, want.data, "bias gradient {what}");
        }
    }
}
