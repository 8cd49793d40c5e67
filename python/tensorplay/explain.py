"""Every region explains itself: ``tp.compiler.explain(fn, *args)``.

For the region tp.compile builds for these arguments: its kernels with the
operators fused into each, each kernel's model bytes (buffers it reads and
writes in memory, each counted once) and flops (one per arithmetic node of the
loop body per iteration, plus one per reduction step), the time the roofline
predicts at the machine's B (bandwidth) and P (arithmetic throughput),
``max(bytes / B, flops / P)``, the measured time of the region, the achieved
bandwidth beta = bytes / time and beta / B, and why the region fell back to
eager or why consecutive kernels were not fused. ``TP_LOGS=explain`` prints
the static part (kernels, bytes, flops, fallback reason) at every compile.

B and P are measured once per machine by the section13 suite's probes (Section
13.1: minimum time of a row sum over 64 MiB, of a 2048^3 matmul) and cached in ``<tp.compiler.cache_dir()>/machine.json``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import List, Optional

import tensorplay as tp

MACHINE_FILE = "machine.json"


@dataclass
class KernelExplain:
    name: str
    origin: str             # fused operators, nests separated by "; "
    bytes_read: int
    bytes_written: int
    flops: int
    predicted_s: float      # max(bytes / B, flops / P)
    bound: str              # "memory" or "compute"

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


@dataclass
class RegionExplain:
    graph_code: str
    kernels: List[KernelExplain] = field(default_factory=list)
    fallback_reason: str = ""       # non-empty: the region runs eagerly, this is why
    not_fused: List[str] = field(default_factory=list)
    measured_s: float = float("nan")   # compiled call, minimum over the runs
    eager_s: float = float("nan")      # the function called directly, minimum over the runs
    predicted_s: float = float("nan")

    @property
    def bytes(self) -> int:
        return sum(k.bytes for k in self.kernels)

    @property
    def beta(self) -> float:
        """Achieved bandwidth of the compiled region (model bytes / measured time)."""
        return self.bytes / self.measured_s if self.measured_s > 0 else float("nan")


@dataclass
class Explanation:
    regions: List[RegionExplain]
    B: float  # bytes/s
    P: float  # flop/s

    def text(self) -> str:
        out = [f"tp.compiler.explain: {len(self.regions)} region(s); machine B = {self.B / 1e9:.1f} GB/s, "
               f"P = {self.P / 1e9:.1f} GFLOP/s (roofline: t = max(bytes/B, flops/P))"]
        for i, r in enumerate(self.regions):
            out.append(f"region {i}:")
            if r.fallback_reason:
                out.append(f"  runs eagerly (not compiled): {r.fallback_reason}")
            for k in r.kernels:
                out.append(f"  {k.name}: {k.origin}")
                out.append(f"    reads {k.bytes_read} B, writes {k.bytes_written} B, {k.flops} flops; "
                           f"predicted {k.predicted_s * 1e6:.1f} us ({k.bound}-bound)")
            for why in r.not_fused:
                out.append(f"  not fused: {why}")
            if r.kernels:
                beta = r.beta
                out.append(f"  model bytes {r.bytes}; predicted {r.predicted_s * 1e6:.1f} us; measured "
                           f"{r.measured_s * 1e6:.1f} us (eager {r.eager_s * 1e6:.1f} us); "
                           f"beta = {beta / 1e9:.2f} GB/s, beta/B = {beta / self.B:.2f}")
            else:
                out.append(f"  measured {r.measured_s * 1e6:.1f} us (eager {r.eager_s * 1e6:.1f} us)")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.text()


def _min_time(f, runs: int) -> float:
    f()  # warm up (first call compiles)
    best = float("inf")
    for _ in range(max(runs, 1)):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def machine_capability(refresh: bool = False, quick: bool = False) -> dict:
    """{"B": bytes/s, "P": flop/s} of this machine, measured once and cached in the
    code cache directory (keyed by CPU model, ISA, core count and thread count)."""
    key = {
        "cpu": platform.processor() or platform.machine(),
        "isa": tp.compiler.host_isa(),
        "cores": os.cpu_count(),
        "threads": tp.get_num_threads() if hasattr(tp, "get_num_threads") else None,
    }
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    key["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    path = os.path.join(tp.compiler.cache_dir(), MACHINE_FILE)
    if not refresh:
        try:
            with open(path) as fh:
                doc = json.load(fh)
            if doc.get("key") == key and doc.get("B", 0) > 0 and doc.get("P", 0) > 0:
                return {"B": doc["B"], "P": doc["P"]}
        except (OSError, ValueError):
            pass
    sys.stderr.write("tp.compiler.explain: measuring the machine's B and P once (a few seconds; cached in "
                     f"{path})\n")
    sys.stderr.flush()
    # The section13 suite's own probes, so explain and the report use one definition of B and P.
    from .bench import section13

    b = section13._bandwidth_probe(quick, 7 if quick else 30, 1 if quick else 3)["B"]
    p = section13._peak_flops(quick, lambda msg: None)["P"]
    if not quick:
        tmp = path + ".tmp%d" % os.getpid()
        try:
            with open(tmp, "w") as fh:
                json.dump({"key": key, "B": b, "P": p}, fh)
            os.replace(tmp, path)
        except OSError:
            pass
    return {"B": b, "P": p}


def explain(fn, *args, runs: int = 20, machine: Optional[dict] = None, options: Optional[dict] = None,
            verbose: bool = True, **kwargs) -> Explanation:
    """Compile fn for these arguments and explain the region (see the module docstring).

    machine: {"B": bytes/s, "P": flop/s} to use instead of the measured, cached ones.
    options: tp.compile options (e.g. {"stax_fusion": False}). verbose: print the text.
    The names runs, machine, options and verbose are not passed on to fn.
    """
    cap = machine or machine_capability()
    B, P = float(cap["B"]), float(cap["P"])
    opts = dict(options or {})
    opts.setdefault("warn_fallback", False)
    cf = tp.compile(fn, options=opts)
    with tp.no_grad():
        cf(*args, **kwargs)  # compiles
        measured = _min_time(lambda: cf(*args, **kwargs), runs)
        eager = _min_time(lambda: fn(*args, **kwargs), runs)
    graph = cf.last_graph
    region = RegionExplain(graph_code=graph.code if graph is not None else "",
                           fallback_reason=cf.last_fallback_reason, measured_s=measured, eager_s=eager)
    for k in cf.last_kernels:
        t_mem = (k["bytes_read"] + k["bytes_written"]) / B
        t_cmp = k["flops"] / P
        region.kernels.append(KernelExplain(k["name"], k["origin"], k["bytes_read"], k["bytes_written"], k["flops"],
                                            max(t_mem, t_cmp), "memory" if t_mem >= t_cmp else "compute"))
    region.predicted_s = sum(k.predicted_s for k in region.kernels) if region.kernels else float("nan")
    fusion_off = str(opts.get("stax_fusion", True)).lower() in ("0", "false", "off")
    for prev, k in zip(region.kernels, region.kernels[1:]):
        if fusion_off:
            why = "fusion disabled by options={'stax_fusion': False}"
        else:
            why = ("its iteration space does not start with the previous kernel's, or it reads a value of that "
                   "kernel at another index than the one written in the same outer iteration (Section 7: "
                   "dependence distance 0 required)")
        region.not_fused.append(f"{k.name} ({k.origin}) after {prev.name}: {why}")
    ex = Explanation([region], B, P)
    if verbose:
        print(ex.text())
    return ex
