"""Memory statistics, control and debugging, shaped like ``torch.cuda``'s memory API.

``memory_summary()`` prints the table ``torch.cuda.memory_summary()`` prints; ``_record_memory_history``,
``_snapshot``, ``memory_snapshot`` and ``_dump_snapshot`` give what ``torch.cuda.memory``'s do, in the
format its viewer (``torch.cuda._memory_viz``, pytorch.org/memory_viz) reads: segments with their
blocks and the stack traces that allocated them, and per-device traces of allocator events. The
history itself is kept by the C++ glue (src/glue/memory_history.cpp).
"""

from __future__ import annotations

import contextlib
import json
import pickle
import sys
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import torch

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


# Blocks handed out by caching_allocator_alloc, by address, until caching_allocator_delete.
_raw_blocks: dict[int, torch.UntypedStorage] = {}


def caching_allocator_alloc(size: int, device: DeviceLike = None, stream: Any = None) -> int:
    """Allocates ``size`` bytes from foo's caching allocator and returns the address (0 for 0
    bytes), as ``torch.cuda.caching_allocator_alloc``; free it with :func:`caching_allocator_delete`.
    The block is an ordinary foo allocation: statistics, snapshots and the profiler see it."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise TypeError(f"caching_allocator_alloc: size must be a non-negative int, got {size!r}")
    index = _C.check_device(_device_index(device))
    if stream is not None and not isinstance(stream, int):
        if not isinstance(stream, torch.Stream) or stream.device.type != "foo":
            raise TypeError("caching_allocator_alloc: stream must be a foo stream, an int or None")
    if size == 0:
        return 0
    storage = torch.UntypedStorage(size, device=torch.device("foo", index))
    _raw_blocks[storage.data_ptr()] = storage
    return storage.data_ptr()


def caching_allocator_delete(mem_ptr: int) -> None:
    """Frees a block from :func:`caching_allocator_alloc` (0 is ignored)."""
    if mem_ptr == 0:
        return
    if _raw_blocks.pop(mem_ptr, None) is None:
        raise ValueError(f"caching_allocator_delete: {mem_ptr:#x} was not allocated by caching_allocator_alloc")


def _nested(flat: dict[str, int]) -> dict[str, Any]:
    """{"a.b.c": v} as {"a": {"b": {"c": v}}}."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        *path, leaf = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def memory_stats_as_nested_dict(device: DeviceLike = None) -> dict[str, Any]:
    """:func:`memory_stats` as nested dicts ({"allocated_bytes": {"all": {"current": ...}}}), as torch.cuda."""
    return _nested(memory_stats(device))


def host_memory_stats() -> OrderedDict[str, int]:
    """Statistics of foo's pinned-host allocator (``tensor.pin_memory()``), as ``torch.cuda.host_memory_stats``:
    "allocations", "allocated_bytes", "active_requests", "active_bytes" with current/peak/allocated/freed,
    "num_host_alloc" and "num_host_free", and "host_alloc_time"/"host_free_time" with total/max/min/count/avg in
    microseconds. foo does not cache pinned blocks: each request is one host allocation and each free returns it,
    so the allocation and active-request figures move together."""
    return OrderedDict(sorted(_C.host_memory_stats().items()))


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    """:func:`host_memory_stats` as nested dicts ({"allocations": {"current": ...}}), as torch.cuda."""
    return _nested(host_memory_stats())


def reset_accumulated_host_memory_stats() -> None:
    """Zeroes the pinned-host allocator's allocated/freed totals and its call timings."""
    _C.reset_accumulated_host_memory_stats()


def reset_peak_host_memory_stats() -> None:
    """Sets the pinned-host allocator's peaks to the current values."""
    _C.reset_peak_host_memory_stats()


def memory_cached(device: DeviceLike = None) -> int:
    """Deprecated alias of :func:`memory_reserved` (as in torch.cuda)."""
    warnings.warn("torch.foo.memory_cached has been renamed to torch.foo.memory_reserved", FutureWarning, stacklevel=2)
    return memory_reserved(device)


def max_memory_cached(device: DeviceLike = None) -> int:
    """Deprecated alias of :func:`max_memory_reserved` (as in torch.cuda)."""
    warnings.warn(
        "torch.foo.max_memory_cached has been renamed to torch.foo.max_memory_reserved", FutureWarning, stacklevel=2
    )
    return max_memory_reserved(device)


def reset_max_memory_cached(device: DeviceLike = None) -> None:
    """Deprecated alias of :func:`reset_peak_memory_stats` (as in torch.cuda)."""
    warnings.warn(
        "torch.foo.reset_max_memory_cached now calls torch.foo.reset_peak_memory_stats, which resets /all/ peak "
        "memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def set_per_process_memory_fraction(fraction: float, device: DeviceLike = None) -> None:
    """Caps what ``device`` may reserve at ``fraction`` of the host's memory (torch.cuda's: of the
    GPU's); going over raises ``torch.OutOfMemoryError``. The cap is the device's memory limit
    (:func:`set_memory_limit`): fraction 1 is all of the host's memory."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise TypeError(f"Invalid type for fraction argument, must be `float`, got {type(fraction).__name__}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    index = _C.check_device(_device_index(device))
    # A zero limit means "no limit" to the allocator; a zero fraction allows nothing.
    _C.set_memory_limit(max(int(fraction * _C.host_memory()), 1), index)


def get_per_process_memory_fraction(device: DeviceLike = None) -> float:
    """The share of the host's memory ``device`` may reserve (1.0 without a limit)."""
    limit = get_memory_limit(device)
    host = _C.host_memory()
    return 1.0 if limit is None or host == 0 else min(limit / host, 1.0)


# ---- memory_summary --------------------------------------------------------------------------


def _size_cell(value: int, scale_by: int) -> str:
    units = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"]
    unit = 0
    while unit + 1 < len(units) and scale_by >= 768 * 1024:
        value //= 1024
        scale_by //= 1024
        unit += 1
    return f"{value:6d} {units[unit]}"


def _count_cell(value: int, scale_by: int) -> str:
    units = [" ", "K", "M"]
    unit = 0
    while unit + 1 < len(units) and scale_by >= 750 * 1000:
        value //= 1000
        scale_by //= 1000
        unit += 1
    return f"{value:7d} {units[unit]} "


# (statistic, row title, cell format). torch.cuda's table also has "Non-releasable" rows (the
# unused tails of split blocks) and "Oversize" rows (blocks above its max_split_size): foo's
# allocator never splits a block, so it has neither.
_SUMMARY_ROWS = [
    ("allocated_bytes", "Allocated memory", _size_cell),
    ("active_bytes", "Active memory", _size_cell),
    ("requested_bytes", "Requested memory", _size_cell),
    ("reserved_bytes", "foo reserved memory", _size_cell),
    ("allocation", "Allocations", _count_cell),
    ("active", "Active allocs", _count_cell),
    ("segment", "foo reserved segments", _count_cell),
]


def memory_summary(device: DeviceLike = None, abbreviated: bool = False) -> str:
    """The allocator's statistics as the table ``torch.cuda.memory_summary()`` prints: current,
    peak, total allocated and total freed of each statistic, per pool unless ``abbreviated``."""
    index = _C.check_device(_device_index(device))
    stats = memory_stats(index)
    rule, thick = "-" * 75, "=" * 75
    lines = [
        thick,
        f" {'':16} PyTorch foo memory summary, device ID {index:<18d} ",
        rule,
        f"  {'':10} foo OOMs: {stats['num_ooms']:<12d} | {'':6} allocation retries: {stats['num_alloc_retries']:<8d}  ",
        thick,
        "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
    ]
    pools = [("all", None)] if abbreviated else [("all", None), ("large_pool", "      from large pool"),
                                                   ("small_pool", "      from small pool")]
    for key, title, cell in _SUMMARY_ROWS:
        lines.append(rule)
        scale: list[int] = []
        for pool, pool_title in pools:
            values = [stats[f"{key}.{pool}.{metric}"] for metric in ("current", "peak", "allocated", "freed")]
            scale = scale or values  # the pools' cells use the "all" row's units
            cells = " | ".join(cell(v, s) for v, s in zip(values, scale))
            lines.append(f" {pool_title or title:<21} | {cells} ")
    lines.append(thick)
    return "|" + "|\n|".join(lines) + "|\n"


# ---- memory history and snapshots ------------------------------------------------------------


def _record_memory_history(
    enabled: str | bool | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: DeviceLike = None,
    clear_history: bool = False,
    skip_actions: list[str] | None = None,
    **unsupported: Any,
) -> None:
    """Records allocator events and the stack traces of allocations, as
    ``torch.cuda.memory._record_memory_history``: ``enabled`` None (off), "state" (tracebacks of
    live blocks) or "all" (also a history of events, the last ``max_entries``); ``context`` None,
    "state", "alloc" or "all" (which events keep a traceback); ``stacks`` "python" (Python and
    TorchScript frames) or "all" (also C++ frames). Every foo device is recorded (``device`` is
    accepted for torch.cuda's signature, which ignores it too); ``enabled=True`` / ``False`` (the
    legacy spelling) mean "all" / None."""
    if isinstance(enabled, bool):  # the legacy spelling: True records everything
        enabled = "all" if enabled else None
    for name in ("compile_context", "global_record_annotations", "record_pinned_host_memory"):
        if unsupported.pop(name, False):
            raise NotImplementedError(f"_record_memory_history: {name}=True is not supported on foo")
    if unsupported.pop("record_cuda", True) is False:
        raise ValueError("_record_memory_history: record_cuda=False leaves nothing to record on foo")
    if unsupported:
        raise TypeError(f"_record_memory_history got unexpected arguments {sorted(unsupported)}")
    if enabled not in (None, "state", "all"):
        raise ValueError(f"enabled must be None, 'state' or 'all', not {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"context must be None, 'state', 'alloc' or 'all', not {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', not {stacks!r}")
    if not isinstance(max_entries, int) or max_entries < 0:
        raise ValueError(f"max_entries must be a non-negative int, got {max_entries!r}")
    if device is not None:
        _C.check_device(_device_index(device))
    torch.ops.foo_rs._record_memory_history(
        enabled, context, stacks, min(max_entries, 2**63 - 1), clear_history, list(skip_actions or [])
    )


def _snapshot(device: DeviceLike = None, include_traces: bool = True) -> dict[str, Any]:
    """The allocator's state and recorded history, as ``torch.cuda.memory._snapshot()``:
    ``{"segments": [...], "device_traces": [[...] per device]}``. foo never splits a block, so
    each segment holds one block. ``device`` is accepted for torch.cuda's signature: the snapshot
    covers every foo device, as torch.cuda's does."""
    if device is not None:
        _C.check_device(_device_index(device))
    raw = json.loads(torch.ops.foo_rs._memory_snapshot(include_traces))
    frames = raw["frames"]
    tracebacks = [[frames[i] for i in tb] for tb in raw["tracebacks"]]

    def frames_of(index: int) -> list[dict[str, Any]]:
        return list(tracebacks[index]) if index >= 0 else []

    pool_of = {addr: pool.id for pool in list(_live_pools.values()) for addr in _C.mem_pool_blocks(pool._uid)[0]}
    segments = []
    for seg in raw["segments"]:
        block = seg.pop("block")
        block["frames"] = frames_of(block.pop("traceback"))
        seg["frames"] = frames_of(seg.pop("traceback"))
        pool_id = pool_of.get(seg["address"], (0, 0))
        seg.update(stream=0, segment_pool_id=pool_id, is_expandable=False, blocks=[block])
        segments.append(seg)
    traces: list[list[dict[str, Any]]] = [[] for _ in range(_C.device_count())]
    for entry in raw["trace"]:
        entry["frames"] = frames_of(entry.pop("traceback"))
        entry["stream"] = 0
        traces[entry.pop("device")].append(entry)
    return {"segments": segments, "device_traces": traces}


def memory_snapshot(mempool_id: tuple[int, int] | None = None, include_traces: bool = True) -> list[dict[str, Any]]:
    """The segments of :func:`_snapshot` (what ``torch.cuda.memory_snapshot()`` returns); with ``mempool_id``,
    those of that :class:`MemPool` only."""
    segments = _snapshot(include_traces=include_traces)["segments"]
    if mempool_id is not None:
        segments = [seg for seg in segments if seg["segment_pool_id"] == tuple(mempool_id)]
    return segments


# MemPools alive, by their allocator id (for the snapshot's segment_pool_id).
_live_pools: weakref.WeakValueDictionary[int, MemPool] = weakref.WeakValueDictionary()


class MemPool:
    """A private pool of foo's caching allocator, as ``torch.cuda.MemPool``. Blocks allocated while a thread
    uses it (:func:`use_mem_pool`) come back to it when freed and serve only its own later allocations;
    ``empty_cache()`` leaves them; they go back to the system when the pool is garbage-collected (blocks
    still in use then go to the device's cache when freed). One pool serves every foo device.

    foo's allocator never splits a block, so ``no_split`` holds whatever it is; a custom ``allocator`` and
    ``use_on_oom`` are not supported (NotImplementedError)."""

    def __init__(self, allocator: Any = None, use_on_oom: bool = False, no_split: bool = False) -> None:
        if allocator is not None:
            raise NotImplementedError("torch.foo.MemPool: foo's caching allocator takes no custom allocator")
        if use_on_oom:
            raise NotImplementedError("torch.foo.MemPool: use_on_oom is not supported by foo's allocator")
        self._uid = _C.create_mem_pool()
        self._uses = 0
        _live_pools[self._uid] = self

    @property
    def id(self) -> tuple[int, int]:
        """The pool's id, as torch.cuda's user-created pools: (0, n)."""
        return (0, self._uid)

    def use_count(self) -> int:
        """References to the pool: this object plus each :func:`use_mem_pool` context open on it."""
        return 1 + self._uses

    def snapshot(self, include_traces: bool = True) -> list[dict[str, Any]]:
        """:func:`memory_snapshot`'s segments that belong to this pool."""
        return memory_snapshot(self.id, include_traces=include_traces)

    def __del__(self) -> None:
        uid = getattr(self, "_uid", None)
        if uid is not None and _C is not None:
            _C.release_mem_pool(uid)


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device: DeviceLike = None) -> Iterator[None]:
    """Routes this thread's allocations on ``device`` (default: the current foo device) to ``pool``, as
    ``torch.cuda.use_mem_pool``. Other threads (autograd's backward included) allocate as before."""
    if not isinstance(pool, MemPool):
        raise TypeError(f"use_mem_pool: expected a torch.foo.MemPool, got {type(pool).__name__}")
    index = _device_index(device)
    _C.begin_allocate_to_pool(index, pool._uid)
    pool._uses += 1
    try:
        yield
    finally:
        pool._uses -= 1
        _C.end_allocate_to_pool(pool._uid)


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickles :func:`_snapshot` to ``filename``, for pytorch.org/memory_viz or
    ``python -m torch.cuda._memory_viz``."""
    snapshot = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)
