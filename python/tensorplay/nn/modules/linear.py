"""Linear (y = x W^T + b), Bilinear (y = x1^T A x2 + b) and Identity."""
import math

import tensorplay as _tp
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear"]


def _check_device(device):
    # Any CPU spelling passes; another device raises RuntimeError naming it.
    _tp._C._check_device(device, "nn.Module")


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        _check_device(device)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(_tp.empty(out_features, in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(_tp.empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # Kaiming-uniform with a=sqrt(5) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the same bound as the bias.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """y = x1^T A x2 + b with A of shape (out_features, in1_features, in2_features); weight and
    bias initialized from U(-1/sqrt(in1_features), 1/sqrt(in1_features)) as PyTorch's."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        _tp._C._check_device(device, "nn.Module")
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(_tp.empty(out_features, in1_features, in2_features, dtype=dtype))
        if bias:
            self.bias = Parameter(_tp.empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
