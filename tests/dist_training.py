"""DDP on foo, run by the ranks of test_distributed.py: each rank trains DDP on its half of every
batch and, in the same process, a plain copy of the model on the whole batch; after the steps
the two must hold the same weights (DDP averages the halves' gradients, which is the gradient of
the whole batch's mean loss)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = 2
BATCH = 8  # global batch; each rank takes BATCH // WORLD


class TinyLM(nn.Module):
    """A two-layer causal transformer language model (tests/test_training.py's, smaller)."""

    def __init__(self, vocab: int = 40, d: int = 32, heads: int = 4, layers: int = 2, ctx: int = 12) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(ctx, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, batch_first=True,
                                           activation="gelu")
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        return self.head(self.enc(self.tok(idx) + self.pos[:t], mask=mask, is_causal=True))


class TwoHeads(nn.Module):
    """A model with a parameter the forward never uses (find_unused_parameters' case)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.used = nn.Linear(16, 4)
        self.unused = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(torch.relu(self.body(x)))


def _lm_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


Batch = tuple[torch.Tensor, torch.Tensor]


def _case(name: str, steps: int) -> tuple[nn.Module, Callable[..., torch.optim.Optimizer], list[Batch],
                                          Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """(model, optimizer factory, global batches, loss) of a case; the same on every rank."""
    g = torch.Generator().manual_seed(1)
    torch.manual_seed(0)
    if name == "mlp":
        model: nn.Module = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
        batches = [(torch.randn(BATCH, 8, generator=g), torch.randn(BATCH, 4, generator=g)) for _ in range(steps)]
        return model, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), batches, nn.functional.mse_loss
    if name == "cnn":
        model = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
        )
        batches = [(torch.randn(BATCH, 1, 8, 8, generator=g), torch.randint(0, 10, (BATCH,), generator=g))
                   for _ in range(steps)]
        return model, lambda p: torch.optim.Adam(p, lr=1e-2), batches, nn.functional.cross_entropy
    if name == "lm":
        model = TinyLM()
        data = torch.randint(0, 40, (steps, BATCH, 13), generator=g)
        batches = [(d[:, :-1], d[:, 1:]) for d in data]
        return model, lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.01), batches, _lm_loss
    if name == "two_heads":
        model = TwoHeads()
        batches = [(torch.randn(BATCH, 8, generator=g), torch.randn(BATCH, 4, generator=g)) for _ in range(steps)]
        return model, lambda p: torch.optim.SGD(p, lr=0.05), batches, nn.functional.mse_loss
    raise ValueError(name)


def _hook(name: str | None) -> Any:
    return {None: None, "fp16": default_hooks.fp16_compress_hook, "bf16": default_hooks.bf16_compress_hook}[name]


def ddp_matches_single(rank: int, case: str, steps: int = 3, hook: str | None = None, device: str = "foo",
                       **ddp_kwargs: Any) -> dict[str, Any]:
    """Trains ``case`` with DDP(**ddp_kwargs) on this rank's half batch and a plain copy on the
    whole batch; returns the largest weight difference and what the grads looked like."""
    model, make_opt, batches, loss_fn = _case(case, steps)
    ref = copy.deepcopy(model).to(device)
    model = model.to(device)
    ddp = DDP(model, **ddp_kwargs)
    if hook is not None:
        ddp.register_comm_hook(dist.group.WORLD, _hook(hook))
    opt, ref_opt = make_opt(ddp.parameters()), make_opt(ref.parameters())
    half = slice(rank * BATCH // WORLD, (rank + 1) * BATCH // WORLD)
    exact_in_hook_dtype = True
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        loss_fn(ddp(x[half]), y[half]).backward()
        if hook is not None:
            # The hook's all_reduce ran in float16/bfloat16: every averaged gradient it handed back
            # is a value of that dtype.
            low = torch.float16 if hook == "fp16" else torch.bfloat16
            exact_in_hook_dtype &= all(torch.equal(p.grad, p.grad.to(low).to(p.grad.dtype))
                                       for p in model.parameters() if p.grad is not None)
        opt.step()
        ref_opt.zero_grad()
        loss_fn(ref(x), y).backward()
        ref_opt.step()
    diff = max((p.detach() - q.detach()).abs().max().item() for p, q in zip(model.parameters(), ref.parameters()))
    scale = max(q.detach().abs().max().item() for q in ref.parameters())
    # DDP's timer for the device (foo's: src/glue/ddp_timer.cpp) fills these from the 2nd step on.
    logged = ddp._get_ddp_logging_data()
    timing = {k: logged.get(k, 0) for k in ("avg_forward_compute_time", "avg_backward_compute_time",
                                            "avg_backward_comm_time")}
    return {"max_diff": diff, "scale": scale, "exact_in_hook_dtype": exact_in_hook_dtype, "timing": timing,
            "device": str(next(model.parameters()).device),
            "grads_none": sorted(n for n, p in model.named_parameters() if p.grad is None)}


def _flat_grads(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def no_sync(rank: int) -> dict[str, Any]:
    """Gradient accumulation: one micro-batch under no_sync() (local grads, no communication),
    one synchronised; equal to the whole batch's gradient, and unequal across ranks in between."""
    model, _, batches, loss_fn = _case("mlp", 2)
    ref = copy.deepcopy(model).foo()
    ddp = DDP(model.foo())
    quarter = BATCH // (2 * WORLD)
    (x1, y1), (x2, y2) = ((x.foo(), y.foo()) for x, y in batches)
    mine = slice(rank * quarter, (rank + 1) * quarter)
    with ddp.no_sync():
        (loss_fn(ddp(x1[mine]), y1[mine]) / 2).backward()
    local = _flat_grads(model)
    both = [torch.empty_like(local) for _ in range(WORLD)]
    dist.all_gather(both, local)
    (loss_fn(ddp(x2[mine]), y2[mine]) / 2).backward()
    synced = _flat_grads(model)
    # The reference: all four micro-batches' mean losses, halved as each rank halves its two.
    for x, y in ((x1, y1), (x2, y2)):
        for r in range(WORLD):
            part = slice(r * quarter, (r + 1) * quarter)
            (loss_fn(ref(x[part]), y[part]) / (2 * WORLD)).backward()
    return {"local_differs_across_ranks": not torch.equal(both[0], both[1]),
            "max_diff": (synced - _flat_grads(ref)).abs().max().item()}
