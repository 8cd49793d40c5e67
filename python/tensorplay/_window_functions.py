"""The window functions of signal processing: tp.hann_window, hamming_window, blackman_window,
bartlett_window, kaiser_window (PyTorch's definitions; periodic=True gives one period of an
N+1-point window). Computed in float64, then cast to the requested dtype."""
import math
import sys

from ._dtype_info import _is_float


def _tp():
    return sys.modules[__package__]


def _window(name, window_length, periodic, dtype, device, requires_grad):
    tp = _tp()
    if not isinstance(window_length, int) or isinstance(window_length, bool) or window_length < 0:
        raise RuntimeError(f"{name}: requires a non-negative integer window_length, got {window_length!r}")
    dtype = dtype if dtype is not None else tp.get_default_dtype()
    if not _is_float(dtype):
        raise RuntimeError(f"{name}: expects a floating point dtype, got {dtype}")
    kw = {} if device is None else {"device": device}
    if window_length <= 1:
        return tp.ones(window_length, dtype=dtype, **kw).requires_grad_(requires_grad)
    n = window_length + 1 if periodic else window_length
    k = tp.arange(window_length, dtype=tp.float64, **kw)
    return k, n


def _finish(w, dtype, requires_grad):
    tp = _tp()
    w = w.to(dtype if dtype is not None else tp.get_default_dtype())
    return w.requires_grad_(True) if requires_grad else w


def _cosine_window(name, coeffs):
    def window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
               requires_grad=False):
        r = _window(name, window_length, periodic, dtype, device, requires_grad)
        if not isinstance(r, tuple):
            return r
        k, n = r
        w = k * 0.0 + coeffs[0]
        for j, c in enumerate(coeffs[1:], 1):
            w = w + ((-1) ** j) * c * (k * (2 * math.pi * j / (n - 1))).cos()
        return _finish(w, dtype, requires_grad)
    window.__name__ = name
    window.__doc__ = (f"The {name.split('_')[0]} window of window_length points (periodic: one period of an "
                      f"N+1-point window, for spectral analysis).")
    return window


hann_window = _cosine_window("hann_window", (0.5, 0.5))
blackman_window = _cosine_window("blackman_window", (0.42, 0.5, 0.08))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   pin_memory=False, requires_grad=False):
    """alpha - beta * cos(2 pi k / (N - 1)) (N = window_length + 1 when periodic)."""
    r = _window("hamming_window", window_length, periodic, dtype, device, requires_grad)
    if not isinstance(r, tuple):
        return r
    k, n = r
    return _finish(alpha - beta * (k * (2 * math.pi / (n - 1))).cos(), dtype, requires_grad)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """The triangular window 1 - |2k / (N - 1) - 1|."""
    r = _window("bartlett_window", window_length, periodic, dtype, device, requires_grad)
    if not isinstance(r, tuple):
        return r
    k, n = r
    return _finish(1.0 - (k * (2.0 / (n - 1)) - 1.0).abs(), dtype, requires_grad)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  pin_memory=False, requires_grad=False):
    """I0(beta * sqrt(1 - (2k / (N - 1) - 1)**2)) / I0(beta)."""
    r = _window("kaiser_window", window_length, periodic, dtype, device, requires_grad)
    if not isinstance(r, tuple):
        return r
    k, n = r
    tp = _tp()
    x = k * (2.0 / (n - 1)) - 1.0
    w = tp.i0((1.0 - x * x).clamp(min=0.0).sqrt() * beta) / tp.i0(tp.tensor(float(beta), dtype=tp.float64))
    return _finish(w, dtype, requires_grad)


def install():
    tp = _tp()
    for name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"):
        if not hasattr(tp, name):
            setattr(tp, name, globals()[name])
