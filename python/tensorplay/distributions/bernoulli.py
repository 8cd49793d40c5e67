"""Bernoulli, Geometric and Binomial: the binary-probability families,
parameterized by exactly one of `probs` or `logits` (the other is derived
lazily)."""
import math

import tensorplay as tp

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits


def _bce_with_logits(logits, target):
    # -[t log sigmoid(l) + (1 - t) log sigmoid(-l)], stable for large |l|
    return tp.clamp(logits, min=0) - logits * target + tp.log1p(tp.exp(-logits.abs()))


def _one_of(name, probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError(f"{name}: either `probs` or `logits` must be specified, but not both")


class _BinaryProbs(Distribution):
    """probs/logits bookkeeping shared by the binary families."""

    def _set_probs(self, probs, logits, *extra):
        if probs is not None:
            vals = broadcast_all(probs, *extra, owner=type(self).__name__)
            self.probs = vals[0]
        else:
            vals = broadcast_all(logits, *extra, owner=type(self).__name__)
            self.logits = vals[0]
        self._param = vals[0]
        return vals[1:]

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def _expand_probs(self, new, batch_shape):
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits


class Bernoulli(_BinaryProbs):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of("Bernoulli", probs, logits)
        self._set_probs(probs, logits)
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = tuple(batch_shape)
        self._expand_probs(new, batch_shape)
        return self._finish_expand(new, Bernoulli, batch_shape)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return tp.where(self.probs == 0.5, tp.full_like(mode, math.nan), mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with tp.no_grad():
            return tp.bernoulli(self.probs.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value, owner=type(self).__name__)
        return -_bce_with_logits(logits, value)

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand=True):
        values = tp.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(((2,) + self._batch_shape)) if expand else values


class Geometric(_BinaryProbs):
    """Number of failures before the first success."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of("Geometric", probs, logits)
        self._set_probs(probs, logits)
        super().__init__(tuple(self._param.shape), validate_args=validate_args)
        if self._validate_args and probs is not None and not bool((self.probs > 0).all()):
            raise ValueError(f"Geometric: probs (shape {tuple(self.probs.shape)}) must be in (0, 1]")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = tuple(batch_shape)
        self._expand_probs(new, batch_shape)
        return self._finish_expand(new, Geometric, batch_shape)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return tp.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        with tp.no_grad():
            shape = self._extended_shape(sample_shape)
            tiny = tp.finfo(self.probs.dtype).tiny
            u = tp.empty(shape, dtype=self.probs.dtype, device=self.probs.device).uniform_(tiny, 1)
            return (u.log() / tp.log1p(-self.probs)).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs, owner=type(self).__name__)
        # p == 1 puts all mass on 0; 0 * log(0) must read as 0 there.
        fail = tp.where((probs == 1) & (value == 0), tp.zeros_like(probs), value * tp.log1p(-probs))
        return fail + self.probs.log()

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs) / self.probs


class Binomial(_BinaryProbs):
    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _one_of("Binomial", probs, logits)
        self.total_count, = self._set_probs(probs, logits, total_count)
        self.total_count = self.total_count.to(self._param.dtype)
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Binomial, _instance)
        batch_shape = tuple(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        self._expand_probs(new, batch_shape)
        return self._finish_expand(new, Binomial, batch_shape)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with tp.no_grad():
            shape = self._extended_shape(sample_shape)
            return tp.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, k, l = self.total_count, value, self.logits
        log_choose = tp.lgamma(n + 1) - tp.lgamma(k + 1) - tp.lgamma(n - k + 1)
        # k log p + (n - k) log(1 - p) = k l - n softplus(l); the max form keeps
        # it finite for |l| large.
        softplus = tp.clamp(l, min=0) + tp.log1p(tp.exp(-l.abs()))
        return log_choose + k * l - n * softplus

    def entropy(self):
        n_max = int(self.total_count.max())
        if not bool((self.total_count == n_max).all()):
            raise NotImplementedError("Binomial.entropy needs one total_count for the whole batch")
        values = self.enumerate_support(False)
        lp = self.log_prob(values)
        return -(lp.exp() * lp).sum(0)

    def enumerate_support(self, expand=True):
        n_max = int(self.total_count.max())
        if not bool((self.total_count == n_max).all()):
            raise NotImplementedError("Binomial.enumerate_support needs one total_count for the whole batch")
        values = tp.arange(1 + n_max, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(((-1,) + self._batch_shape)) if expand else values
