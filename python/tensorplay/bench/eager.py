"""Eager speed against PyTorch eager (issue 3, item 7).

Every case runs the same operator on the same data in TensorPlay and in
PyTorch (CPU build, same thread count), timed in rotation (tp, torch, tp,
torch, ...) so both see the same machine periods. The figure that matters is
the paired per-round ratio tp/torch with its distribution-free interval;
the targets are median ratio <= 1.25 for the large-tensor kernels and
<= 2 for the per-operator overhead on 8-element tensors.

Without PyTorch installed the suite still times TensorPlay and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional

import numpy as np

import tensorplay as tp

from .report import Report, verdict
from .stats import ratio_interval, rotate

KERNEL_TARGET = 1.25
OVERHEAD_TARGET = 2.0
ROWS, COLS = 8192, 2048
MATMUL_N = 2048

UNARY = [
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "sigmoid",
    "logit", "relu", "gelu", "gelu_tanh", "silu", "mish", "softplus", "elu", "leaky_relu", "hardtanh", "abs",
    "sign", "floor", "ceil", "round", "trunc", "frac", "reciprocal", "square", "neg", "isnan", "isinf",
    "isfinite", "logical_not",
]
BINARY = [
    "add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2", "maximum", "minimum",
    "hypot", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
]
# Inputs inside each function's domain, so no case measures NaN handling only.
_DOMAIN = {
    "log": "pos", "log2": "pos", "log10": "pos", "log1p": "pos", "sqrt": "pos", "rsqrt": "pos",
    "asin": "unit", "acos": "unit", "atanh": "unit", "erfinv": "unit", "logit": "prob", "acosh": "ge1",
}


@dataclass
class Case:
    name: str
    tp_fn: Callable[[], object]
    torch_fn: Optional[Callable[[], object]]
    target: float
    # PyTorch writing into a preallocated out= tensor: its kernel without the
    # page faults of a fresh 64 MiB output (TensorPlay reuses large blocks through
    # its caching host allocator, PyTorch's CPU allocator does not). Reported
    # beside the target ratio so the kernel-to-kernel comparison is visible too.
    torch_out_fn: Optional[Callable[[], object]] = None


def _torch():
    try:
        import torch  # noqa: F401
    except Exception:  # not installed, or broken: the suite still measures TensorPlay
        return None
    return torch


def _input(kind: str, shape, rng) -> np.ndarray:
    x = rng.standard_normal(shape, dtype=np.float32)
    if kind == "pos":
        return np.abs(x) + 0.1
    if kind == "unit":
        return np.tanh(x) * 0.99
    if kind == "prob":
        return (np.tanh(x) * 0.49 + 0.5).astype(np.float32)
    if kind == "ge1":
        return np.abs(x) + 1.0
    return x


def _unary_call(mod, name: str, x):
    if name == "gelu_tanh":
        return mod.nn.functional.gelu(x, approximate="tanh")
    if name in ("gelu", "silu", "mish", "softplus", "elu", "leaky_relu", "hardtanh"):
        return getattr(mod.nn.functional, name)(x)
    return getattr(mod, name)(x)


def _kernel_cases(torch, quick: bool) -> List[Case]:
    rows, cols = (256, 128) if quick else (ROWS, COLS)
    rng = np.random.default_rng(0)
    cases: List[Case] = []

    def pair(name, make, make_out=None):  # make(module, converter) -> zero-argument callable
        tp_fn = make(tp, tp.from_numpy)
        th_fn = make(torch, torch.from_numpy) if torch is not None else None
        out_fn = _with_out(torch, make_out) if torch is not None and make_out is not None else None
        cases.append(Case(name, tp_fn, th_fn, KERNEL_TARGET, out_fn))

    for name in UNARY:
        a = _input(_DOMAIN.get(name, "any"), (rows, cols), rng)
        pair(name, lambda m, conv, a=a, name=name: (lambda x=conv(a): _unary_call(m, name, x)),
             lambda m, conv, out, a=a, name=name: (lambda x=conv(a): getattr(m, name)(x, out=out)))
    a = rng.standard_normal((rows, cols), dtype=np.float32)
    b = rng.standard_normal((rows, cols), dtype=np.float32) + 3.0  # away from 0 for div/fmod
    for name in BINARY:
        pair(name, lambda m, conv, name=name: (lambda x=conv(a), y=conv(b): getattr(m, name)(x, y)),
             lambda m, conv, out, name=name: (lambda x=conv(a), y=conv(b): getattr(m, name)(x, y, out=out)))
    for red in ("sum", "amax", "mean"):
        for dim in (-1, 0):
            pair(f"{red}(dim={dim})", lambda m, conv, red=red, dim=dim: (lambda x=conv(a): getattr(m, red)(x, dim)),
                 lambda m, conv, out, red=red, dim=dim: (lambda x=conv(a): getattr(m, red)(x, dim, out=out)))
    pair("softmax(dim=-1)", lambda m, conv: (lambda x=conv(a): m.softmax(x, -1)))
    w = rng.standard_normal(cols, dtype=np.float32)
    bias = rng.standard_normal(cols, dtype=np.float32)
    pair(
        "layer_norm(last dim)",
        lambda m, conv: (lambda x=conv(a), w=conv(w), bb=conv(bias): m.nn.functional.layer_norm(x, (cols,), w, bb)),
    )
    n = 128 if quick else MATMUL_N
    ma = rng.standard_normal((n, n), dtype=np.float32)
    mb = rng.standard_normal((n, n), dtype=np.float32)
    pair(f"matmul {n}x{n}x{n}", lambda m, conv: (lambda x=conv(ma), y=conv(mb): m.matmul(x, y)),
         lambda m, conv, out: (lambda x=conv(ma), y=conv(mb): m.matmul(x, y, out=out)))
    return cases


def _with_out(torch, make_out):
    """The torch call writing into a preallocated result, or None where the
    operator takes no out= (the activations of torch.nn.functional)."""
    probe = make_out(torch, torch.from_numpy, None)
    try:
        out = torch.empty_like(probe())  # out=None: the plain call gives the result's shape and dtype
        fn = make_out(torch, torch.from_numpy, out)
        fn()
        return fn
    except (TypeError, RuntimeError, AttributeError):
        return None


def _overhead_cases(torch) -> List[Case]:
    """Per-operator cost from Python on 8 elements: the kernel is nothing, the
    figure is dispatch + allocation + binding."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal(8, dtype=np.float32)
    b = rng.standard_normal(8, dtype=np.float32)
    specs = {
        "x + y": lambda m, x, y: x + y,
        "x * 2": lambda m, x, y: x * 2,
        "exp(x)": lambda m, x, y: m.exp(x),
        "x.sum()": lambda m, x, y: x.sum(),
        "relu(x)": lambda m, x, y: m.relu(x),
        "x[1:5]": lambda m, x, y: x[1:5],
        "x.view(2, 4)": lambda m, x, y: x.view(2, 4),
    }
    cases = []
    for name, f in specs.items():
        xs, ys = tp.from_numpy(a.copy()), tp.from_numpy(b.copy())
        tp_fn = (lambda f=f, x=xs, y=ys: f(tp, x, y))
        th_fn = None
        if torch is not None:
            xt, yt = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
            th_fn = (lambda f=f, x=xt, y=yt: f(torch, x, y))
        cases.append(Case(name, tp_fn, th_fn, OVERHEAD_TARGET))
    return cases


def _run(cases: List[Case], report: Report, runs: int, warmup: int, calls: int, unit: str) -> dict:
    out = {}
    for c in cases:
        try:
            c.tp_fn()  # errors (a missing operator) are reported per case
        except Exception as exc:
            report.figure(c.name, f"ERROR {type(exc).__name__}: {exc}"[:140])
            out[c.name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        if c.torch_fn is None:
            (t,) = rotate([c.tp_fn], runs=runs, warmup=warmup, calls=calls)
            report.figure(c.name, t.fmt(unit))
            out[c.name] = {"tensorplay": t.to_dict(unit)}
            continue
        fns = [c.tp_fn, c.torch_fn] + ([c.torch_out_fn] if c.torch_out_fn else [])
        timings = rotate(fns, runs=runs, warmup=warmup, calls=calls, labels=["tp", "torch", "torch out="])
        t_tp, t_th = timings[0], timings[1]
        r, lo, hi = ratio_interval(t_tp, t_th)
        ok = r <= c.target
        extra = ""
        out[c.name] = {
            "tensorplay": t_tp.to_dict(unit),
            "torch": t_th.to_dict(unit),
            "ratio": r,
            "ratio_interval": [lo, hi],
            "target": c.target,
            "within_target": ok,
        }
        if c.torch_out_fn:
            t_out = timings[2]
            r2, lo2, hi2 = ratio_interval(t_tp, t_out)
            extra = f"; vs torch out= {t_out.in_unit('median', unit):.2f}: {r2:.2f} [{lo2:.2f}, {hi2:.2f}]"
            out[c.name].update({"torch_out": t_out.to_dict(unit), "ratio_vs_out": r2, "ratio_vs_out_interval": [lo2, hi2]})
        report.figure(
            c.name,
            f"tp {t_tp.fmt(unit)}  torch {t_th.fmt(unit)}",
            f"ratio {r:.2f} [{lo:.2f}, {hi:.2f}], target <= {c.target}: {verdict(ok)}{extra}",
        )
    return out


def measure(report: Report, quick: bool, threads: int) -> dict:
    torch = _torch()
    report.section("Eager speed: TensorPlay vs PyTorch eager, side by side")
    if torch is None:
        report.note("PyTorch is not installed (pip install torch==2.13.0): TensorPlay is timed alone, no ratios.")
    else:
        torch.set_num_threads(threads)
        report.figure("torch", f"{torch.__version__}, {torch.get_num_threads()} threads")
    report.figure("tensorplay threads", str(tp.get_num_threads()))
    runs, warmup = (5, 1) if quick else (11, 2)
    report.code(
        f"x = from_numpy(standard_normal(({ROWS}, {COLS}), float32))   # per library, same data\n"
        "# readings rotate tp, torch, tp, torch, ...; ratio = median of per-round tp/torch"
    )
    results = {"kernels": _run(_kernel_cases(torch, quick), report, runs, warmup, 1, "ms")}
    calls = 2000 if quick else 20000
    report.section("Per-operator overhead from Python on 8-element tensors")
    report.code(f"# one reading = {calls} calls; target: tp <= {OVERHEAD_TARGET} x torch")
    results["overhead"] = _run(_overhead_cases(torch), report, runs, warmup, calls, "us")
    ratios = [v for sec in results.values() for v in sec.values() if "ratio" in v]
    misses = [k for sec in results.values() for k, v in sec.items() if "ratio" in v and not v["within_target"]]
    errors = [k for sec in results.values() for k, v in sec.items() if "error" in v]
    if ratios:
        report.note(f"{len(ratios) - len(misses)} of {len(ratios)} cases within target; "
                    f"missed: {', '.join(misses) if misses else 'none'}")
    vs_out = [(k, v["ratio_vs_out"]) for k, v in results["kernels"].items() if "ratio_vs_out" in v]
    if vs_out:
        above = [f"{k} {r:.2f}" for k, r in vs_out if r > KERNEL_TARGET]
        report.note(f"against PyTorch writing into preallocated out= tensors (kernel against kernel, no page faults "
                    f"on PyTorch's side): {len(vs_out) - len(above)} of {len(vs_out)} within {KERNEL_TARGET}; above: "
                    f"{', '.join(above) if above else 'none'}")
    if errors:
        report.note(f"cases that could not run: {', '.join(errors)}")
    results["torch_version"] = getattr(torch, "__version__", None)
    return results
