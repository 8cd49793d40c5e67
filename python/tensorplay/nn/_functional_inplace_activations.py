"""The in-place activation spellings of tensorplay.nn.functional (relu_, elu_, leaky_relu_,
hardtanh_, threshold_, selu_, celu_, rrelu_): the activation with inplace=True. Re-exported by
functional.py."""
from .functional import (celu, elu, hardtanh, leaky_relu, relu, selu)
from ._functional_more import (rrelu, threshold)

__all__ = ["relu_", "elu_", "leaky_relu_", "hardtanh_", "threshold_", "selu_", "celu_", "rrelu_"]


def relu_(input):
    return relu(input, inplace=True)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input, threshold_value, value):
    return threshold(input, threshold_value, value, inplace=True)


def selu_(input):
    return selu(input, inplace=True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)
