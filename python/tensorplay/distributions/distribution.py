"""Distribution: the base class every family derives from.

Shapes follow PyTorch: a sample has shape sample_shape + batch_shape +
event_shape; log_prob reduces the event dims and returns batch-shaped values.
Validation (on by default, like PyTorch's) checks the parameters against
`arg_constraints` at construction and samples against `support` in log_prob,
raising ValueError that names the distribution, the argument and its shape.
"""
import tensorplay as tp

from . import constraints
from .utils import lazy_property


def _as_shape(shape):
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(s) for s in shape)


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError("set_default_validate_args expects True or False")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = _as_shape(batch_shape)
        self._event_shape = _as_shape(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                # A lazily derived parameter (logits from probs) is not checked:
                # only the one the user gave is.
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue
                value = getattr(self, param)
                ok = constraint.check(value)
                if not bool(ok.all()):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {self!r} to satisfy the constraint {constraint!r}, "
                        f"but found invalid values:\n{value}")
        super().__init__()

    # -- shapes ---------------------------------------------------------------
    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def _extended_shape(self, sample_shape=()):
        return _as_shape(sample_shape) + self._batch_shape + self._event_shape

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError(f"{type(self).__name__} does not implement expand")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom __init__ "
                "must also define a custom .expand()")
        return self.__new__(type(self)) if _instance is None else _instance

    def _finish_expand(self, new, cls, batch_shape):
        super(cls, new).__init__(batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    # -- declarations -----------------------------------------------------------
    @property
    def arg_constraints(self):
        raise NotImplementedError

    @property
    def support(self):
        raise NotImplementedError

    # -- moments -------------------------------------------------------------------
    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    # -- sampling and densities ----------------------------------------------------
    def sample(self, sample_shape=()):
        with tp.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} does not support reparameterized sampling")

    def sample_n(self, n):
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def enumerate_support(self, expand=True):
        raise NotImplementedError(f"{type(self).__name__} does not implement enumerate_support")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self):
        return tp.exp(self.entropy())

    def _validate_sample(self, value):
        if not tp.is_tensor(value):
            raise ValueError(f"{type(self).__name__}: the value must be a Tensor, got {type(value).__name__}")
        event_dim = len(self._event_shape)
        if value.dim() < event_dim or tuple(value.shape[value.dim() - event_dim:]) != self._event_shape:
            raise ValueError(
                f"{type(self).__name__}: the rightmost dims of value (shape {tuple(value.shape)}) must "
                f"match event_shape {self._event_shape}")
        actual = tuple(value.shape[:value.dim() - event_dim])
        expected = self._batch_shape
        for a, e in zip(reversed(actual), reversed(expected)):
            if a != 1 and e != 1 and a != e:
                raise ValueError(
                    f"{type(self).__name__}: value with shape {tuple(value.shape)} is not broadcastable "
                    f"with batch_shape+event_shape {expected + self._event_shape}")
        support = self.support
        if support is None or constraints.is_dependent(support):
            return
        if not bool(support.check(value).all()):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                f"within the support ({support!r}) of the distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self):
        try:
            names = [k for k in self.arg_constraints if k in self.__dict__]
        except NotImplementedError:
            names = []
        args = ", ".join(
            f"{k}: {self.__dict__[k] if self.__dict__[k].numel() == 1 else tuple(self.__dict__[k].shape)}"
            for k in names)
        return f"{type(self).__name__}({args})"
