"""tp.compile and the compiler's observable surface (metrics, reset, backends).

The run-time object returned by tp.compile is the C++ CompiledFunction: its
__call__ is the first-level entry, so no Python runs on a compiled call.
"""
import collections
import collections.abc
import copy
import enum
import functools
import inspect
import os
import types
import warnings
import weakref

from . import _C, _stepwise

CaptureError = _C.CaptureError
BackendError = _C.BackendError

class _Metrics:
    """Live view of the compiler's counters: tp.compiler.metrics.cache_hits etc."""

    def __getattr__(self, name):
        if name == "saved_bytes_per_region":
            # {region: activation bytes its forward saves for the backward} (AOT layer)
            return dict(_C._saved_bytes_per_region())
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


def _object_output_parts(r):
    """An argument that is a dataclass instance or a dict subclass (an OrderedDict,
    a defaultdict, a ModelOutput-like class): (attribute names, their values, keys,
    their values) (_object_template makes the copy it is rebuilt from,
    _object_output_build rebuilds it); None for other objects."""
    import dataclasses
    is_dc = dataclasses.is_dataclass(r) and not isinstance(r, type)
    is_dict = isinstance(r, dict) and type(r) is not dict
    if not (is_dc or is_dict):
        return None
    names = []
    if is_dc:
        names = [f.name for f in dataclasses.fields(r)]
        names += [k for k in getattr(r, "__dict__", {}) if k not in names]
    keys = list(dict.keys(r)) if is_dict else []
    values = [getattr(r, n) for n in names]
    key_values = [dict.__getitem__(r, k) for k in keys]
    return names, values, keys, key_values


def _object_template(r, names, keys):
    template = copy.copy(r)
    for n in names:
        object.__setattr__(template, n, None)
    for k in keys:
        dict.__setitem__(template, k, None)
    return template


def _object_output_build(template, names, values, keys, key_values):
    """The result of a call: a shallow copy of the template with this call's values."""
    r = copy.copy(template)
    for n, v in zip(names, values):
        object.__setattr__(r, n, v)
    for k, v in zip(keys, key_values):
        dict.__setitem__(r, k, v)
    return r


def is_compiling():
    """True while tp.compile captures a call on this thread (torch.compiler.is_compiling):
    code that must not be captured (logging, NumPy) can test it. A step-wise run
    (after a graph break) runs as Python: False there."""
    return _C._is_tracing()


def disable(fn=None, recursive=True):
    """torch.compiler.disable: `fn` always runs as Python. Called while a compiled
    function is captured, it is a graph break (the caller runs step-wise, its modules
    compiled; under fullgraph=True a CaptureError), so it runs at every call, not
    once at capture. Usable as a decorator, with or without arguments."""
    if fn is None:
        return lambda f: disable(f, recursive=recursive)
    if not callable(fn):
        raise TypeError(f"tp.compiler.disable expects a callable, got {type(fn).__name__}")
    if getattr(fn, "_tp_compiler_disabled", False):
        return fn
    name = getattr(fn, "__qualname__", None) or type(fn).__name__

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        if _C._is_tracing():
            raise CaptureError(f"{name} is marked tp.compiler.disable: it runs as Python at every call, outside the "
                               "compiled program (a graph break)")
        return fn(*args, **kwargs)

    disabled._tp_compiler_disabled = True
    return disabled


def region_times():
    """With TP_LOGS=region_times: each compiled CPU region's mean time per call,
    split into generated code and its extern calls (GEMMs, ...) by operator, as
    text (also printed at exit). Empty when the variable is unset."""
    return _C._region_times()


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


# How far _locate_free_tensors searches from the function's roots.
_SEARCH_DEPTH = 8
_SEARCH_LIMIT = 20000


def _code_names(code, out):
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, out)
    return out


def _function_roots(f, prefix=""):
    """(value, root, steps, name) for each global a function's code names and each closure cell."""
    roots = []
    code = getattr(f, "__code__", None)
    if code is None:
        return roots
    g = getattr(f, "__globals__", {})
    for name in sorted(_code_names(code, set())):
        if name in g:
            roots.append((g[name], g, (("item", name),), prefix + name))
    for name, cell in zip(code.co_freevars, f.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # not assigned yet
            continue
        roots.append((value, cell, (("cell", None),), prefix + name))
    return roots


def _slot_values(obj):
    """(name, value) of each set __slots__ attribute of obj's classes (mangled
    names for private ones), which its __dict__ does not hold."""
    out = []
    for klass in type(obj).__mro__:
        slots = vars(klass).get("__slots__", ())
        for k in ((slots,) if isinstance(slots, str) else slots):
            if not isinstance(k, str) or k in ("__dict__", "__weakref__"):
                continue
            if k.startswith("__") and not k.endswith("__"):
                k = f"_{klass.__name__.lstrip('_')}{k}"
            try:
                out.append((k, getattr(obj, k)))
            except AttributeError:  # (an unset slot)
                continue
    return out


def _locate_free_tensors(fn, ids):
    """Where the compiled function's free tensors live, so each call re-reads them.

    `ids` are the compiler's identities (_C._impl_id) of tensors the capture read
    that were neither arguments nor made by an operator. Returns, per id, a
    (root, steps, name) path -- steps are ("attr", name), ("item", key) or
    ("cell", None) -- found by a breadth-first search from the function's owner
    (a module or a bound method's self), the globals its code names and its
    closure cells; None where no path was found (the tensor was made inside the
    function outside the operators, or is out of reach: it is then re-read as
    the same object). Runs once per capture, never on a call.
    """
    from .nn import Module  # late: nn imports tensorplay

    want = {i: k for k, i in enumerate(ids)}
    found = [None] * len(ids)
    queue = collections.deque()
    seen = set()

    def push(value, root, steps, name, depth):
        queue.append((value, root, steps, name, depth))

    target = fn
    if isinstance(fn, functools.partial):
        # Its bound arguments (a model: its buffers' writes, its parameters) and
        # its function's globals and closure; partial.__call__ is a C slot.
        push(fn, fn, (), "partial", 0)
        target = None
    elif isinstance(fn, types.MethodType):
        push(fn.__self__, fn.__self__, (), "self", 0)
        target = fn.__func__
    elif not isinstance(fn, types.FunctionType):
        push(fn, fn, (), "self", 0)
        target = getattr(type(fn), "forward", None) or getattr(type(fn), "__call__", None)
    # Attribute names the function's code reads: the only ones looked up on a
    # Python module it names (`config.W`), so a search never walks numpy's namespace.
    names_read = set()
    if isinstance(target, types.FunctionType):
        _code_names(target.__code__, names_read)
        for r in _function_roots(target):
            push(*r, 1)

    remaining = len(ids)
    visited = 0
    while queue and remaining and visited < _SEARCH_LIMIT:
        value, root, steps, name, depth = queue.popleft()
        try:
            if isinstance(value, _C.Tensor):
                k = want.get(_C._impl_id(value))
                if k is not None and found[k] is None:
                    found[k] = (root, steps, name)
                    remaining -= 1
                # Only a leaf (or a tensor that retains its gradient) has one: reading
                # .grad of any other tensor warns, as in eager, and the user never read it.
                holds_grad = value.requires_grad and (value.is_leaf or value.retains_grad)
                g = value.grad if holds_grad and depth <= _SEARCH_DEPTH else None
                if g is not None:
                    # A parameter's gradient (an optimizer step reads p.grad): re-read
                    # through the parameter, since backward() replaces the object.
                    push(g, root, steps + (("attr", "grad"),), f"{name}.grad", depth + 1)
                continue
            if id(value) in seen or depth > _SEARCH_DEPTH:
                continue
            seen.add(id(value))
            visited += 1
            if isinstance(value, types.ModuleType):
                d = vars(value)
                for k in sorted(names_read):
                    if k in d:
                        push(d[k], root, steps + (("attr", k),), f"{name}.{k}", depth + 1)
                continue
            if isinstance(value, (type, str, bytes, int, float, complex, bool)) or value is None:
                continue
            if isinstance(value, Module):
                d = value.__dict__
                for reg in ("_parameters", "_buffers", "_modules"):
                    for k, v in d.get(reg, {}).items():
                        if v is not None:
                            push(v, root, steps + (("attr", reg), ("item", k)), f"{name}.{k}", depth + 1)
                for k, v in d.items():
                    if k not in ("_parameters", "_buffers", "_modules"):
                        push(v, root, steps + (("attr", k),), f"{name}.{k}", depth + 1)
            elif isinstance(value, dict):
                for k, v in list(value.items()):
                    if isinstance(k, (str, int)):
                        push(v, root, steps + (("item", k),), f"{name}[{k!r}]", depth + 1)
                    elif isinstance(k, _C.Tensor):
                        # Keyed by a tensor (an optimizer's per-parameter state): the key
                        # object itself is the step, so the path follows the same entry.
                        push(v, root, steps + (("item", k),), f"{name}[param]", depth + 1)
            elif isinstance(value, (list, tuple)):
                for i, v in enumerate(value):
                    push(v, root, steps + (("item", i),), f"{name}[{i}]", depth + 1)
            elif isinstance(value, collections.abc.Mapping):
                # A read-only view of a dict (types.MappingProxyType), a ChainMap or a
                # user's Mapping: its entries are items too. Unfollowed, a tensor held
                # only there had no owner and its in-place writes were dropped.
                for k, v in list(value.items()):
                    if isinstance(k, (str, int)):
                        push(v, root, steps + (("item", k),), f"{name}[{k!r}]", depth + 1)
            elif isinstance(value, types.FunctionType):
                # A helper the function calls: its globals and closure are read too.
                _code_names(value.__code__, names_read)
                for r in _function_roots(value, name + "."):
                    push(*r, depth + 1)
            elif isinstance(value, _C.CompiledFunction):
                # A compiled function it calls is inlined into this capture: search its function.
                push(value.__wrapped__, root, steps + (("attr", "__wrapped__"),), name, depth + 1)
            elif isinstance(value, types.MethodType):
                push(value.__self__, root, steps + (("attr", "__self__"),), name + ".__self__", depth + 1)
                for r in _function_roots(value.__func__, name + "."):
                    push(*r, depth + 1)
            elif isinstance(value, functools.partial):
                # (func, args and keywords are slots, not __dict__ entries)
                push(value.func, root, steps + (("attr", "func"),), f"{name}.func", depth + 1)
                push(value.args, root, steps + (("attr", "args"),), f"{name}.args", depth + 1)
                push(value.keywords, root, steps + (("attr", "keywords"),), f"{name}.keywords", depth + 1)
            elif isinstance(value, collections.deque):
                for i, v in enumerate(list(value)):
                    push(v, root, steps + (("item", i),), f"{name}[{i}]", depth + 1)
            elif isinstance(value, weakref.ref):
                # A model held weakly (`ref = weakref.ref(model)`, `ref()(x)`): no
                # attribute or item step reaches through the reference, so the
                # referent becomes a root itself (the path holds it, as a capture
                # holds the tensors it read). Unfollowed, its buffers' writes were
                # dropped.
                target = value()
                if target is not None:
                    push(target, target, (), f"{name}()", depth + 1)
            else:
                d = getattr(value, "__dict__", None)
                if isinstance(d, dict):
                    for k, v in list(d.items()):
                        push(v, root, steps + (("attr", k),), f"{name}.{k}", depth + 1)
                # An object of a class with __slots__ keeps those attributes out of
                # its __dict__ (or has none): without a path its tensors were re-read
                # as the capture's objects and, having no owner, their writes were
                # dropped (a state holder with __slots__ never saw its buffer change).
                for k, v in _slot_values(value):
                    push(v, root, steps + (("attr", k),), f"{name}.{k}", depth + 1)
        except Exception:  # an object that refuses inspection: not a path
            continue
    return found


# Python state a capture reads: how far the search for numbers goes (steps that
# are not a submodule, and paths in all; each path costs a few attribute reads per call).
_STATE_DEPTH = 6
_STATE_PATHS = 256
# Packages whose objects and modules hold no user configuration (never walked).
_NOT_CONFIG = frozenset({"tensorplay", "numpy", "torch", "builtins"})


def _code_consts(code, out):
    """The str/int constants a code object (and its nested code) names: dict keys
    and indices it may read (`cfg["lr"]`, `sizes[0]`)."""
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_consts(c, out)
        elif type(c) in (str, int):
            out.add(c)
    return out


def _foreign_module_name(name):
    import sys
    top = (name or "").split(".")[0]
    return top in _NOT_CONFIG or top in sys.stdlib_module_names


def _is_state_leaf(v, in_sequence=False):
    t = type(v)
    if t in (int, float, bool) or v is None:
        return True
    if isinstance(v, (int, float)) or (t.__module__ == "numpy" and getattr(v, "ndim", None) == 0):
        return True  # a subclass (an IntEnum, numpy.float64) or a numpy scalar: a number the capture bakes in
    if t is str:  # a mode string (`cfg.act == "relu"`) selects a branch as a number does
        return not in_sequence and len(v) <= 64
    if isinstance(v, enum.Enum):  # so does an enum member (`cfg.mode = Mode.EVAL`), by identity
        return True
    return t in (list, tuple) and len(v) <= 16 and all(type(e) in (int, float, bool) for e in v)


def _is_rebindable_code(v):
    """A function, method, functools.partial or other callable object whose
    identity selects the program a capture traced (not a class, module or tensor)."""
    from .nn import Module  # late: nn imports tensorplay

    return callable(v) and not isinstance(v, (type, Module, _C.Tensor, types.ModuleType))


def _holds_tensors_or_modules(container):
    """Whether a list, tuple or dict (its values) holds a tensor or an nn.Module."""
    from .nn import Module  # late: nn imports tensorplay

    values = container.values() if isinstance(container, dict) else container
    return any(isinstance(v, (_C.Tensor, Module)) for v in values)


def _python_state_sources(fn):
    """The Python state a capture of `fn` bakes in and that selects its version
    (read at every call by the binding, python/src/python_state.cpp):
    (modules, [(name, owner, key, steps)]): the nn.Modules it can reach (training
    flags, forward hooks, number attributes) and paths to the Python numbers,
    strings and short number lists its code can read: from a globals dict (key: the
    name), a closure cell (key None) or an object (key None: the owner itself, a
    compiled module or a method's self), then ("attr", name) / ("item", key) steps
    (`cfg.optim.lr`, `CFG["lr"]`, `config_module.SCALE`, a helper's or a method's
    reads, a default argument's attributes). Attribute names are those the code
    reached names, dict keys its constants: a static over-approximation of the reads."""
    from .nn import Module  # late: nn imports tensorplay

    names, consts, funcs, seen_funcs = set(), set(), [], set()

    def add_func(f, own=False):
        if isinstance(f, types.MethodType):
            f = f.__func__
        if not isinstance(f, types.FunctionType) or id(f) in seen_funcs:
            return
        if not own and _foreign_module_name(getattr(f, "__module__", None)):
            return  # (the compiled function itself may be tensorplay's: the nested-inputs `flat`)
        seen_funcs.add(id(f))
        funcs.append(f)
        _code_names(f.__code__, names)
        _code_consts(f.__code__, consts)

    def add_class_functions(cls):
        for klass in cls.__mro__:
            if _foreign_module_name(klass.__module__):
                continue
            for k, v in vars(klass).items():
                if k.startswith("__") and k.endswith("__") and k != "__call__":
                    continue  # (constructors, printing, comparison: not what a forward calls)
                if isinstance(v, (staticmethod, classmethod)):
                    v = v.__func__
                elif isinstance(v, property):
                    v = v.fget
                add_func(v)

    roots = []  # (value, owner, key, steps, name)
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if isinstance(fn, functools.partial):
        # tp.compile(functools.partial(loss_fn, model, smooth=0.1)): the bound
        # arguments (the model whose training flag selects the version) and the
        # wrapped function's reads, not partial.__call__'s (a C slot: nothing).
        # A partial used to be searched as an opaque callable object, so
        # model.eval() left the train-mode program running.
        for i, v in enumerate(fn.args):
            roots.append((v, fn, None, (("attr", "args"), ("item", i)), f"<partial arg {i}>"))
        for k, v in (fn.keywords or {}).items():
            roots.append((v, fn, None, (("attr", "keywords"), ("item", k)), f"<partial {k}=>"))
        inner = fn.func
        while isinstance(inner, functools.partial):
            inner = inner.func
        if isinstance(inner, types.MethodType):
            roots.append((inner.__self__, inner.__self__, None, (), "self"))
            add_class_functions(type(inner.__self__))
            target = inner.__func__
        elif isinstance(inner, types.FunctionType):
            target = inner
        else:
            roots.append((inner, inner, None, (), "self"))
            add_class_functions(type(inner))
            target = getattr(type(inner), "forward", None) or getattr(type(inner), "__call__", None)
    elif isinstance(fn, types.MethodType):
        roots.append((fn.__self__, fn.__self__, None, (), "self"))
        add_class_functions(type(fn.__self__))
    elif not isinstance(fn, types.FunctionType):  # a module or callable object: its forward / __call__
        roots.append((fn, fn, None, (), "self"))
        add_class_functions(type(fn))
        target = getattr(type(fn), "forward", None) or getattr(type(fn), "__call__", None)
    add_func(target, own=True)

    sources, keys = [], set()
    expanded = set()

    def record(owner, key, steps, name):
        k = (id(owner), key, steps)
        if k not in keys and len(sources) < _STATE_PATHS:
            keys.add(k)
            sources.append((name, owner, key, steps))

    def walk(value, owner, key, steps, name, depth, in_sequence=False):
        if isinstance(value, (list, tuple, dict)) and (not value or _holds_tensors_or_modules(value)):
            # How many tensors a loop over it adds (`sum(cache)`, `for t in self.extra`,
            # an empty list filled later): the capture unrolled the loop, so its length
            # selects the version (a ("len", None) step, read per call by the binding).
            record(owner, key, steps + (("len", None),), f"len({name})")
        if _is_state_leaf(value, in_sequence):
            if not (in_sequence and type(value) is str):
                record(owner, key, steps, name)
            return
        if (steps or key is not None or isinstance(owner, types.CellType)) and _is_rebindable_code(value):
            # The capture traced the code it runs: another function bound there
            # (`self.act = F.gelu`, `ACT = tp.tanh`, a closure's `act`) is another
            # program, compared by identity (python_state.cpp: append_callable). It
            # used to be followed for its reads only, so the old function kept running.
            # (Not the compiled object or a method's self itself: it cannot be rebound.)
            record(owner, key, steps, name)
        if depth > _STATE_DEPTH or isinstance(value, (_C.Tensor, str, bytes, complex)):
            return
        # An object is expanded once per name set (a later pass sees names found since).
        mark = (id(value), len(names), len(consts))
        if mark in expanded:
            return
        expanded.add(mark)
        if isinstance(value, (types.FunctionType, types.MethodType)):
            add_func(value)
            if isinstance(value, types.MethodType):
                walk(value.__self__, owner, key, steps + (("attr", "__self__"),), name + ".__self__", depth + 1)
            return
        if isinstance(value, _C.CompiledFunction):
            add_func(value.__wrapped__)
            return
        if isinstance(value, types.ModuleType):
            if _foreign_module_name(value.__name__):
                return
            d = vars(value)
            for k in sorted(names & d.keys()):
                walk(d[k], owner, key, steps + (("attr", k),), f"{name}.{k}", depth + 1)
            return
        if isinstance(value, dict):
            for k in list(value.keys()):
                if type(k) in (str, int) and k in consts:
                    walk(value[k], owner, key, steps + (("item", k),), f"{name}[{k!r}]", depth + 1)
            return
        if isinstance(value, (list, tuple)):
            for i, v in enumerate(value[:32]):
                walk(v, owner, key, steps + (("item", i),), f"{name}[{i}]", depth + 1, in_sequence=True)
            return
        if isinstance(value, type):
            if _foreign_module_name(value.__module__):
                return
            for klass in value.__mro__:
                if _foreign_module_name(klass.__module__):
                    continue
                d = vars(klass)
                for k in sorted(names & d.keys()):
                    v = d[k]
                    if isinstance(v, (staticmethod, classmethod, property)) or callable(v):
                        add_class_functions(value)
                    elif not hasattr(v, "__get__"):
                        walk(v, owner, key, steps + (("attr", k),), f"{name}.{k}", depth + 1)
            return
        if isinstance(value, Module):
            if steps[-2:-1] != (("attr", "_modules"),):  # (a submodule: ModuleState::tree_changed sees it)
                record(owner, key, steps, name)  # rebound to another module: a changed program
            add_class_functions(type(value))
            d = value.__dict__
            for k, sub in d.get("_modules", {}).items():
                if sub is not None:  # a submodule's own attributes (its forward's reads); no depth cost
                    walk(sub, owner, key, steps + (("attr", "_modules"), ("item", k)), f"{name}.{k}", depth)
            for k in sorted(names & d.keys()):
                v = d[k]
                if k not in ("_parameters", "_buffers", "_modules") and (
                        not _is_state_leaf(v) or isinstance(v, (list, tuple))):
                    # (numbers: ModuleState; a list is walked for its length and items)
                    walk(v, owner, key, steps + (("attr", k),), f"{name}.{k}", depth + 1)
            # A class-level setting of the user's subclass (`class Net(nn.Module): scale = 2.0`,
            # then `Net.scale = 3.0`): not in the instance's __dict__, which ModuleState reads.
            seen_names = set(d.keys())
            for klass in type(value).__mro__:
                if _foreign_module_name(klass.__module__):
                    continue
                for k in sorted((names & vars(klass).keys()) - seen_names):
                    seen_names.add(k)
                    v = vars(klass)[k]
                    if _is_state_leaf(v):
                        walk(v, owner, key, steps + (("attr", k),), f"{name}.{k}", depth + 1)
            return
        cls = type(value)
        if _foreign_module_name(cls.__module__):
            return
        add_class_functions(cls)
        d = getattr(value, "__dict__", None)
        d = d if isinstance(d, dict) else {}
        for k in sorted(names):
            if k in d:
                walk(d[k], owner, key, steps + (("attr", k),), f"{name}.{k}", depth + 1)
                continue
            for klass in cls.__mro__:
                if k in vars(klass):
                    v = vars(klass)[k]
                    if type(v).__name__ == "member_descriptor":  # __slots__
                        try:
                            walk(getattr(value, k), owner, key, steps + (("attr", k),), f"{name}.{k}", depth + 1)
                        except AttributeError:
                            pass
                    elif not hasattr(v, "__get__") or isinstance(v, (int, float, bool, str)):
                        walk(v, owner, key, steps + (("attr", k),), f"{name}.{k}", depth + 1)  # a class default
                    break

    def function_roots(f, prefix):
        code = f.__code__
        g = f.__globals__
        cells = dict(zip(code.co_freevars, f.__closure__ or ()))
        out = []
        for name in sorted(_code_names(code, set())):
            if name in g and name not in cells:
                out.append((g[name], g, name, (), prefix + name))
        for name, cell in cells.items():
            try:
                out.append((cell.cell_contents, cell, None, (), prefix + name))
            except ValueError:  # not assigned yet
                out.append((None, cell, None, (), prefix + name))
        for i, v in enumerate(f.__defaults__ or ()):
            out.append((v, f, None, (("attr", "__defaults__"), ("item", i)), f"{prefix}<default {i}>"))
        return out

    try:
        # Names grow as helpers and methods are found: walk again until they stop.
        for _ in range(4):
            before = (len(names), len(consts), len(funcs))
            for r in roots:
                walk(*r, 0)
            for f in list(funcs):
                prefix = "" if f is target else f.__name__ + "."
                for r in function_roots(f, prefix):
                    walk(*r, 0)
            if (len(names), len(consts), len(funcs)) == before:
                break
    except Exception:  # an object that refuses inspection: the sources found so far
        pass
    return _modules_reached(fn), sources


def _modules_reached(fn):
    """The nn.Modules a function can reach the way _locate_free_tensors searches
    (its owner, the globals its code names, closure cells, helpers it calls,
    object attributes and containers), in search order. Their training flags and
    forward hooks are Python state a capture bakes in, so they select the version
    of a compiled function that calls them (a training step naming `model`)."""
    from .nn import Module  # late: nn imports tensorplay

    out, seen = [], set()
    queue = collections.deque()
    target = fn
    if isinstance(fn, functools.partial):  # (its function, then its bound arguments)
        queue.append((fn.func, 0))
        queue.extend((v, 0) for v in fn.args)
        queue.extend((v, 0) for v in (fn.keywords or {}).values())
        target = None
    elif isinstance(fn, types.MethodType):
        queue.append((fn.__self__, 0))
        target = fn.__func__
    elif not isinstance(fn, types.FunctionType):
        queue.append((fn, 0))
        target = getattr(type(fn), "forward", None) or getattr(type(fn), "__call__", None)
    if isinstance(target, types.FunctionType):
        queue.extend((r[0], 1) for r in _function_roots(target))
    visited = 0
    while queue and visited < _SEARCH_LIMIT:
        value, depth = queue.popleft()
        if id(value) in seen or depth > _SEARCH_DEPTH or value is None:
            continue
        seen.add(id(value))
        visited += 1
        try:
            if isinstance(value, (_C.Tensor, type, types.ModuleType, str, bytes, int, float, complex, bool)):
                continue
            if isinstance(value, Module):
                out.append(value)
            if isinstance(value, dict):
                queue.extend((v, depth + 1) for v in list(value.values()))
            elif isinstance(value, (list, tuple)):
                queue.extend((v, depth + 1) for v in value)
            elif isinstance(value, types.FunctionType):
                queue.extend((r[0], depth + 1) for r in _function_roots(value))
            elif isinstance(value, _C.CompiledFunction):
                queue.append((value.__wrapped__, depth + 1))
            elif isinstance(value, types.MethodType):
                queue.append((value.__self__, depth + 1))
                queue.extend((r[0], depth + 1) for r in _function_roots(value.__func__))
            elif isinstance(value, weakref.ref):  # (its referent's flags select the version)
                queue.append((value(), depth + 1))
            elif isinstance(value, functools.partial):  # (no __dict__ entries: its slots)
                queue.append((value.func, depth + 1))
                queue.extend((v, depth + 1) for v in value.args)
                queue.extend((v, depth + 1) for v in (value.keywords or {}).values())
            else:
                d = getattr(value, "__dict__", None)
                if isinstance(d, dict):
                    queue.extend((v, depth + 1) for v in list(d.values()))
                # (a callable object with __slots__ holding the model: its flags too)
                queue.extend((v, depth + 1) for _, v in _slot_values(value))
        except Exception:  # an object that refuses inspection
            continue
    return out


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


def compile(fn=None, *, backend="stax", mode=None, options=None, dynamic=None, fullgraph=False,
            strict_native=False):
    """Compile `fn` (a function over tensors) into fused native kernels.

    backend: "stax" (default), "eager", "aot_eager", a name given to
    register_backend, or a callable (graph_module, example_inputs) -> callable.
    strict_native=True raises BackendError instead of falling back to eager
    execution when Stax cannot generate code for a region; when a call needs
    autograd (an argument, parameter or other free tensor requires grad) the
    forward and the backward region must both be generated code.

    A function that makes autograd or training-step calls a capture cannot
    record (loss.backward(), tp.autograd.grad, optimizer.zero_grad() / step(),
    a scheduler's step(), hooks, new leaves: the whole training step, as
    PyTorch 2 users write it) runs step-wise: as Python, with every module it
    calls and every optimizer step compiled (tensorplay/_stepwise.py); results
    and side effects are eager's. fullgraph=True (or strict_native=True) makes
    such a call a CaptureError instead.

    options={"activation_memory_budget": N} caps the activation bytes a training
    region saves for its backward (an int: bytes; a float in [0, 1]: a fraction of
    what the min-cut partition saves without it); the rest is recomputed.

    dynamic: None (default) captures the first call with its sizes and recompiles
    a dim whose size changed as symbolic (one version for all its sizes, behind
    shape guards); True makes every dim of size >= 2 symbolic from the start;
    False never. tp.mark_dynamic(x, dim, min=, max=) / tp.mark_static(x, dim)
    choose per tensor. While a symbolic capture runs, sizes of traced tensors
    (x.shape, x.size(d), x.numel()) are tp.SymInt; comparing one records a shape
    guard, and using one as a plain int (range(n), indexing a list) fixes it.
    Int arguments follow the same policy (automatic dynamic ints): None makes an
    int that changed between calls a tp.SymInt from then on (a decode position
    `pos` used in `cache[:, :pos + 1]`, `x + pos`: one version for every value);
    True from the first call; False, or options={"dynamic_ints": False}, keeps
    ints by value. An int used where no symbolic form exists (range(n), int(n),
    a dim index) is kept by value for that argument. Bools are always by value.

    Parameters, buffers, globals and closure variables the function reads are
    inputs of the compiled code, re-read at every call. Python numbers it reads
    (a module's `self.temperature`, `cfg.beta`, a global) select the version; a
    float among them (or a float argument) that changed between calls is an
    input from then on (automatic dynamic floats: one version for a schedule),
    unless it is used where a number is needed (`alpha=`, `math.exp`, `round`)
    or written by the function; options={"dynamic_float_attrs": False} keeps
    such floats by value. A fallback to eager
    execution warns once per compiled function (a UserWarning starting with
    "tp.compile: running eagerly"); options={"warn_fallback": False} or the
    warnings module silence it.
    """
    if fn is None:
        return lambda f: compile(f, backend=backend, mode=mode, options=options, dynamic=dynamic,
                                 fullgraph=fullgraph, strict_native=strict_native)
    if not callable(fn):
        raise TypeError(f"tp.compile expects a callable, got {type(fn).__name__}")
    custom = None
    if callable(backend):
        custom, backend = backend, getattr(backend, "__name__", "custom")
    elif not isinstance(backend, str):
        raise TypeError("backend must be a string or a callable")
    kwargs = dict(backend=custom or backend, mode=mode, options=options, dynamic=dynamic, fullgraph=fullgraph,
                  strict_native=strict_native)
    reverse = _compiled_reverse_transform(fn, kwargs)
    if reverse is not None:
        return reverse
    if _state_reader(fn) is not None:  # optimizer.step: its float hyperparameters are inputs
        return _CompiledOptimizerStep(fn, kwargs)
    from .nn import Module  # late: nn imports tensorplay
    adapter = _keyword_only_adapter(fn)
    user_fn = fn
    if adapter is not None:
        cf, _ = _build(adapter[0], custom, backend, kwargs, signature=adapter[1:])
        fn = adapter[0]
    elif isinstance(fn, Module):
        # Keywords bind against the forward's signature (the module's own __call__
        # takes *args, **kwargs, which refused `model(x, mask=m)`); a positional call
        # goes straight on whatever its count (-1), defaults filled by forward itself.
        names, _ = _signature(fn.forward)
        cf, _ = _build(fn, custom, backend, kwargs, signature=(names, -1, _make_binder(fn.forward)))
    else:
        cf, _ = _build(fn, custom, backend, kwargs)
    # Its modules' flags and hooks and the Python numbers it reads select the version.
    cf._set_module_finder(lambda: _python_state_sources(user_fn if isinstance(user_fn, Module) else fn))
    if not fullgraph and not strict_native:
        # A training step (backward, zero_grad, opt.step inside): run step-wise
        # (_stepwise.py) rather than refuse it; from the first call when its code
        # names backward or zero_grad, else once a capture is refused one. Any
        # other refusal is a graph break that switches the same way (compile.cpp).
        from . import _stepwise
        if isinstance(user_fn, Module):
            # The module's own forward runs as Python; the submodules it calls are compiled.
            cf._set_stepwise(_stepwise.Runner(user_fn._call_impl, kwargs, name=type(user_fn).__name__), False)
        else:
            cf._set_stepwise(_stepwise.Runner(user_fn, kwargs), _stepwise.names_autograd_calls(user_fn))
    fn = user_fn if isinstance(user_fn, Module) else fn
    if isinstance(fn, Module):
        # Forward hooks are Python code whose side effects a capture would run once:
        # while the tree has any, calls run them eagerly as module.compile() does.
        cf._set_hooked_call(_CompiledModule(fn, (), kwargs))
    return cf


def _compiled_reverse_transform(fn, kwargs):
    """tp.compile(tp.func.grad(f)) (also grad_and_value, jacrev): the transform
    applied to tp.compile(f), or None when fn is no such transform.

    A capture runs the function without autograd (the AOT layer differentiates
    the captured graph instead), so tracing the transform itself would meet its
    requires_grad_() and autograd.grad and refuse them. Compiling f instead
    gives the same program: the transform marks the differentiated arguments as
    requiring grad, the compiled call of f runs its generated forward and
    returns results whose grad_fn is the region's node, and the transform's
    autograd.grad runs the generated backward (both native under
    strict_native). What stays in Python is the transform's glue, one engine
    call per gradient. A gradient that must itself be differentiable (nested
    transforms, grad(grad(f)), or f reading tensors that require grad outside
    the transform while grad mode is on) needs a double backward through the
    compiled region, which raises an error saying so."""
    tag = getattr(fn, "_tp_transform", None)
    if not tag or tag[0] not in ("grad", "jacrev"):
        return None
    from . import func as tf
    inner = compile(tag[1], **kwargs)
    if tag[0] == "jacrev":
        transform = tf.jacrev(inner, tag[2], has_aux=tag[3])
    else:
        transform = (tf.grad_and_value if tag[4] else tf.grad)(inner, tag[2], has_aux=tag[3])

    @functools.wraps(fn)
    def compiled_transform(*args, **kw):
        try:
            return transform(*args, **kw)
        except RuntimeError as e:
            if not str(e).startswith("double backward (create_graph=True) through the compiled region"):
                raise
            raise RuntimeError(
                f"tp.compile(tp.func.{tag[0]}(f)): the gradient has to stay differentiable because f's result "
                "depends on tensors that require grad outside the transform (a parameter f reads, an argument "
                "that already requires grad, or an enclosing transform), and a compiled backward has no "
                "derivative; pass detached tensors (params = {k: v.detach() for k, v in "
                "model.named_parameters()}) or call it under tp.no_grad() when no outer derivative is wanted"
            ) from e

    compiled_transform._tp_transform = tag[:1] + (inner,) + tag[2:]  # vmap of it batches through its own rule
    return compiled_transform


def _module_attribute(self, name):
    """Attribute lookups a CompiledFunction does not answer itself go to the module
    it compiles, so `model = tp.compile(model)` keeps model.parameters(), .eval(),
    .state_dict(), submodules and attributes working (as PyTorch's compiled module
    does; `_orig_mod` names the module too). Only reached when the normal lookup
    fails: calls never pass here."""
    from .nn import Module  # late: nn imports tensorplay
    module = self.__wrapped__
    if not isinstance(module, Module):  # a module whose forward takes keyword-only arguments: its adapter
        module = getattr(module, "__wrapped__", module)
    if isinstance(module, Module) and not (name.startswith("__") and name.endswith("__")):
        return module if name == "_orig_mod" else getattr(module, name)
    raise AttributeError(f"'CompiledFunction' object has no attribute '{name}'")


_C.CompiledFunction.__getattr__ = _module_attribute


def _compiled_module_or_raise(self, what):
    from .nn import Module  # late: nn imports tensorplay
    module = self.__wrapped__
    if not isinstance(module, Module):
        module = getattr(module, "__wrapped__", module)
    if not isinstance(module, Module):
        raise TypeError(f"'CompiledFunction' object {what}")
    return module


# Container protocols of a compiled container module (`model = tp.compile(model)`
# of an nn.Sequential / ModuleList / ModuleDict): special methods are looked up on
# the type, not through __getattr__, so len(model), model[0] and `for layer in
# model` raised TypeError (PyTorch's compiled module answers them).
_C.CompiledFunction.__len__ = lambda self: len(_compiled_module_or_raise(self, "has no len()"))
_C.CompiledFunction.__getitem__ = lambda self, i: _compiled_module_or_raise(self, "is not subscriptable")[i]
_C.CompiledFunction.__iter__ = lambda self: iter(_compiled_module_or_raise(self, "is not iterable"))
_C.CompiledFunction.__bool__ = lambda self: True  # (not len(): a compiled Linear or function is true)


def _bind_to_instance(self, obj, objtype=None):
    """`@tp.compile` on a method (`def forward(self, x)` in a class body): read
    through an instance, the compiled function binds it as a Python function
    does, so `model(x)` passes `self` (the call raised "missing a required
    argument: 'x'")."""
    return self if obj is None else types.MethodType(self, obj)


_C.CompiledFunction.__get__ = _bind_to_instance


def _compiled_target(cf):
    """What tp.compile was given (a module or a function; not its keyword adapter) and
    its compile keywords, or None where unknown."""
    nested = cf._nested
    target = cf.__wrapped__
    if getattr(target, "_tp_keyword_adapter", False):
        target = target.__wrapped__
    return target, (nested.kwargs if isinstance(nested, _NestedInputs) else None)


def _rebuild_compiled(target, kwargs):
    return compile(target, **kwargs)


def _deepcopy_compiled(self, memo):
    """copy.deepcopy(tp.compile(model)) (an EMA or teacher copy of a compiled model):
    the module is deep-copied and compiled again with the same options (the copy's
    parameters are its own; its versions are built at its first call). A compiled
    function copies as itself, as Python functions do. (It raised "cannot pickle
    'CompiledFunction' object".)"""
    from .nn import Module  # late: nn imports tensorplay
    target, kwargs = _compiled_target(self)
    if not isinstance(target, Module) or kwargs is None:
        return self
    return compile(copy.deepcopy(target, memo), **kwargs)


def _copy_compiled(self):
    """copy.copy: a compiled module over the same module (as a shallow copy shares it)."""
    from .nn import Module  # late: nn imports tensorplay
    target, kwargs = _compiled_target(self)
    if not isinstance(target, Module) or kwargs is None:
        return self
    return compile(target, **kwargs)


def _reduce_compiled(self):
    """pickle / tp.save of a compiled module or function: what was compiled (pickled as
    Python pickles it: a module by value, a function by reference) and the compile
    options; loading compiles again."""
    target, kwargs = _compiled_target(self)
    if kwargs is None:
        raise TypeError("cannot pickle this CompiledFunction: its compile options are unknown")
    return _rebuild_compiled, (target, kwargs)


_C.CompiledFunction.__deepcopy__ = _deepcopy_compiled
_C.CompiledFunction.__copy__ = _copy_compiled
_C.CompiledFunction.__reduce__ = _reduce_compiled


def _keyword_only_adapter(fn):
    """For a function with keyword-only parameters (`def f(x, *, eps=1e-5)`) or a
    **kwargs parameter (`def forward(self, ids, **extra)`), and no *args:
    (adapter, names, count, binder), the adapter taking the keyword-only values
    after the positional ones, then the extra keywords as one dict, so they are
    arguments like the others (tensors re-read, numbers in the key, the dict's keys
    part of the argument structure: _NestedInputs); None for other callables."""
    from .nn import Module  # late: nn imports tensorplay
    # A module is called as itself (hooks, __call__), with its forward's signature.
    target = fn.forward if isinstance(fn, Module) else fn
    if not isinstance(target, (types.FunctionType, types.MethodType)):
        return None
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    kwonly = [p.name for p in params if p.kind == p.KEYWORD_ONLY]
    varkw = next((p.name for p in params if p.kind == p.VAR_KEYWORD), None)
    # *args too (`def forward(self, x, *extra, mode="sum", **kw)`): taken as one tuple
    # argument after the positional ones (a nested input); the binder used to refuse
    # such a call ("keyword-only and **kwargs parameters are not supported").
    varpos = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    if not kwonly and varkw is None:
        return None
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    npos, nkw = len(positional) + (varpos is not None), len(kwonly)

    def adapter(*args, **kw):
        if kw:  # called as the user's function (forward-mode AD runs it eagerly)
            return fn(*args, **kw)
        extra = args[npos + nkw] if varkw is not None else {}
        lead = (*args[:npos - 1], *args[npos - 1]) if varpos is not None else args[:npos]
        return fn(*lead, **dict(zip(kwonly, args[npos:npos + nkw])), **extra)

    def bind(args, kwargs):
        try:
            b = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"compiled function: {e}") from None
        b.apply_defaults()
        a = b.arguments
        return (tuple(a[k] for k in positional) + ((tuple(a[varpos]),) if varpos is not None else ()) +
                tuple(a[k] for k in kwonly) + ((dict(a[varkw]),) if varkw is not None else ()))

    if varpos is not None:
        # A positional call of any count may need binding (its *args become one
        # tuple argument): the binder runs for every call (compile.cpp, bind_always).
        bind._tp_always = True
    adapter.__name__ = getattr(fn, "__name__", "adapter")
    adapter.__wrapped__ = fn
    adapter._tp_keyword_adapter = True  # (not a user's functools.wraps: _compiled_target unwraps it)
    names = positional + ([varpos] if varpos is not None else []) + kwonly + ([varkw] if varkw is not None else [])
    return adapter, names, len(names), bind


_PRINT_WARNED = set()


_SNAPSHOT = __import__("threading").local()  # _PrintWatch._snapshot_numbers; .refused


def _capture_error_init(self, *args):
    """CaptureError.__init__: a refusal raised while a call is captured is noted
    (_SNAPSHOT.refused), so that one the user's code catches still fails the capture
    (_PrintWatch._end_snapshot). C++ refusals are made here too, when Python sees them."""
    RuntimeError.__init__(self, *args)
    if _C._is_tracing() and getattr(_SNAPSHOT, "depth", 0) > 0 and getattr(_SNAPSHOT, "refused", None) is None:
        _SNAPSHOT.refused = str(args[0]).splitlines()[0] if args else "a refused operation"


CaptureError.__init__ = _capture_error_init


def _is_plain_scalar(v):
    return v is None or type(v) in (int, float, bool, str)


def _restore_numbers():
    """Puts back the numbers the last refused capture on this thread changed
    (see _PrintWatch._snapshot_numbers)."""
    saved, _SNAPSHOT.failed = getattr(_SNAPSHOT, "failed", None), None
    restore_modules, numbers = saved or (None, ())
    if restore_modules is not None:
        restore_modules()
    for d, values in numbers:
        try:
            for k, v in values.items():
                if d.get(k, v) is not v:
                    d[k] = v
        except Exception:
            pass


class _PrintWatch:
    """Around the user's function while a call is captured: print() runs then,
    but later calls run the compiled program, which has no Python in it, so the
    output is not repeated (Python side effects happen at capture only, as for
    forward hooks). Say so once per compiled function rather than print silently
    only sometimes. builtins.print is swapped only for the capture."""

    def __init__(self, fn):
        self.fn = fn
        self.used = False
        self.random_orig = []

    def __enter__(self):
        import builtins
        self.orig = builtins.print

        def watched(*args, **kwargs):
            self.used = True
            return self.orig(*args, **kwargs)

        builtins.print = watched
        self._watch_python_random()
        self._snapshot_numbers()
        return self

    def _snapshot_numbers(self):
        """The outermost capture on this thread notes what its function's Python can
        rebind: the attributes of the modules it reaches (`self.calls += 1`, all of
        them: _stepwise._attributes_of) and the Python numbers, strings, bools and
        None among the globals its code names (`global STEP`). A refused capture is
        followed by a step-wise run of the whole function (_stepwise.Runner.switched),
        which puts them back first: the Python before the refused call ran in the
        capture and runs again, so a counter was bumped twice by the first call."""
        st = _SNAPSHOT
        st.depth = getattr(st, "depth", 0) + 1
        if st.depth != 1:
            return
        st.failed = None
        st.refused = None
        saved, restore_modules = [], None
        try:
            restore_modules = _stepwise._attributes_of(
                m for root in _modules_reached(self.fn) for m in root.modules())
            f = getattr(self.fn, "__func__", self.fn)
            g, code = getattr(f, "__globals__", None), getattr(f, "__code__", None)
            if g is not None and code is not None:
                names = _code_names(code, set())
                saved.append((g, {k: g[k] for k in names if k in g and _is_plain_scalar(g[k])}))
        except Exception:  # an object that refuses inspection: what was found
            pass
        self.snapshot = (restore_modules, saved)
        st.refused = None  # (only the function's own refusals count)

    def _end_snapshot(self, failed):
        st = _SNAPSHOT
        st.depth -= 1
        if st.depth == 0:
            st.failed = getattr(self, "snapshot", None) if failed else None
            refused, st.refused = getattr(st, "refused", None), None
            if refused is not None and not failed:
                # The function caught a refusal (`try: v = x.numpy() except
                # Exception: v = None`): the capture went on down the except branch,
                # which eager never takes, and every call gave that result. The
                # capture fails with the refusal instead (a graph break).
                st.failed = getattr(self, "snapshot", None)
                raise CaptureError(f"{refused} (the compiled function caught this error and went on; eager "
                                   "would not have raised it)")

    def _watch_python_random(self):
        """Python's and NumPy's global random draws ran once, at capture, and
        their numbers were baked into the compiled program: `if random.random()
        < 0.5: x = x.flip(-1)` flipped at every call or at none, `x * (1 +
        np.random.rand())` scaled by one number forever, silently. Refused while
        a call is captured (module-level functions only: a function imported by
        name, or a numpy Generator, is not seen)."""
        import random
        import sys
        import threading
        capturing = threading.get_ident()  # another thread's draws (a loader thread) are not the capture's
        mods = [(random, "random", ("random", "uniform", "randint", "randrange", "choice", "choices",
                                    "shuffle", "sample", "gauss", "normalvariate", "betavariate",
                                    "expovariate", "triangular", "getrandbits"))]
        # Only when numpy is loaded (no import of numpy here); numpy.random itself
        # may still be unloaded (NumPy loads it at the first `np.random`).
        np_random = getattr(sys.modules["numpy"], "random", None) if "numpy" in sys.modules else None
        if np_random is not None:
            mods.append((np_random, "np.random", ("rand", "randn", "random", "random_sample", "randint",
                                                  "uniform", "normal", "choice", "shuffle", "permutation",
                                                  "binomial", "poisson", "beta", "standard_normal")))
        for mod, label, names in mods:
            for name in names:
                orig = getattr(mod, name, None)
                if orig is None:
                    continue

                def refused(*args, _what=f"{label}.{name}()", _orig=orig, **kwargs):
                    if threading.get_ident() != capturing:
                        return _orig(*args, **kwargs)
                    raise CaptureError(
                        f"{_what} inside a compiled function (tp.compile) is not supported: it would draw once, "
                        "at capture, and every later call would reuse that number (a branch on it would always "
                        "go the same way); draw with tensorplay's random operators (tp.rand, tp.randint, "
                        "tp.randperm: recorded and drawn at every call) or outside the compiled function and "
                        "pass the value in")

                self.random_orig.append((mod, name, orig))
                setattr(mod, name, refused)

    def __exit__(self, exc_type, *rest):
        import builtins
        builtins.print = self.orig
        for mod, name, orig in reversed(self.random_orig):
            setattr(mod, name, orig)
        self.random_orig = []
        self._end_snapshot(exc_type is not None)
        if exc_type is not None:  # the capture failed: the error says what happened
            return False
        key = getattr(self.fn, "__code__", None) or id(self.fn)
        if self.used and key not in _PRINT_WARNED:
            _PRINT_WARNED.add(key)
            name = getattr(self.fn, "__qualname__", None) or type(self.fn).__name__
            warnings.warn(f"tp.compile: print() inside compiled function '{name}' ran while the call was captured; "
                          "later calls run the compiled program and do not print again (Python side effects happen "
                          "at capture only). Print the results after the call, or call the function without "
                          "tp.compile while debugging.", UserWarning, stacklevel=2)
        return False


def _build(fn, custom, backend, kwargs, state_reader=None, signature=None):
    """The C++ CompiledFunction of fn and its nested-inputs companion."""
    if signature is None:
        names, nparams = _signature(fn)
        binder = _make_binder(fn)
    else:
        names, nparams, binder = signature
    opts = {str(k): str(v) for k, v in (kwargs["options"] or {}).items()}
    dynamic = kwargs["dynamic"]
    cf = _C._compile(fn, backend, custom, kwargs["mode"] or "", opts, None if dynamic is None else bool(dynamic),
                     bool(kwargs["fullgraph"]), bool(kwargs["strict_native"]), names, nparams, binder)
    nested = _NestedInputs(fn, kwargs)
    cf._set_nested(nested)
    if state_reader is not None:
        cf._set_state_reader(state_reader)
        nested.state_reader = state_reader
    return cf, nested


# Optimizer hyperparameters a compiled step takes as 0-d float64 inputs when they
# are Python floats (a learning-rate schedule changes them at every step); zero
# ones (no weight decay, no momentum) stay constants that select the version, as
# the update's Python branches on them.
_LIFTED_HYPERPARAMETERS = ("lr", "momentum", "dampening", "weight_decay", "eps", "betas")


def _hyper_float(v):
    """v as a Python float when it is a float hyperparameter the step can take as an
    input: a Python float, or a NumPy floating scalar (a schedule precomputed with
    np.linspace / np.cos sets np.float64 lrs: by value they made a version per step,
    and `lr * wd` with a lifted wd asked NumPy to convert the graph tensor); else None."""
    t = type(v)
    if t is float:
        return v
    if t is bool or t is int:
        return None
    if isinstance(v, float) or (t.__module__ == "numpy" and getattr(getattr(v, "dtype", None), "kind", "") == "f"
                                and getattr(v, "ndim", 1) == 0):
        return float(v)
    return None


def _hyper_slots(opt):
    """[(group index, key, tuple position or None)] of the lifted hyperparameters, and their values."""
    slots, values = [], []
    for gi, group in enumerate(opt.param_groups):
        for k in _LIFTED_HYPERPARAMETERS:
            v = group.get(k)
            f = _hyper_float(v)
            if f is not None and (f != 0.0 or k == "lr"):
                slots.append((gi, k, None))
                values.append(f)
            elif type(v) is tuple:
                for j, e in enumerate(v):
                    f = _hyper_float(e)
                    if f is not None and f != 0.0:
                        slots.append((gi, k, j))
                        values.append(f)
    return slots, values


def _install_hyper(opt, slots, tensors):
    """Puts the lifted values (graph inputs while capturing) into the param groups; returns what to restore."""
    saved = []
    for (gi, k, j), t in zip(slots, tensors):
        group = opt.param_groups[gi]
        saved.append((group, k, group[k]))
        if j is None:
            group[k] = t
        else:
            v = list(group[k])
            v[j] = t
            group[k] = tuple(v)
    return saved


class _CompiledOptimizerStep:
    """tp.compile(optimizer.step). The step's body runs under no_grad in eager, and
    a capture does not see grad-mode switches inside the function, so the whole
    compiled call runs under no_grad (its parameter writes are not recorded, and
    no AOT region is built for parameters that require grad).

    Float hyperparameters (lr, momentum, betas, weight_decay, eps: see
    _LIFTED_HYPERPARAMETERS) are 0-d float64 inputs of the compiled step, installed
    into the param groups while the capture runs: a learning-rate schedule reuses
    one version (as PyTorch 2 users expect) and the update computes with the same
    double values as eager (optim/optimizer.py's _add_scaled keeps eager's rounding)."""

    def __init__(self, step, kwargs):
        from . import float64, tensor

        opt = step.__self__
        self._opt, self._step = opt, step
        self._slots = []
        self._key = ""
        # Keys whose capture wrote Python state (see __call__): run eagerly from then on.
        self._eager_keys = set()
        self._capture_wrote_state = False  # set by lifted_step, which runs only when the call captures
        self._tensor = lambda v: tensor(v, dtype=float64)
        self.__wrapped__ = step
        me = self

        def lifted_step(*args):
            n = len(me._slots)
            saved = _install_hyper(opt, me._slots, args[:n])
            opt._capturing_own_step = True  # Optimizer._refuse_step_in_capture lets this capture through
            before = _python_side_state(opt)
            try:
                return step(*args[n:])
            finally:
                opt._capturing_own_step = False
                if _python_side_state(opt) != before:
                    me._capture_wrote_state = True
                for group, k, v in reversed(saved):
                    group[k] = v

        lifted_step.__name__ = getattr(step, "__name__", "step")
        custom, backend = (kwargs["backend"], getattr(kwargs["backend"], "__name__", "custom")) \
            if callable(kwargs["backend"]) else (None, kwargs["backend"])
        # The key is computed once per call by __call__ (it also picks eager calls).
        self._cf, _ = _build(lifted_step, custom, backend, kwargs, lambda: me._key)
        try:
            self._sig = inspect.signature(step)
        except (TypeError, ValueError):
            self._sig = None

    def __call__(self, *args, **kwargs):
        from ._grad_mode import no_grad
        if _C._is_tracing():
            # Inlined into an enclosing capture, whose key knows nothing of the optimizer's state:
            # refused as the optimizer's own step is, so that the enclosing function runs
            # step-wise (`opt.step = tp.compile(opt.step)`, then a compiled function calling
            # opt.step() raised this error instead).
            from .optim.optimizer import _STEP_IN_CAPTURE
            _C._note_step_refusal()
            raise CaptureError(_STEP_IN_CAPTURE.format(type(self._opt).__name__))
        # The optimizer's step hooks are Python around the step: they run here, at every call,
        # not in the capture (which would run them once).
        from .optim.optimizer import _with_step_hooks
        return _with_step_hooks(self._opt, self._call, args, kwargs)

    def _call(self, *args, **kwargs):
        from ._grad_mode import no_grad
        if kwargs and self._sig is not None:
            b = self._sig.bind(*args, **kwargs)
            args, kwargs = b.args, b.kwargs
        opt = self._opt
        slots, values = _hyper_slots(opt)
        key = _optimizer_key(opt, set(slots))
        if key in self._eager_keys:
            return self._step(*args, **kwargs)
        self._slots, self._key = slots, key
        self._capture_wrote_state = False
        with no_grad():
            r = self._cf(*[self._tensor(v) for v in values], *args, **kwargs)
        if self._capture_wrote_state:
            # The call captured (a cached version runs no Python), and the capture
            # inserted or rebound entries of opt.state (the first step creating
            # momentum buffers / Adam moments): the compiled version does not
            # replay that, so a later call with this key (after opt.state.clear(),
            # or load_state_dict of a fresh optimizer's state) runs the step eagerly.
            self._eager_keys.add(key)
        return r

    def __getattr__(self, name):
        return getattr(self._cf, name)


def _python_side_state(opt):
    """The identities of what opt.state and the param groups hold: a step that
    changes them ran Python code (a capture), which a cached version does not replay."""
    out = [id(opt.state), id(opt.param_groups)]
    for p, s in opt.state.items():
        out += (id(p), id(s))
        if isinstance(s, dict):
            for k, v in s.items():
                out += (k, id(v))
    for g in opt.param_groups:
        out.append(id(g))
        for k, v in g.items():
            out += (k, id(v))
    return out


def _optimizer_key(opt, slots=()):
    """The optimizer's Python state a capture of its step bakes in: hyperparameters
    (those in `slots`, lifted to inputs, count by their place only), which
    parameters there are (by identity: the per-parameter state is found through the
    parameter object, a key of opt.state), which have a gradient, and which state
    entries exist (non-tensor entries by value)."""
    parts = []
    state = opt.state
    for gi, group in enumerate(opt.param_groups):
        items = []
        for k, v in sorted(group.items()):
            if k == "params":
                continue
            if (gi, k, None) in slots:
                v = "<input>"
            elif type(v) is tuple and any((gi, k, j) in slots for j in range(len(v))):
                v = tuple("<input>" if (gi, k, j) in slots else e for j, e in enumerate(v))
            items.append((k, v))
        parts.append(repr(items))
        get = state.get if hasattr(state, "get") else None  # (dict.get: a defaultdict's [] would insert)
        for p in group["params"]:
            parts += (id(p), p.grad is not None)
            st = get(p) if get is not None else None
            if st:
                # Entry names in insertion order (another order is only another version);
                # a Python number entry by value.
                for k, v in st.items():
                    parts.append(k if isinstance(v, _C.Tensor) else (k, v))
            parts.append(None)
    return repr(parts)


def _state_reader(fn):
    """For `tp.compile(optimizer.step)`: the capture bakes in the optimizer's Python
    state (_optimizer_key), so that state selects the version, read at every call.
    The first step (creating momentum buffers) and the later ones are two versions;
    the tensors themselves are free tensors, updated in place through functionalization."""
    opt = getattr(fn, "__self__", None)
    if opt is None or getattr(fn, "__name__", "") != "step":
        return None
    from .optim.optimizer import Optimizer
    if not isinstance(opt, Optimizer):
        return None
    return lambda: _optimizer_key(opt)


# ---------------------------------------------------------------- nested inputs


def _flatten_arg(a, leaves):
    """The structure of one argument (hashable; joins the key) and its tensor/number leaves."""
    if isinstance(a, _C.Tensor) or (isinstance(a, (int, float, bool)) and not isinstance(a, type)):
        leaves.append(a)
        return "leaf"
    if isinstance(a, tuple) and hasattr(a, "_fields"):
        return ("namedtuple", type(a), tuple(_flatten_arg(v, leaves) for v in a))
    if isinstance(a, tuple):
        return ("tuple", tuple(_flatten_arg(v, leaves) for v in a))
    if isinstance(a, list):
        return ("list", tuple(_flatten_arg(v, leaves) for v in a))
    if isinstance(a, dict) and type(a) is not dict:
        # An OrderedDict, a defaultdict, a ModelOutput-like class: rebuilt as its own
        # type (a copy of a template: a defaultdict keeps its default_factory; it used
        # to arrive as a plain dict, so d["missing"] raised KeyError).
        parts = _object_output_parts(a)
        if parts is not None:
            return _object_arg_spec(a, parts, leaves)
    if isinstance(a, dict):
        return ("dict", tuple(a.keys()), tuple(_flatten_arg(v, leaves) for v in a.values()))
    if not isinstance(a, type) and hasattr(type(a), "__dataclass_fields__"):
        # A dataclass instance (a batch, a config): its fields are flattened like a
        # namedtuple's, so a new instance per call reuses the version (held by
        # identity, every call with a new batch object captured and compiled again).
        parts = _object_output_parts(a)
        if parts is not None:
            return _object_arg_spec(a, parts, leaves)
    if a is None or type(a) in (str, bytes, complex):
        return ("const", a)  # part of the key by value, passed as it is
    # Any other object (an nn.Module, a Generator, a config object): passed as it is,
    # part of the key by identity (_spec_key). The compiled function of this
    # structure holds it, so its tensors (a module's parameters) are found by the
    # free-tensor search and re-read at every call, and its numbers select the version.
    return ("obj", a)


def _object_arg_spec(a, parts, leaves):
    names, values, keys, key_values = parts
    # (a itself, not a template: copied by _templated only for a new structure)
    return ("object", type(a), tuple(names), tuple(keys), a,
            tuple(_flatten_arg(v, leaves) for v in values), tuple(_flatten_arg(v, leaves) for v in key_values))


def _templated(spec):
    """The spec a new structure's compiled function keeps: each dataclass or dict
    subclass argument replaced by a template (its copy with the flattened slots
    None), so the first call's tensors are not held."""
    if spec == "leaf" or spec[0] in ("const", "obj"):
        return spec
    kind = spec[0]
    if kind in ("tuple", "list"):
        return (kind, tuple(_templated(s) for s in spec[1]))
    if kind in ("namedtuple", "dict"):
        return (kind, spec[1], tuple(_templated(s) for s in spec[2]))
    if kind == "object":
        template = _object_template(spec[4], spec[2], spec[3])
        return (kind, spec[1], spec[2], spec[3], template, tuple(_templated(s) for s in spec[5]),
                tuple(_templated(s) for s in spec[6]))
    return spec


def _spec_key(spec):
    """The hashable key of an argument structure: objects by identity (the spec holds them alive)."""
    if spec == "leaf":
        return spec
    kind = spec[0]
    if kind == "obj":
        return ("obj", id(spec[1]))
    if kind in ("tuple", "list"):
        return (kind, tuple(_spec_key(s) for s in spec[1]))
    if kind == "namedtuple":
        return (kind, spec[1], tuple(_spec_key(s) for s in spec[2]))
    if kind == "dict":
        return (kind, spec[1], tuple(_spec_key(s) for s in spec[2]))
    if kind == "object":  # (the template is not part of the key)
        return (kind, spec[1], spec[2], spec[3], tuple(_spec_key(s) for s in spec[5]),
                tuple(_spec_key(s) for s in spec[6]))
    return spec


def _unflatten_arg(spec, it):
    if spec == "leaf":
        return next(it)
    kind = spec[0]
    if kind == "tuple":
        return tuple(_unflatten_arg(s, it) for s in spec[1])
    if kind == "namedtuple":
        return spec[1](*[_unflatten_arg(s, it) for s in spec[2]])
    if kind == "list":
        return [_unflatten_arg(s, it) for s in spec[1]]
    if kind == "dict":
        return {k: _unflatten_arg(s, it) for k, s in zip(spec[1], spec[2])}
    if kind == "object":
        values = [_unflatten_arg(s, it) for s in spec[5]]
        key_values = [_unflatten_arg(s, it) for s in spec[6]]
        return _object_output_build(spec[4], spec[2], values, spec[3], key_values)
    return spec[1]


def _container_shape(obj):
    """What a function can change in an argument container: its items' identities."""
    if isinstance(obj, list):
        return [id(v) for v in obj]
    if isinstance(obj, dict):
        items = [(k, id(v)) for k, v in dict.items(obj)]
        return items + sorted((k, id(v)) for k, v in getattr(obj, "__dict__", {}).items())
    if not isinstance(obj, tuple):  # a dataclass instance
        names = [f for f in getattr(type(obj), "__dataclass_fields__", ())]
        return sorted((n, id(getattr(obj, n, None))) for n in set(names) | set(getattr(obj, "__dict__", {})))
    return None


def _note_containers(v, out):
    """(container, _container_shape) of each list, dict and dataclass rebuilt from an
    argument structure (tuples are walked, not noted)."""
    if isinstance(v, (_C.Tensor, str, bytes, int, float, complex)) or v is None:
        return
    if isinstance(v, tuple):
        for x in v:
            _note_containers(x, out)
    elif isinstance(v, (list, dict)) or hasattr(type(v), "__dataclass_fields__"):
        out.append((v, _container_shape(v)))
        children = v if isinstance(v, list) else list(dict.values(v)) if isinstance(v, dict) else \
            [getattr(v, n, None) for n in type(v).__dataclass_fields__]
        for x in children:
            _note_containers(x, out)


class _NestedInputs:
    """Arguments that are tuples/lists/dicts of tensors: flattened into their leaves,
    which a compiled function per argument structure takes (the structure is part
    of the key; the leaves are the caller's tensors, so writes and aliasing carry over)."""

    def __init__(self, fn, compile_kwargs):
        self.fn = fn
        self.kwargs = compile_kwargs
        self.by_structure = {}
        self.state_reader = None  # see _state_reader

    def __call__(self, args):
        leaves = []
        spec = tuple(_flatten_arg(a, leaves) for a in args)
        key = tuple(_spec_key(s) for s in spec)
        if hasattr(self.fn, "modules") and hasattr(self.fn, "training"):
            key = (key, tuple(m.training for m in self.fn.modules()))  # a module: its modes are baked in
        cf = self.by_structure.get(key)
        if cf is None:
            fn = self.fn
            spec = tuple(_templated(s) for s in spec)

            def flat(*ls):
                it = iter(ls)
                built = [_unflatten_arg(s, it) for s in spec]
                if not _C._is_tracing():
                    return fn(*built)
                before = []
                _note_containers(built, before)
                r = fn(*built)
                for obj, shape in before:
                    if _container_shape(obj) != shape:
                        raise CaptureError(
                            f"the compiled function changes its {type(obj).__name__} argument (an item added, "
                            "removed or replaced, an attribute assigned): the function gets rebuilt containers "
                            "whose changes a compiled call would not make; a graph break runs it as Python")
                return r

            cf = self.by_structure[key] = compile(flat, **self.kwargs)
            # A refused capture (a graph break, an autograd call) reaches the outer
            # compiled function, which switches to step-wise as a whole: one warning
            # naming the user's function, not `flat`, and not one more capture
            # attempt (and warning) per new argument structure or string value.
            cf._set_stepwise(None, False)
            if self.state_reader is not None:
                cf._set_state_reader(self.state_reader)
        return cf(*leaves)


# ---------------------------------------------------------------- modules


class _CompiledModule:
    """Module.compile(): forward pre-hooks, forward and forward hooks of the module
    as eager runs them, with its forward compiled. The training flags of the module
    and its submodules and the hooks of its submodules are Python state the capture
    bakes in, so they select the compiled version (train()/eval() switches it)."""

    def __init__(self, module, args, kwargs):
        self.module = module
        self.args = args
        self.kwargs = kwargs
        self.versions = {}

    def _state(self):
        return tuple((m.training, tuple(m._forward_pre_hooks), tuple(m._forward_hooks),
                      tuple(m.__dict__.get("_backward_pre_hooks", ())), tuple(m.__dict__.get("_backward_hooks", ())))
                     for m in self.module.modules() if m is not self.module) + (self.module.training,)

    def _hooked_submodules(self):
        return [name for name, m in self.module.named_modules()
                if m is not self.module and (m._forward_pre_hooks or m._forward_hooks or
                                             m.__dict__.get("_backward_pre_hooks") or m.__dict__.get("_backward_hooks"))]

    def _lazy_submodules(self):
        from .nn.modules.lazy import _LazyMixin  # late: nn imports tensorplay
        return [name for name, m in self.module.named_modules() if isinstance(m, _LazyMixin)]

    def _compiled(self):
        key = self._state()
        cf = self.versions.get(key)
        lazy = self._lazy_submodules() if cf is None else None
        if lazy:
            # Lazy modules take their shapes from this call's inputs (their pre-hooks
            # create the parameters): it runs eagerly, as in eager mode; the hooks
            # remove themselves and the next call compiles.
            if self.kwargs.get("strict_native"):
                raise BackendError(f"tp.compile(strict_native=True): lazy module(s) {', '.join(map(repr, lazy))} of "
                                   f"{type(self.module).__name__} have no parameter shapes before the first call, "
                                   "which therefore cannot be generated code; run one eager call first")
            return self.module.forward
        if cf is None and self._hooked_submodules():
            # A submodule's hooks are Python code with possible side effects that a
            # compiled forward would run once, at capture (or, full backward hooks,
            # not at all): this state runs eagerly (every hook at every call).
            hooked = ", ".join(repr(n) for n in self._hooked_submodules())
            why = (f"submodule(s) {hooked} of {type(self.module).__name__} have hooks (forward hooks or full "
                   "backward hooks), whose Python side effects a compiled forward would run only at capture")
            if self.kwargs.get("strict_native"):
                raise BackendError(f"tp.compile(strict_native=True): {why}")
            opts = self.kwargs.get("options") or {}
            if str(opts.get("warn_fallback", True)) not in ("0", "False", "false"):
                warnings.warn(f"tp.compile: running eagerly instead of generated code: {why}", UserWarning,
                              stacklevel=3)
            cf = self.versions[key] = self.module.forward
        if cf is None:
            module = self.module
            forward = module.forward  # a bound method: free tensors are named self.<path>
            if self.versions and "recompiles" in os.environ.get("TP_LOGS", "").split(","):
                import sys
                print(f"[tp.compile] recompiling {type(module).__name__}: module state changed "
                      f"(training={module.training}, or a submodule's mode or hooks)", file=sys.stderr)
            cf = self.versions[key] = compile(forward, *self.args, **self.kwargs)
            if any(getattr(v, "_stepwise_on", False) for v in self.versions.values()):
                # The forward broke the graph in another mode (train/eval) or hook
                # state: it runs step-wise in this one too, rather than being captured
                # once more (its Python side effects run twice) and warning again.
                from . import _stepwise
                cf._set_stepwise(_stepwise.Runner(forward, self.kwargs), True)
        return cf

    def __call__(self, *args, **kwargs):
        m = self.module
        # The module's own hooks run eagerly around the compiled forward, every call.
        from .nn.modules.module import _run_forward_hooks, _run_forward_pre_hooks
        if m._forward_pre_hooks:
            args, kwargs = _run_forward_pre_hooks(m, args, kwargs)
        bw = None
        if (m.__dict__.get("_backward_hooks") or m.__dict__.get("_backward_pre_hooks")) and _C.is_grad_enabled():
            from .nn.modules._backward_hooks import BackwardHook
            bw = BackwardHook(m)
            args = bw.setup_inputs(args)
        out = self._compiled()(*args, **kwargs)
        if m._forward_hooks:
            out = _run_forward_hooks(m, args, kwargs, out)
        if bw is not None:
            out = bw.setup_outputs(out)
        return out


# ---------------------------------------------------------------- debugging tools


def pass_names():
    """The graph passes tp.compile runs, by the names options={"disable_passes": [...]} accepts."""
    return list(_C._pass_names())


def bisect(fn, *args, **kwargs):
    """Which layer of tp.compile breaks fn(*args, **kwargs) (Algorithm 11.1): eager,
    aot_eager or stax, then which pass, fusion decision and graph node; writes a
    standalone reproducer. Returns a tensorplay.bisect.BisectResult. Keywords out_dir,
    options, verbose and progress configure the tool; others go to fn."""
    from .bisect import bisect as _bisect

    return _bisect(fn, *args, **kwargs)


def explain(fn, *args, **kwargs):
    """The region tp.compile builds for fn(*args): kernels, fused operators, model bytes
    and flops, roofline prediction at the machine's B and P, measured time, beta/B,
    and why it fell back or was not fused. Returns a tensorplay.explain.Explanation.
    Keywords runs, machine, options and verbose configure the tool; others go to fn."""
    from .explain import explain as _explain

    return _explain(fn, *args, **kwargs)


def mark_dynamic(t, dim, min=None, max=None):
    """Declare dim `dim` of tensor `t` symbolic for the captures that take `t` as an
    argument (any dynamic= mode but False), valid for sizes in [min, max]
    (min defaults to 2: sizes 0 and 1 stay static). Guards the range implies are
    not checked at run time; a call outside the range gets its own version."""
    for d in ([dim] if isinstance(dim, int) else list(dim)):
        _C._mark_dim(t, d, True, min, max)
    return t


def mark_static(t, dim):
    """Keep dim `dim` of tensor `t` static (its size part of the key) even under
    dynamic=True or after its size changed between calls."""
    for d in ([dim] if isinstance(dim, int) else list(dim)):
        _C._mark_dim(t, d, False, None, None)
    return t
