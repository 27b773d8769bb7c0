"""Helpers for comparing foo results with torch's CPU backend on the same inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch

FOO = torch.device("foo")

FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
ALL_REAL_DTYPES = FLOAT_DTYPES + INT_DTYPES + [torch.bool]


def to_foo(x: Any) -> Any:
    """Copies tensors (recursively through lists/tuples/dicts) to foo, keeping strides."""
    if isinstance(x, torch.Tensor):
        # Copy the whole storage and view it the same way, so strides, offsets and even
        # overlapping (expanded) layouts carry over exactly.
        requires_grad = x.requires_grad
        x = x.detach()
        n = x.untyped_storage().nbytes() // x.element_size()
        flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (n,), (1,))
        y = flat.to(FOO).as_strided(x.size(), x.stride(), x.storage_offset())
        # Conjugate and negative views carry their operation as a bit, not in the storage's bytes.
        y = y.conj() if x.is_conj() else y
        y = torch._neg_view(y) if x.is_neg() else y
        return y.detach().requires_grad_() if requires_grad else y
    if isinstance(x, (list, tuple)):
        return type(x)(to_foo(v) for v in x)
    if isinstance(x, dict):
        return {k: to_foo(v) for k, v in x.items()}
    return x


def to_cpu(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(to_cpu(v) for v in x)
    return x


def tolerances(dtype: torch.dtype) -> dict[str, float]:
    if dtype == torch.float16:
        return {"atol": 1e-3, "rtol": 1e-3}
    if dtype == torch.bfloat16:
        return {"atol": 1e-2, "rtol": 1e-2}
    if dtype == torch.float32:
        return {"atol": 1e-5, "rtol": 1.3e-6 * 10}
    return {}


def assert_same(foo_out: Any, cpu_out: Any, check_stride: bool = False, **tol: float) -> None:
    """foo result == CPU result: values (with dtype-appropriate tolerance), dtype, shape."""
    if isinstance(cpu_out, torch.Tensor):
        assert isinstance(foo_out, torch.Tensor), f"expected a tensor, got {type(foo_out)}"
        assert foo_out.device.type == "foo", f"result is on {foo_out.device}, not foo"
        got = foo_out.detach().cpu()
        assert got.dtype == cpu_out.dtype, f"dtype {got.dtype} != CPU's {cpu_out.dtype}"
        assert got.shape == cpu_out.shape, f"shape {tuple(got.shape)} != CPU's {tuple(cpu_out.shape)}"
        if check_stride and cpu_out.numel() > 1:
            assert foo_out.stride() == cpu_out.stride(), f"stride {foo_out.stride()} != CPU's {cpu_out.stride()}"
        kw = tol or tolerances(cpu_out.dtype)
        torch.testing.assert_close(got, cpu_out.detach(), equal_nan=True, **kw)
    elif isinstance(cpu_out, (list, tuple)):
        assert len(foo_out) == len(cpu_out)
        for f, c in zip(foo_out, cpu_out):
            assert_same(f, c, check_stride=check_stride, **tol)
    else:
        assert foo_out == cpu_out or (foo_out != foo_out and cpu_out != cpu_out), f"{foo_out} != {cpu_out}"


def check(fn: Callable[..., Any], *args: Any, check_stride: bool = False, **tol: float) -> Any:
    """Runs fn on CPU args and on foo copies of them; asserts the results agree."""
    expected = fn(*args)
    got = fn(*to_foo(list(args)))
    assert_same(got, expected, check_stride=check_stride, **tol)
    return got


def sample(shape: Iterable[int], dtype: torch.dtype, low: float = -3, high: float = 3, seed: int = 0) -> torch.Tensor:
    """Deterministic CPU test data of any dtype (never all-zero)."""
    g = torch.Generator().manual_seed(seed)
    shape = tuple(shape)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
    lo = 0 if dtype == torch.uint8 else int(low)
    return torch.randint(lo, max(int(high), lo + 1) + 1, shape, generator=g).to(dtype)


def layouts(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> dict[str, torch.Tensor]:
    """The same logical tensor in several layouts: contiguous, transposed (non-contiguous),
    sliced with a step, and expanded from a smaller tensor (broadcast strides)."""
    base = sample(shape, dtype, seed=seed)
    out = {"contiguous": base}
    if len(shape) >= 2:
        out["transposed"] = sample(shape[::-1], dtype, seed=seed).transpose(0, -1) if len(shape) == 2 else (
            sample((shape[-1],) + shape[:-1], dtype, seed=seed).movedim(0, -1)
        )
    wide = sample(shape[:-1] + (shape[-1] * 2,), dtype, seed=seed) if shape else base
    out["strided"] = wide[..., ::2] if shape else base
    if shape:
        out["expanded"] = sample((1,) * (len(shape) - 1) + (shape[-1],), dtype, seed=seed).expand(shape)
    return out


def probe_digests(probe: str, threads: int) -> dict[str, str]:
    """Runs `probe` (Python source printing "DIGESTS" + a JSON dict) in a fresh process with
    FOO_RS_NUM_THREADS=threads and returns the dict: bit-identity checks across thread counts."""
    env = {k: v for k, v in os.environ.items() if k not in ("FOO_RS_NUM_THREADS", "RAYON_NUM_THREADS")}
    env["FOO_RS_NUM_THREADS"] = str(threads)
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.split("DIGESTS")[-1])
