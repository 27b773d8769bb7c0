"""What profiling foo costs: the same small workload unprofiled, under the CPU profiler, under
``use_device="foo"`` and under torch.profiler with and without foo's device activity.

    python benches/profiler_overhead.py [--ops 2000] [--repeats 5]

Prints the best time of each (workload plus the profiler's post-processing, as a user waits for
it) and the per-op cost over the unprofiled run.
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

    def unprofiled() -> None:
        workload()

    def under(factory: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            with factory() as prof:  # type: ignore[attr-defined]
                workload()
            prof.key_averages()  # type: ignore[attr-defined]

        return run

    cases: list[tuple[str, Callable[[], None]]] = [
        ("no profiler", unprofiled),
        ("autograd.profiler (CPU)", under(lambda: torch.autograd.profiler.profile())),
        ('autograd.profiler use_device="foo"', under(lambda: torch.autograd.profiler.profile(use_device="foo"))),
        ("torch.profiler [CPU]", under(lambda: profile(activities=[ProfilerActivity.CPU]))),
        ("torch.profiler [CPU, PrivateUse1]",
         under(lambda: profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]))),
    ]
    workload()
    base = None
    for name, run in cases:
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - start)
        base = best if base is None else base
        print(f"{name:38s} {best * 1e3:8.1f} ms   {(best - base) / args.ops * 1e6:6.2f} us/op over unprofiled")


if __name__ == "__main__":
    main()
