"""The measurement harness of Section 13: ``python -m tensorplay.bench``.

Modules, one concept each:

* ``stats``     timing a callable: warm-up, readings, median with its
                distribution-free 95 % interval, minimum; alternating A/B timing
* ``bytemodel`` main-memory traffic of one way of executing (Section 1.1)
* ``cases``     the benchmark functions, their inputs, byte models, tolerances
* ``machine``   machine parameters: bandwidth B
* ``fusion``    eager vs compiled: S = rho * beta_c / beta_e (Proposition 13.3)
* ``coldstart`` one-time compile cost in new processes, cold and warm cache
* ``overhead``  per-call overhead, eager / compiled same tensor / new tensor
* ``report``    the printed report; ``suites`` the named suites; ``__main__`` CLI

``--suite section13`` (the whole of Section 13, as a Markdown report):

* ``s13cases``   the cases of Tables 13.1 and 13.2 with their byte models
* ``section13``  the measuring: setup, rounds A and B, P, overhead, compile cost
* ``s13compile`` compile cost C in new processes, cold and warm cache
* ``errormodel`` the summation error model of Section 13.3 (shared with tp.testing)
* ``analysis``   Propositions 13.3, 13.4, 13.6, the roofline, the 13.5 validity check
* ``s13report``  Markdown tables and PNG figures (matplotlib optional)
"""

from .stats import (  # noqa: F401  (the public timing API)
    RUNS,
    WARMUP,
    Timing,
    alternate,
    interval_coverage,
    median,
    median_interval_ranks,
    order_statistic,
    rotate,
    time_fn,
)

__all__ = [
    "RUNS",
    "WARMUP",
    "Timing",
    "alternate",
    "interval_coverage",
    "median",
    "median_interval_ranks",
    "order_statistic",
    "rotate",
    "time_fn",
]
