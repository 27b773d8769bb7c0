"""What foo accepts and refuses, and with which exception class: the CPU's answer on the same
inputs (issue 13). Each case builds its inputs on the device it is given, runs once on the CPU and
once on foo; both must succeed with the same result, or both raise the same exception class."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from helpers import FOO, assert_same


def _t(data: Any, d: str, **kw: Any) -> torch.Tensor:
    return torch.tensor(data, device=d, **kw)


def _z(d: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 3, dtype=torch.cdouble, generator=g).to(d)


def _long0(d: str) -> torch.Tensor:
    return torch.empty((), dtype=torch.long, device=d)


def _long(d: str) -> torch.Tensor:
    return torch.empty(0, dtype=torch.long, device=d)


Case = Callable[[str], Any]

# Refused by foo although valid (the CPU takes them).
VALID: dict[str, Case] = {
    "max_pool2d int64": lambda d: F.max_pool2d(torch.arange(16, device=d).view(1, 1, 4, 4), 2),
    "conv2d int64": lambda d: F.conv2d(torch.arange(18, device=d).view(1, 2, 3, 3),
                                       torch.ones(1, 2, 2, 2, dtype=torch.long, device=d)),
    "conv1d int32 with bias": lambda d: F.conv1d(torch.ones(1, 1, 4, dtype=torch.int32, device=d),
                                                 torch.ones(2, 1, 2, dtype=torch.int32, device=d),
                                                 torch.ones(2, dtype=torch.int32, device=d)),
    "nonzero is column-major": lambda d: (lambda r: (r, torch.tensor(r.stride(), device=d)))(
        torch.nonzero(torch.eye(3, device=d))),
    "avg_pool2d int64": lambda d: F.avg_pool2d(torch.arange(16, device=d).view(1, 1, 4, 4), 2),
    "nan_to_num complex": lambda d: torch.nan_to_num(_t([complex(float("nan"), 1), complex(2, float("inf"))], d)),
    "logaddexp complex": lambda d: torch.logaddexp(_t([1 + 1j], d), _t([2 - 1j], d)),
    "scatter_reduce mean complex": lambda d: torch.zeros(3, dtype=torch.complex64, device=d).scatter_reduce(
        0, _t([0, 0, 1], d), _t([1 + 1j, 2, 3], d, dtype=torch.complex64), "mean"),
    "index_put_ on an expanded tensor": lambda d: torch.zeros(3, device=d).expand(2, 3).index_put_(
        (_t([0], d),), _t(1.0, d)),
    "lerp with a 0-dim weight of another dtype": lambda d: torch.lerp(
        torch.ones(3, device=d, dtype=torch.float64), torch.zeros(3, device=d, dtype=torch.float64), _t(0.25, d)),
    "softmax of an empty int64 tensor": lambda d: torch.softmax(torch.empty(0, dtype=torch.int64, device=d), 0),
    "log_softmax of an empty int64 tensor": lambda d: torch.log_softmax(
        torch.empty(0, 2, dtype=torch.int64, device=d), 1),
    "gather with an empty index": lambda d: torch.gather(torch.ones(3, 3, device=d), 1,
                                                         torch.empty(3, 0, dtype=torch.int64, device=d)),
    "mode with out=": lambda d: torch.mode(_t([1.0, 2, 2, 3], d), out=(torch.empty(0, device=d), _long(d))),
    "addmm with an empty inner dim and 1-d bias": lambda d: torch.addmm(
        torch.ones(3, device=d), torch.ones(2, 0, device=d), torch.ones(0, 3, device=d)),
    "tensor of rank 26": lambda d: torch.ones([1] * 26, device=d) + 1,
    "batch_norm bfloat16 input, float32 parameters": lambda d: F.batch_norm(
        torch.ones(2, 3, dtype=torch.bfloat16, device=d), torch.zeros(3, device=d), torch.ones(3, device=d)),
    "nansum of float into dtype=long": lambda d: torch.nansum(_t([1.5, float("nan"), 2.0], d), dtype=torch.long),
    "gather with an empty index of another rank": lambda d: torch.gather(
        torch.ones(5, device=d), 0, torch.zeros(2, 0, dtype=torch.long, device=d)),
    "avg_pool2d with a negative divisor_override": lambda d: F.avg_pool2d(
        torch.arange(16.0, device=d).reshape(1, 1, 4, 4), 2, divisor_override=-2),
    "max into a float64 out=": lambda d: torch.max(torch.ones(3, device=d), out=torch.empty((), dtype=torch.float64,
                                                                                          device=d)),
    "std of complex into a float32 out=": lambda d: torch.std(
        _t([1 + 1j, 2, 3j], d), out=torch.empty((), device=d)),
}

# Complex products of conjugate and negative views (the kernels read physical values).
CONJ: dict[str, Case] = {
    "mm of a conjugate view": lambda d: torch.mm(_z(d).conj(), _z(d)),
    "mm into a conjugate out": lambda d: torch.mm(
        _z(d), _z(d), out=torch.empty(3, 3, dtype=torch.cdouble, device=d).conj()),
    "bmm of conjugate views": lambda d: torch.bmm(_z(d)[None].conj(), _z(d)[None].conj()),
    "addmm with a conjugate bias": lambda d: torch.addmm(_z(d).conj(), _z(d), _z(d).mT.conj()),
    "matmul of a negative view": lambda d: torch._neg_view(_z(d)) @ _z(d),
    "dot of conjugate views": lambda d: torch.dot(_z(d)[0].conj(), _z(d)[1]),
    "vdot of a conjugate view": lambda d: torch.vdot(_z(d)[0], _z(d)[1].conj()),
    "mv of a conjugate view": lambda d: torch.mv(_z(d).conj(), _z(d)[0]),
    "linear of conjugate views": lambda d: F.linear(_z(d).conj(), _z(d).conj()),
}
VALID.update(CONJ)


def _nan(d: str, *shape: int) -> torch.Tensor:
    return torch.full(shape, float("nan"), device=d)


# alpha = 0 skips the product on the CPU: nan in the matrices does not reach the result.
VALID.update({
    "addmm with alpha 0 and a nan matrix": lambda d: torch.addmm(torch.ones(2, 2, device=d), torch.ones(2, 3, device=d),
                                                                 _nan(d, 3, 2), alpha=0.0),
    "addmm with alpha 0, beta 2": lambda d: torch.addmm(torch.ones(2, 2, device=d), _nan(d, 2, 3), _nan(d, 3, 2),
                                                        beta=2.0, alpha=0.0),
    "baddbmm with alpha 0": lambda d: torch.baddbmm(torch.ones(2, 2, 2, device=d), _nan(d, 2, 2, 3),
                                                    torch.ones(2, 3, 2, device=d), alpha=0.0),
    "addmv with alpha 0": lambda d: torch.addmv(torch.ones(2, device=d), _nan(d, 2, 3), torch.ones(3, device=d),
                                                alpha=0.0),
    "addr with alpha 0": lambda d: torch.addr(torch.ones(2, 3, device=d), _nan(d, 2), torch.ones(3, device=d),
                                              alpha=0.0),
})


def _bn_eval_grad(d: str) -> Any:
    x = _t([[float("nan")], [1.0]], d, requires_grad=True)
    y = F.batch_norm(x, torch.zeros(1, device=d), torch.ones(1, device=d), torch.full((1,), 2.0, device=d))
    return torch.autograd.grad(y.sum(), x)[0]


def _hardswish_nan_grad(d: str) -> Any:
    x = torch.cat([_t([float("nan")], d), torch.linspace(-4, 4, 63, device=d)]).requires_grad_()
    return torch.autograd.grad(F.hardswish(x).sum(), x)[0]


def _with_strides(t: torch.Tensor) -> Any:
    return t, torch.tensor(t.stride(), device=t.device)


def _channels_last(d: str) -> torch.Tensor:
    return torch.arange(36.0, device=d).reshape(1, 2, 3, 6).contiguous(memory_format=torch.channels_last)


def _max_pool_grad_channels_last(d: str) -> Any:
    x = _channels_last(d).requires_grad_()
    g = torch.autograd.grad(F.max_pool2d(x, 3, 2, ceil_mode=True).sum(), x)[0]
    return _with_strides(g)


# Found by the fuzzer and PyTorch's OpInfo/ModuleInfo checks (this session's fixes).
VALID.update({
    "nansum of float into dtype=long (nan counts 0, the rest truncated)": lambda d: torch.nansum(
        _t([1.5, float("nan"), 2.5, float("inf")], d)[:3], dtype=torch.long),
    "where with an int scalar beyond float16": lambda d: torch.where(
        _t([True, False], d), 2**31, _t([1.5, 2.5], d, dtype=torch.float16)),
    "fill_ of a one-element float16 beyond its range": lambda d: torch.empty(
        (), dtype=torch.float16, device=d).fill_(1e300),
    "bool ** bool": lambda d: _t([False, True], d) ** False,
    "round of int64": lambda d: torch.round(torch.ones(2, dtype=torch.long, device=d)),
    "float -> int32 out of range": lambda d: _t([float("nan"), 3e9, -3e9, float("inf"), 2.7], d).to(torch.int32),
    "float -> uint8 out of range": lambda d: _t([float("nan"), 1e30, -1.5, 300.7], d).to(torch.uint8),
    "batch_norm eval gradient beside a nan": _bn_eval_grad,
    "hardswish gradient at nan": _hardswish_nan_grad,
    "addmm float16 with alpha 0 and a nan matrix": lambda d: torch.addmm(
        torch.ones(1, 1, dtype=torch.float16, device=d), torch.ones(1, 1, dtype=torch.float16, device=d),
        torch.full((1, 1), float("nan"), dtype=torch.float16, device=d), alpha=0.0),
    "mse_loss of empty non-contiguous tensors": lambda d: F.mse_loss(
        torch.zeros(0, 3, device=d).t(), torch.zeros(0, 3, device=d).t()),
    "aminmax into strided outs": lambda d: torch.aminmax(
        torch.arange(125.0, device=d).reshape(5, 5, 5), dim=1,
        out=(torch.empty(5, 10, device=d)[:, ::2], torch.empty(5, 10, device=d)[:, ::2])),
    "cat keeps a channels-last layout": lambda d: _with_strides(torch.cat([_channels_last(d)], 1)),
    "cat out= resized to a channels-last layout": lambda d: _with_strides(
        torch.cat([_channels_last(d)], 1, out=torch.empty(0, device=d))),
    "max_pool2d gradient keeps a channels-last layout": _max_pool_grad_channels_last,
    "avg_pool2d gradient keeps a channels-last layout": lambda d: (lambda x: _with_strides(torch.autograd.grad(
        F.avg_pool2d(x, 2).sum(), x)[0]))(_channels_last(d).requires_grad_()),
    "batch_norm of channels_last_3d keeps the layout": lambda d: _with_strides(F.batch_norm(
        torch.arange(48.0, device=d).reshape(1, 3, 2, 2, 4).contiguous(memory_format=torch.channels_last_3d),
        torch.zeros(3, device=d), torch.ones(3, device=d))),
    "replication_pad2d keeps a channels-last layout": lambda d: _with_strides(
        F.pad(_channels_last(d), (1, 1, 2, 0), mode="replicate")),
    "index_add of a 0-d tensor and a 0-d source": lambda d: torch.zeros((), device=d).index_add(
        0, _t([0], d), torch.ones((), device=d)),
})

# Accepted by foo although invalid (the CPU raises), and errors of another class.
INVALID: dict[str, Case] = {
    "copy_ with a partial overlap": lambda d: (lambda a: a[1:].copy_(a[:-1]))(torch.arange(5.0, device=d)),
    "cauchy_ with sigma 0": lambda d: torch.empty(3, device=d).cauchy_(0, 0),
    "cauchy_ with sigma -1": lambda d: torch.empty(3, device=d).cauchy_(0, -1),
    "masked_scatter with a uint8 mask": lambda d: torch.zeros(3, device=d).masked_scatter(
        _t([1, 0, 1], d, dtype=torch.uint8), torch.ones(3, device=d)),
    "kthvalue whose out= is its input": lambda d: (lambda a: torch.kthvalue(a, 1, out=(a, _long(d))))(
        _t([3.0, 1, 2], d)),
    "index_select into an expanded out=": lambda d: torch.index_select(
        torch.ones(3, 3, device=d), 0, _t([0, 1], d), out=torch.empty(1, 3, device=d).expand(2, 3)),
    "multinomial over more than 2^24 categories": lambda d: torch.multinomial(torch.ones(2**24 + 1, device=d), 1),
    "nansum of float into a long out=": lambda d: torch.nansum(torch.ones(3, device=d), out=_long0(d)),
    "norm into a long out=": lambda d: torch.norm(torch.ones(3, device=d), out=_long0(d)),
    "batch_norm float32 input, float64 running stats": lambda d: F.batch_norm(
        torch.ones(2, 3, device=d), torch.zeros(3, device=d, dtype=torch.float64),
        torch.ones(3, device=d, dtype=torch.float64)),
    "batch_norm float64 input, float32 running stats": lambda d: F.batch_norm(
        torch.ones(2, 3, device=d, dtype=torch.float64), torch.zeros(3, device=d), torch.ones(3, device=d)),
    "batch_norm float32 input, float64 weight (training)": lambda d: F.batch_norm(
        torch.ones(2, 3, device=d), None, None, torch.ones(3, device=d, dtype=torch.float64), training=True),
    "lerp with end of another dtype": lambda d: torch.lerp(torch.ones(3, device=d),
                                                           torch.zeros(3, device=d, dtype=torch.float64), 0.5),
    "lerp with a 1-d weight of another dtype": lambda d: torch.lerp(
        torch.ones(3, device=d), torch.zeros(3, device=d), torch.ones(3, device=d, dtype=torch.float64)),
    "nll_loss with a target out of range": lambda d: F.nll_loss(torch.randn(2, 3, device=d), _t([0, 5], d)),
    "cross_entropy with a negative target": lambda d: F.cross_entropy(torch.randn(2, 3, device=d), _t([0, -3], d)),
    "cat of a tensor and an int": lambda d: torch.cat([torch.ones(2, device=d), 3]),  # type: ignore[list-item]
    "cat of a tensor": lambda d: torch.cat(torch.ones(3, device=d)),  # type: ignore[arg-type]
    "stack of a tensor": lambda d: torch.stack(torch.ones(3, device=d)),  # type: ignore[arg-type]
    "avg_pool2d with padding over half the kernel": lambda d: F.avg_pool2d(
        torch.ones(1, 1, 4, 4, device=d), 2, padding=3),
    "avg_pool2d with a negative stride": lambda d: F.avg_pool2d(torch.ones(1, 1, 4, 4, device=d), 2, stride=-1),
    "softmax of a non-empty int64 tensor": lambda d: torch.softmax(torch.ones(2, dtype=torch.int64, device=d), 0),
    "max into a long out=": lambda d: torch.max(torch.ones(3, device=d), out=_long0(d)),
    "std into a long out=": lambda d: torch.std(torch.ones(3, device=d), out=_long0(d)),
    "var into a long out=": lambda d: torch.var(torch.ones(3, device=d), 0, out=_long0(d)),
    "aminmax into outs of another dtype": lambda d: torch.aminmax(
        torch.ones(3, 3, device=d), dim=0,
        out=(torch.empty(3, device=d), torch.empty(3, dtype=torch.float64, device=d))),
    "index_copy with an int32 index": lambda d: torch.zeros(2, device=d).index_copy(
        0, _t([0], d, dtype=torch.int32), torch.ones(1, device=d)),
    "index_fill with an int32 index": lambda d: torch.zeros(2, device=d).index_fill(
        0, _t([0], d, dtype=torch.int32), 1),
    "index_add of a 0-d tensor at index -1": lambda d: torch.zeros((), device=d).index_add(
        0, _t([-1], d), torch.ones((), device=d)),
    "index_add of a 0-d tensor with a 1-d source": lambda d: torch.zeros((), device=d).index_add(
        0, _long(d), torch.ones(0, device=d)),
    "index_add of a 1-d tensor with a 0-d source": lambda d: torch.zeros(3, device=d).index_add(
        0, _t([0], d), torch.ones((), device=d)),
    "index_select along an empty dim": lambda d: torch.zeros(0, 0, device=d).index_select(0, _t([0], d)),
    "index_select of an empty 1-d tensor": lambda d: torch.zeros(0, device=d).index_select(0, _t([0], d)),
    "maximum of complex": lambda d: torch.maximum(torch.ones(2, device=d), torch.ones(2, dtype=torch.cfloat, device=d)),
    "fmin of complex": lambda d: torch.fmin(torch.ones(2, dtype=torch.cfloat, device=d), torch.ones(2, device=d)),
    "fmod of complex": lambda d: torch.fmod(torch.ones(2, dtype=torch.cfloat, device=d), 2),
    "remainder of complex": lambda d: torch.remainder(
        torch.ones(2, device=d), torch.ones(2, dtype=torch.cfloat, device=d)),
    "isposinf of complex": lambda d: torch.isposinf(torch.ones(2, dtype=torch.cfloat, device=d)),
    "isneginf of complex": lambda d: torch.isneginf(torch.ones(2, dtype=torch.cfloat, device=d)),
    "signbit of complex": lambda d: torch.signbit(torch.ones(2, dtype=torch.cfloat, device=d)),
    "hardtanh of complex": lambda d: F.hardtanh(torch.ones(2, dtype=torch.cfloat, device=d)),
    "round of int64 with decimals=2": lambda d: torch.round(torch.ones(2, dtype=torch.long, device=d), decimals=2),
    "round of int64 with decimals=0": lambda d: torch.round(torch.ones(2, dtype=torch.long, device=d), decimals=0),
    "fill_ of float16 beyond its range": lambda d: torch.empty(2, dtype=torch.float16, device=d).fill_(1e300),
    "masked_select with a uint8 mask": lambda d: torch.masked_select(
        torch.ones(3, device=d), _t([1, 0, 1], d, dtype=torch.uint8)),
    "binary_cross_entropy of an input above 1": lambda d: F.binary_cross_entropy(_t([1.5], d), _t([0.5], d)),
    "mean of int64 with a dim out of range": lambda d: torch.ones(2, dtype=torch.long, device=d).mean(1),
    "aminmax over an empty dim": lambda d: torch.aminmax(torch.ones(5, 0, 5, device=d), dim=1),
    "neg of bool": lambda d: torch.neg(_t([True], d)),
}

# The CPU's message (foo may prefix the op's name), where PyTorch's OpInfo error_inputs match it with
# a regex.
SAME_MESSAGE: dict[str, Case] = {
    "neg of bool": INVALID["neg of bool"],
    "aminmax over an empty dim": INVALID["aminmax over an empty dim"],
    "gather into an out= of another dtype": lambda d: torch.gather(
        torch.ones(2, 2, device=d), 1, torch.zeros(2, 2, dtype=torch.long, device=d),
        out=torch.empty(2, 2, dtype=torch.float64, device=d)),
    "multinomial with replacement of a negative probability": lambda d: torch.multinomial(
        _t([1.0, -1.0, 1.0], d), 2, True),
    "multinomial with replacement of an infinite probability": lambda d: torch.multinomial(
        _t([1.0, float("inf"), 1.0], d), 2, True),
    "multinomial without replacement of a negative probability": lambda d: torch.multinomial(_t([1.0, -1.0], d), 1),
    "avg_pool2d with a negative padding": lambda d: F.avg_pool2d(torch.ones(0, 1, 49, device=d), 2, 50, -1),
    "max_pool2d with a negative padding": lambda d: F.max_pool2d(torch.ones(0, 1, 49, device=d), 2, 50, -1),
    "max_pool2d of a 2-d tensor": lambda d: F.max_pool2d(torch.ones(4, 4, device=d), 2),
}


def _outcome(case: Case, device: str) -> tuple[type[BaseException] | None, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fallback and deprecation warnings are not the point here
        try:
            return None, case(device)
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            return type(e), e


@pytest.mark.fallback_ok  # ops the CPU handles and foo has no kernel for (complex, integer pooling) fall back
@pytest.mark.parametrize("name", sorted(VALID) + sorted(INVALID))
def test_same_verdict_as_cpu(name: str) -> None:
    torch.manual_seed(0)
    case = VALID.get(name) or INVALID[name]
    want_exc, want = _outcome(case, "cpu")
    got_exc, got = _outcome(case, "foo")
    assert (want_exc is None) == (name in VALID), f"the CPU's verdict changed: {want_exc} {want}"
    assert got_exc is want_exc, f"foo: {got_exc.__name__ if got_exc else 'accepted'} ({got}); CPU: " + (
        want_exc.__name__ if want_exc else "accepted")
    if want_exc is None:
        assert_same(got, want)


def test_out_on_the_cpu_for_a_foo_reduction_is_refused() -> None:
    # As CUDA: an out= tensor must be on the op's device (the CPU fallback must not paper over it).
    x = torch.ones(3, device=FOO)
    for op in (lambda out: torch.mean(x, 0, out=out), lambda out: torch.sum(x, 0, out=out),
               lambda out: torch.amax(x, 0, out=out), lambda out: torch.norm(x, out=out)):
        with pytest.raises(RuntimeError, match="same device|device"):
            op(torch.empty(()))


@pytest.mark.fallback_ok  # cumsum into a CPU out, lgamma of CPU inputs: some of these ops fall back
@pytest.mark.parametrize("op", [
    lambda x, out: torch.cumsum(x, 0, out=out), lambda x, out: torch.cumprod(x, 0, out=out),
    lambda x, out: torch.logsumexp(x, 0, out=out), lambda x, out: torch.all(x, 0, out=out),
    lambda x, out: torch.lgamma(x, out=out), lambda x, out: torch.digamma(x, out=out),
    lambda x, out: torch.angle(x, out=out), lambda x, out: torch.special.xlog1py(x, x, out=out),
    lambda x, out: torch.addr(x, x[0], x[1], out=out),
])
@pytest.mark.parametrize("where", ["cpu out, foo inputs", "foo out, cpu inputs"])
def test_out_on_another_device_is_refused(op, where: str) -> None:
    # As CUDA: a kernel never writes to another device's tensor, nor reads one through out=.
    x = torch.rand(3, 3) + 0.5
    out = torch.empty(0, dtype=op(x, None).dtype)
    x, out = (x.to(FOO), out) if where == "cpu out, foo inputs" else (x, out.to(FOO))
    with pytest.raises(RuntimeError, match="device"):
        op(x, out)


def test_index_put_on_an_expanded_tensor_warns_as_the_cpu() -> None:
    t = torch.zeros(3, device=FOO).expand(2, 3)
    with pytest.warns(UserWarning, match="index_put_ on expanded tensors is deprecated"):
        t.index_put_((torch.tensor([1], device=FOO),), torch.tensor(2.0, device=FOO))
    assert t.cpu().tolist() == [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]


@pytest.mark.parametrize("name", sorted(SAME_MESSAGE))
def test_same_message_as_cpu(name: str) -> None:
    want_exc, want = _outcome(SAME_MESSAGE[name], "cpu")
    got_exc, got = _outcome(SAME_MESSAGE[name], "foo")
    assert want_exc is not None, "the CPU accepts this case now"
    assert got_exc is want_exc and str(want) in str(got), f"foo: {got_exc} {got}; CPU: {want_exc} {want}"
