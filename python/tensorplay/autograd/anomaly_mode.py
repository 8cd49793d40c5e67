"""Anomaly detection: detect_anomaly() / set_detect_anomaly(True) make the backward engine check
every node's gradients, so a NaN is reported by the node that produced it (named after its
forward operation, e.g. "DivBackward0") instead of surfacing later as NaN parameters."""
import functools
import warnings

from .. import _C

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled"]


def is_anomaly_enabled():
    return _C._is_anomaly_enabled()


def is_anomaly_check_nan_enabled():
    # The only check anomaly mode makes here is the NaN check.
    return _C._is_anomaly_enabled()


class _AnomalyMode:
    def __init__(self, mode, check_nan=True):
        if mode and not check_nan:
            # Without the NaN check, anomaly mode would do nothing here (there is no
            # forward-traceback recording): say so rather than silently pretend.
            warnings.warn("anomaly mode with check_nan=False does nothing in tensorplay", UserWarning, stacklevel=3)
        self.mode = bool(mode) and bool(check_nan)
        self.prev = _C._is_anomaly_enabled()

    def __enter__(self):
        self.prev = _C._is_anomaly_enabled()
        _C._set_anomaly_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        _C._set_anomaly_enabled(self.prev)
        return False

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = _C._is_anomaly_enabled()
            _C._set_anomaly_enabled(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                _C._set_anomaly_enabled(prev)
        return wrapper


class detect_anomaly(_AnomalyMode):
    """Context manager (or decorator) turning anomaly detection on for its body."""

    def __init__(self, check_nan=True):
        super().__init__(True, check_nan)


class set_detect_anomaly(_AnomalyMode):
    """set_detect_anomaly(mode): turns anomaly detection on or off, at once (as a plain call)
    or for a `with` body (restored afterwards)."""

    def __init__(self, mode, check_nan=True):
        super().__init__(mode, check_nan)
        _C._set_anomaly_enabled(self.mode)

    def __enter__(self):  # already applied by the constructor; __exit__ restores the state before it
        return self
