"""Device capability in torch.cuda's and torch.accelerator's shapes: the guard's
getDeviceCapability (torch.accelerator.get_device_capability), torch.foo.get_device_capability,
get_device_properties' CPU features, is_bf16_supported."""

from __future__ import annotations

import foo_rs
import pytest
import torch


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def test_accelerator_capability_lists_the_dtypes_foo_tensors_can_have():
    cap = torch.accelerator.get_device_capability("foo:0")
    supported = cap["supported_dtypes"]
    # The capability bits are c10::ScalarType codes of src/dtype.rs's list (through the glue), the
    # Python list is its names: equal sets mean every Rust code names the dtype torch gives it.
    assert set(supported) == set(foo_rs.SUPPORTED_DTYPES)
    for dtype in supported:  # each can be allocated on foo and copied there and back
        host = torch.tensor([1, 0, 1], dtype=dtype)
        t = host.to("foo")
        assert t.dtype == dtype and torch.equal(t.cpu(), host)
        assert torch.empty(2, dtype=dtype, device="foo").dtype == dtype
    for dtype in (torch.float8_e4m3fn, torch.qint8):
        assert dtype not in supported
    assert torch.accelerator.get_device_capability(1) == cap
    assert torch.accelerator.get_device_capability() == cap
    with pytest.raises(RuntimeError, match="Invalid device index"):
        torch.accelerator.get_device_capability("foo:9")


def test_dtypes_outside_the_capability_cannot_be_converted_on_foo():
    supported = torch.accelerator.get_device_capability("foo:0")["supported_dtypes"]
    for dtype in (torch.float8_e5m2, torch.complex32):
        assert dtype not in supported
        with pytest.raises(NotImplementedError, match="does not support dtype"):
            torch.zeros(2, dtype=dtype).to("foo")


def test_get_device_capability_is_the_x86_64_level():
    major, minor = torch.foo.get_device_capability()
    assert (major, minor) == torch.foo.get_device_capability("foo:1") == torch.foo.get_device_capability(0)
    flags = _cpu_flags()
    if flags:
        v3 = {"avx2", "fma", "bmi1", "bmi2", "movbe", "f16c"} <= flags
        v4 = v3 and {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"} <= flags
        assert major == (4 if v4 else 3 if v3 else major)
        assert minor == int("avx512_bf16" in flags)
    assert 0 <= major <= 4 and minor in (0, 1)
    with pytest.raises(RuntimeError):
        torch.foo.get_device_capability("foo:9")


def test_device_properties_list_the_kernels_cpu_features():
    p = torch.foo.get_device_properties(0)
    assert (p.major, p.minor) == torch.foo.get_device_capability(0)
    assert p.is_integrated and p.total_memory == torch.foo.mem_get_info(0)[1]
    kernel_features = {"avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512bf16"}
    assert set(p.cpu_features) <= kernel_features
    flags = _cpu_flags()
    if flags:
        expected = {f for f in kernel_features if f.replace("avx512bf16", "avx512_bf16") in flags}
        assert set(p.cpu_features) == expected
    assert "cpu_features" in repr(p) and p.cpu_name


def test_is_bf16_supported():
    assert torch.foo.is_bf16_supported() is True
    native = torch.foo.is_bf16_supported(including_emulation=False)
    assert native == ("avx512bf16" in torch.foo.get_device_properties().cpu_features)
    a = torch.randn(16, 16, device="foo", dtype=torch.bfloat16)
    assert (a @ a).dtype == torch.bfloat16
