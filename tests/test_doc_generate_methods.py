"""Every statement of PyTorch's documentation of
torch.utils.generate_methods_for_privateuse1_backend (../shared/seeds/003), for foo."""

from __future__ import annotations

import subprocess
import sys

import foo_rs
import pytest
import torch


def test_doc_example():
    # >>> a = torch.tensor(2).foo() ; a.is_foo ; hasattr(torch.nn.Module, 'foo')
    a = torch.tensor(2).foo()
    assert a.is_foo is True
    assert a.device.type == "foo" and a.cpu().item() == 2
    assert hasattr(torch.nn.Module, "foo")
    assert torch.tensor(2).is_foo is False


def test_tensor_methods():
    t = torch.arange(4.0)
    on1 = t.foo(1)
    assert on1.device == torch.device("foo:1")
    assert on1.foo(1) is on1  # already there: no copy
    on0 = on1.foo()  # default: the current device
    assert on0.device == torch.device("foo:0")
    assert torch.equal(on0.cpu(), t)


def test_module_methods():
    m = torch.nn.Linear(3, 2)
    m.foo()
    assert all(p.is_foo and p.device.index == 0 for p in m.parameters())
    m.foo(1)
    assert all(p.device == torch.device("foo:1") for p in m.parameters())


def test_untyped_storage_methods():
    s = torch.arange(6, dtype=torch.int32).untyped_storage()
    fs = s.foo()
    assert fs.is_foo and not s.is_foo
    assert fs.device.type == "foo" and fs.nbytes() == s.nbytes()
    assert bytes(fs.cpu()) == bytes(s)
    assert fs.foo() is fs


def test_typed_storage_methods():
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        ts = torch.arange(3.0).storage()
        fts = ts.foo()
        assert fts.is_foo
        assert fts.dtype == torch.float32
        assert fts.cpu().tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize(
    "dtype", foo_rs.UNSUPPORTED_DTYPES[:1] + [d for d in foo_rs.UNSUPPORTED_DTYPES if "float8" in str(d)][:1]
)
def test_unsupported_dtype_storage_refused(dtype):
    # "unsupported_dtype ... indicating that the storage does not support the torch.dtype type."
    assert dtype in foo_rs.UNSUPPORTED_DTYPES
    ts = torch.storage.TypedStorage(4, dtype=dtype, _internal=True)
    with pytest.raises(RuntimeError, match="not supported by this backend"):
        ts.foo()


def test_supported_dtypes_are_not_listed():
    for d in [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.complex64]:
        assert d not in foo_rs.UNSUPPORTED_DTYPES


def test_generation_is_once_only():
    with pytest.raises(RuntimeError):
        torch.utils.generate_methods_for_privateuse1_backend()


def test_storage_methods_not_generated_by_default():
    # "In the default scenario, storage-related methods will not be generated automatically."
    code = (
        "import torch\n"
        "torch.utils.rename_privateuse1_backend('bar')\n"
        "torch.utils.generate_methods_for_privateuse1_backend()\n"
        "print(hasattr(torch.Tensor, 'bar'), hasattr(torch.nn.Module, 'bar'), hasattr(torch.UntypedStorage, 'bar'))\n"
    )
    env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["True", "True", "False"]
