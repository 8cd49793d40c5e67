"""Compiled training (issue 10), side by side in one run: a training step
(forward, backward; the parameters' gradients) of Example 5.1 of the design
notes, an MLP and a transformer encoder block, each as TensorPlay eager,
tp.compile (AOT layer + Stax), PyTorch eager and torch.compile (Inductor) on
the same data, thread count and weights. Reported per case: the step time of
each (rotated readings, medians with their intervals), the paired ratios
tp.compile / torch.compile and tp.compile / TensorPlay eager, the first call
of each compiled version (capture + compile + one step, in this process), and
the activation bytes the compiled forward saves for the backward.

Two more rows per case:
- the full training step as users run it: zero the gradients, forward,
  backward and an optimizer step (SGD with momentum 0.9), the step compiled
  as its users do (`tp.compile(opt.step)`, `torch.compile(opt.step)`) next
  to the eager `opt.step()`, and the whole step inside one compiled function
  (tp: step-wise, torch: Dynamo's graph breaks);
- the step's GEMMs alone (TensorPlay eager, same shapes and transposes): the
  GEMM time both steps share, so the best ratio tp.compile / tp eager can
  reach is GEMMs / eager step (a compiled step cannot be faster than its
  GEMMs, which run in the same BLAS).

The suite first prints what decides the GEMM time and the threads' behaviour
(the BLAS library's kernel set, OPENBLAS_CORETYPE, the OpenMP wait policy):
the ratios depend on them (see ARCHITECTURE.md, "1.1")."""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Tuple

import numpy as np

import tensorplay as tp
import tensorplay.nn as tnn
import tensorplay.nn.functional as F
import tensorplay.optim as toptim

from .report import Report, verdict
from .stats import ratio_interval, rotate


def _torch():
    try:
        import torch
        return torch
    except ImportError:  # optional oracle
        return None


def _copy_weights(tp_module, torch_module):
    """Same weights in both libraries (by parameter name)."""
    import torch
    tp_params = dict(tp_module.named_parameters())
    with torch.no_grad():
        for name, p in torch_module.named_parameters():
            p.copy_(torch.from_numpy(tp_params[name].detach().numpy().copy()))


class Case:
    def __init__(self, key: str, title: str, build: Callable[[object], Tuple[Callable, Callable, List]]):
        self.key, self.title, self.build = key, title, build


def _example_5_1(quick: bool):
    m, k = (512, 256) if quick else (4096, 1024)
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((m, k)).astype(np.float32)
    wa = (rng.standard_normal((k, k)) / np.sqrt(k)).astype(np.float32)

    def make(lib):
        if lib is tp:
            x, w = tp.from_numpy(xa), tp.from_numpy(wa.copy()).requires_grad_(True)
            loss = lambda x, w: F.gelu(x @ w).mean()  # noqa: E731
        else:
            x, w = lib.from_numpy(xa), lib.from_numpy(wa.copy()).requires_grad_(True)
            loss = lambda x, w: lib.nn.functional.gelu(x @ w).mean()  # noqa: E731
        return loss, (x, w), [w]

    def gemms():
        # The step's GEMMs: h = x @ W (forward), dW = x^T @ dh (backward).
        x, w = tp.from_numpy(xa), tp.from_numpy(wa.copy())
        dh = tp.from_numpy(rng.standard_normal((m, k)).astype(np.float32))
        return lambda: (x @ w, x.t() @ dh)
    make.gemms = gemms
    return f"x {m}x{k}, W {k}x{k} (requires grad)", make


def _mlp(quick: bool):
    b, d, h, c = (256, 128, 256, 10) if quick else (1024, 512, 2048, 10)
    rng = np.random.default_rng(1)
    xa = rng.standard_normal((b, d)).astype(np.float32)
    ya = rng.integers(0, c, b).astype(np.int64)
    tp_net = tnn.Sequential(tnn.Linear(d, h), tnn.ReLU(), tnn.Linear(h, h), tnn.ReLU(), tnn.Linear(h, c))

    def make(lib):
        if lib is tp:
            net = tp_net
            loss = lambda x, y: F.cross_entropy(net(x), y)  # noqa: E731
            return loss, (tp.from_numpy(xa), tp.from_numpy(ya)), list(net.parameters())
        net = lib.nn.Sequential(lib.nn.Linear(d, h), lib.nn.ReLU(), lib.nn.Linear(h, h), lib.nn.ReLU(),
                                lib.nn.Linear(h, c))
        _copy_weights(tp_net, net)
        loss = lambda x, y: lib.nn.functional.cross_entropy(net(x), y)  # noqa: E731
        return loss, (lib.from_numpy(xa), lib.from_numpy(ya)), list(net.parameters())

    def gemms():
        # Forward x @ W^T per layer; backward dW = h^T @ g per layer and
        # dh = g @ W for the two layers whose input requires grad.
        r = np.random.default_rng(3)
        t = lambda *shape: tp.from_numpy(r.standard_normal(shape).astype(np.float32))  # noqa: E731
        x, h0, h1, w0, w1, w2 = t(b, d), t(b, h), t(b, h), t(h, d), t(h, h), t(c, h)
        g0, g1, g2 = t(b, h), t(b, h), t(b, c)
        return lambda: (x @ w0.t(), h0 @ w1.t(), h1 @ w2.t(),
                        h1.t() @ g2, g2 @ w2, h0.t() @ g1, g1 @ w1, x.t() @ g0)
    make.gemms = gemms
    return f"batch {b}, {d}-{h}-{h}-{c}, ReLU, cross_entropy", make


def _transformer(quick: bool):
    b, s, d, heads, ff = (4, 32, 64, 4, 128) if quick else (16, 128, 256, 4, 1024)
    rng = np.random.default_rng(2)
    xa = rng.standard_normal((b, s, d)).astype(np.float32)
    # A fixed random target: (block(x) ** 2).mean() of a LayerNorm output is ~1
    # whatever the weights, so its gradients are cancellations (ill-conditioned).
    ta = rng.standard_normal((b, s, d)).astype(np.float32)
    tp_block = tnn.TransformerEncoderLayer(d, heads, dim_feedforward=ff, dropout=0.0, batch_first=True)

    def make(lib):
        if lib is tp:
            loss = lambda x, t: (tp_block(x) * t).mean()  # noqa: E731
            return loss, (tp.from_numpy(xa), tp.from_numpy(ta)), list(tp_block.parameters())
        block = lib.nn.TransformerEncoderLayer(d, heads, dim_feedforward=ff, dropout=0.0, batch_first=True)
        _copy_weights(tp_block, block)
        loss = lambda x, t: (block(x) * t).mean()  # noqa: E731
        return loss, (lib.from_numpy(xa), lib.from_numpy(ta)), list(block.parameters())

    def gemms():
        # The block's GEMMs (batch_first, post-norm, x without grad), as the
        # step runs them: per Linear (weight [out, in]) y = x @ W^T forward,
        # dW = g^T @ x and dx = g @ W backward (no dx for in_proj: its input
        # is x); attention per (batch, head): S = Q K^T, O = P V forward,
        # dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q backward.
        r = np.random.default_rng(4)
        t = lambda *shape: tp.from_numpy(r.standard_normal(shape).astype(np.float32))  # noqa: E731
        n, bh, hd = b * s, b * heads, d // heads
        x, a, h1 = t(n, d), t(n, d), t(n, ff)
        w_in, w_out, w1, w2 = t(3 * d, d), t(d, d), t(ff, d), t(d, ff)
        g_in, g_out, g1, g2 = t(n, 3 * d), t(n, d), t(n, ff), t(n, d)
        q, k, v, p, do = t(bh, s, hd), t(bh, s, hd), t(bh, s, hd), t(bh, s, s), t(bh, s, hd)
        return lambda: (x @ w_in.t(), q @ k.transpose(1, 2), p @ v, a @ w_out.t(), a @ w1.t(), h1 @ w2.t(),
                        g2.t() @ h1, g2 @ w2, g1.t() @ a, g1 @ w1, g_out.t() @ a, g_out @ w_out,
                        do @ v.transpose(1, 2), p.transpose(1, 2) @ do, p @ k, p.transpose(1, 2) @ q,
                        g_in.t() @ x)
    make.gemms = gemms
    return f"TransformerEncoderLayer d={d}, {heads} heads, ff={ff}, batch {b}x{s} tokens", make


CASES = [("example_5_1", "Example 5.1: gelu(x @ W).mean()", _example_5_1),
         ("mlp", "MLP training step", _mlp),
         ("transformer_block", "transformer encoder block training step", _transformer)]


def _step(loss_fn, args, params):
    def run():
        for p in params:
            p.grad = None
        loss = loss_fn(*args)
        loss.backward()
        return loss
    return run


def _train_step(loss_fn, args, params, opt_step):
    """The step as users run it: zero the gradients, forward, backward, and the
    optimizer's update."""
    def run():
        for p in params:
            p.grad = None
        loss = loss_fn(*args)
        loss.backward()
        opt_step()
        return loss
    return run


def _extent_bytes(tensors):
    """Bytes of the memory behind `tensors`, each storage once: per storage base
    address, the furthest byte any of them reaches."""
    reach = {}
    for t in tensors:
        if t.numel() == 0:
            continue
        base = t.data_ptr() - t.storage_offset() * t.element_size()
        end = (t.storage_offset() + 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))) * t.element_size()
        reach[base] = max(reach.get(base, 0), end)
    return reach


def tp_saved_bytes(loss, exclude) -> int:
    """Activation bytes TensorPlay's autograd graph of `loss` keeps for the
    backward (saved inputs/outputs of every node, a compiled region's saved
    values): each storage once, without the memory of `exclude` (inputs,
    parameters: kept by reference, not new memory)."""
    from tensorplay.autograd.graph import walk
    saved = [t for n in walk(loss.grad_fn) for t in n._saved_tensors]
    skip = _extent_bytes(exclude)
    return sum(b for base, b in _extent_bytes(saved).items() if base not in skip)


def torch_saved_bytes(torch, fn, exclude) -> int:
    """The same for PyTorch eager, through saved-tensor hooks."""
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        loss = fn()
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    seen = {}
    for t in saved:
        st = t.untyped_storage()
        if st.data_ptr() not in skip:
            seen[st.data_ptr()] = st.nbytes()
    del loss
    return sum(seen.values())


def _first_call(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run_case(key: str, title: str, factory, report: Report, quick: bool) -> dict:
    torch = _torch()
    shape, make = factory(quick)
    report.section(f"{title} ({shape})")
    loss_tp, args_tp, params_tp = make(tp)
    tp.compiler.reset()
    compiled_tp = tp.compile(loss_tp, options={"warn_fallback": False})
    eager_tp = _step(loss_tp, args_tp, params_tp)
    comp_tp = _step(compiled_tp, args_tp, params_tp)
    first_tp = _first_call(comp_tp)
    m = tp.compiler.metrics
    out: Dict[str, object] = {"shape": shape, "first_call_s": {"tp.compile": first_tp},
                              "saved_bytes": int(m.saved_bytes), "fallback_count": int(m.fallback_count),
                              "generated_kernels": int(m.generated_kernel_count)}
    # Same loss and gradients as eager (the step is only worth timing if it is right).
    l_c = float(comp_tp().item())
    g_c = [p.grad.numpy().copy() for p in params_tp]
    l_e = float(eager_tp().item())
    g_e = [p.grad.numpy().copy() for p in params_tp]
    out["loss_diff"] = abs(l_c - l_e)
    keep = [a for a in args_tp if hasattr(a, "data_ptr")] + list(params_tp)
    out["saved_bytes_tp_eager"] = tp_saved_bytes(loss_tp(*args_tp), keep)
    out["saved_bytes_tp_compile"] = tp_saved_bytes(compiled_tp(*args_tp), keep)
    out["grad_max_rel_diff"] = max(float(np.abs(a - b).max() / (np.abs(b).max() + 1e-30)) for a, b in zip(g_c, g_e))
    fns, labels = [eager_tp, comp_tp], ["tp eager", "tp.compile"]
    if torch is not None:
        loss_th, args_th, params_th = make(torch)
        torch._dynamo.reset()
        compiled_th = torch.compile(loss_th)
        eager_th = _step(loss_th, args_th, params_th)
        comp_th = _step(compiled_th, args_th, params_th)
        out["first_call_s"]["torch.compile"] = _first_call(comp_th)
        keep_th = [a for a in args_th if isinstance(a, torch.Tensor)] + list(params_th)
        out["saved_bytes_torch_eager"] = torch_saved_bytes(torch, lambda: loss_th(*args_th), keep_th)
        fns += [eager_th, comp_th]
        labels += ["torch eager", "torch.compile"]
    # 21 rounds: the step ratios sit within a few percent of the goal on a
    # 2-core VM whose neighbours move single readings by 10%; 11 rounds gave
    # medians that moved by +-0.02 between runs.
    runs, warmup = (5, 1) if quick else (21, 2)
    ts = rotate(fns, runs=runs, warmup=warmup, labels=labels)
    out["times"] = {lab: t.to_dict() for lab, t in zip(labels, ts)}
    r_e, lo_e, hi_e = ratio_interval(ts[1], ts[0])
    out["tp.compile/tp eager"] = [r_e, lo_e, hi_e]
    report.figure("step time", "  ".join(f"{lab} {t.fmt()}" for lab, t in zip(labels, ts)))
    report.figure("tp.compile / tp eager", f"{r_e:.2f} [{lo_e:.2f}, {hi_e:.2f}]", f"goal <= 1/1.1: {verdict(r_e <= 1 / 1.1)}")
    if torch is not None:
        r_t, lo_t, hi_t = ratio_interval(ts[1], ts[3])
        out["tp.compile/torch.compile"] = [r_t, lo_t, hi_t]
        report.figure("tp.compile / torch.compile", f"{r_t:.2f} [{lo_t:.2f}, {hi_t:.2f}]", f"goal <= 1: {verdict(r_t <= 1)}")
    report.figure("first call (capture + compile + step)",
                  "  ".join(f"{k} {v:.2f} s" for k, v in out["first_call_s"].items()))
    report.figure("saved activation bytes (compiled)", f"{out['saved_bytes']:,} B",
                  f"fallbacks {out['fallback_count']}, generated kernels {out['generated_kernels']}")
    eager_saved = out["saved_bytes_tp_eager"]
    report.figure("saved bytes held by the autograd graph",
                  f"tp.compile {out['saved_bytes_tp_compile']:,} B  tp eager {eager_saved:,} B"
                  + (f"  torch eager {out['saved_bytes_torch_eager']:,} B" if "saved_bytes_torch_eager" in out else ""),
                  f"goal tp.compile <= tp eager: {verdict(out['saved_bytes_tp_compile'] <= eager_saved)}")
    report.figure("agreement with eager", f"|loss diff| {out['loss_diff']:.2g}, max rel grad diff "
                  f"{out['grad_max_rel_diff']:.2g}")
    gemms = getattr(make, "gemms", None)
    if gemms is not None:
        g = rotate([gemms(), eager_tp, comp_tp], runs=runs, warmup=warmup,
                   labels=["GEMMs alone", "tp eager", "tp.compile"])
        r_g, lo_g, hi_g = ratio_interval(g[0], g[1])
        speedup = ratio_interval(g[1], g[2])[0]  # tp eager / tp.compile in this rotation
        out["gemm_share_of_tp_eager"] = [r_g, lo_g, hi_g]
        out["gemms_alone"] = g[0].to_dict()
        report.figure("GEMMs alone (tp eager, same shapes)", "  ".join(f"{lab} {t.fmt()}" for lab, t in zip(
            ["GEMMs", "tp eager step", "tp.compile step"], g)))
        report.figure("GEMM share of the tp eager step", f"{r_g:.2f} [{lo_g:.2f}, {hi_g:.2f}]",
                      f"best reachable tp.compile / tp eager = {r_g:.2f}, i.e. at most {1 / r_g:.2f}x faster; "
                      f"here {speedup:.2f}x")
    out.update(_full_step_rows(report, make, torch, quick, runs, warmup))
    return out


def _full_step_rows(report: Report, make, torch, quick: bool, runs: int, warmup: int) -> dict:
    """Forward + backward + SGD(momentum) step: eager opt.step() against
    tp.compile(opt.step) (and torch.compile(opt.step)), the loss compiled as
    in the rows above. Fresh optimizers per variant; the variants share the
    parameters (their values drift with the steps, which does not change the
    work per step)."""
    lr, momentum = 1e-4, 0.9
    loss_tp, args_tp, params_tp = make(tp)
    compiled_loss = tp.compile(loss_tp, options={"warn_fallback": False})
    opt_e = toptim.SGD(params_tp, lr=lr, momentum=momentum)
    opt_c = toptim.SGD(params_tp, lr=lr, momentum=momentum)
    step_c = tp.compile(opt_c.step, options={"warn_fallback": False})
    eager_tp = _train_step(loss_tp, args_tp, params_tp, opt_e.step)
    comp_tp = _train_step(compiled_loss, args_tp, params_tp, step_c)
    fallbacks_before = int(tp.compiler.metrics.fallback_count)
    first = {"tp.compile": _first_call(comp_tp) + _first_call(comp_tp)}  # versions: no momentum buffer, then with
    fallbacks = int(tp.compiler.metrics.fallback_count) - fallbacks_before
    # The whole step (zero_grad, forward, backward, opt.step) inside one compiled
    # function, as PyTorch 2 users also write it: it runs step-wise (modules and
    # the optimizer step compiled, the rest eager; a loss that is a plain function
    # of the parameters, as Example 5.1's, stays eager).
    opt_w = toptim.SGD(params_tp, lr=lr, momentum=momentum)
    whole_tp = tp.compile(_train_step(loss_tp, args_tp, params_tp, opt_w.step), options={"warn_fallback": False})
    first["tp.compile(whole step)"] = _first_call(whole_tp) + _first_call(whole_tp)
    fns, labels = [eager_tp, comp_tp, whole_tp], ["tp eager", "tp.compile", "tp.compile(whole step)"]
    if torch is not None:
        loss_th, args_th, params_th = make(torch)
        opt_te = torch.optim.SGD(params_th, lr=lr, momentum=momentum)
        opt_tc = torch.optim.SGD(params_th, lr=lr, momentum=momentum)
        compiled_loss_th = torch.compile(loss_th)
        step_tc = torch.compile(opt_tc.step)
        eager_th = _train_step(loss_th, args_th, params_th, opt_te.step)
        comp_th = _train_step(compiled_loss_th, args_th, params_th, step_tc)
        first["torch.compile"] = _first_call(comp_th) + _first_call(comp_th)
        opt_tw = torch.optim.SGD(params_th, lr=lr, momentum=momentum)
        whole_th = torch.compile(_train_step(loss_th, args_th, params_th, opt_tw.step))
        first["torch.compile(whole step)"] = _first_call(whole_th) + _first_call(whole_th)
        fns += [eager_th, comp_th, whole_th]
        labels += ["torch eager", "torch.compile", "torch.compile(whole step)"]
    ts = rotate(fns, runs=runs, warmup=warmup, labels=labels)
    out = {"full_step_times": {lab: t.to_dict() for lab, t in zip(labels, ts)},
           "full_step_first_two_calls_s": first, "full_step_fallbacks": fallbacks}
    r_e, lo_e, hi_e = ratio_interval(ts[1], ts[0])
    out["full_step tp.compile/tp eager"] = [r_e, lo_e, hi_e]
    report.figure("full step + SGD(momentum) step", "  ".join(f"{lab} {t.fmt()}" for lab, t in zip(labels, ts)))
    report.figure("full step: tp.compile / tp eager", f"{r_e:.2f} [{lo_e:.2f}, {hi_e:.2f}]",
                  f"goal <= 1/1.1: {verdict(r_e <= 1 / 1.1)}")
    r_w, lo_w, hi_w = ratio_interval(ts[2], ts[0])
    out["whole_step tp.compile/tp eager"] = [r_w, lo_w, hi_w]
    report.figure("whole step in one tp.compile / tp eager", f"{r_w:.2f} [{lo_w:.2f}, {hi_w:.2f}]",
                  "step-wise: its modules and opt.step compiled")
    if torch is not None:
        r_t, lo_t, hi_t = ratio_interval(ts[1], ts[4])
        out["full_step tp.compile/torch.compile"] = [r_t, lo_t, hi_t]
        report.figure("full step: tp.compile / torch.compile", f"{r_t:.2f} [{lo_t:.2f}, {hi_t:.2f}]",
                      f"goal <= 1: {verdict(r_t <= 1)}")
        r_wt, lo_wt, hi_wt = ratio_interval(ts[2], ts[5])
        out["whole_step tp.compile/torch.compile"] = [r_wt, lo_wt, hi_wt]
        report.figure("whole step: tp.compile / torch.compile (each of the whole step)",
                      f"{r_wt:.2f} [{lo_wt:.2f}, {hi_wt:.2f}]")
    report.figure("full step: first two calls (compile + 2 steps)",
                  "  ".join(f"{k} {v:.2f} s" for k, v in first.items()))
    return out


def blas_environment() -> Dict[str, object]:
    """What sets the GEMM speed and how idle threads wait: the OpenBLAS kernel
    set in use (OpenBLAS picks it from cpuid at load unless OPENBLAS_CORETYPE
    names one; an AVX2 set on an AVX-512 CPU halves sgemm's speed) and the
    environment variables read by OpenBLAS and libgomp."""
    import ctypes
    import os
    env = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_THREAD_TIMEOUT", "OMP_WAIT_POLICY",
                                          "GOMP_SPINCOUNT")}
    out: Dict[str, object] = {"env": env, "blas_core": None, "float32_gemm": tp._C._float32_gemm_kernel()}
    try:
        import scipy_openblas32 as ob
        path = os.path.join(ob.get_lib_dir(), "lib" + ob.get_library() + ".so")
        lib = ctypes.CDLL(path)  # the library tensorplay loaded (same path: same handle)
        for name in ("scipy_openblas_get_corename", "openblas_get_corename"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                out["blas_core"] = fn().decode()
                break
    except (ImportError, OSError):
        pass
    return out


def prepare(report: Report) -> dict:
    """Before the cases: PyTorch on TensorPlay's thread count (so --threads
    governs both libraries), and the BLAS kernel set and thread-waiting
    environment printed (and returned for the JSON)."""
    torch = _torch()
    if torch is None:
        report.note("PyTorch is not installed (pip install torch==2.13.0): TensorPlay is timed alone.")
    else:
        torch.set_num_threads(tp.get_num_threads())
    env = blas_environment()
    report.section("BLAS and threads")
    report.figure("float32 GEMM kernel", str(env["float32_gemm"]),
                  "avx512: TensorPlay's own (eager and compiled alike); blas: OpenBLAS's (TP_GEMM=blas, or no AVX-512)")
    report.figure("OpenBLAS kernel set", str(env["blas_core"]),
                  "float64 GEMMs, LAPACK, thin float32 products; an AVX2 set (Haswell, Zen) on an AVX-512 CPU runs "
                  "at half speed")
    report.figure("environment", "  ".join(f"{k}={v}" for k, v in env["env"].items() if v is not None) or "(none set)")
    report.figure("threads", f"tensorplay {tp.get_num_threads()}"
                  + (f", torch {torch.get_num_threads()}" if torch is not None else ""))
    return env


def measure(report: Report, quick: bool) -> dict:
    results = {"blas": prepare(report)}
    for key, title, factory in CASES:
        results[key] = run_case(key, title, factory, report, quick)
    return results
