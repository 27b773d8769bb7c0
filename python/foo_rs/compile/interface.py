"""The dynamo ``DeviceInterface`` of foo: how dynamo, AOTAutograd and inductor query the device.

Everything delegates to ``torch.foo`` (python/foo_rs/device_module). foo runs kernels
synchronously on host memory: its streams are always complete, the raw stream handle is 0 (as
the CPU's), and it is not a GPU-class device for inductor (its kernels are inductor's C++
CPU kernels, see inductor.py).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device

from .. import _C
from .. import device_module as foo
from .._registration import BACKEND_NAME as BACKEND


@functools.cache
def _source_hash() -> str:
    """A hash of this package's source: what inductor generates for foo depends on it."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _exchange_device(device: int) -> int:
    """Makes ``device`` current (a negative index leaves it) and returns the previous one."""
    previous = _C.current_device()
    if device >= 0 and device != previous:
        foo.set_device(device)
    return previous


class FooInterface(DeviceInterface):
    device = foo.device  # type: ignore[assignment]
    Stream = foo.Stream  # type: ignore[assignment]
    # torch.foo.Event makes plain torch.Event objects of the foo type (torch.Event's methods
    # refuse subclasses); torch.Event() with no device is one on the current accelerator, foo.
    Event = torch.Event  # type: ignore[assignment]

    class Worker:  # type: ignore[no-redef]
        """Device queries from inductor's compile workers: foo needs no driver, so they are the
        same calls as in the main process."""

        @staticmethod
        def set_device(device: int) -> None:
            foo.set_device(device)

        @staticmethod
        def current_device() -> int:
            return foo.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> foo.FooDeviceProperties:
            return foo.get_device_properties(device)

    current_device = staticmethod(foo.current_device)
    set_device = staticmethod(foo.set_device)  # type: ignore[arg-type]
    device_count = staticmethod(foo.device_count)
    is_available = staticmethod(foo.is_available)
    synchronize = staticmethod(foo.synchronize)  # type: ignore[arg-type]
    stream = staticmethod(foo.stream)  # type: ignore[assignment]
    current_stream = staticmethod(foo.current_stream)  # type: ignore[assignment]
    set_stream = staticmethod(foo.set_stream)  # type: ignore[assignment]
    memory_allocated = staticmethod(foo.memory_allocated)  # type: ignore[arg-type]
    exchange_device = staticmethod(_exchange_device)
    maybe_exchange_device = staticmethod(_exchange_device)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        foo.set_stream(foo.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        # Kernels run synchronously on the calling thread: there is no stream handle to pass.
        return 0

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> str:
        # The generated kernels are the CPU's C++; what they depend on is the host's vector ISA,
        # which inductor's cache keys already include.
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @classmethod
    def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
        from .._registration import SUPPORTED_DTYPES

        return dtype in SUPPORTED_DTYPES

    @classmethod
    def get_cache_system_info(cls) -> dict[str, object] | None:
        # Part of every inductor cache key: code compiled by another foo_rs (its C++ ABI, or
        # how this package steers inductor) is not reused.
        return {"foo_rs": _C.__version__, "compile": _source_hash()}

    @classmethod
    def get_multi_processor_count(cls, device: torch.types.Device = None) -> int:
        return foo.get_device_properties(device).multi_processor_count


def register(_module: Any = None) -> None:
    """Registers the interface for "foo" and for each "foo:N" (dynamo looks both up)."""
    register_interface_for_device(BACKEND, FooInterface)
    if _C.device_count_error() is None:  # a bad FOO_RS_DEVICE_COUNT is reported on first use
        for index in range(_C.device_count()):
            register_interface_for_device(f"{BACKEND}:{index}", FooInterface)


# Importing this module registers it: dynamo's module may be what imports it (the import hook in
# __init__.py), or importing it may be what imports dynamo's module (and runs that hook while
# this one is still half-loaded).
register()
