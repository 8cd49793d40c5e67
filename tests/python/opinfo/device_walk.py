"""Every OpInfo's gradient (reverse mode) and tangent (forward mode) on a
device, against the same TensorPlay computation on the CPU.

A composite, a decomposition or a derivative formula that builds a tensor on
the host (a C++ factory without a device) works on the CPU and fails only when
its operands live on a GPU: the dispatcher refuses a host tensor with dims
beside a CUDA one. This walk runs each OpInfo's float sample inputs twice,
once on the CPU and once on `device`, and compares outputs, gradients and
tangents, collecting every failure (it never stops at the first).

`device` is "cuda" (a real GPU: tests/python/test_device_placement.py, skipped
without one) or "fake": host memory labelled cuda:0 whose operators run the
CPU kernels (tensorplay._C._testing_fake_device), so the placement of every
intermediate tensor is checked on a machine without a GPU.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field

import torch

import tensorplay as tp
import tensorplay.autograd.forward_ad as fwAD

from . import harness as H

# Errors that only the fake device raises (it is no real GPU): a host<->device
# move or a factory with device= calls the CUDA driver. Such samples are skipped.
FAKE_LIMITS = ("CUDA is not available", "CUDA driver", "refuses device memory", "cannot convert a cuda")


@dataclass
class DeviceFailure:
    op: str
    dtype: str
    sample: int
    kind: str  # "forward", "grad" or "jvp"
    detail: str

    def __str__(self):
        return f"{self.op} [{self.dtype}] sample {self.sample} {self.kind}: {self.detail}"


@dataclass
class WalkResult:
    failures: list = field(default_factory=list)
    checked: int = 0
    skipped: int = 0


class _Placer:
    def __init__(self, device: str):
        self.device = device

    def to_device(self, x):
        if self.device == "fake":
            return tp._C._testing_fake_device_label(x.detach())
        return x.detach().to(self.device)

    def to_host(self, x):
        if x is None:
            return None
        if self.device == "fake":
            return tp._C._testing_fake_device_unlabel(x).clone()
        return x.cpu()

    @contextlib.contextmanager
    def active(self):
        if self.device != "fake":
            yield
            return
        tp._C._testing_fake_device(True)
        try:
            yield
        finally:
            tp._C._testing_fake_device(False)


def _map(obj, f):
    if H._is_tp_tensor(obj):
        return f(obj)
    if isinstance(obj, list):
        return [_map(o, f) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_map(o, f) for o in obj)
    if isinstance(obj, dict):
        return {k: _map(v, f) for k, v in obj.items()}
    return obj


def _leaves(obj, out):
    """TensorPlay tensors of a converted sample, in order."""
    if H._is_tp_tensor(obj):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _leaves(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _leaves(o, out)
    return out


def _float_outputs(out):
    return [(i, o) for i, o in enumerate(H._flatten(out)) if H._is_tp_tensor(o) and o.dtype in (tp.float32, tp.float64)]


def _close(a, b, dtype_name):
    """None if the CPU result a and the device result b (both on the host) agree."""
    if a is None and b is None:
        return None
    if a is None or b is None:
        return f"one side is None (cpu {a is None}, device {b is None})"
    ta, tb = H.tp_to_torch(a), H.tp_to_torch(b)
    if ta.shape != tb.shape or ta.dtype != tb.dtype:
        return f"cpu {tuple(ta.shape)} {ta.dtype} vs device {tuple(tb.shape)} {tb.dtype}"
    # float32 on a GPU sums in another order than the CPU.
    rtol, atol = (1e-3, 1e-4) if dtype_name == "float32" else (1e-9, 1e-9)
    if ta.dtype.is_floating_point:
        ok = torch.allclose(ta, tb, rtol=rtol, atol=atol, equal_nan=True)
    else:
        ok = torch.equal(ta, tb)
    if ok:
        return None
    d = (ta.double() - tb.double()).abs().nan_to_num(0)
    return f"values differ (max abs diff {d.max().item():.3g})"


def _run(fn, inp, args, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(inp, *args, **kwargs)


def _reverse(fn, sample, grad_flags, cots_src):
    """(outputs, grads) of fn on sample (inputs already placed)."""
    inp, args, kwargs = sample
    ins = [t for t, g in zip(_leaves((inp, args, kwargs), []), grad_flags) if g]
    out = _run(fn, inp, args, kwargs)
    outs = [o for _, o in _float_outputs(out) if o.requires_grad]
    grads = None
    if outs and ins:
        cots = [cots_src(i, o) for i, o in enumerate(outs)]
        grads = tp.autograd.grad(outs, ins, cots, allow_unused=True)
    return out, grads


def _forward(fn, sample, grad_flags, tangent_src):
    """Tangents of fn's float outputs at the sample (forward mode)."""
    inp, args, kwargs = sample
    leaves = _leaves((inp, args, kwargs), [])
    with fwAD.dual_level():
        k = iter(range(len(leaves)))
        duals = {}
        for t, g in zip(leaves, grad_flags):
            i = next(k)
            if g:
                duals[id(t)] = fwAD.make_dual(t.detach(), tangent_src(i, t))

        def swap(t):
            return duals.get(id(t), t)

        inp2, args2, kwargs2 = _map(inp, swap), _map(args, swap), _map(kwargs, swap)
        out = _run(fn, inp2, args2, kwargs2)
        return [fwAD.unpack_dual(o).tangent for _, o in _float_outputs(out)]


def walk_case(key: str, dtype_name: str, device: str, limit: int = 2, forward_mode: bool = True) -> WalkResult:
    """Compares every (or `limit`) gradient sample of OpInfo `key` in dtype_name
    on `device` against the CPU: outputs, reverse-mode gradients, and tangents."""
    res = WalkResult()
    op = H.get_op(key)
    fn = H.make_tp_function(op)
    if fn is None or H._is_random(op.name):
        return res
    try:
        samples = H._samples(op, dtype_name, True)
    except Exception:
        return res
    placer = _Placer(device)
    for idx in H.select_indices(len(samples), limit):
        s = samples[idx]
        try:
            gi = []
            host = (H.to_tp(s.input, gi), H.to_tp(tuple(s.args), gi), H.to_tp(dict(s.kwargs), gi))
        except Exception:
            res.skipped += 1
            continue
        torch_flags = [id(x) for _, x in gi]
        flags = [id(t) in torch_flags for t in _leaves(host, [])]
        host = _map(host, lambda t: t.detach())  # fresh leaves for each mode below

        def cot(i, o):
            g = torch.Generator().manual_seed(H.SEED + i)
            return tp.from_dlpack(torch.randn(tuple(o.shape), generator=g, dtype=H.TORCH_DTYPES[H.tp_dtype_name(o)]))

        cpu_cots = {}

        def cpu_cot(i, o):
            cpu_cots[i] = cot(i, o)
            return cpu_cots[i]

        # The CPU reference: when it fails, the sample says nothing about devices.
        try:
            hosted = _map(host, lambda t: t.detach().clone())
            hl = _leaves(hosted, [])
            for t, g in zip(hl, flags):
                if g and t.dtype in (tp.float32, tp.float64):
                    t.requires_grad_(True)
            flags_r = [g and t.requires_grad for t, g in zip(hl, flags)]
            ref_out, ref_grads = _reverse(fn, hosted, flags_r, cpu_cot)
        except Exception:
            res.skipped += 1
            continue
        res.checked += 1
        with placer.active():
            try:
                placed = _map(host, placer.to_device)
                pl = _leaves(placed, [])
                for t, g in zip(pl, flags_r):
                    if g:
                        t.requires_grad_(True)
                out, grads = _reverse(fn, placed, flags_r, lambda i, o: placer.to_device(cpu_cots[i]))
                for (i, a), (_, b) in zip(_float_outputs(ref_out), _float_outputs(out)):
                    d = _close(a.detach(), placer.to_host(b.detach()), dtype_name)
                    if d:
                        res.failures.append(DeviceFailure(key, dtype_name, idx, "forward", f"output {i}: {d}"))
                        break
                if ref_grads is not None:
                    for j, (a, b) in enumerate(zip(ref_grads, grads or [])):
                        d = _close(a, placer.to_host(b), dtype_name)
                        if d:
                            res.failures.append(DeviceFailure(key, dtype_name, idx, "grad", f"input {j}: {d}"))
                            break
            except Exception as e:
                msg = f"{type(e).__name__}: {H._first_line(e, 240)}"
                if device == "fake" and any(w in str(e) for w in FAKE_LIMITS):
                    res.skipped += 1
                else:
                    res.failures.append(DeviceFailure(key, dtype_name, idx, "grad", msg))
                continue
            if not forward_mode:
                continue
            # Forward mode: only where the CPU has a rule (otherwise nothing to compare).
            try:
                tangents = {}

                def cpu_tan(i, t):
                    tangents[i] = cot(1000 + i, t)
                    return tangents[i]

                with placer_off(placer):
                    ref_t = _forward(fn, _map(host, lambda t: t.detach()), flags_r, cpu_tan)
            except Exception:
                continue
            try:
                got_t = _forward(fn, _map(host, placer.to_device), flags_r,
                                 lambda i, t: placer.to_device(tangents[i]))
                for i, (a, b) in enumerate(zip(ref_t, got_t)):
                    d = _close(a, placer.to_host(b), dtype_name)
                    if d:
                        res.failures.append(DeviceFailure(key, dtype_name, idx, "jvp", f"output {i}: {d}"))
                        break
            except Exception as e:
                if device == "fake" and any(w in str(e) for w in FAKE_LIMITS):
                    continue
                res.failures.append(DeviceFailure(key, dtype_name, idx, "jvp",
                                                  f"{type(e).__name__}: {H._first_line(e, 240)}"))
    return res


@contextlib.contextmanager
def placer_off(placer):
    """The CPU reference runs with the fake device's hook put back (it is
    harmless for CPU tensors, but keeps the reference independent of it)."""
    if placer.device != "fake":
        yield
        return
    tp._C._testing_fake_device(False)
    try:
        yield
    finally:
        tp._C._testing_fake_device(True)


def grad_cases(dtypes=("float64",)):
    """[(op_key, dtype)] of every covered OpInfo with gradients, in dtypes."""
    out = []
    for op in H.op_db():
        if H.find_tp_callable(op) is None or not op.supports_autograd or H._is_random(op.name):
            continue
        sd = H.supported_dtypes(op)
        for d in dtypes:
            if d in sd:
                out.append((H.op_key(op), d))
    return out


def walk_all(device: str, dtypes=("float64",), limit: int = 2, forward_mode: bool = True):
    """Runs every case and returns (failures, checked, skipped)."""
    failures, checked, skipped = [], 0, 0
    for key, d in grad_cases(dtypes):
        r = walk_case(key, d, device, limit, forward_mode)
        failures += r.failures
        checked += r.checked
        skipped += r.skipped
    return failures, checked, skipped
