"""The C++ wrapper of a foo graph: ``torch.compile(m, options={"cpp_wrapper": True})`` and
AOTInductor (``torch._inductor.aoti_compile_and_package`` / ``aoti_load_package``).

It is inductor's CPU C++ wrapper (``CppWrapperCpu``) with three differences:

- **Buffers are foo tensors**: the wrapper allocates them with ``aoti_torch_empty_strided(...,
  aoti_torch_device_type_privateuse1(), index)``, i.e. foo's caching allocator (what
  ``CppWrapperCpu`` emits for a buffer on foo, unchanged). The C++ kernels are the CPU's, run on
  foo buffers in place (foo memory is host memory), as with the Python wrapper (inductor.py).
- **Extern kernels and fallback ops go through the dispatcher**: inductor's C++ wrapper calls
  them through per-device C shims (``aoti_torch_<device>_<op>``) that PyTorch builds for cpu,
  cuda, xpu and mps only; the CPU's call the CPU's kernels directly (``at::cpu::...``), which is
  not foo's op. In a foo graph every extern kernel (mm, addmm, bmm, convolution, ...) and every
  fallback op is instead a boxed call of the op through ``c10::Dispatcher`` on the foo tensors
  (the code inductor emits for cpp_wrapper's runtime-lookup fallbacks,
  ``generate_fallback_kernel_with_runtime_lookup_boxed``), in JIT and AOT mode alike, so each
  runs foo's native kernel as in eager mode. An op whose schema that path cannot box (a return
  other than tensors, e.g. the fused attention's integers) keeps inductor's own runtime lookup:
  in JIT mode a call of the op from Python (dispatcher again), in AOT mode the proxy executor.
- **AOTInductor's device and constants**: the package's device is "foo" (its AOTI_DEVICE_KEY),
  and foo's extension registers a model runner for it in C++ (src/glue/aoti_runner.cpp,
  ``RegisterAOTIModelRunner``). The AOTI runtime parses the container's device string with
  ``parse_device_str`` (aoti_runtime/model_base.h), which takes cpu|cuda|xpu|mps only, so the
  runner passes "cpu:N": N is the foo device the generated code allocates on
  (``this->device_idx_``). The runtime loads the model's constants into tensors over its
  constants blob, memory it mallocs; foo refuses to wrap a pointer that is not foo memory as a
  foo tensor (``getDeviceFromPtr``), so foo's constants are declared host constants, and the
  model's first run uploads each to a foo tensor on foo:N (foo's copy into foo's allocator, once,
  as a GPU model's load copies its constants to the device) in the constants map and array.

Caveats: until the first run, ``extract_constants_map`` gives the host constants, and the
runtime's host copy of the constants stays allocated beside the foo one; constants given with
``load_constants``/``update_constant_buffer`` are host tensors (the declared device). Control
flow (``torch.cond``, ...) under the C++ wrapper is untested: ``create`` makes no subgraph
wrapper, as ``CppWrapperCpu.create`` does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._inductor import codecache, ir
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.wrapper import PythonWrapperCodegen
from torch._inductor.ir import GraphPartitionSignature
from torch._inductor.virtualized import V

from .._registration import BACKEND_NAME as BACKEND


def _output_name(out: Any) -> Any:
    """The C++ name of a fallback op's output, as ``generate_fallback_kernel_with_runtime_lookup``
    names it (a list for several)."""
    if out is None:
        return None
    if isinstance(out, (ir.MultiOutput, ir._CollectiveKernel, ir.FallbackKernel)):
        return out.get_name()
    if isinstance(out, ir.MutationOutput):
        names = out.get_mutation_names()
        if len(names) != 1:
            raise AssertionError("a mutation output names one buffer")
        return names[0]
    if isinstance(out, (list, tuple)):
        return [_output_name(o) for o in out]
    if isinstance(out, int):
        return str(out)
    raise AssertionError(f"unexpected output: {type(out)}")


def _schema_args(node: ir.ExternKernel) -> list[Any]:
    """A kernel's arguments in its op's schema order: IR nodes for tensors, Python values for
    the rest (what ``export_extern_kernel_node`` gives, without serializing anything)."""
    if isinstance(node, ir.FallbackKernel):
        args, kwargs = node.unflatten_args(node.inputs, node.constant_args)
    else:  # extern kernels (ExternKernelOut, ExternKernelAlloc): tensors, then the rest
        args, kwargs = [*node.inputs, *node.constant_args], dict(node.kwargs)
    args = node.fill_non_provided_args(args, kwargs)
    return [*args, *(node.get_kwargs_value(key, **kwargs) for key in node.ordered_kwargs_for_cpp_kernel)]


def _wrap_cpp_wrapper_header(original: Callable[..., str]) -> Callable[..., str]:
    def _get_cpp_wrapper_header(device: str, aot_mode: bool = False) -> str:
        # The header AOTInductor precompiles for the wrapper: foo's wrapper is the CPU's C++.
        if device.split(":", maxsplit=1)[0] == BACKEND:
            device = "cpu"
        return original(device, aot_mode)

    _get_cpp_wrapper_header._foo_rs = True  # type: ignore[attr-defined]
    return _get_cpp_wrapper_header


def install() -> None:
    """Idempotent: the wrapper header of a foo graph is the CPU's."""
    if not getattr(codecache._get_cpp_wrapper_header, "_foo_rs", False):
        codecache._get_cpp_wrapper_header = _wrap_cpp_wrapper_header(codecache._get_cpp_wrapper_header)


class FooCppWrapperCodegen(CppWrapperCpu):
    """The C++ wrapper of a foo graph (see the module's docstring)."""

    def __init__(self) -> None:
        # The wrapper and its kernels are compiled as the CPU's C++ (headers, vector ISA, build
        # options); the device of each buffer and op is its own (foo).
        self.device = "cpu"
        super().__init__()

    @staticmethod
    def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper: PythonWrapperCodegen | None,
               partition_signatures: GraphPartitionSignature | None = None) -> FooCppWrapperCodegen:
        return FooCppWrapperCodegen()

    @staticmethod
    def get_device_include_path_jit(device: str) -> str:
        return CppWrapperCpu.get_device_include_path_jit("cpu" if device == BACKEND else device)

    @staticmethod
    def get_device_include_path_aot(device: str) -> str:
        return CppWrapperCpu.get_device_include_path_aot("cpu" if device == BACKEND else device)

    # --- extern kernels and fallback ops: foo's ops, through the dispatcher -----------------

    def _dispatch(self, node: ir.ExternKernel, raw_args: Sequence[Any], output_args: Sequence[str | None],
                  raw_outputs: Sequence[Any]) -> bool:
        """Emits a boxed dispatcher call of ``node``'s op; False where it cannot."""
        op = node.op_overload
        if not isinstance(op, torch._ops.OpOverload) or not self._compatible_with_cpp_boxed_dispatch(op):
            return False
        self.generate_fallback_kernel_with_runtime_lookup_boxed(op, raw_args, output_args, raw_outputs)
        return True

    def generate_extern_kernel_out(self, node: ir.ExternKernelOut) -> None:
        op = node.op_overload
        if isinstance(op, torch._ops.OpOverload):
            out = node.output_view or node
            raw = [out if arg.is_out else value
                   for arg, value in zip(op._schema.arguments, _schema_args(node))]
            node.codegen_comment(self)
            if self._dispatch(node, raw, [], []):
                return
        super().generate_extern_kernel_out(node)

    def _generate_extern_kernel_alloc_helper(self, extern_kernel: ir.ExternKernelAlloc, args: list[str]) -> None:
        if getattr(extern_kernel, "outputs", None):
            outputs = list(extern_kernel.outputs)
            names = [_output_name(o) for o in outputs]
        elif isinstance(extern_kernel.layout, ir.NoneLayout):
            outputs, names = [], []
        else:
            outputs, names = [extern_kernel], [extern_kernel.get_name()]
        if not self._dispatch(extern_kernel, _schema_args(extern_kernel), names, outputs):
            super()._generate_extern_kernel_alloc_helper(extern_kernel, args)

    def generate_fallback_kernel(self, node: ir.FallbackKernel) -> None:
        op = node.op_overload
        if isinstance(op, torch._ops.OpOverload) and node.python_kernel_name is not None:
            # An op the boxed call cannot take goes to inductor's runtime lookup, which in AOT
            # mode is the proxy executor: it needs the op exported (V.extern_kernel_nodes).
            boxed = self._compatible_with_cpp_boxed_dispatch(op)
            raw_args = _schema_args(node) if boxed else node.export_extern_kernel_node()
            self.generate_fallback_kernel_with_runtime_lookup(
                node.get_name(), node.python_kernel_name,
                lambda: [*node.codegen_args(), *node.codegen_kwargs()],
                op, raw_args, node.codegen_outputs(),
            )
            return
        super().generate_fallback_kernel(node)

    def generate_fallback_kernel_with_runtime_lookup(self, buf_name: str, python_kernel_name: str,
                                                     get_args: Callable[[], Sequence[str]], op_overload: Any,
                                                     raw_args: Sequence[Any], outputs: Sequence[Any]) -> None:
        if isinstance(op_overload, torch._ops.OpOverload) and self._compatible_with_cpp_boxed_dispatch(op_overload):
            if not op_overload._schema.returns:
                output_args: list[str | None] = []
            elif isinstance(name := _output_name(outputs), str):
                output_args = [name]
            else:
                output_args = name
            self.generate_fallback_kernel_with_runtime_lookup_boxed(op_overload, raw_args, output_args, outputs)
            return
        super().generate_fallback_kernel_with_runtime_lookup(
            buf_name, python_kernel_name, get_args, op_overload, raw_args, outputs
        )

    # --- AOTInductor: the model's constants ----------------------------------------------

    def codegen_model_constructor(self) -> None:
        # foo constants pass CppWrapperCpu's check (constants on the model's device or the CPU),
        # and are declared host (CPU) constants: the AOTI runtime loads them into host tensors
        # over the model's constants blob (malloc'd memory, which foo rightly refuses to wrap as
        # foo memory), and the first run uploads them to foo (_write_constants_unpacking).
        self.device = BACKEND
        try:
            super().codegen_model_constructor()
        finally:
            self.device = "cpu"
        declared = ".device_type = cached_torch_device_type_privateuse1;"
        lines = self.prefix._lines
        for i, line in enumerate(lines):
            if isinstance(line, str) and line.lstrip().startswith("constants_info_[") and line.endswith(declared):
                lines[i] = line.replace(declared, ".device_type = cached_torch_device_type_cpu;")
                self.used_cached_devices.add("cpu")

    def _write_constants_unpacking(self) -> None:
        if V.graph.aot_mode and V.graph.constants:
            self.prefix.splice_aot(_UPLOAD_CONSTANTS)
        super()._write_constants_unpacking()


# At a model's first run, each host constant becomes a foo tensor on the model's foo device (a
# copy by foo's copy_ into foo's allocator, once: what a GPU model's load does with its
# constants), replacing the host tensor in the model's constants map and array.
_UPLOAD_CONSTANTS = """
for (size_t foo_i = 0; foo_i < constants_->size(); ++foo_i) {
    AtenTensorHandle foo_host = constants_->at(foo_i);
    if (foo_host == nullptr) continue;
    int32_t foo_device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(foo_host, &foo_device_type));
    if (foo_device_type == aoti_torch_device_type_privateuse1()) continue;
    int64_t foo_ndim;
    int64_t* foo_sizes;
    int64_t* foo_strides;
    int32_t foo_dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dim(foo_host, &foo_ndim));
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_sizes(foo_host, &foo_sizes));
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_strides(foo_host, &foo_strides));
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(foo_host, &foo_dtype));
    AtenTensorHandle foo_constant;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(foo_ndim, foo_sizes, foo_strides, foo_dtype,
        aoti_torch_device_type_privateuse1(), this->device_idx_, &foo_constant));
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_copy_(foo_constant, foo_host, 0));
    (*constants_map_)[this->constant_name(static_cast<int64_t>(foo_i))] = RAIIAtenTensorHandle(foo_constant);
    constants_->at(foo_i) = ConstantHandle(foo_constant);
}
"""
