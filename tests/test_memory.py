"""Rust-owned device memory: statistics, caching, limits, out-of-memory, leaks, pinned memory."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import foo_rs
import pytest
import torch


def test_allocated_returns_to_baseline_and_rounds_to_size_classes():
    base = torch.foo.memory_allocated()
    x = torch.empty(1000, dtype=torch.float32, device="foo")  # 4000 bytes -> 4096 (512-byte classes)
    assert torch.foo.memory_allocated() - base == 4096
    assert torch.foo.memory_stats()["requested_bytes.all.current"] >= 4000
    del x
    assert torch.foo.memory_allocated() == base


def test_per_device_statistics():
    b0, b1 = torch.foo.memory_allocated(0), torch.foo.memory_allocated(1)
    y = torch.empty(10_000, device="foo:1")
    assert torch.foo.memory_allocated(1) > b1 and torch.foo.memory_allocated(0) == b0
    assert torch.foo.memory_allocated("foo:1") == torch.foo.memory_allocated(torch.device("foo:1"))
    del y


def test_cache_reuse_peak_and_empty_cache():
    torch.foo.empty_cache()
    torch.foo.reset_peak_memory_stats()
    base_alloc, base_res = torch.foo.memory_allocated(), torch.foo.memory_reserved()
    x = torch.empty(1 << 20, device="foo")  # 4 MiB, large pool
    peak = torch.foo.max_memory_allocated()
    assert peak >= base_alloc + (4 << 20)
    del x
    assert torch.foo.memory_allocated() == base_alloc
    assert torch.foo.memory_reserved() >= base_res + (4 << 20)  # kept in the cache
    allocs = torch.foo.memory_stats()["num_device_alloc"]
    y = torch.empty(1 << 20, device="foo")  # served from the cache
    assert torch.foo.memory_stats()["num_device_alloc"] == allocs
    del y
    assert torch.foo.max_memory_allocated() == peak
    torch.foo.empty_cache()
    assert torch.foo.memory_reserved() == base_res
    torch.foo.reset_peak_memory_stats()
    assert torch.foo.max_memory_allocated() == torch.foo.memory_allocated()
    stats = torch.foo.memory_stats()
    for key in ["allocated_bytes.all.current", "reserved_bytes.large_pool.peak", "active.small_pool.current",
                "segment.all.freed", "num_alloc_retries", "num_ooms"]:
        assert key in stats


def test_ten_thousand_mixed_allocations_leak_nothing():
    gc.collect()
    torch.foo.empty_cache()
    base_alloc, base_res = torch.foo.memory_allocated(), torch.foo.memory_reserved()
    base_blocks = foo_rs._C.live_blocks()
    sizes = [0, 1, 7, 100, 513, 4096, 65_537, 300_000]
    keep = []
    for i in range(10_000):
        t = torch.empty(sizes[i % len(sizes)] + i % 5, dtype=torch.uint8, device=f"foo:{i % 2}")
        if i % 3 == 0:
            keep.append(t)
        if len(keep) > 50:
            keep.clear()
    keep.clear()
    del t
    gc.collect()
    assert torch.foo.memory_allocated() == base_alloc
    assert foo_rs._C.live_blocks() == base_blocks
    torch.foo.empty_cache()
    assert torch.foo.memory_reserved() == base_res


def test_limit_raises_out_of_memory_and_leaves_device_usable():
    before = torch.foo.memory_stats(1)
    torch.foo.set_memory_limit("16M", device=1)
    try:
        assert torch.foo.get_memory_limit(1) == 16 << 20
        with pytest.raises(torch.OutOfMemoryError, match=r"foo out of memory.*foo:1.*16\.00 MiB"):
            torch.empty(32 << 20, dtype=torch.uint8, device="foo:1")
        after = torch.foo.memory_stats(1)
        assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
        assert after["num_ooms"] == before["num_ooms"] + 1
        # Still usable, within the limit.
        assert torch.ones(4, device="foo:1").cpu().tolist() == [1.0] * 4
        assert torch.empty(8 << 20, dtype=torch.uint8, device="foo:1").numel() == 8 << 20
        assert torch.foo.get_memory_limit(0) is None  # device 0 unaffected
    finally:
        torch.foo.set_memory_limit(None, device=1)
    assert torch.foo.get_memory_limit(1) is None
    assert torch.foo.mem_get_info(1)[1] > 0


def test_oom_flushes_cache_and_retries():
    torch.foo.set_memory_limit(12 << 20, device=1)
    try:
        a = torch.empty(8 << 20, dtype=torch.uint8, device="foo:1")
        del a  # 8 MiB stays cached
        retries = torch.foo.memory_stats(1)["num_alloc_retries"]
        b = torch.empty(10 << 20, dtype=torch.uint8, device="foo:1")  # needs the cache flushed
        assert torch.foo.memory_stats(1)["num_alloc_retries"] == retries + 1
        del b
    finally:
        torch.foo.set_memory_limit(None, device=1)


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120)


def test_memory_limit_environment_variable():
    code = (
        "import torch, foo_rs\n"
        "print(torch.foo.get_memory_limit(0))\n"
        "try:\n"
        "    torch.empty(1 << 21, device='foo')\n"
        "except torch.OutOfMemoryError as e:\n"
        "    print('OOM', 'FOO_RS_MEMORY_LIMIT' in str(e))\n"
    )
    out = _run(code, FOO_RS_MEMORY_LIMIT="1M")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(1 << 20), "OOM", "True"]
    bad = _run("import torch, foo_rs\ntorch.empty(4, device='foo')\n", FOO_RS_MEMORY_LIMIT="lots")
    assert bad.returncode != 0 and "FOO_RS_MEMORY_LIMIT" in bad.stderr and "not a byte size" in bad.stderr


def test_device_count_environment_variable():
    out = _run("import torch, foo_rs\nprint(torch.foo.device_count(), torch.ones(1, device='foo:3').device)\n",
               FOO_RS_DEVICE_COUNT="4")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["4", "foo:3"]


def test_pinned_memory():
    x = torch.arange(10.0)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and torch.equal(p, x)
    f = p.to("foo", non_blocking=True)
    assert torch.equal(f.cpu(), x)
    assert torch.empty(3, pin_memory=True).is_pinned()
