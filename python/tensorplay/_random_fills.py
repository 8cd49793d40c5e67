"""tp.normal (all four mean/std overloads) and the in-place random fills PyTorch has beyond
uniform_/normal_: exponential_, cauchy_, log_normal_, geometric_, random_.

Every draw goes through an existing random operator (normal_, uniform_, randint) and is then
transformed, so under tp.compile it becomes a philox_random draw and compiled values equal
eager's bit for bit."""
import math
import sys

from . import _C
from ._C import Tensor
from ._broadcasting import broadcast_shapes
from ._dtype_info import _is_float, finfo, iinfo


def _tp():
    return sys.modules[__package__]


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


def install():
    tp = _tp()
    if not hasattr(tp, "normal"):
        tp.normal = normal
    for name in ("exponential_", "cauchy_", "log_normal_", "geometric_", "random_"):
        if not hasattr(Tensor, name):
            setattr(Tensor, name, globals()[name])
