"""PyTorch's OpInfo database as an oracle for TensorPlay.

For one (OpInfo, dtype) *case* this module generates PyTorch's sample inputs,
copies each sample into TensorPlay with the same sizes, strides and storage
offset (so a non-contiguous sample stays non-contiguous), runs the TensorPlay
operator and PyTorch's on the same data, and compares every output (dtype,
shape, values within a per-dtype tolerance; each element of a tuple output).
For float64 it also compares first-order gradients against torch.autograd on
the same sample. Every sample ends as a `SampleResult` with a *reason class*
("wrong value", "unsupported dtype", "missing kwarg X", "no derivative", ...)
so failures can be counted, recorded in `xfails.json` and compared later.

Crash safety: `IsolatedRunner` runs cases in a forked worker process (a new
interpreter where this one has loaded the CUDA driver), so a
segfault or a hang in one sample is reported as a failure of that case
("crash" / "timeout") instead of killing the test run or the report.

Used by `test_opinfo.py` (pytest) and `scripts/opinfo_report.py` (report and
`--update-xfails`). Imports torch lazily-enough that callers can skip cleanly.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import select
import signal
import sys
import threading
import time
import traceback
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

import tensorplay as tp

HERE = Path(__file__).resolve().parent
XFAILS_PATH = HERE / "xfails.json"

# The ten dtypes TensorPlay has, by name (torch and tensorplay spell them alike).
DTYPE_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64",
               "float16", "bfloat16", "float32", "float64")
TORCH_DTYPES = {n: getattr(torch, n) for n in DTYPE_NAMES}
TP_DTYPES = {n: getattr(tp, n) for n in DTYPE_NAMES}

# Tolerances per dtype (the defaults of torch.testing.assert_close).
TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}
GRAD_TOLERANCE = (1e-7, 1e-7)  # float64 gradients

SEED = 0
CASE_TIMEOUT_S = float(os.environ.get("TP_OPINFO_CASE_TIMEOUT", "300"))

# Operators whose values are random or uninitialized: only dtype/shape are compared.
_RANDOM_WORDS = ("rand", "empty", "dropout", "bernoulli", "normal", "uniform",
                 "multinomial", "exponential", "geometric", "cauchy", "poisson", "rrelu",
                 # OpInfo's samples draw the window placement (no _random_samples): values differ by stream;
                 # test_api_s35_fractional_pool.py compares values with fixed samples
                 "fractional_max_pool")


def _is_random(name: str) -> bool:
    return any(w in name for w in _RANDOM_WORDS)


# --------------------------------------------------------------------------------------
# The OpInfo database and the name mapping


_OP_DB = None


def op_db():
    """torch's OpInfo list (imported once: it takes seconds)."""
    global _OP_DB
    if _OP_DB is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torch.testing._internal.common_methods_invocations import op_db as db
        _OP_DB = list(db)
    return _OP_DB


def op_key(op) -> str:
    """'name' or 'name.variant' — unique over op_db, used in xfails.json and test ids."""
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def _resolve(root, path: str):
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _usable(obj) -> bool:
    return callable(obj) and not isinstance(obj, (type(tp.float32), type))


def find_tp_callable(op):
    """The TensorPlay callable of an OpInfo, or None when TensorPlay lacks the operator.

    Tries the OpInfo's name and then its aliases as a path under `tensorplay`
    (so `nn.functional.relu` -> tp.nn.functional.relu, `linalg.norm` ->
    tp.linalg.norm), then as a Tensor method (`__radd__`, `item`, `mT`, ...).
    Returns (kind, obj, name) with kind "function" or "method"."""
    names = [op.name] + [a.name for a in getattr(op, "aliases", ())]
    for name in names:
        f = _resolve(tp, name)
        if f is not None and _usable(f):
            return ("function", f, name)
    for name in names:
        if "." in name:
            continue
        m = getattr(tp.Tensor, name, None)
        if m is not None:
            return ("method", m, name)
    return None


class _TorchShim(types.ModuleType):
    """Stands for `torch` inside OpInfo lambdas rebound to TensorPlay: `torch.X`
    is tensorplay's X (or, for `torch.nn.functional.X`, tp.nn.functional.X)."""

    def __init__(self, target, torch_obj):
        super().__init__("torch_shim")
        self._target = target
        self._torch = torch_obj

    def __getattr__(self, name):
        t = getattr(self._target, name, None)
        if t is None and self._target is tp and hasattr(tp.Tensor, name):
            return lambda x, *a, **k: getattr(x, name)(*a, **k)  # torch.zero_(x) -> x.zero_()
        if t is None:
            raise AttributeError(f"tensorplay has no attribute {name!r}")
        tt = getattr(self._torch, name, None)
        if isinstance(t, types.ModuleType) or (isinstance(tt, types.ModuleType)):
            return _TorchShim(t, tt)
        return t


def make_tp_function(op):
    """A callable `f(input, *args, **kwargs)` that runs the OpInfo's operator in
    TensorPlay, or None (not covered).

    OpInfos whose `op` is a lambda (`lambda x, *a: x.expand(*a)`,
    `wrapper_set_seed(torch.randn, ...)`) are rebound with `torch` standing for
    tensorplay, so the lambda's own argument handling is kept."""
    found = find_tp_callable(op)
    if found is None:
        return None
    kind, obj, name = found
    fn = op.op
    if isinstance(fn, types.FunctionType) and fn.__name__ == "<lambda>":
        g = dict(fn.__globals__)
        g["torch"] = _TorchShim(tp, torch)
        if "wrapper_set_seed" in g:
            g["wrapper_set_seed"] = lambda f, *a, **k: (tp.manual_seed(SEED), f(*a, **k))[1]
        return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    if kind == "method":
        if isinstance(obj, property):
            return lambda x, *a, **k: getattr(x, name)
        return lambda x, *a, **k: getattr(x, name)(*a, **k)
    return obj


def supported_dtypes(op):
    """Names of the ten TensorPlay dtypes PyTorch's OpInfo supports on CPU."""
    sd = op.supported_dtypes("cpu")
    return [n for n in DTYPE_NAMES if TORCH_DTYPES[n] in sd]


# PyTorch's own gradient is wrong here, so it is no oracle: as_strided_scatter's
# derivative gives self's gradient at the scattered positions instead of zero
# (TensorPlay's passes gradcheck against finite differences:
# tests/python/test_autograd_features.py::test_as_strided_scatter_gradient_matches_finite_differences).
TORCH_GRADIENT_WRONG = {"as_strided_scatter"}


def grads_checked(op) -> bool:
    return (bool(op.supports_autograd) and torch.float64 in op.supported_backward_dtypes("cpu")
            and op_key(op) not in TORCH_GRADIENT_WRONG)


def covered_cases():
    """[(op_key, dtype_name)] for every OpInfo TensorPlay has, in every dtype both support."""
    cases = []
    for op in op_db():
        if find_tp_callable(op) is None:
            continue
        for d in supported_dtypes(op):
            cases.append((op_key(op), d))
    return cases


def get_op(key: str):
    for op in op_db():
        if op_key(op) == key:
            return op
    raise KeyError(key)


# --------------------------------------------------------------------------------------
# Conversion torch <-> tensorplay


class Unconvertible(Exception):
    """A sample argument TensorPlay cannot receive (complex tensor, memory_format, ...)."""


def tensor_to_tp(t: torch.Tensor, requires_grad: bool):
    """A TensorPlay copy of `t` with t's sizes, strides and storage offset: the
    whole underlying storage is copied and viewed with the same geometry."""
    name = str(t.dtype).replace("torch.", "")
    if name not in TP_DTYPES:
        raise Unconvertible(f"{t.dtype} tensor")
    if t.device.type != "cpu":
        raise Unconvertible(f"{t.device.type} tensor")
    t = t.detach()
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    n = t.untyped_storage().nbytes() // t.element_size()
    need = t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if s > 0) + 1
    if t.numel() == 0 or n < need:
        base_t = t.contiguous().clone()
        geom = (tuple(t.shape), tuple(base_t.stride()), 0)
        flat = base_t.reshape(-1)
    else:
        flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,)).clone()
        geom = (tuple(t.shape), tuple(t.stride()), t.storage_offset())
    base = tp.from_dlpack(flat)
    x = tp.as_strided(base, *geom)
    if requires_grad:
        x.requires_grad_(True)
    return x


def to_tp(obj, grad_inputs):
    """Converts a sample argument (recursively); tensors that require grad in
    torch are appended, with their TensorPlay twin, to `grad_inputs`."""
    if isinstance(obj, torch.Tensor):
        x = tensor_to_tp(obj, obj.requires_grad)
        if obj.requires_grad:
            grad_inputs.append((obj, x))
        return x
    if isinstance(obj, torch.dtype):
        name = str(obj).replace("torch.", "")
        if name not in TP_DTYPES:
            raise Unconvertible(f"{obj} dtype argument")
        return TP_DTYPES[name]
    if isinstance(obj, torch.Size):
        return tuple(obj)
    if isinstance(obj, torch.device):
        return str(obj)
    if isinstance(obj, torch.memory_format):
        name = str(obj).replace("torch.", "")
        if not hasattr(tp, name):  # channels_last etc. where TensorPlay lacks them
            raise Unconvertible(f"memory_format argument {obj}")
        return getattr(tp, name)
    if isinstance(obj, (torch.layout, torch.Generator)):
        raise Unconvertible(f"{type(obj).__name__.replace('torch.', '')} argument {obj}")
    if isinstance(obj, torch.nn.PairwiseDistance):
        # a sample's distance_function (triplet_margin_with_distance_loss): the same module in TensorPlay
        return tp.nn.PairwiseDistance(obj.norm, obj.eps, obj.keepdim)
    if isinstance(obj, torch.nn.Module):
        raise Unconvertible(f"module argument {type(obj).__name__}")
    if isinstance(obj, complex):
        raise Unconvertible("complex scalar")
    if isinstance(obj, list):
        return [to_tp(o, grad_inputs) for o in obj]
    if isinstance(obj, tuple):
        return tuple(to_tp(o, grad_inputs) for o in obj)
    if isinstance(obj, dict):
        # layout=torch.strided is the default and TensorPlay's only layout (it has no layout objects):
        # the keyword is dropped; any other layout stays unconvertible
        return {k: to_tp(v, grad_inputs) for k, v in obj.items() if not (k == "layout" and v is torch.strided)}
    return obj


def tp_to_torch(x) -> torch.Tensor:
    return torch.from_dlpack(x.detach().contiguous()).clone()


def tp_dtype_name(x) -> str:
    return str(x.dtype).split(".")[-1]


# --------------------------------------------------------------------------------------
# Results


@dataclass
class SampleResult:
    index: int          # position in op.sample_inputs(...) (deterministic: seeded)
    kind: str           # "fwd" (the function), "method" (Tensor method variant) or "grad"
    ok: bool
    reason: str = ""    # reason class when not ok
    detail: str = ""    # one line: what differed / the exception


@dataclass
class CaseResult:
    op: str
    dtype: str
    samples: list = field(default_factory=list)
    skipped: int = 0     # samples the torch reference itself rejects, or that cannot be converted
    error: str = ""      # the case could not run at all (sample generation raised)
    seconds: float = 0.0

    def failures(self):
        return [s for s in self.samples if not s.ok]

    def to_json(self):
        return {"op": self.op, "dtype": self.dtype, "skipped": self.skipped, "error": self.error,
                "seconds": round(self.seconds, 3),
                "samples": [[s.index, s.kind, s.ok, s.reason, s.detail] for s in self.samples]}

    @staticmethod
    def from_json(d):
        r = CaseResult(d["op"], d["dtype"], skipped=d["skipped"], error=d["error"], seconds=d["seconds"])
        r.samples = [SampleResult(*s) for s in d["samples"]]
        return r


_DTYPE_SPELLINGS = {
    "bool": ("bool", "Bool"), "uint8": ("uint8", "Byte"), "int8": ("int8", "Char"),
    "int16": ("int16", "Short"), "int32": ("int32", "Int"), "int64": ("int64", "Long"),
    "float16": ("float16", "Half", "half"), "bfloat16": ("bfloat16", "BFloat16"),
    "float32": ("float32", "Float"), "float64": ("float64", "Double"),
}


def classify_exception(e: BaseException, dtype_name: str = "", kwargs=None) -> str:
    """The reason class of an exception TensorPlay raised on a sample torch accepts."""
    msg = str(e)
    low = msg.lower()
    if isinstance(e, Unconvertible):
        return f"unconvertible {e.args[0].split(' ')[0]}"
    m = re.search(r"unexpected keyword argument '(\w+)'", msg)
    if m:
        return f"missing kwarg {m.group(1)}"
    if isinstance(e, TypeError) and ("expected one of" in msg or "invalid combination" in msg):
        # an overload mismatch: name the first keyword no listed signature has
        expected = msg.split("expected", 1)[-1]
        for k in (kwargs or {}):
            if not re.search(rf"\b{re.escape(k)}\b", expected):
                return f"missing kwarg {k}"
        return "signature mismatch"
    if isinstance(e, AttributeError) and "has no attribute" in msg:
        return "missing function"
    spelled = any(re.search(rf"\b{w}\b", msg) for w in _DTYPE_SPELLINGS.get(dtype_name, ()))
    if spelled and any(w in low for w in ("support", "not implemented", "expected", "cannot", "can't",
                                          "must be", "only", "invalid", "unknown")):
        return "unsupported dtype"
    if "dtype" in low and ("not supported" in low or "unsupported" in low):
        return "unsupported dtype"
    if isinstance(e, NotImplementedError) or "not implemented" in low or "not supported" in low:
        return "not implemented"
    if isinstance(e, TypeError) and ("argument" in low or "expected" in low):
        return "signature mismatch"
    return f"raises {type(e).__name__}"


def _first_line(s: str, n: int = 300) -> str:
    s = str(s).strip().splitlines()[0] if str(s).strip() else ""
    return s[:n]


def _flatten(out):
    """Flattens an output (tensor, number, tuple/list/namedtuple, nested) to a list."""
    if isinstance(out, (list, tuple)):
        r = []
        for o in out:
            r.extend(_flatten(o))
        return r
    return [out]


def _is_tp_tensor(x) -> bool:
    return isinstance(x, tp.Tensor)


# Operators that return indices of equal elements in an unspecified order (sort is not
# stable unless asked, topk/kthvalue/median/max pick any of the tied elements):
# OpInfo key -> (position of `dim` in the sample's args, position of `keepdim` or None).
_TIED_INDEX_OPS = {
    "sort": (0, None), "argsort": (0, None), "topk": (1, None), "kthvalue": (1, 2),
    "median": (0, 1), "nanmedian": (0, 1), "mode": (0, 1),
    "max.reduction_with_dim": (0, 1), "min.reduction_with_dim": (0, 1),
}


def tie_checker(key: str, sample):
    """For operators in _TIED_INDEX_OPS: a function (expected, actual indices as torch
    tensors) -> bool that accepts other indices of the same values (same elements of
    the input along `dim`); None for every other operator, or a stable sort."""
    if key not in _TIED_INDEX_OPS or sample.kwargs.get("stable"):
        return None
    dpos, kpos = _TIED_INDEX_OPS[key]
    args, kw, x = sample.args, sample.kwargs, sample.input
    dim = kw.get("dim", args[dpos] if len(args) > dpos else -1)
    keep = kw.get("keepdim", args[kpos] if kpos is not None and len(args) > kpos else False)
    if not isinstance(x, torch.Tensor) or not isinstance(dim, int):
        return None
    x = x.detach()

    def same_elements(e, a):
        if x.dim() == 0:
            return bool(((a == 0) | (a == -1)).all())
        if kpos is not None and not keep:
            e, a = e.unsqueeze(dim), a.unsqueeze(dim)
        n = x.shape[dim]
        if bool(((a < 0) | (a >= max(n, 1))).any()):
            return False
        if kpos is None and a.numel() and a.shape[dim] > 1:  # sort/argsort/topk: distinct indices
            srt = a.sort(dim).values
            if bool((srt.narrow(dim, 1, srt.shape[dim] - 1) == srt.narrow(dim, 0, srt.shape[dim] - 1)).any()):
                return False
        ve, va = x.take_along_dim(e, dim), x.take_along_dim(a, dim)
        return bool((ve.eq(va) | (ve.isnan() & va.isnan())).all())

    return same_elements


def compare(expected, actual, dtype_name: str, values: bool = True, tol=None, indices_ok=None):
    """None when equal, else (reason class, detail). `indices_ok(expected, actual)`, when
    given, accepts int64 outputs that differ only in the choice among tied elements."""
    e_list, a_list = _flatten(expected), _flatten(actual)
    if len(e_list) != len(a_list):
        return ("wrong structure", f"torch gives {len(e_list)} outputs, tensorplay {len(a_list)}")
    for i, (e, a) in enumerate(zip(e_list, a_list)):
        where = f"output {i}: " if len(e_list) > 1 else ""
        if isinstance(e, torch.Tensor):
            if not _is_tp_tensor(a):
                return ("wrong structure", f"{where}torch gives a tensor, tensorplay {type(a).__name__}")
            edt = str(e.dtype).replace("torch.", "")
            adt = tp_dtype_name(a)
            if edt != adt:
                return ("wrong dtype", f"{where}expected {edt}, got {adt}")
            if tuple(e.shape) != tuple(a.shape):
                return ("wrong shape", f"{where}expected {tuple(e.shape)}, got {tuple(a.shape)}")
            if not values or e.numel() == 0:
                continue
            at = tp_to_torch(a)
            et = e.detach()
            if et.is_floating_point():
                rtol, atol = tol or TOLERANCES.get(edt, (0, 0))
                ok = torch.isclose(at.double(), et.double(), rtol=rtol, atol=atol, equal_nan=True)
                if not bool(ok.all()):
                    bad = (~ok).nonzero()[0].tolist()
                    diff = (at.double() - et.double()).abs()
                    diff = diff[~ok]
                    # within 4x the tolerance: a rounding difference (an intermediate
                    # rounded to the narrow dtype, another summation order), not a wrong formula
                    near = bool(torch.isclose(at.double(), et.double(), rtol=4 * rtol, atol=4 * atol,
                                              equal_nan=True).all())
                    return ("wrong value (rounding)" if near else "wrong value", f"{where}{int((~ok).sum())}/{e.numel()} elements differ, first at "
                                           f"{bad}: expected {et[tuple(bad)].item()!r}, got {at[tuple(bad)].item()!r}"
                                           f" (max abs diff {diff.nan_to_num(float('inf')).max().item():.3g})")
            elif not torch.equal(at, et) and not (indices_ok is not None and et.dtype == torch.int64
                                                  and indices_ok(et, at)):
                bad = (at != et).nonzero()[0].tolist()
                return ("wrong value", f"{where}{int((at != et).sum())}/{e.numel()} elements differ, first at "
                                       f"{bad}: expected {et[tuple(bad)].item()!r}, got {at[tuple(bad)].item()!r}")
        else:
            if _is_tp_tensor(a):
                return ("wrong structure", f"{where}torch gives {type(e).__name__}, tensorplay a tensor")
            if not values:
                continue
            if isinstance(e, float) and isinstance(a, (int, float)):
                import math
                if not (math.isclose(e, a, rel_tol=1e-6, abs_tol=1e-6) or (math.isnan(e) and math.isnan(a))):
                    return ("wrong value", f"{where}expected {e!r}, got {a!r}")
            elif e != a:
                return ("wrong value", f"{where}expected {e!r}, got {a!r}")
    return None


# --------------------------------------------------------------------------------------
# Running one case


def _random_sample(op, s) -> bool:
    """A sample of an operator that is random only with some arguments: attention with
    dropout in training (multi_head_attention_forward's positional dropout_p, training=True).
    Its values follow each library's random stream, so the walks leave it out."""
    if op.name == "nn.functional.multi_head_attention_forward":
        return bool(s.kwargs.get("training", True)) and len(s.args) > 9 and float(s.args[9]) > 0
    return False


def _samples(op, dtype_name, requires_grad):
    torch.manual_seed(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = op.sample_inputs("cpu", TORCH_DTYPES[dtype_name], requires_grad=requires_grad)
        return [s for s in samples if not _random_sample(op, s)]


def select_indices(n: int, limit):
    """The sample indices a run uses: all, or `limit` spread evenly (deterministic)."""
    if limit is None or n <= limit:
        return list(range(n))
    step = n / limit
    return sorted({int(i * step) for i in range(limit)})


def _run_torch(op, s):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return op(s.input, *s.args, **s.kwargs)


def method_name(op):
    """The Tensor method to check besides the function, when the OpInfo has a method
    variant and TensorPlay's function is what the forward samples call; else None."""
    found = find_tp_callable(op)
    if found is None or found[0] != "function" or op.method_variant is None:
        return None
    if isinstance(op.op, types.FunctionType) and op.op.__name__ == "<lambda>":
        return None
    name = found[2]
    return None if "." in name or name.startswith("__") else name


def _mentions_cuda(obj) -> bool:
    """Whether a sample carries a CUDA tensor or names a CUDA device (PyTorch's
    `to` samples add `cuda:0` where a GPU is present). The walk compares CPU
    kernels; moves to the GPU are tested by the test_cuda_* files."""
    if isinstance(obj, torch.Tensor):
        return obj.device.type == "cuda"
    if isinstance(obj, torch.device):
        return obj.type == "cuda"
    if isinstance(obj, str):
        return obj.startswith("cuda")
    if isinstance(obj, (list, tuple)):
        return any(_mentions_cuda(v) for v in obj)
    if isinstance(obj, dict):
        return any(_mentions_cuda(v) for v in obj.values())
    return False


def _run_fwd_sample(op, fn, idx, s, dtype_name, result: CaseResult, method=None):
    if _mentions_cuda((s.input, tuple(s.args), dict(s.kwargs))):
        result.skipped += 1
        return
    try:
        expected = _run_torch(op, s)
    except Exception:
        result.skipped += 1
        return
    _check_call(op, fn, idx, s, dtype_name, result, expected, "fwd")
    if method is not None and isinstance(s.input, torch.Tensor):
        if not hasattr(tp.Tensor, method):
            result.samples.append(SampleResult(idx, "method", False, "missing method",
                                               f"tensorplay.Tensor has no method {method!r}"))
        else:
            _check_call(op, lambda x, *a, **k: getattr(x, method)(*a, **k), idx, s, dtype_name, result,
                        expected, "method")


def _check_call(op, fn, idx, s, dtype_name, result, expected, kind):
    try:
        grad_inputs = []
        inp = to_tp(s.input, grad_inputs)
        args = to_tp(tuple(s.args), grad_inputs)
        kwargs = to_tp(dict(s.kwargs), grad_inputs)
    except Unconvertible as e:
        result.samples.append(SampleResult(idx, kind, False, classify_exception(e), _first_line(e)))
        return
    try:
        if _is_random(op.name):
            tp.manual_seed(SEED)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(inp, *args, **kwargs)
    except Exception as e:
        result.samples.append(SampleResult(idx, kind, False, classify_exception(e, dtype_name, s.kwargs),
                                           f"{type(e).__name__}: {_first_line(e)}"))
        return
    try:
        diff = compare(expected, actual, dtype_name, values=not _is_random(op.name),
                       indices_ok=tie_checker(op_key(op), s))
        if diff and diff[0].startswith("wrong value") and dtype_name in _LOW_PRECISION:
            exact = _rounded_exact_reference(op, s, dtype_name)
            if exact is not None and not compare(exact, actual, dtype_name, indices_ok=tie_checker(op_key(op), s)):
                diff = None  # PyTorch's own 16-bit kernel is the one off (it depends on the CPU)
        if diff and diff[0].startswith("wrong value") and dtype_name in _FLOAT64_UPCAST:
            exact = _rounded_exact_reference(op, s, dtype_name, rounded=False)
            if exact is not None and _no_less_accurate(expected, actual, exact, dtype_name):
                diff = None  # both carry rounding error; TensorPlay's is no larger than PyTorch's
        if diff and diff[0].startswith("wrong value") and dtype_name == "float64" and op.name in _SCIPY_ORACLE:
            exact = _scipy_reference(op.name, s)
            if exact is not None and _no_less_accurate(expected, actual, exact, dtype_name):
                diff = None  # PyTorch's float64 kernel is the inaccurate one (see _SCIPY_ORACLE)
    except Exception as e:
        diff = ("wrong structure", f"comparison raised {type(e).__name__}: {_first_line(e)}")
    if diff:
        result.samples.append(SampleResult(idx, kind, False, diff[0], diff[1]))
    else:
        result.samples.append(SampleResult(idx, kind, True))


# PyTorch's float64 Bessel J/Y and Airy Ai kernels are off by up to ~1e-6 (around x = 5 and x = -2,
# measured against mpmath): for these a float64 value mismatch is re-judged against mpmath's value
# (30 digits; mpmath comes with PyTorch, through sympy, so a fresh machine has it), and passes when
# TensorPlay is no further from it than PyTorch is.
_SCIPY_ORACLE = {"special.bessel_j0": ("besselj", 0), "special.bessel_j1": ("besselj", 1),
                 "special.bessel_y0": ("bessely", 0), "special.bessel_y1": ("bessely", 1),
                 "special.airy_ai": ("airyai", None)}


def _exact_value(mp, fn, order, x):
    if x != x:
        return float("nan")
    if x in (float("inf"), float("-inf")):  # the limits: 0, except where the function has none
        return 0.0 if x > 0 or fn == "besselj" else float("nan")
    try:
        with mp.workdps(30):
            v = getattr(mp, fn)(order, x) if order is not None else getattr(mp, fn)(x)
        if isinstance(v, mp.mpc):
            return float("nan") if v.imag != 0 else float(v.real)
        return float(v)
    except (ValueError, ZeroDivisionError, OverflowError):
        return float("nan")


def _scipy_reference(name, s):
    try:
        import mpmath
    except ImportError:
        return None
    if s.args or s.kwargs or not isinstance(s.input, torch.Tensor):
        return None
    fn, order = _SCIPY_ORACLE[name]
    x = s.input.detach().double()
    flat = [_exact_value(mpmath, fn, order, float(v)) for v in x.reshape(-1).tolist()]
    return torch.tensor(flat, dtype=torch.float64).reshape(x.shape)


_LOW_PRECISION = {"bfloat16": torch.bfloat16, "float16": torch.float16}
_FLOAT64_UPCAST = {**_LOW_PRECISION, "float32": torch.float32}


def _no_less_accurate(expected, actual, exact, dtype_name) -> bool:
    """Whether every floating output of TensorPlay is, element by element, no
    further from the float64 result than PyTorch's is, plus the dtype's
    tolerance measured from the float64 result. PyTorch's CPU kernels (MKL's
    GEMM, 16-bit accumulations) round differently on different instruction
    sets and versions, so two correct results can sit a few ulp apart on each
    side of the exact one: the error model is the distance to the exact value,
    not to PyTorch's."""
    e_list, a_list, x_list = _flatten(expected), _flatten(actual), _flatten(exact)
    if not len(e_list) == len(a_list) == len(x_list):
        return False
    rtol, atol = TOLERANCES[dtype_name]
    for e, a, x in zip(e_list, a_list, x_list):
        if not isinstance(e, torch.Tensor):
            continue
        if not e.is_floating_point():
            if not (_is_tp_tensor(a) and torch.equal(tp_to_torch(a), e.detach())):
                return False
            continue
        if not (_is_tp_tensor(a) and isinstance(x, torch.Tensor) and tuple(x.shape) == tuple(e.shape)):
            return False
        at, et, xt = tp_to_torch(a).double(), e.detach().double(), x.detach().double()
        finite = torch.isfinite(xt)
        if not bool(torch.isclose(at[~finite], et[~finite], equal_nan=True).all()):
            return False
        err_tp = (at - xt).abs()[finite]
        bound = (et - xt).abs()[finite] + atol + rtol * xt.abs()[finite]
        if not bool((err_tp <= bound).all()):
            return False
    return True


def _rounded_exact_reference(op, s, dtype_name, rounded: bool = True):
    """PyTorch's result for sample `s` computed in float64 (every tensor of the
    16-bit dtype upcast) and rounded once to that dtype: the correctly rounded
    value a 16-bit kernel should give. PyTorch's CPU kernels for bfloat16 and
    float16 (convolutions, some reductions) accumulate in 16 bits or not
    depending on the CPU's instruction set, so their results move between
    machines; TensorPlay's may equal this reference instead. None when the
    sample cannot run in float64. `rounded=False` keeps the float64 result
    (and also takes float32 samples)."""
    low = _FLOAT64_UPCAST[dtype_name]

    def up(x):
        if isinstance(x, torch.Tensor):
            return x.detach().double() if x.dtype == low else x.detach()
        if isinstance(x, (list, tuple)):
            return type(x)(up(v) for v in x)
        if isinstance(x, dict):
            return {k: up(v) for k, v in x.items()}
        return x

    def down(x):
        if isinstance(x, torch.Tensor):
            return x.to(low) if x.dtype == torch.float64 and rounded else x
        if isinstance(x, (list, tuple)):
            return type(x)(down(v) for v in x)
        return x

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return down(op(up(s.input), *up(tuple(s.args)), **up(dict(s.kwargs))))
    except Exception:
        return None


def _torch_grad_tensors(obj):
    """The tensors of a sample that require grad, in `to_tp`'s order."""
    if isinstance(obj, torch.Tensor):
        return [obj] if obj.requires_grad else []
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _torch_grad_tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _torch_grad_tensors(o)]
    return []


def _cotangent(t: torch.Tensor, i: int):
    g = torch.Generator().manual_seed(SEED + i)
    return torch.randn(t.shape, dtype=t.dtype, generator=g)


def _run_grad_sample(op, fn, idx, s, result: CaseResult):
    if _mentions_cuda((s.input, tuple(s.args), dict(s.kwargs))):
        result.skipped += 1
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = s.output_process_fn_grad(op(s.input, *s.args, **s.kwargs))
        outs = [(i, o) for i, o in enumerate(_flatten(out))
                if isinstance(o, torch.Tensor) and o.requires_grad]
        t_ins = _torch_grad_tensors((s.input, tuple(s.args), dict(s.kwargs)))
        if not outs or not t_ins:
            result.skipped += 1
            return
        cots = [_cotangent(o, i) for i, o in outs]
        expected = torch.autograd.grad([o for _, o in outs], t_ins, cots, allow_unused=True)
    except Exception:
        result.skipped += 1
        return
    try:
        grad_inputs = []
        inp = to_tp(s.input, grad_inputs)
        args = to_tp(tuple(s.args), grad_inputs)
        kwargs = to_tp(dict(s.kwargs), grad_inputs)
    except Unconvertible as e:
        result.samples.append(SampleResult(idx, "grad", False, classify_exception(e), _first_line(e)))
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(inp, *args, **kwargs)
        try:
            actual = s.output_process_fn_grad(actual)
        except Exception:
            pass
        a_flat = _flatten(actual)
        a_outs = []
        for i, _ in outs:
            a = a_flat[i] if i < len(a_flat) else None
            if not _is_tp_tensor(a) or not a.requires_grad:
                result.samples.append(SampleResult(idx, "grad", False, "no derivative",
                                                   f"output {i} does not require grad"))
                return
            a_outs.append(a)
    except Exception as e:
        result.samples.append(SampleResult(idx, "grad", False, classify_exception(e, "float64", s.kwargs),
                                           f"{type(e).__name__}: {_first_line(e)}"))
        return
    try:
        tp_cots = [tensor_to_tp(c, False) for c in cots]
        got = tp.autograd.grad(a_outs, [x for _, x in grad_inputs], tp_cots, allow_unused=True)
    except Exception as e:
        msg = str(e).lower()
        reason = "no derivative" if ("derivative" in msg or "differentiab" in msg
                                     or "does not require grad" in msg) else "backward raises"
        result.samples.append(SampleResult(idx, "grad", False, reason, f"{type(e).__name__}: {_first_line(e)}"))
        return
    for j, (e, a) in enumerate(zip(expected, got)):
        if e is None and a is None:
            continue
        if e is None:
            e = torch.zeros(t_ins[j].shape, dtype=t_ins[j].dtype)
        if a is None:
            a = tp.zeros(tuple(t_ins[j].shape), dtype=TP_DTYPES[str(t_ins[j].dtype).replace("torch.", "")])
        diff = compare(e, a, "float64", tol=GRAD_TOLERANCE)
        if diff:
            result.samples.append(SampleResult(idx, "grad", False, "wrong gradient",
                                               f"input {j}: {diff[0]}: {diff[1]}"))
            return
    result.samples.append(SampleResult(idx, "grad", True))


def run_case(key: str, dtype_name: str, limit=None, grads: bool = True, methods: bool = True) -> CaseResult:
    """Runs every sample (or `limit` of them, evenly spread) of OpInfo `key` in
    `dtype_name`: the function, and the Tensor method when torch has one too
    (`methods`); for float64 also the gradient samples when `grads`."""
    t0 = time.perf_counter()
    result = CaseResult(key, dtype_name)
    op = get_op(key)
    fn = make_tp_function(op)
    if fn is None:
        result.error = "not covered"
        return result
    try:
        samples = _samples(op, dtype_name, False)
    except Exception as e:
        result.error = f"sample generation raised {type(e).__name__}: {_first_line(e)}"
        return result
    method = method_name(op) if methods else None
    for i in select_indices(len(samples), limit):
        _run_fwd_sample(op, fn, i, samples[i], dtype_name, result, method)
    # random operators: torch's and tensorplay's random streams differ, so no gradient oracle
    if grads and dtype_name == "float64" and grads_checked(op) and not _is_random(op.name):
        try:
            gsamples = _samples(op, dtype_name, True)
        except Exception as e:
            gsamples = []
            result.error = f"grad sample generation raised {type(e).__name__}: {_first_line(e)}"
        for i in select_indices(len(gsamples), limit):
            _run_grad_sample(op, fn, i, gsamples[i], result)
    result.seconds = time.perf_counter() - t0
    return result


def _write_msg(fd: int, obj) -> None:
    data = pickle.dumps(obj)
    view = memoryview(len(data).to_bytes(8, "little") + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline=None):
    """n bytes from fd, or None on EOF; raises TimeoutError past `deadline`."""
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_msg(fd: int, deadline=None):
    head = _read_exact(fd, 8, deadline)
    if head is None:
        return None
    data = _read_exact(fd, int.from_bytes(head, "little"), deadline)
    return None if data is None else pickle.loads(data)


def _cuda_driver_loaded() -> bool:
    """Whether this process has mapped the CUDA driver library (after which a
    forked child cannot initialize CUDA)."""
    try:
        with open("/proc/self/maps") as f:
            return "libcuda.so" in f.read()
    except OSError:
        return False


def _serve(req_r: int, res_w: int, target) -> int:
    """The worker's loop: read a case, run it, write its result; until the
    request pipe closes. Returns the worker's exit status."""
    status = [1]

    def serve():
        # OpenMP thread pools do not survive fork (GNU libgomp can hang in the
        # child); one thread keeps the worker off them, and samples are small.
        torch.set_num_threads(1)
        tp.set_num_threads(1)
        while True:
            req = _read_msg(req_r)
            if req is None:
                break
            try:
                res = target(*req).to_json()
            except BaseException as e:
                res = {"op": req[0], "dtype": req[1], "skipped": 0, "seconds": 0.0,
                       "error": f"harness error {type(e).__name__}: {_first_line(e)}\n"
                                + traceback.format_exc()[-2000:], "samples": []}
            _write_msg(res_w, res)
        status[0] = 0

    # Serve from a new thread: its stack is short. torch's sample iterators walk
    # the caller's stack (inspect.stack, traceback.format_stack) on every sample,
    # and under pytest the forked stack is deep enough to make that the main cost.
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    t.join()
    return status[0]


def _serve_target(req_r: int, res_w: int, target: str) -> int:
    """Entry of an exec'd worker: the target named module:qualname."""
    import importlib
    module, _, name = target.partition(":")
    fn = importlib.import_module(module)
    for part in name.split("."):
        fn = getattr(fn, part)
    return _serve(req_r, res_w, fn)


class IsolatedRunner:
    """Runs cases in a forked worker process that lives across cases: a
    segfault, abort or hang in one case becomes that case's failure ("crash" /
    "timeout") and the next case gets a fresh worker.

    Why a long-lived worker rather than a fork per case: forking this ~400 MB
    process (torch + op_db) costs 30-50 ms on the 2-core CI machine, which is
    over two minutes for the ~2,700 cases, while running a typical case takes
    5-10 ms. The worker is forked once and again only after a crash."""

    def __init__(self, timeout: float = CASE_TIMEOUT_S, target=None):
        self.timeout = timeout
        self.target = target or run_case  # (key, dtype, limit, grads) -> CaseResult
        self.pid = None
        self.restarts = 0

    def _start(self):
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        if _cuda_driver_loaded():
            pid = self._exec_worker(req_r, res_w)
        else:
            pid = os.fork()
            if pid == 0:  # worker
                os.close(req_w)
                os.close(res_r)
                os._exit(_serve(req_r, res_w, self.target))
        os.close(req_r)
        os.close(res_w)
        self.pid, self.req_w, self.res_r = pid, req_w, res_r

    def _exec_worker(self, req_r: int, res_w: int) -> int:
        """The worker as a new interpreter: a child forked after the CUDA driver
        was initialized cannot use CUDA (PyTorch's lazy init in it fails with
        "initialization error"), and on a GPU host the parent has often
        initialized it (a CUDA test earlier in the same xdist worker). Slower
        to start (imports torch and the OpInfo database again), once per
        runner and per crash. The target travels as module:qualname."""
        import subprocess
        target = f"{self.target.__module__}:{self.target.__qualname__}"
        code = ("import sys, importlib; import os; sys.path[:0] = sys.argv[4].split(os.pathsep); "
                "h = importlib.import_module(sys.argv[1]); "
                "raise SystemExit(h._serve_target(int(sys.argv[2]), int(sys.argv[3]), sys.argv[5]))")
        proc = subprocess.Popen([sys.executable, "-c", code, __spec__.name, str(req_r), str(res_w),
                                 os.pathsep.join(p for p in sys.path if p), target],
                                pass_fds=(req_r, res_w), close_fds=True)
        self._proc = proc  # _stop reaps it by pid
        return proc.pid

    def _stop(self, kill: bool):
        if self.pid is None:
            return
        if kill:
            os.kill(self.pid, signal.SIGKILL)
        os.close(self.req_w)
        _, status = os.waitpid(self.pid, 0)
        os.close(self.res_r)
        if getattr(self, "_proc", None) is not None:  # reaped above: Popen must not wait again
            self._proc.returncode, self._proc = status, None
        self.pid = None
        return status

    def close(self):
        self._stop(kill=False)

    def run(self, key: str, dtype_name: str, limit=None, grads: bool = True) -> CaseResult:
        t0 = time.perf_counter()
        if self.pid is None:
            self._start()
        failure = None
        try:
            _write_msg(self.req_w, (key, dtype_name, limit, grads))
            msg = _read_msg(self.res_r, time.monotonic() + self.timeout)
        except TimeoutError:
            msg, failure = None, ("timeout", f"case ran over {self.timeout:.0f} s")
        except OSError as e:  # broken pipe: the worker died
            msg = None
        if msg is None:
            status = self._stop(kill=True)
            self.restarts += 1
            if failure is None:
                if status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) != signal.SIGKILL:
                    how = f"signal {signal.Signals(os.WTERMSIG(status)).name}"
                elif status is not None and os.WIFEXITED(status):
                    how = f"exit status {os.WEXITSTATUS(status)}"
                else:
                    how = "unknown cause"
                failure = ("crash", f"worker died ({how})")
            res = CaseResult(key, dtype_name)
            res.samples.append(SampleResult(-1, "fwd", False, *failure))
            res.seconds = time.perf_counter() - t0
            return res
        res = CaseResult.from_json(msg)
        if res.error.startswith("harness error"):
            res.samples.append(SampleResult(-1, "fwd", False, "harness error", _first_line(res.error)))
        return res


# --------------------------------------------------------------------------------------
# Expected failures


def load_xfails(path: Path = XFAILS_PATH) -> dict:
    """{"op|dtype": {"reason": class, "reasons": {class: n}, "fwd": "0-3,7", "method": "", "grad": ""}}."""
    if not path.exists():
        return {}
    with open(path) as f:
        return json.load(f)["cases"]


def case_id(key: str, dtype_name: str) -> str:
    return f"{key}|{dtype_name}"


def xfail_entry(res: CaseResult):
    """The xfails.json entry that records `res`'s failures, or None when it passes."""
    fails = res.failures()
    if not fails and not res.error:
        return None
    reasons = {}
    for s in fails:
        reasons[s.reason] = reasons.get(s.reason, 0) + 1
    if res.error and not fails:
        reasons["case error"] = 1
    top = max(sorted(reasons), key=lambda k: reasons[k])
    entry = {"reason": top, "reasons": dict(sorted(reasons.items()))}
    fwd = sorted(s.index for s in fails if s.kind == "fwd")
    grad = sorted(s.index for s in fails if s.kind == "grad")
    if -1 in fwd:
        entry["all"] = True  # crash/timeout: the whole case
    entry["fwd"] = _ranges([i for i in fwd if i >= 0])
    entry["method"] = _ranges(sorted(s.index for s in fails if s.kind == "method"))
    entry["grad"] = _ranges(grad)
    return entry


def _ranges(indices) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8" (keeps xfails.json small and diffable)."""
    out, i = [], 0
    while i < len(indices):
        j = i
        while j + 1 < len(indices) and indices[j + 1] == indices[j] + 1:
            j += 1
        out.append(str(indices[i]) if i == j else f"{indices[i]}-{indices[j]}")
        i = j + 1
    return ",".join(out)


def parse_ranges(text: str) -> list:
    out = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def known_failures(entry) -> set:
    """{(kind, index)} an xfail entry lists."""
    if entry is None:
        return set()
    return {(kind, i) for kind in ("fwd", "method", "grad") for i in parse_ranges(entry.get(kind, ""))}


def unexpected_failures(res: CaseResult, entry) -> list:
    """Failures of `res` that its xfail entry does not cover."""
    fails = res.failures()
    if entry is None:
        return fails
    if entry.get("all"):
        return []
    known = known_failures(entry)
    return [s for s in fails if (s.kind, s.index) not in known]
