"""The complex-number API on a framework without complex dtypes: conj / resolve_conj /
resolve_neg / conj_physical are the tensor itself, is_complex / is_conj / is_neg are False, and
Tensor.H / adjoint() are plain transposes (the conjugate transpose of a real tensor)."""
import sys

from ._C import Tensor


def _tp():
    return sys.modules[__package__]


def conj(input):
    """The conjugate; tensorplay has no complex dtypes, so the tensor itself (as PyTorch's view)."""
    return input


def _false(input):
    return False


def is_complex(input):
    return False


def _raise_H(self):
    raise RuntimeError(f"Tensor.H: expects a 2-D tensor (use mH for batches), got {self.dim()}-D")


def install():
    tp = _tp()
    for name in ("conj", "is_complex"):
        if not hasattr(tp, name):
            setattr(tp, name, globals()[name])
    tp.resolve_conj = conj
    tp.resolve_neg = conj
    tp.conj_physical = conj
    tp.is_conj = _false
    tp.is_neg = _false
    Tensor.conj = conj
    Tensor.resolve_conj = conj
    Tensor.resolve_neg = conj
    Tensor.conj_physical = conj
    Tensor.is_conj = _false
    Tensor.is_neg = _false
    Tensor.is_complex = _false
    Tensor.adjoint = lambda self: self.transpose(-2, -1)
    Tensor.H = property(lambda self: self.t() if self.dim() in (0, 2) else _raise_H(self))
