"""Determinism: every native kernel gives the same bits for 1, 2 and 8 threads and from run to run
(reductions have a fixed order, never the order threads finish in), and
`torch.use_deterministic_algorithms(True)` is honoured as on the CPU.

Each thread count runs in a child process (the pool size is read once) and prints a digest of
every result; the digests must agree."""

from __future__ import annotations

import hashlib

import pytest
import torch
from helpers import FOO, probe_digests

# Forward results and gradients of the kernels whose work is split across threads, at sizes that
# split (batches larger than the thread count, long reductions, large GEMMs).
PROBE = r"""
import hashlib, json, sys
import torch, foo_rs
import torch.nn.functional as F

foo_rs._C.set_strict(True)
out = {}

def digest(name, *ts):
    h = hashlib.sha256()
    for t in ts:
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    out[name] = h.hexdigest()

def leaf(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).to("foo").requires_grad_()

for dtype in (torch.float32, torch.bfloat16):
    tag = str(dtype).split(".")[-1]
    x, w, b = leaf(16, 8, 20, 20, dtype=dtype), leaf(12, 8, 3, 3, dtype=dtype, seed=1), leaf(12, dtype=dtype, seed=2)
    y = F.conv2d(x, w, b, padding=1)
    y.square().sum().backward()
    digest(f"conv2d/{tag}", y, x.grad, w.grad, b.grad)
    x, w = leaf(3, 8, 20, 20, dtype=dtype), leaf(12, 8, 5, 5, dtype=dtype, seed=1)
    y = F.conv2d(x, w, stride=2)
    y.square().sum().backward()
    digest(f"conv2d-small-batch/{tag}", y, x.grad, w.grad)
    cl = torch.channels_last  # the padded grid (narrow and strided) and the GEMM weight gradient
    for c, stride in ((3, 1), (24, 2)):
        x = leaf(20, c, 18, 18, dtype=dtype).detach().contiguous(memory_format=cl).requires_grad_()
        w = leaf(40, c, 3, 3, dtype=dtype, seed=1).detach().contiguous(memory_format=cl).requires_grad_()
        y = F.conv2d(x, w, stride=stride, padding=1)
        y.square().sum().backward()
        digest(f"conv2d-channels-last-{c}/{tag}", y, x.grad, w.grad)
    # 32 -> 16 channels, channels-last: every pixel times the nine taps, then gathered
    # (`conv/tap_rows.rs`, the forward; a sample per unit).
    x = leaf(20, 32, 11, 13, dtype=dtype).detach().contiguous(memory_format=cl).requires_grad_()
    w = leaf(16, 32, 3, 3, dtype=dtype, seed=1).detach().contiguous(memory_format=cl).requires_grad_()
    y = F.conv2d(x, w, padding=1)
    y.square().sum().backward()
    digest(f"conv2d-channels-last-32-to-16/{tag}", y, x.grad, w.grad)
    # Winograd F(2x2, 3x3): 96+ channels, 64+ tiles (forward and input gradient).
    x, w = leaf(8, 96, 7, 9, dtype=dtype), leaf(112, 96, 3, 3, dtype=dtype, seed=1)
    y = F.conv2d(x, w, padding=1)
    y.square().sum().backward()
    digest(f"conv2d-winograd/{tag}", y, x.grad, w.grad)
    x, w = leaf(512, 96, dtype=dtype), leaf(80, 96, dtype=dtype, seed=1)
    y = F.linear(x, w)
    y.square().sum().backward()
    digest(f"linear/{tag}", y, x.grad, w.grad)
    x, w = leaf(5, 300, dtype=dtype), leaf(4000, 300, dtype=dtype, seed=1)  # a few rows: gemm::skinny
    digest(f"linear-few-rows/{tag}", F.linear(x, w))
    # Many rows, depth over 512, the bias in the kernel (gemm::linear), 7 panels over 8 threads.
    x, w, b = leaf(256, 700, dtype=dtype), leaf(200, 700, dtype=dtype, seed=1), leaf(200, dtype=dtype, seed=2)
    digest(f"linear-bias-deep/{tag}", F.linear(x, w, b), F.linear(x[:, :300], w[:, :300]))

x = leaf(4096, 37)
digest("sum", x.sum(), x.sum(0), x.sum(1), x.mean(), x.var(0), x.std(1), x.norm(), x.prod(1), x.cumsum(0))
digest("logsumexp", x.logsumexp(0), x.logsumexp(1), x.amax(0), x.argmax(1))
x = leaf(100003, 8)  # short dense rows, folded 32 rows per run (reduce::ops::sum_short_rows)
digest("sum-short-rows", x.sum(0), x.mean(0), x.view(100003, 2, 4).sum((0, 1)))
digest("softmax", F.softmax(x, 0), F.log_softmax(x, 1))
x, w, b = leaf(64, 300), leaf(300, seed=1), leaf(300, seed=2)
y = F.layer_norm(x, (300,), w, b)
y.square().sum().backward()
digest("layer_norm", y, x.grad, w.grad, b.grad)
x, w, b = leaf(32, 16, 9, 9), leaf(16, seed=1), leaf(16, seed=2)
y = F.batch_norm(x, None, None, w, b, training=True)
y.square().sum().backward()
digest("batch_norm", y, x.grad, w.grad, b.grad)
x, w, b = leaf(32, 16, 9, 9), leaf(16, seed=1), leaf(16, seed=2)
y = F.group_norm(x, 4, w, b)
y.square().sum().backward()
digest("group_norm", y, x.grad, w.grad, b.grad)
emb = leaf(50, 16)
idx = torch.randint(0, 50, (4000,), generator=torch.Generator().manual_seed(3)).to("foo")
F.embedding(idx, emb).square().sum().backward()
digest("embedding", emb.grad)
src = leaf(4000, 16).detach()
digest("index_add", torch.zeros(50, 16, device="foo").index_add_(0, idx, src))
digest("scatter_add", torch.zeros(50, 16, device="foo").scatter_add_(0, idx[:, None].expand(4000, 16), src))
logits, target = leaf(2048, 10), torch.randint(0, 10, (2048,), generator=torch.Generator().manual_seed(4)).to("foo")
loss = F.cross_entropy(logits, target)
loss.backward()
digest("cross_entropy", loss, logits.grad)
a, c = leaf(300, 200), leaf(200, 100, seed=1)
digest("mm", a @ c, torch.bmm(a.view(3, 100, 200), c.expand(3, 200, 100)))
# Depth over 512 (gemm's cache blocking sums it in pieces), with threads' blocks of 64 x 64 or less
# (gemm blocks those differently from larger outputs) and a 2-D grid of blocks (8 threads).
a, c = leaf(64, 600), leaf(600, 130, seed=1)
digest("mm-deep-narrow", a @ c)
a, c = leaf(128, 1000), leaf(1000, 128, seed=1)
digest("mm-deep-grid", a @ c, torch.addmm(c[:128, :1].detach(), a, c))
print("DIGESTS" + json.dumps(out))
"""


def _digests(threads: int) -> dict[str, str]:
    return probe_digests(PROBE, threads)


@pytest.mark.slow
def test_same_bits_for_1_2_and_8_threads_and_across_runs() -> None:
    runs = {t: _digests(t) for t in (1, 2, 8)}
    again = _digests(2)
    for name, d in runs[1].items():
        by_threads = {t: runs[t][name] for t in runs}
        assert len(set(by_threads.values())) == 1, f"{name}: results depend on the thread count: {by_threads}"
        assert again[name] == d, f"{name}: two runs with 2 threads differ"


@pytest.fixture
def deterministic():
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)


def test_deterministic_mode_fills_uninitialized_memory(deterministic: None) -> None:
    # As the CPU: with deterministic algorithms on, new uninitialized memory is filled with NaN
    # (floats) or the largest value (integers), so reading it is reproducible.
    assert torch.utils.deterministic.fill_uninitialized_memory
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.uint8):
        for make in (lambda d, t=dtype: torch.empty(5, dtype=t, device=d),
                     lambda d, t=dtype: torch.empty_strided((2, 3), (1, 2), dtype=t, device=d)):
            got, want = make(FOO).cpu(), make("cpu")
            torch.testing.assert_close(got, want, equal_nan=True, atol=0, rtol=0)
        t, u = torch.ones(2, dtype=dtype, device=FOO), torch.ones(2, dtype=dtype)
        t.resize_(6)
        u.resize_(6)
        torch.testing.assert_close(t.cpu(), u, equal_nan=True, atol=0, rtol=0)


def test_deterministic_mode_gives_the_same_bits(deterministic: None) -> None:
    torch.manual_seed(0)
    x, w = torch.randn(8, 4, 10, 10, device=FOO), torch.randn(6, 4, 3, 3, device=FOO, requires_grad=True)
    grads = []
    for _ in range(3):
        w.grad = None
        torch.nn.functional.conv2d(x, w).square().sum().backward()
        grads.append(hashlib.sha256(w.grad.cpu().numpy().tobytes()).hexdigest())
    assert len(set(grads)) == 1
