"""Conformance against PyTorch's OpInfo database: for each OpInfo, sample inputs are made on the
CPU, copied to foo, the op runs on both, and the results are compared.

    python tests/conformance.py --write     # regenerate tests/conformance/{report.md,baseline.json}

Per op: `pass` (every comparable sample agrees), `fail` (a result differs), `error` (foo raised
where the CPU did not), or `skip` (random ops, ops the CPU cannot run on the samples); and
`native` when no sample needed the CPU fallback (such an op passes under FOO_RS_STRICT=1 too).
tests/test_conformance.py re-runs it and fails if an op that passed in the baseline no longer does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Iterable
from typing import Any

import foo_rs
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "conformance")
MAX_SAMPLES = 4
# Outputs that depend on a random stream (or on memory contents) cannot be compared with CPU.
NONDETERMINISTIC = ("rand", "normal", "bernoulli", "multinomial", "dropout", "uniform", "empty", "poisson",
                    "exponential", "geometric", "cauchy", "log_normal", "randint", "randperm", "new_empty",
                    "as_strided_scatter", "resize_", "resize_as_", "bincount", "unique", "fractional_max_pool")
# Ops whose non-input tensor arguments must stay on the CPU (as for CUDA).
CPU_ARGS = ("tensor_split",)


def _to_foo(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        # Copy the whole storage and view it the same way (keeps offsets and partial views).
        x = x.detach()
        if x.layout != torch.strided:
            return x.to("foo")
        n = x.untyped_storage().nbytes() // max(x.element_size(), 1)
        flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (n,), (1,))
        y = flat.to("foo").as_strided(x.size(), x.stride(), x.storage_offset())
        # Conjugate and negative views carry their operation as a bit, not in the storage's bytes.
        y = y.conj() if x.is_conj() else y
        return torch._neg_view(y) if x.is_neg() else y
    if isinstance(x, (list, tuple)):
        return type(x)(_to_foo(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_foo(v) for k, v in x.items()}
    return x


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flatten(v)]
    return [x]


def _same(got: Any, want: Any) -> bool:
    g, w = _flatten(got), _flatten(want)
    if len(g) != len(w):
        return False
    for a, b in zip(g, w):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return False
            a = a.detach().cpu()
            if a.dtype != b.dtype or a.shape != b.shape:
                return False
            if b.is_sparse or b.layout != torch.strided:
                continue
            tol = {"atol": 1e-4, "rtol": 1e-4} if b.dtype in (torch.float32, torch.complex64) else {}
            try:
                torch.testing.assert_close(a, b.detach(), equal_nan=True, **tol)
            except AssertionError:
                return False
        elif isinstance(b, float):
            if not (a == b or (a != a and b != b) or abs(a - b) <= 1e-4 * max(1.0, abs(b))):
                return False
        elif a != b:
            return False
    return True


def _dtype_for(op: Any) -> torch.dtype | None:
    dtypes = op.supported_dtypes("cpu")
    for d in (torch.float32, torch.int64, torch.bool, torch.float64):
        if d in dtypes:
            return d
    return None


def run_op(op: Any) -> tuple[str, bool, str]:
    """(status, native, detail) for one OpInfo."""
    if any(k in op.name for k in NONDETERMINISTIC):
        return "skip", False, "nondeterministic output"
    dtype = _dtype_for(op)
    if dtype is None:
        return "skip", False, "no supported dtype on CPU"
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:MAX_SAMPLES]
    except Exception as e:  # noqa: BLE001 - a sample generator that fails on CPU says nothing about foo
        return "skip", False, f"sample generation: {type(e).__name__}"
    compared = 0
    native = True
    for s in samples:
        if isinstance(s.input, torch.Tensor) and s.input.layout != torch.strided:
            return "skip", False, "sparse layout (foo tensors are strided)"
        if s.kwargs.get("dropout_p", 0) or s.kwargs.get("training") is True:
            continue  # a random dropout mask: not comparable
        try:
            want = op(s.input, *s.args, **s.kwargs)
        except Exception:  # noqa: BLE001
            continue
        fin = _to_foo(s.input)
        fargs, fkw = (s.args, s.kwargs) if op.name in CPU_ARGS else (_to_foo(s.args), _to_foo(s.kwargs))
        foo_rs.reset_op_counts()
        try:
            got = op(fin, *fargs, **fkw)
        except Exception as e:  # noqa: BLE001
            return "error", False, f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
        if foo_rs.fallback_counts():
            native = False
        compared += 1
        if not _same(got, want):
            return "fail", native, "result differs from CPU"
    if compared == 0:
        return "skip", False, "no sample runs on CPU"
    return "pass", native, ""


def run(ops: Iterable[Any] | None = None) -> dict[str, dict[str, Any]]:
    from torch.testing._internal.common_methods_invocations import op_db

    results: dict[str, dict[str, Any]] = {}
    foo_rs._C.set_strict(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in ops if ops is not None else op_db:
            key = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
            status, native, detail = run_op(op)
            results[key] = {"status": status, "native": native, "detail": detail}
    foo_rs._C.set_strict(None)
    return results


def summary(results: dict[str, dict[str, Any]]) -> dict[str, int]:
    out = {s: 0 for s in ("pass", "fail", "error", "skip")}
    for r in results.values():
        out[r["status"]] += 1
    out["pass_native"] = sum(1 for r in results.values() if r["status"] == "pass" and r["native"])
    return out


def write(results: dict[str, dict[str, Any]]) -> None:
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "baseline.json"), "w") as f:
        json.dump({k: v["status"] for k, v in sorted(results.items())}, f, indent=0, sort_keys=True)
    s = summary(results)
    lines = [
        "# OpInfo conformance of the foo backend",
        "",
        f"torch {torch.__version__}, foo_rs {foo_rs.__version__}; up to {MAX_SAMPLES} samples per op, float32 "
        "(else int64/bool/float64), compared with the CPU backend. Regenerate: `python tests/conformance.py --write`.",
        "",
        f"- ops: {len(results)}; pass {s['pass']} (of which native, i.e. passing under FOO_RS_STRICT=1: "
        f"{s['pass_native']}); fail {s['fail']}; error {s['error']}; skip {s['skip']}",
        "",
        "| op | status | native | detail |",
        "|---|---|---|---|",
    ]
    for k, v in sorted(results.items()):
        lines.append(f"| {k} | {v['status']} | {'yes' if v['native'] else 'no'} | {v['detail']} |")
    with open(os.path.join(OUT_DIR, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    results = run()
    print(summary(results))
    if args.write:
        write(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
