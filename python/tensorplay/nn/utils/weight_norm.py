"""The older tensorplay.nn.utils.weight_norm / remove_weight_norm: the weight is replaced by two
parameters `<name>_g` and `<name>_v`, and a forward pre-hook recomputes `module.<name>` =
g * v / ||v|| before every call (PyTorch's layout, so their state_dicts load either way)."""
import tensorplay as _tp

from ..parameter import Parameter
from .parametrizations import _norm_except_dim

__all__ = ["weight_norm", "remove_weight_norm"]


class _WeightNormHook:
    def __init__(self, name, dim):
        self.name, self.dim = name, dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def _set(self, module, weight):
        # A plain attribute recomputed on each call. Dropped first, so under tp.compile this is a first
        # binding (the captured forward computes the weight from g and v on every call).
        module.__dict__.pop(self.name, None)
        object.__setattr__(module, self.name, weight)

    def __call__(self, module, inputs):
        self._set(module, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Replaces module.<name> by <name>_g (magnitude) and <name>_v (direction) parameters."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _WeightNormHook) and hook.name == name:
            raise RuntimeError(f"weight_norm: cannot register two weight_norm hooks on the same parameter {name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"weight_norm: module {type(module).__name__} has no parameter '{name}'")
    if dim is None:
        dim = -1
    elif not -weight.dim() <= dim < max(weight.dim(), 1):
        raise IndexError(f"weight_norm: dim {dim} out of range for a weight of {weight.dim()} dimensions")
    elif dim < -1:
        dim += weight.dim()
    hook = _WeightNormHook(name, dim)
    del module._parameters[name]
    with _tp.no_grad():
        g = _norm_except_dim(weight, dim).detach().clone()
    module.register_parameter(name + "_g", Parameter(g))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    hook._set(module, hook.compute_weight(module))
    module.register_forward_pre_hook(hook)
    return module


def remove_weight_norm(module, name="weight"):
    """Undoes weight_norm: module.<name> is one parameter again, holding g * v / ||v||."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _WeightNormHook) and hook.name == name:
            with _tp.no_grad():
                weight = hook.compute_weight(module).detach().clone()
            module.__dict__.pop(name, None)
            del module._parameters[name + "_g"]
            del module._parameters[name + "_v"]
            module.register_parameter(name, Parameter(weight))
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
