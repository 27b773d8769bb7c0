"""The rendezvous store of the test ranks, on a port the OS picks for rank 0 (no window in which
another process could take a port chosen in advance). No foo_rs import: dist_cpu.py's ranks
run without it."""

from __future__ import annotations

import datetime

import torch.distributed as dist

_LISTENING: list[dist.TCPStore] = []


def listen(rank: int, timeout_s: float = 30.0) -> int:
    """Rank 0: opens the store; returns its port, for the other ranks' ``connect``."""
    store = dist.TCPStore("127.0.0.1", 0, world_size=2, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=timeout_s))
    _LISTENING.append(store)
    return store.port


def connect(rank: int, port: int, timeout_s: float = 30.0) -> dist.Store:
    """The store of a group being made: rank 0's own (opened by ``listen``), a client elsewhere."""
    if rank == 0:
        return _LISTENING.pop()
    return dist.TCPStore("127.0.0.1", port, world_size=2, is_master=False,
                         timeout=datetime.timedelta(seconds=timeout_s))
