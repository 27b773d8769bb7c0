"""Which of ``torch.cuda``'s names ``torch.foo`` has: ``python scripts/cuda_names.py``.

A CUDA user expects to change only the device string, so every name of ``torch.cuda`` that is not
about CUDA itself should exist on ``torch.foo``. This sorts ``dir(torch.cuda)`` into what is not
an API (private names, imports, the legacy ``torch.cuda.FloatTensor``-style classes), what only
makes sense for CUDA (why is said), and the rest, the generic names, and says which of those
``torch.foo`` has. tests/test_cuda_names.py keeps the lists true.
"""

from __future__ import annotations

import sys
import types

import torch

# Imported helpers and typing names that torch.cuda happens to carry.
NOT_API = {
    "Any", "Callable", "Enum", "cache", "NewType", "Optional", "TYPE_CHECKING", "Device", "auto", "cast",
    "classproperty", "glob", "importlib", "lru_cache", "os", "platform", "threading", "torch", "traceback", "warnings",
}

# Names about CUDA itself, with the reason.
CUDA_SPECIFIC = {
    "AcceleratorError": "the class of CUDA runtime errors",
    "CUDAGraph": "CUDA graphs", "graph": "CUDA graphs", "graphs": "CUDA graphs",
    "make_graphed_callables": "CUDA graphs", "graph_pool_handle": "CUDA graphs",
    "is_current_stream_capturing": "CUDA graphs", "graph_annotations": "CUDA graphs",
    "export_dot": "CUDA graphs", "export_graph_data": "CUDA graphs",
    "CUDAPluggableAllocator": "swapping the cudaMalloc-level allocator",
    "change_current_allocator": "swapping the cudaMalloc-level allocator",
    "get_allocator_backend": "native vs cudaMallocAsync allocator",
    "caching_allocator_enable": "switching CUDA's caching allocator off",
    "caching_allocator_disabled": "switching CUDA's caching allocator off",
    "CudaError": "CUDA runtime errors", "DeferredCudaCallError": "CUDA lazy initialization",
    "check_error": "CUDA runtime errors", "cudaStatus": "CUDA runtime status codes", "cudart": "the CUDA runtime",
    "ExternalStream": "wraps a cudaStream_t", "get_stream_from_external": "wraps a cudaStream_t",
    "GreenContext": "CUDA green contexts", "green_contexts": "CUDA green contexts",
    "current_blas_handle": "cuBLAS", "current_solver_handle": "cuSOLVER",
    "get_arch_list": "CUDA architectures of the build", "get_gencode_flags": "CUDA architectures of the build",
    "DEVICE_REQUIREMENT": "CUDA driver requirements",
    "DEVICE_REQUIREMENT_POST_JETSON_SBSA_UNIFICATION": "CUDA driver requirements",
    "PYTORCH_RELEASES_CODE_CC": "CUDA compute capabilities of releases",
    "has_half": "CUDA build flag", "has_magma": "MAGMA (CUDA linear algebra)",
    "is_tf32_supported": "TF32 tensor cores",
    "ipc_collect": "CUDA IPC handles",
    "list_gpu_processes": "NVML", "temperature": "NVML", "power_draw": "NVML", "clock_rate": "NVML",
    "utilization": "NVML", "device_memory_used": "NVML", "memory_usage": "NVML",
    "nccl": "NCCL", "nvtx": "NVTX", "jiterator": "NVRTC-compiled kernels", "tunable": "TunableOp (cuBLAS/hipBLASLt)",
    "gds": "GPUDirect Storage", "profiler": "cudaProfilerStart/Stop (nvprof)",
    "sparse": "legacy torch.cuda.sparse tensor types",
}


def _legacy_type(name: str) -> bool:
    return name.endswith("Tensor") or name.endswith("Storage")


def generic_names() -> list[str]:
    """torch.cuda's public names that are not about CUDA itself."""
    return sorted(
        n
        for n in dir(torch.cuda)
        if not n.startswith("_") and n not in NOT_API and n not in CUDA_SPECIFIC and not _legacy_type(n)
    )


def split() -> tuple[list[str], list[str]]:
    """(names torch.foo has, names it lacks) among :func:`generic_names`."""
    import foo_rs  # noqa: F401 - registers torch.foo

    names = generic_names()
    return [n for n in names if hasattr(torch.foo, n)], [n for n in names if not hasattr(torch.foo, n)]


def main() -> int:
    has, lacks = split()
    print(f"torch {torch.__version__}: {len(has) + len(lacks)} generic torch.cuda names; "
          f"torch.foo has {len(has)}, lacks {len(lacks)}")
    print("has:  ", " ".join(has))
    print("lacks:", " ".join(lacks))
    unknown = sorted(n for n in dir(torch.cuda) if isinstance(getattr(torch.cuda, n, None), types.ModuleType)
                     and not n.startswith("_") and n not in CUDA_SPECIFIC and n not in NOT_API and n not in has)
    if unknown:
        print("modules without a torch.foo counterpart:", " ".join(unknown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
