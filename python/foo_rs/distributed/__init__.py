"""torch.distributed on foo tensors: the ``foo_gloo`` c10d backend (gloo on foo memory, no copies).

``import foo_rs`` registers it: ``init_process_group()`` with no backend, ``"gloo"``,
``"cpu:gloo,foo:foo_gloo"`` and ``new_group(...)`` all run collectives on foo tensors, and DDP,
FSDP2 and DTensor work over them. See README, "Training on several processes".
"""

from __future__ import annotations

from .._host_view import host_view
from ._backend import BACKEND, GLOO_DTYPES, GLOO_REDUCIBLE, ProcessGroupFooGloo
from ._register import is_registered, register

__all__ = [
    "BACKEND",
    "GLOO_DTYPES",
    "GLOO_REDUCIBLE",
    "ProcessGroupFooGloo",
    "host_view",
    "is_registered",
    "register",
]
