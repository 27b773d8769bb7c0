"""Tensors of any rank, as on the CPU (foo once refused rank > 25)."""

from __future__ import annotations

import pytest
import torch
from helpers import check


def _tensor(rank: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    # A few dims of size 2-3 among size-1 dims, so that the data is not a single element.
    shape = [1] * rank
    shape[0], shape[rank // 2], shape[-1] = 2, 3, 2
    return torch.randn(shape, dtype=torch.float64).to(dtype)


# 64: torch.testing.assert_close itself takes at most 64 dims.
@pytest.mark.parametrize("rank", [26, 40, 64])
def test_factories_and_elementwise(rank):
    assert torch.ones([1] * rank, device="foo").dim() == rank
    assert torch.ones([1] * 200, device="foo").add(1).sum().item() == 2
    x = _tensor(rank)
    check(lambda a: a * 2 + 1, x)
    check(lambda a: (a.exp(), a > 0), x)
    check(lambda a, b: a - b, x, _tensor(rank))


@pytest.mark.parametrize("rank", [26, 33])
def test_non_contiguous_copies_reductions_and_indexing(rank):
    x = _tensor(rank)
    check(lambda a: a.transpose(0, rank - 1).contiguous(), x, check_stride=True)
    check(lambda a: a.permute(*reversed(range(rank))) + 1, x)
    check(lambda a: (a.sum(), a.sum(rank // 2), a.amax(-1, keepdim=True), a.mean()), x)
    check(lambda a: a.cumsum(0), x)
    check(lambda a: torch.cat([a, a], rank // 2), x)
    check(lambda a: a.index_select(0, torch.tensor([1, 0], device=a.device)), x)
    check(lambda a: a[a > 0], x)


def test_gradients_at_high_rank():
    x = _tensor(27).requires_grad_()
    y = x.detach().to("foo").requires_grad_()
    (x.sin() * x).sum().backward()
    (y.sin() * y).sum().backward()
    torch.testing.assert_close(y.grad.cpu(), x.grad)
