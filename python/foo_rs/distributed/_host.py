"""CPU tensors that alias foo tensors' memory (../_host_view.py), so gloo can run collectives on
foo storage: what gloo reads or writes through a view is what the foo tensor holds, and memory a
collective still uses cannot go back to foo's allocator while gloo works on it (the CPU tensors
gloo keeps in its Work hold it), the same lifetime a CPU tensor has under gloo.
"""

from __future__ import annotations

import torch

from .._host_view import host_view, is_foo, storage_bytes

__all__ = ["GLOO_DTYPES", "GLOO_REDUCIBLE", "host_bytes", "host_view", "is_foo"]

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
    return storage_bytes(t).as_strided(shape, stride, t.storage_offset() * size)
