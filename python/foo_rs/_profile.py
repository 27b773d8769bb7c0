"""``python -m foo_rs profile SCRIPT [ARGS...]``: runs a script under ``torch.profiler`` with foo's
device activity, prints where the device time went, and writes a Chrome trace.

The recipe it runs is the one to use in code::

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                 profile_memory=True, record_shapes=True) as prof:
        ...  # the work, on device="foo"
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=20))
    prof.export_chrome_trace("trace.json")  # chrome://tracing or ui.perfetto.dev

foo's kernels appear as device activity ("foo::mm" on the foo:N rows), with the time they ran,
attributed to the ops that launched them; foo allocations and frees appear as memory events.
"""

from __future__ import annotations

import os
import runpy
import sys

import torch
from torch.profiler import ProfilerActivity, profile


def run(script: str, args: list[str], trace: str | None, rows: int, sort_by: str, record_shapes: bool,
        with_stack: bool) -> int:
    """Runs ``script`` with ``args`` as its argv under the profiler; returns its exit status."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python script.py` does
    status = 0
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        profile_memory=True,
        record_shapes=record_shapes,
        with_stack=with_stack,
    ) as prof:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exit_:  # the script's own sys.exit(): still report what ran
            status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
    print(prof.key_averages(group_by_input_shape=record_shapes).table(sort_by=sort_by, row_limit=rows))
    for i in range(torch.foo.device_count()):
        peak, reserved = torch.foo.max_memory_allocated(i), torch.foo.max_memory_reserved(i)
        if peak:
            print(f"foo:{i} peak allocated {peak / 2**20:.1f} MiB, peak reserved {reserved / 2**20:.1f} MiB")
    if trace:
        prof.export_chrome_trace(trace)
        print(f"Chrome trace written to {trace} (open in ui.perfetto.dev or chrome://tracing)")
    return status
