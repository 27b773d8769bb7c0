"""torch.compile on foo with the default backend (inductor), compared with eager foo and with
the CPU: values, gradients and 10-step loss curves of an MLP, a CNN and a transformer LM
(model and optimizer step compiled), fullgraph, dynamic shapes, max-autotune, autocast bf16,
random ops under a seed, recompilations and graph breaks, devices, memory statistics, and the
generated kernels themselves (the CPU's C++, run on foo buffers).

Compiling is slow on a small machine: the models are tiny, and inductor's cache lives in the
repository's build/ (ignored by git), so a second run reuses the compiled kernels and graphs.
Every test runs in strict mode (conftest.py): a CPU fallback of any op fails it.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Before inductor first asks for its cache directory (it keeps the first answer).
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(__file__).resolve().parents[1] / "build" / "inductor-cache"))

import foo_rs  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from compile_cases import Run, make_case, train  # noqa: E402
from foo_rs.compile.graph_options import foo_graph_options  # noqa: E402
from foo_rs.compile.teams import PRELUDE  # noqa: E402
from helpers import assert_same  # noqa: E402
from torch import nn  # noqa: E402


# Imported when a test runs, not when pytest collects this file: importing dynamo and inductor
# takes seconds and would touch every other test module's process state.
def _counters() -> Any:
    from torch._dynamo.utils import counters

    return counters


def run_and_get_code(fn: Callable[..., Any], *args: Any) -> tuple[Any, list[str]]:
    from torch._inductor.utils import run_and_get_code as run

    return run(fn, *args)


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    _counters().clear()
    yield
    torch._dynamo.reset()


def _close_runs(got: Run, want: Run, what: str, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    gaps = [abs(a - b) / max(abs(b), 1e-6) for a, b in zip(got.losses, want.losses)]
    assert max(gaps) < rtol, f"{what}: loss curves differ by {max(gaps):.2e}\n{got.losses}\n{want.losses}"
    for a, b in zip(got.first_grads, want.first_grads):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: f"{what} gradients: {m}")
    for a, b in zip(got.params, want.params):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: f"{what} parameters: {m}")


# --- the device interface ------------------------------------------------------------------


def test_device_interface_for_foo_and_foo_n():
    from torch._dynamo.device_interface import get_interface_for_device

    interface = get_interface_for_device("foo")
    assert get_interface_for_device("foo:1") is interface
    assert get_interface_for_device(torch.device("foo", 1)) is interface
    assert interface.is_available() and interface.device_count() == torch.foo.device_count()
    assert not interface.is_gpu()
    previous = interface.exchange_device(1)
    try:
        assert previous == 0 and interface.current_device() == 1
    finally:
        interface.maybe_exchange_device(previous)
    assert interface.current_device() == 0
    assert interface.get_raw_stream(0) == 0
    assert interface.current_stream() == torch.foo.current_stream()
    s = interface.Stream()
    with interface.stream(s):
        assert interface.current_stream() == s
    assert isinstance(interface.Event(), torch.Event) and interface.Event().device.type == "foo"
    interface.synchronize()
    assert interface.get_device_properties(1).index == 1
    assert interface.Worker.get_device_properties("foo:0").total_memory > 0
    assert interface.is_bf16_supported() and interface.is_dtype_supported(torch.complex64)
    assert not interface.is_dtype_supported(torch.float8_e4m3fn)
    assert interface.get_compute_capability() == ""
    assert interface.memory_allocated() == torch.foo.memory_allocated()
    assert set(interface.get_cache_system_info()) == {"foo_rs", "compile"}


def test_import_torch_stays_lazy_and_registers_on_dynamo_import():
    code = (
        "import sys, torch\n"
        "print('torch._dynamo' in sys.modules, 'torch._inductor' in sys.modules)\n"
        "from torch._dynamo.device_interface import get_interface_for_device\n"
        "print(get_interface_for_device('foo').__name__)\n"
        "from torch._dynamo.backends.registry import list_backends\n"
        "print('foo' in list_backends(exclude_tags=()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "FooInterface", "True"]


def test_backend_named_foo_is_inductor():
    """torch.compile(backend="foo"), the spelling of PyTorch's reference backend: inductor's
    C++ kernels, counted and guarded like any backend."""
    from torch._dynamo.testing import CompileCounterWithBackend

    counter = CompileCounterWithBackend("foo")
    fn = torch.compile(lambda t: torch.relu((t + 1) * 2).sum(1), backend=counter, fullgraph=True)
    x = torch.randn(4, 5, device="foo")
    assert_same(fn(x), torch.relu((x.cpu() + 1) * 2).sum(1))
    fn(torch.randn(4, 5, device="foo"))
    assert counter.frame_count == 1
    _, (code,) = run_and_get_code(torch.compile(lambda t: t.sin() + 1, backend="foo"), x)
    assert "cpp_fused" in code and "device='foo" in code


def test_fake_tensors_propagate_foo_ops():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.randn(4, 8, device="foo"))
        y = torch.nn.functional.layer_norm(x @ x.T, (4,)).softmax(-1).argmax(0)
    assert y.device == torch.device("foo:0") and y.shape == (4,) and y.dtype == torch.int64


def test_fake_convolution_has_foos_layout():
    """foo's convolution is channels-last when its input or weight is (as the CPU's); the fake
    one predicts that, and a compiled channels-last convolution returns it."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch.manual_seed(0)
    conv = nn.Conv2d(3, 8, 3, padding=1)
    x = torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last)
    real = conv.to("foo")(x.to("foo"))
    assert real.is_contiguous(memory_format=torch.channels_last)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = conv(mode.from_tensor(x.to("foo")))
    assert fake.stride() == real.stride()
    got = torch.compile(conv)(x.to("foo"))
    assert got.stride() == real.stride()
    assert_same(got, conv.cpu()(x).detach(), atol=1e-5, rtol=1e-5)


def test_compiled_convolutions_run_channels_last_with_foos_gradient_layouts():
    """As on the CPU, inductor makes a foo graph's convolutions channels-last (even with few
    channels, where its cuDNN heuristic keeps NCHW; read from the generated code: under a
    Python dispatch mode the step ran NCHW convolutions): the fake backward must predict the
    gradients' layouts foo gives, which inductor asserts (before, an AssertionError on the
    strides of convolution_backward's result), and values and gradients are the CPU's."""
    assert foo_graph_options({"foo"})["force_layout_optimization"]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 8, 3, stride=2, padding=1))
    x = torch.randn(4, 3, 10, 10)
    compiled = torch.compile(copy.deepcopy(model).to("foo"))
    xf = x.to("foo").requires_grad_()
    y, code = run_and_get_code(compiled, xf)
    # The first convolution's result, as the generated code checks it: channels-last.
    assert "(4, 16, 10, 10), (1600, 1, 160, 16)" in "\n".join(code)
    y.square().sum().backward()
    xc = x.clone().requires_grad_()
    want = model(xc)
    want.square().sum().backward()
    assert_same(y.detach(), want.detach(), atol=1e-5, rtol=1e-5)
    assert_same(xf.grad, xc.grad, atol=1e-5, rtol=1e-5)
    for got, ref in zip(compiled.parameters(), model.parameters()):
        assert_same(got.grad, ref.grad, atol=1e-4, rtol=1e-4)


# --- the issue's examples ------------------------------------------------------------------


def test_issue_example():
    x = torch.ones(3, device="foo")
    got = torch.compile(lambda x: x.sin() + 1)(x)
    assert_same(got, torch.ones(3).sin() + 1)


@pytest.mark.parametrize("name", ["mlp", "cnn", "lm"])
def test_training_matches_eager_foo_and_cpu(name: str):
    """Model (fullgraph) and SGD's opt.step compiled: 10 steps of loss, the first gradients and
    the final weights against eager foo and eager CPU, from the same weights and batches."""
    case = make_case(name)
    compiled = train(case, "foo", compiled=True)
    _close_runs(compiled, train(case, "foo", compiled=False), f"{name} compiled foo vs eager foo")
    _close_runs(compiled, train(case, "cpu", compiled=False), f"{name} compiled foo vs eager CPU")
    assert compiled.losses[-1] < compiled.losses[0]  # it trains


def test_transformer_adamw_loss_curve():
    """AdamW's compiled step: the loss curve (weights are not compared: Adam turns the rounding
    noise of gradients that are zero in exact arithmetic, such as the attention's key bias,
    into full-size steps, differently on every backend)."""
    case = make_case("lm")
    compiled = train(case, "foo", compiled=True, optimizer="adamw")
    for reference in (train(case, "foo", compiled=False, optimizer="adamw"),
                      train(case, "cpu", compiled=False, optimizer="adamw")):
        gaps = [abs(a - b) / abs(b) for a, b in zip(compiled.losses, reference.losses)]
        assert max(gaps) < 1e-4, (compiled.losses, reference.losses)
    assert compiled.losses[-1] < compiled.losses[0]


def test_inference_outputs_match_cpu():
    # Eval mode under no_grad, where nn.TransformerEncoderLayer may take its fast path
    # (_transformer_encoder_layer_fwd, a foo op): strict mode proves nothing falls back.
    case = make_case("lm")
    model = case.model.eval()
    x = case.batches[0][0]
    with torch.no_grad():
        want = model(x)
        got = torch.compile(model.to("foo"))(x.to("foo"))
    assert_same(got, want, atol=1e-5, rtol=1e-5)


# --- modes ---------------------------------------------------------------------------------


def test_dynamic_shapes_compile_once():
    model = make_case("mlp").model.to("foo")
    compiled = torch.compile(model, dynamic=True)
    for n in (3, 5, 8, 13):
        x = torch.randn(n, 32)
        assert_same(compiled(x.to("foo")), model.cpu()(x).detach(), atol=1e-5, rtol=1e-5)
        model.to("foo")
    assert _counters()["stats"]["unique_graphs"] == 1


def test_max_autotune_no_cudagraphs():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    x = torch.randn(4, 16)
    want = model(x).detach()
    got = torch.compile(model.to("foo"), mode="max-autotune-no-cudagraphs")(x.to("foo"))
    assert_same(got, want, atol=1e-5, rtol=1e-5)


def test_autocast_bfloat16():
    case = make_case("lm")
    x, y = case.batches[0]
    results = {}
    for device in ("cpu", "foo"):
        model = case.model.to(device)
        with torch.autocast(device, dtype=torch.bfloat16):
            eager = model(x.to(device))
            compiled = torch.compile(model)(x.to(device))
            loss = case.loss(compiled, y.to(device))
        loss.backward()
        assert compiled.dtype == torch.bfloat16
        torch.testing.assert_close(compiled.float().cpu(), eager.float().cpu(), atol=2e-2, rtol=2e-2)
        results[device] = (compiled.float().cpu(), [p.grad.cpu() for p in model.parameters()])
        model.zero_grad(set_to_none=True)
        torch._dynamo.reset()
    torch.testing.assert_close(results["foo"][0], results["cpu"][0], atol=2e-2, rtol=2e-2)
    for a, b in zip(results["foo"][1], results["cpu"][1]):
        torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2)


# --- random ops ----------------------------------------------------------------------------


def _random_model(x: torch.Tensor) -> torch.Tensor:
    h = nn.functional.dropout(x.relu(), p=0.3, training=True)
    return h * torch.rand_like(h) + torch.randn(x.shape, device=x.device) + torch.bernoulli(torch.full_like(x, 0.5))


def test_random_ops_reproduce_eager_foo_under_a_seed():
    x = torch.randn(64, 32, device="foo", requires_grad=True)
    torch.manual_seed(7)
    eager = _random_model(x)
    (eager_grad,) = torch.autograd.grad(eager.sum(), x)
    compiled = torch.compile(_random_model)
    torch.manual_seed(7)
    got = compiled(x)
    (got_grad,) = torch.autograd.grad(got.sum(), x)
    assert torch.equal(got.cpu(), eager.cpu()) and torch.equal(got_grad.cpu(), eager_grad.cpu())
    torch.manual_seed(8)
    assert not torch.equal(compiled(x).cpu(), eager.cpu())  # a new seed draws new numbers


def test_transformer_dropout_reproduces_eager_foo():
    """Dropout inside attention and feed-forward (on non-contiguous views): the compiled layer's
    output and gradients equal eager foo's under the same seed."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.2, batch_first=True).to("foo")
    x = torch.randn(4, 8, 32, device="foo")
    results = []
    for fn in (layer, torch.compile(layer)):
        torch.manual_seed(5)
        out = fn(x)
        grads = torch.autograd.grad(out.pow(2).sum(), list(layer.parameters()))
        results.append((out.detach().cpu(), [g.cpu() for g in grads]))
    (eager, eager_grads), (got, got_grads) = results
    torch.testing.assert_close(got, eager, atol=1e-5, rtol=1e-5)
    for a, b in zip(got_grads, eager_grads):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_inductor_rng_on_request():
    """options={"fallback_random": False} keeps inductor's own RNG (seeded from foo's
    generator): still deterministic under a seed, not eager's numbers."""
    compiled = torch.compile(lambda x: x + torch.rand_like(x), options={"fallback_random": False})
    x = torch.zeros(1024, device="foo")
    torch.manual_seed(3)
    a = compiled(x)
    torch.manual_seed(3)
    b = compiled(x)
    torch.manual_seed(3)
    eager = x + torch.rand_like(x)
    assert torch.equal(a.cpu(), b.cpu()) and not torch.equal(a.cpu(), eager.cpu())
    assert 0.45 < a.mean().item() < 0.55


# --- recompilations and graph breaks -------------------------------------------------------


def _compiles(fn: Callable[[torch.Tensor], torch.Tensor], inputs: list[torch.Tensor]) -> int:
    torch._dynamo.reset()
    _counters().clear()
    compiled = torch.compile(fn)
    for x in inputs:
        compiled(x)
    return _counters()["stats"]["unique_graphs"]


def test_recompilations_as_on_cpu():
    model = make_case("mlp").model
    shapes = [(16, 32), (16, 32), (8, 32), (4, 32), (4, 32)]  # static, then one dynamic recompile
    counts = {}
    for device in ("cpu", "foo"):
        model.to(device)
        counts[device] = _compiles(model, [torch.randn(s, device=device) for s in shapes])
    assert counts["foo"] == counts["cpu"] == 2


@pytest.mark.parametrize("name", ["mlp", "cnn", "lm"])
def test_graph_breaks_no_more_than_cpu(name: str):
    case = make_case(name, steps=1)
    x, y = case.batches[0]
    breaks = {}
    for device in ("cpu", "foo"):
        model = case.model.to(device)
        opt = torch.optim.AdamW(model.parameters(), foreach=True)

        def step(x: torch.Tensor, y: torch.Tensor, model: nn.Module = model,
                 opt: torch.optim.Optimizer = opt) -> torch.Tensor:
            loss = case.loss(model(x), y)
            loss.backward()
            opt.step()
            return loss

        breaks[device] = torch._dynamo.explain(step)(x.to(device), y.to(device)).graph_break_count
        torch._dynamo.reset()
    assert breaks["foo"] <= breaks["cpu"], breaks


# --- devices, memory, generated code -------------------------------------------------------


def test_second_device():
    fn = torch.compile(lambda a, b: (a @ b).relu() + a.sum(0))
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    before = torch.foo.memory_allocated(1)
    got = fn(a.to("foo:1"), b.to("foo:1"))
    assert got.device == torch.device("foo:1")
    assert_same(got, (a @ b).relu() + a.sum(0), atol=1e-5, rtol=1e-5)
    assert torch.foo.memory_allocated(1) > before and torch.foo.current_device() == 0


def test_buffers_come_from_foos_allocator():
    fn = torch.compile(lambda x: ((x.sin() @ x).cos() @ x).tanh())
    x = torch.randn(128, 128, device="foo")
    _, (code,) = run_and_get_code(fn, x)
    # Allocated by foo_rs._C._empty_strided (empty_strided_foo), inductor's empty_strided_cpu.
    buffers = code.split("def call(")[1].count("empty_strided_foo(")
    assert buffers >= 2
    allocations = torch.foo.memory_stats()["allocation.all.allocated"]
    torch.foo.reset_peak_memory_stats()
    base = torch.foo.memory_allocated()
    out = fn(x)
    # Each buffer of the graph is one allocation of foo's allocator, and the output stays.
    assert torch.foo.memory_stats()["allocation.all.allocated"] - allocations == buffers
    assert torch.foo.max_memory_allocated() - base >= 2 * out.untyped_storage().nbytes()
    assert torch.foo.memory_allocated() - base == out.untyped_storage().nbytes()


def test_wrapper_allocation_function():
    # foo_rs._C._empty_strided, the generated wrappers' empty_strided_foo: the sizes, strides,
    # dtype and device asked for, from foo's allocator; bad arguments raise, as torch's do.
    from foo_rs._C import _empty_strided

    t = _empty_strided((2, 3, 4), (1, 8, 2), torch.float16, 1)
    assert (t.device, t.dtype, t.shape, t.stride()) == (torch.device("foo:1"), torch.float16, (2, 3, 4), (1, 8, 2))
    with pytest.raises(ValueError, match="2 sizes but 1 strides"):
        _empty_strided((2, 3), (1,), torch.float32, 0)
    with pytest.raises(TypeError, match="tuples"):
        _empty_strided([2], (1,), torch.float32, 0)
    with pytest.raises(TypeError, match="torch.dtype"):
        _empty_strided((2,), (1,), "float32", 0)
    with pytest.raises(RuntimeError, match="Invalid device index 7"):
        _empty_strided((2,), (1,), torch.float32, 7)
    with pytest.raises(RuntimeError, match="negative dimension"):
        _empty_strided((-2,), (1,), torch.float32, 0)
    assert torch.foo.current_device() == 0


def test_generated_code_runs_cpp_kernels_and_foo_ops_in_place():
    foo_rs.reset_op_counts()
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to("foo")
    with torch.no_grad():
        _, (code,) = run_and_get_code(torch.compile(model), torch.randn(8, 16, device="foo"))
    assert "cpp_fused_gelu" in code and "extern_kernels.addmm" in code  # C++ kernel, foo's addmm
    assert "empty_strided_foo(" in code and "empty_strided(" not in code.split("def call(")[1]
    assert "cpu" not in re.sub(r"cpp_|empty_strided_cpu\w* = .*|_cpu\b", "", code.split("async_compile.wait")[1])
    assert foo_rs.native_counts().get("aten::addmm.out", 0) == 2 and not foo_rs.fallback_counts()


def test_attention_calls_foos_fused_kernel():
    """Compiled scaled_dot_product_attention (causal, dropout) calls foo's fused kernel forward
    and backward, as eager foo does, and gives eager foo's output and gradients under a seed."""
    F = nn.functional
    q, k, v = (torch.randn(2, 4, 16, 8, device="foo", requires_grad=True) for _ in range(3))

    def step(fn: Callable[..., Any]) -> list[torch.Tensor]:
        torch.manual_seed(3)
        out = fn(q, k, v)
        return [out.detach(), *torch.autograd.grad(out.square().sum(), [q, k, v])]

    def attention(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(a, b, c, dropout_p=0.25, is_causal=True)

    eager = step(attention)
    foo_rs.reset_op_counts()
    got, code = run_and_get_code(step, torch.compile(attention))
    assert len(code) == 2, "a forward and a backward graph"
    assert "_scaled_dot_product_fused_attention_overrideable.default" in code[0]
    assert "_scaled_dot_product_fused_attention_overrideable_backward.default" in code[1]
    assert "bmm" not in code[0] + code[1] and "native_dropout" not in code[0]
    counts = foo_rs.native_counts()
    assert counts.get("aten::_scaled_dot_product_fused_attention_overrideable", 0) == 1, counts
    for a, b in zip(got, eager):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def _kernels(code: str, prelude: bool = False) -> list[str]:
    """The C++ kernels of a graph's Python wrapper, without foo's OpenMP prelude (teams.py)
    unless asked."""
    found = re.findall(r"async_compile\.cpp_pybinding\(\[.*?\], r'''(.*?)'''\)", code, re.S)
    return found if prelude else [k.replace(PRELUDE, "") for k in found]


CPU_LIKE = {
    "argmax of a permuted tensor": (lambda x: x.permute(2, 0, 1).argmax(), (4, 5, 6)),
    "max-pool indices, transposed": (lambda x: nn.functional.max_pool2d(x.transpose(2, 3), 3, 2, return_indices=True),
                                     (2, 3, 9, 9)),
    "variance, two-step and Welford": (lambda x: x.var(1) + x.std(0).sum(), (64, 1100)),
    "division by a constant": (lambda x: x.mean() / 7.0 + x / 3.0, (33,)),
    "bf16 softmax": (lambda x: torch.softmax(x.to(torch.bfloat16) * 3, -1).float(), (8, 33)),
}


@pytest.mark.parametrize("name", list(CPU_LIKE))
def test_kernels_are_the_cpus(name: str):
    """foo graphs compile to exactly the CPU's C++ kernels, and compute the CPU's results
    (inductor's "cpu" decisions: argreduce indices, two-step variance, true division, ...)."""
    fn, shape = CPU_LIKE[name]
    torch.manual_seed(0)
    x = torch.randn(shape)
    # The CPU graph under the options foo graphs get (graph_options.py).
    want, (cpu_code,) = run_and_get_code(torch.compile(fn, options=foo_graph_options({"foo"})), x)
    torch._dynamo.reset()
    got, (foo_code,) = run_and_get_code(torch.compile(fn), x.to("foo"))
    assert _kernels(foo_code) == _kernels(cpu_code) and _kernels(cpu_code)
    assert_same(got, want, atol=0, rtol=0)


def test_foo_kernels_run_their_openmp_regions_on_foos_threads():
    """foo's kernels are the CPU's parallel OpenMP kernels, compiled with foo's prelude: each
    region runs on foo's team runtime (not libgomp, whose threads would compete with foo's
    pool), and with more than one thread on all of foo's helpers it asks for."""
    fn = lambda x: (x * 2).relu().sum(0)  # noqa: E731
    x = torch.randn(512, 512)
    torch._dynamo.reset()
    compiled = torch.compile(fn)
    got, (foo_code,) = run_and_get_code(compiled, x.to("foo"))
    (kernel,) = _kernels(foo_code, prelude=True)
    assert PRELUDE in kernel and "#pragma omp parallel" in kernel
    assert_same(got, fn(x), atol=1e-4, rtol=1e-5)
    xf = x.to("foo")
    before = foo_rs._C.team_region_counts()
    for _ in range(50):
        compiled(xf)
    regions, shared = (a - b for a, b in zip(foo_rs._C.team_region_counts(), before))
    assert regions == 50  # one region per call, each through foo's runtime
    # Each with the whole team (its size fixes how the reduction splits, so its bits).
    assert shared == (50 if min(foo_rs._C.num_threads(), torch.get_num_threads()) > 1 else 0)


def test_foo_threads_above_torchs_keep_compiled_reductions_in_bounds():
    """FOO_RS_NUM_THREADS above PyTorch's thread count: a compiled reduction's per-thread partial
    sums are sized by PyTorch's count (OpenMP's default team), and foo's teams stay within it."""
    code = (
        "import torch, foo_rs\n"
        "torch.set_num_threads(2)\n"
        "x = torch.randn(1 << 20)\n"
        "f = torch.compile(lambda t: (t * t).sum(0) + t.amax())\n"
        "for _ in range(20):\n"
        "    got = f(x.to('foo')).cpu()\n"
        "torch.testing.assert_close(got, (x * x).sum(0) + x.amax(), rtol=1e-5, atol=1e-3)\n"
        "assert foo_rs._C.num_threads() == 8 and torch.get_num_threads() == 2\n"
    )
    env = {**os.environ, "FOO_RS_NUM_THREADS": "8"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]


# --- the C++ wrapper: cpp_wrapper=True and AOTInductor ------------------------------------

# The native op each model's extern kernels must run as (through the dispatcher, not a C shim).
_EXTERN_OPS = {"mlp": "aten::addmm.out", "cnn": "aten::convolution_overrideable"}


def _eval_case(name: str) -> tuple[nn.Module, torch.Tensor]:
    case = make_case(name, steps=1)
    return case.model.eval().to("foo"), case.batches[0][0].to("foo")


def _check_native(name: str, outputs: Any, want: torch.Tensor) -> None:
    got = outputs[0] if isinstance(outputs, (list, tuple)) else outputs
    assert got.device == torch.device("foo", 0) and want.device == torch.device("foo", 0)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    counts = foo_rs.native_counts()
    assert counts.get(_EXTERN_OPS[name], 0) >= 1, counts
    assert not foo_rs.fallback_counts()


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_cpp_wrapper_forward_runs_foos_ops(name: str):
    """cpp_wrapper=True: the C++ wrapper allocates buffers on foo (PrivateUse1) and calls the
    extern kernels as foo's ops through the dispatcher, never a CPU C shim; eager foo's values."""
    model, x = _eval_case(name)
    with torch.no_grad():
        want = model(x)
        foo_rs.reset_op_counts()
        got, code = run_and_get_code(torch.compile(model, options={"cpp_wrapper": True}), x)
    _check_native(name, got, want)
    source = "\n".join(code)
    assert "cached_torch_device_type_privateuse1" in source and "aoti_torch_empty_strided(" in source
    assert "c10::Dispatcher::singleton()" in source and "aoti_torch_cpu_" not in source


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_cpp_wrapper_training_matches_eager_foo(name: str):
    """The forward and backward graphs under cpp_wrapper=True: a few SGD steps give eager foo's
    losses, gradients and weights."""
    case = make_case(name, steps=3)
    got = train(case, "foo", compiled=True, options={"cpp_wrapper": True})
    _close_runs(got, train(case, "foo", compiled=False), f"{name} cpp_wrapper vs eager foo")


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_aoti_package_runs_on_foo(name: str, tmp_path: Path):
    """aoti_compile_and_package of a model exported on foo, loaded with aoti_load_package (foo's
    model runner, src/glue/aoti_runner.cpp): outputs on foo, eager foo's values, foo's native
    kernels (strict mode: no CPU fallback), foo's threads."""
    model, x = _eval_case(name)
    with torch.no_grad():
        want = model(x)
    exported = torch.export.export(model, (x,))
    path = torch._inductor.aoti_compile_and_package(exported, package_path=str(tmp_path / f"{name}.pt2"))
    loaded = torch._inductor.aoti_load_package(path)
    foo_rs.reset_op_counts()
    allocated = torch.foo.memory_stats()["allocation.all.allocated"]
    regions = foo_rs._C.team_region_counts()[0]
    with torch.no_grad():
        got = loaded(x)
    _check_native(name, got, want)
    assert torch.foo.memory_stats()["allocation.all.allocated"] > allocated  # buffers from foo's allocator
    # The package's kernels run their OpenMP regions on foo's threads (teams.py), loaded from C++.
    assert foo_rs._C.team_region_counts()[0] > regions
    # A second input of the same shape: the package is not a recording of the first.
    x2 = torch.randn_like(x)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x2), model(x2), atol=1e-5, rtol=1e-5)
