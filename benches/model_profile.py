"""Where a model's training step spends its time on foo and on the CPU: torch.profiler (CPU
activity: foo's kernels run synchronously on the calling thread's behalf, so an op's self CPU time
includes its kernel) over a few steps on each, the top ops side by side."""

from __future__ import annotations

from collections.abc import Callable

from torch.profiler import ProfilerActivity, profile


def self_times(step: Callable[[], object], steps: int) -> dict[str, tuple[float, float]]:
    """Op name -> (self CPU ms per step, calls per step), over `steps` steps after one unprofiled."""
    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    return {e.key: (e.self_cpu_time_total / 1e3 / steps, e.count / steps) for e in prof.key_averages()}


def profile_table(foo_step: Callable[[], object], cpu_step: Callable[[], object], steps: int,
                  top: int = 15) -> str:
    """The `top` ops by self time on foo and the `top` on the CPU, merged, by foo's time."""
    foo, cpu = self_times(foo_step, steps), self_times(cpu_step, steps)
    names = set(sorted(foo, key=lambda k: -foo[k][0])[:top]) | set(sorted(cpu, key=lambda k: -cpu[k][0])[:top])
    rows = ["| op | foo ms | CPU ms | foo/CPU | foo calls | CPU calls |", "|---|---:|---:|---:|---:|---:|"]
    for name in sorted(names, key=lambda k: -foo.get(k, (0.0, 0.0))[0]):
        (f, fn), (c, cn) = foo.get(name, (0.0, 0.0)), cpu.get(name, (0.0, 0.0))
        ratio = f"{f / c:.2f}" if c > 0 else "-"
        rows.append(f"| {name} | {f:.2f} | {c:.2f} | {ratio} | {fn:g} | {cn:g} |")
    total_f, total_c = (sum(t for t, _ in d.values()) for d in (foo, cpu))
    rows.append(f"| all ops | {total_f:.2f} | {total_c:.2f} | {total_f / max(total_c, 1e-9):.2f} | | |")
    return "\n".join(rows)
