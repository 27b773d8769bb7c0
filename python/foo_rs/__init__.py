"""foo_rs: a PyTorch device named ``foo`` whose memory, RNG state and kernels live in Rust.

``import foo_rs`` (or just ``import torch``, through PyTorch's backend autoload) registers the
device: after it, ``torch.ones(2, device="foo")``, ``model.foo()``, ``torch.foo.*`` and
``torch.autocast("foo")`` work.
"""

from __future__ import annotations

import torch

from . import _C
from ._accounting import fallback_counts, native_counts, native_ops, reset_op_counts
from ._registration import BACKEND_NAME, UNSUPPORTED_DTYPES, register

__version__: str = _C.__version__

register()

__all__ = [
    "BACKEND_NAME",
    "UNSUPPORTED_DTYPES",
    "fallback_counts",
    "native_counts",
    "native_ops",
    "reset_op_counts",
    "register",
]


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group: importing this package is the registration."""
    register()


del torch
