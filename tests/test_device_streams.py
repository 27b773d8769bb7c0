"""torch.foo.Stream / Event / current_stream / stream(...): torch.cuda's names (FSDP2 calls them)."""

from __future__ import annotations

import time

import pytest
import torch


def test_stream_constructor_and_current_stream():
    s = torch.foo.Stream(priority=-1)
    assert isinstance(s, torch.foo.Stream) and isinstance(s, torch.Stream)
    assert s.device == torch.device("foo:0") and s.stream_id != 0
    assert torch.foo.Stream(device=1).device_index == 1
    assert torch.foo.Stream(device="foo:1").device_index == 1
    default = torch.foo.default_stream()
    assert default.stream_id == 0 and torch.foo.current_stream() == default
    assert isinstance(torch.foo.current_stream(), torch.foo.Stream)
    with pytest.raises(ValueError, match="foo device"):
        torch.foo.Stream(device="cpu")


def test_stream_context_and_set_stream():
    s = torch.foo.Stream()
    before = torch.foo.current_stream()
    with torch.foo.stream(s) as entered:
        assert entered is s and torch.foo.current_stream() == s
        assert torch.accelerator.current_stream() == s
    assert torch.foo.current_stream() == before
    with torch.foo.stream(None):  # as CUDA: no change
        assert torch.foo.current_stream() == before
    torch.foo.set_stream(s)
    try:
        assert torch.foo.current_stream() == s
    finally:
        torch.foo.set_stream(before)
    assert torch.foo.current_stream() == before


def test_streams_are_always_complete():
    s = torch.foo.Stream()
    x = torch.ones(1000, device="foo")
    with torch.foo.stream(s):
        y = x * 2
    s.wait_stream(torch.foo.current_stream())
    torch.foo.current_stream().wait_stream(s)
    assert s.query() and torch.equal(y.cpu(), torch.full((1000,), 2.0))
    s.synchronize()


def test_event_records_host_time():
    start = torch.foo.Event(enable_timing=True)
    end = torch.foo.Event(enable_timing=True)
    assert isinstance(start, torch.foo.Event) and not isinstance(torch.Event(device="cpu"), torch.foo.Event)
    start.record()
    time.sleep(0.02)
    end.record(torch.foo.current_stream())
    end.synchronize()
    assert start.query() and end.query()
    assert 15.0 <= start.elapsed_time(end) < 2000.0  # milliseconds of host time
    torch.foo.current_stream().wait_event(end)


def test_event_takes_the_device_of_the_stream_it_records():
    e = torch.foo.Event()
    e.record(torch.foo.Stream(device=1))
    assert e.device == torch.device("foo:1")


def test_record_stream_is_native_and_checks_the_stream():
    x = torch.ones(1000, device="foo")
    s = torch.foo.Stream()
    before = torch.foo.memory_allocated()
    x.record_stream(s)  # strict mode: a CPU fallback would raise
    x.record_stream(torch.foo.current_stream())
    x.record_stream(torch.foo.Stream(device=1))  # another foo device's stream, as CUDA allows
    assert torch.foo.memory_allocated() == before
    with pytest.raises(RuntimeError, match="expected a foo stream"):
        x.record_stream(torch.Stream(device="cpu"))
    # The block is reusable as soon as x is gone: every stream's work is already done.
    ptr = x.untyped_storage().data_ptr()
    del x
    assert torch.ones(1000, device="foo").untyped_storage().data_ptr() == ptr
