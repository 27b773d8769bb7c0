"""Checks foo shares with CUDA: every tensor argument of an op on one device (with CUDA's
exceptions), scalar arguments range-checked like the CPU's, CPU's dtype rules, and inputs a
native kernel has no code for going through the counted CPU fallback."""

from __future__ import annotations

import math
from collections.abc import Callable

import foo_rs
import pytest
import torch
import torch.nn.functional as F
from helpers import FOO, assert_same

SAME_DEVICE = "Expected all tensors to be on the same device"
F0 = torch.device("foo:0")


def r(*shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    return torch.randn(*shape, generator=g)


def idx(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long)


# Each case runs the op with every tensor on foo:0 except the one built with `odd(...)`, which goes
# to the device under test (CPU, or foo:1).
Case = Callable[[Callable[[torch.Tensor], torch.Tensor]], object]

MIXED: dict[str, Case] = {
    "mm": lambda odd: torch.mm(r(2, 3).to(F0), odd(r(3, 4))),
    "mm_self": lambda odd: torch.mm(odd(r(2, 3)), r(3, 4).to(F0)),
    "mv": lambda odd: torch.mv(r(2, 3).to(F0), odd(r(3))),
    "dot": lambda odd: torch.dot(r(3).to(F0), odd(r(3))),
    "bmm": lambda odd: torch.bmm(r(2, 2, 3).to(F0), odd(r(2, 3, 4))),
    "addmm": lambda odd: torch.addmm(odd(r(2, 4)), r(2, 3).to(F0), r(3, 4).to(F0)),
    "addmv": lambda odd: torch.addmv(r(2).to(F0), odd(r(2, 3)), r(3).to(F0)),
    "baddbmm": lambda odd: torch.baddbmm(r(2, 2, 4).to(F0), r(2, 2, 3).to(F0), odd(r(2, 3, 4))),
    "addbmm": lambda odd: torch.addbmm(odd(r(2, 4)), r(2, 2, 3).to(F0), r(2, 3, 4).to(F0)),
    "conv2d": lambda odd: F.conv2d(r(1, 2, 5, 5).to(F0), odd(r(3, 2, 3, 3))),
    "conv2d_bias": lambda odd: F.conv2d(r(1, 2, 5, 5).to(F0), r(3, 2, 3, 3).to(F0), odd(r(3))),
    "linear": lambda odd: F.linear(r(2, 3).to(F0), odd(r(4, 3))),
    "linear_bias": lambda odd: F.linear(r(2, 3).to(F0), r(4, 3).to(F0), odd(r(4))),
    "gather": lambda odd: torch.gather(r(3, 3).to(F0), 0, odd(idx(0, 1, 2).view(1, 3))),
    "scatter": lambda odd: r(3, 3).to(F0).scatter_(0, odd(idx(0, 1, 2).view(1, 3)), r(1, 3).to(F0)),
    "scatter_src": lambda odd: r(3, 3).to(F0).scatter_(0, idx(0, 1, 2).view(1, 3).to(F0), odd(r(1, 3))),
    "scatter_add": lambda odd: r(3, 3).to(F0).scatter_add_(0, odd(idx(0, 1, 2).view(1, 3)), r(1, 3).to(F0)),
    "scatter_reduce": lambda odd: r(3, 3).to(F0).scatter_reduce(0, idx(0, 1, 2).view(1, 3).to(F0), odd(r(1, 3)), "sum"),
    "index_select": lambda odd: torch.index_select(r(3, 3).to(F0), 0, odd(idx(0, 2))),
    "index_add": lambda odd: r(3, 3).to(F0).index_add_(0, odd(idx(0, 2)), r(2, 3).to(F0)),
    "index_add_source": lambda odd: r(3, 3).to(F0).index_add_(0, idx(0, 2).to(F0), odd(r(2, 3))),
    "index_copy": lambda odd: r(3, 3).to(F0).index_copy_(0, odd(idx(0, 2)), r(2, 3).to(F0)),
    "index_fill": lambda odd: r(3, 3).to(F0).index_fill_(0, odd(idx(0, 2)), 1.0),
    "masked_select": lambda odd: torch.masked_select(r(3, 3).to(F0), odd(r(3, 3) > 0)),
    "masked_scatter": lambda odd: r(3, 3).to(F0).masked_scatter_((r(3, 3) > 0).to(F0), odd(r(9))),
    "take": lambda odd: torch.take(r(3, 3).to(F0), odd(idx(0, 4))),
    "put_": lambda odd: r(3, 3).to(F0).put_(odd(idx(0, 4)), r(2).to(F0)),
    "put_source": lambda odd: r(3, 3).to(F0).put_(idx(0, 4).to(F0), odd(r(2))),
    "embedding": lambda odd: F.embedding(odd(idx(0, 2)), r(4, 3).to(F0)),
    "embedding_backward": lambda odd: torch.ops.aten.embedding_dense_backward(
        r(2, 3).to(F0), odd(idx(0, 2)), 4, -1, False),
    "batch_norm": lambda odd: F.batch_norm(r(4, 3).to(F0), odd(torch.zeros(3)), torch.ones(3).to(F0), training=True),
    "batch_norm_weight": lambda odd: F.batch_norm(r(4, 3).to(F0), None, None, odd(torch.ones(3)), training=True),
    "layer_norm": lambda odd: F.layer_norm(r(4, 3).to(F0), (3,), odd(torch.ones(3))),
    "nll_loss": lambda odd: F.nll_loss(r(4, 3).to(F0), odd(idx(0, 1, 2, 0))),
    "cross_entropy": lambda odd: F.cross_entropy(r(4, 3).to(F0), odd(idx(0, 1, 2, 0))),
    "mse_loss": lambda odd: F.mse_loss(r(4, 3).to(F0), odd(r(4, 3))),
    "bce": lambda odd: F.binary_cross_entropy(torch.rand(4).to(F0), odd(torch.rand(4))),
    "max_pool_backward": lambda odd: torch.ops.aten.max_pool2d_with_indices_backward(
        r(1, 1, 2, 2).to(F0), r(1, 1, 4, 4).to(F0), [2, 2], [2, 2], [0, 0], [1, 1], False,
        odd(torch.zeros(1, 1, 2, 2, dtype=torch.long))),
    "bucketize": lambda odd: torch.bucketize(r(5).to(F0), odd(torch.tensor([-1.0, 0.0, 1.0]))),
    "normal": lambda odd: torch.normal(torch.zeros(3).to(F0), odd(torch.ones(3))),
    "cat": lambda odd: torch.cat([r(2).to(F0), odd(r(2))]),
}


@pytest.mark.parametrize("name", sorted(MIXED))
@pytest.mark.parametrize("other", ["cpu", "foo:1"])
def test_mixed_devices_raise(name: str, other: str) -> None:
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        MIXED[name](lambda t: t.to(other))


@pytest.mark.parametrize("name", ["mm", "dot", "addmm", "index_select", "embedding"])
def test_mixed_devices_raise_for_cpu_scalars_where_cuda_does(name: str) -> None:
    # A 0-dim CPU tensor is no scalar for these (CUDA raises too): only its device matters.
    zero_dim = {"mm": lambda odd: torch.mm(r(2, 3).to(F0), odd(r(3, 4))[0, 0].expand(3, 4)),
                "dot": lambda odd: torch.ops.aten.dot(r(1).to(F0)[0], odd(r(1))[0]),
                "addmm": lambda odd: torch.addmm(odd(r(1))[0], r(2, 3).to(F0), r(3, 4).to(F0)),
                "index_select": lambda odd: torch.index_select(r(3).to(F0), 0, odd(idx(1))[0]),
                "embedding": lambda odd: F.embedding(odd(idx(1))[0], r(4, 3).to(F0))}
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        zero_dim[name](lambda t: t.to("cpu"))


def test_same_device_still_works() -> None:
    a, b = r(2, 3), r(3, 4)
    for dev in ["foo:0", "foo:1"]:
        assert_same(torch.mm(a.to(dev), b.to(dev)), a @ b)


def test_cpu_scalars_and_indices_allowed_like_cuda() -> None:
    a = r(3, 3)
    f = a.to(FOO)
    # Elementwise ops take a 0-dim CPU tensor as a scalar.
    assert_same(f + torch.tensor(2.0), a + 2.0)
    assert_same(torch.mul(f, torch.tensor(3)), a * 3)
    assert_same(torch.where(f > 0, f, torch.tensor(0.0)), torch.where(a > 0, a, torch.tensor(0.0)))
    # ... but not a CPU tensor with dimensions (TensorIterator's own check, as on CUDA).
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        f + a
    # A 0-dim tensor on another foo device is no scalar (CUDA's TensorIterator rule).
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        f + torch.tensor(2.0, device="foo:1")
    # Advanced indexing takes CPU indices.
    i = idx(0, 2)
    assert_same(f[i], a[i])
    g, h = f.clone(), a.clone()
    g.index_put_((i,), torch.tensor(1.5))
    h.index_put_((i,), torch.tensor(1.5))
    assert_same(g, h)
    # Copies cross devices.
    g.copy_(a)
    assert_same(g, a)
    assert torch.equal(f.to("foo:1").to("cpu"), a)
    one = f.to("foo:1")
    one.copy_(f)
    assert one.device == torch.device("foo:1") and torch.equal(one.cpu(), a)
    # bernoulli_ moves p to self's device (CUDA's kernel does too).
    assert torch.zeros(3, device=FOO).bernoulli_(torch.ones(3)).sum().item() == 3
    # Losses built on TensorIterator on CUDA take a 0-dim CPU target as a scalar.
    t = torch.tensor(0.25)
    assert_same(torch.ops.aten.mse_loss(f, t, 1), torch.ops.aten.mse_loss(a, t, 1))
    # ... but their backward has CUDA's generated device check.
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.ops.aten.mse_loss_backward(torch.tensor(1.0, device=FOO), f, t, 1)
    # fill_ takes a value tensor from another device.
    assert_same(f.clone().fill_(torch.tensor(4.0)), a.clone().fill_(4.0))


def test_foreach_takes_cpu_lr_tensors() -> None:
    xs = [r(3), r(2, 2)]
    fs = [x.to(FOO) for x in xs]
    torch._foreach_mul_(fs, torch.tensor(2.0))
    torch._foreach_mul_(xs, torch.tensor(2.0))
    for got, want in zip(fs, xs):
        assert_same(got, want)


# ---- scalar range checks ---------------------------------------------------------------------

RANGE: dict[str, Callable[[torch.device], torch.Tensor]] = {
    "fill_uint8_300": lambda d: torch.zeros(2, dtype=torch.uint8, device=d).fill_(300),
    "fill_uint8_-1": lambda d: torch.zeros(2, dtype=torch.uint8, device=d).fill_(-1),
    "full_nan_int64": lambda d: torch.full((2,), math.nan, dtype=torch.int64, device=d),
    "full_2**40_int32": lambda d: torch.full((2,), 2**40, dtype=torch.int32, device=d),
    "full_inf_int16": lambda d: torch.full((2,), math.inf, dtype=torch.int16, device=d),
    "masked_fill_int8_1000": lambda d: torch.zeros(2, dtype=torch.int8, device=d).masked_fill(
        torch.tensor([True, False], device=d), 1000),
    "index_fill_uint8_256": lambda d: torch.zeros(3, dtype=torch.uint8, device=d).index_fill_(
        0, torch.tensor([1], device=d), 256),
    "fill_half_1e6": lambda d: torch.zeros(2, dtype=torch.float16, device=d).fill_(1e6),
    "add_alpha_int8": lambda d: torch.add(torch.ones(2, dtype=torch.int8, device=d),
                                          torch.ones(2, dtype=torch.int8, device=d), alpha=1000),
}


def like_cpu(fn: Callable[[torch.device], object]) -> None:
    """fn(foo) raises what fn(cpu) raises (type and first line), or returns the same result."""
    try:
        want = fn(torch.device("cpu"))
    except Exception as e:  # noqa: BLE001 - any CPU error must be reproduced
        with pytest.raises(type(e)) as got:
            fn(FOO)
        assert str(got.value).splitlines()[0] == str(e).splitlines()[0]
        return
    assert_same(fn(FOO), want)


@pytest.mark.parametrize("name", sorted(RANGE))
def test_out_of_range_scalars_raise_like_cpu(name: str) -> None:
    like_cpu(RANGE[name])


def test_in_range_fills_still_work() -> None:
    for dtype, value in [(torch.uint8, 255), (torch.int8, -128), (torch.int32, 2**31 - 1),
                         (torch.int64, -(2**63)), (torch.bool, 2), (torch.float16, 65504.0),
                         (torch.float32, math.inf), (torch.float32, math.nan)]:
        assert_same(torch.full((3,), value, dtype=dtype, device=FOO), torch.full((3,), value, dtype=dtype))
    # A CPU 0-dim operand converts like a tensor copy (no range check), as on the CPU.
    x = torch.zeros(2, dtype=torch.uint8)
    assert_same(x.to(FOO) + torch.tensor(300), x + torch.tensor(300))
    assert_same(torch.zeros(2, dtype=torch.uint8, device=FOO).fill_(torch.tensor(300, device=FOO)),
                torch.zeros(2, dtype=torch.uint8).fill_(torch.tensor(300)))


# ---- cat into a strided out --------------------------------------------------------------------

def test_cat_into_row_strided_out() -> None:
    parts = [r(1, 3), r(2, 3)]
    base = torch.zeros(6, 3)
    fbase = base.to(FOO)
    torch.cat(parts, out=base[::2])
    torch.cat([p.to(FOO) for p in parts], out=fbase[::2])
    assert_same(fbase, base)
    base, fbase = torch.zeros(7, 3), torch.zeros(7, 3, device=FOO)
    torch.cat(parts, out=base[1::2])
    torch.cat([p.to(FOO) for p in parts], out=fbase[1::2])
    assert_same(fbase, base)


def test_cat_still_rejects_real_overlap() -> None:
    def partial(d: torch.device) -> torch.Tensor:
        base = torch.zeros(6, 3, device=d)
        return torch.cat([base[1:4], base[4:5]], out=base[:4])

    def strided(d: torch.device) -> torch.Tensor:
        # CPU cannot rule the overlap in or out (TooHard) and allows it: rows read before written.
        base = torch.arange(18.0, device=d).view(6, 3)
        torch.cat([base[::2][:1], base[5:6]], out=base[::2][:2])
        return base

    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        partial(torch.device("cpu"))
    like_cpu(partial)
    like_cpu(strided)


# ---- dtype rules ------------------------------------------------------------------------------

BOOL = torch.tensor([True, False, True])
INT = torch.tensor([3, -4, 0])
DTYPE_CASES: dict[str, Callable[[torch.device], object]] = {
    "hypot_int": lambda d: torch.hypot(INT.to(d), INT.to(d)),
    "hypot_bool": lambda d: torch.hypot(BOOL.to(d), BOOL.to(d)),
    "hypot_int_float": lambda d: torch.hypot(INT.to(d), INT.float().to(d)),
    "abs_bool": lambda d: torch.abs(BOOL.to(d)),
    "floor_bool": lambda d: torch.floor(BOOL.to(d)),
    "ceil_bool": lambda d: torch.ceil(BOOL.to(d)),
    "round_bool": lambda d: torch.round(BOOL.to(d)),
    "round_decimals_bool": lambda d: torch.round(BOOL.to(d), decimals=1),
    "trunc_bool": lambda d: torch.trunc(BOOL.to(d)),
    "floor_int": lambda d: torch.floor(INT.to(d)),
    "abs_int": lambda d: torch.abs(INT.to(d)),
    "round_int": lambda d: torch.round(INT.to(d)),
    "argmax_bool": lambda d: torch.argmax(BOOL.to(d)),
    "argmin_bool": lambda d: torch.argmin(BOOL.to(d), dim=0),
    "argmax_int": lambda d: torch.argmax(INT.to(d)),
    "topk_bool": lambda d: torch.topk(BOOL.to(d), 1),
    "topk_int": lambda d: torch.topk(INT.to(d), 2),
    "max_bool": lambda d: torch.max(BOOL.to(d)),
    "sort_bool": lambda d: torch.sort(BOOL.to(d)),
    "arange_bool": lambda d: torch.arange(3, dtype=torch.bool, device=d),
    "arange_complex": lambda d: torch.arange(3, dtype=torch.complex64, device=d),
    "linspace_bool": lambda d: torch.linspace(0, 1, 3, dtype=torch.bool, device=d),
}


@pytest.mark.parametrize("name", sorted(DTYPE_CASES))
def test_dtype_rules_match_cpu(name: str) -> None:
    like_cpu(DTYPE_CASES[name])


# ---- unsupported dtypes go through the counted fallback ------------------------------------------

C = torch.tensor([1 + 2j, -0.5 + 0.25j, 3 - 1j])
COMPLEX: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "add": lambda x: torch.add(x, x * 2),
    "mul": lambda x: torch.mul(x, x),
    "div": lambda x: torch.div(x, x + 1),
    "exp": torch.exp,
    "abs": torch.abs,
    "sum": torch.sum,
    "mean": torch.mean,
    "neg": torch.neg,
    "add_": lambda x: x.clone().add_(x),
    "abs_out_real": lambda x: torch.abs(x, out=torch.empty(3, dtype=x.real.dtype, device=x.device)),
    "linspace": lambda x: torch.linspace(0, 1 + 2j, 5, dtype=x.dtype, device=x.device),
    "normal_shape": lambda x: torch.randn(4, dtype=x.dtype, device=x.device).abs().ge(0),
    "uniform_shape": lambda x: torch.empty(4, dtype=x.dtype, device=x.device).uniform_().abs().le(2),
}


@pytest.mark.fallback_ok
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("name", sorted(COMPLEX))
def test_complex_runs_through_counted_fallback(name: str, dtype: torch.dtype) -> None:
    x = C.to(dtype)
    before = sum(foo_rs.fallback_counts().values())
    got = COMPLEX[name](x.to(FOO))
    assert_same(got, COMPLEX[name](x))
    assert sum(foo_rs.fallback_counts().values()) > before


def test_complex_is_an_error_in_strict_mode() -> None:
    x = C.to(FOO)
    with pytest.raises(NotImplementedError, match="FOO_RS_STRICT=1.*aten::add.Tensor.*complex64"):
        torch.add(x, x)
    with pytest.raises(NotImplementedError, match="FOO_RS_STRICT=1.*aten::sum"):
        torch.sum(x)
