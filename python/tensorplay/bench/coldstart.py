"""One-time cost of compilation (Section 13.4), measured where a user pays it: in a
NEW Python process.  Cold = an empty cache directory (TP_CACHE_DIR), so the
external C++ compiler runs; warm = a second new process with the same, now
filled, directory, so only capture, passes, lowering and code generation run
and the artifact comes from the content-addressed cache.

The child times from just before tp.compile(f) to the return of the first call
cf(*args), and separately `import tensorplay`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List, Tuple

from .cases import EXAMPLE_1_1, FusionCase
from .report import Report, verdict
from .stats import median

MARKER = "TPBENCH_RESULT "
SMALL_SHAPE = (64, 128)  # the figure
COLD_TARGET_S = 0.5
WARM_TARGET_S = 0.050
CHILD_TIMEOUT_S = 300

_CHILD = """\
import json, time
_t0 = time.perf_counter()
import tensorplay as tp
_t1 = time.perf_counter()
{fn_source}
{inputs_source}
_t2 = time.perf_counter()
cf = tp.compile(f, strict_native=True)
out = cf(*args)
_t3 = time.perf_counter()
_metrics = tp.compiler.metrics.as_dict()
print({marker!r} + json.dumps({{
    "import_s": _t1 - _t0,
    "compile_and_first_call_s": _t3 - _t2,
    "out_shape": list(out.shape),
    "metrics": _metrics,
}}), flush=True)
"""


def child_script(case: FusionCase, shape: Tuple[int, int]) -> str:
    return _CHILD.format(
        fn_source=case.fn_source.rstrip("\n"),
        inputs_source=case.inputs_source(shape),
        marker=MARKER,
    )


def run_child(script: str, cache_dir: str, timeout: float = CHILD_TIMEOUT_S) -> dict:
    """Runs `script` in a new interpreter with TP_CACHE_DIR=cache_dir."""
    env = dict(os.environ)
    env["TP_CACHE_DIR"] = cache_dir
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout
    )
    wall = time.perf_counter() - t0
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            result = json.loads(line[len(MARKER):])
            result["process_wall_s"] = wall
            return result
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-8:]
    raise RuntimeError(f"child process exited {proc.returncode}: " + " | ".join(tail))


def _summary(results: List[dict], key: str) -> dict:
    vals = [r[key] for r in results]
    return {"median_s": median(vals), "min_s": min(vals), "max_s": max(vals), "n": len(vals), "readings_s": vals}


class CacheDirs:
    """Fresh temporary cache directories, removed at the end unless kept."""

    def __init__(self, keep: bool = False):
        self.keep = keep
        self.dirs: List[str] = []

    def fresh(self) -> str:
        d = tempfile.mkdtemp(prefix="tp_bench_cache_")
        self.dirs.append(d)
        return d

    def cleanup(self, report: Report) -> None:
        if self.keep:
            if self.dirs:
                report.note("cache directories kept: " + ", ".join(self.dirs))
        else:
            for d in self.dirs:
                shutil.rmtree(d, ignore_errors=True)
        self.dirs = []


def measure_small(report: Report, quick: bool, dirs: CacheDirs) -> dict:
    """Example 1.1 at 64x128: cold (fresh directory), then warm (same directory)."""
    repeats = 1 if quick else 3
    case = EXAMPLE_1_1
    script = child_script(case, SMALL_SHAPE)
    report.section(f"3a. Cold and warm compile in a new process: {case.title} at 64x128")
    report.code(
        "# new process, TP_CACHE_DIR = a fresh empty directory (cold) / the same directory again (warm)\n"
        "import tensorplay as tp                       # timed: import\n"
        + case.fn_source
        + case.inputs_source(SMALL_SHAPE)
        + "\ncf = tp.compile(f, strict_native=True)       # timed from here ...\n"
        "out = cf(*args)                               # ... to here: compile + first call"
    )
    cold_dirs = [dirs.fresh() for _ in range(repeats)]
    cold = [run_child(script, d) for d in cold_dirs]
    warm = [run_child(script, cold_dirs[0]) for _ in range(repeats)]  # now filled
    cold_s = _summary(cold, "compile_and_first_call_s")
    warm_s = _summary(warm, "compile_and_first_call_s")
    imp = _summary(cold + warm, "import_s")
    wm = warm[-1]["metrics"]
    warm_cache_ok = wm.get("cache_hits", 0) >= 1 and wm.get("cache_misses", -1) == 0
    report.figure(
        "cold: compile + first call",
        f"{cold_s['median_s'] * 1e3:.1f} ms",
        f"median of {cold_s['n']}, min {cold_s['min_s'] * 1e3:.1f} ms; "
        f"target <= {COLD_TARGET_S * 1e3:.0f} ms: " + verdict(cold_s["median_s"] <= COLD_TARGET_S),
    )
    report.figure("cold metrics", json.dumps(cold[-1]["metrics"]))
    report.figure(
        "warm: compile + first call",
        f"{warm_s['median_s'] * 1e3:.1f} ms",
        f"median of {warm_s['n']}, min {warm_s['min_s'] * 1e3:.1f} ms; "
        f"target <= {WARM_TARGET_S * 1e3:.0f} ms: " + verdict(warm_s["median_s"] <= WARM_TARGET_S),
    )
    report.figure("warm metrics", json.dumps(wm), "cache_hits >= 1 and cache_misses == 0: " + verdict(warm_cache_ok))
    report.figure("import tensorplay", f"{imp['median_s'] * 1e3:.1f} ms", f"median of {imp['n']} processes")
    return {
        "shape": list(SMALL_SHAPE),
        "cold": cold_s,
        "warm": warm_s,
        "import": imp,
        "cold_metrics": cold[-1]["metrics"],
        "warm_metrics": wm,
        "cold_target_s": COLD_TARGET_S,
        "warm_target_s": WARM_TARGET_S,
        "cold_within_target": cold_s["median_s"] <= COLD_TARGET_S,
        "warm_within_target": warm_s["median_s"] <= WARM_TARGET_S,
        "warm_cache_ok": warm_cache_ok,
    }


def measure_full(case: FusionCase, report: Report, quick: bool, dirs: CacheDirs, number: str = "3b") -> dict:
    """One cold compile of `case` at its benchmark size (single reading)."""
    shape = case.quick_shape if quick else case.shape
    report.section(f"{number}. Cold compile in a new process: {case.title} at {shape[0]}x{shape[1]}")
    report.code(case.inputs_source(shape) + "\ncf = tp.compile(f, strict_native=True); out = cf(*args)   # timed")
    r = run_child(child_script(case, shape), dirs.fresh())
    report.figure("cold: compile + first call", f"{r['compile_and_first_call_s'] * 1e3:.1f} ms", "single reading")
    report.figure("import tensorplay", f"{r['import_s'] * 1e3:.1f} ms")
    report.figure("metrics", json.dumps(r["metrics"]))
    return {
        "shape": list(shape),
        "cold_s": r["compile_and_first_call_s"],
        "import_s": r["import_s"],
        "metrics": r["metrics"],
    }
