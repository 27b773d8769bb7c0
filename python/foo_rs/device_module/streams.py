"""Streams and events on ``torch.foo``, in ``torch.cuda``'s shape.

foo runs every kernel synchronously on the calling thread, so a stream is a name for an ordering
that always holds: it is always complete, waiting on it or on an event returns at once, and an
event records the host time (``elapsed_time`` is wall time between two records). The state
behind these (the per-thread current stream, stream ids, event timestamps) is the C++ device
guard's (src/glue/guard.cpp), reached through ``torch.Stream`` / ``torch.Event``; this module
gives it the names CUDA code and FSDP2 call (``torch.foo.Stream(priority=...)``,
``torch.foo.current_stream()``, ``with torch.foo.stream(s):``, ``torch.foo.Event()``).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import torch

from ._device import DeviceLike, _device_index

_BACKEND = "foo"


class Stream(torch.Stream):
    """A foo stream (``torch.cuda.Stream``'s constructor: device, priority)."""

    def __new__(cls, device: DeviceLike = None, priority: int = 0, **kwargs: Any) -> Stream:
        if kwargs:  # (stream_id=, device_index=, device_type=): an existing stream by its id
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device(_BACKEND, _device_index(device)), priority=priority)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # torch.Stream.__init__ takes no arguments of its own; everything happened in __new__.
        # (``with s:`` is torch.Stream's: s is current inside the block.)
        super().__init__()


def _wrap(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


class _FooEventType(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, torch.Event) and obj.device is not None and obj.device.type == _BACKEND


class Event(metaclass=_FooEventType):
    """A foo event (``torch.cuda.Event``'s constructor). Recording stamps the host time; the
    event takes the device of the stream it records (the current one by default), as CUDA's.

    Constructing one gives a plain ``torch.Event`` of the foo device type (``isinstance(e,
    torch.foo.Event)`` holds for those): torch.Event's methods accept no subclass as their other
    event (``elapsed_time`` raises "expected other to be a torch.Event object")."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False,
                interprocess: bool = False) -> torch.Event:  # type: ignore[misc]
        return torch.Event(device=_BACKEND, enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)


def current_stream(device: DeviceLike = None) -> Stream:
    """This thread's current stream on ``device``."""
    return _wrap(torch.accelerator.current_stream(torch.device(_BACKEND, _device_index(device))))


def default_stream(device: DeviceLike = None) -> Stream:
    """The default stream of ``device`` (id 0)."""
    return Stream(stream_id=0, device_index=_device_index(device), device_type=current_stream(device).device_type)


def set_stream(stream: torch.Stream | None) -> None:
    """Makes ``stream`` this thread's current stream on its device (None: no change, as CUDA)."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """``with torch.foo.stream(s):`` — ``s`` is current inside the block (None: no change)."""

    def __init__(self, stream: torch.Stream | None) -> None:
        self.stream = stream
        self._previous: Stream | None = None

    def __enter__(self) -> torch.Stream | None:
        if self.stream is not None:
            self._previous = current_stream(self.stream.device_index)
            set_stream(self.stream)
        return self.stream

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        set_stream(self._previous)


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)
