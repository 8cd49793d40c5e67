"""Whole-model inference on CUDA (issue 12 figure): an MLP, a transformer
encoder block, a CNN (conv-bn-relu-pool stack, linear head) and a SwiGLU
gated FFN, each built in TensorPlay and in PyTorch with the same weights
(copied through NumPy) and run on the same input (shared through DLPack):
time per call of tp.compile(strict_native=True) against torch.compile and
eager PyTorch, in evaluation mode without gradients, float32."""

from __future__ import annotations

import time

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F

from .report import Report


def _swiglu(nn_, F_, d, h):
    class SwiGLU(nn_.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn_.Linear(d, h, bias=False)
            self.w3 = nn_.Linear(d, h, bias=False)
            self.w2 = nn_.Linear(h, d, bias=False)

        def forward(self, x):
            return self.w2(F_.silu(self.w1(x)) * self.w3(x))
    return SwiGLU()


def _cnn(nn_, F_):
    class CNN(nn_.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = nn_.Conv2d(3, 32, 3, padding=1), nn_.BatchNorm2d(32)
            self.c2, self.b2 = nn_.Conv2d(32, 64, 3, padding=1), nn_.BatchNorm2d(64)
            self.c3, self.b3 = nn_.Conv2d(64, 128, 3, padding=1), nn_.BatchNorm2d(128)
            self.fc = nn_.Linear(128, 10)

        def forward(self, x):
            x = F_.max_pool2d(F_.relu(self.b1(self.c1(x))), 2)
            x = F_.max_pool2d(F_.relu(self.b2(self.c2(x))), 2)
            x = F_.relu(self.b3(self.c3(x)))
            return self.fc(F_.adaptive_avg_pool2d(x, 1).flatten(1))
    return CNN()


def _models(torch, quick: bool):
    tnn, tF = torch.nn, torch.nn.functional
    s = 4 if quick else 1  # quick: smaller shapes
    d = 512 // s
    return [
        ("MLP 4096x1024-4096-4096-1024",
         lambda m: m.Sequential(m.Linear(1024 // s, 4096 // s), m.ReLU(), m.Linear(4096 // s, 4096 // s), m.ReLU(),
                                m.Linear(4096 // s, 1024 // s)),
         (4096 // s, 1024 // s)),
        (f"transformer encoder block B=32 T=256 d={d} h=8 ff={4 * d}",
         lambda m: m.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.0, batch_first=True),
         (32 // s, 256, d)),
        ("CNN 3x(conv3x3-bn-relu) 2 pools + head, 64x3x64x64",
         lambda m: _cnn(m, tF if m is tnn else F),
         (64 // s, 3, 64, 64)),
        (f"SwiGLU FFN 8192x{2 * d}-{(16 * d) // 3}",
         lambda m: _swiglu(m, tF if m is tnn else F, 2 * d, (16 * d) // 3),
         (8192 // s, 2 * d)),
    ]


def _copy_weights(tp_model, torch_model, torch):
    """PyTorch's weights into the TensorPlay model (names and shapes match)."""
    import numpy as np
    want = {k: v.detach().cpu().numpy() for k, v in torch_model.state_dict().items()}
    have = tp_model.state_dict()
    missing = set(have) ^ set(want)
    if missing:
        raise RuntimeError(f"state dicts differ: {sorted(missing)[:6]}")
    tp_model.load_state_dict({k: tp.tensor(v.item() if v.ndim == 0 else np.ascontiguousarray(v))
                              for k, v in want.items()})


def models(report: Report, torch, quick: bool) -> dict:
    from .gpu import _time
    import numpy as np

    res = {}
    runs = 3 if quick else 20
    # float32 means float32 for everyone: PyTorch's convolutions default to TF32 through cuDNN.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    report.section("whole-model inference on CUDA, float32 (no TF32), eval, no grad (time per call)")
    for label, make, shape in _models(torch, quick):
        row = {}
        try:
            torch.manual_seed(0)
            tm = make(torch.nn).cuda().eval()
            for mod in tm.modules():  # running statistics that are not the identity
                if isinstance(mod, torch.nn.BatchNorm2d):
                    mod.running_mean.normal_()
                    mod.running_var.uniform_(0.5, 2.0)
            m = make(nn).eval()
            _copy_weights(m, tm, torch)
            m = m._apply(lambda t: t.to("cuda"))
            tx = torch.randn(*shape, device="cuda")
            x = tp.from_dlpack(tx)
            with torch.no_grad(), tp.no_grad():
                cf = tp.compile(m, strict_native=True)
                t0 = time.perf_counter()
                got = cf(x)
                tp.cuda.synchronize()
                row["tp_first_call_s"] = time.perf_counter() - t0
                row["tp_compile_s"] = _time(lambda: cf(x), tp.cuda.synchronize, runs)
                row["tp_eager_s"] = _time(lambda: m(x), tp.cuda.synchronize, max(1, runs // 4))
                row["torch_eager_s"] = _time(lambda: tm(tx), torch.cuda.synchronize, runs)
                want = tm(tx)
                row["max_abs_diff_vs_torch"] = float(np.max(np.abs(got.cpu().numpy() - want.cpu().numpy())))
                row["max_abs_torch"] = float(want.abs().max())
                tc = torch.compile(tm, dynamic=False)
                tc(tx)
                torch.cuda.synchronize()
                row["torch_compile_s"] = _time(lambda: tc(tx), torch.cuda.synchronize, runs)
            text = (f"tp.compile {row['tp_compile_s'] * 1e3:.3f} ms  torch.compile {row['torch_compile_s'] * 1e3:.3f} ms"
                    f"  torch eager {row['torch_eager_s'] * 1e3:.3f} ms  tp eager {row['tp_eager_s'] * 1e3:.3f} ms"
                    f"  (tp/torch.compile {row['tp_compile_s'] / row['torch_compile_s']:.2f}x,"
                    f" max |tp - torch| {row['max_abs_diff_vs_torch']:.1e} of {row['max_abs_torch']:.1e})")
        except Exception as exc:  # one model failing leaves the others measured
            row["error"] = f"{type(exc).__name__}: {exc}"[:400]
            text = "failed: " + row["error"]
        report.figure(label, text)
        res[label] = row
    return res
