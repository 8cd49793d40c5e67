"""Uniform(low, high) on the half-open interval [low, high)."""
import math

import tensorplay as tp

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all


class Uniform(Distribution):
    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high, owner=type(self).__name__)
        super().__init__(tuple(self.low.shape), validate_args=validate_args)
        if self._validate_args and not bool((self.low < self.high).all()):
            raise ValueError(f"Uniform: low must be less than high (low shape {tuple(self.low.shape)}, "
                             f"high shape {tuple(self.high.shape)})")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Uniform, _instance)
        batch_shape = tuple(batch_shape)
        new.low, new.high = self.low.expand(batch_shape), self.high.expand(batch_shape)
        return self._finish_expand(new, Uniform, batch_shape)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.half_open_interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return self.high * math.nan

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        u = tp.rand(self._extended_shape(sample_shape), dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = ((self.low <= value) & (self.high > value)).to(self.low.dtype)
        return tp.log(inside) - tp.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return tp.log(self.high - self.low)
