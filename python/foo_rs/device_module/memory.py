"""Memory statistics and control, shaped like ``torch.cuda``'s memory API."""

from __future__ import annotations

from collections import OrderedDict

from .. import _C
from ._device import DeviceLike, _device_index


def memory_stats(device: DeviceLike = None) -> OrderedDict[str, int]:
    """Allocator statistics ("allocated_bytes.all.current", "num_ooms", ...), as torch.cuda."""
    return OrderedDict(sorted(_C.memory_stats(_device_index(device)).items()))


def _stat(device: DeviceLike, key: str) -> int:
    return int(_C.memory_stats(_device_index(device))[key])


def memory_allocated(device: DeviceLike = None) -> int:
    """Bytes occupied by live tensors on ``device``."""
    return _stat(device, "allocated_bytes.all.current")


def max_memory_allocated(device: DeviceLike = None) -> int:
    """Peak of :func:`memory_allocated` since start or the last reset."""
    return _stat(device, "allocated_bytes.all.peak")


def memory_reserved(device: DeviceLike = None) -> int:
    """Bytes held by the caching allocator (live tensors plus cache)."""
    return _stat(device, "reserved_bytes.all.current")


def max_memory_reserved(device: DeviceLike = None) -> int:
    """Peak of :func:`memory_reserved` since start or the last reset."""
    return _stat(device, "reserved_bytes.all.peak")


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    """Sets every peak statistic to its current value."""
    _C.reset_peak_memory_stats(_device_index(device))


def reset_accumulated_memory_stats(device: DeviceLike = None) -> None:
    """Zeroes the allocated/freed totals and the event counters."""
    _C.reset_accumulated_memory_stats(_device_index(device))


def reset_max_memory_allocated(device: DeviceLike = None) -> None:
    """Alias of :func:`reset_peak_memory_stats` (as in torch.cuda)."""
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Returns every cached, unused block of every foo device to the system."""
    _C.empty_cache(None)


def mem_get_info(device: DeviceLike = None) -> tuple[int, int]:
    """(free, total) bytes: total is the device's limit (or host RAM), free what is not reserved."""
    index = _C.check_device(_device_index(device))
    total = _C.total_memory(index)
    return max(total - memory_reserved(index), 0), total


def set_memory_limit(limit: int | str | None, device: DeviceLike | None = None) -> None:
    """Caps the bytes a device may reserve ("2G", 1 << 30, or None for no limit); all devices
    when ``device`` is None. Exceeding it raises ``torch.OutOfMemoryError``."""
    if isinstance(limit, str):
        limit = _C.parse_size(limit)
    if limit is not None and limit < 0:
        raise ValueError(f"memory limit must be >= 0 bytes, got {limit}")
    index = None if device is None else _C.check_device(_device_index(device))
    _C.set_memory_limit(limit or None, index)


def get_memory_limit(device: DeviceLike = None) -> int | None:
    """The reserved-bytes limit of a device, or None when unlimited."""
    return _C.memory_limit(_C.check_device(_device_index(device)))
