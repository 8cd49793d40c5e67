"""tp.amp.GradScaler: dynamic loss scaling, as torch.amp.GradScaler.

float16 gradients underflow; the loss is multiplied by a scale before backward and
the gradients divided by it before the optimizer step. A step whose gradients hold
an inf/NaN (the scale was too large) is skipped and the scale backs off; after
`growth_interval` clean steps it grows again.
"""
import warnings

from .. import _C

_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not isinstance(device, str):
            device = str(device)
        self._device = device.split(":")[0]
        if self._device not in ("cpu", "cuda"):
            raise RuntimeError(f"GradScaler: unsupported device '{device}'; expected 'cpu' or 'cuda'")
        if enabled and self._device == "cuda":
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("GradScaler is enabled, but CUDA is not available. Disabling.")
                enabled = False
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError("The backoff factor must be < 1.0 (and > 0).")
        if not isinstance(growth_interval, int) or growth_interval <= 0:
            raise ValueError("growth_interval must be a positive integer.")
        self._enabled = bool(enabled)
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._scale = None           # 0-d float32 tensor, made lazily on the loss's device
        self._scale_value = float(init_scale)  # its value, kept on the host (no read back per step)
        self._growth_tracker = 0
        self._per_optimizer = {}     # id(optimizer) -> {"stage", "found_inf"}

    # ------------------------------------------------------------ scaling
    def _scale_tensor(self, device):
        import tensorplay as tp
        if self._scale is None or str(self._scale.device) != str(device):
            self._scale = tp.full([], self._scale_value, dtype=tp.float32, device=device)
        return self._scale

    def scale(self, outputs):
        """outputs * scale (a tensor, or a list/tuple/dict of them, nested)."""
        if not self._enabled:
            return outputs
        import tensorplay as tp
        if isinstance(outputs, tp.Tensor):
            return outputs * self._scale_tensor(outputs.device)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, dict):
            return {k: self.scale(v) for k, v in outputs.items()}
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": False})

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by the scale, in place, and records whether any
        is inf/NaN. Call it before clipping gradients; step() calls it if you did not."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        import tensorplay as tp
        inv = 1.0 / self._scale_value
        found = {}  # device -> flag: one flag per gradient, combined on its device, read once below
        with tp.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype == tp.float16:
                        # PyTorch's rule: float16 parameters defeat loss scaling (their update underflows).
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    bad = tp.logical_not(tp.isfinite(g)).any()
                    key = str(g.device)
                    found[key] = bad if key not in found else tp.logical_or(found[key], bad)
                    g.mul_(inv)
        st["found_inf"] = any(bool(f.item()) for f in found.values())
        st["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscales (if unscale_ was not called) and runs optimizer.step(*args, **kwargs) unless
        a gradient is inf/NaN; returns its result (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._state(optimizer)
        if st["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] == _READY:
            self.unscale_(optimizer)
        result = None
        if not st["found_inf"]:
            result = optimizer.step(*args, **kwargs)
        st["stage"] = _STEPPED
        return result

    def update(self, new_scale=None):
        """Backs off the scale if any optimizer saw an inf/NaN gradient since the last update,
        grows it after growth_interval clean steps; or sets it to `new_scale`."""
        if not self._enabled:
            return
        if new_scale is not None:
            import tensorplay as tp
            if isinstance(new_scale, tp.Tensor):
                if new_scale.numel() != 1:
                    raise ValueError("new_scale should be a float or a 1-element tensor.")
                new_scale = float(new_scale.item())
            self._set_scale(float(new_scale))
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values() if s["stage"] != _READY]
            if not found:
                raise RuntimeError("No inf checks were recorded prior to update.")
            if any(found):
                self._set_scale(self._scale_value * self._backoff_factor)
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._set_scale(self._scale_value * self._growth_factor)
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def _set_scale(self, value):
        self._scale_value = value
        if self._scale is not None:
            # In place: a compiled function that read the scale re-reads the same tensor.
            self._scale.fill_(value)

    # ------------------------------------------------------------ accessors
    def get_scale(self):
        return self._scale_value if self._enabled else 1.0

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

    def _get_growth_tracker(self):
        return self._growth_tracker

    def is_enabled(self):
        return self._enabled

    # ------------------------------------------------------------ state
    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._set_scale(float(state_dict["scale"]))
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_scale"] = None
        state["_per_optimizer"] = {}
        return state
