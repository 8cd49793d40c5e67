"""F.pdist: the p-norm distances between all row pairs of a matrix (the condensed upper triangle).
Re-exported by functional.py."""
import tensorplay as _tp
from .functional import _names_errors

__all__ = ["pdist"]


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
    out = _tp.linalg.vector_norm(diff, p, dim=-1)
    if p == 0:
        # the count of nonzeros is piecewise constant: attached with a zero gradient, as PyTorch's
        # (through where, so an inf/NaN in diff does not reach the value). Unconditional: a
        # compiled capture must hold the same differentiable path as eager.
        out = out + _tp.where(_tp.zeros_like(diff, dtype=_tp.bool), diff, 0.0).sum(-1)
    return out
