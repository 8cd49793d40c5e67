"""Conv1d, Conv2d and Conv3d (weight layout: out_channels x in_channels/groups x kernel)."""
import math

import tensorplay as _tp
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import _check_device
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d"]


def _ntuple(x, n):
    if isinstance(x, (list, tuple)):
        return tuple(x) if len(x) == n else tuple(x) * n
    return (x,) * n


class _ConvNd(Module):
    _nd = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        _check_device(device)
        name = type(self).__name__
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) "
                             f"must be divisible by groups ({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"{name}: padding_mode must be one of 'zeros', 'reflect', 'replicate' or 'circular', "
                             f"but got padding_mode={padding_mode!r}")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of ['valid', 'same']")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, self._nd)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        n = self._nd
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(_tp.empty(out_channels, in_channels // groups, *self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(_tp.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _pad_input(self, input):
        """(input, padding for the convolution): the non-zero padding modes pad explicitly
        (F.pad, last dimension first) and convolve without padding."""
        if self.padding_mode == "zeros":
            return input, self.padding
        if self.padding == "valid":
            return input, 0
        amounts = []
        for d in reversed(range(self._nd)):
            if self.padding == "same":
                total = self.dilation[d] * (self.kernel_size[d] - 1)
                amounts += [total // 2, total - total // 2]
            else:
                amounts += [self.padding[d], self.padding[d]]
        return F.pad(input, amounts, mode=self.padding_mode), 0

    def extra_repr(self):
        n = self._nd
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    _nd = 1

    def _conv_forward(self, input, weight, bias):
        """The convolution with the given weight and bias (PyTorch's hook for subclasses that
        transform the weight, such as weight standardization)."""
        input, padding = self._pad_input(input)
        return F.conv1d(input, weight, bias, self.stride, padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv2d(_ConvNd):
    _nd = 2

    def _conv_forward(self, input, weight, bias):
        """The convolution with the given weight and bias (PyTorch's hook for subclasses that
        transform the weight, such as weight standardization)."""
        input, padding = self._pad_input(input)
        return F.conv2d(input, weight, bias, self.stride, padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv3d(_ConvNd):
    _nd = 3

    def _conv_forward(self, input, weight, bias):
        """The convolution with the given weight and bias (PyTorch's hook for subclasses that
        transform the weight, such as weight standardization)."""
        input, padding = self._pad_input(input)
        return F.conv3d(input, weight, bias, self.stride, padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)
