"""Conformance against PyTorch's ModuleInfo database (`common_modules.module_db`): every module is
built on the CPU from its ModuleInput, deep-copied and moved with `.to("foo")` (Lazy modules before
their first forward, as users do), and run on both backends on the same inputs.

    python tests/module_conformance.py --write             # regenerate tests/conformance/modules.{json,md}
    python tests/module_conformance.py --only nn.Linear -v  # one module, every mismatch printed

Rows are `<module>.<mode>.<check>`; modes: `train`, and `eval` where `train_and_eval_differ` (as
PyTorch's own module tests do). Checks, each against the CPU run on the same (contiguous) inputs:
- forward:          outputs (values, dtype, shape, strides) and the buffers after the call;
- backward:         sum(output * fixed random cotangent).backward(): gradients of the inputs and of
                    every parameter, by name (values, dtype, shape, strides);
- no_grad:          forward under torch.no_grad() (inference fast paths: MultiheadAttention, Transformer);
- noncontig:        forward + backward with every input tensor non-contiguous (NaN in the gaps, so a
                    kernel that reads them shows), against the CPU given the same layouts;
- noncontig_params: the same with every parameter non-contiguous instead;
- gradgrad:         second-order gradients (the first ones contracted with a second cotangent);
- float32:          forward + backward with module and inputs in float32 (the other checks: float64);
- channels_last:    forward + backward with the module and its 4-d/5-d inputs in channels_last(_3d),
                    the CPU converted alike: output and gradient strides must match too;
- errors:           module_error_inputs_func's forward errors: foo raises the CPU's exception class.
Status: `pass`; `fail` (a result differs, or foo's exception class differs from the CPU's); `error`
(foo raised where the CPU did not); `skip` (with the reason: random output, nothing to check, ...).
tests/test_module_conformance.py re-runs it and fails when a row that passed in the baseline regresses.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import foo_rs
import torch
from conformance import summary
from module_compare import (
    RANK,
    Status,
    compare,
    copy_inputs,
    describe,
    differs,
    flatten_outputs,
    move_module,
    run_once,
    tensors_in,
    worst,
)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "conformance")
# Inputs per module and mode, taken evenly spaced over module_inputs_func's list so both ends of
# it (e.g. RNN's bias/bidirectional grid) are covered. 16 covers every input of all but 9 modules
# (LinearCrossEntropyLoss has 881) and keeps the run near 20 s on 2 cores.
MAX_INPUTS = 16
SEED = 0
CHECKS = ("forward", "backward", "no_grad", "noncontig", "noncontig_params", "gradgrad", "float32", "channels_last",
          "errors")
# The PyTorch test (in test/test_modules.py) that each check corresponds to, for module_info's decorators.
_TEST_NAMES = {"forward": "test_forward", "backward": "test_grad", "no_grad": "test_forward",
               "noncontig": "test_non_contiguous_tensors", "noncontig_params": "test_non_contiguous_tensors",
               "gradgrad": "test_gradgrad", "float32": "test_forward", "channels_last": "test_memory_format",
               "errors": "test_errors"}


def _expected_cpu_failure(info: Any, check: str, training: bool, dtype: torch.dtype) -> str | None:
    """The expectedFailure/skip decorator module_info applies on the CPU to the PyTorch test behind
    `check`, if any. Consulted only when the CPU run raised: foo is compared with the CPU, so a
    decorator about PyTorch's own expectations never excuses foo differing from a working CPU."""
    from torch.testing._internal.common_methods_invocations import DecorateInfo

    for d in info.decorators:
        if not isinstance(d, DecorateInfo) or d.device_type not in (None, "cpu"):
            continue
        if d.test_name not in (None, _TEST_NAMES[check]) or (d.dtypes is not None and dtype not in d.dtypes):
            continue
        if not (d.active_if({"training": training}) if callable(d.active_if) else d.active_if):
            continue
        for f in d.decorators:
            name = getattr(f, "__qualname__", "")
            if name.startswith("skip.<locals>"):  # unittest.skip(reason)
                reason = inspect.getclosurevars(f).nonlocals.get("reason", "")
                return f"unittest.skip({reason!r}) for {_TEST_NAMES[check]}"
            if name == "expectedFailure" or (name.startswith("skip") and not any(
                    other in name for other in ("MPS", "Xpu", "Meta", "Cuda", "CUDA"))):
                return f"{name} for {_TEST_NAMES[check]}"
    return None


def _pick(items: list[Any], k: int) -> list[Any]:
    if len(items) <= k:
        return items
    if k == 1:
        return items[:1]
    return [items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)]


def _random_output(mod: torch.nn.Module, fi: Any) -> bool:
    """Whether the CPU output changes with the random seed (dropout-like in training, etc.)."""
    outs = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        args, kwargs = copy_inputs(fi, "cpu")
        try:
            with torch.no_grad():
                outs.append(flatten_outputs(copy.deepcopy(mod)(*args, **kwargs)))
        except Exception:  # noqa: BLE001 - a raising forward is compared (as an exception) later
            return False
    return differs(outs[0], outs[1], False) is not None


# ---------------------------------------------------------------------------------------------
# Checks on one ModuleInput: each returns {check: status}


def _memory_format(fi: Any) -> tuple[torch.memory_format, int] | None:
    ranks = {t.dim() for t in tensors_in((fi.args, fi.kwargs))}
    if 4 in ranks:
        return torch.channels_last, 4
    if 5 in ranks:
        return torch.channels_last_3d, 5
    return None


def _case_checks(info: Any, base: torch.nn.Module, foo_base: torch.nn.Module, fi: Any,
                 expected: Callable[[str], str | None]) -> dict[str, Status]:
    from torch.testing._internal.common_utils import noncontiguous_like

    def against(check: str, ref: Any, foo_mod: torch.nn.Module, foo_in: tuple[Any, Any], strides: bool,
                order: int = 1) -> dict[str, Status]:
        foo = run_once(foo_mod, *foo_in, order=order)
        res = compare(foo, ref, strides)
        why = expected(check)
        if why and (ref.fwd_exc is not None or ref.bwd_exc is not None):
            # The CPU raised, as module_info expects; foo matching it (same class) still passes.
            return {k: st if st[0] == "pass" else ("skip", f"CPU raises, and module_info marks it {why} on CPU: "
                                                   f"{st[1]}") for k, st in res.items()}
        return res

    out: dict[str, Status] = {}
    ref = run_once(copy.deepcopy(base), *copy_inputs(fi, "cpu"))
    res = against("forward", ref, copy.deepcopy(foo_base), copy_inputs(fi, "foo"), True)
    out["forward"], out["backward"] = res["forward"], res["backward"]
    with torch.no_grad():  # inference: the path of MultiheadAttention's and Transformer's fast kernels
        ref_ng = run_once(copy.deepcopy(base), *copy_inputs(fi, "cpu"))
        out["no_grad"] = against("no_grad", ref_ng, copy.deepcopy(foo_base), copy_inputs(fi, "foo"), True)["forward"]
    # Against the CPU given the same non-contiguous inputs: foo hands a fallback op the inputs'
    # own strides, so where the CPU's kernel reads strided inputs differently (CTCLoss's 1-d
    # targets) foo gives what the CPU gives, not what a contiguous input gives.
    ref_nc = run_once(copy.deepcopy(base), *copy_inputs(fi, "cpu", noncontig=True))
    out["noncontig"] = worst(against("noncontig", ref_nc, copy.deepcopy(foo_base),
                                     copy_inputs(fi, "foo", noncontig=True), False))

    m = copy.deepcopy(foo_base)
    if not list(m.parameters()):
        out["noncontig_params"] = ("skip", "no parameters")
    else:
        with torch.no_grad():
            for p in m.parameters():
                p.data = noncontiguous_like(p.data)
        out["noncontig_params"] = worst(against("noncontig_params", ref, m, copy_inputs(fi, "foo"), False))

    if not info.supports_gradgrad:
        out["gradgrad"] = ("skip", "module_info: supports_gradgrad=False")
    else:
        ref2 = run_once(copy.deepcopy(base), *copy_inputs(fi, "cpu"), order=2)
        if ref2.fwd_exc is None and ref2.bwd_exc is None and ref2.grads is None:
            out["gradgrad"] = ("skip", "no second-order graph on CPU")
        else:
            out["gradgrad"] = against("gradgrad", ref2, copy.deepcopy(foo_base), copy_inputs(fi, "foo"), True,
                                      order=2)["backward"]

    def single(t: torch.Tensor) -> torch.Tensor:
        return t.float() if t.dtype == torch.float64 else t

    ref32 = run_once(copy.deepcopy(base).float(), *copy_inputs(fi, "cpu", convert=single))
    out["float32"] = worst(against("float32", ref32, copy.deepcopy(foo_base).float(),
                                   copy_inputs(fi, "foo", convert=single), True))

    fmt = _memory_format(fi)
    if fmt is None:
        out["channels_last"] = ("skip", "no 4-d or 5-d input")
    else:
        def to_fmt(t: torch.Tensor) -> torch.Tensor:
            return t.contiguous(memory_format=fmt[0]) if t.dim() == fmt[1] else t

        try:
            base_cl = copy.deepcopy(base).to(memory_format=fmt[0])
        except Exception as e:  # noqa: BLE001 - the CPU cannot convert it: nothing to compare
            out["channels_last"] = ("skip", f"CPU module.to({fmt[0]}): {describe(e)}")
        else:
            ref_cl = run_once(base_cl, *copy_inputs(fi, "cpu", convert=to_fmt))
            try:
                foo_cl = copy.deepcopy(foo_base).to(memory_format=fmt[0])
            except Exception as e:  # noqa: BLE001
                out["channels_last"] = ("error", f"module.to({fmt[0]}): {describe(e)}")
            else:
                out["channels_last"] = worst(against("channels_last", ref_cl, foo_cl,
                                                     copy_inputs(fi, "foo", convert=to_fmt), True))
    return out


# ---------------------------------------------------------------------------------------------
# One module in one mode


def _build(info: Any, constructor_input: Any, dtype: torch.dtype, training: bool) -> torch.nn.Module:
    torch.manual_seed(SEED)
    return info.module_cls(*constructor_input.args, **constructor_input.kwargs).to(dtype).train(training)


def _materialize_lazy(base: torch.nn.Module, foo_base: torch.nn.Module, fi: Any) -> Status | None:
    """Lazy modules: materialize both with a first forward (each on its own device), check that
    foo's parameters came out like the CPU's, then give foo the CPU's values (the initial values
    come from each device's random stream). A status when that already goes wrong."""
    errors = []
    for m, dev in ((base, "cpu"), (foo_base, "foo")):
        try:
            with torch.no_grad():
                args, kwargs = copy_inputs(fi, dev)
                m(*args, **kwargs)
            errors.append(None)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    if errors[0] is not None:
        return None  # the CPU cannot run it: the checks compare the exceptions
    if errors[1] is not None:
        return ("error", f"lazy first forward: {describe(errors[1])}")
    shapes = {n: (tuple(p.shape), p.dtype) for n, p in base.named_parameters()}
    foo_shapes = {n: (tuple(p.shape), p.dtype) for n, p in foo_base.named_parameters()}
    off = [n for n, p in foo_base.named_parameters() if p.device.type != "foo"]
    if shapes != foo_shapes or off:
        return ("fail", f"lazy materialization: {foo_shapes} on foo vs {shapes} on CPU; not on foo: {off}")
    foo_base.load_state_dict(base.state_dict())
    return None


def _error_inputs(info: Any, dtype: torch.dtype, training: bool) -> Status:
    """errors check: every forward error input raises the CPU's exception class on foo too."""
    from torch.testing._internal.common_modules import ModuleErrorEnum

    if info.module_error_inputs_func is None:
        return ("skip", "no module_error_inputs_func")
    torch.manual_seed(SEED)
    inputs = [e for e in info.module_error_inputs_func(info, device="cpu", dtype=dtype, requires_grad=False,
                                                       training=training)
              if e.error_on == ModuleErrorEnum.FORWARD_ERROR]
    if not inputs:
        return ("skip", "only construction errors (made on the CPU, device-independent)")
    status: Status = ("pass", "")
    for i, e in enumerate(inputs):
        mi = e.module_error_input
        base = _build(info, mi.constructor_input, dtype, training)
        foo_mod = move_module(base)
        ref = run_once(base, *copy_inputs(mi.forward_input, "cpu"))
        st = compare(run_once(foo_mod, *copy_inputs(mi.forward_input, "foo")), ref, True)["forward"]
        if RANK[st[0]] > RANK[status[0]]:
            status = (st[0], f"[error input {i}: {e.error_type.__name__} /{e.error_regex}/] {st[1]}")
    return status


def run_mode(info: Any, training: bool, verbose: str | None = None) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """Rows `<module>.<mode>.<check>` for one module and mode, and the ops foo ran through the fallback.
    verbose: print every non-passing case of that check ("all": of every check)."""
    prefix = f"{info.name}.{'train' if training else 'eval'}"
    dtype = torch.float64 if torch.float64 in info.supported_dtypes("cpu") else torch.float32
    status: dict[str, Status] = {c: ("skip", "no input") for c in CHECKS}
    foo_rs.reset_op_counts()

    def record(check: str, st: Status, case: str) -> None:
        if st[0] != "pass" and verbose in ("all", check):
            print(f"  {prefix}.{check} [{case}]: {st[0]} {st[1]}")
        # Keep the worst status, with the first detail at that level.
        if RANK[st[0]] > RANK[status[check][0]] or status[check][1] == "no input":
            status[check] = (st[0], f"[{case}] {st[1]}" if st[1] else "")

    def record_all(st: Status, case: str) -> None:
        for c in CHECKS:
            if c != "errors":
                record(c, st, case)

    torch.manual_seed(SEED)
    try:
        inputs = list(info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True,
                                              training=training))
    except Exception as e:  # noqa: BLE001 - a generator that fails on the CPU says nothing about foo
        inputs = []
        record_all(("skip", f"input generation: {describe(e)}"), "-")
    for idx, mi in enumerate(_pick([i for i in inputs if i.forward_input is not None], MAX_INPUTS)):
        case = mi.desc or f"input {idx}"
        try:
            base = _build(info, mi.constructor_input, dtype, training)
        except Exception as e:  # noqa: BLE001
            record_all(("skip", f"construction on CPU: {describe(e)}"), case)
            continue
        try:
            foo_base = move_module(base)
        except Exception as e:  # noqa: BLE001
            record_all(("error", f".to('foo'): {describe(e)}"), case)
            continue
        if info.is_lazy:
            st = _materialize_lazy(base, foo_base, mi.forward_input)
            if st is not None:
                record_all(st, case)
                continue
        if _random_output(base, mi.forward_input):
            record_all(("skip", "random output (depends on the seed on CPU)"), case)
            continue

        def expected(check: str) -> str | None:
            return _expected_cpu_failure(info, check, training, torch.float32 if check == "float32" else dtype)

        for check, st in _case_checks(info, base, foo_base, mi.forward_input, expected).items():
            record(check, st, case)
    try:
        status["errors"] = _error_inputs(info, dtype, training)
    except Exception as e:  # noqa: BLE001 - building the error inputs failed on the CPU
        status["errors"] = ("skip", f"error inputs on CPU: {describe(e)}")
    rows = {f"{prefix}.{c}": {"status": s, "detail": d} for c, (s, d) in status.items()}
    return rows, set(foo_rs.fallback_counts())


def run(infos: Iterable[Any] | None = None, verbose: str | None = None,
        modes: tuple[str, ...] = ("train", "eval")) -> dict[str, dict[str, Any]]:
    """All rows; each carries `native` (no op of the module fell back to the CPU) and `fallbacks`."""
    from torch.testing._internal.common_modules import module_db

    results: dict[str, dict[str, Any]] = {}
    foo_rs._C.set_strict(False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for info in infos if infos is not None else module_db:
                for training in (True, False) if info.train_and_eval_differ else (True,):
                    if ("train" if training else "eval") not in modes:
                        continue
                    t0 = time.perf_counter()
                    rows, fb = run_mode(info, training, verbose)
                    if verbose:
                        print(f"{info.name} {'train' if training else 'eval'}: {time.perf_counter() - t0:.2f}s")
                    for k, v in rows.items():
                        results[k] = {**v, "native": not fb, "fallbacks": sorted(fb)}
    finally:
        foo_rs._C.set_strict(None)
    return results


# ---------------------------------------------------------------------------------------------
# Report



def _repro(key: str) -> str:
    name, mode, check = key.rsplit(".", 2)
    return f"`python tests/module_conformance.py --only {name} --mode {mode} --check {check} -v`"


def write(results: dict[str, dict[str, Any]], seconds: float) -> None:
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "modules.json"), "w") as f:
        json.dump({k: {"status": v["status"], "detail": v["detail"]} for k, v in sorted(results.items())},
                  f, indent=0, sort_keys=True)
        f.write("\n")
    s = summary(results)
    n_mod = len({k.rsplit(".", 2)[0] for k in results})
    by_check = {c: summary({k: v for k, v in results.items() if k.endswith("." + c)}) for c in CHECKS}
    fallback_ops = sorted({op for v in results.values() for op in v["fallbacks"]})
    lines = [
        "# ModuleInfo conformance of the foo backend",
        "",
        f"torch {torch.__version__}, foo_rs {foo_rs.__version__}; every ModuleInfo in `module_db`, up to "
        f"{MAX_INPUTS} inputs per module and mode, float64 (the float32 check: float32), compared with the CPU "
        f"backend ({seconds:.0f} s on this machine). The checks are described at the top of "
        "tests/module_conformance.py. Regenerate: `python tests/module_conformance.py --write`.",
        "",
        f"- modules: {n_mod}; rows (module x mode x check): {len(results)}; pass {s['pass']} (of which native, "
        f"i.e. the module ran without the CPU fallback: {s['pass_native']}); fail {s['fail']}; "
        f"error {s['error']}; skip {s['skip']}",
    ]
    for c, cs in by_check.items():
        lines.append(f"- {c}: pass {cs['pass']}, fail {cs['fail']}, error {cs['error']}, skip {cs['skip']}")
    lines += ["", f"Ops that ran through the CPU fallback: {', '.join(fallback_ops) or 'none'}."]
    sections = (("Differences from the CPU (fail, error)", ("fail", "error")), ("Skipped rows", ("skip",)))
    for title, statuses in sections:
        lines += ["", f"## {title}", "", "| row | status | detail | repro |", "|---|---|---|---|"]
        for k, v in sorted(results.items()):
            if v["status"] in statuses:
                detail = v["detail"].replace("|", "\\|")
                lines.append(f"| {k} | {v['status']} | {detail} | {_repro(k)} |")
    with open(os.path.join(OUT_DIR, "modules.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--write", action="store_true", help="regenerate tests/conformance/modules.{json,md}")
    p.add_argument("--only", action="append", help="module name (e.g. nn.Linear); repeatable")
    p.add_argument("--mode", choices=("train", "eval"), help="with --only: just this mode")
    p.add_argument("--check", choices=CHECKS, help="with --only: print just this check's row")
    p.add_argument("-v", "--verbose", action="store_true", help="print every mismatch and per-module time")
    args = p.parse_args()
    from torch.testing._internal.common_modules import module_db

    infos = [m for m in module_db if not args.only or m.name in args.only]
    if args.only and not infos:
        p.error(f"no ModuleInfo named {args.only}")
    t0 = time.perf_counter()
    results = run(infos, (args.check or "all") if args.verbose else None,
                  (args.mode,) if args.mode else ("train", "eval"))
    seconds = time.perf_counter() - t0
    for k, v in sorted(results.items()):
        _, mode, check = k.rsplit(".", 2)
        if (args.mode and mode != args.mode) or (args.check and check != args.check):
            continue
        if args.only or v["status"] != "pass":
            print(f"{k}: {v['status']} {v['detail']}" + (f" (fallbacks: {v['fallbacks']})" if v["fallbacks"] else ""))
    print(summary(results), f"{seconds:.1f}s")
    if args.write:
        if args.only:
            p.error("--write regenerates the full report; drop --only")
        write(results, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
