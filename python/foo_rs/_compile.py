"""torch.compile on foo: dynamo's device interface for "foo", and the backend named "foo".

Dynamo asks ``torch._dynamo.device_interface`` how to drive a device (current device, streams,
events, properties) when it traces code that touches one; without an interface for "foo" it
raised "No interface for device foo". ``torch.compile(backend="foo")`` names foo's backend, as
``backend="cuda"``-style spellings of other devices do.

foo has no graph compiler: the "foo" backend checks the captured FX graph (every tensor input on
foo or the CPU), removes dead code and runs it op by op on foo's kernels, as the "eager" backend
does. torch.compile's capture (guards, recompilation, graph breaks, fake tensors on foo) works;
the speed is eager foo's. Inductor (the default backend) generates CPU or Triton code and does
not target foo.

Importing torch._dynamo takes seconds, and ``import torch`` imports foo_rs (backend autoload),
so the registration waits until dynamo's own modules are imported: an import hook registers the
interface right after ``torch._dynamo.device_interface`` loads (before inductor can look at the
registry) and the backend right after ``torch._dynamo.backends.registry`` loads.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import torch

from ._registration import BACKEND_NAME

_INTERFACE_MODULE = "torch._dynamo.device_interface"
_REGISTRY_MODULE = "torch._dynamo.backends.registry"


def foo_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """The "foo" torch.compile backend: the captured graph, run by foo's eager kernels."""
    gm.graph.lint()
    for i, value in enumerate(example_inputs):
        if isinstance(value, torch.Tensor) and value.device.type not in (BACKEND_NAME, "cpu"):
            raise RuntimeError(
                f"torch.compile(backend='foo'): graph input {i} is on {value.device}; "
                "foo graphs take foo (and CPU) tensors"
            )
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm.forward


def _exchange_device(device: int) -> int:
    previous = torch.foo.current_device()
    if device >= 0 and device != previous:
        torch.foo.set_device(device)
    return previous


def _maybe_exchange_device(device: int) -> int:
    if not 0 <= device < torch.foo.device_count():
        return torch.foo.current_device()
    return _exchange_device(device)


def _interface_class(module: ModuleType) -> type:
    """The foo DeviceInterface, built on the freshly imported module's base class."""
    foo = torch.foo

    class FooInterface(module.DeviceInterface):  # type: ignore[name-defined, misc]
        device = foo.device
        # torch.Event() is an event of the current accelerator: foo. (torch.foo.Event returns one.)
        Event = torch.Event
        Stream = foo.Stream

        class Worker:
            @staticmethod
            def set_device(device: int) -> None:
                foo.set_device(device)

            @staticmethod
            def current_device() -> int:
                return foo.current_device()

            @staticmethod
            def get_device_properties(device: torch.types.Device = None) -> Any:
                return foo.get_device_properties(device)

        current_device = staticmethod(foo.current_device)
        set_device = staticmethod(foo.set_device)
        exchange_device = staticmethod(_exchange_device)
        maybe_exchange_device = staticmethod(_maybe_exchange_device)
        device_count = staticmethod(foo.device_count)
        is_available = staticmethod(foo.is_available)
        stream = staticmethod(foo.stream)
        current_stream = staticmethod(foo.current_stream)
        set_stream = staticmethod(foo.set_stream)
        synchronize = staticmethod(foo.synchronize)
        memory_allocated = staticmethod(foo.memory_allocated)

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
            foo.set_stream(foo.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:
            # foo's streams are ids, not pointers: the current stream's id.
            return foo.current_stream(device_idx).stream_id

        @staticmethod
        def get_compute_capability(device: torch.types.Device = None) -> int:
            major, minor = foo.get_device_capability(device)
            return major * 10 + minor

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return foo.is_bf16_supported(including_emulation)

    FooInterface.__name__ = FooInterface.__qualname__ = "FooInterface"
    return FooInterface


def _register_interface(module: ModuleType) -> None:
    # The registry itself, not register_interface_for_device: that one imports dynamo's variable
    # trackers, which may not be importable yet while torch._dynamo is still being imported.
    module.device_interfaces.setdefault(BACKEND_NAME, _interface_class(module))


def _register_backend(module: ModuleType) -> None:
    if BACKEND_NAME not in module._COMPILER_FNS:
        module.register_backend(compiler_fn=foo_backend, name=BACKEND_NAME)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a function on a module right after it is first imported."""

    def __init__(self, hooks: dict[str, Callable[[ModuleType], None]]) -> None:
        self.hooks = hooks

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        hook = self.hooks.get(name)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_register(module: ModuleType) -> None:
            exec_module(module)
            self.hooks.pop(name, None)
            hook(module)

        loader.exec_module = exec_and_register  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Registers now what dynamo has already imported, and the rest when it does (once)."""
    hooks: dict[str, Callable[[ModuleType], None]] = {}
    for name, register in ((_INTERFACE_MODULE, _register_interface), (_REGISTRY_MODULE, _register_backend)):
        if name in sys.modules:
            register(sys.modules[name])
        else:
            hooks[name] = register
    if hooks and not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(hooks))
