"""Regularized lower incomplete gamma P(a, x) and the implicit
reparameterization gradient of a Gamma(a, 1) sample, in float64 tensor ops.

P is evaluated by its power series where x < a + 1 and by the continued
fraction for Q = 1 - P elsewhere (Numerical Recipes' gser/gcf, modified
Lentz), both run on the whole tensor with a convergence check every few
rounds.  The sample gradient is dx/da = -(dP/da) / pdf(x): in the series
region it is -(x/a) [S (log x - digamma(a + 1)) + dS/da] with S the series
sum (no exponentials, so it stays finite for tiny samples), in the
continued-fraction region x [h (log x - digamma(a)) + dh/da] with h the
fraction, dh/da by a central difference.
"""
import tensorplay as tp

_TINY = 1e-300
_EPS = 1e-16
_CF_EPS = 1e-15  # a fraction step within a few ulps of 1 has converged (1e-16 is below float64 eps)
_MAX_ITER = 20000
_CHECK_EVERY = 16


def _series(a, x):
    """S = sum_n x^n / ((a+1)...(a+n)) and dS/da."""
    term = tp.ones_like(x)
    dterm = tp.zeros_like(x)
    s, ds = term.clone(), dterm.clone()
    n = 0
    while n < _MAX_ITER:
        for _ in range(_CHECK_EVERY):
            n += 1
            r = x / (a + n)
            dterm = (dterm - term / (a + n)) * r
            term = term * r
            s = s + term
            ds = ds + dterm
        if not bool((term > _EPS * s).any()):
            break
    return s, ds


def _cfrac(a, x):
    """h with Q(a, x) = exp(-x + a log x - lgamma(a)) * h."""
    b = x + 1 - a
    c = tp.full_like(x, 1 / _TINY)
    d = 1 / b
    h = d.clone()
    i = 0
    while i < _MAX_ITER:
        done = None
        for _ in range(_CHECK_EVERY):
            i += 1
            an = -i * (i - a)
            b = b + 2
            d = an * d + b
            d = tp.where(d.abs() < _TINY, tp.full_like(d, _TINY), d)
            c = b + an / c
            c = tp.where(c.abs() < _TINY, tp.full_like(c, _TINY), c)
            d = 1 / d
            delta = d * c
            h = h * delta
            done = delta
        if not bool(((done - 1).abs() > _CF_EPS).any()):
            break
    return h


def _regions(a, x):
    use_series = x < a + 1
    xs = tp.where(use_series, x, tp.zeros_like(x))          # the series at 0 is trivially 1
    xc = tp.where(use_series, a + 2, x)                     # a point where the fraction converges
    return use_series, xs, xc


def igamma(a, x):
    """Regularized lower incomplete gamma P(a, x) (float64 in, float64 out)."""
    a, x = tp.broadcast_tensors(a, x)
    use_series, xs, xc = _regions(a, x)
    s, _ = _series(a, xs)
    log_xs = tp.log(tp.where(xs > 0, xs, tp.ones_like(xs)))
    p_series = tp.where(xs > 0, tp.exp(a * log_xs - xs - tp.lgamma(a + 1)) * s, tp.zeros_like(xs))
    h = _cfrac(a, xc)
    q = tp.exp(-xc + a * tp.log(xc) - tp.lgamma(a)) * h
    return tp.where(use_series, p_series, 1 - q)


def standard_gamma_grad(a, x):
    """d x / d a for x ~ Gamma(a, 1) held at the same quantile (implicit reparameterization)."""
    a, x = tp.broadcast_tensors(a.to(tp.float64), x.to(tp.float64))
    use_series, xs, xc = _regions(a, x)
    s, ds = _series(a, xs)
    log_xs = tp.log(tp.where(xs > 0, xs, tp.ones_like(xs)))
    g_series = -(xs / a) * (s * (log_xs - tp.digamma(a + 1)) + ds)
    step = 1e-5 * a
    dh = (_cfrac(a + step, xc) - _cfrac(a - step, xc)) / (2 * step)
    g_cf = xc * (_cfrac(a, xc) * (tp.log(xc) - tp.digamma(a)) + dh)
    return tp.where(use_series, g_series, g_cf)
