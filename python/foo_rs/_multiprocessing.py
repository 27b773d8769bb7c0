"""foo tensors through torch.multiprocessing (queues, pipes, Pool arguments), shared as CPU
tensors are.

torch.multiprocessing pickles a tensor's storage by handing the receiver a file descriptor of
shared memory (CPU) or a CUDA IPC handle (CUDA). foo memory is private to the process that
allocated it, so torch's reducer failed on it ("_share_fd_: only available on CPU") in the
queue's feeder thread, and the receiver waited forever. Here a foo storage being sent moves,
once, into shared memory (src/glue/shared_memory.cpp); the receiver maps the same memory as a
foo storage on the same device index. Sender and receiver then share the tensor: an in-place
change on either side is visible to the other, as with CPU tensors (and CUDA's IPC).

The receiver needs foo_rs (unpickling imports it) and at least as many foo devices as the
sender's device index. Shared storages live outside foo's caching allocator (memory_allocated()
does not count them) and cannot be resized.
"""

from __future__ import annotations

import multiprocessing.reduction
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.multiprocessing.reductions as reductions

from ._registration import BACKEND_NAME

_torch_reduce_storage: Callable[[Any], Any] = reductions.reduce_storage


def rebuild_foo_storage(fd_holder: Any, nbytes: int, device: int) -> torch.UntypedStorage:
    """The receiver's side: the sender's shared memory as a foo storage on ``foo:device``."""
    fd = fd_holder.detach()
    try:
        key = ("foo", *reductions.fd_id(fd))
        cached = reductions.storage_from_cache(torch.UntypedStorage, key)
        if cached is not None:
            return cached
        storage = torch.ops.foo_rs._from_shared_fd(fd, nbytes, device).untyped_storage()
        reductions.shared_cache[key] = reductions.StorageWeakRef(storage)
        return storage
    finally:
        os.close(fd)


def rebuild_empty_foo_storage(device: int) -> torch.UntypedStorage:
    return torch.UntypedStorage(0, device=torch.device(BACKEND_NAME, device))


def reduce_storage(storage: torch.UntypedStorage) -> Any:
    if storage.device.type != BACKEND_NAME:
        return _torch_reduce_storage(storage)
    device = storage.device.index or 0
    if storage.nbytes() == 0:
        return rebuild_empty_foo_storage, (device,)
    holder = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
    fd, nbytes = torch.ops.foo_rs._share_memory(holder)
    return rebuild_foo_storage, (multiprocessing.reduction.DupFd(fd), nbytes, device)


def install() -> None:
    """Registers the foo-aware storage reducer with multiprocessing's pickler (once)."""
    table = multiprocessing.reduction.ForkingPickler._extra_reducers
    if table.get(torch.UntypedStorage) is reduce_storage:
        return
    multiprocessing.reduction.ForkingPickler.register(torch.UntypedStorage, reduce_storage)
