"""torch.compile (default backend, inductor) on foo against eager foo and against the CPU, in
one process with the same number of threads: an MLP, a CNN and a transformer LM, each a
training step (forward, loss, backward, AdamW step; compiled: the model and `opt.step`) and
inference (eval mode, no_grad). Every backend starts from the same weights and inputs; the
variants are timed in alternating rounds so that the machine's drift hits all of them, and the
first two training losses of each variant are checked against eager CPU before timing.

    python benches/compile.py [--threads 2] [--repeat 5] [--rounds 9] [--filter mlp] [--markdown FILE]

nn.TransformerEncoderLayer's inference fast path (one fused op, _transformer_encoder_layer_fwd)
is switched off for every backend: foo has no kernel for it, and it would time the CPU
fallback. Inductor's cache goes to build/inductor-cache unless TORCHINDUCTOR_CACHE_DIR is set;
compiling is not timed (each compiled variant runs a few warm-up steps first).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(__file__).resolve().parents[1] / "build" / "inductor-cache"))

import foo_rs  # noqa: E402
import torch  # noqa: E402
from compare_cpu import timeit  # noqa: E402
from torch import nn  # noqa: E402

Step = Callable[[], torch.Tensor]
DEVICES = ("cpu", "foo")
MODES = ("eager", "compiled")


class LM(nn.Module):
    """A GPT-style LM: token and position embeddings, causal pre-norm transformer blocks."""

    def __init__(self, vocab: int = 512, d: int = 128, heads: int = 4, layers: int = 2, ctx: int = 64) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(ctx, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0, batch_first=True,
                                           activation="gelu", norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        h = self.blocks(self.tok(idx) + self.pos[:t], mask=mask, is_causal=True)
        return self.head(self.norm(h))


@dataclass
class Case:
    name: str
    model: nn.Module
    x: torch.Tensor
    y: torch.Tensor

    def loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 10))
    cnn = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(64, 10),
    )
    tokens = torch.randint(0, 512, (8, 65), generator=g)
    return [
        Case("MLP", mlp, torch.randn(64, 256, generator=g), torch.randint(0, 10, (64,), generator=g)),
        Case("CNN", cnn, torch.randn(16, 3, 32, 32, generator=g), torch.randint(0, 10, (16,), generator=g)),
        Case("transformer LM", LM(), tokens[:, :-1], tokens[:, 1:]),
    ]


def train_step(case: Case, device: str, compiled: bool) -> Step:
    model = copy.deepcopy(case.model).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)  # each backend's default implementation
    forward = torch.compile(model) if compiled else model
    update = torch.compile(opt.step) if compiled else opt.step
    x, y = case.x.to(device), case.y.to(device)

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = case.loss(forward(x), y)
        loss.backward()
        update()
        return loss
    return step


def infer_step(case: Case, device: str, compiled: bool) -> Step:
    model = copy.deepcopy(case.model).to(device).eval()
    forward = torch.compile(model) if compiled else model
    x = case.x.to(device)

    def run() -> torch.Tensor:
        with torch.no_grad():
            return forward(x)
    return run


def use_threads(n: int) -> None:
    """Both backends on n threads. foo reads FOO_RS_NUM_THREADS once, when its pool starts, so a
    process started without it is started again with it (as benches/models.py)."""
    torch.set_num_threads(n)
    if foo_rs._C.num_threads() == n:
        return
    if os.environ.get("FOO_RS_NUM_THREADS") == str(n):
        sys.exit(f"FOO_RS_NUM_THREADS={n} but foo runs {foo_rs._C.num_threads()} threads")
    os.environ["FOO_RS_NUM_THREADS"] = str(n)
    os.execv(sys.executable, [sys.executable, *sys.argv])


def check_losses(case: Case) -> float:
    """Largest relative gap of the first two training losses, any variant against eager CPU."""
    losses = {}
    for device in DEVICES:
        for mode in MODES:
            step = train_step(case, device, mode == "compiled")
            losses[device, mode] = [step().item() for _ in range(2)]
    ref = losses["cpu", "eager"]
    return max(abs(a - b) / abs(b) for v in losses.values() for a, b in zip(v, ref))


def measure(steps: dict[tuple[str, str], Step], repeat: int, rounds: int) -> dict[tuple[str, str], float]:
    for fn in steps.values():  # compiles, then warms up
        for _ in range(3):
            fn()
    times: dict[tuple[str, str], list[float]] = {k: [] for k in steps}
    order = list(steps)
    for r in range(rounds):
        for key in order if r % 2 == 0 else reversed(order):
            sync = torch.foo.synchronize if key[0] == "foo" else (lambda: None)
            times[key].append(timeit(steps[key], repeat, sync))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=9,
                        help="alternating rounds (rows moved by 0.1-0.3 between 3-round runs on a 2-vCPU host)")
    parser.add_argument("--filter", default="", help="only the models whose name contains this")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    use_threads(args.threads)
    torch.backends.mha.set_fastpath_enabled(False)
    torch._dynamo.config.cache_size_limit = 64
    header = ("| model | step | eager CPU ms | compiled CPU ms | eager foo ms | compiled foo ms | "
              "compiled foo / compiled CPU | compiled foo / eager foo | loss check |")
    lines = [f"torch {torch.__version__}, {args.threads} threads (torch.set_num_threads, FOO_RS_NUM_THREADS)",
             "", header, "|" + "---|" * 9]
    print("\n".join(lines), flush=True)
    for case in cases():
        if args.filter.lower() not in case.name.lower():
            continue
        gap = check_losses(case)
        for what, make in (("train", train_step), ("infer", infer_step)):
            steps = {(d, m): make(case, d, m == "compiled") for d in DEVICES for m in MODES}
            t = measure(steps, args.repeat, args.rounds)
            ms = {k: v * 1e3 for k, v in t.items()}
            row = (f"| {case.name} | {what} | {ms['cpu', 'eager']:.3f} | {ms['cpu', 'compiled']:.3f} | "
                   f"{ms['foo', 'eager']:.3f} | {ms['foo', 'compiled']:.3f} | "
                   f"{t['foo', 'compiled'] / t['cpu', 'compiled']:.2f} | "
                   f"{t['foo', 'compiled'] / t['foo', 'eager']:.2f} | {gap:.1e} |")
            lines.append(row)
            print(row, flush=True)
            torch._dynamo.reset()
    if fallbacks := foo_rs.fallback_counts():
        lines.append(f"\nCPU fallbacks on foo: {fallbacks}")
        print(lines[-1])
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
