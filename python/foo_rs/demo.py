"""The demo: the same MLP, same initial weights and same batches, trained on scikit-learn's
digits on the foo device and on the CPU; prints both loss curves and test accuracies."""

from __future__ import annotations

import time

import torch
from torch import nn

from . import _C
from ._accounting import fallback_counts, native_counts, reset_op_counts


def _data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(x), generator=g)
    x, y = x[perm], y[perm]
    n_train = int(0.8 * len(x))
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def _train(device: str, epochs: int, data: tuple[torch.Tensor, ...]) -> tuple[list[float], float, float]:
    x_train, y_train, x_test, y_test = (t.to(device) for t in data)
    model = _model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    batch = 64
    order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(1))
    losses: list[float] = []
    start = time.perf_counter()
    for epoch in range(epochs):
        total = 0.0
        for i in range(0, len(order), batch):
            idx = order[i : i + batch].to(device)
            opt.zero_grad()
            loss = loss_fn(model(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        losses.append(total / len(order))
        print(f"  [{device}] epoch {epoch + 1}/{epochs}: loss {losses[-1]:.4f}")
    elapsed = time.perf_counter() - start
    with torch.no_grad():
        acc = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
    return losses, acc, elapsed


def run(epochs: int = 8, strict: bool = False) -> None:
    if strict:
        _C.set_strict(True)
    data = _data()
    print(f"digits: {len(data[0])} train / {len(data[2])} test images, 8x8 pixels, 10 classes; MLP 64-128-64-10, SGD")
    reset_op_counts()
    foo_losses, foo_acc, foo_time = _train("foo", epochs, data)
    ran, fell = native_counts(), fallback_counts()
    cpu_losses, cpu_acc, cpu_time = _train("cpu", epochs, data)
    gap = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(foo_losses, cpu_losses))
    print(f"test accuracy: foo {foo_acc:.4f} | cpu {cpu_acc:.4f}")
    print(f"final loss:    foo {foo_losses[-1]:.5f} | cpu {cpu_losses[-1]:.5f} (largest relative gap {gap:.2e})")
    print(f"train time:    foo {foo_time:.2f}s | cpu {cpu_time:.2f}s (threads: foo {_C.num_threads()}, "
          f"cpu {torch.get_num_threads()})")
    print(f"foo ops: {sum(ran.values())} native calls over {len(ran)} ops; "
          f"{sum(fell.values())} CPU-fallback calls over {len(fell)} ops")
    for name, n in sorted(fell.items(), key=lambda kv: -kv[1]):
        print(f"  fallback {name}: {n}")
