"""ModuleInfo conformance (tests/module_conformance.py): no row that passed in the committed
baseline may regress; and the runner itself notices each kind of difference it claims to."""

from __future__ import annotations

import json
import os
from typing import Any

import module_conformance
import pytest
import torch


@pytest.mark.fallback_ok
@pytest.mark.slow
def test_no_regression_against_baseline():
    with open(os.path.join(module_conformance.OUT_DIR, "modules.json")) as f:
        baseline = json.load(f)
    results = module_conformance.run()
    print(module_conformance.summary(results))
    passed = {k for k, v in baseline.items() if v["status"] == "pass"}
    missing = passed - set(results)
    assert not missing, f"rows that passed before and are no longer produced: {sorted(missing)}"
    regressed = {k: results[k] for k in passed if results[k]["status"] != "pass"}
    assert not regressed, f"rows that passed before and no longer do: {regressed}"


# --- the runner against modules that differ on purpose ------------------------------------------


def _on_foo(t: torch.Tensor) -> bool:
    return t.device.type == "foo"


class _Offset(torch.nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return y + 1e-3 if _on_foo(y) else y


class _GradOffset(torch.nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        if _on_foo(y):
            y = y + (0.01 * y - (0.01 * y).detach())  # same value, gradient 1.01x
        return y


class _RaisesOnFoo(torch.nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _on_foo(x):
            raise RuntimeError("only on foo")
        return super().forward(x)


class _ReadsStorageAsContiguous(torch.nn.Module):
    # A foo kernel that ignores its input's strides (the noncontig check compares with the CPU
    # given the same non-contiguous input, so the bug must be foo's alone to show).
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.as_strided(x, x.shape, torch.empty(x.shape).stride()) if _on_foo(x) else x) * 2


class _TransposedOutput(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        return y.t().contiguous().t() if _on_foo(y) else y


class _Dropout(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(x, 0.5, True)


class _OtherErrorOnFoo(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != 4:
            raise (TypeError if _on_foo(x) else ValueError)("last dim must be 4")
        return x * 2


def _inputs(info: Any, device: str, dtype: torch.dtype, requires_grad: bool, training: bool,
            **kwargs: Any) -> list[Any]:
    from torch.testing import make_tensor
    from torch.testing._internal.common_modules import FunctionInput, ModuleInput

    ctor = FunctionInput(4, 3) if issubclass(info.module_cls, torch.nn.Linear) else FunctionInput()
    x = make_tensor((5, 4), device=device, dtype=dtype, requires_grad=requires_grad)
    return [ModuleInput(constructor_input=ctor, forward_input=FunctionInput(x))]


def _error_inputs(info: Any, device: str, dtype: torch.dtype, requires_grad: bool, training: bool,
                  **kwargs: Any) -> list[Any]:
    from torch.testing._internal.common_modules import (
        ErrorModuleInput,
        FunctionInput,
        ModuleErrorEnum,
        ModuleInput,
    )

    x = torch.ones(2, 3, device=device, dtype=dtype)
    return [ErrorModuleInput(ModuleInput(constructor_input=FunctionInput(), forward_input=FunctionInput(x)),
                             error_on=ModuleErrorEnum.FORWARD_ERROR, error_type=ValueError,
                             error_regex="last dim")]


@pytest.fixture(scope="module")
def flagged() -> dict[str, dict[str, Any]]:
    from torch.testing._internal.common_modules import ModuleInfo

    infos = [ModuleInfo(c, module_inputs_func=_inputs) for c in
             (_Offset, _GradOffset, _RaisesOnFoo, _ReadsStorageAsContiguous, _TransposedOutput, _Dropout)]
    infos.append(ModuleInfo(_OtherErrorOnFoo, module_inputs_func=_inputs, module_error_inputs_func=_error_inputs))
    return module_conformance.run(infos)


@pytest.mark.fallback_ok
@pytest.mark.parametrize(("row", "status", "detail"), [
    ("_Offset.train.forward", "fail", "out: 15/15 values differ, max abs err 0.001"),
    ("_Offset.train.backward", "pass", ""),
    ("_Offset.train.float32", "fail", "out: 15/15 values differ"),
    ("_GradOffset.train.forward", "pass", ""),
    ("_GradOffset.train.backward", "fail", "input0.grad: 20/20 values differ"),
    ("_GradOffset.train.gradgrad", "fail", "input0.grad: 20/20 values differ"),
    ("_RaisesOnFoo.train.forward", "error", "forward: RuntimeError: only on foo"),
    ("_ReadsStorageAsContiguous.train.forward", "pass", ""),
    ("_ReadsStorageAsContiguous.train.noncontig", "fail", "NaN where the other is not"),
    ("_TransposedOutput.train.forward", "fail", "out: strides (1, 5) vs CPU (4, 1)"),
    ("_TransposedOutput.train.noncontig", "pass", ""),  # strides are not compared there
    ("_Dropout.train.forward", "skip", "random output"),
    ("_OtherErrorOnFoo.train.forward", "pass", ""),
    ("_OtherErrorOnFoo.train.errors", "fail", "foo raises TypeError: last dim must be 4; CPU raises ValueError"),
])
def test_runner_flags_each_kind_of_difference(flagged: dict[str, dict[str, Any]], row: str, status: str,
                                              detail: str):
    r = flagged[row]
    assert r["status"] == status, r
    assert detail in r["detail"], r
