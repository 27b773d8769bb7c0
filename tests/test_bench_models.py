"""benches/models.py's models run on foo as on the CPU: from the same weights and inputs, the
first two training steps' losses agree (the first checks the forward pass, the second backward
through a plain gradient step: see `train_losses`), and so do the inference outputs. Needs the optional torchvision and
transformers; CI does not install them."""

from __future__ import annotations

import os
import sys

import pytest

REASON = "torchvision/transformers not installed (make bench-models installs them)"
pytest.importorskip("torchvision", reason=REASON)
pytest.importorskip("transformers", reason=REASON)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benches"))
import torch  # noqa: E402
from model_cases import CASES  # noqa: E402
from models import LOSS_TOLERANCE, infer_step, model_on, train_losses  # noqa: E402


@pytest.mark.parametrize("name", list(CASES))
def test_model_trains_as_on_cpu(name: str):
    case = CASES[name]()
    cpu, foo = train_losses(case, "cpu"), train_losses(case, "foo")
    assert cpu[1] != cpu[0], "the optimizer step changed nothing: the check would not see backward"
    assert foo == pytest.approx(cpu, rel=LOSS_TOLERANCE)


# torchvision's ViT in eval mode under no_grad takes MultiheadAttention's fast path,
# aten::_native_multi_head_attention, which foo runs through the fallback.
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.fallback_ok) if n == "vit" else n
                                  for n in CASES])
def test_model_infers_as_on_cpu(name: str):
    case = CASES[name]()
    cpu, foo = (infer_step(case, model_on(case, d, False), d, None)() for d in ("cpu", "foo"))
    torch.testing.assert_close(foo.cpu(), cpu, rtol=1e-4, atol=1e-5)
