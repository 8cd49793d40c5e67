"""tp.autograd.forward_ad: forward-mode differentiation with dual tensors.

Inside ``with dual_level():``, ``make_dual(primal, tangent)`` gives a tensor
carrying a tangent; every operator applied to dual tensors computes the
tangent of its result (the C++ formulas of csrc/autograd/jvp_rules_*.cpp), and
``unpack_dual`` reads it back. Tangents are dropped when the level exits. One
level may be open at a time (nesting raises, as in PyTorch).
"""
from collections import namedtuple

from .. import _C

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])


def enter_dual_level():
    """Opens a dual level and returns its number."""
    return _C._fwd_enter_dual_level()


def exit_dual_level(*, level=None):
    """Closes the open dual level (its tangents are dropped)."""
    if level is None:
        level = _C._fwd_current_level()
        if level < 0:
            raise RuntimeError("exit_dual_level: no dual level is open")
    _C._fwd_exit_dual_level(level)


class dual_level:
    """Context manager opening a dual level for its body."""

    def __enter__(self):
        self.level = enter_dual_level()
        return self.level

    def __exit__(self, *exc):
        exit_dual_level(level=self.level)
        return False


def _level(level, who):
    if level is None:
        level = _C._fwd_current_level()
        if level < 0:
            raise RuntimeError(f"{who}: no dual level is open; create dual tensors inside "
                               "`with tp.autograd.forward_ad.dual_level():`")
    return level


def make_dual(tensor, tangent, *, level=None):
    """A view of `tensor` whose tangent is `tangent` (same shape, floating point)."""
    if not isinstance(tensor, _C.Tensor) or not isinstance(tangent, _C.Tensor):
        raise TypeError(f"make_dual: expected two Tensors, got {type(tensor).__name__} and "
                        f"{type(tangent).__name__}")
    return _C._fwd_make_dual(tensor, tangent, _level(level, "make_dual"))


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of `tensor`; tangent is None when it has none at this level."""
    if not isinstance(tensor, _C.Tensor):
        raise TypeError(f"unpack_dual: expected a Tensor, got {type(tensor).__name__}")
    if level is None:
        level = _C._fwd_current_level()
    if level < 0:
        return UnpackedDualTensor(tensor, None)
    primal, tangent = _C._fwd_unpack_dual(tensor, level)
    return UnpackedDualTensor(primal, tangent)
