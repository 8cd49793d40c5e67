"""tp.save / tp.load: pickle-based checkpoints of tensors inside nested containers.

Each tensor is pickled as (dtype name, shape, raw C-order bytes, requires_grad)
and rebuilt as a fresh contiguous tensor: a view is saved as its own data, and
tensors never alias each other after loading. nn.Parameter round-trips as
Parameter. The same reducers make pickle.dumps(tensor) and copy.deepcopy work.

tp.load defaults to weights_only=True: only tensors, dtypes and plain Python
containers/values can be rebuilt, so loading a file never runs arbitrary code.
"""
import copyreg
import os
import pickle

from ._lazy_numpy import np  # save/load go through NumPy arrays (imported on first use)

from . import _C

__all__ = ["save", "load"]

_HEADER = ("tensorplay.save", 1)
_PROTOCOL = 4

# How each dtype's elements are stored as bytes. bfloat16 has no NumPy dtype:
# its 16-bit patterns are stored as uint16.
# (Names, so that NumPy is imported by a save or a load, not by `import tensorplay`.)
_STORAGE_NP = {
    "bool": "bool_", "uint8": "uint8", "int8": "int8", "int16": "int16", "int32": "int32",
    "int64": "int64", "float16": "float16", "bfloat16": "uint16", "float32": "float32",
    "float64": "float64",
}
# The dtype a narrow tensor is widened to when numpy()/from_numpy do not handle it directly.
_WIDE = {"uint8": "int64", "int8": "int64", "int16": "int64", "int32": "int64", "float16": "float32"}


def _dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _tp_dtype(name):
    dt = getattr(_C.dtype, name, None)
    if dt is None:
        raise RuntimeError(f"tp.load: this build of tensorplay has no dtype '{name}'")
    return dt


# ---------------------------------------------------------------- tensor <-> bytes
def _to_array(t):
    """The tensor's elements as a C-contiguous NumPy array of its storage dtype."""
    name = _dtype_name(t.dtype)
    t = t.detach()
    if name == "bfloat16":
        # bfloat16 -> float32 is exact; a float32's upper 16 bits are the bfloat16 pattern.
        f32 = np.ascontiguousarray(t.to(_C.dtype.float32).numpy())
        return (f32.view(np.uint32) >> 16).astype(np.uint16)
    try:
        arr = t.numpy()
    except (TypeError, RuntimeError, ValueError):
        arr = t.to(_tp_dtype(_WIDE[name])).numpy()
    return np.ascontiguousarray(arr, dtype=getattr(np, _STORAGE_NP[name]))


def _from_array(arr, name):
    if name == "bfloat16":
        f32 = (arr.astype(np.uint32) << 16).view(np.float32)
        return _C.from_numpy(f32).to(_tp_dtype("bfloat16"))
    target = _tp_dtype(name)
    try:
        t = _C.from_numpy(arr)
        if t.dtype == target:
            return t
    except (TypeError, RuntimeError, ValueError):
        pass
    return _C.from_numpy(arr.astype(getattr(np, _STORAGE_NP[_WIDE[name]]))).to(target)


def _payload(t):
    name = _dtype_name(t.dtype)
    if name not in _STORAGE_NP:
        raise TypeError(f"tp.save: cannot serialize a tensor of dtype {t.dtype}")
    return (name, tuple(t.shape), _to_array(t).tobytes(), bool(t.requires_grad))


def _rebuild_tensor(dtype_name, shape, data, requires_grad):
    if dtype_name not in _STORAGE_NP:
        raise RuntimeError(f"tp.load: unknown dtype '{dtype_name}' in file")
    arr = np.frombuffer(data, dtype=getattr(np, _STORAGE_NP[dtype_name])).reshape(shape).copy()
    t = _from_array(arr, dtype_name)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(dtype_name, shape, data, requires_grad):
    from .nn.parameter import Parameter
    return Parameter(_rebuild_tensor(dtype_name, shape, data, False), requires_grad)


def _reduce_tensor(t, protocol=None):
    return _rebuild_tensor, _payload(t)


def _reduce_parameter(p):
    return _rebuild_parameter, _payload(p)


def _rebuild_dtype(name):
    return _tp_dtype(name)


def _reduce_dtype(d):
    return _rebuild_dtype, (_dtype_name(d),)


_C.Tensor.__reduce_ex__ = _reduce_tensor
copyreg.pickle(_C.dtype, _reduce_dtype)


# ---------------------------------------------------------------- files
class _WeightsOnlyUnpickler(pickle.Unpickler):
    """Rebuilds only tensors, dtypes and plain containers (no arbitrary callables)."""

    _ALLOWED = {
        (__name__, "_rebuild_tensor"): _rebuild_tensor,
        (__name__, "_rebuild_parameter"): _rebuild_parameter,
        (__name__, "_rebuild_dtype"): _rebuild_dtype,
        ("collections", "OrderedDict"): __import__("collections").OrderedDict,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("builtins", "slice"): slice,
        ("builtins", "range"): range,
        ("builtins", "complex"): complex,
    }

    def find_class(self, module, name):
        fn = self._ALLOWED.get((module, name))
        if fn is None:
            raise pickle.UnpicklingError(
                f"tp.load(weights_only=True) refuses to rebuild {module}.{name}; pass weights_only=False "
                "only for files from a trusted source")
        return fn


def _open(f, mode):
    if isinstance(f, (str, os.PathLike)):
        return open(f, mode), True
    return f, False


def save(obj, f, pickle_protocol=_PROTOCOL):
    """Writes obj (tensors, Parameters, and dicts/lists/tuples/numbers/strings of them) to a path or file object."""
    fh, owned = _open(f, "wb")
    try:
        pickler = pickle.Pickler(fh, protocol=max(pickle_protocol, 2))
        pickler.dump(_HEADER)
        pickler.dump(obj)
    finally:
        if owned:
            fh.close()


def load(f, map_location=None, weights_only=True):
    """Reads an object written by tp.save from a path or file object (map_location: only 'cpu'/None)."""
    if map_location not in (None, "cpu") and str(map_location) != "cpu":
        raise ValueError(f"tp.load: only the cpu device exists today (map_location={map_location!r})")
    fh, owned = _open(f, "rb")
    try:
        unpickler_cls = _WeightsOnlyUnpickler if weights_only else pickle.Unpickler
        unpickler = unpickler_cls(fh)
        try:
            header = unpickler.load()
        except Exception as e:  # noqa: BLE001  (any garbage at the start means: not our format)
            raise RuntimeError(f"tp.load: not a tensorplay checkpoint ({e})") from None
        if not (isinstance(header, tuple) and len(header) == 2 and header[0] == _HEADER[0]):
            raise RuntimeError("tp.load: not a tensorplay checkpoint (missing header)")
        if header[1] > _HEADER[1]:
            raise RuntimeError(f"tp.load: file format version {header[1]} is newer than this tensorplay "
                               f"supports ({_HEADER[1]})")
        return unpickler.load()
    finally:
        if owned:
            fh.close()

