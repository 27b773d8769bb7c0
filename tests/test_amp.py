"""Autocast on foo: the policy registered on AutocastPrivateUse1 is CUDA's (same ops, same cast
policy per op), the ops it sends to float16/bfloat16 run natively and match CPU's float32
result within reduced-precision tolerance, and the device module's AMP functions agree with
torch's. GradScaler: tests/test_amp_grad_scaler.py; kernels: test_amp_kernels.py; training:
test_amp_training.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from helpers import FOO, to_foo

LOW = [torch.float16, torch.bfloat16]

# CUDA registers these for its cuDNN paths only; foo has no cuDNN.
CUDA_ONLY = {"aten::cudnn_convolution", "aten::cudnn_convolution_transpose", "aten::_cudnn_rnn"}


def _aten_registrations(key: str) -> set[str]:
    # ATen's ops only: libraries loaded into the process (torchvision, installed by `make
    # bench-models`) add autocast kernels of their own ops for CUDA, not for other devices.
    return {n for n in torch._C._dispatch_get_registrations_for_dispatch_key(key) if n.startswith("aten::")}


def test_policy_covers_exactly_cudas_ops():
    ours = _aten_registrations("AutocastPrivateUse1")
    cuda = _aten_registrations("AutocastCUDA") - CUDA_ONLY
    assert ours == cuda, f"missing {sorted(cuda - ours)}, extra {sorted(ours - cuda)}"


def _r(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 7 * len(shape) + sum(shape))
    return (torch.rand(shape, generator=g) * 2 - 1).to(dtype)


def _pos(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (_r(*shape, seed=seed).abs() + 0.5).to(dtype)


Case = Callable[[torch.dtype], tuple[Callable[..., torch.Tensor], list[torch.Tensor]]]

# lower_precision_fp: float32 inputs, the result is in the autocast dtype.
LOWER: dict[str, Case] = {
    "mm": lambda d: (torch.mm, [_r(4, 5), _r(5, 3, seed=1)]),
    "bmm": lambda d: (torch.bmm, [_r(2, 4, 5), _r(2, 5, 3, seed=1)]),
    "addmm": lambda d: (torch.addmm, [_r(3), _r(4, 5, seed=1), _r(5, 3, seed=2)]),
    "addmv": lambda d: (torch.addmv, [_r(4), _r(4, 5, seed=1), _r(5, seed=2)]),
    "addbmm": lambda d: (torch.addbmm, [_r(4, 3), _r(2, 4, 5, seed=1), _r(2, 5, 3, seed=2)]),
    "baddbmm": lambda d: (torch.baddbmm, [_r(2, 4, 3), _r(2, 4, 5, seed=1), _r(2, 5, 3, seed=2)]),
    "addr": lambda d: (torch.addr, [_r(4, 3), _r(4, seed=1), _r(3, seed=2)]),
    "matmul": lambda d: (torch.matmul, [_r(2, 4, 5), _r(5, 3, seed=1)]),
    "mv": lambda d: (torch.mv, [_r(4, 5), _r(5, seed=1)]),
    "linear": lambda d: (F.linear, [_r(4, 5), _r(3, 5, seed=1), _r(3, seed=2)]),
    "einsum": lambda d: (lambda a, b: torch.einsum("bij,jk->bik", a, b), [_r(2, 4, 5), _r(5, 3, seed=1)]),
    "chain_matmul": lambda d: (torch.chain_matmul, [_r(3, 4), _r(4, 5, seed=1), _r(5, 2, seed=2)]),
    "linalg_multi_dot": lambda d: (lambda *m: torch.linalg.multi_dot(m),
                                   [_r(3, 4), _r(4, 5, seed=1), _r(5, 2, seed=2)]),
    "linalg_vecdot": lambda d: (torch.linalg.vecdot, [_r(3, 4), _r(3, 4, seed=1)]),
    "conv1d": lambda d: (F.conv1d, [_r(2, 3, 8), _r(4, 3, 3, seed=1), _r(4, seed=2)]),
    "conv2d": lambda d: (lambda x, w, b: F.conv2d(x, w, b, padding=1),
                         [_r(2, 3, 6, 6), _r(4, 3, 3, 3, seed=1), _r(4, seed=2)]),
    "conv3d": lambda d: (F.conv3d, [_r(1, 2, 4, 4, 4), _r(3, 2, 2, 2, 2, seed=1)]),
    "conv_transpose1d": lambda d: (lambda x, w: F.conv_transpose1d(x, w, stride=2), [_r(2, 3, 5), _r(3, 4, 3, seed=1)]),
    "conv_transpose2d": lambda d: (F.conv_transpose2d, [_r(2, 3, 4, 4), _r(3, 2, 3, 3, seed=1), _r(2, seed=2)]),
    "conv_transpose3d": lambda d: (F.conv_transpose3d, [_r(1, 2, 3, 3, 3), _r(2, 2, 2, 2, 2, seed=1)]),
    "convolution": lambda d: (lambda x, w: torch.convolution(x, w, None, [1], [1], [1], False, [0], 1),
                              [_r(2, 3, 8), _r(4, 3, 3, seed=1)]),
    "_convolution": lambda d: (lambda x, w: torch._convolution(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                                               False, False, True, True),
                               [_r(1, 2, 5, 5), _r(3, 2, 3, 3, seed=1)]),
    "prelu": lambda d: (F.prelu, [_r(2, 3, 4), _pos(3, seed=1) * 0.25]),
    "scaled_dot_product_attention": lambda d: (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                               [_r(2, 2, 5, 4), _r(2, 2, 5, 4, seed=1), _r(2, 2, 5, 4, seed=2)]),
}

# fp32 (and fp32_set_opt_dtype / fp32_append_dtype): reduced-precision inputs, float32 result.
FP32: dict[str, Case] = {
    "exp": lambda d: (torch.exp, [_r(5, 3, dtype=d)]),
    "expm1": lambda d: (torch.expm1, [_r(5, 3, dtype=d)]),
    "log": lambda d: (torch.log, [_pos(5, 3, dtype=d)]),
    "log1p": lambda d: (torch.log1p, [_pos(5, 3, dtype=d)]),
    "log2": lambda d: (torch.log2, [_pos(5, 3, dtype=d)]),
    "log10": lambda d: (torch.log10, [_pos(5, 3, dtype=d)]),
    "reciprocal": lambda d: (torch.reciprocal, [_pos(5, 3, dtype=d)]),
    "rsqrt": lambda d: (torch.rsqrt, [_pos(5, 3, dtype=d)]),
    "acos": lambda d: (torch.acos, [_r(5, 3, dtype=d) * 0.9]),
    "asin": lambda d: (torch.asin, [_r(5, 3, dtype=d) * 0.9]),
    "cosh": lambda d: (torch.cosh, [_r(5, 3, dtype=d)]),
    "sinh": lambda d: (torch.sinh, [_r(5, 3, dtype=d)]),
    "tan": lambda d: (torch.tan, [_r(5, 3, dtype=d)]),
    "pow.Tensor_Scalar": lambda d: (lambda x: torch.pow(x, 2.5), [_pos(5, 3, dtype=d)]),
    "pow.Tensor_Tensor": lambda d: (torch.pow, [_pos(5, 3, dtype=d), _r(5, 3, seed=1, dtype=d)]),
    "pow.Scalar": lambda d: (lambda x: torch.pow(2.0, x), [_r(5, 3, dtype=d)]),
    "softplus": lambda d: (F.softplus, [_r(5, 3, dtype=d)]),
    "layer_norm": lambda d: (lambda x, w, b: F.layer_norm(x, (6,), w, b), [_r(4, 6, dtype=d), _pos(6, seed=1, dtype=d),
                                                                           _r(6, seed=2, dtype=d)]),
    "group_norm": lambda d: (lambda x: F.group_norm(x, 2), [_r(2, 4, 3, dtype=d)]),
    "nll_loss": lambda d: (lambda x: F.nll_loss(x, torch.tensor([0, 2, 1], device=x.device)),
                           [_r(3, 4, dtype=d)]),
    "cross_entropy": lambda d: (lambda x: F.cross_entropy(x, torch.tensor([0, 2, 1], device=x.device)),
                                [_r(3, 4, dtype=d)]),
    "mse_loss": lambda d: (F.mse_loss, [_r(4, 3, dtype=d), _r(4, 3, seed=1, dtype=d)]),
    "l1_loss": lambda d: (F.l1_loss, [_r(4, 3, dtype=d), _r(4, 3, seed=1, dtype=d)]),
    "smooth_l1_loss": lambda d: (F.smooth_l1_loss, [_r(4, 3, dtype=d), _r(4, 3, seed=1, dtype=d)]),
    "huber_loss": lambda d: (F.huber_loss, [_r(4, 3, dtype=d), _r(4, 3, seed=1, dtype=d)]),
    "binary_cross_entropy_with_logits": lambda d: (F.binary_cross_entropy_with_logits,
                                                   [_r(4, 3, dtype=d), _pos(4, 3, seed=1, dtype=d) / 2]),
    "kl_div": lambda d: (lambda x, y: F.kl_div(x, y, reduction="batchmean"),
                         [_r(4, 3, dtype=d), _pos(4, 3, seed=1, dtype=d) / 2]),
    "cosine_similarity": lambda d: (F.cosine_similarity, [_r(4, 3, dtype=d), _r(4, 3, seed=1, dtype=d)]),
    "logsumexp": lambda d: (lambda x: torch.logsumexp(x, 1), [_r(4, 3, dtype=d)]),
    "dist": lambda d: (torch.dist, [_r(4, 3, dtype=d), _r(4, 3, seed=1, dtype=d)]),
    "softmax": lambda d: (lambda x: torch.softmax(x, -1), [_r(4, 3, dtype=d)]),
    "log_softmax": lambda d: (lambda x: torch.log_softmax(x, -1), [_r(4, 3, dtype=d)]),
    "sum": lambda d: (torch.sum, [_r(4, 3, dtype=d)]),
    "sum.dim_IntList": lambda d: (lambda x: torch.sum(x, 0), [_r(4, 3, dtype=d)]),
    "prod": lambda d: (torch.prod, [_pos(4, 3, dtype=d)]),
    "prod.dim_int": lambda d: (lambda x: torch.prod(x, 1), [_pos(4, 3, dtype=d)]),
    "cumsum": lambda d: (lambda x: torch.cumsum(x, 1), [_r(4, 3, dtype=d)]),
    "cumprod": lambda d: (lambda x: torch.cumprod(x, 1), [_pos(4, 3, dtype=d)]),
    "linalg_vector_norm": lambda d: (torch.linalg.vector_norm, [_r(4, 3, dtype=d)]),
    "norm.Scalar": lambda d: (torch.norm, [_r(4, 3, dtype=d)]),
    "norm.ScalarOpt_dim": lambda d: (lambda x: torch.norm(x, 2, 1), [_r(4, 3, dtype=d)]),
}

# promote: mixed float32 / reduced inputs run in the widest type (float32).
PROMOTE: dict[str, Case] = {
    "addcmul": lambda d: (torch.addcmul, [_r(4, 3), _r(4, 3, seed=1, dtype=d), _r(4, 3, seed=2, dtype=d)]),
    "addcdiv": lambda d: (torch.addcdiv, [_r(4, 3), _r(4, 3, seed=1, dtype=d), _pos(4, 3, seed=2, dtype=d)]),
    "atan2": lambda d: (torch.atan2, [_r(4, 3, dtype=d), _r(4, 3, seed=1)]),
    "dot": lambda d: (torch.dot, [_r(5, dtype=d), _r(5, seed=1)]),
    "vdot": lambda d: (torch.vdot, [_r(5, dtype=d), _r(5, seed=1)]),
    "cross": lambda d: (lambda a, b: torch.cross(a, b, dim=1), [_r(4, 3, dtype=d), _r(4, 3, seed=1)]),
    "tensordot": lambda d: (lambda a, b: torch.tensordot(a, b, 1), [_r(4, 3, dtype=d), _r(3, 2, seed=1)]),
    "scatter_add": lambda d: (lambda s, v: s.scatter_add(0, torch.tensor([[0, 1, 0]], device=s.device), v),
                              [_r(2, 3, dtype=d), _r(1, 3, seed=1)]),
    "index_put": lambda d: (lambda s, v: s.index_put((torch.tensor([1, 0], device=s.device),), v),
                            [_r(2, 3, dtype=d), _r(2, 3, seed=1)]),
}

# Not in the policy: the op runs in its inputs' dtype(s), exactly as without autocast.
UNLISTED: dict[str, Case] = {
    "relu": lambda d: (torch.relu, [_r(4, 3)]),
    "gelu": lambda d: (F.gelu, [_r(4, 3, dtype=d)]),
    "add": lambda d: (torch.add, [_r(4, 3, dtype=d), _r(4, 3, seed=1)]),
    "cat": lambda d: (lambda a, b: torch.cat([a, b]), [_r(4, 3, dtype=d), _r(2, 3, seed=1)]),
    "stack": lambda d: (lambda a, b: torch.stack([a, b]), [_r(4, 3, dtype=d), _r(4, 3, seed=1, dtype=d)]),
}

# Ops with no native foo kernel in any dtype yet (they reach the counted CPU fallback, which
# these cases allow): the policy is still checked on them.
NOT_NATIVE = {"prelu", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits", "cosine_similarity",
              "cross"}

POLICY = [pytest.param(n, p, id=n, marks=[pytest.mark.fallback_ok] if n in NOT_NATIVE else [])
          for cases, p in [(LOWER, "lower_precision_fp"), (FP32, "fp32"), (PROMOTE, "promote"),
                           (UNLISTED, "unlisted")] for n in cases]
CASES = {**LOWER, **FP32, **PROMOTE, **UNLISTED}

# cross_entropy is not in CUDA's lists: its composite calls log_softmax with an explicit dtype
# (the input's), which fp32_set_opt_dtype leaves alone, then nll_loss (fp32). So on CUDA, and
# here, log_softmax runs in the reduced dtype and nll_loss in float32.
REFERENCE: dict[str, Callable[..., torch.Tensor]] = {
    "cross_entropy": lambda x: F.nll_loss(torch.log_softmax(x, 1).float(), torch.tensor([0, 2, 1])),
}


def _expected_dtype(policy: str, dtype: torch.dtype, fn: Callable[..., torch.Tensor],
                    args: list[torch.Tensor]) -> torch.dtype:
    if policy == "lower_precision_fp":
        return dtype
    if policy in ("fp32", "promote"):
        return torch.float32
    return fn(*args).dtype  # unlisted: what the op gives without autocast


def _reference(fn: Callable[..., torch.Tensor], args: list[torch.Tensor]) -> torch.Tensor:
    """The op on CPU in float32 (reduced inputs widened exactly)."""
    return fn(*[a.float() for a in args])


def _tolerance(policy: str, dtype: torch.dtype) -> dict[str, float]:
    if policy in ("fp32", "promote"):
        return {"atol": 1e-5, "rtol": 1e-4}  # float32 math on exactly-widened inputs
    if dtype == torch.bfloat16:
        return {"atol": 4e-2, "rtol": 4e-2}
    return {"atol": 5e-3, "rtol": 5e-3}


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name,policy", POLICY)
def test_autocast_policy_dtype_and_values(name, policy, dtype):
    fn, args = CASES[name](dtype)
    want = _expected_dtype(policy, dtype, fn, args)
    with torch.autocast("foo", dtype=dtype):
        got = fn(*to_foo(args))
    assert got.device.type == "foo"
    assert got.dtype == want, f"{name} ({policy}) gave {got.dtype}, CUDA's policy gives {want}"
    ref = REFERENCE[name](*args) if name in REFERENCE else _reference(fn, args)
    # A reference that keeps a reduced-precision step may differ from it by one rounding.
    tol = _tolerance("lower_precision_fp" if name in REFERENCE else policy, dtype)
    torch.testing.assert_close(got.cpu().float(), ref, **tol)


def test_autocast_off_changes_nothing():
    a, b = _r(4, 5).to(FOO), _r(5, 3, seed=1).to(FOO)
    with torch.autocast("foo", dtype=torch.bfloat16, enabled=False):
        assert torch.mm(a, b).dtype == torch.float32
    with torch.autocast("foo", dtype=torch.bfloat16):
        with torch.autocast("foo", enabled=False):
            assert torch.mm(a, b).dtype == torch.float32
        assert torch.mm(a, b).dtype == torch.bfloat16
    # Autocast on another device type leaves foo alone.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.mm(a, b).dtype == torch.float32


def test_autocast_leaves_float64_and_integers():
    a64 = _r(4, 5).double().to(FOO)
    ai = torch.arange(12).reshape(3, 4).to(FOO)
    with torch.autocast("foo", dtype=torch.float16):
        assert torch.mm(a64, a64.t()).dtype == torch.float64
        assert torch.mm(ai, ai.t()).dtype == torch.int64
        assert torch.exp(a64).dtype == torch.float64


def test_binary_cross_entropy_is_banned_like_cuda():
    x, y = torch.rand(4, device=FOO), torch.rand(4, device=FOO)
    with torch.autocast("foo"), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(x, y)
    F.binary_cross_entropy(x, y)  # outside autocast it runs


def test_autocast_backward_gives_float32_grads():
    w = _r(3, 5).to(FOO).requires_grad_()
    x = _r(4, 5, seed=1).to(FOO)
    with torch.autocast("foo", dtype=torch.bfloat16):
        y = F.linear(x, w)
        loss = torch.log_softmax(y, -1).sum()
    assert y.dtype == torch.bfloat16 and loss.dtype == torch.float32
    loss.backward()
    assert w.grad.dtype == torch.float32
    wc = w.detach().cpu().requires_grad_()
    torch.log_softmax(F.linear(x.cpu(), wc), -1).sum().backward()
    torch.testing.assert_close(w.grad.cpu(), wc.grad, atol=5e-2, rtol=5e-2)


# ---- device-module AMP functions ------------------------------------------------------------

def test_device_module_autocast_dtype():
    assert torch.foo.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.foo.get_autocast_dtype() == torch.float16  # the documented default
    assert torch.get_autocast_dtype("foo") == torch.float16
    try:
        torch.foo.set_autocast_dtype(torch.bfloat16)
        assert torch.foo.get_autocast_dtype() == torch.bfloat16 == torch.get_autocast_dtype("foo")
        with torch.autocast("foo"):  # no dtype: the one set
            assert torch.mm(_r(2, 2).to(FOO), _r(2, 2).to(FOO)).dtype == torch.bfloat16
        for bad in (torch.float32, torch.float64, torch.int8):
            with pytest.raises(ValueError, match="foo autocast supports"):
                torch.foo.set_autocast_dtype(bad)
        with pytest.raises(TypeError):
            torch.foo.set_autocast_dtype("float16")  # type: ignore[arg-type]
        assert torch.foo.get_autocast_dtype() == torch.bfloat16
    finally:
        torch.foo.set_autocast_dtype(torch.float16)


def test_device_module_autocast_enabled():
    assert not torch.foo.is_autocast_enabled() and not torch.is_autocast_enabled("foo")
    with torch.autocast("foo", dtype=torch.bfloat16):
        assert torch.foo.is_autocast_enabled() and torch.is_autocast_enabled("foo")
        assert torch.get_autocast_dtype("foo") == torch.foo.get_autocast_dtype() == torch.bfloat16
    assert not torch.foo.is_autocast_enabled()
    torch.foo.set_autocast_enabled(True)
    try:
        assert torch.is_autocast_enabled("foo")
        assert torch.mm(_r(2, 2).to(FOO), _r(2, 2).to(FOO)).dtype == torch.float16
    finally:
        torch.foo.set_autocast_enabled(False)
    assert not torch.is_autocast_enabled("foo")
