"""torch.optim's fused=True optimizers on foo (_fused_adam_, _fused_adamw_, _fused_sgd_,
_fused_adagrad_, native in kernels/optim.rs) against the CPU's fused kernels on the same inputs:
parameters and optimizer state after several steps, AMP's grad_scale/found_inf, argument errors."""

from __future__ import annotations

import copy

import foo_rs
import pytest
import torch

CASES = {
    "adam": (torch.optim.Adam, {"lr": 1e-2, "weight_decay": 0.1}),
    "adam_amsgrad_maximize": (torch.optim.Adam, {"lr": 1e-2, "amsgrad": True, "maximize": True}),
    "adamw": (torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.05}),
    "adamw_amsgrad_tensor_lr": (torch.optim.AdamW, {"lr": torch.tensor(3e-3), "amsgrad": True}),
    "adamw_beta1_small": (torch.optim.AdamW, {"lr": 1e-2, "betas": (0.3, 0.99)}),
    "sgd_momentum": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
    "sgd_nesterov": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    "sgd_plain": (torch.optim.SGD, {"lr": 0.1}),
    "adagrad": (torch.optim.Adagrad, {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1}),
}

TOL = {torch.float32: {}, torch.float64: {}, torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
       torch.float16: {"atol": 2e-3, "rtol": 2e-3}}


def _params(dtype: torch.dtype) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(0)
    shapes = [(70_000,), (33, 17), (5,), (1,)]
    ps = [torch.nn.Parameter(torch.randn(s, generator=g, dtype=torch.float64).to(dtype)) for s in shapes]
    # A non-contiguous leaf: the kernel computes in a contiguous copy written back.
    ps.append(torch.nn.Parameter(torch.randn(6, 4, generator=g, dtype=torch.float64).to(dtype).t()))
    return ps


def _grads(params: list[torch.Tensor], step: int, like_param: bool = True) -> list[torch.Tensor]:
    """Gradients with their parameter's strides, as autograd makes them (`like_param`)."""
    g = torch.Generator().manual_seed(100 + step)
    gs = [torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype) for p in params]
    return [torch.empty_like(p).copy_(x) if like_param else x for p, x in zip(params, gs)]


def _run(params: list[torch.nn.Parameter], device: str, opt_cls, kwargs, steps: int = 4, fused: bool = True,
         grads_like_param: bool = True):
    ps = [torch.nn.Parameter(p.detach().clone().to(device)) for p in params]
    kwargs = {k: (v.to(device) if isinstance(v, torch.Tensor) and device != "cpu" and k != "lr" else v)
              for k, v in copy.deepcopy(kwargs).items()}
    opt = opt_cls(ps, fused=fused, foreach=False if not fused else None, **kwargs)
    for step in range(steps):
        for p, g in zip(ps, _grads(params, step, grads_like_param)):
            p.grad = g.to(device)
        opt.step()
    return ps, opt


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", CASES)
def test_fused_step_matches_cpu_fused(case, dtype):
    opt_cls, kwargs = CASES[case]
    params = _params(dtype)
    name = {torch.optim.Adam: "_fused_adam_", torch.optim.AdamW: "_fused_adamw_", torch.optim.SGD: "_fused_sgd_",
            torch.optim.Adagrad: "_fused_adagrad_"}[opt_cls]
    if isinstance(kwargs.get("lr"), torch.Tensor):
        name += ".tensor_lr"
    before = foo_rs.native_counts().get(f"aten::{name}", 0)
    cpu_ps, cpu_opt = _run(params, "cpu", opt_cls, kwargs)
    foo_ps, foo_opt = _run(params, "foo", opt_cls, kwargs)
    assert foo_rs.native_counts().get(f"aten::{name}", 0) > before
    # The CPU's fused kernels are compiled with FMA contraction (gcc -ffp-contract=fast on its
    # AVX2/AVX-512 builds); foo's arithmetic is not contracted. Where the gradient cancels the
    # weight decay exactly in bfloat16 (3 of 70000 elements here: g = -0.1171875, p = 1.171875),
    # foo's g + p * wd is 0 and the CPU's fma leaves 1.7e-9, so Adagrad's first step moves the
    # CPU's element by lr and not foo's. Such elements must be rare and off by at most one
    # update per step.
    lr = float(kwargs["lr"])
    for i, (c, f) in enumerate(zip(cpu_ps, foo_ps)):
        assert f.device.type == "foo" and f.stride() == c.stride()
        f, c = f.detach().cpu(), c.detach()
        tol = TOL[dtype] or ({"rtol": 1.3e-6, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-7, "atol": 1e-7})
        off = ~torch.isclose(f, c, **tol)
        if dtype in (torch.float32, torch.float64):
            torch.testing.assert_close(f, c, **tol)
        elif off.any():
            assert off.sum() <= max(1, c.numel() // 10_000), f"param {i}: {off.sum()} elements differ"
            assert ((f - c)[off].abs().float() <= 4 * lr * 1.1).all(), f"param {i}"
    for c, f in zip(cpu_ps, foo_ps):
        for key, cv in cpu_opt.state[c].items():
            fv = foo_opt.state[f][key]
            assert fv.device.type == "foo"  # fused keeps even the step counts on the device
            torch.testing.assert_close(fv.cpu(), cv, **TOL[dtype], msg=f"state {key}")


@pytest.mark.parametrize("opt_cls", [torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD, torch.optim.Adagrad])
def test_fused_matches_foo_foreach(opt_cls):
    """The fused kernel and foo's default (foreach) path agree to rounding."""
    params = _params(torch.float32)
    kwargs = {"lr": 1e-2, "weight_decay": 0.01} | ({"momentum": 0.9} if opt_cls is torch.optim.SGD else {})
    fused, _ = _run(params, "foo", opt_cls, kwargs)
    ps = [torch.nn.Parameter(p.detach().clone().to("foo")) for p in params]
    opt = opt_cls(ps, foreach=True, **kwargs)
    for step in range(4):
        for p, g in zip(ps, _grads(params, step)):
            p.grad = g.to("foo")
        opt.step()
    for a, b in zip(fused, ps):
        torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), atol=1e-5, rtol=1e-5)


def test_gradient_strides_unlike_the_parameter():
    """A transposed parameter whose gradient is contiguous: foo's fused step pairs elements by
    index. (The CPU's fused kernels pair them by memory order, so there the update mixes
    elements; the reference here is the CPU's per-tensor path.)"""
    params = _params(torch.float32)
    for opt_cls, kwargs in (CASES["adamw"], CASES["sgd_momentum"], CASES["adagrad"]):
        want, _ = _run(params, "cpu", opt_cls, kwargs, fused=False, grads_like_param=False)
        got, _ = _run(params, "foo", opt_cls, kwargs, grads_like_param=False)
        for c, f in zip(want, got):
            torch.testing.assert_close(f.detach().cpu(), c.detach())


def _adam_lists(device: str):
    g = torch.Generator().manual_seed(3)
    p = [torch.randn(40, generator=g).to(device), torch.randn(3, 3, generator=g).to(device)]
    grads = [torch.randn(t.shape, generator=g).to(device) * 4 for t in p]
    m = [torch.zeros_like(t) for t in p]
    v = [torch.zeros_like(t) for t in p]
    steps = [torch.tensor(1.0, device=device) for _ in p]
    return p, grads, m, v, steps


@pytest.mark.parametrize("found", [0.0, 1.0])
def test_grad_scale_and_found_inf(found):
    results = {}
    for device in ("cpu", "foo"):
        p, grads, m, v, steps = _adam_lists(device)
        p0 = [t.clone() for t in p]
        torch._fused_adam_(p, grads, m, v, [], steps, lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0,
                           eps=1e-8, amsgrad=False, maximize=False,
                           grad_scale=torch.tensor(4.0, device=device), found_inf=torch.tensor(found, device=device))
        if found == 1.0:  # AMP found an inf: the whole step is skipped, gradients stay scaled
            assert all(torch.equal(a, b) for a, b in zip(p, p0))
        results[device] = [t.cpu() for t in p + grads + m + v]
    for c, f in zip(results["cpu"], results["foo"]):
        torch.testing.assert_close(f, c)


def test_errors_match_cpu_classes():
    for device in ("cpu", "foo"):
        p, grads, m, v, steps = _adam_lists(device)
        with pytest.raises(RuntimeError):
            torch._fused_adam_(p, grads[:1], m, v, [], steps, lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0,
                               eps=1e-8, amsgrad=False, maximize=False)
        ints = [torch.ones(3, dtype=torch.int64, device=device)]
        with pytest.raises(NotImplementedError):
            torch._fused_sgd_(ints, [torch.ones_like(ints[0])], [], weight_decay=0.0, momentum=0.0, lr=0.1,
                              dampening=0.0, nesterov=False, maximize=False, is_first_step=True)
    p, grads, m, v, steps = _adam_lists("foo")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch._fused_adam_(p, [grads[0], grads[1].cpu()], m, v, [], steps, lr=0.1, beta1=0.9, beta2=0.999,
                           weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    with pytest.raises(RuntimeError, match="dtype and shape"):
        torch._fused_adam_(p, [grads[0], grads[1].double()], m, v, [], steps, lr=0.1, beta1=0.9, beta2=0.999,
                           weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    torch.ones(2, device="foo").add_(1)  # the device stays usable


def test_efficientzerotensor_is_native_and_behaves_as_on_cpu():
    before = foo_rs.native_counts().get("aten::_efficientzerotensor", 0)
    z = torch._efficientzerotensor((2, 3), device="foo")
    assert foo_rs.native_counts()["aten::_efficientzerotensor"] == before + 1
    c = torch._efficientzerotensor((2, 3))
    assert z._is_zerotensor() and z.device.type == "foo" and z.shape == c.shape and z.dtype == c.dtype
    torch.testing.assert_close((z + 1).cpu(), c + 1)
    with pytest.raises(RuntimeError, match="ZeroTensors are immutable"):
        z.add_(1)
    with pytest.raises(RuntimeError, match="ZeroTensors are immutable"):
        c.add_(1)
