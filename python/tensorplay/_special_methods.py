"""tp.mvlgamma and the special-function Tensor methods PyTorch has: polygamma / polygamma_,
mvlgamma / mvlgamma_ and sinc (float32 math for 16-bit inputs, as PyTorch's opmath)."""
import math
import sys

from . import _C
from ._C import Tensor
from ._dtype_info import _is_float


def _tp():
    return sys.modules[__package__]


def polygamma_method(self, n):
    return _tp().polygamma(n, self)


def polygamma_(self, n):
    return self.copy_(_tp().polygamma(n, self))


def mvlgamma(input, p):
    """Multivariate log-gamma of dimension p: sum_{i<p} lgamma(x - i/2) + p(p-1)/4 log(pi)."""
    tp = _tp()
    if not isinstance(p, int) or p < 1:
        raise RuntimeError(f"mvlgamma: p has to be greater than or equal to 1, got {p}")
    if not _is_float(input.dtype):
        input = input.to(tp.get_default_dtype())
    if not _C._is_tracing() and input.numel() > 0 and not bool((input > (p - 1) / 2).all().item()):
        raise RuntimeError(f"mvlgamma: all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    offs = tp.arange(p, dtype=input.dtype, device=input.device) * -0.5
    # lgamma widens 16-bit floats to float32: each term is rounded back, then summed in the input's
    # dtype, as PyTorch's composition (terms in the input dtype)
    terms = tp.lgamma(input.unsqueeze(-1) + offs).to(input.dtype)
    return terms.sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


def _sinc_method(self):
    """sin(pi x) / (pi x), computed in float32 for 16-bit inputs (as PyTorch's opmath)."""
    tp = _tp()
    if self.dtype in (tp.float16, tp.bfloat16):
        return tp.special.sinc(self.float()).to(self.dtype)
    return tp.special.sinc(self)


def install():
    tp = _tp()
    if not hasattr(tp, "mvlgamma"):
        tp.mvlgamma = mvlgamma
    if not hasattr(tp, "sinc"):
        tp.sinc = tp.special.sinc
    if not hasattr(Tensor, "mvlgamma"):
        Tensor.mvlgamma = mvlgamma
    Tensor.mvlgamma_ = lambda self, p: self.copy_(mvlgamma(self, p))
    if not hasattr(Tensor, "sinc"):
        Tensor.sinc = _sinc_method
    if not hasattr(Tensor, "polygamma"):
        Tensor.polygamma = polygamma_method
        Tensor.polygamma_ = polygamma_
