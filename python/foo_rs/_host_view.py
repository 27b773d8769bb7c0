"""CPU tensors that alias foo tensors' memory.

foo memory is host memory (the Rust caching allocator hands out ordinary heap blocks), so a CPU
tensor over the same bytes is a zero-copy view: what is read or written through it is what the
foo tensor holds. The view owns a reference to the foo storage, so the memory cannot go back to
foo's allocator while the view (or anything made from it: a gloo Work, a DLPack capsule, a NumPy
array) lives. Used by the foo_gloo backend (distributed/) and by DLPack export (_dlpack.py).
"""

from __future__ import annotations

import ctypes

import torch

from ._registration import BACKEND_NAME


def is_foo(t: torch.Tensor) -> bool:
    return t.device.type == BACKEND_NAME


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage of ``t`` as a flat CPU uint8 tensor over the same memory."""
    storage = t.untyped_storage()
    buffer = (ctypes.c_char * storage.nbytes()).from_address(storage.data_ptr())
    # torch.frombuffer keeps `buffer` alive as long as any view of the result lives, and the
    # buffer keeps the foo storage alive: the CPU alias owns the foo memory it points at.
    buffer.keep_alive = storage  # type: ignore[attr-defined]
    return torch.frombuffer(buffer, dtype=torch.uint8)


def host_view(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor with ``t``'s dtype, shape and strides over ``t``'s memory (``t`` itself when
    it is not a foo tensor)."""
    if not is_foo(t):
        return t
    if t.untyped_storage().nbytes() == 0:
        # Nothing to alias (and frombuffer refuses an empty buffer): no element moves anyway.
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
    return storage_bytes(t).view(t.dtype).as_strided(t.shape, t.stride(), t.storage_offset())
