"""foo in torch.profiler: kernels as device activity with their measured durations, memory events,
Chrome traces, torch.autograd.profiler's use_device="foo", and ``python -m foo_rs profile``."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

FOO_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
# How far a kernel's edges may stray from its op's across the profiler's two clocks (see below).
CLOCK_FIT_US = 5.0


def _kernels(prof: profile) -> list:
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1 and e.name.startswith("foo::")]


def test_privateuse1_is_a_supported_activity():
    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()


def test_kernels_are_device_events_inside_the_ops_that_launched_them():
    a = torch.randn(256, 256, device="foo")
    b = torch.randn(256, 256, device="foo")
    with profile(activities=FOO_ACTIVITIES) as prof:
        for _ in range(3):
            c = a @ b
        d = c + 1
    kernels = _kernels(prof)
    names = [k.name for k in kernels]
    assert names.count("foo::mm") == 3 and "foo::add.Tensor" in names
    ops = {e.id: e for e in prof.events() if e.device_type == DeviceType.CPU}
    mm_ops = [e for e in ops.values() if e.name == "aten::mm"]
    assert len(mm_ops) == 3
    for op in mm_ops:
        # Each mm op owns exactly its kernel (linked by the op's correlation id), which ran within
        # the op's own interval. The profiler stamps ops on the TSC and converts to wall time by a
        # fitted line; kernels are stamped on the wall clock, so their edges compare to within the
        # fit's error (up to about a microsecond on a busy VM, while the dispatch around a kernel
        # takes a tenth of that).
        assert [k.name for k in op.kernels] == ["foo::mm"]
        [kernel] = [k for k in kernels if k.linked_correlation_id == op.id]
        assert kernel.name == "foo::mm"
        assert kernel.time_range.start >= op.time_range.start - CLOCK_FIT_US
        assert kernel.time_range.end <= op.time_range.end + CLOCK_FIT_US
        assert 0 < kernel.time_range.elapsed_us() <= op.time_range.elapsed_us()
        assert op.device_time_total == pytest.approx(kernel.time_range.elapsed_us())
    assert torch.allclose(d.cpu(), a.cpu() @ b.cpu() + 1, atol=1e-3)


def test_device_time_measures_the_kernel():
    # The same op on 256x more elements (4096x the work): its kernel takes far longer, whatever the
    # dispatch costs. Medians, so that one descheduled call on a busy 2-core machine (a 64x64 mm
    # once took 209 us against a usual 30-50) cannot decide the result.
    small = torch.randn(64, 64, device="foo")
    large = torch.randn(1024, 1024, device="foo")
    small @ small, large @ large  # warm the thread pool and the allocator's cache
    with profile(activities=FOO_ACTIVITIES) as prof:
        for _ in range(5):
            small @ small
        for _ in range(5):
            large @ large
    kernels = sorted((k for k in _kernels(prof) if k.name == "foo::mm"), key=lambda k: k.time_range.start)
    assert len(kernels) == 10
    times = [k.time_range.elapsed_us() for k in kernels]
    assert statistics.median(times[5:]) > 20 * statistics.median(times[:5])
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=5)
    assert "foo::mm" in table and "aten::mm" in table


def test_nested_native_ops_count_once():
    # addmm's kernel allocates its output through at::empty (itself native): one kernel, not two.
    x = torch.randn(32, 16, device="foo")
    lin = torch.nn.Linear(16, 8).to("foo")
    with profile(activities=FOO_ACTIVITIES) as prof:
        lin(x)
    names = [k.name for k in _kernels(prof)]
    assert "foo::addmm" in names and "foo::empty.memory_format" not in names


def test_backward_and_device_index_are_recorded():
    w = torch.randn(64, 64, device="foo:1", requires_grad=True)
    x = torch.randn(64, 64, device="foo:1")
    with profile(activities=FOO_ACTIVITIES) as prof:
        (x @ w).sum().backward()
    kernels = _kernels(prof)
    assert kernels and all(k.device_index == 1 for k in kernels)
    # forward mm and the gradient's mm (on autograd's thread)
    assert sum(k.name == "foo::mm" for k in kernels) >= 2


def test_cpu_only_profile_has_no_device_rows():
    x = torch.randn(64, 64, device="foo")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x @ x
    assert not _kernels(prof)
    assert any(e.name == "aten::mm" for e in prof.events())


def test_memory_events_of_foo_allocations():
    torch.foo.empty_cache()
    with profile(activities=FOO_ACTIVITIES, profile_memory=True) as prof:
        x = torch.empty(1 << 18, device="foo")  # 1 MiB
        del x
    # The allocation belongs to the op that made it; the free, outside any op, is its own event.
    (empty,) = [e for e in prof.events() if e.name == "aten::empty"]
    assert empty.device_memory_usage == 1 << 20 and empty.cpu_memory_usage == 0
    mem = [e for e in prof.events() if e.name == "[memory]"]
    assert [e.device_memory_usage for e in mem] == [-(1 << 20)] and mem[0].cpu_memory_usage == 0
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["aten::empty"].device_memory_usage == 1 << 20


def test_chrome_trace_has_kernels_and_memory(tmp_path):
    x = torch.randn(128, 128, device="foo")
    with profile(activities=FOO_ACTIVITIES, profile_memory=True) as prof:
        with record_function("step"):
            y = x @ x
            del y
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("name") == "foo::mm"]
    assert len(kernels) == 1 and kernels[0]["dur"] > 0 and kernels[0]["args"]["device"] == 0
    memory = [e for e in events if e.get("name") == "[memory]"]
    foo_type = int(DeviceType.PrivateUse1)
    assert any(e["args"].get("Device Type") == foo_type and e["args"]["Bytes"] == 128 * 128 * 4 for e in memory)
    # The kernel lies inside the CPU op that launched it.
    mm = next(e for e in events if e.get("name") == "aten::mm" and e.get("ph") == "X")
    assert mm["ts"] <= kernels[0]["ts"] and kernels[0]["ts"] + kernels[0]["dur"] <= mm["ts"] + mm["dur"] + 1


def test_memory_timeline(tmp_path):
    x = torch.randn(256, 256, device="foo")
    with profile(activities=FOO_ACTIVITIES, profile_memory=True, record_shapes=True, with_stack=True) as prof:
        y = x @ x
        z = y.relu()
        del y, z
    path = tmp_path / "timeline.json"
    prof.export_memory_timeline(str(path), device="foo:0")
    times, sizes = json.loads(path.read_text())
    assert len(times) == len(sizes) > 0
    assert max(sum(row) for row in sizes) >= 2 * 256 * 256 * 4


def test_autograd_profiler_use_device_is_quiet_and_measures_kernels(capfd):
    a = torch.randn(256, 256, device="foo")
    with torch.autograd.profiler.profile(use_device="foo") as prof:
        for _ in range(3):
            a @ a
    out, err = capfd.readouterr()
    assert "Traceback" not in err and "not enabled" not in err and "Exception raised" not in err
    mm = [e for e in prof.function_events if e.name == "aten::mm"]
    assert len(mm) == 3
    for e in mm:
        assert 0 < e.device_time_total <= e.cpu_time_total
        assert e.cpu_time_total > 0
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["aten::mm"].self_device_time_total > 0
    assert all(e.cpu_time_total >= 0 for e in averages.values())


def test_autograd_profiler_use_device_costs_about_what_the_cpu_profiler_costs():
    x = torch.randn(8, 8, device="foo")

    def workload() -> None:
        for _ in range(300):
            x.add(1).mul(2)

    def timed(**kwargs: object) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            with torch.autograd.profiler.profile(**kwargs) as prof:
                workload()
            prof.key_averages()
            best = min(best, time.perf_counter() - start)
        return best

    workload()
    cpu = timed()
    foo = timed(use_device="foo")
    assert foo < 2.0 * cpu, f"use_device='foo' {foo * 1e3:.1f} ms vs the CPU profiler's {cpu * 1e3:.1f} ms"


def test_python_m_foo_rs_profile(tmp_path):
    script = tmp_path / "work.py"
    script.write_text(
        "import sys, torch\n"
        "x = torch.randn(64, 64, device='foo')\n"
        "y = x @ x\n"
        "print('script argv', sys.argv[1:])\n"
    )
    trace = tmp_path / "t.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-m", "foo_rs", "profile", "--trace", str(trace), str(script), "--flag"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "script argv ['--flag']" in done.stdout
    assert "foo::mm" in done.stdout and "aten::mm" in done.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "foo::mm" and e.get("cat") == "kernel" for e in events)


def test_schedule_cycles_each_see_their_own_kernels():
    x = torch.randn(32, 32, device="foo")
    cycles: list[list[str]] = []

    def ready(p: profile) -> None:
        cycles.append([k.name for k in _kernels(p)])

    schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
    with profile(activities=FOO_ACTIVITIES, schedule=schedule, on_trace_ready=ready) as prof:
        for step in range(8):
            for _ in range(step + 1):  # step s runs s + 1 matmuls
                x @ x
            prof.step()
    # Active steps are 2, 3 (first cycle) and 6, 7 (second): 3 + 4 and 7 + 8 matmuls.
    assert [c.count("foo::mm") for c in cycles] == [7, 15]
