"""tp.autograd: reverse-mode differentiation over the C++ engine.

backward / grad run the recorded graph; Function defines custom operations;
gradcheck / gradgradcheck verify derivative formulas numerically.
"""
from .. import _C
from .._grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled  # noqa: F401
from . import graph  # noqa: F401
from .anomaly_mode import (  # noqa: F401
    detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly,
)
from .function import Function, FunctionCtx, once_differentiable  # noqa: F401
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401

Tensor = _C.Tensor


def _as_list(x, what):
    if x is None:
        return []
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return list(x)
    raise TypeError(f"{what}: expected a Tensor or a sequence of Tensors, got {type(x).__name__}")


def _grads_for(roots, grad_tensors, what):
    grads = _as_list(grad_tensors, what)
    if not grads:
        return [None] * len(roots)
    if len(grads) != len(roots):
        raise ValueError(f"{what}: got {len(grads)} gradients for {len(roots)} tensors")
    return grads


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates d(tensors)/d(leaf) into each leaf's .grad (only into
    `inputs`' .grad when given)."""
    roots = _as_list(tensors, "backward")
    grads = _grads_for(roots, grad_tensors, "backward")
    keep = create_graph if retain_graph is None else retain_graph
    targets = _as_list(inputs, "backward")
    _C._backward(roots, grads, bool(keep), bool(create_graph), targets)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         materialize_grads=False):
    """The gradients of `outputs` w.r.t. `inputs` (a tuple, one per input;
    None for an unused input when allow_unused=True). .grad is not touched."""
    roots = _as_list(outputs, "grad")
    ins = _as_list(inputs, "grad")
    grads = _grads_for(roots, grad_outputs, "grad")
    keep = create_graph if retain_graph is None else retain_graph
    allow = bool(allow_unused) or materialize_grads
    result = _C._grad(roots, ins, grads, bool(keep), allow, bool(create_graph))
    if materialize_grads:
        from .. import zeros
        result = [zeros(tuple(x.shape), dtype=x.dtype) if g is None else g for x, g in zip(ins, result)]
    return tuple(result)


from . import functional  # noqa: E402,F401  (after grad: functional's helpers call it)

from .variable import Variable, is_tensor_like  # noqa: F401,E402


def __getattr__(name):
    # tp.autograd.profiler (the older spelling of tp.profiler) is imported on first use.
    if name == "profiler":
        import importlib
        return importlib.import_module(".profiler", __name__)
    raise AttributeError(f"module 'tensorplay.autograd' has no attribute {name!r}")
