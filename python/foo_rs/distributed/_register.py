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


def _gloo_for(opts: Any, backend_options: object | None) -> Any:
    """The group's gloo if a creator already made one, else a new one made by PyTorch's own
    gloo creator (same options, same store prefix rules)."""
    cpu = _registered(opts.process_group, _CPU)
    if isinstance(cpu, c10d.ProcessGroupGloo):
        return cpu
    foo = _registered(opts.process_group, _FOO)
    if isinstance(foo, ProcessGroupFooGloo):
        return foo.gloo
    return c10d._create_gloo_process_group(opts, backend_options)


def _register_on(pg: dist.ProcessGroup, device: torch.device, kind: Any, backend: Any) -> None:
    """Registers ``backend`` for ``device`` on ``pg`` unless the group has one for it already.

    The registration gives the backend the group's bound device; a later registration of a
    different object of the same backend type for the same group (the creator PyTorch calls
    next, which makes its own backend object) must compare equal on it, so it is cleared again:
    a gloo that is also the CPU backend has no device to be bound to."""
    if _registered(pg, device) is not None:
        return
    pg._register_backend(device, kind, backend)
    if device == _CPU:
        backend.bound_device_id = None


def _create_foo_gloo(opts: Any, backend_options: object | None) -> ProcessGroupFooGloo:
    existing = _registered(opts.process_group, _FOO)
    if isinstance(existing, ProcessGroupFooGloo):
        return existing
    gloo = _gloo_for(opts, backend_options)
    if _registered(opts.process_group, _CPU) is None:
        cpu = gloo
        if dist.get_debug_level() == dist.DebugLevel.DETAIL:
            # As PyTorch wraps the backends it registers itself: collectives are checked across
            # ranks (shapes, dtypes, order) before they run. Its own prefix: the foo backend's
            # wrapper, made by PyTorch next, uses the group name under the same store.
            cpu = c10d._create_process_group_wrapper(
                gloo, f"{opts.group_id}_cpu", opts.store, opts.group_rank, opts.group_size, opts.timeout
            )
        _register_on(opts.process_group, _CPU, dist.ProcessGroup.BackendType.GLOO, cpu)
    return ProcessGroupFooGloo(gloo)


def _create_gloo(opts: Any, backend_options: object | None) -> Any:
    gloo = _gloo_for(opts, backend_options)
    if _registered(opts.process_group, _FOO) is None:
        _register_on(opts.process_group, _FOO, dist.ProcessGroup.BackendType.CUSTOM, ProcessGroupFooGloo(gloo))
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
