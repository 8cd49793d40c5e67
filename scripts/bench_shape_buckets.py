"""Shape buckets vs dynamic=True vs static (Section 10, Proposition 10.3), side by side
in one run: Example 1.1-shaped `(x * 2).sum(1)` over 64 batch sizes (x: [n, 256]).
Prints per mode the versions compiled, the cold pass (captures + compiles) and the
warm time per call (best of 5 passes over all 64 sizes, a new size every call).
Usage: python scripts/bench_shape_buckets.py [backend [features]]"""
import sys
import time

import tensorplay as tp


def f(x):
    return (x * 2).sum(1)


def main():
    backend = sys.argv[1] if len(sys.argv) > 1 else "stax"
    sizes = list(range(2, 66))
    feat = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    xs = [tp.randn(n, feat) for n in sizes]
    modes = {
        "pow2 buckets": dict(dynamic=True, options={"shape_buckets": "pow2"}),
        "dynamic=True": dict(dynamic=True),
        "static": dict(dynamic=False),
    }
    print(f"backend={backend}, (x*2).sum(1), x: [n, {feat}], n = 2..65")
    for name, kw in modes.items():
        cf = tp.compile(f, backend=backend, **kw)
        t0 = time.perf_counter()
        for x in xs:
            cf(x)
        cold = time.perf_counter() - t0
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for x in xs:
                cf(x)
            best = min(best, (time.perf_counter() - t0) / len(xs))
        for x in xs:
            assert (cf(x) - f(x)).abs().max().item() < 1e-3
        print(f"{name:14s} versions={cf.num_specializations:3d} cold pass={cold:7.2f} s  warm={best * 1e6:8.2f} us/call")
    t0 = time.perf_counter()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for x in xs:
            f(x)
        best = min(best, (time.perf_counter() - t0) / len(xs))
    print(f"{'eager':14s}                                   warm={best * 1e6:8.2f} us/call")


if __name__ == "__main__":
    main()
