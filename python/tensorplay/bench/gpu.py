"""``--suite gpu``: Stax's generated CUDA kernels against eager PyTorch and
torch.compile on the same data (issue 12).

beta = model bytes / time, as a fraction of the device-to-device copy
bandwidth measured in the same run (read + write of a 256 MiB copy_).  Model
bytes count every input read once and every output written once.  Times are
host wall-clock over `runs` back-to-back calls between two synchronizations
(each call is a few hundred microseconds of GPU work, so launch cost is
amortized the same way for every contender).  The data is made by PyTorch and
shared with TensorPlay through DLPack (zero-copy), so both read the same
memory.  Without a GPU the suite says so and measures nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import tensorplay as tp
import tensorplay.nn.functional as F

from .report import Report


def _ex11(x, w):
    return ((x + w).relu() * 2).sum(-1)


def _rowsum(x):
    return x.sum(-1)


def _colsum(x):
    return x.sum(0)


def _rmsnorm(x, w):
    return x * (x * x).mean(-1, keepdim=True).add(1e-6).rsqrt() * w


def _softmax5(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


def _cases(quick: bool, small: bool = False):
    R, C = (1024, 1024) if quick else (8192, 2048) if small else (32768, 8192)
    SR, SC = (2048, 512) if quick else (8192, 2048) if small else (65536, 4096)

    def ln_tp(x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b)

    def ln_torch(x, w, b):
        import torch
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)

    def gelu_tp(x, b):
        return F.gelu(x + b, approximate="tanh")

    def gelu_torch(x, b):
        import torch
        return torch.nn.functional.gelu(x + b, approximate="tanh")

    # name, (tp fn, torch fn), shapes of the inputs, model bytes (float32)
    return [
        ("Example 1.1", (_ex11, _ex11), [(R, C), (C,)], (R * C + C + R) * 4, (R, C)),
        ("row sum", (_rowsum, _rowsum), [(R, C)], (R * C + R) * 4, (R, C)),
        ("column sum", (_colsum, _colsum), [(R, C)], (R * C + C) * 4, (R, C)),
        ("layer_norm", (ln_tp, ln_torch), [(R, C), (C,), (C,)], (2 * R * C + 2 * C) * 4, (R, C)),
        ("RMSNorm", (_rmsnorm, _rmsnorm), [(R, C), (C,)], (2 * R * C + C) * 4, (R, C)),
        ("bias + tanh-GELU", (gelu_tp, gelu_torch), [(R, C), (C,)], (2 * R * C + C) * 4, (R, C)),
        ("five-op softmax", (_softmax5, _softmax5), [(SR, SC)], 2 * SR * SC * 4, (SR, SC)),
    ]


def _time(fn, sync, runs: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    sync()
    best = float("inf")
    for _ in range(3):  # best of three batches
        t0 = time.perf_counter()
        for _ in range(runs):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / runs)
    return best


def _torch():
    try:
        import torch
        if torch.cuda.is_available():
            return torch
    except Exception:  # not installed or broken: TensorPlay is still measured
        pass
    return None


def copy_bandwidth(torch, quick: bool) -> dict:
    n = (16 if quick else 256) * 2 ** 20 // 4
    x = tp.randn(n).to("cuda")
    y = tp.empty(n).to("cuda")
    t = _time(lambda: y.copy_(x), tp.cuda.synchronize, 20)
    out = {"bytes": 2 * n * 4, "tp_copy_s": t, "tp_copy_Bps": 2 * n * 4 / t}
    if torch is not None:
        tx = torch.randn(n, device="cuda")
        ty = torch.empty(n, device="cuda")
        tt = _time(lambda: ty.copy_(tx), torch.cuda.synchronize, 20)
        out["torch_copy_s"] = tt
        out["torch_copy_Bps"] = 2 * n * 4 / tt
    out["ceiling_Bps"] = max(out["tp_copy_Bps"], out.get("torch_copy_Bps", 0.0))
    return out


def _kernel_row(report: Report, torch, ceiling: float, case, runs: int, half: bool) -> dict:
    """One case of the table: tp.compile beside torch eager and torch.compile on
    the same data (float32, or bfloat16 with `half`), beta per contender."""
    import numpy as np

    name, (ftp, ftorch), shapes, model32, size = case
    model = model32 // 2 if half else model32
    row = {"model_bytes": model}
    if torch is not None:
        dtype = torch.bfloat16 if half else torch.float32
        targs = [torch.randn(*s, device="cuda", dtype=dtype) for s in shapes]
        args = [tp.from_dlpack(a) for a in targs]
    else:
        args = [(tp.randn(*s).to(tp.bfloat16) if half else tp.randn(*s)).to("cuda") for s in shapes]
        targs = None
    cf = tp.compile(ftp, strict_native=True)
    t0 = time.perf_counter()
    got = cf(*args)
    tp.cuda.synchronize()
    row["tp_first_call_s"] = time.perf_counter() - t0
    row["tp_compile_s"] = _time(lambda: cf(*args), tp.cuda.synchronize, runs)
    contenders = [("tp.compile", row["tp_compile_s"])]
    if torch is not None:
        row["torch_eager_s"] = _time(lambda: ftorch(*targs), torch.cuda.synchronize, runs)
        contenders.append(("torch eager", row["torch_eager_s"]))
        w = ftorch(*targs).float().cpu().numpy()
        g = got.float().cpu().numpy()
        row["max_abs_diff_vs_torch"] = float(np.max(np.abs(g - w)))
        row["max_abs_torch"] = float(np.max(np.abs(w)))
        try:
            tc = torch.compile(ftorch, dynamic=False)
            tc(*targs)
            torch.cuda.synchronize()
            row["torch_compile_s"] = _time(lambda: tc(*targs), torch.cuda.synchronize, runs)
            contenders.append(("torch.compile", row["torch_compile_s"]))
        except Exception as exc:  # Inductor missing or failing: the others still count
            row["torch_compile_error"] = f"{type(exc).__name__}: {exc}"[:300]
    for who, t in contenders:
        row[f"beta[{who}]"] = model / t / ceiling
    text = "  ".join(f"{who} {t * 1e3:.3f} ms beta={model / t / ceiling:.2f}" for who, t in contenders)
    if "max_abs_diff_vs_torch" in row:
        text += f"  (max |tp - torch| {row['max_abs_diff_vs_torch']:.2e} of {row['max_abs_torch']:.2e})"
    report.figure(f"{name} {size[0]}x{size[1]}" + (" bf16" if half else ""), text)
    return row


def kernels(report: Report, torch, ceiling: float, quick: bool, small: bool = False) -> dict:
    runs = 5 if quick else 100 if small else 20
    cases = _cases(quick, small)
    report.section(f"generated CUDA kernels, {'x'.join(map(str, cases[0][4]))} float32 "
                   f"(beta = model bytes / time / {ceiling / 1e12:.2f} TB/s copy)")
    return {case[0]: _kernel_row(report, torch, ceiling, case, runs, half=False) for case in cases}


def kernels_bf16(report: Report, torch, ceiling: float, quick: bool) -> dict:
    """The table's cases on bfloat16 data: 2 bytes an element, float32 math
    and accumulation inside the kernels (issue 12 item 4)."""
    runs = 5 if quick else 20
    cases = [c for c in _cases(quick) if c[0] not in ("row sum", "column sum")] + \
        [c for c in _cases(quick) if c[0] in ("row sum", "column sum")]
    report.section(f"generated CUDA kernels, {'x'.join(map(str, cases[0][4]))} bfloat16 "
                   f"(beta = model bytes / time / {ceiling / 1e12:.2f} TB/s copy)")
    return {case[0]: _kernel_row(report, torch, ceiling, case, runs, half=True) for case in cases}


def matmul_bias_gelu_bf16(report: Report, torch, quick: bool) -> dict:
    """Matmul + bias + tanh-GELU in bfloat16 (issue 12 item 6): tp.compile
    fuses the tail into cuBLASLt's GELU_BIAS epilogue."""
    n = 1024 if quick else 8192
    runs = 5 if quick else 20
    flops = 2.0 * n * n * n

    def f_tp(x, w, b):
        return F.gelu(F.linear(x, w, b), approximate="tanh")

    if torch is not None:
        tx = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        tw = (torch.randn(n, n, device="cuda") / n ** 0.5).to(torch.bfloat16)
        tb = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        args = [tp.from_dlpack(a) for a in (tx, tw, tb)]
    else:
        args = [tp.randn(n, n).to(tp.bfloat16).cuda(), (tp.randn(n, n) / n ** 0.5).to(tp.bfloat16).cuda(),
                tp.randn(n).to(tp.bfloat16).cuda()]
    small = [tp.randn(8, 16).to(tp.bfloat16), tp.randn(4, 16).to(tp.bfloat16), tp.randn(4).to(tp.bfloat16)]
    out = {"n": n, "extern_calls": tp._C._stax_cuda_externs(tp._C._capture(f_tp, *small))}
    cf = tp.compile(f_tp, strict_native=True)
    got = cf(*args)
    tp.cuda.synchronize()
    out["tp_compile_s"] = _time(lambda: cf(*args), tp.cuda.synchronize, runs)
    out["tp_eager_s"] = _time(lambda: f_tp(*args), tp.cuda.synchronize, runs)
    contenders = [("tp.compile", out["tp_compile_s"]), ("tp eager", out["tp_eager_s"])]
    if torch is not None:
        def f_torch(x, w, b):
            return torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b), approximate="tanh")
        out["torch_eager_s"] = _time(lambda: f_torch(tx, tw, tb), torch.cuda.synchronize, runs)
        contenders.append(("torch eager", out["torch_eager_s"]))
        want = f_torch(tx, tw, tb).float()
        out["max_abs_diff_vs_torch"] = float((torch.from_dlpack(got).float() - want).abs().max())
        try:
            tc = torch.compile(f_torch, dynamic=False)
            tc(tx, tw, tb)
            torch.cuda.synchronize()
            out["torch_compile_s"] = _time(lambda: tc(tx, tw, tb), torch.cuda.synchronize, runs)
            contenders.append(("torch.compile", out["torch_compile_s"]))
        except Exception as exc:
            out["torch_compile_error"] = f"{type(exc).__name__}: {exc}"[:300]
    for who, t in contenders:
        out[f"tflops[{who}]"] = flops / t / 1e12
    text = "  ".join(f"{who} {t * 1e3:.3f} ms {flops / t / 1e12:.0f} TFLOP/s" for who, t in contenders)
    if "max_abs_diff_vs_torch" in out:
        text += f"  (max |tp - torch| {out['max_abs_diff_vs_torch']:.2e})"
    report.figure(f"matmul + bias + tanh-GELU bf16 {n}^3", text)
    return out


def host_overhead(report: Report, torch, quick: bool) -> dict:
    n = 2000 if quick else 20000
    x = tp.randn(8).to("cuda")
    f = tp.compile(lambda x: x * 2 + 1, strict_native=True)
    f(x)
    tp.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        f(x)
    tp.cuda.synchronize()
    out = {"tp_compile_us": (time.perf_counter() - t0) / n * 1e6}
    g = lambda x: x * 2 + 1  # noqa: E731
    t0 = time.perf_counter()
    for _ in range(n):
        g(x)
    tp.cuda.synchronize()
    out["tp_eager_us"] = (time.perf_counter() - t0) / n * 1e6
    if torch is not None:
        tx = torch.randn(8, device="cuda")
        g(tx)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            g(tx)
        torch.cuda.synchronize()
        out["torch_eager_us"] = (time.perf_counter() - t0) / n * 1e6
    report.figure("host time per call, x*2+1 on 8 elements",
                  "  ".join(f"{k[:-3]} {v:.2f} us" for k, v in out.items()))
    return out


def _per_call_us(fn, n: int) -> float:
    fn()
    fn()
    tp.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        tp.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def graph_overhead(report: Report, torch, quick: bool) -> dict:
    """Host time per compiled call with CUDA Graphs (mode="reduce-overhead") beside without."""
    n = 2000 if quick else 20000
    x = tp.randn(8).to("cuda")
    f = tp.compile(lambda x: x * 2 + 1, strict_native=True)
    g = tp.compile(lambda x: x * 2 + 1, mode="reduce-overhead", strict_native=True)
    out = {"tp_compile_us": _per_call_us(lambda: f(x), n),
           "tp_reduce_overhead_us": _per_call_us(lambda: g(x), n)}
    kept = [None]

    def keep():  # y = f(x) in a loop: the previous output is alive at each call
        kept[0] = g(x)
    out["tp_reduce_overhead_kept_us"] = _per_call_us(keep, n)
    # A three-layer MLP (three cuBLASLt GEMMs with bias + ReLU between): many launches per call.
    m = tp.nn.Sequential(tp.nn.Linear(64, 64), tp.nn.ReLU(), tp.nn.Linear(64, 64), tp.nn.ReLU(),
                         tp.nn.Linear(64, 64)).cuda()
    xm = tp.randn(8, 64).to("cuda")
    with tp.no_grad():
        fm = tp.compile(m)
        gm = tp.compile(m, mode="reduce-overhead")
        out["tp_mlp_compile_us"] = _per_call_us(lambda: fm(xm), n // 4)
        out["tp_mlp_reduce_overhead_us"] = _per_call_us(lambda: gm(xm), n // 4)
    if torch is not None:
        try:
            tx = torch.randn(8, device="cuda")
            tg = torch.compile(lambda x: x * 2 + 1, mode="reduce-overhead")
            for _ in range(3):
                tg(tx)
            out["torch_reduce_overhead_us"] = _per_call_us(lambda: tg(tx), n // 4)
        except Exception as e:  # no Triton, etc.: TensorPlay is still measured
            report.note(f"torch.compile(mode='reduce-overhead') not measured: {type(e).__name__}: {e}"[:300])
    report.figure("host time per call with CUDA Graphs, x*2+1 on 8 elements / 3-layer MLP 8x64",
                  "  ".join(f"{k[:-3]} {v:.2f} us" for k, v in out.items()))
    return out


_COLD = r"""
import time, tensorplay as tp
t0 = time.perf_counter()
x = tp.randn(%d, %d).to("cuda"); w = tp.randn(%d).to("cuda"); tp.cuda.synchronize()
t1 = time.perf_counter()
f = tp.compile(lambda x, w: ((x + w).relu() * 2).sum(-1), strict_native=True)
f(x, w); tp.cuda.synchronize()
print(time.perf_counter() - t1)
"""


def cold_compile(report: Report, quick: bool) -> dict:
    R, C = (256, 256) if quick else (32768, 8192)
    code = _COLD % (R, C, C)
    out = {}
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TP_CACHE_DIR=d)
        for label in ("cold", "warm"):
            p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                raise RuntimeError(f"{label} compile process failed: {p.stderr[-2000:]}")
            out[f"{label}_s"] = float(p.stdout.strip().splitlines()[-1])
    report.figure("first compiled call of Example 1.1 in a new process (capture + compile + run)",
                  f"cold cache {out['cold_s']:.3f} s, warm cache {out['warm_s']:.3f} s")
    return out


def run(report: Report, step, quick: bool) -> None:
    if not tp.cuda.is_available():
        report.note(f"no CUDA GPU here ({tp._C._cuda.why_unavailable()}): the gpu suite measures nothing")
        return
    torch = _torch()
    report.figure("device", tp.cuda.get_device_name())
    if torch is None:
        report.note("PyTorch with CUDA is not importable: TensorPlay alone is measured")
    else:
        report.figure("torch", torch.__version__)
    bw = step("gpu.copy", lambda: copy_bandwidth(torch, quick))
    ceiling = bw["ceiling_Bps"] if bw else 4.15e12
    if bw:
        report.figure("device-to-device copy (read + write)", f"{ceiling / 1e12:.2f} TB/s")
    step("gpu.kernels", lambda: kernels(report, torch, ceiling, quick))
    step("gpu.kernels_bf16", lambda: kernels_bf16(report, torch, ceiling, quick))
    step("gpu.matmul_bias_gelu_bf16", lambda: matmul_bias_gelu_bf16(report, torch, quick))
    if not quick:
        step("gpu.kernels_small", lambda: kernels(report, torch, ceiling, quick, small=True))
    if torch is not None:
        from .gpu_models import models
        step("gpu.models", lambda: models(report, torch, quick))
    step("gpu.host_overhead", lambda: host_overhead(report, torch, quick))
    step("gpu.graph_overhead", lambda: graph_overhead(report, torch, quick))
    step("gpu.cold_compile", lambda: cold_compile(report, quick))
