"""Gradient clipping: scale all gradients together so their joint norm is at most max_norm,
or clamp each gradient element into [-clip_value, clip_value]."""
import math

import tensorplay as _tp
from ..._grad_mode import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _as_list(parameters):
    if isinstance(parameters, _tp.Tensor):
        return [parameters]
    return list(parameters)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of `tensors`: the norm of all their elements as one vector."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return _tp.zeros([])
    # no_grad, not .detach(): the same values without history, and a compiled
    # function can capture it (a detached gradient is a second tensor over the
    # gradient's memory, which the capture cannot tell apart from an unrelated one).
    with no_grad():
        # PyTorch's rule: the norm of the per-tensor norms (vector_norm of their stack), which
        # for -inf is the smallest |element| and for 0 counts the tensors with a nonzero element.
        if math.isinf(norm_type):
            if norm_type > 0:
                per = [t.abs().amax().to(_tp.float64) for t in tensors]
                total = _tp.stack(per).amax()
            else:
                per = [t.abs().amin().to(_tp.float64) for t in tensors]
                total = _tp.stack(per).amin()
        elif norm_type == 0:
            per = [(t != 0).sum().to(_tp.float64) for t in tensors]
            total = (_tp.stack(per) != 0).sum().to(_tp.float64)
        else:
            per = [_tp.pow(t.abs().to(_tp.float64), norm_type).sum() for t in tensors]
            total = _tp.pow(_tp.stack(per).sum(), 1.0 / norm_type)
        total = total.to(tensors[0].dtype)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales the gradients in place by min(1, max_norm / (total_norm + 1e-6)), total_norm
    given (get_total_norm of these or of more gradients, e.g. across pipeline stages)."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    if not isinstance(total_norm, _tp.Tensor):
        total_norm = _tp.tensor(float(total_norm), dtype=_tp.float64)
    with no_grad():
        # As PyTorch: a tensor coefficient (no host read), so a NaN norm makes the gradients NaN
        # rather than leaving them unclipped (Python's min(1.0, nan) is 1.0).
        coef = _tp.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients in place by min(1, max_norm / (total_norm + 1e-6)); returns the total norm."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The deprecated name of clip_grad_norm_ (it warns, as PyTorch's does)."""
    import warnings
    warnings.warn("tensorplay.nn.utils.clip_grad_norm is now deprecated in favor of "
                  "tensorplay.nn.utils.clip_grad_norm_.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    clip_value = float(clip_value)
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.copy_(_tp.clamp(p.grad, -clip_value, clip_value))
