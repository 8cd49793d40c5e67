"""Multinomial counts, NegativeBinomial (a gamma-Poisson mixture) and
MixtureSameFamily (a categorical mixture of one batched family)."""
import math

import tensorplay as tp

from . import constraints
from ._samplers import standard_gamma
from .bernoulli import _BinaryProbs, _one_of
from .categorical import Categorical
from .distribution import Distribution


class _MultinomialSupport(constraints.Constraint):
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return ((value >= 0) & (value % 1 == 0)).all(-1) & (value.sum(-1) <= self.upper_bound)


class Multinomial(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("Multinomial: inhomogeneous total_count is not supported (pass an int)")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        batch_shape = self._categorical.batch_shape
        super().__init__(batch_shape, self._categorical.param_shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = tuple(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        return self._finish_expand(new, Multinomial, batch_shape)

    @property
    def support(self):
        return _MultinomialSupport(self.total_count)

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def entropy(self):
        # H = -log n! - n sum p log p + sum_i E[log x_i!], each x_i ~ Binomial(n, p_i)
        from .bernoulli import Binomial
        n = self.total_count
        marginals = Binomial(n, probs=self.probs, validate_args=False)
        support = marginals.enumerate_support(expand=False)      # (n + 1, 1, ..., 1)
        expected_log_fact = (marginals.log_prob(support).exp() * tp.lgamma(support + 1)).sum(0).sum(-1)
        return n * self._categorical.entropy() - math.lgamma(n + 1) + expected_log_fact

    def sample(self, sample_shape=()):
        sample_shape = (sample_shape,) if isinstance(sample_shape, int) else tuple(sample_shape)
        k = self._event_shape[0]
        with tp.no_grad():
            draws = self._categorical.sample((self.total_count,) + sample_shape)
            counts = tp.nn.functional.one_hot(draws, k).sum(0)
            return counts.to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = tp.broadcast_tensors(self.logits, value)
        # 0 * (-inf) for a zero-probability category that has no counts is 0.
        logits = tp.where((value == 0) & tp.isinf(logits), tp.zeros_like(logits), logits)
        return (tp.lgamma(value.sum(-1) + 1) - tp.lgamma(value + 1).sum(-1) + (logits * value).sum(-1))


class NegativeBinomial(_BinaryProbs):
    """Number of successes (probability probs each) before total_count failures."""
    arg_constraints = {"total_count": constraints.greater_than_eq(0), "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        _one_of("NegativeBinomial", probs, logits)
        self.total_count, = self._set_probs(probs, logits, total_count)
        self.total_count = self.total_count.to(self._param.dtype)
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(NegativeBinomial, _instance)
        batch_shape = tuple(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        self._expand_probs(new, batch_shape)
        return self._finish_expand(new, NegativeBinomial, batch_shape)

    @property
    def mean(self):
        return self.total_count * tp.exp(self.logits)

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / tp.sigmoid(-self.logits)

    def sample(self, sample_shape=()):
        with tp.no_grad():
            shape = self._extended_shape(sample_shape)
            # Poisson with a Gamma(total_count, rate = exp(-logits)) rate
            rate = standard_gamma(self.total_count.expand(shape)) * tp.exp(self.logits.expand(shape))
            return tp.poisson(rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logsig = tp.nn.functional.logsigmoid
        unnorm = self.total_count * logsig(-self.logits) + value * logsig(self.logits)
        norm = -tp.lgamma(self.total_count + value) + tp.lgamma(1.0 + value) + tp.lgamma(self.total_count)
        # total_count + value == 0 is the certain event (0 successes of a 0-failure run)
        norm = tp.where(self.total_count + value == 0, tp.zeros_like(norm), norm)
        return unnorm - norm


class MixtureSameFamily(Distribution):
    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError("MixtureSameFamily: mixture_distribution must be a Categorical, got "
                             f"{type(mixture_distribution).__name__}")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("MixtureSameFamily: component_distribution must be a Distribution")
        mb, cb = tuple(mixture_distribution.batch_shape), tuple(component_distribution.batch_shape)
        if len(cb) < 1:
            raise ValueError("MixtureSameFamily: component_distribution needs a batch dim for the components")
        k = mixture_distribution._num_events
        if cb[-1] != k:
            raise ValueError(f"MixtureSameFamily: the component batch shape {cb} must end with the number of "
                             f"mixture components ({k})")
        for a, b in zip(reversed(mb), reversed(cb[:-1])):
            if a != 1 and b != 1 and a != b:
                raise ValueError(f"MixtureSameFamily: mixture batch shape {mb} does not broadcast with the "
                                 f"component batch shape {cb[:-1]}")
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        self._num_component = k
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cb[:-1], tuple(component_distribution.event_shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        batch_shape = tuple(batch_shape)
        new._component_distribution = self._component_distribution.expand(batch_shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component, new._event_ndims = self._num_component, self._event_ndims
        return self._finish_expand(new, MixtureSameFamily, batch_shape)

    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)

    @constraints.dependent_property
    def support(self):
        return self._component_distribution.support

    def _pad_probs(self):
        p = self._mixture_distribution.probs
        return p.reshape(tuple(p.shape) + (1,) * self._event_ndims)

    @property
    def mean(self):
        return (self._pad_probs() * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        # law of total variance: E[Var] + Var[E]
        p = self._pad_probs()
        d = -1 - self._event_ndims
        comp_mean = self._component_distribution.mean
        mean = (p * comp_mean).sum(d)
        within = (p * self._component_distribution.variance).sum(d)
        between = (p * (comp_mean - mean.unsqueeze(d)).pow(2)).sum(d)
        return within + between

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def cdf(self, x):
        return (self._component_distribution.cdf(self._pad(x)) * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        lp = self._component_distribution.log_prob(self._pad(x))
        log_mix = tp.log_softmax(self._mixture_distribution.logits, -1)
        return tp.logsumexp(lp + log_mix, -1)

    def sample(self, sample_shape=()):
        sample_shape = (sample_shape,) if isinstance(sample_shape, int) else tuple(sample_shape)
        with tp.no_grad():
            which = self._mixture_distribution.sample(sample_shape)          # S + B
            comps = self._component_distribution.sample(sample_shape)        # S + B + (k,) + E
            es = self._event_shape
            idx = which.reshape(tuple(which.shape) + (1,) + (1,) * len(es))
            idx = idx.expand(tuple(which.shape) + (1,) + es)
            out = comps.gather(len(sample_shape) + len(self._batch_shape), idx)
            return out.squeeze(len(sample_shape) + len(self._batch_shape))

    def __repr__(self):
        return (f"MixtureSameFamily(\n  {self._mixture_distribution!r},\n  {self._component_distribution!r})")
