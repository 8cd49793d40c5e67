"""tp.random: PyTorch's torch.random (seeding, generator state, fork_rng).

TensorPlay has one default generator, shared by the CPU and every GPU (see tp.cuda), so
fork_rng saves and restores that one state whatever `devices` names: what runs inside the block
(eager draws, dropout, and compiled functions, which reserve their Philox counters from the same
generator) leaves the default generator where it was before the block.
"""
import contextlib

from ._C import (  # noqa: F401  (re-exported API)
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)

__all__ = ["default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed",
           "set_rng_state"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type="cuda"):
    """Forks the random number generator: on exit the default generator's state is what it was on entry.

    `devices` (GPU indices) and `device_type` are accepted for PyTorch compatibility; every device
    draws from the one default generator, so it is always the one saved. enabled=False does nothing.
    """
    if not isinstance(device_type, str):
        raise TypeError(f"{_caller}: device_type must be a string, got {type(device_type).__name__}")
    if devices is not None:
        try:
            devices = list(devices)
        except TypeError:
            raise TypeError(f"{_caller}: {_devices_kw} must be an iterable of devices, got "
                            f"{type(devices).__name__}") from None
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
