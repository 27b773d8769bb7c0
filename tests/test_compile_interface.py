"""torch.compile on foo: dynamo's device interface for "foo" and the "foo" backend (the captured
graph run by foo's eager kernels), compared with eager foo and the CPU."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch._dynamo
from torch._dynamo.backends.registry import list_backends
from torch._dynamo.device_interface import get_interface_for_device
from torch._dynamo.testing import CompileCounterWithBackend


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_backend_and_interface_are_registered():
    assert "foo" in list_backends(exclude_tags=())
    iface = get_interface_for_device("foo")
    assert iface is get_interface_for_device(torch.device("foo:1"))
    assert iface.device_count() == torch.foo.device_count() and iface.is_available()
    assert iface.current_device() == torch.foo.current_device()
    with torch.foo.device(1):
        assert iface.current_device() == 1
    assert iface.exchange_device(1) == 0 and torch.foo.current_device() == 1
    assert iface.maybe_exchange_device(0) == 1 and torch.foo.current_device() == 0
    assert iface.maybe_exchange_device(99) == 0  # out of range: no change
    major, minor = torch.foo.get_device_capability()
    assert iface.get_compute_capability() == 10 * major + minor
    assert iface.Worker.get_device_properties(0) == torch.foo.get_device_properties(0)
    assert iface.get_multi_processor_count() == torch.foo.get_device_properties().multi_processor_count
    s = iface.Stream()
    assert isinstance(s, torch.Stream) and s.device.type == "foo"
    with iface.stream(s):
        assert iface.current_stream() == s and iface.get_raw_stream(0) == s.stream_id
    e = iface.Event(enable_timing=True)
    e.record()
    assert e.device.type == "foo" and e.query()
    assert iface.is_bf16_supported(including_emulation=True)
    assert not iface.is_gpu() and not iface.is_triton_capable()


def test_registration_waits_for_dynamo():
    # `import torch` autoloads foo_rs: it must not import dynamo (seconds) to register with it.
    code = (
        "import sys, torch, foo_rs\n"
        "assert 'torch._dynamo' not in sys.modules, 'foo_rs imported dynamo'\n"
        "from torch._dynamo.device_interface import get_interface_for_device\n"
        "from torch._dynamo.backends.registry import list_backends\n"
        "assert get_interface_for_device('foo').__name__ == 'FooInterface'\n"
        "assert 'foo' in list_backends(exclude_tags=())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_compiled_functions_match_eager():
    x = torch.randn(4, 5, device="foo")

    @torch.compile(backend="foo", fullgraph=True)
    def f(t):
        return torch.relu((t + 1) * 2).sum(dim=1)

    assert torch.allclose(f(x).cpu(), torch.relu((x.cpu() + 1) * 2).sum(dim=1))
    assert f(x).device == x.device


def test_guards_recompile_on_shape_change_only():
    counter = CompileCounterWithBackend("foo")

    @torch.compile(backend=counter)
    def f(t):
        return t * 3

    f(torch.randn(4, device="foo"))
    f(torch.randn(4, device="foo"))
    assert counter.frame_count == 1
    f(torch.randn(8, device="foo"))
    assert counter.frame_count == 2


def test_fake_tensors_keep_the_foo_device():
    devices = []

    def capture(gm, example_inputs):
        devices.extend(t.device for t in example_inputs if isinstance(t, torch.Tensor))
        return gm.forward

    @torch.compile(backend=capture, fullgraph=True)
    def f(t):
        return t + 1

    f(torch.randn(3, device="foo:1"))
    assert devices == [torch.device("foo:1")]
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fake = torch.empty(3, 3, device="foo")
        assert (fake + 1).device.type == "foo"


def test_autograd_modules_autocast_and_graph_breaks():
    x = torch.randn(4, device="foo", requires_grad=True)
    loss = torch.compile(lambda t: (t * 2).sum(), backend="foo")(x)
    loss.backward()
    assert torch.equal(x.grad.cpu(), torch.full((4,), 2.0))

    m = torch.nn.Linear(4, 3).to("foo")
    inp = torch.randn(2, 4, device="foo")
    assert torch.allclose(torch.compile(m, backend="foo")(inp).cpu(), m(inp).cpu())

    @torch.compile(backend="foo")
    def mixed(a, b):
        with torch.autocast("foo", dtype=torch.bfloat16):
            return a @ b

    assert mixed(torch.randn(2, 3, device="foo"), torch.randn(3, 3, device="foo")).dtype == torch.bfloat16

    counter = CompileCounterWithBackend("foo")

    @torch.compile(backend=counter)
    def broken(t):
        u = t + 1
        torch._dynamo.graph_break()
        return u.cpu() * 2

    out = broken(torch.ones(2, device="foo"))
    assert out.device.type == "cpu" and out.tolist() == [4.0, 4.0] and counter.frame_count == 2


def test_backend_refuses_other_devices_inputs():
    @torch.compile(backend="foo")
    def f(t):
        return t + 1

    with pytest.raises(Exception, match="foo graphs take foo"):
        f(torch.randn(2, device="meta"))
