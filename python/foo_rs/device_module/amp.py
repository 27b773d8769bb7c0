"""The AMP half of the device module, exactly as PyTorch documents it for a custom backend, and
``torch.foo.amp.autocast`` / ``GradScaler`` / ``custom_fwd`` / ``custom_bwd``: the deprecated
spellings CUDA code still uses (``torch.cuda.amp.*``), which warn the same way and run
``torch.amp``'s with ``device_type="foo"``."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

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


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"`torch.foo.amp.{old}` is deprecated. Please use `{new}` instead.", FutureWarning, stacklevel=3)


class autocast(torch.amp.autocast_mode.autocast):  # noqa: N801 - torch.cuda.amp.autocast's name
    """``torch.autocast("foo", ...)``, spelled as ``torch.cuda.amp.autocast`` (deprecated there too).
    Its default dtype is float16, as torch.cuda.amp.autocast's."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True) -> None:
        _deprecated("autocast(args...)", "torch.amp.autocast('foo', args...)")
        super().__init__(_BACKEND, enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("foo", ...)``, spelled as ``torch.cuda.amp.GradScaler`` (deprecated there too)."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        _deprecated("GradScaler(args...)", "torch.amp.GradScaler('foo', args...)")
        super().__init__(
            _BACKEND,
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )


def custom_fwd(fwd: Callable[..., Any] | None = None, *, cast_inputs: torch.dtype | None = None) -> Any:
    """``torch.amp.custom_fwd(..., device_type="foo")``, spelled as ``torch.cuda.amp.custom_fwd``."""
    _deprecated("custom_fwd(args...)", "torch.amp.custom_fwd(args..., device_type='foo')")
    return functools.partial(torch.amp.custom_fwd, device_type=_BACKEND)(fwd=fwd, cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable[..., Any] | None = None) -> Any:
    """``torch.amp.custom_bwd(..., device_type="foo")``, spelled as ``torch.cuda.amp.custom_bwd``."""
    _deprecated("custom_bwd(args...)", "torch.amp.custom_bwd(args..., device_type='foo')")
    return functools.partial(torch.amp.custom_bwd, device_type=_BACKEND)(bwd)
