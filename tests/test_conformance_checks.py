"""OpInfo checks beyond forward samples (errors, noncontiguous, out=, gradients, complex, fake): no (op, check)
that passed in the committed tests/conformance/checks.json may regress."""

from __future__ import annotations

import json

import conformance_checks_run as checks
import pytest


@pytest.mark.fallback_ok
@pytest.mark.slow
def test_no_check_regresses_from_pass() -> None:
    baseline = checks.load_baseline()
    results = checks.run()
    print("\nOpInfo checks (pass/fail/error/skip):", json.dumps(checks.counts(results)))
    regressed = checks.regressions(results, baseline)
    assert not regressed, f"(op, check) pairs that passed before and no longer do: {regressed}"
    # Every op of the baseline was still found in op_db (a renamed OpInfo must be re-baselined).
    assert set(results) >= set(baseline)
