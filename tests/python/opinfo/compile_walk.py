"""Compiling is unobservable, checked over PyTorch's OpInfo samples.

For one OpInfo operator this runs a few of its samples through TensorPlay
eagerly and through `tp.compile` (Stax, the default backend) on independent
copies of the same inputs, and compares the compiled results with eager's
(not with PyTorch's: test_opinfo.py does that), within the error model of
generated code (reassociated sums, fused roundings). With `grads`, the samples
are float64 with inputs that require grad, and the gradients of the results'
sum through the compiled region are compared with eager's as well: that runs
the AOT joint graph, the partition and the generated backward of every
operator's derivative formula.

A sample eager TensorPlay cannot run (an unsupported argument, an operator
error) is skipped: test_opinfo.py reports those. Random operators are skipped
(their values depend on the draw order).
"""
from __future__ import annotations

import warnings

import tensorplay as tp

from . import harness as H

# Generated code may reassociate and fuse: float32 within these, float64 tighter.
TOLERANCES = {"float32": (1e-4, 1e-5), "float64": (1e-7, 1e-9)}


def _on(obj, device, grad_inputs):
    """obj with its tensors moved to `device` (a tensor that requires grad
    becomes a leaf there, appended to grad_inputs in to_tp's order)."""
    if isinstance(obj, tp.Tensor):
        if device == "cpu":
            if obj.requires_grad:
                grad_inputs.append(obj)
            return obj
        t = obj.detach().to(device)
        if obj.requires_grad:
            t.requires_grad_(True)
            grad_inputs.append(t)
        return t
    if isinstance(obj, list):
        return [_on(o, device, grad_inputs) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_on(o, device, grad_inputs) for o in obj)
    if isinstance(obj, dict):
        return {k: _on(v, device, grad_inputs) for k, v in obj.items()}
    return obj


def _copies(s, device):
    """Two independent TensorPlay copies of a sample on `device`: (input, args, kwargs, grad inputs)."""
    out = []
    for _ in range(2):
        gi, moved = [], []
        x, args, kwargs = H.to_tp(s.input, gi), H.to_tp(tuple(s.args), gi), H.to_tp(dict(s.kwargs), gi)
        out.append((_on(x, device, moved), _on(args, device, moved), _on(kwargs, device, moved), moved))
    return out


def _grad_of_sum(results, inputs):
    outs = [o for o in H._flatten(results) if isinstance(o, tp.Tensor) and o.requires_grad]
    if not outs:
        return outs, None
    return outs, tp.autograd.grad([o.sum() for o in outs], inputs, allow_unused=True)


def check_sample(key, fn, s, dtype_name: str, grads: bool, device: str = "cpu"):
    """None when compiled equals eager on sample `s` (or the sample does not
    apply), else (reason, detail)."""
    try:
        (x, args, kwargs, gin), (x2, args2, kwargs2, gin2) = _copies(s, device)
    except H.Unconvertible:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = fn(x, *args, **kwargs)
            e_outs, e_grads = _grad_of_sum(expected, gin) if grads and gin else ([], None)
        except Exception:
            return None
        if grads and e_grads is None:
            return None

        def call(inp, *a):
            return fn(inp, *a, **kwargs2)

        try:
            compiled = tp.compile(call, options={"warn_fallback": False}, fullgraph=True)
            actual = compiled(x2, *args2)
            if not grads:
                actual = compiled(x2, *args2)  # the first-level entry too
        except Exception as e:
            return ("compiled raises", f"{type(e).__name__}: {H._first_line(e)}")
    want = [H.tp_to_torch(o) if isinstance(o, tp.Tensor) else o for o in H._flatten(expected)]
    diff = H.compare(want, H._flatten(actual), dtype_name, tol=TOLERANCES.get(dtype_name),
                     indices_ok=H.tie_checker(key, s))
    if diff:
        return diff
    if not grads:
        return None
    c_outs = [o for o in H._flatten(actual) if isinstance(o, tp.Tensor) and o.requires_grad]
    if len(c_outs) != len(e_outs):
        return ("no derivative", f"{len(e_outs)} results require grad in eager, {len(c_outs)} compiled")
    try:
        c_grads = tp.autograd.grad([o.sum() for o in c_outs], gin2, allow_unused=True)
    except Exception as e:
        return ("backward raises", f"{type(e).__name__}: {H._first_line(e)}")
    for j, (a, b) in enumerate(zip(e_grads, c_grads)):
        if a is None and b is None:
            continue
        if (a is None) != (b is None):
            return ("wrong gradient", f"input {j}: {'eager' if a is None else 'compiled'} gives no gradient")
        d = H.compare(H.tp_to_torch(a), b, dtype_name, tol=TOLERANCES.get(dtype_name))
        if d:
            return ("wrong gradient", f"input {j}: {d[0]}: {d[1]}")
    return None


def run_compiled_case(key: str, dtype_name: str, limit: int, grads: bool, device: str = "cpu"):
    """[(sample index, reason, detail)] for the samples of OpInfo `key` whose
    compiled results (and with `grads` gradients) differ from eager's on
    `device` (eager on the same device is the reference)."""
    op = H.get_op(key)
    fn = H.make_tp_function(op)
    if fn is None or H._is_random(op.name) or dtype_name not in H.supported_dtypes(op):
        return []
    if grads and not H.grads_checked(op):
        return []
    try:
        samples = H._samples(op, dtype_name, grads)
    except Exception:
        return []
    failures = []
    for idx in H.select_indices(len(samples), limit):
        r = check_sample(key, fn, samples[idx], dtype_name, grads, device)
        if r is not None:
            failures.append((idx, r[0], r[1]))
    return failures
