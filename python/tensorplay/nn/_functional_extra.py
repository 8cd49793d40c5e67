"""Still more of tensorplay.nn.functional: transposed convolutions, embedding_bag,
instance_norm and local_response_norm. Re-exported by functional.py.

conv_transpose1d/2d call the C++ composite operators of the same name (the adjoint
of conv2d: its input-gradient kernel). The others are compositions of registered
operators, so autograd, CUDA and tp.compile see ordinary operators.
"""
import math

import tensorplay as _tp
from ..amp.autocast_mode import _autocast_composite
from .. import _C
from .functional import _embedding_renorm_, _names_errors, _op, _pair, layer_norm

__all__ = ["conv_transpose1d", "conv_transpose2d", "conv3d", "embedding_bag", "instance_norm", "local_response_norm"]


# ---------------------------------------------------------------- transposed convolution
def _conv_transpose(name, nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    if isinstance(padding, str):
        raise ValueError(f"{name}: padding must be an int or a tuple of ints, not the string {padding!r}")
    return _op(name)(input, weight, bias, list(_pair(stride, nd)), list(_pair(padding, nd)),
                     list(_pair(output_padding, nd)), groups, list(_pair(dilation, nd)))


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


# ---------------------------------------------------------------- conv3d
@_names_errors
@_autocast_composite("conv3d")
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution as kD 2-D convolutions: for each kernel depth index k, the input depth
    planes it meets (a strided slice) are folded into the batch and convolved with weight[:, :, k];
    the kD results are summed. Autograd, CUDA and tp.compile see conv2d, slices and adds."""
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"conv3d: invalid padding string {padding!r}, should be one of 'valid', 'same'")
        if padding == "same" and any(s != 1 for s in _pair(stride, 3)):
            raise ValueError("conv3d: padding='same' is not supported for strided convolutions")
    if weight.dim() != 5:
        raise ValueError(f"conv3d: expected a 5D weight [out_channels, in_channels/groups, kD, kH, kW], but got "
                         f"shape {tuple(weight.shape)}")
    if input.dim() not in (4, 5):
        raise ValueError(f"conv3d: expected 4D (unbatched) or 5D (batched) input, but got input of shape "
                         f"{tuple(input.shape)}")
    unbatched = input.dim() == 4
    if unbatched:
        input = input.unsqueeze(0)
    stride, dilation = _pair(stride, 3), _pair(dilation, 3)
    k = tuple(weight.shape[2:])
    if padding == "valid":
        padding = (0, 0, 0)
    elif padding == "same":
        totals = [dilation[i] * (k[i] - 1) for i in range(3)]
        # An odd total puts the extra zero at the end, as PyTorch does.
        pads = []
        for t in reversed(totals):
            pads += [t // 2, t - t // 2]
        input = _tp.nn.functional.pad(input, pads)
        padding = (0, 0, 0)
    padding = _pair(padding, 3)
    n, c, d = input.shape[0], input.shape[1], input.shape[2]
    if c != weight.shape[1] * groups:
        raise ValueError(f"conv3d: input of shape {tuple(input.shape)} has {c} channels, but weight of shape "
                         f"{tuple(weight.shape)} with groups={groups} expects {weight.shape[1] * groups}")
    if padding[0]:
        input = _tp.nn.functional.pad(input, [0, 0, 0, 0, padding[0], padding[0]])
        d = input.shape[2]
    span = dilation[0] * (k[0] - 1) + 1
    if d < span:
        raise ValueError(f"conv3d: kernel depth ({span}, dilated) is larger than the padded input depth ({d})")
    d_out = (d - span) // stride[0] + 1
    out = None
    for i in range(k[0]):
        start = i * dilation[0]
        planes = input[:, :, start:start + (d_out - 1) * stride[0] + 1:stride[0]]     # [N, C, Do, H, W]
        folded = planes.permute(0, 2, 1, 3, 4).reshape([n * d_out, c] + list(input.shape[3:]))
        part = _op("conv2d")(folded, weight[:, :, i], None, list(stride[1:]), list(padding[1:]),
                             list(dilation[1:]), groups)
        out = part if out is None else out + part
    o, ho, wo = out.shape[1], out.shape[2], out.shape[3]
    out = out.reshape([n, d_out, o, ho, wo]).permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.reshape([1, -1, 1, 1, 1])
    out = out.contiguous()
    return out.squeeze(0) if unbatched else out


# ---------------------------------------------------------------- embedding_bag
def _bag_of_each_index(offsets, n, n_bags, include_last_offset):
    """For each of the n flattened indices, the bag it belongs to (n_bags for those past the
    last bag, which include_last_offset drops): the number of offsets <= its position, minus one.
    Computed with tensor operators (a count by index_add, then a cumulative sum), so the same
    code runs eagerly and under tp.compile without reading the offsets' values."""
    starts = offsets[:n_bags] if include_last_offset else offsets
    marks = _tp.zeros(n + 1, dtype=_tp.int64, device=offsets.device).index_add(0, starts.clamp(0, n), _tp.ones(starts.shape[0], dtype=_tp.int64, device=offsets.device))
    bag = marks.cumsum(0)[:n] - 1
    if include_last_offset:
        end = offsets[n_bags:n_bags + 1]
        bag = _tp.where(_tp.arange(n, dtype=_tp.int64, device=offsets.device) >= end, _tp.full_like(bag, n_bags), bag)
    return bag


@_names_errors
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, averages or takes the maximum of the embeddings of each bag of indices.

    Bags are the rows of a 2-D input, or the slices input[offsets[i]:offsets[i+1]] of a 1-D
    input. Indices equal to padding_idx are left out of their bag (and of its count for
    'mean'); an empty bag gives zeros. per_sample_weights (mode='sum' only) scales each
    embedding before the sum."""
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: scale_grad_by_freq and sparse are not supported")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of 'sum', 'mean' or 'max', but got {mode!r}")
    if weight.dim() != 2:
        raise ValueError(f"embedding_bag: weight has to be a 2D tensor, but got shape {tuple(weight.shape)}")
    if input.dtype not in (_tp.int64, _tp.int32):
        raise TypeError(f"embedding_bag: expected input of dtype int64 or int32, but got {input.dtype}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError("embedding_bag: per_sample_weights was not None; per_sample_weights is only "
                                      f"supported for mode='sum' (got mode={mode!r})")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: per_sample_weights of shape {tuple(per_sample_weights.shape)} must "
                             f"have the shape of input {tuple(input.shape)}")
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)  # in place, as F.embedding's
    num_rows = weight.shape[0]
    if padding_idx is not None:
        if not -num_rows <= padding_idx < num_rows:
            raise ValueError(f"embedding_bag: padding_idx ({padding_idx}) must be within num_embeddings ({num_rows})")
        if padding_idx < 0:
            padding_idx += num_rows
    input = input.long()
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2D, then offsets has to be None, as input is treated as a "
                             "mini-batch of fixed length sequences")
        n_bags, length = input.shape
        flat = input.reshape([-1])
        bag = _tp.arange(n_bags, dtype=_tp.int64, device=input.device).unsqueeze(1).expand(n_bags, length).reshape([-1])
        psw = None if per_sample_weights is None else per_sample_weights.reshape([-1])
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("embedding_bag: offsets has to be a 1D tensor but got None")
        if offsets.dim() != 1:
            raise ValueError(f"embedding_bag: offsets has to be a 1D tensor, but got shape {tuple(offsets.shape)}")
        offsets = offsets.long()
        n_bags = offsets.shape[0] - (1 if include_last_offset else 0)
        if n_bags < 0:
            raise ValueError("embedding_bag: include_last_offset=True needs at least one offset")
        if not _C._is_tracing() and offsets.shape[0] > 0 and int(offsets[0].item()) != 0:
            raise ValueError(f"embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has "
                             f"to start from position 0. However, got {int(offsets[0].item())}")
        flat = input
        bag = _bag_of_each_index(offsets, input.shape[0], n_bags, include_last_offset)
        psw = per_sample_weights
    else:
        raise ValueError(f"embedding_bag: input has to be 1D or 2D, but got shape {tuple(input.shape)}")
    if not _C._is_tracing() and flat.numel() and (int(flat.min().item()) < 0 or int(flat.max().item()) >= num_rows):
        raise IndexError(f"embedding_bag: index out of range: indices must be in [0, {num_rows}), got values in "
                         f"[{int(flat.min().item())}, {int(flat.max().item())}]")
    dim = weight.shape[1]
    rows = weight.index_select(0, flat)                                  # [n, dim]
    keep = None
    if padding_idx is not None:
        keep = flat != padding_idx
        bag = _tp.where(keep, bag, _tp.full_like(bag, n_bags))           # padding goes to the dropped extra bag
    if psw is not None:
        rows = rows * psw.to(rows.dtype).unsqueeze(1)
    # One extra bag (index n_bags) collects what belongs to no bag; it is sliced off.
    if mode == "max":
        init = _tp.zeros(n_bags + 1, dim, dtype=weight.dtype, device=weight.device)
        out = init.scatter_reduce(0, bag.unsqueeze(1).expand(bag.shape[0], dim), rows, "amax", include_self=False)
        return out[:n_bags]
    out = _tp.zeros(n_bags + 1, dim, dtype=weight.dtype, device=weight.device).index_add(0, bag, rows)[:n_bags]
    if mode == "mean":
        counts = _tp.zeros(n_bags + 1, dtype=weight.dtype, device=weight.device).index_add(0, bag, _tp.ones(bag.shape[0], dtype=weight.dtype, device=weight.device))[:n_bags]
        out = out / counts.clamp_min(1).unsqueeze(1)
    return out


# ---------------------------------------------------------------- instance_norm
@_names_errors
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalizes each (sample, channel) over its spatial dims. With use_input_stats and running
    buffers given, the buffers are updated in place with the batch averages of the per-instance
    mean and unbiased variance; without use_input_stats the running statistics normalize."""
    if input.dim() < 3:
        raise ValueError(f"instance_norm: expected input of at least 3 dims (N, C, ...), got shape "
                         f"{tuple(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    affine_shape = [1, c] + [1] * (input.dim() - 2)
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and tuple(t.shape) != (c,):
            raise ValueError(f"instance_norm: expected {name} of shape ({c},) for input of shape "
                             f"{tuple(input.shape)}, got {tuple(t.shape)}")
    if use_input_stats:
        spatial = math.prod(input.shape[2:])
        if spatial <= 1:
            raise ValueError(f"instance_norm: expected more than 1 spatial element when training, got input size "
                             f"{tuple(input.shape)}")
        flat = input.reshape([n, c, -1])
        out = layer_norm(flat, [flat.shape[-1]], eps=eps).reshape(list(input.shape))
        if running_mean is not None or running_var is not None:
            with _tp.no_grad():
                stats = flat.detach().float() if flat.dtype in (_tp.float16, _tp.bfloat16) else flat.detach()
                if running_mean is not None:
                    mean = stats.mean(2).mean(0)
                    running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype) * momentum)
                if running_var is not None:
                    var = stats.var(2, correction=1).mean(0)
                    running_var.mul_(1 - momentum).add_(var.to(running_var.dtype) * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: use_input_stats=False needs running_mean and running_var")
        out = (input - running_mean.reshape(affine_shape)) / (running_var.reshape(affine_shape) + eps).sqrt()
    if weight is not None:
        out = out * weight.reshape(affine_shape)
    if bias is not None:
        out = out + bias.reshape(affine_shape)
    return out


# ---------------------------------------------------------------- local_response_norm
@_names_errors
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha/size * sum of squares over a window of `size` neighbouring channels)^beta;
    the window is centred (size//2 before, (size-1)//2 after) and zero outside the channels."""
    if input.dim() < 3:
        raise ValueError(f"local_response_norm: expected 3D or higher dimensional input, got shape "
                         f"{tuple(input.shape)}")
    if size <= 0:
        raise ValueError(f"local_response_norm: size must be positive, got {size}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"local_response_norm: expected a floating-point input, but got {input.dtype}")
    c = input.shape[1]
    sq = input * input
    before, after = size // 2, (size - 1) // 2
    zeros_shape = list(input.shape)
    parts = []
    if before:
        zeros_shape[1] = before
        parts.append(_tp.zeros(*zeros_shape, dtype=input.dtype, device=input.device))
    parts.append(sq)
    if after:
        zeros_shape[1] = after
        parts.append(_tp.zeros(*zeros_shape, dtype=input.dtype, device=input.device))
    padded = _tp.cat(parts, 1) if len(parts) > 1 else sq
    window = padded.narrow(1, 0, c)
    for i in range(1, size):
        window = window + padded.narrow(1, i, c)
    return input / (window * (alpha / size) + k) ** beta
