"""Backward passes over foo tensors run on the thread that calls ``backward()``.

PyTorch's autograd engine hands every non-CPU device's part of a backward pass to a worker
thread of that device, which lets a CUDA backward overlap its streams with the CPU's work. foo's
kernels run to completion on the calling thread, so for foo that worker only adds two thread
wake-ups per ``backward()`` (the worker's, then the caller's): 40-180 us on these VMs, a quarter
of a small MLP's training step (0.95 ms against 0.77 without it, the CPU's 0.71). The engine's
documented switch, ``torch.autograd.set_multithreading_enabled``, runs the whole pass on the
calling thread, as it does for CPU tensors. It is thread-local: foo sets it off for the thread
that imports foo_rs (the main thread, for torch's autoload); ``set_multithreading_enabled(True)``
turns the workers back on."""

from __future__ import annotations

import torch


def install() -> None:
    torch.autograd.set_multithreading_enabled(False)
