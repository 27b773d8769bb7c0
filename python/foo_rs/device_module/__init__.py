"""``torch.foo``: the device module of the foo backend, shaped like ``torch.cuda``.

Registered with ``torch._register_device_module("foo", ...)`` by ``import foo_rs``.
"""

from typing import Any

import torch

from ..compile import inductor_backend_init as _inductor_backend_init  # noqa: F401 - inductor's hook
from ._device import (
    FooDeviceProperties,
    can_device_access_peer,
    current_device,
    device,
    device_count,
    device_of,
    get_device_capability,
    get_device_name,
    get_device_properties,
    get_sync_debug_mode,
    init,
    is_available,
    is_bf16_supported,
    is_initialized,
    set_device,
    set_sync_debug_mode,
    synchronize,
)
from .amp import (
    get_amp_supported_dtype,
    get_autocast_dtype,
    is_autocast_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .memory import (
    MemPool,
    caching_allocator_alloc,
    caching_allocator_delete,
    empty_cache,
    get_memory_limit,
    get_per_process_memory_fraction,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_memory_limit,
    set_per_process_memory_fraction,
    use_mem_pool,
)
from .random import (
    _is_in_bad_fork,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream

# ``torch.cuda._initialized``'s counterpart. torch.utils.checkpoint saves and restores a device's
# RNG state only when its module says it is initialized (getattr(module, "_initialized", False));
# without it a recomputed dropout drew a new mask and gradients were silently wrong. Nothing on
# foo is lazy: the runtime is initialized once the extension is loaded.
_initialized = True

# torch.cuda.OutOfMemoryError is torch's own class; foo raises the same one.
OutOfMemoryError = torch.OutOfMemoryError


def __getattr__(name: str) -> Any:
    # torch.cuda.default_generators is a tuple filled when CUDA initializes; foo's is made on
    # access (PEP 562), so that importing the module touches no device.
    if name == "default_generators":
        from .random import default_generators

        return default_generators()
    raise AttributeError(f"module 'torch.foo' has no attribute {name!r}")

__all__ = [
    "Event",
    "FooDeviceProperties",
    "MemPool",
    "OutOfMemoryError",
    "Stream",
    "StreamContext",
    "_is_in_bad_fork",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "can_device_access_peer",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_autocast_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_memory_limit",
    "get_per_process_memory_fraction",
    "get_rng_state",
    "get_rng_state_all",
    "get_sync_debug_mode",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "init",
    "initial_seed",
    "is_autocast_enabled",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "reset_accumulated_host_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_host_memory_stats",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_autocast_dtype",
    "set_autocast_enabled",
    "set_device",
    "set_memory_limit",
    "set_per_process_memory_fraction",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "set_sync_debug_mode",
    "stream",
    "synchronize",
    "use_mem_pool",
]
