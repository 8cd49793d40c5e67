"""Normal and the other location-scale families with closed forms
(Laplace, Cauchy), all reparameterized as loc + scale * noise."""
import math

import tensorplay as tp

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, _eps


class _LocScale(Distribution):
    """Shared constructor / expand for families parameterized by (loc, scale)."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale, owner=type(self).__name__)
        super().__init__(tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        cls = type(self)
        new = self._get_checked_instance(cls, _instance)
        batch_shape = tuple(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        return self._finish_expand(new, _LocScale, batch_shape)

    @property
    def mode(self):
        return self.loc

    def _uniform(self, sample_shape, low=0.0):
        shape = self._extended_shape(sample_shape)
        return tp.empty(shape, dtype=self.loc.dtype, device=self.loc.device).uniform_(low, 1.0)


class Normal(_LocScale):
    @property
    def mean(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def rsample(self, sample_shape=()):
        eps = tp.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.scale ** 2) - self.scale.log() - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + tp.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        return self.loc + self.scale * tp.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


class Laplace(_LocScale):
    @property
    def mean(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=()):
        # Inverse CDF on u in (-1, 1); the open lower end keeps log1p finite.
        u = self._uniform(sample_shape) * 2 - 1
        u = u.clamp(min=-1 + _eps(u))
        return self.loc - self.scale * u.sign() * tp.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -tp.log(2 * self.scale) - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * tp.expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        t = value - 0.5
        return self.loc - self.scale * t.sign() * tp.log1p(-2 * t.abs())

    def entropy(self):
        return 1 + tp.log(2 * self.scale)


class Cauchy(_LocScale):
    @property
    def mean(self):
        return tp.full(self._extended_shape(), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def variance(self):
        return tp.full(self._extended_shape(), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape=()):
        u = self._uniform(sample_shape)
        return self.loc + self.scale * tp.tan(math.pi * (u - 0.5))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - tp.log1p(((value - self.loc) / self.scale) ** 2)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return tp.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return tp.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
