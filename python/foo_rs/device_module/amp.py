"""The AMP half of the device module, exactly as PyTorch documents it for a custom backend."""

from __future__ import annotations

import torch

_BACKEND = "foo"


def get_amp_supported_dtype() -> list[torch.dtype]:
    """dtypes autocast may use on foo."""
    return [torch.float16, torch.bfloat16]


def is_autocast_enabled() -> bool:
    """Whether autocast is enabled for foo in this thread."""
    return torch.is_autocast_enabled(_BACKEND)


def set_autocast_enabled(enable: bool) -> None:
    """Enables or disables autocast for foo in this thread."""
    torch.set_autocast_enabled(_BACKEND, bool(enable))


def get_autocast_dtype() -> torch.dtype:
    """The dtype autocast uses on foo: set by :func:`set_autocast_dtype`, else torch.float16."""
    return torch.get_autocast_dtype(_BACKEND)


def set_autocast_dtype(dtype: torch.dtype) -> None:
    """Sets the autocast dtype for foo; it must be one of :func:`get_amp_supported_dtype`."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"set_autocast_dtype expects a torch.dtype, got {type(dtype).__name__}")
    supported = get_amp_supported_dtype()
    if dtype not in supported:
        raise ValueError(f"foo autocast supports {supported}, not {dtype}")
    torch.set_autocast_dtype(_BACKEND, dtype)
