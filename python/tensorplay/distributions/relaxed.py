"""Concrete / Gumbel-softmax relaxations of Bernoulli and OneHotCategorical:
reparameterized, so gradients reach the logits through the samples."""
import math

import tensorplay as tp

from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform, SigmoidTransform
from .utils import broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits


class LogitRelaxedBernoulli(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("LogitRelaxedBernoulli: either `probs` or `logits` must be specified, but not both")
        self.temperature = temperature
        if probs is not None:
            self.probs, = broadcast_all(probs, owner=type(self).__name__)
            self._param = self.probs
        else:
            self.logits, = broadcast_all(logits, owner=type(self).__name__)
            self._param = self.logits
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogitRelaxedBernoulli, _instance)
        batch_shape = tuple(batch_shape)
        new.temperature = self.temperature
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape))
                new._param = new.__dict__[name]
        return self._finish_expand(new, LogitRelaxedBernoulli, batch_shape)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        u = clamp_probs(tp.rand(shape, dtype=probs.dtype, device=probs.device))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value, owner=type(self).__name__)
        diff = logits - value * self.temperature
        t = tp.as_tensor(self.temperature, dtype=diff.dtype)
        return t.log() + diff - 2 * tp.nn.functional.softplus(diff)


class RelaxedBernoulli(TransformedDistribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)


class ExpRelaxedCategorical(Distribution):
    """Log of a RelaxedOneHotCategorical sample (values in log-simplex)."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        batch_shape = tuple(batch_shape)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        return self._finish_expand(new, ExpRelaxedCategorical, batch_shape)

    logits = property(lambda self: self._categorical.logits)
    probs = property(lambda self: self._categorical.probs)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        logits = self.logits.expand(shape)
        u = clamp_probs(tp.rand(shape, dtype=logits.dtype, device=logits.device))
        scores = (logits - (-u.log()).log()) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        k = self._event_shape[0]
        t = tp.as_tensor(self.temperature, dtype=value.dtype)
        log_scale = math.lgamma(k) + (k - 1) * t.log()
        score = self.logits - value * t
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)
