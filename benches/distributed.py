"""torch.distributed on foo: all_reduce bandwidth foo vs CPU (gloo), and DDP 2 x 1 vs 1 x 2 threads.

    python benches/distributed.py [--quick] [--sizes-mb 0.004 1 64] [--steps 10]

1. all_reduce of a float32 tensor of each size between 2 ranks over 127.0.0.1, the same loop on
   foo tensors (the foo_gloo backend: gloo on CPU views of foo memory) and on CPU tensors
   (PyTorch's gloo), interleaved; median time per all_reduce and the algorithm bandwidth
   (bytes / time). Zero-copy means foo should cost what the CPU costs.
2. A transformer language model's training step (forward, backward, AdamW) at one global batch:
   DDP on 2 processes with 1 foo thread each, and 1 process with 2 foo threads. Each process
   also reports its CPU use (CPU seconds / wall seconds while stepping): a rank using more than
   its share of cores means oversubscription.

Each configuration runs in fresh processes (multiprocessing "spawn"): foo's thread count is read
from FOO_RS_NUM_THREADS when the process starts.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import socket
import statistics
import time
from typing import Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(rank: int, world: int, port: int) -> None:
    import torch.distributed as dist

    dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))


def _allreduce_worker(rank: int, port: int, sizes_mb: list[float], repeat: int, queue: Any) -> None:
    import foo_rs  # noqa: F401 (registers foo and foo_gloo)
    import torch
    import torch.distributed as dist

    _init(rank, 2, port)
    results = {}
    for mb in sizes_mb:
        n = int(mb * 2**20) // 4
        tensors = {"cpu": torch.ones(n), "foo": torch.ones(n, device="foo")}
        times: dict[str, list[float]] = {"cpu": [], "foo": []}
        for device in tensors:  # warm-up: connections, buffers, page faults
            for _ in range(3):
                dist.all_reduce(tensors[device])
        for _ in range(repeat):
            for device, t in tensors.items():  # interleaved, so load changes hit both alike
                dist.barrier()
                start = time.perf_counter()
                dist.all_reduce(t)
                times[device].append(time.perf_counter() - start)
        results[mb] = {d: statistics.median(ts) for d, ts in times.items()}
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


def _lm(vocab: int, ctx: int) -> Any:
    import torch
    from torch import nn

    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = 128
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(ctx, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, 4, dim_feedforward=4 * d, dropout=0.0, batch_first=True,
                                               activation="gelu")
            self.enc = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
            self.head = nn.Linear(d, vocab)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            t = idx.shape[1]
            mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
            return self.head(self.enc(self.tok(idx) + self.pos[:t], mask=mask, is_causal=True))

    torch.manual_seed(0)
    return LM()


def _lm_worker(rank: int, world: int, port: int, batch: int, steps: int, queue: Any) -> None:
    import foo_rs
    import torch
    from torch import nn

    vocab, ctx = 256, 64
    model = _lm(vocab, ctx).foo()
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        _init(rank, world, port)
        model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    data = torch.randint(0, vocab, (batch // world, ctx + 1), generator=g).foo()

    def step() -> None:
        opt.zero_grad()
        logits = model(data[:, :-1])
        nn.functional.cross_entropy(logits.reshape(-1, vocab), data[:, 1:].reshape(-1)).backward()
        opt.step()

    for _ in range(2):
        step()
    times = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    load = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    queue.put({"rank": rank, "step": statistics.median(times), "load": load, "threads": foo_rs._C.num_threads()})
    if world > 1:
        import torch.distributed as dist

        dist.destroy_process_group()


def _spawn(target: Any, nprocs: int, args: tuple[Any, ...], env: dict[str, str], timeout: float) -> list[Any]:
    """Runs ``target(rank, *args, queue)`` in ``nprocs`` fresh processes with ``env`` set; returns
    what they put on the queue."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # spawned children inherit the environment as it is at start()
    try:
        procs = [ctx.Process(target=target, args=(rank, *args, queue)) for rank in range(nprocs)]
        for p in procs:
            p.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out = []
    deadline = time.monotonic() + timeout
    try:
        expected = 1 if target is _allreduce_worker else nprocs
        for _ in range(expected):
            out.append(queue.get(timeout=max(1.0, deadline - time.monotonic())))
    finally:
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # 4 KB: the per-call cost (latency), 1 and 64 MB: bandwidth.
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[4 / 1024, 1, 64])
    parser.add_argument("--repeat", type=int, default=20, help="all_reduce timings per size and device")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps")
    parser.add_argument("--batch", type=int, default=16, help="global batch of the LM")
    parser.add_argument("--quick", action="store_true", help="fewer repeats and steps")
    args = parser.parse_args()
    if args.quick:
        args.repeat, args.steps = 5, 3
    cores = os.cpu_count() or 1
    print(f"{cores} cores; load average before: {os.getloadavg()[0]:.2f}")

    one = {"FOO_RS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    (bw,) = _spawn(_allreduce_worker, 2, (_free_port(), args.sizes_mb, args.repeat), one, timeout=600)
    print("\nall_reduce, 2 ranks over 127.0.0.1 (float32, median)")
    print(f"{'size':>8} {'CPU (gloo)':>14} {'foo (foo_gloo)':>16} {'foo/CPU':>8}")
    for mb, t in bw.items():
        nbytes = mb * 2**20
        size = f"{mb * 1024:g}KB" if mb < 1 else f"{mb:g}MB"
        print(f"{size:>8} {t['cpu'] * 1e3:>8.3f} ms {nbytes / t['cpu'] / 1e9:>4.1f}GB/s "
              f"{t['foo'] * 1e3:>8.3f} ms {nbytes / t['foo'] / 1e9:>4.1f}GB/s {t['foo'] / t['cpu']:>8.3f}")

    print(f"\ntransformer LM training step (d=128, 4 layers, ctx 64), global batch {args.batch}, "
          f"median of {args.steps}")
    ddp = _spawn(_lm_worker, 2, (2, _free_port(), args.batch, args.steps), one, timeout=600)
    single = _spawn(_lm_worker, 1, (1, 0, args.batch, args.steps),
                    {"FOO_RS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}, timeout=600)
    for label, runs in (("DDP, 2 processes x 1 thread", ddp), ("1 process x 2 threads", single)):
        step = max(r["step"] for r in runs)
        loads = ", ".join(f"{r['load']:.2f}" for r in sorted(runs, key=lambda r: r["rank"]))
        print(f"  {label:<30} {step * 1e3:8.1f} ms/step   CPU use per process (cores): {loads}")


if __name__ == "__main__":
    main()
