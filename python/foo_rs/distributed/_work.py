"""One collective's CPU side: what gloo is handed for each foo tensor, and the Work it returns.

gloo reads and writes ``numel`` elements from a tensor's data pointer, whatever its strides (on
CPU tensors too: an all_reduce of ``x[::3]`` reduces the wrong elements there). A contiguous
foo tensor therefore goes to gloo as a zero-copy CPU view; a strided one goes through a
contiguous foo copy, written back into it when the collective has finished.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
from torch._C._distributed_c10d import Work

from ._host import host_bytes, host_view, is_foo


class FooWork(Work):
    """The Work of one collective on foo tensors: gloo's, with the foo tensors as its result.

    ``wait()`` is gloo's own wait (its timeout, its errors: a timeout, a peer that died), then
    ``then`` (write-backs of strided tensors, AVG's division) runs once, on the caller's thread.
    ``get_future()`` chains gloo's future: the chained one completes after ``then`` has run, with
    the foo tensors as its value (gloo's holds the CPU views), and carries gloo's error. The chain
    is made only when someone asks for the future (DDP's reducer, comm hooks), because its
    callback needs the GIL on gloo's thread: a plain synchronous collective does not pay for it.
    (``_create_work_from_future`` would be shorter, but its wait() swallows the future's error.)

    gloo's Works for some collectives (send/recv, reduce_scatter's list form) have no future:
    ``get_future()`` raises for those as gloo's does for the same call on CPU tensors."""

    def __init__(self, work: Work, value: Any, then: Callable[[], None] | None) -> None:
        super().__init__()
        self._work, self._value, self._then = work, value, then
        self._lock = threading.Lock()
        self._future: torch.futures.Future[Any] | None = None

    def _finish(self) -> None:
        # Runs ``then`` exactly once, from whichever of wait() and the future's callback gets here
        # first; the other blocks on the lock until it has finished.
        if self._then is None:
            return
        with self._lock:
            if self._then is not None:
                self._then()
                self._then = None

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        finished = self._work.wait(timeout)
        self._finish()
        return finished

    def get_future(self) -> torch.futures.Future[Any]:
        if self._future is None:
            value = self._value

            def done(f: torch.futures.Future[Any]) -> Any:
                f.wait()  # re-raises gloo's error into the chained future
                self._finish()
                return value

            self._future = self._work.get_future().then(done)
        return self._future


class Call:
    """Builds one collective's gloo arguments from foo tensors by role (read, written, both).

    ``raw``: hand gloo the tensors' bytes (shape + (itemsize,), uint8), for collectives that only
    move data in a dtype gloo has no type for."""

    def __init__(self, raw: bool = False) -> None:
        self._view = host_bytes if raw else host_view
        self._write_back: list[tuple[torch.Tensor, torch.Tensor]] = []

    def read(self, t: torch.Tensor) -> torch.Tensor:
        """A tensor gloo only reads."""
        if is_foo(t) and not t.is_contiguous():
            t = t.contiguous()
        return self._view(t)

    def written(self, t: torch.Tensor) -> torch.Tensor:
        """A tensor gloo only writes."""
        if is_foo(t) and not t.is_contiguous():
            stand_in = torch.empty_like(t, memory_format=torch.contiguous_format)
            self._write_back.append((t, stand_in))
            t = stand_in
        return self._view(t)

    def both(self, t: torch.Tensor) -> torch.Tensor:
        """A tensor gloo reads and then overwrites with the result (all_reduce, broadcast)."""
        if is_foo(t) and not t.is_contiguous():
            stand_in = t.contiguous()
            self._write_back.append((t, stand_in))
            t = stand_in
        return self._view(t)

    def work(self, work: Work, value: Any, after: Callable[[], None] | None = None) -> Work:
        """gloo's ``work`` as the collective's Work: strided results written back, then ``after``."""
        if not self._write_back and after is None:
            return FooWork(work, value, None)
        pairs = self._write_back

        def then() -> None:
            with torch.no_grad():
                for t, stand_in in pairs:
                    t.copy_(stand_in)
            if after is not None:
                after()

        return FooWork(work, value, then)
