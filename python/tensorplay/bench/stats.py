"""Timing statistics (Section 13.1 of the seed).

A reading is T = t0 + eps with eps >= 0 (interference only slows a run down).
Hence:

* the *minimum* of many readings estimates what the machine can do; use it for
  capability figures (bandwidth, FLOP/s);
* the *median* describes what typically happens; use it to compare two ways of
  executing, with the distribution-free confidence interval of Proposition 13.2:
  for n = 15 readings the 4th and 12th smallest bracket the median with
  probability 96.5 %, whatever the distribution of the readings;
* two ways of executing are compared only inside one run, timed alternately
  (A, B, A, B, ...) so both see the same period of the machine.

Pure Python: no NumPy and no tensorplay needed, so it can be tested alone.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass, field
from typing import Callable, List, Sequence, Tuple

WARMUP = 3
RUNS = 15
CONFIDENCE = 0.95

_UNIT_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


def order_statistic(values: Sequence[float], k: int) -> float:
    """The k-th smallest of `values`, k counted from 1 (X_(k) in the seed)."""
    if not 1 <= k <= len(values):
        raise ValueError(f"order statistic {k} of {len(values)} values")
    return sorted(values)[k - 1]


def median(values: Sequence[float]) -> float:
    """The sample median (mean of the two middle values when n is even)."""
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


def interval_coverage(n: int, j: int, k: int) -> float:
    """Pr[X_(j) <= m < X_(k)] = sum_{i=j}^{k-1} C(n, i) 2^-n (Proposition 13.2)."""
    if not 1 <= j < k <= n:
        raise ValueError(f"need 1 <= j < k <= n, got j={j} k={k} n={n}")
    return sum(math.comb(n, i) for i in range(j, k)) / 2.0**n


def median_interval_ranks(n: int, confidence: float = CONFIDENCE) -> Tuple[int, int, float]:
    """The narrowest symmetric ranks (j, k = n + 1 - j) whose coverage is at least
    `confidence`, with that coverage.  n = 15 gives (4, 12, 0.965).

    When no pair reaches `confidence` (n < 6 at 95 %), returns (1, n, coverage of
    the full range) so the caller can still print an interval, with its honest
    coverage.
    """
    if n < 1:
        raise ValueError("no readings")
    if n == 1:
        return 1, 1, 0.0
    best = (1, n, interval_coverage(n, 1, n))
    for j in range(1, (n + 1) // 2):
        k = n + 1 - j
        if j >= k:
            break
        cov = interval_coverage(n, j, k)
        if cov >= confidence:
            best = (j, k, cov)
        else:
            break
    return best


@dataclass
class Timing:
    """Readings of one timed thing, in seconds per call.

    `median`, `lo`, `hi`, `min` are in milliseconds (the unit of the report);
    `fmt(unit)` prints another unit ("s", "ms", "us", "ns").
    """

    readings_s: List[float]
    label: str = ""
    calls_per_reading: int = 1
    warmup: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.readings_s)

    @property
    def ranks(self) -> Tuple[int, int, float]:
        return median_interval_ranks(self.n)

    @property
    def coverage(self) -> float:
        return self.ranks[2]

    def _stat_s(self, what: str) -> float:
        if what == "median":
            return median(self.readings_s)
        if what == "min":
            return min(self.readings_s)
        j, k, _ = self.ranks
        return order_statistic(self.readings_s, j if what == "lo" else k)

    def in_unit(self, what: str, unit: str = "ms") -> float:
        return self._stat_s(what) * _UNIT_SCALE[unit]

    median_s = property(lambda self: self._stat_s("median"))
    lo_s = property(lambda self: self._stat_s("lo"))
    hi_s = property(lambda self: self._stat_s("hi"))
    min_s = property(lambda self: self._stat_s("min"))
    median = property(lambda self: self.in_unit("median"))
    lo = property(lambda self: self.in_unit("lo"))
    hi = property(lambda self: self.in_unit("hi"))
    min = property(lambda self: self.in_unit("min"))

    def fmt(self, unit: str = "ms", digits: int = 2) -> str:
        """'12.34 ms [11.90, 12.80]': median and its distribution-free interval."""
        m, lo, hi = (self.in_unit(w, unit) for w in ("median", "lo", "hi"))
        return f"{m:.{digits}f} {unit} [{lo:.{digits}f}, {hi:.{digits}f}]"

    def __str__(self) -> str:
        return self.fmt()

    def to_dict(self, unit: str = "ms") -> dict:
        j, k, cov = self.ranks
        return {
            "unit": unit,
            "median": self.in_unit("median", unit),
            "lo": self.in_unit("lo", unit),
            "hi": self.in_unit("hi", unit),
            "min": self.in_unit("min", unit),
            "n": self.n,
            "interval_ranks": [j, k],
            "coverage": cov,
            "calls_per_reading": self.calls_per_reading,
            "warmup": self.warmup,
            "readings": [r * _UNIT_SCALE[unit] for r in self.readings_s],
        }


def _one_reading(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call over `calls` back-to-back calls of fn."""
    clock = time.perf_counter_ns
    if calls == 1:
        t0 = clock()
        fn()
        t1 = clock()
    else:
        rng = range(calls)
        t0 = clock()
        for _ in rng:
            fn()
        t1 = clock()
    return (t1 - t0) * 1e-9 / calls


class _GcPaused:
    """Keeps the cyclic garbage collector out of the readings (as timeit does)."""

    def __enter__(self):
        self.was_enabled = gc.isenabled()
        gc.collect()
        gc.disable()

    def __exit__(self, *exc):
        if self.was_enabled:
            gc.enable()


def rotate(
    fns: Sequence[Callable[[], object]],
    runs: int = RUNS,
    warmup: int = WARMUP,
    calls: int = 1,
    labels: Sequence[str] = (),
) -> List[Timing]:
    """Time several callables in rotation (A, B, C, A, B, C, ...): every round
    gives one reading of each, so all of them see the same machine periods.
    `calls` > 1 makes each reading a loop of that many calls (per-call time)."""
    if runs < 1 or warmup < 0 or calls < 1:
        raise ValueError("need runs >= 1, warmup >= 0, calls >= 1")
    readings: List[List[float]] = [[] for _ in fns]
    with _GcPaused():
        for _ in range(warmup):
            for fn in fns:
                _one_reading(fn, calls)
        for _ in range(runs):
            for i, fn in enumerate(fns):
                readings[i].append(_one_reading(fn, calls))
    labels = list(labels) + [""] * (len(fns) - len(labels))
    return [Timing(r, label=l, calls_per_reading=calls, warmup=warmup) for r, l in zip(readings, labels)]


def time_fn(
    fn: Callable[[], object], runs: int = RUNS, warmup: int = WARMUP, calls: int = 1, label: str = ""
) -> Timing:
    """Warm up `warmup` times, then take `runs` readings of fn."""
    return rotate([fn], runs=runs, warmup=warmup, calls=calls, labels=[label])[0]


def alternate(
    fa: Callable[[], object],
    fb: Callable[[], object],
    runs: int = RUNS,
    warmup: int = WARMUP,
    calls: int = 1,
) -> Tuple[Timing, Timing]:
    """Time A and B alternately (A, B, A, B, ...); returns (timing_a, timing_b)."""
    ta, tb = rotate([fa, fb], runs=runs, warmup=warmup, calls=calls, labels=["A", "B"])
    return ta, tb


def ratio_interval(num: Timing, den: Timing) -> Tuple[float, float, float]:
    """Median ratio num/den of paired readings with its distribution-free interval.

    The readings of an alternating run are paired by round (reading i of A and of
    B come from the same period), so the per-round ratios are one sample whose
    median interval is meaningful (exercise 34 of the seed)."""
    if num.n != den.n:
        raise ValueError("paired ratio needs the same number of readings")
    ratios = [a / b for a, b in zip(num.readings_s, den.readings_s)]
    j, k, _ = median_interval_ranks(len(ratios))
    return median(ratios), order_statistic(ratios, j), order_statistic(ratios, k)
