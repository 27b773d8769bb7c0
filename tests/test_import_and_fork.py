"""Import paths (explicit import, torch's backend autoload, opting out) and fork safety."""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import subprocess
import sys

import foo_rs
import torch


def _py(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **env))


def test_import_twice_is_harmless():
    importlib.reload(foo_rs)
    assert torch.ones(1, device="foo").is_foo


def test_torch_autoloads_foo_rs():
    out = _py("import torch\nprint(torch.ones(2, device='foo').device, 'foo_rs' in __import__('sys').modules)\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["foo:0", "True"]


def test_autoload_opt_out():
    out = _py("import torch\ntorch.device('foo')\n", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert out.returncode != 0 and "foo" in out.stderr


def test_exit_right_after_backward_does_not_abort():
    # PyTorch's autograd device thread can release a finished GraphTask (holding a Python
    # object) after the interpreter started finalizing: std::terminate, exit status 134, about
    # every other run of this script without foo_rs's exit hook (foo_rs/_exit.py).
    code = (
        "import torch, foo_rs\n"
        "x = torch.randn(32, 16, 32, 32, device='foo', requires_grad=True)\n"
        "w = torch.randn(32, 16, 3, 3, device='foo', requires_grad=True)\n"
        "for _ in range(20):\n"
        "    torch.nn.functional.conv2d(x, w, padding=1).sum().backward()\n"
    )
    for _ in range(4):
        out = _py(code)
        assert out.returncode == 0, (out.returncode, out.stderr[-500:])


def _child(q):
    x = torch.full((2_000_000,), 3.0, device="foo")  # large: runs on the (rebuilt) thread pool
    q.put(((x * 2).cpu()[0].item(), torch.foo._is_in_bad_fork()))


def test_fork_after_parallel_work():
    y = torch.full((2_000_000,), 1.0, device="foo") * 2  # starts the parent's thread pool
    assert y.cpu()[0].item() == 2.0
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(timeout=60)
    assert p.exitcode == 0
    assert q.get(timeout=5) == (6.0, False)


class _Data(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        return (torch.full((100_000,), float(i), device="foo") + 1).cpu()[:2]


def test_dataloader_fork_workers():
    torch.full((1_000_000,), 1.0, device="foo").cpu()
    loader = torch.utils.data.DataLoader(_Data(), batch_size=2, num_workers=2,
                                         multiprocessing_context="fork")
    batches = [b for b in loader]
    assert torch.equal(torch.cat(batches), torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]))
