"""Inductor options for foo graphs: what makes inductor treat a foo graph as the CPU graph it
compiles to, and keep foo's random ops.

Inductor has no per-device configuration, so ``torch._inductor.compile_fx.compile_fx`` (the
entry point of ``torch.compile``'s default backend and of AOTInductor) is wrapped: a graph with a
foo tensor among its inputs or values is compiled with the options below patched in, each one
unless the caller set it (``torch.compile(m, options={...})`` wins). Passed as config patches,
they also cover the backward graph, which AOTAutograd compiles later, outside this call. Graphs
on other devices are untouched.

- ``fallback_random=True``: by default inductor replaces ``rand``/``randn``/dropout/... with its
  own counter-based RNG, seeded once per graph, so a compiled model draws other numbers than the
  eager one under the same seed (on every device). foo's random ops are native kernels on foo's
  Philox generator (src/runtime), which inductor's C++ cannot reproduce; with the fallback each
  random op stays a call of foo's native op, in eager order, so ``torch.manual_seed(s)`` gives
  the compiled model the eager model's numbers (see random_ops.py for the rest of it).
- ``cuda_backend="cpp"``: inductor's ``get_current_backend(device)`` answers
  ``config.cpu_backend`` for "cpu" and ``config.cuda_backend`` for any device it does not name.
  foo's kernels are the C++ backend's, and the codegen asks this question to decide, e.g.,
  whether bfloat16 math is upcast the Triton way. Not patched when the graph also holds
  tensors of a device that inductor compiles with ``cuda_backend`` (cuda, ...).
- ``force_layout_optimization=True``: inductor makes the convolutions of a CPU graph
  channels-last whenever oneDNN is there, and those of other devices by a heuristic tuned on
  cuDNN, which keeps NCHW when every convolution has 64 channels or fewer. foo's float32
  convolutions compute channels-last natively (src/kernels/conv: packed and grid forwards,
  input gradients per phase, GEMM weight gradients), as oneDNN does, so foo graphs get the
  CPU's rule (measured on a Zen 3, 2 threads, benches/compile.py's CNN, compiled foo /
  compiled CPU: training 1.12 -> 1.02, inference 1.22 -> 1.07).

The generated kernels keep inductor's OpenMP parallelism, on foo's threads: their OpenMP calls
bind to foo's team runtime (teams.py), not libgomp. Until that existed, foo graphs were compiled
with ``cpp.threads=1``, because a libgomp team beside foo's pool put two spinning pools on the
same cores, and one started from autograd's foo device thread (where a foo graph's backward
runs) made a second libgomp team in the process, after which libgomp counted more threads than
cores and made every team sleep between regions: the eager CPU work of the same process ran
1.5-2x slower for good (Xeon, 2 threads: an MLP's eager CPU training step 7.4 -> 11.6-13.0 ms
after one compiled foo training step).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import torch

from .._registration import BACKEND_NAME as BACKEND

_outer_call: contextvars.ContextVar[bool] = contextvars.ContextVar("foo_rs_compile_fx", default=False)

# Devices whose kernels get_current_backend() does not take from config.cuda_backend.
_OWN_BACKEND_DEVICES = frozenset({"cpu", "mps", "xpu", "tpu", "meta", BACKEND})


def _device_type(value: Any) -> str | None:
    if isinstance(value, torch.Tensor):
        return value.device.type
    if isinstance(value, torch.device):
        return value.type
    if isinstance(value, str):
        try:
            return torch.device(value).type
        except RuntimeError:
            return None
    return None


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


def device_types(model: Any, example_inputs: Iterable[Any]) -> set[str]:
    """The device types of a graph's inputs and of the values it makes."""
    types = {_device_type(x) for x in example_inputs} | {_device_type(v) for v in _graph_values(model)}
    types.discard(None)
    return types  # type: ignore[return-value]


def foo_graph_options(types: set[str]) -> dict[str, Any]:
    """The options a graph with these device types is compiled with (none without foo)."""
    if BACKEND not in types:
        return {}
    options: dict[str, Any] = {"fallback_random": True, "force_layout_optimization": True}
    if types <= _OWN_BACKEND_DEVICES:
        options["cuda_backend"] = "cpp"
    return options


def _current(config: ModuleType, key: str) -> Any:
    """The value of a config key, nested ones ("cpp.threads") included."""
    return functools.reduce(getattr, key.split("."), config)


def wrap_compile_fx(module: ModuleType) -> None:
    """Makes ``module.compile_fx`` compile foo graphs with ``foo_graph_options`` (idempotent)."""
    original: Callable[..., Any] = module.compile_fx
    if getattr(original, "_foo_rs_options", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def compile_fx(*args: Any, **kwargs: Any) -> Any:
        from torch._inductor import config

        # compile_fx calls itself once it has applied its config patches (and inductor may
        # compile subgraphs): the outermost call decides, nested ones inherit its options.
        if _outer_call.get():
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        patches = bound.arguments.get("config_patches") or {}
        types = device_types(bound.arguments["model_"], bound.arguments["example_inputs_"])
        # The caller's options (and a config set by hand) win.
        extra = {k: v for k, v in foo_graph_options(types).items()
                 if k not in patches and _current(config, k) == config._config[k].default}
        if extra:
            bound.arguments["config_patches"] = {**patches, **extra}
        token = _outer_call.set(True)
        try:
            return original(*bound.args, **bound.kwargs)
        finally:
            _outer_call.reset(token)

    compile_fx._foo_rs_options = True  # type: ignore[attr-defined]
    module.compile_fx = compile_fx
