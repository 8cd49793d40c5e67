"""Tensor.untyped_storage() and Tensor.storage(): the memory behind a tensor,
as PyTorch code inspects it -- which tensors share memory
(`a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()`, as
checkpoint writers such as safetensors check), how many bytes it holds, and
element access through the typed view. A storage object keeps the memory
alive; it reads and writes the tensor's own memory (no copy).

Both are refused inside tp.compile: a captured tensor has no memory yet."""
import sys

from ._C import Tensor
from ._float_classify_api import same_width_int


def _tp():
    return sys.modules[__package__]


def _refuse_in_capture(what):
    tp = _tp()
    if tp._C._is_tracing():
        from .compiler import CaptureError
        raise CaptureError(f"Tensor.{what}() inside a compiled function (tp.compile) is not supported: a captured "
                           "tensor has no memory of its own yet; inspect storages outside the compiled function")


class _Storage:
    """What both storage kinds answer from the tensor they were taken from."""

    def __init__(self, owner: Tensor):
        self._owner = owner  # keeps the memory alive
        self._base, self._nbytes = owner._storage_info()

    def data_ptr(self) -> int:
        return self._base

    def nbytes(self) -> int:
        return self._nbytes

    @property
    def device(self):
        return self._owner.device

    @property
    def is_cuda(self) -> bool:
        return self._owner.is_cuda

    def __len__(self):
        return self.size()


class UntypedStorage(_Storage):
    """The bytes behind a tensor (every view of that memory gives an equal one)."""

    def size(self) -> int:
        return self._nbytes

    def element_size(self) -> int:
        return 1

    def _bytes(self):
        """The memory's bytes as a uint8 tensor (a copy for dtypes wider than a byte)."""
        return _byte_view(self._owner, self._nbytes)

    def tolist(self):
        return self._bytes().cpu().tolist()

    def __getitem__(self, i):
        return self._bytes()[i].item() if isinstance(i, int) else self._bytes()[i]

    def __eq__(self, other):
        return isinstance(other, UntypedStorage) and (self._base, self._nbytes) == (other._base, other._nbytes)

    def __hash__(self):
        return hash((self._base, self._nbytes))

    def __repr__(self):
        return f"tensorplay.UntypedStorage(nbytes={self._nbytes}, device={self.device}, data_ptr={self._base:#x})"


def _byte_view(t, nbytes):
    """The storage's bytes as a uint8 tensor (little-endian, as the machine
    holds them): a copy taken by shifting the same-width integer view, since
    views between dtypes of different widths are not supported."""
    tp = _tp()
    es = t.element_size()
    flat = t.detach().as_strided([nbytes // es], [1], 0)
    if es == 1:
        return flat.view(tp.uint8)
    ints = flat.view(same_width_int(flat))
    parts = [(ints >> (8 * k)) & 255 for k in range(es)]
    return tp.stack(parts, -1).reshape(-1).to(tp.uint8)


class TypedStorage(_Storage):
    """The memory behind a tensor as elements of its dtype (Tensor.storage())."""

    def __init__(self, owner: Tensor):
        super().__init__(owner)
        self.dtype = owner.dtype

    def _flat(self):
        return self._owner.detach().as_strided([self.size()], [1], 0)

    def size(self) -> int:
        return self._nbytes // self._owner.element_size()

    def element_size(self) -> int:
        return self._owner.element_size()

    def untyped(self) -> UntypedStorage:
        return UntypedStorage(self._owner)

    def tolist(self):
        return self._flat().cpu().tolist()

    def __getitem__(self, i):
        r = self._flat()[i]
        return r.item() if isinstance(i, int) else r

    def __setitem__(self, i, value):
        from ._grad_mode import no_grad
        with no_grad():
            self._flat()[i] = value

    def fill_(self, value):
        from ._grad_mode import no_grad
        with no_grad():
            self._flat().fill_(value)
        return self

    def __iter__(self):
        return iter(self.tolist())

    def __eq__(self, other):
        return isinstance(other, TypedStorage) and (self._base, self._nbytes, self.dtype) == \
            (other._base, other._nbytes, other.dtype)

    def __hash__(self):
        return hash((self._base, self._nbytes, str(self.dtype)))

    def __repr__(self):
        return f"tensorplay.TypedStorage(size={self.size()}, dtype={self.dtype}, device={self.device})"


def untyped_storage(self):
    _refuse_in_capture("untyped_storage")
    return UntypedStorage(self)


def storage(self):
    _refuse_in_capture("storage")
    return TypedStorage(self)


def is_set_to(self, tensor):
    """True when both tensors view the same memory with the same offset, sizes and strides."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"is_set_to: expected a Tensor, got {type(tensor).__name__}")
    return (self._storage_info() == tensor._storage_info() and self.storage_offset() == tensor.storage_offset()
            and tuple(self.shape) == tuple(tensor.shape) and self.stride() == tensor.stride())


def is_storage(obj):
    return isinstance(obj, (UntypedStorage, TypedStorage))


def install():
    tp = _tp()
    Tensor.untyped_storage = untyped_storage
    Tensor.storage = storage
    Tensor.is_set_to = is_set_to
    tp.UntypedStorage, tp.TypedStorage = UntypedStorage, TypedStorage
    if not hasattr(tp, "is_storage"):
        tp.is_storage = is_storage
