"""nn.init: in-place parameter initializers with PyTorch's names, gains and fan rules.

Every initializer writes into the given tensor under no_grad (so it works on
leaves that require grad) and returns that tensor. Randomness comes from
tp.rand/tp.randn (drawn in float64, then rounded to the tensor's dtype), so
tp.manual_seed or a tp.Generator passed as generator= makes it reproducible.
"""
import math
import warnings

import tensorplay as _tp
from .._grad_mode import no_grad

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
    "dirac_", "sparse_",
]

_LINEAR_GAINS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity, param=None):
    """The recommended scale of the std for a nonlinearity (Glorot/He analysis)."""
    if nonlinearity in _LINEAR_GAINS:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill_from(tensor, sample):
    """Copies a float64 sample into tensor (any dtype) without recording autograd."""
    with no_grad():
        tensor.copy_(sample.to(tensor.dtype))
    return tensor


def _rand(shape, generator):
    return _tp.rand(list(shape), generator=generator, dtype=_tp.float64)


def _randn(shape, generator):
    return _tp.randn(list(shape), generator=generator, dtype=_tp.float64)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    return _fill_from(tensor, _rand(tensor.shape, generator) * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    return _fill_from(tensor, _randn(tensor.shape, generator) * std + mean)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) restricted to [a, b], by redrawing the samples that fall outside."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    shape = tensor.shape
    x = _randn(shape, generator) * std + mean
    for _ in range(100):
        outside = ((x < a).long() + (x > b).long()) > 0
        if not outside.sum().item():
            break
        x = _tp.where(outside, _randn(shape, generator) * std + mean, x)
    # Whatever is still outside after many redraws (a far-tail interval) is clamped.
    x = _tp.minimum(_tp.maximum(x, a), b)
    return _fill_from(tensor, x)


def constant_(tensor, val):
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with no_grad():
        tensor.zero_()
    return tensor


def eye_(tensor):
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    n, m = tensor.shape
    eye = _tp.arange(n).unsqueeze(1) == _tp.arange(m).unsqueeze(0)
    return _fill_from(tensor, eye.to(_tp.float64))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std  # a uniform on [-b, b] has std b/sqrt(3)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


def _qr(a):
    """Reduced QR of a float64 matrix: tp.linalg.qr when this build has it, else LAPACK's
    Householder QR through NumPy (initialization runs once, on the host)."""
    linalg = getattr(_tp, "linalg", None)
    if linalg is not None and hasattr(linalg, "qr"):
        return linalg.qr(a)
    import numpy as np
    q, r = np.linalg.qr(a.numpy())
    return _tp.tensor(np.ascontiguousarray(q)), _tp.tensor(np.ascontiguousarray(r))


def orthogonal_(tensor, gain=1, generator=None):
    """Fills tensor (viewed as rows x the rest) with a (semi-)orthogonal matrix: Q of the QR
    factorization of a standard normal sample, its columns' signs fixed by R's diagonal so that
    the result is uniformly (Haar) distributed; times gain."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    sample = _randn((rows, cols), generator)
    if rows < cols:
        sample = sample.t().contiguous()
    q, r = _qr(sample)
    diag = _tp.diagonal(r, 0, 0, 1) if hasattr(_tp, "diagonal") else r.diagonal()
    q = q * _tp.where(diag < 0, -1.0, 1.0).unsqueeze(0)
    if rows < cols:
        q = q.t()
    return _fill_from(tensor, q.contiguous().reshape(list(tensor.shape)) * gain)


def dirac_(tensor, groups=1):
    """Fills a 3-, 4- or 5-D (out, in, *kernel) tensor so that the convolution is the identity on as many
    channels as possible (per group): a 1 at the kernel centre of [g*out_per_group + d, d], zeros elsewhere."""
    if tensor.dim() not in (3, 4, 5):
        raise ValueError(f"dirac_: only tensors with 3, 4, or 5 dimensions are supported, got {tensor.dim()}")
    shape = list(tensor.shape)
    if groups <= 0 or shape[0] % groups != 0:
        raise ValueError(f"dirac_: dim 0 ({shape[0]}) must be divisible by groups ({groups})")
    per_group = shape[0] // groups
    n = min(per_group, shape[1])
    out_idx = _tp.tensor([g * per_group + d for g in range(groups) for d in range(n)], dtype=_tp.int64)
    in_idx = _tp.tensor([d for _ in range(groups) for d in range(n)], dtype=_tp.int64)
    sample = _tp.zeros(shape, dtype=_tp.float64)
    if out_idx.numel():
        centre = tuple(_tp.full([out_idx.numel()], k // 2, dtype=_tp.int64) for k in shape[2:])
        sample = sample.index_put((out_idx, in_idx) + centre, _tp.ones([out_idx.numel()], dtype=_tp.float64))
    return _fill_from(tensor, sample)


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fills a 2-D tensor from N(0, std) and then zeroes ceil(sparsity * rows) randomly chosen rows
    in each column."""
    if tensor.dim() != 2:
        raise ValueError(f"sparse_: only tensors with 2 dimensions are supported, got {tensor.dim()}")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    sample = _randn((rows, cols), generator) * std
    if num_zeros and cols:
        # argsort of a uniform sample is an independent random permutation per column.
        perm = _rand((rows, cols), generator).argsort(0)
        sample = sample.masked_fill(perm < num_zeros, 0.0)
    return _fill_from(tensor, sample)
