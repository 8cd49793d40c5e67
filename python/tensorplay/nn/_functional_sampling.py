"""Spatial transformer sampling for tensorplay.nn.functional: affine_grid and grid_sample (4-D and 5-D).

Both are compositions of registered operators, so autograd gives the gradients for the input (through
gather's scatter-add) and for the grid (through the interpolation weights and the coordinate maps), and
tp.compile captures ordinary ops. grid_sample follows PyTorch's definition: grid values in [-1, 1] name
the input's corners (align_corners=True) or its corner pixels' outer edges (False); a coordinate is
unnormalized, then mapped by the padding mode (zeros: outside samples read 0; border: clamped to the edge;
reflection: reflected about the edges, then clamped), then read with bilinear weights or the nearest
pixel (round half to even), or bicubic (4-D: 4 x 4 taps with the cubic convolution kernel, A = -0.75;
the padding mode maps each tap). The clamp and reflection maps carry PyTorch's derivatives (0 outside the
clamp, the sign of the reflection). Re-exported by functional.py."""
import itertools

import tensorplay as _tp
from .functional import _names_errors

__all__ = ["affine_grid", "grid_sample"]


def _base_coords(n, align_corners, like):
    """The n normalized pixel coordinates along one axis (centres of n pixels spanning [-1, 1])."""
    if n <= 1:
        return _tp.zeros(max(n, 0), dtype=like.dtype, device=like.device)
    c = _tp.linspace(-1.0, 1.0, n, dtype=like.dtype, device=like.device)
    return c if align_corners else c * ((n - 1) / n)


@_names_errors
def affine_grid(theta, size, align_corners=None):
    """The sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) of the affine maps theta (N, 2, 3) (or (N, 3, 4))
    applied to the normalized output coordinates of an output of `size`."""
    align_corners = bool(align_corners)
    if not isinstance(theta, _tp.Tensor):
        raise TypeError(f"affine_grid: theta must be a Tensor, got {type(theta).__name__}")
    if not theta.is_floating_point():
        raise ValueError(f"affine_grid: expected theta to have floating point type, but got {theta.dtype}")
    size = [int(s) for s in size]
    if len(size) == 4:
        if theta.dim() != 3 or tuple(theta.shape[1:]) != (2, 3):
            raise ValueError(f"affine_grid: expected a batch of 2D affine matrices of shape Nx2x3 for size "
                             f"{size}, got {list(theta.shape)}")
        spatial = size[2:]
    elif len(size) == 5:
        if theta.dim() != 3 or tuple(theta.shape[1:]) != (3, 4):
            raise ValueError(f"affine_grid: expected a batch of 3D affine matrices of shape Nx3x4 for size "
                             f"{size}, got {list(theta.shape)}")
        spatial = size[2:]
    else:
        raise NotImplementedError(f"affine_grid: only 4-D and 5-D sizes are supported, got {size}")
    if min(size) <= 0:
        raise ValueError(f"affine_grid: expected non-zero, positive output size, got {size}")
    if size[0] != theta.shape[0]:
        raise ValueError(f"affine_grid: theta has batch size {theta.shape[0]} but size asks for {size[0]}")
    nd = len(spatial)
    # the last grid coordinate runs along the first spatial dim: (x, y[, z]) = (W, H[, D])
    axes = [_base_coords(s, align_corners, theta) for s in spatial]
    cols = []
    for k in range(nd):  # coordinate k (x first) varies along spatial dim nd - 1 - k
        d = nd - 1 - k
        shape = [1] * nd
        shape[d] = spatial[d]
        cols.append(axes[d].reshape(shape).expand(spatial))
    cols.append(_tp.ones(spatial, dtype=theta.dtype, device=theta.device))
    base = _tp.stack(cols, -1).reshape(1, -1, nd + 1)  # (1, P, nd + 1)
    grid = _tp.matmul(base, theta.transpose(1, 2))  # (N, P, nd)
    return grid.reshape([size[0]] + spatial + [nd])


def _clip(c, n):
    return c.clamp(0, n - 1)


def _reflect(c, twice_low, twice_high):
    """c reflected about low and high (given doubled, so half-pixel edges are integers) until inside."""
    if twice_low == twice_high:
        return c * 0
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    t = c - lo
    t = t * _tp.where(t < 0, -1.0, 1.0)  # |t| with the derivative +1 at 0, as PyTorch's
    extra = _tp.fmod(t, span)
    flips = _tp.floor(t / span)
    even = _tp.remainder(flips, 2) == 0
    return _tp.where(even, extra + lo, span - extra + lo)


def _unnormalize(coord, n, align_corners):
    return (coord + 1) / 2 * (n - 1) if align_corners else ((coord + 1) * n - 1) / 2


def _pad(c, n, padding_mode, align_corners):
    """A pixel coordinate mapped by the padding mode (zeros: unchanged, read as 0 when outside)."""
    if padding_mode == "border":
        c = _clip(c, n)
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (n - 1)) if align_corners else _reflect(c, -1, 2 * n - 1)
        c = _clip(c, n)
    return c


def _source_index(coord, n, padding_mode, align_corners):
    return _pad(_unnormalize(coord, n, align_corners), n, padding_mode, align_corners)


_CUBIC_A = -0.75  # the cubic convolution kernel's parameter (Keys), as PyTorch's bicubic modes use


def _cubic_weights(t):
    """The four weights of the taps at offsets -1, 0, 1, 2 for a fractional position t in [0, 1)."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _read_taps(flat_in, spatial, idx, weight, N, C, P):
    """flat_in (N, C, prod(spatial)) at integer positions idx (one (N, P) tensor per spatial dim) times
    weight (N, P); 0 outside the input."""
    valid = None
    lin = None
    for d in range(len(spatial)):
        ok = (idx[d] >= 0) & (idx[d] <= spatial[d] - 1)
        valid = ok if valid is None else valid & ok
    for d in range(len(spatial)):
        i = _tp.where(valid, idx[d], _tp.zeros_like(idx[d])).to(_tp.int64)
        lin = i if lin is None else lin * spatial[d] + i
    vals = flat_in.gather(2, lin.unsqueeze(1).expand(N, C, P))
    w = _tp.where(valid, weight, _tp.zeros_like(weight))
    return vals * w.unsqueeze(1)


@_names_errors
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """input (N, C, H, W) (or (N, C, D, H, W)) sampled at grid (N, Ho, Wo, 2) (or (N, Do, Ho, Wo, 3)), whose
    last dim holds normalized (x, y[, z]) coordinates; result (N, C, Ho, Wo) (or (N, C, Do, Ho, Wo))."""
    align_corners = bool(align_corners)
    for name, t in (("input", input), ("grid", grid)):
        if not isinstance(t, _tp.Tensor):
            raise TypeError(f"grid_sample: {name} must be a Tensor, got {type(t).__name__}")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"grid_sample: expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"grid_sample: expected padding_mode to be 'zeros', 'border', or 'reflection', "
                         f"but got: '{padding_mode}'")
    if mode == "bicubic" and input.dim() != 4:
        raise RuntimeError("grid_sample: bicubic interpolation only supports 4D input")
    if input.dim() not in (4, 5):
        raise RuntimeError(f"grid_sample: expected 4-D or 5-D input, but got input of shape {list(input.shape)}")
    if grid.dim() != input.dim():
        raise RuntimeError(f"grid_sample: expected grid to have {input.dim()} dimensions like input, "
                           f"but got grid of shape {list(grid.shape)}")
    nd = input.dim() - 2
    if grid.shape[-1] != nd:
        raise RuntimeError(f"grid_sample: expected grid to have size {nd} in its last dimension, "
                           f"but got grid of shape {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sample: expected grid and input to have the same batch size, but got input of "
                           f"shape {list(input.shape)} and grid of shape {list(grid.shape)}")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sample: expected input and grid to have the same dtype, but got {input.dtype} "
                           f"and {grid.dtype}")
    if not input.is_floating_point():
        raise RuntimeError(f"grid_sample: expected a floating point input, got {input.dtype}")
    if input.dtype in (_tp.float16, _tp.bfloat16):  # computed in float32, rounded once
        return grid_sample(input.float(), grid.float(), mode, padding_mode, align_corners).to(input.dtype)
    for d in range(2, input.dim()):
        if input.shape[d] == 0:
            raise RuntimeError(f"grid_sample: expected input to have non-empty spatial dimensions, "
                               f"but got input of shape {list(input.shape)}")
    N, C = input.shape[0], input.shape[1]
    spatial = list(input.shape[2:])
    out_spatial = list(grid.shape[1:-1])
    P = 1
    for s in out_spatial:
        P *= s
    flat_in = input.reshape(N, C, -1)
    g = grid.reshape(N, P, nd)
    if mode == "bicubic":
        # 4 x 4 taps around the unnormalized position; the padding mode maps each tap's integer coordinate
        raw = [_unnormalize(g[..., nd - 1 - d], spatial[d], align_corners) for d in range(nd)]
        base = [_tp.floor(c).detach() for c in raw]
        wts = [_cubic_weights(c - b) for c, b in zip(raw, base)]
        taps = [[_pad(b + (k - 1), spatial[d], padding_mode, align_corners).detach() for k in range(4)]
                for d, b in enumerate(base)]
        out = None
        for ky in range(4):
            for kx in range(4):
                term = _read_taps(flat_in, spatial, [_tp.round(taps[0][ky]), _tp.round(taps[1][kx])],
                                  wts[0][ky] * wts[1][kx], N, C, P)
                out = term if out is None else out + term
        return out.reshape([N, C] + out_spatial)
    # coords[d]: source coordinate along spatial dim d (the grid lists them last dim first)
    coords = [_source_index(g[..., nd - 1 - d], spatial[d], padding_mode, align_corners) for d in range(nd)]

    def read(idx, weight):
        return _read_taps(flat_in, spatial, idx, weight, N, C, P)

    if mode == "nearest":
        idx = [_tp.round(c).detach() for c in coords]
        out = read(idx, coords[0] * 0 + 1)  # the grid's gradient is 0 (defined, as PyTorch's)
    else:
        lo = [_tp.floor(c).detach() for c in coords]
        frac = [c - f for c, f in zip(coords, lo)]  # weight of the upper neighbour
        out = None
        for corner in itertools.product((0, 1), repeat=nd):
            w = None
            for d, up in enumerate(corner):
                wd = frac[d] if up else 1 - frac[d]
                w = wd if w is None else w * wd
            term = read([lo[d] + up for d, up in enumerate(corner)], w)
            out = term if out is None else out + term
    return out.reshape([N, C] + out_spatial)
