"""Elementwise ops and copies with a transposed operand (the tiled path of kernels::core::tiles)
against torch's CPU backend, in strict mode: every element size, ragged tile edges, negative
strides, broadcast partners and several threads' worth of rows."""

from __future__ import annotations

import pytest
import torch
from helpers import ALL_REAL_DTYPES, assert_same, check, sample, to_foo

# Shapes around the tile (16 rows, 8x8 / 4x4 register blocks): smaller than a tile, ragged in
# both directions, exact multiples, and large enough to be split across threads.
SHAPES = [(8, 3), (9, 17), (16, 16), (37, 129), (64, 1000), (1000, 1000)]


@pytest.mark.parametrize("dtype", ALL_REAL_DTYPES + [torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape", SHAPES[:-1])
def test_copy_of_transposed_view(dtype: torch.dtype, shape: tuple[int, int]) -> None:
    x = sample(shape[::-1], dtype) if not dtype.is_complex else torch.randn(shape[::-1], dtype=dtype)
    out = check(lambda t: t.t().contiguous(), x)
    assert out.is_contiguous()


@pytest.mark.parametrize("dtype", ALL_REAL_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_binary_with_transposed_operand(dtype: torch.dtype, shape: tuple[int, int]) -> None:
    a, b = sample(shape, dtype, seed=1), sample(shape[::-1], dtype, seed=2)
    op = torch.logical_xor if dtype == torch.bool else torch.add
    check(lambda x, y: op(x, y.t()), a, b)
    check(lambda x, y: op(y.t(), x), a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_both_transposed_and_mixed_dtypes(dtype: torch.dtype) -> None:
    a, b = sample((129, 37), dtype, seed=3), sample((129, 37), torch.float32, seed=4)
    # Both inputs transposed and a dense output; then type promotion through the tiled path.
    check(lambda x, y: torch.mul(x.t(), y.t()), a, b)
    check(lambda x, y: x.t() - y.t().to(dtype), a, b)


def test_negative_and_offset_strides() -> None:
    a = sample((40, 70), torch.float32, seed=5)
    b = sample((90, 50), torch.float32, seed=6)
    # A flipped, offset, strided transposed slice of b against a dense a.
    check(lambda x, y: x + y[5:75, 3:43].flip(0).t(), a, b)
    check(lambda x, y: x * y[10:80:1, 2:42].t().flip(1), a, b)


def test_transposed_with_broadcast_partner() -> None:
    a, b = sample((300, 200), torch.float64, seed=7), sample((300,), torch.float64, seed=8)
    check(lambda x, y: x.t() + y, a, b)
    check(lambda x, y: torch.where(y > 0, x.t(), y), a, b)


def test_unary_and_in_place_on_transposed() -> None:
    a = sample((333, 65), torch.float32, seed=9)
    check(lambda x: torch.exp(x.t()), a)
    check(lambda x: x.t().contiguous().mul_(2), a)
    # In place into a dense tensor from a transposed one.
    d = torch.zeros(65, 333)
    fd = to_foo(d)
    fd.add_(to_foo(a).t())
    assert_same(fd, d.add_(a.t()))


def test_gradient_through_transposed_add() -> None:
    a = sample((70, 50), torch.float32, seed=10).requires_grad_()
    b = sample((50, 70), torch.float32, seed=11).requires_grad_()
    fa, fb = to_foo(a), to_foo(b)
    (fa * (fa + fb.t())).sum().backward()
    (a * (a + b.t())).sum().backward()
    assert_same(fa.grad, a.grad)
    assert_same(fb.grad, b.grad)
