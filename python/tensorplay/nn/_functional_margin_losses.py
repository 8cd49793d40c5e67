"""The margin losses of tensorplay.nn.functional: multi_margin_loss (multi-class hinge),
multilabel_margin_loss (multi-label hinge) and triplet_margin_with_distance_loss. Compositions
of registered operators with PyTorch's definitions. Re-exported by functional.py."""
import tensorplay as _tp
from .functional import (_check_reduction, _names_errors, _reduce, _reduction)
from ._functional_more import pairwise_distance

__all__ = ["multi_margin_loss", "multilabel_margin_loss", "triplet_margin_with_distance_loss"]


@_names_errors
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Multi-class hinge loss: per sample sum_{i != y} w[y] * max(0, margin - x[y] + x[i])**p / C."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("multi_margin_loss", reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}")
    if input.dim() > 2:
        raise ValueError(f"multi_margin_loss: expected 0D, 1D or 2D input, got shape {tuple(input.shape)}")
    x = input if input.dim() == 2 else input.reshape([1, -1])  # a 0-d input is one sample of one class
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
    z = z.masked_fill(_tp.arange(c, device=x.device).unsqueeze(0) == t.unsqueeze(1), 0.0)
    loss = z.sum(1) / c
    if input.dim() < 2 and reduction == "none":
        loss = loss.reshape([])
    return _reduce(loss, reduction)


@_names_errors
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss: target lists class indices, ended by the first -1; per sample
    sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])) / C."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("multilabel_margin_loss", reduction)
    if input.dim() > 2 or tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"multilabel_margin_loss: expected 0D, 1D or 2D input and a target of its shape, got "
                         f"{tuple(input.shape)} and {tuple(target.shape)}")
    x = input if input.dim() == 2 else input.reshape([1, -1])  # a 0-d input is one sample of one class
    t = target if target.dim() == 2 else target.reshape([1, -1])
    c = x.shape[1]
    valid = (t >= 0).to(_tp.int64).cumprod(1).to(_tp.bool)  # the entries before the first -1
    idx = _tp.where(valid, t, _tp.zeros_like(t))
    is_target = _tp.zeros_like(x).scatter_add(1, idx, valid.to(x.dtype)) > 0
    xj = x.gather(1, idx)  # (N, C): the target classes' scores (slots past the end masked below)
    hinge = (1.0 - xj.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0.0)  # [n, slot j, class i]
    mask = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = _tp.where(mask, hinge, _tp.zeros_like(hinge)).sum((1, 2)) / c
    if input.dim() < 2 and reduction == "none":
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
