"""tp.special: the torch.special names TensorPlay has. lgamma, digamma, polygamma, i0 and i1 are
C++ operators with derivatives (csrc/ops/special_ops.cpp); the rest are other names for existing
operators or short compositions of them (so autograd follows them)."""
import math
import sys

__all__ = [
    "gammaln", "digamma", "psi", "polygamma", "multigammaln", "i0", "i1", "xlogy", "xlog1py", "expit", "logit",
    "erf", "erfc", "erfinv", "exp2", "expm1", "log1p", "logsumexp", "softmax", "log_softmax", "round", "sinc",
    "entr", "ndtr",
]


def _tp():
    return sys.modules[__package__]


def gammaln(input):
    return _tp().lgamma(input)


def digamma(input):
    return _tp().digamma(input)


psi = digamma


def polygamma(n, input):
    return _tp().polygamma(n, input)


def multigammaln(input, p):
    """log of the multivariate gamma function of dimension p: sum_i lgamma(x - i/2) + p(p-1)/4 log(pi)."""
    tp = _tp()
    if p < 1:
        raise ValueError(f"special.multigammaln: p must be at least 1, but got {p}")
    if bool((input <= (p - 1) / 2).any().item()):
        raise ValueError(f"special.multigammaln: all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    r = tp.lgamma(input)
    for i in range(1, p):
        r = r + tp.lgamma(input - i / 2)
    return r + p * (p - 1) / 4 * math.log(math.pi)


def i0(input):
    return _tp().i0(input)


def i1(input):
    return _tp().special_i1(input)


def xlogy(input, other):
    return _tp().xlogy(input, other)


def xlog1py(input, other):
    """x * log1p(y), 0 where x == 0 (unless y is NaN)."""
    tp = _tp()
    if not isinstance(input, tp.Tensor):
        input = tp.tensor(input, dtype=other.dtype)
    if not isinstance(other, tp.Tensor):
        other = tp.tensor(other, dtype=input.dtype)
    r = input * tp.log1p(other)
    return tp.where((input == 0) & ~tp.isnan(other), tp.zeros_like(r), r)


def expit(input):
    return _tp().sigmoid(input)


def logit(input, eps=None):
    return _tp().logit(input, eps)


def erf(input):
    return _tp().erf(input)


def erfc(input):
    return _tp().erfc(input)


def erfinv(input):
    return _tp().erfinv(input)


def exp2(input):
    return _tp().exp2(input)


def expm1(input):
    return _tp().expm1(input)


def log1p(input):
    return _tp().log1p(input)


def logsumexp(input, dim, keepdim=False):
    return _tp().logsumexp(input, dim, keepdim)


def softmax(input, dim, *, dtype=None):
    x = input.to(dtype) if dtype is not None else input
    return _tp().softmax(x, dim)


def log_softmax(input, dim, *, dtype=None):
    x = input.to(dtype) if dtype is not None else input
    return _tp().log_softmax(x, dim)


def round(input, *, decimals=0):
    return _tp().round(input, decimals=decimals)


def sinc(input):
    """sin(pi x) / (pi x), 1 at 0 (the gradient there is 0, not NaN)."""
    tp = _tp()
    if not input.dtype.is_floating_point:
        input = input.to(tp.float32)
    zero = input == 0
    px = tp.where(zero, tp.ones_like(input), input) * math.pi
    return tp.where(zero, tp.ones_like(input), tp.sin(px) / px)


def entr(input):
    """-x log x for x > 0, 0 at 0, -inf for x < 0."""
    tp = _tp()
    if not input.dtype.is_floating_point:  # integers and bool compute in float (-inf has no int form)
        input = input.to(tp.get_default_dtype())
    pos = input > 0
    safe = tp.where(pos, input, tp.ones_like(input))
    r = tp.where(pos, -safe * tp.log(safe), tp.zeros_like(input))
    return tp.where(input < 0, tp.full_like(input, -math.inf), r)


def ndtr(input):
    """The standard normal CDF: erfc(-x / sqrt(2)) / 2."""
    return 0.5 * _tp().erfc(-input * (1 / math.sqrt(2)))
