"""Shared fixtures: every test runs with foo_rs imported and, unless it opts out, in strict mode
(any CPU fallback raises), so a test passing means the ops it touched ran natively."""

from __future__ import annotations

import os
import sys

import foo_rs
import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _strict_by_default(request: pytest.FixtureRequest):
    """Strict mode on for every test; mark a test `@pytest.mark.fallback_ok` to allow fallbacks."""
    allow = request.node.get_closest_marker("fallback_ok") is not None
    foo_rs._C.set_strict(not allow)
    yield
    foo_rs._C.set_strict(None)


@pytest.fixture(autouse=True)
def _restore_device():
    yield
    torch.foo.set_device(0)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fallback_ok: the test may use the counted CPU fallback")
    config.addinivalue_line("markers", "slow: long-running (training runs, large inputs)")
