"""Tensor construction from Python data and the few Tensor conveniences that
are formatting rather than computation (repr)."""
import builtins
import functools

from . import _C
from ._lazy_numpy import is_ndarray, is_numpy_value, np


@functools.lru_cache(maxsize=None)
def _np_to_tp():
    """NumPy dtype -> tp dtype (built on first use: it imports NumPy)."""
    return {
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


def _leaf_dtype(x):
    """The dtype one element contributes to PyTorch's inference: Python floats the default dtype,
    ints int64, bools bool; NumPy scalars/arrays and tensors their own dtype. None: not a number."""
    if isinstance(x, bool):
        return _C.dtype.bool
    if isinstance(x, _C.Tensor):
        return x.dtype
    if is_numpy_value(x):  # np.bool_ included
        return _np_to_tp().get(x.dtype)
    if isinstance(x, (int, _C.SymInt)):  # a SymInt (dynamic shapes) becomes its value
        return _C.dtype.int64
    if isinstance(x, float):
        return _C.get_default_dtype()
    return None


def _infer_dtype(data):
    """The promotion of every leaf's dtype (torch.tensor's rule), or None when a leaf is not a number."""
    result, stack = None, [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
            continue
        d = _leaf_dtype(x)
        if d is None:
            return None
        result = d if result is None else _C.promote_types(result, d)
    return _C.get_default_dtype() if result is None else result  # no leaves ([]): the default dtype


def _plain_sizes(data):
    """Symbolic sizes (tp.SymInt, while a dynamic-shape capture runs) as their values: a tensor
    made of sizes is data, so the capture specializes them."""
    if isinstance(data, _C.SymInt):
        return int(data)
    if isinstance(data, (list, tuple)) and any(isinstance(x, (_C.SymInt, list, tuple)) for x in data):
        return type(data)(_plain_sizes(x) for x in data) if isinstance(data, list) else tuple(_plain_sizes(x) for x in data)
    return data


def _as_array(data):
    """NumPy array for `data` and the dtype PyTorch infers for it (None for a NumPy array, which
    keeps its own). Floating values stay float64 here (exact for every float leaf): they are
    rounded once, by the final conversion to the requested dtype, so float64 tensors keep all 64 bits."""
    if is_ndarray(data):
        arr, inferred = data, None
    else:
        inferred = _infer_dtype(data)
        if isinstance(data, (list, tuple)):
            data = [x.detach().float().numpy() if isinstance(x, _C.Tensor) and x.dtype == _C.dtype.bfloat16
                    else (x.detach().numpy() if isinstance(x, _C.Tensor) else x) for x in data]
        data = _plain_sizes(data)
        arr = np.asarray(data)
        huge = _has_huge_int(data) if arr.dtype in (np.uint64, object) else None
        if huge is not None:
            # NumPy holds ints in [2**63, 2**64) as uint64 (which the int64 cast below wrapped
            # silently: tp.tensor(2**63) gave -2**63) and larger ones as objects ("NumPy dtype
            # object"); no tensorplay dtype holds them, as in PyTorch.
            raise _C.TensorValueError(f"tensor: integer value {huge} is out of range for int64 "
                                        "(-2**63 .. 2**63 - 1); pass it as a float to get a floating tensor")
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float64)
        elif arr.dtype.kind in "iu" and arr.dtype != np.uint8:
            arr = arr.astype(np.int64)
    if arr.dtype not in _np_to_tp():
        raise TypeError(f"tensor: cannot build a tensor from {type(data).__name__} with NumPy dtype {arr.dtype}")
    return arr, inferred


def _check_fits(arr, dtype):
    """PyTorch's check of Python numbers converted to an integer dtype (c10::overflows):
    tp.tensor([300], dtype=tp.uint8) wrapped to 44 silently; PyTorch raises. Floats must be
    finite and within [lowest, max]; ints within [min, max], for unsigned types also -max .. -1
    (which wrap). A NumPy array keeps NumPy's casting, as in PyTorch."""
    if dtype == _C.dtype.bool or not arr.size or arr.dtype.kind not in "fiu" or dtype.is_floating_point:
        return
    info = np.iinfo({_C.dtype.uint8: np.uint8, _C.dtype.int8: np.int8, _C.dtype.int16: np.int16,
                     _C.dtype.int32: np.int32, _C.dtype.int64: np.int64}[dtype])
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr < info.min) | (arr > float(info.max))
        if dtype == _C.dtype.int64:
            bad |= arr >= 2.0 ** 63
    elif info.min == 0:
        bad = (arr > info.max) | (arr < -int(info.max))
    else:
        bad = (arr < info.min) | (arr > info.max)
    if bad.any():
        v = arr[bad].flat[0]
        raise _C.TensorValueError(f"tensor: value {v.item()!r} cannot be converted to type {str(dtype).split('.')[-1]} "
                                  "without overflow")


def _has_huge_int(data):
    """The first Python int leaf of `data` outside int64's range, else None."""
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        elif isinstance(x, int) and not isinstance(x, bool) and not -2**63 <= x < 2**63:
            return x
    return None


def _symbolic_anchor(data):
    """The value input of the first SymInt in data (new_full's template)."""
    return next(_C._symint_value(x) for x in data if isinstance(x, _C.SymInt))


def _symbolic_ints(data):
    """tp.tensor(pos) or tp.tensor([pos, 3]) while a compiled function is captured with
    its int argument pos symbolic (automatic dynamic ints): built from the value input
    of pos, so the version serves every pos (index_copy_(1, tp.tensor([pos]), k)).
    None for anything else (then the data is read as numbers: a SymInt specializes)."""
    if isinstance(data, _C.SymInt):
        v = _C._symint_value(data)
        return None if v is None else v + 0  # a tensor of its own, not the (wrapped) input
    if not isinstance(data, (list, tuple)) or not data or not any(isinstance(x, _C.SymInt) for x in data):
        return None
    parts = []
    for x in data:
        if isinstance(x, _C.SymInt):
            v = _C._symint_value(x)
            if v is None:
                return None
            parts.append(v + 0)
        elif isinstance(x, int) and not isinstance(x, bool):
            parts.append(_C.Tensor.new_full(parts[0] if parts else _symbolic_anchor(data), [], x))
        else:
            return None
    from . import stack  # late: the package's functions are bound after this module
    return stack(parts)


def tensor(data, dtype=None, *, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of `data` (a number, nested lists, a NumPy array or a Tensor).

    Like torch.tensor: Python floats become the default dtype (float32), ints int64, bools bool,
    NumPy scalars and tensors inside lists keep their dtype (promoted together).
    """
    _C._check_target_device(device, "tensor")  # a GPU is accepted: the result moves there at the end
    _C._check_pin_memory(pin_memory, "tensor")
    if isinstance(data, _C.Tensor):
        t = data.detach().clone()
    elif (t := _symbolic_ints(data)) is not None:
        if dtype is None:
            dtype = _C.dtype.int64
    else:
        arr, inferred = _as_array(data)
        if dtype is not None and not is_ndarray(data):
            _check_fits(arr, dtype)
        t = _C.from_numpy(np.array(arr, copy=True, order="C"))
        if dtype is None:
            dtype = inferred
    if dtype is not None and t.dtype != dtype:
        t = t.to(dtype)
    if device is None and _C._default_cuda_device() is not None:  # tp.set_default_device("cuda")
        device = f"cuda:{_C._default_cuda_device()}"
    t = _C._to_target_device(t, device, "tensor")  # built on the host; moved to a GPU when asked
    if requires_grad:
        t.requires_grad_(True)
    return t


def _repr(self):
    from ._tensor_str import tensor_repr  # PyTorch's layout (my own formatter)
    return tensor_repr(self)


def _format(self, spec):
    # A 0-d tensor formats as its number (f"{loss:.4f}", f"{loss.item():.4f}":
    # inside a capture item() is a 0-d tensor), as in PyTorch.
    if spec and self.dim() == 0:
        if _C._is_tracing():
            from ._tensor_str import _values  # the capture's values (host, float32 for halves)
            v = _values(self).item()
        else:
            v = self.item()
        return format(v, spec)
    return object.__format__(self, spec)


def _round(self, ndigits=None):
    # round(loss.item(), 4) inside a compiled function: item() is a 0-d tensor
    # there, a float in eager. float() makes the value a data gate (a result
    # computed from the rounded number stays right at every call).
    if _C._is_capture_item(self):
        return builtins.round(float(self), ndigits)
    raise TypeError("type Tensor doesn't define __round__ method")


def _iter(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in builtins.range(len(self)))


def _install_tensor_extras():
    _C.Tensor.__repr__ = _repr
    _C.Tensor.__str__ = _repr
    _C.Tensor.__format__ = _format
    _C.Tensor.__round__ = _round
    _C.Tensor.__iter__ = _iter
