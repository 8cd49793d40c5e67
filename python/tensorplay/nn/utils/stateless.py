"""functional_call: run a module with some of its parameters and buffers
replaced by given tensors, without changing the module.

The module's registries point at the given tensors for the duration of the
call and at their own tensors again afterwards (also when the call raises).
So gradients flow to the given tensors, and in-place buffer updates in the
forward (BatchNorm's running statistics) land in the given buffers, not the
module's. This is what makes `tp.func.grad` over a dict of parameters work:

    params = {k: v.detach() for k, v in model.named_parameters()}
    grads = tp.func.grad(lambda p: loss_fn(functional_call(model, p, (x,)), y))(params)
"""
from ... import _C

__all__ = ["functional_call"]

_MISSING = object()


def _as_dicts(parameter_and_buffer_dicts):
    if isinstance(parameter_and_buffer_dicts, dict):
        return dict(parameter_and_buffer_dicts)
    if not isinstance(parameter_and_buffer_dicts, (tuple, list)) or \
            not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
        raise TypeError("functional_call: parameter_and_buffer_dicts must be a dict or a tuple/list of dicts, got "
                        f"{type(parameter_and_buffer_dicts).__name__}")
    merged, repeated = {}, []
    for d in parameter_and_buffer_dicts:
        for k, v in d.items():
            if k in merged:
                repeated.append(k)
            merged[k] = v
    if repeated:
        raise ValueError(f"functional_call: {sorted(set(repeated))} appeared in several of the dictionaries; which "
                         "value the call should use is ambiguous")
    return merged


def _tie_groups(module):
    """Names of one tensor registered under several names (tied weights),
    as lists of two or more names."""
    by_tensor = {}
    named = list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))
    for name, t in named:
        by_tensor.setdefault(id(t), []).append(name)
    return [names for names in by_tensor.values() if len(names) > 1]


def _untie(module, values):
    """Give every name of a tied tensor the value given for any of them."""
    for names in _tie_groups(module):
        given = [n for n in names if n in values]
        if not given:
            continue
        first = values[given[0]]
        if any(values[n] is not first for n in given[1:]):
            raise ValueError(f"functional_call: got different values for the keys {given}, which name one tied "
                             "tensor of the module; pass one of them, or tie_weights=False")
        for n in names:
            values[n] = first
    return values


def _check_keys(module, values):
    expected = [n for n, _ in module.named_parameters(remove_duplicate=False)] + \
               [n for n, _ in module.named_buffers(remove_duplicate=False)]
    missing = [n for n in expected if n not in values]
    unexpected = [k for k in values if k not in set(expected)]
    if missing or unexpected:
        parts = []
        if unexpected:
            parts.append("unexpected key(s): " + ", ".join(repr(k) for k in unexpected))
        if missing:
            parts.append("missing key(s): " + ", ".join(repr(k) for k in missing))
        raise RuntimeError(f"functional_call(strict=True) on {type(module).__name__}: " + "; ".join(parts))


def _owner(module, key):
    *path, name = key.split(".")
    mod = module
    for i, part in enumerate(path):
        sub = mod._modules.get(part) if hasattr(mod, "_modules") else None
        if sub is None:
            raise AttributeError(f"functional_call: key '{key}' names no submodule "
                                 f"'{'.'.join(path[:i + 1])}' of {type(module).__name__}")
        mod = sub
    return mod, name


class _Swap:
    """One name of one module pointing at a given tensor; `undo` restores it."""
    __slots__ = ("mod", "name", "registry", "old")

    def __init__(self, mod, name, value):
        self.mod, self.name = mod, name
        if name in mod._parameters:
            self.registry = mod._parameters
        elif name in mod._buffers:
            self.registry = mod._buffers
        else:
            self.registry = mod.__dict__  # a key the module lacks (strict=False): a plain attribute for the call
        self.old = self.registry.get(name, _MISSING)
        self.registry[name] = value

    def undo(self):
        if self.old is _MISSING:
            del self.registry[self.name]
        else:
            self.registry[self.name] = self.old


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True,
                    strict=False):
    """Call `module(*args, **kwargs)` with the parameters and buffers named by
    the dict(s) (keys as in `named_parameters()` / `named_buffers()`) replaced by
    the given tensors; names not given keep the module's own. With
    `tie_weights`, a value given for one name of a tied tensor applies to all
    its names. With `strict`, the keys must be exactly the module's parameter
    and buffer names."""
    values = _as_dicts(parameter_and_buffer_dicts)
    for k, v in values.items():
        if not isinstance(k, str):
            raise TypeError(f"functional_call: keys must be strings (parameter or buffer names), got "
                            f"{type(k).__name__}")
        if v is not None and not isinstance(v, _C.Tensor):
            raise TypeError(f"functional_call: the value for '{k}' is a {type(v).__name__}; expected a Tensor")
    if tie_weights:
        values = _untie(module, values)
    if strict:
        _check_keys(module, values)
    args = () if args is None else (args if isinstance(args, tuple) else (args,))
    swaps = []
    try:
        for key, value in values.items():
            mod, name = _owner(module, key)
            swaps.append(_Swap(mod, name, value))
        return module(*args, **(kwargs or {}))
    finally:
        for s in reversed(swaps):
            s.undo()
