"""Dirichlet and Beta (a two-component Dirichlet), sampled as normalized gammas."""
import tensorplay as tp

from . import constraints
from ._samplers import rsample_standard_gamma
from .distribution import Distribution
from .utils import broadcast_all


class Dirichlet(Distribution):
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if not tp.is_tensor(concentration) or concentration.dim() < 1:
            raise ValueError("Dirichlet: `concentration` must be a tensor with at least one dimension, got "
                             f"{getattr(concentration, 'shape', type(concentration).__name__)}")
        self.concentration = concentration
        shape = tuple(concentration.shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration = self.concentration.expand((batch_shape + self._event_shape))
        return self._finish_expand(new, Dirichlet, batch_shape)

    def rsample(self, sample_shape=()):
        # Normalized reparameterized gammas: the gradient reaches the
        # concentration through each gamma's implicit gradient.
        g = rsample_standard_gamma(self.concentration.expand(self._extended_shape(sample_shape)))
        out = g / g.sum(-1, keepdim=True)
        return out.clamp(min=tp.finfo(out.dtype).tiny, max=1 - tp.finfo(out.dtype).eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a = self.concentration
        return tp.xlogy(a - 1.0, value).sum(-1) + tp.lgamma(a.sum(-1)) - tp.lgamma(a).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        am1 = (self.concentration - 1).clamp(min=0.0)
        mode = am1 / am1.sum(-1, keepdim=True)
        # With every concentration below 1 the density is unbounded at every
        # vertex and the formula above is 0/0; PyTorch then reports the first
        # vertex, and so do we.
        corner = tp.zeros_like(mode)
        corner[..., 0] = 1
        all_small = (self.concentration < 1).all(-1, keepdim=True)
        return tp.where(all_small, corner, mode)

    @property
    def variance(self):
        a = self.concentration
        a0 = a.sum(-1, keepdim=True)
        return a * (a0 - a) / (a0.pow(2) * (a0 + 1))

    def entropy(self):
        a = self.concentration
        k = a.shape[-1]
        a0 = a.sum(-1)
        return (tp.lgamma(a).sum(-1) - tp.lgamma(a0) - (k - a0) * tp.digamma(a0)
                - ((a - 1.0) * tp.digamma(a)).sum(-1))


class Beta(Distribution):
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        c1, c0 = broadcast_all(concentration1, concentration0, owner=type(self).__name__)
        self._dirichlet = Dirichlet(tp.stack([c1, c0], -1), validate_args=validate_args)
        super().__init__(self._dirichlet.batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = tuple(batch_shape)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        return self._finish_expand(new, Beta, batch_shape)

    @property
    def concentration1(self):
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c1, c0 = self.concentration1, self.concentration0
        return (tp.xlogy(c1 - 1, value) + tp.xlogy(c0 - 1, 1 - value)
                - (tp.lgamma(c1) + tp.lgamma(c0) - tp.lgamma(c1 + c0)))

    def entropy(self):
        return self._dirichlet.entropy()
