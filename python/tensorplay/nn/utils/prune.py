"""Pruning (torch.nn.utils.prune): zero out entries or channels of a module's
tensor through a mask.

Pruning `weight` moves the parameter to `weight_orig`, stores the mask as the
buffer `weight_mask`, and installs a forward pre-hook that recomputes the plain
attribute `weight = weight_mask * weight_orig` before every forward, so the
optimizer keeps training `weight_orig` while pruned entries stay zero.
Pruning the same tensor again combines the new mask with the old one through
a PruningContainer (the new method only sees the entries still alive);
remove() makes the pruning permanent."""
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import tensorplay as tp


__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """A pruning method computes a mask for one tensor; subclasses set
    PRUNING_TYPE ("unstructured", "structured" or "global") and compute_mask."""
    _tensor_name = None
    _capture_safe = True  # tp.compile need not warn about this hook (see __call__)

    def __call__(self, module, inputs):
        value = self.apply_mask(module)
        if tp._C._is_tracing():
            # Inside tp.compile, Module.__setattr__ refuses to rebind a tensor
            # attribute (the rebinding would happen only once, at capture). Here
            # the value is mask * orig, recomputed in the captured graph from the
            # parameter and buffer, which are read at every call; so the binding
            # is safe and we bypass the check.
            module.__dict__[self._tensor_name] = value
        else:
            setattr(module, self._tensor_name, value)

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask for `t`, given the mask of earlier prunings (`default_mask`)."""

    def apply_mask(self, module):
        if self._tensor_name is None:
            raise ValueError(f"{type(self).__name__}: the module {type(module).__name__} has not been pruned by "
                             "this method (no tensor name set)")
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        method = cls(*args, **kwargs)
        method._tensor_name = name
        previous = [(k, h) for k, h in module._forward_pre_hooks.items()
                    if isinstance(h, BasePruningMethod) and h._tensor_name == name]
        if len(previous) > 1:
            raise RuntimeError(f"prune: more than one pruning hook for '{name}' of {type(module).__name__}")
        if previous:
            key, old = previous[0]
            del module._forward_pre_hooks[key]
            if isinstance(old, PruningContainer):
                old.add_pruning_method(method)
                method = old
            else:
                container = PruningContainer(old)
                container.add_pruning_method(method)
                method = container

        orig = getattr(module, name)
        if importance_scores is not None and tuple(importance_scores.shape) != tuple(orig.shape):
            raise ValueError(f"importance_scores should have the same shape as parameter {name} of "
                             f"{type(module).__name__}: got {tuple(importance_scores.shape)}, expected "
                             f"{tuple(orig.shape)}")
        first_time = not previous
        if first_time:
            if name not in module._parameters:
                raise ValueError(f"prune: '{name}' is not a parameter of {type(module).__name__}")
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = tp.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()

        try:
            scores = importance_scores if importance_scores is not None else orig
            mask = method.compute_mask(scores.detach(), default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            # Leave the module as it was: a failed first pruning restores the parameter.
            if first_time:
                orig = getattr(module, name + "_orig")
                del module._parameters[name + "_orig"]
                module.__dict__.pop(name, None)
                module._buffers.pop(name + "_mask", None)
                module.register_parameter(name, orig)
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        if importance_scores is not None and tuple(importance_scores.shape) != tuple(t.shape):
            raise ValueError("importance_scores should have the same shape as tensor t")
        scores = importance_scores if importance_scores is not None else t
        default_mask = default_mask if default_mask is not None else tp.ones_like(t)
        return t * self.compute_mask(scores, default_mask=default_mask)

    def remove(self, module):
        if self._tensor_name is None:
            raise ValueError(f"{type(self).__name__}: cannot remove a pruning that was never applied")
        weight = self.apply_mask(module)
        if self._tensor_name in module.__dict__:
            delattr(module, self._tensor_name)
        orig = module._parameters.pop(self._tensor_name + "_orig")
        with tp.no_grad():
            orig.copy_(weight)
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


class PruningContainer(BasePruningMethod):
    """The sequence of pruning methods applied to one tensor."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if len(args) == 1 and not isinstance(args[0], Iterable):
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        elif len(args) == 1:
            self._tensor_name = args[0][0]._tensor_name if len(args[0]) else None
            for m in args[0]:
                self.add_pruning_method(m)
        else:
            for m in args:
                self.add_pruning_method(m)

    def add_pruning_method(self, method):
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method).__name__} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' "
                             f"to PruningContainer. Found '{method._tensor_name}'")
        if self._tensor_name is None and method is not None:
            self._tensor_name = method._tensor_name
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        # The newest method prunes only what is still alive: entries with mask 1
        # (unstructured) or channels not yet fully pruned (structured).
        method = self._pruning_methods[-1]
        new_mask = default_mask.clone()
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            alive = default_mask == 1
            new_mask[alive] = method.compute_mask(t[alive], default_mask=default_mask[alive]).to(new_mask.dtype)
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("Pruning methods of PRUNING_TYPE 'structured' need to have the attribute `dim` "
                                     "defined.")
            dim = method.dim if method.dim >= 0 else method.dim + t.dim()
            others = [d for d in range(t.dim()) if d != dim]
            keep = default_mask.sum(dim=others) != 0
            slc = [slice(None)] * t.dim()
            slc[dim] = keep
            slc = tuple(slc)
            new_mask[slc] = method.compute_mask(t[slc], default_mask=default_mask[slc]).to(new_mask.dtype)
        elif kind == "global":
            new_mask = method.compute_mask(t, default_mask=default_mask).to(new_mask.dtype)
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        return new_mask


def _validate_amount_init(amount):
    if not isinstance(amount, numbers.Real) or isinstance(amount, bool):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and (float(amount) > 1.0 or float(amount) < 0.0)):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _n_to_prune(amount, size):
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={size}")
        return int(amount)
    return round(amount * size)


def _check_structured(t):
    if t.dim() <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional tensors. Found tensor of "
                         f"shape {tuple(t.shape)} with {t.dim()} dims")


class Identity(BasePruningMethod):
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """Prunes `amount` (a fraction or a count) of the entries, chosen at random."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _n_to_prune(self.amount, t.numel())
        mask = default_mask.clone()
        if k:
            idx = tp.topk(tp.rand_like(t).reshape(-1), k=k).indices
            mask.view(-1)[idx] = 0
        return mask

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the `amount` entries of smallest absolute value."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _n_to_prune(self.amount, t.numel())
        mask = default_mask.clone()
        if k:
            idx = tp.topk(t.abs().reshape(-1), k=k, largest=False).indices
            mask.view(-1)[idx] = 0
        return mask

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes `amount` whole channels along `dim`, chosen at random."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _validate_amount_init(amount)
        self.amount, self.dim = amount, dim

    def compute_mask(self, t, default_mask):
        _check_structured(t)
        size = t.shape[self.dim]
        k = _n_to_prune(self.amount, size)
        if k == 0:
            return default_mask
        pruned = tp.topk(tp.rand(size), k=k).indices
        return _channel_mask(t, self.dim, pruned, keep=False) * default_mask.to(t.dtype)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


def _channel_mask(t, dim, channels, keep):
    mask = tp.zeros_like(t) if keep else tp.ones_like(t)
    slc = [slice(None)] * t.dim()
    slc[dim] = channels
    mask[tuple(slc)] = 1.0 if keep else 0.0
    return mask


def _ln_norm(t, n, dim):
    dims = [d for d in range(t.dim()) if d != (dim if dim >= 0 else dim + t.dim())]
    if n == "fro":
        n = 2
    if n == "nuc":
        raise ValueError("LnStructured: n='nuc' is not supported for channel norms")
    return tp.linalg.vector_norm(t, ord=n, dim=tuple(dims))


class LnStructured(BasePruningMethod):
    """Prunes the `amount` channels along `dim` of smallest L`n` norm."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _validate_amount_init(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t, default_mask):
        _check_structured(t)
        size = t.shape[self.dim]
        k = _n_to_prune(self.amount, size)
        if k == 0:
            return default_mask
        keep = tp.topk(_ln_norm(t, self.n, self.dim), k=size - k, largest=True).indices
        return _channel_mask(t, self.dim, keep, keep=True) * default_mask.to(t.dtype)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise ValueError(f"CustomFromMask: the mask has shape {tuple(self.mask.shape)}, the tensor "
                             f"{tuple(default_mask.shape)}")
        return default_mask * self.mask.to(default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


# ---------------------------------------------------------------- functional forms
def identity(module, name):
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prunes the (module, name) tensors together: the method sees all of them
    as one flat vector (e.g. the smallest 20% over the whole network)."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = tp.cat([importance_scores.get((m, n), getattr(m, n)).detach().reshape(-1) for m, n in parameters])
    default_mask = tp.cat([getattr(m, n + "_mask", tp.ones_like(getattr(m, n))).detach().reshape(-1)
                           for m, n in parameters])
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    container = PruningContainer(method)
    final_mask = container.compute_mask(scores, default_mask)
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        n = param.numel()
        custom_from_mask(module, name, mask=final_mask[start:start + n].reshape(tuple(param.shape)))
        start += n


def remove(module, name):
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {type(module).__name__} has to be pruned before pruning can "
                     "be removed")


def is_pruned(module):
    for _, sub in module.named_modules():
        for hook in sub._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False
