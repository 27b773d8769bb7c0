"""The C++ wrapper of a foo graph (``cpp_wrapper=True`` and AOTInductor)."""

from __future__ import annotations

from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu


class FooCppWrapperCodegen(CppWrapperCpu):
    pass
