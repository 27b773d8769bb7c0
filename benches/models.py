"""Times whole models on foo and on torch's CPU backend in one process: a training step (forward, loss,
backward, AdamW step) and inference (eval mode, no_grad), from the same initial weights and inputs,
with the same number of threads, each foo variant timed back to back with its CPU twin and foo/CPU
the median of those pairs' ratios, so that the machine's drift hits both. The transformer models are
also timed under autocast(bfloat16) on each backend. Before timing, each model's loss over two
training steps is compared between the backends (a broken model shows up here), and the model with
the worst training ratio (or --profile MODEL) is profiled op by op on both backends.

    python benches/models.py [--threads 2] [--repeat 5] [--rounds 3] [--filter name] [--quick]
                             [--profile MODEL] [--markdown FILE]

The models come from torchvision and transformers (`make bench-models` installs both, pinned in
requirements-bench.txt); see model_cases.py.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import math
import os
import statistics
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import foo_rs
import torch
from compare_cpu import timeit
from model_cases import CASES, NEEDS, Case
from model_profile import profile_table
from torch import nn

Step = Callable[[], torch.Tensor]
CHECK_DECREASE = 0.02  # the loss decrease a checked step's length predicts (see train_losses)
LOSS_TOLERANCE = 1e-4  # relative; float32 on both backends, only summation orders differ (seen: <= 1e-6)


def use_threads(n: int) -> None:
    """Both backends on n threads. foo reads FOO_RS_NUM_THREADS once, when its pool first starts
    (see src/runtime/pool.rs), so a process started without it is started again with it."""
    torch.set_num_threads(n)
    if foo_rs._C.num_threads() == n:
        return
    if os.environ.get("FOO_RS_NUM_THREADS") == str(n):
        sys.exit(f"FOO_RS_NUM_THREADS={n} but foo runs {foo_rs._C.num_threads()} threads: "
                 f"{foo_rs._C.thread_setting_note()}")
    os.environ["FOO_RS_NUM_THREADS"] = str(n)
    os.execv(sys.executable, [sys.executable, *sys.argv])


def train_step(case: Case, model: nn.Module, device: str, amp: torch.dtype | None) -> Step:
    """One training step on a copy of the case's inputs on `device`; AdamW with each backend's
    default implementation (foreach on foo, as on CUDA; a loop over parameters on the CPU)."""
    inputs = tuple(t.to(device) for t in case.inputs)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=amp or torch.bfloat16, enabled=amp is not None):
            loss = case.loss(case.forward(model, inputs), inputs)
        loss.backward()
        opt.step()
        return loss
    return step


def infer_step(case: Case, model: nn.Module, device: str, amp: torch.dtype | None) -> Step:
    inputs = tuple(t.to(device) for t in case.inputs)

    def run() -> torch.Tensor:
        with torch.no_grad(), torch.autocast(device, dtype=amp or torch.bfloat16, enabled=amp is not None):
            return case.forward(model, inputs)
    return run


def model_on(case: Case, device: str, train: bool) -> nn.Module:
    """A copy of the case's CPU-built model on `device`: every backend starts from the same weights."""
    return copy.deepcopy(case.model).to(device).train(train)


def train_losses(case: Case, device: str, steps: int = 2) -> list[float]:
    """The loss of the first `steps` training steps (float32): the first checks the forward pass,
    the later ones the backward pass.

    The steps are plain gradient steps whose length predicts a loss decrease of `CHECK_DECREASE`
    (lr = CHECK_DECREASE * loss / |grad|^2), not the timed steps' AdamW: AdamW's first step
    moves every weight by about lr times its gradient's sign, so a gradient near zero, whose sign
    rounding decides, moves the next loss by a whole step. Seen: one ReLU input of 9e-6 that
    rounds below zero on one backend and not on the other (resnet18, after a change of summation
    order) changed the gradients before it by up to 40% of their largest element and the second
    AdamW loss by 2e-4 (relative); a gradient step's loss moves by what the gradients differ."""
    model = model_on(case, device, True)
    inputs = tuple(t.to(device) for t in case.inputs)
    losses = []
    for _ in range(steps):
        model.zero_grad(set_to_none=True)
        loss = case.loss(case.forward(model, inputs), inputs)
        loss.backward()
        with torch.no_grad():
            params = [p for p in model.parameters() if p.grad is not None]
            grads = [p.grad for p in params]
            squares = sum(float(torch.linalg.vector_norm(g)) ** 2 for g in grads)
            torch._foreach_add_(params, grads, alpha=-CHECK_DECREASE * loss.item() / max(squares, 1e-30))
        losses.append(loss.item())
    return losses


@contextlib.contextmanager
def fallbacks_into(ops: set[str]) -> Iterator[None]:
    """Adds to `ops` the ops that went through foo's CPU fallback inside the block."""
    before = foo_rs.fallback_counts()
    with warnings.catch_warnings():  # the fallback's one warning per op: the check table lists them
        warnings.simplefilter("ignore")
        yield
    ops.update(op for op, n in foo_rs.fallback_counts().items() if n > before.get(op, 0))


@dataclass
class Check:
    cpu: list[float]
    foo: list[float]
    fallbacks: set[str]  # in any variant, timed ones included

    @property
    def rel_diff(self) -> float:
        return max(abs(f - c) / max(abs(c), 1e-12) for c, f in zip(self.cpu, self.foo))


def variants(case: Case) -> dict[tuple[str, str, str], Step]:
    """(mode, device, precision) -> step; bfloat16 autocast only for the transformer models."""
    out: dict[tuple[str, str, str], Step] = {}
    precisions: list[tuple[str, torch.dtype | None]] = [("f32", None)]
    if case.transformer:
        precisions.append(("bf16", torch.bfloat16))
    models = {device: (model_on(case, device, True), model_on(case, device, False)) for device in ("cpu", "foo")}
    # Each foo variant right after its CPU twin: `measure` times them back to back.
    for name, amp in precisions:
        for device in ("cpu", "foo"):
            out["train", device, name] = train_step(case, models[device][0], device, amp)
        for device in ("cpu", "foo"):
            out["infer", device, name] = infer_step(case, models[device][1], device, amp)
    return out


Times = dict[tuple[str, str, str], list[float]]  # variant -> each round's median seconds per step


def measure(steps: dict[tuple[str, str, str], Step], repeat: int, rounds: int, warmup: int) -> Times:
    """Each round times every variant once, in `steps`' order reversed every other round (so a
    foo variant runs right after its CPU twin in one round and right before it in the next)."""
    for fn in steps.values():
        for _ in range(warmup):
            fn()
    times: dict[tuple[str, str, str], list[float]] = {k: [] for k in steps}
    order = list(steps)
    for r in range(rounds):
        for key in order if r % 2 == 0 else reversed(order):
            sync = torch.foo.synchronize if key[1] == "foo" else (lambda: None)
            times[key].append(timeit(steps[key], repeat, sync))
    return times


def ms(t: Times, key: tuple[str, str, str]) -> float:
    """A variant's median over the rounds, in milliseconds."""
    return statistics.median(t[key]) * 1e3


def foo_vs_cpu(t: Times, mode: str, precision: str = "f32") -> float:
    """foo's time over the CPU's: the median of the rounds' ratios, each of two timings taken back
    to back. The machines drift (a neighbour's load, slow stretches of seconds to minutes), and a
    ratio of the two medians mixes timings from different stretches; this pairs like with like."""
    pairs = zip(t[mode, "foo", precision], t[mode, "cpu", precision])
    return statistics.median(f / c for f, c in pairs)


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def speed_table(results: dict[str, Times]) -> str:
    rows = ["| model | train CPU ms | train foo ms | train foo/CPU | infer CPU ms | infer foo ms | infer foo/CPU |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    ratios: dict[str, list[float]] = {"train": [], "infer": []}
    for name, t in results.items():
        cells = [name]
        for mode in ("train", "infer"):
            ratio = foo_vs_cpu(t, mode)
            ratios[mode].append(ratio)
            cells += [f"{ms(t, (mode, 'cpu', 'f32')):.2f}", f"{ms(t, (mode, 'foo', 'f32')):.2f}", f"{ratio:.2f}"]
        rows.append("| " + " | ".join(cells) + " |")
    rows.append(f"| geometric mean | | | {_geomean(ratios['train']):.2f} | | | {_geomean(ratios['infer']):.2f} |")
    return "\n".join(rows)


def autocast_table(results: dict[str, Times]) -> str:
    rows = ["| model | mode | CPU f32 ms | CPU bf16 ms | CPU bf16/f32 | foo f32 ms | foo bf16 ms | foo bf16/f32 |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, t in results.items():
        for mode in ("train", "infer"):
            if (mode, "foo", "bf16") not in t:
                continue
            cells = [name, mode]
            for device in ("cpu", "foo"):
                f32, bf16 = ms(t, (mode, device, "f32")), ms(t, (mode, device, "bf16"))
                cells += [f"{f32:.2f}", f"{bf16:.2f}", f"{bf16 / f32:.2f}"]
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def check_table(checks: dict[str, Check]) -> str:
    rows = ["| model | CPU losses | foo losses | max rel. diff | foo ops on the CPU fallback |",
            "|---|---|---|---:|---|"]
    for name, c in checks.items():
        flag = "" if c.rel_diff <= LOSS_TOLERANCE else " MISMATCH"
        losses = [", ".join(f"{x:.6f}" for x in xs) for xs in (c.cpu, c.foo)]
        rows.append(f"| {name} | {losses[0]} | {losses[1]} | {c.rel_diff:.1e}{flag} | "
                    f"{', '.join(sorted(c.fallbacks)) or 'none'} |")
    return "\n".join(rows)


def machine_info(threads: int) -> str:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        cpu = next(line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        cpu = "unknown CPU"
    versions = [f"torch {torch.__version__}", f"foo_rs {foo_rs.__version__}"]
    for pkg in ("torchvision", "transformers"):
        if importlib.util.find_spec(pkg):
            versions.append(f"{pkg} {__import__(pkg).__version__}")
    return (f"{cpu}, {os.cpu_count()} logical CPUs; threads: CPU {torch.get_num_threads()}, "
            f"foo {foo_rs._C.num_threads()} (asked {threads}); {', '.join(versions)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5, help="at least this many timed steps per round")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per variant")
    p.add_argument("--filter", default="", help="only the models whose name contains this")
    p.add_argument("--quick", action="store_true", help="one round of one step: a smoke run")
    p.add_argument("--profile", metavar="MODEL", choices=list(CASES),
                   help="profile this model (default: the worst train foo/CPU)")
    p.add_argument("--markdown", metavar="FILE", help="also write the tables to FILE")
    args = p.parse_args()
    use_threads(args.threads)
    repeat, rounds, warmup, prof_steps = (1, 1, 1, 1) if args.quick else (args.repeat, args.rounds, 2, 3)

    report = [machine_info(args.threads),
              f"median of >= {repeat} steps and >= 50 ms per round; ms: median of {rounds} interleaved rounds, "
              f"foo/CPU: median of the rounds' ratios (foo and CPU back to back)"]
    print("\n".join(report), flush=True)
    names = [n for n in CASES if args.filter in n]
    missing = sorted({NEEDS[n] for n in names if NEEDS[n] and not importlib.util.find_spec(NEEDS[n])})
    if missing:
        note = f"skipped (not installed: {', '.join(missing)}; `make bench-models` installs them): "
        skipped = [n for n in names if NEEDS[n] in missing]
        report.append(note + ", ".join(skipped))
        print(report[-1])
        names = [n for n in names if n not in skipped]

    checks: dict[str, Check] = {}
    results: dict[str, Times] = {}
    cases: dict[str, Case] = {}
    for name in names:
        print(f"{name}: checking, timing", file=sys.stderr, flush=True)
        cases[name] = case = CASES[name]()
        fallbacks: set[str] = set()
        with fallbacks_into(fallbacks):
            foo_losses = train_losses(case, "foo")
            results[name] = measure(variants(case), repeat, rounds, warmup)
        checks[name] = Check(train_losses(case, "cpu"), foo_losses, fallbacks)

    sections = ["## foo vs CPU, float32", speed_table(results),
                "## Loss of the first two training steps from the same weights; foo's fallbacks",
                check_table(checks)]
    if any(c.transformer for c in cases.values()):
        sections += ["## autocast(bfloat16) vs float32, each backend", autocast_table(results)]
    target = args.profile or (max(results, key=lambda n: foo_vs_cpu(results[n], "train")) if results else None)
    if target:
        case = cases.get(target) or CASES[target]()
        profiled = {d: train_step(case, model_on(case, d, True), d, None) for d in ("foo", "cpu")}
        sections += [f"## Profile of {target}: self CPU time per training step, top ops on either backend",
                     profile_table(profiled["foo"], profiled["cpu"], prof_steps)]
    for s in sections:
        print(f"\n{s}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n\n".join(report + sections) + "\n")


if __name__ == "__main__":
    main()
