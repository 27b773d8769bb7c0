"""The counted CPU fallback, strict mode, native-op accounting and `python -m foo_rs info`."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import foo_rs
import pytest
import torch

# An op foo has no kernel for (special functions are not part of the native set).
UNSUPPORTED = "aten::special_bessel_j0.out"


@pytest.mark.fallback_ok
def test_fallback_is_counted_and_warns_once():
    foo_rs.reset_op_counts()
    x = torch.rand(5)
    with pytest.warns(UserWarning, match="special_bessel_j0.*no native foo kernel"):
        y = torch.special.bessel_j0(x.to("foo"))
    assert y.device.type == "foo"
    torch.testing.assert_close(y.cpu(), torch.special.bessel_j0(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.special.bessel_j0(x.to("foo"))  # no second warning
    counts = foo_rs.fallback_counts()
    assert counts[UNSUPPORTED] == 2
    foo_rs.reset_op_counts()
    assert UNSUPPORTED not in foo_rs.fallback_counts()


def test_strict_mode_raises_naming_the_op():
    with pytest.raises(NotImplementedError, match="special_bessel_j0.*no native foo kernel"):
        torch.special.bessel_j0(torch.ones(3, device="foo"))
    assert torch.ones(2, device="foo").cpu().tolist() == [1.0, 1.0]


def test_strict_mode_environment_variable():
    code = "import torch, foo_rs\ntorch.special.bessel_j0(torch.ones(2, device='foo'))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, FOO_RS_STRICT="1"))
    assert out.returncode != 0 and "NotImplementedError" in out.stderr and "FOO_RS_STRICT" in out.stderr


def test_native_counts():
    foo_rs.reset_op_counts()
    a = torch.ones(3, device="foo")
    _ = a + a
    counts = foo_rs.native_counts()
    assert counts["aten::add.Tensor"] == 1
    assert counts["aten::fill_.Scalar"] >= 1
    ops = foo_rs.native_ops()
    assert "add.Tensor" in ops and "_copy_from" in ops and "empty_strided" in ops


def test_info_command():
    out = subprocess.run([sys.executable, "-m", "foo_rs", "info"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"foo_rs {foo_rs.__version__}" in out.stdout
    assert f"torch {torch.__version__}" in out.stdout
    assert "foo:1" in out.stdout and "native kernels registered" in out.stdout
