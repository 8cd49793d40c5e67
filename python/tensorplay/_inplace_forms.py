"""The in-place `x.op_(...)` forms of existing operators (addmm_, cumsum_, xlogy_, gcd_, ...),
written as `self.copy_(op(self, ...))` after PyTorch's shape and cast checks, and the top-level
in-place functions PyTorch also has (tp.xlogy_(x, y), ...)."""
import sys

from ._C import Tensor


def _tp():
    return sys.modules[__package__]


def _inplace(base):
    def method(self, *args, **kwargs):
        tp = _tp()
        fn = getattr(tp, base, None) or getattr(tp.special, base)
        res = fn(self, *args, **kwargs)
        if tuple(res.shape) != tuple(self.shape):
            raise RuntimeError(f"{base}_: result of shape {tuple(res.shape)} does not match the in-place "
                               f"tensor's shape {tuple(self.shape)}")
        if res.dtype != self.dtype and not tp.can_cast(res.dtype, self.dtype):
            raise RuntimeError(f"{base}_: result type {res.dtype} can't be cast to the desired output type "
                               f"{self.dtype}")
        return self.copy_(res)
    method.__name__ = base + "_"
    method.__doc__ = f"In-place {base}: self = {base}(self, ...)."
    return method


_INPLACE = ("addmm addbmm baddbmm addmv addr cumsum cumprod lgamma digamma i0 sinc xlogy float_power copysign "
            "heaviside sgn rad2deg deg2rad lcm gcd ldexp logit").split()

# the in-place functions PyTorch also has at top level (torch.xlogy_(x, y), ...)
_TOP_LEVEL = ("addmv_", "i0_", "sinc_", "xlogy_", "rad2deg_", "deg2rad_", "lcm_", "gcd_", "ldexp_")


def install():
    tp = _tp()
    for base in _INPLACE:
        if not hasattr(Tensor, base + "_"):
            setattr(Tensor, base + "_", _inplace(base))
    for name in _TOP_LEVEL:
        if not hasattr(tp, name):
            setattr(tp, name, getattr(Tensor, name))
