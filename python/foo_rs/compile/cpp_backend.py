"""Where inductor asks "is this the CPU's C++ backend?", foo answers as the CPU does.

foo graphs are compiled by inductor's C++ backend (``CppScheduling``), like CPU graphs, but
inductor takes some C++-specific decisions by testing ``device.type == "cpu"``. For a foo node
those tests take the GPU branch, which either does not fit C++ code or computes wrong results:

- ``BaseSchedulerNode.is_cpu()``: four fusion heuristics (loop reordering, reindexing, index
  inversion, tiling analysis) skip C++ nodes, which do not support them (on a foo node
  ``_try_reindex_pointwise_for_reduction`` fails on the C++ loop groups);
- ``ir.is_cpu()``: the realization heuristics tuned for C++ kernels (op count, accumulated
  reads, recomputing ``exp``/``log`` for each use);
- the lowerings of argmax/argmin over several dimensions (``x.argmax()`` of a 3-d tensor) and
  of max pooling's indices: the C++ backend may iterate the reduced dimensions in memory order,
  so for "cpu" with ``cpu_backend == "cpp"`` the lowering pairs each value with its logical
  (row-major) index; without it a permuted input gave a wrong argmax on foo;
- ``div_prim``: division by a constant stays a division on the CPU (a multiplication by the
  reciprocal rounds differently, pytorch#157959), as in eager mode;
- ``FxGraphHashDetails._contains_cpu_tensor``: a graph that generates C++ kernels has the
  thread count they are compiled for in its FX graph cache key; a foo graph does too (without
  it, kernels compiled for 2 threads were reused under ``torch.set_num_threads(1)``);
- ``use_two_step_variance``: the C++ backend computes small variances (up to
  ``config.cpp.use_two_step_variance_threshold`` elements) in two passes, others with Welford.

``install()`` makes each of these answer for foo as for the CPU. Each is a function inductor
looks up at call time (a method, or a global of its module), and each wrapper only changes the
answer for foo.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy
import torch
from torch._inductor import codecache, config, inductor_prims, ir, lowering
from torch._inductor.scheduler import BaseSchedulerNode
from torch._inductor.utils import sympy_product
from torch._inductor.virtualized import ops

from .._registration import BACKEND_NAME as BACKEND

_ARG_REDUCTIONS = frozenset({
    "argmax", "argmin", "argmax_value", "argmin_value", "argmax_with_value", "argmin_with_value",
})


def _is_foo(x: Any) -> bool:
    return ir.get_device_type(x) == BACKEND


def _cpp_kernels_here(x: Any) -> bool:
    return _is_foo(x) and config.cpu_backend == "cpp"


def _mark(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn._foo_rs = True  # type: ignore[attr-defined]
    return fn


def _installed(fn: Any) -> bool:
    return getattr(fn, "_foo_rs", False)


def _node_is_cpp(self: BaseSchedulerNode) -> bool:
    device = self.get_device()
    return device is not None and device.type in ("cpu", BACKEND)


def _wrap_ir_is_cpu(original: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def is_cpu(x: Any) -> bool:
        return original(x) or _is_foo(x)

    return _mark(is_cpu)


def _wrap_make_reduction_inner(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    def _make_reduction_inner(x: Any, *args: Any, reduction_type: str | None = None,
                              **kwargs: Any) -> dict[str, Any]:
        result = original(x, *args, reduction_type=reduction_type, **kwargs)
        sizes = list(result["reduction_ranges"])
        if reduction_type not in _ARG_REDUCTIONS or len(sizes) < 2 or not _cpp_kernels_here(x):
            return result
        loader = result["inner_fn"]

        def with_logical_index(index: Any, reduction_index: Any) -> tuple[Any, Any]:
            # As inductor's lowering does for the CPU: the row-major index over the reduced
            # dimensions, whatever order the kernel visits them in.
            rindex = [sympy.expand(i) for i in reduction_index]
            linear = rindex[0]
            for i in range(1, len(rindex)):
                linear = linear * sizes[i] + rindex[i]
            return loader(index, reduction_index), ops.index_expr(linear, torch.int64)

        return {**result, "inner_fn": with_logical_index}

    return _mark(_make_reduction_inner)


def _wrap_pool_argmax_inner_fn(original: Callable[..., Any]) -> Callable[..., Any]:
    def _pool_argmax_inner_fn(x: Any, kernel_size: Any, inner_fn: Callable[..., Any]) -> Callable[..., Any]:
        if len(kernel_size) == 1 or not _cpp_kernels_here(x):
            return original(x, kernel_size, inner_fn)

        def inner_fn_with_index(idx: Any, reduction_idx: Any) -> tuple[Any, Any]:
            logical_index = inductor_prims._flatten_index(reduction_idx, kernel_size)
            return inner_fn(idx, reduction_idx), ops.index_expr(logical_index, torch.int64)

        return inner_fn_with_index

    return _mark(_pool_argmax_inner_fn)


def _wrap_use_two_step_variance(original: Callable[..., bool]) -> Callable[..., bool]:
    def use_two_step_variance(x: Any, axis: Any, keepdim: bool, input_dtype: torch.dtype) -> bool:
        if not _is_foo(x):
            return original(x, axis, keepdim, input_dtype)
        # inductor's "cpu" branch: a size threshold, no split check.
        axis = lowering._validate_reduction_axis(x, axis)
        kwargs = lowering._make_reduction_inner(x, axis=axis, keepdims=keepdim, dtype=None,
                                                override_return_dtype=None)
        numel = sympy_product(kwargs["reduction_ranges"])
        if not isinstance(numel, sympy.Integer):
            return False
        return int(numel) <= config.cpp.use_two_step_variance_threshold and sympy_product(kwargs["ranges"]) != 1

    return _mark(use_two_step_variance)


def _foo_div_prim(original: Callable[..., Any]) -> Callable[..., Any]:
    def div_prim(a: Any, b: Any) -> Any:
        integral = all(lowering.is_boolean_type(x) or lowering.is_integer_type(x) for x in (a, b))
        if integral or not _is_foo(a) or lowering.get_constant_value(b) is None:
            return original(a, b)
        # inductor's "cpu" branch: a true division, as for a tensor divisor.
        return lowering.make_pointwise(ops.truediv)(a, b)

    return div_prim


def _install_div_prim() -> None:
    registered = lowering.div_prim
    if _installed(registered):
        return
    # div_prim is prims.div's registered lowering (the wrapper that broadcasts and promotes its
    # inputs) and what aten.div's lowering calls: register foo's decision the same way, and
    # point both at it.
    wrapped = lowering.register_lowering([torch.ops.prims.div], broadcast=True)(
        _foo_div_prim(registered.__wrapped__)
    )
    lowering.div_prim = _mark(wrapped)


def _wrap_contains_cpu_tensor(original: Callable[[Any], bool]) -> classmethod:  # type: ignore[type-arg]
    def _contains_cpu_tensor(cls: type, value: object) -> bool:
        if isinstance(value, torch.Tensor):
            return value.device.type in ("cpu", BACKEND)
        return original(value)  # containers: it recurses through cls._contains_cpu_tensor

    return classmethod(_mark(_contains_cpu_tensor))


def install() -> None:
    """Idempotent."""
    if not _installed(BaseSchedulerNode.is_cpu):
        BaseSchedulerNode.is_cpu = _mark(_node_is_cpp)  # type: ignore[method-assign]
    if not _installed(ir.is_cpu):
        ir.is_cpu = _wrap_ir_is_cpu(ir.is_cpu)
    if not _installed(lowering._make_reduction_inner):
        lowering._make_reduction_inner = _wrap_make_reduction_inner(lowering._make_reduction_inner)
    if not _installed(lowering._pool_argmax_inner_fn):
        lowering._pool_argmax_inner_fn = _wrap_pool_argmax_inner_fn(lowering._pool_argmax_inner_fn)
    _install_div_prim()
    details = codecache.FxGraphHashDetails
    if not _installed(details._contains_cpu_tensor):
        details._contains_cpu_tensor = _wrap_contains_cpu_tensor(details._contains_cpu_tensor)
    if not _installed(lowering.use_two_step_variance):
        lowering.use_two_step_variance = _wrap_use_two_step_variance(lowering.use_two_step_variance)
