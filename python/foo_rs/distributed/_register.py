"""Registers ``foo_gloo`` with torch.distributed and teaches ``gloo`` groups about foo tensors.

What each spelling of ``init_process_group`` / ``new_group`` gets with foo_rs imported:

* no backend: PyTorch maps the current accelerator (foo) to its default backend only, so
  ``Backend.default_device_backend_map["foo"] = "foo_gloo"``; the foo_gloo creator also registers
  its gloo for CPU tensors when the group has no CPU backend, which gives ``cpu:gloo,foo:foo_gloo``
  (one gloo connection for both). Without that, CPU collectives and ``barrier()`` (a CPU tensor
  for a custom default backend) would fail where they work without foo_rs.
* ``"gloo"``: PyTorch's own gloo creator makes the ProcessGroupGloo exactly as without foo_rs (CPU
  behaviour unchanged); the wrapper below also registers a foo_gloo backend over the same gloo for
  foo tensors. ``Backend.backend_capability["gloo"]`` stays ``["cpu", "cuda"]``: adding foo there
  would register the plain ProcessGroupGloo for foo, which refuses foo tensors.
* ``"cpu:gloo,foo:foo_gloo"`` (either order) and ``"foo_gloo"``: as written; the creators find and
  reuse each other's gloo / foo_gloo, so a group makes one gloo connection, never two.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from .._registration import BACKEND_NAME
from ._backend import BACKEND, ProcessGroupFooGloo

_CPU = torch.device("cpu")
_FOO = torch.device(BACKEND_NAME)


def _registered(pg: dist.ProcessGroup, device: torch.device) -> Any | None:
    if device.type not in {d.type for d in pg._device_types}:
        return None
    return pg._get_backend(device)


def _unwrapped(backend: Any) -> Any:
    """The backend inside PyTorch's debug-mode ProcessGroupWrapper(s), if any."""
    while isinstance(backend, c10d._ProcessGroupWrapper):
        backend = backend.wrapped_pg
    return backend


def _gloo_for(opts: Any, backend_options: object | None) -> Any:
    """The group's gloo if a creator already made one, else a new one made by PyTorch's own
    gloo creator (same options, same store prefix rules)."""
    cpu = _unwrapped(_registered(opts.process_group, _CPU))
    if isinstance(cpu, c10d.ProcessGroupGloo):
        return cpu
    foo = _unwrapped(_registered(opts.process_group, _FOO))
    if isinstance(foo, ProcessGroupFooGloo):
        return foo.gloo
    return c10d._create_gloo_process_group(opts, backend_options)


def _checked(backend: Any, opts: Any, device: torch.device) -> Any:
    """``backend`` wrapped as PyTorch wraps the backends it registers itself under
    TORCH_DISTRIBUTED_DEBUG=DETAIL (collectives checked across ranks before they run: shapes,
    dtypes, order). Its own store prefix: PyTorch's wrapper of the backend the creator returns
    uses the group name under the same store."""
    if dist.get_debug_level() != dist.DebugLevel.DETAIL:
        return backend
    return c10d._create_process_group_wrapper(
        backend, f"{opts.group_id}_{device.type}", opts.store, opts.group_rank, opts.group_size, opts.timeout
    )


def _register_on(pg: dist.ProcessGroup, device: torch.device, kind: Any, backend: Any) -> None:
    """Registers ``backend`` for ``device`` on ``pg``.

    The registration gives the backend the group's bound device (``init_process_group(device_id=)``).
    PyTorch then registers what the creator it calls next returns, and for a backend type the group
    already has it keeps the first backend and requires both to be bound to the same device: the
    creators return the backends registered here, or a new gloo that was never bound, so the one
    registered here is left unbound (none of these backends does anything with the bound device:
    they offer no eager connection and no splitting)."""
    pg._register_backend(device, kind, backend)
    backend.bound_device_id = None


def _create_foo_gloo(opts: Any, backend_options: object | None) -> Any:
    pg = opts.process_group
    existing = _registered(pg, _FOO)
    if existing is not None:  # made by the gloo creator (the group names gloo first)
        return existing
    gloo = _gloo_for(opts, backend_options)
    if _registered(pg, _CPU) is None:
        _register_on(pg, _CPU, dist.ProcessGroup.BackendType.GLOO, _checked(gloo, opts, _CPU))
    return ProcessGroupFooGloo(gloo)


def _create_gloo(opts: Any, backend_options: object | None) -> Any:
    pg = opts.process_group
    gloo = _gloo_for(opts, backend_options)
    if _registered(pg, _FOO) is None:
        _register_on(pg, _FOO, dist.ProcessGroup.BackendType.CUSTOM, _checked(ProcessGroupFooGloo(gloo), opts, _FOO))
    return gloo


def register() -> None:
    """Registers foo_gloo (default backend of the foo device) and the foo-aware gloo creator.
    Idempotent; a no-op when this torch has no distributed package or no gloo."""
    if not (dist.is_available() and dist.is_gloo_available()):
        return
    dist.Backend.register_backend(
        BACKEND,
        _create_foo_gloo,
        extended_api=True,
        devices=[BACKEND_NAME],
        _backend_type=dist.ProcessGroup.BackendType.CUSTOM,
    )
    # As torch's _register_builtin_gloo_backend does (the entry point it would load lazily is
    # skipped once "gloo" is registered), with the creator above.
    dist.Backend.register_backend(
        dist.Backend.GLOO,
        _create_gloo,
        extended_api=True,
        devices=dist.Backend.backend_capability[dist.Backend.GLOO],
        _backend_type=dist.ProcessGroup.BackendType.GLOO,
    )


def is_registered() -> bool:
    """True when ``init_process_group`` can build foo_gloo groups in this process."""
    return (
        dist.is_available()
        and BACKEND.upper() in dist.Backend._plugins
        and dist.Backend.default_device_backend_map.get(BACKEND_NAME) == BACKEND
    )
