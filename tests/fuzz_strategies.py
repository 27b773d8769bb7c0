"""Hypothesis strategies for the differential fuzzer (tests/test_fuzz.py): CPU tensors of odd shapes,
layouts, dtypes and values.

Element values come from a drawn seed (a torch generator) plus a few drawn special values at drawn
positions, not from one draw per element: that keeps an example cheap even for 70k elements, and
the shrinker still removes special values, shrinks shapes and simplifies layouts.
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
C64, I64, I32, U8, BOOL = torch.complex64, torch.int64, torch.int32, torch.uint8, torch.bool

FLOATS = (F32, F64, F16, BF16)
INTS = (I64, I32, U8)
ALL = FLOATS + (C64,) + INTS + (BOOL,)
NUMERIC = FLOATS + (C64,) + INTS  # no bool
REAL = FLOATS + INTS + (BOOL,)  # no complex
REAL_NUMERIC = FLOATS + INTS

LAYOUTS = ("contiguous", "contiguous", "permuted", "stepped", "expanded", "offset", "mixed")


def special_values(dtype: torch.dtype) -> list[float | int | bool]:
    """Values that break naive kernels: nan, +-inf, -0.0, dtype max/min/tiny, subnormals, huge."""
    if dtype == BOOL:
        return [True, False]
    if not (dtype.is_floating_point or dtype.is_complex):
        info = torch.iinfo(dtype)
        vals = [info.max, info.min, 0, 1, info.max - 1]
        return vals + ([-1, info.min + 1] if info.min < 0 else [])
    fi = torch.finfo(F32 if dtype.is_complex else dtype)
    return [math.nan, math.inf, -math.inf, -0.0, 0.0, fi.max, fi.min, fi.tiny, -fi.tiny,
            fi.tiny * fi.eps, fi.eps, fi.max / 3, -fi.max / 3, 1e30 if fi.max > 1e30 else 3e4, 0.5, -0.5]


@st.composite
def shapes(draw: st.DrawFn, min_rank: int = 0, max_rank: int = 4, max_side: int = 5,
           big: bool = True, high_rank: bool = True) -> tuple[int, ...]:
    """Mostly small shapes (0-size dims and 1-element included); sometimes rank 5-8, a large
    tensor (SIMD bodies and the parallel split), or rank 26 with tiny dims (one above 25)."""
    sel = draw(st.integers(0, 24))
    if sel == 0 and high_rank:
        twos = set(draw(st.lists(st.integers(0, 25), max_size=5)))
        shape = tuple(2 if i in twos else 1 for i in range(26))
    elif sel == 1 and big:
        rank = draw(st.integers(max(min_rank, 1), max(min(max_rank, 3), 1)))
        total = draw(st.integers(1000, 70000))
        side = max(1, round(total ** (1 / rank)))
        shape = tuple(draw(st.integers(max(1, side // 2), side * 2)) for _ in range(rank))
    elif sel == 2 and max_rank >= 5:
        rank = draw(st.integers(max(min_rank, 5), min(max_rank, 8) if max_rank >= 8 else 8))
        shape = tuple(draw(st.integers(0, 3)) for _ in range(rank))
    else:
        rank = draw(st.integers(min_rank, min(max_rank, 4)))
        shape = tuple(draw(st.integers(0, max_side)) for _ in range(rank))
    return shape


def _fill(dtype: torch.dtype, n: int, seed: int, kind: str) -> torch.Tensor:
    """n values of dtype from a seeded generator, in the drawn value distribution."""
    g = torch.Generator().manual_seed(seed)
    if dtype == BOOL:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if not (dtype.is_floating_point or dtype.is_complex):
        info = torch.iinfo(dtype)
        if kind == "full":
            return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype)
        lo = 0 if info.min == 0 else -10
        return torch.randint(lo, 11, (n,), generator=g).to(dtype)

    def real() -> torch.Tensor:
        if kind == "halves":  # exact small values: ties for round/floor/fmod, equal elements
            return torch.randint(-8, 9, (n,), generator=g).double() / 2
        if kind == "positive":
            return torch.rand(n, generator=g, dtype=F64) * 4 + 1e-3
        if kind == "unit":  # inside (-1, 1): the domain of asin/atanh/erfinv, probabilities
            return torch.rand(n, generator=g, dtype=F64) * 2 - 1
        if kind == "full":  # magnitudes from 1e-30 to 1e30 (overflow to inf in half types)
            return torch.randn(n, generator=g, dtype=F64) * 10 ** (torch.rand(n, generator=g, dtype=F64) * 60 - 30)
        scale = {"normal": 1.0, "tiny": 1e-4, "large": 1e4, "huge": 1e30}[kind]
        return torch.randn(n, generator=g, dtype=F64) * scale

    if dtype.is_complex:
        return torch.complex(real(), real()).to(dtype)
    return real().to(dtype)


VALUE_KINDS = ("normal", "normal", "halves", "positive", "unit", "tiny", "large", "huge", "full")


@st.composite
def storages(draw: st.DrawFn, dtype: torch.dtype, n: int, kinds: tuple[str, ...] = VALUE_KINDS,
             specials: bool = True) -> torch.Tensor:
    """A flat CPU tensor of n elements: seeded values plus up to 3 special values."""
    kind = draw(st.sampled_from(kinds))
    flat = _fill(dtype, n, draw(st.integers(0, 2**31 - 1)), kind)
    if specials and n:
        sv = special_values(dtype)
        for _ in range(draw(st.integers(0, 3))):
            pos, v = draw(st.integers(0, n - 1)), draw(st.sampled_from(sv))
            if dtype.is_complex and draw(st.booleans()):
                flat[pos] = complex(flat[pos].real.item(), v)
            else:
                flat[pos] = v
    return flat


@st.composite
def layouts(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[tuple[int, ...], int, int]:
    """(strides, storage offset, storage size) for `shape` in a drawn layout: contiguous,
    permuted (transposes, channels-last), stepped slices, expanded (zero strides), a storage
    offset, or all of these at once."""
    rank = len(shape)
    kind = draw(st.sampled_from(LAYOUTS))
    perm = list(range(rank))
    steps = [1] * rank
    expanded: set[int] = set()
    offset = 0
    if kind in ("permuted", "mixed") and rank > 1:
        perm = list(draw(st.permutations(range(rank))))
    if kind in ("stepped", "mixed"):
        steps = [draw(st.integers(1, 3)) for _ in range(rank)]
        # Steps in every dim of a rank-26 shape would need a storage of up to 3**26 elements
        # (the long run ran out of memory drawing one): keep the storage below 2**22.
        if math.prod(max(n, 1) * k for n, k in zip(shape, steps)) > 1 << 22:
            steps = [1] * rank
    if kind in ("expanded", "mixed") and rank:
        expanded = set(draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank)))
    if kind in ("offset", "mixed", "stepped"):
        offset = draw(st.integers(0 if kind == "stepped" else 1, 5))
    strides = [0] * rank
    step = 1
    for d in reversed(perm):  # perm[-1] is the innermost dim in memory
        if d in expanded:
            continue
        strides[d] = step * steps[d]
        step *= max(shape[d], 1) * steps[d]
    numel = math.prod(shape)
    size = offset + (sum((s - 1) * st_ for s, st_ in zip(shape, strides)) + 1 if numel else 0)
    size += draw(st.integers(0, 2)) if kind != "contiguous" else 0  # data past the view's end
    return tuple(strides), offset, size


@st.composite
def tensors(draw: st.DrawFn, dtype: torch.dtype | st.SearchStrategy[torch.dtype],
            shape: tuple[int, ...] | st.SearchStrategy[tuple[int, ...]] | None = None,
            kinds: tuple[str, ...] = VALUE_KINDS, specials: bool = True, layout: bool = True) -> torch.Tensor:
    """A CPU tensor viewing a storage with the drawn layout (so strides and offset are known)."""
    if isinstance(dtype, st.SearchStrategy):
        dtype = draw(dtype)
    if shape is None:
        shape = shapes()
    if isinstance(shape, st.SearchStrategy):
        shape = draw(shape)
    if layout:
        strides, offset, size = draw(layouts(shape))
    else:
        strides, offset, size = torch.empty(shape).stride(), 0, math.prod(shape)
    flat = draw(storages(dtype, size, kinds, specials))
    return flat.as_strided(shape, strides, offset)


def scalars(dtype_kinds: tuple[str, ...] = ("bool", "int", "float")) -> st.SearchStrategy[object]:
    """Python scalars as operands: type promotion (a Python float never makes a float16 tensor
    float32) and special values."""
    options: list[st.SearchStrategy[object]] = []
    if "bool" in dtype_kinds:
        options.append(st.booleans())
    if "int" in dtype_kinds:
        options.append(st.sampled_from([0, 1, -1, 2, 3, -7, 255, 256, 2**31, -(2**31), 2**40, 2**63 - 1]))
    if "float" in dtype_kinds:
        options.append(st.sampled_from([0.5, -1.5, 2.0, 0.0, -0.0, 1e-3, 3.25, 1e30, 1e300,
                                        math.nan, math.inf, -math.inf]))
    if "complex" in dtype_kinds:
        options.append(st.sampled_from([1j, 0.5 - 2j, complex(math.inf, 0)]))
    return st.one_of(options)


def broadcast_shapes(draw: st.DrawFn, n: int, **kw: object) -> list[tuple[int, ...]]:
    """n shapes that broadcast together (leading dims dropped, dims set to 1); sometimes one dim
    that does not broadcast, where both devices must raise the same error."""
    out_shape = draw(shapes(**kw))  # type: ignore[arg-type]
    result = []
    for _ in range(n):
        drop = draw(st.integers(0, len(out_shape)))
        s = list(out_shape[drop:])
        for i in range(len(s)):
            if draw(st.integers(0, 3)) == 0:
                s[i] = 1
        result.append(tuple(s))
    if draw(st.integers(0, 30)) == 0 and out_shape:
        i = draw(st.integers(0, n - 1))
        if result[i]:
            s = list(result[i])
            s[-1] = s[-1] + 2
            result[i] = tuple(s)
    return result
