"""Turns PrivateUse1 into the ``foo`` device: rename, device module, generated methods."""

from __future__ import annotations

import torch

BACKEND_NAME = "foo"

# dtypes foo storage does not support: its kernels (copy, fill, item, ...) have no element type
# for them, so Storage.foo() refuses them up front (torch's generated method honours this list).
UNSUPPORTED_DTYPES: list[torch.dtype] = [
    dtype
    for name in (
        "complex32",
        "qint8",
        "quint8",
        "qint32",
        "quint4x2",
        "quint2x4",
        "float8_e5m2",
        "float8_e4m3fn",
        "float8_e5m2fnuz",
        "float8_e4m3fnuz",
        "float8_e8m0fnu",
        "float4_e2m1fn_x2",
        "bits1x8",
        "bits2x4",
        "bits4x2",
        "bits8",
        "bits16",
    )
    if isinstance(dtype := getattr(torch, name, None), torch.dtype)
]


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
    from . import _exit

    _exit.install()
    if not hasattr(torch.Tensor, BACKEND_NAME):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True,
            for_module=True,
            for_storage=True,
            unsupported_dtype=UNSUPPORTED_DTYPES,
        )
