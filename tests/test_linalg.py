"""Matrix products on foo (mm, bmm, addmm, baddbmm, addmv, mv, dot, matmul, linear) against CPU."""

from __future__ import annotations

import foo_rs
import pytest
import torch
import torch.nn.functional as F
from helpers import FOO, assert_same, check, layouts, sample, to_foo

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def tol(dtype: torch.dtype, k: int = 16) -> dict[str, float]:
    # Products accumulate k terms: scale the elementwise tolerances a little.
    if dtype == torch.float16:
        return {"atol": 2e-2, "rtol": 2e-2}
    if dtype == torch.bfloat16:
        return {"atol": 1e-1, "rtol": 5e-2}
    if dtype == torch.float32:
        return {"atol": 1e-4 * max(1, k / 64), "rtol": 1e-4}
    return {"atol": 1e-10, "rtol": 1e-10}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "expanded"])
def test_mm_layouts(dtype, layout):
    a = layouts((7, 5), dtype, seed=1)[layout]
    b = layouts((5, 6), dtype, seed=2)[layout]
    check(torch.mm, a, b, **tol(dtype))
    check(torch.mm, a, sample((5, 3), dtype).t().contiguous().t(), **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("m,k,n", [(64, 300, 129), (300, 257, 65), (1, 1000, 1), (513, 1, 17)])
def test_mm_large(dtype, m, k, n):
    a, b = sample((m, k), dtype, seed=3), sample((k, n), dtype, seed=4)
    check(torch.mm, a, b, **tol(dtype, k))
    check(torch.mm, b.t(), a.t(), **tol(dtype, k))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
@pytest.mark.parametrize("m,k,n", [(2, 3, 40), (5, 64, 257), (8, 1000, 300), (3, 17, 5000), (33, 70, 1030)])
def test_linear_layout_with_fewer_rows_than_outputs(dtype, m, k, n):
    # `x @ w.t()` with up to 8 rows runs as dot products of rows (`gemm::skinny`); with fewer
    # rows than columns, turned around (`w @ x.t()`) and transposed back. Into a dense output,
    # added to a staged bias, or into rows further apart.
    x, w, c = sample((m, k), dtype, seed=1), sample((n, k), dtype, seed=2), sample((m, n), dtype, seed=3)
    t = tol(dtype, k)
    check(lambda x, w: x @ w.t(), x, w, **t)
    check(lambda c, x, w: torch.addmm(c, x, w.t(), beta=0.5, alpha=2.0), c, x, w, **t)
    check(lambda x, w, b: F.linear(x, w, b), x, w, c[0], **t)
    want = torch.zeros(m, n + 3, dtype=dtype)
    got = want.to(FOO)
    torch.mm(x, w.t(), out=want[:, :n])
    torch.mm(x.to(FOO), w.to(FOO).t(), out=got[:, :n])
    assert_same(got, want, **t)


@pytest.mark.parametrize("m,k,n", [(256, 256, 1024), (300, 700, 45), (520, 512, 256), (130, 19, 33)])
def test_linear_layout_with_many_rows(m, k, n):
    # float32 `x @ w.t()` with many rows packs `w` into panels for the pointer-row kernel
    # (`gemm::linear`), which adds F.linear's bias in its epilogue, or adds the product to the
    # output's values (addmm_ in place, depth summed in pieces over 512): against the CPU, with
    # whole and partial panels, strided rows of x and w, and an output with rows further apart.
    dtype = torch.float32
    x, w, c = sample((m, k + 3), dtype, seed=1)[:, :k], sample((n, k), dtype, seed=2), sample((m, n), dtype, seed=3)
    t = tol(dtype, k)
    check(lambda x, w: x @ w.t(), x, w, **t)
    check(lambda x, w, b: F.linear(x, w, b), x, w, c[0], **t)
    check(lambda x, w, b: F.linear(x, w, b), x, sample((n, k + 1), dtype, seed=4)[:, :k], c[1], **t)
    check(lambda c, x, w: c.clone().addmm_(x, w.t()), c, x, w, **t)
    check(lambda c, x, w: torch.addmm(c, x, w.t(), beta=0.5, alpha=2.0), c, x, w, **t)
    check(lambda c, x, w: torch.addmm(c[:, :1], x, w.t()), c, x, w, **t)  # a column, not a row
    want = torch.zeros(m, n + 3, dtype=dtype)
    got = want.to(FOO)
    torch.addmm(c[0], x, w.t(), out=want[:, :n])
    torch.addmm(c[0].to(FOO), x.to(FOO), w.to(FOO).t(), out=got[:, :n])
    assert_same(got, want, **t)


def test_linear_with_many_rows_broadcast_zero_size_and_gradients():
    # The pointer-row linear kernel (`gemm::linear`) with a broadcast input (every row the same
    # memory), no rows or no outputs, and the gradients of a linear layer that takes it.
    dtype, (m, k, n) = torch.float32, (256, 300, 200)
    t = tol(dtype, k)
    w, b = sample((n, k), dtype, seed=2), sample((n,), dtype, seed=3)
    check(lambda x, w, b: F.linear(x, w, b), sample((1, k), dtype, seed=1).expand(m, k), w, b, **t)
    check(lambda x, w, b: F.linear(x, w, b), sample((0, k), dtype, seed=1), w, b, **t)
    check(lambda x, w, b: F.linear(x, w, b), sample((m, k), dtype, seed=1), w[:0], b[:0], **t)
    x = sample((m, k), dtype, seed=1).requires_grad_()
    wl, bl = w.clone().requires_grad_(), b.clone().requires_grad_()
    gy = sample((m, n), dtype, seed=4)
    F.linear(x, wl, bl).backward(gy)
    xf, wf, bf = to_foo([x, wl, bl])
    F.linear(xf, wf, bf).backward(gy.to(FOO))
    for got, want in [(xf.grad, x.grad), (wf.grad, wl.grad), (bf.grad, bl.grad)]:
        assert_same(got, want, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_mm_integer(dtype):
    a, b = sample((9, 11), dtype, seed=5), sample((11, 4), dtype, seed=6)
    check(torch.mm, a, b)
    check(torch.mm, a, b.t().contiguous().t())
    check(lambda s, x, y: torch.addmm(s, x, y, beta=2, alpha=3), sample((4,), dtype), a, b)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_mm_complex(dtype):
    a = torch.randn(6, 5, dtype=dtype, generator=torch.Generator().manual_seed(0))
    b = torch.randn(5, 4, dtype=dtype, generator=torch.Generator().manual_seed(1))
    check(torch.mm, a, b, atol=1e-5, rtol=1e-5)
    check(torch.mm, a, b.conj().t().conj().t(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", [(0, 4, 3), (3, 0, 5), (3, 4, 0)])
def test_zero_size(shape):
    m, k, n = shape
    a, b = sample((m, k), torch.float32), sample((k, n), torch.float32)
    check(torch.mm, a, b)
    check(lambda s, x, y: torch.addmm(s, x, y, beta=0.5), sample((m, n), torch.float32), a, b)
    check(torch.bmm, sample((2, m, k), torch.float32), sample((2, k, n), torch.float32))
    check(torch.bmm, sample((0, m, k), torch.float32), sample((0, k, n), torch.float32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_addmm_beta_alpha(dtype):
    a, b = sample((8, 5), dtype, seed=1), sample((5, 6), dtype, seed=2)
    for bias in [sample((8, 6), dtype), sample((6,), dtype), sample((1, 6), dtype), sample((8, 1), dtype),
                 sample((), dtype)]:
        check(torch.addmm, bias, a, b, **tol(dtype))
        check(lambda s, x, y: torch.addmm(s, x, y, beta=0.5, alpha=-2), bias, a, b, **tol(dtype))
    nan = torch.full((8, 6), float("nan"), dtype=dtype)
    check(lambda s, x, y: torch.addmm(s, x, y, beta=0), nan, a, b, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_inplace_and_out(dtype):
    a, b = sample((8, 5), dtype, seed=1), sample((5, 6), dtype, seed=2)
    c = sample((8, 6), dtype, seed=3)

    def inplace(s, x, y):
        s = s.clone()
        s.addmm_(x, y, beta=0.5, alpha=2)
        return s

    check(inplace, c, a, b, **tol(dtype))

    def out_fn(s, x, y):
        out = torch.empty(0, dtype=dtype, device=x.device)
        torch.addmm(s, x, y, out=out)
        out2 = torch.empty(3, dtype=dtype, device=x.device)
        torch.mm(x, y, out=out2)
        return out, out2

    check(out_fn, c, a, b, **tol(dtype))

    # A non-contiguous out (a transposed buffer).
    def out_t(x, y):
        out = torch.empty(6, 8, dtype=dtype, device=x.device).t()
        torch.mm(x, y, out=out)
        return out

    check(out_t, a, b, **tol(dtype))

    # out is the bias itself (addmm(out, a, b, out=out), like addmm_).
    def out_is_self(s, x, y):
        s = s.clone()
        torch.addmm(s, x, y, beta=0.5, out=s)
        return s

    check(out_is_self, c, a, b, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm_baddbmm(dtype):
    a, b = sample((4, 7, 5), dtype, seed=1), sample((4, 5, 6), dtype, seed=2)
    check(torch.bmm, a, b, **tol(dtype))
    check(torch.bmm, a.transpose(1, 2).contiguous().transpose(1, 2), b.transpose(0, 1).contiguous().transpose(0, 1),
          **tol(dtype))
    check(torch.bmm, sample((1, 7, 5), dtype).expand(4, 7, 5), b, **tol(dtype))
    for bias in [sample((4, 7, 6), dtype), sample((6,), dtype), sample((7, 1), dtype)]:
        check(lambda s, x, y: torch.baddbmm(s, x, y, beta=0.25, alpha=1.5), bias, a, b, **tol(dtype))

    def inplace(s, x, y):
        s = s.clone()
        s.baddbmm_(x, y, alpha=0.5)
        return s

    check(inplace, sample((4, 7, 6), dtype), a, b, **tol(dtype))

    def out_fn(x, y):
        out = torch.empty(0, dtype=dtype, device=x.device)
        return torch.bmm(x, y, out=out)

    check(out_fn, a, b, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bmm_many_small_and_large(dtype):
    check(torch.bmm, sample((64, 16, 8), dtype, seed=1), sample((64, 8, 12), dtype, seed=2), **tol(dtype))
    check(torch.bmm, sample((3, 130, 70), dtype, seed=1), sample((3, 70, 90), dtype, seed=2), **tol(dtype, 70))


@pytest.mark.parametrize("dtype", DTYPES)
def test_mv_addmv_dot(dtype):
    m, v = sample((7, 5), dtype, seed=1), sample((5,), dtype, seed=2)
    check(torch.mv, m, v, **tol(dtype))
    check(torch.mv, m.t().contiguous().t(), sample((10,), dtype)[::2], **tol(dtype))
    check(lambda s, x, y: torch.addmv(s, x, y, beta=0.5, alpha=2), sample((7,), dtype), m, v, **tol(dtype))
    check(lambda s, x, y: torch.addmv(s, x, y), sample((1,), dtype), m, v, **tol(dtype))

    def inplace(s, x, y):
        s = s.clone()
        return s.addmv_(x, y, beta=2)

    check(inplace, sample((7,), dtype), m, v, **tol(dtype))
    check(torch.dot, v, sample((5,), dtype, seed=3), **tol(dtype))
    check(torch.dot, sample((10,), dtype)[::2], sample((5,), dtype, seed=3), **tol(dtype))
    check(torch.dot, sample((0,), dtype), sample((0,), dtype))
    check(torch.mv, sample((0, 3), dtype), sample((3,), dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "sa,sb",
    [((5,), (5,)), ((3, 5), (5,)), ((5,), (5, 4)), ((3, 5), (5, 4)), ((2, 3, 5), (5, 4)), ((2, 3, 5), (5,)),
     ((5,), (2, 5, 4)), ((2, 3, 5), (2, 5, 4)), ((2, 1, 3, 5), (4, 5, 2)), ((2, 2, 3, 5), (2, 2, 5, 4)),
     ((3, 5), (2, 2, 5, 4))],
)
def test_matmul_dispatch(dtype, sa, sb):
    a, b = sample(sa, dtype, seed=1), sample(sb, dtype, seed=2)
    check(torch.matmul, a, b, **tol(dtype))


def test_matmul_transposed_nd():
    a = sample((2, 5, 3), torch.float32, seed=1).transpose(1, 2)
    b = sample((5, 4), torch.float32, seed=2)
    check(torch.matmul, a, b, **tol(torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape", [(5,), (4, 5), (2, 3, 5), (2, 2, 3, 5)])
def test_linear_forward(dtype, shape):
    x, w, b = sample(shape, dtype, seed=1), sample((6, 5), dtype, seed=2), sample((6,), dtype, seed=3)
    check(F.linear, x, w, b, **tol(dtype))
    check(F.linear, x, w, **tol(dtype))


@pytest.mark.fallback_ok  # the bias gradient is a sum (reduction family)
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 5)])
def test_linear_backward(shape):
    dtype = torch.float64
    x = sample(shape, dtype, seed=1).requires_grad_()
    w = sample((6, 5), dtype, seed=2).requires_grad_()
    b = sample((6,), dtype, seed=3).requires_grad_()
    gy = sample(shape[:-1] + (6,), dtype, seed=4)
    F.linear(x, w, b).backward(gy)
    xf, wf, bf = to_foo([x, w, b])
    F.linear(xf, wf, bf).backward(gy.to(FOO))
    for got, want in [(xf.grad, x.grad), (wf.grad, w.grad), (bf.grad, b.grad)]:
        assert_same(got, want)


def test_matmul_backward_native():
    dtype = torch.float64
    a = sample((4, 6, 5), dtype, seed=1).requires_grad_()
    b = sample((4, 5, 3), dtype, seed=2).requires_grad_()
    gy = sample((4, 6, 3), dtype, seed=3)
    torch.bmm(a, b).backward(gy)
    af, bf = to_foo([a, b])
    torch.bmm(af, bf).backward(gy.to(FOO))
    assert_same(af.grad, a.grad)
    assert_same(bf.grad, b.grad)
    a2 = sample((4, 5), dtype, seed=1).requires_grad_()
    w2 = sample((6, 5), dtype, seed=2).requires_grad_()
    F.linear(a2, w2).backward(sample((4, 6), dtype, seed=5))
    af2, wf2 = to_foo([a2, w2])
    F.linear(af2, wf2).backward(sample((4, 6), dtype, seed=5).to(FOO))
    assert_same(af2.grad, a2.grad)
    assert_same(wf2.grad, w2.grad)


def test_native_counts():
    a, b = sample((4, 5), torch.float32).to(FOO), sample((5, 3), torch.float32).to(FOO)
    before = foo_rs.native_counts().get("aten::mm", 0)
    torch.mm(a, b)
    assert foo_rs.native_counts().get("aten::mm", 0) == before + 1


def test_errors():
    a = sample((3, 4), torch.float32).to(FOO)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        torch.mm(a, a)
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(a, a.t().double())
    with pytest.raises(RuntimeError):
        torch.bmm(a, a)
    with pytest.raises(RuntimeError):
        torch.dot(a[0], a[1, :3])
