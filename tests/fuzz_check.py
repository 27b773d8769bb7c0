"""One differential fuzz case: run an op expression (tests/fuzz_ops.py) on CPU arguments and on foo
copies of them, and raise Mismatch (with a repro line) if foo differs from the CPU in exception
class, structure, dtype, shape, strides (where the op defines them), values or gradients.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import foo_rs
import torch
import torch.nn.functional as F
from fuzz_ops import BOUND_HELPERS, Op
from helpers import to_foo

NAMESPACE: dict[str, Any] = {"torch": torch, "F": F, "math": math, **BOUND_HELPERS}
_CODE: dict[str, Any] = {}

# (atol, rtol) for results computed elementwise; accumulating ops add a bound-scaled term.
BASE_TOL = {torch.float64: (1e-7, 1e-7), torch.float32: (1e-5, 1.3e-5), torch.complex64: (1e-5, 1.3e-5),
            torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-2, 1e-2), torch.complex128: (1e-7, 1e-7)}
# Half types accumulate in float32 on the CPU (and must on foo): their sums round like float32 sums.
ACC_EPS = {torch.float64: 2.0**-52, torch.complex128: 2.0**-52}
ACC_FACTOR = 64  # summation orders differ; 64 eps covers lanes, blocks and pairwise trees


class Mismatch(AssertionError):
    """foo disagrees with the CPU on a case."""


def _code(expr: str) -> Any:
    if expr not in _CODE:
        _CODE[expr] = compile(expr, f"<fuzz {expr}>", "eval")
    return _CODE[expr]


def evaluate(expr: str, args: dict[str, Any]) -> Any:
    return eval(_code(expr), dict(NAMESPACE), dict(args))


# ---- repro text -----------------------------------------------------------------------------------

def _num(v: Any) -> str:
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, complex):
        return f"complex({_num(v.real)}, {_num(v.imag)})"
    if isinstance(v, float):
        if math.isnan(v):
            return "math.nan"
        if math.isinf(v):
            return "math.inf" if v > 0 else "-math.inf"
    return repr(v)


def code(v: Any, limit: int = 64) -> str:
    """Python source that rebuilds v (a tensor with its strides and storage offset)."""
    if isinstance(v, torch.Tensor):
        v = v.detach()
        n = v.untyped_storage().nbytes() // v.element_size()
        flat = torch.empty(0, dtype=v.dtype).set_(v.untyped_storage(), 0, (n,), (1,))
        dt = str(v.dtype)
        if n > limit:
            vals = f"<{n} values, first {', '.join(_num(x) for x in flat[:8].tolist())}>"
        else:
            vals = "[" + ", ".join(_num(x) for x in flat.tolist()) + "]"
        base = f"torch.tensor({vals}, dtype={dt})"
        if v.is_contiguous() and v.storage_offset() == 0 and n == v.numel():
            return f"{base}.reshape({tuple(v.shape)})"
        return f"{base}.as_strided({tuple(v.shape)}, {v.stride()}, {v.storage_offset()})"
    if isinstance(v, tuple):
        return "(" + ", ".join(code(x, limit) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, list):
        return "[" + ", ".join(code(x, limit) for x in v) + "]"
    if isinstance(v, slice):
        return f"slice({v.start!r}, {v.stop!r}, {v.step!r})"
    if v is Ellipsis:
        return "..."
    return _num(v)


def repro(op: Op, args: dict[str, Any]) -> str:
    setup = "; ".join(f"{k} = {code(v)}" for k, v in args.items())
    return f"{setup}; {op.expr}  # on CPU, and on every tensor copied by helpers.to_foo"


# ---- running --------------------------------------------------------------------------------------

def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    return [x]


def _grad_names(op: Op, args: dict[str, Any]) -> list[str]:
    return [k for k in op.grad.split() if isinstance(args.get(k), torch.Tensor) and args[k].dtype.is_floating_point]


def _run(op: Op, args: dict[str, Any]) -> tuple[Any, BaseException | None]:
    # Warnings (fallback notices, broadcasting in losses) are not part of the comparison.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return evaluate(op.expr, args), None
        except Exception as e:  # noqa: BLE001 - the exception class is what is compared
            return None, e


def _grad_outputs(outs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Deterministic, varied upstream gradients (all-ones would hide sign and index errors)."""
    return [torch.arange(o.numel(), dtype=torch.float64).mul(0.7).cos().reshape(o.shape).to(o.dtype) for o in outs]


def _grads(out: Any, inputs: list[torch.Tensor]) -> tuple[Any, BaseException | None]:
    outs = [o for o in _flat(out) if isinstance(o, torch.Tensor) and o.requires_grad]
    if not outs:
        return None, None
    gos = [g.to(o.device) for g, o in zip(_grad_outputs([o.detach().cpu() for o in outs]), outs)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return torch.autograd.grad(outs, inputs, gos, allow_unused=True), None
        except Exception as e:  # noqa: BLE001
            return None, e


class Stats:
    """Counts over a run (tests/test_fuzz.py writes them to $FOO_RS_FUZZ_REPORT)."""

    def __init__(self) -> None:
        self.cases = 0  # cases run on both devices
        self.raised = 0  # of which the CPU raised (and foo had to raise the same class)
        self.known: dict[str, int] = {}  # failures explained by KNOWN / CPU_QUIRKS, per entry
        self.fallback_ops: dict[str, int] = {}  # "fuzzed op: aten op" -> CPU fallback calls


STATS = Stats()


def check_case(op: Op, args: dict[str, Any]) -> None:
    """Raises Mismatch if foo differs from the CPU on op(args)."""
    fargs = to_foo(args)  # before the CPU run: in-place ops change their inputs
    where = f"\nrepro: {repro(op, args)}"
    names = _grad_names(op, args)
    for k in names:
        args[k] = args[k].detach().requires_grad_()
        fargs[k] = fargs[k].detach().requires_grad_()
    want, want_exc = _run(op, args)
    foo_rs.reset_op_counts()
    got, got_exc = _run(op, fargs)
    STATS.cases += 1
    for k, n in foo_rs.fallback_counts().items():
        STATS.fallback_ops[f"{op.name}: {k}"] = STATS.fallback_ops.get(f"{op.name}: {k}", 0) + n
    if want_exc is not None:
        STATS.raised += 1
        if got_exc is None:
            raise Mismatch(f"CPU raised {type(want_exc).__name__}({want_exc}), foo did not{where}")
        if type(got_exc) is not type(want_exc):
            raise Mismatch(f"CPU raised {type(want_exc).__name__}({want_exc}), foo "
                           f"{type(got_exc).__name__}({got_exc}){where}")
        return
    if got_exc is not None:
        raise Mismatch(f"foo raised {type(got_exc).__name__}({got_exc}), CPU did not{where}")
    bound = _bound(op, args, want)
    try:
        compare(got, want, op, bound)
    except Mismatch as e:
        raise Mismatch(f"{e}{where}") from None
    except Exception as e:  # noqa: BLE001 - e.g. a foo result that cannot be copied to the CPU
        raise Mismatch(f"foo's result cannot be compared: {type(e).__name__}({e}){where}") from None
    if names:
        gw, gw_exc = _grads(want, [args[k] for k in names])
        gg, gg_exc = _grads(got, [fargs[k] for k in names])
        if (gw_exc is None) != (gg_exc is None) or (gw_exc is not None and type(gw_exc) is not type(gg_exc)):
            raise Mismatch(f"backward: CPU {gw_exc!r}, foo {gg_exc!r}{where}")
        if gw is not None:
            gb = _gbound(op, args)
            low = _lowest_precision(args)
            for k, a, b in zip(names, gg, gw):
                try:
                    compare_grad(a, b, gb, low)
                except Mismatch as e:
                    raise Mismatch(f"gradient of {k}: {e}{where}") from None


# ---- comparing ------------------------------------------------------------------------------------

def _abs_finite(v: Any) -> Any:
    """|v| in float64 with non-finite values as 0 (the bound's inputs), recursively."""
    if isinstance(v, torch.Tensor) and (v.dtype.is_floating_point or v.dtype.is_complex):
        a = v.detach().abs().double()
        return torch.where(a.isfinite(), a, torch.zeros_like(a))
    if isinstance(v, float):
        return abs(v) if math.isfinite(v) else 0.0
    if isinstance(v, tuple):
        return tuple(_abs_finite(x) for x in v)
    return v


# Integer arguments that scale a term (their sign would make a bound a difference); other
# integers are dims, sizes and indices, kept as they are.
SCALE_ARGS = ("alpha", "beta", "value")


def _bound_arg(name: str, v: Any) -> Any:
    if name in SCALE_ARGS and isinstance(v, int) and not isinstance(v, bool):
        return abs(v)
    return _abs_finite(v)


def _bound(op: Op, args: dict[str, Any], want: Any) -> Any:
    if op.tol == "ew" or not any(isinstance(w, torch.Tensor) and (w.is_floating_point() or w.is_complex())
                                 for w in _flat(want)):
        return None  # exact results (integers, bools, indices) need no bound
    with torch.no_grad():
        try:
            return evaluate(op.bound or op.expr, {k: _bound_arg(k, v) for k, v in args.items()})
        except Exception as e:  # noqa: BLE001 - a bound expression that fails is a fuzzer bug
            raise AssertionError(f"fuzzer: bound of {op.name} failed: {e!r}") from e


def _gbound(op: Op, args: dict[str, Any]) -> float:
    if op.gbound is None:
        return 0.0
    with torch.no_grad():
        b = evaluate(op.gbound, {k: _bound_arg(k, v) for k, v in args.items()})
    return float(b.amax()) if isinstance(b, torch.Tensor) and b.numel() else 0.0


def compare(got: Any, want: Any, op: Op, bound: Any) -> None:
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            raise Mismatch(f"structure: foo {type(got).__name__}, CPU {type(want).__name__} of {len(want)}")
        bounds = bound if isinstance(bound, (tuple, list)) else [bound] * len(want)
        for i, (g, w, b) in enumerate(zip(got, want, bounds)):
            try:
                compare(g, w, op, b)
            except Mismatch as e:
                raise Mismatch(f"output {i}: {e}") from None
        return
    if not isinstance(want, torch.Tensor):
        if not (got == want or (got != got and want != want)):
            raise Mismatch(f"value: foo {got!r}, CPU {want!r}")
        return
    if not isinstance(got, torch.Tensor):
        raise Mismatch(f"foo returned {type(got).__name__}, CPU a tensor")
    if got.device.type != "foo":
        raise Mismatch(f"result on {got.device}, not foo")
    if got.dtype != want.dtype:
        raise Mismatch(f"dtype: foo {got.dtype}, CPU {want.dtype}")
    if got.shape != want.shape:
        raise Mismatch(f"shape: foo {tuple(got.shape)}, CPU {tuple(want.shape)}")
    if op.stride and want.numel():  # an empty tensor's strides reach no element
        # Strides of size-1 dims are arbitrary (no element is ever reached through them).
        gs = [s for s, n in zip(got.stride(), got.shape) if n > 1]
        ws = [s for s, n in zip(want.stride(), want.shape) if n > 1]
        if gs != ws:
            raise Mismatch(f"strides: foo {got.stride()}, CPU {want.stride()} (shape {tuple(want.shape)})")
    values(got.detach().cpu(), want.detach(), op.tol, bound)


def _parts(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t).double() if t.is_complex() else t.double()


def values(got: torch.Tensor, want: torch.Tensor, tol: str, bound: Any,
           tol_dtype: torch.dtype | None = None) -> None:
    """Exact for integers and bools; for floats the same nan and inf positions and finite values
    within the tolerance, except that an inf on one side and a same-signed value beyond max/4 on
    the other agree: whether an intermediate overflows depends on the order of the operations in
    a formula (v * a / b or v * (a / b)), which two correct kernels may choose differently."""
    if not (want.dtype.is_floating_point or want.dtype.is_complex):
        if not torch.equal(got, want):
            bad = (got != want).nonzero()[:3].tolist()
            raise Mismatch(f"values differ at {bad}: foo {[got[tuple(i)].item() for i in bad]}, "
                           f"CPU {[want[tuple(i)].item() for i in bad]}")
        return
    g, w = _parts(got), _parts(want)
    atol, rtol = BASE_TOL[tol_dtype or want.dtype]
    allowed = atol + rtol * w.abs()
    compared = torch.ones_like(w, dtype=torch.bool)
    if tol != "ew" and isinstance(bound, torch.Tensor):
        real = torch.float32 if want.dtype == torch.complex64 else want.dtype
        # A nan bound (inf - inf in the bound expression) or -inf (logsumexp of nothing) bounds nothing.
        b = torch.nan_to_num(bound.detach().double(), nan=0.0, neginf=0.0)
        b = b.unsqueeze(-1) if want.is_complex() and b.dim() == want.dim() and b.dim() else b
        b = torch.broadcast_to(b, w.shape) if b.dim() <= w.dim() else b.reshape(w.shape)
        finfo = torch.finfo(real)
        compared = ~(b > finfo.max / 4)  # may overflow in one order of summation and not another
        d = ACC_FACTOR * ACC_EPS.get(want.dtype, 2.0**-23) * b
        allowed = allowed + (d if tol == "acc" else d / (w.abs() + d.sqrt()))
    big = torch.finfo(torch.float32 if want.dtype == torch.complex64 else want.dtype).max / 4
    compared &= ~((g.abs() >= big) & (w.abs() >= big) & (g.sign() == w.sign()))
    nan_g, nan_w = g.isnan(), w.isnan()
    bad = compared & (nan_g != nan_w)
    both = compared & ~nan_g & ~nan_w
    inf = both & (g.isinf() | w.isinf())
    bad |= inf & (g != w)
    fin = both & ~inf
    bad |= fin & ((g - w).abs() > allowed)
    if bad.any():
        idx = bad.nonzero()[:3].tolist()
        raise Mismatch(f"values differ at {idx}: foo {[g[tuple(i)].item() for i in idx]}, "
                       f"CPU {[w[tuple(i)].item() for i in idx]} ({int(bad.sum())} of {w.numel()} elements)")


def _lowest_precision(args: dict[str, Any]) -> torch.dtype | None:
    """The least precise floating dtype among the arguments: backward formulas compute in the
    operands' dtypes (xlogy's gradient for a float32 a and a float16 b takes log(b) in float16)."""
    ds = [v.dtype for v in args.values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    return max(ds, key=lambda d: torch.finfo(d).eps) if ds else None


def compare_grad(got: torch.Tensor | None, want: torch.Tensor | None, extra: float = 0.0,
                 low: torch.dtype | None = None) -> None:
    """Gradients: same presence, dtype, shape; values within the tolerance of the least precise
    argument dtype `low` plus a term relative to the gradient's largest finite element (backward
    passes accumulate) and `extra` (the op's gbound)."""
    if want is None or got is None:
        if (want is None) != (got is None):
            raise Mismatch(f"foo {'no' if got is None else 'a'} gradient, CPU {'no' if want is None else 'a'}")
        return
    if got.dtype != want.dtype or got.shape != want.shape:
        raise Mismatch(f"foo {got.dtype}{tuple(got.shape)}, CPU {want.dtype}{tuple(want.shape)}")
    w = _parts(want.detach())
    fin = w[w.isfinite()]
    scale = fin.abs().amax() if fin.numel() else torch.zeros((), dtype=torch.float64)
    bound = torch.full_like(want.detach(), 0, dtype=torch.float64) + scale + extra
    tol_dtype = low if low is not None and want.is_floating_point() and \
        torch.finfo(low).eps > torch.finfo(want.dtype).eps else None
    values(got.detach().cpu(), want.detach(), "acc", bound.real if bound.is_complex() else bound, tol_dtype)
