"""Training examples: the same initial weights and batches on CPU and on foo give the same loss
curve (relative gap under 1e-3 over 30 steps), with every op native (strict mode)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn

STEPS = 30


def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    d = load_digits()
    return torch.tensor(d.data, dtype=torch.float32) / 16.0, torch.tensor(d.target, dtype=torch.int64)


def _curves(model: nn.Module, make_opt: Callable, batches: list[tuple[torch.Tensor, torch.Tensor]],
            loss_fn: Callable) -> tuple[list[float], list[float]]:
    out = []
    for device in ["cpu", "foo"]:
        m = copy.deepcopy(model).to(device)
        opt = make_opt(m.parameters())
        losses = []
        for x, y in batches:
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss = loss_fn(m(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out.append(losses)
    return out[0], out[1]


def _assert_close_curves(cpu: list[float], foo: list[float]) -> None:
    gaps = [abs(f - c) / max(abs(c), 1e-6) for c, f in zip(cpu, foo)]
    assert max(gaps) < 1e-3, f"largest relative gap {max(gaps):.2e}\ncpu {cpu}\nfoo {foo}"
    assert cpu[-1] < cpu[0]  # it actually trains


@pytest.mark.slow
def test_mlp_sgd_momentum_on_digits():
    x, y = _digits()
    g = torch.Generator().manual_seed(0)
    batches = [(x[i], y[i]) for i in (torch.randint(0, len(x), (64,), generator=g) for _ in range(STEPS))]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.Tanh(), nn.Linear(64, 10))
    cpu, foo = _curves(model, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True), batches,
                       nn.functional.cross_entropy)
    _assert_close_curves(cpu, foo)


@pytest.mark.slow
def test_cnn_adam_on_digits():
    x, y = _digits()
    x = x.view(-1, 1, 8, 8)
    g = torch.Generator().manual_seed(1)
    batches = [(x[i], y[i]) for i in (torch.randint(0, len(x), (32,), generator=g) for _ in range(STEPS))]
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10),
    )
    cpu, foo = _curves(model, lambda p: torch.optim.Adam(p, lr=1e-2, foreach=True), batches,
                       nn.functional.cross_entropy)
    _assert_close_curves(cpu, foo)


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 32, heads: int = 4, layers: int = 2, ctx: int = 16) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(ctx, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, batch_first=True,
                                           activation="gelu")
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        h = self.enc(self.tok(idx) + self.pos[:t], mask=mask, is_causal=True)
        return self.head(h)


@pytest.mark.slow
def test_transformer_lm_adamw():
    g = torch.Generator().manual_seed(2)
    data = torch.randint(0, 50, (STEPS, 8, 17), generator=g)
    batches = [(d[:, :-1], d[:, 1:]) for d in data]
    torch.manual_seed(0)
    model = TinyLM()

    def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

    cpu, foo = _curves(model, lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.01, foreach=True), batches,
                       loss_fn)
    _assert_close_curves(cpu, foo)


def test_backward_runs_on_the_calling_thread_unless_asked_otherwise():
    # foo turns autograd's per-device worker threads off for the importing thread (see
    # foo_rs/_autograd.py): a foo backward runs where backward() was called, as a CPU one does;
    # set_multithreading_enabled(True) hands it to the device's worker again.
    import threading

    def backward_thread() -> int:
        seen: list[int] = []
        x = torch.randn(4, device="foo", requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: seen.append(threading.get_ident()))
        y.sum().backward()
        assert torch.equal(x.grad.cpu(), torch.full((4,), 2.0))
        return seen[0]

    assert not torch._C._is_multithreading_enabled()
    assert backward_thread() == threading.get_ident()
    with torch.autograd.set_multithreading_enabled(True):
        assert backward_thread() != threading.get_ident()
    assert backward_thread() == threading.get_ident()
