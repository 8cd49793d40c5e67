"""tp.amp: GradScaler (dynamic loss scaling, PyTorch's algorithm and state) and autocast.

GradScaler works on any dtype: it multiplies the loss by `scale`, divides the gradients by it
before the optimizer step, skips steps whose gradients hold inf/NaN and adapts the scale
(backoff on overflow, growth after `growth_interval` clean steps). Training loops written for
torch.amp keep working with enabled=False (the usual CPU spelling) and with enabled=True.

autocast: tensorplay has no mixed-precision autocasting (operators are not re-dispatched to a
lower precision), so an enabled autocast region raises NotImplementedError instead of silently
running in full precision; autocast(enabled=False) is the no-op it is in PyTorch."""
import math

import tensorplay as _tp

__all__ = ["GradScaler", "autocast", "is_autocast_available"]


class autocast:  # noqa: N801  (PyTorch's name)
    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"autocast: expected device_type of type str, got {type(device_type).__name__}")
        self.device_type = device_type
        self.fast_dtype = dtype
        self._enabled = bool(enabled)

    def __enter__(self):
        if self._enabled:
            raise NotImplementedError(
                "autocast: tensorplay does not implement mixed-precision autocasting; run in one precision (cast "
                "the model with .to(dtype)) or pass enabled=False")
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


def is_autocast_available(device_type):
    return False


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not growth_factor > 1.0:
            raise ValueError(f"GradScaler: growth_factor should be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor should be in (0, 1), got {backoff_factor}")
        if not isinstance(growth_interval, int) or growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval should be a positive int, got {growth_interval}")
        self._device = device
        self._enabled = bool(enabled)
        self._init_scale = float(init_scale)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"stage": "unscaled"|"stepped", "found_inf": bool}

    # ------------------------------------------------------------ scaling
    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        """outputs multiplied by the current scale (a tensor, or an iterable of them, kept in structure)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, _tp.Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if hasattr(outputs, "__iter__"):
            return map(self.scale, outputs)
        raise ValueError("GradScaler.scale: outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": "ready", "found_inf": False})

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by the scale in place and records whether any is inf/NaN."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] == "unscaled":
            raise RuntimeError("GradScaler.unscale_: unscale_() has already been called on this optimizer since "
                               "the last update()")
        if st["stage"] == "stepped":
            raise RuntimeError("GradScaler.unscale_: unscale_() is being called after step()")
        inv = 1.0 / self._scale
        found = False
        with _tp.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inv)
                    if not bool(_tp.isfinite(p.grad).all().item()):
                        found = True
        st["found_inf"] = found
        st["stage"] = "unscaled"

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) after unscale_ (if not done yet), skipped when a gradient
        is inf/NaN; returns step's result (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("GradScaler.step: closure use is not currently supported if GradScaler is enabled")
        st = self._state(optimizer)
        if st["stage"] == "stepped":
            raise RuntimeError("GradScaler.step: step() has already been called since the last update()")
        if st["stage"] == "ready":
            self.unscale_(optimizer)
        ret = None
        if not st["found_inf"]:
            ret = optimizer.step(*args, **kwargs)
        st["stage"] = "stepped"
        return ret

    def update(self, new_scale=None):
        """Adapts the scale: times backoff_factor if any stepped optimizer found inf/NaN (growth count
        reset), else times growth_factor after growth_interval clean updates; or sets new_scale."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, _tp.Tensor) else new_scale)
        else:
            states = [s for s in self._per_optimizer.values() if s["stage"] != "ready"]
            if not states:
                raise RuntimeError("GradScaler.update: no inf checks were recorded prior to update")
            if any(s["found_inf"] for s in states):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = self._scale * self._growth_factor
                    if math.isfinite(grown):
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer = {}

    # ------------------------------------------------------------ queries
    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("GradScaler.load_state_dict: the source state dict is empty, possibly because it was "
                               "saved from a disabled instance of GradScaler")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
