"""float16/bfloat16 kernels that autocast relies on, against CPU computed in float32 on the same
(reduced) values: matrix products and convolutions accumulate in float32 and round once, so
they stay within a few ulps of the reduced type; forward and backward, dense, transposed,
strided and zero-size inputs. Also the ops autocast leaves in reduced precision in a
transformer step (activations, elementwise, dropout, embedding, copies)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from helpers import to_foo

LOW = [torch.float16, torch.bfloat16]


def _tol(dtype: torch.dtype) -> dict[str, float]:
    # One rounding of a float32-accumulated result (eps 2^-11 / 2^-8), with some headroom.
    return {"atol": 2e-3, "rtol": 2e-3} if dtype == torch.float16 else {"atol": 1.6e-2, "rtol": 1.6e-2}


def _x(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) * 2 - 1).to(dtype)


def _layout(t: torch.Tensor, how: str) -> torch.Tensor:
    """The same values as `t`, laid out `how`."""
    if how == "transposed":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if how == "strided":
        big = torch.zeros(*t.shape[:-1], t.shape[-1] * 2, dtype=t.dtype)
        big[..., ::2] = t
        return big[..., ::2]
    return t


def _check_fwd_bwd(fn: Callable[..., torch.Tensor], args: list[torch.Tensor], dtype: torch.dtype,
                   grad: bool = True) -> None:
    """fn on foo in `dtype` vs fn on CPU in float32 (same values); gradients likewise."""
    foo_args = [a.detach().clone().requires_grad_(grad) if a.is_floating_point() else a for a in to_foo(args)]
    ref_args = [a.detach().float().requires_grad_(grad) if a.is_floating_point() else a for a in args]
    out, ref = fn(*foo_args), fn(*ref_args)
    assert out.device.type == "foo" and out.dtype == dtype
    torch.testing.assert_close(out.cpu().float(), ref.detach(), **_tol(dtype))
    if not grad or out.numel() == 0:
        return
    go = _x(tuple(out.shape), dtype, seed=99)
    out.backward(go.to("foo"))
    ref.backward(go.float())
    for f, r in zip(foo_args, ref_args):
        if r.requires_grad:
            assert f.grad.dtype == dtype
            torch.testing.assert_close(f.grad.cpu().float(), r.grad, **_tol(dtype))


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("how", ["contiguous", "transposed", "strided"])
def test_mm_family(dtype, how):
    a, b = _layout(_x((33, 40), dtype), how), _layout(_x((40, 17), dtype, 1), how)
    _check_fwd_bwd(torch.mm, [a, b], dtype)
    _check_fwd_bwd(lambda s, x, y: torch.addmm(s, x, y, beta=0.5, alpha=2.0), [_x((17,), dtype, 2), a, b], dtype)
    ba, bb = _layout(_x((3, 9, 20), dtype, 3), how), _layout(_x((3, 20, 11), dtype, 4), how)
    _check_fwd_bwd(torch.bmm, [ba, bb], dtype)
    _check_fwd_bwd(torch.baddbmm, [_x((3, 9, 11), dtype, 5), ba, bb], dtype)
    _check_fwd_bwd(F.linear, [_x((4, 6, 40), dtype, 6), a, _x((33,), dtype, 7)], dtype)
    _check_fwd_bwd(torch.addmv, [_x((33,), dtype, 8), a, _x((40,), dtype, 9)], dtype)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_mm_large_k_accumulates_in_float32(dtype):
    # k = 4096 terms: accumulating in the reduced type would be off by far more than one rounding.
    a, b = _x((8, 4096), dtype), _x((4096, 8), dtype, 1)
    _check_fwd_bwd(torch.mm, [a, b], dtype, grad=False)
    n = 1024
    a, b = _x((n, n), dtype, 2), _x((n, n), dtype, 3)
    _check_fwd_bwd(torch.mm, [a, b], dtype, grad=False)


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("shapes", [((0, 5), (5, 3)), ((4, 0), (0, 3)), ((4, 5), (5, 0))], ids=str)
def test_mm_zero_size(dtype, shapes):
    a, b = _x(shapes[0], dtype), _x(shapes[1], dtype, 1)
    _check_fwd_bwd(torch.mm, [a, b], dtype)
    _check_fwd_bwd(torch.addmm, [_x((shapes[1][1],), dtype, 2), a, b], dtype)


CONVS: dict[str, tuple[Callable[..., torch.Tensor], tuple[int, ...], tuple[int, ...]]] = {
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b, padding=1), (2, 4, 9), (6, 4, 3)),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), (2, 4, 8, 7), (6, 4, 3, 3)),
    "conv2d_groups": (lambda x, w, b: F.conv2d(x, w, b, groups=2, dilation=2), (2, 4, 9, 9), (6, 2, 3, 3)),
    "conv3d": (lambda x, w, b: F.conv3d(x, w, b), (1, 2, 5, 4, 4), (3, 2, 2, 2, 2)),
    "conv_transpose2d": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2), (2, 6, 4, 4), (6, 3, 3, 3)),
}


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", list(CONVS))
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "permuted"])
def test_conv_family(dtype, name, channels_last):
    fn, xs, ws = CONVS[name]
    x = _x(xs, dtype)
    if channels_last:  # a non-contiguous input with the same values
        x = x.movedim(1, -1).contiguous().movedim(-1, 1)
    bias_len = ws[1] if name == "conv_transpose2d" else ws[0]  # output channels
    _check_fwd_bwd(fn, [x, _x(ws, dtype, 1), _x((bias_len,), dtype, 2)], dtype)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_conv_zero_batch(dtype):
    fn, _, ws = CONVS["conv2d"]
    _check_fwd_bwd(fn, [_x((0, 4, 8, 7), dtype), _x(ws, dtype, 1), _x((6,), dtype, 2)], dtype)


# Ops autocast leaves in the reduced dtype (not in CUDA's lists) that a transformer step uses.
ELEMENTWISE: dict[str, tuple[Callable[..., torch.Tensor], int]] = {
    "relu": (torch.relu, 1),
    "gelu": (F.gelu, 1),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), 1),
    "silu": (F.silu, 1),
    "tanh": (torch.tanh, 1),
    "sigmoid": (torch.sigmoid, 1),
    "add": (torch.add, 2),
    "mul": (torch.mul, 2),
    "sub_scaled": (lambda a, b: a - 0.5 * b, 2),
    "div": (lambda a, b: a / (b.abs() + 1), 2),
    "masked_fill": (lambda a: a.masked_fill(a > 0.5, -1.0), 1),
    "transpose_copy": (lambda a: a.t().contiguous() * 1, 1),
    "reshape_permute": (lambda a: a.reshape(2, -1).permute(1, 0) * 2, 1),
    "mean": (lambda a: a.mean(-1), 1),
}


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_reduced_elementwise(dtype, name):
    fn, arity = ELEMENTWISE[name]
    _check_fwd_bwd(fn, [_x((6, 10), dtype, i) for i in range(arity)], dtype)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_reduced_dropout_and_embedding(dtype):
    x = torch.ones(1000, 100, dtype=dtype, device="foo", requires_grad=True)
    y = F.dropout(x, 0.25)
    assert y.dtype == dtype
    kept = (y != 0).float().mean().item()
    scaled = torch.tensor(4 / 3, dtype=dtype).item()  # 1 / (1 - p) rounded to dtype
    assert 0.72 < kept < 0.78 and set(torch.unique(y.detach().cpu().float()).tolist()) <= {0.0, scaled}
    y.sum().backward()
    assert x.grad.dtype == dtype
    w = _x((20, 8), dtype)
    idx = torch.tensor([[1, 5, 5], [0, 19, 3]])
    _check_fwd_bwd(lambda w: F.embedding(idx.to(w.device), w), [w], dtype)
