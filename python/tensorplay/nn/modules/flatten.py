"""Flatten and Unflatten: reshape a range of dims into one, and back."""
from .module import Module

__all__ = ["Flatten", "Unflatten"]


def _wrap(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        shape = list(input.shape)
        if not shape:
            return input.reshape([1])
        s, e = _wrap(self.start_dim, len(shape)), _wrap(self.end_dim, len(shape))
        if s > e:
            raise ValueError("flatten() has invalid args: start_dim cannot come after end_dim")
        n = 1
        for d in shape[s:e + 1]:
            n *= d
        return input.reshape(shape[:s] + [n] + shape[e + 1:])

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        shape = list(input.shape)
        d = _wrap(self.dim, len(shape))
        return input.reshape(shape[:d] + list(self.unflattened_size) + shape[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
