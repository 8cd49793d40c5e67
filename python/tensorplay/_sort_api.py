"""PyTorch's return convention for ``unique``: the registered operator always
returns (values, inverse, counts); PyTorch returns a single tensor unless
``return_inverse`` or ``return_counts`` asks for more, and then a tuple of
exactly the requested results. Installed as ``tp.unique`` and ``Tensor.unique``
(imported by tensorplay/__init__.py).
"""
from . import _C

__all__ = ["unique"]

_unique = _C._op_functions["unique"]


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """Unique elements (or slices along ``dim``), in ascending order."""
    values, inverse, counts = _unique(input, sorted, return_inverse, return_counts, dim)
    if not (return_inverse or return_counts):
        return values
    out = (values,)
    if return_inverse:
        out += (inverse,)
    if return_counts:
        out += (counts,)
    return out


def _install():
    _C.Tensor.unique = lambda self, sorted=True, return_inverse=False, return_counts=False, dim=None: unique(
        self, sorted, return_inverse, return_counts, dim)


_install()
