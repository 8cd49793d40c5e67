"""PyTorch's in-place shape methods: squeeze_, unsqueeze_, t_, transpose_, swapdims_/swapaxes_,
resize_, resize_as_.

The view is made by the ordinary out-of-place operator (so its shape checks, autograd node and,
under tp.compile, its graph node are the operator's); `_C._inplace_view_apply` then gives the
caller's tensor that shape. With history (a non-leaf in grad mode, or inside a capture) the
Python object takes the view itself and the old tensor, which saved values may hold, keeps its
shape; otherwise the sizes and strides change in place. Either way the version counter moves,
as for any in-place op, and a leaf that requires grad is refused in grad mode, as PyTorch does.
resize_ keeps the elements already there (row-major) and grows the memory only when the tensor
owns it alone."""
import sys

from . import _C
from ._C import Tensor


def _tp():
    return sys.modules[__package__]


def _apply(self, name, make):
    _C._inplace_check_leaf(self, name)
    return _C._inplace_view_apply(self, make(), name)


def squeeze_(self, dim=None):
    """In place: drop size-1 dims (all, or `dim`, or each dim of a tuple of dims)."""
    return _apply(self, "squeeze_", lambda: self.squeeze() if dim is None else self.squeeze(dim))


def unsqueeze_(self, dim):
    """In place: insert a size-1 dim at `dim`."""
    return _apply(self, "unsqueeze_", lambda: self.unsqueeze(dim))


def t_(self):
    """In place: transpose a tensor of at most 2 dims."""
    if self.dim() > 2:
        raise RuntimeError(f"t_: expects a tensor with <= 2 dimensions, but self is {self.dim()}-D "
                           f"(shape {list(self.shape)})")
    return _apply(self, "t_", lambda: self.t())


def transpose_(self, dim0, dim1):
    """In place: swap dims `dim0` and `dim1`."""
    return _apply(self, "transpose_", lambda: self.transpose(dim0, dim1))


def swapdims_(self, dim0, dim1):
    return _apply(self, "swapdims_", lambda: self.transpose(dim0, dim1))


def swapaxes_(self, axis0, axis1):
    return _apply(self, "swapaxes_", lambda: self.transpose(axis0, axis1))


def _sizes(name, sizes):
    if len(sizes) == 1 and not isinstance(sizes[0], int):
        sizes = sizes[0]
    try:
        out = [int(s) for s in sizes]
    except (TypeError, ValueError):
        raise TypeError(f"{name}: sizes must be ints or one sequence of ints, got {sizes!r}") from None
    return out


def _memory_format(self, name, memory_format):
    tp = _tp()
    if memory_format not in (None, tp.contiguous_format, tp.preserve_format):
        raise NotImplementedError(f"{name}: memory_format={memory_format} is not supported (contiguous only)")


def resize_(self, *sizes, memory_format=None):
    """In place: give the tensor `sizes` (contiguous), keeping the elements already in its
    memory in row-major order; new elements are uninitialized."""
    _memory_format(self, "resize_", memory_format)
    return _C._resize_(self, _sizes("resize_", sizes), "resize_")


def resize_as_(self, other, memory_format=None):
    """In place: resize_ to other's shape."""
    if not isinstance(other, Tensor):
        raise TypeError(f"resize_as_: the template must be a Tensor, got {type(other).__name__}")
    _memory_format(self, "resize_as_", memory_format)
    return _C._resize_(self, list(other.shape), "resize_as_")


_METHODS = (squeeze_, unsqueeze_, t_, transpose_, swapdims_, swapaxes_, resize_, resize_as_)


def install():
    for fn in _METHODS:
        if not hasattr(Tensor, fn.__name__):
            setattr(Tensor, fn.__name__, fn)
    tp = _tp()
    if not hasattr(tp, "resize_as_"):
        tp.resize_as_ = resize_as_  # torch.resize_as_(x, other) exists as a function too
