"""Interop: DLPack export of foo tensors (zero-copy host memory) and foo tensors through
torch.multiprocessing (shared memory, as CPU tensors are shared)."""

from __future__ import annotations

import multiprocessing
import os
import queue

import foo_rs
import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from torch.utils.dlpack import DLDeviceType

# ---- DLPack ----------------------------------------------------------------------------------


def test_dlpack_device_is_host_memory():
    t = torch.arange(6.0, device="foo")
    assert t.__dlpack_device__() == (DLDeviceType.kDLCPU, 0)
    assert torch.arange(2.0).__dlpack_device__() == (DLDeviceType.kDLCPU, 0)  # CPU unchanged


def test_from_dlpack_is_a_zero_copy_view():
    t = torch.arange(12, dtype=torch.float32, device="foo").reshape(3, 4)[:, 1:3]
    view = torch.from_dlpack(t)
    assert view.device.type == "cpu" and view.shape == t.shape and view.stride() == t.stride()
    assert torch.equal(view, t.cpu())
    t.mul_(10)  # a foo kernel writes; the view sees it
    assert torch.equal(view, t.cpu())
    view[0, 0] = -1.0  # and the other way round
    assert t[0, 0].item() == -1.0
    assert view.data_ptr() == t.data_ptr()


def test_numpy_and_legacy_capsule_and_versions():
    t = torch.arange(5, dtype=torch.int64, device="foo")
    arr = np.from_dlpack(t)
    assert arr.tolist() == [0, 1, 2, 3, 4]
    t.add_(1)
    assert arr.tolist() == [1, 2, 3, 4, 5]
    capsule = torch.utils.dlpack.to_dlpack(t)
    assert torch.utils.dlpack.from_dlpack(capsule).tolist() == [1, 2, 3, 4, 5]
    assert torch.from_dlpack(t.__dlpack__(max_version=(1, 0))).tolist() == [1, 2, 3, 4, 5]


def test_export_keeps_the_foo_memory_alive():
    t = torch.full((1000,), 7.0, device="foo")
    view = torch.from_dlpack(t)
    allocated = torch.foo.memory_allocated()
    del t
    assert torch.foo.memory_allocated() == allocated  # the view still owns the block
    assert view.sum().item() == 7000.0
    del view
    assert torch.foo.memory_allocated() < allocated


def test_copy_and_device_requests():
    t = torch.ones(4, device="foo")
    copied = torch.from_dlpack(t, copy=True)
    t.add_(1)
    assert copied.tolist() == [1.0] * 4
    moved = torch.from_dlpack(t, device="cpu")
    assert moved.device.type == "cpu" and moved.tolist() == [2.0] * 4
    with pytest.raises(BufferError, match="host memory"):
        t.__dlpack__(dl_device=(DLDeviceType.kDLCUDA, 0))
    with pytest.raises(BufferError, match="stream"):
        t.__dlpack__(stream=5)


def test_export_refusals_match_torch():
    with pytest.raises(BufferError, match="require gradient"):
        torch.ones(2, device="foo", requires_grad=True).__dlpack__()
    with pytest.raises(BufferError, match="conjugate"):
        torch.ones(2, dtype=torch.complex64, device="foo").conj().__dlpack__()


# ---- torch.multiprocessing ---------------------------------------------------------------------


def _receiver(q_in, q_out) -> None:
    import foo_rs  # noqa: F401 - unpickling needs the backend anyway; explicit for clarity

    t = q_in.get(timeout=60)
    q_out.put((str(t.device), t.dtype, t.cpu().tolist()))
    t.mul_(2)  # the sender sees this: shared memory
    q_out.put("done")


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_queue_shares_foo_tensors(method):
    ctx = mp.get_context(method)
    q_in, q_out = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_receiver, args=(q_in, q_out))
    proc.start()
    try:
        t = torch.arange(6, dtype=torch.float32, device="foo:1").reshape(2, 3)[:, 1:]
        q_in.put(t)
        device, dtype, values = q_out.get(timeout=120)
        assert device == "foo:1" and dtype == torch.float32 and values == [[1.0, 2.0], [4.0, 5.0]]
        assert q_out.get(timeout=120) == "done"
        assert t.cpu().tolist() == [[2.0, 4.0], [8.0, 10.0]]
        t.add_(1)  # still an ordinary foo tensor on the sender's side
        assert t.cpu().tolist() == [[3.0, 5.0], [9.0, 11.0]]
    finally:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0


def _pool_sum(t: torch.Tensor) -> float:
    return float(t.sum().item())


def test_pool_arguments_and_results():
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        parts = [torch.full((10,), float(i), device="foo") for i in range(4)]
        assert pool.map(_pool_sum, parts, chunksize=1) == [0.0, 10.0, 20.0, 30.0]


def test_shared_storage_is_not_resizable_and_outside_the_allocator():
    t = torch.ones(1 << 16, device="foo")
    before = torch.foo.memory_allocated()
    fd, nbytes = torch.ops.foo_rs._share_memory(t)
    assert nbytes == 4 << 16 and fd >= 0
    assert torch.foo.memory_allocated() == before - (4 << 16)  # the block went back to the cache
    assert torch.ops.foo_rs._share_memory(t) == (fd, nbytes)  # once only
    assert t.sum().item() == float(1 << 16)
    with pytest.raises(RuntimeError, match="not resizable"):
        t.resize_(1 << 17)
    again = torch.ops.foo_rs._from_shared_fd(fd, nbytes, 0).view(torch.float32)
    again[0] = 5.0
    assert t[0].item() == 5.0


def test_bad_shared_memory_arguments():
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.ops.foo_rs._from_shared_fd(0, 16, 7)
    with pytest.raises(ValueError, match="positive"):
        torch.ops.foo_rs._from_shared_fd(0, 0, 0)
    r, w = os.pipe()
    try:
        with pytest.raises(RuntimeError, match="map"):
            torch.ops.foo_rs._from_shared_fd(r, 16, 0)
    finally:
        os.close(r)
        os.close(w)


def test_a_plain_multiprocessing_queue_works_too():
    ctx = multiprocessing.get_context("fork")
    q_in, q_out = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_receiver, args=(q_in, q_out))
    proc.start()
    try:
        q_in.put(torch.tensor([1.0, 2.0], device="foo"))
        assert q_out.get(timeout=120)[2] == [1.0, 2.0]
        assert q_out.get(timeout=120) == "done"
    except queue.Empty:
        pytest.fail("the receiver got nothing: the foo tensor was not sent")
    finally:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()
    assert foo_rs.BACKEND_NAME == "foo"
