"""Module.to("foo") keeps Parameter identity, as CPU -> CUDA does: tied weights stay tied, an
optimizer built before the move keeps updating the model, `p.data = ...` crosses devices, Lazy
modules work (foo registers aten::_has_compatible_shallow_copy_type)."""

from __future__ import annotations

import pytest
import torch
from torch import nn


class TiedLM(nn.Module):
    """An embedding whose weight is also the output head's (GPT-2, T5 and most LMs do this)."""

    def __init__(self, vocab: int = 50, dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.mix(self.embed(tokens))))


@pytest.mark.parametrize("move", [lambda m: m.to("foo"), lambda m: m.foo(), lambda m: m.to(torch.device("foo", 1))])
def test_tied_weights_stay_tied_and_parameters_keep_identity(move):
    m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    m[1].weight = m[0].weight
    params = list(m.parameters())
    move(m)
    assert m[1].weight is m[0].weight
    assert all(a is b for a, b in zip(params, m.parameters()))
    assert all(p.device.type == "foo" for p in m.parameters())
    m.cpu()
    assert m[1].weight is m[0].weight and m[0].weight.device.type == "cpu"


def test_tied_lm_trains_as_on_cpu():
    torch.manual_seed(0)
    cpu = TiedLM()
    foo = TiedLM()
    foo.load_state_dict(cpu.state_dict())
    # The optimizer is built before the move, as many training scripts do.
    opt_cpu = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
    opt_foo = torch.optim.AdamW(foo.parameters(), lr=1e-2)
    foo.to("foo")
    assert foo.head.weight is foo.embed.weight
    tokens = torch.randint(0, 50, (4, 12))
    for _ in range(5):
        losses = []
        for model, opt, t in ((cpu, opt_cpu, tokens), (foo, opt_foo, tokens.to("foo"))):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(t[:, :-1]).flatten(0, 1), t[:, 1:].flatten())
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-5)
        torch.testing.assert_close(foo.embed.weight.grad.cpu(), cpu.embed.weight.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(foo.embed.weight.detach().cpu(), cpu.embed.weight.detach(), rtol=1e-4, atol=1e-5)


def test_param_data_assignment_crosses_devices():
    p = nn.Parameter(torch.randn(3))
    p.data = p.data.to("foo")
    assert p.device.type == "foo" and isinstance(p, nn.Parameter)
    p.data = p.data.cpu()
    assert p.device.type == "cpu"
    t = torch.zeros(2, device="foo")
    t.data = torch.ones(2)
    assert t.device.type == "cpu" and t.tolist() == [1.0, 1.0]


def test_lazy_modules_on_foo():
    torch.manual_seed(0)
    lazy = nn.LazyLinear(2).to("foo")
    x = torch.randn(3, 5)
    out = lazy(x.to("foo"))
    assert out.device.type == "foo" and lazy.weight.shape == (2, 5)
    ref = nn.functional.linear(x, lazy.weight.detach().cpu(), lazy.bias.detach().cpu())
    torch.testing.assert_close(out.detach().cpu(), ref)
    conv = nn.LazyConv2d(4, 3).foo()
    assert conv(torch.randn(1, 2, 5, 5, device="foo")).shape == (1, 4, 3, 3)


def test_overwrite_params_on_conversion_still_replaces_parameters():
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        m = nn.Linear(2, 2)
        w = m.weight
        m.to("foo")
        assert m.weight is not w and m.weight.device.type == "foo"
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(False)


def test_sparse_and_dense_are_not_shallow_copy_compatible():
    dense = torch.zeros(2, 2, device="foo")
    assert torch._has_compatible_shallow_copy_type(dense, torch.zeros(2, 2))
    assert not torch._has_compatible_shallow_copy_type(dense, torch.zeros(2, 2).to_sparse())
