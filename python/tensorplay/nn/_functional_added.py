"""tensorplay.nn.functional names PyTorch code uses that were missing: the in-place activation
spellings (relu_, elu_, ...), the *_with_indices pooling forms, adaptive_avg_pool1d, lp_pool1d/2d,
channel_shuffle, feature_alpha_dropout, bilinear, pdist and the margin losses
multi_margin_loss / multilabel_margin_loss / triplet_margin_with_distance_loss.

All are compositions of registered operators (autograd and tp.compile see ordinary ops), each
with PyTorch's definition. Re-exported by functional.py."""
import math

import tensorplay as _tp
from .functional import (_check_reduction, _names_errors, _reduce, _reduction, adaptive_avg_pool2d, avg_pool1d,
                         avg_pool2d, celu, elu, hardtanh, leaky_relu, max_pool1d, max_pool2d, relu, selu)
from ._functional_more import (_ALPHA_DROPOUT_NEG, adaptive_max_pool1d, adaptive_max_pool2d, pairwise_distance,
                               rrelu, threshold)

__all__ = ["relu_", "elu_", "leaky_relu_", "hardtanh_", "threshold_", "selu_", "celu_", "rrelu_",
           "adaptive_avg_pool1d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "max_pool1d_with_indices", "max_pool2d_with_indices", "lp_pool1d", "lp_pool2d", "channel_shuffle",
           "native_channel_shuffle", "feature_alpha_dropout", "bilinear", "pdist", "multi_margin_loss",
           "multilabel_margin_loss", "triplet_margin_with_distance_loss", "avg_pool3d", "max_pool3d",
           "max_pool3d_with_indices", "adaptive_avg_pool3d", "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices"]


# ------------------------------------------------------------ in-place spellings
def relu_(input):
    return relu(input, inplace=True)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input, threshold_value, value):
    return threshold(input, threshold_value, value, inplace=True)


def selu_(input):
    return selu(input, inplace=True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


# ------------------------------------------------------------------- pooling
@_names_errors
def adaptive_avg_pool1d(input, output_size):
    """Mean over windows [floor(i*L/o), ceil((i+1)*L/o)) of (N, C, L) or (C, L) input."""
    if input.dim() not in (2, 3):
        raise ValueError(f"adaptive_avg_pool1d: expected 2D or 3D input, got input of shape {tuple(input.shape)}")
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != 1:
            raise ValueError(f"adaptive_avg_pool1d: output_size must be an int or a 1-tuple, got {output_size!r}")
        output_size = output_size[0]
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, output_size)).squeeze(-2)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool1d(input, output_size, return_indices=True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool2d(input, output_size, return_indices=True)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True)


def _lp_finish(out, norm_type, window):
    # avg * window = sum of x**p over the window; negative sums (odd p) are cut to 0 as PyTorch's
    return (_tp.sign(out) * relu(out.abs())).mul(window).pow(1.0 / norm_type)


@_names_errors
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x**p) ** (1/p) over the last dim."""
    k = kernel_size[0] if isinstance(kernel_size, (list, tuple)) else kernel_size
    out = avg_pool1d(input.pow(norm_type), k, stride if stride is not None else k, 0, ceil_mode)
    return _lp_finish(out, norm_type, k)


@_names_errors
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x**p) ** (1/p) over the two trailing dims."""
    kh, kw = kernel_size if isinstance(kernel_size, (list, tuple)) else (kernel_size, kernel_size)
    out = avg_pool2d(input.pow(norm_type), (kh, kw), stride if stride is not None else (kh, kw), 0, ceil_mode)
    return _lp_finish(out, norm_type, kh * kw)


# --------------------------------------------------------- shuffle, dropout
@_names_errors
def channel_shuffle(input, groups):
    """(N, g*k, *) -> channels reordered as (k, g): the ShuffleNet interleave."""
    if input.dim() < 3:
        raise ValueError(f"channel_shuffle: expected input with at least 3 dims, got shape {tuple(input.shape)}")
    if not isinstance(groups, int) or groups <= 0:
        raise ValueError(f"channel_shuffle: number of groups must be positive, got {groups}")
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise ValueError(f"channel_shuffle: number of channels ({c}) must be divisible by groups ({groups})")
    rest = list(input.shape[2:])
    return input.reshape([n, groups, c // groups] + rest).transpose(1, 2).reshape([n, c] + rest)


native_channel_shuffle = channel_shuffle


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout whose mask drops whole channels (one draw per (N, C) of an (N, C, *) input)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"feature_alpha_dropout: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if input.dim() < 2:
        raise ValueError(f"feature_alpha_dropout: expected at least 2D input, got shape {tuple(input.shape)}")
    if p == 1.0:
        out = input * 0.0
        return input.copy_(out) if inplace else out
    mask_shape = list(input.shape[:2]) + [1] * (input.dim() - 2)
    keep = input.new_empty(mask_shape).bernoulli_(1 - p)
    a = 1.0 / math.sqrt((_ALPHA_DROPOUT_NEG ** 2 * p + 1) * (1 - p))
    shift = (keep - 1) * (_ALPHA_DROPOUT_NEG * a) + _ALPHA_DROPOUT_NEG * a * p
    out = input * (keep * a) + shift
    return input.copy_(out) if inplace else out


# ------------------------------------------------------------ bilinear, pdist
@_names_errors
def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]."""
    if weight.dim() != 3:
        raise ValueError(f"bilinear: expected a 3D weight (out, in1, in2), got shape {tuple(weight.shape)}")
    if input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise ValueError(f"bilinear: input sizes {input1.shape[-1]} and {input2.shape[-1]} do not match the weight "
                         f"of shape {tuple(weight.shape)}")
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ValueError(f"bilinear: input1 and input2 must have the same leading dims, got {tuple(input1.shape)} "
                         f"and {tuple(input2.shape)}")
    y = _tp.einsum("...i,oij,...j->...o", input1, weight, input2)
    return y if bias is None else y + bias


@_names_errors
def pdist(input, p=2.0):
    """The p-norm distances between the rows of an (N, M) input, upper triangle, row-major (N*(N-1)/2)."""
    if input.dim() != 2:
        raise ValueError(f"pdist: expected a 2D input, got shape {tuple(input.shape)}")
    if p < 0:
        raise ValueError(f"pdist: p must be non-negative, got {p}")
    n = input.shape[0]
    idx = _tp.triu_indices(n, n, 1).to(input.device)  # on the input's device (CUDA inputs)
    diff = input.index_select(0, idx[0]) - input.index_select(0, idx[1])
    return _tp.linalg.vector_norm(diff, p, dim=-1)


# ---------------------------------------------------------------- margin losses
@_names_errors
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Multi-class hinge loss: per sample sum_{i != y} w[y] * max(0, margin - x[y] + x[i])**p / C."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("multi_margin_loss", reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}")
    if input.dim() not in (1, 2):
        raise ValueError(f"multi_margin_loss: expected 1D or 2D input, got shape {tuple(input.shape)}")
    x = input if input.dim() == 2 else input.unsqueeze(0)
    t = target.reshape([-1])
    if t.shape[0] != x.shape[0]:
        raise ValueError(f"multi_margin_loss: target of shape {tuple(target.shape)} does not match input of shape "
                         f"{tuple(input.shape)}")
    c = x.shape[1]
    xy = x.gather(1, t.unsqueeze(1))
    z = (margin - xy + x).clamp(min=0.0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.index_select(0, t).unsqueeze(1)
    z = z.masked_fill(_tp.arange(c).unsqueeze(0) == t.unsqueeze(1), 0.0)
    loss = z.sum(1) / c
    if input.dim() == 1 and reduction == "none":
        loss = loss.reshape([])
    return _reduce(loss, reduction)


@_names_errors
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss: target lists class indices, ended by the first -1; per sample
    sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])) / C."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("multilabel_margin_loss", reduction)
    if input.dim() not in (1, 2) or tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"multilabel_margin_loss: expected 1D or 2D input and a target of its shape, got "
                         f"{tuple(input.shape)} and {tuple(target.shape)}")
    x = input if input.dim() == 2 else input.unsqueeze(0)
    t = target if target.dim() == 2 else target.unsqueeze(0)
    c = x.shape[1]
    valid = (t >= 0).to(_tp.int64).cumprod(1).to(_tp.bool)  # the entries before the first -1
    idx = _tp.where(valid, t, _tp.zeros_like(t))
    is_target = _tp.zeros(tuple(x.shape), dtype=x.dtype).scatter_add(1, idx, valid.to(x.dtype)) > 0
    xj = x.gather(1, idx)  # (N, C): the target classes' scores (slots past the end masked below)
    hinge = (1.0 - xj.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0.0)  # [n, slot j, class i]
    mask = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = _tp.where(mask, hinge, _tp.zeros_like(hinge)).sum((1, 2)) / c
    if input.dim() == 1 and reduction == "none":
        loss = loss.reshape([])
    return _reduce(loss, reduction)


@_names_errors
def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) with any distance function (pairwise_distance by default)."""
    _check_reduction("triplet_margin_with_distance_loss", reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: expected margin to be greater than 0, got {margin}")
    d = distance_function if distance_function is not None else pairwise_distance
    d_pos = d(anchor, positive)
    d_neg = d(anchor, negative)
    if swap:
        d_neg = _tp.minimum(d_neg, d(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0.0), reduction)


# ------------------------------------------------------- 3-d pools (separable)
# A box pool over (D, H, W) is the 2-d pool over (H, W) followed by the pool over D: the mean of
# a box (its divisor is a product of per-dim counts, padding and ceil_mode included) and the max
# of a box are separable. The D pass is a 2-d pool with a (k, 1) window over (M, 1, D, 1).
def _triple(v, name, what):
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return (int(v[0]),) * 3
        if len(v) != 3:
            raise ValueError(f"{name}: {what} must be an int or a 3-tuple, got {v!r}")
        return tuple(int(x) for x in v)
    return (int(v),) * 3


def _as_5d(name, input):
    if input.dim() not in (4, 5):
        raise ValueError(f"{name}: expected 4D (unbatched) or 5D (batched) input, got input of shape "
                         f"{tuple(input.shape)}")
    return (input.unsqueeze(0), True) if input.dim() == 4 else (input, False)


def _over_depth(y, fn):
    """fn applied to y (N, C, D, H, W) as a 2-d pool over (D, 1) of an (N*C*H*W, 1, D, 1) tensor."""
    n, c, d, h, w = y.shape
    z = y.permute(0, 1, 3, 4, 2).reshape([n * c * h * w, 1, d, 1])
    out = fn(z)
    if isinstance(out, tuple):
        return tuple(_back(o, n, c, h, w) for o in out)
    return _back(out, n, c, h, w)


def _back(o, n, c, h, w):
    return o.reshape([n, c, h, w, o.shape[2]]).permute(0, 1, 4, 2, 3)


@_names_errors
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over (kD, kH, kW) boxes of (N, C, D, H, W) or (C, D, H, W) input (PyTorch's arguments)."""
    x, unbatched = _as_5d("avg_pool3d", input)
    k = _triple(kernel_size, "avg_pool3d", "kernel_size")
    st = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _triple(stride, "avg_pool3d", "stride")
    p = _triple(padding, "avg_pool3d", "padding")
    if divisor_override is not None and divisor_override == 0:
        raise ValueError(f"avg_pool3d: divisor must be not zero, got {divisor_override}")
    div = None if divisor_override is None else 1  # sums in both passes, divided once below
    n, c = x.shape[0], x.shape[1]
    y = x.reshape([n * c] + list(x.shape[2:]))
    y = avg_pool2d(y, k[1:], st[1:], p[1:], ceil_mode, count_include_pad, div)
    y = y.reshape([n, c] + list(y.shape[1:]))
    y = _over_depth(y, lambda z: avg_pool2d(z, (k[0], 1), (st[0], 1), (p[0], 0), ceil_mode, count_include_pad, div))
    if divisor_override is not None:
        y = y / divisor_override
    return y.squeeze(0) if unbatched else y


@_names_errors
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over (kD, kH, kW) boxes; indices (return_indices) are flat d * H * W + h * W + w, the
    first maximum in (d, h, w) order as PyTorch's."""
    x, unbatched = _as_5d("max_pool3d", input)
    k = _triple(kernel_size, "max_pool3d", "kernel_size")
    st = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _triple(stride, "max_pool3d", "stride")
    p = _triple(padding, "max_pool3d", "padding")
    dl = _triple(dilation, "max_pool3d", "dilation")
    n, c, D, H, W = x.shape
    y = x.reshape([n * c, D, H, W])
    r = max_pool2d(y, k[1:], st[1:], p[1:], dl[1:], ceil_mode=ceil_mode, return_indices=return_indices)
    y, ihw = (r if return_indices else (r, None))
    y = y.reshape([n, c] + list(y.shape[1:]))
    r = _over_depth(y, lambda z: max_pool2d(z, (k[0], 1), (st[0], 1), (p[0], 0), (dl[0], 1), ceil_mode=ceil_mode,
                                            return_indices=return_indices))
    if not return_indices:
        return r.squeeze(0) if unbatched else r
    out, idx_d = r  # idx_d: the chosen depth for each (n, c, d', h', w')
    ihw = ihw.reshape([n, c] + list(ihw.shape[1:]))  # (n, c, D, H', W'): flat h * W + w per depth
    chosen = ihw.gather(2, idx_d)
    ind = idx_d * (H * W) + chosen
    return (out.squeeze(0), ind.squeeze(0)) if unbatched else (out, ind)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def _adaptive_size3(name, input, output_size):
    size = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size] * 3
    if len(size) != 3:
        raise ValueError(f"{name}: output_size must be an int or a 3-tuple, got {output_size!r}")
    return [input.shape[input.dim() - 3 + i] if s is None else int(s) for i, s in enumerate(size)]


@_names_errors
def adaptive_avg_pool3d(input, output_size):
    """Mean over windows [floor(i*D/od), ceil((i+1)*D/od)) x (same along H, W)."""
    x, unbatched = _as_5d("adaptive_avg_pool3d", input)
    od, oh, ow = _adaptive_size3("adaptive_avg_pool3d", x, output_size)
    n, c = x.shape[0], x.shape[1]
    y = adaptive_avg_pool2d(x.reshape([n * c] + list(x.shape[2:])), (oh, ow))
    y = y.reshape([n, c] + list(y.shape[1:]))
    y = _over_depth(y, lambda z: adaptive_avg_pool2d(z, (od, 1)))
    return y.squeeze(0) if unbatched else y


@_names_errors
def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max over windows [floor(i*D/od), ceil((i+1)*D/od)) x (same along H, W); indices flat
    d * H * W + h * W + w."""
    x, unbatched = _as_5d("adaptive_max_pool3d", input)
    od, oh, ow = _adaptive_size3("adaptive_max_pool3d", x, output_size)
    n, c, D, H, W = x.shape
    r = adaptive_max_pool2d(x.reshape([n * c, D, H, W]), (oh, ow), return_indices)
    y, ihw = (r if return_indices else (r, None))
    y = y.reshape([n, c] + list(y.shape[1:]))
    r = _over_depth(y, lambda z: adaptive_max_pool2d(z, (od, 1), return_indices))
    if not return_indices:
        return r.squeeze(0) if unbatched else r
    out, idx_d = r  # a flat index over a (D, 1) image is the depth itself
    ihw = ihw.reshape([n, c] + list(ihw.shape[1:]))
    ind = idx_d * (H * W) + ihw.gather(2, idx_d)
    return (out.squeeze(0), ind.squeeze(0)) if unbatched else (out, ind)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool3d(input, output_size, return_indices=True)
