//! Convolution (1d/2d/3d, forward and backward, groups, stride, padding, dilation) and pooling
//! (max, avg, adaptive avg: see [`pool`]).
//!
//! Convolutions use im2col + GEMM (`gemm` crate) per sample. Every tensor is 5-D
//! `[N, C, D, H, W]` (the glue adds unit spatial dims for 1d/2d). Inputs may have any strides;
//! weights, gradients of outputs and every written tensor are contiguous (the glue makes them
//! so). Work is split over samples (one single-threaded GEMM per sample and thread) when there
//! are enough samples, else the GEMM itself goes parallel.
//!
//! Transposed convolution is the same three primitives with roles swapped (the glue does it):
//! its forward is [`conv_backward_input`] (+ bias), its input gradient [`conv_forward`], its
//! weight gradient [`conv_backward_weight`] with input and output gradient exchanged.

pub mod pool;
mod transpose;

use super::linalg::{gemm_raw, GemmElem, Mat, GEMM_RAYON_FLOPS};
use super::parallel::parallel_for;
use crate::dtype::DType;
use crate::error::FooResult;
use crate::runtime::pool::install;
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use std::sync::Mutex;

/// Convolution hyper-parameters for the three spatial dims (mirrors `FooConvParams`).
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
    /// Whether to split samples across threads (else each GEMM goes parallel).
    fn split_samples(&self) -> bool {
        let threads = crate::runtime::pool::num_threads();
        threads > 1 && self.n >= threads
    }
    /// Per-sample GEMMs this large (unsplit samples) run on a pool worker, so that `gemm`
    /// splits them with rayon (see `linalg::GEMM_RAYON_FLOPS`); smaller ones split from the
    /// calling thread.
    fn rayon_gemms(&self, split: bool) -> bool {
        !split && self.og() * self.ck() * self.op() >= GEMM_RAYON_FLOPS
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

/// Integer address of a pointer (raw pointers are not `Sync`; memory outlives the kernel).
#[derive(Clone, Copy)]
struct Addr(usize);

impl Addr {
    fn of<T>(p: *const T) -> Self {
        Addr(p as usize)
    }
    fn at<T>(self, off: isize) -> *mut T {
        (self.0 as *mut T).wrapping_offset(off)
    }
}

/// Fills `col` (`ck x op`, row-major) from channels `c0..c0+cg` of one sample at `x`
/// (element strides `xs` for C, D, H, W).
fn im2col<T: GemmElem>(g: &Geometry, x: Addr, xs: &[isize], c0: usize, col: &mut [T]) {
    let [od, oh, ow] = g.osp;
    let [kd, kh, kw] = g.ksp;
    let p = g.op();
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
                    let dst = &mut col[row * p..(row + 1) * p];
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
                                    std::slice::from_raw_parts(x.at::<T>(base) as *const T, w1 - w0)
                                };
                                r[w0..w1].copy_from_slice(src);
                            } else {
                                for (i, v) in r[w0..w1].iter_mut().enumerate() {
                                    // SAFETY: (c, d, h, w) is inside the input by `valid_range`.
                                    *v = unsafe { *x.at::<T>(base + i as isize * step) };
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Adds `col` (`ck x op`) back into channels `c0..c0+cg` of one contiguous sample at `x`.
fn col2im<T: GemmElem>(g: &Geometry, x: &mut [T], c0: usize, col: &[T]) {
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
                    let src = &col[row * p..(row + 1) * p];
                    row += 1;
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

/// `out = conv(input, weight) + bias`.
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
    require_contiguous("output", &out.shape, &out.strides)?;
    require_contiguous("weight", &weight.shape, &weight.strides)?;
    match check_dtypes("convolution", &dts)? {
        DType::F32 => forward_impl::<f32>(&g, out, input, weight, bias),
        DType::F64 => forward_impl::<f64>(&g, out, input, weight, bias),
        d => not_implemented!(
            "convolution: dtype {} (the glue computes it in float32)",
            d.name()
        ),
    }
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

fn forward_impl<T: GemmElem>(
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
    let (og, ck, p) = (g.og(), g.ck(), g.op());
    let (xo, wo, oo) = (Addr::of(input.ptr), Addr::of(weight.ptr), Addr::of(out.ptr));
    let xs = &input.strides;
    // Pointwise convolutions read the input as the column matrix when its spatial dims are dense.
    let direct = g.is_pointwise()
        && (g.isp[2] == 1 || xs[4] == 1)
        && (g.isp[1] == 1 || xs[3] == g.isp[2] as isize)
        && (g.isp[0] == 1 || xs[2] == (g.isp[1] * g.isp[2]) as isize);
    let split = g.split_samples();
    let sample = |ni: usize, col: &mut Vec<T>| {
        let xn = Addr(xo.at::<T>(ni as isize * xs[0]) as usize);
        for gi in 0..g.groups {
            let dst = oo.at::<T>(((ni * g.o + gi * og) * p) as isize);
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
                    ptr: xn.at::<T>((gi * g.cg()) as isize * xs[1]) as *const T,
                    rs: xs[1],
                    cs: 1,
                }
            } else {
                col.resize(ck * p, T::ZERO);
                im2col(g, xn, &xs[1..], gi * g.cg(), col);
                Mat {
                    ptr: col.as_ptr(),
                    rs: p as isize,
                    cs: 1,
                }
            };
            let lhs = Mat {
                ptr: wo.at::<T>((gi * og * ck) as isize) as *const T,
                rs: ck as isize,
                cs: 1,
            };
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
    if split {
        parallel_for(g.n, 1, &|s, e| {
            let mut col = Vec::new();
            (s..e).for_each(|ni| sample(ni, &mut col));
        });
    } else {
        install(g.rayon_gemms(split), || {
            let mut col = Vec::new();
            (0..g.n).for_each(|ni| sample(ni, &mut col));
        });
    }
    Ok(())
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
    require_contiguous("grad_input", &grad_input.shape, &grad_input.strides)?;
    require_contiguous("grad_output", &grad_output.shape, &grad_output.strides)?;
    require_contiguous("weight", &weight.shape, &weight.strides)?;
    match check_dtypes("convolution_backward", &dts)? {
        DType::F32 => backward_input_impl::<f32>(&g, grad_input, grad_output, weight, bias),
        DType::F64 => backward_input_impl::<f64>(&g, grad_input, grad_output, weight, bias),
        d => not_implemented!("convolution_backward: dtype {}", d.name()),
    }
}

fn backward_input_impl<T: GemmElem>(
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
    let (og, cg, ck, p, ip) = (g.og(), g.cg(), g.ck(), g.op(), g.ip());
    let (gio, goo, wo) = (Addr::of(gi_t.ptr), Addr::of(go_t.ptr), Addr::of(weight.ptr));
    let direct = g.is_pointwise();
    let split = g.split_samples();
    let sample = |ni: usize, col: &mut Vec<T>| {
        // SAFETY: sample `ni` of the contiguous grad_input, written only by this call.
        let gin = unsafe {
            std::slice::from_raw_parts_mut(gio.at::<T>((ni * g.c * ip) as isize), g.c * ip)
        };
        if !direct {
            gin.fill(T::ZERO);
        }
        for gi in 0..g.groups {
            let lhs = Mat {
                ptr: wo.at::<T>((gi * og * ck) as isize) as *const T,
                rs: 1,
                cs: ck as isize,
            };
            let rhs = Mat {
                ptr: goo.at::<T>(((ni * g.o + gi * og) * p) as isize) as *const T,
                rs: p as isize,
                cs: 1,
            };
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
    if split {
        parallel_for(g.n, 1, &|s, e| {
            let mut col = Vec::new();
            (s..e).for_each(|ni| sample(ni, &mut col));
        });
    } else {
        install(g.rayon_gemms(split), || {
            let mut col = Vec::new();
            (0..g.n).for_each(|ni| sample(ni, &mut col));
        });
    }
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
    require_contiguous("grad_weight", &grad_weight.shape, &grad_weight.strides)?;
    require_contiguous("grad_output", &grad_output.shape, &grad_output.strides)?;
    match check_dtypes(
        "convolution_backward",
        &[grad_weight.dtype, input.dtype, grad_output.dtype],
    )? {
        DType::F32 => backward_weight_impl::<f32>(&g, grad_weight, input, grad_output),
        DType::F64 => backward_weight_impl::<f64>(&g, grad_weight, input, grad_output),
        d => not_implemented!("convolution_backward: dtype {}", d.name()),
    }
}

fn backward_weight_impl<T: GemmElem>(
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
    let (xo, goo) = (Addr::of(input.ptr), Addr::of(go_t.ptr));
    let xs = &input.strides;
    let split = g.split_samples();
    // Accumulates the samples `s..e` into `acc`: per group an [og, ck] block stored column-major
    // (element (o, r) at `r * og + o`). Both GEMM operands arrive with the reduction dim
    // (positions) contiguous, which `gemm` packs by gathering at a page-sized stride (8x slower
    // for the column matrix with a row-major destination, 1.5x for grad_output with a
    // column-major one; measured). So the destination is column-major and grad_output is
    // transposed first (og x p, the smaller operand): both are then read contiguously.
    let accumulate = |s: usize, e: usize, acc: &mut [T], parallel: bool| {
        let mut col = vec![T::ZERO; ck * p];
        let mut got = vec![T::ZERO; og * p];
        for ni in s..e {
            let xn = Addr(xo.at::<T>(ni as isize * xs[0]) as usize);
            for gi in 0..g.groups {
                im2col(g, xn, &xs[1..], gi * g.cg(), &mut col);
                // SAFETY: group gi's [og, p] block of sample ni of the contiguous grad_output.
                let go = unsafe {
                    std::slice::from_raw_parts(
                        goo.at::<T>(((ni * g.o + gi * og) * p) as isize) as *const T,
                        og * p,
                    )
                };
                transpose::transpose_into(go, og, p, &mut got);
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
                let dst = acc[gi * og * ck..].as_mut_ptr();
                // SAFETY: dst is group gi's column-major [og, ck] block of the accumulator;
                // the first sample overwrites it (no zero-fill needed).
                unsafe {
                    gemm_raw(
                        og,
                        ck,
                        p,
                        dst,
                        1,
                        og as isize,
                        ni > s,
                        lhs,
                        rhs,
                        T::ONE,
                        parallel,
                    )
                };
            }
        }
    };
    // Adds the column-major blocks of `acc` into the row-major grad_weight.
    let add_transposed = |gw: &mut [T], acc: &[T]| {
        for (gwb, accb) in gw.chunks_mut(og * ck).zip(acc.chunks(og * ck)) {
            for (o, row) in gwb.chunks_mut(ck).enumerate() {
                row.iter_mut()
                    .enumerate()
                    .for_each(|(r, v)| *v = *v + accb[r * og + o]);
            }
        }
    };
    if split {
        let shared = Mutex::new(gw);
        parallel_for(g.n, 1, &|s, e| {
            let mut acc = vec![T::ZERO; total];
            accumulate(s, e, &mut acc, false);
            let mut gw = shared.lock().unwrap_or_else(|e| e.into_inner());
            add_transposed(&mut gw, &acc);
        });
    } else {
        let mut acc = vec![T::ZERO; total];
        install(g.rayon_gemms(split), || accumulate(0, g.n, &mut acc, true));
        add_transposed(gw, &acc);
    }
    Ok(())
}

/// `grad_bias[o] = sum over n and positions of grad_output[n, o]` (contiguous `[N, O, ...]`).
pub fn conv_backward_bias(grad_bias: &TensorMut, grad_output: &TensorRef) -> FooResult<()> {
    if grad_output.ndim() < 2 || grad_bias.shape != [grad_output.shape[1]] {
        return invalid_arg!("convolution_backward: bias gradient shape mismatch");
    }
    require_contiguous("grad_output", &grad_output.shape, &grad_output.strides)?;
    match check_dtypes(
        "convolution_backward",
        &[grad_bias.dtype, grad_output.dtype],
    )? {
        DType::F32 => bias_impl::<f32>(grad_bias, grad_output),
        DType::F64 => bias_impl::<f64>(grad_bias, grad_output),
        d => not_implemented!("convolution_backward: dtype {}", d.name()),
    }
}

fn bias_impl<T: GemmElem>(gb: &TensorMut, go: &TensorRef) -> FooResult<()> {
    let (n, o) = (go.shape[0], go.shape[1]);
    let p: usize = go.shape[2..].iter().product();
    let (gbo, goo) = (Addr::of(gb.ptr), Addr::of(go.ptr));
    let s = gb.strides[0];
    parallel_for(o, (1 << 14) / (n * p).max(1) + 1, &|a, b| {
        for oc in a..b {
            let mut sum = 0f64;
            for ni in 0..n {
                // SAFETY: the [p] plane (ni, oc) of the contiguous grad_output.
                let plane = unsafe {
                    std::slice::from_raw_parts(
                        goo.at::<T>(((ni * o + oc) * p) as isize) as *const T,
                        p,
                    )
                };
                sum += plane.iter().map(|v| v.to_f64()).sum::<f64>();
            }
            // SAFETY: element oc of grad_bias, written by this chunk only.
            unsafe { *gbo.at::<T>(oc as isize * s) = T::from_f64(sum) };
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::map::testing::Owned;

    fn data(n: usize, seed: u64) -> Vec<f64> {
        (0..n)
            .map(|i| ((i as u64 * 2654435761 + seed) % 13) as f64 - 6.0)
            .collect()
    }

    /// Direct 2-D convolution (D = 1) as the reference.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        x: &[f64],
        w: &[f64],
        [n, c, h, wd]: [usize; 4],
        [o, kh, kw]: [usize; 3],
        s: usize,
        pad: usize,
        dil: usize,
        groups: usize,
    ) -> (Vec<f64>, [usize; 2]) {
        let oh = (h + 2 * pad - dil * (kh - 1) - 1) / s + 1;
        let ow = (wd + 2 * pad - dil * (kw - 1) - 1) / s + 1;
        let (cg, og) = (c / groups, o / groups);
        let mut out = vec![0.0; n * o * oh * ow];
        for ni in 0..n {
            for oc in 0..o {
                let gi = oc / og;
                for y in 0..oh {
                    for xw in 0..ow {
                        let mut acc = 0.0;
                        for ci in 0..cg {
                            for a in 0..kh {
                                for b in 0..kw {
                                    let iy = (y * s + a * dil) as isize - pad as isize;
                                    let ix = (xw * s + b * dil) as isize - pad as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                        continue;
                                    }
                                    let xv = x[((ni * c + gi * cg + ci) * h + iy as usize) * wd
                                        + ix as usize];
                                    acc += xv * w[((oc * cg + ci) * kh + a) * kw + b];
                                }
                            }
                        }
                        out[((ni * o + oc) * oh + y) * ow + xw] = acc;
                    }
                }
            }
        }
        (out, [oh, ow])
    }

    #[test]
    fn conv_forward_and_grads_match_naive() {
        // (n, c, h, w, o, k, stride, pad, dilation, groups), each on the calling thread and on
        // a 2-thread pool (samples split across threads; one sample: parallel GEMMs).
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for case in [
            (2, 4, 7, 6, 6, 3, 2, 1, 2, 2),
            (1, 4, 9, 8, 4, 3, 1, 1, 1, 1),
            (5, 6, 8, 7, 9, 2, 1, 0, 1, 3),
        ] {
            forward_and_grads_case(case);
            pool.install(|| forward_and_grads_case(case));
        }
    }

    #[allow(clippy::type_complexity)]
    fn forward_and_grads_case(
        (n, c, h, w, o, k, s, pad, dil, groups): (
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
        ),
    ) {
        let x = Owned::new(data(n * c * h * w, 1), &[n, c, 1, h, w]);
        let wt = Owned::new(data(o * (c / groups) * k * k, 2), &[o, c / groups, 1, k, k]);
        let (want, [oh, ow]) = naive(
            &x.data,
            &wt.data,
            [n, c, h, w],
            [o, k, k],
            s,
            pad,
            dil,
            groups,
        );
        let p = ConvParams {
            stride: [1, s as i64, s as i64],
            padding: [0, pad as i64, pad as i64],
            dilation: [1, dil as i64, dil as i64],
            groups: groups as i64,
        };
        let mut out = Owned::<f64>::zeros(&[n, o, 1, oh, ow]);
        conv_forward(&out.m(), &x.r(), &wt.r(), None, &p).unwrap();
        assert_eq!(out.data, want);

        // Adjoint checks: <conv(x, w), gy> == <x, grad_input(gy)> == <w, grad_weight(x, gy)>.
        let gy = Owned::new(data(out.data.len(), 3), &[n, o, 1, oh, ow]);
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let lhs = dot(&out.data, &gy.data);
        let mut gx = Owned::<f64>::zeros(&[n, c, 1, h, w]);
        conv_backward_input(&gx.m(), &gy.r(), &wt.r(), None, &p).unwrap();
        assert_eq!(dot(&gx.data, &x.data), lhs);
        let mut gw = Owned::<f64>::zeros(&wt.shape);
        conv_backward_weight(&gw.m(), &x.r(), &gy.r(), &p).unwrap();
        assert_eq!(dot(&gw.data, &wt.data), lhs);
        // Element by element: gw[oc, ci, a, b] = sum over n, y, x of gy * the input it touched.
        let cg = c / groups;
        for (i, &got) in gw.data.iter().enumerate() {
            let (oc, ci, a, b) = (i / (cg * k * k), i / (k * k) % cg, i / k % k, i % k);
            let cin = oc / (o / groups) * cg + ci;
            let mut want = 0.0;
            for ni in 0..n {
                for y in 0..oh {
                    for xw in 0..ow {
                        let iy = (y * s + a * dil) as isize - pad as isize;
                        let ix = (xw * s + b * dil) as isize - pad as isize;
                        if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                            continue;
                        }
                        want += gy.data[((ni * o + oc) * oh + y) * ow + xw]
                            * x.data[((ni * c + cin) * h + iy as usize) * w + ix as usize];
                    }
                }
            }
            assert_eq!(got, want, "grad_weight element {i}");
        }
        let mut gb = Owned::<f64>::zeros(&[o]);
        conv_backward_bias(&gb.m(), &gy.r()).unwrap();
        let per: f64 = (0..n)
            .map(|ni| gy.data[ni * o * oh * ow..][..oh * ow].iter().sum::<f64>())
            .sum();
        assert_eq!(gb.data[0], per);
    }

    #[test]
    fn conv_valid_range_edges() {
        assert_eq!(valid_range(5, 1, -1, 5), (1, 5));
        assert_eq!(valid_range(3, 2, -1, 5), (1, 3));
        assert_eq!(valid_range(4, 1, 2, 5), (0, 3));
        assert_eq!(valid_range(4, 1, 9, 5), (0, 0));
    }
}
