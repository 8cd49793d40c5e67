"""Tensor.__repr__ in PyTorch's layout: `tensor([[ 0.1000, -1.2000]])`.

Floats get 4 decimals and a common width; they switch to scientific notation
when the nonzero finite magnitudes span more than 1000x, exceed 1e8, or (for
non-integral values) go below 1e-4. Floats that are all integral print as
`1.`. Above 1000 elements only the first and last 3 entries of each dim are
shown, around `...`. Lines wrap at 80 columns. The values come from NumPy;
the layout rules are our own code.
"""
import math

from ._lazy_numpy import np  # printing reads the values through NumPy (imported on first use)

from . import _C

PRECISION = 4
THRESHOLD = 1000
EDGEITEMS = 3
LINEWIDTH = 80
SCI_MODE = None  # None: chosen per tensor; True/False: forced


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """Like torch.set_printoptions: profile "default", "short" or "full", then
    the given fields. sci_mode=None goes back to choosing per tensor."""
    global PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH, SCI_MODE
    profiles = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, float("inf"), 3, 80)}
    if profile is not None:
        if profile not in profiles:
            raise ValueError(f"set_printoptions: unknown profile {profile!r} (expected one of {sorted(profiles)})")
        PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH = profiles[profile]
    PRECISION = PRECISION if precision is None else int(precision)
    THRESHOLD = THRESHOLD if threshold is None else threshold
    EDGEITEMS = EDGEITEMS if edgeitems is None else int(edgeitems)
    LINEWIDTH = LINEWIDTH if linewidth is None else int(linewidth)
    SCI_MODE = sci_mode

# The dtypes a value's Python kind implies (no dtype= suffix for them).
_DEFAULT_DTYPES = (_C.dtype.float32, _C.dtype.int64, _C.dtype.bool)


class _Formatter:
    """Chooses one notation and width for all printed values of a tensor."""

    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        if not floating:
            for v in values.ravel().tolist():
                self.width = max(self.width, len(str(v)))
            return
        finite = values[np.isfinite(values) & (values != 0)].astype(np.float64)
        if finite.size == 0:
            return
        mags = np.abs(finite)
        lo, hi = float(mags.min()), float(mags.max())
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        wide_range = hi / lo > 1000.0 or hi > 1.0e8
        self.sci_mode = wide_range if self.int_mode else (wide_range or lo < 1.0e-4)
        if SCI_MODE is not None:
            self.sci_mode = bool(SCI_MODE)
        for v in finite.tolist():
            if self.sci_mode:
                s = f"{v:.{PRECISION}e}"
            elif self.int_mode:
                s = f"{v:.0f}."
            else:
                s = f"{v:.{PRECISION}f}"
            self.width = max(self.width, len(s))

    def format(self, v):
        if not self.floating:
            s = str(v)
        elif self.sci_mode:
            s = f"{v:{self.width}.{PRECISION}e}"
        elif self.int_mode:
            s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            s = f"{v:.{PRECISION}f}"
        return s.rjust(self.width)


def _summarized(a):
    """The entries that will be printed (edges of each long dim), for the formatter."""
    if a.ndim == 0:
        return a
    n = a.shape[0]
    rows = list(range(EDGEITEMS)) + list(range(n - EDGEITEMS, n)) if n > 2 * EDGEITEMS else range(n)
    if a.ndim == 1:
        return a[list(rows)]
    return np.stack([_summarized(a[i]) for i in rows]) if len(rows) else a


def _vector(a, indent, summarize, fmt):
    per_line = max(1, (LINEWIDTH - indent) // (fmt.width + 2))
    vals = a.tolist()
    if summarize and len(vals) > 2 * EDGEITEMS:
        items = [fmt.format(v) for v in vals[:EDGEITEMS]] + [" ..."] + [fmt.format(v) for v in vals[-EDGEITEMS:]]
    else:
        items = [fmt.format(v) for v in vals]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    n = a.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        parts = [_nested(a[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)] + ["..."] + \
                [_nested(a[i], indent + 1, summarize, fmt) for i in range(n - EDGEITEMS, n)]
    else:
        parts = [_nested(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _values(t):
    t = t.detach()
    if t.is_cuda:
        t = t.cpu()  # printing reads the values on the host
    if t.dtype in (_C.dtype.float16, _C.dtype.bfloat16):
        t = t.float()
    # Inside a capture (print(loss) in a compiled function) numpy() is refused;
    # the capture runs on the call's values, and printing shows them.
    return t._peek_numpy() if _C._is_tracing() else t.numpy()


def _body(t, indent):
    a = _values(t)
    summarize = a.size > THRESHOLD
    fmt = _Formatter(_summarized(a) if summarize else a, t.dtype.is_floating_point)
    return _nested(a, indent, summarize, fmt)


def _with_suffixes(text, suffixes, indent):
    parts = [text]
    last_len = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last_len + len(s) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + s)
            last_len = indent + len(s)
        else:
            parts.append(", " + s)
            last_len += len(s) + 2
    return "".join(parts) + ")"


def tensor_repr(t):
    if _C._is_capture_item(t):  # `loss.item()` inside a compiled function: a float in eager
        return repr(float(_values(t).item()))
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.is_cuda:
        suffixes.append(f"device='{t.device}'")
    if t.numel() == 0:
        if t.dim() != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype != _C.dtype.float32:
            suffixes.append(f"dtype={t.dtype!r}")
        body = "[]"
    else:
        if t.dtype not in _DEFAULT_DTYPES:
            suffixes.append(f"dtype={t.dtype!r}")
        body = _body(t, indent)
    grad_fn = _C._recorded_grad_fn(t)
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn.name()}>")
    elif t._own_requires_grad():  # (in a capture, an intermediate eager gives a grad_fn has none)
        suffixes.append("requires_grad=True")
    return _with_suffixes(prefix + body, suffixes, indent)
