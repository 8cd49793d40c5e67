"""Figures of the Stax core (issue 8), measured side by side in one run:

* a column sum (`x.sum(0)` of 8192x2048): error of the compiled and the eager
  result against float64, and the paired compiled/eager time ratio;
* regions with a GEMM (`gelu(x @ W + b)`, and with layer_norm around it):
  compiled natively (strict_native, no fallback) with the GEMM as an extern
  call and the pointwise work fused around it; time against eager TensorPlay
  and eager PyTorch;
* generated source size and cold compile time where values are used more
  than once (the codegen suite's programs);
* int32 data (indices and quantized values from NumPy): a pointwise chain
  and a row sum of int32, compiled natively (CPU regions used to fall back to
  eager for any narrow integer), bit-equal to eager, time against eager;
* bfloat16 data: a pointwise chain with a row sum, compiled natively (one
  rounding per stored value) against eager (one per operator): error of both
  against float64, time against eager.

The default suite covers the rest (Example 1.1 and softmax S, cold compile,
warm cache, call overhead)."""

from __future__ import annotations

import numpy as np

import tensorplay as tp
import tensorplay.nn.functional as F

from . import codegen
from .report import Report, verdict
from .stats import ratio_interval, rotate


def _torch():
    try:
        import torch
        return torch
    except ImportError:  # optional oracle
        return None


def _runs(quick: bool):
    return (5, 1) if quick else (11, 2)


def column_sum(report: Report, quick: bool) -> dict:
    rows, cols = (2048, 512) if quick else (8192, 2048)
    report.section(f"column sum x.sum(0), x {rows}x{cols} float32")
    report.code("cf = tp.compile(lambda x: x.sum(0), strict_native=True)\n"
                "# error = max |result - sum in float64|; time: rotated readings, paired ratio")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    x = tp.from_numpy(a)
    cf = tp.compile(lambda x: x.sum(0), strict_native=True)
    exact = a.astype(np.float64).sum(0)
    err_c = float(np.abs(cf(x).numpy().astype(np.float64) - exact).max())
    err_e = float(np.abs(x.sum(0).numpy().astype(np.float64) - exact).max())
    runs, warmup = _runs(quick)
    tc, te = rotate([lambda: cf(x), lambda: x.sum(0)], runs=runs, warmup=warmup, labels=["compiled", "eager"])
    r, lo, hi = ratio_interval(tc, te)
    ok = err_c <= err_e * 1.0000001
    report.figure("error vs float64", f"compiled {err_c:.3g}, eager {err_e:.3g}",
                  f"compiled not above eager: {verdict(ok)}")
    report.figure("time", f"compiled {tc.fmt()}  eager {te.fmt()}", f"compiled/eager {r:.2f} [{lo:.2f}, {hi:.2f}]")
    return {"rows": rows, "cols": cols, "error_compiled": err_c, "error_eager": err_e, "error_within_eager": ok,
            "compiled": tc.to_dict(), "eager": te.to_dict(), "ratio": r, "ratio_interval": [lo, hi]}


def _int32_chain(a, b):
    return (a * 3 + b) & 1023, ((a - b) * 7).sum(-1)


def int32_regions(report: Report, quick: bool) -> dict:
    rows, cols = (512, 1024) if quick else (4096, 4096)
    report.section(f"int32 pointwise + row sum, a, b {rows}x{cols} int32")
    report.code("cf = tp.compile(lambda a, b: ((a * 3 + b) & 1023, ((a - b) * 7).sum(-1)), strict_native=True)\n"
                "# equal to eager bit for bit; time: rotated readings, paired ratio")
    rng = np.random.default_rng(2)
    a = tp.from_numpy(rng.integers(-2**31, 2**31, (rows, cols), dtype=np.int32))
    b = tp.from_numpy(rng.integers(-2**31, 2**31, (rows, cols), dtype=np.int32))
    cf = tp.compile(_int32_chain, strict_native=True)
    got, want = cf(a, b), _int32_chain(a, b)
    same = all(np.array_equal(g.numpy(), w.numpy()) for g, w in zip(got, want))
    runs, warmup = _runs(quick)
    tc, te = rotate([lambda: cf(a, b), lambda: _int32_chain(a, b)], runs=runs, warmup=warmup,
                    labels=["compiled", "eager"])
    r, lo, hi = ratio_interval(tc, te)
    report.figure("result", "compiled equals eager bit for bit", verdict(same))
    report.figure("time", f"compiled {tc.fmt()}  eager {te.fmt()}", f"compiled/eager {r:.2f} [{lo:.2f}, {hi:.2f}]")
    return {"rows": rows, "cols": cols, "equal": same, "compiled": tc.to_dict(), "eager": te.to_dict(), "ratio": r,
            "ratio_interval": [lo, hi]}


def _bf16_chain(x):
    y = (x * 2 + 1).tanh() * x
    return y, y.sum(-1)


def bf16_regions(report: Report, quick: bool) -> dict:
    rows, cols = (512, 1024) if quick else (4096, 4096)
    report.section(f"bfloat16 pointwise + row sum, x {rows}x{cols} bfloat16")
    report.code("f = lambda x: (y := (x * 2 + 1).tanh() * x, y.sum(-1))\n"
                "cf = tp.compile(f, strict_native=True)\n"
                "# error = max |result - float64 of the same bf16 inputs|; time: rotated readings, paired ratio")
    rng = np.random.default_rng(3)
    x = tp.from_numpy(rng.standard_normal((rows, cols)).astype(np.float32)).to(tp.bfloat16)
    cf = tp.compile(_bf16_chain, strict_native=True)
    x64 = x.double().numpy()
    y64 = np.tanh(x64 * 2 + 1) * x64
    refs = (y64, y64.sum(-1))
    got, want = cf(x), _bf16_chain(x)
    err_c = [float(np.abs(g.double().numpy() - r).max()) for g, r in zip(got, refs)]
    err_e = [float(np.abs(w.double().numpy() - r).max()) for w, r in zip(want, refs)]
    # Either no worse than eager, or every element within one bf16 rounding of
    # float64 (the row sums' error is their final rounding, which may go
    # either way: |sum| ~ 300 has an ulp of 2).
    one = [bool((np.abs(g.double().numpy() - r) <= 2.0**-8 * np.abs(r) + 1e-30).all()) for g, r in zip(got, refs)]
    ok = all(c <= e * 1.0000001 or o for c, e, o in zip(err_c, err_e, one))
    runs, warmup = _runs(quick)
    tc, te = rotate([lambda: cf(x), lambda: _bf16_chain(x)], runs=runs, warmup=warmup, labels=["compiled", "eager"])
    r, lo, hi = ratio_interval(tc, te)
    report.figure("error vs float64", f"y: compiled {err_c[0]:.3g}, eager {err_e[0]:.3g}; "
                  f"sum: compiled {err_c[1]:.3g}, eager {err_e[1]:.3g}",
                  f"compiled not above eager or within one rounding: {verdict(ok)}")
    report.figure("time", f"compiled {tc.fmt()}  eager {te.fmt()}", f"compiled/eager {r:.2f} [{lo:.2f}, {hi:.2f}]")
    return {"rows": rows, "cols": cols, "error_compiled": err_c, "error_eager": err_e, "error_ok": ok,
            "within_one_rounding": one, "compiled": tc.to_dict(), "eager": te.to_dict(), "ratio": r,
            "ratio_interval": [lo, hi]}


def _gelu_linear(x, w, b):
    return F.gelu(x @ w + b)


def _ln_gelu_linear(x, w, b):
    return F.layer_norm(F.gelu(F.layer_norm(x, x.shape[-1:]) @ w + b), w.shape[-1:])


def gemm_regions(report: Report, quick: bool) -> dict:
    m, k, n = (512, 256, 256) if quick else (2048, 1024, 1024)
    report.section(f"regions with a GEMM: extern call + fused epilogue, x {m}x{k}, W {k}x{n}, float32")
    report.code("cf = tp.compile(f, strict_native=True)   # raises if any part fell back\n"
                "f1 = gelu(x @ W + b);  f2 = layer_norm(gelu(layer_norm(x) @ W + b))\n"
                "# time: rotated readings of compiled, eager TensorPlay, eager PyTorch")
    torch = _torch()
    rng = np.random.default_rng(1)
    xa = rng.standard_normal((m, k)).astype(np.float32)
    wa = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    ba = rng.standard_normal(n).astype(np.float32)
    x, w, b = tp.from_numpy(xa), tp.from_numpy(wa), tp.from_numpy(ba)
    out = {}
    runs, warmup = _runs(quick)
    for key, fn in (("gelu_linear", _gelu_linear), ("layer_norm_gelu_linear", _ln_gelu_linear)):
        before = tp.compiler.metrics.as_dict() if hasattr(tp.compiler.metrics, "as_dict") else None
        cf = tp.compile(fn, strict_native=True)
        got = cf(x, w, b)
        want = fn(x, w, b)
        diff = float((got - want).abs().max())
        src = cf.last_source or ""
        kernels = src.count("static void ")
        fns = [lambda: cf(x, w, b), lambda: fn(x, w, b)]
        labels = ["compiled", "eager"]
        if torch is not None:
            xt, wt, bt = torch.from_numpy(xa), torch.from_numpy(wa), torch.from_numpy(ba)
            tf = torch.nn.functional
            if key == "gelu_linear":
                fns.append(lambda: tf.gelu(xt @ wt + bt))
            else:
                fns.append(lambda: tf.layer_norm(tf.gelu(tf.layer_norm(xt, (k,)) @ wt + bt), (n,)))
            labels.append("torch")
        ts = rotate(fns, runs=runs, warmup=warmup, labels=labels)
        r, lo, hi = ratio_interval(ts[0], ts[1])
        row = {"generated_kernels": kernels, "max_abs_diff_vs_eager": diff, "compiled": ts[0].to_dict(),
               "eager": ts[1].to_dict(), "ratio_vs_eager": r, "ratio_vs_eager_interval": [lo, hi]}
        note = f"compiled/eager {r:.2f} [{lo:.2f}, {hi:.2f}]"
        if torch is not None:
            rt, lot, hit = ratio_interval(ts[0], ts[2])
            row.update({"torch": ts[2].to_dict(), "ratio_vs_torch": rt, "ratio_vs_torch_interval": [lot, hit]})
            note += f"; compiled/torch {rt:.2f} [{lot:.2f}, {hit:.2f}]"
        report.figure(key, f"native, {kernels} generated kernel(s) + GEMM extern, |diff| {diff:.2g}",
                      f"compiled {ts[0].fmt()}  eager {ts[1].fmt()}" + (f"  torch {ts[2].fmt()}" if torch else ""))
        report.figure("", note)
        out[key] = row
        del before
    return out


def measure(report: Report, quick: bool) -> dict:
    return {"column_sum": column_sum(report, quick), "gemm_regions": gemm_regions(report, quick),
            "growth": codegen.measure(report, quick)}
