"""Gamma, Exponential and Chi2 (a Gamma with rate 1/2)."""
import math

import tensorplay as tp

from . import constraints
from ._samplers import standard_gamma
from .distribution import Distribution
from .utils import broadcast_all


def _no_shape_gradient(name, param):
    # Reparameterized gradients w.r.t. a gamma shape need the derivative of the
    # incomplete gamma function (implicit reparameterization), which TensorPlay
    # lacks; failing loudly beats returning a silently wrong zero gradient.
    if param.requires_grad and tp.is_grad_enabled():
        raise NotImplementedError(
            f"{name}.rsample: gradients w.r.t. the concentration are not implemented "
            "(needs the incomplete-gamma derivative); detach it or use sample()")


class Gamma(Distribution):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration = self.concentration.expand(*batch_shape)
        new.rate = self.rate.expand(*batch_shape)
        return self._finish_expand(new, Gamma, batch_shape)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        _no_shape_gradient(type(self).__name__, self.concentration)
        shape = self._extended_shape(sample_shape)
        draw = standard_gamma(self.concentration.detach().expand(*shape))
        return (draw / self.rate.expand(*shape)).clamp(min=tp.finfo(draw.dtype).tiny)

    def sample(self, sample_shape=()):
        with tp.no_grad():
            shape = self._extended_shape(sample_shape)
            return (standard_gamma(self.concentration.expand(*shape)) / self.rate.expand(*shape)).clamp(
                min=tp.finfo(self.rate.dtype).tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration, self.rate
        return tp.xlogy(a, b) + tp.xlogy(a - 1, value) - b * value - tp.lgamma(a)

    def entropy(self):
        a = self.concentration
        return a - tp.log(self.rate) + tp.lgamma(a) + (1.0 - a) * tp.digamma(a)


class Chi2(Gamma):
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        df, = broadcast_all(df)
        super().__init__(0.5 * df, tp.full_like(df, 0.5), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2


class Exponential(Distribution):
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        self.rate, = broadcast_all(rate)
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Exponential, _instance)
        batch_shape = tuple(batch_shape)
        new.rate = self.rate.expand(*batch_shape)
        return self._finish_expand(new, Exponential, batch_shape)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return tp.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        e = tp.empty(self._extended_shape(sample_shape), dtype=self.rate.dtype, device=self.rate.device)
        return e.exponential_() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - tp.exp(-self.rate * value)

    def icdf(self, value):
        return -tp.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - tp.log(self.rate)
