"""Poisson(rate), sampled with TensorPlay's native tp.poisson."""
import tensorplay as tp

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all


class Poisson(Distribution):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        self.rate, = broadcast_all(rate, owner=type(self).__name__)
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = tuple(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        return self._finish_expand(new, Poisson, batch_shape)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        with tp.no_grad():
            return tp.poisson(self.rate.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value, owner=type(self).__name__)
        return tp.xlogy(value, rate) - rate - tp.lgamma(value + 1)
