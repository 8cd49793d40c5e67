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

For forward-mode AD (tp.autograd.forward_ad, tp.func.jvp) define a static
jvp(ctx, *input_tangents) too, returning one tangent per output: forward then
runs on the primals only, as in PyTorch.

Inside tp.compile with gradients, forward is captured and backward is traced
into the compiled backward (see _apply_in_capture below); a backward that
cannot be traced makes that region run with eager autograd.
"""
import functools
import inspect

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
        from .graph import current_hooks
        hooks = current_hooks()
        # saved_tensors_hooks: keep what pack gives (no version check then). Not while
        # tp.compile captures: the compiled region's saved values go through the hooks when it runs.
        if hooks is not None and not _C._is_tracing():
            with no_grad():
                self._saved = tuple((_Packed(hooks[0](t), hooks[1]), None) if t is not None else (None, 0)
                                    for t in tensors)
            return
        self._saved = tuple((t, t._version) if t is not None else (None, 0) for t in tensors)

    @property
    def saved_tensors(self):
        out = []
        for t, version in self._saved:
            if isinstance(t, _Packed):
                t = t.unpack()
            elif t is not None and t._version != version:
                raise _version_error(t, version)
            out.append(t)
        return tuple(out)

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class _Packed:
    """A value save_for_backward kept through a saved_tensors_hooks pack hook."""
    __slots__ = ("value", "unpack_hook")

    def __init__(self, value, unpack_hook):
        self.value, self.unpack_hook = value, unpack_hook

    def unpack(self):
        t = self.unpack_hook(self.value)
        if not isinstance(t, Tensor):
            raise TypeError(f"saved_tensors_hooks: the unpack hook must return a Tensor, got {type(t).__name__}")
        return t


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

    @staticmethod
    def jvp(ctx, *input_tangents):
        raise NotImplementedError("a Function subclass used with forward-mode AD must define a static "
                                  "jvp(ctx, *input_tangents)")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """PyTorch 2's split form: a Function that overrides it has `forward(*args)` without ctx,
        and setup_context(ctx, inputs, output) saves what backward/jvp need."""
        raise NotImplementedError("setup_context is not implemented.")

    # torch.func's vmap options of a Function; TensorPlay's vmap batches the operators
    # forward calls (or runs per example), so neither is needed.
    generate_vmap_rule = False

    # True for a Function whose backward is what the capture derives anyway
    # (an identity), so tp.compile may capture its forward in training.
    _capture_derives_backward = False

    @classmethod
    def apply(cls, *args, **kwargs):
        if cls.setup_context is not Function.setup_context:
            # the setup_context form: keyword arguments and defaults are inputs like the
            # others (PyTorch binds them, so setup_context sees every input)
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = tuple(bound.args), {}
        if _C._is_tracing() and not cls._capture_derives_backward:
            from .. import _vmap
            # Inside tp.func.vmap's capture (traced on detached examples) the Function
            # was recorded as its forward's operators only: gradients through it were
            # lost (vmap(grad(f)) gave zeros) and forward AD differentiated the
            # implementation instead of cls.jvp. The vmapped function runs per example.
            _vmap.refuse_in_capture(f"tp.autograd.Function {cls.__name__}")
        if _C._is_tracing() and _C.is_grad_enabled() and not cls._capture_derives_backward:
            return _apply_in_capture(cls, args, kwargs)
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        recording = _C.is_grad_enabled() and any(ctx.needs_input_grad)
        # Forward mode: forward sees the primals only (its operators' own tangents
        # would differentiate the implementation, not the Function: a
        # straight-through round has tangent 0 there); jvp gives the outputs'.
        tangents = _input_tangents(args)
        fw_args = args if tangents is None else tuple(_primal(a, t) for a, t in zip(args, tangents))
        with no_grad():
            result = _forward(cls, ctx, fw_args, kwargs)
        if not recording and tangents is None:
            return result
        outs = list(_as_tuple(result))
        if recording:
            _check_dirty(cls, ctx, args)
            input_ids = {id(a) for a in args + fw_args if isinstance(a, Tensor)}
            for k, o in enumerate(outs):
                # An input returned unchanged gets a new identity to carry this node's history.
                if isinstance(o, Tensor) and id(o) in input_ids and id(o) not in ctx._dirty:
                    outs[k] = o.detach()
            _attach(cls, ctx, args, outs)
        if tangents is not None:
            _attach_tangents(cls, ctx, fw_args, tangents, outs)
        return tuple(outs) if isinstance(result, tuple) else outs[0]


def _forward(cls, ctx, args, kwargs):
    """cls.forward(ctx, *args, **kwargs), or for the setup_context form (PyTorch 2:
    forward without ctx, needed by torch.func) forward(*args) then
    setup_context(ctx, inputs, output), the inputs with their defaults bound."""
    if cls.setup_context is Function.setup_context:
        return cls.forward(ctx, *args, **kwargs)
    output = cls.forward(*args)  # (apply bound any keyword arguments)
    cls.setup_context(ctx, tuple(args), output)
    return output


# ---- inside tp.compile, with gradients (graph/custom_function.h) ----
# forward runs as in eager (under no_grad: its operators are recorded without
# gradient), then one custom_function node takes the differentiable outputs,
# the tensor inputs and what backward reads; its derivative is cls.backward,
# traced on the joint graph's values (gradients, saved tensors), so the
# compiled backward computes exactly what the user's backward does.

_CTX_STATE = frozenset(("_saved", "_non_differentiable", "_dirty", "materialize_grads", "needs_input_grad"))


class _Saved:
    """A tensor kept on ctx (not through save_for_backward): slot k of the saved values."""
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k


def _strip(v, keep):
    """ctx attribute value with its tensors replaced by _Saved slots and sizes
    made plain ints (a symbolic size belongs to the forward's capture)."""
    if isinstance(v, Tensor):
        return _Saved(keep(v))
    if isinstance(v, _C.SymInt):
        return int(v)  # specializes the size (a guard), as any int the forward reads
    if isinstance(v, (tuple, list)):
        return _rebuild(v, [_strip(x, keep) for x in v])
    if isinstance(v, dict) and type(v) is dict:
        return {k: _strip(x, keep) for k, x in v.items()}
    return v


def _rebuild(v, items):
    """A tuple/list like v (its type: a tp.Size, a namedtuple) holding items."""
    if type(v) in (tuple, list):
        return type(v)(items)
    if hasattr(v, "_fields"):
        return type(v)(*items)
    try:
        return type(v)(items)
    except TypeError:
        return tuple(items) if isinstance(v, tuple) else list(items)


def _restore(v, kept):
    if isinstance(v, _Saved):
        return kept[v.k]
    if isinstance(v, (tuple, list)) and any(isinstance(x, (_Saved, tuple, list, dict)) for x in v):
        return _rebuild(v, [_restore(x, kept) for x in v])
    if isinstance(v, dict) and type(v) is dict:
        return {k: _restore(x, kept) for k, x in v.items()}
    return v


def _snapshot(ctx):
    """What a backward could change on ctx: attribute names and the identity of
    their values (and of a container's items)."""
    def shallow(v):
        if isinstance(v, (list, tuple)):
            return (type(v), tuple(id(x) for x in v))
        if isinstance(v, dict):
            return (dict, tuple((k, id(x)) for k, x in v.items()))
        if isinstance(v, set):
            return (set, frozenset(id(x) for x in v))
        return id(v)
    return {k: shallow(v) for k, v in vars(ctx).items() if k != "_saved"}


def _apply_in_capture(cls, args, kwargs):
    ctx = FunctionCtx()
    # The capture's tensors carry no autograd history: whether eager would
    # record this call is read from the graph.
    ctx.needs_input_grad = tuple(isinstance(a, Tensor) and _C._traced_requires_grad(a) for a in args)
    with no_grad():
        result = _forward(cls, ctx, args, kwargs)
    if not any(ctx.needs_input_grad):
        return result  # eager records nothing either
    name = cls.__name__
    if ctx._dirty:
        _C._note_step_refusal()  # (the compiled function then runs step-wise)
        raise _C.CaptureError(
            f"tp.autograd.Function {name}.apply inside a compiled function (tp.compile) with gradients enabled: "
            "its forward marks an input dirty (an in-place write), which the capture cannot give this Function's "
            "backward; return a new tensor instead, or call it outside the compiled function")
    outs = list(_as_tuple(result))
    diff = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.dtype.is_floating_point
            and id(o) not in ctx._non_differentiable]
    if not diff:
        return result
    kept, slot = [], {}

    def keep(t):
        if id(t) not in slot:
            slot[id(t)] = len(kept)
            kept.append(t)
        return slot[id(t)]

    saved_slots = tuple(None if t is None else keep(t) for t, _ in ctx._saved)
    attrs = {k: _strip(v, keep) for k, v in vars(ctx).items() if k not in _CTX_STATE}
    # Tensor outputs without a gradient, which backward gets as zeros
    # (materialize_grads): zeros of the kept output's sizes, so a symbolic size stays one.
    zeros_of = {k: keep(o) for k, o in enumerate(outs)
                if ctx.materialize_grads and isinstance(o, Tensor) and k not in diff}
    tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    record = (cls, attrs, saved_slots, ctx.needs_input_grad, ctx.materialize_grads, len(args), len(outs), diff,
              tensor_pos, zeros_of)
    new = _C._custom_function_attach(functools.partial(_traced_backward, record), name, [outs[k] for k in diff],
                                     [args[i] for i in tensor_pos], kept)
    for k, o in zip(diff, new):
        outs[k] = o
    return tuple(outs) if isinstance(result, tuple) else outs[0]


def _zeros_of(t):
    """Zeros by t's sizes: symbolic ones in a symbolic joint trace (zeros_like fixes them)."""
    from .. import zeros
    return zeros(t.shape, dtype=t.dtype, device=t.device)


def _traced_backward(record, grads, outputs, kept, tracing):
    """cls.backward on a fresh ctx holding this call's saved values: traced into
    the joint graph (tracing), or run by eager autograd over the captured graph."""
    cls, attrs, saved_slots, needs, materialize, n_args, n_outs, diff, tensor_pos, zeros_of = record
    ctx = FunctionCtx()
    for k, v in attrs.items():
        setattr(ctx, k, _restore(v, kept))
    ctx._saved = tuple((None, 0) if s is None else (kept[s], kept[s]._version) for s in saved_slots)
    ctx.needs_input_grad = needs
    ctx.materialize_grads = materialize
    before = _snapshot(ctx) if tracing else None
    all_grads = [None] * n_outs
    for j, k in enumerate(diff):
        all_grads[k] = grads[j]
        if grads[j] is None and materialize:
            all_grads[k] = _zeros_of(outputs[j])
    for k, slot in zeros_of.items():
        all_grads[k] = _zeros_of(kept[slot])
    res = _as_tuple(cls.backward(ctx, *all_grads))
    bname = cls.__name__ + "Backward"
    _check_gradient_count(res, bname, n_args)
    after = _snapshot(ctx) if tracing else None
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        raise RuntimeError(f"it changes ctx ({', '.join(changed)}), and a compiled backward would not repeat that "
                           "at later calls")
    return _input_gradients(res, bname, tensor_pos, needs)


def _input_tangents(args):
    """Each argument's tangent at the open dual level (None where it has none),
    or None when no argument carries one."""
    if _C._fwd_current_level() < 0:
        return None
    from .forward_ad import unpack_dual
    tangents = [unpack_dual(a).tangent if isinstance(a, Tensor) else None for a in args]
    return tangents if any(t is not None for t in tangents) else None


def _primal(a, tangent):
    if tangent is None:
        return a
    from .forward_ad import unpack_dual
    return unpack_dual(a).primal


def _attach_tangents(cls, ctx, fw_args, tangents, outs):
    from .forward_ad import make_dual
    if cls.jvp is Function.jvp:
        raise NotImplementedError(f"{cls.__name__}: an input carries a forward-mode tangent, and the Function "
                                  "defines no jvp(ctx, *input_tangents); define it (the tangents of the outputs "
                                  "from those of the inputs) to use it with forward-mode AD")
    from .. import zeros_like
    tin = [t if t is not None or not isinstance(a, Tensor) or not a.dtype.is_floating_point
           or not ctx.materialize_grads else zeros_like(a) for a, t in zip(fw_args, tangents)]
    res = _as_tuple(cls.jvp(ctx, *tin))
    n_tensors = sum(isinstance(o, Tensor) for o in outs)
    if len(res) != len(outs):
        raise RuntimeError(f"{cls.__name__}.jvp returned {len(res)} tangents, expected {len(outs)} (one per output "
                           f"of forward, None for those without one; {n_tensors} of them Tensors)")
    for k, (o, t) in enumerate(zip(outs, res)):
        if t is None or not isinstance(o, Tensor) or id(o) in ctx._non_differentiable:
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"{cls.__name__}.jvp returned a {type(t).__name__} as tangent {k}; expected a Tensor "
                            "or None")
        if not o.dtype.is_floating_point:
            continue
        outs[k] = make_dual(o, t)


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
    _check_gradient_count(res, name, n_args)
    return _input_gradients(res, name, tensor_pos, ctx.needs_input_grad)


def _check_gradient_count(res, name, n_args):
    """backward returns one gradient per forward argument (extra ones must be None)."""
    if len(res) < n_args or any(r is not None for r in res[n_args:]):
        raise RuntimeError(f"function {name} returned an incorrect number of gradients (expected {n_args}, "
                           f"got {len(res)})")


def _input_gradients(res, name, tensor_pos, needs):
    """The gradients of the tensor arguments, None where no gradient is needed."""
    out = []
    for i in tensor_pos:
        g = res[i]
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(f"function {name} returned a {type(g).__name__} as gradient {i}; expected a Tensor "
                            "or None")
        out.append(g if needs[i] else None)
    return out


def once_differentiable(fn):
    """Marks a backward as not differentiable itself: it runs without recording."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)
    return wrapper
