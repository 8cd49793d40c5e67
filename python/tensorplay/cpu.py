"""tp.cpu: torch.cpu's spellings. `tp.cpu.amp.autocast` / `tp.cpu.amp.GradScaler` are tp.amp's
classes with device_type "cpu" fixed (as `tp.cuda.amp` fixes "cuda"); nothing is reimplemented."""
import sys as _sys
import types as _types


def is_available():
    return True


def device_count():
    return 1


def current_device():
    return "cpu"


def synchronize(device=None):
    """CPU work is synchronous: nothing to wait for."""


def _make_amp():
    """tp.cpu.amp: torch.cpu.amp's spellings of tp.amp for device_type "cpu"."""
    from .amp import autocast_mode as _am, grad_scaler as _gs

    m = _types.ModuleType(__name__ + ".amp", _make_amp.__doc__)

    class autocast(_am.autocast):
        def __init__(self, enabled=True, dtype=None, cache_enabled=True):
            super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    class GradScaler(_gs.GradScaler):
        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                     enabled=True):
            super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)

    for name, obj in (("autocast", autocast), ("GradScaler", GradScaler)):
        obj.__module__ = m.__name__
        obj.__qualname__ = name
        setattr(m, name, obj)
    _sys.modules[m.__name__] = m
    return m


amp = _make_amp()
