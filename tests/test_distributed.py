"""torch.distributed on foo: 2 ranks over 127.0.0.1, spawned by these tests, in strict mode.

The ranks are long-lived processes (tests/dist_harness.py) that run scenario functions
(tests/dist_scenarios.py, dist_training.py, dist_fsdp.py, dist_cpu.py) and send back what they
saw; every wait is bounded and the processes are killed and reaped at the end of the module or
as soon as one does not answer in time. Fault tests get processes of their own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import foo_rs
import pytest
import torch
import torch.distributed as dist
from dist_harness import Ranks

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()), reason="torch built without distributed/gloo"
)

ALL_DTYPES = [str(d).removeprefix("torch.") for d in foo_rs.SUPPORTED_DTYPES]


class _Shared:
    """The module's rank processes; replaced by fresh ones after a test broke them (a failed
    scenario can leave the other rank waiting in a collective), so one failure stays one."""

    def __init__(self) -> None:
        self.ranks = Ranks(2)

    def get(self) -> Ranks:
        if not self.ranks.healthy:
            self.ranks.close()
            self.ranks = Ranks(2)
        return self.ranks


@pytest.fixture(scope="module")
def _shared() -> Iterator[_Shared]:
    shared = _Shared()
    yield shared
    shared.ranks.close()


@pytest.fixture
def ranks(_shared: _Shared) -> Ranks:
    return _shared.get()


@pytest.fixture
def world(ranks: Ranks) -> Ranks:
    """The shared ranks with their default group (``init_process_group()``, no backend named),
    made on first use."""
    if not all(ranks.run("dist_scenarios.initialized")):
        ranks.run("dist_scenarios.destroy")
        ranks.run("dist_scenarios.init", port=ranks.port())
    return ranks


def _all_ok(reports: list[dict[str, str]]) -> None:
    bad = {f"rank {r}: {k}": v for r, rep in enumerate(reports) for k, v in rep.items() if v != "ok"}
    assert not bad, bad
    assert all(reports), "nothing was checked"


# --- registration and init spellings --------------------------------------------------------


def test_info_reports_the_backend(capsys: pytest.CaptureFixture[str]) -> None:
    from foo_rs._info import print_info

    print_info()
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("distributed:"))
    assert "'foo_gloo' registered" in line, line


def test_registered_in_this_process() -> None:
    assert foo_rs.distributed.is_registered()
    assert dist.Backend.default_device_backend_map["foo"] == "foo_gloo"
    assert dist.get_default_backend_for_device("foo") == "foo_gloo"
    # What CPU programs see is untouched.
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"
    assert dist.Backend.backend_capability["gloo"] == ["cpu", "cuda"]


SPELLINGS = [None, "gloo", "cpu:gloo,foo:foo_gloo", "foo:foo_gloo,cpu:gloo", "foo_gloo"]


@pytest.mark.parametrize("backend", SPELLINGS)
def test_init_spellings(ranks: Ranks, backend: str | None) -> None:
    ranks.run("dist_scenarios.destroy")
    results = ranks.run("dist_scenarios.spelling", port=ranks.port(), backend=backend)
    for r in results:
        assert r["foo"] == [3.0, 3.0, 3.0] and r["cpu"] == [3.0, 3.0, 3.0], r
        assert r["subgroup"] == [2.0, 2.0] and r["objects"] == [{"rank": 0}, {"rank": 1}], r
        assert r["foo_backend"] == "ProcessGroupFooGloo" and r["cpu_backend"] == "ProcessGroupGloo", r


@pytest.mark.parametrize("backend", SPELLINGS)
def test_init_with_device_id(ranks: Ranks, backend: str | None) -> None:
    ranks.run("dist_scenarios.destroy")
    results = ranks.run("dist_scenarios.spelling", port=ranks.port(), backend=backend,
                        per_rank=[{"device_id": "foo:0"}, {"device_id": "foo:1"}])
    assert all(r["foo"] == [3.0, 3.0, 3.0] and r["cpu"] == [3.0, 3.0, 3.0] for r in results), results


def test_cpu_program_unchanged_by_foo_rs() -> None:
    """A CPU-only program (init_process_group() and init_process_group("gloo")) gets the same
    results, backend objects and object-collective device with foo_rs imported as in processes
    that never import it."""
    seen: list[list[list[dict[str, Any]]]] = []
    for with_foo in (False, True):
        with Ranks(2, with_foo=with_foo) as r:
            seen.append([r.run("dist_cpu.cpu_program", port=r.port(), backend=b) for b in (None, "gloo")])
    assert seen[0][0][0]["sum"] == [0.0, 3.0, 6.0, 9.0] and seen[0][0][0]["cpu_backend"] == "ProcessGroupGloo"
    assert seen[0] == seen[1]


# --- every collective and dtype ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_collectives(world: Ranks, dtype: str) -> None:
    """Every collective on foo tensors of ``dtype``: data-moving ones against the data they mean,
    reductions against the same call on CPU tensors through gloo (and a clear TypeError for the
    dtypes gloo cannot reduce: int16, uint16, uint32, uint64)."""
    _all_ok(world.run("dist_scenarios.collectives", dtype=dtype))


@pytest.mark.parametrize("scenario", ["noncontiguous", "two_devices", "work_objects", "object_collectives",
                                      "barriers"])
def test_collective_cases(world: Ranks, scenario: str) -> None:
    _all_ok(world.run(f"dist_scenarios.{scenario}"))


def test_unreducible_dtype_message(world: Ranks) -> None:
    for seen in world.run("dist_scenarios.reduce_int16"):
        assert seen.startswith("TypeError: foo_gloo: gloo cannot reduce torch.int16 tensors"), seen


# --- DDP ------------------------------------------------------------------------------------------

# Largest weight difference DDP (2 x half batch) vs one process (whole batch) may show, relative
# to the largest weight: float32 summation-order noise, which the CPU shows as well (MLP and CNN
# ~1e-7, the LM with AdamW ~4e-5 on the CPU and on foo).
TOLERANCE = {"mlp": 1e-6, "cnn": 1e-6, "lm": 1e-4, "two_heads": 1e-6}


def _ddp(world: Ranks, case: str, **kwargs: Any) -> list[dict[str, Any]]:
    results = world.run("dist_training.ddp_matches_single", timeout=90, case=case, **kwargs)
    for r in results:
        assert r["device"] == "foo:0", r
        assert r["max_diff"] <= TOLERANCE[case] * max(1.0, r["scale"]), r
    return results


@pytest.mark.parametrize("case", ["mlp", "cnn", "lm"])
def test_ddp_matches_single_process(world: Ranks, case: str) -> None:
    for r in _ddp(world, case):
        # DDP's per-device timer exists for foo: forward, backward and communication were timed
        # (without one DDP warns "Time stats are currently only collected for CPU and CUDA").
        assert all(t > 0 for t in r["timing"].values()), r["timing"]


def test_ddp_many_small_buckets_as_views(world: Ranks) -> None:
    _ddp(world, "lm", bucket_cap_mb=0.01, gradient_as_bucket_view=True)


def test_ddp_static_graph(world: Ranks) -> None:
    _ddp(world, "mlp", static_graph=True)


def test_ddp_find_unused_parameters(world: Ranks) -> None:
    for r in _ddp(world, "two_heads", find_unused_parameters=True):
        assert r["grads_none"] == ["unused.bias", "unused.weight"], r


@pytest.mark.parametrize("hook", ["fp16", "bf16"])
def test_ddp_compress_hooks(world: Ranks, hook: str) -> None:
    results = world.run("dist_training.ddp_matches_single", case="mlp", hook=hook)
    for r in results:
        assert r["exact_in_hook_dtype"], "gradients did not come through the compressed all_reduce"
        assert r["max_diff"] <= 1e-3, r  # the gradients were rounded to 8 (bf16) / 11 (fp16) bits


def test_ddp_no_sync(world: Ranks) -> None:
    for r in world.run("dist_training.no_sync"):
        assert r["local_differs_across_ranks"], "no_sync() still averaged the gradients"
        assert r["max_diff"] <= 1e-6, r


# --- FSDP2, DTensor, distributed checkpoints --------------------------------------------------------


def test_dtensor(world: Ranks) -> None:
    for rank, r in enumerate(world.run("dist_fsdp.dtensor")):
        assert r["device"].startswith("foo") and r["replicated"] and r["shard1"], r
        assert r["local"] == torch.arange(24.0).view(4, 6)[2 * rank: 2 * rank + 2].tolist()
        assert r["sum"] == 2 * sum(range(24))


def test_fsdp2_matches_single_process(world: Ranks) -> None:
    for r in world.run("dist_fsdp.fsdp2", timeout=90):
        assert r["local_device"].startswith("foo") and r["max_diff"] <= 1e-6, r


def test_distributed_checkpoint(world: Ranks, tmp_path: Any) -> None:
    for r in world.run("dist_fsdp.checkpoint", timeout=90, path=str(tmp_path / "ckpt")):
        assert not r["equal_before"] and r["equal_after"] and r["devices"] == ["foo:0"], r


# --- faults -------------------------------------------------------------------------------------------


def test_killed_rank_makes_the_other_raise() -> None:
    with Ranks(2) as r:
        r.run("dist_scenarios.init", port=r.port(), timeout_s=5)
        r.send(0, "dist_scenarios.timed_collective", kind="all_reduce", n=1 << 16)
        r.send(1, "dist_scenarios.sleep", seconds=60)
        time.sleep(0.5)  # rank 0 is waiting in the all_reduce when rank 1 dies
        r.kill(1)
        (seen,) = r.collect("all_reduce with a dead peer", timeout=30, ranks=[0])
        r.kill(0)  # its group lost a peer: nothing left to shut down cleanly
    assert seen["outcome"].startswith(("RuntimeError", "DistBackendError")), seen
    assert seen["seconds"] < 5, seen  # the closed connection, before the 5 s group timeout


@pytest.mark.parametrize("kind", ["all_reduce", "all_reduce polled"])
def test_hung_rank_times_out(kind: str) -> None:
    """A silent peer: the collective raises gloo's timeout. Polled without wait(), the Work
    users get (foo_gloo's) completes with that timeout as its exception()."""
    with Ranks(2) as r:
        r.run("dist_scenarios.init", port=r.port(), timeout_s=2)
        r.send(0, "dist_scenarios.timed_collective", kind=kind, n=8)
        r.send(1, "dist_scenarios.sleep", seconds=60)
        (seen,) = r.collect(f"{kind} with a silent peer", timeout=30, ranks=[0])
        r.kill(1)
        r.kill(0)
    assert "Timed out" in seen["outcome"] and 1.5 < seen["seconds"] < 15, seen
    assert kind != "all_reduce polled" or seen["outcome"].startswith("completed: "), seen


def test_mismatched_shapes_clear_error_in_detail_mode() -> None:
    """With TORCH_DISTRIBUTED_DEBUG=DETAIL (PyTorch's collective checks) both ranks raise and
    name the shapes. Without it gloo does not check: it aborts the process on a mismatched
    all_reduce and broadcasts into a wrong-sized tensor silently, for CPU tensors as for foo."""
    with Ranks(2, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}) as r:
        for backend in (None, "gloo", "cpu:gloo,foo:foo_gloo"):
            r.run("dist_scenarios.init", port=r.port(), backend=backend, timeout_s=10)
            for kind in ("all_reduce", "broadcast", "all_gather_into_tensor"):
                for device in ("foo", "cpu"):
                    for seen in r.run("dist_scenarios.timed_collective", kind=kind, device=device):
                        where = (backend, kind, device, seen)
                        assert "Detected mismatch between collectives" in seen["outcome"], where
                        assert "Tensor shapes" in seen["outcome"], where
            r.run("dist_scenarios.destroy")
