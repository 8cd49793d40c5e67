"""Step-wise runs of a compiled training step.

A capture runs the function without autograd (the AOT layer differentiates the
captured forward instead), so a function that calls loss.backward(),
opt.zero_grad() or opt.step() itself (the whole training step under
tp.compile, as PyTorch users write it) cannot become one graph. Rather than
refuse it, such a function runs as Python, step-wise, with the pieces that can
be compiled compiled:

- every module it calls (at the top level: calls made inside a compiled
  module's capture are part of that module's graph) runs through
  `compiler._CompiledModule`, so its forward is generated code and, when
  parameters require grad, its backward too (the region's autograd node);
- every `optimizer.step()` runs through tp.compile(opt.step);
- the rest (the loss arithmetic outside modules, backward(), zero_grad(),
  gradient clipping, schedulers) runs eagerly, as in PyTorch with graph breaks.

Results and side effects are eager's: each compiled piece is a tested compiled
call with eager semantics. A module or step whose own capture fails runs
eagerly from then on. The compiled call switches to this mode (compile.cpp,
PyCompiled::stepwise) when a capture was refused an autograd call, or before
any capture when the function's code names backward or zero_grad (a failed
capture puts back tensor writes and random draws, but not the function's
Python side effects before the refused call). fullgraph=True or
strict_native=True keep the refusal an error.
"""
import threading
import types
import warnings
import weakref

from . import _C

_local = threading.local()
# How many threads run a step-wise function now: Module.__call__ and the
# optimizers' step read this global first (one load per call when none does).
ACTIVE = 0
_lock = threading.Lock()


def _state():
    st = getattr(_local, "st", None)
    if st is None:
        st = _local.st = types.SimpleNamespace(runner=None, depth=0)
    return st


def names_autograd_calls(fn):
    """Whether fn's code (nested functions included) names backward or zero_grad:
    such a function is a training step, run step-wise from its first call."""
    f = getattr(fn, "__func__", fn)
    code = getattr(f, "__code__", None)
    if code is None:
        return False
    found = set()

    def walk(c):
        found.update(n for n in c.co_names if n in ("backward", "zero_grad"))
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                walk(k)

    walk(code)
    return bool(found)


class Runner:
    """The step-wise form of one compiled function: calls `fn` as Python with its
    module calls and optimizer steps compiled (one compiled form per module and
    optimizer, kept while they live)."""

    def __init__(self, fn, kwargs, name=None):
        self.fn = fn
        self.kwargs = kwargs
        self.name = name or getattr(fn, "__qualname__", None) or type(fn).__name__
        self.modules = weakref.WeakKeyDictionary()   # module -> _CompiledModule, or None: eager
        self.steps = weakref.WeakKeyDictionary()     # optimizer -> its compiled step, or None: eager

    def __call__(self, *args, **kwargs):
        global ACTIVE
        st = _state()
        outer = st.runner, st.depth
        st.runner, st.depth = self, 0
        with _lock:
            ACTIVE += 1
        try:
            return self.fn(*args, **kwargs)
        finally:
            with _lock:
                ACTIVE -= 1
            st.runner, st.depth = outer

    def graph_break(self, message):
        """The capture of the whole function was refused for a reason other than an
        autograd call (compile.cpp): it runs step-wise from now on, as PyTorch runs
        the pieces around a graph break; one warning says why."""
        opts = self.kwargs.get("options") or {}
        if str(opts.get("warn_fallback", True)) not in ("0", "False", "false"):
            warnings.warn(f"tp.compile: graph break in {self.name}: it runs as Python, its modules and optimizer steps "
                          f"compiled (fullgraph=True makes this an error): {message}", UserWarning, stacklevel=2)

    def _warn_eager(self, what, err):
        opts = self.kwargs.get("options") or {}
        if str(opts.get("warn_fallback", True)) not in ("0", "False", "false"):
            warnings.warn(f"tp.compile: {what} runs eagerly inside the step-wise training step: "
                          f"{type(err).__name__}: {str(err).splitlines()[0]}", UserWarning, stacklevel=4)


def _current():
    """The runner whose top level is executing on this thread, else None."""
    st = getattr(_local, "st", None)
    if st is None or st.runner is None or st.depth > 0 or _C._is_tracing():
        return None
    return st


def _compiled_piece(st, table, key, make, what, call):
    """Calls `call(piece)` with depth raised (what the piece runs, eagerly or in a
    capture, is not redirected again); a piece whose capture fails is replaced by
    None (eager) and `call(None)` runs instead."""
    runner = st.runner
    piece = table.get(key, False)
    if piece is False:
        piece = table[key] = make(runner)
    st.depth += 1
    try:
        if piece is None:
            return call(None)
        try:
            return call(piece)
        except _C.CaptureError as e:
            # (the failed capture put back what it wrote; the eager call starts clean)
            table[key] = None
            runner._warn_eager(what, e)
            return call(None)
    finally:
        st.depth -= 1


def module_call(module, args, kwargs):
    """Module.__call__ while a step-wise function runs: the module compiled."""
    st = _current()
    if st is None:
        return module._call_impl(*args, **kwargs)
    from .compiler import _CompiledModule

    def make(runner):
        return _CompiledModule(module, (), runner.kwargs)

    return _compiled_piece(st, st.runner.modules, module, make, f"module {type(module).__name__}",
                           lambda cm: module._call_impl(*args, **kwargs) if cm is None else cm(*args, **kwargs))


def optimizer_step(opt, step, args, kwargs):
    """opt.step() while a step-wise function runs: tp.compile(opt.step). A step
    with a closure (which re-evaluates the model) runs eagerly."""
    st = _current()
    if st is None or args or kwargs.get("closure") is not None:
        opt._refuse_step_in_capture()
        return step(opt, *args, **kwargs)
    from .compiler import compile as tp_compile

    def make(runner):
        bound = types.MethodType(type(opt).step, opt)  # the class's step, not a scheduler's wrapper
        return tp_compile(bound, **runner.kwargs)

    return _compiled_piece(st, st.runner.steps, opt, make, f"{type(opt).__name__}.step()",
                           lambda cs: step(opt, **kwargs) if cs is None else cs(**kwargs))
