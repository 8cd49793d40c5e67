"""PyTorch's return convention for ``unique`` and ``unique_consecutive``: the registered operator always
returns (values, inverse, counts); PyTorch returns a single tensor unless
``return_inverse`` or ``return_counts`` asks for more, and then a tuple of
exactly the requested results. Installed as methods of Tensor; tp.unique and
tp.unique_consecutive are these functions
(imported by tensorplay/__init__.py).
"""
from . import _C

__all__ = ["unique", "unique_consecutive"]

_unique = _C._op_functions["unique"]
_unique_consecutive = _C._op_functions["unique_consecutive"]


def _select(values, inverse, counts, return_inverse, return_counts):
    if not (return_inverse or return_counts):
        return values
    out = (values,)
    if return_inverse:
        out += (inverse,)
    if return_counts:
        out += (counts,)
    return out


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """Unique elements (or slices along ``dim``), in ascending order."""
    res = _unique(input, sorted, return_inverse, return_counts, dim)
    return _select(*res, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Merges runs of equal elements (or slices along ``dim``), keeping input order."""
    res = _unique_consecutive(input, return_inverse, return_counts, dim)
    return _select(*res, return_inverse, return_counts)


def _install():
    _C.Tensor.unique = lambda self, sorted=True, return_inverse=False, return_counts=False, dim=None: unique(
        self, sorted, return_inverse, return_counts, dim)
    _C.Tensor.unique_consecutive = lambda self, return_inverse=False, return_counts=False, dim=None: (
        unique_consecutive(self, return_inverse, return_counts, dim))


_install()
