"""KL divergence KL(p || q) with a registry of closed forms.

`register_kl(P, Q)` adds an implementation; `kl_divergence` picks the most
specific registered pair for the argument types (by MRO distance), so a
subclass inherits its parent's formula unless it registers its own."""
import math

import tensorplay as tp

from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical
from .dirichlet import Beta, Dirichlet
from .gamma import Exponential, Gamma
from .independent import Independent
from .multivariate_normal import MultivariateNormal
from .normal import Laplace, Normal
from .poisson import Poisson
from .uniform import Uniform
from .utils import sum_rightmost

_KL_REGISTRY = {}
_KL_MEMO = {}


def register_kl(type_p, type_q):
    if not isinstance(type_p, type) or not isinstance(type_q, type):
        raise TypeError("register_kl expects two Distribution subclasses")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMO.clear()
        return fn
    return decorator


def _dispatch(type_p, type_q):
    best, best_key = None, None
    for (sp, sq), fn in _KL_REGISTRY.items():
        if issubclass(type_p, sp) and issubclass(type_q, sq):
            key = (type_p.__mro__.index(sp), type_q.__mro__.index(sq))
            if best_key is None or key < best_key:
                best, best_key = fn, key
    return best


def kl_divergence(p, q):
    try:
        fn = _KL_MEMO[type(p), type(q)]
    except KeyError:
        fn = _KL_MEMO[type(p), type(q)] = _dispatch(type(p), type(q))
    if fn is None:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p of type {type(p).__name__} and q of type {type(q).__name__}")
    return fn(p, q)


def _inf_where(cond, value):
    return tp.where(cond, tp.full_like(value, math.inf), value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    return -scale_ratio.log() + loc_abs_diff / q.scale + scale_ratio * tp.exp(-loc_abs_diff / p.scale) - 1


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return rate_ratio - 1 - rate_ratio.log()


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    return (q.concentration * tp.log(p.rate / q.rate) + tp.lgamma(q.concentration) - tp.lgamma(p.concentration)
            + (p.concentration - q.concentration) * tp.digamma(p.concentration)
            + (q.rate - p.rate) * (p.concentration / p.rate))


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    p1, p0, q1, q0 = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    ps, qs = p1 + p0, q1 + q0
    return (tp.lgamma(q1) + tp.lgamma(q0) + tp.lgamma(ps) - tp.lgamma(p1) - tp.lgamma(p0) - tp.lgamma(qs)
            + (p1 - q1) * tp.digamma(p1) + (p0 - q0) * tp.digamma(p0) + (qs - ps) * tp.digamma(ps))


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    pa, qa = p.concentration, q.concentration
    sp, sq = pa.sum(-1), qa.sum(-1)
    t4 = tp.digamma(pa) - tp.digamma(sp).unsqueeze(-1)
    return (tp.lgamma(sp) - tp.lgamma(sq) - (tp.lgamma(pa) - tp.lgamma(qa)).sum(-1) + ((pa - qa) * t4).sum(-1))


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    sp = tp.nn.functional.softplus
    t1 = p.probs * (sp(-q.logits) - sp(-p.logits))
    t1 = tp.where(p.probs == 0, tp.zeros_like(t1), _inf_where(q.probs == 0, t1))
    t2 = (1 - p.probs) * (sp(q.logits) - sp(p.logits))
    t2 = tp.where(p.probs == 1, tp.zeros_like(t2), _inf_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _inf_where((q.probs == 0).expand(t.shape), t)
    t = tp.where((p.probs == 0).expand(t.shape), tp.zeros_like(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL(MultivariateNormal || MultivariateNormal): event shapes differ "
                         f"({p.event_shape} vs {q.event_shape})")
    n = p.event_shape[0]
    Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_logdet = q._half_log_det() - p._half_log_det()
    batch = tuple(tp.broadcast_shapes(tuple(Lp.shape[:-2]), tuple(Lq.shape[:-2])))
    # tr(Sq^-1 Sp) = ||Lq^-1 Lp||_F^2
    m = tp.linalg.solve_triangular(Lq.expand((batch + (n, n))), Lp.expand((batch + (n, n))), upper=False)
    trace = m.pow(2).sum(-1).sum(-1)
    from .multivariate_normal import _batch_mahalanobis
    maha = _batch_mahalanobis(Lq, q.loc - p.loc)
    return half_logdet + 0.5 * (trace + maha - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL(Independent || Independent) needs equal reinterpreted_batch_ndims")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
