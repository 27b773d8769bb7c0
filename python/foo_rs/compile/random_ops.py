"""Random ops in compiled foo graphs are foo's kernels, drawing from foo's generator.

foo graphs are compiled with ``fallback_random=True`` (graph_options.py), which keeps most
random ops as calls of the eager op. This module does the rest:

- Even with ``fallback_random`` inductor decomposes a few random ops (``bernoulli(p)`` into
  ``rand_like(p) < p``, ``randint``, ``rrelu``), which draws other numbers than foo's kernels.
  Their decompositions step aside for foo tensors (a decomposition that returns NotImplemented
  leaves the op as it is), and the op gets a fallback lowering: foo's native kernel. Other
  devices never reach that lowering: their op is decomposed first. Changing the table's
  entries, rather than passing compile_fx a table of its own, keeps inductor's FX graph cache
  working (it cannot hash a table of functions).
- foo's ``native_dropout`` returns contiguous tensors whatever its input's layout (CPU's, and
  the meta kernel inductor plans with, keep the input's strides), and draws its mask in logical
  order either way. Inductor checks a fallback's output strides against the plan, so on foo the
  op is given a contiguous input, for which both agree; the numbers are the same.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from .._registration import BACKEND_NAME as BACKEND


def _on_foo(values: Any) -> bool:
    from torch._inductor import ir

    for value in values:
        if isinstance(value, torch.Tensor) and value.device.type == BACKEND:
            return True
        if isinstance(value, ir.IRNode) and ir.get_device_type(value) == BACKEND:
            return True
    return False


def _draws_random_numbers(op: Any) -> bool:
    """A random op, except those random only through a dropout argument (attention, RNNs):
    their decompositions draw it with ``native_dropout``, which stays foo's."""
    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
        return False
    if torch.Tag.nondeterministic_seeded not in op.tags:
        return False
    return not any(a.name in ("dropout", "dropout_p") for a in op._schema.arguments)


def _not_on_foo(decomposition: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(decomposition)
    def decompose(*args: Any, **kwargs: Any) -> Any:
        if _on_foo((*args, *kwargs.values())):
            return NotImplemented  # the op itself: foo's kernel
        return decomposition(*args, **kwargs)

    decompose._foo_rs = True  # type: ignore[attr-defined]
    return decompose


def _contiguous_on_foo(constraint: Callable[..., Any]) -> Callable[..., Any]:
    def native_dropout_constraint(fx_node: Any, *args: Any, **kwargs: Any) -> Any:
        from torch._inductor import lowering

        if _on_foo(args[:1]):
            return lowering.require_contiguous(fx_node, *args, **kwargs)
        return constraint(fx_node, *args, **kwargs)

    native_dropout_constraint._foo_rs = True  # type: ignore[attr-defined]
    return native_dropout_constraint


def install() -> None:
    """Idempotent."""
    from torch._inductor import decomposition, lowering

    table = decomposition.decompositions
    for op, fn in list(table.items()):
        if _draws_random_numbers(op) and not getattr(fn, "_foo_rs", False):
            table[op] = _not_on_foo(fn)
            if op not in lowering.lowerings:
                lowering.make_fallback(op, warn=False, override_decomp=True)
    dropout = torch.ops.aten.native_dropout.default
    constraint = lowering._maybe_layout_constraints.get(dropout)
    if constraint is not None and not getattr(constraint, "_foo_rs", False):
        lowering.add_layout_constraint(dropout, _contiguous_on_foo(constraint))
