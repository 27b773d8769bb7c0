"""bfloat16 matrix products (mm, addmm, bmm, baddbmm, matmul, linear) on foo against CPU float32
on the same bfloat16 values. On CPUs with AVX512-BF16 they run foo's native kernel (bfloat16
operands, float32 accumulation, one rounding), elsewhere the float32-widening path; either way
the result is within one bfloat16 rounding of the float32 product. Odd sizes cross the
kernel's register tile (6 x 64) and cache blocks (96 rows, 256 columns, 256 of k)."""

from __future__ import annotations

import foo_rs
import pytest
import torch
import torch.nn.functional as F
from helpers import to_foo

BF = torch.bfloat16
# One rounding to bfloat16 (2^-8 relative) of a float32-accumulated value, with headroom; atol
# covers results that cancel to near zero (sums of k products of magnitude <= 1).
TOL = {"atol": 1.6e-2, "rtol": 1.6e-2}


def _x(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) * 2 - 1).to(BF)


def _layout(t: torch.Tensor, how: str) -> torch.Tensor:
    if how == "transposed":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if how == "strided":
        big = torch.zeros(*t.shape[:-2], t.shape[-2], t.shape[-1] * 2 + 1, dtype=t.dtype)
        big[..., ::2][..., : t.shape[-1]] = t
        return big[..., : t.shape[-1] * 2 : 2]
    return t


def _check(out: torch.Tensor, ref: torch.Tensor, k: int = 1) -> None:
    assert out.device.type == "foo" and out.dtype == BF
    scale = max(1.0, k**0.5 / 4)
    torch.testing.assert_close(out.cpu().float(), ref, atol=TOL["atol"] * scale, rtol=TOL["rtol"])


SIZES = [(1, 1, 1), (7, 7, 7), (33, 17, 65), (257, 33, 129), (13, 513, 70), (100, 5, 300), (200, 260, 130)]


@pytest.mark.parametrize("m,k,n", SIZES, ids=str)
@pytest.mark.parametrize("la", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("lb", ["contiguous", "transposed"])
def test_mm(m: int, k: int, n: int, la: str, lb: str) -> None:
    a, b = _layout(_x((m, k), 1), la), _layout(_x((k, n), 2), lb)
    _check(torch.mm(to_foo(a), to_foo(b)), a.float() @ b.float(), k)


def test_mm_matches_cpu_bfloat16() -> None:
    # CPU's own bfloat16 product also rounds once from float32: the two agree to a bf16 ulp.
    a, b = _x((130, 300), 3), _x((300, 70), 4)
    out = (to_foo(a) @ to_foo(b)).cpu()
    torch.testing.assert_close(out.float(), (a @ b).float(), atol=1e-2, rtol=8e-3)


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, 2.0), (-1.5, 0.0)])
@pytest.mark.parametrize("bias", ["full", "row", "transposed"])
def test_addmm(alpha: float, beta: float, bias: str) -> None:
    m, k, n = 97, 70, 131
    a, b = _x((m, k), 5), _x((k, n), 6)
    c = {"full": _x((m, n), 7), "row": _x((n,), 7), "transposed": _layout(_x((m, n), 7), "transposed")}[bias]
    out = torch.addmm(to_foo(c), to_foo(a), to_foo(b), beta=beta, alpha=alpha)
    ref = torch.addmm(c.float(), a.float(), b.float(), beta=beta, alpha=alpha)
    _check(out, ref, k)


def test_addmm_beta_zero_ignores_nan_and_in_place() -> None:
    a, b = _x((20, 30), 8), _x((30, 40), 9)
    c = torch.full((20, 40), float("nan"), dtype=BF)
    _check(torch.addmm(to_foo(c), to_foo(a), to_foo(b), beta=0), a.float() @ b.float())
    c = _x((20, 40), 10)
    fc = to_foo(c)
    fc.addmm_(to_foo(a), to_foo(b), alpha=2.0)
    _check(fc, c.float() + 2 * (a.float() @ b.float()))
    # Transposed output via out=.
    out = torch.empty(40, 20, dtype=BF, device="foo").t()
    torch.mm(to_foo(a), to_foo(b), out=out)
    _check(out, a.float() @ b.float())


@pytest.mark.parametrize("shape", [(3, 7, 9, 5), (4, 65, 33, 130), (2, 1, 300, 1)], ids=str)
@pytest.mark.parametrize("how", ["contiguous", "transposed", "broadcast"])
def test_bmm_and_baddbmm(shape: tuple[int, int, int, int], how: str) -> None:
    bs, m, k, n = shape
    a = _layout(_x((bs, m, k), 11), how if how != "broadcast" else "contiguous")
    b = _x((k, n), 12).expand(bs, k, n) if how == "broadcast" else _layout(_x((bs, k, n), 12), how)
    _check(torch.bmm(to_foo(a), to_foo(b)), torch.bmm(a.float(), b.float()), k)
    c = _x((bs, m, n), 13)
    out = torch.baddbmm(to_foo(c), to_foo(a), to_foo(b), beta=0.5, alpha=2.0)
    _check(out, torch.baddbmm(c.float(), a.float(), b.float(), beta=0.5, alpha=2.0), k)


def test_matmul_and_linear_forward_backward() -> None:
    x, w, bias = _x((4, 9, 120), 14), _x((70, 120), 15), _x((70,), 16)
    fx, fw, fb = (to_foo(t).requires_grad_() for t in (x, w, bias))
    rx, rw, rb = (t.float().requires_grad_() for t in (x, w, bias))
    out, ref = F.linear(fx, fw, fb), F.linear(rx, rw, rb)
    _check(out, ref.detach(), 120)
    go = _x(tuple(out.shape), 17)
    out.backward(to_foo(go))
    ref.backward(go.float())
    for f, r, k in ((fx, rx, 70), (fw, rw, 36), (fb, rb, 36)):
        assert f.grad.dtype == BF
        _check(f.grad, r.grad, k)
    _check(to_foo(x) @ to_foo(w).t(), x.float() @ w.float().t(), 120)


@pytest.mark.parametrize("m,k,n", [(0, 5, 3), (4, 0, 3), (4, 5, 0)], ids=str)
def test_zero_size(m: int, k: int, n: int) -> None:
    a, b, c = _x((m, k), 18), _x((k, n), 19), _x((m, n), 20)
    _check(torch.mm(to_foo(a), to_foo(b)), a.float() @ b.float())
    ref = torch.addmm(c.float(), a.float(), b.float(), beta=2.0)
    _check(torch.addmm(to_foo(c), to_foo(a), to_foo(b), beta=2.0), ref)


def test_large_square_against_cpu() -> None:
    # The size of the benchmark (several cache blocks of every dimension, both threads busy).
    a, b = _x((1024, 1024), 21), _x((1024, 1024), 22)
    _check(to_foo(a) @ to_foo(b), a.float() @ b.float(), 1024)


WIDENED = [torch.float16] + ([] if foo_rs._C.native_bf16() else [BF])


@pytest.mark.parametrize("dtype", WIDENED, ids=str)
def test_widened_products_have_the_float32_products_bits(dtype: torch.dtype) -> None:
    # float16 (and bfloat16 without AVX512-BF16) widens the operands in their own layouts and
    # rounds the float32 product once: the bits of the float32 product of the same layouts on
    # foo, whichever path each layout takes (`w` widened as the linear kernel packs it and the
    # output rounded in its epilogue, in one depth piece or through a float32 matrix for more;
    # a bias row added in the kernel; a contiguous copy of a strided operand).
    def x(*shape: int, seed: int) -> torch.Tensor:
        return to_foo(_x(shape, seed).to(dtype))

    a, w, bias = x(300, 96, seed=30), x(200, 96, seed=31), x(200, seed=32)
    deep_a, deep_w = x(260, 600, seed=36), x(72, 600, seed=37)
    tokens_x, tokens_g = x(64, 200, seed=38), x(64, 150, seed=39)
    a3, b3, p3 = x(3, 40, 70, seed=33), x(3, 70, 50, seed=34), x(40, 3, 70, seed=35)
    cases = {
        "a @ w.t()": lambda f: f(a) @ f(w).t(),
        "linear with bias": lambda f: F.linear(f(a), f(w), f(bias)),
        "addmm, expanded bias, alpha/beta": lambda f: torch.addmm(f(bias), f(a), f(w).t(), beta=0.5, alpha=2.0),
        "a.t() @ b": lambda f: f(a).t() @ f(a)[:, :40],
        "a @ b, b row-major": lambda f: f(a) @ f(w).t().contiguous(),
        "weight gradient x.t() @ g": lambda f: f(tokens_x).t() @ f(tokens_g),
        "deeper than one piece, with bias": lambda f: F.linear(f(deep_a), f(deep_w), f(bias)[:72]),
        "rows apart": lambda f: f(deep_a)[:, :90] @ f(w)[:, :90].t(),
        "strided operands": lambda f: f(a)[:, ::2] @ f(w)[:, :48].t(),
        "bmm, transposed": lambda f: torch.bmm(f(b3).transpose(1, 2), f(a3).transpose(1, 2)),
        "bmm, batch not outermost": lambda f: torch.bmm(f(p3).permute(1, 0, 2), f(b3)),
        "bmm, broadcast batch": lambda f: torch.bmm(f(a3), f(b3)[:1].expand(3, 70, 50)),
    }
    for name, product in cases.items():
        got = product(lambda t: t)
        want = product(lambda t: t.float()).to(dtype)
        assert got.dtype == dtype, name
        assert torch.equal(got.cpu().view(torch.int16), want.cpu().view(torch.int16)), name
