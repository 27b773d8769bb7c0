"""torch.foo shaped like torch.cuda: devices, guards, streams and events, torch.accelerator."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
import torch


def test_device_context_manager_nests_and_restores():
    assert torch.foo.current_device() == 0
    with torch.foo.device(1):
        assert torch.foo.current_device() == 1
        with torch.foo.device("foo:0"):
            assert torch.foo.current_device() == 0
        assert torch.foo.current_device() == 1
        assert torch.zeros(1, device="foo").device.index == 1
    assert torch.foo.current_device() == 0


def test_device_of():
    t = torch.ones(1, device="foo:1")
    with torch.foo.device_of(t):
        assert torch.foo.current_device() == 1
    assert torch.foo.current_device() == 0
    with torch.foo.device_of(torch.ones(1)):  # a CPU tensor changes nothing
        assert torch.foo.current_device() == 0


def test_current_device_is_per_thread():
    torch.foo.set_device(1)
    seen = []
    th = threading.Thread(target=lambda: seen.append(torch.foo.current_device()))
    th.start()
    th.join()
    assert seen == [0] and torch.foo.current_device() == 1


def test_invalid_device_index_is_a_clear_error():
    with pytest.raises(RuntimeError, match="Invalid device index 5"):
        torch.foo.set_device(5)
    with pytest.raises(RuntimeError, match="foo has 2 device"):
        torch.empty(3, device="foo:7")
    with pytest.raises(RuntimeError, match="Invalid device index"):
        torch.foo.synchronize(9)
    with pytest.raises(ValueError):
        torch.foo.set_device("cpu")
    # The process and the device stay usable.
    assert torch.ones(2, device="foo").cpu().tolist() == [1.0, 1.0]


def test_properties_and_names():
    p = torch.foo.get_device_properties(1)
    assert p.index == 1 and "foo_rs" in p.name and p.total_memory > 0 and p.multi_processor_count >= 1
    assert torch.foo.get_device_name() == torch.foo.get_device_properties(0).name
    assert torch.foo.is_initialized()
    torch.foo.init()
    torch.foo.synchronize()
    torch.foo.synchronize("foo:1")


def test_torch_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("foo")
    assert torch.accelerator.device_count() == 2
    torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == 1 == torch.foo.current_device()
    torch.accelerator.set_device_index(0)
    torch.accelerator.synchronize()
    before = torch.accelerator.memory_allocated()
    x = torch.empty(1000, device="foo")
    assert torch.accelerator.memory_allocated() - before >= 4000
    assert torch.accelerator.memory_allocated() == torch.foo.memory_allocated()
    assert torch.accelerator.max_memory_allocated() >= torch.accelerator.memory_allocated()
    assert torch.accelerator.memory_reserved() == torch.foo.memory_reserved()
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.foo.memory_allocated()
    free, total = torch.accelerator.get_memory_info()
    assert 0 <= free <= total
    del x
    torch.accelerator.empty_cache()
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == torch.accelerator.memory_allocated()


def test_streams_are_always_complete():
    s = torch.Stream(device="foo")
    assert s.device.type == "foo"
    assert s.query() is True
    s.synchronize()
    default = torch.accelerator.current_stream()
    with s:
        assert torch.accelerator.current_stream() == s
    assert torch.accelerator.current_stream() == default
    s2 = torch.Stream(device="foo:1")
    assert s2.device_index == 1 and s2 != s


def test_events_record_host_time():
    start = torch.Event(device="foo", enable_timing=True)
    end = torch.Event(device="foo", enable_timing=True)
    start.record()
    x = torch.ones(100_000, device="foo")
    x.fill_(2.0)
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    ms = start.elapsed_time(end)
    assert ms >= 0.0
    s = torch.Stream(device="foo")
    s.wait_event(end)  # nothing to wait for in the synchronous model
    no_timing = torch.Event(device="foo")
    no_timing.record()
    other = torch.Event(device="foo")
    other.record()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        no_timing.elapsed_time(other)


def test_bad_device_count_raises_on_first_use_not_at_import():
    # Like a bad FOO_RS_MEMORY_LIMIT (reported by the first allocation), a bad count leaves
    # `import torch` (which autoloads foo_rs) working and is a ValueError on first use.
    code = """
import torch
import foo_rs
for call in (torch.foo.device_count, torch.foo.is_available, torch.foo.current_device,
             lambda: torch.foo.set_device(0), torch.foo.get_rng_state, lambda: torch.tensor(1).foo(),
             torch.foo.synchronize):
    try:
        call()
        print("no error")
    except ValueError as e:
        print(str(e))
from foo_rs._info import print_info
print_info()  # `python -m foo_rs info` reports it and still runs
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, FOO_RS_DEVICE_COUNT="1.5"))
    assert out.returncode == 0, out.stderr[-2000:]
    expected = 'FOO_RS_DEVICE_COUNT: "1.5" is not a device count (a whole number from 0 to 64; unset for the default 2)'
    lines = out.stdout.splitlines()
    assert lines[:7] == [expected] * 7
    assert f"error: {expected}" in lines and any("native kernels registered" in line for line in lines)
