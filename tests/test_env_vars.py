"""Environment variables with nonsense values: a clear message or a documented clamp, never a hang,
a crash or an exhausted machine. Each case runs in a child process (the settings are read once)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import warnings
warnings.simplefilter("always")
import torch, foo_rs
a = torch.randn(64, 64, device="foo")
assert torch.allclose((a @ a).cpu(), a.cpu() @ a.cpu(), atol=1e-4)
print("torch", torch.get_num_threads(), "threads", foo_rs._C.num_threads())
"""


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    unset = ("FOO_RS_NUM_THREADS", "RAYON_NUM_THREADS", "OMP_NUM_THREADS")
    full = {k: v for k, v in os.environ.items() if k not in unset}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=full)


def _threads(out: subprocess.CompletedProcess[str]) -> int:
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split("threads")[-1])


@pytest.mark.parametrize("value", ["99999999999", "20000", "340282366920938463463374607431768211456"])
def test_huge_thread_count_is_clamped_with_a_warning(value):
    # 20000 threads once never returned from a 64x64 matmul.
    out = _run(PROBE, FOO_RS_NUM_THREADS=value)
    cap = _threads(out)
    assert cap == 4 * max(os.cpu_count() or 1, 4)
    assert f"FOO_RS_NUM_THREADS={value} is more threads than this machine can use; using {cap}" in out.stderr


@pytest.mark.parametrize("value", ["abc", "0", "-3", "2.5"])
def test_nonsense_thread_count_is_ignored_with_a_warning(value):
    out = _run(PROBE, FOO_RS_NUM_THREADS=value)
    # Ignored: foo follows PyTorch's thread count.
    assert _threads(out) == int(out.stdout.split()[1])
    assert f'FOO_RS_NUM_THREADS="{value}" is not a thread count' in out.stderr


def test_valid_thread_counts_are_taken_silently():
    out = _run(PROBE, FOO_RS_NUM_THREADS=" 3 ")
    assert _threads(out) == 3 and "RuntimeWarning" not in out.stderr
    # RAYON_NUM_THREADS is the fallback; a bad FOO_RS_NUM_THREADS does not hide it.
    out = _run(PROBE, FOO_RS_NUM_THREADS="x", RAYON_NUM_THREADS="1")
    assert _threads(out) == 1 and "is not a thread count" in out.stderr


FOLLOW = """
import torch, foo_rs
a = torch.randn(256, 256, device="foo")
def threads_after_an_op():
    (a @ a).sum().item()  # a parallel op: the pool is resized when it next runs
    return foo_rs._C.num_threads()
seen = [torch.get_num_threads(), threads_after_an_op()]
torch.set_num_threads(1)
seen += [threads_after_an_op()]
torch.set_num_threads(3)
seen += [threads_after_an_op()]
b = torch.randn(1000, 1000, device="foo")
assert torch.allclose((b @ b).cpu(), b.cpu() @ b.cpu(), atol=1e-3)
print("seen", *seen)
"""


def _seen(out: subprocess.CompletedProcess[str]) -> list[int]:
    assert out.returncode == 0, out.stderr[-2000:]
    return [int(x) for x in out.stdout.split("seen")[-1].split()]


def test_threads_follow_torch_set_num_threads():
    torch_default, *foo = _seen(_run(FOLLOW))
    assert foo == [torch_default, 1, 3]


def test_threads_follow_omp_num_threads_as_torchrun_sets_it():
    # torchrun sets OMP_NUM_THREADS=1 for several ranks per machine: foo must not run every core
    # in each rank.
    assert _seen(_run(FOLLOW, OMP_NUM_THREADS="1")) == [1, 1, 1, 3]


def test_foo_rs_num_threads_overrides_torch():
    assert _seen(_run(FOLLOW, FOO_RS_NUM_THREADS="2", OMP_NUM_THREADS="1")) == [1, 2, 2, 2]


@pytest.mark.parametrize("value", ["-1G", "2X", "lots", "nan", "inf"])
def test_nonsense_memory_limit_is_a_value_error(value):
    code = """
import torch, foo_rs
try:
    torch.ones(10, device="foo")
except ValueError as e:
    print("ValueError", e)
torch.ones(1)  # the process stays usable
"""
    out = _run(code, FOO_RS_MEMORY_LIMIT=value)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f'ValueError foo allocate: FOO_RS_MEMORY_LIMIT: "{value}" is not a byte size' in out.stdout


@pytest.mark.parametrize("value", ["0", "1e30", "99999999999999999999T", "18446744073709551615"])
def test_zero_or_unreachable_memory_limit_means_no_limit(value):
    out = _run("import torch, foo_rs\nprint(torch.ones(1 << 20, device='foo').sum().item())\n",
               FOO_RS_MEMORY_LIMIT=value)
    assert out.returncode == 0 and out.stdout.strip() == str(float(1 << 20)), out.stderr[-2000:]


@pytest.mark.parametrize("value", ["-1", "65", "99999999999", "x", "2.0"])
def test_nonsense_device_count_is_a_value_error(value):
    code = """
import torch, foo_rs
try:
    torch.ones(1, device="foo")
except ValueError as e:
    print("ValueError", e)
"""
    out = _run(code, FOO_RS_DEVICE_COUNT=value)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ValueError ")
    assert f'FOO_RS_DEVICE_COUNT: "{value}" is not a device count' in out.stdout
