"""Size of the generated source and cold compile time for programs in which a
value is used more than once (Stax core rebuild, step 1).

Lowering used to copy a shared value into each of its uses, so these programs
produced exponentially large C++ (16 chained `x*x*0.5 + 0.25`: 31 MB, 49 s).
Each program runs in a NEW process with an EMPTY cache directory (cold: the
C++ compiler runs); the child times tp.compile(f) through the first call, and
reports the source size and how many tp_exp calls the kernels contain (the
prelude's definitions not counted)."""

from __future__ import annotations

from typing import Dict, List, Tuple

from .coldstart import MARKER, CacheDirs, run_child
from .report import Report, verdict

SIZE_TARGET_BYTES = 100_000
COLD_TARGET_S = 1.0

# (key, title, function source, input shape, input maker: rand keeps the chain finite)
PROGRAMS: List[Tuple[str, str, str, Tuple[int, int], str]] = [
    ("chain16", "16 chained x = x*x*0.5 + 0.25",
     "def f(x):\n    for _ in range(16):\n        x = x * x * 0.5 + 0.25\n    return x\n", (64, 64), "rand"),
    ("gelu2", "2 stacked exact GELUs (F.gelu)",
     "def f(x):\n    return F.gelu(F.gelu(x))\n", (64, 64), "randn"),
    ("gelu8", "8 stacked exact GELUs (F.gelu)",
     "def f(x):\n    for _ in range(8):\n        x = F.gelu(x)\n    return x\n", (64, 64), "randn"),
]

_CHILD = """\
import json, time
import tensorplay as tp
import tensorplay.nn.functional as F
{fn_source}
x = tp.{maker}({rows}, {cols})
_t0 = time.perf_counter()
cf = tp.compile(f, strict_native=True)
out = cf(x)
_t1 = time.perf_counter()
src = cf.last_source
body = src[src.index("static void "):]  # the first kernel (the prelude defines none)
err = float((out - f(x)).abs().amax().item())
print({marker!r} + json.dumps({{"cold_s": _t1 - _t0, "source_bytes": len(src),
      "kernel_exp_calls": body.count("tp_exp("), "loop_bodies": body.count("for (; "),
      "max_abs_diff_vs_eager": err, "misses": tp.compiler.metrics.cache_misses}}), flush=True)
"""


def measure(report: Report, quick: bool) -> Dict[str, dict]:
    report.section("generated source size and cold compile time (values used more than once)")
    report.code("""
        # each program in a new process with an empty TP_CACHE_DIR:
        cf = tp.compile(f, strict_native=True); cf(x)      # timed
        len(cf.last_source); kernels' count of 'tp_exp('
    """)
    dirs = CacheDirs()
    results: Dict[str, dict] = {}
    try:
        for key, title, fn_source, (rows, cols), maker in PROGRAMS:
            script = _CHILD.format(fn_source=fn_source.rstrip("\n"), rows=rows, cols=cols, maker=maker, marker=MARKER)
            r = run_child(script, dirs.fresh())
            results[key] = r
            ok = r["source_bytes"] <= SIZE_TARGET_BYTES and r["cold_s"] <= COLD_TARGET_S
            report.figure(
                f"{title} [{rows}x{cols}]",
                f"{r['source_bytes'] / 1000:.1f} KB, cold {r['cold_s']:.3f} s, "
                f"tp_exp calls {r['kernel_exp_calls']} in {r['loop_bodies']} loop bodies",
                f"targets <= {SIZE_TARGET_BYTES // 1000} KB and <= {COLD_TARGET_S:g} s: {verdict(ok)}; "
                f"max |compiled - eager| = {r['max_abs_diff_vs_eager']:.3g}",
            )
    finally:
        dirs.cleanup(report)
    return results
