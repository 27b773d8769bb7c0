"""OpInfo checks beyond forward samples: error inputs and non-contiguous inputs here, each comparing
foo with the CPU backend on the same inputs (made on the CPU, copied to foo with their layout), and
the helpers the other checks share. The out= check lives in conformance_out.py, the gradient and
complex checks in conformance_grad.py; conformance_checks_run.py runs them all.

Each check takes an OpInfo and returns a Result: `pass` (every compared case agrees), `fail` (foo
behaves differently: values, strides, exception class or message), `error` (foo raised where the
CPU did not) or `skip` (nothing comparable), with a short detail holding a one-line repro.
"""

from __future__ import annotations

import itertools
import random
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import numpy
import torch
from conformance import CPU_ARGS, NONDETERMINISTIC, _dtype_for, _flatten, _same, _to_foo

# Every sample of every current OpInfo (max_pool2d has 1440, ~1 s): the cap only bounds a runaway
# generator. The whole run takes ~30 s on 2 cores, far inside the 8-minute CI budget.
MAX_SAMPLES = 2048
MAX_ERROR_INPUTS = 40
SEED = 1234
# Beyond conformance.NONDETERMINISTIC: svd_lowrank/pca_lowrank draw a random projection from the
# device's generator, so foo and the CPU legitimately approximate differently.
RANDOMIZED = ("lowrank",)


class Result(NamedTuple):
    status: str  # pass | fail | error | skip
    detail: str = ""


PASS = Result("pass")

_SHORT = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
          torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
          torch.bool: "b8", torch.complex64: "c64", torch.complex128: "c128"}


def fmt(x: Any) -> str:
    """Compact argument text for repro lines: T[2,3:f32] is a tensor of that shape and dtype
    (`nc`: non-contiguous, `@k`: storage offset k, `rg`: requires_grad)."""
    if isinstance(x, torch.Tensor):
        tags = [",".join(map(str, x.shape)) + ":" + _SHORT.get(x.dtype, str(x.dtype).replace("torch.", ""))]
        if x.layout == torch.strided and not x.is_contiguous():
            tags.append("nc")
        if x.layout == torch.strided and x.storage_offset():
            tags.append(f"@{x.storage_offset()}")
        if x.requires_grad:
            tags.append("rg")
        return "T[" + " ".join(tags) + "]"
    if isinstance(x, (list, tuple)):
        inner = ", ".join(fmt(v) for v in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner}{',' if len(x) == 1 else ''})"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}={fmt(v)}" for k, v in x.items()) + "}"
    if isinstance(x, torch.dtype):
        return str(x)
    return repr(x)


def repro(name: str, inp: Any, args: Any, kwargs: dict[str, Any], extra: str = "") -> str:
    parts = [fmt(inp)] + [fmt(a) for a in args] + [f"{k}={fmt(v)}" for k, v in kwargs.items()]
    if extra:
        parts.append(extra)
    text = f"{name}({', '.join(parts)})"
    return text if len(text) <= 240 else text[:237] + "..."


def op_key(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def is_nondeterministic(op: Any) -> bool:
    return any(k in op.name for k in NONDETERMINISTIC + RANDOMIZED)


def with_view_bits(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """y (a copy of x's physical storage) seen as x is: conjugate and negative views carry their
    operation as a bit, not in the bytes a storage copy takes."""
    if x.is_conj():
        y = y.conj()
    if x.is_neg():
        y = torch._neg_view(y)
    return y


def to_foo(x: Any, memo: dict[int, torch.Tensor]) -> Any:
    """conformance._to_foo, but tensors that share a CPU storage share one foo storage too: error
    inputs alias out= with an input on purpose (memory-overlap checks), and copying each tensor
    on its own would hide exactly that. memo maps a CPU storage's address to its foo copy."""
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided or x.untyped_storage().nbytes() == 0:
            return _to_foo(x)
        storage = x.untyped_storage()
        if storage.data_ptr() not in memo:
            n = storage.nbytes() // x.element_size()
            flat = torch.empty(0, dtype=x.dtype).set_(storage, 0, (n,), (1,))
            memo[storage.data_ptr()] = flat.detach().to("foo").view(torch.uint8)
        # A storage may hold tensors of several dtypes: keep the bytes, view them as this dtype.
        y = memo[storage.data_ptr()].view(x.dtype).as_strided(x.size(), x.stride(), x.storage_offset())
        return with_view_bits(y, x)
    if isinstance(x, (list, tuple)):
        return type(x)(to_foo(v, memo) for v in x)
    if isinstance(x, dict):
        return {k: to_foo(v, memo) for k, v in x.items()}
    return x


def foo_device(kwargs: dict[str, Any]) -> dict[str, Any]:
    if torch.device(kwargs.get("device") or "meta").type == "cpu":
        return {**kwargs, "device": "foo"}
    return kwargs


def foo_args(op: Any, inp: Any, args: Any, kwargs: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """The sample's arguments on foo (some ops take CPU-only arguments, as on CUDA); a factory
    sample's device="cpu" becomes "foo" so that the foo side really makes its tensors on foo."""
    kwargs = foo_device(kwargs)
    memo: dict[int, torch.Tensor] = {}
    if op.name in CPU_ARGS:
        return to_foo(inp, memo), args, kwargs
    return to_foo(inp, memo), to_foo(args, memo), to_foo(kwargs, memo)


def usable(sample: Any) -> bool:
    """Samples that can be compared at all: strided input and no random dropout mask."""
    if isinstance(sample.input, torch.Tensor) and sample.input.layout != torch.strided:
        return False
    return not (sample.kwargs.get("dropout_p", 0) or sample.kwargs.get("training") is True)


def seeded(items: Iterable[Any]) -> Iterator[Any]:
    """The items of a sample generator, each made right after seeding (as op.sample_inputs does),
    but seeding only the CPU generators: op.sample_inputs's tracking inspects the call stack and
    torch.manual_seed queues a CUDA re-seed with a formatted stack trace, which together cost
    minutes under pytest. Callers take only the first few items, so the rest are never made."""
    it = iter(items)
    while True:
        torch.default_generator.manual_seed(SEED)
        random.seed(SEED)
        numpy.random.seed(SEED)
        try:
            yield next(it)
        except StopIteration:
            return


def cpu_samples(op: Any, dtype: torch.dtype, requires_grad: bool, n: int) -> list[Any] | Result:
    try:
        gen = seeded(op.sample_inputs_func(op, "cpu", dtype, requires_grad))
        samples = list(itertools.islice((s for s in gen if usable(s)), n))
    except Exception as e:  # noqa: BLE001 - a generator failing on the CPU says nothing about foo
        return Result("skip", f"sample generation: {type(e).__name__}")
    return samples or Result("skip", "no strided deterministic sample")


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, BaseException | None]:
    """(fn(*args, **kwargs), None), or (None, the exception it raised)."""
    try:
        return fn(*args, **kwargs), None
    except Exception as e:  # noqa: BLE001 - the exception itself is what gets compared
        return None, e


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:100] if text else ''}"


def significant_strides(t: torch.Tensor) -> tuple[int, ...]:
    """Strides of the dimensions longer than 1: the only ones that say anything about layout."""
    if t.layout != torch.strided or t.numel() == 0:
        return ()
    return tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)


def strides_differ(got: Any, want: Any) -> str:
    for i, (a, b) in enumerate(zip(_flatten(got), _flatten(want))):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if significant_strides(a) != significant_strides(b):
                return f"output {i} strides {tuple(a.stride())} vs CPU {tuple(b.stride())}"
    return ""


# (a) error inputs -------------------------------------------------------------------------------


def check_errors(op: Any) -> Result:
    """foo raises the CPU's exception class on each ErrorInput (and a message matching error_regex
    whenever the CPU's does). Error inputs are generated for "cpu" and moved to foo."""
    if op.error_inputs_func is None:
        return Result("skip", "no error inputs")
    try:
        errs = list(itertools.islice(seeded(op.error_inputs_func(op, "cpu")), MAX_ERROR_INPUTS))
    except Exception as e:  # noqa: BLE001
        return Result("skip", f"error input generation: {type(e).__name__}")
    compared = 0
    for ei in errs:
        s = ei.sample_input
        _, cpu_exc = outcome(op, s.input, *s.args, **s.kwargs)
        if cpu_exc is None:
            continue  # this error input is device specific: the CPU accepts it
        moved, move_exc = outcome(foo_args, op, s.input, s.args, s.kwargs)
        if move_exc is not None:
            continue  # e.g. a dtype foo cannot hold: that is a documented limit, not this check's
        fin, fa, fk = moved
        line = repro(op.name, s.input, s.args, s.kwargs)
        _, foo_exc = outcome(op, fin, *fa, **fk)
        compared += 1
        if foo_exc is None:
            return Result("fail", f"foo did not raise (CPU: {first_line(cpu_exc)}); {line}")
        if type(foo_exc) is not type(cpu_exc):
            return Result("fail", f"foo raised {first_line(foo_exc)}; CPU {type(cpu_exc).__name__}; {line}")
        if re.search(ei.error_regex, str(cpu_exc)) and not re.search(ei.error_regex, str(foo_exc)):
            return Result("fail", f"message {first_line(foo_exc)!r} misses /{ei.error_regex}/; {line}")
    if compared == 0:
        return Result("skip", "no error input raises on the CPU" if errs else "no error inputs")
    return PASS


# (b) non-contiguous inputs ----------------------------------------------------------------------


def forward_samples(op: Any, limit: int) -> list[Any] | Result:
    """Up to `limit` CPU samples of a deterministic op in its check dtype, or why there are none."""
    if is_nondeterministic(op):
        return Result("skip", "nondeterministic output")
    dtype = _dtype_for(op)
    if dtype is None:
        return Result("skip", "no supported dtype on CPU")
    return cpu_samples(op, dtype, False, limit)


def check_noncontiguous(op: Any) -> Result:
    """sample.noncontiguous() (every tensor interleaved with NaN/garbage in its storage) on foo
    gives the CPU's values and significant strides for the same non-contiguous sample."""
    samples = forward_samples(op, MAX_SAMPLES)
    if isinstance(samples, Result):
        return samples
    compared = 0
    for s in samples:
        nc = s.noncontiguous()
        # The CPU on the very same non-contiguous tensors is the reference: for ordinary ops it
        # equals the contiguous result, and for storage-reading ops (as_strided) only it is right.
        want, cpu_exc = outcome(op, nc.input, *nc.args, **nc.kwargs)
        contiguous, _ = outcome(op, s.input, *s.args, **s.kwargs)
        line = repro(op.name, nc.input, nc.args, nc.kwargs)
        moved, move_exc = outcome(foo_args, op, nc.input, nc.args, nc.kwargs)
        if move_exc is not None:
            continue
        fin, fa, fk = moved
        got, foo_exc = outcome(op, fin, *fa, **fk)
        if cpu_exc is not None:
            if foo_exc is None or type(foo_exc) is not type(cpu_exc):
                theirs = "nothing" if foo_exc is None else first_line(foo_exc)
                return Result("fail", f"CPU raised {first_line(cpu_exc)}, foo {theirs}; {line}")
            compared += 1
            continue
        if foo_exc is not None:
            return Result("error", f"{first_line(foo_exc)}; {line}")
        compared += 1
        if not _same(got, want):
            note = "" if _same(want, contiguous) else " (the CPU's own result depends on the layout)"
            return Result("fail", f"values differ from CPU{note}; {line}")
        bad = strides_differ(got, want)
        if bad:
            return Result("fail", f"{bad}; {line}")
    return PASS if compared else Result("skip", "no sample runs on CPU")


def quiet(check: Callable[[Any], Result], op: Any) -> Result:
    """Runs one check with warnings silenced; an exception escaping the harness is an error row."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return check(op)
        except Exception as e:  # noqa: BLE001 - a crash in one op must not stop the others
            return Result("error", f"harness: {first_line(e)}")
