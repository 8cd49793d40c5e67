"""tp.save / tp.load: pickle-based checkpoints of tensors inside nested containers.

File format 2 (tp.save) keeps storage sharing, as PyTorch's files do: CPU tensors of one saved
object that view the same memory (a tensor and its slice, a parameter and a view of it, tied
weights) are written as references (storage, dtype, offset, shape, strides) to one copy of that
memory, and tp.load rebuilds them as views of one new storage, so a write through one is seen by
the others and offsets and strides are what they were. A storage is written from its start to the
end of the last element any saved tensor reaches (the storage offset is kept, so a small slice of
a large tensor writes the prefix too, as in PyTorch). Storages are keyed by address *and* dtype:
two views of one memory under different dtypes (`x.view(tp.int32)`) are saved as two copies.
The file is the header, then a dict of the storages' bytes, then the object's pickle, whose
tensors refer to the storages by persistent id.

Format 1 files (each tensor as (dtype name, shape, raw C-order bytes, requires_grad), rebuilt as a
fresh contiguous tensor) still load. That per-tensor form is also what pickle.dumps(tensor) and
copy.deepcopy use, and what tp.save writes for tensors that are not plain CPU memory (a CUDA
tensor, an empty one).

tp.load defaults to weights_only=True: only tensors, dtypes and plain Python
containers/values can be rebuilt, so loading a file never runs arbitrary code.
"""
import copyreg
import os
import pickle

from ._lazy_numpy import np  # save/load go through NumPy arrays (imported on first use)

from . import _C

__all__ = ["save", "load"]

_HEADER = ("tensorplay.save", 2)
_OLDEST_SHARED = 2  # the first format version with a storage table
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


def _is_dense_permuted(t):
    """True when t's elements fill a block of memory exactly, in some order of its dimensions (a
    transpose or permute of a contiguous tensor): its layout can travel with its bytes."""
    dims = sorted((st, n) for n, st in zip(t.shape, t.stride()) if n != 1)
    expected = 1
    for st, n in dims:
        if st != expected:
            return False
        expected *= n
    return True


def _reduce_tensor(t, protocol=None):
    # A non-contiguous tensor that is a permutation of a dense block (a transposed batch, an HWC
    # image permuted to CHW) keeps its strides, as in PyTorch; other views (slices with gaps, expanded
    # dims) travel as their elements, contiguous: the same values, dtype and shape.
    if (t.device.type == "cpu" and t.numel() > 1 and not t.is_contiguous() and _is_dense_permuted(t)
            and _dtype_name(t.dtype) in _STORAGE_NP):
        flat = t.detach().as_strided((t.numel(),), (1,), t.storage_offset())
        return _rebuild_tensor_strided, (_dtype_name(t.dtype), tuple(t.shape), tuple(t.stride()),
                                         _to_array(flat).tobytes(), bool(t.requires_grad))
    return _rebuild_tensor, _payload(t)


def _reduce_tensor_out_of_band(t):
    """The DataLoader workers' reduction (pickle protocol 5 with a buffer_callback): the elements
    travel as a PickleBuffer over the tensor's own memory (no copy for a contiguous tensor whose
    dtype NumPy has), and are rebuilt over the buffer the reader hands back (no copy either).
    Strides are kept as `_reduce_tensor` keeps them."""
    name = _dtype_name(t.dtype)
    if t.device.type != "cpu" or t.numel() == 0 or name not in _STORAGE_NP:
        return _reduce_tensor(t)
    shape, stride, requires_grad = tuple(t.shape), None, bool(t.requires_grad)
    if not t.is_contiguous() and _is_dense_permuted(t):
        stride = tuple(t.stride())
        t = t.detach().as_strided((t.numel(),), (1,), t.storage_offset())
    arr = _to_array(t).reshape(-1)
    return _rebuild_tensor_out_of_band, (name, shape, stride, pickle.PickleBuffer(arr), requires_grad)


def _rebuild_tensor_out_of_band(dtype_name, shape, stride, buf, requires_grad):
    arr = np.frombuffer(buf, dtype=getattr(np, _STORAGE_NP[dtype_name]))
    if not arr.flags.writeable:
        arr = arr.copy()  # pickled in band (bytes): the tensor needs memory of its own
    flat = _from_array(arr, dtype_name)
    if stride is None:
        t = flat.reshape(tuple(shape))
    else:
        t = flat.as_strided(tuple(shape), tuple(stride), 0)
    t = t.detach()
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_tensor_strided(dtype_name, shape, stride, data, requires_grad):
    flat = _rebuild_tensor(dtype_name, (len(data) // np.dtype(_STORAGE_NP[dtype_name]).itemsize,), data, False)
    need = sum((n - 1) * st for n, st in zip(shape, stride)) + 1
    if any(n < 0 for n in shape) or any(st < 0 for st in stride) or need > flat.numel():
        raise RuntimeError(f"tp.load: a tensor of shape {tuple(shape)} and strides {tuple(stride)} does not fit "
                           f"its {flat.numel()} elements (damaged data)")
    t = flat.as_strided(tuple(shape), tuple(stride), 0).detach()
    if requires_grad:
        t.requires_grad_(True)
    return t


def _reduce_parameter(p):
    return _rebuild_parameter, _payload(p)


def _rebuild_dtype(name):
    return _tp_dtype(name)


def _reduce_dtype(d):
    return _rebuild_dtype, (_dtype_name(d),)


def _rebuild_device(name):
    return _C.device(name)


def _reduce_device(d):
    return _rebuild_device, (str(d),)


_C.Tensor.__reduce_ex__ = _reduce_tensor
copyreg.pickle(_C.dtype, _reduce_dtype)
# A device in a saved config or checkpoint (`{"device": tp.device("cpu")}`) pickled
# as "cannot pickle 'device' object"; torch.device pickles, weights_only included.
copyreg.pickle(_C.device, _reduce_device)


# ---------------------------------------------------------------- shared storages (format 2)
class _StorageRef:
    """Stands for one saved storage inside the object's pickle (pickled as a persistent id)."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key


def _span(t):
    """One past the last storage element (in t's dtype) that t reaches."""
    return t.storage_offset() + sum((n - 1) * st for n, st in zip(t.shape, t.stride())) + 1


class _SharingPickler(pickle.Pickler):
    """Pickles CPU tensors as references into a table of storages collected while pickling."""

    def __init__(self, fh, protocol):
        super().__init__(fh, protocol=protocol)
        self.storages = {}  # (address, dtype name) -> [index, a tensor on it, elements needed]

    def persistent_id(self, obj):
        if type(obj) is _StorageRef:
            return ("storage", obj.key)
        return None

    def reducer_override(self, obj):
        if not isinstance(obj, _C.Tensor):
            return NotImplemented
        from .nn.parameter import Parameter
        kind = type(obj)
        if kind is not _C.Tensor and kind is not Parameter:
            return NotImplemented  # a user's subclass keeps its own __reduce_ex__
        name = _dtype_name(obj.dtype)
        if (name not in _STORAGE_NP or obj.device.type != "cpu" or obj.numel() == 0
                or any(st < 0 for st in obj.stride())):
            return NotImplemented  # the per-tensor form
        base = obj.data_ptr() - obj.storage_offset() * obj.element_size()
        entry = self.storages.get((base, name))
        if entry is None:
            # The tensor is kept in the table so its memory (and so the address key) stays
            # taken until the save ends, even if the object made it on the fly.
            entry = self.storages[(base, name)] = [len(self.storages), obj, 0]
        entry[2] = max(entry[2], _span(obj))
        rebuild = _rebuild_parameter_v2 if kind is Parameter else _rebuild_tensor_v2
        return rebuild, (_StorageRef(entry[0]), name, obj.storage_offset(), tuple(obj.shape), tuple(obj.stride()),
                         bool(obj.requires_grad))

    def storage_table(self):
        table = {}
        for index, t, n in self.storages.values():
            flat = t.detach().as_strided((n,), (1,), 0)
            table[index] = (_dtype_name(t.dtype), _to_array(flat).tobytes())
        return table


def _rebuild_tensor_v2(storage, dtype_name, offset, shape, stride, requires_grad):
    if _dtype_name(storage.dtype) != dtype_name:
        raise RuntimeError(f"tp.load: a {dtype_name} tensor refers to a {storage.dtype} storage (damaged file)")
    need = offset + sum((n - 1) * st for n, st in zip(shape, stride)) + 1
    if any(n < 0 for n in shape) or any(st < 0 for st in stride) or offset < 0 or need > storage.numel():
        raise RuntimeError(f"tp.load: a tensor of shape {tuple(shape)} and strides {tuple(stride)} at offset "
                           f"{offset} does not fit its storage of {storage.numel()} elements (damaged file)")
    # detach(): a fresh leaf that shares the storage (not an autograd view of the loader's flat tensor).
    t = storage.as_strided(tuple(shape), tuple(stride), offset).detach()
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter_v2(storage, dtype_name, offset, shape, stride, requires_grad):
    from .nn.parameter import Parameter
    return Parameter(_rebuild_tensor_v2(storage, dtype_name, offset, shape, stride, False), requires_grad)


def _storage_from_table(entry):
    if not (isinstance(entry, tuple) and len(entry) == 2 and entry[0] in _STORAGE_NP
            and isinstance(entry[1], bytes)):
        raise RuntimeError("tp.load: damaged storage table")
    name, data = entry
    np_dtype = getattr(np, _STORAGE_NP[name])
    if len(data) % np.dtype(np_dtype).itemsize:
        raise RuntimeError("tp.load: damaged storage table (a storage's size is not a whole number of elements)")
    return _from_array(np.frombuffer(data, dtype=np_dtype).copy(), name)


# ---------------------------------------------------------------- files
class _WeightsOnlyUnpickler(pickle.Unpickler):
    """Rebuilds only tensors, dtypes and plain containers (no arbitrary callables)."""

    _ALLOWED = {
        (__name__, "_rebuild_tensor"): _rebuild_tensor,
        (__name__, "_rebuild_tensor_strided"): _rebuild_tensor_strided,
        (__name__, "_rebuild_parameter"): _rebuild_parameter,
        (__name__, "_rebuild_dtype"): _rebuild_dtype,
        (__name__, "_rebuild_device"): _rebuild_device,
        (__name__, "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        (__name__, "_rebuild_parameter_v2"): _rebuild_parameter_v2,
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


def save(obj, f, pickle_module=pickle, pickle_protocol=_PROTOCOL, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Writes obj (tensors, Parameters, and dicts/lists/tuples/numbers/strings of them) to a path or file
    object; tensors that share memory are loaded sharing it again (see the module docstring)."""
    import io
    body = io.BytesIO()
    # The object is pickled first: only then is each storage's extent known.
    pickler = _SharingPickler(body, protocol=max(pickle_protocol, 2))
    pickler.dump(obj)
    table = pickler.storage_table()
    fh, owned = _open(f, "wb")
    try:
        head = pickle.Pickler(fh, protocol=max(pickle_protocol, 2))
        head.dump(_HEADER)
        head.dump(table)
        fh.write(body.getbuffer())
    finally:
        if owned:
            fh.close()


class _StorageLoader:
    """persistent_load of format 2: ("storage", index) -> the storage's flat tensor, built once."""

    def __init__(self, table):
        self.table = table
        self.built = {}

    def __call__(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 2 and pid[0] == "storage" and pid[1] in self.table):
            raise pickle.UnpicklingError(f"tp.load: unknown persistent id {pid!r} (damaged file)")
        key = pid[1]
        if key not in self.built:
            self.built[key] = _storage_from_table(self.table[key])
        return self.built[key]


def _check_map_location(map_location):
    """Tensors load on the CPU. PyTorch's spellings of that are accepted: None, "cpu",
    tp.device("cpu"), a dict mapping locations to the CPU, or a function (the idiom
    `lambda storage, loc: storage`); before, a device object raised a TypeError from
    its __eq__ and the other forms a ValueError."""
    if callable(map_location) and not isinstance(map_location, (str, _C.device)):
        return
    targets = list(map_location.values()) if isinstance(map_location, dict) else [map_location]
    for m in targets:
        if m is None:
            continue
        if not isinstance(m, (str, _C.device)):
            raise TypeError(f"tp.load: map_location should be a string, a device, a dict or a function, "
                            f"got {type(m).__name__}")
        if str(m).split(":")[0] != "cpu":
            raise ValueError(f"tp.load: tensors load on the cpu device; move them with .to({str(m)!r}) after loading "
                             f"(map_location={map_location!r})")


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
    """Reads an object written by tp.save from a path or file object; tensors load on the CPU
    (map_location: PyTorch's forms of the CPU). mmap is accepted and changes nothing."""
    _check_map_location(map_location)
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
        if header[1] >= _OLDEST_SHARED:
            table = unpickler.load()
            if not isinstance(table, dict):
                raise RuntimeError("tp.load: damaged file (no storage table)")
            # The object was pickled by a pickler of its own, so it is read by an unpickler of its own
            # (memo indices start from zero again; clearing the old memo does not reset its count).
            unpickler = unpickler_cls(fh)
            # (The C Unpickler's persistent_load attribute; a class attribute would shadow it.)
            unpickler.persistent_load = _StorageLoader(table)
        return unpickler.load()
    finally:
        if owned:
            fh.close()

