"""Example 1.1 at 32768x8192 float32 on the GPU: Stax CUDA kernels vs eager
TensorPlay CUDA vs torch. beta = model bytes (read x once + w + write out) /
time, against the H200's 4.15 TB/s copy bandwidth."""
import time

import tensorplay as tp
from tensorplay import _C

R, C = 32768, 8192


def fn(x, w):
    return ((x + w).relu() * 2).sum(-1)


def timeit(f, n=20):
    f()
    tp.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        f()
    tp.cuda.synchronize()
    return (time.perf_counter() - t) / n


x = tp.randn(R, C).to("cuda")
w = tp.randn(C).to("cuda")
g = _C._capture(fn, tp.empty(R, C), tp.empty(C))  # capture takes CPU tensors for now
model = (R * C + C + R) * 4
res = {}
res["stax_cuda"] = timeit(lambda: _C._stax_cuda_run(g, [x, w]))
res["eager_tp_cuda"] = timeit(lambda: fn(x, w))
try:
    import torch
    tx = torch.randn(R, C, device="cuda")
    tw = torch.randn(C, device="cuda")
    def tfn():
        fn(tx, tw)
    tfn(); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        tfn()
    torch.cuda.synchronize()
    res["torch_eager"] = (time.perf_counter() - t) / 20
    tc = torch.compile(fn)
    tc(tx, tw); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        tc(tx, tw)
    torch.cuda.synchronize()
    res["torch_compile"] = (time.perf_counter() - t) / 20
except Exception as e:  # noqa: BLE001
    print("torch:", type(e).__name__, e)
import numpy as np
a = _C._stax_cuda_run(g, [x, w])[0].cpu().numpy()
b = fn(x, w).cpu().numpy()
print("max rel diff stax vs eager:", float(np.max(np.abs(a - b) / (np.abs(b) + 1e-3))))
for k, t in res.items():
    print(f"{k:14s} {t * 1e3:8.3f} ms  {model / t / 1e12:6.3f} TB/s  beta={model / t / 4.15e12:5.3f}")
