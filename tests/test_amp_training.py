"""Mixed-precision training on foo, every op native (strict mode): the transformer LM of
test_training.py under torch.autocast("foo") in bfloat16, and in float16 with GradScaler,
follows float32's loss curve."""

from __future__ import annotations

import copy

import pytest
import torch
from test_training import TinyLM
from torch import nn

STEPS = 20


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    # Learnable sequences: t[i+1] = (t[i] + step) % 50, a random start and step per sequence.
    g = torch.Generator().manual_seed(2)
    start = torch.randint(0, 50, (STEPS, 8, 1), generator=g)
    step = torch.randint(1, 4, (STEPS, 8, 1), generator=g)
    data = (start + step * torch.arange(17)) % 50
    return [(d[:, :-1], d[:, 1:]) for d in data]


def _loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def _curve(model: nn.Module, dtype: torch.dtype | None, scaler: bool) -> tuple[list[float], nn.Module]:
    m = copy.deepcopy(model).to("foo")
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.01, foreach=True)
    gs = torch.amp.GradScaler("foo", init_scale=2.0**12) if scaler else None
    losses = []
    for x, y in _batches():
        x, y = x.to("foo"), y.to("foo")
        opt.zero_grad()
        with torch.autocast("foo", dtype=dtype or torch.float16, enabled=dtype is not None):
            logits = m(x)
            loss = _loss(logits, y)
        if dtype is not None:
            assert logits.dtype == dtype and loss.dtype == torch.float32
        if gs is not None:
            gs.scale(loss).backward()
            gs.step(opt)
            gs.update()
        else:
            loss.backward()
            opt.step()
        losses.append(loss.item())
    return losses, m


@pytest.fixture(scope="module")
def float32_curve() -> list[float]:
    torch.manual_seed(0)
    return _curve(TinyLM(), None, False)[0]


@pytest.mark.slow
@pytest.mark.parametrize("dtype,scaler", [(torch.bfloat16, False), (torch.float16, True)], ids=["bf16", "fp16+scaler"])
def test_transformer_lm_autocast_follows_float32(float32_curve, dtype, scaler):
    torch.manual_seed(0)
    losses, model = _curve(TinyLM(), dtype, scaler)
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights stay float32
    gaps = [abs(a - b) / b for a, b in zip(losses, float32_curve)]
    tol = 0.01 if dtype == torch.bfloat16 else 0.005
    assert max(gaps) < tol, f"largest relative gap {max(gaps):.3g}\nfp32 {float32_curve}\namp  {losses}"
    assert losses[-1] < losses[0] - 1.0  # it trains
