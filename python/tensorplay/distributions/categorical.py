"""Categorical over {0, ..., K-1} and its one-hot form."""
import math

import tensorplay as tp

from . import constraints
from .distribution import Distribution
from .utils import lazy_property, logits_to_probs, probs_to_logits


class Categorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Categorical: either `probs` or `logits` must be specified, but not both")
        param = probs if probs is not None else logits
        if not tp.is_tensor(param) or param.dim() < 1:
            raise ValueError("Categorical: `probs`/`logits` must be a tensor with at least one dimension")
        if probs is not None:
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(tuple(self._param.shape[:-1]), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = tuple(batch_shape)
        shape = batch_shape + (self._num_events,)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(shape)
            new._param = new.logits
        new._num_events = self._num_events
        return self._finish_expand(new, Categorical, batch_shape)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return tuple(self._param.shape)

    @property
    def mean(self):
        return tp.full(self._extended_shape(), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return tp.full(self._extended_shape(), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape=()):
        with tp.no_grad():
            sample_shape = tuple(sample_shape) if not isinstance(sample_shape, int) else (sample_shape,)
            n = math.prod(sample_shape)
            probs_2d = self.probs.reshape(-1, self._num_events)
            draws = tp.multinomial(probs_2d, n, True).transpose(0, 1)
            return draws.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = tp.broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        # -inf logits (zero probabilities) contribute 0, not nan.
        logits = self.logits.clamp(min=tp.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = tp.arange(self._num_events, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(((-1,) + self._batch_shape)) if expand else values


class OneHotCategorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = tuple(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        return self._finish_expand(new, OneHotCategorical, batch_shape)

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        return tp.nn.functional.one_hot(self.probs.argmax(-1), self._event_shape[0]).to(self.probs.dtype)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        idx = self._categorical.sample(sample_shape)
        return tp.nn.functional.one_hot(idx, self._event_shape[0]).to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self._event_shape[0]
        values = tp.eye(n, dtype=self.probs.dtype, device=self.probs.device)
        values = values.reshape((n,) + (1,) * len(self._batch_shape) + (n,))
        return values.expand(((n,) + self._batch_shape + (n,))) if expand else values
