"""The c10d backend for foo tensors: gloo's collectives on CPU views of foo memory.

Each collective turns its foo tensors into CPU tensors over the same memory (``_host``, ``_work``),
hands them to a ``ProcessGroupGloo`` and returns a Work over gloo's own: gloo does the transfer and
the reduction in place in foo memory, nothing is copied (strided tensors excepted), and ``wait()``
/ the future finish when gloo does (its errors and timeouts included). The future's value is the
foo tensors, not the CPU views, so DDP's reducer and comm hooks keep working on foo buffers.

PyTorch calls these methods through its ``PyBackend`` trampoline
(torch/csrc/distributed/c10d/py/PyBackend.hpp), which wraps whatever they return in a
``PyWorkHolder``; that holder forwards ``wait()`` and ``get_future()`` only, so on the Work a
user gets back, ``is_completed()`` stays False. ``work.get_future().done()`` is the honest
completion test (see README, "Training on several processes").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import torch
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    ProcessGroupGloo,
    ReduceOp,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
    Work,
)
from torch._C._distributed_c10d import Backend as _C10dBackend

from ._host import GLOO_DTYPES, GLOO_REDUCIBLE
from ._work import Call

BACKEND = "foo_gloo"

def _check_reducible(tensors: Sequence[torch.Tensor], op: ReduceOp) -> None:
    for t in tensors:
        if t.dtype not in GLOO_REDUCIBLE:
            raise TypeError(
                f"{BACKEND}: gloo cannot reduce {t.dtype} tensors (it reduces "
                f"{', '.join(sorted(str(d).removeprefix('torch.') for d in GLOO_REDUCIBLE))}); "
                "broadcast, gather, scatter, all_gather, all_to_all and send/recv carry every foo dtype"
            )
        if op == ReduceOp.AVG and not (t.is_floating_point() or t.is_complex()):
            raise TypeError(f"{BACKEND}: ReduceOp.AVG needs a floating-point tensor, got {t.dtype}; use SUM")


def _mover(*groups: Sequence[torch.Tensor]) -> Call:
    """A Call for a data-moving collective: typed views where gloo knows the dtype, the raw bytes
    otherwise (one representation for the whole call: gloo checks that the dtypes agree)."""
    return Call(raw=not all(t.dtype in GLOO_DTYPES for ts in groups for t in ts))


def _reducer(tensors: Sequence[torch.Tensor], op: ReduceOp) -> Call:
    _check_reducible(tensors, op)
    return Call()


def _sum_if_avg(op: ReduceOp) -> ReduceOp:
    # gloo has no AVG: it sums, and the foo tensors are divided once the sum has landed.
    return ReduceOp.SUM if op == ReduceOp.AVG else op


def _divider(op: ReduceOp, tensors: Sequence[torch.Tensor], size: int) -> Callable[[], None] | None:
    """What turns gloo's SUM into the AVG that was asked for, run once the SUM has landed."""
    if op != ReduceOp.AVG:
        return None

    def divide() -> None:
        with torch.no_grad():
            for t in tensors:
                # Complex as its real pairs: the same division, on a float kernel.
                (torch.view_as_real(t) if t.is_complex() else t).div_(size)

    return divide


_ALIVE: set[ProcessGroupFooGloo] = set()


class ProcessGroupFooGloo(_C10dBackend):
    """c10d backend for foo tensors: delegates to ``gloo`` on CPU views of foo memory.

    ``gloo`` may be shared with the group's CPU backend (one connection per group, one order of
    collectives across devices)."""

    def __init__(self, gloo: ProcessGroupGloo) -> None:
        super().__init__(gloo.rank(), gloo.size())
        self._gloo = gloo
        # C++ may hold this backend where nothing holds its Python object (a debug-mode
        # ProcessGroupWrapper around it): PyBackend then finds no Python override and every call
        # lands in c10d::Backend's "not implemented". Alive until shutdown().
        _ALIVE.add(self)

    @property
    def gloo(self) -> ProcessGroupGloo:
        return self._gloo

    def getBackendName(self) -> str:  # noqa: N802 (the C++ name PyBackend overrides)
        return BACKEND

    @property
    def options(self) -> Any:
        return self._gloo.options

    # PyBackend reads these properties through Python; one a subclass leaves to the base class
    # recurses forever (the base getter calls the virtual, which asks Python again), so each is
    # spelled out. None of these capabilities is offered: torch.distributed then takes its plain
    # paths (batch_isend_irecv issues its ops one by one, as for gloo on CPU tensors).
    supports_splitting = property(lambda self: False)
    supports_coalescing = property(lambda self: False)
    supports_shrinking = property(lambda self: False)
    supports_reconfigure = property(lambda self: False)
    supports_window = property(lambda self: False)
    _supports_time_estimate = property(lambda self: False)

    def _avg(self, op: ReduceOp, tensors: Sequence[torch.Tensor]) -> Callable[[], None] | None:
        return _divider(op, tensors, self.size())

    # -- reductions ---------------------------------------------------------------------------

    def allreduce(self, tensors: list[torch.Tensor], opts: AllreduceOptions) -> Work:
        call = _reducer(tensors, opts.reduceOp)
        o = AllreduceOptions()
        o.reduceOp, o.timeout = _sum_if_avg(opts.reduceOp), opts.timeout
        work = self._gloo.allreduce([call.both(t) for t in tensors], o)
        return call.work(work, tensors, self._avg(opts.reduceOp, tensors))

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: AllreduceCoalescedOptions) -> Work:
        call = _reducer(tensors, opts.reduceOp)
        o = AllreduceCoalescedOptions()
        o.reduceOp, o.timeout = _sum_if_avg(opts.reduceOp), opts.timeout
        work = self._gloo.allreduce_coalesced([call.both(t) for t in tensors], o)
        return call.work(work, tensors, self._avg(opts.reduceOp, tensors))

    def reduce(self, tensors: list[torch.Tensor], opts: ReduceOptions) -> Work:
        call = _reducer(tensors, opts.reduceOp)
        o = ReduceOptions()
        o.reduceOp, o.rootRank, o.rootTensor, o.timeout = (
            _sum_if_avg(opts.reduceOp),
            opts.rootRank,
            opts.rootTensor,
            opts.timeout,
        )
        work = self._gloo.reduce([call.both(t) for t in tensors], o)
        root = opts.rootRank == self.rank()
        return call.work(work, tensors, self._avg(opts.reduceOp, tensors) if root else None)

    def reduce_scatter(
        self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts: ReduceScatterOptions
    ) -> Work:
        call = _reducer([*outputs, *(t for ts in inputs for t in ts)], opts.reduceOp)
        work = self._gloo.reduce_scatter(
            [call.written(t) for t in outputs], [[call.read(t) for t in ts] for ts in inputs], self._rs_opts(opts)
        )
        return call.work(work, outputs, self._avg(opts.reduceOp, outputs))

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts: ReduceScatterOptions) -> Work:
        call = _reducer([output, input], opts.reduceOp)
        work = self._gloo.reduce_scatter_single(call.written(output), call.read(input), self._rs_opts(opts))
        return call.work(work, [output], self._avg(opts.reduceOp, [output]))

    def reduce_scatter_single_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: ReduceScatterOptions
    ) -> Work:
        call = _reducer([*outputs, *inputs], opts.reduceOp)
        work = self._gloo.reduce_scatter_single_coalesced(
            [call.written(t) for t in outputs], [call.read(t) for t in inputs], self._rs_opts(opts)
        )
        return call.work(work, outputs, self._avg(opts.reduceOp, outputs))

    @staticmethod
    def _rs_opts(opts: ReduceScatterOptions) -> ReduceScatterOptions:
        o = ReduceScatterOptions()
        o.reduceOp, o.timeout = _sum_if_avg(opts.reduceOp), opts.timeout
        return o

    # -- data movement (any dtype: raw bytes where gloo has no type) ---------------------------

    def broadcast(self, tensors: list[torch.Tensor], opts: BroadcastOptions) -> Work:
        call = _mover(tensors)
        return call.work(self._gloo.broadcast([call.both(t) for t in tensors], opts), tensors)

    def allgather(
        self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: AllgatherOptions
    ) -> Work:
        call = _mover(inputs, *outputs)
        work = self._gloo.allgather([[call.written(t) for t in ts] for ts in outputs], [call.read(t) for t in inputs],
                                    opts)
        return call.work(work, outputs)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: AllgatherOptions) -> Work:
        call = _mover([output, input])
        return call.work(self._gloo.all_gather_single(call.written(output), call.read(input), opts), [output])

    def allgather_coalesced(
        self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: AllgatherOptions
    ) -> Work:
        call = _mover(inputs, *outputs)
        work = self._gloo.allgather_coalesced(
            [[call.written(t) for t in ts] for ts in outputs], [call.read(t) for t in inputs], opts
        )
        return call.work(work, outputs)

    def all_gather_single_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: AllgatherOptions
    ) -> Work:
        call = _mover(outputs, inputs)
        work = self._gloo.all_gather_single_coalesced(
            [call.written(t) for t in outputs], [call.read(t) for t in inputs], opts
        )
        return call.work(work, outputs)

    def gather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: GatherOptions) -> Work:
        call = _mover(inputs, *outputs)
        work = self._gloo.gather(
            [[call.written(t) for t in ts] for ts in outputs], [call.read(t) for t in inputs], opts
        )
        return call.work(work, outputs)

    def scatter(self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts: ScatterOptions) -> Work:
        call = _mover(outputs, *inputs)
        work = self._gloo.scatter([call.written(t) for t in outputs], [[call.read(t) for t in ts] for ts in inputs],
                                  opts)
        return call.work(work, outputs)

    def alltoall(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: AllToAllOptions) -> Work:
        call = _mover(outputs, inputs)
        work = self._gloo.alltoall([call.written(t) for t in outputs], [call.read(t) for t in inputs], opts)
        return call.work(work, outputs)

    def all_to_all_single(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        output_split_sizes: list[int],
        input_split_sizes: list[int],
        opts: AllToAllOptions,
    ) -> Work:
        call = _mover([output, input])
        work = self._gloo.all_to_all_single(
            call.written(output), call.read(input), output_split_sizes, input_split_sizes, opts
        )
        return call.work(work, [output])

    # -- point to point (gloo's send/recv Works have no future: see FooWork) -------------------

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> Work:
        call = _mover(tensors)
        return call.work(self._gloo.send([call.read(t) for t in tensors], dst, tag), tensors)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> Work:
        call = _mover(tensors)
        return call.work(self._gloo.recv([call.written(t) for t in tensors], src, tag), tensors)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int) -> Work:
        call = _mover(tensors)
        return call.work(self._gloo.recv_anysource([call.written(t) for t in tensors], tag), tensors)

    # -- synchronisation and lifecycle ---------------------------------------------------------

    def barrier(self, opts: BarrierOptions) -> Work:
        return self._gloo.barrier(opts)

    def monitored_barrier(self, opts: BarrierOptions | timedelta, wait_all_ranks: bool = False) -> None:
        # Called from C++ with BarrierOptions, from Python with the public (timeout, flag) form.
        timeout = opts.timeout if isinstance(opts, BarrierOptions) else opts
        self._gloo.monitored_barrier(timeout, wait_all_ranks)

    def set_timeout(self, timeout: timedelta) -> None:
        self._gloo.set_timeout(timeout)

    def _set_sequence_number_for_group(self) -> None:
        self._gloo._set_sequence_number_for_group()

    def _get_sequence_number_for_group(self) -> int:
        return self._gloo._get_sequence_number_for_group()

    def shutdown(self) -> None:
        self._gloo.shutdown()
        _ALIVE.discard(self)

    def abort(self) -> None:
        self._gloo.abort()
