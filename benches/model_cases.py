"""The models benches/models.py times, each built on the CPU from a config with random weights
(nothing is downloaded), with its inputs and its loss.

torchvision and transformers are optional (`make bench-models` installs them, pinned in
requirements-bench.txt); they are imported inside the builders so that the rest still runs
without them. Dropout is set to 0 everywhere: with it the CPU and foo would draw different masks
and the loss check (the same weights and inputs must give the same loss) could not be made.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

# No model hub at run time: every model here is built from a config.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

VOCAB = 2048  # small vocabulary: at GPT-2's 50257 the output layer would be most of the work
SEQ = 64


@dataclass
class Case:
    """A model on the CPU, its inputs, and how to run it: `forward(model, inputs)` gives the output,
    `loss(output, inputs)` the scalar training loss."""

    model: nn.Module
    inputs: tuple[torch.Tensor, ...]
    forward: Callable[[nn.Module, Sequence[torch.Tensor]], torch.Tensor]
    loss: Callable[[torch.Tensor, Sequence[torch.Tensor]], torch.Tensor]
    transformer: bool = False  # also timed under autocast(bfloat16)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _classify(model: nn.Module, image: tuple[int, int, int, int], classes: int = 10) -> Case:
    """An image classifier: images in, cross entropy against random labels."""
    x = torch.randn(image, generator=_gen(1))
    y = torch.randint(0, classes, (image[0],), generator=_gen(2))
    return Case(model, (x, y), lambda m, t: m(t[0]),
                lambda out, t: nn.functional.cross_entropy(out, t[1]))


def resnet18() -> Case:
    from torchvision.models import resnet18 as build

    torch.manual_seed(0)
    return _classify(build(weights=None, num_classes=10), (8, 3, 64, 64))


def mobilenet_v3_small() -> Case:
    from torchvision.models import mobilenet_v3_small as build

    torch.manual_seed(0)
    return _classify(build(weights=None, num_classes=10, dropout=0.0), (8, 3, 64, 64))


def vit() -> Case:
    from torchvision.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    model = VisionTransformer(image_size=64, patch_size=8, num_layers=2, num_heads=4, hidden_dim=256,
                              mlp_dim=512, num_classes=10)
    case = _classify(model, (8, 3, 64, 64))
    case.transformer = True
    return case


def _tokens(batch: int = 4) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, SEQ), generator=_gen(3))


def _next_token_loss(logits: torch.Tensor, t: Sequence[torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), t[0][:, 1:].reshape(-1))


def _causal_lm(model: nn.Module) -> Case:
    return Case(model, (_tokens(),), lambda m, t: m(input_ids=t[0]).logits, _next_token_loss, transformer=True)


def gpt2() -> Case:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=256, n_layer=2, n_head=4,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return _causal_lm(GPT2LMHeadModel(config))


def llama() -> Case:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    # Grouped-query attention: 8 query heads share 2 key/value heads.
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                         num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=SEQ,
                         attention_dropout=0.0)
    return _causal_lm(LlamaForCausalLM(config))


def bert() -> Case:
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(vocab_size=VOCAB, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=1024, max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    model = BertForMaskedLM(config)
    tokens = _tokens()
    # Masked LM: 15% of the positions become [MASK] (id 0 here) and only those are scored.
    masked = torch.rand(tokens.shape, generator=_gen(4)) < 0.15
    labels = torch.where(masked, tokens, torch.full_like(tokens, -100))
    ids = torch.where(masked, torch.zeros_like(tokens), tokens)

    def loss(logits: torch.Tensor, t: Sequence[torch.Tensor]) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), t[1].reshape(-1), ignore_index=-100)

    return Case(model, (ids, labels), lambda m, t: m(input_ids=t[0]).logits, loss, transformer=True)


def lstm() -> Case:
    torch.manual_seed(0)
    model = nn.LSTM(256, 256, num_layers=2)
    x = torch.randn(32, 32, 256, generator=_gen(1))  # (steps, batch, features)
    target = torch.randn(32, 32, 256, generator=_gen(2))
    return Case(model, (x, target), lambda m, t: m(t[0])[0], lambda out, t: nn.functional.mse_loss(out, t[1]))


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """A small U-Net: three levels down (conv blocks, max-pool), a bottleneck, three up
    (transposed conv, concatenated with the skip connection, conv block), per-pixel logits."""

    def __init__(self, cin: int = 3, classes: int = 4, width: int = 16) -> None:
        super().__init__()
        w = [width, 2 * width, 4 * width]
        self.down = nn.ModuleList([_block(cin, w[0]), _block(w[0], w[1]), _block(w[1], w[2])])
        self.pool = nn.MaxPool2d(2)
        self.bottom = _block(w[2], 2 * w[2])
        self.up = nn.ModuleList([nn.ConvTranspose2d(2 * c, c, 2, stride=2) for c in reversed(w)])
        self.merge = nn.ModuleList([_block(2 * c, c) for c in reversed(w)])
        self.head = nn.Conv2d(w[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottom(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips)):
            x = merge(torch.cat([up(x), skip], dim=1))
        return self.head(x)


def unet() -> Case:
    torch.manual_seed(0)
    x = torch.randn(8, 3, 64, 64, generator=_gen(1))
    y = torch.randint(0, 4, (8, 64, 64), generator=_gen(2))
    return Case(UNet(), (x, y), lambda m, t: m(t[0]),
                lambda out, t: nn.functional.cross_entropy(out, t[1]))


CASES: dict[str, Callable[[], Case]] = {
    "resnet18": resnet18,
    "mobilenet_v3_small": mobilenet_v3_small,
    "gpt2": gpt2,
    "llama": llama,
    "bert": bert,
    "lstm": lstm,
    "vit": vit,
    "unet": unet,
}

# The optional package each case needs (None: torch alone).
NEEDS: dict[str, str | None] = {
    "resnet18": "torchvision", "mobilenet_v3_small": "torchvision", "vit": "torchvision",
    "gpt2": "transformers", "llama": "transformers", "bert": "transformers", "lstm": None, "unet": None,
}
