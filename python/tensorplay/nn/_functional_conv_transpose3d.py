"""conv_transpose3d as kD conv_transpose2d calls (the adjoint of conv3d's kD conv2d calls): the
input's depth planes are folded into the batch and each kernel depth tap i gives one transposed
2-D convolution, whose planes land at depths d * stride + i * dilation of the uncropped output
(one index_add per tap); the padding is then cropped and the bias added. Autograd, CUDA and
tp.compile see conv_transpose2d, index_add, slices and adds. 16-bit inputs are computed in
float32 and rounded once."""
import tensorplay as _tp
from .functional import _names_errors, _pair

__all__ = ["conv_transpose3d"]


@_names_errors
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    name = "conv_transpose3d"
    if isinstance(padding, str):
        raise ValueError(f"{name}: padding must be an int or a tuple of ints, not the string {padding!r}")
    if weight.dim() != 5:
        raise ValueError(f"{name}: expected a 5D weight [in_channels, out_channels/groups, kD, kH, kW], but got "
                         f"shape {tuple(weight.shape)}")
    if input.dim() not in (4, 5):
        raise ValueError(f"{name}: expected 4D (unbatched) or 5D (batched) input, but got input of shape "
                         f"{tuple(input.shape)}")
    unbatched = input.dim() == 4
    if unbatched:
        input = input.unsqueeze(0)
    stride, padding, output_padding, dilation = (_pair(v, 3) for v in (stride, padding, output_padding, dilation))
    n, c, d, h, w = input.shape
    if c != weight.shape[0]:
        raise ValueError(f"{name}: input of shape {tuple(input.shape)} has {c} channels, but weight of shape "
                         f"{tuple(weight.shape)} expects {weight.shape[0]}")
    for i in range(3):
        if not (output_padding[i] < stride[i] or output_padding[i] < dilation[i]):
            raise ValueError(f"{name}: output_padding {output_padding} must be smaller than either stride {stride} "
                             f"or dilation {dilation} in every dim")
    narrow = input.dtype if input.dtype in (_tp.float16, _tp.bfloat16) else None
    if narrow is not None:   # kD partial sums would each round to 16 bits: float32, rounded once at the end
        input, weight = input.float(), weight.float()
        bias = bias.float() if bias is not None else None
    kd = weight.shape[2]
    sd, pd, od, dd = stride[0], padding[0], output_padding[0], dilation[0]
    full = (d - 1) * sd + dd * (kd - 1) + 1 + od
    d_out = full - 2 * pd
    if d_out <= 0:
        raise ValueError(f"{name}: the output depth would be {d_out} (input of shape {tuple(input.shape)}, "
                         f"padding {padding})")
    planes = input.transpose(1, 2).reshape(n * d, c, h, w)
    out = None
    base = _tp.arange(d, device=input.device) * sd
    for i in range(kd):
        y = _tp.nn.functional.conv_transpose2d(planes, weight[:, :, i], None, stride[1:], padding[1:],
                                               output_padding[1:], groups, dilation[1:])
        co, ho, wo = y.shape[1:]
        y = y.reshape(n, d, co, ho, wo).transpose(1, 2)                     # [N, Cout, D, Ho, Wo]
        if out is None:
            out = _tp.zeros((n, co, full, ho, wo), dtype=y.dtype, device=y.device)
        out = out.index_add(2, base + i * dd, y)
    out = out[:, :, pd:pd + d_out]
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    if narrow is not None:
        out = out.to(narrow)
    return out.squeeze(0) if unbatched else out
