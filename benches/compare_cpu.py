"""Times each case on torch's CPU backend and on foo in the same process, interleaved, with the
same number of threads, and prints the median times and the ratio foo/CPU (lower is better).

    python benches/compare_cpu.py [--threads 2] [--repeat 15] [--filter name]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import foo_rs


def _sync(x: object) -> None:
    if isinstance(x, torch.Tensor) and x.device.type == "foo":
        torch.foo.synchronize()


def timeit(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        _sync(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cases() -> dict[str, Callable[[torch.device], Callable[[], object]]]:
    def elementwise(n: int) -> Callable[[torch.device], Callable[[], object]]:
        def make(dev: torch.device) -> Callable[[], object]:
            a, b = torch.randn(n).to(dev), torch.randn(n).to(dev)
            return lambda: a + b
        return make

    def small_add(dev: torch.device) -> Callable[[], object]:
        a = torch.ones(1).to(dev)
        return lambda: a + a

    def bcast_add(dev: torch.device) -> Callable[[], object]:
        a, b = torch.randn(1000, 1000).to(dev), torch.randn(1000).to(dev)
        return lambda: a + b

    def transposed_add(dev: torch.device) -> Callable[[], object]:
        a, b = torch.randn(1000, 1000).to(dev), torch.randn(1000, 1000).to(dev)
        return lambda: a + b.t()

    def unary(dev: torch.device) -> Callable[[], object]:
        a = torch.randn(1_000_000).to(dev)
        return lambda: torch.exp(a)

    def to_device(dev: torch.device) -> Callable[[], object]:
        a = torch.randn(1_000_000)
        return lambda: a.to(dev)

    out = {
        "add 1 element": small_add,
        "add 1e5": elementwise(100_000),
        "add 1e6": elementwise(1_000_000),
        "add 1e7": elementwise(10_000_000),
        "broadcast add 1000x1000 + 1000": bcast_add,
        "transposed add 1000x1000": transposed_add,
        "exp 1e6": unary,
        "copy CPU->device 1e6": to_device,
    }
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--filter", default="")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, foo_rs {foo_rs.__version__}; CPU threads {torch.get_num_threads()}, "
          f"foo threads {foo_rs._C.num_threads()} (set FOO_RS_NUM_THREADS to match); median of {args.repeat}")
    print(f"{'case':34s} {'cpu ms':>10s} {'foo ms':>10s} {'foo/cpu':>8s}")
    for name, make in cases().items():
        if args.filter and args.filter not in name:
            continue
        cpu_fn, foo_fn = make(torch.device("cpu")), make(torch.device("foo"))
        cpu_t, foo_t = [], []
        for _ in range(3):  # interleave to share the machine's noise
            cpu_t.append(timeit(cpu_fn, args.repeat))
            foo_t.append(timeit(foo_fn, args.repeat))
        c, f = statistics.median(cpu_t), statistics.median(foo_t)
        print(f"{name:34s} {c * 1e3:10.3f} {f * 1e3:10.3f} {f / c:8.2f}")


if __name__ == "__main__":
    main()
