"""RNG state of the foo devices. The state lives in Rust (seed and Philox offset); these
functions and the C++ generator objects are two handles onto it."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from .. import _C
from ._device import DeviceLike, _device_index, device_count

_U64 = 1 << 64


def _generator_id(device: DeviceLike) -> int:
    return _C.default_generator_id(_C.check_device(_device_index(device)))


def _normalize_seed(seed: int) -> int:
    seed = int(seed)
    if not -(1 << 63) <= seed < _U64:
        raise ValueError(f"Overflow when unpacking long long: seed {seed} is outside [-2**63, 2**64)")
    return seed % _U64


def _is_in_bad_fork() -> bool:
    """Always False: foo's thread pool belongs to the process that made it, and a forked child
    builds its own on first use, so foo works after ``fork()`` (DataLoader workers included)."""
    return False


def get_rng_state(device: DeviceLike = "foo") -> torch.Tensor:
    """The RNG state of a foo device as a CPU ``torch.uint8`` tensor (seed, offset)."""
    state = _C.generator_get_state(_generator_id(device))
    return torch.frombuffer(bytearray(state), dtype=torch.uint8)


def get_rng_state_all() -> list[torch.Tensor]:
    """The RNG states of all foo devices."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: DeviceLike = "foo") -> None:
    """Restores a state returned by :func:`get_rng_state` on a foo device."""
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        raise TypeError("foo RNG state must be a torch.uint8 tensor (from get_rng_state)")
    data = new_state.detach().to("cpu").contiguous().numpy().tobytes()
    _C.generator_set_state(_generator_id(device), data)


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    """Restores the states of all foo devices, in device order."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    """Seeds the current foo device's generator."""
    _C.generator_manual_seed(_generator_id(None), _normalize_seed(seed))


def manual_seed_all(seed: int) -> None:
    """Seeds the generators of all foo devices (``torch.manual_seed`` calls this)."""
    s = _normalize_seed(seed)
    for i in range(device_count()):
        _C.generator_manual_seed(_C.default_generator_id(i), s)


def seed() -> None:
    """Seeds the current foo device's generator with a non-deterministic number."""
    _C.generator_manual_seed(_generator_id(None), _C.nondeterministic_seed())


def seed_all() -> None:
    """Seeds all foo devices' generators with one non-deterministic number."""
    manual_seed_all(_C.nondeterministic_seed())


def initial_seed() -> int:
    """The seed of the current foo device's generator."""
    return _C.generator_initial_seed(_generator_id(None))


def default_generators() -> tuple[torch.Generator, ...]:
    """The default generator of each foo device (``torch.foo.default_generators``, as torch.cuda's
    tuple): torch.Generator handles onto the state these functions read and write."""
    _device_index(None)  # reports an unusable FOO_RS_DEVICE_COUNT as every torch.foo call does
    return tuple(torch._C._accelerator_getDefaultGenerator(i) for i in range(device_count()))
