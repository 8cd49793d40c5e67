"""In-place storage reuse (issue 9), before/after side by side.

Compiles each workload twice with Stax -- once as built (a mutated input's
final value is computed into the input's memory where legal) and once with
options={"stax_inplace": "0"} (a new buffer plus the write-back copy, as before)
-- and times the calls interleaved, reporting medians of --reps.

    PYTHONPATH=/tmp/tp_NAME python scripts/bench_inplace_reuse.py
"""
import argparse
import statistics
import time

import tensorplay as tp
from tensorplay import nn, optim


def mul_add(x, a, b):
    x.mul_(a).add_(b)


def time_pair(make_calls, reps):
    """make_calls(options) -> zero-argument call; returns (median reuse, median copy) in ms."""
    on = make_calls({})
    off = make_calls({"stax_inplace": "0"})
    for f in (on, off):  # compile and warm up
        for _ in range(3):
            f()
    t = {0: [], 1: []}
    for _ in range(reps):
        for k, f in enumerate((on, off)):
            t0 = time.perf_counter()
            f()
            t[k].append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t[0]), statistics.median(t[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--numel", type=int, default=1 << 24)
    args = ap.parse_args()
    n = args.numel

    def mul_add_calls(options):
        x, a, b = tp.randn(n), tp.randn(n), tp.randn(n)
        f = tp.compile(mul_add, backend="stax", options=options)
        return lambda: f(x, a, b)

    def sgd_calls(options, momentum=0.9):
        params = [nn.Parameter(tp.randn(n // 4)) for _ in range(4)]
        for p in params:
            p.grad = tp.randn(n // 4)
        opt = optim.SGD(params, lr=1e-3, momentum=momentum)
        step = tp.compile(opt.step, backend="stax", options=options)
        return lambda: step()

    rows = [(f"x.mul_(a).add_(b), {n} float32", mul_add_calls),
            (f"SGD step, 4 params x {n // 4}", lambda o: sgd_calls(o, 0.0)),
            (f"SGD(momentum=0.9) step, 4 params x {n // 4}", sgd_calls)]
    with tp.no_grad():
        for name, make in rows:
            on, off = time_pair(make, args.reps)
            print(f"{name:45s} in place {on:8.2f} ms   copy {off:8.2f} ms   speedup {off / on:5.2f}x")
    print("in-place writes during the run:", tp.compiler.metrics.inplace_writes)


if __name__ == "__main__":
    main()
