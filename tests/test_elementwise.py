"""Elementwise kernels (unary, binary, ternary) against torch's CPU backend, in strict mode."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import FLOAT_DTYPES, INT_DTYPES, assert_same, check, layouts, sample, to_foo

FLOAT_UNARY = [
    torch.exp,
    torch.exp2,
    torch.expm1,
    torch.log,
    torch.log2,
    torch.log10,
    torch.log1p,
    torch.sqrt,
    torch.rsqrt,
    torch.reciprocal,
    torch.sin,
    torch.sinc,
    torch.cos,
    torch.tan,
    torch.tanh,
    torch.sigmoid,
    torch.erf,
    torch.erfc,
    torch.asin,
    torch.acos,
    torch.atan,
    torch.sinh,
    torch.cosh,
    torch.asinh,
    torch.acosh,
    torch.atanh,
    torch.neg,
    torch.abs,
    torch.sign,
    torch.sgn,
    torch.floor,
    torch.ceil,
    torch.trunc,
    torch.frac,
    torch.round,
    torch.relu,
    F.silu,
    F.mish,
    F.hardsigmoid,
    F.hardswish,
    F.gelu,
    lambda x: F.gelu(x, approximate="tanh"),
    F.softplus,
    lambda x: F.softplus(x, beta=2.0, threshold=1.0),
    F.leaky_relu,
    F.elu,
    lambda x: F.elu(x, alpha=0.5),
    F.hardtanh,
    lambda x: torch.clamp(x, -1.0, 0.5),
    lambda x: torch.clamp(x, min=0.1),
    lambda x: torch.clamp(x, max=-0.2),
    lambda x: torch.round(x, decimals=2),
    torch.isnan,
    torch.isinf,
    torch.isfinite,
    torch.signbit,
    torch.isposinf,
    torch.isneginf,
    torch.logical_not,
    torch.nan_to_num,
    torch.square,
]


def _name(fn) -> str:
    return getattr(fn, "__name__", "lambda")


@pytest.mark.parametrize("fn", FLOAT_UNARY, ids=[f"{_name(f)}{i}" for i, f in enumerate(FLOAT_UNARY)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_float_unary(fn, dtype):
    for x in layouts((17, 9), dtype).values():
        x = x.clone() if x.stride()[0] == 0 else x
        check(fn, x, **({"atol": 1e-2, "rtol": 1e-2} if dtype in (torch.float16, torch.bfloat16) else {}))


def test_unary_special_values():
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 0.5, -0.5, 2.5, -2.5])
    for fn in [
        torch.sign,
        torch.relu,
        torch.round,
        torch.floor,
        torch.isnan,
        torch.isfinite,
        torch.signbit,
        torch.nan_to_num,
        lambda t: torch.nan_to_num(t, nan=1.0, posinf=2.0, neginf=-2.0),
        lambda t: torch.clamp(t, -1, 1),
        torch.abs,
        torch.sgn,
        torch.sinc,
    ]:
        check(fn, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_unary_edges_of_the_range(dtype):
    # asinh/acosh of values past half the type's maximum (a naive x + sqrt(x^2 + 1) overflows),
    # hard activations at their kinks (-3, 3) and at NaN, forward and backward.
    big = torch.finfo(dtype).max
    x = torch.tensor([big, big / 3, -big, 1e30 if dtype != torch.float16 else 6e4, 1.0, 1.5, 0.5, float("nan")])
    check(torch.asinh, x.to(dtype), rtol=1e-5, atol=0)
    check(torch.acosh, x.to(dtype), rtol=1e-5, atol=0)
    kinks = torch.tensor([-3.0, 3.0, -3.0001, 2.9999, 0.0, float("nan"), float("inf"), float("-inf")], dtype=dtype)
    for fn in [F.hardswish, F.hardsigmoid, F.relu6, F.hardtanh]:
        check(fn, kinks)
        # Gradients at NaN are left out: CPU's own differ between its vectorized and scalar
        # loops there (hardtanh's is 0 in float32, 1 in bfloat16; hardswish's NaN in float64).
        grads = []
        for t in (kinks[kinks == kinks].clone(), to_foo(kinks[kinks == kinks])):
            t.requires_grad_()
            fn(t).backward(torch.ones_like(t))
            grads.append(t.grad)
        assert_same(grads[1], grads[0])


@pytest.mark.parametrize("dtype", INT_DTYPES + [torch.bool])
def test_float_ops_of_integers_promote(dtype):
    x = sample((7, 5), dtype, low=-50, high=50)
    for fn in (torch.sinc, torch.sin, torch.exp):
        check(fn, x)


@pytest.mark.parametrize("dtype", INT_DTYPES + [torch.bool])
def test_int_unary(dtype):
    x = sample((7, 5), dtype, low=-50, high=50)
    fns = [torch.bitwise_not, torch.isnan, torch.isfinite, torch.logical_not]
    if dtype != torch.bool:
        fns += [
            torch.floor,
            torch.ceil,
            torch.abs,
            torch.sign,
            torch.relu,
            lambda t: torch.clamp(t, -3, 7),
            torch.square,
        ]
        if dtype != torch.uint8:
            fns.append(torch.neg)
    for fn in fns:
        check(fn, x)
    # Integer inputs of float ops are promoted like on CPU.
    if dtype != torch.bool:
        check(torch.exp, x.to(torch.float32).clamp(-5, 5).to(dtype))
        check(torch.sqrt, x.abs())


def test_unary_zero_size_scalar_large_out_inplace():
    check(torch.exp, torch.empty(0, 3))
    check(torch.exp, torch.tensor(0.5))
    check(torch.sigmoid, torch.randn(1_200_000))
    x = torch.randn(10)
    f = x.to("foo")
    f.exp_()
    assert_same(f, x.exp())
    out = torch.empty(10, dtype=torch.float64, device="foo")
    torch.exp(x.to("foo"), out=out)  # float32 result written into a float64 out
    assert_same(out, torch.exp(x).double())
    bad = torch.empty(10, dtype=torch.int64, device="foo")
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.exp(x.to("foo"), out=bad)
    i = torch.arange(4).to("foo")
    with pytest.raises(RuntimeError):
        i.exp_()


BINARY = [
    torch.add,
    lambda a, b: torch.add(a, b, alpha=2),
    torch.sub,
    lambda a, b: torch.sub(a, b, alpha=0.5),
    torch.mul,
    torch.div,
    lambda a, b: torch.div(a, b, rounding_mode="floor"),
    lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    torch.remainder,
    torch.fmod,
    torch.maximum,
    torch.minimum,
    torch.fmax,
    torch.fmin,
    torch.atan2,
    torch.hypot,
    torch.copysign,
    torch.xlogy,
    torch.logaddexp,
    lambda a, b: torch.pow(a.abs(), b),
    torch.eq,
    torch.ne,
    torch.lt,
    torch.le,
    torch.gt,
    torch.ge,
    torch.logical_and,
    torch.logical_or,
    torch.logical_xor,
]


@pytest.mark.parametrize("fn", BINARY, ids=[f"{_name(f)}{i}" for i, f in enumerate(BINARY)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_float_binary_layouts_and_broadcast(fn, dtype):
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype in (torch.float16, torch.bfloat16) else {}
    ls = layouts((6, 11), dtype, seed=1)
    other = sample((6, 11), dtype, seed=2)
    for x in ls.values():
        check(fn, x, other, **tol)
    check(fn, sample((4, 1, 3), dtype), sample((5, 1), dtype, seed=3), **tol)  # broadcast both ways
    check(fn, sample((3, 2), dtype), torch.tensor(1.5, dtype=dtype), **tol)  # 0-dim tensor


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_int_binary(dtype):
    a = sample((5, 8), dtype, low=-20, high=20)
    b = sample((5, 8), dtype, low=1, high=9, seed=4)
    b = b + (b == 0).to(dtype)  # no zero divisors
    for fn in [
        torch.add,
        torch.sub,
        torch.mul,
        torch.maximum,
        torch.minimum,
        torch.eq,
        torch.lt,
        torch.ge,
        lambda x, y: torch.div(x, y, rounding_mode="floor"),
        lambda x, y: torch.div(x, y, rounding_mode="trunc"),
        torch.remainder,
        torch.fmod,
        torch.bitwise_and,
        torch.bitwise_or,
        torch.bitwise_xor,
        torch.div,
        lambda x, y: torch.pow(x, 2),
        lambda x, y: x << (y % 4),
        lambda x, y: x >> (y % 4),
    ]:
        check(fn, a, b)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_shifts_full_range(dtype):
    # Values with the top bit set (an unsigned right shift must not copy it), shifts by tensors,
    # 0-dim tensors and Python ints (the Scalar overloads), and amounts at and past the width.
    info = torch.iinfo(dtype)
    vals = [info.min, info.max, info.max // 3, 0, 1, 7] + ([-1, -128] if info.min < 0 else [200])
    x = torch.tensor(vals, dtype=torch.int64).to(dtype)
    bits = info.bits
    amounts = torch.tensor([0, 1, 3, bits - 1, bits, bits + 3], dtype=torch.int64).to(dtype)
    a = x[:, None].expand(-1, len(amounts)).contiguous()
    for fn in [
        torch.bitwise_right_shift,
        torch.bitwise_left_shift,
        lambda t, s: t >> s,
        lambda t, s: t << s,
    ]:
        check(fn, a, amounts.expand_as(a))
        check(lambda t, fn=fn: fn(t, 3), x)
        check(lambda t, fn=fn: fn(t, torch.tensor(3, dtype=dtype, device=t.device)), x)
    for op in ["__irshift__", "__ilshift__"]:
        check(lambda t, op=op: getattr(t.clone(), op)(3), x)


def test_int_division_by_zero_raises():
    a = torch.tensor([4, 5]).to("foo")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.div(a, torch.tensor([1, 0]).to("foo"), rounding_mode="floor")
    assert (a + 1).cpu().tolist() == [5, 6]


def test_type_promotion_and_scalars():
    i = torch.arange(6, dtype=torch.int32)
    f16 = torch.randn(6).half()
    for fn in [
        lambda a, b: a + b,
        lambda a, b: a * 2.5,
        lambda a, b: a / 2,
        lambda a, b: 3 - a,
        lambda a, b: a + b.double(),
        lambda a, b: b + 1,
        lambda a, b: a > 2.5,
        lambda a, b: a == b,
        lambda a, b: a // 4,
        lambda a, b: b**2,
        lambda a, b: 2**a,
        lambda a, b: a & 3,
    ]:
        check(fn, i, f16, atol=1e-2, rtol=1e-2)
    check(lambda a: a + True, torch.tensor([True, False]))
    check(lambda a, b: a + b, torch.tensor([True, False]), torch.tensor([True, True]))
    with pytest.raises(RuntimeError, match="Subtraction"):
        torch.tensor([True]).to("foo") - torch.tensor([True]).to("foo")
    with pytest.raises(RuntimeError, match="alpha"):
        torch.add(i.to("foo"), i.to("foo"), alpha=0.5)


def test_inplace_and_out_variants():
    a, b = torch.randn(4, 5), torch.randn(5)
    fa = a.to("foo")
    fa.add_(b.to("foo"), alpha=3).mul_(2).sub_(1).div_(3)
    assert_same(fa, (((a + 3 * b) * 2) - 1) / 3)
    out = torch.empty(0, device="foo")
    torch.mul(a.to("foo"), b.to("foo"), out=out)  # resized from empty
    assert_same(out, a * b)
    outb = torch.empty(4, 5, dtype=torch.bool, device="foo")
    torch.gt(a.to("foo"), 0, out=outb)
    assert_same(outb, a > 0)
    ia = torch.arange(5).to("foo")
    with pytest.raises(RuntimeError, match="can't be cast"):
        ia.add_(torch.ones(5, device="foo"))
    m = torch.randn(4, 4)
    fm = m.to("foo")
    fm.t_().add_(1)  # in place through a transposed view
    assert_same(fm, m.t() + 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32])
def test_outputs_that_are_their_inputs(dtype):
    # The dense loops read an output that is also an input through one pointer (an in-place op
    # over bias rows, out= the second operand, a tensor added to itself): the CPU's bits in every
    # case, at sizes that take the threaded row loops.
    x, row, col = sample((300, 1000), dtype), sample((1000,), dtype, seed=1), sample((300, 1), dtype, seed=2)
    check(lambda a, r: a.clone().add_(r), x, row, atol=0, rtol=0)
    check(lambda a, r: a.clone().mul_(r).sub_(r, alpha=2), x, row, atol=0, rtol=0)
    check(lambda a, c: a.clone().add_(c), x, col, atol=0, rtol=0)
    check(lambda a, r: (lambda t: torch.sub(r, t, out=t))(a.clone()), x, row, atol=0, rtol=0)
    check(lambda a: a.clone().add_(a), x, atol=0, rtol=0)
    check(lambda a: a.clone()[:, :500].mul_(a[:, 500:]), x, atol=0, rtol=0)
    check(lambda a: torch.relu_(a.clone()) if dtype.is_floating_point else a.clone().neg_(), x, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.bool])
def test_where_and_masked_fill(dtype):
    c = sample((5, 6), torch.bool)
    x, y = sample((5, 6), dtype, seed=1), sample((6,), dtype, seed=2)
    check(torch.where, c, x, y)
    check(lambda cc, xx: torch.where(cc, xx, 0), c, x)
    check(lambda xx, cc: xx.masked_fill(cc, 1), x, c)
    check(lambda xx, cc: xx.clone().masked_fill_(cc[0], torch.tensor(0)), x, c)


def test_lerp_addcmul_addcdiv():
    a, b, w = torch.randn(3, 4), torch.randn(4), torch.rand(3, 4)
    check(torch.lerp, a, b.expand(3, 4), w)
    check(lambda x, y: torch.lerp(x, y, 0.3), a, b.expand(3, 4))
    check(lambda x, y: torch.lerp(x, y, 0.8), a, b.expand(3, 4))
    check(lambda x, y, z: torch.addcmul(x, y, z, value=0.5), a, b, w)
    check(lambda x, y, z: torch.addcdiv(x, y, z + 0.5, value=-2), a, b, w)
    check(lambda x, y, z: x.clone().addcmul_(y, z), a, b, w)
    with pytest.raises(RuntimeError, match="Integer division"):
        torch.addcdiv(
            torch.ones(2, dtype=torch.int64, device="foo"),
            torch.ones(2, dtype=torch.int64, device="foo"),
            torch.ones(2, dtype=torch.int64, device="foo"),
        )


def test_lerp_addcmul_channels_last_in_place():
    # An optimizer's state on channels-last weights: in-place lerp_/addcmul_ over operands of one
    # dense non-contiguous layout take the dense loops, with the CPU's bits (fma as the CPU's).
    cl = torch.channels_last
    a, b, c = (torch.randn(4, 24, 5, 5).contiguous(memory_format=cl) for _ in range(3))
    check(lambda x, y: x.clone(memory_format=cl).lerp_(y, 0.1), a, b, check_stride=True, atol=0, rtol=0)
    check(lambda x, y: x.clone(memory_format=cl).lerp_(y, 0.9), a, b, check_stride=True, atol=0, rtol=0)
    check(lambda x, y, z: x.clone(memory_format=cl).addcmul_(y, z, value=0.3), a, b, c, check_stride=True, atol=0,
          rtol=0)
    check(lambda x, y, z: torch.lerp(x, y, z), a, b, c.abs(), check_stride=True, atol=0, rtol=0)


@pytest.mark.parametrize(
    "act",
    [
        torch.relu,
        torch.sigmoid,
        torch.tanh,
        F.gelu,
        lambda x: F.gelu(x, approximate="tanh"),
        F.silu,
        F.softplus,
        F.leaky_relu,
        F.hardtanh,
        F.hardswish,
        F.hardsigmoid,
        F.mish,
        torch.exp,
        torch.log1p,
        torch.sqrt,
    ],
)
def test_activation_gradients(act):
    x = torch.randn(7, 5, dtype=torch.float64) + 0.1
    x = x.abs() if act in (torch.log1p, torch.sqrt) else x
    xc = x.clone().requires_grad_()
    xf = to_foo(x).requires_grad_()
    g = torch.randn(7, 5, dtype=torch.float64)
    act(xc).backward(g)
    act(xf).backward(g.to("foo"))
    assert xf.grad.device.type == "foo"
    assert_same(xf.grad, xc.grad)


def test_binary_gradients_with_broadcast_need_reductions():
    # d(a*b)/db for a broadcast b sums over the broadcast dim: that needs the reduction family;
    # the elementwise part is checked here without broadcasting.
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    fa, fb = to_foo(a.detach()).requires_grad_(), to_foo(b.detach()).requires_grad_()
    ((a * b + a / (b.abs() + 1)) - b).backward(torch.ones(3, 4, dtype=torch.float64))
    ((fa * fb + fa / (fb.abs() + 1)) - fb).backward(torch.ones(3, 4, dtype=torch.float64, device="foo"))
    assert_same(fa.grad, a.grad)
    assert_same(fb.grad, b.grad)


# ---- clamp with tensor bounds, rsub, threshold (native: tests run in strict mode) -----------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.uint8])
def test_clamp_tensor_bounds(dtype):
    x = sample((4, 5), dtype, seed=1)
    lo, hi = sample((5,), dtype, seed=2), sample((4, 1), dtype, seed=3)
    if dtype.is_floating_point:
        x[0, 0] = float("nan")
        lo[1] = float("nan")  # a NaN bound gives NaN, as on CPU
        lo, hi = lo.clamp(max=0), hi.clamp(min=0)
    check(lambda x, lo, hi: torch.clamp(x, lo, hi), x, lo, hi)
    check(lambda x, lo: torch.clamp(x, min=lo), x, lo)
    check(lambda x, hi: torch.clamp(x, max=hi), x, hi)
    check(lambda x, lo: torch.clamp_min(x, lo), x, lo)
    check(lambda x, hi: torch.clamp_max(x, hi), x, hi)
    check(lambda x, lo, hi: x.clone().clamp_(lo, hi[0]), x, lo, hi)
    check(lambda x, lo: x.clone().clamp_min_(lo), x, lo)
    check(lambda x, hi: x.t().clone().clamp_max_(hi.t()), x, hi)  # non-contiguous


def test_clamp_tensor_promotion_out_and_errors():
    x = torch.randint(-5, 5, (4, 5), dtype=torch.int32)
    # Bounds take part in type promotion (a 0-dim float bound makes an int input float).
    check(lambda x, lo, hi: torch.clamp(x, lo, hi), x, torch.tensor(-2), torch.tensor(3.5))
    check(lambda x, lo, hi: torch.clamp(x, lo, hi), x, torch.full((5,), -1), torch.tensor(2, dtype=torch.int8))
    xf = sample((3, 4), torch.float32)
    check(lambda x, lo, hi: torch.clamp(x, lo, hi, out=torch.empty(0, dtype=torch.float64, device=x.device)),
          xf, sample((4,), torch.float32, seed=4), torch.ones(3, 1))
    for dev in ("cpu", "foo"):
        b = torch.ones(2, dtype=torch.bool, device=dev)
        with pytest.raises(NotImplementedError, match="clamp_cpu"):
            torch.clamp(b, b, b)
        with pytest.raises(NotImplementedError, match="complex"):
            torch.clamp(torch.ones(2, dtype=torch.cfloat, device=dev), torch.zeros(2, device=dev))
        with pytest.raises(RuntimeError, match="can't be cast"):
            torch.ones(2, dtype=torch.int32, device=dev).clamp_(torch.zeros(2, device=dev), torch.ones(2, device=dev))
        with pytest.raises(RuntimeError, match="At least one"):
            torch.clamp(torch.ones(2, device=dev), None, None)


def test_rsub_tensor():
    x, y = sample((4, 5), torch.float32), sample((5,), torch.float32, seed=2)
    check(torch.rsub, x, y)
    check(lambda x, y: torch.rsub(x, y, alpha=2), torch.randint(-3, 3, (4, 5)), y)
    check(lambda x, y: torch.rsub(x, y, alpha=3), torch.randint(-3, 3, (4, 5)), torch.randint(-3, 3, (5,)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.uint8])
def test_threshold(dtype):
    x = sample((6, 7), dtype, seed=5)
    if dtype.is_floating_point:
        x[1, 1] = float("nan")
    check(lambda x: F.threshold(x, 0.5, 20.0 if dtype.is_floating_point else 20), x)
    check(lambda x: F.threshold(x.clone(), 1, 7, inplace=True), x)
    check(lambda x: torch.threshold(x.t(), 0, -1 if dtype != torch.uint8 else 9), x)
    check(lambda x: torch.ops.aten.threshold.out(x, 0.5, 2, out=torch.empty(0, dtype=dtype, device=x.device)), x)
    for dev in ("cpu", "foo"):
        with pytest.raises(NotImplementedError, match="threshold_cpu"):
            torch.threshold(torch.ones(2, dtype=torch.bool, device=dev), 0, 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32])
def test_binary_rows_with_dense_insides(dtype):
    # Two-dim layouts whose rows are dense (broadcast vectors, row slices) run whole chunks of
    # rows per call; enough rows to go parallel, short and odd row lengths.
    a, v = sample((3001, 37), dtype, seed=1), sample((37,), dtype, seed=2)
    check(lambda a, v: a + v, a, v)
    check(lambda a, v: v * a, a, v)
    check(lambda a, v: torch.maximum(a[:, :20], v[5:25]), a, v)  # strided rows
    check(lambda a, v: a.clone().sub_(v), a, v)  # in place
    check(lambda a, v: a[:-1:2] - a[1::2], a, v)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32])
def test_rows_indexed_by_several_dims(dtype):
    # Dense rows whose offsets take several dims (a rotary embedding's `q * cos`: `q` a
    # transposed view [B, heads, T, D] of [B, T, heads * D], `cos` [1, 1, T, D]) run in runs of
    # rows along the innermost of those dims: every row lands where the CPU puts it, in
    # parallel chunks that start inside a run, and the stride of the output matches the CPU's.
    x = sample((4, 97, 7 * 32), dtype, seed=1)
    cos, s = sample((1, 1, 97, 32), dtype, seed=2), sample((1, 7, 1, 1), dtype, seed=3)

    def q(x: torch.Tensor) -> torch.Tensor:
        return x.view(4, 97, 7, 32).transpose(1, 2)
    check(lambda x, c: q(x) * c, x, cos, check_stride=True)
    check(lambda x, c: c - q(x)[..., 5:21], x, cos[..., :16], check_stride=True)
    check(lambda x, v: q(x) + v, x, s, check_stride=True)  # one value per row
    check(lambda x: -q(x)[..., 16:], x, check_stride=True)
    check(lambda x, c: q(x).clone().mul_(c), x, cos)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32])
def test_binary_rows_with_one_value_per_row(dtype):
    # A per-channel operand ([N, C, 1, 1] against [N, C, H, W]) is one value per dense row: all
    # rows in one call, the value on either side, out of place and in place; rows of 1-37
    # elements, enough of them to go parallel.
    for hw in [(1, 1), (2, 2), (1, 37), (9, 4)]:
        x = sample((8, 301) + hw, dtype, seed=1)
        s = sample((8, 301, 1, 1), dtype, seed=2)
        check(lambda x, s: x * s, x, s)
        check(lambda x, s: s - x, x, s)
        check(lambda x, s: x.clone().add_(s), x, s)
        check(lambda x, s: torch.maximum(s, x), x, s)


def test_in_place_activations_keep_nan_and_signed_zero():
    # relu_, leaky_relu_ and threshold_ spell NaN as an arm of their own (in place, a NaN that
    # passes through as `x` made a conditional store): NaN, -0.0 and infinities as on the CPU,
    # over a length with a vector tail.
    base = torch.tensor([float("nan"), -0.0, 0.0, -1.5, 2.5, float("inf"), float("-inf")] * 37)
    for fn in (lambda t: t.relu_(), lambda t: F.leaky_relu_(t, 0.2), lambda t: F.threshold_(t, 0.5, -3.0)):
        cpu, foo = base.clone(), to_foo(base)
        fn(cpu)
        fn(foo)
        assert_same(foo, cpu)
        assert torch.equal(foo.cpu().signbit(), cpu.signbit())


def test_clamp_threshold_rsub_zero_size_scalars_and_grads():
    for shape in [(0, 5), ()]:
        x = sample(shape, torch.float32, seed=3)
        lo = sample(shape, torch.float32, seed=4) - 1
        check(lambda x, lo: torch.clamp(x, lo, lo + 2), x, lo)
        check(lambda x: F.threshold(x, 0.1, 5.0), x)
        check(lambda x, lo: torch.rsub(x, lo, alpha=2), x, lo)
    # Gradients flow through the native forward kernels (clamp's backward is masks; threshold's
    # is threshold_backward).
    for fn in (lambda x, lo, hi: torch.clamp(x, lo, hi).sum(),
               lambda x, lo, hi: F.threshold(x, 0.2, 3.0).sum() + torch.rsub(x, lo).sum() + hi.sum()):
        cpu_in = [sample((4, 6), torch.float32, seed=s).requires_grad_() for s in (1, 2, 3)]
        foo_in = [t.detach().to("foo").requires_grad_() for t in cpu_in]
        fn(*cpu_in).backward()
        fn(*foo_in).backward()
        for c, f in zip(cpu_in, foo_in):
            assert_same(f.grad, c.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.uint8, torch.bool])
def test_rows_broadcast_in_every_input_fill(dtype):
    # Rows along which every input is broadcast (an expanded [N, C, 1, 1] gradient, as mean's
    # backward makes) are written as one value per row.
    g = sample((8, 5, 1, 1), dtype, seed=12)
    e = (8, 5, 6, 7)
    check(lambda t: t.expand(e).contiguous(), g)
    if dtype != torch.bool:
        check(lambda t: t.expand(e) * 3, g)
        check(lambda t: t.expand(e).to(torch.float32) / 7, g)
        check(lambda t: torch.addcmul(t.expand(e).double(), t.expand(e).double(), t.expand(e).double(), value=2), g)
    check(lambda t: torch.where(t.expand(e) != 0, t.expand(e), t.expand(e)), g)


def test_mean_backward_of_pooled_activation():
    x = sample((4, 6, 9, 9), torch.float32, seed=13).requires_grad_()
    fx = to_foo(x)
    torch.nn.functional.adaptive_avg_pool2d(fx, 1).square().sum().backward()
    torch.nn.functional.adaptive_avg_pool2d(x, 1).square().sum().backward()
    assert_same(fx.grad, x.grad)


@pytest.mark.parametrize("op", [torch.sin, torch.cos])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_sin_cos_vectorized_and_huge_arguments(op, dtype):
    """float32 sin/cos run vectorized (double-precision reduction by pi/2) below 2^28 pi/2; a tensor
    with a larger finite element takes libm's exact reduction: both within 1 ulp of the CPU's."""
    half_pi = torch.arange(1, 3000, dtype=torch.float64) * (torch.pi / 2)
    near = half_pi.to(torch.float32)
    base = torch.cat([near, torch.nextafter(near, torch.full_like(near, 1e9)), torch.randn(4000) * 1e4,
                      torch.tensor([0.0, -0.0, 1e-30, -1e-30, 4.2e8, -4.2e8, torch.inf, -torch.inf, torch.nan])])
    for x in (base, torch.cat([base, torch.tensor([4.3e8, 3e38, -1e20])])):
        x = x.to(dtype)
        got, want = op(to_foo(x)).cpu(), op(x)
        torch.testing.assert_close(got, want, atol=0, rtol=torch.finfo(dtype).eps, equal_nan=True)
        assert torch.equal(torch.signbit(got[want == 0]), torch.signbit(want[want == 0]))
        strided = x[::3]
        torch.testing.assert_close(op(to_foo(strided)).cpu(), op(strided), atol=0, rtol=torch.finfo(dtype).eps,
                                   equal_nan=True)


@pytest.mark.parametrize("op", [torch.sin, torch.cos])
def test_sin_cos_zero_size_scalar_and_gradient(op):
    for x in (torch.empty(0, 3), torch.tensor(0.75), torch.tensor(-3e38)):
        got, want = op(to_foo(x)), op(x)
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want, atol=0, rtol=torch.finfo(x.dtype).eps)
    x = torch.randn(5, 7) * 10
    xf = to_foo(x).requires_grad_()
    xc = x.clone().requires_grad_()
    op(xf).sum().backward()
    op(xc).sum().backward()
    torch.testing.assert_close(xf.grad.cpu(), xc.grad, atol=0, rtol=torch.finfo(torch.float32).eps)


def _ulps(got: torch.Tensor, want64: torch.Tensor) -> torch.Tensor:
    """|got - want| in units of the float32 ulp at the float64 reference (subnormal ulps below
    float32's smallest normal), 0 where both are NaN or equal."""
    w = want64.to(torch.float32).abs()
    ulp = (torch.nextafter(w, torch.full_like(w, torch.inf)) - w).double()
    err = ((got.double() - want64).abs() / ulp).nan_to_num(0.0)
    same = (got == want64.to(torch.float32)) | (got.isnan() & want64.isnan())
    return torch.where(same, 0.0, err)


@pytest.mark.parametrize("name", ["exp", "exp2", "tanh", "sigmoid", "erf", "erfc"])
def test_float32_transcendentals_within_two_ulp(name):
    """float32 exp/exp2/tanh/sigmoid/erf/erfc run vectorized (kernels::core::vmath, with FMA where the CPU
    has it): within 2 ulp of the float64 result (sigmoid 3) over their whole range, subnormal and
    near-overflow results included, with IEEE special values and the sign of zero."""
    op = getattr(torch, name)
    lim = {"exp": (-105.0, 89.0), "exp2": (-152.0, 129.0), "tanh": (-10.0, 10.0), "sigmoid": (-88.0, 40.0),
           "erf": (-4.5, 4.5), "erfc": (-5.0, 10.1)}[name]
    x = torch.cat([torch.linspace(*lim, 400_001), torch.randn(10_000), torch.randn(1000) * 1e-20])
    got = op(to_foo(x)).cpu()
    assert _ulps(got, op(x.double())).max() <= (3.0 if name == "sigmoid" else 2.0)
    specials = torch.tensor([0.0, -0.0, torch.inf, -torch.inf, torch.nan, 1e-45, -1e-45, 30.0, -30.0])
    got, want = op(to_foo(specials)).cpu(), op(specials.double())
    assert _ulps(got, want).max() <= 2.0 and torch.equal(got.isnan(), want.isnan())
    assert torch.equal(torch.signbit(got[want == 0]), torch.signbit(want[want == 0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "erfc"])
def test_vector_math_same_bits_dense_and_strided(name, dtype):
    """Dense float32 (bfloat16, float16) runs of these ops take their AVX-512 forms where the
    CPU has them (kernels::core::vmath_avx512, a run's last partial vector under a mask,
    reduced floats widened and narrowed in the loop); strided inputs take the scalar forms
    (kernels::core::vmath). Both give the same bits, at every run length and over every branch
    of the math (subnormal results, the ranges' edges, NaN, infinities)."""
    op = {"silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}.get(
        name, getattr(torch, name, None))
    edges = torch.tensor([0.0, -0.0, torch.inf, -torch.inf, torch.nan, 1e-45, -104.0, -87.0, -86.5, 88.72,
                          89.0, 0.625, -0.625, 9.1, 0.75, -0.75, 10.06, 10.1, -30.0])
    vals = torch.cat([edges, torch.linspace(-110.0, 90.0, 20_001), torch.randn(5000) * 3])
    vals = vals.to(dtype)
    for n in (1, 15, 16, 17, 33, 1000, vals.numel()):
        x = vals[:n]
        # Columns 0, 2, 4, ... of a 2-column interleave: a strided view of the same values.
        wide = torch.stack([x, torch.zeros_like(x)], 1).reshape(-1)
        strided = to_foo(wide)[::2]
        dense = to_foo(x)
        a, b = op(strided).cpu(), op(dense).cpu()
        bits = torch.int32 if dtype == torch.float32 else torch.int16
        same = (a.view(bits) == b.view(bits)) | (a.isnan() & b.isnan())
        assert same.all(), f"{name} n={n}: {x[~same][:5]} strided {a[~same][:5]} dense {b[~same][:5]}"


def test_erfc_and_exp_tails_are_not_flushed():
    """erfc of large x keeps its relative accuracy down to the subnormals (erfc(10) = 2.1e-45),
    and exp gives the subnormal and largest finite results, as the CPU's SLEEF kernels do."""
    x = torch.tensor([9.0, 9.5, 10.0, 10.05, 10.06, 26.0])
    got = torch.erfc(to_foo(x)).cpu()
    assert (got[:4] > 0).all() and (got[4:] == 0).all()
    assert _ulps(got, torch.erfc(x.double())).max() <= 2.0
    x = torch.tensor([-87.5, -95.0, -103.0, -103.9, -104.0, 88.5, 88.72, 88.73])
    got = torch.exp(to_foo(x)).cpu()
    assert _ulps(got, torch.exp(x.double())).max() <= 2.0
    torch.testing.assert_close(got, torch.exp(x), atol=0, rtol=2 * torch.finfo(torch.float32).eps)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.bool])
def test_dense_operands_without_the_iterator(dtype):
    # Contiguous same-shape same-dtype operands, and a float32/float64 tensor with a Python number,
    # skip the TensorIterator (elementwise.h, dense_operands): the CPU's values, dtypes and strides,
    # including a size-1 dim with an odd stride, 0-dim and empty tensors.
    odd = torch.empty_strided((3, 1, 4), (4, 100, 1), dtype=dtype).copy_(sample((3, 1, 4), dtype))
    for shape in [(), (0,), (1,), (5, 7)]:
        a, b = sample(shape, dtype), sample(shape, dtype, seed=1)
        for x, y in [(a, b), (odd, sample((3, 1, 4), dtype, seed=2))] if shape == (5, 7) else [(a, b)]:
            check(lambda p, q: p + q, x, y, check_stride=True)
            check(lambda p, q: p * q, x, y, check_stride=True)
            check(lambda p, q: p.clone().add_(q), x, y, check_stride=True)
            check(lambda p: p.clone().mul_(p), x, check_stride=True)
            if dtype != torch.bool:
                check(lambda p, q: torch.sub(p, q, alpha=2), x, y, check_stride=True)
                check(lambda p, q: p / q, x, y, check_stride=True)  # integers promote (the iterator's)
                check(lambda p: -p, x, check_stride=True)
                check(lambda p: p.clone().neg_(), x, check_stride=True)
                check(lambda p: p.exp(), x, check_stride=True)
                check(lambda p: p * 2.5 - 3, x, check_stride=True)
                check(lambda p: p.clone().mul_(3).add_(True), x, check_stride=True)
                check(torch.relu, x, check_stride=True)
                check(lambda p: p.clone().relu_(), x, check_stride=True)
            if dtype.is_floating_point:
                # The activations with parameters take the same dense path.
                check(F.gelu, x, check_stride=True)
                check(lambda p: F.gelu(p.clone(), approximate="tanh"), x, check_stride=True)
                check(lambda p: torch.ops.aten.gelu_(p.clone()), x, check_stride=True)
                check(lambda p: F.leaky_relu(p, 0.2), x, check_stride=True)
                check(lambda p: F.leaky_relu(p.clone(), 0.2, inplace=True), x, check_stride=True)
                check(lambda p: F.elu(p, alpha=0.5), x, check_stride=True)
                check(lambda p: F.elu(p.clone(), alpha=0.5, inplace=True), x, check_stride=True)
                check(lambda p: F.softplus(p, beta=2.0, threshold=1.0), x, check_stride=True)
    # A Python int rounds straight to float32, as the CPU's: 2**60 + 2**36 + 1 rounds up to
    # 2**60 + 2**37, where a double first would round it to the tie 2**60 + 2**36 and that to 2**60.
    check(lambda p: p * (2**60 + 2**36 + 1), sample((4,), torch.float32))
    check(lambda p: p + 0.1, sample((4,), torch.float32), atol=0, rtol=0)


def test_dense_operands_keep_the_iterators_errors():
    x = torch.arange(10.0)
    for t in [x, x.to("foo")]:
        with pytest.raises(RuntimeError, match="single memory location"):
            t[1:].add_(t[:-1])  # a partial overlap
        with pytest.raises(RuntimeError, match="can't be cast"):
            t.long().div_(t.long())
        with pytest.raises(NotImplementedError, match="bitwise_and_cpu"):
            torch.bitwise_and(t, t)
        with pytest.raises(RuntimeError, match="alpha"):
            torch.add(t.long(), t.long(), alpha=0.5)
        with pytest.raises(RuntimeError, match="Negation"):
            torch.neg(t > 2)
        # An activation's parameter must fit its math type (the iterator's check, kept without it).
        with pytest.raises(RuntimeError, match="without overflow"):
            F.leaky_relu(t, 1e40)
        with pytest.raises(RuntimeError, match="without overflow"):
            F.elu(t.clone(), alpha=1e40, inplace=True)
        with pytest.raises(RuntimeError, match="approximate argument"):
            F.gelu(t, approximate="bad")
        with pytest.raises(NotImplementedError):
            F.gelu(t.int())
