"""tensorplay.nn.utils.parametrize: a module's tensor computed from other tensors on every access.

`register_parametrization(module, "weight", p)` moves the weight into
`module.parametrizations.weight.original` (or `original0`, `original1`, ... when `p.right_inverse`
returns several tensors, as weight_norm's does) and gives the module's class a property `weight`
that returns p(original) each time it is read, so autograd reaches the originals and state_dict
holds them under PyTorch's keys (`parametrizations.weight.original`). The module's class is
replaced by a subclass made for it (one per module, so other instances keep the plain attribute).
Assigning `module.weight = x` runs the right inverses and writes the originals in place."""
from contextlib import contextmanager

import tensorplay as _tp

from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module
from ..parameter import Parameter

__all__ = ["register_parametrization", "remove_parametrizations", "is_parametrized", "cached",
           "ParametrizationList", "type_before_parametrizations", "transfer_parametrizations_and_params"]

_cache_depth = 0
_cache = {}


@contextmanager
def cached():
    """Inside this context each parametrized tensor is computed once per module and name."""
    global _cache_depth
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache.clear()


def _register_original(owner, name, value, like):
    if isinstance(like, Parameter):
        owner.register_parameter(name, value if isinstance(value, Parameter)
                                 else Parameter(value, requires_grad=like.requires_grad))
    else:
        owner.register_buffer(name, value)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the original tensor(s) they start from."""

    def __init__(self, modules, original, unsafe=False):
        if not modules:
            raise ValueError("ParametrizationList requires one or more modules")
        super().__init__(modules)
        self.unsafe = unsafe
        new = original
        with _tp.no_grad():
            for m in reversed(list(modules)):
                if hasattr(m, "right_inverse"):
                    new = m.right_inverse(new)
        self.is_tensor = isinstance(new, _tp.Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError(f"parametrization's right_inverse changed the dtype from {original.dtype} "
                                 f"to {new.dtype}")
            if tuple(new.shape) == tuple(original.shape):
                with _tp.no_grad():  # keep the original tensor object: optimizers may already hold it
                    original.copy_(new)
                new = original
            _register_original(self, "original", new, original)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, _tp.Tensor):
                    raise ValueError(f"parametrization's right_inverse must return tensors, got {type(t).__name__}")
                _register_original(self, f"original{i}", t.detach().clone(), original)
        if not unsafe:
            with _tp.no_grad():
                z = self()
            if not isinstance(z, _tp.Tensor):
                raise ValueError(f"a parametrization must return a tensor, got {type(z).__name__}")
            if z.dtype != original.dtype or tuple(z.shape) != tuple(original.shape):
                raise ValueError(f"registering a parametrization may not change the shape or dtype of the tensor: "
                                 f"{tuple(original.shape)} {original.dtype} became {tuple(z.shape)} {z.dtype} "
                                 f"(use unsafe=True to allow it)")

    def right_inverse(self, value):
        """Writes the originals so that the parametrized tensor becomes `value`."""
        with _tp.no_grad():
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    value = m.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, _tp.Tensor):
                    raise ValueError(f"right_inverse must return a tensor, got {type(value).__name__}")
                self.original.copy_(value)
            else:
                if len(value) != self.ntensors:
                    raise ValueError(f"right_inverse must return {self.ntensors} tensors, got {len(value)}")
                for i, t in enumerate(value):
                    getattr(self, f"original{i}").copy_(t)

    def forward(self):
        mods = list(self)
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*[getattr(self, f"original{i}") for i in range(self.ntensors)])
        for m in mods[1:]:
            x = m(x)
        return x


def _make_property(name):
    def getter(self):
        plist = self.parametrizations[name]
        if _cache_depth:
            key = (id(self), name)
            if key not in _cache:
                _cache[key] = plist()
            return _cache[key]
        return plist()

    def setter(self, value):
        self.parametrizations[name].right_inverse(value)
    return property(getter, setter)


def _inject_class(module):
    cls = module.__class__
    new_cls = type(f"Parametrized{cls.__name__}", (cls,), {"_tp_orig_class": cls})
    module.__class__ = new_cls


def is_parametrized(module, tensor_name=None):
    """Whether the module has a parametrization (for tensor_name, when given)."""
    p = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(p, ModuleDict):
        return False
    return len(p) > 0 if tensor_name is None else tensor_name in p


def type_before_parametrizations(module):
    return module.__class__._tp_orig_class if is_parametrized(module) else type(module)


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Makes module.<tensor_name> the result of parametrization applied to the original tensor."""
    if not isinstance(parametrization, Module):
        raise TypeError(f"register_parametrization: parametrization must be a Module, got "
                        f"{type(parametrization).__name__}")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            with _tp.no_grad():
                x = getattr(module, tensor_name)
                y = parametrization(x)
            if not isinstance(y, _tp.Tensor) or y.dtype != x.dtype or tuple(y.shape) != tuple(x.shape):
                raise ValueError("register_parametrization: the new parametrization may not change the shape or "
                                 "dtype of the tensor (use unsafe=True to allow it)")
        plist.append(parametrization)
        plist.unsafe = plist.unsafe or unsafe
        return module
    if tensor_name in module._parameters or tensor_name in module._buffers:
        original = getattr(module, tensor_name)
        if original is None:
            raise ValueError(f"register_parametrization: '{tensor_name}' of {type(module).__name__} is None")
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_class(module)
            module.parametrizations = ModuleDict()
        module.parametrizations[tensor_name] = plist
        setattr(module.__class__, tensor_name, _make_property(tensor_name))
        return module
    raise ValueError(f"Module '{type(module).__name__}' does not have a parameter, a buffer, or a parametrized "
                     f"element with name '{tensor_name}'")


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Removes the parametrizations of tensor_name: it becomes a plain parameter (or buffer) again, holding
    the parametrized value (leave_parametrized=True) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {type(module).__name__} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with _tp.no_grad():
                t = getattr(module, tensor_name)
            if t.dtype != original.dtype or tuple(t.shape) != tuple(original.shape):
                original = Parameter(t.detach().clone(), requires_grad=original.requires_grad) \
                    if isinstance(original, Parameter) else t.detach().clone()
            else:
                with _tp.no_grad():
                    original.copy_(t)
    else:
        if not leave_parametrized:
            raise ValueError("remove_parametrizations: cannot leave the originals of a parametrization with "
                             "several original tensors; use leave_parametrized=True")
        first = plist.original0
        with _tp.no_grad():
            t = getattr(module, tensor_name)
        original = Parameter(t.detach().clone(), requires_grad=first.requires_grad) \
            if isinstance(first, Parameter) else t.detach().clone()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(original, Parameter):
        module.register_parameter(tensor_name, original)
    else:
        module.register_buffer(tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__._tp_orig_class
    return module


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Copies from_module's parametrizations (and their originals) onto to_module."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        src = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach().clone()))
        for p in src:
            register_parametrization(to_module, name, p, unsafe=src.unsafe)
        with _tp.no_grad():
            dst = to_module.parametrizations[name]
            if src.is_tensor:
                dst.original.copy_(src.original)
            else:
                for i in range(src.ntensors):
                    getattr(dst, f"original{i}").copy_(getattr(src, f"original{i}"))
    return to_module
