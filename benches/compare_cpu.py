"""Times each case on torch's CPU backend and on foo in the same process, interleaved, with the
same number of threads, and prints the median times and the ratio foo/CPU (lower is better).

    python benches/compare_cpu.py [--threads 2] [--repeat 15] [--filter name]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import foo_rs
import torch


def _no_sync() -> None:
    pass


def timeit(fn: Callable[[], object], repeat: int, sync: Callable[[], None] = _no_sync) -> float:
    """Median time of one call: at least `repeat` calls and at least 50 ms of them (so that
    microsecond-scale cases get hundreds of samples on a noisy machine)."""
    # The other backend's worker threads keep spinning for a while after its last op (libgomp's
    # spin-wait lasts milliseconds; foo's helpers 50 us); on 2 cores a spinning thread would take
    # a core from this block. Let them go idle first, then warm this backend's threads up.
    time.sleep(0.05)
    warm_until = time.perf_counter() + 0.005
    fn()
    sync()
    while time.perf_counter() < warm_until:
        fn()
        sync()
    times: list[float] = []
    stop = time.perf_counter() + 0.05
    while len(times) < repeat or (time.perf_counter() < stop and len(times) < 5000):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cases() -> dict[str, Callable[[torch.device], Callable[[], object]]]:
    def elementwise(n: int) -> Callable[[torch.device], Callable[[], object]]:
        def make(dev: torch.device) -> Callable[[], object]:
            a, b = torch.randn(n).to(dev), torch.randn(n).to(dev)
            return lambda: a + b
        return make

    def small_add(dev: torch.device) -> Callable[[], object]:
        a = torch.ones(1).to(dev)
        return lambda: a + a

    def bcast_add(dev: torch.device) -> Callable[[], object]:
        a, b = torch.randn(1000, 1000).to(dev), torch.randn(1000).to(dev)
        return lambda: a + b

    def transposed_add(dev: torch.device) -> Callable[[], object]:
        a, b = torch.randn(1000, 1000).to(dev), torch.randn(1000, 1000).to(dev)
        return lambda: a + b.t()

    def unary(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.device], Callable[[], object]]:
        def make(dev: torch.device) -> Callable[[], object]:
            a = torch.randn(1_000_000).to(dev)
            return lambda: fn(a)
        return make

    def to_device(dev: torch.device) -> Callable[[], object]:
        # A host -> device copy on foo; on the CPU the comparable work is a host copy (clone).
        a = torch.randn(1_000_000)
        return (lambda: a.to(dev)) if dev.type == "foo" else (lambda: a.clone())

    def reduce_case(kind: str, n: int = 1_000_000) -> Callable[[torch.device], Callable[[], object]]:
        def make(dev: torch.device) -> Callable[[], object]:
            a = torch.randn(n // 1000, 1000).to(dev)
            b = torch.randn(16).to(dev)
            return {"sum": lambda: a.sum(), "sum16": lambda: b.sum(), "sum(dim=-1)": lambda: a.sum(-1),
                    "sum(dim=0)": lambda: a.sum(0), "max(dim=-1)": lambda: a.max(-1),
                    "var(dim=-1)": lambda: a.var(-1)}[kind]
        return make

    def nn_case(kind: str) -> Callable[[torch.device], Callable[[], object]]:
        def make(dev: torch.device) -> Callable[[], object]:
            x = torch.randn(4096, 1024).to(dev)
            w, b = torch.randn(1024).to(dev), torch.randn(1024).to(dev)
            return {"softmax": lambda: torch.softmax(x, -1),
                    "layer_norm": lambda: torch.nn.functional.layer_norm(x, (1024,), w, b)}[kind]
        return make

    def addcmul_inplace(dev: torch.device) -> Callable[[], object]:
        # Adam's second-moment update, exp_avg_sq.addcmul_(grad, grad, value=1 - beta2).
        x, g = torch.randn(1_000_000).to(dev), torch.randn(1_000_000).to(dev)
        return lambda: x.addcmul_(g, g, value=1e-3)

    def group_norm(dev: torch.device) -> Callable[[], object]:
        x = torch.randn(8, 64, 32, 32).to(dev).requires_grad_()
        w, b = torch.randn(64).to(dev).requires_grad_(), torch.randn(64).to(dev).requires_grad_()

        def run() -> object:
            y = torch.nn.functional.group_norm(x, 32, w, b)
            y.backward(torch.ones_like(y))
            return y
        return run

    def mm(n: int, dtype: torch.dtype = torch.float32) -> Callable[[torch.device], Callable[[], object]]:
        def make(dev: torch.device) -> Callable[[], object]:
            a, b = torch.randn(n, n).to(dev, dtype), torch.randn(n, n).to(dev, dtype)
            return lambda: a @ b
        return make

    def bmm(dev: torch.device) -> Callable[[], object]:
        a, b = torch.randn(32, 128, 128).to(dev), torch.randn(32, 128, 128).to(dev)
        return lambda: torch.bmm(a, b)

    def linear(dev: torch.device) -> Callable[[], object]:
        x, w, b = torch.randn(256, 512).to(dev), torch.randn(512, 512).to(dev), torch.randn(512).to(dev)
        return lambda: torch.nn.functional.linear(x, w, b)

    def linear_layers(dev: torch.device) -> Callable[[], object]:
        # A model's linear layers (BERT's 1024 -> 256): 24 weights, 24 MB in all, so each call
        # reads its weight from memory or the last-level cache, as in a forward pass.
        x = torch.randn(256, 1024).to(dev)
        layers = [(torch.randn(256, 1024).to(dev), torch.randn(256).to(dev)) for _ in range(24)]
        return lambda: [torch.nn.functional.linear(x, w, b) for w, b in layers]

    def conv(backward: bool, channels_last: bool = False) -> Callable[[torch.device], Callable[[], object]]:
        fmt = torch.channels_last if channels_last else torch.contiguous_format

        def make(dev: torch.device) -> Callable[[], object]:
            x = torch.randn(32, 16, 32, 32).to(dev, memory_format=fmt).requires_grad_(backward)
            w = torch.randn(32, 16, 3, 3).to(dev, memory_format=fmt).requires_grad_(backward)

            def run() -> object:
                y = torch.nn.functional.conv2d(x, w, padding=1)
                if backward:
                    y.backward(torch.ones_like(y))
                return y
            return run
        return make

    def pool(kernel: int, stride: int, padding: int, backward: bool = False) -> Callable[
            [torch.device], Callable[[], object]]:
        def make(dev: torch.device) -> Callable[[], object]:
            x = torch.randn(32, 32, 64, 64).to(dev).requires_grad_(backward)

            def fwd_bwd() -> object:
                y = torch.nn.functional.max_pool2d(x, kernel, stride, padding)
                y.backward(torch.ones_like(y))
                return y
            if backward:
                return fwd_bwd
            return lambda: torch.nn.functional.max_pool2d(x, kernel, stride, padding)
        return make

    def rng(kind: str) -> Callable[[torch.device], Callable[[], object]]:
        def make(dev: torch.device) -> Callable[[], object]:
            x = torch.empty(10_000_000, device=dev)
            return {"rand": lambda: x.uniform_(), "randn": lambda: x.normal_(),
                    "dropout": lambda: torch.nn.functional.dropout(x, 0.5)}[kind]
        return make

    def rnn(kind: str) -> Callable[[torch.device], Callable[[], object]]:
        def make(dev: torch.device) -> Callable[[], object]:
            torch.manual_seed(0)
            cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
            m = cls(256, 256).to(dev)
            x = torch.randn(32, 32, 256).to(dev).requires_grad_()
            g = torch.randn(32, 32, 256).to(dev)

            def run() -> object:
                y, _ = m(x)
                y.backward(g)
                return y
            return run
        return make

    def attention(shape: tuple[int, int, int, int], backward: bool) -> Callable[[torch.device], Callable[[], object]]:
        def make(dev: torch.device) -> Callable[[], object]:
            torch.manual_seed(0)
            q, k, v = (torch.randn(shape).to(dev).requires_grad_(backward) for _ in range(3))
            g = torch.randn(shape).to(dev)

            def run() -> object:
                y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
                if backward:
                    y.backward(g)
                return y
            return run
        return make

    def train_step(kind: str) -> Callable[[torch.device], Callable[[], object]]:
        from torch import nn

        def make(dev: torch.device) -> Callable[[], object]:
            torch.manual_seed(0)
            if kind == "mlp":
                model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
                x, y = torch.randn(128, 64), torch.randint(0, 10, (128,))
                opt_cls = torch.optim.SGD
            elif kind == "cnn":
                model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
                x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
                opt_cls = torch.optim.Adam
            else:
                layer = nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True)
                model = nn.Sequential(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), nn.Flatten(),
                                      nn.Linear(64 * 128, 10))
                x, y = torch.randn(16, 64, 128), torch.randint(0, 10, (16,))
                opt_cls = torch.optim.AdamW
            model = model.to(dev)
            x, y = x.to(dev), y.to(dev)
            opt = opt_cls(model.parameters(), lr=1e-3)

            def step() -> object:
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                return loss
            return step
        return make

    def optimizer_step(opt_name: str, fused: bool) -> Callable[[torch.device], Callable[[], object]]:
        """One optimizer step over ResNet-18's parameter shapes (11.7M floats, 62 tensors). Unfused,
        foo takes the foreach path (PyTorch's default for an accelerator), the CPU its per-tensor loop."""
        def make(dev: torch.device) -> Callable[[], object]:
            shapes = [(64, 3, 7, 7)] + [(64, 64, 3, 3)] * 4
            for c_in, c in ((64, 128), (128, 256), (256, 512)):
                shapes += [(c, c_in, 3, 3), (c, c, 3, 3), (c, c, 3, 3), (c, c, 3, 3), (c, c_in, 1, 1)]
            shapes += [(1000, 512), (1000,)] + [(c,) for c in [64] * 10 + [128] * 10 + [256] * 10 + [512] * 10]
            g = torch.Generator().manual_seed(0)
            params = [torch.nn.Parameter(torch.randn(s, generator=g).to(dev)) for s in shapes]
            for p in params:
                p.grad = torch.randn(p.shape, generator=g).to(dev)
            opt_cls = {"AdamW": torch.optim.AdamW, "SGD": torch.optim.SGD}[opt_name]
            extra = {"momentum": 0.9} if opt_name == "SGD" else {}
            opt = opt_cls(params, lr=1e-3, fused=fused or None, **extra)
            return opt.step
        return make

    out = {
        "add 1 element": small_add,
        "add 1e5": elementwise(100_000),
        "add 1e6": elementwise(1_000_000),
        "add 1e7": elementwise(10_000_000),
        "broadcast add 1000x1000 + 1000": bcast_add,
        "transposed add 1000x1000": transposed_add,
        "exp 1e6": unary(torch.exp),
        "to(bfloat16) 1e6": unary(lambda a: a.to(torch.bfloat16)),
        "to(float16) 1e6": unary(lambda a: a.to(torch.float16)),
        "tanh 1e6": unary(torch.tanh),
        "sigmoid 1e6": unary(torch.sigmoid),
        "gelu 1e6": unary(torch.nn.functional.gelu),
        "erf 1e6": unary(torch.erf),
        "erfc 1e6": unary(torch.erfc),
        "copy host->device 1e6 (CPU: clone)": to_device,
        "sum of 16": reduce_case("sum16"),
        "sum 1e6": reduce_case("sum"),
        "sum(dim=-1) 1000x1000": reduce_case("sum(dim=-1)"),
        "sum(dim=0) 1000x1000": reduce_case("sum(dim=0)"),
        "max(dim=-1) 1000x1000": reduce_case("max(dim=-1)"),
        "var(dim=-1) 1000x1000": reduce_case("var(dim=-1)"),
        "softmax 4096x1024": nn_case("softmax"),
        "layer_norm 4096x1024": nn_case("layer_norm"),
        "group_norm fwd+bwd [8,64,32,32] 32 groups": group_norm,
        "addcmul_ 1e6 (in place)": addcmul_inplace,
        "mm 128": mm(128),
        "mm 256": mm(256),
        "mm 512": mm(512),
        "mm 1024": mm(1024),
        "mm 2048": mm(2048),
        "mm 1024 bfloat16": mm(1024, torch.bfloat16),
        "bmm 32x128x128": bmm,
        "linear 256x512->512": linear,
        "24 linear layers 256x1024->256, weights cold": linear_layers,
        "conv2d fwd [32,16,32,32] 3x3": conv(False),
        "conv2d fwd+bwd [32,16,32,32] 3x3": conv(True),
        "conv2d channels_last fwd [32,16,32,32] 3x3": conv(False, channels_last=True),
        "conv2d channels_last fwd+bwd [32,16,32,32] 3x3": conv(True, channels_last=True),
        "max_pool2d [32,32,64,64]": pool(2, 2, 0),
        "max_pool2d fwd+bwd [32,32,64,64]": pool(2, 2, 0, backward=True),
        "max_pool2d 3x3 s2 p1 [32,32,64,64]": pool(3, 2, 1),
        "rand 1e7": rng("rand"),
        "randn 1e7": rng("randn"),
        "dropout 1e7": rng("dropout"),
        "causal attention [8,4,64,32]": attention((8, 4, 64, 32), False),
        "causal attention fwd+bwd [8,4,64,32]": attention((8, 4, 64, 32), True),
        "causal attention [4,4,128,64]": attention((4, 4, 128, 64), False),
        "LSTM(256,256) fwd+bwd seq32 b32": rnn("lstm"),
        "GRU(256,256) fwd+bwd seq32 b32": rnn("gru"),
        "AdamW step resnet18 params": optimizer_step("AdamW", False),
        "AdamW step resnet18 params fused": optimizer_step("AdamW", True),
        "SGD momentum step resnet18 params fused": optimizer_step("SGD", True),
        "train step MLP": train_step("mlp"),
        "train step CNN": train_step("cnn"),
        "train step transformer": train_step("transformer"),
    }
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--filter", default="")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, foo_rs {foo_rs.__version__}; CPU threads {torch.get_num_threads()}, "
          f"foo threads {foo_rs._C.num_threads()} (foo follows torch.set_num_threads)")
    print(f"median of >= {args.repeat} calls and >= 50 ms per round, median of 3 interleaved rounds")
    print(f"{'case':34s} {'cpu ms':>10s} {'foo ms':>10s} {'foo/cpu':>8s}")
    for name, make in cases().items():
        if args.filter and args.filter not in name:
            continue
        cpu_fn, foo_fn = make(torch.device("cpu")), make(torch.device("foo"))
        cpu_t, foo_t = [], []
        for _ in range(3):  # interleave to share the machine's noise
            cpu_t.append(timeit(cpu_fn, args.repeat))
            foo_t.append(timeit(foo_fn, args.repeat, torch.foo.synchronize))
        c, f = statistics.median(cpu_t), statistics.median(foo_t)
        print(f"{name:34s} {c * 1e3:10.3f} {f * 1e3:10.3f} {f / c:8.2f}")


if __name__ == "__main__":
    main()
