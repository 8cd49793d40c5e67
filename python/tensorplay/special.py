"""tp.special: the torch.special names TensorPlay has. lgamma, digamma, polygamma, i0 and i1 are
C++ operators with derivatives (csrc/ops/special_ops.cpp), as are the Bessel functions, i0e/i1e,
erfcx, log_ndtr and ndtri (csrc/ops/special_bessel_ops.cpp); the rest are other names for existing
operators or short compositions of them (so autograd follows them)."""
import math
import sys

__all__ = [
    "gammaln", "digamma", "psi", "polygamma", "multigammaln", "i0", "i1", "xlogy", "xlog1py", "expit", "logit",
    "erf", "erfc", "erfinv", "exp2", "expm1", "log1p", "logsumexp", "softmax", "log_softmax", "round", "sinc",
    "entr", "ndtr", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
    "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "spherical_bessel_j0", "airy_ai", "i0e", "i1e", "erfcx", "log_ndtr", "ndtri", "zeta", "gammainc", "gammaincc",
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
    "legendre_polynomial_p",
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


def _unary(op_name, doc):
    def fn(input):
        tp = _tp()
        if not isinstance(input, tp.Tensor):
            raise TypeError(f"special.{fn.__name__}: expected a Tensor, got {type(input).__name__}")
        return getattr(tp, op_name)(input)
    fn.__name__ = op_name[len("special_"):]
    fn.__doc__ = doc
    return fn


bessel_j0 = _unary("special_bessel_j0", "Bessel function of the first kind of order 0.")
bessel_j1 = _unary("special_bessel_j1", "Bessel function of the first kind of order 1.")
bessel_y0 = _unary("special_bessel_y0", "Bessel function of the second kind of order 0 (NaN for x < 0).")
bessel_y1 = _unary("special_bessel_y1", "Bessel function of the second kind of order 1 (NaN for x < 0).")
modified_bessel_k0 = _unary("special_modified_bessel_k0", "Modified Bessel function of the second kind, order 0.")
modified_bessel_k1 = _unary("special_modified_bessel_k1", "Modified Bessel function of the second kind, order 1.")
scaled_modified_bessel_k0 = _unary("special_scaled_modified_bessel_k0", "exp(x) * K0(x), without overflow.")
scaled_modified_bessel_k1 = _unary("special_scaled_modified_bessel_k1", "exp(x) * K1(x), without overflow.")
spherical_bessel_j0 = _unary("special_spherical_bessel_j0", "sin(x) / x, 1 at 0.")
airy_ai = _unary("special_airy_ai", "The Airy function Ai(x).")
i0e = _unary("special_i0e", "exp(-|x|) * I0(x).")
i1e = _unary("special_i1e", "exp(-|x|) * I1(x).")
erfcx = _unary("special_erfcx", "exp(x^2) * erfc(x), without overflow for large x.")
log_ndtr = _unary("special_log_ndtr", "log of the standard normal CDF, accurate in both tails.")
ndtri = _unary("special_ndtri", "The standard normal quantile: ndtr(ndtri(p)) = p.")


def modified_bessel_i0(input):
    """I0; the same function as special.i0."""
    return _tp().i0(input)


def modified_bessel_i1(input):
    """I1; the same function as special.i1."""
    return _tp().special_i1(input)


def _binary(op_name, first, second, doc):
    """A two-operand special function; either operand may be a Python number (as in PyTorch: a number
    takes the other operand's dtype), not both."""
    def fn(a, b):
        tp = _tp()
        name = f"special.{fn.__name__}"
        a_t, b_t = isinstance(a, tp.Tensor), isinstance(b, tp.Tensor)
        if not a_t and not b_t:
            raise TypeError(f"{name}: expected at least one Tensor, got {type(a).__name__} and {type(b).__name__}")
        for v, what in ((a, first), (b, second)):
            if not isinstance(v, (tp.Tensor, int, float)) or isinstance(v, complex):
                raise TypeError(f"{name}: {what} must be a Tensor or a real number, got {type(v).__name__}")
        if not a_t:
            a = tp.tensor(a, dtype=b.dtype if b.dtype.is_floating_point else tp.get_default_dtype())
        if not b_t:
            b = tp.tensor(b, dtype=a.dtype if a.dtype.is_floating_point else tp.get_default_dtype())
        return getattr(tp, op_name)(a, b)
    fn.__name__ = op_name[len("special_"):]
    fn.__doc__ = doc
    return fn


zeta = _binary("special_zeta", "input", "other", "Hurwitz zeta: sum over k >= 0 of (other + k)^-input.")
gammainc = _binary("special_gammainc", "input", "other",
                   "Regularized lower incomplete gamma P(input, other); differentiable in other only.")
gammaincc = _binary("special_gammaincc", "input", "other",
                    "Regularized upper incomplete gamma Q(input, other) = 1 - P; differentiable in other only.")
_POLY = "{} of degree n (n rounded toward zero; 0 for negative n)."
chebyshev_polynomial_t = _binary("special_chebyshev_polynomial_t", "input", "n",
                                 _POLY.format("Chebyshev polynomial of the first kind T_n(x)"))
chebyshev_polynomial_u = _binary("special_chebyshev_polynomial_u", "input", "n",
                                 _POLY.format("Chebyshev polynomial of the second kind U_n(x)"))
chebyshev_polynomial_v = _binary("special_chebyshev_polynomial_v", "input", "n",
                                 _POLY.format("Chebyshev polynomial of the third kind V_n(x)"))
chebyshev_polynomial_w = _binary("special_chebyshev_polynomial_w", "input", "n",
                                 _POLY.format("Chebyshev polynomial of the fourth kind W_n(x)"))
shifted_chebyshev_polynomial_t = _binary("special_shifted_chebyshev_polynomial_t", "input", "n",
                                         _POLY.format("T_n(2x - 1)"))
shifted_chebyshev_polynomial_u = _binary("special_shifted_chebyshev_polynomial_u", "input", "n",
                                         _POLY.format("U_n(2x - 1)"))
shifted_chebyshev_polynomial_v = _binary("special_shifted_chebyshev_polynomial_v", "input", "n",
                                         _POLY.format("V_n(2x - 1)"))
shifted_chebyshev_polynomial_w = _binary("special_shifted_chebyshev_polynomial_w", "input", "n",
                                         _POLY.format("W_n(2x - 1)"))
hermite_polynomial_h = _binary("special_hermite_polynomial_h", "input", "n",
                               _POLY.format("Physicists' Hermite polynomial H_n(x)"))
hermite_polynomial_he = _binary("special_hermite_polynomial_he", "input", "n",
                                _POLY.format("Probabilists' Hermite polynomial He_n(x)"))
laguerre_polynomial_l = _binary("special_laguerre_polynomial_l", "input", "n",
                                _POLY.format("Laguerre polynomial L_n(x)"))
legendre_polynomial_p = _binary("special_legendre_polynomial_p", "input", "n",
                                _POLY.format("Legendre polynomial P_n(x)"))
