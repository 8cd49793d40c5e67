"""Positive and extreme-value families with closed-form inverse CDFs:
HalfNormal, HalfCauchy, Gumbel, Weibull, Pareto (all reparameterized)."""
import math

import tensorplay as tp

from . import constraints
from .distribution import Distribution
from .normal import Cauchy, Normal
from .utils import broadcast_all

_EULER = 0.57721566490153286060


def _uniform_open(d, sample_shape, like):
    """u in (0, 1): both ends excluded so log(u) and log(1 - u) stay finite."""
    f = tp.finfo(like.dtype)
    u = tp.rand(d._extended_shape(sample_shape), dtype=like.dtype, device=like.device)
    return u.clamp(min=f.tiny, max=1 - f.eps)


class _Folded(Distribution):
    """|X| for X symmetric about 0 with the given scale (X's density doubled on x >= 0)."""
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _base_cls = None

    def __init__(self, scale, validate_args=None):
        self.scale, = broadcast_all(scale, owner=type(self).__name__)
        self.base_dist = self._base_cls(tp.zeros_like(self.scale), self.scale, validate_args=False)
        super().__init__(tuple(self.scale.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        cls = type(self)
        new = self._get_checked_instance(cls, _instance)
        batch_shape = tuple(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.base_dist = self.base_dist.expand(batch_shape)
        return self._finish_expand(new, _Folded, batch_shape)

    @property
    def mode(self):
        return tp.zeros_like(self.scale)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape).abs()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return tp.where(value >= 0, lp, tp.full_like(lp, -math.inf))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_Folded):
    _base_cls = Normal

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)


class HalfCauchy(_Folded):
    _base_cls = Cauchy

    @property
    def mean(self):
        return tp.full_like(self.scale, math.inf)

    @property
    def variance(self):
        return tp.full_like(self.scale, math.inf)


class Gumbel(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale, owner=type(self).__name__)
        super().__init__(tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gumbel, _instance)
        batch_shape = tuple(batch_shape)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        return self._finish_expand(new, Gumbel, batch_shape)

    @property
    def mean(self):
        return self.loc + self.scale * _EULER

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=()):
        u = _uniform_open(self, sample_shape, self.loc)
        return self.loc - self.scale * tp.log(-tp.log(u))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return tp.exp(-tp.exp(-(value - self.loc) / self.scale))

    def icdf(self, value):
        return self.loc - self.scale * tp.log(-tp.log(value))

    def entropy(self):
        return self.scale.log() + (1 + _EULER)


class Weibull(Distribution):
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration, owner=type(self).__name__)
        super().__init__(tuple(self.scale.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        batch_shape = tuple(batch_shape)
        new.scale, new.concentration = self.scale.expand(batch_shape), self.concentration.expand(batch_shape)
        return self._finish_expand(new, Weibull, batch_shape)

    @property
    def mean(self):
        return self.scale * tp.exp(tp.lgamma(1 + self.concentration.reciprocal()))

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k).clamp(min=0) ** k.reciprocal()

    @property
    def variance(self):
        k = self.concentration
        return self.scale.pow(2) * (tp.exp(tp.lgamma(1 + 2 / k)) - tp.exp(2 * tp.lgamma(1 + 1 / k)))

    def rsample(self, sample_shape=()):
        u = _uniform_open(self, sample_shape, self.scale)
        return self.scale * (-tp.log1p(-u)) ** self.concentration.reciprocal()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        k, z = self.concentration, value / self.scale
        return tp.log(k / self.scale) + (k - 1) * tp.log(z) - z ** k

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -tp.expm1(-(value / self.scale) ** self.concentration)

    def icdf(self, value):
        return self.scale * (-tp.log1p(-value)) ** self.concentration.reciprocal()

    def entropy(self):
        k = self.concentration
        return _EULER * (1 - k.reciprocal()) + tp.log(self.scale / k) + 1


class Pareto(Distribution):
    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}
    has_rsample = True

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha, owner=type(self).__name__)
        super().__init__(tuple(self.scale.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Pareto, _instance)
        batch_shape = tuple(batch_shape)
        new.scale, new.alpha = self.scale.expand(batch_shape), self.alpha.expand(batch_shape)
        return self._finish_expand(new, Pareto, batch_shape)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)
        return tp.where(self.alpha > 1, a * self.scale / (a - 1), tp.full_like(a, math.inf))

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        finite = self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))
        return tp.where(self.alpha > 2, finite, tp.full_like(a, math.inf))

    def rsample(self, sample_shape=()):
        u = _uniform_open(self, sample_shape, self.scale)
        return self.scale * tp.exp(-tp.log1p(-u) / self.alpha)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.alpha.log() + self.alpha * self.scale.log() - (self.alpha + 1) * value.log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (self.scale / value) ** self.alpha

    def icdf(self, value):
        return self.scale * (1 - value) ** (-self.alpha.reciprocal())

    def entropy(self):
        return tp.log(self.scale / self.alpha) + self.alpha.reciprocal() + 1
