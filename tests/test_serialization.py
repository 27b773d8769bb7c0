"""torch.save / torch.load of foo tensors, storages and modules."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import torch


def _round_trip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def test_tensor_loads_back_onto_foo():
    x = torch.randn(3, 4).to("foo")
    y = _round_trip(x)
    assert y.device == torch.device("foo:0") and torch.equal(y.cpu(), x.cpu())


def test_device_index_is_kept():
    x = torch.arange(5).to("foo:1")
    y = _round_trip(x)
    assert y.device == torch.device("foo:1") and torch.equal(y.cpu(), x.cpu())


def test_map_location_cpu_and_foo():
    x = torch.randn(6).to("foo:1")
    c = _round_trip(x, map_location="cpu")
    assert c.device.type == "cpu" and torch.equal(c, x.cpu())
    f = _round_trip(torch.randn(2), map_location="foo")
    assert f.device.type == "foo"
    g = _round_trip(x, map_location="foo:0")
    assert g.device == torch.device("foo:0")


def test_views_share_storage_after_load():
    x = torch.arange(10.0).to("foo")
    a, b = _round_trip([x[2:5], x[::2]])
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert a.cpu().tolist() == [2.0, 3.0, 4.0]


def test_storage_and_state_dict():
    s = torch.arange(4, dtype=torch.int16).to("foo").untyped_storage()
    s2 = _round_trip(s)
    assert s2.device.type == "foo" and bytes(s2.cpu()) == bytes(s.cpu())
    m = torch.nn.Linear(4, 3).foo()
    sd = _round_trip(m.state_dict())
    assert all(v.is_foo for v in sd.values())
    m2 = torch.nn.Linear(4, 3).foo()
    m2.load_state_dict(sd)
    assert torch.equal(m2.weight.cpu(), m.weight.cpu())


def test_loading_onto_a_missing_device_is_a_clear_error(tmp_path):
    path = tmp_path / "t.pt"
    torch.save(torch.ones(2).to("foo:1"), path)
    code = f"import torch, foo_rs\ntorch.load({str(path)!r})\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, FOO_RS_DEVICE_COUNT="1"))
    assert out.returncode != 0
    assert "device_count() is 1" in out.stderr


def test_backend_metadata_travels_with_the_tensor():
    # torch._utils.set_tensor_metadata keeps named flags on a foo tensor (src/glue/backend_meta.cpp);
    # torch.save/torch.load and detach() carry them, conj/neg stay torch's own bits.
    x = torch.arange(6.0, device="foo").reshape(2, 3)
    assert torch._utils.get_tensor_metadata(x) == {}
    flags = {"version_number": True, "format_number": False}
    torch._utils.set_tensor_metadata(x, flags)
    assert torch._utils.get_tensor_metadata(x) == flags
    assert torch._utils.get_tensor_metadata(x.detach()) == flags
    buf = io.BytesIO()
    torch.save({"x": x, "plain": torch.ones(2, device="foo")}, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert loaded["x"].device == x.device and torch.equal(loaded["x"].cpu(), x.cpu())
    assert torch._utils.get_tensor_metadata(loaded["x"]) == flags
    assert torch._utils.get_tensor_metadata(loaded["plain"]) == {}
    z = torch.ones(2, dtype=torch.complex64, device="foo").conj()
    torch._utils.set_tensor_metadata(z, {"layout_tag": True})
    assert torch._utils.get_tensor_metadata(z) == {"conj": True, "layout_tag": True}
    torch._utils.set_tensor_metadata(x, {})  # replaces the flags
    assert torch._utils.get_tensor_metadata(x) == {}
