"""Device selection and properties, shaped like ``torch.cuda``'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .. import _C

_BACKEND = "foo"

DeviceLike = int | str | torch.device | None

def _check_env() -> None:
    """Raises for an unusable FOO_RS_DEVICE_COUNT (the Rust runtime parses it and refuses every
    device access then). Like a bad FOO_RS_MEMORY_LIMIT it is reported as a ValueError on first
    use, never at import, which ``import torch`` runs through the backend autoload."""
    error = _C.device_count_error()
    if error is not None:
        raise ValueError(error)


def _device_index(device: DeviceLike, optional: bool = True) -> int:
    """The foo device index of ``device`` (int, "foo", "foo:1", torch.device); None = current."""
    _check_env()
    if device is None:
        return current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != _BACKEND:
            raise ValueError(f"Expected a foo device, but got: {device}")
        if device.index is None:
            return current_device()
        return device.index
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    raise TypeError(f"Expected a foo device (int, str or torch.device), got {type(device).__name__}")


def is_available() -> bool:
    """True when at least one foo device exists."""
    return device_count() > 0


def device_count() -> int:
    """Number of foo devices (``FOO_RS_DEVICE_COUNT``, default 2)."""
    _check_env()
    return _C.device_count()


def current_device() -> int:
    """Index of this thread's current foo device. With no devices (FOO_RS_DEVICE_COUNT=0) there
    is none to name, so this raises, as ``torch.cuda.current_device()`` does without a GPU,
    rather than returning an index every foo call would then refuse."""
    if device_count() == 0:
        raise RuntimeError("No foo devices are available (FOO_RS_DEVICE_COUNT=0)")
    return _C.current_device()


def set_device(device: DeviceLike) -> None:
    """Selects the current foo device for this thread (a negative index is a no-op, as in CUDA)."""
    index = _device_index(device)
    if index >= 0:
        _C.set_device(index)


def is_initialized() -> bool:
    """The Rust runtime initializes when the extension loads: always True after import."""
    return True


def init() -> None:
    """Explicit initialization (nothing is lazy on foo; kept for ``torch.cuda`` parity)."""


def synchronize(device: DeviceLike = None) -> None:
    """Waits for all work on ``device``. foo runs kernels synchronously, so this only validates."""
    # The current device's case skips `_device_index`'s checks (check_device makes the same
    # ones): timing loops call this after every op, and it cost as much as a 1-element add.
    _C.check_device(_C.current_device() if device is None else _device_index(device))


def can_device_access_peer(device: DeviceLike, peer_device: DeviceLike) -> bool:
    """Whether ``device`` can read ``peer_device``'s memory directly, as ``torch.cuda.can_device_access_peer``.
    Every foo device's memory is host RAM, so a copy from foo:1 to foo:0 is one memcpy: always True for two
    existing devices. (Ops still refuse operands on different devices, as on CUDA with peer access.)"""
    index, peer = _device_index(device), _device_index(peer_device)
    count = device_count()
    if not 0 <= index < count:
        raise AssertionError("Invalid device id")
    if not 0 <= peer < count:
        raise AssertionError("Invalid peer device id")
    return True


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}
_sync_debug_mode = 0


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """Sets the debug mode for synchronizing operations, as ``torch.cuda.set_sync_debug_mode``: "default" (0),
    "warn" (1) or "error" (2). CUDA flags the calls that make the host wait for the device (a copy to the host,
    ``.item()``, ``nonzero``). foo has none: every foo op has completed when it returns, and nothing later waits
    for the device. So no operation is flagged in any mode; the mode is kept for :func:`get_sync_debug_mode`."""
    global _sync_debug_mode
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, int) or debug_mode not in (0, 1, 2):
        raise RuntimeError("invalid value of debug_mode, expected one of 0,1, or 2")
    _sync_debug_mode = debug_mode


def get_sync_debug_mode() -> int:
    """The mode last set by :func:`set_sync_debug_mode` (0 by default)."""
    return _sync_debug_mode


class device:  # noqa: N801 - named like torch.cuda.device
    """Context manager that switches the current foo device and restores it on exit."""

    def __init__(self, device: Any) -> None:
        self.idx = _device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = _C.current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C.set_device(self.idx)

    def __exit__(self, *exc: object) -> None:
        if self.prev_idx != _C.current_device():
            _C.set_device(self.prev_idx)


class device_of(device):  # noqa: N801 - named like torch.cuda.device_of
    """Context manager that makes the current device the device of ``obj`` (if it is on foo)."""

    def __init__(self, obj: torch.Tensor) -> None:
        super().__init__(obj.get_device() if obj.device.type == _BACKEND else -1)


@dataclass(frozen=True)
class FooDeviceProperties:
    """What ``torch.foo.get_device_properties()`` reports, named like torch.cuda's fields where
    one exists: ``major``/``minor`` as :func:`get_device_capability`, ``multi_processor_count``
    the kernels' worker threads, ``total_memory`` the device's limit or the host's memory.
    ``cpu_features`` lists the instruction-set extensions foo's kernels dispatch on that this
    host has (of avx2, fma, avx512f, avx512bw, avx512dq, avx512vl, avx512bf16: no kernel uses AMX)."""

    name: str
    index: int
    total_memory: int
    multi_processor_count: int
    major: int
    minor: int
    cpu_name: str
    cpu_features: tuple[str, ...]
    # Device memory is the host's: the CPU addresses it directly (CUDA's integrated GPUs).
    is_integrated: bool = True

    def __repr__(self) -> str:
        return (
            f"FooDeviceProperties(name='{self.name}', index={self.index}, major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"multi_processor_count={self.multi_processor_count}, cpu_name='{self.cpu_name}', "
            f"cpu_features={list(self.cpu_features)})"
        )


def get_device_name(device: DeviceLike = None) -> str:
    """Name of a foo device."""
    return get_device_properties(device).name


def get_device_properties(device: DeviceLike = None) -> FooDeviceProperties:
    """Properties of a foo device: its memory (limit or host RAM), worker threads, and the CPU
    features its kernels use."""
    index = _C.check_device(_device_index(device))
    major, minor = get_device_capability(index)
    return FooDeviceProperties(
        name=f"foo_rs Rust/Rayon device {index}",
        index=index,
        total_memory=_C.total_memory(index),
        multi_processor_count=_C.num_threads(),
        major=major,
        minor=minor,
        cpu_name=_C.cpu_model_name() or "unknown",
        cpu_features=tuple(name for name, present in _C.cpu_features() if present),
    )


def get_device_capability(device: DeviceLike = None) -> tuple[int, int]:
    """(major, minor) of a foo device, as ``torch.cuda.get_device_capability``'s pair: major is
    the x86-64 microarchitecture level the host reaches (psABI x86-64-v1 to v4: v3 adds AVX2 and
    FMA, v4 AVX-512), minor is 1 where the kernels also have AVX512-BF16, else 0. (0, 0) off
    x86-64. It says which of the kernels' code paths run, nothing about CUDA architectures."""
    _C.check_device(_device_index(device))
    level = _C.x86_64_level()
    return level, int(level > 0 and _C.native_bf16())


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether foo computes in bfloat16: always with ``including_emulation`` (the kernels convert
    through float32 where the CPU has no bfloat16 instructions); otherwise only where it has
    AVX512-BF16, which the bfloat16 matrix multiplications use."""
    if not is_available():
        return False
    return True if including_emulation else _C.native_bf16()
