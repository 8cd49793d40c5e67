"""Times the rows of `python -m tensorplay.bench --suite gpu` that the 16-bit
kernel forms change (issue 12 item 4): column sum, bias + tanh-GELU and the
five-op softmax in bfloat16 and float32 at 32768x8192 (softmax 65536x4096),
the same at 8192x2048, and the split x.sum() of 256 MiB, beside torch eager on
the same memory (DLPack). beta = model bytes / time / the copy bandwidth
measured in the same run, as in the bench. No torch.compile here (its compile
time would not fit a short GPU run); the bench has it.

    python scripts/cuda_half_rows_bench.py [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import time

import tensorplay as tp
from tensorplay.bench.gpu import _cases, _time, copy_bandwidth

ROWS = ("column sum", "bias + tanh-GELU", "five-op softmax")


def row(torch, ceiling, case, half, runs=20):
    name, (ftp, ftorch), shapes, model32, size = case
    model = model32 // 2 if half else model32
    dtype = torch.bfloat16 if half else torch.float32
    targs = [torch.randn(*s, device="cuda", dtype=dtype) for s in shapes]
    args = [tp.from_dlpack(a) for a in targs]
    cf = tp.compile(ftp, strict_native=True)
    got = cf(*args)
    tp.cuda.synchronize()
    t_tp = _time(lambda: cf(*args), tp.cuda.synchronize, runs)
    t_eager = _time(lambda: ftorch(*targs), torch.cuda.synchronize, runs)
    want = ftorch(*targs).float()
    diff = (torch.from_dlpack(got).float() - want).abs().max().item()
    out = {"case": name, "size": f"{size[0]}x{size[1]}", "dtype": "bf16" if half else "fp32",
           "tp_ms": t_tp * 1e3, "beta_tp": model / t_tp / ceiling,
           "torch_eager_ms": t_eager * 1e3, "beta_torch_eager": model / t_eager / ceiling,
           "max_abs_diff": diff, "max_abs_torch": want.abs().max().item()}
    print(f"{name:18s} {out['size']:>11s} {out['dtype']}  tp.compile {out['tp_ms']:.3f} ms beta={out['beta_tp']:.2f}"
          f"  torch eager {out['torch_eager_ms']:.3f} ms beta={out['beta_torch_eager']:.2f}"
          f"  max|tp-torch| {diff:.2e} of {out['max_abs_torch']:.2e}", flush=True)
    return out


def main():
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    a = ap.parse_args()
    bw = copy_bandwidth(torch, False)
    ceiling = bw["ceiling_Bps"]
    print(f"copy bandwidth: tp {bw['tp_copy_Bps'] / 1e12:.2f} TB/s, torch {bw.get('torch_copy_Bps', 0) / 1e12:.2f} TB/s",
          flush=True)
    rows = []
    for small in (False, True):
        for half in (True, False):
            for case in _cases(False, small):
                if case[0] in ROWS:
                    rows.append(row(torch, ceiling, case, half))
    # The split reduction over all elements (its scratch now comes per launch).
    n = 64 * 2 ** 20
    tx = torch.randn(n, device="cuda")
    x = tp.from_dlpack(tx)
    f = tp.compile(lambda v: v.sum(), strict_native=True)
    f(x)
    t = _time(lambda: f(x), tp.cuda.synchronize, 50)
    te = _time(lambda: tx.sum(), torch.cuda.synchronize, 50)
    print(f"x.sum() 256 MiB fp32: tp.compile {t * 1e3:.3f} ms beta={4 * n / t / ceiling:.2f}  "
          f"torch eager {te * 1e3:.3f} ms beta={4 * n / te / ceiling:.2f}", flush=True)
    rows.append({"case": "x.sum() 256 MiB", "tp_ms": t * 1e3, "torch_eager_ms": te * 1e3,
                 "beta_tp": 4 * n / t / ceiling, "beta_torch_eager": 4 * n / te / ceiling})
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"copy": bw, "rows": rows, "time": time.time()}, fh, indent=1)


if __name__ == "__main__":
    main()
