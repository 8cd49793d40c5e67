"""More of tensorplay.nn.functional: shrink/threshold activations, PReLU, channel dropout,
pixel (un)shuffle, pairwise distance and the embedding / ranking / likelihood losses.

All are compositions of registered operators (autograd and tp.compile see ordinary ops);
each follows PyTorch's definition, including its edge conventions (the epsilons inside
pairwise_distance and cosine_embedding_loss, the variance clamp of gaussian_nll_loss that
passes the gradient through, hinge_embedding_loss's treatment of labels other than +-1).
Re-exported by functional.py.
"""
import math
import warnings

from .._lazy_numpy import np as _np

import tensorplay as _tp
from ..amp.autocast_mode import _autocast_composite
from .functional import (_check_reduction, _maybe_inplace, _names_errors, _op, _reduce, _reduction,
                         _user_stacklevel, logsigmoid, softplus)

__all__ = ["threshold", "hardshrink", "softshrink", "tanhshrink", "prelu", "dropout1d", "dropout2d", "pixel_shuffle",
           "pixel_unshuffle", "pairwise_distance", "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
           "multilabel_soft_margin_loss", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear",
           "dropout3d", "alpha_dropout", "rrelu", "gumbel_softmax", "adaptive_max_pool1d", "adaptive_max_pool2d"]


# ---------------------------------------------------------------- activations
def threshold(input, threshold, value, inplace=False):
    """input where input > threshold, else value."""
    return _maybe_inplace(input, lambda x: _tp.where(x > threshold, x, value), inplace)


def hardshrink(input, lambd=0.5):
    return _tp.where(input.abs() > lambd, input, 0.0)


def softshrink(input, lambd=0.5):
    if lambd < 0:
        raise ValueError(f"softshrink: lambda must be greater or equal to 0, but found to be {lambd}")
    return _tp.where(input > lambd, input - lambd, _tp.where(input < -lambd, input + lambd, 0.0))


def tanhshrink(input):
    return input - _tp.tanh(input)


@_names_errors
@_autocast_composite("prelu")
def prelu(input, weight):
    """x for x > 0, weight * x otherwise (so the gradient at 0 is the weight, as PyTorch's); weight has one
    value or one per channel (dim 1)."""
    n = weight.numel()
    if n == 1:
        weight = weight.reshape([])  # a single slope broadcasts as a number (a 0-d input stays 0-d)
    else:
        channels = input.shape[1] if input.dim() >= 2 else 1
        if n != channels:
            raise ValueError(f"prelu: mismatch of parameter numbers and input channel size: the weight has {n} "
                             f"values but the input of shape {tuple(input.shape)} has {channels} channels")
        weight = weight.reshape([n] + [1] * (input.dim() - 2))
    return _tp.where(input > 0, input, weight * input)


# ---------------------------------------------------------------- channel dropout
def _channel_dropout(name, input, p, training, inplace, batched_dim):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.dim() not in (batched_dim - 1, batched_dim):
        raise ValueError(f"{name}: Expected {batched_dim - 1}D or {batched_dim}D input, but received a "
                         f"{input.dim()}D input of shape {tuple(input.shape)}")
    if not training or p == 0.0:
        return input
    # One draw per (sample, channel): the leading dims of the input, ones elsewhere.
    lead = 2 if input.dim() == batched_dim else 1
    shape = list(input.shape[:lead]) + [1] * (input.dim() - lead)
    if p == 1.0:
        mask = input.new_zeros(shape)  # on input's device
    else:
        mask = input.new_empty(shape).bernoulli_(1 - p) / (1 - p)
    return _maybe_inplace(input, lambda x: x * mask, inplace)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, L) or (C, L) input with probability p."""
    return _channel_dropout("dropout1d", input, p, training, inplace, 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, H, W) input with probability p. A 3-D input is taken as
    (N, C, L) and warned about, as PyTorch does (its meaning is ambiguous)."""
    if input.dim() not in (3, 4):
        warnings.warn(f"dropout2d: expects a 3-D or 4-D input (channels, two spatial dims, optional batch); a "
                      f"{input.dim()}-D input gets whole-channel dropout over dim 1, a use PyTorch deprecates "
                      "(F.dropout drops single elements).", stacklevel=_user_stacklevel())
        return _channel_dropout("dropout2d", input, p, training, inplace, max(input.dim(), 2))
    if input.dim() == 3:
        warnings.warn("dropout2d: a 3-D input is read as (N, C, L) and whole channels of dim 1 are dropped; "
                      "PyTorch plans to read it as an unbatched (C, H, W) instead. Call dropout1d to keep this "
                      "behaviour without the warning.", stacklevel=_user_stacklevel())
        return _channel_dropout("dropout2d", input, p, training, inplace, 3)
    return _channel_dropout("dropout2d", input, p, training, inplace, 4)


# ---------------------------------------------------------------- pixel shuffle
@_names_errors
def pixel_shuffle(input, upscale_factor):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    r = int(upscale_factor)
    if input.dim() < 3:
        raise ValueError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                         f"{input.dim()} dimension(s)")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ValueError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                         f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(lead + [c // (r * r), r, r, h, w])
    x = x.permute(list(range(n)) + [n, n + 3, n + 1, n + 4, n + 2])
    return x.reshape(lead + [c // (r * r), h * r, w * r])


@_names_errors
def pixel_unshuffle(input, downscale_factor):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    r = int(downscale_factor)
    if input.dim() < 3:
        raise ValueError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                         f"{input.dim()} dimension(s)")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise ValueError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but got "
                         f"input of shape {tuple(input.shape)} and downscale_factor={r}")
    n = len(lead)
    x = input.reshape(lead + [c, h // r, r, w // r, r])
    x = x.permute(list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3])
    return x.reshape(lead + [c * r * r, h // r, w // r])


# ---------------------------------------------------------------- distances and losses
def _clamp0(x):
    # clamp_min, not relu: at exactly 0 PyTorch's losses pass the gradient (clamp's x >= min).
    return _op("clamp_min")(x, 0.0)


@_names_errors
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dimension (eps keeps the norm differentiable at 0)."""
    return _op("norm")(x1 - x2 + eps, p, -1, keepdim)


@_names_errors
@_autocast_composite("margin_ranking_loss")
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("margin_ranking_loss", reduction)
    if not (input1.dim() == input2.dim() == target.dim()):
        raise ValueError(f"margin_ranking_loss: All input tensors should have same dimension but got sizes: "
                         f"input1: {tuple(input1.shape)}, input2: {tuple(input2.shape)}, "
                         f"target: {tuple(target.shape)}")
    return _reduce(_clamp0(-target * (input1 - input2) + margin), reduction)


@_names_errors
@_autocast_composite("hinge_embedding_loss")
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1 (other labels get both terms)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("hinge_embedding_loss", reduction)
    below = _tp.where(target != 1, _clamp0(margin - input), 0.0)
    above = _tp.where(target != -1, input, 0.0)
    return _reduce(below + above, reduction)


@_names_errors
@_autocast_composite("soft_margin_loss")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), as a softplus (no overflow for large margins)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("soft_margin_loss", reduction)
    return _reduce(softplus(-target * input), reduction)


@_names_errors
@_autocast_composite("cosine_embedding_loss")
def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) for target 1, max(0, cos - margin) for target -1."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("cosine_embedding_loss", reduction)
    if input1.dim() not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise ValueError(f"cosine_embedding_loss: expected 1D or 2D inputs of the same shape, got "
                         f"{tuple(input1.shape)} and {tuple(input2.shape)}")
    dim = input1.dim() - 1
    eps = 1e-12  # added to each squared magnitude
    dot = (input1 * input2).sum(dim)
    mag = ((input1 * input1).sum(dim) + eps) * ((input2 * input2).sum(dim) + eps)
    cos = dot / mag.sqrt()
    loss = _tp.where(target == 1, 1 - cos, 0.0) + _tp.where(target == -1, _clamp0(cos - margin), 0.0)
    return _reduce(loss, reduction)


@_names_errors
@_autocast_composite("triplet_margin_loss")
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("triplet_margin_loss", reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_loss: expected margin to be greater than 0, got {margin} instead")
    if not (anchor.dim() == positive.dim() == negative.dim()) or anchor.dim() not in (1, 2):
        raise ValueError(f"triplet_margin_loss: expected 1D or 2D anchor, positive and negative of one dimension, got "
                         f"{tuple(anchor.shape)}, {tuple(positive.shape)} and {tuple(negative.shape)}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _tp.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(_clamp0(margin + d_pos - d_neg), reduction)


@_names_errors
@_autocast_composite("poisson_nll_loss")
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("poisson_nll_loss", reduction)
    loss = _tp.exp(input) - target * input if log_input else input - target * _tp.log(input + eps)
    if full:
        # Stirling's approximation of log(target!), counted where target > 1.
        safe = _tp.where(target > 1, target, 1.0)
        stirling = safe * _tp.log(safe) - safe + 0.5 * _tp.log(2 * math.pi * safe)
        loss = loss + _tp.where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


@_names_errors
def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) if full).
    The clamp changes the value only: the gradient reaches var as if unclamped (PyTorch's rule)."""
    _check_reduction("gaussian_nll_loss", reduction)
    if isinstance(var, (int, float)):
        var = input.new_full(tuple(input.shape), float(var))  # on input's device
    shape_in, shape_var = tuple(input.shape), tuple(var.shape)
    if shape_var != shape_in:
        if shape_in[:-1] == shape_var:  # one variance per sample: broadcast over the last dim
            var = var.unsqueeze(-1)
        elif not (shape_in[:-1] == shape_var[:-1] and shape_var[-1:] == (1,)):
            raise ValueError(f"gaussian_nll_loss: var of shape {shape_var} is incorrect for input of shape "
                             f"{shape_in}")
    if bool((var < 0).any()):
        raise ValueError("gaussian_nll_loss: var has negative entry/entries")
    var = var + (_op("clamp_min")(var, eps) - var).detach()
    loss = 0.5 * (_tp.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


@_names_errors
def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Per sample, the mean over classes of the binary logistic loss of each label."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("multilabel_soft_margin_loss", reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.dim() - 1) / input.shape[-1]
    return _reduce(loss, reduction)


# ---------------------------------------------------------------- resampling
def _out_sizes(name, input, size, scale_factor, nd):
    spatial = list(input.shape[2:])
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{name}: exactly one of size or scale_factor must be given")
    if size is not None:
        sizes = list(size) if isinstance(size, (list, tuple)) else [size] * nd
        if len(sizes) != nd:
            raise ValueError(f"{name}: size {tuple(sizes)} has {len(sizes)} values but the input of shape "
                             f"{tuple(input.shape)} has {nd} spatial dims")
        return [int(v) for v in sizes], [None] * nd
    scales = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else [scale_factor] * nd
    if len(scales) != nd:
        raise ValueError(f"{name}: scale_factor {tuple(scales)} has {len(scales)} values but the input of shape "
                         f"{tuple(input.shape)} has {nd} spatial dims")
    return [int(math.floor(n * float(f))) for n, f in zip(spatial, scales)], [float(f) for f in scales]


def _resample_dim(x, dim, n_in, n_out, scale, mode, align_corners):
    """Resamples one spatial dim with index_select (the gradient flows through it); the
    indices and weights are made on x's device."""
    # The indices and weights are constants computed from the sizes, so a dynamic-shape capture
    # specializes them (int() of a SymInt guards it): with SymInts the NumPy arrays below became
    # object arrays ("cannot build a tensor from ndarray with NumPy dtype object" for
    # align_corners=True and bicubic once a second size was seen).
    n_in, n_out = int(n_in), int(n_out)
    dst = _np.arange(n_out, dtype=_np.float64)
    # Source step: PyTorch uses 1/scale_factor when one was given, else in/out (or the
    # corner-to-corner ratio with align_corners).
    if mode in ("linear", "bilinear", "trilinear", "bicubic") and align_corners:
        step = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        step = 1.0 / scale if scale is not None else n_in / n_out
    if mode == "nearest":
        idx = _np.minimum(_np.floor(dst * step), n_in - 1).astype(_np.int64)
        return x.index_select(dim, _tp.tensor(idx, device=x.device))
    if mode == "nearest-exact":
        idx = _np.minimum(_np.floor((dst + 0.5) * step), n_in - 1).astype(_np.int64)
        return x.index_select(dim, _tp.tensor(idx, device=x.device))
    shape = [1] * x.dim()
    shape[dim] = n_out
    if mode == "bicubic":
        # Cubic convolution (Keys, a = -0.75) over 4 taps, edge indices clamped; the source
        # coordinate is not clamped at 0 (PyTorch's cubic convention).
        src = dst * step if align_corners else (dst + 0.5) * step - 0.5
        base = _np.floor(src)
        t = src - base
        a = -0.75

        def near(v):  # |v| <= 1
            return ((a + 2) * v - (a + 3)) * v * v + 1

        def far(v):  # 1 < |v| < 2
            return ((a * v - 5 * a) * v + 8 * a) * v - 4 * a
        out = None
        for k, wk in enumerate((far(t + 1), near(t), near(1 - t), far(2 - t))):
            idx = _np.clip(base.astype(_np.int64) - 1 + k, 0, n_in - 1)
            term = x.index_select(dim, _tp.tensor(idx, device=x.device)) * _tp.tensor(wk.reshape(shape), dtype=x.dtype, device=x.device)
            out = term if out is None else out + term
        return out
    src = dst * step if align_corners else _np.maximum((dst + 0.5) * step - 0.5, 0.0)
    i0 = _np.minimum(_np.floor(src), n_in - 1).astype(_np.int64)
    i1 = _np.minimum(i0 + 1, n_in - 1)
    w1 = _tp.tensor((src - i0).reshape(shape), dtype=x.dtype, device=x.device)
    a, b = x.index_select(dim, _tp.tensor(i0, device=x.device)), x.index_select(dim, _tp.tensor(i1, device=x.device))
    return a + (b - a) * w1


def _resample_dim_aa(x, dim, n_in, n_out, scale, mode, align_corners):
    """Anti-aliased resampling of one spatial dim (PyTorch's and PIL's separable filter): when
    shrinking, the triangle (bilinear) or cubic (a = -0.5, bicubic) filter is widened by the scale
    so every input pixel contributes; each output's weights are normalized to sum to 1. The
    weights form an (n_out, n_in) matrix applied by one matmul, whose gradient is the transpose."""
    n_in, n_out = int(n_in), int(n_out)
    if align_corners:
        step = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        step = 1.0 / scale if scale is not None else n_in / n_out
    if mode == "bilinear":
        interp_size = 2

        def filt(v):
            return _np.maximum(0.0, 1.0 - _np.abs(v))
    else:
        interp_size = 4
        a = -0.5

        def filt(v):
            v = _np.abs(v)
            return _np.where(v < 1.0, ((a + 2) * v - (a + 3)) * v * v + 1,
                             _np.where(v < 2.0, ((a * v - 5 * a) * v + 8 * a) * v - 4 * a, 0.0))
    support = interp_size * 0.5 * step if step >= 1.0 else interp_size * 0.5
    invscale = 1.0 / step if step >= 1.0 else 1.0
    w = _np.zeros((n_out, n_in), dtype=_np.float64)
    for i in range(n_out):
        center = step * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        js = _np.arange(lo, hi)
        wi = filt((js - center + 0.5) * invscale)
        total = wi.sum()
        w[i, lo:hi] = wi / total if total != 0.0 else wi
    mat = _tp.tensor(w.T.copy(), dtype=x.dtype, device=x.device)  # (n_in, n_out)
    return _tp.matmul(x.movedim(dim, -1), mat).movedim(-1, dim)


@_names_errors
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """Resizes the spatial dims of (N, C, *spatial): nearest, nearest-exact, linear (3-D input),
    bilinear (4-D) and area (adaptive average pooling), with PyTorch's coordinate conventions."""
    nd = input.dim() - 2
    if nd < 1:
        raise ValueError(f"interpolate: expected a 3-D or 4-D (batched) input, got shape {tuple(input.shape)}")
    if antialias and (mode not in ("bilinear", "bicubic") or nd != 2):
        raise ValueError(f"interpolate: anti-alias option is restricted to bilinear and bicubic modes and requires "
                         f"a 4-D tensor as input, got mode '{mode}' and an input of shape {tuple(input.shape)}")
    linear_modes = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
    if mode in linear_modes:
        if nd != linear_modes[mode]:
            raise ValueError(f"interpolate: mode '{mode}' expects a {linear_modes[mode] + 2}-D input, got shape "
                             f"{tuple(input.shape)}")
    elif mode not in ("nearest", "nearest-exact", "area"):
        raise NotImplementedError(f"interpolate: mode '{mode}' is not supported (nearest, nearest-exact, linear, "
                                  "bilinear, bicubic, trilinear, area)")
    elif align_corners is not None:
        raise ValueError("interpolate: align_corners only has an effect with the linear modes")
    sizes, scales = _out_sizes("interpolate", input, size, scale_factor, nd)
    if min(sizes) <= 0 or min(input.shape[2:]) <= 0:
        raise ValueError(f"interpolate: input and output sizes must be positive, got input of shape "
                         f"{tuple(input.shape)} and output size {tuple(sizes)}")
    # A huge scale_factor (1e9) made NumPy build the 2e9-element index arrays below (16 GB each)
    # before any allocation failed: the process swapped instead of raising as PyTorch does.
    # (Eagerly: int() of a captured batch size would specialize it.)
    if not _tp._C._is_tracing() and \
            math.prod([int(input.shape[0]), int(input.shape[1])] + sizes) * input.element_size() >= 2**63:
        raise _tp._C.TensorValueError(f"interpolate: the output of shape {tuple(input.shape[:2]) + tuple(sizes)} "
                                      "has too many elements (its storage size overflows)")
    if recompute_scale_factor:
        scales = [None] * nd
    if mode == "area":  # adaptive average pooling; a 1-D input as a 2-D one of height 1
        if nd == 1:
            return _op("adaptive_avg_pool2d")(input.unsqueeze(2), [1, sizes[0]]).squeeze(2)
        if nd == 3:
            from ._functional_pool3d import adaptive_avg_pool3d
            return adaptive_avg_pool3d(input, sizes)
        return _op("adaptive_avg_pool2d")(input, sizes)
    dtype = input.dtype
    weighted = mode not in ("nearest", "nearest-exact")
    # The weighted modes run in float32 for 16-bit and integer inputs and round once at the end
    # (integers to the nearest value), as PyTorch's kernels do.
    out = input.float() if weighted and (dtype in (_tp.float16, _tp.bfloat16) or not dtype.is_floating_point) \
        else input
    for i in range(nd):
        dim = 2 + i
        if antialias:
            out = _resample_dim_aa(out, dim, input.shape[dim], sizes[i], scales[i], mode, bool(align_corners))
        else:
            out = _resample_dim(out, dim, input.shape[dim], sizes[i], scales[i], mode, bool(align_corners))
    if out.dtype != dtype:
        if not dtype.is_floating_point:
            out = out.round()
            if dtype == _tp.uint8:  # bicubic overshoots: saturate, as PyTorch's uint8 kernels do
                out = out.clamp(0, 255)
        out = out.to(dtype)
    return out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------- more dropout, rrelu, gumbel, adaptive max pool
def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) input with probability p."""
    return _channel_dropout("dropout3d", input, p, training, inplace, 5)


# SELU's saturation value -scale * alpha: alpha dropout sets dropped units to it, then an affine map
# restores zero mean and unit variance for inputs that have them.
_ALPHA_DROPOUT_NEG = 1.7580993408473766


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped units take SELU's negative saturation value, then
    a * x + b keeps the mean and variance."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"alpha_dropout: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return _maybe_inplace(input, lambda x: x * 0.0, inplace)
    keep = input.new_empty(list(input.shape)).bernoulli_(1 - p)
    a = 1.0 / math.sqrt((_ALPHA_DROPOUT_NEG ** 2 * p + 1) * (1 - p))
    shift = (keep - 1) * (_ALPHA_DROPOUT_NEG * a) + _ALPHA_DROPOUT_NEG * a * p
    return _maybe_inplace(input, lambda x: x * (keep * a) + shift, inplace, saves_input=False)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: negative inputs times a slope drawn from U(lower, upper) per element while
    training, times the mean slope (lower + upper) / 2 otherwise."""
    if lower > upper:
        raise ValueError(f"rrelu: lower bound ({lower}) must not exceed the upper bound ({upper})")
    if not input.is_floating_point():
        raise TypeError(f"rrelu: expected a floating-point input, got {input.dtype}")
    if not training:
        slope = (lower + upper) / 2
        return _maybe_inplace(input, lambda x: _tp.where(x > 0, x, x * slope), inplace)
    slope = input.new_empty(list(input.shape)).uniform_(lower, upper)
    return _maybe_inplace(input, lambda x: _tp.where(x > 0, x, x * slope), inplace)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + Gumbel noise) / tau) along dim; with hard=True the forward value is the one-hot of
    its argmax while the gradient is the soft sample's (straight-through)."""
    if not logits.is_floating_point():
        raise TypeError(f"gumbel_softmax: expected floating-point logits, got {logits.dtype}")
    # -log(E) with E ~ Exponential(1) is Gumbel(0, 1); E = -log(U), U ~ U(0, 1], drawn away from 0.
    tiny = {_tp.float16: 6.2e-5, _tp.float64: 2.3e-308}.get(logits.dtype, 1.2e-38)  # smallest normal number
    u = _tp.rand_like(logits.detach()).clamp(min=tiny)
    gumbels = -(-u.log()).log()
    y_soft = _tp.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = _tp.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def _adaptive_bounds(n, out):
    return [((i * n) // out, -((-(i + 1) * n) // out)) for i in range(out)]


@_names_errors
def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over windows [floor(i*H/oh), ceil((i+1)*H/oh)) x [same along W]; indices are flat h * W + w."""
    if input.dim() not in (3, 4):
        raise ValueError(f"adaptive_max_pool2d: expected 3D or 4D input, but got input of shape {tuple(input.shape)}")
    size = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size, output_size]
    if len(size) != 2:
        raise ValueError(f"adaptive_max_pool2d: output_size must be an int or a pair, got {output_size!r}")
    H, W = input.shape[-2], input.shape[-1]
    oh, ow = [(H, W)[i] if s is None else int(s) for i, s in enumerate(size)]
    if oh < 0 or ow < 0:
        raise ValueError(f"adaptive_max_pool2d: output_size must be non-negative, got {output_size!r}")
    if (H == 0 or W == 0) and oh * ow:
        raise ValueError(f"adaptive_max_pool2d: input of shape {tuple(input.shape)} has an empty spatial dimension")
    lead = list(input.shape[:-2])
    vals, idxs = [], []
    for hs, he in _adaptive_bounds(H, oh):
        for ws, we in _adaptive_bounds(W, ow):
            win = input[..., hs:he, ws:we].reshape(lead + [-1])
            local = win.argmax(-1, keepdim=True)
            vals.append(win.gather(-1, local))
            w = we - ws
            idxs.append((local // w + hs) * W + local % w + ws)
    if not vals:
        out = input.new_zeros(lead + [oh, ow])
        ind = _tp.zeros(lead + [oh, ow], dtype=_tp.int64)
    else:
        out = _tp.cat(vals, -1).reshape(lead + [oh, ow])
        ind = _tp.cat(idxs, -1).reshape(lead + [oh, ow])
    return (out, ind) if return_indices else out


@_names_errors
def adaptive_max_pool1d(input, output_size, return_indices=False):
    """adaptive_max_pool2d over a height-1 image: windows [floor(i*L/o), ceil((i+1)*L/o)); indices along L."""
    if input.dim() not in (2, 3):
        raise ValueError(f"adaptive_max_pool1d: expected 2D or 3D input, but got input of shape {tuple(input.shape)}")
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != 1:
            raise ValueError(f"adaptive_max_pool1d: output_size must be an int or a 1-tuple, got {output_size!r}")
        output_size = output_size[0]
    res = adaptive_max_pool2d(input.unsqueeze(-2), (1, output_size), return_indices)
    if return_indices:
        return res[0].squeeze(-2), res[1].squeeze(-2)
    return res.squeeze(-2)
