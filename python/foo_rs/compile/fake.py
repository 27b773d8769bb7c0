"""Fake tensors of foo's convolution have the strides foo's kernel gives, and fake attention
takes foo's fused kernel.

Dynamo, AOTAutograd and inductor plan with fake tensors, and inductor checks every extern
kernel's result against the plan (``assert_size_stride``). For a PrivateUse1 tensor
``torch._C._select_conv_backend`` answers "Overrideable", for which the fake convolution
predicts a contiguous result; foo's convolution gives the CPU's layout instead: channels-last
when the 4-d input or weight is channels-last (src/glue/conv.cpp, ``in_layout_of``). A
channels-last convolution on foo then failed inductor's check (inductor's layout
optimization makes convolutions channels-last). The fake convolution is wrapped so that for foo
it predicts foo's layout, and so is its backward, whose fake predicts contiguous gradients where
foo gives the CPU's: the input's gradient in the input's layout, the weight's channels-last when
the input or the weight is. Other devices are untouched.

``F.scaled_dot_product_attention`` asks ``_fused_sdp_choice`` which kernel to run. On fake tensors
that is ATen's Meta kernel, which knows CUDA's (and HIP's, HPU's) choice and answers "math" for
every other device: a compiled foo graph then held the math decomposition (bmm, softmax, and
``native_dropout`` with other random numbers than eager foo's fused kernel). For foo, the fake
choice asks foo's own kernel, on real foo tensors of the same dtypes and sizes whose elements all
alias one (zero strides: no memory to speak of); the choice reads only that metadata. The graph
then calls foo's fused attention (forward and backward) as an extern kernel, as eager foo does.

Some of PyTorch's fake kernels give a non-CPU device CUDA's output metadata where the CPU's
differ: batch norm in evaluation returns the running statistics as ``save_mean``/``save_invstd``
on CUDA and empty tensors on the CPU, batch and layer norm's saved statistics of bfloat16/float16
inputs are float32 on CUDA and the input's dtype on the CPU, embedding_bag's ``offset2bag`` is
empty on the CPU's sum fast path, and max_unpool2d keeps a channels-last input's layout on the
CPU only. foo's kernels give the CPU's (foo computes what the CPU computes), so for those ops
(``_AS_ON_CPU_*``) the fake of a foo call is the fake of the same call on CPU tensors, moved to
foo: through FakeTensorMode's table of op implementations, or, for ops whose fake result comes
from their Python decomposition, through a wrapped decomposition (which only fake tensors reach
this way: traced graphs see the decomposition's ops, whose fakes are the ordinary ones).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
from torch._prims_common import suggest_memory_format
from torch.fx.experimental.symbolic_shapes import optimization_hint

from .._registration import BACKEND_NAME as BACKEND

_FORWARD = (
    torch.ops.aten.convolution.default,
    torch.ops.aten._convolution.default,
    torch.ops.aten._convolution.deprecated,
)


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs.get(name)


def _foo_layout(original: Callable[..., Any]) -> Callable[..., Any]:
    def conv(fake_mode: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(fake_mode, func, *args, **kwargs)
        if func not in _FORWARD or not isinstance(out, torch.Tensor) or out.device.type != BACKEND:
            return out
        if out.dim() != 4:
            return out
        operands = (_argument(args, kwargs, 0, "input"), _argument(args, kwargs, 1, "weight"))
        if any(isinstance(t, torch.Tensor) and suggest_memory_format(t) == torch.channels_last for t in operands):
            with fake_mode:
                return out.contiguous(memory_format=torch.channels_last)
        return out

    conv._foo_rs = True  # type: ignore[attr-defined]
    return conv


def _foo_gradient_layout(original: Callable[..., Any]) -> Callable[..., Any]:
    def conv_backward(fake_mode: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(fake_mode, func, *args, **kwargs)
        inp, weight = _argument(args, kwargs, 1, "input"), _argument(args, kwargs, 2, "weight")
        if not isinstance(inp, torch.Tensor) or inp.device.type != BACKEND or inp.dim() != 4:
            return out
        grad_input, grad_weight, grad_bias = out
        cl = torch.channels_last
        with fake_mode:
            if isinstance(grad_input, torch.Tensor) and suggest_memory_format(inp) == cl:
                grad_input = grad_input.contiguous(memory_format=cl)
            layouts = (suggest_memory_format(inp), suggest_memory_format(weight))
            if isinstance(grad_weight, torch.Tensor) and cl in layouts:
                grad_weight = grad_weight.contiguous(memory_format=cl)
        return grad_input, grad_weight, grad_bias

    conv_backward._foo_rs = True  # type: ignore[attr-defined]
    return conv_backward


_SDP_CHOICE = torch.ops.aten._fused_sdp_choice.default


def _stand_in(t: Any) -> Any:
    """A real foo tensor with t's dtype and sizes (a symbolic size at its hint), every element
    at one address."""
    if not isinstance(t, torch.Tensor):
        return t
    sizes = [optimization_hint(s, fallback=2) for s in t.shape]
    return torch.empty_strided(sizes, [0] * len(sizes), dtype=t.dtype, device=t.device)


def _sdp_choice(fake_mode: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
    query = _argument(args, kwargs, 0, "query")
    if not isinstance(query, torch.Tensor) or query.device.type != BACKEND:
        return NotImplemented  # ATen's meta kernel, as before
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        real_args = [_stand_in(a) for a in args]
        real_kwargs = {k: _stand_in(v) for k, v in kwargs.items()}
        return func(*real_args, **real_kwargs)


_sdp_choice._foo_rs = True  # type: ignore[attr-defined]


aten = torch.ops.aten
# Fake kernels in FakeTensorMode's table of op implementations (consulted for ops with a meta).
_AS_ON_CPU_IMPLS = (aten._embedding_bag.default, aten._embedding_bag_forward_only.default,
                    aten.native_layer_norm.default)
# Ops whose fake result is their Python decomposition's (FakeTensorMode prefers it to the table
# for ops without a meta kernel; native_layer_norm is in both tables).
_AS_ON_CPU_DECOMPOSITIONS = (
    aten.native_batch_norm.default,
    aten._native_batch_norm_legit.default,
    aten._native_batch_norm_legit_no_training.default,
    aten._batch_norm_with_update.default,
    aten._batch_norm_with_update_functional.default,
    aten._batch_norm_no_update.default,
    aten.native_layer_norm.default,
    aten.max_unpool2d.default,
)


def _moved(t: Any, device: torch.device) -> Any:
    """A fresh fake tensor of t's fake mode with t's sizes, strides and dtype on `device` (these
    ops' outputs are fresh tensors, so nothing aliases)."""
    from torch._subclasses.fake_tensor import FakeTensor

    meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    return FakeTensor(t.fake_mode, meta, device)


def _run_as_on_cpu(fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """fn on CPU copies of the fake foo tensors in args/kwargs, its outputs moved to foo;
    NotImplemented where no argument is a fake foo tensor."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._pytree import tree_leaves, tree_map_only

    leaves = tree_leaves((args, kwargs))
    on_foo = [t for t in leaves if isinstance(t, FakeTensor) and t.fake_device.type == BACKEND]
    if not on_foo:
        return NotImplemented
    device, fake_mode = on_foo[0].fake_device, on_foo[0].fake_mode
    args, kwargs = tree_map_only(FakeTensor, lambda t: _moved(t, torch.device("cpu")), (args, kwargs))
    with fake_mode:
        out = fn(*args, **kwargs)
    return tree_map_only(FakeTensor, lambda t: _moved(t, device), out)


def _impl_as_on_cpu(original: Callable[..., Any] | None) -> Callable[..., Any]:
    def impl(fake_mode: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        out = _run_as_on_cpu(func, args, kwargs)
        if out is NotImplemented and original is not None:
            return original(fake_mode, func, *args, **kwargs)  # PyTorch's fake kernel, as before
        return out

    impl._foo_rs = True  # type: ignore[attr-defined]
    return impl


def _decomposition_as_on_cpu(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def decomposition(*args: Any, **kwargs: Any) -> Any:
        # Only FakeTensorMode computing an op's fake result: tracers (make_fx, AOTAutograd with
        # inductor's decompositions) decompose with this table too, with their proxy mode on,
        # and must record the decomposition's own ops, not fresh tensors made here.
        if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY) is not None:
            return original(*args, **kwargs)
        out = _run_as_on_cpu(original, args, kwargs)
        return original(*args, **kwargs) if out is NotImplemented else out

    decomposition._foo_rs = True  # type: ignore[attr-defined]
    return decomposition


def install(fake_impls: ModuleType) -> None:
    """Idempotent."""
    table = fake_impls.op_implementations_dict
    if not getattr(table.get(_SDP_CHOICE), "_foo_rs", False):
        table[_SDP_CHOICE] = _sdp_choice
    for op in _AS_ON_CPU_IMPLS:
        impl = table.get(op)
        if impl is None:
            fake_impls.register_op_impl(op)(_impl_as_on_cpu(None))
        elif not getattr(impl, "_foo_rs", False):
            table[op] = _impl_as_on_cpu(impl)
    from torch._decomp import decomposition_table

    for op in _AS_ON_CPU_DECOMPOSITIONS:
        if not getattr(decomposition_table[op], "_foo_rs", False):
            decomposition_table[op] = _decomposition_as_on_cpu(decomposition_table[op])
    for op in _FORWARD:
        impl = table.get(op)
        if impl is not None and not getattr(impl, "_foo_rs", False):
            table[op] = _foo_layout(impl)
    backward = torch.ops.aten.convolution_backward.default
    impl = table.get(backward)
    if impl is not None and not getattr(impl, "_foo_rs", False):
        table[backward] = _foo_gradient_layout(impl)
