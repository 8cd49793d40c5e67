"""Custom differentiable operations: subclass Function with static forward and
backward methods and call `.apply(...)`.

    class Square(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g
"""
import functools

from .. import _C
from .._grad_mode import no_grad

Tensor = _C.Tensor


def _version_error(t, saved_version):
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[{t.dtype!r} {list(t.shape)}] is at version {t._version}; expected version {saved_version} instead "
        "(saved with ctx.save_for_backward; clone() it before the in-place write)")


class FunctionCtx:
    """The `ctx` argument of forward/backward: carries state from one to the other."""

    def __init__(self):
        self._saved = ()
        self._non_differentiable = set()
        self._dirty = set()
        self.materialize_grads = True
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors):
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward: argument {i} is a {type(t).__name__}, expected a Tensor or None "
                                "(store other values as attributes of ctx)")
        self._saved = tuple((t, t._version) if t is not None else (None, 0) for t in tensors)

    @property
    def saved_tensors(self):
        out = []
        for t, version in self._saved:
            if t is not None and t._version != version:
                raise _version_error(t, version)
            out.append(t)
        return tuple(out)

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


class Function:
    """Base class of custom autograd operations (see the module docstring)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define a static backward(ctx, *grad_outputs)")

    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"{type(self).__name__}: call {type(self).__name__}.apply(...) instead of instantiating "
                           "the Function")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        recording = _C.is_grad_enabled() and any(ctx.needs_input_grad)
        with no_grad():
            result = cls.forward(ctx, *args, **kwargs)
        if not recording:
            return result
        outs = list(_as_tuple(result))
        _check_dirty(cls, ctx, args)
        input_ids = {id(a) for a in args if isinstance(a, Tensor)}
        for k, o in enumerate(outs):
            # An input returned unchanged gets a new identity to carry this node's history.
            if isinstance(o, Tensor) and id(o) in input_ids and id(o) not in ctx._dirty:
                outs[k] = o.detach()
        _attach(cls, ctx, args, outs)
        return tuple(outs) if isinstance(result, tuple) else outs[0]


def _check_dirty(cls, ctx, args):
    for a in args:
        if isinstance(a, Tensor) and id(a) in ctx._dirty and a.requires_grad and a.is_leaf:
            raise RuntimeError(f"{cls.__name__}: a leaf Variable that requires grad is being used in an in-place "
                               "operation (marked dirty in forward)")


def _attach(cls, ctx, args, outs):
    tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    out_pos = [k for k, o in enumerate(outs) if isinstance(o, Tensor)]
    out_meta = [(outs[k].shape, outs[k].dtype) for k in out_pos]
    name = cls.__name__ + "Backward"
    backward = functools.partial(_run_backward, cls, ctx, len(args), len(outs), tensor_pos, out_pos, out_meta)
    non_diff = [id(outs[k]) in ctx._non_differentiable for k in out_pos]
    _C._record_function(name, [args[i] for i in tensor_pos], [outs[k] for k in out_pos], backward, non_diff)


def _run_backward(cls, ctx, n_args, n_outs, tensor_pos, out_pos, out_meta, grads):
    from .. import zeros
    all_grads = [None] * n_outs
    for k, g, (shape, dtype) in zip(out_pos, grads, out_meta):
        if g is None and ctx.materialize_grads:
            g = zeros(shape, dtype=dtype)
        all_grads[k] = g
    res = _as_tuple(cls.backward(ctx, *all_grads))
    name = cls.__name__ + "Backward"
    if len(res) < n_args or any(r is not None for r in res[n_args:]):
        raise RuntimeError(f"function {name} returned an incorrect number of gradients (expected {n_args}, "
                           f"got {len(res)})")
    out = []
    for i in tensor_pos:
        g = res[i]
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(f"function {name} returned a {type(g).__name__} as gradient {i}; expected a Tensor "
                            "or None")
        out.append(g if ctx.needs_input_grad[i] else None)
    return out


def once_differentiable(fn):
    """Marks a backward as not differentiable itself: it runs without recording."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)
    return wrapper
