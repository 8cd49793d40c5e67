"""tp.compile and the compiler's observable surface (metrics, reset, backends).

The run-time object returned by tp.compile is the C++ CompiledFunction: its
__call__ is the first-level entry, so no Python runs on a compiled call.
"""
import inspect

from . import _C

CaptureError = _C.CaptureError
BackendError = _C.BackendError

class _Metrics:
    """Live view of the compiler's counters: tp.compiler.metrics.cache_hits etc."""

    def __getattr__(self, name):
        counters = _C._metrics()
        if name in counters:
            return counters[name]
        raise AttributeError(name)

    def as_dict(self):
        return dict(_C._metrics())

    def __repr__(self):
        return "CompilerMetrics(" + ", ".join(f"{k}={v}" for k, v in _C._metrics().items()) + ")"


metrics = _Metrics()


def reset():
    """Clear the metrics and every in-process cache (the disk cache stays)."""
    _C._reset()


def register_backend(name, fn):
    """Register `fn(graph_module, example_inputs) -> callable` as backend `name`."""
    if not callable(fn):
        raise TypeError("register_backend: fn must be callable")
    _C._register_backend(name, fn)


def capture(fn, *args):
    """Trace fn on the given tensors and return the GraphModule (readable via .code)."""
    return _C._capture(fn, *args)


def cache_dir():
    """The directory of the content-addressed kernel cache in use."""
    return _C._cache_dir()


def host_isa():
    return _C._host_isa()


def _make_binder(fn):
    """Resolves keyword arguments and defaults into the positional tuple the
    compiled function takes (the slow path; positional calls never come here)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None

    def bind(args, kwargs):
        try:
            b = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"compiled function: {e}") from None
        b.apply_defaults()
        if b.kwargs:
            raise TypeError("compiled function: keyword-only and **kwargs parameters are not supported")
        return tuple(b.args)
    return bind


def _signature(fn):
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [], -1
    names = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            return [q.name for q in params if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)], -1
        if p.kind == p.KEYWORD_ONLY:
            continue
        names.append(p.name)
    return names, len(names)


def compile(fn=None, *, backend="stax", mode=None, options=None, dynamic=False, fullgraph=True,
            strict_native=False):
    """Compile `fn` (a function over tensors) into fused native kernels.

    backend: "stax" (default), "eager", "aot_eager", a name given to
    register_backend, or a callable (graph_module, example_inputs) -> callable.
    strict_native=True raises BackendError instead of falling back to eager
    execution when Stax cannot generate code for a region.
    """
    if fn is None:
        return lambda f: compile(f, backend=backend, mode=mode, options=options, dynamic=dynamic,
                                 fullgraph=fullgraph, strict_native=strict_native)
    if not callable(fn):
        raise TypeError(f"tp.compile expects a callable, got {type(fn).__name__}")
    if dynamic:
        raise NotImplementedError("tp.compile(dynamic=True): symbolic shapes are not implemented yet")
    custom = None
    if callable(backend):
        custom, backend = backend, getattr(backend, "__name__", "custom")
    elif not isinstance(backend, str):
        raise TypeError("backend must be a string or a callable")
    names, nparams = _signature(fn)
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    return _C._compile(fn, backend, custom, mode or "", opts, bool(dynamic), bool(fullgraph),
                       bool(strict_native), names, nparams, _make_binder(fn))
