"""tp.autograd: backward and grad over the C++ engine."""
from . import _C


def _as_list(x):
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def backward(tensors, grad_tensors=None, retain_graph=False):
    roots = _as_list(tensors)
    grads = _as_list(grad_tensors) or [None] * len(roots)
    _C._backward(roots, grads, bool(retain_graph))


def grad(outputs, inputs, grad_outputs=None, retain_graph=False, allow_unused=False):
    roots = _as_list(outputs)
    ins = _as_list(inputs)
    grads = _as_list(grad_outputs) or [None] * len(roots)
    return tuple(_C._grad(roots, ins, grads, bool(retain_graph), bool(allow_unused)))
