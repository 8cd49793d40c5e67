"""Bijective transforms for TransformedDistribution.

Each transform knows its forward map, inverse, log|det J| of the forward map
(elementwise for event_dim 0, summed over the event dims otherwise), its
domain/codomain constraints and the sign of its derivative (for cdf)."""
import math
import numbers

import tensorplay as tp

from . import constraints
from .utils import sum_rightmost, _eps


class Transform:
    bijective = False
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("Transform: cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached = None  # (x, y) of the last call when caching

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("please use either .domain.event_dim or .codomain.event_dim")

    @property
    def sign(self):
        raise NotImplementedError(f"{type(self).__name__} has no sign")

    @property
    def inv(self):
        return _InverseTransform(self)

    def __call__(self, x):
        if self._cache_size and self._cached is not None and self._cached[0] is x:
            return self._cached[1]
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def _inv_call(self, y):
        if self._cache_size and self._cached is not None and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} is not invertible")

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __eq__(self, other):
        return self is other

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    domain = property(lambda self: self._inv.codomain)
    codomain = property(lambda self: self._inv.domain)
    bijective = property(lambda self: self._inv.bijective)
    sign = property(lambda self: self._inv.sign)

    @property
    def inv(self):
        return self._inv

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def __repr__(self):
        return f"_InverseTransform({self._inv!r})"


class ComposeTransform(Transform):
    """Applies `parts` left to right."""

    def __init__(self, parts, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    @property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        dom = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for p in reversed(self.parts):
            event_dim += p.domain.event_dim - p.codomain.event_dim
            event_dim = max(event_dim, p.domain.event_dim)
        if event_dim > dom.event_dim:
            dom = constraints.independent(dom, event_dim - dom.event_dim)
        return dom

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        cod = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for p in self.parts:
            event_dim += p.codomain.event_dim - p.domain.event_dim
            event_dim = max(event_dim, p.codomain.event_dim)
        if event_dim > cod.event_dim:
            cod = constraints.independent(cod, event_dim - cod.event_dim)
        return cod

    @property
    def sign(self):
        s = 1
        for p in self.parts:
            s = s * p.sign
        return s

    @property
    def inv(self):
        return ComposeTransform([p.inv for p in reversed(self.parts)])

    def __call__(self, x):
        for p in self.parts:
            x = p(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return tp.zeros_like(x)
        terms = []
        event_dim = self.domain.event_dim
        for p in self.parts:
            y_p = p(x)
            terms.append(sum_rightmost(p.log_abs_det_jacobian(x, y_p), event_dim - p.domain.event_dim))
            x = y_p
            event_dim += p.codomain.event_dim - p.domain.event_dim
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        return total

    def __repr__(self):
        return "ComposeTransform(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


class ExpTransform(Transform):
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = 1

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    @property
    def sign(self):
        return self.exponent.sign() if tp.is_tensor(self.exponent) else (1 if self.exponent > 0 else -1)

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        e = self.exponent
        return (e * y / x).abs().log() if tp.is_tensor(e) else (abs(e) * y / x).abs().log()


class SigmoidTransform(Transform):
    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = 1

    def _call(self, x):
        # Clamp away from {0, 1} so the inverse stays finite.
        e = _eps(x)
        return tp.sigmoid(x).clamp(min=e, max=1 - e)

    def _inverse(self, y):
        e = _eps(y)
        y = y.clamp(min=e, max=1 - e)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -tp.nn.functional.softplus(-x) - tp.nn.functional.softplus(x)


class TanhTransform(Transform):
    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = 1

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return 0.5 * (y.log1p() - (-y).log1p())

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) written without cancellation for large |x|.
        return 2.0 * (math.log(2.0) - x - tp.nn.functional.softplus(-2.0 * x))


class AffineTransform(Transform):
    """y = loc + scale * x, with `event_dim` dims treated as one event."""
    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        return constraints.independent(constraints.real, self._event_dim) if self._event_dim else constraints.real

    codomain = domain

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale
        if isinstance(scale, numbers.Real):
            result = tp.full_like(x, math.log(abs(scale)))
        else:
            result = scale.abs().log()
        shape = tuple(x.shape)
        if self._event_dim:
            result = result.expand(tuple(tp.broadcast_shapes(tuple(result.shape), shape)))
            result = sum_rightmost(result, self._event_dim)
            shape = shape[:len(shape) - self._event_dim]
        return result.expand(tuple(tp.broadcast_shapes(tuple(result.shape), shape)))
