"""Fake tensors of foo's convolution have the strides foo's kernel gives.

Dynamo, AOTAutograd and inductor plan with fake tensors, and inductor checks every extern
kernel's result against the plan (``assert_size_stride``). For a PrivateUse1 tensor
``torch._C._select_conv_backend`` answers "Overrideable", for which the fake convolution
predicts a contiguous result; foo's convolution gives the CPU's layout instead: channels-last
when the 4-d input or weight is channels-last (src/glue/ops_conv.cpp, ``in_layout_of``). A
channels-last convolution on foo then failed inductor's check (inductor's layout
optimization makes convolutions channels-last). The fake convolution is wrapped so that for foo
it predicts foo's layout; its gradients (``convolution_backward``) are contiguous on foo, as
predicted, and other devices are untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
from torch._prims_common import suggest_memory_format

from .._registration import BACKEND_NAME as BACKEND

_FORWARD = (
    torch.ops.aten.convolution.default,
    torch.ops.aten._convolution.default,
    torch.ops.aten._convolution.deprecated,
)


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs.get(name)


def _foo_layout(original: Callable[..., Any]) -> Callable[..., Any]:
    def conv(fake_mode: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(fake_mode, func, *args, **kwargs)
        if func not in _FORWARD or not isinstance(out, torch.Tensor) or out.device.type != BACKEND:
            return out
        if out.dim() != 4:
            return out
        operands = (_argument(args, kwargs, 0, "input"), _argument(args, kwargs, 1, "weight"))
        if any(isinstance(t, torch.Tensor) and suggest_memory_format(t) == torch.channels_last for t in operands):
            with fake_mode:
                return out.contiguous(memory_format=torch.channels_last)
        return out

    conv._foo_rs = True  # type: ignore[attr-defined]
    return conv


def install(fake_impls: ModuleType) -> None:
    """Idempotent."""
    table = fake_impls.op_implementations_dict
    for op in _FORWARD:
        impl = table.get(op)
        if impl is not None and not getattr(impl, "_foo_rs", False):
            table[op] = _foo_layout(impl)
