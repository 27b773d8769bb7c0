"""GradScaler on foo: the native _amp_foreach_non_finite_check_and_unscale_ / _amp_update_scale_
kernels against CPU's, and torch.amp.GradScaler("foo") skipping steps with inf/NaN gradients
exactly like CUDA's (params untouched, scale backed off)."""

from __future__ import annotations

import copy

import pytest
import torch
from helpers import FOO, to_foo
from torch import nn

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _grads(dtype: torch.dtype, bad: float | None = None) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    gs = [
        torch.randn(7, 5, generator=g).to(dtype) * 1024,
        (torch.randn(6, 4, generator=g).to(dtype) * 1024).t(),  # transposed
        (torch.randn(40, generator=g).to(dtype) * 1024)[::3],  # strided
        torch.randn(0, 3).to(dtype),  # zero-size
        torch.randn(70_000, generator=g).to(dtype) * 1024,  # large: parallel path
    ]
    if bad is not None:
        gs[2][4] = bad
    return gs


def _unscale(grads: list[torch.Tensor], inv: float, device: torch.device | str) -> tuple[list[torch.Tensor], float]:
    found = torch.zeros(1, device=device)
    inv_t = torch.full((1,), inv, device=device)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv_t)
    return grads, found.item()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("bad", [None, float("inf"), float("-inf"), float("nan")])
def test_unscale_matches_cpu(dtype, bad):
    cpu = _grads(dtype, bad)
    foo = to_foo(cpu)
    cpu, cpu_found = _unscale(cpu, 1 / 1024, "cpu")
    foo, foo_found = _unscale(foo, 1 / 1024, FOO)
    assert foo_found == cpu_found == (0.0 if bad is None else 1.0)
    for f, c in zip(foo, cpu):
        assert f.device.type == "foo" and f.dtype == c.dtype and f.stride() == c.stride()
        torch.testing.assert_close(f.cpu(), c, rtol=0, atol=0, equal_nan=True)


def test_unscale_keeps_found_inf_and_skips_when_inv_is_one():
    grads = to_foo(_grads(torch.float32))
    before = [g.cpu() for g in grads]
    found = torch.ones(1, device=FOO)  # pre-set by an earlier group: left at 1
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.ones(1, device=FOO))
    assert found.item() == 1.0
    for g, b in zip(grads, before):
        torch.testing.assert_close(g.cpu(), b, rtol=0, atol=0)
    torch._amp_foreach_non_finite_check_and_unscale_([], found, torch.ones(1, device=FOO))  # no-op


def test_unscale_bad_arguments():
    g = [torch.ones(3, device=FOO)]
    found, inv = torch.zeros(1, device=FOO), torch.ones(1, device=FOO)
    with pytest.raises(RuntimeError, match="inv_scale must be a float tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(g, found, inv.double())
    with pytest.raises(RuntimeError, match="found_inf must be a 1-element tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(g, torch.zeros(2, device=FOO), inv)
    with pytest.raises(RuntimeError, match="floating-point gradients only"):
        torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(3, dtype=torch.int32, device=FOO)], found, inv)
    # As on CUDA: the dispatcher-level device check rejects a CPU inv_scale first.
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch._amp_foreach_non_finite_check_and_unscale_(g, found, torch.ones(1))


def test_update_scale_matches_cpu():
    results = {}
    for dev in ["cpu", FOO]:
        scale = torch.full((1,), 65536.0, device=dev)
        tracker = torch.zeros(1, dtype=torch.int32, device=dev)
        seen = []
        for found in [0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0]:
            torch._amp_update_scale_(scale, tracker, torch.full((1,), float(found), device=dev), 2.0, 0.5, 3)
            seen.append((scale.item(), tracker.item()))
        results[str(dev)] = seen
    assert results["foo"] == results["cpu"]
    # Growth stops short of inf.
    scale = torch.full((1,), 3e38, device=FOO)
    tracker = torch.zeros(1, dtype=torch.int32, device=FOO)
    torch._amp_update_scale_(scale, tracker, torch.zeros(1, device=FOO), 2.0, 0.5, 1)
    assert scale.item() == pytest.approx(3e38) and tracker.item() == 0


def test_update_scale_bad_arguments():
    scale, found = torch.ones(1, device=FOO), torch.zeros(1, device=FOO)
    with pytest.raises(RuntimeError, match="growth_tracker must be an int tensor"):
        torch._amp_update_scale_(scale, torch.zeros(1, device=FOO), found, 2.0, 0.5, 3)
    with pytest.raises(RuntimeError, match="current_scale must be a float tensor"):
        torch._amp_update_scale_(scale.double(), torch.zeros(1, dtype=torch.int32, device=FOO), found, 2.0, 0.5, 3)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _step(model: nn.Module, opt: torch.optim.Optimizer, scaler: torch.amp.GradScaler, x: torch.Tensor,
          y: torch.Tensor, inject: float | None = None) -> None:
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    if inject is not None:
        model[0].weight.grad[0, 0] = inject
    scaler.step(opt)
    scaler.update()


@pytest.mark.parametrize("inject", [float("inf"), float("nan")])
def test_grad_scaler_skips_step_with_non_finite_grads(inject):
    model = _model().to(FOO)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("foo", init_scale=2.0**16, growth_interval=2)
    x, y = torch.randn(5, 8).to(FOO), torch.tensor([0, 1, 2, 3, 0]).to(FOO)
    _step(model, opt, scaler, x, y)  # a clean step: params move, tracker 1
    assert scaler.get_scale() == 2.0**16 and scaler._growth_tracker.item() == 1
    before = [p.detach().cpu().clone() for p in model.parameters()]
    _step(model, opt, scaler, x, y, inject=inject)
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p.detach().cpu(), b), "the step with a non-finite gradient was not skipped"
    assert scaler.get_scale() == 2.0**15 and scaler._growth_tracker.item() == 0
    _step(model, opt, scaler, x, y)
    _step(model, opt, scaler, x, y)  # two clean steps: the scale grows back
    assert scaler.get_scale() == 2.0**16
    assert not all(torch.equal(p.detach().cpu(), b) for p, b in zip(model.parameters(), before))


def test_grad_scaler_training_matches_cpu():
    base = _model()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(5, 8, generator=g), torch.randint(0, 4, (5,), generator=g)) for _ in range(8)]
    out = {}
    for dev in ["cpu", "foo"]:
        model = copy.deepcopy(base).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
        scaler = torch.amp.GradScaler(dev, init_scale=2.0**10, growth_interval=3)
        scales = []
        for i, (x, y) in enumerate(batches):
            _step(model, opt, scaler, x.to(dev), y.to(dev), inject=float("inf") if i == 4 else None)
            scales.append(scaler.get_scale())
        out[dev] = ([p.detach().cpu() for p in model.parameters()], scales)
    assert out["foo"][1] == out["cpu"][1]
    for f, c in zip(out["foo"][0], out["cpu"][0]):
        torch.testing.assert_close(f, c, atol=1e-5, rtol=1e-5)


def test_grad_scaler_unscale_matches_cpu():
    base = _model()
    x, y = torch.randn(5, 8), torch.tensor([0, 1, 2, 3, 0])
    grads = {}
    for dev in ["cpu", "foo"]:
        model = copy.deepcopy(base).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(dev, init_scale=512.0)
        scaler.scale(nn.functional.cross_entropy(model(x.to(dev)), y.to(dev))).backward()
        scaler.unscale_(opt)
        grads[dev] = [p.grad.cpu() for p in model.parameters()]
    for f, c in zip(grads["foo"], grads["cpu"]):
        torch.testing.assert_close(f, c, atol=1e-6, rtol=1e-5)
