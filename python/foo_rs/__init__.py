"""foo_rs: a PyTorch device named ``foo`` whose memory, RNG state and kernels live in Rust.

``import foo_rs`` (or just ``import torch``, through PyTorch's backend autoload) registers the
device: after it, ``torch.ones(2, device="foo")``, ``model.foo()``, ``torch.foo.*`` and
``torch.autocast("foo")`` work.
"""

from __future__ import annotations


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group (PyTorch's backend autoload).

    Defined before ``import torch``: when ``python -m foo_rs`` (or ``import foo_rs``) runs first,
    importing torch autoloads this entry point while this module is still initializing."""
    from ._registration import register as _register

    _register()


import torch  # noqa: E402

from . import _C  # noqa: E402
from ._accounting import fallback_counts, native_counts, native_ops, reset_op_counts  # noqa: E402
from ._registration import BACKEND_NAME, SUPPORTED_DTYPES, UNSUPPORTED_DTYPES, register  # noqa: E402

__version__: str = _C.__version__

register()

__all__ = [
    "BACKEND_NAME",
    "SUPPORTED_DTYPES",
    "UNSUPPORTED_DTYPES",
    "fallback_counts",
    "native_counts",
    "native_ops",
    "reset_op_counts",
    "register",
]


del torch
