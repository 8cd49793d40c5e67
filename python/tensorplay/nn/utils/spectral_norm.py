"""The older tensorplay.nn.utils.spectral_norm / remove_spectral_norm (PyTorch's
hook-based form, still common in GAN code): the weight becomes a parameter
`<name>_orig` with buffers `<name>_u`, `<name>_v`, and a forward pre-hook
sets `module.<name>` = W / sigma(W) before every call, sigma estimated by
power iteration (steps only in training mode). The layout is PyTorch's, so
state_dicts load either way. (parametrizations.spectral_norm is the newer form.)"""
import tensorplay as _tp

from .. import functional as F
from ..parameter import Parameter

__all__ = ["spectral_norm", "remove_spectral_norm"]


class _SpectralNormHook:
    def __init__(self, name, n_power_iterations, dim, eps):
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def weight_matrix(self, weight):
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = self.weight_matrix(weight)
        if do_power_iteration:
            # in place: the buffers stay the same tensors (state_dict, optimizers, compiled regions see them)
            with _tp.no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(_tp.mv(mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(_tp.mv(mat, v), dim=0, eps=self.eps))
            if self.n_power_iterations > 0:  # the backward must not see the next step's in-place updates
                u, v = u.clone(), v.clone()
        sigma = _tp.dot(u, _tp.mv(mat, v))
        return weight / sigma

    def _set(self, module, weight):
        # A plain attribute recomputed on each call (as weight_norm's hook does).
        module.__dict__.pop(self.name, None)
        object.__setattr__(module, self.name, weight)

    def __call__(self, module, inputs):
        self._set(module, self.compute_weight(module, do_power_iteration=module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Replaces module.<name> by <name>_orig / sigma, sigma the largest singular value
    of <name>_orig (as a matrix over `dim`: 1 for transposed convolutions, else 0)."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _SpectralNormHook) and hook.name == name:
            raise RuntimeError(f"spectral_norm: cannot register two spectral_norm hooks on the same parameter {name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"spectral_norm: module {type(module).__name__} has no parameter '{name}'")
    if n_power_iterations < 0:
        raise ValueError(f"spectral_norm: expected n_power_iterations to be non-negative, got {n_power_iterations}")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    if not -weight.dim() <= dim < weight.dim():
        raise IndexError(f"spectral_norm: dim {dim} out of range for a weight of {weight.dim()} dimensions")
    dim = dim % weight.dim()
    hook = _SpectralNormHook(name, n_power_iterations, dim, eps)
    with _tp.no_grad():
        mat = hook.weight_matrix(weight)
        h, w = mat.shape
        u = F.normalize(_tp.randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
        v = F.normalize(_tp.randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    hook._set(module, weight.detach())
    module.register_forward_pre_hook(hook)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undoes spectral_norm: module.<name> is one parameter again, holding W / sigma
    at the current u, v (no power step)."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _SpectralNormHook) and hook.name == name:
            with _tp.no_grad():
                weight = hook.compute_weight(module, do_power_iteration=False).detach().clone()
            module.__dict__.pop(name, None)
            del module._parameters[name + "_orig"]
            del module._buffers[name + "_u"]
            del module._buffers[name + "_v"]
            module.register_parameter(name, Parameter(weight))
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
