"""Fractional max pooling (Graham, 2014): fractional_max_pool2d / fractional_max_pool3d and their
_with_indices forms. Re-exported by functional.py.

Each (sample, channel) plane draws one number u in [0, 1) per spatial dim (the `_random_samples`
argument, shape (N, C, dims), or tp.rand); output position i of a dim of input size n, output size o
and window k starts at floor((i + u) a) - floor(u a) with a = (n - k) / (o - 1), and the last window
starts at n - k. The starts are computed with tensor operators in the input's dtype (so they equal the
reference's float arithmetic bit for bit, and under tp.compile the samples stay data). The windows are
then read with one gather over the flattened plane; the chosen element is the first maximum in
row-major window order, or the last NaN when the window holds NaNs (the reference scans with
`v > best || isnan(v)`), so values, indices and the gradient (gather's backward adds to the chosen
element) are those of the reference.
The samples' last dim is in spatial order reversed for 2-d (u[0] for W, u[1] for H) and in order
for 3-d (T, H, W), as in the reference.
"""
import tensorplay as _tp

__all__ = ["fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
           "fractional_max_pool3d_with_indices"]


def _tuple(v, nd, name, what):
    if isinstance(v, (list, tuple)):
        if len(v) != nd:
            raise ValueError(f"{name}: {what} must be an int or a {nd}-tuple, got {v!r}")
        return tuple(v)
    return (v,) * nd


def _window_starts(u, n, o, k, dtype):
    """Start of each of the o windows of size k over n, per plane: u (N, C) -> int64 (N, C, o)."""
    if o == 1:
        return _tp.full(tuple(u.shape) + (1,), n - k, dtype=_tp.int64, device=u.device)
    alpha = _tp.tensor(float(n - k), dtype=dtype) / _tp.tensor(float(o - 1), dtype=dtype)
    i = _tp.arange(o - 1, dtype=dtype, device=u.device)
    u = u.unsqueeze(-1)
    starts = ((i + u) * alpha).to(_tp.int64) - (u * alpha).to(_tp.int64)  # truncation as a C cast does
    last = _tp.full(tuple(starts.shape[:-1]) + (1,), n - k, dtype=_tp.int64, device=u.device)
    return _tp.cat([starts, last], -1)


def _fractional_max_pool(name, nd, input, kernel_size, output_size, output_ratio, _random_samples):
    if not isinstance(input, _tp.Tensor):
        raise TypeError(f"{name}: expected a Tensor as input, got {type(input).__name__}")
    if input.dim() not in (nd + 1, nd + 2):
        raise ValueError(f"{name}: expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input, got input of "
                         f"shape {tuple(input.shape)}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating point input, got dtype {input.dtype}")
    unbatched = input.dim() == nd + 1
    x = input.unsqueeze(0) if unbatched else input
    n, c = x.shape[0], x.shape[1]
    spatial = tuple(x.shape[2:])
    kernel = tuple(int(k) for k in _tuple(kernel_size, nd, name, "kernel_size"))
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        ratio = _tuple(output_ratio, nd, name, "output_ratio")
        if not all(0 < r < 1 for r in ratio):
            raise ValueError(f"{name}: output_ratio must be between 0 and 1 (exclusive), got {output_ratio!r}")
        out = tuple(int(s * r) for s, r in zip(spatial, ratio))
    else:
        out = tuple(int(o) for o in _tuple(output_size, nd, name, "output_size"))
    for d in range(nd):
        if kernel[d] <= 0 or out[d] <= 0:
            raise ValueError(f"{name}: kernel_size {kernel} and output_size {out} must be positive")
        if out[d] + kernel[d] - 1 > spatial[d]:
            raise ValueError(f"{name}: output size {out} with pool size {kernel} is too large for input of "
                             f"shape {tuple(input.shape)} (need output + kernel - 1 <= input size per dim)")
    if _random_samples is None:
        samples = _tp.rand(n, c, nd, dtype=x.dtype, device=x.device)
    else:
        samples = _random_samples
        if not isinstance(samples, _tp.Tensor) or tuple(samples.shape) != (n, c, nd):
            got = tuple(samples.shape) if isinstance(samples, _tp.Tensor) else type(samples).__name__
            raise ValueError(f"{name}: _random_samples must have shape {(n, c, nd)} for input of shape "
                             f"{tuple(input.shape)}, got {got}")
        samples = samples.to(x.dtype)
    # sample index per spatial dim: 2-d reads (W, H) = (0, 1), 3-d reads (T, H, W) = (0, 1, 2)
    which = (1, 0) if nd == 2 else (0, 1, 2)
    flat = None  # (N, C, o_0, ..., o_{nd-1}, k_0, ..., k_{nd-1}) flat offsets into the plane
    stride = 1
    for d in range(nd - 1, -1, -1):
        starts = _window_starts(samples[:, :, which[d]], spatial[d], out[d], kernel[d], x.dtype)
        pos = starts.unsqueeze(-1) + _tp.arange(kernel[d], dtype=_tp.int64, device=x.device)  # (N, C, o, k)
        shape = [n, c] + [1] * (2 * nd)
        shape[2 + d], shape[2 + nd + d] = out[d], kernel[d]
        term = (pos * stride).reshape(shape)
        flat = term if flat is None else flat + term
        stride *= spatial[d]
    window = 1
    for k in kernel:
        window *= k
    plane, cells = 1, 1
    for size in spatial:
        plane *= size
    for o in out:
        cells *= o
    # explicit sizes, not -1: a batch or channel count of 0 leaves -1 ambiguous
    flat = flat.expand([n, c] + list(out) + list(kernel)).reshape([n, c, cells * window])
    vals = _tp.gather(x.reshape([n, c, plane]), 2, flat).reshape([n, c] + list(out) + [window])
    flat = flat.reshape([n, c] + list(out) + [window])
    order = _tp.arange(window, dtype=_tp.int64, device=x.device)
    nan = _tp.isnan(vals)
    top = _tp.where(nan, _tp.full_like(vals, float("-inf")), vals).amax(-1, keepdim=True)
    first = _tp.where(vals == top, order, _tp.full_like(order, window)).amin(-1, keepdim=True)
    last_nan = _tp.where(nan, order, _tp.full_like(order, -1)).amax(-1, keepdim=True)
    first = _tp.where(last_nan >= 0, last_nan, first)
    result = _tp.gather(vals, -1, first).squeeze(-1)
    indices = _tp.gather(flat, -1, first).squeeze(-1)
    if unbatched:
        result, indices = result.squeeze(0), indices.squeeze(0)
    return result, indices


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return _fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size, output_ratio,
                                _random_samples)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    out, idx = _fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size, output_ratio,
                                    _random_samples)
    return (out, idx) if return_indices else out


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return _fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size, output_ratio,
                                _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    out, idx = _fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size, output_ratio,
                                    _random_samples)
    return (out, idx) if return_indices else out
