"""torch.cuda's generic names on torch.foo (scripts/cuda_names.py lists them), the deprecated
torch.foo.amp spellings CUDA code still uses, and caching_allocator_alloc/delete."""

from __future__ import annotations

import importlib.util
import os
import warnings

import pytest
import torch

_SPEC = importlib.util.spec_from_file_location(
    "cuda_names", os.path.join(os.path.dirname(__file__), "..", "scripts", "cuda_names.py")
)
cuda_names = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(cuda_names)

# What torch.foo deliberately lacks of the generic names, and why (docs: README "torch.cuda names").
LACKS: dict[str, str] = {}


def test_generic_cuda_names_exist_on_torch_foo():
    has, lacks = cuda_names.split()
    assert set(lacks) == set(LACKS), f"update LACKS and the README: torch.foo now lacks {sorted(lacks)}"
    for name in has:
        cuda_attr, foo_attr = getattr(torch.cuda, name), getattr(torch.foo, name)
        assert callable(cuda_attr) == callable(foo_attr) or isinstance(foo_attr, type(cuda_attr)), name
    # Every name the classification calls CUDA-specific is still a torch.cuda name.
    assert set(cuda_names.CUDA_SPECIFIC) <= set(dir(torch.cuda))


def test_amp_autocast_alias_warns_and_autocasts_to_float16():
    a = torch.randn(4, 4, device="foo")
    with pytest.warns(FutureWarning, match=r"torch.amp.autocast\('foo'"):
        ctx = torch.foo.amp.autocast()
    with ctx:
        assert torch.is_autocast_enabled("foo")
        assert torch.get_autocast_dtype("foo") == torch.float16
        assert (a @ a).dtype == torch.float16
    assert not torch.is_autocast_enabled("foo")
    with pytest.warns(FutureWarning), torch.foo.amp.autocast(dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16
    with pytest.warns(FutureWarning), torch.foo.amp.autocast(enabled=False):
        assert (a @ a).dtype == torch.float32


def test_amp_grad_scaler_alias_scales_on_foo():
    with pytest.warns(FutureWarning, match=r"torch.amp.GradScaler\('foo'"):
        scaler = torch.foo.amp.GradScaler(init_scale=4.0)
    assert isinstance(scaler, torch.amp.GradScaler) and scaler._device == "foo"
    w = torch.nn.Parameter(torch.ones(3, device="foo"))
    opt = torch.optim.SGD([w], lr=0.5)
    loss = (w * 2).sum()
    scaler.scale(loss).backward()
    assert torch.equal(w.grad.cpu(), torch.full((3,), 8.0))  # scaled by 4
    scaler.step(opt)
    scaler.update()
    assert torch.equal(w.detach().cpu(), torch.zeros(3))  # unscaled gradient 2, lr 0.5


def test_amp_custom_fwd_bwd_aliases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)

        class Square(torch.autograd.Function):
            @staticmethod
            @torch.foo.amp.custom_fwd(cast_inputs=torch.float32)
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @torch.foo.amp.custom_bwd
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 2 * x * g

    x = torch.tensor([1.0, 2.0], device="foo", requires_grad=True)
    with torch.autocast("foo", dtype=torch.bfloat16):
        y = Square.apply(x)
    assert y.dtype == torch.float32  # cast_inputs ran the forward outside autocast, in float32
    y.sum().backward()
    assert x.grad.cpu().tolist() == [2.0, 4.0]


def test_caching_allocator_alloc_and_delete():
    before = torch.foo.memory_allocated(1)
    ptr = torch.foo.caching_allocator_alloc(3000, device=1)
    assert ptr != 0 and torch.foo.memory_allocated(1) == before + 3072
    torch.foo.caching_allocator_delete(ptr)
    assert torch.foo.memory_allocated(1) == before
    on_stream = torch.foo.caching_allocator_alloc(100, device="foo:1", stream=torch.foo.Stream(device=1))
    torch.foo.caching_allocator_delete(on_stream)
    assert torch.foo.caching_allocator_alloc(0) == 0
    torch.foo.caching_allocator_delete(0)
    with pytest.raises(ValueError, match="not allocated"):
        torch.foo.caching_allocator_delete(ptr)
    with pytest.raises(TypeError):
        torch.foo.caching_allocator_alloc(-1)
    with pytest.raises(TypeError, match="foo stream"):
        torch.foo.caching_allocator_alloc(16, stream=torch.Stream(device="cpu"))


def test_default_generators_are_the_devices_generators():
    gens = torch.foo.default_generators
    assert len(gens) == torch.foo.device_count() and all(isinstance(g, torch.Generator) for g in gens)
    assert [g.device for g in gens] == [torch.device("foo", i) for i in range(len(gens))]
    gens[1].manual_seed(1234)
    a = torch.randn(5, device="foo:1")
    torch.foo.default_generators[1].manual_seed(1234)
    assert torch.equal(torch.randn(5, device="foo:1").cpu(), a.cpu())
    with torch.foo.device(1):
        assert torch.foo.initial_seed() == 1234
    state = gens[0].get_state()
    assert torch.equal(state, torch.foo.get_rng_state(0))


def test_host_memory_stats_count_pinned_blocks():
    torch.foo.reset_accumulated_host_memory_stats()
    before = torch.foo.host_memory_stats()
    assert before["num_host_alloc"] == before["num_host_free"] == before["host_alloc_time.count"] == 0
    a = torch.ones(1000).pin_memory()  # 4000 bytes, 4032 as a 64-byte multiple
    b = torch.ones(10).pin_memory()
    s = torch.foo.host_memory_stats()
    assert s["allocations.current"] == before["allocations.current"] + 2
    assert s["allocated_bytes.current"] == before["allocated_bytes.current"] + 4032 + 64
    assert s["active_requests.current"] == s["allocations.current"]
    assert s["active_bytes.current"] == s["allocated_bytes.current"]
    assert s["num_host_alloc"] == s["allocations.allocated"] == s["host_alloc_time.count"] == 2
    assert s["host_alloc_time.max"] >= s["host_alloc_time.min"] >= 0
    del a
    s = torch.foo.host_memory_stats()
    assert s["num_host_free"] == s["host_free_time.count"] == 1
    assert s["allocated_bytes.freed"] == 4032 and s["allocated_bytes.peak"] >= before["allocated_bytes.current"] + 4096
    nested = torch.foo.host_memory_stats_as_nested_dict()
    assert nested["allocations"]["current"] == s["allocations.current"] and nested["num_host_free"] == 1
    torch.foo.reset_peak_host_memory_stats()
    assert torch.foo.host_memory_stats()["allocated_bytes.peak"] == s["allocated_bytes.current"]
    torch.foo.reset_accumulated_host_memory_stats()
    s = torch.foo.host_memory_stats()
    assert s["num_host_alloc"] == s["allocations.freed"] == s["host_free_time.total"] == 0
    assert s["allocations.current"] == before["allocations.current"] + 1
    del b
    assert torch.foo.host_memory_stats()["allocations.current"] == before["allocations.current"]


def test_can_device_access_peer():
    assert torch.foo.can_device_access_peer(0, 1) and torch.foo.can_device_access_peer("foo:1", torch.device("foo:0"))
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.foo.can_device_access_peer(torch.foo.device_count(), 0)
    with pytest.raises(AssertionError, match="Invalid peer device id"):
        torch.foo.can_device_access_peer(0, -1)


def test_sync_debug_mode_is_kept_and_checked():
    assert torch.foo.get_sync_debug_mode() == 0
    try:
        for mode, value in (("warn", 1), ("error", 2), (1, 1), ("default", 0)):
            torch.foo.set_sync_debug_mode(mode)
            assert torch.foo.get_sync_debug_mode() == value
        torch.foo.set_sync_debug_mode("error")
        # Nothing on foo waits for the device, so nothing raises even in "error" mode.
        x = torch.arange(4.0, device="foo")
        assert x.sum().item() == 6.0 and x.nonzero().shape == (3, 1) and x.cpu().tolist() == [0, 1, 2, 3]
        with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`"):
            torch.foo.set_sync_debug_mode("loud")
        with pytest.raises(RuntimeError, match="expected one of 0,1, or 2"):
            torch.foo.set_sync_debug_mode(3)
        assert torch.foo.get_sync_debug_mode() == 2
    finally:
        torch.foo.set_sync_debug_mode(0)


def test_mem_pool_keeps_its_blocks_for_itself():
    import gc

    gc.collect()  # earlier tests' garbage would otherwise be freed (and released) in the middle
    torch.foo.empty_cache()
    reserved = torch.foo.memory_reserved(0)
    pool = torch.foo.MemPool()
    assert pool.id[0] == 0 and pool.use_count() == 1
    with torch.foo.use_mem_pool(pool, device="foo:0"):
        assert pool.use_count() == 2
        a = torch.empty(1 << 20, device="foo")  # 4 MiB, its own segment
        on_other_device = torch.empty(16, device="foo:1")
    address = a.data_ptr()
    assert [(s["address"], s["segment_pool_id"]) for s in pool.snapshot() if s["device"] == 0] == [(address, pool.id)]
    assert all(s["segment_pool_id"] == pool.id for s in pool.snapshot())
    assert len(torch.foo.memory_snapshot(pool.id)) == 1  # the pool was used on foo:0 only: foo:1's block is not its
    del a, on_other_device
    torch.foo.empty_cache()  # leaves the pool's cached block
    assert torch.foo.memory_reserved(0) == reserved + (4 << 20)
    outside = torch.empty(1 << 20, device="foo")
    assert outside.data_ptr() != address  # the pool's block serves only the pool
    with torch.foo.use_mem_pool(pool):
        inside = torch.empty(1 << 20, device="foo")
    assert inside.data_ptr() == address
    del outside, inside
    del pool
    gc.collect()
    torch.foo.empty_cache()
    assert torch.foo.memory_reserved(0) <= reserved
    assert address not in {s["address"] for s in torch.foo.memory_snapshot()}
    with pytest.raises(NotImplementedError, match="custom allocator"):
        torch.foo.MemPool(allocator=object())
    with pytest.raises(TypeError, match="MemPool"):
        with torch.foo.use_mem_pool(object()):
            pass


def test_mem_pool_routes_only_the_current_thread():
    import threading

    pool = torch.foo.MemPool()
    seen = []
    with torch.foo.use_mem_pool(pool):
        mine = torch.empty(1 << 18, device="foo")
        thread = threading.Thread(target=lambda: seen.append(torch.empty(1 << 18, device="foo").data_ptr()))
        thread.start()
        thread.join()
    addresses = {s["address"] for s in pool.snapshot()}
    assert mine.data_ptr() in addresses and seen[0] not in addresses
