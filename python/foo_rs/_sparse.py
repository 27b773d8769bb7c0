"""Refuses sparse tensors on foo with one clear error.

foo's kernels are dense only. Without this, moving a sparse COO tensor to foo fails with
torch's generic "Could not run '...' with arguments from the 'Sparsefoo' backend", and a sparse
compressed one (CSR/CSC/BSR/BSC) is *made*, by a composite kernel that never reaches the backend,
but then fails on every use (``repr`` on aten::_nnz, ``.cpu()`` on its indices). PyTorch leaves
sparse support to the backend ("if you need to support sparse data storage, you need to extend
the implementation yourself"); foo_rs declines it explicitly instead:

* a fallback on the SparsePrivateUse1 and SparseCsrPrivateUse1 dispatch keys catches every
  operator that reaches a sparse foo tensor or creates one (``.to("foo")`` of COO goes through
  ``_sparse_coo_tensor_with_dims_and_tensors``, which BackendSelect sends to SparsePrivateUse1);
* a kernel for ``aten::_sparse_compressed_tensor_unsafe`` on SparseCsrPrivateUse1 catches the
  creation of sparse compressed foo tensors: ``.to("foo")``/``.foo()`` of CSR/CSC/BSR/BSC, the
  ``torch.sparse_*_tensor(..., device="foo")`` factories and ``dense.to_sparse_csr()``. Its
  CompositeImplicitAutograd kernel would otherwise serve that key, so no fallback ever sees it.

Both live on sparse foo keys only, so dense foo tensors and sparse CPU tensors never reach them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import torch

_SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)
_FALLBACK_KEYS = {"SparsePrivateUse1": "torch.sparse_coo", "SparseCsrPrivateUse1": "sparse compressed"}
_CREATE_COMPRESSED = "aten::_sparse_compressed_tensor_unsafe"
_CREATE_COMPRESSED_OP = "aten._sparse_compressed_tensor_unsafe.default"  # as the fallback names ops

# The torch.library registrations; they are undone when these objects are collected, so they
# are kept for the life of the process.
_libraries: list[torch.library.Library] = []


def sparse_error(layout: object, op: object = None) -> NotImplementedError:
    """The one error for sparse data on foo (NotImplementedError is also a RuntimeError)."""
    where = f", in {op}" if op is not None else ""
    return NotImplementedError(
        f"foo_rs does not support sparse tensors (layout {layout}{where}); "
        "convert with .to_dense() first, or keep sparse tensors on the CPU"
    )


def _layout_of(args: tuple[Any, ...], kwargs: dict[str, Any], default: str) -> object:
    """The sparse layout an operator was called with: a layout argument or a sparse input."""
    layout = kwargs.get("layout")
    if layout in _SPARSE_LAYOUTS:
        return layout
    for a in args:
        if isinstance(a, torch.Tensor) and a.layout in _SPARSE_LAYOUTS:
            return a.layout
    return default


def _fallback(default_layout: str) -> Callable[..., NoReturn]:
    def refuse(op: object, *args: Any, **kwargs: Any) -> NoReturn:
        raise sparse_error(_layout_of(args, kwargs, default_layout), op)

    return refuse


def _refuse_compressed(*args: Any, **kwargs: Any) -> NoReturn:
    raise sparse_error(_layout_of(args, kwargs, "sparse compressed"), _CREATE_COMPRESSED_OP)


def install() -> None:
    """Registers the refusals once per process. A key or kernel that already has a registration
    (a C++ sparse implementation, say) is left alone: the dispatcher refuses a second fallback
    for one key."""
    if _libraries:
        return
    from . import _C  # noqa: F401 - load the C++ registrations first, so the checks below see them

    keys = torch._C.DispatchKey
    fallbacks = [
        (key, layout)
        for key, layout in _FALLBACK_KEYS.items()
        if not torch._C._dispatch_has_backend_fallback(getattr(keys, key))
    ]
    if fallbacks:
        lib = torch.library.Library("_", "IMPL")
        for key, layout in fallbacks:
            lib.fallback(_fallback(layout), key)
        _libraries.append(lib)
    if not torch._C._dispatch_has_kernel_for_dispatch_key(_CREATE_COMPRESSED, "SparseCsrPrivateUse1"):
        lib = torch.library.Library("aten", "IMPL", "SparseCsrPrivateUse1")
        lib.impl(_CREATE_COMPRESSED.removeprefix("aten::"), _refuse_compressed)
        _libraries.append(lib)
