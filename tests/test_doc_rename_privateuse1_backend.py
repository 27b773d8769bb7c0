"""Every statement of PyTorch's documentation of torch.utils.rename_privateuse1_backend
(../shared/seeds/000-002), as a test of the foo backend."""

from __future__ import annotations

import os
import subprocess
import sys

import foo_rs
import pytest
import torch


def _run_fresh(code: str, **env: str) -> list[str]:
    """Runs ``code`` in a new interpreter (torch autoloads foo_rs); returns its stdout lines."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, **env), timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


def test_foo_is_an_ordinary_device_string():
    # "You can now use "foo" as an ordinary device string in python."
    assert torch.device("foo").type == "foo"
    assert torch.device("foo:1").index == 1
    assert str(torch.device("foo", 0)) == "foo:0"
    assert torch._C._get_privateuse1_backend_name() == "foo"


def test_doc_example_ones():
    # ">>> a = torch.ones(2, device="foo")" — works because the kernels are implemented (strict mode).
    a = torch.ones(2, device="foo")
    assert a.device == torch.device("foo:0")
    assert a.cpu().tolist() == [1.0, 1.0]


def test_doc_example_verbatim_in_a_fresh_process():
    # The example as written, in a process where only `import torch` ran before it (the kernels
    # of step 1 arrive through torch's backend autoload). Also checks, before anything in the
    # process could change it, that "the default dtype is torch.float16" for AMP on foo.
    code = """
import torch
print(torch.foo.get_autocast_dtype(), torch.get_autocast_dtype("foo"), torch.foo.is_autocast_enabled())
torch.utils.rename_privateuse1_backend("foo")
# This will work, assuming that you've implemented the right C++ kernels
# to implement torch.ones.
a = torch.ones(2, device="foo")
print(a.device, a.cpu().tolist())
"""
    assert _run_fresh(code) == ["torch.float16 torch.float16 False", "foo:0 [1.0, 1.0]"]


def test_rename_only_once_per_process():
    # "this API can only be called once per process. Attempting to change the external backend
    # after it's already been set will result in an error."
    with pytest.raises(RuntimeError, match="has already been set! Current backend: foo"):
        torch.utils.rename_privateuse1_backend("bar")
    assert torch._C._get_privateuse1_backend_name() == "foo"
    # Naming it "foo" again changes nothing, so it is harmless.
    torch.utils.rename_privateuse1_backend("foo")
    assert torch._C._get_privateuse1_backend_name() == "foo"
    assert str(torch._C._autograd.DeviceType.PrivateUse1) == "DeviceType.FOO"
    assert torch.ones(2, device="foo").is_foo
    # foo_rs's own registration is idempotent (importing twice is harmless).
    foo_rs.register()
    assert torch._C._get_privateuse1_backend_name() == "foo"


def test_device_module_registered():
    # "register a custom backend module with torch._register_device_module("foo", BackendModule)"
    import foo_rs.device_module as mod

    assert torch.foo is mod
    with pytest.raises(RuntimeError, match="already"):
        torch._register_device_module("foo", mod)


# ---- Note(AMP) -------------------------------------------------------------------------------


def test_get_amp_supported_dtype():
    dtypes = torch.foo.get_amp_supported_dtype()
    assert isinstance(dtypes, list) and all(isinstance(d, torch.dtype) for d in dtypes)
    assert torch.float16 in dtypes and torch.bfloat16 in dtypes


def test_autocast_enabled_and_dtype():
    assert torch.foo.is_autocast_enabled() is False
    # "the default dtype is torch.float16"
    assert torch.foo.get_autocast_dtype() == torch.float16
    try:
        torch.foo.set_autocast_enabled(True)
        assert torch.foo.is_autocast_enabled() is True
        assert torch.is_autocast_enabled("foo") is True
        # "set the supported dtype ... the dtype be contained in the dtypes got from get_amp_supported_dtype"
        torch.foo.set_autocast_dtype(torch.bfloat16)
        assert torch.foo.get_autocast_dtype() == torch.bfloat16
        assert torch.get_autocast_dtype("foo") == torch.bfloat16
        with pytest.raises(ValueError, match="supports"):
            torch.foo.set_autocast_dtype(torch.float64)
        assert torch.foo.get_autocast_dtype() == torch.bfloat16
    finally:
        torch.foo.set_autocast_enabled(False)
        torch.foo.set_autocast_dtype(torch.float16)
    assert torch.foo.is_autocast_enabled() is False


def test_torch_autocast_context_uses_the_module():
    with torch.autocast("foo", dtype=torch.bfloat16):
        assert torch.foo.is_autocast_enabled()
        assert torch.foo.get_autocast_dtype() == torch.bfloat16
    assert not torch.foo.is_autocast_enabled()
    # An unsupported dtype is refused by torch.autocast through get_amp_supported_dtype.
    with pytest.warns(UserWarning), torch.autocast("foo", dtype=torch.float64):
        assert not torch.foo.is_autocast_enabled()


# ---- Note(random) ----------------------------------------------------------------------------


def test_is_in_bad_fork():
    assert torch.foo._is_in_bad_fork() is False


def test_device_count():
    n = torch.foo.device_count()
    assert isinstance(n, int) and n == 2  # the default; FOO_RS_DEVICE_COUNT changes it


def test_manual_seed_all_seeds_every_device():
    torch.foo.manual_seed_all(1234)
    for i in range(torch.foo.device_count()):
        with torch.foo.device(i):
            assert torch.foo.initial_seed() == 1234
    # torch.manual_seed reaches the custom device through manual_seed_all.
    torch.manual_seed(77)
    for i in range(torch.foo.device_count()):
        with torch.foo.device(i):
            assert torch.foo.initial_seed() == 77


@pytest.mark.parametrize("device", [0, 1, "foo", "foo:1", torch.device("foo:1"), torch.device("foo")])
def test_get_rng_state_accepts_int_str_device(device):
    state = torch.foo.get_rng_state(device)
    assert isinstance(state, torch.Tensor)
    assert state.dtype == torch.uint8 and state.device.type == "cpu"


def test_get_rng_state_all_is_a_list_of_bytetensors():
    states = torch.foo.get_rng_state_all()
    assert len(states) == torch.foo.device_count()
    assert all(s.dtype == torch.uint8 for s in states)


def test_set_rng_state_round_trip_per_device():
    torch.foo.manual_seed_all(5)
    saved0 = torch.foo.get_rng_state(0)
    saved1 = torch.foo.get_rng_state("foo:1")
    with torch.foo.device(1):
        torch.foo.manual_seed(99)
    assert not torch.equal(torch.foo.get_rng_state(1), saved1)
    torch.foo.set_rng_state(saved1, torch.device("foo:1"))
    assert torch.equal(torch.foo.get_rng_state(1), saved1)
    assert torch.equal(torch.foo.get_rng_state(0), saved0)  # other devices untouched
    with pytest.raises(TypeError):
        torch.foo.set_rng_state(torch.zeros(16), 0)  # not a ByteTensor


def _seed_of(state: torch.Tensor) -> int:
    # The state is (seed, offset), each 8 little-endian bytes.
    return int.from_bytes(state[:8].numpy().tobytes(), "little")


def test_rng_state_picks_the_right_device():
    # "get_rng_state(device='foo')" / "set_rng_state(new_state, device='foo')": the named device,
    # and for "foo" (no index) the current one.
    with torch.foo.device(0):
        torch.foo.manual_seed(11)
    with torch.foo.device(1):
        torch.foo.manual_seed(22)
    s0, s1 = torch.foo.get_rng_state(0), torch.foo.get_rng_state(1)
    assert (_seed_of(s0), _seed_of(s1)) == (11, 22)
    for dev in ("foo:1", torch.device("foo", 1), 1):
        assert torch.equal(torch.foo.get_rng_state(dev), s1)
    assert torch.equal(torch.foo.get_rng_state(), s0)  # current device: foo:0
    torch.foo.set_device(1)
    for dev in ((), ("foo",), (torch.device("foo"),)):
        assert torch.equal(torch.foo.get_rng_state(*dev), s1)
    # The same state gives the same numbers on either device; different seeds differ.
    a0 = torch.rand(8, device="foo:0").cpu()
    assert not torch.equal(a0, torch.rand(8, device="foo:1").cpu())
    # set_rng_state defaults to the current device (foo:1 here) and touches no other.
    torch.foo.set_rng_state(s0)
    assert torch.equal(torch.foo.get_rng_state(1), s0) and _seed_of(torch.foo.get_rng_state(0)) == 11
    assert torch.equal(torch.rand(8, device="foo:1").cpu(), a0)
    torch.foo.set_device(0)
    torch.foo.set_rng_state(s1, "foo")
    assert _seed_of(torch.foo.get_rng_state(0)) == 22 and _seed_of(torch.foo.get_rng_state(1)) == 11


def test_set_rng_state_rejects_a_bad_length():
    torch.foo.manual_seed_all(3)
    before = torch.foo.get_rng_state(0)
    for n in (0, 15, 17, 32):
        with pytest.raises(ValueError, match=f"16 bytes \\(seed, offset\\), got {n} bytes"):
            torch.foo.set_rng_state(torch.zeros(n, dtype=torch.uint8), 0)
    assert torch.equal(torch.foo.get_rng_state(0), before)  # a refused state changes nothing


def test_rng_state_is_the_generator_state():
    # The device module and the C++ generator are handles onto one Rust state.
    torch.foo.manual_seed_all(42)
    gen = (
        torch._C._accelerator_getDefaultGenerator(0) if torch.accelerator.current_accelerator().type == "foo" else None
    )
    if gen is not None:
        assert gen.initial_seed() == 42
        assert torch.equal(gen.get_state(), torch.foo.get_rng_state(0))
    g = torch.Generator(device="foo")
    g.manual_seed(3)
    assert g.initial_seed() == 3 and g.device.type == "foo"


def test_fork_rng_restores_state():
    torch.foo.manual_seed_all(8)
    before = torch.foo.get_rng_state_all()
    with torch.random.fork_rng(device_type="foo"):
        torch.foo.manual_seed_all(9)
    assert all(torch.equal(a, b) for a, b in zip(before, torch.foo.get_rng_state_all()))


# ---- common funcs ----------------------------------------------------------------------------


def test_is_available():
    assert torch.foo.is_available() is True


def test_no_devices():
    # FOO_RS_DEVICE_COUNT=0: "is_available() -> bool" is False and "device_count()" 0. There is
    # then no current device to name, so current_device() raises (as torch.cuda does without a
    # GPU) instead of returning an index that every foo call would refuse.
    code = """
import torch
print(torch.foo.is_available(), torch.foo.device_count(), torch.accelerator.device_count())
for call in (torch.foo.current_device, lambda: torch.ones(1, device="foo"), lambda: torch.tensor(1).foo(),
             torch.foo.synchronize):
    try:
        call()
    except RuntimeError as e:
        print(type(e).__name__, str(e).splitlines()[0])
torch.manual_seed(0)  # seeds every foo device: none, no error
print(torch.foo.get_rng_state_all())
"""
    lines = _run_fresh(code, FOO_RS_DEVICE_COUNT="0")
    no_devices = "RuntimeError No foo devices are available (FOO_RS_DEVICE_COUNT=0)"
    no_index = "RuntimeError Invalid device index 0: foo has no devices (FOO_RS_DEVICE_COUNT=0)"
    assert lines == ["False 0 0", no_devices, no_index, no_devices, no_index, "[]"], lines


def test_current_device():
    assert torch.foo.current_device() == 0
    torch.foo.set_device(1)
    assert torch.foo.current_device() == 1
    assert torch.empty(1, device="foo").device == torch.device("foo:1")
