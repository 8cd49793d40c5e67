"""Where the transformer encoder block's time goes on CUDA (the issue 12 figure's
row: B=32 T=256 d=512 h=8 ff=2048, float32 without TF32, eval, no grad).

Times per call (host timing over back-to-back calls, as the bench does) of
tp.compile with the fused attention kernel, tp.compile without it
(TP_CUDA_FUSED_ATTENTION=0 at compile time), eager PyTorch and, with
--torch-compile, torch.compile; then one torch.profiler trace per variant
(CUPTI sees TensorPlay's driver-API launches too) summed per kernel name.
Also the attention alone on the block's shapes (heads read from a [B, T, 3, H,
D] projection): tp fused, tp unfused, torch's scaled_dot_product_attention.

    python scripts/cuda_transformer_profile.py [--torch-compile] [--quick]
"""
import argparse
import os
import sys
from collections import defaultdict

import numpy as np
import torch

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay.bench.gpu import _time
from tensorplay.bench.gpu_models import _copy_weights, _models


def kernel_table(fn, sync, calls=5, top=14):
    from torch.profiler import ProfilerActivity, profile
    fn()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        sync()
    per = defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type.name == "CUDA" and e.device_time_total > 0:
            per[e.name][0] += e.device_time_total / calls
            per[e.name][1] += 1
    rows = sorted(per.items(), key=lambda kv: -kv[1][0])
    total = sum(v[0] for _, v in rows)
    lines = [f"    device total {total:8.1f} us per call in {sum(v[1] for _, v in rows) // calls} kernels"]
    for name, (us, n) in rows[:top]:
        lines.append(f"    {us:8.1f} us  x{n // calls:<3d} {name[:110]}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--torch-compile", action="store_true")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    label, make, shape = _models(torch, False)[1]
    print(label, flush=True)
    torch.manual_seed(0)
    tm = make(torch.nn).cuda().eval()
    tx = torch.randn(*shape, device="cuda")
    x = tp.from_dlpack(tx)
    runs = 5 if a.quick else 20
    tsync, psync = torch.cuda.synchronize, tp.cuda.synchronize

    def tp_model():
        m = make(nn).eval()
        _copy_weights(m, tm, torch)
        return m._apply(lambda t: t.to("cuda"))

    with torch.no_grad(), tp.no_grad():
        want = tm(tx).cpu().numpy()
        variants = {}
        for fused in (True, False):
            os.environ["TP_CUDA_FUSED_ATTENTION"] = "1" if fused else "0"
            cf = tp.compile(tp_model(), strict_native=True)
            got = cf(x).cpu().numpy()
            name = "tp.compile " + ("fused attention" if fused else "unfused attention")
            variants[name] = (lambda cf=cf: cf(x), psync, float(np.abs(got - want).max()))
        os.environ.pop("TP_CUDA_FUSED_ATTENTION")
        variants["torch eager"] = (lambda: tm(tx), tsync, 0.0)
        if a.torch_compile:
            tc = torch.compile(tm, dynamic=False)
            tc(tx)
            variants["torch.compile"] = (lambda: tc(tx), tsync, 0.0)
        for name, (fn, sync, diff) in variants.items():
            t = _time(fn, sync, runs)
            print(f"{name:32s} {t * 1e3:.3f} ms  max|diff vs torch| {diff:.1e}", flush=True)
        for name, (fn, sync, _) in variants.items():
            print(name, flush=True)
            print(kernel_table(fn, sync), flush=True)

        # The attention alone, heads read from the block's in_proj layout.
        B, T, E, H = shape[0], shape[1], shape[2], 8
        D = E // H
        qkv = torch.randn(B, T, 3, H, D, device="cuda")
        tq = tp.from_dlpack(qkv)

        def tp_attn(p):
            q, k, v = (p[:, :, i].transpose(1, 2) for i in range(3))
            return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, E)

        ref = torch.nn.functional.scaled_dot_product_attention(
            *(qkv[:, :, i].transpose(1, 2) for i in range(3))).transpose(1, 2).reshape(B, T, E)
        for fused in (True, False):
            os.environ["TP_CUDA_FUSED_ATTENTION"] = "1" if fused else "0"
            f = tp.compile(lambda p: tp_attn(p), strict_native=True)
            d = float((torch.from_dlpack(f(tq)) - ref).abs().max())
            t = _time(lambda: f(tq), psync, runs * 5)
            print(f"attention alone tp {'fused' if fused else 'unfused'}: {t * 1e6:.1f} us  max|diff| {d:.1e}", flush=True)
            print(kernel_table(lambda: f(tq), psync, top=6), flush=True)
        os.environ.pop("TP_CUDA_FUSED_ATTENTION")
        sd = lambda: torch.nn.functional.scaled_dot_product_attention(
            *(qkv[:, :, i].transpose(1, 2) for i in range(3))).transpose(1, 2).reshape(B, T, E)
        print(f"attention alone torch sdpa: {_time(sd, tsync, runs * 5) * 1e6:.1f} us", flush=True)
        print(kernel_table(sd, tsync, top=6), flush=True)


if __name__ == "__main__":
    sys.exit(main())
