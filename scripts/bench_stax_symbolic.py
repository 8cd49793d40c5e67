"""Symbolic vs static Stax kernels (dynamic shapes, issue 11), side by side.

For Example 1.1 at 8192x2048 and the five-operator softmax at 16384x1000 it
compiles the same capture three ways through the test hook
`_testing_stax_symbolic`: static (no symbols), dim 0 symbolic, both dims
symbolic, and times the compiled region's call interleaved (median of
--reps). With --compile it instead measures the cold compile of one variant
in this process (run it once per variant with a fresh TP_CACHE_DIR).

    PYTHONPATH=/tmp/tp_NAME python scripts/bench_stax_symbolic.py
    OMP_NUM_THREADS=1 PYTHONPATH=/tmp/tp_NAME python scripts/bench_stax_symbolic.py --cpu-time
    TP_CACHE_DIR=$(mktemp -d) python scripts/bench_stax_symbolic.py --compile softmax:both
"""
import argparse
import statistics
import time

import tensorplay as tp
from tensorplay import _C


def ex11(x, w):
    return ((x + w).relu() * 2).sum(-1)


def softmax(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


CASES = {
    "example_1_1": (ex11, lambda r, c: [tp.randn(r, c), tp.randn(c)], (8192, 2048)),
    "softmax": (softmax, lambda r, c: [tp.randn(r, c)], (16384, 1000)),
}
VARIANTS = {"static": lambda r, c: [], "dim0": lambda r, c: [r], "both": lambda r, c: [r, c]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--cpu-time", action="store_true",
                    help="time the calling thread's CPU time (with OMP_NUM_THREADS=1: robust on a loaded machine)")
    ap.add_argument("--compile", default=None, help="case:variant, cold compile time only")
    a = ap.parse_args()
    if a.compile:
        case, variant = a.compile.split(":")
        fn, make, (r, c) = CASES[case]
        seconds = _C._testing_stax_symbolic(fn, make(r, c), VARIANTS[variant](r, c))[4]
        print(f"{case} {variant}: C++ compile {seconds:.3f} s")
        return
    for case, (fn, make, (r, c)) in CASES.items():
        inputs = make(r, c)
        runs = {v: _C._testing_stax_symbolic(fn, inputs, h(r, c))[0] for v, h in VARIANTS.items()}
        times = {v: [] for v in runs}
        for v, run in runs.items():
            run(inputs)  # warm
        clock = time.thread_time if a.cpu_time else time.perf_counter
        for _ in range(a.reps):
            for v, run in runs.items():
                t0 = clock()
                run(inputs)
                times[v].append(clock() - t0)
        med = {v: statistics.median(t) * 1e3 for v, t in times.items()}
        print(f"{case} {r}x{c}: " + ", ".join(f"{v} {m:.2f} ms" for v, m in med.items()) +
              f"  | dim0/static {med['dim0'] / med['static']:.3f}, both/static {med['both'] / med['static']:.3f}")


if __name__ == "__main__":
    main()
