"""What the rank processes of tests/test_distributed.py run: process groups and collectives.

Each function takes the rank first and returns something picklable for the test to check.
Expected values are built on every rank from the same seeded data (each rank can recreate what
any other rank holds), so a result is checked against what the collective means, and
reductions are also checked against the same call on CPU tensors through PyTorch's gloo.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

import dist_store
import foo_rs
import torch
import torch.distributed as dist

WORLD = 2
FOO = "foo"
GLOO_DTYPES = foo_rs.distributed.GLOO_DTYPES
UNSIGNED = {torch.uint8, torch.uint16, torch.uint32, torch.uint64}


def init(rank: int, port: int, backend: str | None = None, timeout_s: float = 20.0,
         device_id: str | None = None) -> str:
    kwargs: dict[str, Any] = {} if backend is None else {"backend": backend}
    if device_id is not None:
        kwargs["device_id"] = torch.device(device_id)
    dist.init_process_group(store=dist_store.connect(rank, port, timeout_s), rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    return str(dist.get_backend_config())


def initialized(rank: int) -> bool:
    return dist.is_initialized()


def destroy(rank: int) -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def data(rank: int, dtype: torch.dtype, n: int = 6, salt: int = 0) -> torch.Tensor:
    """Rank ``rank``'s input, on the CPU; any rank can make any rank's."""
    g = torch.Generator().manual_seed(1000 * rank + 17 * salt + 1)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_floating_point:
        return (torch.randn(n, generator=g) * 4).to(dtype)
    if dtype.is_complex:
        return torch.complex(torch.randn(n, generator=g), torch.randn(n, generator=g)).to(dtype)
    lo, hi = (0, 12) if dtype in UNSIGNED else (-7, 8)  # products of two stay in range
    return torch.randint(lo, hi, (n,), generator=g).to(dtype)


def spelling(rank: int, port: int, backend: str | None, device_id: str | None = None) -> dict[str, Any]:
    """One init spelling: foo and CPU all_reduce, barrier, a new_group, an object collective."""
    config = init(rank, port, backend, device_id=device_id)
    try:
        x = torch.full((3,), rank + 1.0, device=FOO)
        dist.all_reduce(x)
        c = torch.full((3,), rank + 1.0)
        dist.all_reduce(c)
        dist.barrier()
        sub = dist.new_group([0, 1])
        s = torch.full((2,), 2.0 * rank, device=FOO)
        dist.all_reduce(s, group=sub)
        objects: list[Any] = [None] * WORLD
        dist.all_gather_object(objects, {"rank": rank})
        return {
            "config": config,
            "foo": x.cpu().tolist(),
            "cpu": c.tolist(),
            "subgroup": s.cpu().tolist(),
            "objects": objects,
            "foo_backend": type(dist.group.WORLD._get_backend(torch.device(FOO))).__name__,
            "cpu_backend": type(dist.group.WORLD._get_backend(torch.device("cpu"))).__name__,
        }
    finally:
        destroy(rank)


# --- every collective, one dtype ------------------------------------------------------------


def _outcome(fn: Callable[[str], list[torch.Tensor]], device: str) -> tuple[str, Any]:
    try:
        return "ok", [t.cpu() for t in fn(device)]
    except Exception as e:  # noqa: BLE001 (the outcome, raised or not, is what is compared)
        return "raised", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and torch.equal(x.view(torch.uint8) if x.dtype == torch.bool else x,
                                                                 y.view(torch.uint8) if y.dtype == torch.bool else y)
        for x, y in zip(a, b)
    )


def _reduce_ops(dtype: torch.dtype) -> list[dist.ReduceOp]:
    ops = [dist.ReduceOp.SUM]
    if dtype.is_complex:
        return [*ops, dist.ReduceOp.AVG]
    ops += [dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    if dtype.is_floating_point:
        return [*ops, dist.ReduceOp.AVG]
    return [*ops, dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR]


def _op_on(device: str, op: dist.ReduceOp) -> dist.ReduceOp:
    """AVG is gloo's SUM divided by the world size on foo; gloo refuses AVG on CPU tensors, so
    the CPU side of a comparison asks for the SUM (and ``_avg_on`` divides it)."""
    return dist.ReduceOp.SUM if device == "cpu" and op == dist.ReduceOp.AVG else op


def _avg_on(device: str, op: dist.ReduceOp, ts: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t / WORLD for t in ts] if device == "cpu" and op == dist.ReduceOp.AVG else ts


def _reductions(rank: int, dtype: torch.dtype) -> dict[str, Callable[[str], list[torch.Tensor]]]:
    def x(r: int, salt: int = 0, n: int = 6) -> torch.Tensor:
        return data(r, dtype, n, salt)

    cases: dict[str, Callable[[str], list[torch.Tensor]]] = {}
    for op in _reduce_ops(dtype):
        def all_reduce(device: str, op: dist.ReduceOp = op) -> list[torch.Tensor]:
            t = x(rank).to(device)
            dist.all_reduce(t, op=_op_on(device, op))
            return _avg_on(device, op, [t])

        def reduce(device: str, op: dist.ReduceOp = op) -> list[torch.Tensor]:
            t = x(rank).to(device)
            dist.reduce(t, dst=1, op=_op_on(device, op))
            return _avg_on(device, op, [t]) if rank == 1 else [t]

        cases[f"all_reduce {op}"] = all_reduce
        cases[f"reduce {op}"] = reduce
        if dtype.is_complex:
            continue

        def reduce_scatter_tensor(device: str, op: dist.ReduceOp = op) -> list[torch.Tensor]:
            out = torch.empty(3, dtype=dtype, device=device)
            dist.reduce_scatter_tensor(out, x(rank).to(device), op=_op_on(device, op))
            return _avg_on(device, op, [out])

        def reduce_scatter(device: str, op: dist.ReduceOp = op) -> list[torch.Tensor]:
            out = torch.empty(3, dtype=dtype, device=device)
            dist.reduce_scatter(out, [x(rank, s, 3).to(device) for s in range(WORLD)], op=_op_on(device, op))
            return _avg_on(device, op, [out])

        cases[f"reduce_scatter_tensor {op}"] = reduce_scatter_tensor
        cases[f"reduce_scatter {op}"] = reduce_scatter

    def all_reduce_coalesced(device: str) -> list[torch.Tensor]:
        ts = [x(rank, 0, 4).to(device), x(rank, 1, 3).to(device)]
        dist.all_reduce_coalesced(ts)
        return ts

    if not dtype.is_complex:
        cases["all_reduce_coalesced"] = all_reduce_coalesced
    return cases


def _movements(rank: int, dtype: torch.dtype) -> dict[str, Callable[[], bool]]:
    """Data-moving collectives on foo, each returning whether the result is the data it means."""

    def x(r: int, salt: int = 0, n: int = 6) -> torch.Tensor:
        return data(r, dtype, n, salt)

    def same(got: torch.Tensor, want: torch.Tensor) -> bool:
        return got.device.type == FOO and _same([got.cpu()], [want])

    def broadcast() -> bool:
        t = x(rank).to(FOO)
        dist.broadcast(t, src=1)
        return same(t, x(1))

    def all_gather() -> bool:
        outs = [torch.empty(6, dtype=dtype, device=FOO) for _ in range(WORLD)]
        dist.all_gather(outs, x(rank).to(FOO))
        return all(same(o, x(r)) for r, o in enumerate(outs))

    def all_gather_into_tensor() -> bool:
        out = torch.empty(6 * WORLD, dtype=dtype, device=FOO)
        dist.all_gather_into_tensor(out, x(rank).to(FOO))
        return same(out, torch.cat([x(r) for r in range(WORLD)]))

    def gather() -> bool:
        outs = [torch.empty(6, dtype=dtype, device=FOO) for _ in range(WORLD)] if rank == 0 else None
        dist.gather(x(rank).to(FOO), outs, dst=0)
        return outs is None or all(same(o, x(r)) for r, o in enumerate(outs))

    def scatter() -> bool:
        out = torch.empty(6, dtype=dtype, device=FOO)
        ins = [x(1, s).to(FOO) for s in range(WORLD)] if rank == 1 else None
        dist.scatter(out, ins, src=1)
        return same(out, x(1, rank))

    def all_to_all() -> bool:
        outs = [torch.empty(6, dtype=dtype, device=FOO) for _ in range(WORLD)]
        dist.all_to_all(outs, [x(rank, s).to(FOO) for s in range(WORLD)])
        return all(same(o, x(r, rank)) for r, o in enumerate(outs))

    def all_to_all_single_splits() -> bool:
        # rank r sends splits[r][j] elements to rank j: uneven on purpose.
        splits = [[1, 3], [2, 2]]
        out = torch.empty(sum(splits[r][rank] for r in range(WORLD)), dtype=dtype, device=FOO)
        dist.all_to_all_single(out, x(rank, 0, 4).to(FOO), [splits[r][rank] for r in range(WORLD)], splits[rank])
        want = torch.cat([x(r, 0, 4)[sum(splits[r][:rank]):sum(splits[r][:rank + 1])] for r in range(WORLD)])
        return same(out, want)

    def send_recv() -> bool:
        if rank == 0:
            dist.send(x(0).to(FOO), dst=1)
            return True
        t = torch.empty(6, dtype=dtype, device=FOO)
        dist.recv(t, src=0)
        return same(t, x(0))

    def isend_irecv() -> bool:
        peer = 1 - rank
        got = torch.empty(6, dtype=dtype, device=FOO)
        works = [dist.isend(x(rank, 3).to(FOO), peer), dist.irecv(got, peer)]
        for w in works:
            w.wait()
        return same(got, x(peer, 3))

    def batch_isend_irecv() -> bool:
        peer = 1 - rank
        got = [torch.empty(5, dtype=dtype, device=FOO) for _ in range(2)]
        ops = [dist.P2POp(dist.isend, x(rank, 4, 5).to(FOO), peer), dist.P2POp(dist.irecv, got[0], peer),
               dist.P2POp(dist.isend, x(rank, 5, 5).to(FOO), peer), dist.P2POp(dist.irecv, got[1], peer)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return same(got[0], x(peer, 4, 5)) and same(got[1], x(peer, 5, 5))

    return {f.__name__: f for f in (broadcast, all_gather, all_gather_into_tensor, gather, scatter, all_to_all,
                                    all_to_all_single_splits, send_recv, isend_irecv, batch_isend_irecv)}


def collectives(rank: int, dtype: str) -> dict[str, str]:
    """Every collective on foo tensors of ``dtype``: "ok", or what went wrong."""
    dt = getattr(torch, dtype)
    report: dict[str, str] = {}
    for name, fn in _movements(rank, dt).items():
        try:
            report[name] = "ok" if fn() else "wrong values"
        except Exception as e:  # noqa: BLE001
            report[name] = f"raised {type(e).__name__}: {e}"
    for name, fn in _reductions(rank, dt).items():
        foo = _outcome(fn, FOO)
        if dt not in GLOO_DTYPES and not dt.is_complex:
            # gloo has no such type: foo must refuse clearly, before any communication. (On CPU
            # tensors gloo says "Invalid scalar type" from its worker thread, and the next
            # barrier may rethrow it on one rank only: no CPU comparison here.)
            ok = foo[0] == "raised" and foo[1].startswith("TypeError") and str(dt) in foo[1]
            report[name] = "ok" if ok else f"expected a TypeError naming {dt}, got {foo}"
            continue
        cpu = _outcome(fn, "cpu")
        if foo[0] == cpu[0] == "ok":
            report[name] = "ok" if _same(foo[1], cpu[1]) else f"differs from CPU: {foo[1]} vs {cpu[1]}"
        else:
            report[name] = "ok" if foo == cpu else f"foo {foo} but CPU {cpu}"
    dist.barrier()
    return report








def reduce_int16(rank: int) -> str:
    """A reduction gloo has no type for: what it raises."""
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.int16, device=FOO))
    except Exception as e:  # noqa: BLE001 (the exception is the result)
        return f"{type(e).__name__}: {e}"
    return "returned"


# --- layouts, devices, work objects, objects, barriers --------------------------------------


def _expect(got: torch.Tensor, want: torch.Tensor) -> str:
    return "ok" if got.device.type == FOO and torch.equal(got.cpu(), want) else f"got {got.cpu()}, want {want}"


def noncontiguous(rank: int) -> dict[str, str]:
    """Collectives on strided foo views write through the view and leave the rest untouched."""
    out: dict[str, str] = {}
    m = [data(r, torch.float32, 12).view(3, 4) for r in range(WORLD)]
    t = m[rank].foo().t()  # transposed
    dist.all_reduce(t)
    out["all_reduce transposed"] = _expect(t, (m[0] + m[1]).t())
    base = torch.zeros(10, device=FOO)
    view = base[1::3]  # stepped, with a storage offset
    view.copy_(torch.full((3,), rank + 1.0, device=FOO))
    dist.all_reduce(view)
    out["all_reduce stepped"] = _expect(base, torch.tensor([0, 3, 0, 0, 3, 0, 0, 3, 0, 0.0]))
    grid = torch.zeros(4, 2, device=FOO)
    column = grid[:, 1]
    if rank == 1:
        column.copy_(torch.arange(4.0, device=FOO))
    dist.broadcast(column, src=1)
    out["broadcast column"] = _expect(grid, torch.stack([torch.zeros(4), torch.arange(4.0)], 1))
    outs = torch.zeros(3, WORLD, device=FOO)
    dist.all_gather(list(outs.unbind(1)), m[rank].foo()[:, 0])  # strided outputs and input
    out["all_gather strided"] = _expect(outs, torch.stack([m[r][:, 0] for r in range(WORLD)], 1))
    inbox = torch.zeros(2, 4, device=FOO)
    if rank == 0:
        dist.send(m[0].foo()[1:, ::2], dst=1)
    else:
        dist.recv(inbox[:, 1::2], src=0)
        want = torch.zeros(2, 4)
        want[:, 1::2] = m[0][1:, ::2]
        out["send/recv strided"] = _expect(inbox, want)
    empty = torch.empty(0, 3, device=FOO)
    dist.all_reduce(empty)
    out["all_reduce empty"] = "ok" if empty.shape == (0, 3) else str(empty.shape)
    return out


def two_devices(rank: int) -> dict[str, str]:
    """foo:1 tensors while foo:0 is current, and each rank on a different device."""
    out: dict[str, str] = {}
    t = torch.full((4,), rank + 1.0, device="foo:1")
    dist.all_reduce(t)
    out["all_reduce on foo:1"] = _expect(t, torch.full((4,), 3.0)) if t.device.index == 1 else f"moved to {t.device}"
    mine = torch.full((2,), float(rank), device=f"foo:{rank}")
    outs = [torch.empty(2, device=f"foo:{rank}") for _ in range(WORLD)]
    dist.all_gather(outs, mine)
    out["all_gather, rank r on foo:r"] = _expect(torch.cat(outs), torch.tensor([0.0, 0, 1, 1]))
    return out


def work_objects(rank: int) -> dict[str, str]:
    """async_op=True: waits, futures (value, then-chains, done), several in flight at once."""
    out: dict[str, str] = {}
    t = torch.full((3,), rank + 1.0, device=FOO)
    work = dist.all_reduce(t, async_op=True)
    future = work.get_future()
    doubled = future.then(lambda f: f.value()[0] * 2)
    out["wait returns True"] = "ok" if work.wait() is True else "wait() did not return True"
    out["value"] = _expect(t, torch.full((3,), 3.0))
    value = future.wait()
    out["future value is the foo tensor"] = (
        "ok" if value[0].device.type == FOO and value[0].data_ptr() == t.data_ptr() else f"future value {value}"
    )
    out["future done"] = "ok" if future.done() else "future not done after wait"
    # The Work users get is foo_gloo's own (a C++ backend): completion and errors are reported.
    out["is_completed after wait"] = "ok" if work.is_completed() is True else "is_completed() False after wait()"
    out["no exception"] = "ok" if work.exception() is None else f"exception {work.exception()}"
    out["result is the foo tensor"] = (
        "ok" if [r.data_ptr() for r in work.result()] == [t.data_ptr()] else f"result {work.result()}"
    )
    # Polling alone (no wait) sees the collective finish, with its result in place: a strided
    # tensor (written back from a contiguous stand-in) and an AVG (divided after gloo's sum).
    base = torch.zeros(3, 4, device=FOO)
    strided = base[:, 1]
    strided.fill_(rank + 1.0)
    polled = dist.all_reduce(strided, op=dist.ReduceOp.AVG, async_op=True)
    deadline = time.monotonic() + 30
    while not polled.is_completed() and time.monotonic() < deadline:
        time.sleep(0.001)
    out["is_completed by polling"] = (
        _expect(base, torch.zeros(3, 4).index_fill_(1, torch.tensor([1]), 1.5))
        if polled.is_completed()
        else "never completed"
    )
    out["then-chain"] = _expect(doubled.wait(), torch.full((3,), 6.0))
    many = [torch.full((1000,), float(i + rank), device=FOO) for i in range(4)]
    works = [dist.all_reduce(m, async_op=True) for m in many]
    for w in works:
        w.wait()
    want = torch.stack([torch.full((1000,), 2.0 * i + 1) for i in range(4)])
    out["four in flight"] = _expect(torch.stack(many), want)
    # The CPU views gloo works on own the foo memory: a tensor sent and dropped before the send
    # completes stays intact even if the caching allocator hands its block out again.
    if rank == 0:
        w = dist.isend(torch.full((4096,), 7.0, device=FOO), dst=1)
        for _ in range(8):
            torch.full((4096,), -1.0, device=FOO)
        w.wait()
        out["send is_completed after wait"] = "ok" if w.is_completed() else "send not completed after wait()"
    else:
        got = torch.empty(4096, device=FOO)
        dist.recv(got, src=0)
        out["dropped send buffer"] = _expect(got, torch.full((4096,), 7.0))
    return out


def object_collectives(rank: int) -> dict[str, str]:
    """The pickled-object collectives, through the group's own choice of device and through foo."""
    out: dict[str, str] = {}
    for device in (None, torch.device(FOO)):
        tag = f" (device={device})"
        gathered: list[Any] = [None] * WORLD
        dist.all_gather_object(gathered, {"rank": rank})
        out["all_gather_object" + tag] = "ok" if gathered == [{"rank": 0}, {"rank": 1}] else str(gathered)
        objs: list[Any] = [f"from {rank}", rank] if rank == 1 else [None, None]
        dist.broadcast_object_list(objs, src=1, device=device)
        out["broadcast_object_list" + tag] = "ok" if objs == ["from 1", 1] else str(objs)
        into: list[Any] | None = [None] * WORLD if rank == 0 else None
        dist.gather_object(("g", rank), into, dst=0)
        out["gather_object" + tag] = "ok" if rank == 1 or into == [("g", 0), ("g", 1)] else str(into)
        got: list[Any] = [None]
        dist.scatter_object_list(got, [{"to": 0}, {"to": 1}] if rank == 0 else None, src=0)
        out["scatter_object_list" + tag] = "ok" if got == [{"to": rank}] else str(got)
        box: list[Any] = ["sent", 42] if rank == 0 else [None, None]
        if rank == 0:
            dist.send_object_list(box, dst=1, device=device)
        else:
            dist.recv_object_list(box, src=0, device=device)
        out["send/recv_object_list" + tag] = "ok" if box == ["sent", 42] else str(box)
    return out


def barriers(rank: int) -> dict[str, str]:
    out: dict[str, str] = {}
    dist.barrier()
    out["barrier"] = "ok"
    dist.barrier(device_ids=None, async_op=True).wait()
    out["barrier async"] = "ok"
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=10))
    out["monitored_barrier"] = "ok"
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=10), wait_all_ranks=True)
    out["monitored_barrier wait_all_ranks"] = "ok"
    return out


# --- faults -----------------------------------------------------------------------------------


def timed_collective(rank: int, kind: str, device: str = FOO, n: int | None = None) -> dict[str, Any]:
    """Runs one collective that cannot succeed; returns how it ended and how long it took."""
    t = torch.ones(n if n is not None else 4 + rank, device=device)  # rank-dependent size
    start = time.monotonic()
    try:
        if kind == "all_reduce":
            dist.all_reduce(t)
        elif kind == "all_gather_into_tensor":
            out = torch.empty(2 * t.numel(), device=device)
            dist.all_gather_into_tensor(out, t)
        elif kind == "broadcast":
            dist.broadcast(t, src=0)
        elif kind == "all_reduce polled":
            # Nobody waits: the Work itself must report the failure once gloo gives up.
            work = dist.all_reduce(t, async_op=True)
            while not work.is_completed() and time.monotonic() - start < 60:
                time.sleep(0.01)
            seconds = time.monotonic() - start
            if not work.is_completed():
                return {"outcome": "never completed", "seconds": seconds}
            error = work.exception()
            return {"outcome": f"completed: {type(error).__name__}: {error}", "seconds": seconds}
        outcome = "returned"
    except Exception as e:  # noqa: BLE001 (the outcome is the result)
        outcome = f"{type(e).__name__}: {e}"
    return {"outcome": outcome, "seconds": time.monotonic() - start}


def sleep(rank: int, seconds: float) -> None:
    import time

    time.sleep(seconds)
