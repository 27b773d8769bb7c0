"""Rank processes for the distributed tests: spawned once, fed scenarios, always bounded in time.

``Ranks(n)`` spawns ``n`` processes (multiprocessing "spawn", so nothing of the test process's
torch state is inherited) that import torch and foo_rs, turn strict mode on and then run
scenario functions (``"module.function"``, a module of tests/) on request, each rank with its
own arguments, and send back the result or the traceback. Every wait is bounded; on a timeout,
a failure or ``close()`` the processes are killed and reaped, so a hung collective fails the
test instead of hanging it and no process outlives the test module.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import time
import traceback
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any


class RankError(AssertionError):
    """A scenario raised on some rank; the message carries that rank's traceback."""


def _serve(rank: int, conn: Connection, env: dict[str, str], with_foo: bool) -> None:
    os.environ.update(env)
    if with_foo:
        import foo_rs

        foo_rs._C.set_strict(True)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        name, kwargs = msg
        if name == "ready":
            conn.send(("ok", os.getpid()))
            continue
        try:
            module, function = name.rsplit(".", 1)
            reply: tuple[str, Any] = ("ok", getattr(importlib.import_module(module), function)(rank, **kwargs))
        except BaseException:  # noqa: BLE001 (anything a scenario raises goes back to the test)
            reply = ("error", traceback.format_exc())
        conn.send(reply)


class Ranks:
    """``n`` rank processes running scenario functions on request."""

    def __init__(self, n: int = 2, env: dict[str, str] | None = None, start_timeout: float = 60.0,
                 with_foo: bool = True) -> None:
        """``with_foo=False``: processes that never import foo_rs (nor autoload it), to compare
        a CPU program with and without it."""
        ctx = mp.get_context("spawn")
        self.n = n
        # False once a scenario failed or a rank died or timed out: the other ranks may be stuck
        # in a collective then, so these processes are not to be given more work.
        self.healthy = True
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        base = {"FOO_RS_STRICT": "1", "FOO_RS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        if not with_foo:
            base["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        for rank in range(n):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(rank, child, {**base, **(env or {})}, with_foo), daemon=True)
            p.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(p)
        self.pids = self.run("ready", timeout=start_timeout)

    def run(self, name: str, timeout: float = 30.0, per_rank: Sequence[dict[str, Any]] | None = None,
            **kwargs: Any) -> list[Any]:
        """Runs ``<module>.<function>(rank, **kwargs)`` (``name``) on every rank (``per_rank[r]`` adds
        rank r's own arguments); returns the results in rank order, raises RankError with the
        tracebacks if a rank raised, and kills every rank if one has not answered in time."""
        for rank, conn in enumerate(self.conns):
            conn.send((name, {**kwargs, **(per_rank[rank] if per_rank else {})}))
        return self.collect(name, timeout)

    def collect(self, name: str, timeout: float, ranks: Sequence[int] | None = None) -> list[Any]:
        replies: list[Any] = []
        errors: list[str] = []
        for rank in ranks if ranks is not None else range(self.n):
            conn = self.conns[rank]
            if not conn.poll(timeout):
                self.healthy = False
                self.close()
                raise TimeoutError(f"{name}: rank {rank} did not answer within {timeout} s (ranks killed)")
            try:
                status, value = conn.recv()
            except (EOFError, OSError):
                self.healthy = False
                self.close()
                raise RankError(f"{name}: rank {rank} died (exit code {self.procs[rank].exitcode})") from None
            if status == "error":
                errors.append(f"--- rank {rank} ---\n{value}")
            replies.append(value)
        if errors:
            self.healthy = False
            raise RankError(f"{name} failed:\n" + "\n".join(errors))
        return replies

    def port(self) -> int:
        """Opens rank 0's rendezvous store (dist_store.py); its port is the ``port`` argument of
        the scenario that makes the group next."""
        self.send(0, "dist_store.listen")
        return self.collect("dist_store.listen", 30, ranks=[0])[0]

    def send(self, rank: int, name: str, **kwargs: Any) -> None:
        """Starts a scenario on one rank only; collect() its reply."""
        self.conns[rank].send((name, kwargs))

    def kill(self, rank: int) -> None:
        self.healthy = False
        self.procs[rank].kill()
        self.procs[rank].join(10)

    def close(self, grace: float = 3.0) -> None:
        """Asks every rank to exit, gives them ``grace`` seconds in all, then kills the rest."""
        for conn in self.conns:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + grace
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        for conn in self.conns:
            conn.close()

    def __enter__(self) -> Ranks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
