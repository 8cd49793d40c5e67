"""Comparing results, with tolerances that follow the rounding-error model of
Section 13.3 of the seed.

``tp.testing.assert_close(actual, expected)`` checks shapes, dtypes and values.
A fixed epsilon misjudges reductions: the error of a sum scales with the size
of its terms, not of its result, so a row whose terms cancel (condition number
kappa = sum|x| / |sum x| large) shows a large *relative* difference between two
correct implementations.  Give the summed terms (``terms=``) or an exact
float64 result (``reference=``) and the tolerance grows with the problem's
conditioning; otherwise dtype-based defaults apply (the values PyTorch's
``torch.testing.assert_close`` documents).
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from .bench import errormodel

__all__ = ["assert_close", "assert_allclose", "default_tolerances", "make_tensor", "summation_tolerance"]

# (rtol, atol) per dtype name; integers and bool compare exactly.
_DEFAULTS = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}
_EXACT = ("bool", "uint8", "int8", "int16", "int32", "int64")
# Extra standard deviations above the expected maximum over the outputs, so a
# correct result fails with negligible probability.
_Z_MARGIN = 1.0


def default_tolerances(dtype) -> Tuple[float, float]:
    """(rtol, atol) used when neither `terms` nor `reference` is given."""
    name = _dtype_name(dtype)
    if name in _EXACT:
        return 0.0, 0.0
    if name not in _DEFAULTS:
        raise ValueError(f"assert_close: no default tolerance for dtype {name}")
    return _DEFAULTS[name]


def _dtype_name(dtype) -> str:
    s = str(dtype)
    s = s.rsplit(".", 1)[-1].strip("'>")
    return {"half": "float16", "float": "float32", "double": "float64", "long": "int64", "int": "int32"}.get(s, s)


def _to_numpy(x, what: str) -> Tuple[np.ndarray, str]:
    """(float64-or-exact numpy array, dtype name) of a tensor, array or number."""
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "dtype") and hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        name = _dtype_name(x.dtype)
        try:
            if hasattr(x, "cpu"):
                x = x.cpu()
            arr = np.asarray(x.numpy())
        except Exception:  # 16-bit dtypes NumPy cannot hold: compare their float32 values
            arr = np.asarray(x.float().numpy())
        return arr, name
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"assert_close: {what} is not a tensor, array or number ({type(x).__name__})")
    return arr, arr.dtype.name


def summation_tolerance(terms, dtype="float32", ways: int = errormodel.DEFAULT_WAYS, dim: int = -1,
                        pair: bool = True, outputs: Optional[int] = None):
    """Allowed |difference| per result of a sum over `dim` of `terms` (Section 13.3):

        z * sqrt(2) * sigma_row,   sigma_row from Corollary 13.1 (u of `dtype`, n, W,
                                   the row's mean and variance, merge term included)

    sqrt(2) when both sides are rounded sums (`pair`), 1 against an exact reference;
    z = z_R + 1 with Pr[|Z| > z_R] = 1/R over the R results.  Returns (tolerance
    array of the result's shape, kappa array)."""
    t = np.moveaxis(np.asarray(terms, dtype=np.float64), dim, -1)
    n = t.shape[-1]
    rows = t.reshape(-1, n) if n else t.reshape(-1, 1)
    u = errormodel.unit_roundoff(dtype)
    means, variances = rows.mean(-1), rows.var(-1)
    sigma = np.array([errormodel.summation_error_sigma(max(n, 1), float(m), float(v), u, ways)
                      for m, v in zip(means, variances)])
    count = outputs if outputs is not None else len(rows)
    z = errormodel.max_factor(count) + _Z_MARGIN
    tol = z * (math.sqrt(2.0) if pair else 1.0) * sigma
    sums, abs_sums = rows.sum(-1), np.abs(rows).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(sums != 0, abs_sums / np.abs(sums), np.where(abs_sums == 0, 1.0, np.inf))
    shape = t.shape[:-1]
    return tol.reshape(shape), kappa.reshape(shape)


def assert_close(actual, expected, *, reference=None, terms=None, dim: int = -1, ways: Optional[int] = None,
                 rtol: Optional[float] = None, atol: Optional[float] = None, equal_nan: bool = False,
                 check_dtype: bool = True, msg: Optional[str] = None) -> None:
    """Raise AssertionError unless `actual` and `expected` agree within a tolerance.

    actual, expected: tensors (TensorPlay, PyTorch), NumPy arrays or numbers of the
    same shape (and the same dtype unless check_dtype=False).

    The allowed difference per element is ``atol + rtol * |expected| + model``:

    * rtol / atol default by dtype (float32: 1.3e-6 / 1e-5, float64: 1e-7 / 1e-7,
      float16: 1e-3 / 1e-5, bfloat16: 1.6e-2 / 1e-5; integers and bool: exact);
    * ``terms=``: the summed terms, the reduction over `dim` (results have the shape
      of `terms` without `dim`).  model = the statistical summation error of
      Section 13.3 (Corollary 13.1 with u of the dtype, n terms, W = `ways`
      accumulators, default 16, and each row's mean and variance), for the
      difference of two rounded sums and the largest of all results.  The bound
      thereby grows with the terms' magnitude, not the result's: a sum with large
      cancellation (condition number kappa = sum|x|/|sum x| large) passes when its
      difference is ordinary rounding, a planted error in a well-conditioned sum
      does not;
    * ``reference=``: the same result computed exactly (e.g. in float64).  The
      spread of `expected` around it measures the problem's conditioning without
      a model: model = (z + 1) * sqrt(2) * rms(expected - reference), z the
      expected maximum of |normal| over the elements.

    The message names the shapes or dtypes that differ, or the number of
    mismatched elements, the largest absolute and relative differences, the
    bound used there and, with `terms`, kappa of the worst row.
    """
    a, a_dtype = _to_numpy(actual, "actual")
    e, e_dtype = _to_numpy(expected, "expected")
    prefix = (msg + ": ") if msg else ""
    if a.shape != e.shape:
        raise AssertionError(f"{prefix}assert_close: shape mismatch: actual {tuple(a.shape)} vs expected "
                             f"{tuple(e.shape)}")
    if check_dtype and a_dtype != e_dtype:
        raise AssertionError(f"{prefix}assert_close: dtype mismatch: actual {a_dtype} vs expected {e_dtype} "
                             "(pass check_dtype=False to compare the values anyway)")
    dtype = a_dtype if a_dtype not in _EXACT else e_dtype
    d_rtol, d_atol = default_tolerances(dtype) if (dtype in _DEFAULTS or dtype in _EXACT) else (0.0, 0.0)
    rtol = d_rtol if rtol is None else float(rtol)
    atol = d_atol if atol is None else float(atol)

    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    model = np.zeros(a.shape)
    detail = ""
    kappa = None
    if terms is not None:
        t_arr, _ = _to_numpy(terms, "terms")
        t_arr = np.asarray(t_arr, dtype=np.float64)
        if t_arr.ndim == 0:
            raise AssertionError(f"{prefix}assert_close: terms must have the reduced dimension {dim}")
        expect_shape = tuple(np.delete(np.array(t_arr.shape), dim % t_arr.ndim))
        if expect_shape != tuple(a.shape):
            raise AssertionError(f"{prefix}assert_close: terms of shape {tuple(t_arr.shape)} reduced over dim {dim} "
                                 f"give results of shape {expect_shape}, but actual has shape {tuple(a.shape)}")
        w = errormodel.DEFAULT_WAYS if ways is None else int(ways)
        fdt = dtype if dtype in _DEFAULTS else "float32"
        model, kappa = summation_tolerance(t_arr, fdt, w, dim, pair=True, outputs=max(a.size, 1))
        n = t_arr.shape[dim]
        detail = (f"Section 13.3 model: u = {errormodel.unit_roundoff(fdt):.3g} ({fdt}), n = {n}, W = {w}, "
                  f"z = {errormodel.max_factor(max(a.size, 1)) + _Z_MARGIN:.2f}")
    elif reference is not None:
        r, _ = _to_numpy(reference, "reference")
        r = np.asarray(r, dtype=np.float64)
        if r.shape != a.shape:
            raise AssertionError(f"{prefix}assert_close: reference shape {tuple(r.shape)} differs from "
                                 f"actual {tuple(a.shape)}")
        dev = (e64 - r)[np.isfinite(e64 - r)]
        rms = float(np.sqrt(np.mean(dev**2))) if dev.size else 0.0
        z = errormodel.max_factor(max(a.size, 1)) + _Z_MARGIN
        model = np.full(a.shape, z * math.sqrt(2.0) * rms)
        detail = f"reference model: rms(expected - reference) = {rms:.3g}, z = {z:.2f}"

    bound = atol + rtol * np.abs(e64) + model
    with np.errstate(invalid="ignore"):
        diff = np.abs(a64 - e64)
    nan_a, nan_e = np.isnan(a64), np.isnan(e64)
    same_inf = np.isinf(a64) & np.isinf(e64) & (np.sign(a64) == np.sign(e64))
    with np.errstate(invalid="ignore"):
        # non-finite values must match exactly: |inf - (-inf)| <= rtol * inf would pass
        ok = (np.isfinite(a64) & np.isfinite(e64) & (diff <= bound)) | same_inf
    if equal_nan:
        ok |= nan_a & nan_e
    if ok.all():
        return
    bad = ~ok
    fin = np.where(bad & np.isfinite(diff), diff, -1.0)
    worst = np.unravel_index(int(np.argmax(fin)), a.shape) if a.ndim else ()
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(np.abs(e64) > 0, diff / np.abs(e64), np.where(diff > 0, np.inf, 0.0))
    lines = [f"{prefix}assert_close: {int(bad.sum())} of {a.size} elements differ beyond the tolerance"
             + (f" (dtype {dtype})" if dtype else "")]
    if (nan_a ^ nan_e).any() or (not equal_nan and (nan_a & nan_e).any()):
        lines.append(f"  NaN in {int(nan_a.sum())} actual / {int(nan_e.sum())} expected elements"
                     + ("" if equal_nan else " (equal_nan=False)"))
    w_idx = tuple(int(i) for i in worst)
    lines.append(f"  max abs diff {float(diff[worst]):.6g} at index {w_idx}: actual {float(a64[worst]):.9g}, "
                 f"expected {float(e64[worst]):.9g}")
    lines.append(f"  max rel diff {float(np.max(np.where(bad & np.isfinite(rel), rel, 0.0))):.6g}")
    lines.append(f"  bound used there {float(bound[worst]):.6g} = atol {atol:.3g} + rtol {rtol:.3g} * |expected| "
                 f"+ model {float(model[worst]):.3g}")
    if detail:
        lines.append("  " + detail)
    if kappa is not None:
        k_worst = float(np.max(kappa)) if kappa.size else 1.0
        lines.append(f"  condition number kappa = sum|x|/|sum x|: {float(kappa[worst]):.3g} at that index, "
                     f"largest {k_worst:.3g}")
    raise AssertionError("\n".join(lines))


# -- torch.testing's other helpers ---------------------------------------------------------------
def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A random tensor for tests, as torch.testing.make_tensor: uniform in [low, high)
    (floats default [-9, 9), integers [-9, 10), uint8 [0, 10), bool True/False);
    noncontiguous=True gives a strided view, exclude_zero=True replaces zeros (by
    the dtype's tiny for floats, 1 for integers)."""
    import tensorplay as tp
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"make_tensor: sizes must be non-negative, got {shape}")
    if requires_grad and not dtype.is_floating_point:
        raise ValueError(f"make_tensor: requires_grad=True needs a floating-point dtype, got {dtype}")
    name = _dtype_name(dtype)
    if low is not None and high is not None and low > high:
        raise ValueError(f"make_tensor: low ({low}) must not be greater than high ({high})")
    n = int(np.prod(shape)) if shape else 1
    # noncontiguous: twice as many elements along the last dim, every other one taken
    full = shape[:-1] + (2 * shape[-1],) if noncontiguous and shape and n > 1 else shape
    size = int(np.prod(full)) if full else 1
    if name == "bool":
        t = tp.randint(0, 2, full if full else [], dtype=tp.int64).to(tp.bool)
    elif name in _EXACT:
        info = np.iinfo(name)
        lo = int(math.ceil(low)) if low is not None else (0 if name == "uint8" else -9)
        hi = int(math.ceil(high)) if high is not None else 10
        lo, hi = max(lo, int(info.min)), min(hi, int(info.max) + 1)
        if hi <= lo:  # low == high: that one value
            hi = lo + 1
        t = tp.randint(lo, hi, full if full else [], dtype=tp.int64).to(dtype)
    else:
        lo = -9.0 if low is None else float(low)
        hi = 9.0 if high is None else float(high)
        t = (tp.rand(size, dtype=tp.float64) * (hi - lo) + lo).reshape(list(full)).to(dtype)
    if exclude_zero:
        repl = tp.finfo(dtype).tiny if dtype.is_floating_point else 1
        if name == "bool":
            t = tp.ones_like(t)
        else:
            t = tp.where(t == 0, tp.full_like(t, repl), t)
    if noncontiguous and shape and n > 1:
        t = t[..., ::2]
    if device is not None:
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """The deprecated torch.testing.assert_allclose: assert_close without the dtype
    check, NaNs equal by default."""
    import warnings
    warnings.warn("tensorplay.testing.assert_allclose() is deprecated; use tensorplay.testing.assert_close()",
                  FutureWarning, stacklevel=2)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=False, msg=msg or None)
