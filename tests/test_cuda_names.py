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
LACKS = {
    "MemPool": "no private memory pools in foo's allocator",
    "use_mem_pool": "no private memory pools in foo's allocator",
    "can_device_access_peer": "foo refuses ops that mix devices; no peer access to report",
    "get_sync_debug_mode": "every foo op is synchronous: there is no implicit synchronization to flag",
    "set_sync_debug_mode": "every foo op is synchronous: there is no implicit synchronization to flag",
    "host_memory_stats": "the pinned-host allocator keeps no statistics yet",
    "host_memory_stats_as_nested_dict": "the pinned-host allocator keeps no statistics yet",
    "reset_accumulated_host_memory_stats": "the pinned-host allocator keeps no statistics yet",
    "reset_peak_host_memory_stats": "the pinned-host allocator keeps no statistics yet",
}


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
