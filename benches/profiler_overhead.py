"""What profiling foo costs: the same small workload unprofiled, under the CPU profiler, under
``use_device="foo"`` and under torch.profiler with and without foo's device activity.

    python benches/profiler_overhead.py [--ops 2000] [--repeats 5]

Prints, for the best of the repeats, the time of the profiled workload, its cost per op over the
unprofiled run, and the time of the profiler's post-processing (``key_averages()``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import foo_rs  # noqa: F401 - registers the device
import torch
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=2000, help="ops per run (pairs of add and mul)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    x = torch.randn(64, 64, device="foo")
    pairs = args.ops // 2

    def workload() -> None:
        for _ in range(pairs):
            x.add(1).mul(2)

    def unprofiled() -> tuple[float, float]:
        start = time.perf_counter()
        workload()
        return time.perf_counter() - start, 0.0

    def under(factory: Callable[[], object]) -> Callable[[], tuple[float, float]]:
        def run() -> tuple[float, float]:
            prof = factory()
            prof.__enter__()  # type: ignore[attr-defined]
            start = time.perf_counter()
            workload()
            ran = time.perf_counter() - start
            prof.__exit__(None, None, None)  # type: ignore[attr-defined]
            start = time.perf_counter()
            prof.key_averages()  # type: ignore[attr-defined]
            return ran, time.perf_counter() - start

        return run

    cases: list[tuple[str, Callable[[], tuple[float, float]]]] = [
        ("no profiler", unprofiled),
        ("autograd.profiler (CPU)", under(lambda: torch.autograd.profiler.profile())),
        ('autograd.profiler use_device="foo"', under(lambda: torch.autograd.profiler.profile(use_device="foo"))),
        ("torch.profiler [CPU]", under(lambda: profile(activities=[ProfilerActivity.CPU]))),
        ("torch.profiler [CPU, PrivateUse1]",
         under(lambda: profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]))),
    ]
    workload()
    base = None
    print(f"{'':38s} {'workload':>10s} {'per op':>10s} {'key_averages()':>15s}")
    for name, run in cases:
        ran, post = min(run() for _ in range(args.repeats))
        base = ran if base is None else base
        print(f"{name:38s} {ran * 1e3:8.1f} ms {(ran - base) / args.ops * 1e6:6.2f} us+ {post * 1e3:11.1f} ms")


if __name__ == "__main__":
    main()
