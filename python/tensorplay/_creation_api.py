"""tp.asarray, tp.frombuffer, tp.set_default_device / tp.get_default_device.

frombuffer wraps the memory of a Python buffer (bytearray, memoryview, array.array, mmap, ...)
without a copy, through NumPy's view of it; asarray shares memory with a tensor, NumPy array,
DLPack capsule or buffer when dtype and device allow (copy=False insists, copy=True never
shares), otherwise builds like tp.tensor. The default device is kept by the binding
(`_C._set_default_device`): the generated factories and tp.tensor build there when no device=
is given."""
import sys
import warnings

from . import _C
from ._C import Tensor


def _tp():
    return sys.modules[__package__]


_NP_NAMES = {"bool": "bool_", "uint8": "uint8", "int8": "int8", "int16": "int16", "int32": "int32",
             "int64": "int64", "float16": "float16", "bfloat16": "int16", "float32": "float32",
             "float64": "float64"}


def _dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _wrap_np(arr, dtype):
    """A tensor over a writable NumPy array's memory, as `dtype` (bfloat16 through an int16 view)."""
    tp = _tp()
    t = tp.from_numpy(arr)
    return t.view(tp.bfloat16) if dtype == tp.bfloat16 else t


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over `buffer`'s memory (no copy): `count` elements of `dtype` (-1: all that
    follow) starting `offset` bytes in. A read-only buffer (bytes) is copied, with a warning,
    since a tensor here is always writable."""
    import numpy as np
    tp = _tp()
    if not isinstance(dtype, tp.dtype):
        raise TypeError(f"frombuffer: dtype must be a tensorplay dtype, got {type(dtype).__name__}")
    try:
        mv = memoryview(buffer)
    except TypeError:
        raise TypeError(f"frombuffer: object of type {type(buffer).__name__} does not implement Python's buffer "
                        f"protocol") from None
    length = mv.nbytes
    size = dtype.itemsize
    if length == 0 or count == 0:
        raise ValueError(f"frombuffer: both the buffer length ({length} bytes) and count ({count}) must be nonzero")
    if offset < 0 or offset >= length:
        raise ValueError(f"frombuffer: offset ({offset} bytes) must be non-negative and less than the buffer "
                         f"length ({length} bytes)")
    if count < 0:
        if (length - offset) % size:
            raise ValueError(f"frombuffer: the buffer length ({length} bytes) after offset ({offset} bytes) is not a "
                             f"multiple of the size of {_dtype_name(dtype)} ({size} bytes)")
        count = (length - offset) // size
    elif offset + count * size > length:
        raise ValueError(f"frombuffer: {count} elements of {_dtype_name(dtype)} ({count * size} bytes) after offset "
                         f"({offset} bytes) do not fit the buffer ({length} bytes)")
    flat = mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv
    arr = np.frombuffer(flat, dtype=getattr(np, _NP_NAMES[_dtype_name(dtype)]), count=count, offset=offset)
    if not arr.flags.writeable:
        warnings.warn("frombuffer: the buffer is read-only, so the tensor is a copy of it (a tensor is always "
                      "writable); pass a bytearray or another writable buffer to share its memory", UserWarning,
                      stacklevel=2)
        arr = arr.copy()
    t = _wrap_np(arr, dtype)
    return t.requires_grad_(True) if requires_grad else t


def _is_buffer(obj):
    try:
        memoryview(obj)
        return True
    except TypeError:
        return False


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """obj as a tensor, sharing its memory when it can: a tensor (returned as is when dtype and
    device match), a NumPy array, an object with __dlpack__, or a buffer (read as `dtype`, by
    default the default float dtype, like frombuffer); anything else (numbers, nested sequences)
    is built by tp.tensor. copy=True always copies; copy=False raises where sharing is impossible."""
    tp = _tp()
    _C._check_target_device(device, "asarray")
    if dtype is not None and not isinstance(dtype, tp.dtype):
        raise TypeError(f"asarray: dtype must be a tensorplay dtype, got {type(dtype).__name__}")
    import numpy as np
    t = None
    if isinstance(obj, Tensor):
        t = obj
    elif isinstance(obj, np.ndarray):
        if obj.dtype.name in _NP_NAMES and obj.dtype.name != "bfloat16" and obj.flags.writeable:
            t = tp.from_numpy(obj)
        elif copy is False:
            raise ValueError(f"asarray: cannot share the memory of a NumPy array of dtype {obj.dtype}"
                             f"{'' if obj.flags.writeable else ' (read-only)'}; copy=False forbids a copy")
        else:
            t = tp.tensor(obj, dtype=dtype)
            copy = False  # already a copy
    elif hasattr(obj, "__dlpack__"):
        t = tp.from_dlpack(obj)
    elif _is_buffer(obj) and not isinstance(obj, (list, tuple)):
        t = frombuffer(obj, dtype=dtype if dtype is not None else tp.get_default_dtype())
    else:
        if copy is False:
            raise ValueError(f"asarray: cannot share the memory of a {type(obj).__name__} (only tensors, NumPy "
                             f"arrays, DLPack objects and buffers can be aliased); copy=False forbids a copy")
        t = tp.tensor(obj, dtype=dtype, device=device)
        return t.requires_grad_(True) if requires_grad else t
    if dtype is not None and t.dtype != dtype:
        if copy is False:
            raise ValueError(f"asarray: cannot share memory of dtype {_dtype_name(t.dtype)} as dtype "
                             f"{_dtype_name(dtype)}; copy=False forbids a copy")
        t = t.to(dtype)
        copy = False
    target = device if device is not None else (get_default_device() if not isinstance(obj, Tensor) else None)
    if target is not None and tp.device(target) != t.device:
        if copy is False:
            raise ValueError(f"asarray: cannot share memory on {t.device} as {tp.device(target)}; copy=False forbids "
                             f"a copy")
        t = t.to(target)
        copy = False
    if copy:
        t = t.clone()
    if requires_grad and not t.requires_grad:
        t = (t.detach() if t is obj else t).requires_grad_(True)  # the caller's tensor keeps its flag
    return t


def set_default_device(device):
    """The device factories (tp.zeros, tp.tensor, ...) build on when no device= is given;
    None or "cpu" restore the CPU. A device that is not available raises here."""
    _C._set_default_device(device)


def get_default_device():
    """The device set by set_default_device (tp.device('cpu') by default)."""
    tp = _tp()
    index = _C._default_cuda_device()
    return tp.device("cpu") if index is None else tp.device("cuda", index)


_FUNCTIONS = (asarray, frombuffer, set_default_device, get_default_device)


def install():
    tp = _tp()
    for fn in _FUNCTIONS:
        if not hasattr(tp, fn.__name__):
            setattr(tp, fn.__name__, fn)
