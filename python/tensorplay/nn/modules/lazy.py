"""LazyLinear: a Linear whose in_features is taken from the first input. Until then its weight
(and bias) are empty Parameters; the first forward gives them their shapes in place (the same
Parameter objects, through `.data`, so a reference taken earlier stays valid), initializes them
as Linear does, and the module becomes a Linear. Run one eager forward before tp.compile or an
optimizer's first step (a capture refuses the `.data` assignment)."""
import tensorplay as _tp
from ..parameter import Parameter
from .linear import Linear, _check_device
from .module import Module

__all__ = ["LazyLinear"]


class LazyLinear(Linear):
    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        Module.__init__(self)
        _check_device(device)
        self.in_features = 0
        self.out_features = out_features
        self.weight = Parameter(_tp.empty(0, dtype=dtype))
        if bias:
            self.bias = Parameter(_tp.empty(0, dtype=dtype))
        else:
            self.register_parameter("bias", None)

    def has_uninitialized_params(self):
        return True

    def reset_parameters(self):
        if self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if input.dim() < 1:
            raise ValueError(f"LazyLinear: the input must have at least 1 dimension, got shape {list(input.shape)}")
        self.in_features = int(input.shape[-1])
        dtype = self.weight.dtype
        with _tp.no_grad():
            self.weight.data = _tp.empty(self.out_features, self.in_features, dtype=dtype)
            if self.bias is not None:
                self.bias.data = _tp.empty(self.out_features, dtype=dtype)
            Linear.reset_parameters(self)
        self.__class__ = self.cls_to_become

    def forward(self, input):
        self.initialize_parameters(input)
        return Linear.forward(self, input)

    def extra_repr(self):
        return f"in_features=0 (set by the first input), out_features={self.out_features}, bias={self.bias is not None}"
