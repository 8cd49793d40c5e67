"""Machine parameters (Section 13.1): the memory bandwidth B, measured as the
*minimum* time of many row-wise sums over a 64 MiB float32 tensor
(Proposition 13.1: the minimum estimates what the machine can do)."""

from __future__ import annotations

import os
import platform
import sys

import tensorplay as tp

from .report import Report, gbps
from .stats import time_fn

BANDWIDTH_SHAPE = (8192, 2048)  # 64 MiB of float32
QUICK_BANDWIDTH_SHAPE = (1024, 2048)  # 8 MiB: only exercises the code path
BANDWIDTH_RUNS = 30


def describe_machine() -> dict:
    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "tensorplay_version": getattr(tp, "__version__", None),
    }
    for name in ("get_num_threads",):
        fn = getattr(tp, name, None)
        if callable(fn):
            try:
                info["num_threads"] = int(fn())
            except Exception:  # a report must not die on a missing figure
                pass
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def measure_bandwidth(report: Report, quick: bool) -> dict:
    rows, cols = QUICK_BANDWIDTH_SHAPE if quick else BANDWIDTH_SHAPE
    runs = 7 if quick else BANDWIDTH_RUNS
    warmup = 1 if quick else 3

    report.section("1. Machine bandwidth B (minimum of %d row-wise sums, Proposition 13.1)" % runs)
    report.code(f"x = tp.randn({rows}, {cols})      # {rows * cols * 4 / 2**20:.0f} MiB float32\nx.sum(-1)")
    x = tp.randn(rows, cols)
    nbytes = rows * cols * 4  # bytes read; the row results are negligible
    t = time_fn(lambda: x.sum(-1), runs=runs, warmup=warmup, label="tp sum")
    b = gbps(nbytes, t.min_s)
    report.figure("B (tensorplay x.sum(-1))", f"{b:.1f} GB/s", f"min {t.min:.3f} ms; median {t.fmt()}")

    a = x.numpy()
    tn = time_fn(lambda: a.sum(-1), runs=runs, warmup=warmup, label="numpy sum")
    bn = gbps(nbytes, tn.min_s)
    report.code("a = x.numpy(); a.sum(-1)       # reference, NumPy")
    report.figure("NumPy a.sum(-1)", f"{bn:.1f} GB/s", f"min {tn.min:.3f} ms; median {tn.fmt()}")
    return {
        "shape": [rows, cols],
        "bytes_read": nbytes,
        "B_GBps": b,
        "tensorplay_sum": t.to_dict(),
        "numpy_GBps": bn,
        "numpy_sum": tn.to_dict(),
    }
