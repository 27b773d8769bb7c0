"""The native primitives: copies (CPU<->foo, foo<->foo, dtype conversion, layouts), fill/zero,
item, factories, views and metadata ops, storage resizing — all in strict mode."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import ALL_REAL_DTYPES, FOO, assert_same, layouts, sample, to_foo

DTYPES = ALL_REAL_DTYPES + [torch.complex64, torch.complex128, torch.uint16, torch.uint32, torch.uint64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_every_dtype(dtype):
    x = (
        sample((3, 5), dtype)
        if dtype not in (torch.uint16, torch.uint32, torch.uint64)
        else torch.tensor(list(range(15)), dtype=dtype).reshape(3, 5)
    )
    if dtype.is_complex:
        x = torch.complex(torch.randn(3, 5), torch.randn(3, 5)).to(dtype)
    f = x.to("foo")
    assert f.dtype == dtype and f.device.type == "foo"
    assert torch.equal(f.cpu(), x)


@pytest.mark.parametrize(
    "src", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.uint8, torch.bool]
)
@pytest.mark.parametrize(
    "dst", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int8, torch.bool, torch.complex64]
)
def test_dtype_conversion_matches_cpu(src, dst):
    x = sample((4, 6), src, low=-100, high=100)
    assert_same(x.to("foo").to(dst), x.to(dst), atol=0, rtol=0)


@pytest.mark.parametrize("kind", ["contiguous", "transposed", "strided", "expanded"])
def test_noncontiguous_sources(kind):
    x = layouts((6, 7), torch.float32)[kind]
    f = to_foo(x)
    assert f.stride() == x.stride()
    assert torch.equal(f.cpu(), x)  # foo -> CPU from a non-contiguous foo tensor
    assert torch.equal(f.contiguous().cpu(), x.contiguous())
    assert torch.equal(x.to("foo").cpu(), x)  # CPU non-contiguous -> foo


def test_noncontiguous_destination_and_broadcast_copy():
    dst = torch.zeros(5, 4, device="foo").t()  # non-contiguous destination
    src = torch.arange(20.0).reshape(4, 5)
    dst.copy_(src)
    assert torch.equal(dst.cpu(), src)
    row = torch.arange(5.0)
    dst.copy_(row)  # broadcast source
    assert torch.equal(dst.cpu(), row.expand(4, 5))
    dst.copy_(torch.arange(5, device="foo"))  # foo int64 -> foo float32, broadcast
    assert torch.equal(dst.cpu(), row.expand(4, 5))


def test_cross_device_copy():
    x = torch.randn(100).to("foo:0")
    y = x.to("foo:1")
    assert y.device == torch.device("foo:1")
    assert torch.equal(y.cpu(), x.cpu())
    z = torch.empty(100, device="foo:1", dtype=torch.float64)
    z.copy_(x)
    assert torch.equal(z.cpu(), x.cpu().double())


def test_overlapping_copy_matches_cpu():
    # Overlapping source and destination are refused, as on the CPU (a shifted slice, the same
    # memory transposed); a copy from a clone is fine.
    x = torch.arange(10.0)
    f = x.to("foo")
    m = torch.arange(9.0).view(3, 3)
    for t, u in ((x, m), (f, m.to("foo"))):
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            t[1:].copy_(t[:-1])
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            u.copy_(u.t())
    f[1:].copy_(f[:-1].clone())
    x[1:].copy_(x[:-1].clone())
    assert torch.equal(f.cpu(), x)


def test_copy_errors_leave_device_usable():
    a = torch.zeros(3, device="foo")
    with pytest.raises(RuntimeError, match="must match|expand|size"):
        a.copy_(torch.ones(4))
    with pytest.raises(RuntimeError, match="more than one element"):
        torch.zeros(1, device="foo").expand(3).copy_(torch.ones(3))
    assert a.cpu().tolist() == [0.0, 0.0, 0.0]


def test_unsupported_dtype_is_a_clear_error():
    x = torch.zeros(2, dtype=torch.float8_e4m3fn)
    with pytest.raises(NotImplementedError, match="does not support dtype"):
        x.to("foo")


def test_zero_size_and_scalar():
    e = torch.empty(0, 3, device="foo")
    assert e.shape == (0, 3) and e.cpu().shape == (0, 3)
    s = torch.tensor(3.5).to("foo")
    assert s.dim() == 0 and s.item() == 3.5
    assert torch.tensor(7, dtype=torch.int64).to("foo").item() == 7
    assert torch.tensor(True).to("foo").item() is True
    assert torch.tensor(2**62 + 1).to("foo").item() == 2**62 + 1  # no float round trip
    assert torch.tensor(1 + 2j).to("foo").item() == 1 + 2j
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        torch.ones(2, device="foo").item()


def test_large_copy_parallel_path():
    x = torch.randn(3_000_000)
    f = x.to("foo")
    assert torch.equal(f.cpu(), x)
    assert torch.equal(f.to(torch.float64).cpu(), x.double())


@pytest.mark.parametrize("dtype", ALL_REAL_DTYPES + [torch.complex64])
def test_factories_fill_zero(dtype):
    assert torch.equal(torch.ones(2, 3, device="foo", dtype=dtype).cpu(), torch.ones(2, 3, dtype=dtype))
    assert torch.equal(torch.zeros(4, device="foo", dtype=dtype).cpu(), torch.zeros(4, dtype=dtype))
    assert torch.equal(torch.full((2, 2), 1, device="foo", dtype=dtype).cpu(), torch.full((2, 2), 1, dtype=dtype))
    x = torch.zeros(6, 5, dtype=dtype, device="foo")
    x[:, ::2].fill_(1)  # strided fill
    ref = torch.zeros(6, 5, dtype=dtype)
    ref[:, ::2].fill_(1)
    assert torch.equal(x.cpu(), ref)
    x.zero_()
    assert not x.cpu().any()


def test_fill_with_tensor_value_and_full_int64():
    x = torch.empty(3, device="foo", dtype=torch.int64)
    x.fill_(torch.tensor(2**40 + 3))
    assert x.cpu().tolist() == [2**40 + 3] * 3
    assert torch.full((2,), -(2**62), device="foo").cpu().tolist() == [-(2**62)] * 2


def test_views_and_metadata_ops():
    x = torch.arange(24.0).reshape(2, 3, 4)
    f = x.to("foo")
    for fn in [
        lambda t: t.view(6, 4),
        lambda t: t.reshape(4, 6),
        lambda t: t.transpose(0, 2),
        lambda t: t.permute(2, 0, 1),
        lambda t: t[:, 1:, ::2],
        lambda t: t.unsqueeze(1).squeeze(1),
        lambda t: t.as_strided((2, 2), (1, 3), 1),
        lambda t: t.flatten(),
        lambda t: t.narrow(2, 1, 2),
        lambda t: t.expand(3, 2, 3, 4),
        lambda t: t.unfold(2, 2, 1),
        lambda t: t.select(1, 2),
        lambda t: t.view(torch.int32),
    ]:
        got, want = fn(f), fn(x)
        assert got.device.type == "foo" and got.stride() == want.stride()
        assert torch.equal(got.cpu(), want)
        assert got.untyped_storage().data_ptr() == f.untyped_storage().data_ptr()  # a view, no copy


def test_resize_and_set():
    f = torch.arange(4.0).to("foo")
    f.resize_(2, 3)
    assert f.shape == (2, 3)
    assert f.view(-1)[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]  # the prefix is kept
    f.resize_(1)
    assert f.cpu().tolist() == [0.0]
    g = torch.empty(0, device="foo")
    g.set_(f.untyped_storage(), 0, (2,), (1,))
    assert g.cpu().tolist() == [0.0, 1.0]
    h = torch.empty(0, device="foo").set_(f)
    assert h.shape == f.shape
    s = torch.empty(0, device="foo").set_()
    assert s.numel() == 0
    st = torch.arange(4, dtype=torch.uint8).to("foo").untyped_storage()
    st.resize_(8)  # through the hooks' resizePrivateUse1Bytes
    assert st.nbytes() == 8 and list(st.cpu())[:4] == [0, 1, 2, 3]


def test_printing_in_strict_mode():
    x = torch.tensor([[1.5, -2.0], [3.25, float("nan")]])
    text = repr(x.to("foo"))
    assert text.startswith("tensor(") and "device='foo:0'" in text
    assert repr(torch.arange(3).to("foo")) == "tensor([0, 1, 2], device='foo:0')"
    assert repr(torch.tensor([True, False]).to("foo")) == "tensor([ True, False], device='foo:0')"
    str(torch.randn(40, 40).to("foo"))  # summarized (> 1000 elements)


def test_rust_panic_becomes_python_exception():
    x = torch.ones(2, device="foo")
    with pytest.raises(RuntimeError, match="Rust panic in foo_rs: deliberate panic"):
        torch.ops.foo_rs._debug_panic(x)
    assert (x + 1).cpu().tolist() == [2.0, 2.0]  # the process and device are fine


def test_conjugate_and_negative_views_copy():
    z = torch.complex(torch.randn(4), torch.randn(4))
    fz = z.to("foo")
    assert torch.equal(fz.conj().cpu(), z.conj().resolve_conj())
    assert torch.equal(z.conj().to("foo").cpu(), z.conj().resolve_conj())
    assert torch.equal(fz.conj().imag.cpu(), z.conj().imag.resolve_neg())
    out = torch.empty(4, dtype=torch.complex64, device="foo")
    out.copy_(fz.conj())
    assert torch.equal(out.cpu(), z.conj().resolve_conj())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int8, torch.complex64])
@pytest.mark.parametrize("shape,perm", [((8, 65, 4, 64), (0, 2, 1, 3)), ((3, 70, 50, 7), (2, 0, 1, 3)),
                                        ((5, 4, 3), (1, 0, 2))])
def test_permuted_copy_keeping_the_last_dim(dtype, shape, perm):
    # Rows dense in both operands are copied whole (one memcpy per row, the outer index an
    # odometer per parallel chunk); the big shapes span several chunks.
    x = torch.arange(math.prod(shape)).reshape(shape).to(dtype)
    got = x.to(FOO).permute(perm).contiguous()
    assert got.is_contiguous()
    assert torch.equal(got.cpu(), x.permute(perm).contiguous())
    sliced = x.to(FOO)[:, 1:].permute(perm).contiguous()  # a storage offset, uneven outer strides
    assert torch.equal(sliced.cpu(), x[:, 1:].permute(perm).contiguous())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int8, torch.complex64])
@pytest.mark.parametrize("shape", [(16, 3, 32, 32), (4, 32, 9, 7), (2, 20, 5, 5), (1, 17, 33, 1)])
def test_channels_last_conversions_both_ways(dtype, shape):
    # A batch of [HW][C] <- [C][HW] transposes (and back), walked in tiles per sample: every
    # element size, channel counts below and above a tile's width, ragged tile edges.
    x = torch.arange(math.prod(shape)).reshape(shape).to(dtype)
    cl = x.to(FOO).contiguous(memory_format=torch.channels_last)
    want = x.contiguous(memory_format=torch.channels_last)
    assert cl.stride() == want.stride() and torch.equal(cl.cpu(), want)
    back = cl.contiguous()
    assert back.is_contiguous() and torch.equal(back.cpu(), x)
    # A slice of the batch (a storage offset), converted both ways.
    part = x.to(FOO)[1:].contiguous(memory_format=torch.channels_last)
    assert torch.equal(part.cpu(), x[1:])
    assert part.stride() == x[1:].contiguous(memory_format=torch.channels_last).stride()
