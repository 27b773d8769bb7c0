"""Which ops ran natively in Rust and which went through the counted CPU fallback."""

from __future__ import annotations

import torch

from . import _C


def fallback_counts() -> dict[str, int]:
    """Op name (``aten`` name with overload) -> calls that ran through the CPU fallback."""
    return dict(_C.fallback_counts())


def native_counts() -> dict[str, int]:
    """Op name -> calls served by a native foo kernel (ops that ran at least once)."""
    return dict(_C.native_counts())


def reset_op_counts() -> None:
    """Forgets both counts (the fallback warns again for each op afterwards)."""
    _C.reset_op_counts()


def native_ops() -> list[str]:
    """Every ATen op with a native foo kernel, as registered in the dispatcher."""
    regs = torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
    return sorted(r.removeprefix("aten::") for r in regs if r.startswith("aten::"))
