"""Independent: reinterprets the rightmost batch dims of a distribution as
event dims, so log_prob sums over them (e.g. a diagonal Normal as one
multivariate event)."""
from . import constraints
from .distribution import Distribution
from .utils import sum_rightmost


class Independent(Distribution):
    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n = int(reinterpreted_batch_ndims)
        bshape = tuple(base_distribution.batch_shape)
        if n < 0 or n > len(bshape):
            raise ValueError(f"Independent: reinterpreted_batch_ndims ({n}) must be between 0 and "
                             f"len(base_distribution.batch_shape) = {len(bshape)} (batch_shape {bshape})")
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        cut = len(bshape) - n
        super().__init__(bshape[:cut], bshape[cut:] + tuple(base_distribution.event_shape),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Independent, _instance)
        batch_shape = tuple(batch_shape)
        n = self.reinterpreted_batch_ndims
        new.base_dist = self.base_dist.expand(batch_shape + self._event_shape[:n])
        new.reinterpreted_batch_ndims = n
        return self._finish_expand(new, Independent, batch_shape)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        return False if self.reinterpreted_batch_ndims > 0 else self.base_dist.has_enumerate_support

    @constraints.dependent_property
    def support(self):
        s = self.base_dist.support
        return constraints.independent(s, self.reinterpreted_batch_ndims) if self.reinterpreted_batch_ndims else s

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
