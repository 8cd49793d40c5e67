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
import functools
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


# (unscale_: GradScaler.unscale_ records in Python that it ran; a capture refused later,
# at scaler.step(opt), then re-ran it step-wise: "unscale_() has already been called")
_TRAINING_NAMES = frozenset({"backward", "zero_grad", "unscale_"})
# Second-order autograd: a compiled module's backward region has no derivative.
_SECOND_ORDER_NAMES = frozenset({"create_graph", "hessian", "hvp", "vhp"})


def names_autograd_calls(fn):
    return bool(_names_reached(fn) & (_TRAINING_NAMES | {"<optimizer>"}))


def differentiates_twice(fn):
    """Whether fn (or a function it calls by name) asks for a differentiable
    gradient (create_graph=True: a gradient penalty, MAML) or a Hessian: its
    modules then run eagerly in the step-wise run, since a compiled module's
    backward region raises at a double backward."""
    return bool(_names_reached(fn) & _SECOND_ORDER_NAMES)


def _names_reached(fn):
    """Of the names in _TRAINING_NAMES and _SECOND_ORDER_NAMES (keyword names
    included), those that fn's code (nested functions included), or the code of the user's
    functions it calls by name (globals, closure variables, methods of its own
    `self`, a few calls deep) names; plus "<optimizer>" when such a name (or an
    attribute of `self`) holds an optimizer, a scheduler or a GradScaler. Either
    makes a training step, run step-wise from its first call. (A step that
    delegates to `self._update(x)` or a global `inner(x)`, or a function that
    logs `hist.append(v)` before `opt.step()`, was first captured, and its Python
    side effects before the refused call ran twice.)"""
    from .compiler import _foreign_module_name
    from .amp.grad_scaler import GradScaler
    from .optim.lr_scheduler import LRScheduler
    from .optim.optimizer import Optimizer

    stateful = (Optimizer, LRScheduler, GradScaler)
    seen = set()
    wanted = _TRAINING_NAMES | _SECOND_ORDER_NAMES
    found = set()

    def user_function(f):
        # (type(), not getattr/isinstance: a user's object may refuse inspection)
        if type(f) in (types.MethodType, staticmethod, classmethod):
            f = f.__func__
        if type(f) is not types.FunctionType:
            return None
        return None if _foreign_module_name(getattr(f, "__module__", None)) else f

    def training_object(v):
        if type(v) is types.MethodType:  # opt.step held as a bound method
            v = v.__self__
        return any(k in stateful for k in type(v).__mro__)

    def callees(f, owner, names):
        out = []
        owner_cls = type(owner) if owner is not None else None
        g = getattr(f, "__globals__", {})
        cells = dict(zip(f.__code__.co_freevars, f.__closure__ or ()))
        inst = {}
        if owner is not None:  # self.opt, self.scheduler (not through a custom __getattr__)
            try:
                d = object.__getattribute__(owner, "__dict__")
                inst = d if type(d) is dict else {}
            except Exception:
                pass
        for n in names:
            cands = []
            if n in g:
                cands.append(g[n])
            if n in cells:
                try:
                    cands.append(cells[n].cell_contents)
                except ValueError:  # an empty cell
                    pass
            if owner_cls is not None:
                for klass in owner_cls.__mro__:
                    if n in klass.__dict__:
                        cands.append(klass.__dict__[n])
                        break
            if n in inst:
                cands.append(inst[n])
            for c in cands:
                if training_object(c):
                    found.add("<optimizer>")
                u = user_function(c)
                if u is not None:
                    out.append((u, owner))
        return out

    def walk(f, owner, depth):
        if f.__code__ in seen:
            return
        seen.add(f.__code__)
        names = set()

        def collect(c):
            names.update(c.co_names)
            names.update(c.co_freevars)
            for k in c.co_consts:
                if isinstance(k, types.CodeType):
                    collect(k)
                elif isinstance(k, tuple):  # keyword names of a call (create_graph=True)
                    names.update(e for e in k if isinstance(e, str))

        collect(f.__code__)
        found.update(names & wanted)
        cs = callees(f, owner, names)
        if depth < 4:
            for c, o in cs:
                walk(c, o, depth + 1)

    # functools.partial(train_step, model, opt): the function it wraps (and an
    # optimizer among its bound arguments) decide, as for the function itself.
    while type(fn) is functools.partial:
        for v in (*fn.args, *(fn.keywords or {}).values()):
            if training_object(v):
                found.add("<optimizer>")
        fn = fn.func
    if type(fn) not in (types.FunctionType, types.MethodType):
        # a callable object (a Step class with __call__): its class's __call__, with it as self
        call = None
        for klass in type(fn).__mro__:
            if "__call__" in klass.__dict__:
                call = klass.__dict__["__call__"]
                break
        if type(call) is types.FunctionType and not _foreign_module_name(getattr(call, "__module__", None)):
            fn = types.MethodType(call, fn)
    owner = getattr(fn, "__self__", None)
    f = getattr(fn, "__func__", fn)
    if not isinstance(f, types.FunctionType):
        code = getattr(f, "__code__", None)
        if code is None:
            return found
        # a code object alone: its own names only
        f = types.FunctionType(code, {}, None, None, tuple(types.CellType() for _ in code.co_freevars))
        owner = None
    try:
        walk(f, owner, 0)
    except Exception:  # a user's object that refuses inspection: what was found so far
        pass
    return found


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
        # A step that differentiates a gradient (create_graph=True) runs its modules
        # eagerly: a compiled module's backward region has no derivative.
        self.second_order = differentiates_twice(fn)
        self.warned_second_order = False

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

    def switched(self, message=None):
        """compile.cpp, when the function's capture was refused and it switches to
        step-wise: what the failed capture's Python changed in the modules it reaches
        and in the global numbers its code names is put back (the step-wise run does
        it again: compiler._PrintWatch._snapshot_numbers), then a graph break
        (message: the refusal) is warned about."""
        from .compiler import _restore_numbers
        _restore_numbers()
        if message:
            self.graph_break(message)

    def graph_break(self, message):
        """The capture of the whole function was refused for a reason other than an
        autograd call (compile.cpp): it runs step-wise from now on, as PyTorch runs
        the pieces around a graph break; one warning says why."""
        opts = self.kwargs.get("options") or {}
        if str(opts.get("warn_fallback", True)) not in ("0", "False", "false"):
            warnings.warn(f"tp.compile: graph break in {self.name}: it runs as Python, its modules and optimizer steps "
                          f"compiled (fullgraph=True makes this an error): {message}", UserWarning,
                          stacklevel=_user_stacklevel())

    def _warn_eager(self, what, err):
        opts = self.kwargs.get("options") or {}
        if str(opts.get("warn_fallback", True)) not in ("0", "False", "false"):
            warnings.warn(f"tp.compile: {what} runs eagerly inside the step-wise training step: "
                          f"{type(err).__name__}: {str(err).splitlines()[0]}", UserWarning, stacklevel=4)


def _user_stacklevel():
    """The warnings.warn stacklevel (from graph_break's caller) of the first frame
    outside tensorplay: the user's call of the compiled function, not a line of
    compiler.py (_CompiledModule, nested arguments) that forwarded it."""
    import os
    import sys
    pkg = os.path.dirname(os.path.abspath(__file__)) + os.sep
    f, level = sys._getframe(1), 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(pkg):
        f, level = f.f_back, level + 1
    return level if f is not None else 2


def _current():
    """The runner whose top level is executing on this thread, else None."""
    st = getattr(_local, "st", None)
    if st is None or st.runner is None or st.depth > 0 or _C._is_tracing():
        return None
    return st


def _compiled_piece(st, table, key, make, what, call):
    """Calls `call(piece)` with depth raised (what the piece runs, eagerly or in a
    capture, is not redirected again); a piece whose capture fails is replaced by
    None (eager) and `call(None)` runs instead, after the Python state the failed
    capture's code rebound is put back (`self.calls += 1` before the refused
    statement would otherwise count twice: once in the capture, once in the eager
    call). The capture noted that state as it started (compiler._PrintWatch), so a
    call of a compiled piece pays nothing for it."""
    from .compiler import _SNAPSHOT, _restore_numbers
    runner = st.runner
    piece = table.get(key, False)
    if piece is False:
        piece = table[key] = make(runner)
    st.depth += 1
    try:
        if piece is None:
            return call(None)
        _SNAPSHOT.failed = None  # (only this call's failed capture may be put back)
        try:
            return call(piece)
        except _C.CaptureError as e:
            # (the failed capture put back the tensors it wrote; the eager call starts clean)
            _restore_numbers()
            table[key] = None
            runner._warn_eager(what, e)
            return call(None)
    finally:
        st.depth -= 1


_MISSING = object()


def _attributes_of(modules):
    """Notes the __dict__ entries of `modules` (each once); returns the function
    that puts them back (entries added since are removed)."""
    seen, saved = set(), []
    for m in modules:
        if id(m) not in seen:
            seen.add(id(m))
            saved.append((m, dict(m.__dict__)))

    def restore():
        for m, d in saved:
            cur = m.__dict__
            for k in [k for k in cur if k not in d]:
                del cur[k]
            for k, v in d.items():
                if cur.get(k, _MISSING) is not v:
                    cur[k] = v
    return restore


def module_call(module, args, kwargs):
    """Module.__call__ while a step-wise function runs: the module compiled."""
    st = _current()
    if st is None:
        return module._call_impl(*args, **kwargs)
    from .compiler import _CompiledModule

    def make(runner):
        if runner.second_order:
            if not runner.warned_second_order:
                runner.warned_second_order = True
                runner._warn_eager("every module", RuntimeError(
                    "the step differentiates a gradient (create_graph=True or a Hessian), and a compiled "
                    "module's backward has no derivative"))
            return None
        # fullgraph: a refused capture of the piece raises here (its attributes put
        # back by _compiled_piece, then an eager call) rather than breaking inside it.
        return _CompiledModule(module, (), dict(runner.kwargs, fullgraph=True))

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
