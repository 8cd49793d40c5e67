"""1-d/2-d pooling forms of tensorplay.nn.functional PyTorch has beyond functional.py's: adaptive_avg_pool1d,
the *_with_indices spellings and the power-average pools lp_pool1d / lp_pool2d, as compositions
of the existing pools. Re-exported by functional.py."""
import tensorplay as _tp
from .functional import (_names_errors, adaptive_avg_pool2d, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d, relu)
from ._functional_more import (adaptive_max_pool1d, adaptive_max_pool2d)

__all__ = ["adaptive_avg_pool1d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "max_pool1d_with_indices", "max_pool2d_with_indices", "lp_pool1d", "lp_pool2d", "lp_pool3d"]


@_names_errors
def adaptive_avg_pool1d(input, output_size):
    """Mean over windows [floor(i*L/o), ceil((i+1)*L/o)) of (N, C, L) or (C, L) input."""
    if input.dim() not in (2, 3):
        raise ValueError(f"adaptive_avg_pool1d: expected 2D or 3D input, got input of shape {tuple(input.shape)}")
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != 1:
            raise ValueError(f"adaptive_avg_pool1d: output_size must be an int or a 1-tuple, got {output_size!r}")
        output_size = output_size[0]
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, output_size)).squeeze(-2)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool1d(input, output_size, return_indices=True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool2d(input, output_size, return_indices=True)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True)


def _lp_finish(out, norm_type, window):
    # avg * window = sum of x**p over the window; negative sums (odd p) are cut to 0 as PyTorch's
    return (_tp.sign(out) * relu(out.abs())).mul(window).pow(1.0 / norm_type)


@_names_errors
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x**p) ** (1/p) over the last dim."""
    k = kernel_size[0] if isinstance(kernel_size, (list, tuple)) else kernel_size
    out = avg_pool1d(input.pow(norm_type), k, stride if stride is not None else k, 0, ceil_mode)
    return _lp_finish(out, norm_type, k)


@_names_errors
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x**p) ** (1/p) over the two trailing dims."""
    kh, kw = kernel_size if isinstance(kernel_size, (list, tuple)) else (kernel_size, kernel_size)
    out = avg_pool2d(input.pow(norm_type), (kh, kw), stride if stride is not None else (kh, kw), 0, ceil_mode)
    return _lp_finish(out, norm_type, kh * kw)


@_names_errors
def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x**p) ** (1/p) over the three trailing dims."""
    from ._functional_pool3d import avg_pool3d
    kd, kh, kw = kernel_size if isinstance(kernel_size, (list, tuple)) else (kernel_size,) * 3
    out = avg_pool3d(input.pow(norm_type), (kd, kh, kw), stride if stride is not None else (kd, kh, kw), 0, ceil_mode)
    return _lp_finish(out, norm_type, kd * kh * kw)
