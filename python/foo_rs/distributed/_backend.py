"""The c10d backend for foo tensors, ``ProcessGroupFooGloo``: gloo's collectives on CPU aliases
of foo memory (src/glue/distributed.cpp).

It is a C++ ``c10d::Backend`` (a pybind11 subclass of torch.distributed's ``Backend``): each
collective hands a ``ProcessGroupGloo`` CPU tensors over the foo tensors' memory, so gloo moves
and reduces the data in place, and returns a Work over gloo's whose result and future value are
the foo tensors. Being C++, it is called by DDP's reducer and ``dist.*`` directly, and its Work is
the one users get (``is_completed()``, ``exception()``, ``get_future()``), which a backend written
in Python cannot offer: PyTorch wraps those Works in a holder that forwards only ``wait()`` and
``get_future()``.
"""

from __future__ import annotations

import torch
import torch.distributed  # noqa: F401 (registers the Backend base class with pybind11 first)

from .._C import distributed_module

_module = distributed_module()

ProcessGroupFooGloo = _module.ProcessGroupFooGloo
BACKEND: str = _module.BACKEND

# What gloo itself carries (ProcessGroupGloo's type switch; every other dtype is "Invalid scalar
# type" there, CPU tensors included). Collectives that only move data carry the other foo dtypes
# as raw bytes.
GLOO_DTYPES: frozenset[torch.dtype] = frozenset(_module.GLOO_DTYPES)

# What gloo reduces: GLOO_DTYPES and complex; the others raise TypeError.
GLOO_REDUCIBLE: frozenset[torch.dtype] = frozenset(_module.GLOO_REDUCIBLE)
