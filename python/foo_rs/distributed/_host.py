"""CPU tensors that alias foo tensors' memory, so gloo can run collectives on foo storage.

foo memory is host memory (the Rust caching allocator hands out ordinary heap blocks), so a CPU
tensor over the same bytes is a zero-copy view: what gloo reads or writes through it is what the
foo tensor holds. The view owns a reference to the foo storage, so memory a collective is still
using cannot go back to foo's allocator while gloo works on it (the CPU tensors gloo keeps in
its Work hold it), the same lifetime a CPU tensor has under gloo.
"""

from __future__ import annotations

import ctypes

import torch

from .._registration import BACKEND_NAME

# What gloo itself carries (ProcessGroupGloo's type switch); every other dtype is "Invalid scalar
# type" there, CPU tensors included.
GLOO_DTYPES: frozenset[torch.dtype] = frozenset(
    {
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
    }
)


# What gloo reduces: its reductions know complex too (torch.distributed hands most complex
# collectives over as real views, reduce() as complex), its data movement does not.
GLOO_REDUCIBLE: frozenset[torch.dtype] = GLOO_DTYPES | {torch.complex64, torch.complex128}


def is_foo(t: torch.Tensor) -> bool:
    return t.device.type == BACKEND_NAME


def _storage_bytes(t: torch.Tensor) -> torch.Tensor:
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
    return _storage_bytes(t).view(t.dtype).as_strided(t.shape, t.stride(), t.storage_offset())


def host_bytes(t: torch.Tensor) -> torch.Tensor:
    """``t``'s elements as raw bytes: a CPU uint8 tensor of shape ``t.shape + (itemsize,)`` over
    ``t``'s memory. Collectives that only move data (broadcast, gather, all_to_all, send...) carry
    any dtype this way, including the ones gloo has no type for (int16, uint16/32/64)."""
    size = t.element_size()
    shape = (*t.shape, size)
    stride = (*(s * size for s in t.stride()), 1)
    if not is_foo(t):
        # A CPU tensor (in a list with foo tensors): the same reinterpretation of its own storage.
        return torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage(), t.storage_offset() * size, shape, stride)
    if t.untyped_storage().nbytes() == 0:
        return torch.empty_strided(shape, stride, dtype=torch.uint8)
    return _storage_bytes(t).as_strided(shape, stride, t.storage_offset() * size)
