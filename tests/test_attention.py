"""F.scaled_dot_product_attention on foo: foo's `_fused_sdp_choice` picks the fused kernel
(`_scaled_dot_product_fused_attention_overrideable`, Rust: kernels/attention/) for what it
supports and the math path for the rest; values, gradients, layouts and errors match the CPU's
scaled_dot_product_attention; dropout draws from foo's generator, the same mask in forward and
backward; results do not depend on the thread count."""

from __future__ import annotations

import warnings
from typing import Any

import foo_rs
import pytest
import torch
import torch.nn.functional as F
from helpers import FOO, probe_digests, to_foo
from torch.nn.attention import SDPBackend, sdpa_kernel

FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"
FUSED_BWD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def fused_calls() -> tuple[int, int]:
    c = foo_rs.native_counts()
    return c.get(FUSED, 0), c.get(FUSED_BWD, 0)


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, go: torch.Tensor, mask: torch.Tensor | None = None,
        grad_mask: bool = False, **kw: Any) -> list[torch.Tensor]:
    """Output and gradients (q, k, v[, mask]) of sdpa with cotangent `go`, on q's device."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    if mask is not None and grad_mask:
        mask = mask.detach().requires_grad_()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
    leaves = [q, k, v] + ([mask] if mask is not None and grad_mask else [])
    grads = torch.autograd.grad(out, leaves, go)
    return [out, *grads]


def max_err(got: torch.Tensor, want: torch.Tensor) -> float:
    """Largest difference relative to the largest magnitude of `want`."""
    got, want = got.detach().cpu().double(), want.detach().cpu().double()
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


# (q shape, k shape, v shape, extra sdpa kwargs, mask shape or None, mask kind)
CASES: dict[str, tuple] = {
    "plain": ((2, 3, 70, 24), (2, 3, 130, 24), (2, 3, 130, 40), {}, None, None),
    "causal": ((2, 3, 130, 32), (2, 3, 130, 32), (2, 3, 130, 32), {"is_causal": True}, None, None),
    "causal-rect": ((1, 2, 150, 16), (1, 2, 90, 16), (1, 2, 90, 16), {"is_causal": True}, None, None),
    "bool-mask-2d": ((2, 2, 65, 16), (2, 2, 67, 16), (2, 2, 67, 16), {}, (65, 67), "bool"),
    "bool-mask-4d": ((2, 2, 33, 16), (2, 2, 100, 16), (2, 2, 100, 16), {}, (2, 1, 33, 100), "bool"),
    "float-mask": ((2, 2, 64, 64), (2, 2, 64, 64), (2, 2, 64, 64), {}, (2, 2, 64, 64), "float"),
    "float-mask-row": ((2, 2, 40, 8), (2, 2, 50, 8), (2, 2, 50, 8), {}, (1, 50), "float"),
    "scale": ((1, 4, 20, 12), (1, 4, 20, 12), (1, 4, 20, 12), {"scale": 0.7}, None, None),
    "gqa": ((2, 8, 70, 16), (2, 2, 90, 16), (2, 2, 90, 16), {"enable_gqa": True}, None, None),
    "gqa-mask": ((1, 4, 70, 16), (1, 1, 70, 16), (1, 1, 70, 16), {"enable_gqa": True}, (70, 70), "bool"),
    "3d": ((3, 50, 16), (3, 60, 16), (3, 60, 16), {}, None, None),
    "2d": ((30, 8), (40, 8), (40, 8), {"is_causal": True}, None, None),
    "5d": ((2, 2, 2, 20, 8), (2, 2, 2, 30, 8), (2, 2, 2, 30, 8), {}, (2, 1, 1, 20, 30), "float"),
}


def make_case(name: str, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    qs, ks, vs, kw, ms, kind = CASES[name]
    q, k, v = rand(*qs, dtype=dtype, seed=1), rand(*ks, dtype=dtype, seed=2), rand(*vs, dtype=dtype, seed=3)
    mask = None
    if kind == "bool":
        mask = torch.rand(ms, generator=torch.Generator().manual_seed(4)) > 0.3
        mask[..., 0, :] = False  # a row that attends nothing
    elif kind == "float":
        mask = rand(*ms, dtype=dtype, seed=4)
        mask[..., 1] = float("-inf")
    out_shape = qs[:-1] + (vs[-1],)
    go = rand(*out_shape, dtype=dtype, seed=5)
    return q, k, v, go, mask, kw


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_cpu(name: str, dtype: torch.dtype) -> None:
    q, k, v, go, mask, kw = make_case(name, dtype)
    want = run(q, k, v, go, mask, **kw)
    before = fused_calls()
    got = run(*to_foo([q, k, v, go]), to_foo(mask), **kw)
    after = fused_calls()
    assert after[0] == before[0] + 1 and after[1] == before[1] + 1, "the fused kernel did not run"
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.device.type == "foo" and g.shape == w.shape and g.dtype == w.dtype
        err = max_err(g, w)
        assert err < tol, f"{['out', 'dq', 'dk', 'dv'][i]}: max relative error {err:.2e}"
    assert got[0].stride() == want[0].stride()


@pytest.mark.parametrize("name", ["plain", "causal", "bool-mask-2d", "float-mask", "gqa"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_accumulates_in_float(name: str, dtype: torch.dtype) -> None:
    # Against the exact result of the same rounded inputs: foo's error stays within the CPU's
    # own error (plus a little: outputs are rounded to the storage type at the end).
    q, k, v, go, mask, kw = make_case(name, dtype)
    exact = run(q.double(), k.double(), v.double(), go.double(),
                None if mask is None else (mask if mask.dtype == torch.bool else mask.double()), **kw)
    cpu = run(q, k, v, go, mask, **kw)
    before = fused_calls()
    got = run(*to_foo([q, k, v, go]), to_foo(mask), **kw)
    assert fused_calls()[0] == before[0] + 1
    for i, (g, c, e) in enumerate(zip(got, cpu, exact)):
        assert g.dtype == dtype and g.shape == c.shape
        eps = torch.finfo(dtype).eps
        assert max_err(g, e) <= max(2 * max_err(c, e), 4 * eps), f"{['out', 'dq', 'dk', 'dv'][i]}"


def test_layouts_and_noncontiguous_inputs() -> None:
    # Transformers hand sdpa (B, L, H, E) projections transposed to (B, H, L, E): no copies, and
    # the output keeps the query's layout as on the CPU.
    B, L, H, E = 2, 40, 3, 16
    x = rand(B, L, 3 * H * E, seed=1)
    q, k, v = (t.view(B, L, H, E).transpose(1, 2) for t in x.split(H * E, dim=-1))
    go = rand(B, H, L, E, seed=2).transpose(2, 3).contiguous().transpose(2, 3)
    want = run(q, k, v, go, is_causal=True)
    got = run(*to_foo([q, k, v, go]), is_causal=True)
    for g, w in zip(got, want):
        assert max_err(g, w) < 1e-5
    assert got[0].stride() == want[0].stride()
    # A head dim with a non-unit stride is copied first.
    qs = rand(1, 2, 10, 16, seed=3)[..., ::2]
    want = run(qs, qs, qs, rand(1, 2, 10, 8, seed=4))
    got = run(*to_foo([qs, qs, qs, rand(1, 2, 10, 8, seed=4)]))
    assert max(max_err(g, w) for g, w in zip(got, want)) < 1e-5


def test_1d_mask() -> None:
    # A 1-D mask broadcasts along the keys (the documented rule; the CPU's math path takes it).
    # The CPU's flash-attention selection raises IndexError on it (it reads mask.size(-2)).
    q, k, v, go = rand(2, 2, 40, 8, seed=1), rand(2, 2, 50, 8, seed=2), rand(2, 2, 50, 8, seed=3), rand(2, 2, 40, 8)
    mask = rand(50, seed=4)
    with pytest.raises(IndexError):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    with sdpa_kernel(SDPBackend.MATH):
        want = run(q, k, v, go, mask)
    got = run(*to_foo([q, k, v, go]), to_foo(mask))
    for g, w in zip(got, want):
        assert max_err(g, w) < 1e-5


def test_mask_gradient() -> None:
    # An additive mask that requires grad gets dS summed over its broadcast dims.
    for shape in [(2, 2, 30, 40), (30, 40), (2, 1, 1, 40)]:
        q, k, v = rand(2, 2, 30, 16, seed=1), rand(2, 2, 40, 16, seed=2), rand(2, 2, 40, 16, seed=3)
        mask, go = rand(*shape, seed=4), rand(2, 2, 30, 16, seed=5)
        want = run(q, k, v, go, mask, grad_mask=True)
        got = run(*to_foo([q, k, v, go]), to_foo(mask), grad_mask=True)
        assert got[4].shape == mask.shape
        for g, w in zip(got, want):
            assert max_err(g, w) < 1e-5


def test_choice() -> None:
    q = torch.randn(2, 2, 8, 4, device=FOO)
    overrideable, math = SDPBackend.OVERRIDEABLE.value, SDPBackend.MATH.value
    assert torch._fused_sdp_choice(q, q, q) == overrideable
    assert torch._fused_sdp_choice(q, q, q, dropout_p=0.5, is_causal=True) == overrideable
    with sdpa_kernel(SDPBackend.MATH):
        assert torch._fused_sdp_choice(q, q, q) == math
    # What the kernel does not take goes to the math path (never the CPU): broadcast batch
    # dims, key/value heads that are not a divisor without enable_gqa, empty inputs.
    k1 = torch.randn(1, 2, 8, 4, device=FOO)
    assert torch._fused_sdp_choice(q, k1, k1) == math
    assert torch._fused_sdp_choice(q, q[:, :1], q[:, :1]) == math
    assert torch._fused_sdp_choice(q, q[:, :1], q[:, :1], enable_gqa=True) == overrideable
    assert torch._fused_sdp_choice(q[:, :, :0], q, q) == math
    with sdpa_kernel(SDPBackend.OVERRIDEABLE), pytest.raises(RuntimeError, match="No viable backend"):
        F.scaled_dot_product_attention(q, k1, k1)


def test_math_path_results_match_cpu() -> None:
    # Inputs the fused kernel refuses run the math path natively on foo (strict mode: no CPU).
    cases = [
        (rand(2, 2, 8, 4, seed=1), rand(1, 2, 8, 4, seed=2), rand(1, 2, 8, 4, seed=3)),  # broadcast batch
        (rand(2, 4, 8, 4, seed=1), rand(2, 1, 8, 4, seed=2), rand(2, 1, 8, 4, seed=3)),  # 1 kv head, no gqa flag
        (rand(2, 2, 0, 4, seed=1), rand(2, 2, 8, 4, seed=2), rand(2, 2, 8, 4, seed=3)),  # no queries
        (rand(2, 2, 5, 4, seed=1), rand(2, 2, 0, 4, seed=2), rand(2, 2, 0, 4, seed=3)),  # no keys
    ]
    for q, k, v in cases:
        before = fused_calls()[0]
        want = F.scaled_dot_product_attention(q, k, v)
        got = F.scaled_dot_product_attention(*to_foo([q, k, v]))
        assert fused_calls()[0] == before
        torch.testing.assert_close(got.cpu(), want)
    with sdpa_kernel(SDPBackend.MATH):
        q, k, v, go, mask, kw = make_case("bool-mask-2d", torch.float32)
        before = fused_calls()[0]
        got = run(*to_foo([q, k, v, go]), to_foo(mask), **kw)
        assert fused_calls()[0] == before
    for g, w in zip(got, run(q, k, v, go, mask, **kw)):
        assert max_err(g, w) < 1e-5


def outcome(fn: Any, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except Exception as e:  # noqa: BLE001 - the exception type is what is compared
        return type(e)


@pytest.mark.parametrize("case", [
    "dtype-mismatch", "head-dim-mismatch", "seq-mismatch", "mask-shape", "mask-int", "causal-and-mask",
    "gqa-indivisible", "heads-mismatch", "1d", "mask-rank", "dropout-negative",
])
def test_errors_match_cpu(case: str) -> None:
    q, k, v = rand(2, 4, 8, 16, seed=1), rand(2, 4, 10, 16, seed=2), rand(2, 4, 10, 16, seed=3)
    kw: dict[str, Any] = {}
    if case == "dtype-mismatch":
        k = k.double()
    elif case == "head-dim-mismatch":
        k = rand(2, 4, 10, 8)
    elif case == "seq-mismatch":
        v = rand(2, 4, 11, 16)
    elif case == "mask-shape":
        kw["attn_mask"] = torch.ones(8, 9, dtype=torch.bool)
    elif case == "mask-int":
        kw["attn_mask"] = torch.ones(8, 10, dtype=torch.int32)
    elif case == "causal-and-mask":
        kw.update(attn_mask=torch.ones(8, 10, dtype=torch.bool), is_causal=True)
    elif case == "gqa-indivisible":
        k, v = rand(2, 3, 10, 16), rand(2, 3, 10, 16)
        kw["enable_gqa"] = True
    elif case == "heads-mismatch":
        k, v = rand(2, 2, 10, 16), rand(2, 2, 10, 16)
    elif case == "1d":
        q, k, v = rand(16), rand(16), rand(16)
    elif case == "mask-rank":
        kw["attn_mask"] = torch.ones(1, 2, 4, 8, 10, dtype=torch.bool)
    elif case == "dropout-negative":
        kw["dropout_p"] = -0.5
    if case == "seq-mismatch":
        # The CPU's flash kernel reads only the first S value rows; its math path raises.
        with sdpa_kernel(SDPBackend.MATH):
            want = outcome(F.scaled_dot_product_attention, q, k, v, **kw)
    else:
        want = outcome(F.scaled_dot_product_attention, q, k, v, **kw)
    got = outcome(F.scaled_dot_product_attention, *to_foo([q, k, v]), **to_foo(kw))
    if isinstance(want, type):
        assert got is want, f"CPU raised {want.__name__}, foo gave {got}"
    else:
        assert not isinstance(got, type), f"foo raised {got.__name__}, the CPU did not"
        torch.testing.assert_close(got.cpu(), want)


def identity_probe(q: torch.Tensor, k: torch.Tensor, p: float, **kw: Any) -> torch.Tensor:
    """sdpa with V = I: the dropped-out probability matrix itself (0 where dropped)."""
    S = k.shape[-2]
    eye = torch.eye(S, device=q.device, dtype=q.dtype).expand(*k.shape[:-1], S)
    return F.scaled_dot_product_attention(q, k, eye, dropout_p=p, **kw)


def test_dropout_reproducible_and_rate() -> None:
    q, k = rand(2, 3, 64, 16, seed=1).to(FOO), rand(2, 3, 96, 16, seed=2).to(FOO)
    torch.manual_seed(7)
    a = identity_probe(q, k, 0.3)
    b = identity_probe(q, k, 0.3)
    torch.manual_seed(7)
    c = identity_probe(q, k, 0.3)
    torch.foo.manual_seed(7)
    d = identity_probe(q, k, 0.3)
    assert torch.equal(a.cpu(), c.cpu()) and torch.equal(a.cpu(), d.cpu())
    assert not torch.equal(a.cpu(), b.cpu())
    dropped = (a == 0).float().mean().item()
    assert abs(dropped - 0.3) < 0.01, dropped
    # The kept probabilities are scaled by 1 / (1 - p).
    full = identity_probe(q, k, 0.0).cpu()
    kept = a.cpu() != 0
    torch.testing.assert_close(a.cpu()[kept], full[kept] / 0.7)
    # A generator's state round-trips (the op reserves its words of the stream).
    state = torch.foo.get_rng_state()
    e = identity_probe(q, k, 0.5)
    torch.foo.set_rng_state(state)
    assert torch.equal(e.cpu(), identity_probe(q, k, 0.5).cpu())


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"enable_gqa": True}])
def test_dropout_same_mask_in_forward_and_backward(kw: dict[str, Any]) -> None:
    # Read the mask with V = I, then check forward and gradients against the CPU's math path
    # given that mask (ATen's _scaled_dot_product_attention_math takes one for testing).
    p = 0.4
    hk = 1 if kw.get("enable_gqa") else 4
    q, k, v = rand(2, 4, 50, 16, seed=1), rand(2, hk, 70, 16, seed=2), rand(2, hk, 70, 24, seed=3)
    go = rand(2, 4, 50, 24, seed=4)
    qf, kf, vf, gof = to_foo([q, k, v, go])
    torch.foo.manual_seed(11)
    probe = identity_probe(qf, kf, p, **kw).cpu()
    keep = probe != 0
    torch.foo.manual_seed(11)
    got = run(qf, kf, vf, gof, dropout_p=p, **kw)
    qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Dropout mask should only be used for testing purposes."
        out, _ = torch.ops.aten._scaled_dot_product_attention_math(
            qq, kk, vv, None, p, kw.get("is_causal", False), keep, enable_gqa=kw.get("enable_gqa", False))
    want = [out, *torch.autograd.grad(out, [qq, kk, vv], go)]
    for g, w in zip(got, want):
        assert max_err(g, w) < 1e-5


def test_transformer_layer_matches_cpu() -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    x = rand(3, 20, 32, seed=1)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(20)
    foo_layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    foo_layer.load_state_dict(layer.state_dict())
    foo_layer = foo_layer.to(FOO)
    y = layer(x, src_mask=mask, is_causal=True)
    before = fused_calls()[0]
    yf = foo_layer(x.to(FOO), src_mask=mask.to(FOO), is_causal=True)
    assert fused_calls()[0] > before
    assert max_err(yf, y) < 1e-5
    # A random cotangent: the gradient of sum(y**2) through the final layer norm is ~0.
    w = rand(3, 20, 32, seed=2)
    (y * w).sum().backward()
    (yf * w.to(FOO)).sum().backward()
    for (n, a), (_, b) in zip(layer.named_parameters(), foo_layer.named_parameters()):
        assert max_err(b.grad, a.grad) < 1e-5, n


@pytest.mark.parametrize("norm_first", [False, True])
def test_inference_fast_paths_run_on_foo(norm_first: bool) -> None:
    """Eval mode under no_grad: nn.TransformerEncoderLayer's _transformer_encoder_layer_fwd and
    nn.MultiheadAttention's _native_multi_head_attention (ViT's attention) run foo's kernels
    (strict mode: no fallback), with and without a padding mask and attention weights, and give
    the CPU's numbers."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    foo_layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first)
    foo_layer.load_state_dict(layer.state_dict())
    foo_layer = foo_layer.to(FOO).eval()
    foo_mha = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    foo_mha.load_state_dict(mha.state_dict())
    foo_mha = foo_mha.to(FOO).eval()
    x = rand(3, 20, 32, seed=1)
    pad = torch.zeros(3, 20, dtype=torch.bool)
    pad[1, 15:] = True
    foo_rs.reset_op_counts()
    with torch.no_grad():
        y, yf = layer(x), foo_layer(x.to(FOO))
        assert max_err(yf, y) < 1e-5
        a, af = mha(x, x, x, need_weights=False)[0], foo_mha(*(x.to(FOO),) * 3, need_weights=False)[0]
        assert max_err(af, a) < 1e-5
        (a, w), (af, wf) = mha(x, x, x, key_padding_mask=pad), foo_mha(*(x.to(FOO),) * 3, key_padding_mask=pad.to(FOO))
        assert max_err(af, a) < 1e-5 and max_err(wf, w) < 1e-6
        y, yf = layer(x, src_key_padding_mask=pad), foo_layer(x.to(FOO), src_key_padding_mask=pad.to(FOO))
        torch.testing.assert_close(yf.cpu(), y, atol=1e-5, rtol=1e-5)
    counts = foo_rs.native_counts()
    assert counts.get("aten::_transformer_encoder_layer_fwd", 0) >= 2, counts
    assert counts.get("aten::_native_multi_head_attention", 0) >= 3, counts


def test_masked_softmax_matches_cpu() -> None:
    """_masked_softmax (mask types 0, 1, 2 and none; a fully masked row is nan, as on the CPU),
    composed of foo's kernels."""
    x = rand(2, 3, 4, 4, seed=1)
    full = torch.rand(2, 3, 4, 4, generator=torch.Generator().manual_seed(2)) > 0.6
    full[0, 1, 2] = True
    masks = [(full, None), (full, 2), (torch.tensor([[False, True, False, True], [True] * 3 + [False]]), 1),
             (torch.tensor([[False, True, True, True]] * 4), 0)]
    for mask, mask_type in masks:
        want = torch._masked_softmax(x, mask, 3, mask_type)
        got = torch._masked_softmax(x.to(FOO), mask.to(FOO), 3, mask_type)
        torch.testing.assert_close(got.cpu(), want, atol=1e-6, rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_transform_bias_rescale_qkv_is_the_cpus_bits(dtype: torch.dtype) -> None:
    """_transform_bias_rescale_qkv (one Rust kernel): q = (qkv + bias) / sqrt(head dim) rounded
    once, as the CPU's kernel, so the bits are the CPU's for every float dtype; also for a
    non-contiguous qkv, several rows per thread and no positions."""
    foo_rs.reset_op_counts()
    for shape, heads in (((2, 5, 24), 2), ((3, 67, 768), 4), ((2, 0, 24), 2)):
        qkv, bias = rand(*shape, seed=3).to(dtype), rand(shape[-1], seed=4).to(dtype)
        for x in (qkv, qkv.transpose(0, 1).contiguous().transpose(0, 1)):
            got = torch._transform_bias_rescale_qkv(x.to(FOO), bias.to(FOO), heads)
            want = torch._transform_bias_rescale_qkv(x, bias, heads)
            for g, w in zip(got, want, strict=True):
                assert (g.shape, g.stride(), g.dtype) == (w.shape, w.stride(), w.dtype)
                assert torch.equal(g.cpu(), w)
    assert foo_rs.native_counts().get("aten::_transform_bias_rescale_qkv") == 6
    assert not foo_rs.fallback_counts()


def test_transform_bias_rescale_qkv_errors_as_the_cpu() -> None:
    qkv, bias = rand(2, 5, 24, seed=3), rand(24, seed=4)
    for x, b, heads in [(qkv, bias, 5), (qkv[..., :23], bias[:23], 1), (qkv[0], bias, 2)]:
        with pytest.raises((RuntimeError, IndexError)) as cpu:
            torch._transform_bias_rescale_qkv(x, b, heads)
        with pytest.raises(type(cpu.value)):
            torch._transform_bias_rescale_qkv(x.to(FOO), b.to(FOO), heads)
    # The CPU does not check these: it reads a short or float64 bias as if it were right and
    # divides by zero heads (SIGFPE).
    for x, b, heads in [(qkv, bias[:12], 2), (qkv, bias.double(), 2), (qkv, bias, 0)]:
        with pytest.raises(RuntimeError, match="qkv_bias|num_head"):
            torch._transform_bias_rescale_qkv(x.to(FOO), b.to(FOO), heads)


PROBE = r"""
import hashlib, json
import torch, foo_rs
import torch.nn.functional as F
foo_rs._C.set_strict(True)
out = {}
for dtype in (torch.float32, torch.bfloat16):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, 200, 64, generator=g).to(dtype).to("foo").requires_grad_()
    k = torch.randn(2, 2, 230, 64, generator=g).to(dtype).to("foo").requires_grad_()
    v = torch.randn(2, 2, 230, 64, generator=g).to(dtype).to("foo").requires_grad_()
    for name, kw in {"causal": dict(is_causal=True), "mask-dropout": dict(
            attn_mask=torch.randn(200, 230, generator=g).to(dtype).to("foo"), dropout_p=0.2)}.items():
        torch.foo.manual_seed(3)
        y = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw)
        gq, gk, gv = torch.autograd.grad(y.square().sum(), [q, k, v])
        h = hashlib.sha256()
        for t in (y, gq, gk, gv):
            h.update(t.detach().cpu().float().numpy().tobytes())
        out[f"{name}/{dtype}"] = h.hexdigest()
print("DIGESTS" + json.dumps(out))
"""


def _digests(threads: int) -> dict[str, str]:
    return probe_digests(PROBE, threads)


def test_same_bits_for_1_and_3_threads() -> None:
    one, three = _digests(1), _digests(3)
    assert one == three
    assert len(set(one.values())) == len(one)


def test_direct_calls() -> None:
    # The overrideable op called directly: outputs, philox state as 0-dim int64 on foo, bad arguments.
    q = torch.randn(1, 2, 5, 8, device=FOO)
    res = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, q, q, None, 0.25)
    out, lse, _, _, max_q, max_k, seed, offset, _ = res
    assert out.shape == q.shape and lse.shape == (1, 2, 5) and lse.dtype == torch.float32
    assert (max_q, max_k) == (5, 5) and seed.dtype == torch.int64 and seed.dim() == 0
    assert seed.device == offset.device == q.device  # where the op's fake kernel puts them
    with pytest.raises(RuntimeError, match="dropout_p"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, q, q, None, 1.0)
    with pytest.raises(RuntimeError, match="multiple"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, q[:, :1].expand(1, 3, 5, 8), q)
    with pytest.raises(NotImplementedError):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, q, q, return_debug_mask=True)
    # The logsumexp the backward uses is the row's log-sum-exp of the scaled scores.
    s = (q @ q.transpose(-1, -2)).cpu() / 8 ** 0.5
    torch.testing.assert_close(lse.cpu(), s.logsumexp(-1))
