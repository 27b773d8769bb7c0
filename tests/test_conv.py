"""Convolution (1d/2d/3d, transposed, groups, forward and backward) and pooling on foo vs CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import FOO, assert_same, check, sample, to_foo

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def tol(dtype: torch.dtype) -> dict[str, float]:
    if dtype == torch.float16:
        return {"atol": 3e-2, "rtol": 3e-2}
    if dtype == torch.bfloat16:
        return {"atol": 2e-1, "rtol": 5e-2}
    if dtype == torch.float32:
        return {"atol": 2e-4, "rtol": 1e-4}
    return {"atol": 1e-10, "rtol": 1e-10}


def grads_match(fn, inputs, dtype, gy_seed=9, tolerance=None):
    """Runs fn forward+backward on CPU and on foo; compares outputs and every input gradient."""
    tolerance = tolerance or tol(dtype)
    cpu = [t.detach().clone().requires_grad_(t.is_floating_point()) if t is not None else None for t in inputs]
    out = fn(*cpu)
    gy = sample(out.shape, out.dtype, seed=gy_seed)
    out.backward(gy)
    foo = [to_foo(t).detach().requires_grad_(t.is_floating_point()) if t is not None else None for t in inputs]
    out_f = fn(*foo)
    out_f.backward(gy.to(FOO))
    assert_same(out_f, out, **tolerance)
    for f, c in zip(foo, cpu):
        if c is not None:
            assert_same(f.grad, c.grad, **tolerance)


CONV2D_CASES = [
    # (N, C, H, W), (O, C/g, kh, kw), kwargs
    ((2, 3, 8, 9), (4, 3, 3, 3), {}),
    ((2, 3, 8, 9), (4, 3, 3, 3), {"padding": 1}),
    ((2, 4, 9, 7), (6, 2, 3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 2}),
    ((1, 6, 10, 10), (6, 1, 3, 3), {"padding": 2, "dilation": 2, "groups": 6}),
    ((3, 5, 6, 6), (7, 5, 1, 1), {}),
    ((3, 5, 6, 6), (7, 5, 1, 1), {"stride": 2}),
    ((2, 2, 5, 5), (3, 2, 5, 5), {"padding": 2}),
    ((4, 3, 7, 7), (2, 3, 3, 3), {"padding": "same"}),
    # Odd batch with groups, per-axis stride/padding/dilation (samples split across threads).
    ((5, 6, 11, 9), (9, 2, 3, 2), {"stride": (2, 3), "padding": (2, 1), "dilation": (2, 1), "groups": 3}),
    # One sample: the GEMMs themselves go parallel.
    ((1, 4, 12, 13), (8, 4, 3, 3), {"stride": 2}),
    # Stride 1 with >= 8 channels each way: the padded-grid path (width taps in the rows, or one
    # GEMM per width tap when there are many channels; asymmetric padding and dilation).
    ((3, 8, 10, 12), (16, 8, 3, 3), {"padding": 1}),
    ((2, 16, 9, 11), (24, 8, 3, 2), {"padding": (2, 1), "dilation": (1, 2), "groups": 2}),
    ((1, 12, 14, 13), (16, 12, 3, 3), {"padding": 0}),
    # Kernels that reach past the input on every side: some taps read only padding (the input
    # gradient once computed an address before the input and panicked; ConvNeXt's 7x7 at 64 px).
    ((1, 1, 2, 2), (1, 1, 7, 7), {"padding": 3}),
    ((2, 3, 2, 3), (4, 3, 7, 7), {"padding": 3, "stride": 2}),
    ((1, 2, 1, 1), (2, 2, 3, 3), {"padding": 3, "dilation": 2}),
    ((2, 8, 3, 3), (8, 1, 7, 7), {"padding": 3, "groups": 8}),
    # Small outputs with several samples: the samples go side by side in one GEMM per chunk
    # (resnet's last stages at 64 px: 2x2 and 4x4 outputs, many channels), strided too, and
    # chunks that do not divide the batch (9 samples of 80 positions: chunks of 7 and 2).
    ((8, 32, 2, 2), (48, 32, 3, 3), {"padding": 1}),
    ((5, 16, 8, 8), (24, 16, 3, 3), {"stride": 2, "padding": 1}),
    ((9, 6, 10, 10), (10, 6, 3, 3), {"padding": 1, "dilation": (1, 2)}),
    ((3, 8, 6, 6), (12, 8, 1, 1), {"stride": 2}),
    # The direct float32 kernel on AVX-512 CPUs (>= 16 output channels per group, >= 64
    # products per output, >= 64 output positions): stride 2, dilation, groups, a partial
    # block of output channels (40 = 32 + 8), resnet's 7x7 stem.
    ((3, 16, 16, 16), (32, 16, 3, 3), {"stride": 2, "padding": 1}),
    ((2, 8, 12, 11), (40, 8, 3, 3), {"padding": 2, "dilation": 2}),
    ((2, 32, 9, 10), (64, 16, 3, 3), {"padding": 1, "groups": 2}),
    ((1, 8, 20, 20), (16, 8, 7, 7), {"stride": 2, "padding": 3}),
    # Its narrow tile, for groups of under 16 output channels (RegNet's 8, ResNeXt's 4; a
    # 7x7 plane, stride 2) and 16-channel groups on the channel-vector tile, any plane size.
    ((1, 48, 14, 14), (48, 8, 3, 3), {"stride": 2, "padding": 1, "groups": 6}),
    ((2, 32, 7, 7), (32, 4, 3, 3), {"padding": 1, "groups": 8}),
    ((2, 32, 10, 9), (32, 16, 3, 3), {"padding": 1, "groups": 2}),
    # Patches (kernel == stride, no padding: ViT's and ConvNeXt's stems, Swin's merges): the
    # column matrix is the input de-interleaved, one GEMM per chunk of samples; rows and columns
    # left over past the last patch, non-square patches, and a shape the direct kernel took.
    ((4, 3, 16, 16), (32, 3, 4, 4), {"stride": 4}),
    ((3, 3, 35, 34), (48, 3, 8, 8), {"stride": 8}),
    ((2, 5, 9, 10), (20, 5, 2, 3), {"stride": (2, 3)}),
    ((2, 4, 36, 36), (32, 4, 4, 4), {"stride": 4}),
    ((1, 3, 24, 24), (16, 3, 4, 4), {"stride": 4}),
    # From 256 output positions a sample, sample by sample (ConvNeXt's stem at 224 px): split
    # over the samples, and one sample whose product goes parallel; rows and columns left over.
    ((2, 4, 41, 35), (12, 4, 2, 2), {"stride": 2}),
    ((1, 3, 66, 50), (8, 3, 4, 3), {"stride": (4, 3)}),
    # Depthwise (groups == C: direct loops per plane): MobileNet's 3x3/5x5 at stride 1 and 2,
    # a channel multiplier of 2, tiny planes, dilation.
    ((4, 16, 16, 16), (16, 1, 3, 3), {"stride": 2, "padding": 1, "groups": 16}),
    ((3, 24, 8, 8), (24, 1, 5, 5), {"padding": 2, "groups": 24}),
    ((2, 12, 2, 2), (12, 1, 5, 5), {"padding": 2, "groups": 12}),
    ((2, 6, 9, 7), (12, 1, 3, 3), {"stride": (1, 2), "padding": 1, "dilation": (2, 1), "groups": 6}),
]


@pytest.mark.parametrize("case", range(len(CONV2D_CASES)))
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv2d_forward_backward(case, bias, dtype):
    xs, ws, kw = CONV2D_CASES[case]
    x, w = sample(xs, dtype, seed=1), sample(ws, dtype, seed=2)
    b = sample((ws[0],), dtype, seed=3) if bias else None
    grads_match(lambda x, w, b: F.conv2d(x, w, b, **kw), [x, w, b], dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_conv2d_reduced_float(dtype):
    x, w, b = sample((2, 3, 6, 6), dtype, seed=1), sample((4, 3, 3, 3), dtype, seed=2), sample((4,), dtype, seed=3)
    check(lambda x, w, b: F.conv2d(x, w, b, padding=1), x, w, b, **tol(dtype))
    grads_match(lambda x, w, b: F.conv2d(x, w, b, stride=2), [x, w, b], dtype)


def test_conv2d_noncontiguous_inputs():
    dtype = torch.float32
    x = sample((2, 9, 3, 8), dtype, seed=1).permute(0, 2, 3, 1)  # channels-last-like strides
    w = sample((3, 3, 4, 3), dtype, seed=2).transpose(2, 3)
    b = sample((6,), dtype, seed=3)[::2]
    check(lambda x, w, b: F.conv2d(x, w, b, padding=1), x, w, b, **tol(dtype))
    grads_match(lambda x, w: F.conv2d(x, w, padding=(0, 1)), [x, w], dtype)
    xcl = sample((2, 3, 8, 8), dtype, seed=4).to(memory_format=torch.channels_last)
    check(lambda x, w: F.conv2d(x, w), xcl, sample((4, 3, 3, 3), dtype, seed=5), **tol(dtype))
    # The same through the direct kernel (its input copy reads any strides), with stride 2.
    xcl = sample((2, 16, 10, 10), dtype, seed=6).to(memory_format=torch.channels_last)
    w = sample((32, 16, 3, 3), dtype, seed=7)
    for stride in (1, 2):
        check(lambda x, w, s=stride: F.conv2d(x, w, padding=1, stride=s), xcl, w, **tol(dtype))
    # Narrow groups into a channels-last output (computed in NCHW, then transposed).
    xg = sample((2, 24, 9, 9), dtype, seed=9).to(memory_format=torch.channels_last)
    grads_match(lambda x, w: F.conv2d(x, w, padding=1, groups=3), [xg, sample((24, 8, 3, 3), dtype, seed=10)], dtype)
    # Patches read in place from a permuted input.
    grads_match(lambda x, w: F.conv2d(x, w, stride=4), [xcl[:, :, 1:, :9], sample((24, 16, 4, 4), dtype, seed=8)],
                dtype)


def test_depthwise_channels_last_and_nonfinite_over_padding():
    # A channels-last input (the direct loops read any strides), and the padding rule of the
    # GEMM paths and of the CPU's float64 convolution: a non-finite weight (or output gradient)
    # times the zero padding is nan.
    x = sample((2, 8, 7, 7), torch.float32, seed=1).to(memory_format=torch.channels_last)
    grads_match(lambda x, w: F.conv2d(x, w, padding=1, groups=8), [x, sample((8, 1, 3, 3), torch.float32, seed=2)],
                torch.float32)
    x, w = sample((2, 3, 4, 5), torch.float64, seed=3), sample((3, 1, 3, 3), torch.float64, seed=4)
    w[1, 0, 0, 2] = float("inf")
    w[2, 0, 1, 1] = float("nan")
    check(lambda x, w: F.conv2d(x, w, padding=1, groups=3), x, w, atol=1e-12, rtol=1e-12)
    # (A channels-last input with such a weight leaves the channels-last loops for the plane
    # loops, which write that nan.)
    check(lambda x, w: F.conv2d(x, w, padding=1, groups=3), x.to(memory_format=torch.channels_last), w,
          atol=1e-12, rtol=1e-12)
    gy = sample((2, 3, 4, 5), torch.float64, seed=5)
    gy[0, 1, 0, 0] = float("inf")
    cpu = x.clone().requires_grad_()
    w_ok = sample((3, 1, 3, 3), torch.float64, seed=4).requires_grad_()
    F.conv2d(cpu, w_ok, padding=1, groups=3).backward(gy)
    foo_x, foo_w = x.to(FOO).requires_grad_(), w_ok.detach().to(FOO).requires_grad_()
    F.conv2d(foo_x, foo_w, padding=1, groups=3).backward(gy.to(FOO))
    assert_same(foo_w.grad, w_ok.grad, atol=1e-12, rtol=1e-12)
    assert_same(foo_x.grad, cpu.grad, atol=1e-12, rtol=1e-12)


MOBILE_CASES = [
    # (N, C, spatial, O, kernel, kwargs): mobilenet's small planes.
    (4, 40, 4, 40, 5, {"padding": 2, "groups": 40}),  # depthwise lanes: 2 blocks of 16 and one of 8
    (3, 24, 9, 24, 3, {"stride": 2, "padding": 1, "groups": 24}),  # strided: weight blocks of 8
    (2, 20, 2, 20, 5, {"padding": 2, "groups": 20}),  # taps wider than the plane
    (4, 12, 2, 36, 1, {}),  # pointwise on 2x2 planes: samples side by side
    (4, 36, 1, 48, 1, {"bias": True}),  # pointwise on 1x1 planes (contiguous and channels-last)
    (0, 40, 4, 40, 5, {"padding": 2, "groups": 40}),  # no samples: empty results, zero weight gradient
    (0, 12, 2, 36, 1, {}),
    # Depthwise, stride 1, rows of 16+: float32 runs across channels through channels-last
    # copies (rows under 32, or 5x5 kernels and up), else the plane loops.
    (2, 20, 18, 20, 3, {"padding": 1, "groups": 20}),
    (1, 8, 34, 8, 5, {"padding": 2, "groups": 8, "bias": True}),
    (1, 8, 34, 8, 3, {"padding": 1, "groups": 8}),
    # One sample, stride 1, planes of 64 positions or fewer: one GEMM over the column matrix
    # (not the padded grid or the packed kernel), with bias, padding and dilation.
    (1, 24, 7, 40, 3, {"padding": 1, "bias": True}),
    (1, 16, 8, 24, 3, {"padding": 2, "dilation": 2}),
    (1, 32, 5, 16, 3, {"padding": 0}),
    # Batched (input and weight gradients as row-major GEMMs over stacked samples): resnet18's
    # last stage at 64 px, and in two chunks of samples (128 = 512 / 4 positions, then 2).
    (3, 16, 2, 24, 3, {"padding": 1}),
    (130, 4, 2, 6, 3, {"padding": 1}),
    (3, 4, 5, 6, 2, {"stride": 3, "bias": True}),  # input elements no tap reads: zero gradient
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", MOBILE_CASES, ids=lambda c: f"{c[1]}x{c[2]}k{c[4]}{sorted(c[5])}")
def test_small_plane_convolutions(case, dtype):
    n, c, hw, o, k, kwargs = case
    kwargs = dict(kwargs)
    bias = sample((o,), dtype, seed=3) if kwargs.pop("bias", False) else None
    x = sample((n, c, hw, hw), dtype, seed=1)
    w = sample((o, c // kwargs.get("groups", 1), k, k), dtype, seed=2)
    grads_match(lambda x, w, b: F.conv2d(x, w, b, **kwargs), [x, w, bias], dtype)
    # A channels-last input and a strided (transposed) one.
    grads_match(lambda x, w, b: F.conv2d(x, w, b, **kwargs), [x.to(memory_format=torch.channels_last), w, bias],
                dtype)
    xt = sample((n, c, hw, hw), dtype, seed=4).transpose(2, 3)
    grads_match(lambda x, w, b: F.conv2d(x, w, b, **kwargs), [xt, w, bias], dtype)


CHANNELS_LAST_CASES = [
    # (N, C, spatial, O, kernel, kwargs)
    (2, 3, 12, 32, 7, {"stride": 2, "padding": 3}),  # an RGB stem
    (2, 3, 10, 32, 3, {"padding": 1}),  # an RGB 3x3 stem: the grid in blocks of 3 channels
    (2, 1, 9, 16, 3, {"padding": 1}),  # one channel: the grid in blocks of 1
    (2, 6, 8, 24, 3, {"padding": 1}),  # the grid in blocks of 8, 2 of them zero
    (3, 5, 7, 16, 3, {"stride": 2, "padding": 1}),  # 45 k's, runs across packed blocks
    (3, 16, 9, 48, 3, {"padding": 1}),
    (2, 32, 10, 64, 3, {"stride": 2, "padding": 1}),
    # 64 or more output pixels: the direct kernel's weight gradient for an RGB stem, GEMMs over
    # channels-last columns from 8 input channels on.
    (2, 3, 18, 32, 7, {"stride": 2, "padding": 3}),
    (2, 16, 18, 32, 3, {"stride": 2, "padding": 1}),
    # Under 64 output pixels (2-D), batched: the im2col GEMMs in either layout.
    (3, 32, 4, 48, 3, {"padding": 1}),
    (2, 24, 7, 40, 3, {"padding": 2, "dilation": 2, "groups": 4}),
    (4, 32, 5, 16, 1, {}),
    # Stride 1, one group: the blocked padded grid (forward, input and weight gradients), with
    # a partial second block of 16 channels, and with dilation.
    (4, 20, 12, 48, 3, {"padding": 1}),
    (2, 16, 16, 32, 3, {"padding": 2, "dilation": 2}),
    # Stride 1 from 32 channels to 48 (a block of 32 and one of 16): pixels read through
    # pointers on AVX2 and AVX-512, forward and input gradient.
    (2, 32, 9, 48, 3, {"padding": 1}),
    # 16 output channels from blocks of 16: the weight gradient's tile of 8 output channels x 3
    # vectors of 16 ks (4 vectors of a 2x2 kernel: the last tile holds one), dilated too.
    (3, 32, 9, 16, 3, {"padding": 1}),
    (2, 16, 10, 16, 2, {}),
    # 16 channels on the padded grid, rows of 25 outputs: on AVX-512 three pieces of 8-9
    # positions each (tile kernels narrower than 12), bias added from the registers.
    (2, 16, 25, 32, 3, {"padding": 1}),
    (2, 32, 12, 16, 3, {"padding": 2, "dilation": 2}),
    # Depthwise from a channels-last input: computed channels-last, blocks of 16 channels (and
    # a tail) by 4 pixels, taps over padding skipped; ConvNeXt's 7x7, strided, dilated.
    (2, 8, 6, 8, 3, {"padding": 1, "groups": 8}),
    (1, 40, 9, 40, 7, {"padding": 3, "groups": 40}),
    (1, 32, 14, 32, 7, {"padding": 3, "groups": 32}),  # untested 4-pixel blocks inside the rows
    (2, 16, 9, 16, 3, {"stride": 2, "padding": 1, "groups": 16}),
    (1, 32, 11, 32, 5, {"padding": 4, "dilation": 2, "groups": 32}),
    (2, 8, 6, 16, 3, {"padding": 1, "groups": 8}),  # two outputs per channel: the plane loops
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("layout", ["input", "weight", "both"])
@pytest.mark.parametrize("case", CHANNELS_LAST_CASES, ids=lambda c: f"{c[1]}to{c[3]}k{c[4]}")
def test_conv_channels_last_layouts(dtype, dims, layout, case):
    # As on the CPU, a convolution whose input or weight is channels-last gives a channels-last
    # result (float32: the packed kernel computes in that layout), and the gradients have the
    # CPU's strides.
    n, c, size, o, k, kw = case
    if dims == 3:
        size, k = min(size, 6), min(k, 3)
    fmt = torch.channels_last if dims == 2 else torch.channels_last_3d
    conv = F.conv2d if dims == 2 else F.conv3d
    x = sample((n, c) + (size,) * dims, dtype, seed=1)
    w = sample((o, c // kw.get("groups", 1)) + (k,) * dims, dtype, seed=2)
    b = sample((o,), dtype, seed=3)
    if layout in ("input", "both"):
        x = x.contiguous(memory_format=fmt)
    if layout in ("weight", "both"):
        w = w.contiguous(memory_format=fmt)
    # bfloat16 against the CPU's float32 convolution of the same values, rounded once: foo
    # accumulates in float32, as the CPU's oneDNN does where the CPU has AVX-512 (BF16); without
    # it the CPU's fallback rounds partial sums to bfloat16 (input-gradient errors of 0.5 on
    # values of 75 measured on a Zen 3, beyond any tolerance that still tests something).
    ref_dtype = torch.float32 if dtype == torch.bfloat16 else dtype
    cpu = [t.to(ref_dtype, copy=True).requires_grad_() for t in (x, w, b)]
    foo = [to_foo(t).detach().requires_grad_() for t in (x, w, b)]
    out, out_f = conv(*cpu, **kw), conv(*foo, **kw)
    assert_same(out_f, out.to(dtype), check_stride=True, **tol(dtype))
    # (float64 3-D runs slow_conv3d; a one-channel input and weight are dense in both layouts.)
    if layout != "weight" and (dims == 2 or dtype != torch.float64) and c > 1:
        assert out_f.is_contiguous(memory_format=fmt) and not out_f.is_contiguous()
    gy = sample(out.shape, dtype, seed=9)
    out.backward(gy.to(ref_dtype))
    out_f.backward(gy.to(FOO))
    # A 1x1 or depthwise weight is dense in both layouts: the CPU's strides for its gradient
    # follow oneDNN's internal choices, not a layout rule.
    ambiguous = w.is_contiguous() and w.is_contiguous(memory_format=fmt)
    for f, ref in zip(foo, cpu):
        assert_same(f.grad, ref.grad.to(dtype), check_stride=not (ambiguous and f.dim() > 1), **tol(dtype))


# 3x3 stride-1 convolutions into 16 channels from 32+, 4+ samples
# (`conv/tap_rows.rs`: each input pixel times all nine taps, then each output pixel's taps
# gathered): the forward, and the input gradient of a layer from 16 channels into 32; rows that
# leave partial tiles of pixels, padding 0 and 1, one-pixel planes.
TAP_ROWS_CASES = [
    ((4, 32, 7, 9), 16, 1),
    ((6, 32, 5, 13), 16, 0),
    ((4, 33, 3, 3), 16, 1),
    ((4, 32, 1, 1), 16, 1),
    ((4, 16, 10, 10), 32, 1),
    ((5, 48, 12, 20), 16, 1),
]


@pytest.mark.parametrize("fmt", [torch.channels_last, torch.contiguous_format], ids=["cl", "nchw"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", TAP_ROWS_CASES, ids=lambda c: f"{c[0]}to{c[1]}p{c[2]}")
def test_conv_sixteen_channels(case, bias, fmt):
    """3x3 convolutions into 16 channels (and input gradients from 16): conv/tap_rows.rs on
    channels-last operands, on channels-last copies of NCHW ones."""
    (n, c, h, w), o, padding = case
    x = sample((n, c, h, w), torch.float32, seed=1).to(memory_format=fmt).requires_grad_()
    wt = sample((o, c, 3, 3), torch.float32, seed=2).requires_grad_()
    b = sample((o,), torch.float32, seed=3).requires_grad_() if bias else None
    y = F.conv2d(x, wt, b, padding=padding)
    gy = sample(y.shape, torch.float32, seed=4).contiguous(memory_format=fmt)
    y.backward(gy)
    xf, wf = (t.detach().to(FOO).requires_grad_() for t in (x, wt))
    bf = b.detach().to(FOO).requires_grad_() if bias else None
    yf = F.conv2d(xf, wf, bf, padding=padding)
    yf.backward(gy.to(FOO))
    assert yf.is_contiguous(memory_format=fmt) and xf.grad.is_contiguous(memory_format=fmt)
    for got, want in [(yf, y), (xf.grad, x.grad), (wf.grad, wt.grad)] + ([(bf.grad, b.grad)] if bias else []):
        assert_same(got, want, **tol(torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1}, {"dilation": 3, "groups": 2, "padding": 2}])
def test_conv1d(dtype, kw):
    x, w, b = sample((3, 4, 17), dtype, seed=1), sample((6, 4 // kw.get("groups", 1), 3), dtype, seed=2), sample(
        (6,), dtype, seed=3)
    grads_match(lambda x, w, b: F.conv1d(x, w, b, **kw), [x, w, b], dtype)


def test_conv3d():
    dtype = torch.float64
    x, w, b = sample((2, 2, 5, 6, 4), dtype, seed=1), sample((3, 2, 2, 3, 2), dtype, seed=2), sample((3,), dtype)
    grads_match(lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=1), [x, w, b], dtype)
    # Stride 1 (padded grid over depth, height and width).
    x, w, b = sample((2, 8, 5, 6, 7), dtype, seed=1), sample((8, 8, 3, 2, 3), dtype, seed=2), sample((8,), dtype)
    grads_match(lambda x, w, b: F.conv3d(x, w, b, padding=(1, 0, 2), dilation=(1, 2, 1)), [x, w, b], dtype)
    # Patches in three dims (the column matrix is the input de-interleaved), float32 too.
    for dt in (dtype, torch.float32):
        x, w = sample((3, 2, 8, 9, 10), dt, seed=3), sample((16, 2, 2, 3, 2), dt, seed=4)
        grads_match(lambda x, w: F.conv3d(x, w, stride=(2, 3, 2)), [x, w], dt)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv_stride1_grid_layouts(dtype):
    # Channels-last input (strided rows for the padded copy), a wide 1-D conv (GEMMs straight on
    # the padded planes), a stride-1 transposed conv with output padding (uneven grid padding).
    x = sample((3, 8, 9, 10), dtype, seed=1).to(memory_format=torch.channels_last)
    w, b = sample((12, 8, 3, 3), dtype, seed=2), sample((12,), dtype, seed=3)
    grads_match(lambda x, w, b: F.conv2d(x, w, b, padding=1), [x, w, b], dtype)
    x, w, b = sample((3, 40, 17), dtype, seed=1), sample((8, 40, 3), dtype, seed=2), sample((8,), dtype, seed=3)
    grads_match(lambda x, w, b: F.conv1d(x, w, b, padding=1), [x, w, b], dtype)
    x, w, b = sample((2, 8, 6, 7), dtype, seed=1), sample((8, 12, 3, 3), dtype, seed=2), sample((12,), dtype, seed=3)
    grads_match(lambda x, w, b: F.conv_transpose2d(x, w, b, dilation=2, output_padding=1), [x, w, b], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "kw", [{}, {"stride": 2, "padding": 1, "output_padding": 1}, {"groups": 2, "dilation": 2, "stride": 2}]
)
def test_conv_transpose2d(dtype, kw):
    x = sample((2, 4, 5, 6), dtype, seed=1)
    w = sample((4, 6 // kw.get("groups", 1), 3, 3), dtype, seed=2)
    b = sample((6,), dtype, seed=3)
    grads_match(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), [x, w, b], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv_transpose2d_patches(dtype):
    # A U-Net's 2x2 stride-2 upsampling: its backward's input and weight gradients are a
    # convolution in patches of the output gradient, here with 16 x 17 = 272 positions a sample
    # (sample by sample).
    x = sample((2, 6, 16, 17), dtype, seed=1)
    w = sample((6, 5, 2, 2), dtype, seed=2)
    b = sample((5,), dtype, seed=3)
    grads_match(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2), [x, w, b], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kw", [{"stride": 2}, {"padding": 1}])
def test_conv_transpose2d_small_planes(dtype, kw):
    # A 2x2 input: the forward is a batched input gradient of short rows (gathered where the
    # product left its sums), with the bias.
    x = sample((3, 8, 2, 2), dtype, seed=1)
    w = sample((8, 5, 3, 3), dtype, seed=2)
    b = sample((5,), dtype, seed=3)
    grads_match(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), [x, w, b], dtype)


@pytest.mark.parametrize("kw", [{"stride": 2, "padding": 1, "output_padding": 1}, {"stride": 3}, {"stride": (2, 3)}])
def test_conv_transpose2d_channels_last(kw):
    # A channels-last strided transposed convolution's forward (with the bias) and its input's
    # gradient (a strided convolution's input gradient, one grid pass per phase), in the CPU's
    # strides; stride 3 over a 3-wide kernel, and 2 over 3 with no padding.
    fmt = torch.channels_last
    x = sample((3, 20, 7, 9), torch.float32, seed=1).contiguous(memory_format=fmt)
    w = sample((20, 24, 3, 3), torch.float32, seed=2).contiguous(memory_format=fmt)
    b = sample((24,), torch.float32, seed=3)
    cpu = [t.clone().requires_grad_() for t in (x, w, b)]
    foo = [to_foo(t).detach().requires_grad_() for t in (x, w, b)]
    out, out_f = F.conv_transpose2d(*cpu, **kw), F.conv_transpose2d(*foo, **kw)
    assert_same(out_f, out, check_stride=True, **tol(torch.float32))
    gy = sample(out.shape, torch.float32, seed=9).contiguous(memory_format=fmt)
    out.backward(gy)
    out_f.backward(gy.to(FOO))
    for f, c in zip(foo, cpu):
        assert_same(f.grad, c.grad, check_stride=True, **tol(torch.float32))


@pytest.mark.parametrize("fn, shape", [(F.conv_transpose1d, (2, 1, 2)), (F.conv_transpose2d, (2, 1, 2, 2))])
def test_conv_transpose_with_empty_output(fn, shape):
    # Padding that eats the whole output: the CPU returns an empty tensor for float32/bfloat16
    # (its mkldnn path) but raises "Output size is too small" for float64 (its slow path). foo
    # follows the float32 behaviour for every dtype, forward and backward.
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(shape, dtype=dtype, device="foo", requires_grad=True)
        w = torch.randn((1, 1) + (1,) * (len(shape) - 2), dtype=dtype, device="foo")
        y = fn(x, w, padding=1)
        assert y.shape == shape[:2] + (0,) * (len(shape) - 2)
        y.sum().backward()
        assert x.grad.shape == x.shape and not x.grad.cpu().any()


def test_conv_transpose1d():
    dtype = torch.float64
    x, w, b = sample((2, 3, 7), dtype, seed=1), sample((3, 5, 4), dtype, seed=2), sample((5,), dtype, seed=3)
    grads_match(lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=1), [x, w, b], dtype)


def test_conv_unbatched_and_large():
    dtype = torch.float32
    check(lambda x, w: F.conv2d(x, w, padding=1), sample((3, 9, 9), dtype), sample((5, 3, 3, 3), dtype),
          **tol(dtype))
    x, w, b = sample((8, 16, 24, 24), dtype, seed=1), sample((32, 16, 3, 3), dtype, seed=2), sample((32,), dtype)
    # The weight gradient sums 8 * 24 * 24 = 4608 products per element: CPU's own float32 result
    # is up to 1e-3 away from the float64 one here (foo's 2.4e-4), so compare at that scale.
    grads_match(lambda x, w, b: F.conv2d(x, w, b, padding=1), [x, w, b], dtype,
                tolerance={"atol": 2e-3, "rtol": 1e-4})


def test_conv_module_training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.MaxPool2d(2),
                                torch.nn.Conv2d(4, 2, 3), torch.nn.AvgPool2d(2))
    x = sample((2, 3, 12, 12), torch.float32)
    out = model(x)
    gy = sample(out.shape, torch.float32, seed=5)
    out.backward(gy)
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    model_f = model.to(FOO)
    out_f = model_f(x.to(FOO))
    out_f.backward(gy.to(FOO))
    assert_same(out_f, out, **tol(torch.float32))
    for p, g in zip(model_f.parameters(), want):
        assert_same(p.grad, g, **tol(torch.float32))


# ---- pooling ------------------------------------------------------------------------------------

MAX_CASES = [
    (2, {}),
    (3, {"stride": 2, "padding": 1}),
    ((3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (2, 1)}),
    (3, {"stride": 2, "ceil_mode": True}),
    (2, {"stride": 3, "padding": 1, "ceil_mode": True, "dilation": 2}),
]


@pytest.mark.parametrize("case", range(len(MAX_CASES)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool2d(case, dtype):
    k, kw = MAX_CASES[case]
    x = sample((2, 3, 9, 10), dtype, seed=1)
    check(lambda x: F.max_pool2d(x, k, return_indices=True, **kw), x, **tol(dtype))
    grads_match(lambda x: F.max_pool2d(x, k, **kw), [x], dtype)


def test_max_pool2d_nan_unbatched_strided_out():
    x = sample((3, 8, 8), torch.float32)
    x[0, 1, 1] = float("nan")
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), x)
    xt = sample((2, 8, 3, 8), torch.float32).transpose(1, 2)
    check(lambda x: F.max_pool2d(x, 3, 1, 1, return_indices=True), xt)

    def out_fn(x):
        out = torch.empty(0, device=x.device)
        idx = torch.empty(0, dtype=torch.long, device=x.device)
        torch.ops.aten.max_pool2d_with_indices.out(x, [2, 2], [2, 2], [0, 0], [1, 1], False, out=out, indices=idx)
        return out, idx

    check(out_fn, sample((1, 2, 6, 6), torch.float32))


@pytest.mark.parametrize("k, kw", [(2, {}), (3, {"stride": 1}), ((2, 3), {"stride": (1, 2), "ceil_mode": True})])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_max_pool2d_ties_nan_inf(k, kw, dtype):
    # Ties keep the first index, NaN wins (the last NaN of a window, as on CPU), an all -inf
    # window keeps its start; contiguous and channels-last inputs.
    x = torch.randint(0, 3, (2, 3, 7, 9)).to(dtype)
    x[0, 0, 1, 1] = x[0, 0, 1, 2] = x[1, 2, 4, 4] = float("nan")
    x[0, 1, :3, :4] = float("-inf")
    check(lambda x: F.max_pool2d(x, k, return_indices=True, **kw), x)
    check(lambda x: F.max_pool2d(x, k, return_indices=True, **kw), x.contiguous(memory_format=torch.channels_last))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [38, 39, 64])
def test_max_pool2d_2x2_rows_ties_nan(dtype, width):
    # The 2x2 / stride-2 kernel reads whole row pairs (vectorized over 8+ windows): ties keep
    # the first tap in window order, the last NaN of a window wins, all -inf keeps the start;
    # odd widths drop the last column; offset rows (a slice) too.
    x = torch.randint(0, 3, (2, 3, 7, width)).to(dtype)
    x[0, 0, 0, 0] = x[0, 0, 1, 1] = x[1, 2, 4, 7] = x[1, 2, 5, 6] = float("nan")
    x[0, 1, :2, 2:20] = float("-inf")
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), x)
    check(lambda x: F.max_pool2d(x[:, :, 1:, 1:], 2, return_indices=True), x)
    grads_match(lambda x: F.max_pool2d(x, 2), [sample((2, 3, 6, width), dtype, seed=4)], dtype)


@pytest.mark.parametrize("k, kw", [(2, {}), (3, {"stride": 1, "padding": 1}), (3, {"stride": 2, "dilation": 2}),
                                   (2, {"stride": 3})])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_max_pool2d_wide_rows_and_expanded_input(k, kw, dtype):
    # Rows wide enough for the vectorized tap loops and their tails (stride 1, 2 and 3 on
    # contiguous rows), and a zero column stride (an expanded view), which takes the scalar loop.
    check(lambda x: F.max_pool2d(x, k, return_indices=True, **kw), sample((2, 3, 11, 133), dtype, seed=3))
    check(lambda x: F.max_pool2d(x, k, return_indices=True, **kw), sample((2, 3, 11, 1), dtype).expand(2, 3, 11, 40))


AVG_CASES = [
    (2, {}),
    (3, {"stride": 2, "padding": 1}),
    (3, {"stride": 2, "padding": 1, "count_include_pad": False}),
    (3, {"stride": 2, "padding": 1, "ceil_mode": True}),
    (3, {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
    ((3, 2), {"stride": (1, 2), "padding": (1, 1), "divisor_override": 5}),
]


@pytest.mark.parametrize("case", range(len(AVG_CASES)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_avg_pool2d(case, dtype):
    k, kw = AVG_CASES[case]
    x = sample((2, 3, 9, 10), dtype, seed=1)
    grads_match(lambda x: F.avg_pool2d(x, k, **kw), [x], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("out", [(3, 4), (5, 7), (9, 10), (2, 1), (13, 11)])
def test_adaptive_avg_pool2d(dtype, out):
    x = sample((2, 3, 9, 10), dtype, seed=1)
    grads_match(lambda x: F.adaptive_avg_pool2d(x, out), [x], dtype)
    check(lambda x: F.adaptive_avg_pool2d(x, out), sample((3, 9, 10), dtype).transpose(1, 2), **tol(dtype))


@pytest.mark.fallback_ok  # output 1x1 is a mean (reduction family)
def test_adaptive_avg_pool2d_global():
    check(lambda x: F.adaptive_avg_pool2d(x, 1), sample((2, 3, 5, 5), torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pool1d(dtype):
    x = sample((2, 3, 11), dtype, seed=1)
    grads_match(lambda x: F.max_pool1d(x, 3, 2, 1), [x], dtype)
    grads_match(lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False), [x], dtype)
    grads_match(lambda x: F.adaptive_avg_pool1d(x, 4), [x], dtype)
    check(lambda x: F.max_pool1d(x, 2, return_indices=True), x)


def test_pool_errors():
    x = sample((1, 1, 4, 4), torch.float32).to(FOO)
    with pytest.raises(RuntimeError):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "sliced"])
def test_conv_short_rows_gather_map(layout):
    # Output rows narrower than 16 are im2col'd through a (tap, position) -> input offset map:
    # resnet18's 4x4 and 2x2 stages, stride 2 and dilation, 3-D, inputs of any strides.
    dtype = torch.float64
    x = sample((3, 6, 9, 9), dtype, seed=3)
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    elif layout == "sliced":
        x = sample((3, 8, 11, 12), dtype, seed=3)[:, 1:7, 1:10, 2:11]
    w, b = sample((10, 6, 3, 3), dtype, seed=4), sample((10,), dtype, seed=5)
    for kw in ({"padding": 1}, {"stride": 2, "padding": 1}, {"stride": 3, "dilation": 2, "padding": 3}):
        grads_match(lambda x, w, b, kw=kw: F.conv2d(x, w, b, **kw), [x, w, b], dtype)
    x3, w3 = sample((2, 3, 4, 5, 3), dtype, seed=6), sample((4, 3, 3, 2, 3), dtype, seed=7)
    grads_match(lambda x, w: F.conv3d(x, w, None, stride=(1, 2, 1), padding=(1, 1, 2)), [x3, w3], dtype)


WINOGRAD_CASES = [
    # (N, C, (H, W), O, padding): 3x3 stride-1 layers of 96+ channels with 32+ output tiles of
    # 2x2 over the batch take Winograd F(2x2, 3x3), forward and input gradient: resnet's 8x8
    # stage, odd and non-square planes (half tiles at the edges), padding 0 and 2, 4x4 planes
    # side by side, one sample of 49 tiles, two of 32.
    (8, 128, (8, 8), 128, 1),
    (8, 96, (9, 7), 112, 1),
    (16, 128, (6, 6), 100, 0),
    (4, 96, (7, 7), 96, 2),
    (16, 256, (4, 4), 128, 1),
    (1, 128, (14, 14), 96, 1),
    (2, 96, (8, 8), 128, 1),
]


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "sliced"])
@pytest.mark.parametrize("case", WINOGRAD_CASES, ids=str)
def test_conv_winograd_layers(case, layout):
    n, c, (h, w), o, p = case
    dtype = torch.float32
    x = sample((n, c, h, w), dtype, seed=1)
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    elif layout == "sliced":
        x = sample((n, c + 2, h + 1, w + 3), dtype, seed=1)[:, 1:-1, 1:, 2:-1]
    wt, b = sample((o, c, 3, 3), dtype, seed=2), sample((o,), dtype, seed=3)
    # Sums of up to 2304 products of magnitude up to 9 (outputs in the hundreds): the CPU's own
    # error against float64 reaches 1.5e-4 there, Winograd's a few times that (see below).
    grads_match(lambda x, w, b: F.conv2d(x, w, b, padding=p), [x, wt, b], dtype,
                tolerance={"atol": 1e-3, "rtol": 1e-4})


@pytest.mark.parametrize("case", WINOGRAD_CASES[:2] + WINOGRAD_CASES[-1:], ids=str)
def test_conv_winograd_rounding(case):
    # Winograd adds and subtracts inputs (and weights) before the products: its error against
    # an exact (float64) convolution stays within a small multiple of the CPU's direct sum's.
    n, c, (h, w), o, p = case
    x, wt = sample((n, c, h, w), torch.float64, seed=1), sample((o, c, 3, 3), torch.float64, seed=2)
    exact = F.conv2d(x, wt, padding=p)
    x.requires_grad_(True)
    gy = sample(exact.shape, torch.float64, seed=4)
    F.conv2d(x, wt, padding=p).backward(gy)
    exact_grad = x.grad
    for dev in ("cpu", FOO):
        xf = x.detach().float().to(dev).requires_grad_(True)
        y = F.conv2d(xf, wt.float().to(dev), padding=p)
        y.backward(gy.float().to(dev))
        err = ((y.detach().cpu().double() - exact).abs().max() / exact.abs().max()).item()
        gerr = ((xf.grad.cpu().double() - exact_grad).abs().max() / exact_grad.abs().max()).item()
        if dev == "cpu":
            cpu_err, cpu_gerr = err, gerr
    assert err <= 4 * cpu_err + 1e-7 and gerr <= 4 * cpu_gerr + 1e-7, (err, cpu_err, gerr, cpu_gerr)
