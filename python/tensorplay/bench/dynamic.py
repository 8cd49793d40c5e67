"""Dynamic shapes (Section 10): how many versions a function builds when the
batch size changes, what the symbolic path costs per call, and the cold compile
of a symbolic capture against a static one.

* compilations: Example 1.1 (f(x, w) = ((x + w).relu() * 2).sum(-1)) called
  with 64 different batch sizes under dynamic=True, and with 8 under the default
  (automatic dynamic: the first call is static, a dim that changes is recompiled
  as symbolic);
* per-call overhead: g(x) = x * 2 + 1 on 8 elements, a new tensor object each
  call, through a static version (exact key) and a symbolic one (exact key miss,
  then the symbolic version's shape spec and guards); a new size each call
  through the symbolic version too. Both versions run the same backend, so the
  difference is the selection;
* cold compile: capture + passes + backend of Example 1.1, symbolic vs static,
  in a fresh compiled function each time.

The front-end figures use backend="aot_eager" (the interpreter): until Stax
lowers symbolic graphs, a symbolic region under "stax" is interpreted, and a
static one would add the C++ compiler's time to one side only."""

from __future__ import annotations

import time

import tensorplay as tp

from .cases import OVERHEAD_SIZE, OVERHEAD_SOURCE
from .report import Report, verdict
from .stats import rotate

EXAMPLE_1_1_SOURCE = "f = lambda x, w: ((x + w).relu() * 2).sum(-1)"
OVERHEAD_TARGET_US = 1.0
COLD_RATIO_TARGET = 1.2


def _example():
    ns: dict = {"tp": tp}
    exec(EXAMPLE_1_1_SOURCE, ns)
    return ns["f"]


def compilations(report: Report, quick: bool) -> dict:
    report.section("Dynamic shapes: versions built when the batch size changes")
    f = _example()
    cols = 256
    w = tp.randn(cols)
    out: dict = {}
    for backend in ("aot_eager", "stax"):
        cf = tp.compile(f, backend=backend, dynamic=True, options={"warn_fallback": False})
        sizes = list(range(2, 2 + 64))
        for n in sizes:
            cf(tp.randn(n, cols), w)
        n_true = cf.num_specializations
        cd = tp.compile(f, backend=backend, options={"warn_fallback": False})
        for n in [8, 16, 3, 5, 64, 11, 12, 100]:
            cd(tp.randn(n, cols), w)
        n_default = cd.num_specializations
        report.figure(f"{backend}: 64 batch sizes, dynamic=True", f"{n_true} version(s)",
                      "target <= 2: " + verdict(n_true <= 2))
        report.figure(f"{backend}: 8 batch sizes, default (automatic)", f"{n_default} version(s)",
                      "target <= 3: " + verdict(n_default <= 3)
                      + ("" if backend != "stax" else " (stax: symbolic graphs run once Stax lowers them)"))
        out[backend] = {"dynamic_true_64_sizes": n_true, "default_8_sizes": n_default}
    return out


def overhead(report: Report, quick: bool) -> dict:
    calls = 1000 if quick else 10000
    runs, warmup = (7, 1) if quick else (15, 3)
    report.section("Dynamic shapes: per-call overhead of the symbolic path (8 elements, aot_eager)")
    ns: dict = {"tp": tp}
    exec(OVERHEAD_SOURCE, ns)
    g = ns["g"]
    xs = [tp.randn(OVERHEAD_SIZE) for _ in range(calls)]
    sizes = [OVERHEAD_SIZE + (i % 5) for i in range(calls)]
    ys = [tp.randn(n) for n in sizes]
    static = tp.compile(g, backend="aot_eager", dynamic=False)
    symbolic = tp.compile(g, backend="aot_eager", dynamic=True)
    static(xs[0])
    symbolic(xs[0])
    symbolic(ys[1])
    assert symbolic.num_specializations == 1

    def static_loop():
        for t in xs:
            static(t)

    def symbolic_loop():
        for t in xs:
            symbolic(t)

    def symbolic_sizes_loop():
        for t in ys:
            symbolic(t)

    ts, tsym, tsz = rotate([static_loop, symbolic_loop, symbolic_sizes_loop], runs=runs, warmup=warmup,
                           labels=["static", "symbolic", "symbolic, new size"])
    for t in (ts, tsym, tsz):
        t.readings_s = [r / calls for r in t.readings_s]
        t.calls_per_reading = calls
    extra = tsym.in_unit("median", "us") - ts.in_unit("median", "us")
    report.figure("static version, new tensor each call", ts.fmt("us"))
    report.figure("symbolic version, new tensor each call", tsym.fmt("us"),
                  f"{extra:+.2f} us vs static; target <= +{OVERHEAD_TARGET_US:.0f} us: "
                  + verdict(extra <= OVERHEAD_TARGET_US))
    report.figure("symbolic version, a new size each call", tsz.fmt("us"))
    return {"static_us": ts.to_dict("us"), "symbolic_us": tsym.to_dict("us"),
            "symbolic_new_size_us": tsz.to_dict("us"), "extra_us": extra,
            "within_target": extra <= OVERHEAD_TARGET_US}


def cold_compile(report: Report, quick: bool) -> dict:
    report.section("Dynamic shapes: cold compile of Example 1.1, symbolic vs static (aot_eager)")
    f = _example()
    x, w = tp.randn(64, 256), tp.randn(256)
    reps = 5 if quick else 20

    def one(dynamic):
        cf = tp.compile(f, backend="aot_eager", dynamic=dynamic)
        t0 = time.perf_counter()
        cf(x, w)
        return time.perf_counter() - t0

    s, d = [], []
    for _ in range(reps):  # alternated so both see the same machine periods
        s.append(one(False))
        d.append(one(True))
    s.sort()
    d.sort()
    ms, md = s[len(s) // 2] * 1e3, d[len(d) // 2] * 1e3
    ratio = md / ms
    report.figure("static capture + compile", f"{ms:.3f} ms (median of {reps})")
    report.figure("symbolic capture + compile", f"{md:.3f} ms",
                  f"{ratio:.2f}x static; target <= {COLD_RATIO_TARGET}x: " + verdict(ratio <= COLD_RATIO_TARGET))
    return {"static_ms": ms, "symbolic_ms": md, "ratio": ratio, "within_target": ratio <= COLD_RATIO_TARGET}
