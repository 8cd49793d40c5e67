"""Per-call time of a function that moves its input to the GPU, runs a small
pointwise-heavy MLP there and brings the result back for host-side work:
eager vs tp.compile, which splits the graph at its moves into a CUDA region
and CPU regions (compile/device_split.cpp; before, the whole graph ran
through the interpreter, i.e. eager's kernels plus the graph walk).

  PYTHONPATH=... python scripts/bench_device_split.py [--reps N]
"""
import argparse
import statistics
import time

import tensorplay as tp
import tensorplay.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--d", type=int, default=1024)
    a = ap.parse_args()
    n, d = a.n, a.d
    ws = [tp.randn(d, d, device="cuda") / d ** 0.5 for _ in range(3)]
    bs = [tp.randn(d, device="cuda") for _ in range(3)]

    def f(x):
        h = x.cuda()
        for w, b in zip(ws, bs):
            h = F.gelu(h @ w + b) * 0.5 + h  # GEMM, then a pointwise tail to fuse
        y = h.sum(1).cpu()  # a row summary comes back to the host
        return F.softmax(y * 0.01, 0) + y.abs().log1p()

    x = tp.randn(n, d)
    cf = tp.compile(f, strict_native=True)
    t0 = time.perf_counter()
    cf(x)
    first = time.perf_counter() - t0
    for name, fn in (("eager", f), ("compiled", cf)):
        for _ in range(3):
            fn(x)
    times = {"eager": [], "compiled": []}
    for _ in range(a.reps):  # interleaved: both see the same machine state
        for name, fn in (("eager", f), ("compiled", cf)):
            t0 = time.perf_counter()
            fn(x)  # the result is on the host: the call has waited for the GPU
            times[name].append(time.perf_counter() - t0)
    diff = (cf(x) - f(x)).abs().max().item()
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=4)
        print(f"{name:9s} median {statistics.median(ts) * 1e3:8.3f} ms  [{q[0] * 1e3:.3f}, {q[2] * 1e3:.3f}]")
    ratio = [c / e for c, e in zip(times["compiled"], times["eager"])]
    q = statistics.quantiles(ratio, n=4)
    print(f"compiled / eager per call: {statistics.median(ratio):.3f} [{q[0]:.3f}, {q[2]:.3f}]; "
          f"first call (capture + compile + run) {first:.2f} s; max |compiled - eager| {diff:.2e}")


if __name__ == "__main__":
    main()
