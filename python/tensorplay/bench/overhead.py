"""Fixed cost of one call (Section 13.4, Proposition 13.6): g(x) = x * 2 + 1 on 8
elements, so the arithmetic is nothing and the figure is the per-call overhead.

* eager: two operator dispatches;
* compiled, same tensor object each call: the first-level entry (object
  identity + version counters) -> wrapper -> kernel;
* compiled, a new tensor each call: the specialization key must be computed and
  looked up.

Each reading is a loop of many calls (per-call time = loop time / calls); the
three ways are timed in rotation so they see the same machine periods."""

from __future__ import annotations

import tensorplay as tp

from .cases import OVERHEAD_SIZE, OVERHEAD_SOURCE
from .report import Report, verdict
from .stats import rotate

SAME_TENSOR_TARGET_US = 3.0


def measure(report: Report, quick: bool) -> dict:
    calls = 1000 if quick else 10000
    runs, warmup = (7, 1) if quick else (15, 3)
    report.section("4. Call overhead: g(x) = x * 2 + 1 on 8 elements (per call)")
    report.code(
        f"{OVERHEAD_SOURCE}\n"
        f"x = tp.randn({OVERHEAD_SIZE}); xs = [tp.randn({OVERHEAD_SIZE}) for _ in range({calls})]\n"
        "cg = tp.compile(g, strict_native=True)\n"
        f"# one reading = {calls} calls; {runs} readings, rotated:\n"
        "#   for _ in range(n): g(x)     |   for _ in range(n): cg(x)   |   for t in xs: cg(t)"
    )
    ns: dict = {"tp": tp}
    exec(OVERHEAD_SOURCE, ns)
    g = ns["g"]
    x = tp.randn(OVERHEAD_SIZE)
    xs = [tp.randn(OVERHEAD_SIZE) for _ in range(calls)]
    cg = tp.compile(g, strict_native=True)
    cg(x)  # compile outside the readings
    cg(xs[0])

    # Each callable is one whole loop (calls=1 below), so the loop itself is
    # inside the reading exactly as a user's loop would be.
    rng = range(calls)

    def eager_loop():
        for _ in rng:
            g(x)

    def same_loop():
        for _ in rng:
            cg(x)

    def new_loop():
        for t in xs:
            cg(t)

    def empty_loop():
        for t in xs:
            pass

    te, ts, tn, t0 = rotate(
        [eager_loop, same_loop, new_loop, empty_loop],
        runs=runs,
        warmup=warmup,
        labels=["eager", "compiled same tensor", "compiled new tensor", "empty loop"],
    )
    scale = 1.0 / calls
    for t in (te, ts, tn, t0):
        t.readings_s = [r * scale for r in t.readings_s]
        t.calls_per_reading = calls

    report.figure("eager g(x)", te.fmt("us"))
    report.figure(
        "compiled cg(x), same tensor",
        ts.fmt("us"),
        f"target <= {SAME_TENSOR_TARGET_US:.0f} us: " + verdict(ts.in_unit("median", "us") <= SAME_TENSOR_TARGET_US),
    )
    report.figure("compiled cg(t), new tensor", tn.fmt("us"), "a different tensor object each call")
    report.figure("empty loop (included above)", t0.fmt("us", 3))
    return {
        "calls_per_reading": calls,
        "eager": te.to_dict("us"),
        "compiled_same_tensor": ts.to_dict("us"),
        "compiled_new_tensor": tn.to_dict("us"),
        "empty_loop": t0.to_dict("us"),
        "same_tensor_target_us": SAME_TENSOR_TARGET_US,
        "same_tensor_within_target": ts.in_unit("median", "us") <= SAME_TENSOR_TARGET_US,
    }
