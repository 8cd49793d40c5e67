"""Gamma, Exponential and Chi2 (a Gamma with rate 1/2)."""

import tensorplay as tp

from . import constraints
from ._igamma import igamma
from ._samplers import rsample_standard_gamma, standard_gamma
from .distribution import Distribution
from .utils import broadcast_all


class Gamma(Distribution):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate, owner=type(self).__name__)
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
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
        shape = self._extended_shape(sample_shape)
        draw = rsample_standard_gamma(self.concentration.expand(shape))
        return (draw / self.rate.expand(shape)).clamp(min=tp.finfo(draw.dtype).tiny)

    def sample(self, sample_shape=()):
        with tp.no_grad():
            shape = self._extended_shape(sample_shape)
            return (standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)).clamp(
                min=tp.finfo(self.rate.dtype).tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration, self.rate
        return tp.xlogy(a, b) + tp.xlogy(a - 1, value) - b * value - tp.lgamma(a)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return _GammaCDF.apply(self.concentration, self.rate * value)

    def entropy(self):
        a = self.concentration
        return a - tp.log(self.rate) + tp.lgamma(a) + (1.0 - a) * tp.digamma(a)


class _GammaCDF(tp.autograd.Function):
    """P(a, x) evaluated in float64; differentiable in x (the density), not in a,
    like PyTorch's igamma."""

    @staticmethod
    def forward(ctx, a, x):
        a, x = tp.broadcast_tensors(a, x)
        ctx.save_for_backward(a, x)
        return igamma(a.detach().to(tp.float64), x.detach().to(tp.float64).clamp(min=0)).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        a, x = ctx.saved_tensors
        if ctx.needs_input_grad[0]:
            raise NotImplementedError("Gamma.cdf: the derivative w.r.t. the concentration is not implemented")
        pdf = tp.exp(tp.xlogy(a - 1, x) - x - tp.lgamma(a))
        return None, grad * pdf


class Chi2(Gamma):
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        df, = broadcast_all(df, owner=type(self).__name__)
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
        self.rate, = broadcast_all(rate, owner=type(self).__name__)
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Exponential, _instance)
        batch_shape = tuple(batch_shape)
        new.rate = self.rate.expand(batch_shape)
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
