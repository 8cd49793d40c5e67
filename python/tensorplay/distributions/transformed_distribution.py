"""TransformedDistribution: a base distribution pushed through bijections,
with log_prob by the change-of-variables formula; LogNormal as exp(Normal)."""
import tensorplay as tp

from . import constraints
from .distribution import Distribution
from .independent import Independent
from .normal import Normal
from .transforms import ComposeTransform, ExpTransform, Transform
from .utils import sum_rightmost


class TransformedDistribution(Distribution):
    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        elif not isinstance(transforms, list) or not all(isinstance(t, Transform) for t in transforms):
            raise ValueError("TransformedDistribution: transforms must be a Transform or a list of Transforms")
        self.transforms = transforms
        chain = ComposeTransform(transforms)
        base_event = len(base_distribution.event_shape)
        domain_event = chain.domain.event_dim
        if domain_event > base_event:
            # The transform mixes dims the base treats as batch: make them event dims.
            base_distribution = Independent(base_distribution, domain_event - base_event)
        self.base_dist = base_distribution
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = max(chain.codomain.event_dim, len(base_distribution.event_shape))
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(TransformedDistribution, _instance)
        batch_shape = tuple(batch_shape)
        extra = len(self._event_shape) - len(self.base_dist.event_shape)
        new.base_dist = self.base_dist.expand(batch_shape + self._event_shape[:extra] if extra else batch_shape)
        new.transforms = self.transforms
        return self._finish_expand(new, TransformedDistribution, batch_shape)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @constraints.dependent_property(is_discrete=False)
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        s = self.transforms[-1].codomain
        if len(self._event_shape) > s.event_dim:
            s = constraints.independent(s, len(self._event_shape) - s.event_dim)
        return s

    def sample(self, sample_shape=()):
        with tp.no_grad():
            x = self.base_dist.sample(sample_shape)
            for t in self.transforms:
                x = t(x)
            return x

    def rsample(self, sample_shape=()):
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self._event_shape)
        lp = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain.event_dim - t.codomain.event_dim
            lp = lp - sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.domain.event_dim)
            y = x
        return lp + sum_rightmost(self.base_dist.log_prob(y), event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value):
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        if isinstance(sign, int) and sign == 1:
            return value
        return sign * (value - 0.5) + 0.5

    def cdf(self, value):
        for t in reversed(self.transforms):
            value = t.inv(value)
        if self._validate_args:
            self.base_dist._validate_sample(value)
        return self._monotonize_cdf(self.base_dist.cdf(value))

    def icdf(self, value):
        value = self.base_dist.icdf(self._monotonize_cdf(value))
        for t in self.transforms:
            value = t(value)
        return value


class LogNormal(TransformedDistribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        super().__init__(Normal(loc, scale, validate_args=validate_args), ExpTransform(),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        return self.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self):
        s2 = self.scale.pow(2)
        return s2.expm1() * (2 * self.loc + s2).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc
