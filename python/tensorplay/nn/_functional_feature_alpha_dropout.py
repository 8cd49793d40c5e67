"""F.feature_alpha_dropout: alpha dropout (SELU's self-normalizing dropout) with one mask draw per
channel. Re-exported by functional.py."""
import math

from ._functional_more import _ALPHA_DROPOUT_NEG

__all__ = ["feature_alpha_dropout"]


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
