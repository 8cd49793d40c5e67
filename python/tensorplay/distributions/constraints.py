"""Constraints: which values a parameter or a sample may take.

A constraint answers `check(value)` with a boolean tensor over the batch
(event dimensions already reduced), so one failing element can be reported
with the whole batch shape.  Transforms use `is_discrete` and `event_dim`.
"""
import tensorplay as tp


class Constraint:
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__.lstrip("_") + "()"


class _Dependent(Constraint):
    """Placeholder for a support that depends on the parameters (checked elsewhere)."""

    def __init__(self, *, is_discrete=False, event_dim=0):
        self.is_discrete = is_discrete
        self.event_dim = event_dim

    def __call__(self, *, is_discrete=None, event_dim=None):
        return _Dependent(is_discrete=self.is_discrete if is_discrete is None else is_discrete,
                          event_dim=self.event_dim if event_dim is None else event_dim)

    def check(self, value):
        raise ValueError("cannot check a dependent constraint")


class _DependentProperty(property, _Dependent):
    """A property whose value is the support computed from the parameters."""

    def __init__(self, fn=None, *, is_discrete=False, event_dim=0):
        property.__init__(self, fn)
        _Dependent.__init__(self, is_discrete=is_discrete, event_dim=event_dim)

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self.is_discrete, event_dim=self.event_dim)


def is_dependent(constraint):
    return isinstance(constraint, _Dependent)


class _IndependentConstraint(Constraint):
    """Reinterprets `n` rightmost batch dims of a constraint as event dims."""

    def __init__(self, base, reinterpreted_batch_ndims):
        self.base_constraint = base
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        ok = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if n:
            ok = ok.reshape(tuple(ok.shape[:ok.dim() - n]) + (-1,)).all(-1)
        return ok

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound) & (value <= self.upper_bound)


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)


class _Real(Constraint):
    def check(self, value):
        return value == value  # false only for NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return value > self.lower_bound


class _GreaterThanEq(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return value >= self.lower_bound


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value >= self.lower_bound) & (value <= self.upper_bound)


class _HalfOpenInterval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value >= self.lower_bound) & (value < self.upper_bound)


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return (value.tril() == value).reshape(tuple(value.shape[:-2]) + (-1,)).all(-1)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        tri = (value.tril() == value).reshape(tuple(value.shape[:-2]) + (-1,)).all(-1)
        return tri & (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)


class _Symmetric(Constraint):
    event_dim = 2

    def check(self, value):
        close = (value - value.transpose(-1, -2)).abs() <= 1e-6 * (1 + value.abs())
        return close.reshape(tuple(value.shape[:-2]) + (-1,)).all(-1)


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        # Cholesky succeeds exactly for (numerically) positive-definite matrices.
        sym = super().check(value)
        _, info = tp.linalg.cholesky_ex(value)
        return sym & (info == 0)


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
symmetric = _Symmetric()
positive_definite = _PositiveDefinite()
