"""F.bilinear: y = x1^T W x2 + b per output feature, one einsum. Re-exported by functional.py."""
import tensorplay as _tp
from .functional import _names_errors

__all__ = ["bilinear"]


@_names_errors
def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]."""
    if weight.dim() != 3:
        raise ValueError(f"bilinear: expected a 3D weight (out, in1, in2), got shape {tuple(weight.shape)}")
    if input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise ValueError(f"bilinear: input sizes {input1.shape[-1]} and {input2.shape[-1]} do not match the weight "
                         f"of shape {tuple(weight.shape)}")
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ValueError(f"bilinear: input1 and input2 must have the same leading dims, got {tuple(input1.shape)} "
                         f"and {tuple(input2.shape)}")
    y = _tp.einsum("...i,oij,...j->...o", input1, weight, input2)
    return y if bias is None else y + bias
