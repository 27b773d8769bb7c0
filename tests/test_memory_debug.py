"""Memory debugging on torch.foo in torch.cuda's shapes: memory_summary, memory_stats_as_nested_dict,
_record_memory_history / _snapshot / memory_snapshot / _dump_snapshot (read by torch.cuda's own
snapshot viewer), set_per_process_memory_fraction, mem_get_info."""

from __future__ import annotations

import gc
import pickle

import foo_rs
import pytest
import torch
from torch.cuda import _memory_viz


@pytest.fixture
def history():
    torch.foo.memory._record_memory_history(None)
    torch.foo.memory._record_memory_history("all", context="all", stacks="python", clear_history=True)
    yield
    torch.foo.memory._record_memory_history(None)


def _allocate_here(n: int) -> torch.Tensor:
    return torch.empty(n, dtype=torch.uint8, device="foo")


def test_memory_summary_is_cuda_table_with_foo_numbers():
    x = torch.empty(1 << 20, device="foo")  # 4 MiB, large pool
    stats = torch.foo.memory_stats()
    text = torch.foo.memory_summary()
    lines = text.splitlines()
    assert all(line.startswith("|") and line.endswith("|") and len(line) == 77 for line in lines)
    assert "PyTorch foo memory summary, device ID 0" in text
    assert "Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed" in text
    row = next(line for line in lines if line.startswith("| Allocated memory"))
    cells = [cell.split() for cell in row.split("|")[2:6]]
    shifts = {"B": 0, "KiB": 10, "MiB": 20, "GiB": 30}
    for (number, unit), metric in zip(cells, ["current", "peak", "allocated", "freed"]):
        assert int(number) == stats[f"allocated_bytes.all.{metric}"] >> shifts[unit]
    ooms = next(line for line in lines if "foo OOMs" in line)
    assert f"foo OOMs: {stats['num_ooms']} " in ooms
    assert "from large pool" in text and "from small pool" in text
    short = torch.foo.memory_summary(abbreviated=True)
    assert "from large pool" not in short and "Allocations" in short
    assert "device ID 1" in torch.foo.memory_summary("foo:1")
    del x


def test_memory_stats_as_nested_dict_matches_flat_stats():
    nested = torch.foo.memory_stats_as_nested_dict()
    flat = torch.foo.memory_stats()
    for key, value in flat.items():
        node = nested
        for part in key.split("."):
            node = node[part]
        assert node == value
    assert nested["num_ooms"] == flat["num_ooms"]


def test_deprecated_cached_aliases_warn_and_answer():
    with pytest.warns(FutureWarning, match="memory_reserved"):
        assert torch.foo.memory_cached() == torch.foo.memory_reserved()
    with pytest.warns(FutureWarning):
        assert torch.foo.max_memory_cached() == torch.foo.max_memory_reserved()
    with pytest.warns(FutureWarning):
        torch.foo.reset_max_memory_cached()


def test_snapshot_segments_blocks_and_allocation_stacks(history):
    t = _allocate_here(3000)  # a 3072-byte block
    snap = torch.foo.memory._snapshot()
    assert set(snap) == {"segments", "device_traces"}
    addr = t.untyped_storage().data_ptr()
    seg = next(s for s in snap["segments"] if s["address"] == addr)
    assert seg["device"] == 0 and seg["total_size"] == 3072 and seg["segment_type"] == "small"
    assert seg["allocated_size"] == seg["active_size"] == 3072 and seg["requested_size"] == 3000
    (block,) = seg["blocks"]
    assert block["state"] == "active_allocated" and block["size"] == 3072 and block["requested_size"] == 3000
    names = [f["name"] for f in block["frames"]]
    assert "_allocate_here" in names and "test_snapshot_segments_blocks_and_allocation_stacks" in names
    frame = block["frames"][names.index("_allocate_here")]
    assert frame["filename"].endswith("test_memory_debug.py") and frame["line"] > 0
    # The segment remembers the call that created it (a fresh size class here or a reused block).
    assert isinstance(seg["frames"], list)
    assert torch.foo.memory_snapshot() == torch.foo.memory._snapshot()["segments"]
    del t


def test_trace_records_alloc_and_free_in_order(history):
    t = _allocate_here(5000)
    addr = t.untyped_storage().data_ptr()
    del t
    gc.collect()
    trace = torch.foo.memory._snapshot()["device_traces"][0]
    mine = [e for e in trace if e.get("addr") == addr]
    actions = [e["action"] for e in mine]
    assert actions[-3:] == ["alloc", "free_requested", "free_completed"]
    alloc = mine[-3]
    assert alloc["size"] == 5120 and alloc["stream"] == 0 and alloc["time_us"] > 0
    assert "_allocate_here" in [f["name"] for f in alloc["frames"]]
    assert "test_trace_records_alloc_and_free_in_order" in [f["name"] for f in mine[-1]["frames"]]
    assert len(torch.foo.memory._snapshot()["device_traces"]) == torch.foo.device_count()


def test_segment_events_and_empty_cache(history):
    torch.foo.empty_cache()
    t = _allocate_here(3 << 20)  # a new large segment
    addr = t.untyped_storage().data_ptr()
    del t
    torch.foo.empty_cache()
    actions = [e["action"] for e in torch.foo.memory._snapshot()["device_traces"][0] if e.get("addr") == addr]
    # (an earlier segment at the same address may have been freed by the first empty_cache)
    mine = actions[len(actions) - 1 - actions[::-1].index("segment_alloc"):]
    assert mine == ["segment_alloc", "alloc", "free_requested", "free_completed", "segment_free"]


def test_out_of_memory_is_an_oom_entry(history):
    torch.foo.set_memory_limit("8M", device=1)
    try:
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(4 << 20, device="foo:1")
    finally:
        torch.foo.set_memory_limit(None, device=1)
    oom = [e for e in torch.foo.memory._snapshot()["device_traces"][1] if e["action"] == "oom"]
    assert oom and oom[-1]["size"] == 16 << 20 and "device_free" in oom[-1]


def test_snapshot_is_what_torch_cuda_memory_viz_reads(history, tmp_path):
    before = torch.foo.memory_snapshot()
    keep = [_allocate_here(n) for n in (1000, 70_000, 2 << 20)]
    del keep[1]
    path = tmp_path / "snap.pickle"
    torch.foo.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snap = pickle.load(f)
    # torch.cuda's own viewer tools, on foo's snapshot (flame graphs as their raw input lines:
    # rendering them downloads flamegraph.pl).
    def raw(lines: str) -> str:
        return lines

    live = _memory_viz.memory(snap, format_flamegraph=raw)
    assert "_allocate_here" in live and str(2 << 20) in live
    assert "_allocate_here" in _memory_viz.segments(snap, format_flamegraph=raw)
    text = _memory_viz.trace(snap)
    assert "Device 0" in text and "TOTAL MEM" in text and "del " in text
    assert "segment" in _memory_viz.segsum(snap).lower()
    html = _memory_viz.trace_plot(snap)
    assert "snapshot.pickle" in html and "Active Memory Timeline" in html
    assert "snapshot.pickle" in _memory_viz.segment_plot(snap)
    assert "_allocate_here" in _memory_viz.compare(before, snap["segments"], format_flamegraph=raw)
    del keep


def _trace_lengths() -> list[int]:
    return [len(trace) for trace in torch.foo.memory._snapshot()["device_traces"]]


def test_history_off_records_nothing_and_state_mode_keeps_no_trace():
    torch.foo.memory._record_memory_history(None)
    before = _trace_lengths()  # what was recorded stays, as torch.cuda's does
    t = _allocate_here(100)
    assert _trace_lengths() == before
    snap = torch.foo.memory._snapshot()
    assert all(not b["frames"] for s in snap["segments"] for b in s["blocks"])
    torch.foo.memory._record_memory_history("state")
    try:
        u = _allocate_here(200)
        assert _trace_lengths() == before
        addr = u.untyped_storage().data_ptr()
        seg = next(s for s in torch.foo.memory._snapshot()["segments"] if s["address"] == addr)
        assert "_allocate_here" in [f["name"] for f in seg["blocks"][0]["frames"]]
    finally:
        torch.foo.memory._record_memory_history(None)
    torch.foo.memory._record_memory_history("all", clear_history=True)
    torch.foo.memory._record_memory_history(None)
    assert _trace_lengths() == [0] * torch.foo.device_count()
    del t, u


def test_max_entries_keeps_the_latest():
    torch.foo.memory._record_memory_history("all", max_entries=4)
    try:
        for _ in range(10):
            _allocate_here(100)
        trace = torch.foo.memory._snapshot()["device_traces"][0]
        assert len(trace) == 4
        times = [e["time_us"] for e in trace]
        assert times == sorted(times)
    finally:
        torch.foo.memory._record_memory_history(None)


def test_bad_history_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="enabled"):
        torch.foo.memory._record_memory_history("everything")
    with pytest.raises(ValueError, match="context"):
        torch.foo.memory._record_memory_history("all", context="some")
    with pytest.raises(ValueError, match="stacks"):
        torch.foo.memory._record_memory_history("all", stacks="cpp")
    with pytest.raises(ValueError, match="max_entries"):
        torch.foo.memory._record_memory_history("all", max_entries=-1)
    with pytest.raises(ValueError, match="unknown action"):
        torch.foo.memory._record_memory_history("all", skip_actions=["teleport"])
    with pytest.raises(TypeError, match="unexpected"):
        torch.foo.memory._record_memory_history("all", colour="red")
    torch.foo.memory._record_memory_history(None)


def test_cpp_stacks():
    torch.foo.memory._record_memory_history("state", stacks="all")
    try:
        t = _allocate_here(100)
        seg = next(s for s in torch.foo.memory._snapshot()["segments"]
                   if s["address"] == t.untyped_storage().data_ptr())
        frames = seg["blocks"][0]["frames"]
        files = [f["filename"] for f in frames]
        assert any(f.endswith("test_memory_debug.py") for f in files)
        assert len(frames) > len([f for f in files if f.endswith(".py")])  # C++ frames too
    finally:
        torch.foo.memory._record_memory_history(None)


def test_per_process_memory_fraction():
    host = foo_rs._C.host_memory()
    assert host > 0
    try:
        torch.foo.set_per_process_memory_fraction(0.5, device=1)
        assert torch.foo.get_memory_limit(1) == int(0.5 * host)
        assert torch.foo.get_per_process_memory_fraction(1) == pytest.approx(0.5)
        free, total = torch.foo.mem_get_info(1)
        assert total == int(0.5 * host) and free == total - torch.foo.memory_reserved(1)
        torch.foo.set_per_process_memory_fraction(0.0, device=1)
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(1, device="foo:1")
    finally:
        torch.foo.set_memory_limit(None, device=1)
    assert torch.foo.get_per_process_memory_fraction(1) == 1.0
    with pytest.raises(ValueError, match="range"):
        torch.foo.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError):
        torch.foo.set_per_process_memory_fraction("half")


def test_mem_get_info_is_free_and_total_of_the_limit():
    torch.foo.set_memory_limit("64M", device=1)
    try:
        x = torch.empty(1 << 20, device="foo:1")
        free, total = torch.foo.mem_get_info("foo:1")
        assert total == 64 << 20
        assert free == total - torch.foo.memory_reserved(1)
        del x
    finally:
        torch.foo.set_memory_limit(None, device=1)
