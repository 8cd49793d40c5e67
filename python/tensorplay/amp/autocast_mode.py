"""tp.autocast: automatic mixed precision, as torch.autocast.

The state lives in C++ (ops/autocast.cpp), thread-local per device type, and the
dispatcher applies it to every operator call: the casts are ordinary `to` calls,
recorded by autograd and by tp.compile's capture. This module only switches the
state (a context manager / decorator) and applies the policy of the few composites
written in Python (`_autocast_composite`).
"""
import functools
import inspect

from .. import _C

_DEVICE_TYPES = ("cpu", "cuda")
# PyTorch's defaults per device type.
_DEFAULT_DTYPE = {"cpu": "bfloat16", "cuda": "float16"}


def _check_device_type(device_type):
    if not isinstance(device_type, str):
        raise TypeError(f"autocast: device_type must be a string ('cpu' or 'cuda'), got {type(device_type).__name__}")
    device_type = device_type.split(":")[0]
    if device_type not in _DEVICE_TYPES:
        raise RuntimeError(f"autocast: unsupported device_type '{device_type}'; TensorPlay's autocast supports "
                           f"'cpu' and 'cuda'")
    return device_type


def _check_dtype(dtype, device_type):
    import tensorplay as tp
    if dtype not in (tp.float16, tp.bfloat16):
        raise TypeError(f"autocast: dtype must be tensorplay.float16 or tensorplay.bfloat16 for device_type "
                        f"'{device_type}', got {dtype}")
    return dtype


def is_autocast_available(device_type):
    return device_type in _DEVICE_TYPES


def is_autocast_enabled(device_type=None):
    """With no argument, CUDA's state (PyTorch's legacy spelling); else that device type's."""
    return _C._is_autocast_enabled("cuda" if device_type is None else _check_device_type(device_type))


def set_autocast_enabled(device_type, enabled=None):
    if enabled is None:  # PyTorch's legacy set_autocast_enabled(enabled) for CUDA
        device_type, enabled = "cuda", device_type
    _C._set_autocast_enabled(_check_device_type(device_type), bool(enabled))


def get_autocast_dtype(device_type):
    return _C._get_autocast_dtype(_check_device_type(device_type))


def set_autocast_dtype(device_type, dtype):
    device_type = _check_device_type(device_type)
    _C._set_autocast_dtype(device_type, _check_dtype(dtype, device_type))


def is_autocast_cpu_enabled():
    return _C._is_autocast_enabled("cpu")


def get_autocast_cpu_dtype():
    return _C._get_autocast_dtype("cpu")


def get_autocast_gpu_dtype():
    return _C._get_autocast_dtype("cuda")


def is_autocast_cache_enabled():
    return _C._is_autocast_cache_enabled()


def set_autocast_cache_enabled(enabled):
    _C._set_autocast_cache_enabled(bool(enabled))


def clear_autocast_cache():
    _C._clear_autocast_cache()


class autocast:
    """Context manager and decorator: operators called inside run in mixed precision.

    `autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`; dtype defaults
    to bfloat16 on "cpu" and float16 on "cuda". Matrix products and convolutions cast
    their floating inputs to `dtype`; losses and precision-sensitive operators to float32;
    cat/stack-like operators to their widest input; the rest run in their inputs' dtypes.
    float64 and integer tensors are never cast. Regions nest; `enabled=False` inside turns
    it off for that device type.
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        import tensorplay as tp
        self.device = _check_device_type(device_type)
        if dtype is None:
            dtype = getattr(tp, _DEFAULT_DTYPE[self.device])
        self.fast_dtype = _check_dtype(dtype, self.device) if enabled else dtype
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: enabled must be a bool, got {type(enabled).__name__}")
        self._enabled = enabled
        self._cache_enabled = cache_enabled
        self._saved = []

    def __enter__(self):
        dev = self.device
        self._saved.append((_C._is_autocast_enabled(dev), _C._get_autocast_dtype(dev),
                            _C._is_autocast_cache_enabled()))
        _C._set_autocast_enabled(dev, self._enabled)
        if self._enabled:
            _C._set_autocast_dtype(dev, self.fast_dtype)
        if self._cache_enabled is not None:
            _C._set_autocast_cache_enabled(bool(self._cache_enabled))
        _C._autocast_increment_nesting()
        return self

    def __exit__(self, *exc):
        enabled, dtype, cache = self._saved.pop()
        if _C._autocast_decrement_nesting() == 0:
            # The cast cache lives for the outermost region (PyTorch's rule).
            _C._clear_autocast_cache()
        _C._set_autocast_enabled(self.device, enabled)
        _C._set_autocast_dtype(self.device, dtype)
        _C._set_autocast_cache_enabled(cache)
        return False

    def __call__(self, fn):
        if inspect.iscoroutinefunction(fn) or inspect.isgeneratorfunction(fn):
            raise TypeError("autocast: decorating a generator or coroutine function is not supported")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return wrapper

    def __repr__(self):
        return f"autocast(device_type={self.device!r}, dtype={self.fast_dtype}, enabled={self._enabled})"


def _autocast_composite(name):
    """For a composite written in Python that PyTorch's autocast lists (attention,
    the Python losses): casts its tensor arguments by `name`'s policy (through the
    dispatcher, so the casts are recorded) and runs its body with autocast suspended,
    so its parts are not cast again -- what the dispatcher does for a C++ operator."""
    def deco(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not _C._autocast_active():
                return fn(*args, **kwargs)
            bound = sig.bind(*args, **kwargs)
            names = list(bound.arguments)
            cast, values = _C._autocast_cast(name, [bound.arguments[n] for n in names])
            if not cast:
                return fn(*args, **kwargs)
            for n, v in zip(names, values):
                bound.arguments[n] = v
            _C._autocast_push_suspend()
            try:
                return fn(*bound.args, **bound.kwargs)
            finally:
                _C._autocast_pop_suspend()
        return wrapper
    return deco


def custom_fwd(fwd=None, *, device_type="cuda", cast_inputs=None):
    """For a custom autograd Function's forward: with `cast_inputs`, inside an autocast
    region of `device_type` its floating tensor arguments are cast to it and it runs with
    autocast off (as torch.amp.custom_fwd). Its backward runs without autocast in
    TensorPlay anyway (the engine suspends it), so custom_bwd has nothing to restore."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    device_type = _check_device_type(device_type)

    @functools.wraps(fwd)
    def wrapper(*args, **kwargs):
        if cast_inputs is None or not _C._is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        import tensorplay as tp

        def cast(v):
            if isinstance(v, tp.Tensor) and v.is_floating_point() and v.dtype != tp.float64:
                return v.to(cast_inputs)
            return v
        with autocast(device_type, enabled=False):
            return fwd(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})
    return wrapper


def custom_bwd(bwd=None, *, device_type="cuda"):
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    _check_device_type(device_type)
    return bwd
