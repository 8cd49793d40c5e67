"""GEMM throughput on the GPU: TensorPlay (cuBLASLt) and, when installed,
PyTorch on the same shapes. Prints one line per case in TFLOP/s.
Usage: python scripts/cuda_matmul_bench.py [n]"""
import sys
import time

import tensorplay as tp


def _time(fn, sync, iters=20):
    for _ in range(3):
        fn()
    sync()
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - t) / iters


def main(n=8192):
    try:
        import torch
    except ImportError:
        torch = None
    cases = [("bf16", tp.bfloat16, False), ("fp16", tp.float16, False), ("fp32", tp.float32, False),
             ("fp32+tf32", tp.float32, True)]
    for label, dtype, tf32 in cases:
        tp.backends.cuda.matmul.allow_tf32 = tf32
        a = tp.randn(n, n).to(dtype).cuda()
        b = tp.randn(n, n).to(dtype).cuda()
        bias = tp.randn(n).to(dtype).cuda()
        flops = 2 * n ** 3
        mm = flops / _time(lambda: a @ b, tp.cuda.synchronize) / 1e12
        addmm = flops / _time(lambda: tp.addmm(bias, a, b), tp.cuda.synchronize) / 1e12
        line = f"{label} {n}^3: tensorplay mm {mm:.0f} TFLOP/s, addmm+bias {addmm:.0f}"
        if torch is not None and torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = tf32
            tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(label, torch.float32)
            ta, tb = torch.randn(n, n, device="cuda", dtype=tdt), torch.randn(n, n, device="cuda", dtype=tdt)
            tm = flops / _time(lambda: ta @ tb, torch.cuda.synchronize) / 1e12
            line += f"; torch mm {tm:.0f}"
        print(line, flush=True)
        del a, b, bias
    tp.backends.cuda.matmul.allow_tf32 = False


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8192)
