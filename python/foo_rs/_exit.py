"""Keeps a process that ran autograd on foo from aborting at exit.

PyTorch's ``_engine_run_backward`` stashes a Python object (a ``contextvars`` context) in the
thread-local state that every autograd ``GraphTask`` captures. Backward passes on a non-CPU
device run on that device's autograd thread, which drops its last reference to the finished
``GraphTask`` just after waking the caller; if the interpreter is already finalizing by then,
the decref takes the GIL, Python ends the thread with ``pthread_exit`` and the C++ runtime calls
``std::terminate`` ("terminate called without an active exception", exit status 134). This is
an upstream race (it affects CUDA too); it shows up when a script ends right after a backward.

The workaround runs at ``atexit``, before finalization: one tiny backward per foo device through
the engine directly (no stashed Python object). A device thread takes a new task only after it
has released the previous one, so when that backward returns every earlier ``GraphTask`` is
gone, and the new one holds nothing that needs the GIL.
"""

from __future__ import annotations

import atexit

import torch

_registered = False


def _flush_autograd_threads() -> None:
    from . import _C

    if torch.foo._is_in_bad_fork():
        return
    engine = torch.autograd.Variable._execution_engine  # type: ignore[attr-defined]
    for index in range(_C.device_count()):
        try:
            x = torch.zeros((), device=f"foo:{index}", requires_grad=True)
            y = x * 1.0
            engine.run_backward((y,), (torch.ones_like(y),), False, False, (), True, True)
        except Exception:  # noqa: BLE001 - best effort at exit; never turn exit into an error
            return


def install() -> None:
    """Registers the exit hook once per process."""
    global _registered
    if not _registered:
        atexit.register(_flush_autograd_threads)
        _registered = True
