"""tp.use_deterministic_algorithms and its two queries (the mode lives in C++,
core/deterministic.h). On, CUDA operators that accumulate floats with atomic
additions (index_put_ with accumulate=True, index_add_, scatter_add_,
scatter_reduce sum/prod/mean, and through them the gradients of embedding,
index_select, gather and x[i]) sort the destinations and reduce each one in
index order: the same bits on every run, equal to the CPU's. index_put_ and
scatter_ with repeated positions keep the last occurrence. An operator
without a deterministic form raises RuntimeError naming it, or warns when
warn_only=True. The CPU kernels are sequential already."""
from . import _C


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Sets the deterministic mode (process-wide). warn_only: operators without
    a deterministic form warn instead of raising."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms: expected a bool for mode, got {type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(f"use_deterministic_algorithms: expected a bool for warn_only, got {type(warn_only).__name__}")
    _C._set_deterministic_algorithms(mode, warn_only)


def are_deterministic_algorithms_enabled():
    """True while tp.use_deterministic_algorithms(True) is in effect."""
    return _C._deterministic_algorithms()


def is_deterministic_algorithms_warn_only_enabled():
    """The warn_only flag of the last use_deterministic_algorithms call."""
    return _C._deterministic_algorithms_warn_only()
