"""Machinery for tests/module_conformance.py: moving a module and its inputs to foo, running
forward/backward with fixed cotangents, and describing the first difference from the CPU run."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.nn.utils.rnn import PackedSequence

COTANGENT_SEED = 1234
Status = tuple[str, str]  # (pass | fail | error | skip, one-line detail)
Convert = Callable[[torch.Tensor], torch.Tensor]
RANK = {"skip": 0, "pass": 1, "fail": 2, "error": 3}


@dataclass
class Run:
    """What one forward (+ backward) produced; tensors are detached CPU copies."""

    fwd_exc: BaseException | None = None
    bwd_exc: BaseException | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)
    grads: dict[str, torch.Tensor | None] | None = None  # None: nothing to differentiate


# ---------------------------------------------------------------------------------------------
# Moving inputs and modules


def map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, PackedSequence):
        # batch_sizes stays on the CPU (as for CUDA); data and the index tensors move.
        return PackedSequence(fn(x.data), x.batch_sizes,
                              None if x.sorted_indices is None else fn(x.sorted_indices),
                              None if x.unsorted_indices is None else fn(x.unsorted_indices))
    if isinstance(x, (list, tuple)):
        return type(x)(map_tensors(fn, v) for v in x)
    if isinstance(x, dict):
        return {k: map_tensors(fn, v) for k, v in x.items()}
    return x


def leaf_copier(device: str, noncontig: bool = False, convert: Convert | None = None) -> Convert:
    """Fresh leaf copies on `device` (so each run has its own .grad), optionally converted on the
    CPU first (dtype, memory format) and made non-contiguous on `device` (NaN in the gaps)."""
    from torch.testing._internal.common_utils import noncontiguous_like

    def fn(t: torch.Tensor) -> torch.Tensor:
        y = t.detach()
        if convert is not None:
            y = convert(y)
        y = y.clone() if device == "cpu" else y.to(device)
        if noncontig:
            y = noncontiguous_like(y)
        return y.detach().requires_grad_(t.requires_grad and (y.is_floating_point() or y.is_complex()))

    return fn


def copy_inputs(fi: Any, device: str, noncontig: bool = False, convert: Convert | None = None) -> tuple[Any, Any]:
    """(args, kwargs) of a FunctionInput as fresh leaves on `device`."""
    fn = leaf_copier(device, noncontig, convert)
    return map_tensors(fn, fi.args), map_tensors(fn, fi.kwargs)


def tensors_in(x: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    map_tensors(lambda t: out.append(t) or t, x)
    return out


def move_module(mod: torch.nn.Module) -> torch.nn.Module:
    foo = copy.deepcopy(mod).to("foo")
    # Tensors a module keeps as plain attributes (FractionalMaxPool's `_random_samples`) are not
    # moved by Module.to on any backend; move them so the module is usable at all, as a user must.
    for m in foo.modules():
        for k, v in list(vars(m).items()):
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
                setattr(m, k, v.to("foo"))
    return foo


# ---------------------------------------------------------------------------------------------
# Running


def flatten_outputs(x: Any, path: str = "out", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """{"out[0][1]": value, ...} for nested outputs."""
    out = {} if out is None else out
    if isinstance(x, PackedSequence):
        x = tuple(x)
    if isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            flatten_outputs(v, f"{path}[{i}]", out)
    elif isinstance(x, dict):
        for k, v in x.items():
            flatten_outputs(v, f"{path}[{k!r}]", out)
    else:
        out[path] = x
    return out


def _host(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach().cpu()


def run_once(mod: torch.nn.Module, args: Any, kwargs: Any, order: int = 1) -> Run:
    """Forward, then sum(output * cotangent) differentiated once (order 1) or, for order 2, the
    first gradients (create_graph) contracted with a second cotangent and differentiated again.
    The cotangents come from a fixed CPU generator, so both backends get the same ones."""
    r = Run()
    leaves = [t for t in tensors_in((args, kwargs)) if t.requires_grad]
    try:
        out = mod(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the exception class itself is compared with the CPU's
        r.fwd_exc = e
        return r
    flat = flatten_outputs(out)
    r.outputs = {k: _host(v) if isinstance(v, torch.Tensor) else v for k, v in flat.items()}
    r.buffers = {k: b.detach().cpu().clone() for k, b in mod.named_buffers()}
    diff = [v for v in flat.values() if isinstance(v, torch.Tensor) and v.requires_grad]
    if not diff:
        return r
    params = [p for p in mod.parameters() if p.requires_grad]
    g = torch.Generator().manual_seed(COTANGENT_SEED)

    def contract(ts: list[torch.Tensor]) -> torch.Tensor:
        return sum((t * torch.randn(t.shape, dtype=t.dtype, generator=g).to(t.device)).sum() for t in ts)

    try:
        loss = contract(diff)
        if order == 2:
            firsts = torch.autograd.grad(loss, leaves + params, create_graph=True, allow_unused=True)
            second = [t for t in firsts if t is not None and t.requires_grad]
            if not second:
                return r  # grads stay None: no second-order graph (a piecewise-linear module)
            loss = contract(second)
        loss.backward()
    except Exception as e:  # noqa: BLE001
        r.bwd_exc = e
        return r
    r.grads = {f"input{i}.grad": _host(t.grad) for i, t in enumerate(leaves)}
    r.grads.update({f"{n}.grad": _host(p.grad) for n, p in mod.named_parameters()})
    return r


# ---------------------------------------------------------------------------------------------
# Comparing


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    if dtype in (torch.float32, torch.complex64):
        # foo's kernels sum in another order than the CPU's: attention gradients differ by ~2e-5.
        return {"atol": 1e-4, "rtol": 1e-4}
    return {}  # assert_close's defaults (float64: atol 1e-7, rtol 1e-7)


def _significant_strides(t: torch.Tensor) -> list[int]:
    # Strides only matter along dims of size > 1.
    return [s for s, n in zip(t.stride(), t.shape) if n > 1]


def differs(got: dict[str, Any], want: dict[str, Any], strides: bool) -> str | None:
    """First difference between two name -> value maps, in one line; None when they agree.
    Values (and dtypes, shapes) of every entry are checked before any entry's strides, so a wrong
    value is never hidden behind a layout difference."""
    d = _value_differs(got, want)
    if d is None and strides:
        for k, w in want.items():
            a = got[k]
            if isinstance(w, torch.Tensor) and _significant_strides(a) != _significant_strides(w):
                return f"{k}: strides {a.stride()} vs CPU {w.stride()} (shape {tuple(w.shape)})"
    return d


def _value_differs(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    if got.keys() != want.keys():
        return f"names differ: foo {sorted(got)} vs CPU {sorted(want)}"
    for k, w in want.items():
        a = got[k]
        if not isinstance(w, torch.Tensor):
            if isinstance(a, torch.Tensor) or a != w:
                return f"{k}: foo {a!r} vs CPU {w!r}"
            continue
        if not isinstance(a, torch.Tensor):
            return f"{k}: foo {a!r} vs CPU tensor"
        if a.dtype != w.dtype:
            return f"{k}: dtype {a.dtype} vs CPU {w.dtype}"
        if a.shape != w.shape:
            return f"{k}: shape {tuple(a.shape)} vs CPU {tuple(w.shape)}"
        try:
            torch.testing.assert_close(a, w, equal_nan=True, check_stride=False, **tolerance(w.dtype))
        except AssertionError:
            if not (w.is_floating_point() or w.is_complex()):
                return f"{k}: {int((a != w).sum())}/{w.numel()} values differ"
            bad = ~torch.isclose(a, w, equal_nan=True, **tolerance(w.dtype))
            nan = bad & (a.isnan() != w.isnan())
            fin = bad & ~nan
            err = f", max abs err {(a - w).abs()[fin].max().item():.3g}" if fin.any() else ""
            nans = f", {int(nan.sum())} NaN where the other is not" if nan.any() else ""
            return f"{k}: {int(bad.sum())}/{w.numel()} values differ{err}{nans}"
    return None


def describe(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0][:140] if msg else ''}"


def compare(foo: Run, ref: Run, strides: bool) -> dict[str, Status]:
    """{"forward": status, "backward": status} of one foo run against the CPU run `ref`."""
    if ref.fwd_exc is not None:
        if foo.fwd_exc is None:
            st = ("fail", f"CPU raises {describe(ref.fwd_exc)}; foo does not")
        elif type(foo.fwd_exc) is not type(ref.fwd_exc):
            st = ("fail", f"foo raises {describe(foo.fwd_exc)}; CPU raises {describe(ref.fwd_exc)}")
        else:
            st = ("pass", "")
        return {"forward": st, "backward": ("skip", "forward raises on CPU")}
    if foo.fwd_exc is not None:
        e = ("error", f"forward: {describe(foo.fwd_exc)}")
        return {"forward": e, "backward": e}
    d = differs(foo.outputs, ref.outputs, strides)
    if d is None:
        b = differs(foo.buffers, ref.buffers, False)
        d = None if b is None else f"buffer {b}"
    res = {"forward": ("fail", d) if d else ("pass", "")}
    if ref.bwd_exc is not None:
        if foo.bwd_exc is not None and type(foo.bwd_exc) is type(ref.bwd_exc):
            res["backward"] = ("pass", "")
        else:
            res["backward"] = ("fail", f"CPU backward raises {describe(ref.bwd_exc)}; foo: "
                               f"{describe(foo.bwd_exc) if foo.bwd_exc else 'no exception'}")
    elif foo.bwd_exc is not None:
        res["backward"] = ("error", f"backward: {describe(foo.bwd_exc)}")
    elif ref.grads is None:
        res["backward"] = ("skip", "no differentiable output")
    elif foo.grads is None:
        res["backward"] = ("fail", "foo output does not require grad")
    else:
        d = differs(foo.grads, ref.grads, strides)
        res["backward"] = ("fail", d) if d else ("pass", "")
    return res


def worst(res: dict[str, Status]) -> Status:
    """One status for a run compared as a whole (forward and backward): the worst, with the details
    of every part at that level; a skipped backward (nothing differentiable) does not hide a
    passing forward."""
    top = max(RANK[s] for s, _ in res.values())
    if top == RANK["skip"] and res["forward"][0] == "pass":
        return res["forward"]
    details = list(dict.fromkeys(d for s, d in res.values() if RANK[s] == top and d))
    parts = details if len(details) == 1 else \
        [f"{k}: {d}" for k, (s, d) in res.items() if RANK[s] == top and d]
    return (next(s for s, _ in res.values() if RANK[s] == top), "; ".join(parts))
