"""The bench CNN on CUDA (python -m tensorplay.bench --suite gpu builds the same model): tp.compile through
cuDNN and through im2col, reduce-overhead, tp eager, torch.compile and torch eager, each with its GPU
kernels per call from torch.profiler (CUPTI also sees TensorPlay's driver-API launches). Needs a GPU and torch."""
import os, sys, time, json, traceback
import numpy as np
import torch
import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay.bench.gpu_models import _cnn, _copy_weights
from tensorplay.bench.gpu import _time

OUT = os.environ.get("OUT", ".")
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
print("cudnn", tp.cuda.is_cudnn_available(), tp._C._cuda.cudnn_path(), tp.backends.cudnn.version(),
      tp._C._cuda.cudnn_why_unavailable(), "torch cudnn", torch.backends.cudnn.version(), flush=True)
torch.manual_seed(0)
tm = _cnn(torch.nn, torch.nn.functional).cuda().eval()
for mod in tm.modules():
    if isinstance(mod, torch.nn.BatchNorm2d):
        mod.running_mean.normal_()
        mod.running_var.uniform_(0.5, 2.0)
m = _cnn(nn, F).eval()
_copy_weights(m, tm, torch)
m = m._apply(lambda t: t.to("cuda"))
tx = torch.randn(64, 3, 64, 64, device="cuda")
x = tp.from_dlpack(tx)
res = {}


def prof(label, fn, n=20):
    from torch.profiler import profile, ProfilerActivity
    fn(); torch.cuda.synchronize(); tp.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(n):
            fn()
        torch.cuda.synchronize(); tp.cuda.synchronize()
    rows = []
    for e in p.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t > 0:
            rows.append((t / n, e.count / n, e.key[:110]))
    rows.sort(reverse=True)
    tot = sum(r[0] for r in rows)
    print(f"--- {label}: GPU kernel time per call {tot:.1f} us", flush=True)
    for t, c, k in rows[:25]:
        print(f"  {t:8.1f} us  x{c:4.1f}  {k}")
    res[label + "_gpu_us"] = tot


with torch.no_grad(), tp.no_grad():
    want = tm(tx)
    tc = torch.compile(tm, dynamic=False)
    tc(tx); torch.cuda.synchronize()
    res["torch_compile_ms"] = _time(lambda: tc(tx), torch.cuda.synchronize, 50) * 1e3
    res["torch_eager_ms"] = _time(lambda: tm(tx), torch.cuda.synchronize, 50) * 1e3
    print(json.dumps(res), flush=True)
    for impl in ("cudnn", "im2col"):
        tp.backends.cudnn.enabled = impl == "cudnn"
        try:
            cf = tp.compile(m, strict_native=True)
            t0 = time.perf_counter(); got = cf(x); tp.cuda.synchronize()
            res[impl + "_first_call_s"] = time.perf_counter() - t0
            res[impl + "_diff"] = float(np.max(np.abs(got.cpu().numpy() - want.cpu().numpy())))
            res[impl + "_compile_ms"] = _time(lambda: cf(x), tp.cuda.synchronize, 50) * 1e3
            res[impl + "_eager_ms"] = _time(lambda: m(x), tp.cuda.synchronize, 10) * 1e3
            cg = tp.compile(m, strict_native=True, mode="reduce-overhead")
            for _ in range(3):
                cg(x)
            res[impl + "_graph_ms"] = _time(lambda: cg(x), tp.cuda.synchronize, 50) * 1e3
            print(json.dumps(res), flush=True)
            prof("tp.compile " + impl, lambda: cf(x))
        except Exception:
            traceback.print_exc()
    tp.backends.cudnn.enabled = True
    prof("torch.compile", lambda: tc(tx))
    prof("torch eager", lambda: tm(tx))
print(json.dumps(res), flush=True)
json.dump(res, open(os.path.join(OUT, "cnn_time.json"), "w"), indent=1)
