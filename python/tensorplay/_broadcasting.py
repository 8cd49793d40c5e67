"""tp.broadcast_shapes / tp.broadcast_tensors and its reduction, Tensor.sum_to_size."""
import sys

from ._C import Tensor


def _tp():
    return sys.modules[__package__]


def broadcast_shapes(*shapes):
    """The shape all of `shapes` broadcast to (ints count as 1-d shapes), checked as PyTorch does."""
    out = []
    for s in shapes:
        s = (s,) if isinstance(s, int) else tuple(s)
        for i, d in enumerate(reversed(s)):
            if d < 0:
                raise RuntimeError(f"broadcast_shapes: negative size {d} in shape {s}")
            if i == len(out):
                out.insert(0, d)
                continue
            cur = out[len(out) - 1 - i]
            if cur == 1:
                out[len(out) - 1 - i] = d
            elif d != 1 and d != cur:
                raise RuntimeError(f"broadcast_shapes: shape mismatch: size {d} cannot broadcast against {cur} "
                                   f"(shapes {[tuple(x) if not isinstance(x, int) else (x,) for x in shapes]})")
    return _tp().Size(out) if hasattr(_tp(), "Size") else tuple(out)


def broadcast_tensors(*tensors):
    """Views of `tensors` expanded to their common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"broadcast_tensors: expects tensors, got {type(t).__name__}")
    shape = tuple(broadcast_shapes(*[tuple(t.shape) for t in tensors]))
    return tuple(t.expand(shape) for t in tensors)


def sum_to_size(self, *size):
    """self summed over the dims that `size` broadcasts (the reduction of a broadcast)."""
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    size = tuple(size)
    shape = tuple(self.shape)
    try:
        ok = tuple(broadcast_shapes(size, shape)) == shape and len(size) <= len(shape)
    except RuntimeError:
        ok = False
    if not ok:
        raise RuntimeError(f"sum_to_size: size {size} is not expandable to the tensor's size {shape}")
    lead = len(shape) - len(size)
    if size == shape and len(shape) > 0:
        return self  # nothing to reduce: self, in its dtype
    if not self.is_floating_point():
        self = self.to(_tp().int64)  # integer sums are int64 (a 0-d one too), as PyTorch's
    out = self.sum(tuple(range(lead))) if lead else self
    dims = tuple(i for i, s in enumerate(size) if s == 1 and out.shape[i] != 1)
    if dims:
        out = out.sum(dims, keepdim=True)
    return out


def install():
    tp = _tp()
    for name in ("broadcast_shapes", "broadcast_tensors"):
        if not hasattr(tp, name):
            setattr(tp, name, globals()[name])
    if not hasattr(Tensor, "sum_to_size"):
        Tensor.sum_to_size = sum_to_size
