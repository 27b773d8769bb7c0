"""DLPack export of foo tensors: ``torch.from_dlpack(foo_tensor)``, ``np.from_dlpack(foo_tensor)``,
``foo_tensor.__dlpack__()`` / ``__dlpack_device__()``, ``torch.utils.dlpack.to_dlpack(foo_tensor)``.

DLPack names a tensor's memory by device type; it has no foo. foo memory is ordinary host
memory, which DLPack calls kDLCPU, so a foo tensor exports as kDLCPU, zero-copy: the consumer
reads and writes the foo tensor's own bytes, and the capsule keeps its storage alive. A consumer
therefore gets a host tensor (``torch.from_dlpack(foo_tensor)`` is a CPU tensor over the same
memory); ``.to("foo")`` makes a foo tensor of it again (a copy). foo runs every kernel before it
returns, so there is no stream to synchronize with: a stream argument other than None / -1 is
refused, as it is for CPU tensors.

torch's own export raises "Unknown device type foo for Dlpack"; these wrappers handle foo
tensors and hand every other tensor to torch's unchanged.
"""

from __future__ import annotations

import enum
from typing import Any

import torch
import torch.utils.dlpack
from torch.overrides import has_torch_function_unary

from ._host_view import host_view, is_foo

_torch_dlpack = torch.Tensor.__dlpack__
_torch_dlpack_device = torch.Tensor.__dlpack_device__
_torch_to_dlpack = torch.utils.dlpack.to_dlpack


def _check_exportable(t: torch.Tensor) -> None:
    # The refusals of torch's own __dlpack__, which the CPU view would not trip (it has no autograd
    # history and no conjugate bit of its own).
    if t.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if t.is_conj():
        raise BufferError("Can't export tensors with the conjugate bit set")
    if t.layout != torch.strided:
        raise BufferError("Can't export tensors with layout other than torch.strided")


def _check_cpu_device(dl_device: Any) -> None:
    if dl_device is None:
        return
    kind, index = dl_device
    if int(kind) != int(torch.utils.dlpack.DLDeviceType.kDLCPU) or index != 0:
        raise BufferError(
            f"a foo tensor exports through DLPack as host memory (kDLCPU, 0), not as {tuple(dl_device)}: "
            "import it on the CPU and move it there with .to(...)"
        )


def __dlpack__(
    self: torch.Tensor,
    *,
    stream: Any | None = -1,
    max_version: tuple[int, int] | None = None,
    dl_device: tuple[enum.IntEnum, int] | None = None,
    copy: bool | None = None,
    read_only: bool = False,
) -> Any:
    if not is_foo(self) or has_torch_function_unary(self):
        return _torch_dlpack(
            self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy, read_only=read_only
        )
    _check_exportable(self)
    _check_cpu_device(dl_device)
    if stream is not None and stream != -1:
        raise BufferError(
            f"stream={stream!r}: foo tensors export as host memory, whose consumers pass no stream (None); "
            "foo's kernels have all finished when they return"
        )
    return _torch_dlpack(
        host_view(self), stream=None, max_version=max_version, dl_device=dl_device, copy=copy, read_only=read_only
    )


def __dlpack_device__(self: torch.Tensor) -> tuple[enum.IntEnum, int]:
    if not is_foo(self) or has_torch_function_unary(self):
        return _torch_dlpack_device(self)
    return torch.utils.dlpack.DLDeviceType.kDLCPU, 0


def to_dlpack(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    """torch.utils.dlpack.to_dlpack, exporting a foo tensor as host memory (zero-copy)."""
    if isinstance(tensor, torch.Tensor) and is_foo(tensor):
        _check_exportable(tensor)
        _check_cpu_device(kwargs.get("dl_device", args[0] if args else None))
        tensor = host_view(tensor)
    return _torch_to_dlpack(tensor, *args, **kwargs)


to_dlpack.__doc__ = (_torch_to_dlpack.__doc__ or "") + "\n\nfoo tensors export as host memory (kDLCPU), zero-copy."


def install() -> None:
    """Routes DLPack export of foo tensors through the wrappers above (once per process)."""
    if getattr(torch.Tensor.__dlpack__, "_foo_rs", False):
        return
    __dlpack__._foo_rs = True  # type: ignore[attr-defined]
    __dlpack__.__doc__ = _torch_dlpack.__doc__
    __dlpack_device__.__doc__ = _torch_dlpack_device.__doc__
    torch.Tensor.__dlpack__ = __dlpack__  # type: ignore[method-assign]
    torch.Tensor.__dlpack_device__ = __dlpack_device__  # type: ignore[method-assign]
    torch.utils.dlpack.to_dlpack = to_dlpack
    if getattr(torch, "to_dlpack", None) is _torch_to_dlpack:
        torch.to_dlpack = to_dlpack
