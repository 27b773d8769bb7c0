"""The differential fuzzer's op table: one line per op.

Each op is a Python expression over the arguments its signature (tests/fuzz_args.py) draws, so a
failing example prints as a runnable repro. Fields:
  sig     argument strategy (fuzz_args.SIGNATURES)
  dtypes  dtypes drawn for the data tensors (a dtype the CPU rejects is fine: then foo must raise
          the same exception class)
  tol     "ew": each output element is computed from few inputs (dtype tolerance only);
          "acc": the op accumulates, so two correct implementations differ by up to
          ~eps * (sum of the magnitudes of the accumulated terms); that magnitude is `bound`;
          "acc_sqrt": a square root of an accumulated quantity (std), see fuzz_check
  bound   expression for that magnitude, evaluated in float64 on |args| (non-finite values as 0);
          default: the op itself on |args|, which is the sum of |terms| for sums, means, matrix
          products, convolutions, scatter/index adds. Where it exceeds the dtype's max/4 the
          element may overflow in one summation order and not in another: not compared.
  grad    names of the arguments whose gradients are compared too (floating dtypes only), within
          the dtype tolerance plus ~eps * the gradient's largest element (backward passes
          accumulate) plus ~eps * `gbound` where given (normalizations divide by the std)
  stride  compare output strides (dims of size > 1): elementwise ops follow TensorIterator's
          layout rule (outputs take the inputs' memory order), and views keep their strides
  cpu_crash  expression: true for arguments that kill the CPU reference itself (the process dies
          with SIGFPE), which the fuzzer therefore never runs
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from fuzz_strategies import ALL, BOOL, C64, FLOATS, INTS, NUMERIC, REAL, REAL_NUMERIC


@dataclass(frozen=True)
class Op:
    name: str
    sig: str
    expr: str
    dtypes: tuple[torch.dtype, ...] = ALL
    tol: str = "ew"
    bound: str | None = None
    grad: str = ""
    stride: bool = False
    gbound: str | None = None
    cpu_crash: str | None = None


FC = FLOATS + (C64,)
LOGIC = INTS + (BOOL,)


# ---- bound helpers (float64, non-negative inputs) -------------------------------------------------

def prod_ovf(x: torch.Tensor, dim: int | None = None, keepdim: bool = False, cum: bool = False) -> torch.Tensor:
    """How far a product's partial products may stray from 1 in any order: a product of
    max(|x|, 1/|x|) (zeros as 1: a zero makes the product 0 in any order unless a huge factor
    overflows first, which the other factors show)."""
    f = torch.where(x == 0, torch.ones_like(x), torch.maximum(x, 1 / x))
    if cum:
        return f.cumprod(dim)
    return f.prod() if dim is None else f.prod(dim, keepdim)


def sq_mean(x: torch.Tensor, dim: None | int | tuple[int, ...], keepdim: bool) -> torch.Tensor:
    """Twice the mean square: the scale of a variance's accumulated terms (correction <= 1)."""
    return (x * x).mean(dim, keepdim) * 2 if x.numel() else torch.zeros(()).double()


def norm_bound(x: torch.Tensor, dims: tuple[int, ...], eps: float, w: torch.Tensor | None,
               grad: bool = False) -> torch.Tensor:
    """Scale of the rounding error of (x - mean) / sqrt(var + eps) * w over `dims`: the mean is off
    by ~eps * rms(x), the variance by ~eps * mean(x^2), so with cancellation (|mean| >> std) the
    error grows with mean(x^2) / (var + eps); outputs are at most sqrt(n) in size. The input
    gradient is that times 1 / sqrt(var + eps) (grad=True)."""
    if x.numel() == 0:
        return torch.zeros((), dtype=torch.float64)
    n = math.prod(x.shape[d] for d in dims)
    var = x.var(dims, keepdim=True, correction=0)
    ratio = (x * x).mean(dims, keepdim=True) / (var + eps)
    # The weight's own size, but at least 1: the weight gradient (sum of dy * x_hat) has the
    # error of x_hat whatever w is (a nan w counts as 0 here).
    wmax = max(float(w.amax()), 1.0) if w is not None and w.numel() else 1.0
    b = (math.sqrt(n) + 1) * (ratio + 1) * wmax
    return b / (var + eps).sqrt() if grad else b


def ln_bound(x: torch.Tensor, ns: tuple[int, ...], eps: float, w: torch.Tensor | None,
             grad: bool = False) -> torch.Tensor:
    return norm_bound(x, tuple(range(x.dim() - len(ns), x.dim())), eps, w, grad)


def bn_bound(x: torch.Tensor, rm: torch.Tensor | None, rv: torch.Tensor | None, w: torch.Tensor | None,
             b: torch.Tensor | None, train: bool, eps: float, grad: bool = False) -> tuple[torch.Tensor, ...]:
    """Bounds for (output, new running mean, new running var)."""
    shape = (1, -1) + (1,) * (x.dim() - 2)
    if train:
        out = norm_bound(x, (0,) + tuple(range(2, x.dim())), eps, w, grad)
    else:  # (x - rm) / sqrt(rv + eps) * w + b, elementwise
        scale = (w.view(shape) if w is not None else 1) / (rv.view(shape) + eps).sqrt()
        out = (x + rm.view(shape)) * scale + (b.view(shape) if b is not None else 0)
    amax = x.amax() if x.numel() else torch.zeros((), dtype=torch.float64)
    return out, amax + (rm if rm is not None else 0), 2 * amax * amax + (rv if rv is not None else 0)


def gn_bound(x: torch.Tensor, g: int, eps: float, w: torch.Tensor | None, grad: bool = False) -> torch.Tensor:
    if x.numel() == 0 or x.shape[1] % g:
        return torch.zeros((), dtype=torch.float64)
    n, c = x.shape[:2]
    b = norm_bound(x.reshape(n, g, -1), (2,), eps, w, grad).repeat_interleave(c // g, dim=1)
    return b.reshape((n, c) + (1,) * (x.dim() - 2))


def loss_bound(term: torch.Tensor | float, w: torch.Tensor | None, red: str, n: int) -> torch.Tensor:
    """Scale of a loss whose terms are at most `term` in size, times the largest weight: 'sum' adds
    n of them, a weighted 'mean' divides by a rounded weight sum."""
    wmax = w.amax() if w is not None and w.numel() else 1
    return torch.as_tensor(term * wmax * (n if red == "sum" else 1) * (1 if red == "none" else 2),
                           dtype=torch.float64)


def class_bound(x: torch.Tensor, w: torch.Tensor | None, red: str) -> torch.Tensor:
    """Cross-entropy / nll: each term is at most ~2 max|x| + log C."""
    if x.numel() == 0:
        return torch.zeros((), dtype=torch.float64)
    c = x.shape[1] if x.dim() > 1 else x.shape[0]
    return loss_bound(2 * x.amax() + math.log(c) + 1, w, red, x.numel() // c)


def logit_bound(x: torch.Tensor, w: torch.Tensor | None, pw: torch.Tensor | None, red: str) -> torch.Tensor:
    """bce_with_logits: each term is at most ~(|x| + 1) * (pos_weight + 1)."""
    if x.numel() == 0:
        return torch.zeros((), dtype=torch.float64)
    pmax = float(pw.amax()) + 1 if pw is not None and pw.numel() else 1.0
    return loss_bound((x.amax() + 1) * pmax, w, red, x.numel())


def softmax_bound(x: torch.Tensor, dim: int) -> torch.Tensor:
    """exp(x - max) and log(sum) are off by ~eps * (max|x| + log n)."""
    if x.numel() == 0:
        return torch.zeros((), dtype=torch.float64)
    return x.amax(dim, keepdim=True) + math.log(max(x.shape[dim] if x.dim() else 1, 1)) + 1


def int_min_by_minus_one(a: object, b: object) -> bool:
    """Integer a holding its dtype's minimum and b holding -1: the CPU's div(rounding_mode='trunc')
    executes INT_MIN / -1 and the process dies of SIGFPE (torch 2.15)."""
    if not isinstance(a, torch.Tensor) or a.is_floating_point() or a.is_complex() or a.dtype == torch.bool:
        return False
    lo = torch.iinfo(a.dtype).min
    has_m1 = bool((b == -1).any()) if isinstance(b, torch.Tensor) else b == -1
    return bool((a == lo).any()) and has_m1


def pool_window_in_padding(x: object, k: object, s: object, p: object, dil: object, ceil: bool) -> bool:
    """A max_pool2d window whose taps all fall in the padding (dilation steps over the input):
    the CPU's forward records an index past the plane and its backward writes the gradient there,
    out of bounds, which corrupts the heap and later aborts the process (torch 2.15; foo refuses
    the index in its backward with a ValueError)."""
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        return False

    def pair(v: object) -> tuple[int, int]:
        if isinstance(v, (tuple, list)):
            return (int(v[0]), int(v[-1]))
        return (int(v), int(v))  # type: ignore[call-overload]

    kk, pp, dd = pair(k), pair(p), pair(dil)
    ss = pair(s) if s is not None and s != () and s != [] else kk
    for size, kd, sd, pd, dd_ in zip(x.shape[-2:], kk, ss, pp, dd):
        if min(kd, sd, dd_) < 1 or pd < 0:
            return False
        span = (kd - 1) * dd_ + 1
        num = size + 2 * pd - span
        if num < 0:
            return False
        out = (num + (sd - 1 if ceil else 0)) // sd + 1
        if ceil and (out - 1) * sd >= size + pd:
            out -= 1
        for o in range(out):
            start = o * sd - pd
            if not any(0 <= start + t * dd_ < size for t in range(kd)):
                return True
    return False


# ---- the table ------------------------------------------------------------------------------------

UNARY = [
    Op("abs", "unary", "torch.abs(x)", grad="x", stride=True),
    Op("neg", "unary", "torch.neg(x)", grad="x", stride=True),
    Op("exp", "unary", "torch.exp(x)", grad="x", stride=True),
    Op("exp2", "unary", "torch.exp2(x)", grad="x", stride=True),
    Op("expm1", "unary", "torch.expm1(x)", grad="x", stride=True),
    Op("log", "unary", "torch.log(x)", grad="x", stride=True),
    Op("log2", "unary", "torch.log2(x)", grad="x", stride=True),
    Op("log10", "unary", "torch.log10(x)", stride=True),
    Op("log1p", "unary", "torch.log1p(x)", grad="x", stride=True),
    Op("sqrt", "unary", "torch.sqrt(x)", grad="x", stride=True),
    Op("rsqrt", "unary", "torch.rsqrt(x)", grad="x", stride=True),
    Op("sin", "unary", "torch.sin(x)", grad="x", stride=True),
    Op("cos", "unary", "torch.cos(x)", grad="x", stride=True),
    Op("tan", "unary", "torch.tan(x)", grad="x", stride=True),
    Op("asin", "unary", "torch.asin(x)", grad="x", stride=True),
    Op("acos", "unary", "torch.acos(x)", stride=True),
    Op("atan", "unary", "torch.atan(x)", grad="x", stride=True),
    Op("sinh", "unary", "torch.sinh(x)", stride=True),
    Op("cosh", "unary", "torch.cosh(x)", stride=True),
    Op("tanh", "unary", "torch.tanh(x)", grad="x", stride=True),
    Op("asinh", "unary", "torch.asinh(x)", stride=True),
    Op("acosh", "unary", "torch.acosh(x)", stride=True),
    Op("atanh", "unary", "torch.atanh(x)", grad="x", stride=True),
    Op("sigmoid", "unary", "torch.sigmoid(x)", grad="x", stride=True),
    Op("erf", "unary", "torch.erf(x)", grad="x", stride=True),
    Op("erfc", "unary", "torch.erfc(x)", stride=True),
    Op("erfinv", "unary", "torch.erfinv(x)", stride=True),
    Op("ceil", "unary", "torch.ceil(x)", stride=True),
    Op("floor", "unary", "torch.floor(x)", stride=True),
    Op("round", "unary", "torch.round(x)", stride=True),
    Op("round_decimals", "unary", "torch.round(x, decimals=2)", stride=True),
    Op("trunc", "unary", "torch.trunc(x)", stride=True),
    Op("frac", "unary", "torch.frac(x)", grad="x", stride=True),
    Op("sign", "unary", "torch.sign(x)", stride=True),
    Op("sgn", "unary", "torch.sgn(x)", stride=True),
    Op("reciprocal", "unary", "torch.reciprocal(x)", grad="x", stride=True),
    Op("square", "unary", "x ** 2", grad="x", stride=True),
    Op("pow_half", "unary", "x ** 0.5", stride=True),
    Op("pow_neg", "unary", "x ** -3", stride=True),
    Op("rpow", "unary", "2.5 ** x", stride=True),
    Op("bitwise_not", "unary", "torch.bitwise_not(x)", stride=True),
    Op("logical_not", "unary", "torch.logical_not(x)", stride=True),
    Op("isnan", "unary", "torch.isnan(x)", stride=True),
    Op("isinf", "unary", "torch.isinf(x)", stride=True),
    Op("isposinf", "unary", "torch.isposinf(x)", stride=True),
    Op("isneginf", "unary", "torch.isneginf(x)", stride=True),
    Op("signbit", "unary", "torch.signbit(x)", stride=True),
    Op("nan_to_num", "unary", "torch.nan_to_num(x)", stride=True),
    Op("nan_to_num_args", "unary", "torch.nan_to_num(x, nan=1.5, posinf=2.0, neginf=-3.0)", stride=True),
    Op("relu", "unary", "torch.relu(x)", grad="x", stride=True),
    Op("gelu", "unary", "torch.nn.functional.gelu(x)", grad="x", stride=True),
    Op("gelu_tanh", "unary", "torch.nn.functional.gelu(x, approximate='tanh')", grad="x", stride=True),
    Op("silu", "unary", "torch.nn.functional.silu(x)", grad="x", stride=True),
    Op("mish", "unary", "torch.nn.functional.mish(x)", grad="x", stride=True),
    Op("hardswish", "unary", "torch.nn.functional.hardswish(x)", grad="x", stride=True),
    Op("hardsigmoid", "unary", "torch.nn.functional.hardsigmoid(x)", grad="x", stride=True),
    Op("elu", "unary", "torch.nn.functional.elu(x, alpha=0.5)", grad="x", stride=True),
    Op("leaky_relu", "unary", "torch.nn.functional.leaky_relu(x, 0.1)", grad="x", stride=True),
    Op("softplus", "unary", "torch.nn.functional.softplus(x, beta=2.0, threshold=5.0)", grad="x", stride=True),
    Op("hardtanh", "unary", "torch.nn.functional.hardtanh(x, -0.5, 2.0)", grad="x", stride=True),
    Op("threshold", "unary", "torch.nn.functional.threshold(x, 0.5, -2.0)", grad="x", stride=True),
    Op("neg_", "unary", "x.neg_()", stride=True),
    Op("sigmoid_", "unary", "x.sigmoid_()", stride=True),
    Op("clone", "unary", "x.clone()", stride=True),
    Op("contiguous", "unary", "x.contiguous()", stride=True),
    Op("to_f32", "unary", "x.to(torch.float32)", stride=True),
    Op("to_i32", "unary", "x.to(torch.int32)", stride=True),
    Op("to_u8", "unary", "x.to(torch.uint8)", stride=True),
    Op("to_bf16", "unary", "x.to(torch.bfloat16)", stride=True),
    Op("to_bool", "unary", "x.to(torch.bool)", stride=True),
]

BINARY = [
    Op("add", "binary", "a + b", grad="a b", stride=True),
    Op("sub", "binary", "a - b", grad="a b", stride=True),
    Op("mul", "binary", "a * b", grad="a b", stride=True),
    Op("div", "binary", "a / b", grad="a b", stride=True),
    Op("add_alpha", "binary_b", "torch.add(a, b, alpha=2)", stride=True),
    Op("sub_alpha", "binary_b", "torch.sub(a, b, alpha=-0.5)", stride=True),
    Op("rsub", "binary_b", "torch.rsub(a, b)", stride=True),
    Op("div_trunc", "binary_b", "torch.div(a, b, rounding_mode='trunc')", stride=True,
       cpu_crash="int_min_by_minus_one(a, b)"),
    Op("div_floor", "binary_b", "torch.div(a, b, rounding_mode='floor')", stride=True),
    Op("floor_divide", "binary", "a // b", stride=True),
    Op("remainder", "binary", "a % b", stride=True),
    Op("fmod", "binary_b", "torch.fmod(a, b)", stride=True),
    Op("pow", "binary", "a ** b", grad="a b", stride=True),
    Op("atan2", "binary_tensors", "torch.atan2(a, b)", grad="a b", stride=True),
    Op("copysign", "binary_b", "torch.copysign(a, b)", stride=True),
    Op("hypot", "binary_tensors", "torch.hypot(a, b)", grad="a b", stride=True),
    Op("maximum", "binary_tensors", "torch.maximum(a, b)", grad="a b", stride=True),
    Op("minimum", "binary_tensors", "torch.minimum(a, b)", grad="a b", stride=True),
    Op("fmax", "binary_tensors", "torch.fmax(a, b)", stride=True),
    Op("fmin", "binary_tensors", "torch.fmin(a, b)", stride=True),
    Op("logaddexp", "binary_tensors", "torch.logaddexp(a, b)", grad="a b", stride=True),
    Op("xlogy", "binary", "torch.xlogy(a, b)", grad="a b", stride=True),
    Op("eq", "binary", "a == b", stride=True),
    Op("ne", "binary", "a != b", stride=True),
    Op("lt", "binary", "a < b", stride=True),
    Op("le", "binary", "a <= b", stride=True),
    Op("gt", "binary", "a > b", stride=True),
    Op("ge", "binary", "a >= b", stride=True),
    Op("bitwise_and", "binary", "a & b", LOGIC, stride=True),
    Op("bitwise_or", "binary", "a | b", LOGIC, stride=True),
    Op("bitwise_xor", "binary", "a ^ b", LOGIC, stride=True),
    Op("lshift", "binary", "a << b", INTS, stride=True),
    Op("rshift", "binary", "a >> b", INTS, stride=True),
    Op("logical_and", "binary_tensors", "torch.logical_and(a, b)", stride=True),
    Op("logical_or", "binary_tensors", "torch.logical_or(a, b)", stride=True),
    Op("logical_xor", "binary_tensors", "torch.logical_xor(a, b)", stride=True),
    Op("add_", "binary_b", "a.add_(b)", stride=True),
    Op("mul_", "binary_b", "a.mul_(b)", stride=True),
    Op("div_", "binary_b", "a.div_(b)", stride=True),
    Op("addcmul", "ternary", "torch.addcmul(x, a, b, value=v)", grad="x a b", stride=True),
    Op("addcdiv", "ternary", "torch.addcdiv(x, a, b, value=v)", grad="x a b", stride=True),
    Op("where", "where", "torch.where(c, a, b)", grad="a b", stride=True),
    Op("lerp", "lerp", "torch.lerp(a, b, w)", FC, grad="a b w", stride=True),
    Op("clamp", "clamp", "torch.clamp(x, lo, hi)", REAL, grad="x", stride=True),
]

REDUCTIONS = [
    Op("sum", "reduce_dims", "x.sum(dim, keepdim)", tol="acc", grad="x"),
    Op("mean", "reduce_dims", "x.mean(dim, keepdim)", tol="acc", grad="x"),
    Op("nansum", "reduce_dims", "x.nansum(dim, keepdim)", tol="acc"),
    Op("prod", "reduce_dim", "x.prod(dim, keepdim)", tol="acc", bound="prod_ovf(x, dim, keepdim)", grad="x"),
    Op("prod_all", "unary", "x.prod()", tol="acc", bound="prod_ovf(x)", grad="x"),
    Op("amax", "reduce_dims", "x.amax(() if dim is None else dim, keepdim)", REAL, grad="x"),
    Op("amin", "reduce_dims", "x.amin(() if dim is None else dim, keepdim)", REAL, grad="x"),
    Op("aminmax", "reduce_dim", "torch.aminmax(x, dim=dim, keepdim=keepdim)", REAL),
    Op("max_dim", "reduce_dim", "x.max(dim, keepdim)", REAL, grad="x"),
    Op("min_dim", "reduce_dim", "x.min(dim, keepdim)", REAL),
    Op("max_all", "unary", "x.max()", REAL, grad="x"),
    Op("argmax", "reduce_dim", "x.argmax(dim, keepdim)", REAL),
    Op("argmin", "reduce_dim", "x.argmin(dim, keepdim)", REAL),
    Op("argmax_all", "unary", "x.argmax()", REAL),
    Op("all", "reduce_dims", "x.all(dim, keepdim)"),
    Op("any", "reduce_dims", "x.any(dim, keepdim)"),
    Op("var", "reduce_var", "torch.var(x, dim, correction=c, keepdim=keepdim)", FC, tol="acc",
       bound="sq_mean(x, dim, keepdim)", grad="x"),
    Op("std", "reduce_var", "torch.std(x, dim, correction=c, keepdim=keepdim)", FC, tol="acc_sqrt",
       bound="sq_mean(x, dim, keepdim)", grad="x"),
    Op("var_mean", "reduce_var", "torch.var_mean(x, dim, correction=c, keepdim=keepdim)", FC, tol="acc",
       bound="(sq_mean(x, dim, keepdim), x.mean(dim, keepdim))"),
    Op("vector_norm", "reduce_norm", "torch.linalg.vector_norm(x, p, dim, keepdim)", FC, tol="acc", grad="x"),
    Op("norm", "reduce_norm", "torch.norm(x, p, dim, keepdim)", FC, tol="acc"),
    Op("logsumexp", "reduce_dims", "torch.logsumexp(x, tuple(range(x.dim())) if dim is None else dim, keepdim)",
       tol="acc", grad="x"),
    Op("cumsum", "reduce_dim", "x.cumsum(dim)", tol="acc", grad="x"),
    Op("cumprod", "reduce_dim", "x.cumprod(dim)", tol="acc", bound="prod_ovf(x, dim, cum=True)"),
    Op("sort", "reduce_dim", "torch.sort(x, dim=dim, stable=True)", REAL),
    Op("sort_desc", "reduce_dim", "torch.sort(x, dim=dim, descending=True, stable=True)", REAL),
]

INDEXING = [
    Op("index_select", "index_select", "torch.index_select(x, dim, i)", grad="x"),
    Op("gather", "gather", "torch.gather(x, dim, i)", grad="x"),
    Op("scatter_src", "scatter", "torch.scatter(x, dim, i, src)", grad="x src"),
    Op("scatter_value", "scatter", "torch.scatter(x, dim, i, v)"),
    Op("scatter_add", "scatter_dup", "torch.scatter_add(x, dim, i, src)", tol="acc", grad="x src"),
    Op("scatter_reduce", "scatter_dup", "torch.scatter_reduce(x, dim, i, src, red, include_self=self)",
       NUMERIC, tol="acc", bound="torch.scatter_reduce(x, dim, i, src, 'sum', include_self=True) "
       "if red in ('sum', 'mean') else torch.full_like(x, math.inf)"),
    Op("index_add", "index_add", "torch.index_add(x, dim, i, src, alpha=alpha)", tol="acc", grad="x src"),
    Op("index_copy", "index_copy", "torch.index_copy(x, dim, i, src)", grad="x src"),
    Op("index_fill", "index_add", "x.index_fill(dim, i, -2)"),
    Op("masked_fill", "masked", "x.masked_fill(m, v)", grad="x", stride=True),
    Op("masked_select", "masked", "torch.masked_select(x, m)", grad="x"),
    Op("getitem", "getitem", "x[idx]", grad="x"),
    Op("index_put", "index_put", "x.index_put(idx, v, accumulate=acc)", tol="acc", grad="x v"),
    Op("index_put_", "index_put", "x.index_put_(idx, v, accumulate=acc)", tol="acc"),
]

LINALG = [
    Op("mm", "mm", "torch.mm(a, b)", tol="acc", grad="a b"),
    Op("bmm", "bmm", "torch.bmm(a, b)", tol="acc", grad="a b"),
    Op("matmul", "matmul", "a @ b", tol="acc", grad="a b"),
    Op("addmm", "addmm", "torch.addmm(c, a, b, beta=beta, alpha=alpha)", tol="acc", grad="c a b"),
]

NN = [
    Op("conv1d", "conv1d", "F.conv1d(x, w, bias, stride, padding, dilation, groups)", NUMERIC, tol="acc",
       grad="x w bias"),
    Op("conv2d", "conv2d", "F.conv2d(x, w, bias, stride, padding, dilation, groups)", NUMERIC, tol="acc",
       grad="x w bias"),
    Op("max_pool2d", "pool2d", "F.max_pool2d(x, k, s, p, dil, ceil, return_indices=True)", REAL_NUMERIC,
       grad="x", cpu_crash="pool_window_in_padding(x, k, s, p, dil, ceil)"),
    Op("avg_pool2d", "pool2d", "F.avg_pool2d(x, k, s, p, ceil, cip, div)", REAL_NUMERIC, tol="acc", grad="x"),
    Op("adaptive_avg_pool2d", "adaptive_pool", "F.adaptive_avg_pool2d(x, out)", REAL_NUMERIC, tol="acc",
       grad="x"),
    Op("layer_norm", "layer_norm", "F.layer_norm(x, ns, w, b, eps)", FC, tol="acc",
       bound="ln_bound(x, ns, eps, w)", grad="x w b",
       gbound="ln_bound(x, ns, eps, w, grad=True)"),
    Op("batch_norm", "batch_norm", "(F.batch_norm(x, rm, rv, w, b, train, mom, eps), rm, rv)", FC, tol="acc",
       bound="bn_bound(x, rm, rv, w, b, train, eps)", grad="x w b",
       gbound="bn_bound(x, rm, rv, w, b, train, eps, grad=True)[0]"),
    Op("group_norm", "group_norm", "F.group_norm(x, g, w, b, eps)", FC, tol="acc",
       bound="gn_bound(x, g, eps, w)", grad="x w b",
       gbound="gn_bound(x, g, eps, w, grad=True)"),
    Op("softmax", "softmax", "F.softmax(x, dim)", FC, tol="acc", bound="softmax_bound(x, dim)", grad="x"),
    Op("log_softmax", "softmax", "F.log_softmax(x, dim)", FC, tol="acc", bound="softmax_bound(x, dim)",
       grad="x"),
    Op("mse_loss", "pair_loss", "F.mse_loss(a, b, reduction=red)", FC, tol="acc",
       bound="F.mse_loss(a, -b, reduction=red)", grad="a b"),
    Op("smooth_l1_loss", "pair_loss", "F.smooth_l1_loss(a, b, reduction=red, beta=beta)", FLOATS, tol="acc",
       bound="F.smooth_l1_loss(a, -b, reduction=red, beta=beta)", grad="a b"),
    Op("l1_loss", "pair_loss", "F.l1_loss(a, b, reduction=red)", FLOATS, tol="acc",
       bound="F.l1_loss(a, -b, reduction=red)", grad="a"),
    Op("cross_entropy", "class_loss", "F.cross_entropy(x, t, w, ignore_index=ii, reduction=red, label_smoothing=ls)",
       FLOATS, tol="acc", bound="class_bound(x, w, red)", grad="x"),
    Op("nll_loss", "class_loss", "F.nll_loss(x, t, w, ignore_index=ii, reduction=red)", FLOATS, tol="acc",
       bound="class_bound(x, w, red)", grad="x"),
    Op("bce_with_logits", "bce_logits", "F.binary_cross_entropy_with_logits(x, y, w, reduction=red, pos_weight=pw)",
       FLOATS, tol="acc", bound="logit_bound(x, w, pw, red)",
       grad="x y"),
    Op("bce", "bce", "F.binary_cross_entropy(p, y, w, reduction=red)", FLOATS, tol="acc",
       bound="loss_bound(100.0, w, red, p.numel())", grad="p"),
]

OPS: dict[str, Op] = {op.name: op for op in UNARY + BINARY + REDUCTIONS + INDEXING + LINALG + NN}
BOUND_HELPERS = {f.__name__: f for f in (int_min_by_minus_one, pool_window_in_padding, prod_ovf, sq_mean, ln_bound,
                                         bn_bound, gn_bound,
                                         loss_bound, logit_bound, class_bound, softmax_bound)}
