"""The out= check (c): PyTorch's documented out= rules (the cases test_ops.py's test_out describes),
each case run on the CPU and on foo with the same sample and the same out tensors:

  values    out of the right shape/dtype, filled with NaN / the integer maximum: the op writes the
            CPU's values, returns the out tensor itself, keeps its strides and storage
  strided   a non-contiguous out of the right shape: same, its strides and storage are kept
  empty     a 0-element out: resized to the result (no resize warning), values and strides as the CPU's
  device    a CPU out for foo inputs, and a foo out for CPU inputs: RuntimeError (as CUDA raises; not
            for out= written in Python with copy_, OUT_COPIED_IN_PYTHON)
  dtype     a long out for a floating/complex result: refused with the CPU's exception class
            (or, where the CPU accepts it, the CPU's values)
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch
from conformance import _same, _to_foo
from conformance_checks import (
    PASS,
    Result,
    first_line,
    foo_args,
    forward_samples,
    outcome,
    repro,
    significant_strides,
)
from torch.testing._internal.common_utils import noncontiguous_like

OUT_SAMPLES = 2048
RESIZE_WARNING = "An output with one or more elements was resized"
FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128)

Outs = tuple[torch.Tensor, ...]


def _filled(t: torch.Tensor) -> torch.Tensor:
    """Values an op must overwrite: NaN for floating types, the maximum for integers."""
    if t.dtype == torch.bool:
        return torch.ones_like(t)
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return torch.full_like(t, float("nan"))
    return torch.full_like(t, torch.iinfo(t.dtype).max)


def _strided(t: torch.Tensor) -> torch.Tensor:
    return noncontiguous_like(_filled(t.contiguous()))


def _empty(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=t.dtype)


def _long_for_floating(t: torch.Tensor) -> torch.Tensor:
    return torch.zeros(t.shape, dtype=torch.long) if t.dtype in FLOATING else _filled(t)


def _pack(expected: Any, outs: list[torch.Tensor]) -> Any:
    return outs[0] if isinstance(expected, torch.Tensor) else tuple(outs)


def _as_tuple(x: Any) -> Outs:
    return (x,) if isinstance(x, torch.Tensor) else tuple(x)


def _all_tensors(x: Any) -> bool:
    """Outputs out= can hold: a tensor or a tuple of tensors (torch.equal returns a bool)."""
    return isinstance(x, torch.Tensor) or (
        isinstance(x, (tuple, list)) and len(x) > 0 and all(isinstance(t, torch.Tensor) for t in x))


def _layout(outs: Outs) -> list[tuple[tuple[int, ...], int]]:
    return [(tuple(t.stride()), t.untyped_storage().data_ptr()) for t in outs]


class _Run:
    """One call of the op with out=, on one device: result, exception, warnings, out before/after."""

    def __init__(self, call: Callable[..., Any], expected: Any, outs: list[torch.Tensor]) -> None:
        self.outs = tuple(outs)
        self.before = _layout(self.outs)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.result, self.exc = outcome(call, out=_pack(expected, outs))
        self.resize_warned = any(RESIZE_WARNING in str(w.message) for w in caught)
        self.after = _layout(self.outs) if self.exc is None else []

    def returns_out(self) -> bool:
        try:
            return all(r is o for r, o in zip(_as_tuple(self.result), self.outs, strict=True))
        except (TypeError, ValueError):
            return False


# The CPU's own out= defect, reported apart (status "cpu-quirk"): foo writes the op's result, the CPU
# does not.
CPU_QUIRK = "cpu-quirk: "

# Ops whose out= is written in Python with copy_ (torch.functional.lu: `out[i].resize_as_(r).copy_(r)`),
# which crosses devices on every backend, CUDA's included: a CPU out for foo inputs is accepted.
OUT_COPIED_IN_PYTHON = {"lu"}


def _compare(name: str, cpu: _Run, foo: _Run, keeps_layout: bool, expected: Any = None) -> str:
    """'' when foo behaved as the CPU did, else what differed (CPU_QUIRK + why where the CPU is the
    one that is wrong)."""
    if cpu.exc is not None:
        if foo.exc is None:
            return f"{name}: CPU raised {first_line(cpu.exc)}, foo did not"
        if type(foo.exc) is not type(cpu.exc):
            return f"{name}: foo raised {first_line(foo.exc)}, CPU {type(cpu.exc).__name__}"
        return ""
    if foo.exc is not None:
        return f"{name}: foo raised {first_line(foo.exc)}"
    if not _same(foo.outs, cpu.outs):
        want = _as_tuple(expected) if expected is not None else None
        if want is not None and _same(foo.outs, want) and not _same(cpu.outs, want):
            return (f"{CPU_QUIRK}{name}: the CPU's out differs from its own functional result, foo's equals it "
                    "(the CPU's kernel writes a non-contiguous out wrongly)")
        return f"{name}: out values/dtype/shape differ from CPU"
    if cpu.returns_out() and not foo.returns_out():
        return f"{name}: the returned tensor is not the out tensor"
    if foo.resize_warned and not cpu.resize_warned:
        return f"{name}: foo warns '{RESIZE_WARNING}', CPU does not"
    if keeps_layout and cpu.before == cpu.after and foo.before != foo.after:
        return f"{name}: out strides/storage changed {foo.before[0][0]} -> {foo.after[0][0]}"
    for a, b in zip(foo.outs, cpu.outs):
        if significant_strides(a) != significant_strides(b):
            return f"{name}: out strides {tuple(a.stride())} vs CPU {tuple(b.stride())}"
    return ""


def _device_case(op: Any, sample: Any, expected: Any, fin: Any, fa: Any, fk: dict[str, Any]) -> str:
    """Outs on the other device raise RuntimeError, both ways (factory calls without device= may
    legitimately follow their out)."""
    if (op.is_factory_function and sample.kwargs.get("device") is None) or op.name in OUT_COPIED_IN_PYTHON:
        return ""
    cpu_outs = [_filled(t) for t in _as_tuple(expected)]
    _, exc = outcome(op, fin, *fa, **fk, out=_pack(expected, cpu_outs))
    if not isinstance(exc, RuntimeError):
        return f"device: a CPU out for foo inputs gave {'no error' if exc is None else first_line(exc)}"
    # CPU 0-dim tensors are scalars that may meet outs of any device; only a real CPU tensor must refuse.
    inputs = [t for t in (sample.input, *sample.args) if isinstance(t, torch.Tensor)]
    if any(t.dim() > 0 for t in inputs):
        foo_outs = [_to_foo(t) for t in cpu_outs]
        _, exc = outcome(op, sample.input, *sample.args, **sample.kwargs, out=_pack(expected, foo_outs))
        if not isinstance(exc, RuntimeError):
            return f"device: a foo out for CPU inputs gave {'no error' if exc is None else first_line(exc)}"
    return ""


CASES: list[tuple[str, Callable[[torch.Tensor], torch.Tensor], bool]] = [
    ("values", _filled, True),
    ("strided", _strided, True),
    ("empty", _empty, False),
    ("dtype", _long_for_floating, False),
]


def check_out(op: Any) -> Result:
    if not op.supports_out:
        return Result("skip", "no out= variant")
    samples = forward_samples(op, OUT_SAMPLES)
    if isinstance(samples, Result):
        return samples
    compared = 0
    quirk = ""
    for s in samples:
        expected, exc = outcome(op, s.input, *s.args, **s.kwargs)
        if exc is not None or not _all_tensors(expected):
            continue
        moved, move_exc = outcome(foo_args, op, s.input, s.args, s.kwargs)
        if move_exc is not None:
            continue
        fin, fa, fk = moved
        line = repro(op.name, s.input, s.args, s.kwargs, "out=...")

        cpu_call = functools.partial(op, s.input, *s.args, **s.kwargs)
        foo_call = functools.partial(op, fin, *fa, **fk)

        for name, make, keeps_layout in CASES:
            if name == "dtype" and not any(t.dtype in FLOATING for t in _as_tuple(expected)):
                continue
            cpu_outs = [make(t) for t in _as_tuple(expected)]
            foo_outs = [_to_foo(t) for t in cpu_outs]
            cpu = _Run(cpu_call, expected, cpu_outs)
            if name == "values" and cpu.exc is not None:
                break  # the CPU refuses out= for this sample: nothing to model foo on
            diff = _compare(name, cpu, _Run(foo_call, expected, foo_outs), keeps_layout, expected)
            if diff.startswith(CPU_QUIRK):
                quirk = quirk or f"{diff[len(CPU_QUIRK):]}; {line}"
                diff = ""
            if diff:
                return Result("error" if "foo raised" in diff and cpu.exc is None else "fail", f"{diff}; {line}")
            compared += 1
        else:
            diff = _device_case(op, s, expected, fin, fa, fk)
            if diff:
                return Result("fail", f"{diff}; {line}")
    if quirk:
        return Result("cpu-quirk", quirk)
    return PASS if compared else Result("skip", "no sample takes out= on CPU")
