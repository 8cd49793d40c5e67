"""tp.autograd.Variable: PyTorch's pre-0.4 wrapper, still in old code. Tensors
carry autograd themselves now, so Variable(t) is a new tensor over t's memory
without history (requires_grad as given), and isinstance(x, Variable) is True
for every tensor -- what PyTorch does."""
from .. import _C


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.Tensor)


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if data is None:
            import tensorplay as tp
            return tp.empty(0).requires_grad_(requires_grad)
        if not isinstance(data, _C.Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            import warnings
            warnings.warn("volatile was removed and now has no effect. Use `with tp.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        return data.detach().requires_grad_(bool(requires_grad))


def is_tensor_like(inp):
    """True for tensors (TensorPlay has no __torch_function__ overrides)."""
    return isinstance(inp, _C.Tensor)
