"""tp.poisson and tp.binomial: counts drawn from the default (or a given) tp.Generator.

Vectorized rejection samplers over uniform draws (tp.rand), in float64, rounded to the
input's dtype once: Poisson by Knuth's product of uniforms for rates below 10 and by
Hörmann's transformed rejection (PTRS, 1993) above; binomial by inversion (walking the
CDF) when min(p, 1-p) * count is below 10 and by Hörmann's BTRS above, with p > 1/2 drawn as
count minus a draw at 1 - p. Each loop redraws only while some element is still pending,
reading that flag on the host, so these run eagerly (a capture refuses them). Like PyTorch's,
the results carry no gradient."""
import math
import sys

from . import _C
from ._C import Tensor


def _tp():
    return sys.modules[__package__]


def _refuse_capture(name):
    if _C._is_tracing():
        from .compiler import CaptureError
        _C._note_step_refusal()  # (the compiled function then runs step-wise)
        raise CaptureError(f"tp.{name} inside a compiled function (tp.compile) is not supported: its rejection "
                           f"loop reads on the host whether every draw was accepted; draw outside the compiled "
                           f"function and pass the counts in")


def _check_float(name, what, x):
    tp = _tp()
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: {what} must be a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name}: expected {what} to be a floating point tensor, but got {x.dtype} "
                        f"(shape {list(x.shape)})")
    if x.device != tp.device("cpu"):
        raise NotImplementedError(f"{name}: only CPU tensors are supported, got {what} on {x.device}")


def _uniform(shape, generator):
    tp = _tp()
    return tp.rand(shape, dtype=tp.float64, generator=generator)


def _poisson_small(lam, generator):
    """Knuth: the number of uniforms whose running product stays above exp(-lam)."""
    tp = _tp()
    limit = tp.exp(-lam)
    prod = tp.ones_like(lam)
    k = tp.zeros_like(lam)
    active = lam > 0
    while bool(active.any()):
        prod = tp.where(active, prod * _uniform(tuple(lam.shape), generator), prod)
        active = active & (prod > limit)
        k = k + active.to(k.dtype)
    return k


def _poisson_ptrs(lam, generator):
    """Hörmann's PTRS for rates >= 10."""
    tp = _tp()
    slam = tp.sqrt(lam)
    loglam = tp.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    invalpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2)
    out = tp.zeros_like(lam)
    pending = tp.ones_like(lam, dtype=tp.bool)
    while bool(pending.any()):
        U = _uniform(tuple(lam.shape), generator) - 0.5
        V = _uniform(tuple(lam.shape), generator)
        us = 0.5 - U.abs()
        k = tp.floor((2 * a / us + b) * U + lam + 0.43)
        quick = (us >= 0.07) & (V <= vr)
        bad = (k < 0) | ((us < 0.013) & (V > us))
        lhs = tp.log(V) + tp.log(invalpha) - tp.log(a / (us * us) + b)
        rhs = -lam + k * loglam - tp.lgamma(tp.clamp(k, min=0) + 1)
        ok = pending & (quick | (~bad & (lhs <= rhs)))
        out = tp.where(ok, k, out)
        pending = pending & ~ok
    return out


def poisson(input, generator=None):
    """Counts drawn from Poisson(rate) for each element of `input` (non-negative rates), in
    input's dtype; a rate of 0 gives 0."""
    tp = _tp()
    _check_float("poisson", "input", input)
    _refuse_capture("poisson")
    with tp.no_grad():
        lam = input.detach().to(tp.float64)
        if bool((lam < 0).any()) or bool(tp.isnan(lam).any()):
            raise ValueError(f"poisson: rates must be non-negative numbers (input of shape {list(input.shape)} "
                             f"has a negative or NaN rate)")
        if lam.numel() == 0:
            return tp.empty_like(input)
        big = lam >= 10
        small_l = tp.where(big, tp.zeros_like(lam), lam)
        res = _poisson_small(small_l, generator)
        if bool(big.any()):
            res = tp.where(big, _poisson_ptrs(tp.where(big, lam, tp.full_like(lam, 10.0)), generator), res)
        return res.to(input.dtype)


def _binomial_inversion(n, p, generator):
    """Walks the CDF from 0 (used where n * p < 10, p <= 1/2)."""
    tp = _tp()
    q = 1 - p
    s = p / q
    a = (n + 1) * s
    r = tp.exp(n * tp.log(q))
    u = _uniform(tuple(n.shape), generator)
    x = tp.zeros_like(n)
    active = (u > r) & (x < n)
    while bool(active.any()):
        u = tp.where(active, u - r, u)
        x = x + active.to(x.dtype)
        r = tp.where(active, r * (a / x - s), r)
        active = active & (u > r) & (x < n)
    return x


def _binomial_btrs(n, p, generator):
    """Hörmann's BTRS (n * p >= 10, p <= 1/2)."""
    tp = _tp()
    q = 1 - p
    spq = tp.sqrt(n * p * q)
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = tp.log(p / q)
    m = tp.floor((n + 1) * p)
    h = tp.lgamma(m + 1) + tp.lgamma(n - m + 1)
    out = tp.zeros_like(n)
    pending = tp.ones_like(n, dtype=tp.bool)
    while bool(pending.any()):
        U = _uniform(tuple(n.shape), generator) - 0.5
        V = _uniform(tuple(n.shape), generator)
        us = 0.5 - U.abs()
        k = tp.floor((2 * a / us + b) * U + c)
        inside = (k >= 0) & (k <= n)
        quick = (us >= 0.07) & (V <= vr)
        kc = tp.clamp(tp.minimum(k, n), min=0)
        lhs = tp.log(V * alpha / (a / (us * us) + b))
        rhs = h - tp.lgamma(kc + 1) - tp.lgamma(n - kc + 1) + (kc - m) * lpq
        ok = pending & inside & (quick | (lhs <= rhs))
        out = tp.where(ok, k, out)
        pending = pending & ~ok
    return out


def binomial(count, prob, generator=None):
    """Counts drawn from Binomial(count, prob) elementwise (count and prob broadcast; count
    non-negative, prob in [0, 1]), in count's dtype."""
    tp = _tp()
    _check_float("binomial", "count", count)
    _check_float("binomial", "prob", prob)
    if count.dtype != prob.dtype:
        raise TypeError(f"binomial: expected count and prob to have the same dtype, but got {count.dtype} and "
                        f"{prob.dtype}")
    _refuse_capture("binomial")
    with tp.no_grad():
        import numpy as np
        try:
            shape = tuple(np.broadcast_shapes(tuple(count.shape), tuple(prob.shape)))
        except ValueError:
            raise ValueError(f"binomial: the shapes of count {list(count.shape)} and prob {list(prob.shape)} do not "
                             f"broadcast") from None
        n = tp.floor(count.detach().to(tp.float64)).expand(shape).contiguous()
        p = prob.detach().to(tp.float64).expand(shape).contiguous()
        if bool((n < 0).any()) or bool(tp.isnan(n).any()):
            raise ValueError(f"binomial: count must be non-negative (count of shape {list(count.shape)})")
        if bool(((p < 0) | (p > 1) | tp.isnan(p)).any()):
            raise ValueError(f"binomial: prob must be in [0, 1] (prob of shape {list(prob.shape)})")
        if n.numel() == 0:
            return tp.empty(shape, dtype=count.dtype)
        flip = p > 0.5
        pp = tp.where(flip, 1 - p, p)
        degenerate = (pp == 0) | (n == 0)
        pp = tp.where(degenerate, tp.full_like(pp, 0.25), pp)   # any valid p: the result is replaced below
        nn = tp.where(degenerate, tp.zeros_like(n), n)
        big = nn * pp >= 10
        res = _binomial_inversion(tp.where(big, tp.zeros_like(nn), nn), pp, generator)
        if bool(big.any()):
            res = tp.where(big, _binomial_btrs(tp.where(big, nn, tp.full_like(nn, 40.0)),
                                               tp.where(big, pp, tp.full_like(pp, 0.25)), generator), res)
        res = tp.where(degenerate, tp.zeros_like(res), res)
        res = tp.where(flip, n - res, res)
        return res.to(count.dtype)


def install():
    tp = _tp()
    for fn in (poisson, binomial):
        if not hasattr(tp, fn.__name__):
            setattr(tp, fn.__name__, fn)
