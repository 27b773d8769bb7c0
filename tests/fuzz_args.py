"""Argument strategies for the differential fuzzer, one per op signature: each draws a dict of named
CPU arguments (tensors, Python scalars, dims, flags) that an op expression in tests/fuzz_ops.py reads.

Most draws are valid calls; a few are not (a dim out of range, an index out of bounds, shapes that
do not broadcast), and there both devices must raise the same exception class.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from fuzz_strategies import BOOL, F32, I32, I64, broadcast_shapes, scalars, shapes, tensors
from hypothesis import strategies as st

Args = dict[str, Any]
Dtypes = tuple[torch.dtype, ...]


def _rare(draw: st.DrawFn, n: int = 20) -> bool:
    """True about once in n draws (hypothesis shrinks it to False)."""
    return draw(st.integers(0, n - 1)) == n - 1


def _dtype(draw: st.DrawFn, dtypes: Dtypes) -> torch.dtype:
    return draw(st.sampled_from(dtypes))


def _scalar_kinds(dtypes: Dtypes) -> tuple[str, ...]:
    kinds = ("bool", "int", "float")
    return kinds + (("complex",) if any(d.is_complex for d in dtypes) else ())


def _dim(draw: st.DrawFn, rank: int) -> int:
    """A valid dim (negative too), or rarely one out of range."""
    r = max(rank, 1)
    if _rare(draw, 25):
        return draw(st.sampled_from([r, -r - 1]))
    return draw(st.integers(-r, r - 1))


def _dims(draw: st.DrawFn, rank: int) -> None | int | tuple[int, ...]:
    sel = draw(st.integers(0, 3))
    if sel == 0:
        return None
    if sel == 1 or rank == 0:
        return _dim(draw, rank)
    ds = draw(st.lists(st.integers(-rank, rank - 1), max_size=rank))
    if not _rare(draw, 15):  # duplicates (dim 1 and -1 of a rank-2 tensor, say) only rarely
        seen: set[int] = set()
        ds = [d for d in ds if (d % rank) not in seen and not seen.add(d % rank)]
    return tuple(ds)


# ---- elementwise ----------------------------------------------------------------------------------

@st.composite
def unary(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    return {"x": draw(tensors(_dtype(draw, dtypes)))}


@st.composite
def binary(draw: st.DrawFn, dtypes: Dtypes, scalar_sides: str = "ab") -> Args:
    """Two broadcastable operands; dtypes usually equal, sometimes mixed (type promotion); one of
    them (of those in scalar_sides) sometimes a Python scalar."""
    sa, sb = broadcast_shapes(draw, 2)
    da = _dtype(draw, dtypes)
    db = _dtype(draw, dtypes) if draw(st.integers(0, 2)) == 0 else da
    a, b = draw(tensors(da, sa)), draw(tensors(db, sb))
    sel = draw(st.integers(0, 5)) if scalar_sides else 0
    if sel == 1 and "b" in scalar_sides:
        b = draw(scalars(_scalar_kinds(dtypes)))
    elif sel == 2 and "a" in scalar_sides:
        a = draw(scalars(_scalar_kinds(dtypes)))
    return {"a": a, "b": b}


@st.composite
def binary_b(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """a tensor, b a tensor or a Python scalar (torch.fn(tensor, other) signatures)."""
    return draw(binary(dtypes, scalar_sides="b"))


@st.composite
def binary_tensors(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    return draw(binary(dtypes, scalar_sides=""))


@st.composite
def ternary(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """x, a, b broadcasting together, plus a Python scalar v (addcmul's value)."""
    sx, sa, sb = broadcast_shapes(draw, 3)
    d = _dtype(draw, dtypes)
    v = draw(st.sampled_from([1, 2, -0.5, 0.0] if d.is_floating_point or d.is_complex else [1, 2, -1, 0]))
    return {"x": draw(tensors(d, sx)), "a": draw(tensors(d, sa)), "b": draw(tensors(d, sb)), "v": v}


@st.composite
def where(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    sc, sa, sb = broadcast_shapes(draw, 3)
    args = draw(binary(dtypes))
    c = draw(tensors(BOOL, sc))
    a = args["a"] if not isinstance(args["a"], torch.Tensor) else draw(tensors(args["a"].dtype, sa))
    b = args["b"] if not isinstance(args["b"], torch.Tensor) else draw(tensors(args["b"].dtype, sb))
    return {"c": c, "a": a, "b": b}


@st.composite
def lerp(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    sa, sb, sw = broadcast_shapes(draw, 3)
    d = _dtype(draw, dtypes)
    w = draw(tensors(d, sw, kinds=("unit", "normal", "halves"))) if draw(st.booleans()) else \
        draw(st.sampled_from([0.0, 0.25, 0.5, 1.0, -1.5, 2.0]))
    return {"a": draw(tensors(d, sa)), "b": draw(tensors(d, sb)), "w": w}


@st.composite
def clamp(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """clamp with Python-scalar or tensor bounds (either may be None, min may exceed max)."""
    sx, slo, shi = broadcast_shapes(draw, 3)
    d = _dtype(draw, dtypes)
    x = draw(tensors(d, sx))
    if draw(st.booleans()):
        vals = [None, -1, 0, 2, 0.5, -0.5, math.nan]
        lo, hi = draw(st.sampled_from(vals)), draw(st.sampled_from(vals))
    else:
        lo = draw(tensors(d, slo)) if draw(st.integers(0, 4)) else None
        hi = draw(tensors(d, shi)) if draw(st.integers(0, 4)) else None
    return {"x": x, "lo": lo, "hi": hi}


# ---- reductions -----------------------------------------------------------------------------------

@st.composite
def reduce_dims(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """x, dim (None, an int or a tuple of dims), keepdim."""
    x = draw(tensors(_dtype(draw, dtypes)))
    return {"x": x, "dim": _dims(draw, x.dim()), "keepdim": draw(st.booleans())}


@st.composite
def reduce_dim(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """x, dim (one int), keepdim."""
    x = draw(tensors(_dtype(draw, dtypes)))
    return {"x": x, "dim": _dim(draw, x.dim()), "keepdim": draw(st.booleans())}


@st.composite
def reduce_var(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    args = draw(reduce_dims(dtypes))
    args["c"] = draw(st.sampled_from([1, 0, 2]))
    return args


@st.composite
def reduce_norm(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    args = draw(reduce_dims(dtypes))
    args["p"] = draw(st.sampled_from([2, 1, math.inf, -math.inf, 0, 3, 0.5, -1.0]))
    return args


# ---- indexing -------------------------------------------------------------------------------------

def _index_dtype(draw: st.DrawFn) -> torch.dtype:
    return I32 if _rare(draw, 10) else I64


def _indices(draw: st.DrawFn, size: int, shape: tuple[int, ...], dtype: torch.dtype = I64,
             unique_dim: int | None = None, negative: bool = False) -> torch.Tensor:
    """Indices into a dim of `size` (negative ones too where the op takes them: advanced
    indexing), sometimes one out of bounds; with unique_dim, distinct along that dim
    (scatter/index_copy write each place once: with repeated indices which write wins is
    unspecified)."""
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    numel = math.prod(shape)
    if unique_dim is not None:
        n = shape[unique_dim] if shape else 1
        keys = torch.rand(shape[:unique_dim] + (size,) + shape[unique_dim + 1:], generator=g) if shape \
            else torch.rand(size, generator=g)
        idx = keys.argsort(dim=unique_dim if shape else 0)
        idx = idx.narrow(unique_dim if shape else 0, 0, n) if size else idx
        # contiguous: an out-of-bounds index is written through view(-1) below
        idx = idx.reshape(shape).contiguous() if idx.numel() == numel else torch.zeros(shape, dtype=I64)
    elif size:
        idx = torch.randint(-size if negative else 0, size, shape, generator=g)
    else:
        idx = torch.zeros(shape, dtype=I64)
    if numel and (size == 0 or _rare(draw, 25)):
        idx.view(-1)[draw(st.integers(0, numel - 1))] = draw(st.sampled_from([size, -1, -size - 1, 2**40]))
    return idx.to(dtype)


@st.composite
def index_select(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    x = draw(tensors(_dtype(draw, dtypes)))
    dim = _dim(draw, x.dim())
    size = x.shape[dim] if -x.dim() <= dim < max(x.dim(), 1) and x.dim() else 1
    n = draw(st.integers(0, 6))
    shape = () if x.dim() == 0 and draw(st.booleans()) else (n,)
    return {"x": x, "dim": dim, "i": _indices(draw, size, shape, _index_dtype(draw))}


def _index_shape(draw: st.DrawFn, x: torch.Tensor, dim: int, grow: bool = False) -> tuple[int, ...]:
    """A shape no larger than x's in every dim but `dim` (where it is free), as gather/scatter need."""
    if x.dim() == 0:
        return ()
    d = dim % x.dim()
    return tuple(draw(st.integers(0, x.shape[i] + (3 if i == d or grow else 0))) for i in range(x.dim()))


def _dim_size(x: torch.Tensor, dim: int) -> int:
    if x.dim() == 0:
        return 1
    return x.shape[dim] if -x.dim() <= dim < x.dim() else 1


@st.composite
def gather(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    x = draw(tensors(_dtype(draw, dtypes)))
    dim = _dim(draw, x.dim())
    shape = _index_shape(draw, x, dim, grow=_rare(draw, 25))
    return {"x": x, "dim": dim, "i": _indices(draw, _dim_size(x, dim), shape, _index_dtype(draw))}


@st.composite
def scatter(draw: st.DrawFn, dtypes: Dtypes, unique: bool = True) -> Args:
    """x, dim, index i and src (at least as large as i); i distinct along dim when `unique`."""
    x = draw(tensors(_dtype(draw, dtypes)))
    dim = _dim(draw, x.dim())
    size = _dim_size(x, dim)
    shape = _index_shape(draw, x, dim)
    ok_dim = x.dim() == 0 or -x.dim() <= dim < x.dim()
    if unique and ok_dim:
        d = dim % x.dim() if x.dim() else 0
        shape = tuple(min(s, size) if i == d else s for i, s in enumerate(shape))
    i = _indices(draw, size, shape, _index_dtype(draw),
                 unique_dim=(dim % x.dim() if x.dim() else 0) if unique and ok_dim else None)
    src_shape = tuple(s + draw(st.integers(0, 1)) for s in shape)
    return {"x": x, "dim": dim, "i": i, "src": draw(tensors(x.dtype, src_shape)),
            "v": draw(st.sampled_from([0, 1, -2, 0.5] if x.dtype.is_floating_point else [0, 1, 3]))}


@st.composite
def scatter_dup(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    args = draw(scatter(dtypes, unique=False))
    args["red"] = draw(st.sampled_from(["sum", "prod", "mean", "amax", "amin"]))
    args["self"] = draw(st.booleans())
    return args


@st.composite
def index_add(draw: st.DrawFn, dtypes: Dtypes, unique: bool = False) -> Args:
    """x, dim, 1-D index i, src shaped like x with i's length at dim, alpha."""
    x = draw(tensors(_dtype(draw, dtypes)))
    dim = _dim(draw, x.dim())
    size = _dim_size(x, dim)
    n = draw(st.integers(0, size if unique else 6))
    i = _indices(draw, size, (n,), _index_dtype(draw), unique_dim=0 if unique else None)
    shape = list(x.shape)
    if x.dim() and -x.dim() <= dim < x.dim():
        shape[dim] = n
    elif not x.dim():
        shape = [n] if n != 1 else []
    alpha = draw(st.sampled_from([1, 2, -1])) if not x.dtype.is_floating_point else \
        draw(st.sampled_from([1.0, 2.5, -1.0]))  # floats: the bound takes |alpha| (ints stay: dims)
    return {"x": x, "dim": dim, "i": i, "src": draw(tensors(x.dtype, tuple(shape))), "alpha": alpha}


@st.composite
def index_copy(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    return draw(index_add(dtypes, unique=True))


@st.composite
def masked(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """x, a bool mask broadcastable to x (sometimes uint8 or not broadcastable), a fill value v
    (Python scalar or 0-dim tensor)."""
    sx, sm = broadcast_shapes(draw, 2)
    x = draw(tensors(_dtype(draw, dtypes), sx))
    m = draw(tensors(BOOL if not _rare(draw, 20) else torch.uint8, sm))
    sv = scalars(_scalar_kinds(dtypes))
    v = draw(sv) if draw(st.integers(0, 3)) else torch.tensor(draw(sv)).to(x.dtype)
    return {"x": x, "m": m, "v": v}


@st.composite
def getitem(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """x and an index: a tuple of ints, slices (steps), None, Ellipsis, integer tensors
    (broadcast together, separated or adjacent) and bool masks."""
    x = draw(tensors(_dtype(draw, dtypes), shapes(max_rank=4, big=False)))
    parts: list[Any] = []
    d = 0
    tshape = draw(st.sampled_from([(), (1,), (3,), (2, 1), (0,)]))
    used_ellipsis = False
    while d < x.dim() and draw(st.integers(0, 3)):
        size = x.shape[d]
        kind = draw(st.sampled_from(["int", "slice", "tensor", "mask", "none", "ellipsis"]))
        if kind == "int":
            parts.append(draw(st.integers(-size, size)) if size else 0)
        elif kind == "slice":
            parts.append(slice(draw(st.sampled_from([None, 0, 1, -1])), draw(st.sampled_from([None, -1, 2])),
                               draw(st.sampled_from([None, 1, 2, 3]))))
        elif kind == "tensor":
            parts.append(_indices(draw, size, tshape, negative=True))
        elif kind == "mask":
            rest = min(draw(st.integers(1, 2)), x.dim() - d)
            parts.append(draw(tensors(BOOL, x.shape[d:d + rest], layout=False)))
            d += rest - 1
        elif kind == "none":
            parts.append(None)
            d -= 1
        elif not used_ellipsis:
            parts.append(Ellipsis)
            used_ellipsis = True
            d = x.dim() - draw(st.integers(0, x.dim() - d)) - 1
        d += 1
    return {"x": x, "idx": tuple(parts)}


@st.composite
def index_put(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """x, a tuple of index tensors (ints for the leading dims or one bool mask), values v
    broadcastable to the indexed shape, accumulate; without accumulate the int indices are
    distinct (which duplicate wins is unspecified)."""
    x = draw(tensors(_dtype(draw, dtypes), shapes(min_rank=1, max_rank=4, big=False)))
    acc = draw(st.booleans())
    if draw(st.integers(0, 3)) == 0:
        idx: tuple[torch.Tensor, ...] = (draw(tensors(BOOL, x.shape[:draw(st.integers(1, x.dim()))],
                                                      layout=False)),)
        n = int(idx[0].sum())
        vshape: tuple[int, ...] = (n,) + x.shape[idx[0].dim():]
    else:
        k = draw(st.integers(1, x.dim()))
        n = draw(st.integers(0, 4))
        if acc:
            idx = tuple(_indices(draw, x.shape[j], (n,), negative=True) for j in range(k))
        else:
            # distinct positions: draw distinct flat offsets into the first k dims
            total = math.prod(x.shape[:k])
            n = min(n, total)
            g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
            flat = torch.randperm(total, generator=g)[:n]
            idx = tuple(torch.tensor(ix) for ix in torch.unravel_index(flat, x.shape[:k])) if n else \
                tuple(torch.zeros(0, dtype=I64) for _ in range(k))
        vshape = (n,) + x.shape[k:]
    if draw(st.booleans()):  # broadcast values
        vshape = vshape[draw(st.integers(0, len(vshape))):]
    return {"x": x, "idx": idx, "v": draw(tensors(x.dtype, vshape)), "acc": acc}


# ---- matrix products ------------------------------------------------------------------------------

def _mat_side(draw: st.DrawFn) -> int:
    return draw(st.sampled_from([0, 1, 2, 3, 5, 8, 17, 33, 64, 70])) if draw(st.integers(0, 5)) == 0 \
        else draw(st.integers(0, 6))


def _mismatch(draw: st.DrawFn, k: int) -> int:
    return k + 1 if _rare(draw, 30) else k


@st.composite
def mm(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    d = _dtype(draw, dtypes)
    n, k, m = _mat_side(draw), _mat_side(draw), _mat_side(draw)
    return {"a": draw(tensors(d, (n, k))), "b": draw(tensors(d, (_mismatch(draw, k), m)))}


@st.composite
def bmm(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    d = _dtype(draw, dtypes)
    bt, n, k, m = draw(st.integers(0, 4)), _mat_side(draw), _mat_side(draw), _mat_side(draw)
    return {"a": draw(tensors(d, (bt, n, k))), "b": draw(tensors(d, (bt, _mismatch(draw, k), m)))}


@st.composite
def matmul(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """torch.matmul's cases: 1-D operands, batch dims that broadcast."""
    d = _dtype(draw, dtypes)
    n, k, m = _mat_side(draw), _mat_side(draw), _mat_side(draw)
    ba, bb = broadcast_shapes(draw, 2, max_rank=2, max_side=3, big=False, high_rank=False)
    sa = draw(st.sampled_from([(k,), ba + (n, k)]))
    sb = draw(st.sampled_from([(_mismatch(draw, k),), bb + (_mismatch(draw, k), m)]))
    return {"a": draw(tensors(d, sa)), "b": draw(tensors(d, sb))}


@st.composite
def addmm(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """c + a @ b with beta and alpha; c broadcasts to (n, m)."""
    args = draw(mm(dtypes))
    n, m = args["a"].shape[0], args["b"].shape[1]
    cshape = draw(st.sampled_from([(n, m), (m,), (1, m), (n, 1), ()]))
    d = args["a"].dtype
    ab = [1, 0, 2, -1] if not (d.is_floating_point or d.is_complex) else [1.0, 0.0, 0.5, -2.0]
    return {"c": draw(tensors(d, cshape)), **args, "beta": draw(st.sampled_from(ab)),
            "alpha": draw(st.sampled_from(ab))}


# ---- convolution and pooling ----------------------------------------------------------------------

@st.composite
def conv(draw: st.DrawFn, dtypes: Dtypes, nd: int = 2) -> Args:
    """x (N, C, *spatial) or unbatched, w (Cout, C/groups, *kernel), bias, stride, padding
    (ints, per-dim, 'same' or 'valid'), dilation, groups; sometimes a kernel larger than the
    padded input (an error on both devices)."""
    d = _dtype(draw, dtypes)
    groups = draw(st.integers(1, 3))
    cin, cout = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 4)) for _ in range(nd))
    spatial = tuple(draw(st.integers(1, 9)) for _ in range(nd))
    batch = (draw(st.integers(0, 3)),) if draw(st.integers(0, 5)) else ()
    x = draw(tensors(d, batch + (cin,) + spatial))
    w = draw(tensors(d, (cout, cin // groups) + kernel))
    bias = draw(tensors(d, (cout,))) if draw(st.booleans()) else None
    stride = draw(st.sampled_from([1, 2, 3]))
    dilation = draw(st.sampled_from([1, 1, 2, 3]))
    padding: Any = draw(st.sampled_from([0, 1, 2, 3, "same", "valid", "tuple"]))
    if padding == "tuple":
        padding = tuple(draw(st.integers(0, 3)) for _ in range(nd))
    if padding == "same" and not _rare(draw, 10):
        stride = 1  # 'same' with stride > 1 is an error on both
    return {"x": x, "w": w, "bias": bias, "stride": stride, "padding": padding, "dilation": dilation,
            "groups": groups}


@st.composite
def conv1d(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    return draw(conv(dtypes, nd=1))


@st.composite
def pool2d(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """x (N, C, H, W) or (C, H, W); kernel, stride (None: = kernel), padding (at most half the
    kernel, or rarely more: an error), dilation, ceil_mode, count_include_pad, divisor_override."""
    d = _dtype(draw, dtypes)
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    batch = (draw(st.integers(0, 2)),) if draw(st.integers(0, 4)) else ()
    x = draw(tensors(d, batch + (draw(st.integers(1, 3)), draw(st.integers(1, 10)), draw(st.integers(1, 10)))))
    stride = draw(st.sampled_from([None, 1, 2, 3]))
    pmax = min(k) // 2 + (1 if _rare(draw, 20) else 0)
    return {"x": x, "k": k, "s": stride, "p": draw(st.integers(0, pmax)), "dil": draw(st.sampled_from([1, 1, 2])),
            "ceil": draw(st.booleans()), "cip": draw(st.booleans()),
            "div": draw(st.sampled_from([None, None, 1, 3]))}


@st.composite
def adaptive_pool(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    d = _dtype(draw, dtypes)
    batch = (draw(st.integers(0, 2)),) if draw(st.integers(0, 4)) else ()
    x = draw(tensors(d, batch + (draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 9)))))
    return {"x": x, "out": (draw(st.integers(1, 5)), draw(st.sampled_from([None, 1, 2, 4, 7])))}


# ---- normalization and softmax --------------------------------------------------------------------

@st.composite
def layer_norm(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    d = _dtype(draw, dtypes)
    x = draw(tensors(d, shapes(min_rank=1, max_rank=4)))
    k = draw(st.integers(1, x.dim()))
    ns = x.shape[x.dim() - k:]
    affine = draw(st.booleans())
    w = draw(tensors(d, ns)) if affine else None
    b = draw(tensors(d, ns)) if affine and draw(st.booleans()) else None
    return {"x": x, "ns": ns, "w": w, "b": b, "eps": draw(st.sampled_from([1e-5, 0.0, 1e-2]))}


@st.composite
def batch_norm(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """x (N, C, *), running stats (or none), affine params, training flag, momentum, eps."""
    d = _dtype(draw, dtypes)
    x = draw(tensors(d, shapes(min_rank=2, max_rank=5, max_side=4)))
    c = x.shape[1]
    train = draw(st.booleans())
    stats = draw(st.booleans()) or not train
    sd = d if not _rare(draw, 10) else F32  # mixed: half input with float32 stats
    rm = draw(tensors(sd, (c,), specials=False)) if stats else None
    rv = draw(tensors(sd, (c,), kinds=("positive",), specials=False)) if stats else None
    w = draw(tensors(sd, (c,))) if draw(st.booleans()) else None
    b = draw(tensors(sd, (c,))) if draw(st.booleans()) else None
    return {"x": x, "rm": rm, "rv": rv, "w": w, "b": b, "train": train,
            "mom": draw(st.sampled_from([0.1, 0.0, 1.0])), "eps": draw(st.sampled_from([1e-5, 1e-2]))}


@st.composite
def group_norm(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    d = _dtype(draw, dtypes)
    g = draw(st.integers(1, 3))
    rest = tuple(draw(st.integers(0, 4)) for _ in range(draw(st.integers(0, 2))))
    c = g * draw(st.integers(1, 3)) if not _rare(draw, 20) else g * 2 + 1
    x = draw(tensors(d, (draw(st.integers(0, 3)), c) + rest))
    w = draw(tensors(d, (c,))) if draw(st.booleans()) else None
    b = draw(tensors(d, (c,))) if w is not None and draw(st.booleans()) else None
    return {"x": x, "g": g, "w": w, "b": b, "eps": draw(st.sampled_from([1e-5, 1e-2]))}


@st.composite
def softmax(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    x = draw(tensors(_dtype(draw, dtypes)))
    return {"x": x, "dim": _dim(draw, x.dim())}


# ---- losses ---------------------------------------------------------------------------------------

REDUCTIONS = ("mean", "sum", "none")


@st.composite
def pair_loss(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """input and target of one shape (rarely two that broadcast), a reduction, smooth_l1's beta."""
    d = _dtype(draw, dtypes)
    s = draw(shapes())
    st_ = s if not _rare(draw, 10) else s[1:]
    return {"a": draw(tensors(d, s)), "b": draw(tensors(d, st_)), "red": draw(st.sampled_from(REDUCTIONS)),
            "beta": draw(st.sampled_from([1.0, 0.5, 0.0, 2.0]))}


@st.composite
def class_loss(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """Scores x (N, C, *extra) or (C,), class targets t (with ignore_index entries and rarely one
    out of range), class weights w, ignore_index ii, reduction, label smoothing ls."""
    d = _dtype(draw, dtypes)
    c = draw(st.integers(1, 6))
    extra = tuple(draw(st.integers(0, 3)) for _ in range(draw(st.sampled_from([0, 0, 1, 2]))))
    n = draw(st.integers(0, 5))
    unbatched = not extra and draw(st.integers(0, 5)) == 0
    x = draw(tensors(d, (c,) if unbatched else (n, c) + extra))
    tshape = () if unbatched else (n,) + extra
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    t = torch.randint(0, c, tshape, generator=g)
    ii = draw(st.sampled_from([-100, 0, 1]))
    if t.numel() and draw(st.booleans()):
        t.view(-1)[draw(st.integers(0, t.numel() - 1))] = ii
    if t.numel() and _rare(draw, 30):
        t.view(-1)[draw(st.integers(0, t.numel() - 1))] = c
    w = draw(tensors(d, (c,), kinds=("positive",))) if draw(st.booleans()) else None
    return {"x": x, "t": t, "w": w, "ii": ii, "red": draw(st.sampled_from(REDUCTIONS)),
            "ls": draw(st.sampled_from([0.0, 0.0, 0.1]))}


@st.composite
def bce_logits(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """Logits x, targets y in [0, 1] (same shape), element weight w and pos_weight pw that
    broadcast."""
    d = _dtype(draw, dtypes)
    s = draw(shapes(max_rank=3))
    y = draw(tensors(d, s, kinds=("unit",), specials=False)).abs()
    w = draw(tensors(d, s[draw(st.integers(0, len(s))):], kinds=("positive",))) if draw(st.booleans()) else None
    pw = draw(tensors(d, s[-1:], kinds=("positive",))) if s and draw(st.booleans()) else None
    return {"x": draw(tensors(d, s)), "y": y, "w": w, "pw": pw, "red": draw(st.sampled_from(REDUCTIONS))}


@st.composite
def bce(draw: st.DrawFn, dtypes: Dtypes) -> Args:
    """Probabilities p in [0, 1] (0 and 1 included: log clamped at -100), targets y, weight w."""
    d = _dtype(draw, dtypes)
    s = draw(shapes(max_rank=3))
    p = draw(tensors(d, s, kinds=("unit",), specials=False)).abs()
    if p.numel() and draw(st.booleans()):  # p is a fresh tensor (abs), maybe not viewable flat
        pos = torch.unravel_index(torch.tensor(draw(st.integers(0, p.numel() - 1))), p.shape)
        p[tuple(int(i) for i in pos)] = draw(st.sampled_from([0.0, 1.0, 1.5]))
    y = draw(tensors(d, s, kinds=("unit",), specials=False)).abs()
    w = draw(tensors(d, s, kinds=("positive",))) if draw(st.booleans()) else None
    return {"p": p.clone(), "y": y, "w": w, "red": draw(st.sampled_from(REDUCTIONS))}


SIGNATURES: dict[str, Callable[[Dtypes], st.SearchStrategy[Args]]] = {
    "unary": unary, "binary": binary, "binary_b": binary_b, "binary_tensors": binary_tensors, "ternary": ternary,
    "where": where, "lerp": lerp, "clamp": clamp,
    "reduce_dims": reduce_dims, "reduce_dim": reduce_dim, "reduce_var": reduce_var, "reduce_norm": reduce_norm,
    "index_select": index_select, "gather": gather, "scatter": scatter, "scatter_dup": scatter_dup,
    "index_add": index_add, "index_copy": index_copy, "masked": masked, "getitem": getitem,
    "index_put": index_put,
    "mm": mm, "bmm": bmm, "matmul": matmul, "addmm": addmm,
    "conv1d": conv1d, "conv2d": conv, "pool2d": pool2d, "adaptive_pool": adaptive_pool,
    "layer_norm": layer_norm, "batch_norm": batch_norm, "group_norm": group_norm, "softmax": softmax,
    "pair_loss": pair_loss, "class_loss": class_loss, "bce_logits": bce_logits, "bce": bce,
}
