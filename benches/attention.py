"""F.scaled_dot_product_attention: foo's fused kernel vs foo's math path (matmul, softmax,
matmul: `sdpa_kernel(SDPBackend.MATH)`) vs the CPU backend's own SDPA, same process, same thread
count, median times. Forward alone and forward + backward, float32 and bfloat16, causal or not.

    python benches/attention.py [--threads 2] [--repeat 5] [--seq 64 256 1024] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import platform
import statistics
import time
from collections.abc import Callable

import foo_rs  # noqa: F401 - registers the foo device
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def timeit(fn: Callable[[], object], repeat: int) -> float:
    """Median of `repeat` calls (at least 0.2 s of them) after a warm-up call."""
    time.sleep(0.05)  # let the other backend's spinning worker threads go idle
    fn()
    times: list[float] = []
    stop = time.perf_counter() + 0.2
    while len(times) < repeat or (time.perf_counter() < stop and len(times) < 200):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def make(dev: str, dtype: torch.dtype, b: int, h: int, s: int, e: int, causal: bool, backward: bool,
         math: bool) -> Callable[[], object]:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, h, s, e, generator=g).to(dtype).to(dev).requires_grad_(backward) for _ in range(3))
    go = torch.randn(b, h, s, e, generator=g).to(dtype).to(dev)

    def step() -> object:
        ctx = sdpa_kernel(SDPBackend.MATH) if math else contextlib.nullcontext()
        with ctx:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            if backward:
                return torch.autograd.grad(y, [q, k, v], go)
            return y

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dim", type=int, nargs="+", default=[32, 64],
                    help="head dims (32: BERT-base-like small heads; 64: GPT-2, LLaMA)")
    ap.add_argument("--seq", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--markdown", help="also write the table to this file")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cpu_name = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
                    platform.processor())
    lines = [
        f"torch {torch.__version__}, {args.threads} threads, {cpu_name}; "
        f"batch {args.batch}, heads {args.heads}; median ms",
        "",
        "| dtype | head dim | seq | causal | pass | foo fused | foo math | CPU sdpa | math / fused | CPU / fused |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for dtype_name, dim, s, causal, backward in itertools.product(args.dtype, args.dim, args.seq, (False, True),
                                                                 (False, True)):
        dtype = getattr(torch, dtype_name)
        shape = (args.batch, args.heads, s, dim)
        t_fused = timeit(make("foo", dtype, *shape, causal, backward, math=False), args.repeat)
        t_math = timeit(make("foo", dtype, *shape, causal, backward, math=True), args.repeat)
        t_cpu = timeit(make("cpu", dtype, *shape, causal, backward, math=False), args.repeat)
        row = (f"| {dtype_name} | {dim} | {s} | {'yes' if causal else 'no'} | {'fwd+bwd' if backward else 'fwd'} "
               f"| {t_fused * 1e3:.2f} | {t_math * 1e3:.2f} | {t_cpu * 1e3:.2f} "
               f"| {t_math / t_fused:.2f}x | {t_cpu / t_fused:.2f}x |")
        lines.append(row)
        print(row, flush=True)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
