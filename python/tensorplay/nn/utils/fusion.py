"""Folding an eval-mode BatchNorm into the convolution or linear layer before it
(tensorplay.nn.utils.fuse_conv_bn_eval & co., PyTorch's names): y = BN(W x + b)
with frozen statistics is one affine map, W' = W * s, b' = (b - mean) * s + beta,
s = gamma / sqrt(var + eps) -- one layer less at inference."""
import copy

import tensorplay as _tp

from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _bn_terms(bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    scale = _tp.rsqrt(bn_rv + bn_eps)
    if bn_w is not None:
        scale = bn_w * scale
    shift = bn_b if bn_b is not None else _tp.zeros_like(bn_rm)
    return scale, shift


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(weight, bias) Parameters of the convolution that computes bn(conv(x)) in eval mode."""
    dtype = conv_w.dtype
    scale, shift = _bn_terms(bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    if conv_b is None:
        conv_b = _tp.zeros_like(bn_rm)
    # out-channels are dim 0 of a convolution's weight, dim 1 of a transposed one's
    shape = [1, -1] + [1] * (conv_w.dim() - 2) if transpose else [-1] + [1] * (conv_w.dim() - 1)
    w = (conv_w * scale.reshape(shape)).to(dtype)
    b = ((conv_b - bn_rm) * scale + shift).to(dtype)
    return Parameter(w, conv_w.requires_grad), Parameter(b, conv_b.requires_grad)


def _fused_copy(fn, layer, bn, fuse_weights):
    """A copy of `layer` with the weight and bias fuse_weights gives for it and `bn`."""
    if layer.training or bn.training:
        raise ValueError(f"{fn}: fusion only for eval! (call .eval() on both modules)")
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError(f"{fn}: the batch norm must track running statistics")
    fused = copy.deepcopy(layer)
    fused.weight, fused.bias = fuse_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps,
                                            bn.weight, bn.bias)
    return fused


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of `conv` that computes bn(conv(x)); both must be in eval mode."""
    return _fused_copy("fuse_conv_bn_eval", conv, bn,
                       lambda *args: fuse_conv_bn_weights(*args, transpose=transpose))


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) Parameters of the linear layer that computes bn(linear(x)) in eval mode."""
    if linear_w.shape[0] != bn_rm.shape[0] and bn_rm.shape[0] != 1:
        raise ValueError(f"fuse_linear_bn_weights: the linear layer's out_features ({linear_w.shape[0]}) must match "
                         f"the batch norm's num_features ({bn_rm.shape[0]}), or the latter be 1")
    scale, shift = _bn_terms(bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    if linear_b is None:
        linear_b = _tp.zeros_like(bn_rm)
    w = linear_w * scale.unsqueeze(-1)
    b = (linear_b - bn_rm) * scale + shift
    return Parameter(w, linear_w.requires_grad), Parameter(b, linear_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of `linear` that computes bn(linear(x)); both must be in eval mode."""
    return _fused_copy("fuse_linear_bn_eval", linear, bn, fuse_linear_bn_weights)
