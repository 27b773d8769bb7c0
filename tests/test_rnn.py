"""LSTM and GRU on foo against CPU with the same weights and inputs, outputs and every gradient:
the whole layers nn.LSTM / nn.GRU run (aten::lstm.input, aten::gru.input: one autograd node per
layer and direction, src/glue/rnn_layer.cpp), the cases they hand to ATen's composite loop,
and the fused cells (`_thnn_fused_lstm_cell`, `_thnn_fused_gru_cell` and their backwards) that
the cell modules and that loop run. Strict mode: every op the recurrence touches runs natively."""

from __future__ import annotations

import copy

import foo_rs
import pytest
import torch
from helpers import FOO, assert_same
from torch import nn

Tol = dict[str, float]
TOL: dict[torch.dtype, Tol] = {
    torch.float64: {"atol": 1e-10, "rtol": 1e-9},
    torch.float32: {"atol": 2e-5, "rtol": 2e-5},
}


def _states(h: torch.Tensor | tuple[torch.Tensor, ...] | None, dev: str) -> object:
    if h is None:
        return None
    if isinstance(h, tuple):
        return tuple(t.detach().to(dev).requires_grad_() for t in h)
    return h.detach().to(dev).requires_grad_()


def _flat(x: object) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _flat(v)]
    return []


def run(
    module: nn.Module, x: torch.Tensor, h0: torch.Tensor | tuple[torch.Tensor, ...] | None, dev: str
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Forward and backward of a copy of `module` on `dev` with fixed upstream gradients:
    (outputs, gradients of x, h0 and every parameter)."""
    m = copy.deepcopy(module).to(dev)
    xs = x.detach().to(dev).requires_grad_()
    hs = _states(h0, dev)
    out = m(xs) if hs is None else m(xs, hs)
    outs = _flat(out)
    gen = torch.Generator().manual_seed(5)
    ups = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) for o in outs]
    torch.autograd.backward(outs, [u.to(dev) for u in ups])
    leaves = [xs, *_flat(hs)] + list(m.parameters())
    grads = [t.grad if t.grad is not None else torch.zeros_like(t) for t in leaves]
    return outs, grads


def compare(module: nn.Module, x: torch.Tensor, h0: object = None, **tol: float) -> None:
    tol = tol or TOL[x.dtype]
    c_out, c_grads = run(module, x, h0, "cpu")  # type: ignore[arg-type]
    f_out, f_grads = run(module, x, h0, "foo")  # type: ignore[arg-type]
    assert_same(f_out, c_out, **tol)
    assert_same(f_grads, c_grads, **tol)


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def make(cls: type[nn.Module], dtype: torch.dtype, seed: int = 0, **kw: object) -> nn.Module:
    torch.manual_seed(seed)
    return cls(**kw).to(dtype)  # type: ignore[arg-type]


# ---- nn.LSTM / nn.GRU ------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("with_h0", [False, True])
def test_rnn_layers(
    cls: type[nn.Module], dtype: torch.dtype, bidirectional: bool, batch_first: bool, bias: bool, with_h0: bool
) -> None:
    seq, batch, feat, hidden, layers = 5, 3, 4, 6, 2
    m = make(
        cls,
        dtype,
        input_size=feat,
        hidden_size=hidden,
        num_layers=layers,
        bias=bias,
        batch_first=batch_first,
        bidirectional=bidirectional,
    )
    x = randn(batch, seq, feat, dtype=dtype) if batch_first else randn(seq, batch, feat, dtype=dtype)
    h0: object = None
    if with_h0:
        h = randn(layers * (2 if bidirectional else 1), batch, hidden, dtype=dtype, seed=1)
        h0 = (h, randn(*h.shape, dtype=dtype, seed=2)) if cls is nn.LSTM else h
    compare(m, x, h0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_layer_split_over_threads(dtype: torch.dtype, bidirectional: bool) -> None:
    """Layers whose recurrent product is large enough (batch 8, hidden 100) for the whole-layer
    kernel to split the hidden units over a team of threads (src/kernels/rnn/layer.rs); 100
    units are not a whole number of its 8-unit blocks per thread."""
    m = make(nn.LSTM, dtype, input_size=12, hidden_size=100, num_layers=2, bidirectional=bidirectional)
    h = randn(2 * (2 if bidirectional else 1), 8, 100, dtype=dtype, seed=1)
    x, states = randn(6, 8, 12, dtype=dtype), (h, randn(*h.shape, dtype=dtype, seed=2))
    compare(m, x, states)
    # Without autograd the kernel skips the per-step states and workspaces: the same bits.
    f = copy.deepcopy(m).to(FOO)
    args = (x.to(FOO), tuple(t.to(FOO) for t in states))
    with torch.no_grad():
        inferred = _flat(f(*args))
    recorded = _flat(f(*args))
    assert all(torch.equal(a, b.detach()) for a, b in zip(inferred, recorded, strict=True))


@pytest.mark.parametrize(("input_size", "hidden"), [(40, 64), (520, 64), (12, 100)])
def test_lstm_layer_projects_its_input(input_size: int, hidden: int) -> None:
    """In float32 on AVX-512 the whole layer projects the input onto the gates itself, each
    thread onto its own units' (src/kernels/rnn/layer.rs, `MemberGates`): in blocks of 16 units
    where a thread's units are whole 32-column panels (64 units over 2 threads), row-major where
    not (100: 56 and 44 units); 520 inputs take two depth pieces. The CPU's results, and the same
    bits on 1 thread as on 2 (on other CPUs the caller's projection runs: the same checks)."""
    m = make(nn.LSTM, torch.float32, input_size=input_size, hidden_size=hidden, num_layers=2)
    x = randn(4, 32, input_size)
    compare(m, x)
    f = copy.deepcopy(m).to(FOO)
    outs = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            with torch.no_grad():
                outs.append([t.cpu() for t in _flat(f(x.to(FOO)))])
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(*outs, strict=True))


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
@pytest.mark.parametrize("with_h0", [False, True])
def test_unbatched(cls: type[nn.Module], with_h0: bool) -> None:
    m = make(cls, torch.float64, input_size=4, hidden_size=5, num_layers=2, bidirectional=True)
    h0: object = None
    if with_h0:
        h = randn(4, 5, dtype=torch.float64, seed=1)
        h0 = (h, randn(4, 5, dtype=torch.float64, seed=2)) if cls is nn.LSTM else h
    compare(m, randn(6, 4, dtype=torch.float64), h0)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lstm_projection(bidirectional: bool, dtype: torch.dtype) -> None:
    m = make(nn.LSTM, dtype, input_size=4, hidden_size=6, proj_size=3, num_layers=2, bidirectional=bidirectional)
    d = 2 if bidirectional else 1
    h0 = (randn(2 * d, 3, 3, dtype=dtype, seed=1), randn(2 * d, 3, 6, dtype=dtype, seed=2))
    compare(m, randn(5, 3, 4, dtype=dtype), None)
    compare(m, randn(5, 3, 4, dtype=dtype), h0)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_zero_batch(cls: type[nn.Module]) -> None:
    m = make(cls, torch.float64, input_size=4, hidden_size=5, num_layers=2)
    compare(m, torch.zeros(6, 0, 4, dtype=torch.float64))


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision(cls: type[nn.Module], dtype: torch.dtype) -> None:
    """Half types store gates, states and the workspace rounded and compute in float32, as
    CUDA does: compare with float32 CPU on the same (rounded) weights and inputs."""
    m = make(cls, dtype, input_size=8, hidden_size=16)
    x = randn(6, 4, 8, dtype=dtype)
    ref_out, ref_grads = run(copy.deepcopy(m).float(), x.float(), None, "cpu")
    out, grads = run(m, x, None, "foo")
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.float16 else {"atol": 8e-2, "rtol": 8e-2}
    assert_same([t.float() for t in out], ref_out, **tol)
    assert_same([t.float() for t in grads], ref_grads, **tol)


# ---- cells -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("batched", [True, False])
def test_cells(cls: type[nn.Module], dtype: torch.dtype, bias: bool, with_h0: bool, batched: bool) -> None:
    m = make(cls, dtype, input_size=4, hidden_size=7, bias=bias)
    lead = (3,) if batched else ()
    x = randn(*lead, 4, dtype=dtype)
    h0: object = None
    if with_h0:
        h = randn(*lead, 7, dtype=dtype, seed=1)
        h0 = (h, randn(*lead, 7, dtype=dtype, seed=2)) if cls is nn.LSTMCell else h
    compare(m, x, h0)


# ---- the ops themselves ----------------------------------------------------------------------
def sig(x: torch.Tensor) -> torch.Tensor:
    return 1 / (1 + torch.exp(-x))


def lstm_ref(ig: torch.Tensor, hg: torch.Tensor, cx: torch.Tensor, b1: torch.Tensor | None, b2: torch.Tensor | None):
    g = ig + hg + (b1 + b2 if b1 is not None and b2 is not None else 0)
    i, f, c, o = g.chunk(4, 1)
    i, f, c, o = sig(i), sig(f), torch.tanh(c), sig(o)
    cy = f * cx + i * c
    return o * torch.tanh(cy), cy, torch.cat([i, f, c, o], 1)


def gru_ref(ig: torch.Tensor, hg: torch.Tensor, hx: torch.Tensor, b1: torch.Tensor, b2: torch.Tensor):
    xr, xz, xn = (ig + b1).chunk(3, 1)
    yr, yz, yn = hg.chunk(3, 1)
    br, bz, bn = b2.chunk(3)
    r, z = sig(xr + yr + br), sig(xz + yz + bz)
    hn = yn + bn
    n = torch.tanh(xn + r * hn)
    return n + z * (hx - n), torch.cat([r, z, n, hx, hn], 1)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("transposed", [False, True])
def test_lstm_op_workspace_and_backward(bias: bool, transposed: bool) -> None:
    """Outputs and the workspace layout (CUDA's: activated i, f, g, o gates), contiguous and
    strided (transposed) operands; backward against the analytic gradient."""
    b, h = 5, 4
    d = torch.float64
    ig, hg = randn(b, 4 * h, dtype=d, seed=1), randn(b, 4 * h, dtype=d, seed=2)
    cx = randn(b, h, dtype=d, seed=3)
    b1, b2 = (randn(4 * h, dtype=d, seed=4), randn(4 * h, dtype=d, seed=5)) if bias else (None, None)

    def dev(t: torch.Tensor | None) -> torch.Tensor | None:
        if t is None:
            return None
        t = t.to(FOO)
        return t.t().contiguous().t() if transposed and t.dim() == 2 else t

    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(dev(ig), dev(hg), dev(cx), dev(b1), dev(b2))
    assert_same([hy, cy, ws], list(lstm_ref(ig, hg, cx, b1, b2)))
    assert hy.is_contiguous() and ws.is_contiguous()

    ghy, gcy = randn(b, h, dtype=d, seed=6), randn(b, h, dtype=d, seed=7)
    leaves = [t.clone().requires_grad_() for t in (ig, hg, cx)]
    rh, rc, _ = lstm_ref(*leaves, b1, b2)
    torch.autograd.backward([rh, rc], [ghy, gcy])
    gg, gcx, gb = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(dev(ghy), dev(gcy), dev(cx), cy, ws, bias)
    assert_same([gg, gcx], [leaves[0].grad, leaves[2].grad])
    if bias:
        assert_same(gb, leaves[0].grad.sum(0))
    else:
        assert gb is None
    # One of the two gradients may be missing (autograd passes None for an unused cy).
    gg1, gcx1, _ = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(dev(ghy), None, dev(cx), cy, ws, bias)
    gg0, gcx0, _ = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(
        dev(ghy), torch.zeros(b, h, dtype=d, device=FOO), dev(cx), cy, ws, bias
    )
    assert_same([gg1, gcx1], [gg0.cpu(), gcx0.cpu()])


@pytest.mark.parametrize("transposed", [False, True])
def test_gru_op_workspace_and_backward(transposed: bool) -> None:
    b, h = 5, 4
    d = torch.float64
    ig, hg = randn(b, 3 * h, dtype=d, seed=1), randn(b, 3 * h, dtype=d, seed=2)
    hx = randn(b, h, dtype=d, seed=3)
    b1, b2 = randn(3 * h, dtype=d, seed=4), randn(3 * h, dtype=d, seed=5)

    def dev(t: torch.Tensor) -> torch.Tensor:
        t = t.to(FOO)
        return t.t().contiguous().t() if transposed and t.dim() == 2 else t

    hy, ws = torch.ops.aten._thnn_fused_gru_cell(dev(ig), dev(hg), dev(hx), dev(b1), dev(b2))
    assert_same([hy, ws], list(gru_ref(ig, hg, hx, b1, b2)))

    ghy = randn(b, h, dtype=d, seed=6)
    leaves = [t.clone().requires_grad_() for t in (ig, hg, hx, b1, b2)]
    ry, _ = gru_ref(*leaves)
    ry.backward(ghy)
    got = torch.ops.aten._thnn_fused_gru_cell_backward(dev(ghy), ws, True)
    assert_same(list(got), [t.grad for t in leaves])
    _, _, _, gib, ghb = torch.ops.aten._thnn_fused_gru_cell_backward(dev(ghy), ws, False)
    assert gib is None and ghb is None


def test_zero_size_ops() -> None:
    d = torch.float32
    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(
        torch.empty(0, 8, device=FOO), torch.empty(0, 8, device=FOO), torch.empty(0, 2, device=FOO)
    )
    assert hy.shape == cy.shape == (0, 2) and ws.shape == (0, 8)
    _, _, gb = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(
        torch.empty(0, 2, device=FOO), None, torch.empty(0, 2, device=FOO), cy, ws, True
    )
    assert_same(gb, torch.zeros(8, dtype=d))
    hy, ws = torch.ops.aten._thnn_fused_gru_cell(
        torch.empty(3, 0, device=FOO), torch.empty(3, 0, device=FOO), torch.empty(3, 0, device=FOO)
    )
    assert hy.shape == (3, 0) and ws.shape == (3, 0)


def test_errors() -> None:
    ig = torch.zeros(2, 8, device=FOO)
    cx = torch.zeros(2, 2, device=FOO)
    lstm = torch.ops.aten._thnn_fused_lstm_cell
    with pytest.raises(RuntimeError, match="hidden_gates"):
        lstm(ig, torch.zeros(2, 4, device=FOO), cx)
    with pytest.raises(RuntimeError, match="prev_hidden"):
        lstm(ig, ig, torch.zeros(2, 3, device=FOO))
    with pytest.raises(RuntimeError, match="input_bias"):
        lstm(ig, ig, cx, torch.zeros(7, device=FOO), torch.zeros(7, device=FOO))
    with pytest.raises(RuntimeError, match="both"):
        lstm(ig, ig, cx, torch.zeros(8, device=FOO), None)
    with pytest.raises(RuntimeError, match="columns"):
        torch.ops.aten._thnn_fused_gru_cell(ig, ig, cx)
    with pytest.raises(RuntimeError, match="scalar type|type"):
        lstm(ig, ig, cx.double())
    with pytest.raises(NotImplementedError, match="Long"):
        lstm(ig.long(), ig.long(), cx.long())
    with pytest.raises(RuntimeError, match="workspace"):
        torch.ops.aten._thnn_fused_gru_cell_backward(cx, torch.zeros(2, 9, device=FOO), True)
    with pytest.raises(RuntimeError, match="workspace"):
        torch.ops.aten._thnn_fused_lstm_cell_backward_impl(cx, None, cx, cx, torch.zeros(2, 4, device=FOO), True)


def _count_delta(run: object) -> dict[str, int]:
    before = foo_rs.native_counts()
    run()  # type: ignore[operator]
    after = foo_rs.native_counts()
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def test_ops_ran_natively() -> None:
    """nn.LSTM / nn.GRU run the whole layers (one count per call, the cells inside not counted as
    ops); the cell modules run the fused cell ops."""

    def layers() -> None:
        for cls in (nn.LSTM, nn.GRU):
            m = make(cls, torch.float32, input_size=3, hidden_size=4).to(FOO)
            m(torch.randn(2, 1, 3, device=FOO))[0].sum().backward()

    got = _count_delta(layers)
    assert got.get("aten::lstm.input") == 1 and got.get("aten::gru.input") == 1, got
    assert not any("fused" in k for k in got), got

    def cells() -> None:
        for cls in (nn.LSTMCell, nn.GRUCell):
            m = make(cls, torch.float32, input_size=3, hidden_size=4).to(FOO)
            out = m(torch.randn(2, 3, device=FOO))
            (out[0] if isinstance(out, tuple) else out).sum().backward()

    got = _count_delta(cells)
    for op in (
        "aten::_thnn_fused_lstm_cell",
        "aten::_thnn_fused_lstm_cell_backward_impl",
        "aten::_thnn_fused_gru_cell",
        "aten::_thnn_fused_gru_cell_backward",
    ):
        assert got.get(op) == 1, (op, got)


def test_composite_cases() -> None:
    """Projections and empty batches go to ATen's composite loop (checked against CPU above):
    no layer count, the fused cells run per step instead."""
    m = make(nn.LSTM, torch.float32, input_size=4, hidden_size=6, proj_size=3).to(FOO)
    got = _count_delta(lambda: m(torch.randn(5, 2, 4, device=FOO))[0].sum().backward())
    assert "aten::lstm.input" not in got and got.get("aten::_thnn_fused_lstm_cell") == 5, got
    g = make(nn.GRU, torch.float32, input_size=4, hidden_size=6).to(FOO)
    got = _count_delta(lambda: g(torch.randn(5, 0, 4, device=FOO)))
    assert "aten::gru.input" not in got, got


def test_composite_errors_unchanged() -> None:
    """Inputs the layers do not take reach ATen's own checks (same exception, same message as the
    composite): a hidden state on another device, mismatched weight shapes."""
    m = make(nn.LSTM, torch.float32, input_size=4, hidden_size=6).to(FOO)
    x = torch.randn(5, 2, 4, device=FOO)
    h = torch.zeros(1, 2, 6)
    with pytest.raises(RuntimeError, match="same device"):
        torch._VF.lstm(x, (h, h), m._flat_weights, True, 1, 0.0, False, False, False)
    w = [t.detach() for t in m._flat_weights]
    w[1] = torch.zeros(24, 5, device=FOO)
    hf = h.to(FOO)
    with pytest.raises(RuntimeError, match="shape|size|mat"):
        torch._VF.lstm(x, (hf, hf), w, True, 1, 0.0, False, False, False)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_inference_mode(cls: type[nn.Module]) -> None:
    """Below autograd (inference mode) the backend key runs the same layers."""
    m = make(cls, torch.float32, input_size=4, hidden_size=6, num_layers=2, bidirectional=True).to(FOO)
    x = torch.randn(5, 3, 4, device=FOO)
    with torch.no_grad():
        want = [t.cpu() for t in _flat(m(x))]
    got: list[torch.Tensor] = []
    with torch.inference_mode():
        counts = _count_delta(lambda: got.extend(_flat(m(x))))
    assert counts.get(f"aten::{cls.__name__.lower()}.input") == 1, counts
    assert_same(got, want, atol=0, rtol=0)


def test_no_grad_keeps_no_workspace() -> None:
    """Under no_grad the layers keep nothing for a backward, even when the parameters require
    grad: the whole-layer LSTM then writes neither every step's cell states nor its gates (it
    wrote both, a [T, B, 4H] workspace, whenever a parameter required grad)."""
    steps, batch, hidden = 50, 8, 32
    m = nn.LSTM(4, hidden).to(FOO)
    assert all(p.requires_grad for p in m.parameters())
    x = torch.randn(steps, batch, 4, device=FOO)
    workspace = steps * batch * 4 * hidden * 4

    def peak(fn: object) -> tuple[int, torch.Tensor]:
        torch.foo.synchronize()
        base = torch.foo.memory_allocated()
        torch.foo.reset_peak_memory_stats()
        out = fn()  # type: ignore[operator]
        return torch.foo.max_memory_allocated() - base, out

    with torch.no_grad():
        inference, got = peak(lambda: m(x)[0])
    training, want = peak(lambda: m(x)[0])
    assert training - inference >= workspace, (training, inference)
    assert_same(got, want.detach().cpu(), atol=0, rtol=0)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_gradients_of_a_subset(cls: type[nn.Module]) -> None:
    """Only some inputs need gradients (frozen weights, an input without grad): the others are
    left alone, and the needed ones equal the CPU's."""
    m = make(cls, torch.float64, input_size=4, hidden_size=5, num_layers=2)
    x = randn(6, 3, 4, dtype=torch.float64)
    res = []
    for dev in ("cpu", "foo"):
        mm = copy.deepcopy(m).to(dev)
        mm.weight_hh_l0.requires_grad_(False)
        mm.bias_ih_l1.requires_grad_(False)
        xx = x.to(dev)
        mm(xx)[0].pow(2).sum().backward()
        assert mm.weight_hh_l0.grad is None and mm.bias_ih_l1.grad is None
        res.append([p.grad for p in mm.parameters() if p.requires_grad])
    assert_same(res[1], res[0], **TOL[torch.float64])


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_autocast(cls: type[nn.Module]) -> None:
    """Under autocast the layers run in bfloat16 (outputs and states bfloat16, as CUDA's fused RNN
    and the CPU's LSTM give; the CPU's GRU returns float32), values within bfloat16 rounding of
    the CPU's autocast run; gradients reach the float32 weights."""
    m = make(cls, torch.float32, input_size=8, hidden_size=16, num_layers=2)
    x = randn(6, 4, 8)
    outs = {}
    # The CPU's autocast LSTM is oneDNN's bfloat16 layer, which CPUs without AVX-512 lack ("could
    # not create a primitive descriptor" on a Zen 3): there the reference is the float32 run.
    cpu_bf16 = cls is not nn.LSTM or torch.ops.mkldnn._is_mkldnn_bf16_supported()
    for dev in ("cpu", "foo"):
        mm = copy.deepcopy(m).to(dev)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "foo" or cpu_bf16):
            outs[dev] = _flat(mm(x.to(dev)))
        if dev == "foo" or (cls is nn.LSTM and cpu_bf16):
            assert all(t.dtype == torch.bfloat16 for t in outs[dev]), dev
        outs[dev][0].float().sum().backward()
        assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in mm.parameters())
    assert_same([t.float() for t in outs["foo"]], [t.float() for t in outs["cpu"]], atol=5e-2, rtol=5e-2)


def test_profiler_shows_cell_kernels() -> None:
    m = make(nn.LSTM, torch.float32, input_size=3, hidden_size=4).to(FOO)
    x = torch.randn(3, 2, 3, device=FOO)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        m(x)[0].sum().backward()
    names = {e.name for e in prof.events()}
    assert "aten::lstm" in names and "aten::mm" in names, names


def test_double_backward() -> None:
    """With create_graph autograd differentiates the cells through composite ops instead."""
    m = make(nn.LSTM, torch.float64, input_size=3, hidden_size=4)
    x = randn(4, 2, 3, dtype=torch.float64)
    res = []
    for dev in ("cpu", "foo"):
        mm = copy.deepcopy(m).to(dev)
        xx = x.detach().to(dev).requires_grad_()
        (g,) = torch.autograd.grad(mm(xx)[0].pow(2).sum(), xx, create_graph=True)
        g.pow(2).sum().backward()
        res.append([g, xx.grad, *[p.grad for p in mm.parameters()]])
    assert_same(res[1], res[0], **TOL[torch.float64])


# ---- training --------------------------------------------------------------------------------
def train(dev: str, dtype: torch.dtype, steps: int = 20) -> list[float]:
    torch.manual_seed(0)
    model = nn.ModuleDict({"lstm": nn.LSTM(3, 8), "head": nn.Linear(8, 1)}).to(dtype)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(10, 6, 3, generator=gen, dtype=dtype)
    y = x.sum(-1, keepdim=True).cumsum(0).sin()
    model = model.to(dev)
    x, y = x.to(dev), y.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        out, _ = model["lstm"](x)
        loss = nn.functional.mse_loss(model["head"](out), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("dtype,gap", [(torch.float64, 1e-4), (torch.float32, 1e-3)])
def test_training_loss_curve(dtype: torch.dtype, gap: float) -> None:
    cpu, foo = train("cpu", dtype), train("foo", dtype)
    assert foo[-1] < 0.8 * foo[0]
    for c, f in zip(cpu, foo, strict=True):
        assert abs(f - c) <= gap * abs(c), (cpu, foo)


@pytest.mark.parametrize("grad", [False, True])
def test_lstm_zero_state_with_non_finite_weights(grad: bool) -> None:
    """From the default zero state the layer kernel skips the first step's product, taking its
    sums from the weight's packing: a weight row holding an infinity or a NaN must still give
    NaN there, as the CPU's product of zeros with it does (and finite rows exactly 0)."""
    torch.manual_seed(0)
    m = nn.LSTM(8, 256)
    with torch.no_grad():
        m.weight_hh_l0[5, 7] = float("inf")
        m.weight_hh_l0[3 * 256 + 34, 1] = float("nan")
    x = torch.randn(3, 33, 8)
    f = copy.deepcopy(m).to(FOO)
    with torch.set_grad_enabled(grad):
        out, (h, c) = m(x)
        f_out, (f_h, f_c) = f(x.to(FOO))
    assert out[0].isnan().sum() == 2 * 33
    for want, got in ((out, f_out), (h, f_h), (c, f_c)):
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)
