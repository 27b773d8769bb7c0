"""Small models and data for tests/test_compile.py: an MLP, a CNN (convolution, batch norm,
pooling) and a transformer LM (embedding, causal attention, layer norm, GELU), each with its
batches and loss, and a training loop that runs eagerly or compiled."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from test_training import TinyLM
from torch import nn

Batch = tuple[torch.Tensor, torch.Tensor]
STEPS = 10


@dataclass
class Case:
    name: str
    model: nn.Module
    batches: list[Batch]
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _lm_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def _teacher_batches(g: torch.Generator, shape: tuple[int, ...], steps: int) -> list[Batch]:
    """Inputs labelled by a fixed random linear teacher: a task the models can learn."""
    features = 1
    for n in shape[1:]:
        features *= n
    teacher = torch.randn(features, 10, generator=g)
    batches = []
    for _ in range(steps):
        x = torch.randn(shape, generator=g)
        batches.append((x, (x.reshape(shape[0], -1) @ teacher).argmax(1)))
    return batches


def make_case(name: str, steps: int = STEPS) -> Case:
    """The same weights and batches every call."""
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if name == "mlp":
        model: nn.Module = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10))
        return Case(name, model, _teacher_batches(g, (16, 32), steps), nn.functional.cross_entropy)
    if name == "cnn":
        model = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(16, 10),
        )
        return Case(name, model, _teacher_batches(g, (8, 1, 8, 8), steps), nn.functional.cross_entropy)
    if name == "lm":
        model = TinyLM(vocab=50, d=32, heads=4, layers=2, ctx=16)
        data = torch.randint(0, 50, (steps, 4, 17), generator=g)
        return Case(name, model, [(d[:, :-1], d[:, 1:]) for d in data], _lm_loss)
    raise ValueError(f"unknown case {name!r}")


@dataclass
class Run:
    losses: list[float]
    first_grads: list[torch.Tensor]
    params: list[torch.Tensor]


def make_optimizer(name: str, params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, foreach=True)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.01, foreach=True)
    raise ValueError(f"unknown optimizer {name!r}")


def train(case: Case, device: str, compiled: bool, optimizer: str = "sgd", **compile_kwargs: object) -> Run:
    """Training on `device`; compiled: the model (fullgraph) and `opt.step` under torch.compile
    with the default backend."""
    model = copy.deepcopy(case.model).to(device)
    opt = make_optimizer(optimizer, model.parameters())
    forward = torch.compile(model, fullgraph=True, **compile_kwargs) if compiled else model
    step = torch.compile(opt.step, **compile_kwargs) if compiled else opt.step
    losses: list[float] = []
    first_grads: list[torch.Tensor] = []
    for x, y in case.batches:
        opt.zero_grad(set_to_none=True)
        loss = case.loss(forward(x.to(device)), y.to(device))
        loss.backward()
        if not first_grads:
            first_grads = [p.grad.detach().cpu().clone() for p in model.parameters()]
        step()
        losses.append(loss.item())
    return Run(losses, first_grads, [p.detach().cpu() for p in model.parameters()])
