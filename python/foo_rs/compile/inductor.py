"""Inductor for foo: inductor's C++ CPU kernels, run on foo buffers in place.

foo memory is host memory, so the kernels inductor generates for the CPU (vectorised C++
loops, parallelised with OpenMP) read and write foo buffers through their data pointers with no
copy. What differs from the CPU is the wrapper around them: it allocates buffers with
``foo_rs._C._empty_strided`` (foo's caching allocator, so ``torch.foo.memory_stats()``
counts them), and extern kernels (matmul, convolution, attention) and fallbacks are foo's native
ops called through the dispatcher on foo tensors.

Registered lazily (``torch.foo._inductor_backend_init``, which inductor calls on its first
compile): importing inductor at ``import torch`` would cost seconds.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._inductor import config
from torch._inductor.codegen.common import (
    DeviceOpOverrides,
    get_scheduling_for_device,
    register_backend_for_device,
    register_device_op_overrides,
)
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.ir import GraphPartitionSignature
from torch._inductor.virtualized import V

from .._registration import BACKEND_NAME as BACKEND
from . import aoti, cpp_backend, random_ops
from .teams import FooCppScheduling


class FooDeviceOpOverrides(DeviceOpOverrides):
    """The device-specific snippets of the wrapper. foo has no streams to pass and no device
    context a kernel needs (a C++ kernel works on pointers of any foo device), so like the CPU's
    they are no-ops; buffers carry their device index in their allocation."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"def {name}(_):\n    return 0\n"

    def set_device(self, device_idx: Any) -> str:
        return "pass"

    def synchronize(self) -> str:
        return "pass"

    def device_guard(self, device_idx: Any) -> str:
        return "torch._ops.contextlib.nullcontext()"

    def cpp_kernel_type(self) -> str:
        return "void*"

    def aten_device_type(self) -> str:
        return "at::kPrivateUse1"


class _FooKernelCalls:
    """Calls inductor's C++ kernels on foo as the CPU wrapper does: a plain function call with
    the buffers' data pointers (PythonWrapperCodegen only knows that for "cpu" and "mps"), and
    allocates each buffer on its own foo device."""

    def make_allocation(self, name: str, device: torch.device, dtype: torch.dtype, shape: Any, stride: Any,
                        allocation_shape: Any = None, is_pinned: bool = False) -> str:
        if device.type != BACKEND or device.index is None or config.test_configs.track_memory_lifecycle:
            return super().make_allocation(  # type: ignore[misc]
                name, device, dtype, shape, stride, allocation_shape=allocation_shape, is_pinned=is_pinned
            )
        # PythonWrapperCodegen names only the device type ("foo") and counts on a device guard
        # to select the index, which it emits for GPU-class devices only: on foo:1 the buffers
        # landed on foo:0. Name the device.
        shape_code = self.codegen_python_shape_tuple(shape)  # type: ignore[attr-defined]
        allocation_code = self.codegen_python_shape_tuple(  # type: ignore[attr-defined]
            shape if allocation_shape is None else allocation_shape
        )
        stride_code = self.codegen_python_shape_tuple(stride)  # type: ignore[attr-defined]
        # empty_strided_foo (foo_rs._C._empty_strided, in the wrapper's header) is what
        # empty_strided_cpu is to the CPU's wrappers: 0.6 against 1.9 us per buffer.
        line = f"{name} = empty_strided_foo({allocation_code}, {stride_code}, {dtype}, {device.index})"
        if shape_code != allocation_code:
            line += f".as_strided({shape_code}, {stride_code})"
        return line

    def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *, device: Any = None,
                                     triton: bool = True, **kwargs: Any) -> None:
        device = device or V.graph.get_current_device_or_throw()
        if not triton and device.type == BACKEND:
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))  # type: ignore[attr-defined]
            return
        super()._generate_kernel_call_helper(  # type: ignore[misc]
            kernel_name, call_args, device=device, triton=triton, **kwargs
        )


class FooSubgraphWrapperCodegen(_FooKernelCalls, SubgraphPythonWrapperCodegen):
    """Subgraphs (torch.cond, invoke_subgraph, ...) of a foo graph."""


class FooWrapperCodegen(_FooKernelCalls, PythonWrapperCodegen):
    """The Python wrapper of a foo graph."""

    def write_header(self) -> None:
        super().write_header()
        self.header.writeline("from foo_rs._C import _empty_strided as empty_strided_foo")

    @staticmethod
    def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper: PythonWrapperCodegen | None,
               partition_signatures: GraphPartitionSignature | None = None) -> PythonWrapperCodegen:
        if is_subgraph:
            if subgraph_name is None or parent_wrapper is None:
                raise AssertionError("a subgraph wrapper needs its name and parent")
            return FooSubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return FooWrapperCodegen()


def register() -> None:
    """Registers foo's scheduling, wrappers and device snippets with inductor (idempotent)."""
    cpp_backend.install()
    random_ops.install()  # before compile_fx takes its decomposition table
    register_device_op_overrides(BACKEND, FooDeviceOpOverrides())
    aoti.install()
    if get_scheduling_for_device(BACKEND) is None:
        register_backend_for_device(BACKEND, FooCppScheduling, FooWrapperCodegen, aoti.FooCppWrapperCodegen)
