"""A CPU-only torch.distributed program, run by ranks with and without foo_rs imported
(test_distributed.py compares the two): importing foo_rs must not change what it does."""

from __future__ import annotations

import datetime
from typing import Any

import dist_store
import torch
import torch.distributed as dist


def cpu_program(rank: int, port: int, backend: str | None) -> dict[str, Any]:
    """init_process_group (``backend`` None: PyTorch's default) and CPU collectives."""
    kwargs: dict[str, Any] = {} if backend is None else {"backend": backend}
    dist.init_process_group(store=dist_store.connect(rank, port), rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=20), **kwargs)
    try:
        x = torch.arange(4.0) * (rank + 1)
        dist.all_reduce(x)
        y = torch.arange(4.0) * (rank + 1)
        dist.all_reduce(y, op=dist.ReduceOp.MAX)
        outs = [torch.empty(2, dtype=torch.int64) for _ in range(2)]
        dist.all_gather(outs, torch.tensor([rank, rank]))
        objects: list[Any] = [None] * 2
        dist.all_gather_object(objects, {"rank": rank})
        dist.barrier()
        sub = dist.new_group([0, 1])
        z = torch.ones(3)
        dist.all_reduce(z, group=sub)
        cpu = dist.group.WORLD._get_backend(torch.device("cpu"))
        return {"sum": x.tolist(), "max": y.tolist(), "gather": [o.tolist() for o in outs], "objects": objects,
                "subgroup": z.tolist(), "cpu_backend": type(cpu).__name__,
                "object_device": dist.distributed_c10d._get_object_coll_device()}
    finally:
        dist.destroy_process_group()
