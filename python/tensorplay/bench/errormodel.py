"""The statistical model of summation error (Section 13.3 of the seed), as pure
functions over plain numbers, so that the report and ``tp.testing.assert_close``
share one implementation and tests can check it against hand-computed values.

Model (Theorem 13.1 / Corollary 13.1): n terms with mean mu and variance
sigma^2, summed in W ways (each way sequential over n/W terms), the W partial
sums merged in a tree; rounding errors independent, uniform on [-u, u]:

    Var[E] ~ u^2/3 * ( n^3 mu^2 / (3 W^2) + n^2 sigma^2 / (2 W)      per way
                       + 2 n^2 mu^2 + n sigma^2 log2 W )               tree merge

Two independent implementations of the same sum (compiled and eager) differ by
sqrt(2) times that standard deviation; the largest of R such row differences
is about z_R standard deviations, where Pr[|Z| > z_R] = 1/R.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence, Tuple

# Unit roundoff u = 2^-p (p = significand bits including the implicit one).
UNIT_ROUNDOFF = {
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
    "float32": 2.0**-24,
    "float64": 2.0**-53,
}

DEFAULT_WAYS = 16  # float32 lanes of a 64-byte vector (AVX-512), Section 13.3


def unit_roundoff(dtype) -> float:
    """u of a floating dtype given by name ('float32'), or by an object whose
    str() ends with the name (tp.float32, np.float32, torch.float32)."""
    name = str(dtype).rsplit(".", 1)[-1].strip("'>")
    if name in ("half",):
        name = "float16"
    if name in ("float", "single"):
        name = "float32"
    if name in ("double",):
        name = "float64"
    if name not in UNIT_ROUNDOFF:
        raise ValueError(f"unit_roundoff: {dtype!r} is not a floating dtype")
    return UNIT_ROUNDOFF[name]


def _log2_ways(ways: int) -> float:
    if ways < 1:
        raise ValueError(f"number of accumulators W must be >= 1, got {ways}")
    return math.log2(ways)


def summation_variance_terms(n: int, mean: float, var: float, ways: int = DEFAULT_WAYS) -> Tuple[float, float]:
    """The two bracketed parts of Corollary 13.1 (without the u^2/3 factor):
    (per-way accumulation, tree merge).  With W = 1 the merge term is 0 and the
    per-way term is the sequential sum's n^3 mu^2 / 3 + n^2 sigma^2 / 2."""
    if n < 1:
        raise ValueError(f"need n >= 1 terms, got {n}")
    lw = _log2_ways(ways)
    w = float(ways)
    per_way = n**3 * mean**2 / (3.0 * w * w) + n**2 * var / (2.0 * w)
    merge = (2.0 * n**2 * mean**2 + n * var * lw) if ways > 1 else 0.0
    return per_way, merge


def summation_error_sigma(n: int, mean: float, var: float, u: float, ways: int = DEFAULT_WAYS,
                          merge: bool = True) -> float:
    """Standard deviation of the rounding error of one W-way sum (Corollary 13.1)."""
    per_way, tree = summation_variance_terms(n, mean, var, ways)
    total = per_way + (tree if merge else 0.0)
    return math.sqrt(u * u / 3.0 * total)


def max_factor(rows: int) -> float:
    """z with Pr[|Z| > z] = 1/rows: the expected size, in standard deviations, of
    the largest |difference| over `rows` independent normal rows (3.84 for 8192;
    the seed rounds it to 3.9).  1 for a single row."""
    if rows <= 1:
        return 1.0
    from statistics import NormalDist  # imported here: tp.testing should load fast

    return NormalDist().inv_cdf(1.0 - 0.5 / rows)


def predicted_max_difference(sigma_row: float, rows: int, independent_pair: bool = True) -> float:
    """Predicted largest |compiled - eager| over `rows` sums with per-row error
    standard deviation sigma_row: sqrt(2) (two independent errors) * z_R * sigma."""
    return (math.sqrt(2.0) if independent_pair else 1.0) * max_factor(rows) * sigma_row


def worst_case_bound(n: int, abs_sum: float, u: float, ways: int = 1) -> float:
    """Deterministic bound on |E|: (n/W - 1 + log2 W) u sum|a_i| (W = 1: (n-1) u sum|a|)."""
    depth = (n / ways - 1.0) + _log2_ways(ways)
    return max(depth, 0.0) * u * abs_sum


def condition_number(terms: Sequence[float]) -> float:
    """kappa = sum|x_i| / |sum x_i| (inf for an exactly cancelling sum, 1 for same-sign terms)."""
    a = math.fsum(abs(t) for t in terms)
    s = abs(math.fsum(terms))
    if a == 0.0:
        return 1.0
    return math.inf if s == 0.0 else a / s


def row_statistics(terms: Iterable[float]) -> Tuple[int, float, float, float, float]:
    """(n, mean, population variance, sum, sum of |terms|) of one row of terms."""
    xs = [float(t) for t in terms]
    n = len(xs)
    if n == 0:
        raise ValueError("row of no terms")
    s = math.fsum(xs)
    mean = s / n
    var = math.fsum((x - mean) ** 2 for x in xs) / n
    return n, mean, var, s, math.fsum(abs(x) for x in xs)
