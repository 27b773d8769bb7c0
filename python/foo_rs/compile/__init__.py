"""``torch.compile`` on foo: dynamo's device interface and inductor's backend for the device.

``install()`` (run by ``foo_rs.register()``) imports nothing of dynamo or inductor: each piece
is registered when the module it extends is first imported (``_import_hooks``), so ``import
torch`` stays as fast as without foo_rs, and a process that compiles gets them in place before
dynamo or inductor looks:

- ``torch._dynamo.device_interface`` -> ``interface`` (registers on import): the ``DeviceInterface`` of
  "foo" and "foo:N";
- ``torch._subclasses.fake_impls`` -> ``fake.install``: fake convolutions on foo have the layout
  of foo's kernel;
- ``torch._inductor.compile_fx`` -> ``graph_options.wrap_compile_fx``: foo graphs are compiled
  with the options that make inductor treat them as the CPU graphs they compile to, and keep
  foo's random ops;
- ``torch._dynamo.backends.registry`` -> ``torch.compile(backend="foo")``: the backend named
  after the device, as PyTorch's reference backend has one; it is inductor (the default backend)
  under another name, so code written for a device-named backend compiles foo graphs for real;
- inductor's first compile calls ``torch.foo._inductor_backend_init`` -> ``inductor.register``:
  scheduling (inductor's C++ kernels), Python and C++ wrappers, device snippets, and the
  scheduler's "is this node C++ code" test.
"""

from __future__ import annotations

import ctypes
import os
from types import ModuleType
from typing import Any

from ._import_hooks import when_imported


def _register_interface(_module: ModuleType) -> None:
    from . import interface  # noqa: F401 - registers on import


def _wrap_compile_fx(module: ModuleType) -> None:
    from . import graph_options

    graph_options.wrap_compile_fx(module)


def _fake_convolution(module: ModuleType) -> None:
    from . import fake

    fake.install(module)


def foo(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
    """``torch.compile(backend="foo")``: inductor, the default backend."""
    from torch._dynamo.backends.inductor import inductor

    return inductor(gm, example_inputs, **kwargs)


def _register_backend(module: ModuleType) -> None:
    if "foo" not in module._COMPILER_FNS:
        module.register_backend(foo, name="foo")


def promote_symbols() -> None:
    """Makes foo's C functions visible to libraries loaded from now on (Python loads extension
    modules privately): the compiled kernels of foo graphs call ``foo_team_run``, ... through
    weak references (teams.py), also when an AOTInductor package is loaded without compiling."""
    from .. import _C

    ctypes.CDLL(_C.__file__, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)


def install() -> None:
    promote_symbols()
    when_imported("torch._subclasses.fake_impls", _fake_convolution)
    when_imported("torch._dynamo.backends.registry", _register_backend)
    when_imported("torch._dynamo.device_interface", _register_interface)
    when_imported("torch._inductor.compile_fx", _wrap_compile_fx)


def inductor_backend_init() -> None:
    """``torch.foo._inductor_backend_init``: inductor calls it once, on its first compile."""
    from . import inductor

    inductor.register()
