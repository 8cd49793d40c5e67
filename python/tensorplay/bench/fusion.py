"""Eager vs compiled on one case (Section 13.2): medians from one alternating run,
the speedup S = Te/Tc and its two factors, the model byte ratio rho = b_e/b_c
and the effective bandwidths beta = b/T (Proposition 13.3: S = rho beta_c/beta_e).
Compiled runs use strict_native=True so a fallback to eager cannot be measured
by mistake (Section 13.5)."""

from __future__ import annotations

import numpy as np

import tensorplay as tp

from .cases import FusionCase
from .report import Report, gbps, verdict
from .machine import BANDWIDTH_SHAPE, QUICK_BANDWIDTH_SHAPE
from .stats import ratio_interval, rotate


def check_agreement(case: FusionCase, args, eager_out, compiled_out) -> dict:
    """max |compiled - eager| and how it compares with the summation error model."""
    e = np.asarray(eager_out.numpy(), dtype=np.float64)
    c = np.asarray(compiled_out.numpy(), dtype=np.float64)
    if e.shape != c.shape:
        return {"ok": False, "reason": f"shape {c.shape} vs eager {e.shape}"}
    allowed = case.tolerance(*[a.numpy() for a in args])
    allowed = np.broadcast_to(allowed.reshape(allowed.shape + (1,) * (e.ndim - allowed.ndim)), e.shape)
    diff = np.abs(c - e)
    finite = bool(np.isfinite(c).all())
    worst = float(np.max(diff / np.maximum(allowed, np.finfo(np.float64).tiny))) if diff.size else 0.0
    return {
        "ok": finite and worst <= 1.0,
        "max_abs_diff": float(diff.max()) if diff.size else 0.0,
        "max_rel_diff": float(np.max(diff / np.maximum(np.abs(e), 1e-30))) if diff.size else 0.0,
        "worst_diff_over_tolerance": worst,
    }


def run_case(case: FusionCase, report: Report, quick: bool, bandwidth_Bps: float, number: str = "2") -> dict:
    rows, cols = case.quick_shape if quick else case.shape
    runs, warmup = (7, 1) if quick else (15, 3)
    report.section(f"{number}. {case.title} at {rows}x{cols} float32")
    names = ", ".join(["x", "w"][: case.n_inputs])
    report.code(
        case.fn_source
        + f"{names} = " + ", ".join([f"tp.randn({rows}, {cols})"] * case.n_inputs)
        + "\ncf = tp.compile(f, strict_native=True)"
        + f"\n# timed in rotation, warm-up {warmup}, {runs} readings each: f({names})  vs  cf({names})"
        + "  vs  the bandwidth probe x.sum(-1)"
    )
    f = case.make_fn()
    args = case.make_inputs((rows, cols))
    cf = tp.compile(f, strict_native=True)

    compiled_out = cf(*args)  # compiles (strict: raises rather than fall back)
    eager_out = f(*args)
    agreement = check_agreement(case, args, eager_out, compiled_out)
    del compiled_out, eager_out

    # The bandwidth probe of section 1 runs in the same rotation, so beta_c can
    # also be compared with a B from the same machine periods (Section 13.1:
    # bandwidth drifts between periods; only side-by-side ratios hold).
    prow, pcol = QUICK_BANDWIDTH_SHAPE if quick else BANDWIDTH_SHAPE
    probe = tp.randn(prow, pcol)
    te, tc, tp_probe = rotate([lambda: f(*args), lambda: cf(*args), lambda: probe.sum(-1)], runs=runs,
                              warmup=warmup, labels=["eager", "compiled", "probe"])
    B_side = gbps(prow * pcol * 4, tp_probe.min_s)
    be = case.eager_traffic(rows, cols, 4)
    bc = case.compiled_traffic(rows, cols, 4)
    s = te.median_s / tc.median_s
    s_med, s_lo, s_hi = ratio_interval(te, tc)
    rho = be.bytes / bc.bytes
    beta_e = gbps(be.bytes, te.median_s)
    beta_c = gbps(bc.bytes, tc.median_s)
    B = bandwidth_Bps / 1e9 if bandwidth_Bps else None

    report.figure("eager   Te", te.fmt())
    report.figure("compiled Tc", tc.fmt())
    report.figure("speedup S = Te/Tc", f"{s:.2f}", f"paired per-round ratio {s_med:.2f} [{s_lo:.2f}, {s_hi:.2f}]")
    report.figure("model byte ratio rho = b_e/b_c", f"{rho:.3f}", f"b_e = {be.bytes} B, b_c = {bc.bytes} B")
    report.note(f"eager traffic (elements; N = {rows * cols}, R = {rows} rows): {be.describe(rows * cols, rows)}")
    report.note(f"compiled traffic (elements): {bc.describe(rows * cols, rows)}")
    report.figure("beta_e = b_e/Te", f"{beta_e:.1f} GB/s", f"{beta_e / B:.0%} of B" if B else "")
    report.figure("beta_c = b_c/Tc", f"{beta_c:.1f} GB/s", f"{beta_c / B:.0%} of B" if B else "")
    report.figure("B in the same rounds", f"{B_side:.1f} GB/s",
                  f"min of the interleaved probe; beta_c = {beta_c / B_side:.0%} of it")
    report.figure("rho * beta_c/beta_e", f"{rho * beta_c / beta_e:.2f}", "= S (Proposition 13.3)")
    report.figure(
        "max |compiled - eager|",
        f"{agreement.get('max_abs_diff', float('nan')):.3g}",
        f"{agreement.get('worst_diff_over_tolerance', float('nan')):.3g} of the summation-model tolerance: "
        + verdict(agreement["ok"]),
    )
    return {
        "shape": [rows, cols],
        "eager": te.to_dict(),
        "compiled": tc.to_dict(),
        "S": s,
        "S_paired": {"median": s_med, "lo": s_lo, "hi": s_hi},
        "rho": rho,
        "b_e": be.to_dict(),
        "b_c": bc.to_dict(),
        "beta_e_GBps": beta_e,
        "beta_c_GBps": beta_c,
        "beta_e_over_B": beta_e / B if B else None,
        "beta_c_over_B": beta_c / B if B else None,
        "B_same_rounds_GBps": B_side,
        "beta_c_over_B_same_rounds": beta_c / B_side,
        "agreement": agreement,
    }
