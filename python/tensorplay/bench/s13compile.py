"""Compile cost C of every Section 13 case (Proposition 13.4), measured where a
user pays it: in a new Python process (--quick: one process for all cases, see
measure).  Per case, one child process compiles it with
an empty cache directory (cold: the external C++ compiler runs), further
children do the same with the now filled directory (warm, the least of two: capture,
passes, lowering and code generation still run; the object file comes from the
content-addressed cache).  Per case the child times tp.compile(f) plus the first
call (for a training step: the first forward and backward), then one more call,
so C = first call - second call."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterable, Optional, Tuple

from .s13cases import S13Case

MARKER = "TPS13 "
CHILD_TIMEOUT_S = 400


def child_script(cases: Iterable[S13Case], quick: bool) -> str:
    lines = [
        "import json, time",
        "import tensorplay as tp",
        "def _emit(d):",
        f"    print({MARKER!r} + json.dumps(d), flush=True)",
    ]
    for case in cases:
        lines += [
            f"# --- {case.key}",
            "try:",
            "    tp.manual_seed(0)",
            *("    " + s for s in case.fn_source.rstrip("\n").splitlines()),
            "    " + case.inputs_source(case.shape(quick)),
            "    _t0 = time.perf_counter()",
            "    g = tp.compile(f, strict_native=True)",
            "    " + case.call_source,
            "    _t1 = time.perf_counter()",
            "    " + case.call_source,
            "    _t2 = time.perf_counter()",
            f"    _emit({{'key': {case.key!r}, 'first_call_s': _t1 - _t0, 'second_call_s': _t2 - _t1,"
            " 'metrics': tp.compiler.metrics.as_dict()})",
            "except Exception as _e:",
            f"    _emit({{'key': {case.key!r}, 'error': type(_e).__name__ + ': ' + str(_e)[:300]}})",
            "del f, args",
        ]
    return "\n".join(lines) + "\n"


def run_child(script: str, cache_dir: str, timeout: float = CHILD_TIMEOUT_S) -> Tuple[Dict[str, dict], float]:
    env = dict(os.environ)
    env["TP_CACHE_DIR"] = cache_dir
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    out: Dict[str, dict] = {}
    for line in proc.stdout.splitlines():
        if line.startswith(MARKER):
            d = json.loads(line[len(MARKER):])
            out[d.pop("key")] = d
    if not out:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-8:]
        raise RuntimeError(f"compile-cost child exited {proc.returncode}: " + " | ".join(tail))
    return out, wall


def measure(cases, quick: bool, progress=None, warm_repeats: Optional[int] = None) -> Dict[str, dict]:
    """{key: {"cold_s", "warm_s", ...} or {"error": ...}}.

    Every case gets its own empty cache directory and processes: two cases whose
    regions generate the same code (the library softmax decomposes into the
    five-operator one) would otherwise find each other's object file and the
    second would not be cold.  --quick trades that for time: all cases in one
    cold and one warm process (a case that shares code with an earlier one then
    shows a warm figure as its cold one; the result says "shared_process")."""
    if warm_repeats is None:
        warm_repeats = 1 if quick else 2
    cases = list(cases)
    groups = [cases] if quick else [[c] for c in cases]
    result: Dict[str, dict] = {}
    for group in groups:
        names = ", ".join(c.key for c in group)
        if progress:
            progress(f"compile cost, new processes (cold, then warm cache): {names}")
        script = child_script(group, quick)
        d = tempfile.mkdtemp(prefix="tp_s13_cache_")
        try:
            cold, cold_wall = run_child(script, d)
            # warm readings: the least disturbed one estimates the cost (Proposition 13.1)
            warms = [run_child(script, d) for _ in range(warm_repeats)]
        except Exception as exc:
            for case in group:
                result[case.key] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        finally:
            shutil.rmtree(d, ignore_errors=True)
        for case in group:
            result[case.key] = _costs(case.key, cold, cold_wall, warms, shared=len(group) > 1)
    return result


def _costs(key: str, cold: dict, cold_wall: float, warms, shared: bool) -> dict:
    c = cold.get(key, {"error": "no result"})
    ws = [w.get(key, {"error": "no result"}) for w, _ in warms]
    bad = [x for x in [c] + ws if "error" in x]
    if bad:
        return {"error": bad[0]["error"]}
    warm_costs = [max(w["first_call_s"] - w["second_call_s"], 0.0) for w in ws]
    w = ws[min(range(len(ws)), key=warm_costs.__getitem__)]
    return {
        "cold_s": max(c["first_call_s"] - c["second_call_s"], 0.0),
        "warm_s": min(warm_costs),
        "warm_readings_s": warm_costs,
        "cold_first_call_s": c["first_call_s"],
        "warm_first_call_s": w["first_call_s"],
        "call_s": c["second_call_s"],
        "cold_metrics": c["metrics"],
        "warm_metrics": w["metrics"],
        "process_wall_s": [cold_wall] + [wall for _, wall in warms],
        "shared_process": shared,
    }
