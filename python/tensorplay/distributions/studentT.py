"""Student's t with df degrees of freedom, location and scale."""
import math

import tensorplay as tp

from . import constraints
from ._samplers import rsample_standard_gamma
from .distribution import Distribution
from .utils import broadcast_all


class StudentT(Distribution):
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale, owner=type(self).__name__)
        super().__init__(tuple(self.df.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = tuple(batch_shape)
        new.df, new.loc, new.scale = (t.expand(batch_shape) for t in (self.df, self.loc, self.scale))
        return self._finish_expand(new, StudentT, batch_shape)

    @property
    def mean(self):
        return tp.where(self.df > 1, self.loc, tp.full_like(self.loc, math.nan))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        var = tp.where(df > 2, finite, tp.full_like(df, math.inf))
        return tp.where(df <= 1, tp.full_like(df, math.nan), var)

    def rsample(self, sample_shape=()):
        # t = X / sqrt(V / df) with X ~ N(0, 1), V ~ Chi2(df) = 2 * Gamma(df / 2).
        shape = self._extended_shape(sample_shape)
        x = tp.randn(shape, dtype=self.df.dtype, device=self.df.device)
        v = 2 * rsample_standard_gamma((0.5 * self.df).expand(shape))
        return self.loc + self.scale * x * tp.rsqrt(v / self.df)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + tp.lgamma(0.5 * self.df) - tp.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * tp.log1p(y ** 2.0 / self.df) - z

    def entropy(self):
        df = self.df
        lbeta = tp.lgamma(0.5 * df) + math.lgamma(0.5) - tp.lgamma(0.5 * (df + 1))
        return (self.scale.log() + 0.5 * (df + 1) * (tp.digamma(0.5 * (df + 1)) - tp.digamma(0.5 * df))
                + 0.5 * df.log() + lbeta)
