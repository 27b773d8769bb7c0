"""Differential fuzzer: every op in tests/fuzz_ops.py on hypothesis-drawn inputs (odd shapes,
layouts, dtypes, special values) on foo and on the CPU; foo must agree (tests/fuzz_check.py).

    pytest tests/test_fuzz.py                                   # profile "ci": fixed, derandomized
    FOO_RS_FUZZ_EXAMPLES=5000 pytest tests/test_fuzz.py -x      # profile "long": random, N per op

FOO_RS_FUZZ_PROFILE=ci|long picks a profile explicitly; FOO_RS_FUZZ_OPS=name,name narrows the run.
A difference foo does not fix yet goes into KNOWN (with a minimal repro and a matcher for the
cases it explains); test_known_defects_still_reproduce fails once it is fixed, so the list empties.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from fuzz_args import SIGNATURES
from fuzz_check import STATS, Mismatch, check_case, evaluate
from fuzz_ops import OPS
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
           HealthCheck.large_base_example]
settings.register_profile("ci", max_examples=int(os.environ.get("FOO_RS_FUZZ_CI_EXAMPLES", "50")),
                          derandomize=True, deadline=None, database=None, print_blob=False,
                          suppress_health_check=_HEALTH)
settings.register_profile("long", max_examples=int(os.environ.get("FOO_RS_FUZZ_EXAMPLES", "2000")),
                          derandomize=False, deadline=None, database=None, print_blob=True,
                          suppress_health_check=_HEALTH)
PROFILE = os.environ.get("FOO_RS_FUZZ_PROFILE") or ("long" if os.environ.get("FOO_RS_FUZZ_EXAMPLES") else "ci")
SELECTED = [n for n in os.environ.get("FOO_RS_FUZZ_OPS", "").split(",") if n] or sorted(OPS)


def _empty(args: dict[str, Any]) -> bool:
    """A tensor argument is empty (then foo skips checks the CPU makes, or the other way round)."""
    return any(isinstance(v, torch.Tensor) and v.numel() == 0 for v in args.values())


def _huge(args: dict[str, Any], name: str, limit: float = 1.8e19) -> bool:
    """args[name] holds a finite element whose square overflows float32."""
    t = args.get(name)
    return isinstance(t, torch.Tensor) and t.is_floating_point() and bool(
        (t.isfinite() & (t.abs() > limit)).any())


def _nonfinite(args: dict[str, Any], name: str) -> bool:
    t = args.get(name)
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) and not bool(t.isfinite().all())


def _cpu_conv_uses_onednn(args: dict[str, Any]) -> bool:
    """The CPU's float32 conv would run on oneDNN for these arguments: ConvParams::use_mkldnn
    (aten/src/ATen/native/Convolution.cpp), after an unbatched input gains its batch dim and a
    1-d conv is viewed as a 2-d one ([N, C, L] -> [N, C, 1, L])."""
    x, w = args["x"], args["w"]
    xs, ws = list(x.shape), list(w.shape)
    if len(xs) < len(ws):
        xs = [1, *xs]
    if len(xs) == 3:
        xs, ws = [xs[0], xs[1], 1, xs[2]], [ws[0], ws[1], 1, ws[2]]

    def over_one(v: Any) -> bool:
        return any(e != 1 for e in (v if isinstance(v, (tuple, list)) else (v,)))

    n, groups = xs[0], args.get("groups", 1)
    cheap_enough = (over_one(args.get("stride", 1)) or over_one(args.get("dilation", 1)) or n >= 16
                    or ws[-1] != 1 or ws[-2] != 1 or torch.get_num_threads() > 1)
    big_enough = groups > 1 or (ws[-1] > 3 and ws[-2] > 3) or n > 1 or n * xs[1] * xs[2] * xs[3] > 20480
    return cheap_enough and big_enough


def _quotient_overflows(args: dict[str, Any]) -> bool:
    """Some |a / b| of the float operands a, b exceeds their dtype's range."""
    a, b = args.get("a"), args.get("b")
    if a is None or b is None:
        return False
    dtype = torch.result_type(a, b)
    if not dtype.is_floating_point:
        return False
    q = torch.as_tensor(a).double().abs() / torch.as_tensor(b).double().abs()
    return bool((q > torch.finfo(dtype).max).any())


@dataclass(frozen=True)
class Known:
    """A known foo-vs-CPU difference. It explains a fuzz failure of one of `ops` whose message
    contains every fragment in `says` and (if given) for whose arguments `when` holds. `repro`
    is an op name and its arguments as Python source: a minimal case that shows it."""

    why: str
    ops: tuple[str, ...]
    says: tuple[str, ...]
    repro: tuple[str, str]
    when: Callable[[dict[str, Any]], bool] | None = None
    # The CPU backend's (or foo's GEMM's) behaviour differs between machines (kernels pick code
    # paths by the instruction set and cache sizes): the repro shows the difference on some CPUs
    # only.
    some_cpus: bool = False

    def explains(self, op: str, args: dict[str, Any], message: str) -> bool:
        return op in self.ops and all(p in message for p in self.says) and (self.when is None or self.when(args))


# Differences foo has today. The main session removes an entry when it fixes foo;
# test_known_defects_still_reproduce fails for an entry whose repro no longer shows it.
KNOWN: dict[str, Known] = {
    # ---- foo raises where the CPU computes, or computes where the CPU raises
    "batch-norm-expanded-running-stats": Known(
        "batch_norm with expanded (stride-0) running statistics: in training foo refuses to write them (more "
        "than one element refers to one memory location) where the CPU writes each element in turn, and the "
        "gradients that follow differ",
        ("batch_norm",), (), ("batch_norm", "dict(x=torch.ones(2, 2), rm=torch.zeros(2), "
                                            "rv=torch.ones(1).expand(2), w=None, b=None, train=True, mom=0.1, "
                                            "eps=1e-5)"),
        lambda a: any(isinstance(a.get(k), torch.Tensor) and 0 in a[k].stride() and a[k].numel() > 1
                      for k in ("rm", "rv"))),
    "complex32-unsupported": Known(
        "a float16 tensor with a complex Python scalar computes in complex32 (ComplexHalf), which foo does "
        "not support (foo_rs.UNSUPPORTED_DTYPES): NotImplementedError where the CPU computes (on empty inputs foo "
        "returns a complex32 tensor that cannot be copied to the CPU)",
        tuple(OPS), ("ComplexHalf",),
        ("ne", "dict(a=torch.ones(1, dtype=torch.float16), b=1j)")),
    "bcomplex32-unsupported": Known(
        "a bfloat16 tensor with a complex Python scalar computes in BComplex32 (experimental in PyTorch), which "
        "foo does not support: NotImplementedError where the CPU's comparisons compute",
        tuple(OPS), ("BComplex32",),
        ("eq", "dict(a=torch.tensor([1.5390625], dtype=torch.bfloat16), b=1j)")),
    # ---- other values
    "norm-backward-huge-weight": Known(
        "layer_norm's input gradient with a weight near FLT_MAX: the terms overflow and foo and the CPU meet inf "
        "and nan in different places (foo nan, CPU inf for x = [15410, -2934], w = [3.4e38, -0.29]); foo follows "
        "the CPU's formula (ds, db over the raw x) but sums in another order",
        ("layer_norm",), ("gradient of x", "values differ"),
        ("layer_norm", "dict(x=torch.tensor([15409.9609375, -2934.2890625]), ns=(2,), "
                       "w=torch.tensor([3.4028234663852886e+38, -0.293428897857666]), b=None, eps=1e-5)"),
        lambda a: isinstance(a.get("w"), torch.Tensor) and _huge(a, "w", 1e30)),
    "extreme-magnitude-order": Known(
        "sums and products over values near the ends of the float range, in another order than the CPU's: a "
        "partial sum overflows in one order and not in the other (conv2d's weight gradient over x = 3.4e38: foo "
        "7.7e37, CPU inf; bfloat16 addmm's gradient with alpha 0: 0 against nan), products pass through "
        "subnormals (prod's gradient near 1e25, 2e-4 apart) or terms near 1e27 cancel (lerp's weight gradient, "
        "2e-5 apart), and std's gradient where the variance overflows (x holding FLT_MAX twice: foo -inf, CPU "
        "nan; addcmul's broadcast gradient [3.4e38, -0.22, 5.8e37, 0.15, -3.2e38, 0.27] summed: foo inf, the "
        "CPU's four interleaved partial sums 7.7e37); neither order is the more accurate",
        ("conv1d", "conv2d", "addmm", "mm", "bmm", "matmul", "prod", "prod_all", "lerp", "std", "var", "addcmul"),
        ("differ",),
        ("conv2d", "dict(x=torch.tensor([3.4028234663852886e+38, -0.293428897857666]).as_strided((1, 1, 3, 2), "
                   "(2, 2, 0, 1), 0), w=torch.tensor([1.5409960746765137]).reshape((1, 1, 1, 1)), bias=None, "
                   "stride=1, padding=0, dilation=1, groups=1)"),
        # The conv2d repro differs on AMD Zen 4 (foo 7.7e37, CPU inf); on the Intel Xeon both give inf.
        lambda a: any(_huge(a, k, 1e15) for k in a), some_cpus=True),
    "prod-inf-among-underflowing-factors": Known(
        "prod of an inf among hundreds of small factors: foo multiplies in 16 lanes, the lanes without the inf "
        "underflow to 0 and inf * 0 is nan (the gradient, result / x, too); the CPU's order keeps the inf "
        "(CPU inf, foo nan for [inf] + 499 normal samples, whose product is 1e-138 without the inf)",
        ("prod", "prod_all"), ("differ",),
        ("prod_all", "dict(x=torch.cat([torch.tensor([math.inf]), torch.full((499,), 0.5)]))"),
        lambda a: _nonfinite(a, "x")),
    "half-type-accumulation": Known(
        "float16/bfloat16 sums and products accumulated in another order or precision than the CPU's: its "
        "scatter_add/scatter_reduce sums of duplicate indices ([15424, -7200, -5952] into one bfloat16 slot: "
        "CPU 2272, foo 2240, which is also the CPU's own index_add), nansum over a non-contiguous input (its "
        "reduction keeps partial sums in the output's dtype), prod's partial products and the gradients "
        "built on them (prod, where's broadcast gradient), and batch_norm of a non-contiguous half input "
        "(its generic path computes in half arithmetic)",
        ("scatter_add", "scatter_reduce", "nansum", "prod", "prod_all", "where", "batch_norm"), ("differ",),
        ("scatter_reduce", "dict(x=torch.zeros(2, dtype=torch.bfloat16), dim=0, i=torch.tensor([0, 0, 0]), "
                           "src=torch.tensor([15424.0, -7200.0, -5952.0], dtype=torch.bfloat16), v=0, red='sum', "
                           "self=False)"),
        lambda a: any(isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16) for v in a.values())),
    "half-precision-ulps": Known(
        "float16/bfloat16 rsqrt is 1 ulp off the CPU's for 0.03% of inputs (x = 0.11474609375: foo 2.951171875, "
        "the correctly rounded value; CPU 2.953125: its half-type kernel does not round 1 / sqrt(x) from float32), "
        "which its gradient, -0.5 * g * rsqrt(x)**3, magnifies to a few ulp; conv1d/conv2d gradients in half types "
        "round their partial sums differently from the CPU's",
        ("rsqrt", "conv1d", "conv2d"), ("differ",),
        ("rsqrt", "dict(x=torch.tensor([0.11474609375], dtype=torch.float16))"),
        lambda a: any(isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16) for v in a.values())),
}

# The CPU's own bugs and inconsistencies: foo behaves better or consistently, and that is accepted
# (an entry goes once torch changes; test_known_defects_still_reproduce notices).
CPU_QUIRKS: dict[str, Known] = {
    "cpu-nll-loss2d-backward-noncontiguous": Known(
        "nll_loss backward of a non-contiguous 4-D input raises 'grad_input must be contiguous' on the CPU",
        ("nll_loss", "cross_entropy"), ("backward: CPU RuntimeError('grad_input must be contiguous')", "foo None"),
        ("nll_loss", "dict(x=torch.arange(4.0).as_strided((2, 1, 2, 1), (1, 4, 2, 1)), "
                     "t=torch.zeros(2, 2, 1, dtype=torch.int64), w=None, ii=-100, red='mean', ls=0.0)")),
    "cpu-gelu-rank-26": Known(
        "gelu of a tensor of rank > 25 raises RuntimeError('dimensions are invalid') on the CPU",
        ("gelu", "gelu_tanh"), ("dimensions are invalid", "foo did not"),
        ("gelu", "dict(x=torch.ones([2] + [1] * 25))")),
    "cpu-gelu-inf": Known(
        "gelu(+inf) on the CPU: inf for a 1-element tensor, nan from the vectorized path (2+ elements, float32 "
        "and half); foo gives inf (the limit) always",
        ("gelu",), ("values differ",), ("gelu", "dict(x=torch.tensor([math.inf, math.inf]))"),
        lambda a: _nonfinite(a, "x"), some_cpus=True),  # AVX-512 kernels; a Zen 3's AVX2 ones give inf
    "cpu-blas-alpha-first": Known(
        "products with an inf operand, where the CPU calls BLAS (mm, mv, addmm, bmm of some shapes): BLAS scales "
        "an operand by alpha before multiplying, so complex results become nan + nan i ((inf + 0i) * (1 + 0i) = "
        "inf + nan i; [[1.5 - 0.3i]] @ [inf]: CPU nan + nan i, foo inf - inf i) and a real alpha * 1e-45 that "
        "underflows to 0 meets inf as nan; foo multiplies first and scales the sum, giving the textbook values, as "
        "the CPU's dot and its other bmm shapes do",
        ("matmul", "mm", "addmm", "bmm"), ("differ",),
        ("matmul", "dict(a=torch.tensor([[complex(1.5, -0.3)]]), b=torch.tensor([complex(math.inf, 0)]))"),
        lambda a: any(isinstance(a.get(k), torch.Tensor) and not bool(a[k].isfinite().all())
                      and (a[k].is_complex() or a.get("alpha", 1) != 1) for k in ("a", "b"))),
    "cpu-hardtanh-backward-nan": Known(
        "hardtanh backward at x = nan on the CPU: 0 from the vectorized path (64 elements), the gradient from "
        "the scalar path (a few elements); foo passes the gradient through always",
        ("hardtanh",), ("gradient of x", "values differ"),
        ("hardtanh", "dict(x=torch.tensor([math.nan] + [0.0] * 63))"), lambda a: _nonfinite(a, "x")),
    "std-gradient-of-constant": Known(
        "std/var's gradient where every value is the same (an expanded tensor): foo's mean equals the values "
        "exactly, so x - mean is 0 and the gradient 0; the CPU's mean is off by rounding (-0.002)",
        ("std", "var"), ("gradient of x", "values differ"),
        ("std", "dict(x=torch.tensor([1.5409960746765137]).as_strided((500,), (0,), 0), dim=None, keepdim=False, c=1)"),
        lambda a: isinstance(a.get("x"), torch.Tensor) and 0 in a["x"].stride()),
    "cpu-hardswish-backward-nan": Known(
        "hardswish backward at x = nan on the CPU: nan from the vectorized path (8+ elements), the gradient from "
        "the scalar path (a few elements); foo gives nan always",
        ("hardswish",), ("gradient of x", "values differ"),
        ("hardswish", "dict(x=torch.tensor([math.nan]))"), lambda a: _nonfinite(a, "x")),
    "cpu-fmod-tiny-divisor": Known(
        "fmod/remainder whose quotient a / b overflows (a subnormal divisor, or a near the dtype's max) on the "
        "CPU's vectorized path: a - b * trunc(a / b) with a / b = inf gives nan; foo (C's fmod) gives the exact "
        "remainder, as the CPU's own scalar path does (float64 max % 0.29: 8 elements nan, 1 element finite)",
        ("fmod", "remainder"), ("values differ",),
        ("fmod", "dict(a=torch.full((64,), 1.5), b=torch.tensor([1.401298464324817e-45]))"),
        lambda a: _quotient_overflows(a)),
    "cpu-index-fill-empty": Known(
        "index_fill of an empty tensor with a non-empty index: the CPU fails inside its kernel (RuntimeError "
        "'setStorage: ... out of bounds'); foo has nothing to fill and returns",
        ("index_fill",), ("CPU raised RuntimeError(setStorage", "foo did not"),
        ("index_fill", "dict(x=torch.zeros(0), dim=0, i=torch.tensor([0]), src=torch.ones(1), alpha=1.0)")),
    "cpu-var-mean-inf": Known(
        "var_mean/mean of float16 with an infinite value on the CPU (Welford updates: mean + (x - mean) / n "
        "turns -inf into nan); foo's mean is the sum's (-inf)",
        ("var_mean",), ("values differ",),
        ("var_mean", "dict(x=torch.tensor([0.0, -0.0, -math.inf, 0.0, -0.0016117095947265625], dtype=torch.float16), "
                     "dim=None, keepdim=False, c=1)"), lambda a: _nonfinite(a, "x")),
    "cpu-div-trunc-half-by-isa": Known(
        "div(rounding_mode='trunc') in float16/bfloat16: the CPU's AVX2 kernels (AMD EPYC here) round the "
        "quotient to the half type before truncating, as foo does (bf16 1.0 / 0.1 gives 10); its AVX-512 "
        "kernels (Intel Xeon) truncate the float32 quotient (9)",
        ("div_trunc",), ("values differ",),
        ("div_trunc", "dict(a=torch.tensor([1.0], dtype=torch.bfloat16), b=torch.tensor([0.1], "
                      "dtype=torch.bfloat16))"),
        lambda a: any(isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16) for v in a.values()),
        some_cpus=True),
    "cpu-index-copy-empty-dim": Known(
        "index_copy into a size-0 dim with an index (out of range by definition): the CPU raises an internal "
        "RuntimeError from setStorage, foo the IndexError it raises for any out-of-range index_copy index "
        "(index_add now matches the CPU: no error into an empty self of 2+ dims)",
        ("index_copy",), ("CPU raised RuntimeError(setStorage", "foo IndexError"),
        ("index_copy", "dict(x=torch.zeros(0, 1), dim=0, i=torch.tensor([0]), src=torch.ones(1, 1))"),
        lambda a: a["x"].numel() == 0),
    "cpu-logsumexp-empty-dims": Known(
        "logsumexp(x, dim=()) raises RuntimeError (output shape) on the CPU; foo reduces over all dims as "
        "sum(x, dim=()) does",
        ("logsumexp",), ("CPU raised RuntimeError(output with shape", "foo did not"),
        ("logsumexp", "dict(x=torch.ones(2, 2), dim=(), keepdim=False)")),
    "cpu-half-conv-padding": Known(
        "float16/bfloat16 conv on the CPU treats zero padding as absent (an inf weight over padding gives 0); "
        "its float32 conv and foo give nan (0 * inf). Seen on Intel Xeon (AVX-512/AMX), not on AMD EPYC",
        ("conv1d", "conv2d"), ("values differ",),
        ("conv1d", "dict(x=torch.tensor([[1.0]], dtype=torch.float16), w=torch.tensor([[[math.inf]]], "
                   "dtype=torch.float16), bias=None, stride=1, padding=1, dilation=1, groups=1)"),
        lambda a: _nonfinite(a, "w") and a["x"].dtype in (torch.float16, torch.bfloat16), some_cpus=True),
    "cpu-mkldnn-conv-padding": Known(
        "float32 conv on the CPU picks its algorithm by shape (at::native::ConvParams::use_mkldnn): with a "
        "batch of 2 or more (or groups, a kernel over 3x3, a large input, see _cpu_conv_uses_onednn) oneDNN "
        "treats zero padding as absent (a nan weight over padding adds nothing), while the other shapes (the "
        "slow_conv2d path) and every float64 conv multiply the zero (nan), as foo always does: the CPU's own "
        "result for one sample depends on the batch it is in. complex64 convs run as float32 ones there, and "
        "do the same",
        ("conv1d", "conv2d"), ("values differ",),
        ("conv2d", "dict(x=torch.ones(2, 1, 1, 1), w=torch.tensor([[[[math.nan, 1.0], [1.0, 1.0]]]]), "
                   "bias=None, stride=1, padding=1, dilation=1, groups=1)"),
        lambda a: _nonfinite(a, "w") and a["x"].dtype in (torch.float32, torch.complex64)
        and _cpu_conv_uses_onednn(a)),
    "cpu-norm-overflow-moments": Known(
        "layer_norm/group_norm of float32 rows whose variance overflows (|x| > 1.8e19): the CPU's Welford/"
        "lane-combine moments give nan or 0 by path, row length and SIMD width (layer_norm of [3.4e38, -0.3] is "
        "nan, group_norm of the same first values in a 9-element row 0); foo gives nan when a difference of two "
        "values or the mean's square overflows ([3e38, -3e38, 1], [3.4e38, -0.3]) and 0 when only squares do "
        "([1e20, -1e20, 1]), the CPU's answers for short rows",
        ("layer_norm", "group_norm"), ("differ",),
        ("group_norm", "dict(x=torch.tensor([3.4028234663852886e+38, -0.293428897857666, -2.1787893772125244, "
                       "0.5684312582015991, -1.0845223665237427, -1.3985954523086548, 0.40334683656692505, "
                       "0.8380263447761536, -0.7192575931549072]).reshape(1, 3, 3), g=1, w=None, b=None, eps=1e-5)"),
        lambda a: _huge(a, "x")),
    "cpu-norm-float32-accumulation": Known(
        "float32 2-norm of thousands of values on the CPU drifts (5787 copies of 1.5409961: CPU 117.22959, exact "
        "117.22716 = sqrt(5787) * 1.5409961); foo's multi-lane sum gives the exact value",
        ("norm", "vector_norm"), ("values differ",),
        ("norm", "dict(x=torch.tensor([1.5409960746765137]).as_strided((5787,), (0,), 0), dim=None, keepdim=False, "
                 "p=2)"),
        lambda a: isinstance(a.get("x"), torch.Tensor) and a["x"].dtype == torch.float32 and a["x"].numel() > 1000,
        some_cpus=True),  # within tolerance of foo's on a Zen 3 (AVX2)
    "cpu-batch-norm-eval-strided-params": Known(
        "batch_norm in evaluation with a non-contiguous weight or running_var on the CPU: its backward reads the "
        "running variance as 0 (x's gradient 1/sqrt(eps) = 316.2 where 1/sqrt(3.88) = 0.508 is right, and is "
        "what the CPU gives for the same values contiguous), and its forward with an inf weight gives inf where "
        "its contiguous path gives nan (0 * inf), as foo does for both layouts; a non-contiguous x likewise "
        "(x (4, 2) with strides (1, 4), weight [inf, -0.29]: CPU -inf in the element where its contiguous path and "
        "foo give nan)",
        ("batch_norm",), ("differ",),
        ("batch_norm", "dict(x=torch.tensor([[1.5409960746765137, -0.293428897857666]]), "
                       "rm=torch.tensor([1.5409960746765137, -0.293428897857666]), "
                       "rv=torch.tensor([3.881211996078491, 2.8322794437408447, 1.838531732559204]).as_strided((2,), "
                       "(2,), 0), w=None, b=None, train=False, mom=0.1, eps=1e-5)"),
        lambda a: not a["train"] and any(isinstance(a.get(k), torch.Tensor) and not a[k].is_contiguous()
                                         for k in ("x", "w", "b", "rm", "rv"))),
    "cpu-pow-scalar-exponent-by-length": Known(
        "float32 tensor ** a Python scalar beyond 2**24: the CPU's vectorized path (8 or more elements) rounds the "
        "exponent to float32, as foo does ((-1) ** (2**31 - 1) gives 1), its scalar path for shorter tensors "
        "keeps it a double (-1); the backward's b - 1 likewise",
        ("pow",), ("",), ("pow", "dict(a=torch.tensor([-1.0]), b=2**31 - 1)"),
        lambda a: isinstance(a.get("b"), (int, float)) and not isinstance(a.get("b"), bool) and abs(a["b"]) >= 2**24),
    "cpu-half-layer-norm-weight-grad": Known(
        "layer_norm's weight gradient in float16/bfloat16: the CPU's sum over rows loses precision in the half "
        "type (over 200 random [17, 16] float16 cases its largest error against float64 is 0.026, foo's 0.0055, "
        "summed in float32 and rounded once)",
        ("layer_norm",), ("gradient of w", "values differ"),
        ("layer_norm", "dict(x=torch.randn(17, 16, generator=torch.Generator().manual_seed(0)).half(), ns=(16,), "
                       "w=torch.randn(16, generator=torch.Generator().manual_seed(1000)).half(), b=None, eps=1e-5)"),
        lambda a: a["x"].dtype in (torch.float16, torch.bfloat16)),
    "cpu-half-layer-norm-fused-centering": Known(
        "float16/bfloat16 layer_norm on the CPU computes fma(x, rstd, -rstd * mean), which leaves the product's "
        "rounding error (-1.3e-5) where x equals the mean, so a constant row with an inf weight (or eps 0) gives "
        "-inf; its float32/float64 kernels and foo centre exactly (x - mean = 0) and give 0 * inf = nan",
        ("layer_norm",), ("values differ",),
        ("layer_norm", "dict(x=torch.tensor([[1.5390625]], dtype=torch.bfloat16), ns=(1,), "
                       "w=torch.tensor([math.inf], dtype=torch.bfloat16), b=None, eps=1e-5)"),
        lambda a: a["x"].dtype in (torch.float16, torch.bfloat16) and (_nonfinite(a, "w") or a["eps"] == 0)),
    "cpu-batch-norm-strided-float64": Known(
        "batch_norm training statistics on the CPU: float32 accumulation for contiguous input (overflowing "
        "like foo's where x*x > FLT_MAX), float64 for other layouts (finite): foo matches the contiguous path",
        ("batch_norm",), ("values differ",),
        ("batch_norm", "dict(x=torch.tensor([3.4e38, 0.0, -2.0]).as_strided((2, 1), (2, 2)), rm=None, rv=None, "
                       "w=None, b=None, train=True, mom=0.1, eps=1e-5)"),
        lambda a: _huge(a, "x")),
    "cpu-complex-product-path": Known(
        "complex products that overflow: the CPU's vectorised complex multiply rounds both products before "
        "subtracting (inf - inf = nan) while its scalar path (strided or broadcast operands), contracted to an "
        "fma, gives -inf; which path runs depends on the layout, so the CPU's own answer for one element "
        "changes with its neighbours' strides. foo runs complex addcmul through the CPU fallback, whose copies "
        "of non-dense inputs can change the path",
        ("addcmul",), ("differ",),
        ("addcmul", "dict(x=torch.zeros(20, dtype=torch.complex64)[::10], a=torch.tensor([1.541e30-2.1788e30j] * 2), "
                    "b=torch.tensor([1.541e30-2.1788e30j] * 2), v=1)"),
        lambda a: any(isinstance(v, torch.Tensor) and v.is_complex()
                      and bool((torch.view_as_real(v).abs() > 1e18).any()) for v in a.values())),
    "cpu-half-rsqrt-scalar-path": Known(
        "float16/bfloat16 rsqrt (and x ** -0.5, which is rsqrt) on the CPU rounds sqrt(x) to the half type and "
        "then 1 / that again in its scalar path (strided inputs, and the elements after the last full 64 of a "
        "contiguous run): 1 ulp off the correctly rounded value for about 30% of inputs (bfloat16 0.83984375: "
        "CPU 1.0859375, foo and the CPU's vector path 1.09375). vector_norm's gradient for p < 1 is built on it",
        ("vector_norm", "rsqrt"), ("differ",),
        ("vector_norm", "dict(x=torch.tensor([1.5390625, -0.29296875, -2.171875, 0.5703125, -1.0859375, -1.3984375, "
                        "0.404296875, 0.83984375, -0.71875, -0.404296875, -0.59765625, 0.181640625], "
                        "dtype=torch.bfloat16).reshape((3, 4)), dim=None, keepdim=False, p=0.5)"),
        lambda a: any(isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16) for v in a.values())),
}


def _explained(op: str, args: dict[str, Any], message: str) -> str | None:
    for table in (KNOWN, CPU_QUIRKS):
        for key, k in table.items():
            if k.explains(op, args, message):
                return key
    return None


@pytest.mark.fallback_ok  # the promise holds for ops that fall back too: they are fuzzed alike
@pytest.mark.parametrize("name", SELECTED)
@settings(parent=settings.get_profile(PROFILE))
@given(data=st.data())
def test_fuzz(name: str, data: st.DataObject) -> None:
    op = OPS[name]
    args = data.draw(SIGNATURES[op.sig](op.dtypes), label="args")
    assume(op.cpu_crash is None or not evaluate(op.cpu_crash, args))
    before = dict(args)  # check_case marks gradient inputs; the matchers see the drawn values
    try:
        check_case(op, args)
    except Mismatch as e:
        key = _explained(name, before, str(e))
        if key is None:
            raise
        event(f"known: {key}")
        note(f"explained by {key!r}")
        STATS.known[key] = STATS.known.get(key, 0) + 1


@pytest.fixture(autouse=True, scope="module")
def _report() -> Any:
    """With FOO_RS_FUZZ_REPORT=path, writes the run's counts there (for long runs)."""
    yield
    path = os.environ.get("FOO_RS_FUZZ_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump({"profile": PROFILE, "ops": len(SELECTED), "cases": STATS.cases, "cpu_raised": STATS.raised,
                       "known": STATS.known, "fallback_ops": STATS.fallback_ops}, f, indent=1, sort_keys=True)


@pytest.mark.fallback_ok
def test_known_defects_still_reproduce() -> None:
    """Each KNOWN / CPU_QUIRKS entry's repro still shows its difference; once fixed, remove it."""
    stale = []
    for key, k in {**KNOWN, **CPU_QUIRKS}.items():
        op, source = k.repro
        args = evaluate(source, {})
        try:
            check_case(OPS[op], dict(args))
        except Mismatch as e:
            assert k.explains(op, args, str(e)), f"{key}: its repro fails differently: {e}"
            continue
        if not k.some_cpus:
            stale.append(key)
    assert not stale, f"fixed (remove from KNOWN/CPU_QUIRKS): {stale}"


def test_op_table_is_consistent() -> None:
    """Every op names an existing signature and its expressions compile."""
    for op in OPS.values():
        assert op.sig in SIGNATURES, op.name
        for expr in (op.expr, op.bound, op.gbound, op.cpu_crash):
            if expr is not None:
                compile(expr, op.name, "eval")
        assert op.tol in ("ew", "acc", "acc_sqrt"), op.name
        assert op.dtypes, op.name
