"""Runs the per-OpInfo checks (errors, noncontiguous, out, gradients, complex, fake) on every op of PyTorch's op_db
and writes tests/conformance/{checks.json,checks.md}.

    python tests/conformance_checks_run.py --write          # regenerate baseline and report
    python tests/conformance_checks_run.py --ops add,sum    # a subset (names or name.variant)

tests/test_conformance_checks.py re-runs everything and fails on any regression from `pass`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import foo_rs
import torch
from conformance import OUT_DIR
from conformance_checks import (
    MAX_ERROR_INPUTS,
    MAX_SAMPLES,
    Result,
    check_errors,
    check_noncontiguous,
    op_key,
    quiet,
)
from conformance_fake import FAKE_SAMPLES, check_fake
from conformance_grad import check_complex, check_gradients
from conformance_out import OUT_SAMPLES, check_out

CHECKS: dict[str, Callable[[Any], Result]] = {
    "errors": check_errors,
    "noncontiguous": check_noncontiguous,
    "out": check_out,
    "gradients": check_gradients,
    "complex": check_complex,
    "fake": check_fake,
}
STATUSES = ("pass", "cpu-quirk", "fail", "error", "skip")
GOOD = ("pass", "cpu-quirk")  # foo is right: no regression between them
Results = dict[str, dict[str, Result]]


def run(ops: Iterable[Any] | None = None, progress: bool = False) -> Results:
    from torch.testing._internal.common_methods_invocations import op_db

    results: Results = {}
    foo_rs._C.set_strict(False)
    try:
        for op in ops if ops is not None else op_db:
            t0 = time.perf_counter()
            results[op_key(op)] = {name: quiet(check, op) for name, check in CHECKS.items()}
            if progress and time.perf_counter() - t0 > 2.0:
                print(f"slow op {op_key(op)}: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    finally:
        foo_rs._C.set_strict(None)
    return results


def select(names: str) -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    wanted = set(names.split(","))
    return [op for op in op_db if op.name in wanted or op_key(op) in wanted]


def counts(results: Results) -> dict[str, dict[str, int]]:
    out = {c: dict.fromkeys(STATUSES, 0) for c in CHECKS}
    for per_op in results.values():
        for check, r in per_op.items():
            out[check][r.status] += 1
    return out


def regressions(results: Results, baseline: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """{op: {check: 'status: detail'}} for every (op, check) that passed in the baseline and no longer does."""
    bad: dict[str, dict[str, str]] = {}
    for op, checks in baseline.items():
        for check, status in checks.items():
            r = results.get(op, {}).get(check)
            if status in GOOD and (r is None or r.status not in GOOD):
                bad.setdefault(op, {})[check] = "missing" if r is None else f"{r.status}: {r.detail}"
    return bad


def load_baseline() -> dict[str, dict[str, str]]:
    with open(os.path.join(OUT_DIR, "checks.json")) as f:
        return json.load(f)


def write(results: Results, seconds: float) -> None:
    os.makedirs(OUT_DIR, exist_ok=True)
    # One op per line: a regression or a fix shows up as a one-line diff.
    rows = [f"{json.dumps(op)}: {json.dumps({c: r.status for c, r in per.items()})}"
            for op, per in sorted(results.items())]
    with open(os.path.join(OUT_DIR, "checks.json"), "w") as f:
        f.write("{\n" + ",\n".join(rows) + "\n}\n")
    c = counts(results)
    lines = [
        "# OpInfo checks of the foo backend beyond forward samples",
        "",
        f"torch {torch.__version__}, foo_rs {foo_rs.__version__}; {len(results)} OpInfos, {seconds:.0f} s. "
        "Regenerate: `python tests/conformance_checks_run.py --write`. Every case runs the same inputs "
        "(made on the CPU, copied to foo with their layout) on both backends.",
        "",
        f"- errors: up to {MAX_ERROR_INPUTS} `op.error_inputs('cpu')` per op; foo raises the CPU's exception "
        "class, and a message matching error_regex where the CPU's does.",
        f"- noncontiguous: up to {MAX_SAMPLES} `sample.noncontiguous()` (float32, else int64/bool/float64); values "
        "and strides of dims longer than 1 equal the CPU's on the same non-contiguous sample.",
        f"- out: up to {OUT_SAMPLES} samples; out= cases values / strided / empty / dtype / device "
        "(see tests/conformance_out.py).",
        f"- gradients: up to {MAX_SAMPLES} float64 (else float32) samples; grads of sum(outputs * seeded "
        "random cotangent) w.r.t. every input that requires grad; the forward outputs must agree too.",
        f"- complex: up to {MAX_SAMPLES} complex128 samples; forward values, and gradients where the CPU has a "
        "complex backward (conjugate views and complex kernels are only reached this way).",
        f"- fake: up to {FAKE_SAMPLES} samples in noncontiguous's dtype and {FAKE_SAMPLES} in bfloat16 on foo, "
        "forward and backward, under PyTorch's CrossRefFakeMode: every aten op's fake outputs (what torch.compile "
        "plans with) have the real foo outputs' sizes, strides, dtype, device and aliasing; cpu-quirk: PyTorch's "
        "fake misses the CPU's own result the same way (see tests/conformance_fake.py).",
        "",
        "Repro notation: `T[2,3:f32 nc @1 rg]` is a tensor of shape (2, 3), float32, non-contiguous, storage "
        "offset 1, requires_grad; made on the CPU with the OpInfo's sample generator.",
        "",
        "| check | " + " | ".join(STATUSES) + " |",
        "|---" * (len(STATUSES) + 1) + "|",
    ]
    lines += [f"| {k} | " + " | ".join(str(v[s]) for s in STATUSES) + " |" for k, v in c.items()]
    for wanted, title in ((("fail", "error"), "Differences (fail, error)"),
                          (("cpu-quirk",), "The CPU's own defects (cpu-quirk: foo gives the op's result)"),
                          (("skip",), "Skipped")):
        lines += ["", f"## {title}", "", "| op | check | status | detail |", "|---|---|---|---|"]
        for op, per in sorted(results.items()):
            for check, r in per.items():
                if r.status in wanted:
                    detail = r.detail.replace("|", "\\|").replace("\n", " ")
                    lines.append(f"| {op} | {check} | {r.status} | {detail} |")
    with open(os.path.join(OUT_DIR, "checks.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--write", action="store_true", help="regenerate checks.json and checks.md")
    p.add_argument("--ops", help="comma-separated op names (or name.variant) to run instead of all")
    p.add_argument("--show", action="store_true", help="print every non-pass row")
    args = p.parse_args()
    t0 = time.perf_counter()
    results = run(select(args.ops) if args.ops else None, progress=True)
    seconds = time.perf_counter() - t0
    if args.show:
        for op, per in results.items():
            for check, r in per.items():
                if r.status != "pass":
                    print(f"{op:28} {check:14} {r.status:5} {r.detail}")
    print(json.dumps(counts(results)), f"{seconds:.1f}s")
    if args.write:
        write(results, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
