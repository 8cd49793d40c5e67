"""``python -m tensorplay.bench --suite section13``: the measurements of Section 13
of the seed, reproduced on the machine it runs on.

Order of work (rounds A and B are separated in time by the capability and
compile-cost measurements, so their difference shows the drift between
periods, Section 13.1):

  setup     compile every case with strict_native=True (a case Stax cannot run
            natively is reported as such and timed eager only), check compiled
            against eager under the error model of Section 13.3
  round A   per case: eager and compiled timed in rotation, WARMUP + RUNS readings
            each; the bandwidth probe (row-wise sum over 64 MiB) at the start
  between   P (matmul FLOP/s, minimum time), call overhead per case on tiny
            inputs, compile cost C in new processes (cold and warm cache)
  round B   as round A
  analysis  Proposition 13.3 decomposition, roofline, break-even m* and N*,
            internal validity (analysis.py, errormodel.py: pure functions)

The measuring lives here; the arithmetic in analysis.py / errormodel.py; the
Markdown and figures in s13report.py.
"""

from __future__ import annotations

import math
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

import tensorplay as tp

from . import analysis, errormodel, s13compile
from .machine import describe_machine
from .s13cases import CASES, EXACT, POINTWISE, ROWSUM_ABS, ROWSUM_REL, TRAINING, S13Case, tiny_shapes
from .stats import RUNS, WARMUP, ratio_interval, rotate, time_fn

BANDWIDTH_SHAPE = (8192, 2048)  # 64 MiB float32
QUICK_BANDWIDTH_SHAPE = (1024, 2048)
MATMUL_N, QUICK_MATMUL_N = 2048, 512
OVERHEAD_CALLS = 200
LANES = {"avx512": 16, "avx2": 8}


@dataclass
class Options:
    quick: bool = False
    runs: int = RUNS
    warmup: int = WARMUP


class Progress:
    """A line on stderr for every step that may take longer than about a second."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = time.perf_counter()

    def __call__(self, msg: str) -> None:
        self.stream.write(f"[{time.perf_counter() - self.t0:6.1f} s] {msg}\n")
        self.stream.flush()


def last_level_cache_bytes() -> Optional[int]:
    """Size of the largest CPU cache (Linux sysfs), None when unknown."""
    import glob

    best = None
    for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(d + "/size") as fh:
                text = fh.read().strip().upper()
            mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
            size = int(text.rstrip("KMG")) * mult
        except (OSError, ValueError):
            continue
        best = size if best is None else max(best, size)
    return best


def accumulators() -> int:
    """W of Section 13.3: float32 lanes of the host's vectors (an assumption about
    both the generated and the library reductions; the seed takes 16)."""
    try:
        return LANES.get(tp.compiler.host_isa(), 4)
    except Exception:
        return 4


# ----------------------------------------------------------------- error model


def _np64(t) -> np.ndarray:
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t.numpy(), dtype=np.float64)


def evaluate_error(case: S13Case, inputs64: List[np.ndarray], eager: np.ndarray, compiled: np.ndarray,
                   ways: int, u: float = errormodel.UNIT_ROUNDOFF["float32"]) -> dict:
    """Measured compiled-vs-eager difference next to the prediction of Section 13.3."""
    diff = np.abs(compiled - eager)
    nz = np.abs(eager) > 0
    out = {
        "kind": case.error_kind,
        "u": u,
        "W": ways,
        "max_abs_diff": float(diff.max()) if diff.size else 0.0,
        "max_rel_diff": float((diff[nz] / np.abs(eager[nz])).max()) if nz.any() else 0.0,
        "finite": bool(np.isfinite(compiled).all()),
    }
    if case.error_kind in (ROWSUM_ABS, ROWSUM_REL):
        terms = case.terms(*inputs64)
        terms = terms.reshape(-1, terms.shape[-1])
        rows, n = terms.shape
        means, variances = terms.mean(-1), terms.var(-1)
        sums, abs_sums = terms.sum(-1), np.abs(terms).sum(-1)
        sig = np.array([errormodel.summation_error_sigma(n, float(m), float(v), u, ways)
                        for m, v in zip(means, variances)])
        sig_nomerge = np.array([errormodel.summation_error_sigma(n, float(m), float(v), u, ways, merge=False)
                                for m, v in zip(means, variances)])
        with np.errstate(divide="ignore"):
            kappa = np.where(sums != 0, abs_sums / np.abs(sums), np.inf)
        worst = int(np.argmax(kappa))
        out.update({
            "n": n, "rows": rows, "data_mean": float(means.mean()), "data_var": float(variances.mean()),
            "sigma_row": float(np.median(sig)), "sigma_row_without_merge": float(np.median(sig_nomerge)),
            "max_factor": errormodel.max_factor(rows),
            "kappa_worst_row": float(kappa[worst]), "worst_row": worst,
            "min_abs_row_sum": float(np.abs(sums).min()),
            "worst_case_bound_sequential": errormodel.worst_case_bound(n, float(abs_sums.max()), u, 1),
            "worst_case_bound_W": errormodel.worst_case_bound(n, float(abs_sums.max()), u, ways),
        })
        if case.error_kind == ROWSUM_ABS:
            out["predicted_max"] = errormodel.predicted_max_difference(float(sig.max()), rows)
            out["measured"] = out["max_abs_diff"]
            out["measure"] = "max |compiled - eager|"
        else:  # output = (...) / row sum: the relative error of the row sum reaches every element
            out["predicted_max"] = (math.sqrt(2.0) * float(np.max(sig / np.maximum(np.abs(sums), 1e-300)))
                                    + case.pointwise_ulps * u)
            out["pointwise_ulps"] = case.pointwise_ulps
            out["measured"] = out["max_rel_diff"]
            out["measure"] = "max relative difference"
    elif case.error_kind == EXACT:
        out.update(predicted_max=0.0, measured=out["max_abs_diff"], measure="max |compiled - eager|")
    elif case.error_kind == POINTWISE:
        out.update(predicted_max=None, measured=out["max_rel_diff"], measure="max relative difference",
                   measured_in_u=out["max_rel_diff"] / u)
    out["within_model"] = (out.get("predicted_max") is None
                           or out["measured"] <= max(4.0 * out["predicted_max"], 0.0)) and out["finite"]
    if case.error_kind == EXACT:
        out["within_model"] = out["measured"] == 0.0
    return out


def _training_error(case: S13Case, fn, cf, args) -> dict:
    w = args[1]
    w.grad = None
    fn(*args).backward()
    ge = _np64(w.grad)
    w.grad = None
    cf(*args).backward()
    gc = _np64(w.grad)
    w.grad = None
    u = errormodel.UNIT_ROUNDOFF["float32"]
    rel = float(np.abs(gc - ge).max() / max(np.abs(ge).max(), 1e-300))
    return {"kind": TRAINING, "u": u, "measured": rel, "measure": "max |dW_c - dW_e| / max |dW_e|",
            "measured_in_u": rel / u, "predicted_max": None, "finite": bool(np.isfinite(gc).all()),
            "within_model": bool(np.isfinite(gc).all())}


# ------------------------------------------------------------------ the rounds


class _Case:
    """One case's live objects: function, inputs, compiled function or why not."""

    def __init__(self, case: S13Case, quick: bool):
        self.case = case
        self.fn = case.make_fn()
        self.args = case.make_inputs(quick)
        self.cf = None
        self.native_error: Optional[str] = None
        self.compile_in_process_s: Optional[float] = None
        self.kernels: Optional[int] = None
        try:
            before = tp.compiler.metrics.generated_kernel_count
            t0 = time.perf_counter()
            cf = tp.compile(self.fn, strict_native=True)
            case.make_call(cf, self.args)()
            self.compile_in_process_s = time.perf_counter() - t0
            self.kernels = tp.compiler.metrics.generated_kernel_count - before
            self.cf = cf
        except Exception as exc:  # reported as "not native", never silently eager
            self.native_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"


def _bandwidth_probe(quick: bool, runs: int, warmup: int) -> dict:
    rows, cols = QUICK_BANDWIDTH_SHAPE if quick else BANDWIDTH_SHAPE
    x = tp.randn(rows, cols)
    y = tp.empty(rows, cols)
    # copy_ counts one read and one write; the write-allocate read of every
    # destination line is not counted, so its rate falls below B (Section 13.1).
    t, tc = rotate([lambda: x.sum(-1), lambda: y.copy_(x)], runs=runs, warmup=warmup, labels=["x.sum(-1)", "copy_"])
    nbytes = rows * cols * 4
    return {"shape": [rows, cols], "bytes": nbytes, "timing": t.to_dict(), "B": nbytes / t.min_s,
            "B_median": nbytes / t.median_s, "copy_timing": tc.to_dict(), "copy_rate": 2 * nbytes / tc.min_s}


def _round(name: str, live: Dict[str, _Case], opts: Options, progress: Progress) -> dict:
    res: dict = {"started_s": time.perf_counter() - progress.t0}
    progress(f"round {name}: bandwidth probe")
    res["bandwidth"] = _bandwidth_probe(opts.quick, opts.runs, opts.warmup)
    res["cases"] = {}
    for key, lc in live.items():
        progress(f"round {name}: {key}")
        eager_call = lc.case.make_call(lc.fn, lc.args)
        if lc.cf is None:
            te = time_fn(eager_call, runs=opts.runs, warmup=opts.warmup, label="eager")
            res["cases"][key] = {"eager": te.to_dict(), "compiled": None}
            continue
        te, tc = rotate([eager_call, lc.case.make_call(lc.cf, lc.args)], runs=opts.runs, warmup=opts.warmup,
                        labels=["eager", "compiled"])
        s_med, s_lo, s_hi = ratio_interval(te, tc)
        res["cases"][key] = {"eager": te.to_dict(), "compiled": tc.to_dict(), "S": te.median_s / tc.median_s,
                             "S_paired": {"median": s_med, "lo": s_lo, "hi": s_hi}}
    res["finished_s"] = time.perf_counter() - progress.t0
    return res


def _peak_flops(quick: bool, progress: Progress) -> dict:
    n = QUICK_MATMUL_N if quick else MATMUL_N
    progress(f"arithmetic throughput P: {n}x{n} float32 matmul")
    a, b = tp.randn(n, n), tp.randn(n, n)
    t = time_fn(lambda: a @ b, runs=9, warmup=2, label="matmul")
    flops = 2.0 * n**3
    return {"n": n, "flops": flops, "timing": t.to_dict(), "P": flops / t.min_s}


def _overheads(live: Dict[str, _Case], quick: bool, progress: Progress) -> dict:
    """Fixed cost per call on tiny inputs: eager (all its operators) and compiled
    (same tensors each call: the first-level entry), in rotation."""
    progress("call overhead on tiny inputs (all cases)")
    out: dict = {}
    calls = OVERHEAD_CALLS // (4 if quick else 1)
    for key, lc in live.items():
        case = lc.case
        try:
            ns = {"tp": tp}
            exec(case.inputs_source(tiny_shapes(case)), ns)
            args = ns["args"]
            fe = case.make_call(lc.fn, args)
            fns = [fe]
            if lc.cf is not None:
                cft = tp.compile(lc.fn, strict_native=True)
                fc = case.make_call(cft, args)
                fc()  # compile for the tiny shape outside the readings
                fns.append(fc)
            def loop(f, rng=range(calls)):
                def run():
                    for _ in rng:
                        f()
                return run

            loops = [loop(f) for f in fns]
            ts = rotate(loops, runs=15, warmup=1)
            d = {"calls_per_reading": calls, "tau_e_s": ts[0].median_s / calls,
                 "tau_e_per_op_s": ts[0].median_s / calls / max(case.eager_ops, 1)}
            if len(ts) > 1:
                d["tau_c_s"] = ts[1].median_s / calls
            out[key] = d
        except Exception as exc:
            out[key] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


# -------------------------------------------------------------------- analysis


def _analyse(live: Dict[str, _Case], rounds: Dict[str, dict], B: float, P: float, overhead: dict,
             compile_cost: dict, quick: bool) -> Dict[str, dict]:
    out: Dict[str, dict] = {}
    for key, lc in live.items():
        case = lc.case
        rows, cols = case.rows_cols(quick)
        d: dict = {"table": case.table, "title": case.title, "shapes": [list(s) for s in case.shape(quick)],
                   "native": lc.cf is not None, "native_error": lc.native_error, "note": case.note,
                   "kernels": lc.kernels, "eager_ops": case.eager_ops}
        modelled = case.eager_traffic is not None
        if modelled:
            be, bc = case.eager_traffic(rows, cols), case.compiled_traffic(rows, cols)
            d.update(b_e=be.bytes, b_c=bc.bytes, rho=be.bytes / bc.bytes,
                     traffic_e=be.describe(rows * cols, rows), traffic_c=bc.describe(rows * cols, rows))
            flops = case.flops_per_elem * rows * cols
            d["flops"] = flops
        per_round = {}
        for rname, r in rounds.items():
            c = r["cases"][key]
            pr = {"Te_ms": c["eager"]["median"], "Te_interval": [c["eager"]["lo"], c["eager"]["hi"]]}
            if c.get("compiled"):
                pr.update(Tc_ms=c["compiled"]["median"], Tc_interval=[c["compiled"]["lo"], c["compiled"]["hi"]],
                          S=c["S"], S_paired=c["S_paired"])
                if modelled:
                    dec = analysis.decompose(c["eager"]["median"] / 1e3, c["compiled"]["median"] / 1e3,
                                             d["b_e"], d["b_c"])
                    pr["decomposition"] = dec.as_dict()
                    pr["beta_e_over_B"] = dec.beta_e / B
                    pr["beta_c_over_B"] = dec.beta_c / B
                    pr["roofline_compiled"] = analysis.roofline_point(
                        d["flops"], d["b_c"], c["compiled"]["median"] / 1e3, B, P).as_dict()
            if modelled:
                pr["roofline_eager"] = analysis.roofline_point(d["flops"], d["b_e"], c["eager"]["median"] / 1e3,
                                                               B, P).as_dict()
            per_round[rname] = pr
        d["rounds"] = per_round
        if all("S" in pr for pr in per_round.values()) and len(per_round) == 2:
            a, b = per_round["A"], per_round["B"]
            v = analysis.validity(a["S"], b["S"], (a["S_paired"]["lo"], a["S_paired"]["hi"]),
                                  (b["S_paired"]["lo"], b["S_paired"]["hi"]))
            d["validity"] = v.as_dict()
        # Break-even (Propositions 13.4 and 13.6)
        cc, ov = compile_cost.get(key, {}), overhead.get(key, {})
        be_d: dict = {}
        if "cold_s" in cc:
            be_d.update(C_cold_s=cc["cold_s"], C_warm_s=cc["warm_s"])
            for rname, pr in per_round.items():
                if "Tc_ms" in pr:
                    te, tc = pr["Te_ms"] / 1e3, pr["Tc_ms"] / 1e3
                    be_d[f"saving_{rname}_s"] = te - tc
                    be_d[f"m_star_cold_{rname}"] = analysis.break_even_calls(cc["cold_s"], te, tc)
                    be_d[f"m_star_warm_{rname}"] = analysis.break_even_calls(cc["warm_s"], te, tc)
        elif "error" in cc:
            be_d["compile_cost_error"] = cc["error"]
        if "tau_c_s" in ov:
            be_d.update(tau_e_s=ov["tau_e_s"], tau_e_per_op_s=ov["tau_e_per_op_s"], tau_c_s=ov["tau_c_s"])
            if modelled:
                n = rows * cols
                be_d["N_star"] = analysis.min_fusion_size(
                    ov["tau_e_per_op_s"], case.eager_ops, ov["tau_c_s"], B,
                    case.eager_traffic(rows, cols).elements / n, case.compiled_traffic(rows, cols).elements / n)
        elif "error" in ov:
            be_d["overhead_error"] = ov["error"]
        d["break_even"] = be_d
        out[key] = d
    return out


# ----------------------------------------------------------------------- main


def run(opts: Options, progress: Optional[Progress] = None) -> dict:
    progress = progress or Progress()
    t_start = time.perf_counter()
    doc: dict = {"suite": "section13", "quick": opts.quick, "runs": opts.runs, "warmup": opts.warmup,
                 "machine": describe_machine(), "errors": {}}
    ways = accumulators()
    doc["machine"]["isa"] = _safe(tp.compiler.host_isa)
    doc["machine"]["last_level_cache_bytes"] = last_level_cache_bytes()
    doc["W"] = ways

    live: Dict[str, _Case] = {}
    errors_model: Dict[str, dict] = {}
    for case in CASES:
        progress(f"setup: {case.key} (inputs, strict_native compile, error check)")
        try:
            lc = _Case(case, opts.quick)
            live[case.key] = lc
            if lc.cf is None:
                errors_model[case.key] = {"kind": case.error_kind, "skipped": "not native"}
            elif case.training:
                errors_model[case.key] = _training_error(case, lc.fn, lc.cf, lc.args)
            else:
                e = _np64(lc.fn(*lc.args))
                c = _np64(lc.cf(*lc.args))
                errors_model[case.key] = evaluate_error(case, [_np64(a) for a in lc.args], e, c, ways)
        except Exception as exc:
            doc["errors"][f"setup.{case.key}"] = f"{type(exc).__name__}: {exc}"
            doc.setdefault("tracebacks", {})[case.key] = traceback.format_exc()

    rounds: Dict[str, dict] = {}
    rounds["A"] = _round("A", live, opts, progress)
    between: dict = {}
    for name, fn in (("P", lambda: _peak_flops(opts.quick, progress)),
                     ("overhead", lambda: _overheads(live, opts.quick, progress)),
                     ("compile_cost", lambda: s13compile.measure([lc.case for lc in live.values()], opts.quick,
                                                                 progress))):
        try:
            between[name] = fn()
        except Exception as exc:
            doc["errors"][name] = f"{type(exc).__name__}: {exc}"
            between[name] = {}
    rounds["B"] = _round("B", live, opts, progress)

    progress("analysis and report")
    B = max(r["bandwidth"]["B"] for r in rounds.values())  # Proposition 13.1: the best reading
    P = between["P"].get("P") or float("nan")
    doc["capability"] = {
        "B": B, "B_rounds": {k: r["bandwidth"]["B"] for k, r in rounds.items()},
        "B_median_rounds": {k: r["bandwidth"]["B_median"] for k, r in rounds.items()},
        "copy_rate": max(r["bandwidth"]["copy_rate"] for r in rounds.values()),
        "bandwidth_probe": {k: r["bandwidth"] for k, r in rounds.items()},
        "P": P, "matmul": between["P"], "ridge": P / B if P == P else None,
    }
    doc["rounds"] = {k: {"started_s": r["started_s"], "finished_s": r["finished_s"]} for k, r in rounds.items()}
    doc["raw_rounds"] = {k: r["cases"] for k, r in rounds.items()}
    doc["overhead"] = between["overhead"]
    doc["compile_cost"] = between["compile_cost"]
    doc["cases"] = _analyse(live, rounds, B, P if P == P else 1.0, between["overhead"], between["compile_cost"],
                            opts.quick)
    for key, em in errors_model.items():
        if key in doc["cases"]:
            doc["cases"][key]["error_model"] = em
    doc["wall_s"] = time.perf_counter() - t_start
    if not doc["errors"]:
        del doc["errors"]
    return doc


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None
