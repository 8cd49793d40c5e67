"""Shared helpers: broadcasting parameters, probs <-> logits, lazy properties."""
import numbers

import tensorplay as tp


def broadcast_all(*values, owner="distribution"):
    """Broadcast tensors and Python numbers to one shape; numbers take the
    dtype of the tensor arguments (or the default dtype) so a float64 loc
    with a scalar scale stays float64.  `owner` names the distribution in
    error messages."""
    tensors = [v for v in values if tp.is_tensor(v)]
    for v in values:
        if not tp.is_tensor(v) and not isinstance(v, numbers.Number):
            raise TypeError(f"{owner}: expected tensors or numbers, got {type(v).__name__}")
    dtype = tensors[0].dtype if tensors else tp.get_default_dtype()
    if not tp.is_floating_point(tp.empty(0, dtype=dtype)):
        dtype = tp.get_default_dtype()
    vals = [v if tp.is_tensor(v) else tp.tensor(float(v), dtype=dtype) for v in values]
    try:
        return tuple(tp.broadcast_tensors(*vals))
    except RuntimeError as e:
        shapes = ", ".join(str(tuple(v.shape)) for v in vals)
        raise ValueError(f"{owner}: the arguments' shapes {shapes} do not broadcast to one shape") from e


def _eps(t):
    return tp.finfo(t.dtype).eps


def clamp_probs(probs):
    eps = _eps(probs)
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    return tp.sigmoid(logits) if is_binary else tp.softmax(logits, -1)


def probs_to_logits(probs, is_binary=False):
    p = clamp_probs(probs)
    return tp.log(p) - tp.log1p(-p) if is_binary else tp.log(p)


class lazy_property:
    """Computes an attribute on first access and stores it on the instance,
    so `probs` and `logits` are derived from each other only when asked."""

    def __init__(self, fn):
        self.wrapped = fn
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with tp.enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


def sum_rightmost(value, dim):
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1) if dim > 0 else value


def tril_matrix_to_vec(mat):
    n = mat.shape[-1]
    rows, cols = [], []
    for i in range(n):
        for j in range(i + 1):
            rows.append(i)
            cols.append(j)
    return mat[..., rows, cols]
