"""The C++ wrapper of a foo graph (``cpp_wrapper=True``, AOTInductor): not available.

Inductor's C++ wrapper calls extern kernels (matmul, convolution, ...) and fallback ops through
per-device C shims, ``aoti_torch_<device>_<op>``, which PyTorch builds for cpu, cuda, xpu and
mps only; the CPU's would run the CPU's kernels on foo memory, which is not foo's op. An
AOTInductor package also needs, at load time, a model runner registered for its device in C++
(``torch::inductor::RegisterAOTIModelRunner``) and a device string that torch's AOTI runtime
parses (``parse_device_str`` in aoti_runtime/model_base.h takes cpu|cuda|xpu|mps). Until foo
has those, asking for a C++ wrapper raises a clear error instead of compiling code that
cannot work.
"""

from __future__ import annotations

from typing import NoReturn

from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.wrapper import PythonWrapperCodegen
from torch._inductor.ir import GraphPartitionSignature

UNSUPPORTED = (
    "foo has no inductor C++ wrapper, so AOTInductor (aoti_compile_and_package) and "
    "cpp_wrapper=True are not available on foo: its extern kernels would need C shims "
    "(aoti_torch_foo_<op>) and AOTI packages a model runner registered in C++ for the device "
    "(RegisterAOTIModelRunner); PyTorch has those for cpu/cuda/xpu/mps only. "
    "torch.compile with the default (Python) wrapper works on foo."
)


class FooCppWrapperCodegen(CppWrapperCpu):
    @staticmethod
    def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper: PythonWrapperCodegen | None,
               partition_signatures: GraphPartitionSignature | None = None) -> NoReturn:
        raise NotImplementedError(UNSUPPORTED)
