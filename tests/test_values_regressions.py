"""Wrong values found by trying real code (issue 13), each pinned against the CPU backend: every
case here failed before its fix."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from helpers import FOO, assert_same, to_foo

SCALAR_OPS = {
    "mul": torch.mul, "div": torch.div, "add": torch.add, "sub": torch.sub, "remainder": torch.remainder,
    "floor_divide": torch.floor_divide, "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "rmul": lambda a, b: b * a, "rsub": lambda a, b: b - a, "rdiv": lambda a, b: b / a, "pow": torch.pow,
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scalar", [1e6, 1e-7, 0.1, 3.3333, 3.0, -65504.0 * 4])
@pytest.mark.parametrize("op", sorted(SCALAR_OPS))
@pytest.mark.parametrize("kind", ["python", "0-dim cpu", "0-dim foo"])
def test_reduced_float_with_inexact_scalar(dtype: torch.dtype, scalar: float, op: str, kind: str) -> None:
    # The CPU's mul and div kernels take a one-element second operand unrounded and compute in
    # float32 (float16 1e-5 * 1e6 is 10, not inf/nan); add, sub, pow, ... round it to the dtype.
    torch.manual_seed(0)
    x = torch.cat([torch.tensor([1e-5, 0.0, 3.0, -2.5e-3, 60000.0]), torch.randn(200) * 100]).to(dtype)
    s = {"python": scalar, "0-dim cpu": torch.tensor(scalar), "0-dim foo": torch.tensor(scalar)}[kind]
    fs = s.to(FOO) if kind == "0-dim foo" else s
    fn = SCALAR_OPS[op]
    try:
        want = fn(x, s)
    except RuntimeError as e:  # e.g. pow: the exponent overflows half
        with pytest.raises(RuntimeError, match=re.escape(str(e).splitlines()[0][:40])):
            fn(x.to(FOO), fs)
        return
    assert_same(fn(x.to(FOO), fs), want, atol=0, rtol=0)


@pytest.mark.parametrize("scale", [1.0, 1e5, 1e8, -1e8])
@pytest.mark.parametrize("shape,dim", [((2, 3), 1), ((3, 5, 4), 1), ((4, 700), 1), ((700, 3), 0)])
def test_log_softmax_of_large_logits(scale: float, shape: tuple[int, ...], dim: int) -> None:
    # (v - max) - log(sum), as the CPU: v - (max + log(sum)) lost log(sum) near 1e8.
    torch.manual_seed(0)
    x = torch.randn(shape) * 8 + scale
    assert_same(F.log_softmax(x.to(FOO), dim), F.log_softmax(x, dim), atol=1e-5, rtol=1e-6)
    target = torch.randint(0, shape[dim], (shape[0],)) if dim == 1 else None
    if target is not None and len(shape) == 2:
        assert_same(F.cross_entropy(x.to(FOO), target.to(FOO)), F.cross_entropy(x, target), atol=1e-5, rtol=1e-6)


def test_log_softmax_near_1e8_is_minus_log3() -> None:
    x = torch.full((1, 3), 1e8, device=FOO)
    torch.testing.assert_close(F.log_softmax(x, 1).cpu(), torch.full((1, 3), -1.0986123))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_atanh_near_one(dtype: torch.dtype) -> None:
    x = torch.tensor([-0.999999, 0.999999, -0.9999, 0.5, -1.0, 1.0, 0.0, -0.0, 1e-8], dtype=dtype)
    assert_same(torch.atanh(x.to(FOO)), torch.atanh(x), atol=0, rtol=2e-7 if dtype == torch.float32 else 1e-15)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_acosh_below_one_is_nan(dtype: torch.dtype) -> None:
    # libm's acosh branches on |x|: acosh(-100) was -2.208.
    x = torch.tensor([-100.0, -2.0, -1.0, 0.0, 0.5, 1.0, 2.0, 1e30, float("inf"), float("-inf"), float("nan")],
                     dtype=dtype)
    assert_same(torch.acosh(x.to(FOO)), torch.acosh(x), rtol=2e-7 if dtype == torch.float32 else 1e-15, atol=0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
@pytest.mark.parametrize("bounds", [(-1.5, 2.5), (1.5, 2.5), (-1.5, 200.0), (-1, 2)])
def test_hardtanh_of_integers_keeps_dtype(dtype: torch.dtype, bounds: tuple[float, float]) -> None:
    x = torch.tensor([-3, 0, 5, 1, 2]).to(dtype)
    assert_same(F.hardtanh(x.to(FOO), *bounds), F.hardtanh(x, *bounds), atol=0, rtol=0)
    y, fy = x.clone(), x.to(FOO)
    F.hardtanh_(y, *bounds)
    F.hardtanh_(fy, *bounds)
    assert_same(fy, y, atol=0, rtol=0)


@pytest.mark.fallback_ok  # complex arithmetic runs on the CPU through the fallback
@pytest.mark.parametrize("make", [
    lambda z: 2 - z, lambda z: torch.tensor(2.0) * z, lambda z: 2 + z, lambda z: z / 2, lambda z: 2 / z,
    lambda z: torch.tensor(1.5) + z, lambda z: torch.tensor(3.0) - z, lambda z: z * 1j,
])
def test_complex_arithmetic_with_cpu_scalars_stays_on_foo(make) -> None:
    z = torch.tensor([1 + 2j, 3 - 1j, -0.5j])
    assert_same(make(z.to(FOO)), make(z))


@pytest.mark.parametrize("row", [
    [float("inf"), 1.0, 2.0], [float("-inf"), 1.0, 2.0], [float("nan"), 1.0, 2.0], [3e38, 3e38, 3e38],
    [1e20, -1e20, 1.0], [1.0, 2.0, 4.0], [3e38, -3e38, 1.0], [-3e38, 1.0, 3e38], [3.4028234663852886e38, -0.3, 1.0],
    [1e20, 3e20, 2e20],
])
def test_layer_norm_of_rows_with_inf_nan_or_overflow(row: list[float]) -> None:
    # A nan variance stays nan (the whole row is nan), as the CPU's std::max(var, 0) leaves it. An
    # overflowing variance gives 0 where only squares overflow ([1e20, -1e20, 1]) and nan where a
    # difference of two values does ([3e38, -3e38, 1] was 0 on foo), as the CPU's Welford updates.
    x = torch.tensor([row, [1.0, 2.0, 3.0]])
    w, b = torch.tensor([1.0, 2.0, 0.5]), torch.tensor([0.0, 1.0, -1.0])
    assert_same(F.layer_norm(x.to(FOO), (3,), w.to(FOO), b.to(FOO)), F.layer_norm(x, (3,), w, b))
    g = x.view(2, 3, 1)
    assert_same(F.group_norm(g.to(FOO), 1, w.to(FOO), b.to(FOO)), F.group_norm(g, 1, w, b))


def test_norm_gradients_with_an_inf_weight() -> None:
    # dx follows the CPU's formula term by term, so an inf weight gives its nan (foo gave -inf).
    x, w = torch.tensor([[1.5409960746765137, -0.293428897857666, -2.1787893772125244]]), torch.tensor(
        [math.inf, -0.293428897857666, -2.1787893772125244])
    for fn in (lambda a, ww: F.layer_norm(a, (3,), ww), lambda a, ww: F.group_norm(a.view(1, 3, 1), 1, ww)):
        grads = []
        for dev in ("cpu", FOO):
            a, ww = x.to(dev).clone().requires_grad_(), w.to(dev).clone().requires_grad_()
            fn(a, ww).sum().backward()
            grads.append((a.grad, ww.grad))
        assert_same(grads[1], grads[0])


@pytest.mark.fallback_ok  # complex pow runs on the CPU through the fallback
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
@pytest.mark.parametrize("exponent", [1e300, -1e300, 1e39])
def test_pow_float32_takes_a_huge_scalar_exponent(dtype: torch.dtype, exponent: float) -> None:
    # The CPU takes a float32/complex64 tensor's scalar exponent as a double; foo raised
    # "value cannot be converted to type float without overflow".
    x = torch.tensor([0.5, 2.0, 1.0, 0.0]).to(dtype)
    assert_same(x.to(FOO) ** exponent, x**exponent)


def test_pow_scalar_base_is_contiguous_and_refuses_bool() -> None:
    # 2 ** t: the CPU's result is contiguous whatever t's layout (foo followed t's strides).
    t = torch.arange(6.0).view(2, 3).t()
    assert_same(2 ** t.to(FOO), 2**t, check_stride=True)
    for base in (False, True):
        with pytest.raises(NotImplementedError, match="pow"):
            base ** torch.tensor(False, device=FOO)


def test_narrow_copy_dim_past_the_end_is_a_runtime_error() -> None:
    # The CPU's kernel refuses a dim past the end with RuntimeError and wraps negative ones
    # (IndexError); ATen's composite gave IndexError for both.
    x = torch.ones(10, 5, 20)
    for dim, error in ((3, RuntimeError), (-4, IndexError)):
        with pytest.raises(error):
            torch.narrow_copy(x, dim, 0, 0)
        with pytest.raises(error):
            torch.narrow_copy(x.to(FOO), dim, 0, 0)
    assert_same(torch.narrow_copy(x.to(FOO), 1, 2, 2), torch.narrow_copy(x, 1, 2, 2), check_stride=True)


@pytest.mark.fallback_ok  # LAPACK's least squares and solve run on the CPU through the fallback
def test_fallback_results_keep_the_cpus_layout_and_out_tensors() -> None:
    torch.manual_seed(0)
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    # lstsq's solution is the first 3 rows of a column-major 4 x 3 buffer: strides (1, 4).
    want = torch.linalg.lstsq(a, b, driver="gels").solution
    got = torch.linalg.lstsq(a.to(FOO), b.to(FOO), driver="gels").solution
    assert_same(got, want, check_stride=True)
    # A non-contiguous out= receives the result (it was replaced by a copy on the way to the CPU).
    a, b = torch.randn(5, 5), torch.randn(5, 1)
    out = torch.full((10, 2), math.nan, device=FOO).as_strided((5, 1), (2, 2), 1)
    torch.linalg.solve(a.to(FOO), b.to(FOO), out=out)
    assert_same(out, torch.linalg.solve(a, b))


@pytest.mark.fallback_ok  # the LU-based linear algebra runs on the CPU through the fallback
@pytest.mark.parametrize("fn", [
    torch.linalg.det, lambda a: torch.linalg.slogdet(a)[1], torch.logdet,
    lambda a: torch.linalg.solve(a, torch.ones(a.shape[:-1], dtype=a.dtype, device=a.device)),
])
@pytest.mark.parametrize("layout", ["stepped", "transposed", "contiguous"])
def test_lu_based_gradients_of_noncontiguous_inputs(fn, layout: str) -> None:
    # ATen factors A^T when A is contiguous and A otherwise, and its backward reads the factors
    # by the same rule: a stepped A must reach the CPU still non-contiguous.
    torch.manual_seed(0)
    base = torch.randn(3, 5, 10, dtype=torch.float64) + 4 * torch.eye(5, 10, dtype=torch.float64)
    a = {"stepped": base[..., ::2], "transposed": base[..., :5].mT, "contiguous": base[..., :5].contiguous()}[layout]
    a = a.abs() if fn is torch.logdet else a  # logdet needs a positive determinant
    c, f = a.detach().requires_grad_(), to_foo(a.detach()).requires_grad_()
    assert f.stride() == c.stride()
    fn(c).sum().backward()
    fn(f).sum().backward()
    assert_same(f.grad, c.grad, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("exponent", [2.0, 3.0, -2.0, 0.5, -0.5, -1.0, 1.0, 0.0, 1.7, 3])
def test_pow_with_a_scalar_exponent_has_the_cpus_bits(dtype: torch.dtype, exponent: float) -> None:
    # The CPU computes x**2, x**3, x**-2 as products in the tensor's dtype and x**0.5, x**-0.5,
    # x**-1 as sqrt, rsqrt, reciprocal; pow() itself differed from them in the last bit. (foo's
    # sqrt is correctly rounded; the CPU's vectorized one is not always, so 0.5 is compared with
    # the default tolerance.)
    torch.manual_seed(0)
    x = torch.cat([torch.randn(5000) * 100, torch.tensor([0.0, -0.0, float("inf"), float("nan"), 1e-30])]).to(dtype)
    tol = {"atol": 0, "rtol": 0} if exponent in (2.0, 3.0, -2.0, -0.5, -1.0, 1.0, 0.0) else {}
    assert_same(x.to(FOO) ** exponent, x**exponent, **tol)
    y, fy = x.clone(), x.to(FOO)
    y.pow_(exponent)
    fy.pow_(exponent)
    assert_same(fy, y, **tol)
    out = torch.empty(0, dtype=dtype, device=FOO)
    torch.pow(x.to(FOO), exponent, out=out)
    assert_same(out, x**exponent, **tol)


@pytest.mark.parametrize(
    "op", [torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum, torch.tanh, torch.neg,
           torch.sigmoid, torch.relu, torch.abs, torch.square]
)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["dense", "rows", "row-constant", "constant-first", "scalar", "in-place", "long"])
def test_reduced_float_elementwise_rounds_as_the_cpu(op: object, dtype: torch.dtype, layout: str) -> None:
    # foo's elementwise loops widen bfloat16 and float16 and round float32 back in selects (not
    # half's branches), float16's dense runs in float32 blocks with vcvtph2ps/vcvtps2ph where the
    # CPU has AVX-512: the same bits as the CPU's for ties, overflow to inf, subnormals, signed
    # zeros, inf and NaN, in the vector body and its tail (1003 elements), in rows of a wider
    # tensor, with an input constant along the rows (either side), in place, and over runs longer
    # than a block and split across threads ("long").
    torch.manual_seed(0)
    edges = torch.tensor([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 3.3895e38, -3.3895e38, 1e-39, -1e-39, 0.0, -0.0,
                          float("inf"), float("-inf"), float("nan"), 2**-133, 255.5, -0.0, 65504.0, 65520.0,
                          6.1e-5, 5.96e-8, 2.98e-8, 1.0 + 2**-11, 1.0 + 3 * 2**-11, 7e-6, -3e-7])
    n = 100_003 if layout == "long" else 1003
    x = torch.cat([edges, torch.randn(n - 24) * 1000]).to(dtype)
    y = torch.cat([edges.flip(0), torch.randn(n - 24)]).to(dtype)
    if layout == "rows":  # [24, 1003] columns 5.. of [24, 1008]: rows of dense runs
        x = torch.cat([x.roll(k).reshape(1, -1) for k in range(24)])
        x = torch.cat([torch.ones(24, 5, dtype=dtype), x], 1)[:, 5:]
        y = torch.cat([torch.ones(24, 5, dtype=dtype), y.expand(24, -1)], 1)[:, 5:]
    elif layout in ("row-constant", "constant-first"):  # [24, 1003] with a [24, 1] operand
        x = torch.cat([x.roll(k).reshape(1, -1) for k in range(24)])
        y = edges.reshape(24, 1).to(dtype)
    elif layout == "scalar":
        y = edges[13].to(dtype)
    binary = op in (torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum)
    args = (x, y) if binary else (x,)
    if binary and layout == "constant-first":
        args = (y, x)
    want = op(*args)
    if layout == "in-place":
        got = args[0].to(FOO)
        rest = [a.to(FOO) for a in args[1:]]
        in_place = getattr(torch.Tensor, op.__name__ + "_", None)  # no maximum_: out= itself
        in_place(got, *rest) if in_place else op(got, *rest, out=got)
    else:
        got = op(*[a.to(FOO) for a in args])
    assert_same(got, want, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.bool, torch.complex64, torch.float16])
@pytest.mark.parametrize("exponent", [0, 1, 0.0, 1.0, True, False, 1j * 0])
def test_pow_with_exponent_zero_or_one_fills_or_copies(dtype: torch.dtype, exponent: object) -> None:
    # ATen fills ones for an exponent of 0 and copies the base for 1, before any kernel (foo ran
    # pow() per element: autograd's backward of x ** 2 computes x ** 1). Same values and dtype.
    x = torch.tensor([0, 1, 2, 3, 250]).to(dtype)
    if dtype.is_floating_point or dtype.is_complex:
        x = torch.tensor([0.0, -0.0, math.inf, math.nan, 2.5]).to(dtype)
    try:
        want = x**exponent
    except RuntimeError as e:
        with pytest.raises(type(e)):
            to_foo(x) ** exponent
        return
    if want.dtype == torch.complex32:  # float16 ** 0j: foo refuses complex32 (UNSUPPORTED_DTYPES)
        with pytest.raises(NotImplementedError, match="ComplexHalf"):
            to_foo(x) ** exponent
        return
    got = to_foo(x) ** exponent
    assert got.dtype == want.dtype
    assert_same(got, want, atol=0, rtol=0)
    out = torch.empty(0, dtype=want.dtype, device=FOO)
    torch.pow(to_foo(x), exponent, out=out)
    assert_same(out, want, atol=0, rtol=0)
    if want.dtype == x.dtype:
        y = to_foo(x)
        y.pow_(exponent)
        assert_same(y, want, atol=0, rtol=0)


@pytest.mark.parametrize("ord", [2, 1, 2.5, math.inf, -math.inf, 0])
@pytest.mark.parametrize("shape,dim", [((3, 1), 1), ((1,), None), ((), None), ((2, 1, 3), 1)])
def test_vector_norm_of_one_element_is_its_magnitude(ord: float, shape: tuple[int, ...], dim: int | None) -> None:
    # The CPU gives |x| for a norm over one element: float32 1.5e30 stays finite (foo squared it: inf),
    # 1e-30 stays nonzero (its square underflowed to 0).
    values = torch.tensor([1.5e30, -1e-30, 3.0, -0.0, math.inf, math.nan]).repeat(2)
    x = values[: max(1, math.prod(shape))].reshape(shape)
    assert_same(torch.linalg.vector_norm(x.to(FOO), ord, dim), torch.linalg.vector_norm(x, ord, dim))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("value", [1.0, 0.37])
@pytest.mark.parametrize("layout", ["dense", "broadcast", "in-place"])
def test_addcmul_and_addcdiv_have_the_cpus_bits(dtype: torch.dtype, value: float, layout: str) -> None:
    # addcmul is fma(value * y, z, x) on the CPU (foo's separate roundings differed in 16-24% of
    # float32 elements; inf + (-huge) gave nan, not inf); addcdiv is x + (value * y) / z (value 0
    # over a subnormal z gave 0 * inf = nan, not x).
    torch.manual_seed(0)
    x, y, z = (torch.randn(3, 20000) * 3).to(dtype)
    if layout == "broadcast":
        x, y, z = x[:50].view(50, 1), y[:40], z[:40]
    for fn in (torch.addcmul, torch.addcdiv):
        if layout == "in-place":
            want, got = x.clone(), x.to(FOO)
            getattr(want, fn.__name__ + "_")(y, z, value=value)
            getattr(got, fn.__name__ + "_")(y.to(FOO), z.to(FOO), value=value)
        else:
            want, got = fn(x, y, z, value=value), fn(x.to(FOO), y.to(FOO), z.to(FOO), value=value)
        assert_same(got, want, atol=0, rtol=0)
    edge = [torch.tensor([v]) for v in (math.inf, 1.5409960746765137, -3.4028234663852886e38)]
    assert_same(torch.addcmul(*[t.to(FOO) for t in edge]), torch.addcmul(*edge))
    tiny = [torch.tensor([1.5]), torch.tensor([1.5]), torch.tensor([1.401298464324817e-45])]
    assert_same(torch.addcdiv(*[t.to(FOO) for t in tiny], value=0.0), torch.addcdiv(*tiny, value=0.0))


@pytest.mark.fallback_ok  # complex mul_ (the addmm case) and complex elu run on the CPU through the fallback
def test_empty_contractions_and_empty_inputs_follow_the_cpus_checks() -> None:
    # An empty contraction is zeros (bmm/mm, bool included) or beta * self computed as a copy then
    # mul_ (addmm: bool self with beta 1 raises the CPU's cast error; complex nan+0j becomes
    # nan+nanj); an empty input reaches the kernel's dtype checks like a full one.
    def outcome(fn, dev):
        try:
            return fn(dev).cpu()
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            return type(e)

    b = dict(dtype=torch.bool)
    cases = [
        lambda d: torch.bmm(torch.zeros(1, 2, 0, **b, device=d), torch.zeros(1, 0, 2, **b, device=d)),
        lambda d: torch.zeros(0, **b, device=d) @ torch.zeros(0, 1, **b, device=d),
        lambda d: torch.addmm(torch.zeros(1, 1, **b, device=d), torch.zeros(1, 0, **b, device=d),
                              torch.zeros(0, 1, **b, device=d), beta=0),
        lambda d: torch.addmm(torch.zeros(1, 1, **b, device=d), torch.zeros(1, 0, **b, device=d),
                              torch.zeros(0, 1, **b, device=d), beta=1),
        lambda d: torch.addmm(torch.tensor([[complex(math.nan, 0)]], device=d),
                              torch.zeros(1, 0, dtype=torch.complex64, device=d),
                              torch.zeros(0, 1, dtype=torch.complex64, device=d)),
        lambda d: torch.zeros(1, **b, device=d).expand(2).neg_(),
        lambda d: F.elu(torch.zeros(0, dtype=torch.complex64, device=d)),
        lambda d: torch.bitwise_not(torch.zeros(0, device=d)),
        lambda d: F.group_norm(torch.zeros(0, 1, dtype=torch.complex64, device=d), 1),
    ]
    for fn in cases:
        want, got = outcome(fn, "cpu"), outcome(fn, FOO)
        if isinstance(want, torch.Tensor):
            assert isinstance(got, torch.Tensor), got
            torch.testing.assert_close(got, want, equal_nan=True)
        else:
            assert got is want


def test_index_add_into_an_empty_tensor_reads_no_index() -> None:
    # With more than one dimension, the CPU returns before reading the indices when self or the
    # index is empty: an index past an empty self is no error (foo raised). 1-d self still checks.
    for dev in ("cpu", FOO):
        out = torch.zeros(0, 4, device=dev).index_add(0, torch.tensor([0], device=dev), torch.ones(1, 4, device=dev))
        assert out.shape == (0, 4)
    for dev in ("cpu", FOO):
        with pytest.raises(IndexError):
            torch.zeros(0, device=dev).index_add(0, torch.tensor([0], device=dev), torch.ones(1, device=dev))


def test_pow_scalar_exponent_is_laid_out_as_a_unary_op() -> None:
    # ATen lays out pow(tensor, scalar) as a unary op over the base: size-1 dims of an expanded
    # rank-26 input get stride 1 (foo laid it out as a binary op: stride 3, as for t + 1.0).
    x = torch.randn([1] * 25 + [3]).expand([1] * 25 + [3]).transpose(0, 25)
    for e in (2.5, 3, 1.7):
        want = x.pow(e)
        got = to_foo(x).pow(e)
        assert got.stride() == want.stride()
        assert_same(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(37, 5), (4, 5, 30, 30), (3, 5, 100), (1000, 3)])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_nll_loss_reductions_have_the_cpus_bits(dtype: torch.dtype, shape: tuple[int, ...], weighted: bool,
                                                reduction: str) -> None:
    # The CPU sums nll_loss's terms in a cascade of partial sums in the input's dtype (bfloat16
    # adds in bfloat16); foo summed in float64 (bfloat16 results 2.7% apart on a 4x5x30x30 input).
    torch.manual_seed(0)
    x = torch.randn(shape).to(dtype)
    target = torch.randint(0, shape[1], (shape[0], *shape[2:]))
    target[0] = -100  # ignored
    w = torch.rand(shape[1]).to(dtype) if weighted else None
    want = F.nll_loss(x, target, weight=w, reduction=reduction)
    got = F.nll_loss(x.to(FOO), target.to(FOO), weight=None if w is None else w.to(FOO), reduction=reduction)
    assert_same(got, want, atol=0, rtol=0)


@pytest.mark.parametrize("op", ["remainder", "fmod", "bitwise_and", "hypot", "maximum"])
def test_unsupported_dtype_and_mismatched_shapes_raise_what_the_cpu_raises(op: str) -> None:
    # The CPU's kernels check the dtype after the shapes (a complex remainder of shapes 3 and 0
    # raises the shape's RuntimeError; foo raised NotImplementedError); maximum's meta function
    # checks complex inputs first (TypeError).
    fn = getattr(torch, op)
    a, b = torch.ones(3, dtype=torch.complex64), torch.ones(0, dtype=torch.complex64)
    with pytest.raises(Exception) as want:
        fn(a, b)
    with pytest.raises(type(want.value)):
        fn(a.to(FOO), b.to(FOO))


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("width", [1, 15, 16, 17, 63, 65, 200])
@pytest.mark.parametrize("in_place", [False, True])
def test_softmax_rows_of_any_width(log: bool, width: int, in_place: bool) -> None:
    # A row's remainder past whole 16-lane chunks is done as one more chunk (overlapping the
    # previous one, or padded); in place (the native attention's fast path writes softmax into
    # its input), an overlapping chunk re-read outputs as inputs (errors up to 0.05).
    torch.manual_seed(0)
    x = torch.randn(37, width) * 4
    x[3, :] = float("-inf")
    x[5, width // 2] = float("inf")
    op = torch.ops.aten._log_softmax if log else torch.ops.aten._softmax
    want = op(x, -1, False)
    xf = x.to(FOO)
    if in_place:
        got = op.out(xf, -1, False, out=xf)
        assert got.data_ptr() == xf.data_ptr()
    else:
        got = op(xf, -1, False)
    assert_same(got, want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_rounds_as_the_cpu(dtype: torch.dtype, reduction: str, weighted: bool) -> None:
    # The CPU computes each operation of the loss and of its gradient in the storage type
    # (rounding half intermediates), multiplies the weight in afterwards and divides by numel;
    # foo kept float32 and folded weight and 1/numel together (float16 gradients 1-2 ulp off).
    torch.manual_seed(0)
    p = torch.rand(64, 5).clamp(1e-3, 1 - 1e-3).to(dtype)
    p[0, :2] = torch.tensor([0.0, 1.0])  # log clamps at -100; in half, 1e-12 rounds to 0
    y = torch.rand(64, 5).to(dtype)
    w = torch.rand(64, 5).to(dtype) * 3 if weighted else None
    pc, pf = p.clone().requires_grad_(), p.to(FOO).requires_grad_()
    want = F.binary_cross_entropy(pc, y, w, reduction=reduction)
    got = F.binary_cross_entropy(pf, y.to(FOO), None if w is None else w.to(FOO), reduction=reduction)
    if reduction == "none":
        assert_same(got, want, atol=0, rtol=0)
    else:  # the CPU sums in its own cascade
        assert_same(got, want)
    (gw,) = torch.autograd.grad(want.sum(), pc)
    (gg,) = torch.autograd.grad(got.sum(), pf)
    assert_same(gg, gw, atol=0, rtol=0)


def test_binary_cross_entropy_checks_the_target() -> None:
    x, t = torch.tensor([0.5]), torch.tensor([1.5])
    with pytest.raises(RuntimeError, match="all elements of target should be between 0 and 1"):
        F.binary_cross_entropy(x, t)
    with pytest.raises(RuntimeError, match="all elements of target should be between 0 and 1"):
        F.binary_cross_entropy(x.to(FOO), t.to(FOO))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("shapes", [((3,), (3,)), ((4, 2, 3), (4, 3, 5)), ((1, 2, 3), (1, 3, 2))])
def test_complex_products_with_inf_are_the_textbook_sums(dtype: torch.dtype, shapes) -> None:
    # gemm's complex kernel multiplies every sum by alpha = 1 + 0i, which turned inf - inf i into
    # nan + nan i; foo now sums the textbook products as the CPU's dot and bmm do (the CPU's mm
    # calls BLAS, which scales an operand by alpha first: tests/test_fuzz.py cpu-blas-alpha-first).
    torch.manual_seed(0)
    a, b = torch.randn(*shapes[0], dtype=dtype), torch.randn(*shapes[1], dtype=dtype)
    b.view(-1)[0] = complex(math.inf, 0)
    want = a @ b if a.dim() == 1 else torch.stack([x @ y for x, y in zip(a, b)])
    got = (a.to(FOO) @ b.to(FOO)).cpu()
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
    fin = want.isfinite()
    torch.testing.assert_close(got[fin], want[fin])


@pytest.mark.parametrize("n", [1, 4, 16, 17, 32])
def test_bfloat16_products_with_subnormals_follow_the_cpus_size_rule(n: int) -> None:
    # The CPU widens bfloat16 products of at most 16*16*16 multiply-adds (inf * 1e-40 = inf) and
    # hands larger ones to oneDNN, whose BF16 instructions read subnormals as zero (nan); foo's
    # AVX512-BF16 kernel read them as zero at every size. Where the CPU lacks BF16 instructions
    # both widen.
    a, b = torch.randn(n, n).bfloat16(), torch.randn(n, n).bfloat16()
    a[0, 0], b[0, 0] = math.inf, 9.18e-41
    want = a @ b
    got = (a.to(FOO) @ b.to(FOO)).cpu()
    assert got[0, 0].isnan() == want[0, 0].isnan()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_addmm_with_alpha_zero_adds_zero_times_the_product(dtype: torch.dtype) -> None:
    # The CPU's half-type kernel computes beta * c + alpha * sum: an overflowing sum with alpha 0
    # is nan there; foo had skipped the product.
    c, a = torch.tensor([[1.5, -0.25]], dtype=dtype), torch.tensor([[1.5]], dtype=dtype)
    b = torch.tensor([[3.3e38 if dtype == torch.bfloat16 else 6e4, 2.0]], dtype=dtype)
    want = torch.addmm(c, a, b, alpha=0.0)
    got = torch.addmm(c.to(FOO), a.to(FOO), b.to(FOO), alpha=0.0)
    assert_same(got, want, atol=0, rtol=0)


# complex64: self * beta is complex multiplication, which runs through the CPU fallback.
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32,
                                   pytest.param(torch.complex64, marks=pytest.mark.fallback_ok)])
def test_mv_of_an_empty_matrix(dtype: torch.dtype) -> None:
    # As the CPU's addmv: an empty matrix gives zeros (beta 0) or self * beta before any dtype
    # check, so bool works there; foo raised for bool.
    m, v, s = torch.zeros(2, 0, dtype=dtype), torch.zeros(0, dtype=dtype), torch.ones(2, dtype=dtype)
    assert_same(torch.mv(m.to(FOO), v.to(FOO)), torch.mv(m, v))
    assert_same(torch.addmv(s.to(FOO), m.to(FOO), v.to(FOO)), torch.addmv(s, m, v))
    assert_same(torch.zeros(0, dtype=dtype, device=FOO) @ torch.zeros(1, 0, 1, dtype=dtype, device=FOO),
                torch.zeros(0, dtype=dtype) @ torch.zeros(1, 0, 1, dtype=dtype))
    if dtype == torch.bool:
        with pytest.raises(NotImplementedError, match="addmv_impl_cpu"):
            torch.mv(torch.zeros(2, 1, dtype=dtype, device=FOO), torch.zeros(1, dtype=dtype, device=FOO))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("affine", [False, True])
def test_half_batch_norm_statistics_round_as_the_cpus(dtype: torch.dtype, affine: bool) -> None:
    # With parameters of the input's dtype the CPU keeps its batch statistics in that dtype:
    # bfloat16 rounds the mean, the sum of squares, the variance and invstd (and updates the
    # running statistics in bfloat16 arithmetic); float16 rounds only the saved mean and invstd.
    # foo kept float32 statistics: bfloat16 outputs were up to 8% off ([2.0, 2.203125]: -1.0
    # against the CPU's -0.92).
    torch.manual_seed(0)
    x = (torch.randn(8, 300, 17) * 3 + 2).to(dtype)
    x[:, 0, 0], x[:, 0, 1:] = 2.0, 2.203125
    w, b = (torch.rand(300).to(dtype), torch.rand(300).to(dtype)) if affine else (None, None)
    rm, rv = torch.rand(300).to(dtype), torch.rand(300).to(dtype)
    rmf, rvf = rm.to(FOO), rv.to(FOO)
    want = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
    got = torch.ops.aten.native_batch_norm(x.to(FOO), to_foo(w), to_foo(b), rmf, rvf, True, 0.1, 1e-5)
    for g, c in zip(got, want):
        assert_same(g, c, atol=0, rtol=0)
    assert_same(rmf, rm, atol=0, rtol=0)
    assert_same(rvf, rv, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_lerp_is_the_cpus_fused_form(dtype: torch.dtype) -> None:
    # The CPU's lerp_vec: fma(w, end - start, start) for |w| < 0.5, else fma(w - 1, end - start,
    # end), and a Scalar weight stays in float32 for half types; foo rounded twice and rounded
    # the weight to half (55% of bfloat16 results with weight 0.9401 differed, float32 ones near a
    # cancellation by 5e-5 relative).
    torch.manual_seed(0)
    a, b = (torch.randn(4099) * 1000).to(dtype), (torch.randn(4099) * 1000).to(dtype)
    w = torch.rand(4099).to(dtype)
    assert_same(torch.lerp(a.to(FOO), b.to(FOO), w.to(FOO)), torch.lerp(a, b, w), atol=0, rtol=0)
    assert_same(torch.lerp(a.to(FOO)[::3], b.to(FOO)[::3], w.to(FOO)[::3]), torch.lerp(a[::3], b[::3], w[::3]),
                atol=0, rtol=0)
    for weight in (0.1, 0.9401, -0.3, 1.7):
        assert_same(torch.lerp(a.to(FOO), b.to(FOO), weight), torch.lerp(a, b, weight), atol=0, rtol=0)
        x, xf = a.clone(), a.to(FOO)
        torch._foreach_lerp_([x], [b], weight)
        torch._foreach_lerp_([xf], [b.to(FOO)], weight)
        assert_same(xf, x, atol=0, rtol=0)


@pytest.mark.parametrize(("shape", "dim", "index"), [((0, 1), 1, [1]), ((0, 3), 1, [-1]), ((2, 0), 0, [0, 2]),
                                                     ((0, 2, 2), 2, [2]), ((0, 1), 1, [0]), ((3, 0), 0, [1])])
def test_index_select_checks_indices_of_an_empty_self(shape, dim: int, index: list[int]) -> None:
    # The CPU checks the indices against an empty self of rank 2 and up; foo returned the empty
    # result unchecked.
    x, i = torch.zeros(shape), torch.tensor(index)
    try:
        want = torch.index_select(x, dim, i)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=re.escape(str(e))):
            torch.index_select(x.to(FOO), dim, i.to(FOO))
    else:
        assert_same(torch.index_select(x.to(FOO), dim, i.to(FOO)), want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_loss_rounds_as_the_cpu(dtype: torch.dtype, reduction: str) -> None:
    # The CPU rounds the difference to the storage type before squaring it, and its backward
    # rounds every operation (2/numel included); foo kept float32 (half results 1 ulp off).
    torch.manual_seed(0)
    a, b = torch.randn(500).to(dtype), torch.randn(500).to(dtype)
    ac, af = a.clone().requires_grad_(), a.to(FOO).requires_grad_()
    want = F.mse_loss(ac, b, reduction=reduction)
    got = F.mse_loss(af, b.to(FOO), reduction=reduction)
    assert_same(got, want, **({"atol": 0, "rtol": 0} if reduction == "none" else {}))
    g = torch.randn_like(want)
    (gw,) = torch.autograd.grad(want, ac, g)
    (gg,) = torch.autograd.grad(got, af, g.to(FOO))
    assert_same(gg, gw, atol=0, rtol=0)


def test_complex_index_add_multiplies_by_a_unit_alpha() -> None:
    # The CPU multiplies the source by alpha = 1 + 0i, which turns nan + 0i into nan + nan i; foo
    # skipped a unit alpha.
    x = torch.tensor(complex(1.5, -0.25))
    src = torch.tensor(complex(math.nan, 0.0))
    i = torch.tensor([0])
    want = torch.index_add(x, 0, i, src, alpha=1)
    got = torch.index_add(x.to(FOO), 0, i.to(FOO), src.to(FOO), alpha=1)
    assert_same(got, want)
    assert got.cpu().imag.isnan().all()


@pytest.mark.parametrize(("shape", "dim", "index"), [((2, 3), 1, [5]), ((2, 3), 1, [-1]), ((1,) * 26, 1, [1]),
                                                     ((2, 3), 0, [5]), ((2, 3, 4), 2, [9]), ((3,), 0, [5])])
def test_index_select_out_of_range_error_class(shape, dim: int, index: list[int]) -> None:
    # The CPU's dim-1 kernel (self of rank 2 and up) raises RuntimeError naming the index; its
    # other paths IndexError. foo raised IndexError everywhere.
    x, i = torch.zeros(shape), torch.tensor(index)
    with pytest.raises((RuntimeError, IndexError)) as want:
        torch.index_select(x, dim, i)
    with pytest.raises(type(want.value), match=re.escape(str(want.value).split("\n")[0])):
        torch.index_select(x.to(FOO), dim, i.to(FOO))


@pytest.mark.parametrize(("base", "shape", "strides"), [
    ([1.5409961, -0.2934289, -2.1787894, 0.5684313, -1.0845224], (6, 19, 5), (0, 0, 1)),
    ([2.0, 0.5], (200, 2), (0, 1)),
    ([1.5, 0.75], (2, 150), (1, 0)),
])
def test_reduction_of_an_expanded_tensor_folds_in_the_cpus_order(base: list[float], shape, strides) -> None:
    # TensorIterator leaves broadcast dims where they are; foo sorted them innermost, so prod
    # multiplied each element by itself first: 2**200 * 0.5**200 = inf * 0 = nan (CPU 1.0), and
    # a product of 570 factors came out nan where the CPU's is 2e-25.
    b = torch.tensor(base)
    x = b.as_strided(shape, strides)
    xf = b.to(FOO).as_strided(shape, strides)
    for f in (torch.prod, torch.sum):
        want, got = f(x), f(xf)
        assert_same(got, want, rtol=1e-5 if f is torch.prod else 0, atol=0)
        assert got.isfinite().item() == want.isfinite().item()


def test_true_division_of_integers_follows_the_converted_inputs_layout() -> None:
    # Integer inputs of a float op are converted to float first on the CPU (dense strides), so the
    # result's layout follows the converted expanded input even when both dtypes agree.
    a = torch.tensor([1, -7, 4, -1]).reshape(2, 2)
    b = torch.tensor([1, -7, 4]).as_strided((1, 2, 2), (1, 0, 1), 1)
    for x, y in ((a, b), (b, a)):
        want, got = x / y, to_foo(x) / to_foo(y)
        assert got.stride() == want.stride()
        assert_same(got, want)


@pytest.mark.parametrize("op", [torch.minimum, torch.add, torch.ne, torch.atan2, torch.mul])
def test_mixed_dtype_result_follows_the_converted_inputs_layout(op) -> None:
    # The CPU converts an input of another dtype before ordering the output by the inputs'
    # strides, which gives an expanded input dense strides; foo ordered by the unconverted input
    # and returned a contiguous result where the CPU's strides are (2, 1, 2).
    a = torch.tensor([1.5, -0.25]).reshape(1, 2, 1)
    b = torch.tensor([1.5, -0.25, -2.0, 0.5], dtype=torch.float16).as_strided((1, 2, 3), (1, 0, 1), 1)
    af, bf = to_foo(a), to_foo(b)
    for x, y, xf, yf in ((a, b, af, bf), (b, a, bf, af)):
        want, got = op(x, y), op(xf, yf)
        assert got.stride() == want.stride()
        assert_same(got, want)


@pytest.mark.fallback_ok
def test_fallback_gives_the_cpu_kernel_the_inputs_strides() -> None:
    # elu's backward (a CPU fallback on foo) of nan is nan on the CPU's dense, vectorised path and
    # 1.0 on its strided one; the copy to the CPU made a strided input dense, so foo answered nan.
    base = torch.randn(64)
    base[0] = math.nan
    x = base.as_strided((2, 2, 2, 4), (32, 16, 8, 2)).requires_grad_()
    xf = to_foo(x)
    (want,) = torch.autograd.grad(F.elu(x, alpha=0.5).sum(), x)
    (got,) = torch.autograd.grad(F.elu(xf, alpha=0.5).sum(), xf)
    assert_same(got, want)


@pytest.mark.parametrize("alpha", [1, 2.5, 0])
@pytest.mark.parametrize(("shape", "dim"), [((3, 4), 0), ((3, 4), 1), ((5,), 0), ((2, 3, 4), 1), ((2, 3, 4), 2),
                                            ((1,) * 26, 0), ((1,) * 26, 1)])
def test_index_add_out_of_range_error_class(shape, dim: int, alpha: float) -> None:
    # The CPU runs scatter_add (RuntimeError) only along the first or last dim of a self of rank
    # > 1 with alpha 1; otherwise its loop raises IndexError "index out of range in self". foo
    # raised RuntimeError for every rank > 1.
    src_shape = shape[:dim] + (1,) + shape[dim + 1:]
    x, s, i = torch.ones(shape), torch.ones(src_shape), torch.tensor([5])
    with pytest.raises((RuntimeError, IndexError)) as want:
        torch.index_add(x, dim, i, s, alpha=alpha)
    with pytest.raises(type(want.value), match=re.escape(str(want.value).split("\n")[0])):
        torch.index_add(x.to(FOO), dim, i.to(FOO), s.to(FOO), alpha=alpha)


@pytest.mark.parametrize(("shape", "dim"), [((1, 1), 0), ((1, 1, 1), 1), ((1,), 0)])
@pytest.mark.parametrize("alpha", [1, 2])
def test_complex_index_add_multiplies_by_alpha_only_in_the_loop(shape, dim: int, alpha: int) -> None:
    # The CPU's scatter_add path (first or last dim, rank > 1, alpha 1) adds nan + 0i as it is;
    # its loop multiplies by alpha first (nan + nan i).
    x = torch.full(shape, complex(1.5, -0.25))
    s = torch.full(shape, complex(math.nan, 0.0))
    i = torch.tensor([0])
    want = torch.index_add(x, dim, i, s, alpha=alpha)
    got = torch.index_add(x.to(FOO), dim, i.to(FOO), s.to(FOO), alpha=alpha)
    assert_same(torch.view_as_real(got), torch.view_as_real(want))


@pytest.mark.parametrize("n", [3, 7, 100])
def test_layer_norm_of_a_constant_row_centres_it_exactly(n: int) -> None:
    # The CPU's Welford mean of a constant row is the value itself, so x - mean is 0 and 0 * inf
    # (an inf weight, or eps 0) is nan; foo's mean was 1 ulp off and gave +-inf or 3e6.
    x = torch.full((2, n), -2.1787893772125244)
    w = torch.full((n,), math.inf)
    assert_same(F.layer_norm(x.to(FOO), (n,), w.to(FOO)), F.layer_norm(x, (n,), w))
    assert_same(F.layer_norm(x.to(FOO), (n,), eps=0.0), F.layer_norm(x, (n,), eps=0.0))


def test_logsumexp_of_short_strided_rows_is_accurate() -> None:
    # Rows of 39 elements at stride 2: foo merged them element by element, a sequential float32
    # sum of 25389 exponentials near 1 (2e-5 off; the CPU 4e-8).
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(294917, generator=g) * 1e-4).as_strided((21, 31, 39), (14508, 156, 2))
    want = torch.logsumexp(x.double(), (0, 1, 2))
    got = torch.logsumexp(to_foo(x), (0, 1, 2))
    assert abs(got.item() - want.item()) < 4 * torch.finfo(torch.float32).eps * abs(want.item())


@pytest.mark.parametrize("index", [[0, 1], [0, -2], [0, 5], [0, -1, 0]])
def test_index_fill_of_a_scalar_checks_every_index(index: list[int]) -> None:
    # foo filled a 0-d self through index[0] only, so [0, 1] passed where the CPU raises IndexError.
    x, i = torch.tensor(1.5), torch.tensor(index)
    try:
        want = x.index_fill(0, i, -2)
    except IndexError as e:
        with pytest.raises(IndexError, match=re.escape(str(e))):
            x.to(FOO).index_fill(0, i.to(FOO), -2)
    else:
        assert_same(x.to(FOO).index_fill(0, i.to(FOO), -2), want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_logsumexp_rounds_each_step_as_the_cpu(dtype: torch.dtype) -> None:
    # The CPU's logsumexp is a composite of half-type kernels (x - max, exp, sum, log, + max, each
    # rounded); foo's fused kernel rounded once and was 1 ulp away (2.0898 against 2.0879).
    x = torch.tensor([-0.5, -2.5, 2.0], dtype=dtype)
    assert_same(torch.logsumexp(x.to(FOO), 0), torch.logsumexp(x, 0), atol=0, rtol=0)
    g = torch.Generator().manual_seed(0)
    y = (torch.randn(6, 50, generator=g) * 3).to(dtype)
    for dim in (0, 1, (0, 1)):
        assert_same(torch.logsumexp(y.to(FOO), dim), torch.logsumexp(y, dim), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_xlogy_rounds_the_logarithm_to_half_types(dtype: torch.dtype) -> None:
    # The CPU's half-type xlogy rounds log(y) to the half type before the product (0.7754 * log(1.0684):
    # CPU 0.051239, foo's single rounding 0.051270); xlogy's gradient goes through it too.
    g = torch.Generator().manual_seed(1)
    a = (torch.randn(5000, generator=g) * 3).to(dtype)
    b = (torch.randn(5000, generator=g).abs() * 2).to(dtype)
    assert_same(torch.xlogy(a.to(FOO), b.to(FOO)), torch.xlogy(a, b), atol=0, rtol=0)


@pytest.mark.parametrize(("kernel", "padding", "dilation"), [(3, 2, 2), (2, 2, 3), (3, 1, 2)])
def test_max_pool2d_pad_checked_against_the_undilated_kernel(kernel: int, padding: int, dilation: int) -> None:
    # The CPU's pool2d_shape_check wants pad <= kernel // 2 whatever the dilation; foo checked only
    # against half of the dilated kernel and pooled where the CPU raises.
    x = torch.arange(25.0).reshape(1, 5, 5)
    try:
        want = F.max_pool2d(x, kernel, None, padding, dilation)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=re.escape(str(e))):
            F.max_pool2d(x.to(FOO), kernel, None, padding, dilation)
    else:
        assert_same(F.max_pool2d(x.to(FOO), kernel, None, padding, dilation), want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_log_softmax_rounds_the_row_sum_and_its_log(dtype: torch.dtype) -> None:
    # The CPU's last-dim log_softmax keeps each row's sum of exponentials and its log in the half type
    # (float16 row [0.661, 0.267, 0.0617, 0.621, -0.452, -0.166]: CPU -1.373046875 at the max, foo's
    # single rounding -1.3740234375), so cross_entropy of half logits differed by 3 ulp.
    g = torch.Generator().manual_seed(2)
    for width in (3, 6, 33, 100, 1000):
        x = (torch.randn(64, width, generator=g) * 3).to(dtype)
        assert_same(F.log_softmax(x.to(FOO), 1), F.log_softmax(x, 1), atol=0, rtol=0)
        assert_same(F.log_softmax(x.t().to(FOO), 0), F.log_softmax(x.t(), 0), atol=0, rtol=0)
    x = torch.tensor([0.6611328125, 0.266845703125, 0.061676025390625, 0.62109375, -0.451904296875,
                      -0.1661376953125], dtype=dtype).expand(5, 6)
    t = torch.tensor([2, 3, 5, 0, 1])
    assert_same(F.cross_entropy(x.to(FOO), t.to(FOO)), F.cross_entropy(x, t), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_relu_keeps_negative_zero_and_nan(dtype: torch.dtype) -> None:
    # The CPU's relu is `x < 0 ? 0 : x`: -0.0 and NaN pass through (foo gave +0.0 for -0.0), in
    # place and out of place, contiguous or not (the vectorised and the strided loops).
    x = torch.tensor([-0.0, 0.0, math.nan, -math.inf, math.inf, -1.0, 2.0, -1e-45] * 9000, dtype=dtype)
    for src in (x, x[::3]):
        want = torch.relu(src)
        for got in (torch.relu(src.to(FOO)), src.to(FOO).relu_()):
            assert_same(got, want, atol=0, rtol=0)
            real = ~want.isnan()  # a NaN's sign is not specified (the CPU's bfloat16 loop flips it)
            assert torch.equal(torch.signbit(got.cpu())[real], torch.signbit(want)[real])


@pytest.mark.parametrize("dst", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.int64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "permuted rows", "strided"])
def test_conversion_to_half_types_has_the_cpus_bits(dst: torch.dtype, src: torch.dtype, layout: str) -> None:
    # foo rounded a float just above a rounding tie down (192.50002 became bfloat16 192, the
    # CPU gives 193): the 16-bit conversion dropped the low bits of the value widened to double.
    torch.manual_seed(0)
    ties = torch.tensor([0x43408001, 0x3F801001, 0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x00000001,
                         0x477FF000, 0x477FEFFF], dtype=torch.int32).view(torch.float32)
    specials = torch.tensor([0.0, -0.0, 1.0, math.inf, -math.inf, 65504.0, 65520.0, 6e-8, 1e-40, 3.3e38])
    vals = torch.cat([ties, specials, torch.randn(4000) * 1e3, torch.randn(4000) * 1e-3])
    x = (vals * 2**20).round().clamp(-2**62, 2**62).to(src) if src == torch.int64 else vals.to(src)
    x = x[: 96 * 80].reshape(96, 80)
    x = {"contiguous": x, "transposed": x.t(), "permuted rows": x.reshape(8, 12, 80).transpose(0, 1),
         "strided": x[:, ::3]}[layout]
    want = x.to(dst)
    got = x.to(FOO).to(dst)
    assert got.stride() == want.stride()
    assert torch.equal(got.cpu().view(torch.int16), want.view(torch.int16))
    # And back to float32 exactly.
    assert torch.equal(got.float().cpu().view(torch.int32), want.float().view(torch.int32))


@pytest.mark.parametrize("dst", [torch.bfloat16, torch.float16])
def test_conversion_to_half_types_of_edge_shapes_and_its_gradient(dst: torch.dtype) -> None:
    # The dense-run conversion on zero-size, 0-dim and broadcast sources, and back through autograd.
    for x in [torch.randn(0, 5), torch.tensor(192.50002), torch.randn(7).expand(3, 7), torch.randn(1, 1)]:
        want = x.to(dst)
        got = x.to(FOO).to(dst)
        assert got.shape == want.shape and got.stride() == want.stride()
        assert torch.equal(got.cpu().view(torch.int16), want.view(torch.int16))
    x = torch.randn(4, 6, requires_grad=True)
    xf = x.detach().to(FOO).requires_grad_()
    (x.to(dst).float() * 3).sum().backward()
    (xf.to(dst).float() * 3).sum().backward()
    assert_same(xf.grad, x.grad, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", [torch.neg, torch.abs])
def test_reduced_float_sign_ops_flip_the_sign_bit(op: object, dtype: torch.dtype) -> None:
    # foo's neg and abs of float16/bfloat16 flip or clear the sign bit, as the CPU's vectorized
    # loops do: NaN payloads (quiet and signalling) stay; dense and strided (the CPU's own strided
    # loop rounds NaNs through float32, so only the values are compared with it).
    bits = torch.tensor([0x7FFF, 0x7F81, 0x7C01, 0xFE01, 0x8000, 0, 0x7C00, 0xFC00, 0x7F80, 0xFF80, 0x3C00, 1] * 86)
    x = bits.to(torch.int16).view(dtype)
    keep, flip = (0xFFFF, 0x8000) if op is torch.neg else (0x7FFF, 0)
    want = ((bits & keep) ^ flip).to(torch.int16)
    assert torch.equal(op(x.to(FOO)).cpu().view(torch.int16), want)
    assert torch.equal(op(x.to(FOO)[::3]).cpu().view(torch.int16), want[::3])
    assert_same(op(x.to(FOO)[::3]), op(x[::3]), atol=0, rtol=0)
