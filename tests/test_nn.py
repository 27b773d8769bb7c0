"""NN family: softmax/log_softmax, losses, layer/group/batch norm, embedding backward — compared with
torch's CPU backend (strict mode: a CPU fallback fails the test unless marked)."""

from __future__ import annotations

import foo_rs
import pytest
import torch
import torch.nn.functional as F
from helpers import FOO, assert_same, check, layouts, sample, to_foo

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def grads(fn, *args):
    """Runs fn on CPU and foo copies (requires_grad floats), backward with the same upstream
    gradient; returns (cpu outputs+grads, foo outputs+grads)."""
    results = []
    for dev_args in (args, to_foo(list(args))):
        leaves = [
            a.detach().clone().requires_grad_()
            if isinstance(a, torch.Tensor) and a.is_floating_point()
            else a
            for a in dev_args
        ]
        out = fn(*leaves)
        g = sample(out.shape, out.dtype, seed=7)
        out.backward(g.to(out.device))
        results.append(
            [out] + [a.grad for a in leaves if isinstance(a, torch.Tensor) and a.is_floating_point()]
        )
    return results


def assert_grads(fn, *args, **tol):
    cpu, foo = grads(fn, *args)
    for f, c in zip(foo, cpu, strict=True):
        assert_same(f, c.detach(), **tol)


# ---- softmax ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_layouts(dtype, dim, log):
    fn = torch.log_softmax if log else torch.softmax
    for _name, x in layouts((7, 33), dtype).items():
        if dtype in (torch.float16, torch.bfloat16):
            # CPU computes reduced floats in float too; compare against float math.
            got = fn(to_foo(x), dim)
            assert_same(got, fn(x.float(), dim).to(dtype))
        else:
            check(lambda t: fn(t, dim), x)


@pytest.mark.parametrize(
    "shape,dim",
    [
        ((2, 3, 4, 5), 1),
        ((2, 3, 4, 5), 2),
        ((3, 1000), 1),
        ((300, 70), 0),
        ((5,), 0),
        ((), 0),
        ((0, 4), 1),
        ((4, 0), 1),
        ((2, 130, 3), 1),
    ],
)
@pytest.mark.parametrize("log", [False, True])
def test_softmax_shapes_and_grad(shape, dim, log):
    fn = F.log_softmax if log else F.softmax
    x = sample(shape, torch.float64)
    check(lambda t: fn(t, dim), x)
    if x.numel():
        assert_grads(lambda t: fn(t, dim), x)


def test_softmax_extremes():
    x = torch.tensor(
        [[0.0, float("-inf"), 1.0], [float("-inf")] * 3, [1e30, -1e30, 0.0], [float("nan"), 0.0, 1.0]]
    )
    for fn in (torch.softmax, torch.log_softmax):
        check(lambda t, fn=fn: fn(t, 1), x)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_float32_grad_large(log):
    fn = F.log_softmax if log else F.softmax
    x = sample((64, 517), torch.float32, seed=3) * 5
    assert_grads(lambda t: fn(t, -1), x)
    assert_grads(lambda t: fn(t, 0), x)


def test_softmax_half_to_float_and_out():
    x = sample((4, 9), torch.float16)
    got = torch._softmax(to_foo(x), 1, True)
    assert_same(got, torch._softmax(x.float(), 1, False))
    got = torch._log_softmax(to_foo(x), 0, True)
    assert_same(got, torch._log_softmax(x.float(), 0, False))
    # backward to half from float grads (CUDA semantics; CPU has no kernel for it)
    y = torch._softmax(x.float(), 1, False)
    g = sample((4, 9), torch.float32, seed=5)
    gi = torch._softmax_backward_data(to_foo(g), to_foo(y), 1, torch.float16)
    assert_same(gi, torch._softmax_backward_data(g, y, 1, torch.float32).half())
    # out= variants, including a non-contiguous out
    x = sample((5, 6), torch.float32)
    out = torch.empty(6, 5, device=FOO).t()
    torch._softmax(to_foo(x), 1, False, out=out)
    assert_same(out, torch._softmax(x, 1, False))
    out = torch.empty(0, device=FOO)
    torch._log_softmax(to_foo(x), 0, False, out=out)
    assert_same(out, torch._log_softmax(x, 0, False))



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_in_place_out(dtype, log):
    # nn.MultiheadAttention's inference path calls _softmax.out(x, out=x): the in-place row loop
    # gives the bits of a fresh output (and of the CPU's).
    op = torch.ops.aten._log_softmax.out if log else torch.ops.aten._softmax.out
    for width in (1, 7, 16, 65, 1000):
        x = sample((37, width), dtype, seed=width)
        fresh = op(to_foo(x), -1, False, out=torch.empty(x.shape, dtype=dtype, device=FOO))
        xf = to_foo(x)
        assert op(xf, -1, False, out=xf) is xf
        assert torch.equal(xf.cpu(), fresh.cpu())
        assert_same(xf, op(x.clone(), -1, False, out=torch.empty_like(x)))

def test_softmax_errors():
    with pytest.raises(NotImplementedError):
        torch.softmax(torch.ones(3, dtype=torch.long, device=FOO), 0)
    with pytest.raises(IndexError):
        torch.softmax(torch.ones(3, device=FOO), 2)
    with pytest.raises(RuntimeError, match="Half"):
        torch._softmax(torch.ones(3, device=FOO), 0, True)


# ---- nll_loss / cross_entropy ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(dtype, reduction, weighted):
    x = F.log_softmax(sample((9, 5), dtype), 1)
    t = torch.tensor([0, 4, 2, -100, 1, 1, 3, 4, 0])
    w = sample((5,), dtype, low=0.1, high=2) if weighted else None
    assert_grads(lambda a: F.nll_loss(a, to_dev(t, a), weight=to_dev(w, a), reduction=reduction), x)
    # uint8 targets, custom ignore_index
    tb = torch.tensor([0, 4, 2, 3, 1, 1, 3, 4, 0], dtype=torch.uint8)
    check(lambda a, tt: F.nll_loss(a, tt, reduction=reduction, ignore_index=3), x, tb)


def to_dev(t, like):
    return None if t is None else t.to(like.device)


def test_nll_loss_1d_and_edge_cases():
    x = F.log_softmax(sample((5,), torch.float32), 0)
    for red in ["none", "mean", "sum"]:
        check(lambda a, t, red=red: F.nll_loss(a, t, reduction=red), x, torch.tensor(3))
        check(lambda a, t, red=red: F.nll_loss(a, t, reduction=red), x, torch.tensor(-100))
    # all ignored: mean is nan, sum 0
    x2 = sample((3, 4), torch.float32)
    t2 = torch.full((3,), -100)
    check(lambda a, t: F.nll_loss(a, t), x2, t2)
    check(lambda a, t: F.nll_loss(a, t, reduction="sum"), x2, t2)
    # zero batch
    check(
        lambda a, t: F.nll_loss(a, t, reduction="none"), torch.empty(0, 4), torch.empty(0, dtype=torch.long)
    )
    check(lambda a, t: F.nll_loss(a, t, reduction="sum"), torch.empty(0, 4), torch.empty(0, dtype=torch.long))
    # total_weight output
    out, tw = torch.ops.aten.nll_loss_forward(to_foo(x2), to_foo(torch.tensor([1, 2, -100])), None, 1, -100)
    eout, etw = torch.ops.aten.nll_loss_forward(x2, torch.tensor([1, 2, -100]), None, 1, -100)
    assert_same(out, eout)
    assert_same(tw, etw)


def test_nll_loss_errors():
    x = torch.zeros(2, 3, device=FOO)
    with pytest.raises((IndexError, ValueError), match="out of bounds"):
        F.nll_loss(x, torch.tensor([0, 3], device=FOO))
    with pytest.raises(RuntimeError, match="Long or Byte"):
        F.nll_loss(x, torch.tensor([0, 1], dtype=torch.int32, device=FOO))
    with pytest.raises((RuntimeError, ValueError), match="size mismatch|batch_size"):
        F.nll_loss(x, torch.tensor([0, 1, 1], device=FOO))
    with pytest.raises(RuntimeError, match="weight tensor should be defined"):
        F.nll_loss(x, torch.tensor([0, 1], device=FOO), weight=torch.ones(2, device=FOO))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss2d_and_spatial_cross_entropy(reduction):
    x = sample((2, 4, 3, 5), torch.float64)
    t = torch.randint(0, 4, (2, 3, 5), generator=torch.Generator().manual_seed(0))
    t[0, 1, 2] = -100
    w = sample((4,), torch.float64, low=0.5, high=1.5)
    assert_grads(
        lambda a: F.nll_loss(F.log_softmax(a, 1), to_dev(t, a), weight=to_dev(w, a), reduction=reduction), x
    )
    assert_grads(lambda a: F.cross_entropy(a, to_dev(t, a), reduction=reduction), x)
    # 3-D input [N, C, L] reaches nll_loss2d through a reshape
    x3 = sample((2, 4, 6), torch.float64)
    t3 = torch.randint(0, 4, (2, 6), generator=torch.Generator().manual_seed(1))
    assert_grads(lambda a: F.cross_entropy(a, to_dev(t3, a), reduction=reduction), x3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cross_entropy_training(dtype):
    x = sample((16, 10), dtype)
    t = torch.randint(0, 10, (16,), generator=torch.Generator().manual_seed(0))
    assert_grads(lambda a: F.cross_entropy(a, to_dev(t, a)), x)
    assert_grads(lambda a: F.cross_entropy(a, to_dev(t, a), ignore_index=3, reduction="sum"), x)


@pytest.mark.fallback_ok  # label smoothing sums log-probabilities (sum reduction: reduce family)
def test_cross_entropy_label_smoothing():
    x = sample((8, 5), torch.float32)
    t = torch.randint(0, 5, (8,), generator=torch.Generator().manual_seed(0))
    assert_grads(lambda a: F.cross_entropy(a, to_dev(t, a), label_smoothing=0.1), x)


# ---- mse / bce -------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mse_loss(reduction, dtype):
    x, t = sample((6, 7), dtype), sample((6, 7), dtype, seed=1)
    assert_grads(lambda a, b: F.mse_loss(a, b, reduction=reduction), x, t)
    x = sample((300, 200), dtype, seed=2)
    check(lambda a, b: F.mse_loss(a, b, reduction=reduction), x, x.t().contiguous().t() * 0.5)
    check(
        lambda a, b: F.mse_loss(a, b, reduction=reduction),
        torch.empty(0, 3, dtype=dtype),
        torch.empty(0, 3, dtype=dtype),
    )


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(reduction, weighted):
    x = sample((5, 6), torch.float64, low=0.01, high=0.99)
    t = sample((5, 6), torch.float64, low=0, high=1, seed=1)
    w = sample((6,), torch.float64, low=0.5, high=2) if weighted else None
    assert_grads(
        lambda a: F.binary_cross_entropy(a, to_dev(t, a), weight=to_dev(w, a), reduction=reduction), x
    )
    check(
        lambda a, b: F.binary_cross_entropy(a, b),
        torch.tensor([0.0, 1.0, 0.5]),
        torch.tensor([1.0, 0.0, 0.5]),
    )
    with pytest.raises((RuntimeError, ValueError), match="between 0 and 1"):
        F.binary_cross_entropy(torch.tensor([1.5], device=FOO), torch.tensor([1.0], device=FOO))


# ---- layer_norm --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm(dtype, affine):
    tol = {} if dtype in (torch.float32, torch.float64) else {"atol": 2e-2, "rtol": 2e-2}
    for _name, x in layouts((6, 4, 10), dtype).items():
        w = sample((4, 10), dtype, seed=3) if affine else None
        b = sample((4, 10), dtype, seed=4) if affine else None
        if dtype in (torch.float32, torch.float64):
            assert_grads(lambda a, ww, bb: F.layer_norm(a, (4, 10), ww, bb), x, w, b)
        else:
            check(lambda a, ww, bb: F.layer_norm(a, (4, 10), ww, bb), x, w, b, **tol)


def test_layer_norm_outputs_and_masks():
    x = sample((3, 5, 8), torch.float32)
    w, b = sample((8,), torch.float32, seed=1), sample((8,), torch.float32, seed=2)
    check(lambda a, ww, bb: torch.native_layer_norm(a, [8], ww, bb, 1e-5), x, w, b, check_stride=True)
    # mixed precision: bfloat16 input, float32 params -> float32 statistics
    xh = x.bfloat16()
    check(lambda a, ww, bb: torch.native_layer_norm(a, [8], ww, bb, 1e-5), xh, w, b, atol=2e-2, rtol=2e-2)
    mean, rstd = torch.native_layer_norm(x, [8], w, b, 1e-5)[1:]
    g = sample(x.shape, torch.float32, seed=9)
    bwd = torch.ops.aten.native_layer_norm_backward
    for mask in ([True, False, False], [False, True, True], [True, True, False]):
        check(lambda *a, mask=mask: bwd(*a, mask), g, x, [8], mean, rstd, w, b)
    # zero rows
    check(lambda a, ww, bb: F.layer_norm(a, (8,), ww, bb), torch.empty(0, 8), w, b)


# ---- group_norm --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape,groups", [((3, 6, 4, 5), 3), ((2, 4, 7), 4), ((4, 6), 2), ((2, 8, 3, 2, 2), 1)])
def test_group_norm(dtype, affine, shape, groups):
    # Native forward and backward (the backward was the CPU fallback); float16/bfloat16 keep
    # float32 statistics, as the CPU does.
    c = shape[1]
    for _name, x in layouts(shape, dtype).items():
        w = sample((c,), dtype, seed=3) if affine else None
        b = sample((c,), dtype, seed=4) if affine else None
        assert_grads(lambda a, ww, bb: F.group_norm(a, groups, ww, bb), x, w, b)


def test_group_norm_outputs_layouts_and_errors():
    x = sample((2, 6, 3, 3), torch.float32)
    w, b = sample((6,), torch.float32, seed=1), sample((6,), torch.float32, seed=2)
    check(lambda a, ww, bb: torch.native_group_norm(a, ww, bb, 2, 6, 9, 3, 1e-5), x, w, b, check_stride=True)
    # channels_last in, channels_last out (forward and input gradient)
    cl = x.to(memory_format=torch.channels_last)
    check(lambda a, ww, bb: F.group_norm(a, 3, ww, bb), cl, w, b, check_stride=True)
    cpu, foo = grads(lambda a: F.group_norm(a, 3), cl)
    assert foo[1].stride() == cpu[1].stride()
    # mixed precision: bfloat16 input, float32 params -> float32 statistics
    check(lambda a, ww, bb: torch.native_group_norm(a, ww, bb, 2, 6, 9, 3, 1e-5), x.bfloat16(), w, b)
    # float16 statistics in float32: x*x overflowed half at |x| >= 256 (the row was 0)
    h = torch.tensor([[15408.0, -2934.0]], dtype=torch.float16).view(1, 2, 1)
    assert_same(F.group_norm(h.to(FOO), 1), F.group_norm(h, 1), atol=0, rtol=0)
    bwd = torch.ops.aten.native_group_norm_backward
    mean, rstd = torch.native_group_norm(x, w, b, 2, 6, 9, 3, 1e-5)[1:]
    g = sample(x.shape, torch.float32, seed=9)
    for mask in ([True, False, False], [False, True, True], [True, True, False]):
        check(lambda *a, mask=mask: bwd(*a, mask), g, x, mean, rstd, w, 2, 6, 9, 3)
    check(lambda a, ww, bb: F.group_norm(a, 3, ww, bb), torch.empty(0, 6, 3), w, b)
    for bad in [
        lambda d: F.group_norm(torch.ones(2, 2, dtype=torch.complex64, device=d), 1),  # NotImplementedError
        lambda d: torch.native_group_norm(torch.ones(2, 4, 0, device=d), None, None, 2, 4, 0, 2, 1e-5),
        lambda d: F.group_norm(torch.ones(2, 6, device=d), 4),
        lambda d: F.group_norm(torch.ones(2, 6, device=d), 3, torch.ones(5, device=d)),
        lambda d: torch.native_group_norm(torch.ones(2, 4, 3, device=d), torch.ones(4, dtype=torch.float64, device=d),
                                          None, 2, 4, 3, 2, 1e-5),
    ]:
        with pytest.raises(Exception) as want:
            bad("cpu")
        with pytest.raises(want.type):
            bad(FOO)


# ---- batch_norm --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("affine", [False, True])
def test_batch_norm_training(dtype, shape, affine):
    x = sample(shape, dtype)
    c = shape[1]
    w = sample((c,), dtype, seed=1) if affine else None
    b = sample((c,), dtype, seed=2) if affine else None
    rm, rv = sample((c,), dtype, seed=3), sample((c,), dtype, low=0.5, high=2, seed=4)
    rm_f, rv_f = to_foo(rm), to_foo(rv)
    assert_grads(
        lambda a, ww, bb: F.batch_norm(
            a,
            rm if a.device.type == "cpu" else rm_f,
            rv if a.device.type == "cpu" else rv_f,
            ww,
            bb,
            True,
            0.2,
        ),
        x,
        w,
        b,
    )
    assert_same(rm_f, rm)
    assert_same(rv_f, rv)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_batch_norm_eval_and_no_stats(dtype):
    x = sample((4, 3, 6), dtype)
    w, b = sample((3,), dtype, seed=1), sample((3,), dtype, seed=2)
    rm, rv = sample((3,), dtype, seed=3), sample((3,), dtype, low=0.5, high=2, seed=4)
    assert_grads(lambda a, ww, bb: F.batch_norm(a, to_dev(rm, a), to_dev(rv, a), ww, bb, False), x, w, b)
    assert_grads(lambda a, ww, bb: F.batch_norm(a, None, None, ww, bb, True), x, w, b)
    check(lambda *a: torch.native_batch_norm(*a, True, 0.1, 1e-5), x, w, b, rm.clone(), rv.clone())
    check(lambda *a: torch.native_batch_norm(*a, False, 0.1, 1e-5), x, w, b, rm, rv)
    check(
        lambda *a: torch.ops.aten._native_batch_norm_legit(*a, True, 0.1, 1e-5),
        x,
        w,
        b,
        rm.clone(),
        rv.clone(),
    )
    check(lambda *a: torch.ops.aten._native_batch_norm_legit.no_stats(*a, True, 0.1, 1e-5), x, w, b)
    check(lambda *a: torch.ops.aten._native_batch_norm_legit_no_training(*a, 0.1, 1e-5), x, w, b, rm, rv)
    check(
        lambda *a: torch.ops.aten._batch_norm_with_update(*a, 0.1, 1e-5)[:3], x, w, b, rm.clone(), rv.clone()
    )


def test_batchnorm_module_train_eval():
    torch.manual_seed(0)
    m = torch.nn.BatchNorm2d(3)
    mf = torch.nn.BatchNorm2d(3).to(FOO)
    mf.load_state_dict(m.state_dict())
    x = sample((4, 3, 5, 5), torch.float32)
    for _ in range(3):
        assert_same(mf(to_foo(x)), m(x))
    assert_same(mf.running_mean, m.running_mean)
    assert_same(mf.running_var, m.running_var)
    assert mf.num_batches_tracked.item() == m.num_batches_tracked.item()
    m.eval(), mf.eval()
    assert_same(mf(to_foo(x)), m(x))


# ---- embedding backward ------------------------------------------------------------------------
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_dense_backward(padding_idx, scale, dtype):
    idx = torch.tensor([[1, 2, 4, 5], [4, 3, 2, 9]])
    g = sample((2, 4, 3), dtype)
    for ind in (idx, idx.int()):
        check(
            lambda gg, i: torch.ops.aten.embedding_dense_backward(
                gg, i, 10, -1 if padding_idx is None else padding_idx, scale
            ),
            g,
            ind,
        )
    check(lambda gg, i: torch.ops.aten.embedding_dense_backward(gg, i, 10, -1, scale), g[:, :, :0], idx)
    check(
        lambda gg, i: torch.ops.aten.embedding_dense_backward(gg, i, 10, -1, scale),
        torch.empty(0, 3, dtype=dtype),
        torch.empty(0, dtype=torch.long),
    )
    big_idx = torch.randint(0, 50, (4000,), generator=torch.Generator().manual_seed(0))
    check(
        lambda gg, i: torch.ops.aten.embedding_dense_backward(gg, i, 50, -1, scale),
        sample((4000, 16), dtype),
        big_idx,
    )


@pytest.mark.fallback_ok  # embedding forward is index_select (index family)
def test_embedding_module_grad():
    e = torch.nn.Embedding(10, 3, padding_idx=0)
    ef = torch.nn.Embedding(10, 3, padding_idx=0).to(FOO)
    ef.load_state_dict(e.state_dict())
    idx = torch.tensor([[0, 2, 4], [4, 3, 2]])
    e(idx).sum().backward()
    ef(idx.to(FOO)).sum().backward()
    assert_same(ef.weight.grad, e.weight.grad)


# ---- native accounting -----------------------------------------------------------------------
def test_ops_are_registered_natively():
    ops = set(foo_rs.native_ops())
    for op in [
        "_softmax",
        "_log_softmax_backward_data",
        "nll_loss_forward",
        "nll_loss2d_backward",
        "native_layer_norm_backward",
        "native_group_norm",
        "native_group_norm_backward",
        "native_batch_norm",
        "embedding_dense_backward",
    ]:
        assert f"aten::{op}" in ops or op in ops, op
