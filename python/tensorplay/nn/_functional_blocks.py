"""Sliding blocks of tensorplay.nn.functional: unfold (im2col) and fold
(col2im, its adjoint). Re-exported by functional.py.

Both are compositions of registered operators, so autograd, forward mode,
CUDA and tp.compile see ordinary operators: unfold is pad + two strided
window views + a permuted copy; fold sums the blocks into the image with one
index_add whose indices say where each block element lands (index_add adds in
index order, so overlapping blocks sum deterministically).
"""
import tensorplay as _tp
from .._lazy_numpy import np as _np
from .functional import _pair

__all__ = ["unfold", "fold"]


def _block_args(name, kernel_size, dilation, padding, stride):
    k, d, p, s = (_pair(v) for v in (kernel_size, dilation, padding, stride))
    for what, v, least in (("kernel_size", k, 1), ("dilation", d, 1), ("padding", p, 0), ("stride", s, 1)):
        if len(v) != 2 or not all(isinstance(e, int) and not isinstance(e, bool) for e in v):
            raise TypeError(f"{name}: {what} must be an int or a pair of ints, got {v}")
        if any(e < least for e in v):
            raise RuntimeError(f"{name}: {what} must be at least {least} in each dimension, got {v}")
    return k, d, p, s


def _blocks(name, size, k, d, p, s):
    """The number of block positions along each spatial dim."""
    n = tuple((size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2))
    if n[0] < 1 or n[1] < 1:
        raise RuntimeError(f"{name}: input of spatial size {tuple(size)} with kernel_size={k}, dilation={d}, "
                           f"padding={p}, stride={s} gives {n} sliding blocks; each must be at least 1")
    return n


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding local blocks: (N, C, H, W) -> (N, C*kh*kw, L), L the
    number of block positions; channel index c*kh*kw + i*kw + j."""
    if not isinstance(input, _tp.Tensor) or input.dim() not in (3, 4):
        what = f"a {input.dim()}-D tensor of shape {tuple(input.shape)}" if isinstance(input, _tp.Tensor) \
            else type(input).__name__
        raise ValueError(f"unfold: expected a 3-D (unbatched) or 4-D (batched) input, got {what}")
    k, d, p, s = _block_args("unfold", kernel_size, dilation, padding, stride)
    batched = input.dim() == 4
    x = input if batched else input.unsqueeze(0)
    n, c, h, w = x.shape
    oh, ow = _blocks("unfold", (h, w), k, d, p, s)
    if p[0] or p[1]:
        x = _tp.nn.functional.pad(x, (p[1], p[1], p[0], p[0]))
    span_h, span_w = d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1
    # (N, C, oh, ow, span_h, span_w) windows; the dilation keeps every d-th element.
    win = x.unfold(2, span_h, s[0]).unfold(3, span_w, s[1])
    if d[0] > 1 or d[1] > 1:
        win = win[:, :, :, :, ::d[0], ::d[1]]
    out = win.permute(0, 1, 4, 5, 2, 3).reshape(n, c * k[0] * k[1], oh * ow)
    return out if batched else out.squeeze(0)


def _fold_index(wp, k, d, s, blocks, device):
    """For each (i, j, block) the flat position in the padded image of width wp."""
    i = _np.arange(k[0]).reshape(-1, 1, 1, 1) * d[0]
    j = _np.arange(k[1]).reshape(1, -1, 1, 1) * d[1]
    bh = _np.arange(blocks[0]).reshape(1, 1, -1, 1) * s[0]
    bw = _np.arange(blocks[1]).reshape(1, 1, 1, -1) * s[1]
    idx = ((bh + i) * wp + (bw + j)).reshape(-1).astype(_np.int64)
    return _tp.from_numpy(idx).to(device)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sum sliding local blocks into an image: (N, C*kh*kw, L) -> (N, C, H, W);
    the adjoint of unfold with the same arguments."""
    if not isinstance(input, _tp.Tensor) or input.dim() not in (2, 3):
        what = f"a {input.dim()}-D tensor of shape {tuple(input.shape)}" if isinstance(input, _tp.Tensor) \
            else type(input).__name__
        raise ValueError(f"fold: expected a 2-D (unbatched) or 3-D (batched) input, got {what}")
    out_hw = _pair(output_size)
    if len(out_hw) != 2 or not all(isinstance(e, int) and not isinstance(e, bool) and e > 0 for e in out_hw):
        raise RuntimeError(f"fold: output_size must be a positive int or a pair of them, got {output_size}")
    k, d, p, s = _block_args("fold", kernel_size, dilation, padding, stride)
    batched = input.dim() == 3
    x = input if batched else input.unsqueeze(0)
    n, ckk, length = x.shape
    kk = k[0] * k[1]
    if ckk % kk:
        raise RuntimeError(f"fold: input of shape {tuple(input.shape)}: dimension 1 ({ckk}) must be divisible by "
                           f"the product of kernel_size {k} ({kk})")
    blocks = _blocks("fold", out_hw, k, d, p, s)
    if length != blocks[0] * blocks[1]:
        raise RuntimeError(f"fold: input of shape {tuple(input.shape)} has {length} blocks in its last dimension, "
                           f"but output_size={out_hw}, kernel_size={k}, dilation={d}, padding={p}, stride={s} "
                           f"give {blocks[0]} x {blocks[1]} = {blocks[0] * blocks[1]}")
    c = ckk // kk
    hp, wp = out_hw[0] + 2 * p[0], out_hw[1] + 2 * p[1]
    idx = _fold_index(wp, k, d, s, blocks, x.device)
    img = _tp.zeros((n, c, hp * wp), dtype=x.dtype, device=x.device)
    img = img.index_add(2, idx, x.reshape(n, c, kk * length))
    img = img.reshape(n, c, hp, wp)
    if p[0] or p[1]:
        img = img[:, :, p[0]:p[0] + out_hw[0], p[1]:p[1] + out_hw[1]].contiguous()
    return img if batched else img.squeeze(0)
