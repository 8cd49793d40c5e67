"""Tensor construction from Python data and the few Tensor conveniences that
are formatting rather than computation (repr)."""
import builtins

import numpy as np

from . import _C

_NP_TO_TP = {
    np.dtype(np.bool_): _C.dtype.bool,
    np.dtype(np.uint8): _C.dtype.uint8,
    np.dtype(np.int8): _C.dtype.int8,
    np.dtype(np.int16): _C.dtype.int16,
    np.dtype(np.int32): _C.dtype.int32,
    np.dtype(np.int64): _C.dtype.int64,
    np.dtype(np.float16): _C.dtype.float16,
    np.dtype(np.float32): _C.dtype.float32,
    np.dtype(np.float64): _C.dtype.float64,
}
_TP_TO_NP = {v: k for k, v in _NP_TO_TP.items()}


def _as_array(data):
    """NumPy array for `data` and whether it holds Python floats that take the default float dtype
    (PyTorch's defaults for Python values: floats -> default dtype, ints -> int64, bools -> bool;
    NumPy arrays keep their dtype). Python floats stay float64 here: they are rounded once, by the
    final conversion to the requested dtype, so float64 tensors keep all 64 bits."""
    if isinstance(data, np.ndarray):
        arr, python_floats = data, False
    else:
        if isinstance(data, (list, tuple)):
            data = [x.detach().float().numpy() if isinstance(x, _C.Tensor) and x.dtype == _C.dtype.bfloat16
                    else (x.detach().numpy() if isinstance(x, _C.Tensor) else x) for x in data]
        arr = np.asarray(data)
        python_floats = arr.dtype.kind == "f"
        if python_floats:
            arr = arr.astype(np.float64)
        elif arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
    if arr.dtype not in _NP_TO_TP:
        raise TypeError(f"tensor: cannot build a tensor from {type(data).__name__} with NumPy dtype {arr.dtype}")
    return arr, python_floats


def tensor(data, dtype=None, requires_grad=False, device=None):
    """A new tensor holding a copy of `data` (a number, nested lists, a NumPy array or a Tensor).

    Like torch.tensor: Python floats become the default dtype (float32), ints int64, bools bool.
    """
    if device is not None and str(device) != "cpu":
        raise ValueError(f"tensor: only the 'cpu' device exists (got {device!r})")
    if isinstance(data, _C.Tensor):
        t = data.detach().clone()
    else:
        arr, python_floats = _as_array(data)
        t = _C.from_numpy(np.array(arr, copy=True, order="C"))
        if python_floats and dtype is None:
            dtype = _C.get_default_dtype()
    if dtype is not None and t.dtype != dtype:
        t = t.to(dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _repr(self):
    from ._tensor_str import tensor_repr  # PyTorch's layout (my own formatter)
    return tensor_repr(self)


def _iter(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in builtins.range(len(self)))


def _install_tensor_extras():
    _C.Tensor.__repr__ = _repr
    _C.Tensor.__str__ = _repr
    _C.Tensor.__iter__ = _iter
