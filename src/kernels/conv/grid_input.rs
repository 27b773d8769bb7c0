//! The input gradient of strided float32 convolutions into a channels-last gradient, on the
//! padded grid of the output gradient ([`PaddedGrid`]), one pass per phase.
//!
//! With stride `s`, input pixel `x = ph + s * m` (phase `ph < s`) receives the output
//! gradient of position `(x + p - k) / s` through tap `k` exactly when `s` divides
//! `ph + p - k`: a phase's pixels are a stride-1 convolution of the output gradient with the
//! phase's taps, reading it at offsets `(ph + p - k) / s` from `m`. So one zero-padded copy
//! of the output gradient serves every phase, each phase is a grid pass with its own taps
//! and weights, and its pixels are written where they lie in the input gradient (every
//! `s`-th pixel). Phases no tap reaches (stride above the kernel: a 1x1 stride-2
//! downsample) get zeros. Against the transposed-GEMM path ([`super::conv_backward_input`]'s
//! planar one, through NCHW copies), nothing is multiplied by a zero of a dilated gradient
//! and nothing is scattered.
//!
//! Every element is one tile's sum over the phase's `k` in a fixed order: the bits do not
//! depend on the thread count.

use super::packed::{self, GridPass, OutPixels, PaddedGrid};
use super::Geometry;
use crate::kernels::core::parallel::{parallel_units, SendPtr};
use crate::tensor::{TensorMut, TensorRef};

/// Whether [`input_gradient`] computes this convolution's input gradient: float32 on an
/// AVX2/AVX-512 CPU ([`packed::applies`]), one group, no dilation, a stride above 1, padding
/// below the kernel's size.
pub(super) fn applies(g: &Geometry) -> bool {
    packed::applies(g)
        && g.groups == 1
        && g.dilation == [1, 1, 1]
        && g.stride != [1, 1, 1]
        && (0..3).all(|i| g.padding[i] < g.ksp[i] as isize)
        && !g.osp.contains(&0)
}

/// One dimension's phase: its output size, and its taps `k` with their read offsets.
struct Phase {
    size: usize,
    taps: Vec<(usize, isize)>,
}

/// The phases of dimension `i`.
fn phases(g: &Geometry, i: usize) -> Vec<Phase> {
    let (s, p) = (g.stride[i], g.padding[i]);
    (0..s)
        .map(|ph| Phase {
            size: ((g.isp[i] as isize - ph).max(0) as usize).div_ceil(s as usize),
            taps: (0..g.ksp[i])
                .filter(|&k| (ph + p - k as isize).rem_euclid(s) == 0)
                .map(|k| (k, (ph + p - k as isize) / s))
                .collect(),
        })
        .collect()
}

/// `grad_input = conv_transpose(grad_output, weight) (+ bias)` ([`applies`] holds;
/// `grad_input` dense channels-last, `grad_output` any strides, `weight` contiguous).
pub(super) fn input_gradient(
    g: &Geometry,
    grad_input: &TensorMut,
    grad_output: &TensorRef,
    weight: &TensorRef,
    bias: Option<&[f32]>,
) {
    let per_dim: [Vec<Phase>; 3] = std::array::from_fn(|i| phases(g, i));
    // Padding of the copy before and after each dim: what the phases' reads reach.
    let (mut before, mut after) = ([0usize; 3], [0usize; 3]);
    for i in 0..3 {
        for ph in per_dim[i].iter().filter(|ph| ph.size > 0) {
            for &(_, off) in &ph.taps {
                before[i] = before[i].max((-off).max(0) as usize);
                let last = ph.size as isize - 1 + off - (g.osp[i] as isize - 1);
                after[i] = after[i].max(last.max(0) as usize);
            }
        }
    }
    let dims: [usize; 3] = std::array::from_fn(|i| g.osp[i] + before[i] + after[i]);
    // The copy's geometry: the output gradient as the input of a stride-1 convolution whose
    // outputs are the input gradient's channels.
    let copy = Geometry {
        n: g.n,
        c: g.o,
        o: g.c,
        groups: 1,
        isp: g.osp,
        ksp: [1; 3],
        osp: g.osp,
        stride: [1; 3],
        padding: before.map(|v| v as isize),
        dilation: [1; 3],
    };
    let lanes = PaddedGrid::lanes_for(g.o);
    let gs = &grad_input.strides;
    // SAFETY: the contiguous weight [o, c, kd, kh, kw].
    let wt = unsafe { std::slice::from_raw_parts(weight.ptr as *const f32, g.o * g.c * g.kk()) };
    let [_, kh, kw] = g.ksp;
    let mut passes = Vec::new();
    let mut untouched = Vec::new();
    for (i0, p0) in per_dim[0].iter().enumerate() {
        for (i1, p1) in per_dim[1].iter().enumerate() {
            for (i2, p2) in per_dim[2].iter().enumerate() {
                let size = [p0.size, p1.size, p2.size];
                if size.contains(&0) {
                    continue;
                }
                let out = OutPixels {
                    at: i0 as isize * gs[2] + i1 as isize * gs[3] + i2 as isize * gs[4],
                    strides: [
                        gs[0],
                        g.stride[0] * gs[2],
                        g.stride[1] * gs[3],
                        g.stride[2] * gs[4],
                    ],
                };
                let taps = [&p0.taps, &p1.taps, &p2.taps];
                if taps.iter().any(|t| t.is_empty()) {
                    untouched.push((out, size));
                    continue;
                }
                let ksp = taps.map(|t| t.len());
                let nk: usize = ksp.iter().product();
                // The pass's weight [c, o, taps]: tap j of the phase is tap `(a, b, e)`.
                let mut offsets = Vec::with_capacity(nk);
                let mut turned = vec![0f32; g.c * g.o * nk];
                let mut j = 0;
                for &(a, oa) in taps[0] {
                    for &(b, ob) in taps[1] {
                        for &(e, oe) in taps[2] {
                            let at = |off: isize, d: usize| (off + before[d] as isize) as usize;
                            offsets.push((at(oa, 0) * dims[1] + at(ob, 1)) * dims[2] + at(oe, 2));
                            let tap = (a * kh + b) * kw + e;
                            for c in 0..g.c {
                                for o in 0..g.o {
                                    turned[(c * g.o + o) * nk + j] =
                                        wt[(o * g.c + c) * g.kk() + tap];
                                }
                            }
                            j += 1;
                        }
                    }
                }
                let pg = Geometry {
                    ksp,
                    osp: size,
                    ..copy.clone()
                };
                let shape = [g.c, g.o, ksp[0], ksp[1], ksp[2]];
                let w = TensorRef {
                    ptr: turned.as_ptr() as *const u8,
                    shape: shape.to_vec().into(),
                    strides: crate::tensor::contiguous_strides(&shape),
                    dtype: crate::dtype::DType::F32,
                };
                let grid = PaddedGrid::of(g.o, lanes, dims, offsets, size);
                passes.push(GridPass::new(&pg, grid, &w, out));
            }
        }
    }
    let base = SendPtr::<f32>::of(grad_input.ptr);
    for (out, size) in untouched {
        fill_pixels(base, out, size, g.n, g.c, bias);
    }
    if !passes.is_empty() {
        packed::run_grid(
            &copy,
            grad_output,
            &passes,
            grad_input.ptr as *mut f32,
            bias,
        );
    }
}

/// Writes the bias (or zeros) into the `c` channels of the pixels `out` places, `n` samples of
/// `size`.
fn fill_pixels(
    base: SendPtr<f32>,
    out: OutPixels,
    size: [usize; 3],
    n: usize,
    c: usize,
    bias: Option<&[f32]>,
) {
    let rows = n * size[0] * size[1];
    parallel_units(rows, &|r0, r1| {
        for r in r0..r1 {
            let (ni, z, y) = (r / (size[0] * size[1]), r / size[1] % size[0], r % size[1]);
            let [sn, sz, sy, sx] = out.strides;
            let row = out.at + ni as isize * sn + z as isize * sz + y as isize * sy;
            for x in 0..size[2] {
                // SAFETY: the c dense channels of an input-gradient pixel of this phase,
                // written by this task only.
                let px = unsafe { base.slice_mut((row + x as isize * sx) as usize, c) };
                match bias {
                    Some(b) => px.copy_from_slice(&b[..c]),
                    None => px.fill(0.0),
                }
            }
        }
    });
}
