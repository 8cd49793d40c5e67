"""The 3-d pools of tensorplay.nn.functional: avg_pool3d, max_pool3d(_with_indices),
adaptive_avg_pool3d, adaptive_max_pool3d(_with_indices), as separable compositions of the 2-d
pools (equal to PyTorch's values and first-maximum indices). Re-exported by functional.py."""
import tensorplay as _tp
from .functional import (_names_errors, adaptive_avg_pool2d, avg_pool2d, max_pool2d)
from ._functional_more import adaptive_max_pool2d

__all__ = ["avg_pool3d", "max_pool3d", "max_pool3d_with_indices", "adaptive_avg_pool3d", "adaptive_max_pool3d",
           "adaptive_max_pool3d_with_indices"]


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


def _widened(x):
    """x in the dtype the two average passes run in: float32 for 16-bit floats (one rounding to
    16 bits at the end, as PyTorch's float accumulation, not one per pass)."""
    return x.float() if x.dtype in (_tp.float16, _tp.bfloat16) else x


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
    n, c = x.shape[0], x.shape[1]

    def pool(t, div):
        t = t.reshape([n * c] + list(t.shape[2:]))
        t = avg_pool2d(t, k[1:], st[1:], p[1:], ceil_mode, count_include_pad, div)
        t = t.reshape([n, c] + list(t.shape[1:]))
        return _over_depth(t, lambda z: avg_pool2d(z, (k[0], 1), (st[0], 1), (p[0], 0), ceil_mode,
                                                   count_include_pad, div))

    if x.is_floating_point():
        xw = _widened(x)
        if divisor_override is None:
            y = pool(xw, None)
        else:
            y = pool(xw, 1) / divisor_override  # sums in both passes, divided once
        y = y.to(x.dtype)
    else:
        # integers: the exact box sum (float64 passes) divided once by the box's divisor with
        # truncation, as PyTorch's integer average; per-pass integer means would round twice
        total = pool(x.to(_tp.float64), 1)
        if divisor_override is not None:
            div = float(divisor_override)
        else:
            ones = _tp.ones(tuple(x.shape), dtype=_tp.float64, device=x.device)
            div = (pool(ones, 1) / pool(ones, None)).round()  # count of the box / its mean of ones
        y = _tp.div(total, div, rounding_mode="trunc").to(x.dtype)
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
    y = adaptive_avg_pool2d(_widened(x).reshape([n * c] + list(x.shape[2:])), (oh, ow))
    y = y.reshape([n, c] + list(y.shape[1:]))
    y = _over_depth(y, lambda z: adaptive_avg_pool2d(z, (od, 1))).to(x.dtype)
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
