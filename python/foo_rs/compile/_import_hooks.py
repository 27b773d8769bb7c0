"""Runs a function right after a given module has been imported, without importing it.

foo_rs is imported by every ``import torch`` (PyTorch's backend autoload), and importing
``torch._dynamo`` or ``torch._inductor`` there would add seconds to it. The compile integration
therefore waits for those modules: a finder on ``sys.meta_path`` wraps the loader of each
watched module so that its hook runs as soon as the module's own code has run (before the
importer continues), or at once when the module is already loaded.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType

Hook = Callable[[ModuleType], None]

_lock = threading.RLock()
_hooks: dict[str, list[Hook]] = {}


class _HookedLoader(importlib.abc.Loader):
    """Delegates to the module's own loader, then runs the hooks waiting for it."""

    def __init__(self, loader: importlib.abc.Loader, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # The spec keeps this loader; give the module its real one (importlib.reload, pickling
        # and inspect look at __loader__ / __spec__.loader).
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _run(self._name, module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        with _lock:
            if fullname not in _hooks:
                return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _HookedLoader(spec.loader, fullname)
                return spec
        return None


_finder = _Finder()


def _run(name: str, module: ModuleType) -> None:
    with _lock:
        hooks = _hooks.pop(name, [])
        if not _hooks and _finder in sys.meta_path:  # nothing left to watch: out of every import's way
            sys.meta_path.remove(_finder)
    for hook in hooks:
        hook(module)


def when_imported(name: str, hook: Hook) -> None:
    """Calls ``hook(module)`` once module ``name`` has been imported: now if it already is,
    else right after its code has run."""
    module = sys.modules.get(name)
    if module is not None:
        hook(module)
        return
    with _lock:
        waiting = _hooks.setdefault(name, [])
        if hook not in waiting:  # register() runs again on importlib.reload(foo_rs)
            waiting.append(hook)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
