"""Device RNG: Philox in Rust, reproducible, thread-count independent, wired to torch's seeding."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from scipy import stats


def test_same_seed_same_stream_different_seed_different():
    torch.manual_seed(123)
    a = torch.rand(1000, device="foo")
    b = torch.randn(50, device="foo")
    torch.manual_seed(123)
    assert torch.equal(torch.rand(1000, device="foo").cpu(), a.cpu())
    assert torch.equal(torch.randn(50, device="foo").cpu(), b.cpu())
    torch.manual_seed(124)
    assert not torch.equal(torch.rand(1000, device="foo").cpu(), a.cpu())


def test_state_round_trip_and_offset_advance():
    torch.foo.manual_seed(5)
    state = torch.foo.get_rng_state()
    x = torch.rand(10, device="foo")
    y = torch.rand(10, device="foo")
    assert not torch.equal(x.cpu(), y.cpu())  # the offset advanced
    torch.foo.set_rng_state(state)
    assert torch.equal(torch.rand(10, device="foo").cpu(), x.cpu())


def test_explicit_generators():
    g = torch.Generator(device="foo").manual_seed(9)
    a = torch.rand(100, device="foo", generator=g)
    g2 = torch.Generator(device="foo")
    g2.set_state(torch.Generator(device="foo").manual_seed(9).get_state())
    assert torch.equal(torch.rand(100, device="foo", generator=g2).cpu(), a.cpu())
    # The default generator is untouched by explicit ones.
    torch.foo.manual_seed(1)
    d1 = torch.rand(5, device="foo")
    torch.foo.manual_seed(1)
    torch.rand(5, device="foo", generator=g)
    assert torch.equal(torch.rand(5, device="foo").cpu(), d1.cpu())
    with pytest.raises(RuntimeError, match="device type"):
        torch.rand(3, device="foo", generator=torch.Generator())
    c = g.clone_state() if hasattr(g, "clone_state") else None
    if c is not None:
        assert torch.equal(c.get_state(), g.get_state())


def test_per_device_generators_are_independent():
    torch.manual_seed(3)
    a = torch.rand(20, device="foo:0")
    b = torch.rand(20, device="foo:1")
    assert torch.equal(a.cpu(), b.cpu())  # same seed, same offset, same stream
    assert torch.foo.get_rng_state(0).tolist() == torch.foo.get_rng_state(1).tolist()


def _digest(threads: str) -> str:
    code = ("import torch, foo_rs, hashlib\n"
            "torch.manual_seed(42)\n"
            "x = torch.cat([torch.rand(1_000_003, device='foo').cpu(), torch.randn(300_001, device='foo').cpu(),"
            " torch.nn.functional.dropout(torch.ones(500_000, device='foo'), 0.3).cpu()])\n"
            "print(hashlib.sha256(x.numpy().tobytes()).hexdigest())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                         env=dict(os.environ, FOO_RS_NUM_THREADS=threads))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_results_identical_with_one_or_two_threads():
    assert _digest("1") == _digest("2")


def _ks(foo_sample: torch.Tensor, cpu_sample: torch.Tensor) -> float:
    return stats.ks_2samp(foo_sample.cpu().double().numpy(), cpu_sample.double().numpy()).pvalue


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_uniform_and_normal_distributions(dtype):
    torch.manual_seed(0)
    n = 200_000
    u = torch.empty(n, device="foo", dtype=dtype).uniform_(-2, 3)
    assert u.min().item() >= -2 and u.max().item() < 3
    z = torch.empty(n, device="foo", dtype=dtype).normal_(1.5, 2.0)
    assert abs(z.double().mean().item() - 1.5) < 0.03 and abs(z.double().std().item() - 2.0) < 0.03
    assert _ks(u, torch.empty(n, dtype=dtype).uniform_(-2, 3)) > 1e-3
    assert _ks(z, torch.empty(n, dtype=dtype).normal_(1.5, 2.0)) > 1e-3


def test_other_distributions_match_cpu_ks():
    torch.manual_seed(1)
    n = 100_000
    for fill in [lambda t: t.exponential_(2.0), lambda t: t.geometric_(0.3), lambda t: t.log_normal_(0.5, 0.4),
                 lambda t: t.cauchy_(1.0, 0.5)]:
        f = fill(torch.empty(n, device="foo"))
        c = fill(torch.empty(n))
        if fill is not None:
            assert _ks(f.clamp(-50, 50), c.clamp(-50, 50)) > 1e-3


def test_bernoulli_randint_random_randperm():
    torch.manual_seed(2)
    b = torch.empty(100_000, device="foo").bernoulli_(0.3)
    assert abs(b.mean().item() - 0.3) < 0.01 and ((b == 0) | (b == 1)).all().item()
    p = torch.rand(50_000, device="foo")
    bt = torch.bernoulli(p)
    assert abs(bt.mean().item() - p.mean().item()) < 0.01
    r = torch.randint(-5, 7, (100_000,), device="foo")
    assert r.dtype == torch.int64 and r.min().item() == -5 and r.max().item() == 6
    counts = torch.bincount((r + 5).cpu(), minlength=12)
    assert counts.min().item() > 100_000 / 12 * 0.9
    u8 = torch.empty(10_000, dtype=torch.uint8, device="foo").random_()
    assert u8.max().item() > 250
    f = torch.empty(10_000, device="foo").random_()
    assert f.min().item() >= 0 and f.max().item() <= 2**24 and torch.equal(f, f.round())
    perm = torch.randperm(1000, device="foo")
    assert perm.dtype == torch.int64 and torch.equal(perm.sort().values.cpu(), torch.arange(1000))
    assert not torch.equal(perm.cpu(), torch.arange(1000))
    with pytest.raises(RuntimeError, match="from"):
        torch.empty(3, device="foo").random_(5, 2)


def test_multinomial():
    torch.manual_seed(7)
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]])
    draws = torch.multinomial(p.to("foo"), 20_000, replacement=True)
    assert draws.shape == (2, 20_000) and draws.dtype == torch.int64
    freq = torch.stack([torch.bincount(r, minlength=4) for r in draws.cpu()]).double() / 20_000
    torch.testing.assert_close(freq, p.double() / p.double().sum(1, keepdim=True), atol=0.015, rtol=0)
    no_rep = torch.multinomial(p.to("foo"), 3, replacement=False).cpu()
    assert all(len(set(r.tolist())) == 3 for r in no_rep)
    assert 1 not in no_rep[0].tolist() and 2 not in no_rep[1].tolist()  # zero weights never drawn
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(p.to("foo"), 5)
    with pytest.raises(RuntimeError, match="element < 0"):
        torch.multinomial(torch.tensor([1.0, -1.0], device="foo"), 1)


def test_trunc_normal_init():
    torch.manual_seed(8)
    w = torch.empty(10_000, device="foo")
    torch.nn.init.trunc_normal_(w, mean=0.0, std=1.0, a=-2.0, b=2.0)
    assert w.min().item() >= -2.0 and w.max().item() <= 2.0
    assert abs(w.mean().item()) < 0.05


def test_dropout_forward_backward_masks_agree():
    torch.manual_seed(3)
    x = torch.randn(1000, 50, device="foo", requires_grad=True)
    y = torch.nn.functional.dropout(x, p=0.4, training=True)
    y.backward(torch.ones_like(y))
    kept = y.detach() != 0
    assert abs(kept.float().mean().item() - 0.6) < 0.01
    scale = 1 / 0.6
    torch.testing.assert_close(y.detach()[kept].cpu(), (x.detach()[kept] * scale).cpu())
    torch.testing.assert_close(x.grad.cpu(), (kept.float() * scale).cpu())
    assert torch.equal(torch.nn.functional.dropout(x, 0.4, training=False).detach().cpu(), x.detach().cpu())


def test_nn_init_functions():
    torch.manual_seed(4)
    w = torch.empty(256, 128, device="foo")
    torch.nn.init.kaiming_uniform_(w, a=5 ** 0.5)
    bound = (6 / ((1 + 5) * 128)) ** 0.5
    assert w.abs().max().item() <= bound
    torch.nn.init.xavier_normal_(w)
    assert abs(w.std().item() - (2 / (256 + 128)) ** 0.5) < 0.01
    torch.nn.init.uniform_(w, -0.1, 0.1)
    torch.nn.init.normal_(w, 0, 0.02)
    torch.nn.init.zeros_(w)
    assert w.abs().sum().item() == 0
    lin = torch.nn.Linear(10, 5, device="foo")  # reset_parameters on foo
    assert lin.weight.is_foo


def test_fork_rng_device_type_restores_stream():
    torch.manual_seed(6)
    with torch.random.fork_rng(device_type="foo", devices=[0]):
        torch.rand(100, device="foo")
    a = torch.rand(10, device="foo")
    torch.manual_seed(6)
    assert torch.equal(torch.rand(10, device="foo").cpu(), a.cpu())


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_recomputes_the_same_dropout_mask(use_reentrant):
    # Activation checkpointing re-runs the forward in the backward; it restores the device's RNG
    # state first (only for a device module that reports itself initialized), so the recomputed
    # dropout must draw the mask of the forward, and the gradient is zero exactly where it is.
    x = torch.ones(1000, device="foo", requires_grad=True)
    torch.manual_seed(0)
    y = torch.utils.checkpoint.checkpoint(
        lambda t: torch.nn.functional.dropout(t, 0.5) * t, x, use_reentrant=use_reentrant
    )
    y.sum().backward()
    kept = y.detach() != 0
    assert 300 < int(kept.sum()) < 700
    assert torch.equal(kept, x.grad != 0)
    torch.testing.assert_close(x.grad[kept], torch.full_like(x.grad[kept], 4.0))
