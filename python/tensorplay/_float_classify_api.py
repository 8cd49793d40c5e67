"""Floating-point classification and bit-level functions PyTorch has and the
operator set composes: isposinf, isneginf, isreal, frexp and nextafter. They
are compositions of existing operators, so they run on every device and
inside tp.compile."""
import collections
import sys

from ._C import Tensor
from ._install import add_missing

_Frexp = collections.namedtuple("frexp", ["mantissa", "exponent"])


def _tp():
    return sys.modules[__package__]


def _check(fn, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: expected a Tensor, got {type(x).__name__}")


def isposinf(input):
    """True where input is +inf."""
    _check("isposinf", input)
    if not input.is_floating_point():
        return _tp().zeros_like(input, dtype=_tp().bool)
    return input == float("inf")


def isneginf(input):
    """True where input is -inf."""
    _check("isneginf", input)
    if not input.is_floating_point():
        return _tp().zeros_like(input, dtype=_tp().bool)
    return input == float("-inf")


def isreal(input):
    """True everywhere: TensorPlay's dtypes are all real (a complex tensor
    would be True where its imaginary part is 0)."""
    _check("isreal", input)
    return _tp().ones_like(input, dtype=_tp().bool)


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2**exponent, 0.5 <= |mantissa| < 1
    (0, inf and nan: mantissa = input, exponent 0); exponent is int32."""
    _check("frexp", input)
    tp = _tp()
    if not input.is_floating_point():
        raise TypeError(f"frexp: expected a floating-point tensor, got {input.dtype}")
    x = input.double()
    finite_nonzero = tp.isfinite(x) & (x != 0)
    ax = tp.where(finite_nonzero, x.abs(), tp.ones_like(x))
    e = tp.floor(tp.log2(ax)) + 1
    # 2**-e in two factors: a subnormal's 2**1074 alone would overflow float64
    half = tp.floor(e / 2)
    m = tp.where(finite_nonzero, x * tp.exp2(-half) * tp.exp2(half - e), x)
    # log2's rounding can put the mantissa one binade off: one step fixes it (exact scalings)
    big, small = m.abs() >= 1, (m.abs() < 0.5) & finite_nonzero
    m = tp.where(big, m * 0.5, tp.where(small, m * 2, m))
    e = tp.where(big, e + 1, tp.where(small, e - 1, e))
    e = tp.where(finite_nonzero, e, tp.zeros_like(e))
    return _Frexp(m.to(input.dtype), e.to(tp.int32))


def same_width_int(t):
    """The integer dtype of t's element width (for bit-level views of floats)."""
    tp = _tp()
    return {1: tp.uint8, 2: tp.int16, 4: tp.int32, 8: tp.int64}[t.element_size()]


def nextafter(input, other):
    """The next floating-point value after input towards other, elementwise."""
    _check("nextafter", input)
    tp = _tp()
    if not isinstance(other, Tensor):
        other = tp.tensor(other, dtype=input.dtype, device=input.device)
    dt = tp.result_type(input, other)
    if not dt.is_floating_point:
        raise TypeError(f"nextafter: expected floating-point tensors, got {input.dtype} and {other.dtype}")
    x, y = tp.broadcast_tensors(input.to(dt), other.to(dt))
    x = x.contiguous()
    bits = x.view(same_width_int(x))
    away_from_zero = (y > x) == (x > 0)
    stepped = tp.where(away_from_zero, bits + 1, bits - 1).view(dt)
    tiny = tp.finfo(dt).smallest_subnormal
    toward_zero_tiny = tp.where(y > x, tp.full_like(x, tiny), tp.full_like(x, -tiny))
    r = tp.where(x == 0, toward_zero_tiny, stepped)
    r = tp.where(x == y, y, r)
    r = tp.where(tp.isnan(x) | tp.isnan(y), x + y, r)
    # PyTorch's derivative: nextafter(x, y) ~ x, so d/dx = 1 and d/dy = 0.
    return (x + (r - x).detach()) if input.requires_grad and tp.is_grad_enabled() else r.detach()


def _nextafter_(self, other):
    return self.copy_(nextafter(self, other))


_FUNCTIONS = (isposinf, isneginf, isreal, frexp, nextafter)


def install():
    add_missing(_tp(), _FUNCTIONS)
    add_missing(Tensor, _FUNCTIONS + (_nextafter_,), [f.__name__ for f in _FUNCTIONS] + ["nextafter_"])
