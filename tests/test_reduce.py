"""Reductions and scans on foo against torch's CPU backend (strict mode: no CPU fallback)."""

from __future__ import annotations

import math

import foo_rs
import pytest
import torch
from helpers import (
    ALL_REAL_DTYPES,
    FLOAT_DTYPES,
    FOO,
    INT_DTYPES,
    assert_same,
    check,
    layouts,
    sample,
    to_foo,
)

SHAPE = (5, 7, 6)
DIMS = [None, 0, -1, 1, (0, 2), (-1, -2), (0, 1, 2), ()]


def _dims(dim):
    return {} if dim is None else {"dim": dim}


def red_tol(dtype):
    # Reductions accumulate differently from ATen's (lanes, pairwise): allow a little more.
    if dtype == torch.float32:
        return {"atol": 1e-4, "rtol": 1e-4}
    if dtype == torch.float64:
        return {"atol": 1e-10, "rtol": 1e-10}
    if dtype == torch.float16:
        return {"atol": 1e-2, "rtol": 1e-2}
    if dtype == torch.bfloat16:
        return {"atol": 5e-2, "rtol": 5e-2}
    return {}


# ---- sum / mean / prod / nansum -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_REAL_DTYPES)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum(dtype, dim, keepdim):
    for x in layouts(SHAPE, dtype).values():
        if dim is None:
            check(lambda t: torch.sum(t), x, **red_tol(dtype))
        else:
            check(lambda t: torch.sum(t, dim, keepdim=keepdim), x, **red_tol(dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean(dtype, dim, keepdim):
    for x in layouts(SHAPE, dtype).values():
        if dim is None:
            check(lambda t: torch.mean(t), x, **red_tol(dtype))
        else:
            check(lambda t: torch.mean(t, dim, keepdim=keepdim), x, **red_tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_mean_divides_before_rounding(dtype):
    # The CPU backend sums f16/bf16 in float32 and divides before rounding once; rounding the
    # sum first made the mean of 1e5 tens inf in float16 (and adaptive_avg_pool2d(1), a mean).
    x = torch.full((3, 100000), 10.0, dtype=dtype) + sample((3, 100000), dtype, low=-1, high=1)
    check(lambda t: t.mean(), x)
    check(lambda t: t.mean(1), x, rtol=0, atol=0)
    check(lambda t: t.mean(0), x)
    check(lambda t: t.mean((0, 1), keepdim=True), x)
    check(lambda t: torch.nn.functional.adaptive_avg_pool2d(t.view(1, 3, 400, 250), 1), x)


@pytest.mark.parametrize("dtype", ALL_REAL_DTYPES)
@pytest.mark.parametrize("dim", [None, 0, -1, 1])
def test_prod(dtype, dim):
    for x in layouts((4, 5, 3), dtype).values():
        x = x / 2 + 0.75 if dtype.is_floating_point else x
        if dim is None:
            check(lambda t: torch.prod(t), x, **red_tol(dtype))
        else:
            check(lambda t: torch.prod(t, dim), x, **red_tol(dtype))
            check(lambda t: torch.prod(t, dim, keepdim=True), x, **red_tol(dtype))


@pytest.mark.parametrize(
    "dtype,out_dtype",
    [
        (torch.int32, torch.float32),
        (torch.float32, torch.float64),
        (torch.float16, torch.float32),
        (torch.int8, torch.int32),
        (torch.float32, torch.int32),
        (torch.bool, torch.int64),
        (torch.uint8, torch.int16),
    ],
)
def test_dtype_argument(dtype, out_dtype):
    x = sample((6, 9), dtype)
    check(lambda t: torch.sum(t, dtype=out_dtype), x, **red_tol(out_dtype))
    check(lambda t: torch.sum(t, 1, dtype=out_dtype), x, **red_tol(out_dtype))
    check(lambda t: torch.prod(t[:, :3], 1, dtype=out_dtype), x, **red_tol(out_dtype))
    check(lambda t: torch.cumsum(t, 0, dtype=out_dtype), x, **red_tol(out_dtype))
    if out_dtype.is_floating_point:
        check(lambda t: torch.mean(t, 0, dtype=out_dtype), x, **red_tol(out_dtype))


def test_int_promotion_and_overflow():
    x = torch.full((1000,), 100, dtype=torch.int8)
    r = check(lambda t: t.sum(), x)
    assert r.dtype == torch.int64 and r.item() == 100000
    big = torch.full((70,), 2**40, dtype=torch.int64)
    check(lambda t: t.sum(), big)  # wraps like CPU
    check(lambda t: t.prod(), torch.arange(1, 30))
    check(lambda t: t.sum(), torch.ones(5, dtype=torch.bool))


def test_nansum():
    x = sample((6, 8), torch.float32)
    x[1, 2] = math.nan
    x[4, :] = math.nan
    for dim in [None, 0, 1]:
        check(lambda t, dim=dim: torch.nansum(t, **_dims(dim)), x, **red_tol(torch.float32))
    check(lambda t: torch.nansum(t), sample((4,), torch.int32))


def test_out_variants():
    x = sample((4, 6, 5), torch.float32)
    for fn in [
        lambda t, o: torch.sum(t, (0, 2), out=o),
        lambda t, o: torch.mean(t, 1, keepdim=True, out=o),
        lambda t, o: torch.prod(t, 1, out=o),
        lambda t, o: torch.amax(t, -1, out=o),
        lambda t, o: torch.amin(t, (0, 1), out=o),
        lambda t, o: torch.max(t, out=o),
        lambda t, o: torch.var(t, 1, out=o),
        lambda t, o: torch.std(t, (0, 2), correction=0, out=o),
        lambda t, o: torch.linalg.vector_norm(t, 3, dim=1, out=o),
        lambda t, o: torch.logsumexp(t, 1, out=o),
        lambda t, o: torch.cumsum(t, 1, out=o),
        lambda t, o: torch.cumprod(t, 0, out=o),
        lambda t, o: torch.norm(t, 2, dim=1, out=o),
    ]:
        cpu = fn(x, torch.empty(0))
        o = torch.empty(0, device=FOO)
        got = fn(to_foo(x), o)
        assert got is o
        assert_same(o, cpu, **red_tol(torch.float32))
    for fn in [
        lambda t, o: torch.argmax(t, 1, out=o),
        lambda t, o: torch.sum(t.int(), 1, out=o),
        lambda t, o: torch.argmin(t, out=o),
    ]:
        cpu = fn(x, torch.empty(0, dtype=torch.long))
        o = torch.empty(0, dtype=torch.long, device=FOO)
        fn(to_foo(x), o)
        assert_same(o, cpu)
    for fn in [lambda t, o: torch.all(t > 0, 1, out=o), lambda t, o: torch.any(t > 0, out=o)]:
        cpu = fn(x, torch.empty(0, dtype=torch.bool))
        o = torch.empty(0, dtype=torch.bool, device=FOO)
        fn(to_foo(x), o)
        assert_same(o, cpu)
    # Mixed: values/indices outs of max.dim and var_mean-like tuples.
    v, i = torch.empty(0), torch.empty(0, dtype=torch.long)
    fv, fi = torch.empty(0, device=FOO), torch.empty(0, dtype=torch.long, device=FOO)
    torch.max(x, 1, out=(v, i))
    torch.max(to_foo(x), 1, out=(fv, fi))
    assert_same(fv, v)
    assert_same(fi, i)
    # An out tensor of another dtype.
    o = torch.empty(0, dtype=torch.float64, device=FOO)
    torch.sum(to_foo(x), 1, out=o)
    assert_same(o, torch.sum(x, 1, out=torch.empty(0, dtype=torch.float64)))
    # A non-contiguous out tensor keeps its strides.
    o = torch.empty(6, 4, device=FOO).t()
    torch.sum(to_foo(x), 2, out=o)
    assert_same(o, x.sum(2), **red_tol(torch.float32))


# ---- max / min / arg ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_REAL_DTYPES)
def test_max_min_full_and_print(dtype):
    for x in layouts(SHAPE, dtype).values():
        check(lambda t: t.max(), x)
        check(lambda t: t.min(), x)
        check(lambda t: torch.aminmax(t), x)


@pytest.mark.parametrize("dtype", INT_DTYPES + [torch.bool])
def test_print_strict(dtype):
    # Printing integer tensors needs max/min (this family) and elementwise ops only.
    s = str(to_foo(sample((3, 4), dtype)))
    assert "device='foo:0'" in s


@pytest.mark.fallback_ok
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_print_float(dtype):
    # Float printing also needs masked_select (index family): allowed to fall back until it lands.
    x = sample((3, 4), dtype)
    s = str(to_foo(x))
    assert "device='foo:0'" in s
    assert s.splitlines()[0] == str(x).splitlines()[0]


@pytest.mark.parametrize("dtype", ALL_REAL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim(dtype, dim, keepdim):
    for x in layouts(SHAPE, dtype).values():
        check(lambda t: torch.max(t, dim, keepdim=keepdim), x)
        check(lambda t: torch.min(t, dim, keepdim=keepdim), x)
        if dtype != torch.bool:  # CPU: argmax/argmin do not support bool
            check(lambda t: torch.argmax(t, dim, keepdim=keepdim), x)
            check(lambda t: torch.argmin(t, dim, keepdim=keepdim), x)
        check(lambda t: torch.aminmax(t, dim=dim, keepdim=keepdim), x)


@pytest.mark.parametrize("dtype", ALL_REAL_DTYPES)
@pytest.mark.parametrize("dim", [None, 0, (1, 2), -1, ()])
def test_amax_amin(dtype, dim):
    for x in layouts(SHAPE, dtype).values():
        d = () if dim is None else dim
        check(lambda t, d=d: torch.amax(t, d), x)
        check(lambda t, d=d: torch.amin(t, d, keepdim=True), x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES)
def test_argmax_full(dtype):
    for x in layouts(SHAPE, dtype).values():
        check(lambda t: torch.argmax(t), x)
        check(lambda t: torch.argmin(t), x)
        check(lambda t: torch.argmax(t, keepdim=True), x)


def test_ties_and_nan():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [5.0, math.nan, 7.0, math.nan], [-1.0, -1.0, -2.0, -2.0]])
    for fn in [
        lambda t: torch.max(t, 1),
        lambda t: torch.min(t, 1),
        lambda t: torch.argmax(t, 1),
        lambda t: torch.argmin(t, 1),
        lambda t: torch.argmax(t),
        lambda t: torch.amax(t, 1),
        lambda t: torch.amin(t, 0),
        lambda t: t.max(),
        lambda t: t.min(),
        lambda t: torch.max(t, 0),
        lambda t: torch.argmin(t, 0),
    ]:
        check(fn, x)
    # Long rows with the extreme value in a late block, ties across blocks, and NaN late.
    y = sample((3, 5000), torch.float32)
    y[0, 4000] = 100.0
    y[0, 4500] = 100.0
    y[1, 10] = -100.0
    y[1, 3000] = -100.0
    y[2, 4999] = math.nan
    for fn in [
        lambda t: torch.max(t, 1),
        lambda t: torch.min(t, 1),
        lambda t: t.argmax(),
        lambda t: torch.max(t.t(), 0),
    ]:
        check(fn, y)
    z = torch.tensor([-math.inf, -math.inf, 1.0])
    check(lambda t: torch.max(t, 0), z[:2])
    check(lambda t: torch.min(t, 0), -z[:2])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_extremes_with_ties_nan_and_signed_zeros(dtype):
    # Half types compare in float32 in the vector loops: values, first-index ties, NaN and
    # infinities must come back exactly as the CPU's, on short and long (multi-block) rows.
    y = sample((4, 5000), torch.float32).to(dtype)
    y[0, 4000] = 100.0
    y[0, 4500] = 100.0
    y[1, 10] = -100.0
    y[1, 3000] = -100.0
    y[2, 4999] = math.nan
    y[3, :] = 0.0
    y[3, 7] = -0.0
    y[3, 4096] = math.inf
    for x in [y, y[:, :40]]:
        for fn in [
            lambda t: torch.amax(t, 1),
            lambda t: torch.amin(t, 1),
            lambda t: torch.max(t, 1),
            lambda t: torch.min(t, 1),
            lambda t: torch.argmax(t, 1),
            lambda t: torch.argmin(t, 1),
            lambda t: t.max(),
        ]:
            check(fn, x)


def test_empty_and_errors():
    e = torch.empty(0, 3)
    for fn in [
        lambda t: t.max(),
        lambda t: t.min(),
        lambda t: torch.max(t, 0),
        lambda t: torch.argmax(t),
        lambda t: torch.argmax(t, 0),
        lambda t: torch.amax(t),
        lambda t: torch.amax(t, 0),
        lambda t: torch.aminmax(t),
        lambda t: torch.linalg.vector_norm(t, math.inf),
    ]:
        with pytest.raises((RuntimeError, IndexError)) as cpu_err:
            fn(e)
        with pytest.raises(type(cpu_err.value)) as foo_err:
            fn(to_foo(e))
        assert str(foo_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]
    for fn in [
        lambda t: t.sum(),
        lambda t: t.sum(0),
        lambda t: t.prod(0),
        lambda t: t.mean(0),
        lambda t: t.max(1),
        lambda t: t.amax(1),
        lambda t: t.argmax(1),
        lambda t: t.var(0),
        lambda t: t.all(),
        lambda t: t.any(0),
        lambda t: torch.logsumexp(t, 0),
        lambda t: torch.linalg.vector_norm(t),
        lambda t: t.cumsum(0),
        lambda t: torch.std_mean(t, 1),
    ]:
        check(fn, e)
    with pytest.raises(RuntimeError, match="mean"):
        to_foo(torch.ones(3, dtype=torch.long)).mean()
    with pytest.raises(RuntimeError, match="floating point"):
        to_foo(torch.ones(3, dtype=torch.long)).var()


def test_zero_dim():
    x = torch.tensor(2.5)
    for fn in [
        lambda t: t.sum(),
        lambda t: t.sum(0),
        lambda t: t.mean(-1, keepdim=True),
        lambda t: t.prod(0),
        lambda t: t.max(),
        lambda t: torch.max(t, 0),
        lambda t: t.argmax(),
        lambda t: t.argmin(0),
        lambda t: t.amax(),
        lambda t: t.var(correction=0),
        lambda t: torch.linalg.vector_norm(t),
        lambda t: t.all(),
        lambda t: t.any(0),
        lambda t: torch.logsumexp(t, 0),
        lambda t: t.cumsum(0),
        lambda t: t.cumprod(-1),
    ]:
        check(fn, x)


# ---- var / std ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), ()])
@pytest.mark.parametrize("correction", [0, 1, 2.5])
def test_var_std(dtype, dim, correction):
    for x in layouts(SHAPE, dtype).values():
        kw = {**_dims(dim), "correction": correction}
        check(lambda t, kw=kw: torch.var(t, **kw), x, **red_tol(dtype))
        check(lambda t, kw=kw: torch.std(t, **kw, keepdim=True), x, **red_tol(dtype))
        check(lambda t, kw=kw: torch.var_mean(t, **kw), x, **red_tol(dtype))
        check(lambda t, kw=kw: torch.std_mean(t, **kw), x, **red_tol(dtype))
    check(lambda t: torch.var(t, 0), sample((1, 4), dtype))  # dof 0 -> nan
    check(lambda t: torch.var(t, unbiased=False), sample((3, 4), dtype), **red_tol(dtype))


# ---- norms ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("ord", [2, 1, math.inf, -math.inf, 0, 3, 0.5, -1])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
def test_vector_norm(dtype, ord, dim):
    for x in layouts(SHAPE, dtype).values():
        check(lambda t: torch.linalg.vector_norm(t, ord, **_dims(dim)), x, **red_tol(dtype))
        check(lambda t: torch.linalg.vector_norm(t, ord, **_dims(dim), keepdim=True), x, **red_tol(dtype))


def test_norm_overloads():
    x = sample((4, 6), torch.float32)
    for fn in [
        lambda t: torch.norm(t),
        lambda t: torch.norm(t, 1),
        lambda t: torch.norm(t, dim=1),
        lambda t: torch.norm(t, p=3, dim=0, keepdim=True),
        lambda t: torch.norm(t, dim=1, dtype=torch.float64),
        lambda t: t.norm(math.inf),
        lambda t: torch.linalg.vector_norm(t, dtype=torch.float64),
        lambda t: torch.linalg.norm(t, dim=1),
        lambda t: torch.nn.functional.normalize(t, dim=1),
    ]:
        check(fn, x, **red_tol(torch.float32))
    with pytest.raises(RuntimeError, match="floating point"):
        torch.linalg.vector_norm(to_foo(torch.ones(3, dtype=torch.long)))


# ---- all / any ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_REAL_DTYPES)
def test_all_any(dtype):
    for x in layouts(SHAPE, dtype).values():
        for fn in [
            lambda t: t.all(),
            lambda t: t.any(),
            lambda t: t.all(1),
            lambda t: t.any(-1, keepdim=True),
            lambda t: torch.all(t, dim=(0, 2)),
            lambda t: torch.any(t, dim=()),
            lambda t: (t != 0).all(0),
            lambda t: (t > 100).any(),
        ]:
            check(fn, x)


# ---- logsumexp ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.int32])
@pytest.mark.parametrize("dim", [0, -1, (0, 2)])
def test_logsumexp(dtype, dim):
    for x in layouts(SHAPE, dtype).values():
        check(
            lambda t: torch.logsumexp(t, dim),
            x,
            **red_tol(x.dtype if x.is_floating_point() else torch.float32),
        )
        check(
            lambda t: torch.logsumexp(t, dim, keepdim=True),
            x,
            **red_tol(torch.float32 if not x.is_floating_point() else dtype),
        )


def test_logsumexp_special():
    inf = math.inf
    x = torch.tensor(
        [[-inf, -inf], [inf, 1.0], [inf, -inf], [math.nan, 1.0], [1000.0, 1000.0], [-1000.0, -1000.0]]
    )
    check(lambda t: torch.logsumexp(t, 1), x)
    check(lambda t: torch.logsumexp(t, 0), x)
    y = sample((3, 3000), torch.float32) * 50
    check(lambda t: torch.logsumexp(t, 1), y, **red_tol(torch.float32))
    check(lambda t: torch.logsumexp(t, 0), y.t().contiguous(), **red_tol(torch.float32))


# ---- cumsum / cumprod -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_REAL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod(dtype, dim):
    for x in layouts(SHAPE, dtype).values():
        check(lambda t: torch.cumsum(t, dim), x, **red_tol(dtype))
        y = x / 2 + 0.8 if dtype.is_floating_point else x
        check(lambda t: torch.cumprod(t, dim), y, **red_tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16])
def test_cumsum_inplace(dtype):
    for dim in [0, 1]:
        x = sample((5, 6), dtype)
        cpu = x.clone().cumsum_(dim)
        f = to_foo(x)
        r = f.cumsum_(dim)
        assert r is f
        assert_same(f, cpu, **red_tol(dtype))
        x = sample((5, 6), dtype)
        cpu = x.clone().cumprod_(dim)
        f = to_foo(x)
        f.cumprod_(dim)
        assert_same(f, cpu, **red_tol(dtype))


# ---- large inputs (parallel paths, chunked reductions) ------------------------------------------


@pytest.mark.parametrize(
    "shape,dim",
    [
        ((1_000_003,), None),
        ((1000, 1000), 1),
        ((1000, 1000), 0),
        ((3, 400_000), 1),
        ((400_000, 3), 0),
        ((64, 100, 200), (0, 2)),
        ((2, 300_000), 0),
        ((20, 50_000), 0),
        ((8, 4, 40_000), 1),
    ],
)
def test_large(shape, dim):
    x = sample(shape, torch.float32)
    kw = _dims(dim)
    tol = {"atol": 1e-3, "rtol": 1e-4}
    check(lambda t: t.sum(**kw), x, **tol)
    check(lambda t: t.mean(**kw), x, **tol)
    check(lambda t: torch.amax(t, **kw), x)
    check(lambda t, kw=kw: torch.var(t, **kw), x, **tol)
    check(lambda t: torch.linalg.vector_norm(t, **kw), x, **tol)
    check(lambda t: torch.logsumexp(t, dim if dim is not None else tuple(range(len(shape)))), x, **tol)
    d = dim if isinstance(dim, int) else 0
    check(lambda t: torch.max(t, d), x)
    check(lambda t: torch.argmin(t, d), x)
    check(lambda t: (t > -2.9).all(d), x)
    xd = x.double()
    check(lambda t: t.sum(**kw), xd)
    check(lambda t: torch.cumsum(t, d), xd)
    check(lambda t: t.sum(**kw), sample(shape, torch.int32))


def test_large_deterministic_across_threads():
    # The same input reduced twice gives bit-identical results (chunking is shape-only).
    x = to_foo(sample((2_000_000,), torch.float32))
    a, b = x.sum().cpu(), x.sum().cpu()
    assert torch.equal(a, b)


def test_expanded_and_sliced_inputs():
    base = sample((1, 7), torch.float32)
    x = base.expand(500, 7)
    check(lambda t: t.sum(0), x, **red_tol(torch.float32))
    check(lambda t: t.sum(), x, **red_tol(torch.float32))
    check(lambda t: torch.max(t, 0), x)
    y = sample((40, 50), torch.float64)[::3, 5:40:2]
    check(lambda t: t.sum(1), y)
    check(lambda t: t.var(0), y)
    check(lambda t: t.t().argmax(1), y)
    check(lambda t: t.cumsum(0), y.t())


# ---- autograd -------------------------------------------------------------------------------------


def _grad_check(fn, x, **tol):
    xc = x.clone().requires_grad_()
    xf = to_foo(x).requires_grad_()
    outc, outf = fn(xc), fn(xf)
    g = sample(outc.shape, outc.dtype, seed=3)
    outc.backward(g)
    outf.backward(to_foo(g))
    assert_same(xf.grad, xc.grad, **tol)


# Backwards that need ops of other families (scatter, flip: index family) may fall back.
_needs_index = pytest.mark.fallback_ok


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: t.sum(1),
        lambda t: t.sum(),
        lambda t: t.mean((0, 1)),
        lambda t: t.amax(1),
        pytest.param(lambda t: torch.max(t, 0).values, marks=_needs_index, id="max_dim_scatter"),
        lambda t: t.max(),
        lambda t: t.var(1),
        lambda t: t.std(0),
        lambda t: torch.linalg.vector_norm(t, dim=1),
        lambda t: torch.linalg.vector_norm(t, 3, dim=0),
        lambda t: torch.logsumexp(t, 1),
        pytest.param(lambda t: t.cumsum(1), marks=_needs_index, id="cumsum_flip"),
        lambda t: t.prod(1),
        lambda t: torch.norm(t),
    ],
)
def test_gradients(fn):
    _grad_check(fn, sample((4, 6), torch.float64), atol=1e-10, rtol=1e-10)


def test_native_counts():
    before = dict(foo_rs.native_counts()) if hasattr(foo_rs, "native_counts") else None
    to_foo(sample((3, 3), torch.float32)).sum(0)
    if before is not None:
        assert foo_rs.native_counts().get("aten::sum.dim_IntList", 0) > before.get("aten::sum.dim_IntList", 0)


_ = INT_DTYPES  # imported for completeness of the dtype matrix


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cols", [64, 130, 200, 257])
def test_column_sums_register_blocks(dtype, cols):
    # Column (outer) sums fold 64 columns at a time in registers over cascades of 128 rows; the
    # columns past the last whole block take the per-row path. 300 rows: two cascades and a
    # partial one.
    x = sample((300, cols), dtype, seed=7)
    tol = {"atol": 2e-2, "rtol": 1e-2} if dtype in (torch.float16, torch.bfloat16) else {"atol": 1e-4, "rtol": 1e-5}
    check(lambda t: t.sum(0), x, **tol)
    check(lambda t: t.mean(0), x, **tol)
    check(lambda t: t.sum((0, 1), keepdim=True), x.reshape(3, 100, cols), **tol)


@pytest.mark.parametrize("n", [15, 16, 17, 63, 64, 65, 79, 1000, 4095, 4096, 4097, 10_001])
def test_sum_lengths_around_lane_and_block_sizes(n):
    # Dense folds: 64 lanes, then the remainder 16 at a time, then one at a time; pairwise over
    # blocks of 4096.
    for dtype in (torch.float32, torch.float64):
        x = sample((3, n), dtype, seed=n)
        tol = {"atol": 1e-4, "rtol": 1e-5} if dtype == torch.float32 else {}
        check(lambda t: t.sum(-1), x, **tol)
        check(lambda t: t.sum(), x, **tol)
        check(lambda t: t.mean(-1), x, **tol)


@pytest.mark.parametrize("rows", [1, 4, 127, 128, 129, 300])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_outer_reductions_short_and_long(rows, dtype):
    # Outer reductions of up to one cascade (128 rows) fold straight into the accumulators;
    # longer ones go through a temporary block per cascade. Wide rows (1500 columns) span two
    # 1024-column tasks; index-returning reductions must keep the first extreme.
    x = sample((rows, 1500), dtype, seed=rows)
    if dtype != torch.int64:
        x[rows // 2, 7] = x[0, 7]  # a tie in one column
    tol = {"atol": 1e-4, "rtol": 1e-5} if dtype == torch.float32 else {}
    for fn in (lambda t: t.sum(0), lambda t: t.amax(0), lambda t: t.argmin(0), lambda t: t.max(0)):
        check(fn, x, **tol)
    check(lambda t: t.prod(0), x[:, :40].clamp(-1.5, 1.5) if dtype != torch.int64 else x[:, :40] % 3, **tol)
    check(lambda t: t.sum(1), x.reshape(rows, 3, 500).transpose(0, 1).contiguous(), **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cols", [1, 3, 8, 37, 48, 63])
def test_column_sums_of_short_dense_rows(dtype, cols):
    # Rows of fewer than 64 columns that follow each other are folded 256 / cols rows at a time
    # (one dense run per step), then the runs' partial sums per column in order; rows left over
    # take the per-row path. 100003 rows: cascades of 128 rows, a remainder in each, and a last
    # partial cascade; 70 rows: fewer than two runs for the short widths.
    tol = {"atol": 5e-2, "rtol": 2e-2} if dtype in (torch.float16, torch.bfloat16) else {"atol": 1e-3, "rtol": 1e-5}
    for rows in (70, 1000, 100_003):
        x = sample((rows, cols), dtype, seed=rows + cols)
        check(lambda t: t.sum(0), x, **tol)
        check(lambda t: t.mean(0), x, **tol)
        check(lambda t: t.sum((0, 1)), x.reshape(rows, 1, cols), **tol)
    exact = (torch.arange(100_003 * cols, dtype=torch.float64) % 7).reshape(100_003, cols)
    got = to_foo(exact).sum(0).cpu()  # small integers: every order gives the same sum
    assert torch.equal(got, exact.sum(0))
