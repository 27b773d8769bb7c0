"""The gradient check (d) and a complex check: the same sample runs forward and backward on the CPU
and on foo; outputs, then the gradients of sum(real(output * cotangent)) with one seeded random
cotangent per differentiable output, w.r.t. every input that requires grad, must agree.

  gradients  float64 samples (else float32), the sizes the OpInfo gives
  complex    complex128 samples: forward values, and gradients where the CPU has a complex
             backward (conjugate views and complex kernels are only reached with complex inputs)
"""

from __future__ import annotations

from typing import Any

import torch
from conformance import CPU_ARGS, _flatten, _same
from conformance_checks import (
    MAX_SAMPLES,
    PASS,
    Result,
    cpu_samples,
    first_line,
    foo_device,
    is_nondeterministic,
    outcome,
    repro,
    to_foo,
)

TOL = {torch.float64: 1e-6, torch.complex128: 1e-6, torch.float32: 1e-4, torch.complex64: 1e-4}


def _leaves(x: Any) -> Any:
    """Fresh leaves with the sample's layout and requires_grad flags (samples may hold non-leaves)."""
    if isinstance(x, torch.Tensor):
        return x.detach().requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(_leaves(v) for v in x)
    if isinstance(x, dict):
        return {k: _leaves(v) for k, v in x.items()}
    return x


def _on_foo(x: Any, memo: dict[int, torch.Tensor] | None = None) -> Any:
    memo = {} if memo is None else memo
    if isinstance(x, torch.Tensor):
        return to_foo(x, memo).requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(_on_foo(v, memo) for v in x)
    if isinstance(x, dict):
        return {k: _on_foo(v, memo) for k, v in x.items()}
    return x


def _requiring_grad(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x] if x.requires_grad else []
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _requiring_grad(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _requiring_grad(v)]
    return []


def _run(op: Any, sample: Any, inp: Any, args: Any, kwargs: dict[str, Any],
         cotangents: list[torch.Tensor] | None) -> tuple[Any, list[torch.Tensor | None], list[torch.Tensor]]:
    """(outputs, gradients, cotangents). Cotangents are drawn (seeded) when None and returned so
    that the other backend uses the very same ones."""
    raw = op(inp, *args, **kwargs)
    outs = [t for t in _flatten(sample.output_process_fn_grad(raw))
            if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs:
        return raw, [], []
    if cotangents is None:
        g = torch.Generator().manual_seed(1234)
        cotangents = [torch.randn(o.shape, dtype=o.dtype, generator=g) for o in outs]
    if len(cotangents) != len(outs):
        raise AssertionError(f"{len(outs)} differentiable outputs, the CPU has {len(cotangents)}")
    loss = sum(torch.real(o * c.to(o.device)).sum() for o, c in zip(outs, cotangents))
    grads = torch.autograd.grad(loss, _requiring_grad((inp, args, kwargs)), allow_unused=True)
    return raw, list(grads), cotangents


def _grad_difference(got: list[torch.Tensor | None], want: list[torch.Tensor | None]) -> str:
    for i, (a, b) in enumerate(zip(got, want)):
        if a is None or b is None:
            if (a is None) != (b is None):
                return f"grad {i} is {'None' if a is None else 'set'} on foo, {'None' if b is None else 'set'} on CPU"
            continue
        if a.device.type != "foo" or a.dtype != b.dtype or a.shape != b.shape:
            return f"grad {i} is {a.device} {a.dtype} {tuple(a.shape)}, CPU {b.dtype} {tuple(b.shape)}"
        tol = TOL.get(b.dtype, 0.0)
        try:
            torch.testing.assert_close(a.detach().cpu(), b, equal_nan=True, atol=tol, rtol=tol)
        except AssertionError:
            diff = (a.detach().cpu() - b).abs().nan_to_num(float("inf")).max().item() if b.numel() else 0.0
            return f"grad {i} differs (max abs diff {diff:.3g})"
    return ""


def _compare(op: Any, dtype: torch.dtype, requires_grad: bool, need_grads: bool) -> Result:
    samples = cpu_samples(op, dtype, requires_grad, MAX_SAMPLES)
    if isinstance(samples, Result):
        return samples
    compared = graded = 0
    for s in samples:
        cpu_in = _leaves((s.input, s.args, s.kwargs))
        ref, cpu_exc = outcome(_run, op, s, *cpu_in, None)
        if cpu_exc is not None:
            continue  # no reference: the CPU cannot run (or differentiate) this sample
        want_out, want, cots = ref
        moved, move_exc = outcome(_on_foo, cpu_in)
        if move_exc is not None:
            continue
        fin, fargs, fkw = moved if op.name not in CPU_ARGS else (moved[0], cpu_in[1], cpu_in[2])
        line = repro(op.name, *cpu_in)
        res, foo_exc = outcome(_run, op, s, fin, fargs, foo_device(fkw), cots)
        if foo_exc is not None:
            return Result("error", f"{first_line(foo_exc)}; {line}")
        got_out, got, _ = res
        compared += 1
        if not _same(got_out, want_out):
            return Result("fail", f"outputs differ from CPU; {line}")
        if want:
            graded += 1
            diff = _grad_difference(got, want)
            if diff:
                return Result("fail", f"{diff}; {line}")
    if (graded if need_grads else compared) == 0:
        return Result("skip", "no differentiable sample on CPU" if need_grads else "no sample runs on CPU")
    return PASS


def check_gradients(op: Any) -> Result:
    if not op.supports_autograd:
        return Result("skip", "no autograd")
    if is_nondeterministic(op):
        return Result("skip", "nondeterministic output")
    dtypes = op.supported_backward_dtypes("cpu")
    dtype = next((d for d in (torch.float64, torch.float32) if d in dtypes), None)
    if dtype is None:
        return Result("skip", "no float64/float32 backward on CPU")
    return _compare(op, dtype, True, True)


def check_complex(op: Any) -> Result:
    if is_nondeterministic(op):
        return Result("skip", "nondeterministic output")
    if torch.complex128 not in op.supported_dtypes("cpu"):
        return Result("skip", "no complex128 on CPU")
    grad = op.supports_autograd and torch.complex128 in op.supported_backward_dtypes("cpu")
    return _compare(op, torch.complex128, grad, False)
