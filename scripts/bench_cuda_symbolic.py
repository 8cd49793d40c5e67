"""Kernel time of symbolic vs static CUDA regions (issues 11 and 12).

For Example 1.1 `(x * 2 + 1).relu()` and the five-op softmax on float32 at
32768 x 8192 (and, for the same symbolic version, at a size off its hint), a
`tp.compile(f, dynamic=True)` version (one region for every size: the kernels
read the sizes as arguments) is timed against a `dynamic=False` one compiled
at that exact size. Calls are timed with CUDA events on the current stream in
batches, the two versions interleaved, and the median of the rounds reported
with the ratio symbolic / static (target <= 1.05).

    python scripts/bench_cuda_symbolic.py [--rows R] [--cols C] [--rounds N]

`--cpu` runs the same comparison on CPU tensors with host timing (a dry run
of the script without a GPU; its figures are the CPU kernels').
"""
import argparse
import json
import statistics
import time

import tensorplay as tp


def ex11(x):
    return (x * 2 + 1).relu()


def softmax5(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


CPU = False


def batch_ms(f, x, n):
    if CPU:
        t0 = time.perf_counter()
        for _ in range(n):
            f(x)
        return (time.perf_counter() - t0) * 1e3 / n
    start, end = tp.cuda.Event(enable_timing=True), tp.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        f(x)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / n


def compare(name, fn, shape, rounds, sym=None):
    x = tp.randn(*shape)
    if not CPU:
        x = x.cuda()
    static = tp.compile(fn, dynamic=False, strict_native=True)
    sym = sym or tp.compile(fn, dynamic=True, strict_native=True)
    want = static(x)
    got = sym(x)
    # amax over a dim (a whole-tensor max has no eager CUDA kernel), then on the host
    err = float((want - got).abs().amax(-1).cpu().numpy().max())
    for f in (static, sym):  # warm-up: tuning, module loads, allocator blocks
        batch_ms(f, x, 3)
    once = batch_ms(static, x, 3)
    n = max(3, int(20.0 / max(once, 1e-3)))  # about 20 ms a batch
    ts, tn = [], []
    for r in range(rounds):
        pair = [(static, ts), (sym, tn)] if r % 2 == 0 else [(sym, tn), (static, ts)]
        for f, out in pair:
            out.append(batch_ms(f, x, n))
    s, y = statistics.median(ts), statistics.median(tn)
    gb = 2 * x.numel() * 4 / 1e9
    row = {"case": name, "shape": list(shape), "static_ms": round(s, 4), "symbolic_ms": round(y, 4),
           "ratio": round(y / s, 3), "static_TBps": round(gb / s, 2), "symbolic_TBps": round(gb / y, 2),
           "max_abs_diff": err, "versions_symbolic": sym.num_specializations}
    print(json.dumps(row), flush=True)
    return sym


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=32768)
    ap.add_argument("--cols", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cpu", action="store_true")
    a = ap.parse_args()
    global CPU
    CPU = a.cpu
    print(json.dumps({"device": "cpu" if CPU else tp.cuda.get_device_name()}))
    for name, fn in [("example_1_1", ex11), ("softmax", softmax5)]:
        sym = compare(name, fn, (a.rows, a.cols), a.rounds)
        # The same symbolic version off its hint (odd row length: misaligned
        # rows take the lane-by-lane path in both versions).
        compare(name + "_off_hint", fn, (a.rows // 2 + 1, a.cols - 1), max(3, a.rounds // 2), sym=sym)
    if not CPU:
        tp.cuda.synchronize()


if __name__ == "__main__":
    main()
