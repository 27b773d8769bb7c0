"""FSDP2, DTensor and distributed checkpoints on foo (run by the ranks of test_distributed.py)."""

from __future__ import annotations

from typing import Any

import torch


def dtensor(rank: int) -> dict[str, Any]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("foo", (2,))
    full = torch.arange(24.0).view(4, 6)
    d = distribute_tensor(full.foo(), mesh, [Shard(0)])
    out = {"local": d.to_local().cpu().tolist(), "device": str(d.to_local().device)}
    r = d.redistribute(mesh, [Replicate()])
    out["replicated"] = torch.equal(r.to_local().cpu(), full)
    s1 = d.redistribute(mesh, [Shard(1)])
    out["shard1"] = torch.equal(s1.to_local().cpu(), full[:, rank * 3:(rank + 1) * 3])
    y = (d * 2).sum()
    out["sum"] = y.full_tensor().item() if hasattr(y, "full_tensor") else y.item()
    return out


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 4))


def fsdp2(rank: int, steps: int = 3) -> dict[str, Any]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("foo", (2,))
    model = _mlp().foo()
    ref = _mlp().foo()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ropt = torch.optim.Adam(ref.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(8, 8, generator=g).foo(), torch.randn(8, 4, generator=g).foo()
        half = slice(rank * 4, rank * 4 + 4)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[half]), y[half]).backward()
        opt.step()
        ropt.zero_grad()
        torch.nn.functional.mse_loss(ref(x), y).backward()
        ropt.step()
    diffs = [(p.full_tensor() - q).abs().max().item() for p, q in zip(model.parameters(), ref.parameters())]
    return {"max_diff": max(diffs), "local_device": str(next(model.parameters()).to_local().device)}


def checkpoint(rank: int, path: str) -> dict[str, Any]:
    """FSDP2 model saved with torch.distributed.checkpoint and loaded into a fresh sharded one."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("foo", (2,))

    def sharded(seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).foo()
        for layer in m:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        return fully_shard(m, mesh=mesh)

    saved = sharded(0)
    dcp.save(saved.state_dict(), checkpoint_id=path)
    loaded = sharded(1)
    def same() -> list[bool]:
        return [torch.equal(p.full_tensor().cpu(), q.full_tensor().cpu())
                for p, q in zip(saved.parameters(), loaded.parameters())]

    before = same()
    state = loaded.state_dict()
    dcp.load(state, checkpoint_id=path)
    loaded.load_state_dict(state)
    after = same()
    devices = {str(p.to_local().device) for p in loaded.parameters()}
    return {"equal_before": any(before), "equal_after": all(after), "devices": sorted(devices)}
