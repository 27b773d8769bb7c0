"""Optimizer foreach ops and the torch.optim foreach paths on foo parameters, compared with CPU."""

from __future__ import annotations

import foo_rs
import pytest
import torch
from helpers import FOO, assert_same, sample, to_foo

SHAPES = [(3, 4), (5,), (), (0, 2), (2, 3, 4)]


def tensors(dtype, seed=0, positive=False):
    lo = 0.5 if positive else -3
    return [sample(s, dtype, low=lo, high=3, seed=seed + i) for i, s in enumerate(SHAPES)]


def same_lists(foo, cpu, **tol):
    assert len(foo) == len(cpu)
    for f, c in zip(foo, cpu, strict=True):
        assert_same(f, c, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64])
def test_foreach_binary_and_scalar_ops(dtype):
    a, b = tensors(dtype), tensors(dtype, seed=10, positive=True)
    fa, fb = to_foo(a), to_foo(b)
    floats = dtype.is_floating_point
    cases = [
        lambda x, y: torch._foreach_add(x, y, alpha=2),
        lambda x, y: torch._foreach_add(x, 3),
        lambda x, y: torch._foreach_mul(x, y),
        lambda x, y: torch._foreach_mul(x, 2),
        lambda x, y: torch._foreach_neg(x),
    ]
    if floats:
        cases += [
            lambda x, y: torch._foreach_div(x, y),
            lambda x, y: torch._foreach_div(x, 0.5),
            lambda x, y: torch._foreach_sqrt(y),
        ]
    for fn in cases:
        same_lists(fn(fa, fb), fn(a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_foreach_inplace_ops(dtype):
    def run(xs, ys, zs, dev):
        xs = [x.clone() for x in xs]
        torch._foreach_add_(xs, ys, alpha=-0.5)
        torch._foreach_add_(xs, 1.25)
        torch._foreach_mul_(xs, 0.9)
        torch._foreach_mul_(xs, ys)
        torch._foreach_mul_(xs, [0.5 + i for i in range(len(xs))])
        torch._foreach_mul_(xs, torch.tensor(1.5, dtype=dtype, device=dev))
        torch._foreach_div_(xs, [2.0 + i for i in range(len(xs))])
        torch._foreach_div_(xs, 3.0)
        torch._foreach_div_(xs, zs)
        torch._foreach_addcmul_(xs, ys, zs, 0.3)
        torch._foreach_addcmul_(xs, ys, ys, [0.1 * i for i in range(len(xs))])
        torch._foreach_addcdiv_(xs, ys, zs, -0.2)
        torch._foreach_addcdiv_(xs, ys, zs, [0.1 * i for i in range(len(xs))])
        torch._foreach_lerp_(xs, ys, 0.3)
        torch._foreach_lerp_(xs, zs, 0.7)
        torch._foreach_lerp_(xs, ys, zs)
        torch._foreach_maximum_(xs, ys)
        torch._foreach_sqrt_(xs)
        torch._foreach_neg_(xs)
        return xs

    a, b, c = tensors(dtype), tensors(dtype, seed=10, positive=True), tensors(dtype, seed=20, positive=True)
    c = [t.clamp(max=1).to(dtype) for t in c]  # lerp weights in [0.5, 1]
    tol = {"atol": 5e-2, "rtol": 5e-2} if dtype == torch.bfloat16 else {}
    same_lists(run(to_foo(a), to_foo(b), to_foo(c), FOO), run(a, b, c, "cpu"), **tol)


def test_foreach_non_contiguous_and_zero():
    a = [sample((4, 6), torch.float32).t(), sample((3, 8), torch.float32)[:, ::2]]
    b = [sample((6, 4), torch.float32, seed=1), sample((3, 4), torch.float32, seed=2)]
    fa, fb = to_foo(a), to_foo(b)
    torch._foreach_add_(fa, fb, alpha=2)
    for t, u in zip(a, b, strict=True):
        t.add_(u, alpha=2)
    same_lists(fa, a)
    torch._foreach_zero_(fa)
    same_lists(fa, [torch.zeros_like(t) for t in a])
    ints = [torch.ones(3, dtype=torch.int32, device=FOO)]
    torch._foreach_zero_(ints)
    assert ints[0].cpu().tolist() == [0, 0, 0]


def test_foreach_errors():
    with pytest.raises(RuntimeError):
        torch._foreach_add_([torch.ones(2, device=FOO)], [torch.ones(2, device=FOO)] * 2)
    with pytest.raises(RuntimeError):
        torch._foreach_mul_([torch.ones(2, device=FOO)], [1.0, 2.0])


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def _optim_run(opt_fn, device, steps=3, zero_set_to_none=True):
    model = _model().to(device)
    params = list(model.parameters())
    opt = opt_fn(params)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        opt.zero_grad(set_to_none=zero_set_to_none)
        for p in params:
            grad = torch.randn(p.shape, generator=g)
            if p.grad is None:
                p.grad = grad.to(device)
            else:
                p.grad.copy_(grad.to(device))
        opt.step()
    return [p.detach() for p in params], opt


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, foreach=True),
    "sgd_momentum": lambda p: torch.optim.SGD(
        p, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01, foreach=True
    ),
    "sgd_nesterov": lambda p: torch.optim.SGD(
        p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=True
    ),
    "sgd_maximize": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5, maximize=True, foreach=True),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, foreach=True),
    "adam_wd_amsgrad": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1, amsgrad=True, foreach=True),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1, foreach=True),
    "adamw_amsgrad": lambda p: torch.optim.AdamW(p, lr=0.01, amsgrad=True, foreach=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("set_to_none", [True, False])
def test_optimizer_foreach_native(name, set_to_none):
    foo_rs.reset_op_counts()
    got, _ = _optim_run(OPTIMIZERS[name], FOO, zero_set_to_none=set_to_none)
    want, _ = _optim_run(OPTIMIZERS[name], "cpu", zero_set_to_none=set_to_none)
    same_lists(got, want)
    assert foo_rs.fallback_counts() == {}
    used = {k for k in foo_rs.native_counts() if "_foreach_" in k}
    assert used, "the foreach path was not taken"


@pytest.mark.fallback_ok  # _foreach_norm / stack / vector_norm belong to the reduce family
def test_clip_grad_norm_foreach():
    got_model, want_model = _model().to(FOO), _model()
    for m in (got_model, want_model):
        for i, p in enumerate(m.parameters()):
            p.grad = sample(p.shape, torch.float32, seed=i).to(p.device)
    n1 = torch.nn.utils.clip_grad_norm_(got_model.parameters(), 0.5, foreach=True)
    n2 = torch.nn.utils.clip_grad_norm_(want_model.parameters(), 0.5, foreach=True)
    assert_same(n1, n2)
    same_lists([p.grad for p in got_model.parameters()], [p.grad for p in want_model.parameters()])
