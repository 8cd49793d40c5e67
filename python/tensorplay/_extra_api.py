"""PyTorch names that user code reaches for and tensorplay lacked, as compositions of existing
operators: tp.normal (all four mean/std overloads), the remaining in-place random fills
(exponential_, cauchy_, log_normal_, geometric_, random_), finfo/iinfo, the math constants,
broadcast_tensors/broadcast_shapes, the real-only complex helpers (conj, resolve_conj, ...),
and the in-place `_` forms of existing operators.

Random draws go through the existing random operators (normal_, uniform_, randint), so under
tp.compile they become philox_random draws and compiled values equal eager's bit for bit."""
import math
import sys

from . import _C
from ._C import Tensor


def _tp():
    return sys.modules[__package__]


def _is_float(dtype):
    tp = _tp()
    return dtype in (tp.float16, tp.bfloat16, tp.float32, tp.float64)


# ---------------------------------------------------------------- tp.normal
class _ZeroGradAffine:
    """eps * std + mean whose gradient with respect to mean and std is zero, as PyTorch
    defines normal()'s derivative (the draw is not reparameterized; distributions' rsample is)."""
    _fn = None

    @classmethod
    def apply(cls, eps, mean, std):
        if cls._fn is None:
            tp = _tp()

            class _Fn(tp.autograd.Function):
                @staticmethod
                def forward(ctx, eps, mean, std):
                    ctx.shapes = (tuple(mean.shape) if isinstance(mean, Tensor) else None,
                                  tuple(std.shape) if isinstance(std, Tensor) else None)
                    ctx.dtypes = (mean.dtype if isinstance(mean, Tensor) else None,
                                  std.dtype if isinstance(std, Tensor) else None)
                    return eps * std + mean

                @staticmethod
                def backward(ctx, grad):
                    outs = [None]
                    for shape, dtype in zip(ctx.shapes, ctx.dtypes):
                        outs.append(None if shape is None else _tp().zeros(shape, dtype=dtype))
                    return tuple(outs)

            cls._fn = _Fn
        return cls._fn.apply(eps, mean, std)


def _check_std_scalar(std):
    if not std >= 0.0:
        raise RuntimeError(f"normal: expects std >= 0.0, but found std {std}")


def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """Samples of N(mean, std**2). Overloads as PyTorch's:
    normal(Tensor mean, Tensor std), normal(Tensor mean, float std=1), normal(float mean, Tensor std)
    draw one sample per element of the broadcast mean/std (gradients with respect to mean and std
    are zero, as PyTorch's); normal(float mean, float std, size, *, dtype, device, requires_grad)
    fills a new tensor of `size`. All take generator= and out=."""
    tp = _tp()
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise TypeError("normal: with float mean and std a size is required: normal(mean, std, size)")
        if isinstance(mean, bool) or not isinstance(mean, (int, float)) or \
                isinstance(std, bool) or not isinstance(std, (int, float)):
            raise TypeError(f"normal: mean and std must be tensors or floats, got {type(mean).__name__} and "
                            f"{type(std).__name__}")
        _check_std_scalar(std)
        if isinstance(size, int):
            size = (size,)
        size = tuple(size)
        if out is not None:
            if tuple(out.shape) != size:
                raise RuntimeError(f"normal: out has shape {tuple(out.shape)}, expected {size}")
            if not _is_float(out.dtype):
                raise RuntimeError(f"normal: out must have a floating point dtype, got {out.dtype}")
            return out.normal_(float(mean), float(std), generator=generator)
        dt = dtype if dtype is not None else tp.get_default_dtype()
        if not _is_float(dt):
            raise RuntimeError(f"normal: expects a floating point dtype, got {dt}")
        kw = {} if device is None else {"device": device}
        res = tp.empty(size, dtype=dt, **kw).normal_(float(mean), float(std), generator=generator)
        if requires_grad:
            res.requires_grad_(True)
        return res
    if size is not None:
        raise TypeError("normal: size= is only taken with float mean and std (the tensor forms use their shape)")
    if dtype is not None or requires_grad or device is not None:
        raise TypeError("normal: dtype, device and requires_grad are only taken with float mean and std")
    for name, v, is_t in (("mean", mean, mt), ("std", std, st)):
        if is_t:
            if not _is_float(v.dtype):
                raise RuntimeError(f"normal: expects a floating point {name}, got {v.dtype}")
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"normal: {name} must be a tensor or a float, got {type(v).__name__}")
    if st:
        if not _C._is_tracing() and std.numel() > 0 and not bool((std >= 0).all().item()):
            raise RuntimeError("normal: expects all elements of std >= 0.0")
    else:
        _check_std_scalar(std)
    # The result has mean's dtype (std's when mean is a float) and the broadcast shape.
    ref = mean if mt else std
    shape = tuple(ref.shape)
    if mt and st:
        try:
            shape = tuple(broadcast_shapes(tuple(mean.shape), tuple(std.shape)))
        except RuntimeError:
            raise RuntimeError(f"normal: mean of shape {tuple(mean.shape)} and std of shape {tuple(std.shape)} "
                               f"do not broadcast") from None
    eps = tp.empty(shape, dtype=ref.dtype, device=ref.device).normal_(0.0, 1.0, generator=generator)
    m = mean.to(ref.dtype) if mt else float(mean)
    s = std.to(ref.dtype) if st else float(std)
    needs_grad = tp.is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in (m, s))
    res = _ZeroGradAffine.apply(eps, m, s) if needs_grad else eps * s + m
    if out is not None:
        if tuple(out.shape) != tuple(res.shape):
            raise RuntimeError(f"normal: out has shape {tuple(out.shape)}, expected {tuple(res.shape)}")
        return out.copy_(res)
    return res


# ----------------------------------------------------- in-place random fills
def _float_self(name, self):
    if not _is_float(self.dtype):
        raise RuntimeError(f"{name}: expects a floating point tensor, got {self.dtype}")


def _uniform(self, generator, dtype=None):
    tp = _tp()
    return tp.empty(tuple(self.shape), dtype=dtype or self.dtype, device=self.device).uniform_(
        0.0, 1.0, generator=generator)


def exponential_(self, lambd=1.0, *, generator=None):
    """Fills self with Exp(lambd) samples: -log(1 - u) / lambd for u ~ U[0, 1)."""
    _float_self("exponential_", self)
    if not lambd > 0.0:
        raise RuntimeError(f"exponential_: expects lambd > 0.0, but found lambd={lambd}")
    u = _uniform(self, generator)
    return self.copy_(u.neg().log1p().mul(-1.0 / lambd))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fills self with Cauchy(median, sigma) samples: median + sigma * tan(pi * (u - 1/2))."""
    _float_self("cauchy_", self)
    if not sigma > 0.0:
        raise RuntimeError(f"cauchy_: expects sigma > 0.0, but found sigma={sigma}")
    u = _uniform(self, generator)
    return self.copy_(u.sub(0.5).mul(math.pi).tan().mul(sigma).add(median))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fills self with exp(N(mean, std**2)) samples."""
    _float_self("log_normal_", self)
    if not std > 0.0:
        raise RuntimeError(f"log_normal_: expects std > 0.0, but found std={std}")
    return self.normal_(mean, std, generator=generator).exp_()


def geometric_(self, p, *, generator=None):
    """Fills self with Geometric(p) samples (trials until the first success, >= 1):
    ceil(log(1 - u) / log(1 - p)) computed in float64."""
    if not 0.0 < p < 1.0:
        raise RuntimeError(f"geometric_: expects p to be in (0, 1), but got p={p}")
    tp = _tp()
    u = _uniform(self, generator, tp.float64)
    k = u.neg().log1p().div(math.log1p(-p)).ceil().clamp_(min=1.0)
    return self.copy_(k)


def _random_top(dtype):
    tp = _tp()
    if dtype == tp.bool:
        return 2
    if _is_float(dtype):
        return (1 << (finfo(dtype)._digits + 1)) + 1  # every integer up to 2**digits is exact
    return iinfo(dtype).max  # [0, max): PyTorch's range ends at max inclusive for narrow ints


def random_(self, from_=0, to=None, *, generator=None, **kwargs):
    """Fills self with integers drawn uniformly: random_() over [0, 2**mantissa] (floats) or
    [0, max] (integers), random_(to) over [0, to), random_(from, to) over [from, to)."""
    tp = _tp()
    if "from" in kwargs:
        from_ = kwargs.pop("from")
    if kwargs:
        raise TypeError(f"random_: unexpected keyword arguments {sorted(kwargs)}")
    if to is None and from_ != 0:
        from_, to = 0, from_
    if to is None:
        to = _random_top(self.dtype)
    if not from_ < to:
        raise RuntimeError(f"random_: expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    if not _is_float(self.dtype) and self.dtype != tp.bool:
        info = iinfo(self.dtype)
        if from_ < info.min or to - 1 > info.max:
            raise RuntimeError(f"random_: range [{from_}, {to}) does not fit {self.dtype}")
    draw = tp.randint(int(from_), int(to), tuple(self.shape), generator=generator, dtype=tp.int64,
                      device=self.device)
    return self.copy_(draw)


# --------------------------------------------------------------- finfo/iinfo
class finfo:
    """Machine limits of a floating point dtype (PyTorch's torch.finfo fields)."""
    _TABLE = {
        # bits, eps, max, tiny (smallest normal), smallest subnormal, resolution, mantissa bits
        "float16": (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 2.0 ** -24, 1e-3, 10),
        "bfloat16": (16, 2.0 ** -7, 3.3895313892515355e38, 1.1754943508222875e-38, 9.183549615799121e-41, 0.01, 7),
        "float32": (32, 2.0 ** -23, 3.4028234663852886e38, 1.1754943508222875e-38, 1.401298464324817e-45, 1e-6, 23),
        "float64": (64, 2.0 ** -52, 1.7976931348623157e308, 2.2250738585072014e-308, 5e-324, 1e-15, 52),
    }

    def __init__(self, type=None):  # noqa: A002
        tp = _tp()
        if type is None:
            type = tp.get_default_dtype()  # noqa: A001
        name = str(type).split(".")[-1]
        if name not in self._TABLE:
            raise TypeError(f"finfo: expects a floating point dtype, got {type}")
        self.dtype = name
        (self.bits, self.eps, self.max, self.tiny, self.smallest_subnormal, self.resolution,
         self._digits) = self._TABLE[name]
        self.min = -self.max
        self.smallest_normal = self.tiny

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype (PyTorch's torch.iinfo fields: bits, min, max, dtype)."""
    _TABLE = {"uint8": (8, 0, 255), "int8": (8, -128, 127), "int16": (16, -32768, 32767),
              "int32": (32, -2 ** 31, 2 ** 31 - 1), "int64": (64, -2 ** 63, 2 ** 63 - 1), "bool": (8, 0, 1)}

    def __init__(self, type):  # noqa: A002
        name = str(type).split(".")[-1]
        if name not in self._TABLE or name == "bool":
            raise TypeError(f"iinfo: expects an integer dtype, got {type}")
        self.dtype = name
        self.bits, self.min, self.max = self._TABLE[name]

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


# ------------------------------------------------------------- broadcasting
def broadcast_shapes(*shapes):
    """The shape all of `shapes` broadcast to (ints count as 1-d shapes), checked as PyTorch does."""
    out = []
    for s in shapes:
        s = (s,) if isinstance(s, int) else tuple(s)
        for i, d in enumerate(reversed(s)):
            if d < 0:
                raise RuntimeError(f"broadcast_shapes: negative size {d} in shape {s}")
            if i == len(out):
                out.insert(0, d)
                continue
            cur = out[len(out) - 1 - i]
            if cur == 1:
                out[len(out) - 1 - i] = d
            elif d != 1 and d != cur:
                raise RuntimeError(f"broadcast_shapes: shape mismatch: size {d} cannot broadcast against {cur} "
                                   f"(shapes {[tuple(x) if not isinstance(x, int) else (x,) for x in shapes]})")
    return _tp().Size(out) if hasattr(_tp(), "Size") else tuple(out)


def broadcast_tensors(*tensors):
    """Views of `tensors` expanded to their common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"broadcast_tensors: expects tensors, got {type(t).__name__}")
    shape = tuple(broadcast_shapes(*[tuple(t.shape) for t in tensors]))
    return tuple(t.expand(shape) for t in tensors)


# ------------------------------------------------ real-only complex helpers
def conj(input):
    """The conjugate; tensorplay has no complex dtypes, so the tensor itself (as PyTorch's view)."""
    return input


def _false(input):
    return False


def is_complex(input):
    return False


def is_signed(input):
    tp = _tp()
    return input.dtype not in (tp.uint8, tp.bool)


# ---------------------------------------------------------- in-place forms
def _inplace(base):
    def method(self, *args, **kwargs):
        tp = _tp()
        fn = getattr(tp, base, None) or getattr(tp.special, base)
        res = fn(self, *args, **kwargs)
        if tuple(res.shape) != tuple(self.shape):
            raise RuntimeError(f"{base}_: result of shape {tuple(res.shape)} does not match the in-place "
                               f"tensor's shape {tuple(self.shape)}")
        if res.dtype != self.dtype and not tp.can_cast(res.dtype, self.dtype):
            raise RuntimeError(f"{base}_: result type {res.dtype} can't be cast to the desired output type "
                               f"{self.dtype}")
        return self.copy_(res)
    method.__name__ = base + "_"
    method.__doc__ = f"In-place {base}: self = {base}(self, ...)."
    return method


_INPLACE = ("addmm addbmm baddbmm addmv addr cumsum cumprod lgamma digamma i0 sinc xlogy float_power copysign "
            "heaviside sgn rad2deg deg2rad lcm gcd ldexp logit").split()


def polygamma_method(self, n):
    return _tp().polygamma(n, self)


def polygamma_(self, n):
    return self.copy_(_tp().polygamma(n, self))


def mvlgamma(input, p):
    """Multivariate log-gamma of dimension p: sum_{i<p} lgamma(x - i/2) + p(p-1)/4 log(pi)."""
    tp = _tp()
    if not isinstance(p, int) or p < 1:
        raise RuntimeError(f"mvlgamma: p has to be greater than or equal to 1, got {p}")
    if not _is_float(input.dtype):
        input = input.to(tp.get_default_dtype())
    if not _C._is_tracing() and input.numel() > 0 and not bool((input > (p - 1) / 2).all().item()):
        raise RuntimeError(f"mvlgamma: all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    offs = tp.arange(p, dtype=input.dtype, device=input.device) * -0.5
    return tp.lgamma(input.unsqueeze(-1) + offs).sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


def sum_to_size(self, *size):
    """self summed over the dims that `size` broadcasts (the reduction of a broadcast)."""
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    size = tuple(size)
    shape = tuple(self.shape)
    try:
        ok = tuple(broadcast_shapes(size, shape)) == shape and len(size) <= len(shape)
    except RuntimeError:
        ok = False
    if not ok:
        raise RuntimeError(f"sum_to_size: size {size} is not expandable to the tensor's size {shape}")
    lead = len(shape) - len(size)
    if size == shape and len(shape) > 0:
        return self  # nothing to reduce: self, in its dtype
    if not self.is_floating_point():
        self = self.to(_tp().int64)  # integer sums are int64 (a 0-d one too), as PyTorch's
    out = self.sum(tuple(range(lead))) if lead else self
    dims = tuple(i for i, s in enumerate(size) if s == 1 and out.shape[i] != 1)
    if dims:
        out = out.sum(dims, keepdim=True)
    return out


# ---------------------------------------------------------- matmul precision
_MATMUL_PRECISION = ["highest"]


def set_float32_matmul_precision(precision):
    """'highest' (full float32 GEMMs), 'high' or 'medium' (TF32 allowed on CUDA: the setting of
    tp.backends.cuda.matmul.allow_tf32). CPU GEMMs are float32 in every case."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got {precision!r}")
    _MATMUL_PRECISION[0] = precision
    _tp().backends.cuda.matmul.allow_tf32 = precision != "highest"


def get_float32_matmul_precision():
    if _MATMUL_PRECISION[0] == "highest" and _tp().backends.cuda.matmul.allow_tf32:
        return "high"
    return _MATMUL_PRECISION[0]


# ------------------------------------------------------------ window functions
def _window(name, window_length, periodic, dtype, device, requires_grad):
    tp = _tp()
    if not isinstance(window_length, int) or isinstance(window_length, bool) or window_length < 0:
        raise RuntimeError(f"{name}: requires a non-negative integer window_length, got {window_length!r}")
    dtype = dtype if dtype is not None else tp.get_default_dtype()
    if not _is_float(dtype):
        raise RuntimeError(f"{name}: expects a floating point dtype, got {dtype}")
    kw = {} if device is None else {"device": device}
    if window_length <= 1:
        return tp.ones(window_length, dtype=dtype, **kw).requires_grad_(requires_grad)
    n = window_length + 1 if periodic else window_length
    k = tp.arange(window_length, dtype=tp.float64, **kw)
    return k, n


def _finish(w, dtype, requires_grad):
    tp = _tp()
    w = w.to(dtype if dtype is not None else tp.get_default_dtype())
    return w.requires_grad_(True) if requires_grad else w


def _cosine_window(name, coeffs):
    def window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
               requires_grad=False):
        r = _window(name, window_length, periodic, dtype, device, requires_grad)
        if not isinstance(r, tuple):
            return r
        k, n = r
        w = k * 0.0 + coeffs[0]
        for j, c in enumerate(coeffs[1:], 1):
            w = w + ((-1) ** j) * c * (k * (2 * math.pi * j / (n - 1))).cos()
        return _finish(w, dtype, requires_grad)
    window.__name__ = name
    window.__doc__ = (f"The {name.split('_')[0]} window of window_length points (periodic: one period of an "
                      f"N+1-point window, for spectral analysis).")
    return window


hann_window = _cosine_window("hann_window", (0.5, 0.5))
blackman_window = _cosine_window("blackman_window", (0.42, 0.5, 0.08))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   pin_memory=False, requires_grad=False):
    """alpha - beta * cos(2 pi k / (N - 1)) (N = window_length + 1 when periodic)."""
    r = _window("hamming_window", window_length, periodic, dtype, device, requires_grad)
    if not isinstance(r, tuple):
        return r
    k, n = r
    return _finish(alpha - beta * (k * (2 * math.pi / (n - 1))).cos(), dtype, requires_grad)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """The triangular window 1 - |2k / (N - 1) - 1|."""
    r = _window("bartlett_window", window_length, periodic, dtype, device, requires_grad)
    if not isinstance(r, tuple):
        return r
    k, n = r
    return _finish(1.0 - (k * (2.0 / (n - 1)) - 1.0).abs(), dtype, requires_grad)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  pin_memory=False, requires_grad=False):
    """I0(beta * sqrt(1 - (2k / (N - 1) - 1)**2)) / I0(beta)."""
    r = _window("kaiser_window", window_length, periodic, dtype, device, requires_grad)
    if not isinstance(r, tuple):
        return r
    k, n = r
    tp = _tp()
    x = k * (2.0 / (n - 1)) - 1.0
    w = tp.i0((1.0 - x * x).clamp(min=0.0).sqrt() * beta) / tp.i0(tp.tensor(float(beta), dtype=tp.float64))
    return _finish(w, dtype, requires_grad)


def install():
    tp = _tp()
    for name in ("set_float32_matmul_precision", "get_float32_matmul_precision", "hann_window", "hamming_window",
                 "blackman_window", "bartlett_window", "kaiser_window"):
        if not hasattr(tp, name):
            setattr(tp, name, globals()[name])
    for name in ("normal", "finfo", "iinfo", "broadcast_shapes", "broadcast_tensors", "conj", "is_complex",
                 "is_signed", "mvlgamma"):
        if not hasattr(tp, name):
            setattr(tp, name, globals()[name])
    tp.resolve_conj = conj
    tp.resolve_neg = conj
    tp.conj_physical = conj
    tp.is_conj = _false
    tp.is_neg = _false
    tp.pi, tp.e, tp.inf, tp.nan, tp.newaxis = math.pi, math.e, math.inf, math.nan, None
    if not hasattr(tp, "sinc"):
        tp.sinc = tp.special.sinc
    for name in ("exponential_", "cauchy_", "log_normal_", "geometric_", "random_", "sum_to_size", "mvlgamma"):
        if not hasattr(Tensor, name):
            setattr(Tensor, name, globals()[name])
    for base in _INPLACE:
        if not hasattr(Tensor, base + "_"):
            setattr(Tensor, base + "_", _inplace(base))
    # the in-place functions PyTorch also has at top level (torch.xlogy_(x, y), ...)
    for name in ("addmv_", "i0_", "sinc_", "xlogy_", "rad2deg_", "deg2rad_", "lcm_", "gcd_", "ldexp_"):
        if not hasattr(tp, name):
            setattr(tp, name, getattr(Tensor, name))
    if not hasattr(Tensor, "sinc"):
        Tensor.sinc = _sinc_method
    if not hasattr(Tensor, "polygamma"):
        Tensor.polygamma = polygamma_method
        Tensor.polygamma_ = polygamma_
    Tensor.mvlgamma_ = lambda self, p: self.copy_(mvlgamma(self, p))
    Tensor.conj = conj
    Tensor.resolve_conj = conj
    Tensor.resolve_neg = conj
    Tensor.conj_physical = conj
    Tensor.is_conj = _false
    Tensor.is_neg = _false
    Tensor.is_complex = _false
    Tensor.is_signed = is_signed
    Tensor.is_same_size = lambda self, other: tuple(self.shape) == tuple(other.shape)
    Tensor.nbytes = property(lambda self: self.numel() * self.element_size())
    Tensor.itemsize = property(lambda self: self.element_size())
    Tensor.adjoint = lambda self: self.transpose(-2, -1)
    Tensor.H = property(lambda self: self.t() if self.dim() in (0, 2) else _raise_H(self))


def _sinc_method(self):
    """sin(pi x) / (pi x), computed in float32 for 16-bit inputs (as PyTorch's opmath)."""
    tp = _tp()
    if self.dtype in (tp.float16, tp.bfloat16):
        return tp.special.sinc(self.float()).to(self.dtype)
    return tp.special.sinc(self)


def _raise_H(self):
    raise RuntimeError(f"Tensor.H: expects a 2-D tensor (use mH for batches), got {self.dim()}-D")
