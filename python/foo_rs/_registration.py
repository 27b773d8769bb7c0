"""Turns PrivateUse1 into the ``foo`` device: rename, device module, generated methods."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from . import _C

BACKEND_NAME = "foo"

# The dtypes a foo tensor can hold: the element types of the Rust kernels, listed once in
# src/dtype.rs (DType::ALL), which also gives the C++ glue its is_supported_dtype. This is an
# allowlist on purpose. A list of exclusions goes stale silently whenever torch adds a dtype
# (bcomplex32 did: TypedStorage.foo() accepted it and made a storage no kernel could read); with an
# allowlist a new dtype is refused until the kernels learn it. Probing every dtype at import instead
# would allocate on the device and run kernels in every `import torch` (autoload), skewing the
# memory and op statistics, and would take any unrelated failure for "unsupported".
SUPPORTED_DTYPES: tuple[torch.dtype, ...] = tuple(getattr(torch, name) for name in _C.SUPPORTED_DTYPE_NAMES)

# Every other dtype torch has, so Storage.foo() refuses it up front (torch's generated method
# honours this list); sorted by name so the list is the same in every process.
UNSUPPORTED_DTYPES: list[torch.dtype] = sorted(
    {d for d in vars(torch).values() if isinstance(d, torch.dtype)} - set(SUPPORTED_DTYPES),
    key=str,
)


def _missing(cls: type, *attrs: str) -> bool:
    """True when none of ``attrs`` is on ``cls``: torch generates them together and refuses to
    generate any of them twice, so a group is generated only when all of it is absent."""
    return not any(hasattr(cls, a) for a in attrs)


def _refuse_unsupported_dtypes(generated: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps a TypedStorage.foo that was generated without foo_rs's unsupported-dtype list (the
    user generated storage methods before importing foo_rs) so it still refuses those dtypes,
    with the message torch's own check gives."""

    def foo(self: torch.TypedStorage, *args: Any, **kwargs: Any) -> Any:
        if self.dtype in UNSUPPORTED_DTYPES:
            raise RuntimeError(
                f"Cannot create {BACKEND_NAME} storage as {self.dtype} dtype is not supported by this backend"
            )
        return generated(self, *args, **kwargs)

    foo.__name__ = BACKEND_NAME
    foo.__doc__ = getattr(generated, "__doc__", None)
    foo._foo_rs_checks_dtypes = True  # type: ignore[attr-defined]
    return foo


def _generate_methods() -> None:
    """Generates whichever of torch's per-backend methods are still missing.

    The user may have called ``torch.utils.generate_methods_for_privateuse1_backend()`` before
    importing foo_rs (autoload off). Its defaults make the Tensor and Module methods but no
    Storage ones, so checking only ``Tensor.foo`` would leave ``Storage.foo()`` missing for good;
    each group is therefore checked and generated on its own."""
    name = BACKEND_NAME
    is_name = f"is_{name}"
    packed = torch.nn.utils.rnn.PackedSequence
    for_tensor = _missing(torch.Tensor, name, is_name)
    for_module = _missing(torch.nn.Module, name)
    for_packed_sequence = _missing(packed, name, is_name)
    storage_pre_existed = not _missing(torch.storage._StorageBase, name, is_name) or not _missing(
        torch.TypedStorage, name, is_name
    )
    for_storage = not storage_pre_existed
    if for_tensor or for_module or for_packed_sequence or for_storage:
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=for_tensor,
            for_module=for_module,
            for_packed_sequence=for_packed_sequence,
            for_storage=for_storage,
            unsupported_dtype=UNSUPPORTED_DTYPES,
        )
        if for_storage:
            # Generated with the list above: mark it so a later register() leaves it as it is.
            getattr(torch.TypedStorage, name)._foo_rs_checks_dtypes = True
    # Lazy modules' UninitializedParameter lets through `Tensor.cuda`, `.cpu`, `.to`... and
    # rejects any other method: let `Tensor.foo` through too, so `LazyLinear(2).foo()` works.
    allowed = torch.nn.parameter.UninitializedTensorMixin._allowed_methods
    tensor_to = getattr(torch.Tensor, name, None)
    if tensor_to is not None and tensor_to not in allowed:
        allowed.append(tensor_to)
    # Storage methods someone else generated may lack the unsupported-dtype list: add the check.
    typed_to = getattr(torch.TypedStorage, name, None)
    if storage_pre_existed and typed_to is not None and not getattr(typed_to, "_foo_rs_checks_dtypes", False):
        setattr(torch.TypedStorage, name, _refuse_unsupported_dtypes(typed_to))


def _warn_about_thread_setting() -> None:
    """A FOO_RS_NUM_THREADS / RAYON_NUM_THREADS that is no thread count, or too large, is
    ignored or clamped by the Rust pool; say so once instead of silently."""
    note = _C.thread_setting_note()
    if note and not getattr(_warn_about_thread_setting, "done", False):
        _warn_about_thread_setting.done = True  # type: ignore[attr-defined]
        warnings.warn(f"foo_rs: {note}", RuntimeWarning, stacklevel=3)


def register() -> None:
    """Registers the device once per process; calling it again is harmless."""
    current = torch._C._get_privateuse1_backend_name()
    if current != BACKEND_NAME:
        if current != "privateuseone":
            raise RuntimeError(
                f"foo_rs cannot register: the PrivateUse1 backend is already named {current!r} "
                "by another extension (PyTorch allows one rename per process)"
            )
        torch.utils.rename_privateuse1_backend(BACKEND_NAME)
    if not hasattr(torch, BACKEND_NAME):
        from . import device_module

        torch._register_device_module(BACKEND_NAME, device_module)
    from . import _autograd, _dlpack, _exit, _multiprocessing, _sparse
    from .compile import install as _install_compile

    _autograd.install()
    _exit.install()
    _install_compile()
    _dlpack.install()
    _multiprocessing.install()
    _warn_about_thread_setting()
    _generate_methods()
    _sparse.install()
    if torch.distributed.is_available():  # a torch built without it has no c10d to register with
        from . import distributed

        distributed.register()
