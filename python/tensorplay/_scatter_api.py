"""PyTorch's index_reduce, put and diagonal_scatter as compositions of existing operators.

index_reduce is scatter_reduce with the 1-D index broadcast along `dim` (so its gradients are
scatter_reduce's); put is an index_put / index_add into the flattened tensor; diagonal_scatter
writes src through a diagonal view of a clone (autograd's view write, functionalized when
compiled). The in-place forms copy the out-of-place result back, so a non-contiguous self works."""
import sys

from ._C import Tensor
from ._install import add_missing

_REDUCES = ("prod", "mean", "amax", "amin")


def _tp():
    return sys.modules[__package__]


def _check_tensor(fn, name, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: {name} must be a Tensor, got {type(x).__name__}")


def _check_index(fn, index):
    tp = _tp()
    if index.dtype not in (tp.int64, tp.int32):
        raise RuntimeError(f"{fn}: index must be an int64 or int32 tensor, got {index.dtype}")


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """input with source's slices reduced into the positions `index` names along `dim`
    (prod, mean, amax or amin; include_self=False leaves input's values out of the reduction)."""
    fn = "index_reduce"
    for name, t in (("input", input), ("index", index), ("source", source)):
        _check_tensor(fn, name, t)
    if reduce not in _REDUCES:
        raise RuntimeError(f"{fn}: reduce must be one of {_REDUCES}, got {reduce!r}")
    _check_index(fn, index)
    if index.dim() > 1:
        raise IndexError(f"{fn}: index must be a vector (0-D or 1-D), got {index.dim()}-D")
    if input.dtype != source.dtype:
        raise RuntimeError(f"{fn}: self ({input.dtype}) and source ({source.dtype}) must have the same dtype")
    nd = max(input.dim(), 1)
    if not -nd <= dim < nd:
        raise IndexError(f"{fn}: dim {dim} out of range for a tensor of {input.dim()} dimensions")
    dim %= nd
    x = input.reshape(1) if input.dim() == 0 else input
    src = source.reshape(1) if source.dim() == 0 else source
    idx = index.reshape(-1).to(_tp().int64)
    if src.dim() != x.dim():
        raise RuntimeError(f"{fn}: source must have as many dimensions as self ({x.dim()}), got {src.dim()}")
    if src.shape[dim] != idx.shape[0]:
        raise RuntimeError(f"{fn}: index has {idx.shape[0]} elements but source has {src.shape[dim]} along dim {dim}")
    for d in range(x.dim()):
        if d != dim and src.shape[d] != x.shape[d]:
            raise RuntimeError(f"{fn}: source {tuple(source.shape)} and self {tuple(input.shape)} differ in dim {d}")
    n = x.shape[dim]
    if idx.numel():
        lo, hi = int(idx.min().item()), int(idx.max().item())
        if lo < 0 or hi >= n:  # PyTorch takes no negative indices here (unlike put)
            raise IndexError(f"{fn}: index {lo if lo < 0 else hi} out of range for dimension {dim} of size {n}")
    view = [1] * src.dim()
    view[dim] = -1
    full = idx.reshape(view).expand(list(src.shape))
    res = x.scatter_reduce(dim, full, src, reduce, include_self=include_self)
    return res.reshape([]) if input.dim() == 0 else res


def _index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    self.copy_(index_reduce(self, dim, index, source, reduce, include_self=include_self))
    return self


def put(input, index, source, accumulate=False):
    """input read as 1-D with source written (or added, accumulate=True) at `index`; negative indices
    count from the end."""
    fn = "put"
    for name, t in (("input", input), ("index", index), ("source", source)):
        _check_tensor(fn, name, t)
    if index.dtype != _tp().int64:
        raise RuntimeError(f"{fn}: index must be an int64 tensor, got {index.dtype}")
    if input.dtype != source.dtype:
        raise RuntimeError(f"{fn}: self ({input.dtype}) and source ({source.dtype}) must have the same dtype")
    if index.numel() != source.numel():
        raise IndexError(f"{fn}: index has {index.numel()} elements but source has {source.numel()}")
    n = input.numel()
    idx = index.reshape(-1)
    if idx.numel():
        lo, hi = int(idx.min().item()), int(idx.max().item())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            raise IndexError(f"{fn}: index {bad} is out of range for a tensor of {n} elements")
    idx = _tp().where(idx < 0, idx + n, idx)
    flat = input.reshape(-1)
    src = source.reshape(-1)
    res = flat.index_put((idx,), src, accumulate=accumulate)
    return res.reshape(list(input.shape))


def _scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    """In-place scatter_reduce (self's dtype; the usual version-counter rules)."""
    return self.copy_(self.scatter_reduce(dim, index, src, reduce, include_self=include_self))


def _put_(self, index, source, accumulate=False):
    self.copy_(put(self, index, source, accumulate))
    return self


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of input whose diagonal (offset, dim1, dim2) holds src."""
    fn = "diagonal_scatter"
    _check_tensor(fn, "input", input)
    _check_tensor(fn, "src", src)
    if input.dim() < 2:
        raise RuntimeError(f"{fn}: input must have at least 2 dimensions, got {input.dim()}")
    diag = input.diagonal(offset, dim1, dim2)
    if tuple(diag.shape) != tuple(src.shape):
        raise RuntimeError(f"{fn}: src must have the diagonal's shape {tuple(diag.shape)}, got {tuple(src.shape)}")
    res = input.clone()
    res.diagonal(offset, dim1, dim2).copy_(src)
    return res


_FUNCTIONS = (index_reduce, put, diagonal_scatter)


def install():
    add_missing(_tp(), _FUNCTIONS)
    add_missing(Tensor, _FUNCTIONS)
    add_missing(Tensor, (_index_reduce_, _put_, _scatter_reduce_), ("index_reduce_", "put_", "scatter_reduce_"))
