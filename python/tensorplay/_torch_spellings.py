"""PyTorch spellings of things TensorPlay already does, under the names code
ported from PyTorch calls: top-level forms of nn.functional operations
(torch.pixel_shuffle, torch.cosine_similarity, torch.selu, ...; the loss
functions there take PyTorch's integer reduction codes), and small tensor
helpers (vdot, adjoint, rsub, fill, scalar_tensor, empty_strided,
split_with_sizes, unsafe_split, ...)."""
import sys

from ._C import Tensor
from ._install import add_missing

# torch.<loss>(..., reduction=int): 0 none, 1 mean, 2 sum (at::Reduction)
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _tp():
    return sys.modules[__package__]


def _F():
    from .nn import functional
    return functional


def _reduction(fn, r):
    if isinstance(r, str):
        return r
    if r not in _REDUCTIONS:
        raise ValueError(f"{fn}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {r!r}")
    return _REDUCTIONS[r]


# -- nn.functional operations under their top-level names -------------------------------------
_SAME_SIGNATURE = ("hardshrink", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "cosine_similarity",
                   "pairwise_distance", "pdist", "bilinear", "conv3d", "conv_transpose3d", "avg_pool1d",
                   "adaptive_avg_pool1d", "celu", "selu", "rrelu", "prelu", "celu_", "selu_", "rrelu_")


def _forward(name):
    def fn(*args, **kwargs):
        return getattr(_F(), name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"tp.nn.functional.{name} under PyTorch's top-level name."
    return fn


def threshold(input, threshold, value):
    return _F().threshold(input, threshold, value)


def threshold_(input, threshold, value):
    return input.copy_(_F().threshold(input, threshold, value))


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def adaptive_max_pool1d(input, output_size):
    """(values, indices), as torch.adaptive_max_pool1d returns."""
    return _F().adaptive_max_pool1d(input, output_size, return_indices=True)


def alpha_dropout(input, p, train):
    return _F().alpha_dropout(input, p, train)


def feature_alpha_dropout(input, p, train):
    return _F().feature_alpha_dropout(input, p, train)


def dropout_(input, p, train):
    return input.copy_(_F().dropout(input, p, train)) if train and p > 0 else input


def alpha_dropout_(input, p, train):
    return input.copy_(_F().alpha_dropout(input, p, train)) if train and p > 0 else input


def feature_alpha_dropout_(input, p, train):
    return input.copy_(_F().feature_alpha_dropout(input, p, train)) if train and p > 0 else input


def constant_pad_nd(input, pad, value=0):
    return _F().pad(input, list(pad), mode="constant", value=value)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return _F().group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    """PyTorch's top-level argument order (weight and bias before the running statistics)."""
    return _F().instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def kl_div(input, target, reduction=1, log_target=False):
    return _F().kl_div(input, target, reduction=_reduction("kl_div", reduction), log_target=log_target)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().margin_ranking_loss(input1, input2, target, margin=margin,
                                    reduction=_reduction("margin_ranking_loss", reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return _F().hinge_embedding_loss(input, target, margin=margin,
                                     reduction=_reduction("hinge_embedding_loss", reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().cosine_embedding_loss(input1, input2, target, margin=margin,
                                      reduction=_reduction("cosine_embedding_loss", reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction=1):
    return _F().triplet_margin_loss(anchor, positive, negative, margin=margin, p=p, eps=eps, swap=swap,
                                    reduction=_reduction("triplet_margin_loss", reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _F().poisson_nll_loss(input, target, log_input=log_input, full=full, eps=eps,
                                 reduction=_reduction("poisson_nll_loss", reduction))


# -- small tensor helpers ------------------------------------------------------------------------
def vdot(input, other):
    """The dot product of two 1-D tensors (real dtypes: no conjugation)."""
    for name, t in (("input", input), ("other", other)):
        if not isinstance(t, Tensor):
            raise TypeError(f"vdot: {name} must be a Tensor, got {type(t).__name__}")
        if t.dim() != 1:
            raise ValueError(f"vdot: 1D tensors expected, but got {input.dim()}D and {other.dim()}D tensors")
    return _tp().dot(input, other)


def adjoint(input):
    """The conjugate transpose of the last two dims (a view; real dtypes: the transpose)."""
    if input.dim() < 2:
        raise ValueError(f"adjoint: expected a tensor with at least 2 dimensions, got shape {list(input.shape)}")
    return input.transpose(-2, -1)


def rsub(input, other, alpha=1):
    """other - alpha * input."""
    return _tp().sub(other, input, alpha=alpha) if isinstance(other, Tensor) else \
        _tp().sub(_tp().full_like(input, other), input, alpha=alpha)


def fill(input, value):
    """A new tensor of input's shape and dtype filled with value (differentiable as
    PyTorch's: zero gradient for input; a tensor value gets the summed gradient)."""
    tp = _tp()
    if not isinstance(value, Tensor):
        value = tp.tensor(value, dtype=input.dtype, device=input.device)
    if value.dim() != 0:
        raise ValueError(f"fill: value must be a number or a 0-d tensor, got shape {list(value.shape)}")
    return tp.where(tp.ones_like(input, dtype=tp.bool), value.to(input.dtype), input)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A 0-d tensor holding s (default dtype: the default float dtype, as PyTorch)."""
    tp = _tp()
    return tp.tensor(float(s) if dtype is None else s, dtype=dtype or tp.get_default_dtype(), device=device,
                     requires_grad=requires_grad)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialized tensor with the given sizes and strides."""
    tp = _tp()
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    if len(size) != len(stride):
        raise ValueError(f"empty_strided: got {len(size)} sizes but {len(stride)} strides")
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise ValueError(f"empty_strided: sizes and strides must be non-negative, got {size} and {stride}")
    extent = 1 + sum((n - 1) * st for n, st in zip(size, stride)) if all(size) else 0
    base = tp.empty(extent, dtype=dtype, device=device)
    out = base.as_strided(size, stride)
    return out.requires_grad_() if requires_grad else out


def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


def split_with_sizes(input, split_sizes, dim=0):
    sizes = [int(s) for s in split_sizes]
    if sum(sizes) != input.shape[dim]:
        raise ValueError(f"split_with_sizes: split sizes {sizes} add up to {sum(sizes)}, but dimension {dim} has "
                         f"size {input.shape[dim]}")
    return input.split(sizes, dim)


def unsafe_split(input, split_size_or_sections, dim=0):
    return input.split(split_size_or_sections, dim)


def unsafe_chunk(input, chunks, dim=0):
    return input.chunk(chunks, dim)


def typename(obj):
    """'torch.FloatTensor'-style names for tensors (TensorPlay's module name), the class path otherwise."""
    if isinstance(obj, Tensor):
        return "tensorplay." + obj.type().split(".")[-1]
    t = type(obj)
    return t.__qualname__ if t.__module__ in ("builtins", "__builtin__") else f"{t.__module__}.{t.__qualname__}"


_interop_threads = [1]


def get_num_interop_threads():
    """Threads for running independent operators at once: TensorPlay runs them in order (1)."""
    return _interop_threads[0]


def set_num_interop_threads(n):
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_interop_threads: expected a positive int, got {n!r}")
    _interop_threads[0] = n


_TOP_LEVEL = (threshold, threshold_, max_pool1d, max_pool3d, adaptive_max_pool1d, alpha_dropout,
              feature_alpha_dropout, dropout_, alpha_dropout_, feature_alpha_dropout_, constant_pad_nd, group_norm,
              instance_norm, kl_div, margin_ranking_loss, hinge_embedding_loss, cosine_embedding_loss,
              triplet_margin_loss, poisson_nll_loss, vdot, adjoint, rsub, fill, scalar_tensor, empty_strided,
              is_same_size, split_with_sizes, unsafe_split, unsafe_chunk, typename, get_num_interop_threads,
              set_num_interop_threads)
_METHODS = ("hardshrink", "prelu", "vdot", "adjoint", "is_same_size", "split_with_sizes", "unsafe_split",
            "unsafe_chunk")


def install():
    tp = _tp()
    add_missing(tp, [_forward(name) for name in _SAME_SIGNATURE])
    add_missing(tp, _TOP_LEVEL)
    add_missing(Tensor, [getattr(tp, name) for name in _METHODS], _METHODS)
