"""Tensor construction from Python data and the few Tensor conveniences that
are formatting rather than computation (repr)."""
import builtins

import numpy as np

from . import _C

_NP_TO_TP = {
    np.dtype(np.float32): _C.dtype.float32,
    np.dtype(np.float64): _C.dtype.float64,
    np.dtype(np.int64): _C.dtype.int64,
    np.dtype(np.bool_): _C.dtype.bool,
}
_TP_TO_NP = {v: k for k, v in _NP_TO_TP.items()}


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of `data` (a number, nested lists, a NumPy array or a Tensor).

    Like torch.tensor: Python floats become float32, ints int64, bools bool.
    """
    if isinstance(data, _C.Tensor):
        t = data.detach().clone()
        if dtype is not None:
            t = t.to(dtype)
    else:
        if isinstance(data, np.ndarray):
            arr = data
            if arr.dtype not in _NP_TO_TP:
                if arr.dtype.kind == "f":
                    arr = arr.astype(np.float32)
                elif arr.dtype.kind in "iu":
                    arr = arr.astype(np.int64)
                else:
                    raise TypeError(f"tensor: unsupported NumPy dtype {arr.dtype}")
        else:
            arr = np.asarray(data)
            if arr.dtype.kind == "f":
                arr = arr.astype(np.float32)
            elif arr.dtype.kind in "iu":
                arr = arr.astype(np.int64)
            elif arr.dtype.kind != "b":
                raise TypeError(f"tensor: cannot build a tensor from {type(data).__name__}")
        if dtype is not None:
            arr = arr.astype(_TP_TO_NP[dtype])
        t = _C.from_numpy(np.array(arr, copy=True, order="C"))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _repr(self):
    arr = self.detach().numpy() if self.requires_grad else self.numpy()
    body = np.array2string(arr, separator=", ", prefix="tensor(", threshold=1000)
    extras = []
    if self.dtype not in (_C.dtype.float32, _C.dtype.int64, _C.dtype.bool) or (self.numel() == 0):
        extras.append(f"dtype={self.dtype!r}")
    if self.grad_fn is not None:
        extras.append(f"grad_fn=<{self.grad_fn}>")
    elif self.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"


def _iter(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in builtins.range(len(self)))


def _install_tensor_extras():
    _C.Tensor.__repr__ = _repr
    _C.Tensor.__str__ = _repr
    _C.Tensor.__iter__ = _iter
