"""tp.cpu.amp and tp.cuda.amp: torch.<device>.amp's spellings of tp.amp with the
device type fixed (nothing is reimplemented). Each is a real module in sys.modules,
so `import tensorplay.cuda.amp` and pickled class names resolve."""
import sys
import types

from . import autocast_mode as _am, grad_scaler as _gs


def device_amp_module(module_name, device_type, custom_decorators=False):
    m = types.ModuleType(module_name, f"tp.amp for device_type {device_type!r} (torch's {module_name} spellings).")

    class autocast(_am.autocast):
        def __init__(self, enabled=True, dtype=None, cache_enabled=True):
            super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    class GradScaler(_gs.GradScaler):
        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                     enabled=True):
            super().__init__(device_type, init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)

    names = [("autocast", autocast), ("GradScaler", GradScaler)]
    if custom_decorators:  # torch.cuda.amp has them; torch.cpu.amp does not
        def custom_fwd(fwd=None, *, cast_inputs=None):
            return _am.custom_fwd(fwd, device_type=device_type, cast_inputs=cast_inputs)

        def custom_bwd(bwd=None):
            return _am.custom_bwd(bwd, device_type=device_type)
        names += [("custom_fwd", custom_fwd), ("custom_bwd", custom_bwd)]
    for name, obj in names:
        obj.__module__ = m.__name__
        obj.__qualname__ = name
        setattr(m, name, obj)
    sys.modules[m.__name__] = m
    return m
