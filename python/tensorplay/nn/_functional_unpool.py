"""max_unpool1d/2d/3d: the partial inverse of max pooling. Each (batch, channel) plane of the
output is zeros with input's values written at the flat positions `indices` holds (what
max_pool*(return_indices=True) gives: h * W + w in 2-d), one scatter over the flattened plane,
so the gradient with respect to input is the gather of the output's gradient at those indices."""
import tensorplay as _tp

__all__ = ["max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _tuple(name, v, n, what):
    if isinstance(v, int):
        return (v,) * n
    v = tuple(v)
    if len(v) != n or not all(isinstance(i, int) for i in v):
        raise ValueError(f"{name}: {what} must be an int or {n} ints, got {v!r}")
    return v


def _unpool(name, n, input, indices, kernel_size, stride, padding, output_size):
    if not isinstance(input, _tp.Tensor) or not isinstance(indices, _tp.Tensor):
        raise TypeError(f"{name}: input and indices must be Tensors")
    if input.dim() not in (n + 1, n + 2):
        raise ValueError(f"{name}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, but got input of "
                         f"shape {list(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise ValueError(f"{name}: indices of shape {list(indices.shape)} must have input's shape "
                         f"{list(input.shape)}")
    if indices.dtype != _tp.int64:
        raise TypeError(f"{name}: expected indices to be an int64 tensor, but got {indices.dtype}")
    k = _tuple(name, kernel_size, n, "kernel_size")
    s = k if stride is None else _tuple(name, stride, n, "stride")
    p = _tuple(name, padding, n, "padding")
    spatial_in = tuple(input.shape[-n:])
    default = tuple((i - 1) * st - 2 * pd + kk for i, st, pd, kk in zip(spatial_in, s, p, k))
    if output_size is None:
        out = default
    else:
        out = tuple(int(v) for v in output_size)
        if len(out) == n + 2 or (len(out) == n + 1 and input.dim() == n + 1):
            out = out[-n:]
        if len(out) != n:
            raise ValueError(f"{name}: output_size must have {n} elements (or {n + 2} with batch and channels), "
                             f"got {list(output_size)}")
        for o, d, st in zip(out, default, s):
            if not d - st < o < d + st:
                raise ValueError(f"{name}: output_size {list(out)} is not in the range of sizes a pool with "
                                 f"stride {list(s)} maps to the input size {list(spatial_in)} (default "
                                 f"{list(default)})")
    lead = tuple(input.shape[:-n])
    plane = 1
    for o in out:
        plane *= o
    flat_in = input.reshape(lead + (-1,))
    flat_idx = indices.reshape(lead + (-1,))
    res = _tp.zeros(lead + (plane,), dtype=input.dtype, device=input.device)
    try:
        res = res.scatter(-1, flat_idx, flat_in)
    except (IndexError, RuntimeError) as e:
        raise type(e)(f"{name}: an index in indices is outside the output plane of {plane} elements "
                      f"(output size {list(out)}): {e}") from None
    return res.reshape(lead + out)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)
