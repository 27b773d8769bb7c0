"""What ``python -m foo_rs info`` prints."""

from __future__ import annotations

import torch

from . import _C
from ._accounting import fallback_counts, native_counts, native_ops


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _distributed_line() -> str:
    import torch.distributed as dist

    if not dist.is_available():
        return "unavailable (this torch has no torch.distributed)"
    if not dist.is_gloo_available():
        return "unavailable (this torch has no gloo)"
    from . import distributed

    if not distributed.is_registered():
        return "gloo available, but the foo_gloo backend is not registered"
    return (
        f"backend {distributed.BACKEND!r} registered (gloo on foo memory); init_process_group() picks "
        f"cpu:gloo,foo:{distributed.BACKEND}, \"gloo\" covers foo tensors too"
    )


def print_info() -> None:
    import foo_rs

    dev = torch.foo
    print(
        f"foo_rs {foo_rs.__version__} (built against torch {_C.TORCH_BUILD_VERSION}; running torch {torch.__version__})"
    )
    # A diagnostic reports a bad FOO_RS_DEVICE_COUNT (which torch.foo raises on) and carries on
    # with the count the runtime actually uses.
    env_error = _C.device_count_error()
    if env_error is not None:
        print(f"error: {env_error}")
    n = _C.device_count()
    current = f"foo:{_C.current_device()}" if n else "none"
    print(
        f"devices: {n} (FOO_RS_DEVICE_COUNT), current {current}, "
        f"worker threads: {_C.num_threads()}, strict mode: {_C.is_strict()}"
    )
    for i in range(n if env_error is None else 0):  # torch.foo.* raise on a bad count
        p = dev.get_device_properties(i)
        limit = dev.get_memory_limit(i)
        print(
            f"  foo:{i} {p.name}: allocated {_mib(dev.memory_allocated(i))}, reserved {_mib(dev.memory_reserved(i))}, "
            f"limit {'none' if limit is None else _mib(limit)}, total {_mib(p.total_memory)}"
        )
    print(f"distributed: {_distributed_line()}")
    ops = native_ops()
    print(f"native kernels registered: {len(ops)} ATen ops")
    ran = native_counts()
    fell = fallback_counts()
    print(
        f"this process: {sum(ran.values())} native calls over {len(ran)} ops; "
        f"{sum(fell.values())} CPU-fallback calls over {len(fell)} ops"
    )
    for name, n in sorted(fell.items(), key=lambda kv: -kv[1]):
        print(f"  fallback {name}: {n}")
