"""Random ops in compiled foo graphs draw from foo's generator, as in eager mode.

By default inductor replaces ``rand``/``randn``/dropout/... with its own counter-based RNG,
seeded once per graph, so a compiled model draws other numbers than the eager one under the same
seed (on every device). foo's random ops are native kernels on foo's Philox generator
(src/runtime), which inductor's C++ cannot reproduce; for foo graphs inductor is therefore run
with ``fallback_random=True``: each random op stays a call of foo's native op, in the order
eager runs them, so ``torch.manual_seed(s)`` gives the compiled model the eager model's numbers.

Inductor has no per-device setting for this, so ``torch._inductor.compile_fx.compile_fx`` (the
entry point of ``torch.compile``'s default backend and of AOTInductor) is wrapped: a graph with
a foo tensor among its inputs or values is compiled with ``fallback_random=True`` unless the
caller set ``fallback_random`` itself (``torch.compile(m, options={"fallback_random": False})``
keeps inductor's RNG). Passed as a config patch, it also covers the backward graph, which
AOTAutograd compiles later, outside this call. Graphs on other devices are untouched.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import torch

from .interface import BACKEND

_OPTION = "fallback_random"


def _is_foo(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.device.type == BACKEND
    if isinstance(value, torch.device):
        return value.type == BACKEND
    if isinstance(value, str):
        return value == BACKEND or value.startswith(BACKEND + ":")
    return False


def _graph_values(model: Any) -> Iterable[Any]:
    graph = getattr(model, "graph", None)
    for node in getattr(graph, "nodes", ()):
        for key in ("val", "example_value"):
            value = node.meta.get(key)
            if isinstance(value, (list, tuple)):
                yield from value
            else:
                yield value
        yield node.kwargs.get("device")


def uses_foo(model: Any, example_inputs: Iterable[Any]) -> bool:
    """True when a graph takes or makes foo tensors."""
    return any(_is_foo(x) for x in example_inputs) or any(_is_foo(v) for v in _graph_values(model))


def wrap_compile_fx(module: ModuleType) -> None:
    """Makes ``module.compile_fx`` compile foo graphs with foo's random ops (idempotent)."""
    original: Callable[..., Any] = module.compile_fx
    if getattr(original, "_foo_rs_random", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def compile_fx(*args: Any, **kwargs: Any) -> Any:
        from torch._inductor import config

        bound = signature.bind(*args, **kwargs)
        patches = bound.arguments.get("config_patches") or {}
        if (
            not config.fallback_random
            and _OPTION not in patches
            and uses_foo(bound.arguments["model_"], bound.arguments["example_inputs_"])
        ):
            bound.arguments["config_patches"] = {**patches, _OPTION: True}
        return original(*bound.args, **bound.kwargs)

    compile_fx._foo_rs_random = True  # type: ignore[attr-defined]
    module.compile_fx = compile_fx
