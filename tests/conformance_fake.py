"""The fake-tensor check: what dynamo, AOTAutograd and inductor plan with predicts what foo computes.

torch.compile traces a foo model with fake tensors (FakeTensorMode: metadata, no memory), and
inductor checks every extern kernel's real result against that plan (``assert_size_stride``). A
fake prediction that differs from foo's kernel breaks the compiled graph, or silently makes it copy.
So each sample of each OpInfo runs on foo under PyTorch's ``CrossRefFakeMode``, which runs every
aten op that reaches the device twice, on the real foo tensors and on fake copies of them, and
compares each output's shape, dtype, strides, storage offset, requires_grad and aliasing. With
``only_check_ops_with_meta=False`` an op without a meta kernel is checked too: its fake result then
comes from FakeTensorMode's decompositions or its fallback (the real kernel on zero-filled foo
tensors), which is what dynamo would get. Where the op is differentiable, the backward runs under
the mode as well (on this thread: autograd's device threads would not see the mode), so the
backward ops AOTAutograd traces are checked the same way. This is PyTorch's own cross-reference
test (test_ops.py's fake crossref), run on foo.
"""

from __future__ import annotations

from typing import Any

import torch
from conformance import _dtype_for, _flatten
from conformance_checks import PASS, Result, cpu_samples, outcome, repro
from conformance_grad import _on_foo, _requiring_grad
from torch._subclasses.fake_utils import CrossRefFakeMode

FAKE_SAMPLES = 8  # per dtype: float32 (else as the forward check) and bfloat16
aten = torch.ops.aten
# As in PyTorch's crossref test: bookkeeping ops whose fake twins say nothing about a kernel.
IGNORED = frozenset({aten.detach.default, aten.empty_strided.default, aten.copy_.default,
                     aten.is_same_size.default})


def _run(op: Any, inp: Any, args: Any, kwargs: dict[str, Any]) -> None:
    out = op(inp, *args, **kwargs)
    outs = [t for t in _flatten(out) if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
    wrt = _requiring_grad((inp, args, kwargs))
    if outs and wrt:
        loss = sum(t.sum() for t in outs)
        torch.autograd.grad(loss, wrt, allow_unused=True)


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    text = text.replace("When comparing the output of ", "").replace(" on FakeTensor and concrete Tensors, found", ":")
    return f"{type(e).__name__}: {text[:200]}"


def _crossref(op: Any, inp: Any, args: Any, kwargs: dict[str, Any]) -> BaseException | None:
    mode = CrossRefFakeMode(ignore_op_fn=IGNORED.__contains__, only_check_ops_with_meta=False)
    with mode, torch.autograd.set_multithreading_enabled(False):
        return outcome(_run, op, inp, args, kwargs)[1]


def check_fake(op: Any) -> Result:
    """Every aten op a sample (forward, and backward where differentiable) runs on foo gives fake
    outputs with the real foo outputs' metadata. `cpu-quirk`: the same sample on the CPU misses
    in the same words (PyTorch's fake kernel is off for the CPU's kernel too, and foo gives the
    CPU's result)."""
    dtype = _dtype_for(op)
    if dtype is None:
        return Result("skip", "no supported dtype on CPU")
    # bfloat16 too: what autocast compiles, and where the CPU's kernels keep statistics in the
    # input's dtype (CUDA's in float32).
    dtypes = [dtype] + [torch.bfloat16] * (torch.bfloat16 in op.supported_dtypes("cpu") and dtype != torch.bfloat16)
    samples: list[Any] = []
    for d in dtypes:
        some = cpu_samples(op, d, op.supports_autograd and d.is_floating_point, FAKE_SAMPLES)
        if isinstance(some, Result):
            return some
        samples += some
    compared = 0
    quirk = None
    for s in samples:
        moved, move_exc = outcome(_on_foo, (s.input, s.args, s.kwargs))
        if move_exc is not None:
            continue
        fin, fa, fk = moved
        # A sample foo rejects (an error input in disguise) is the other checks' business.
        if outcome(_run, op, fin, fa, fk)[1] is not None:
            continue
        compared += 1
        exc = _crossref(op, fin, fa, fk)
        if exc is None:
            continue
        line = repro(op.name, s.input, s.args, s.kwargs)
        on_cpu = _crossref(op, s.input, s.args, s.kwargs)
        if on_cpu is not None and str(on_cpu) == str(exc).replace("foo:0", "cpu"):
            quirk = quirk or Result("cpu-quirk", f"the CPU too: {_short(exc)}; {line}")
            continue
        return Result("fail" if "mismatch" in str(exc) else "error", f"{_short(exc)}; {line}")
    return quirk or (PASS if compared else Result("skip", "no sample runs on foo"))
