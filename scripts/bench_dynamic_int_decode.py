"""Per-call time of a KV-cache attention decode step f(q, k, v, kc, vc, pos)
compiled (automatic dynamic int: pos symbolic after it changes) vs eager, and
vs dynamic=False (a version per position, eager after max_versions).

  PYTHONPATH=/tmp/tp_NAME python scripts/bench_dynamic_int_decode.py [--steps N]
"""
import argparse
import statistics
import time
import warnings

import tensorplay as tp
# The step `python -m tensorplay.bench --suite dynamic` times in its decode row.
from tensorplay.bench.dynamic import _decode_step as step


def run(fn, b, d, steps, reps):
    times = []
    for _ in range(reps):
        kc, vc = tp.zeros(b, steps, d), tp.zeros(b, steps, d)
        qs = [(tp.randn(b, d), tp.randn(b, d), tp.randn(b, d)) for _ in range(steps)]
        t0 = time.perf_counter()
        for pos in range(steps):
            q, k, v = qs[pos]
            fn(q, k, v, kc, vc, pos)
        times.append((time.perf_counter() - t0) / steps)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--b", type=int, default=4)
    ap.add_argument("--d", type=int, default=64)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    auto = tp.compile(step)
    static = tp.compile(step, dynamic=False)
    t_first = time.perf_counter()
    run(auto, a.b, a.d, a.steps, 1)  # warm: captures and compiles
    t_first = time.perf_counter() - t_first
    run(static, a.b, a.d, a.steps, 1)
    res = {}
    for name, fn in [("eager", step), ("compiled (automatic dynamic int)", auto),
                     ("compiled dynamic=False", static)]:
        res[name] = run(fn, a.b, a.d, a.steps, a.reps)
    print(f"decode step, b={a.b} d={a.d}, {a.steps} positions, median of {a.reps} passes (per call):")
    for name, ts in res.items():
        print(f"  {name:34s} {statistics.median(ts) * 1e6:8.1f} us")
    print(f"  versions: automatic {auto.num_specializations}, dynamic=False {static.num_specializations}"
          f" (then eager); first pass of the automatic one {t_first:.2f} s")


if __name__ == "__main__":
    main()
