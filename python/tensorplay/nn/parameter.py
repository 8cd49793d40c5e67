"""nn.Parameter: a tensor that a Module registers as one of its parameters.

Parameter is a real Python subclass of the C++-bound Tensor: `isinstance(p,
nn.Parameter)` works and every operator accepts it. Its C++ part is built
with `Tensor(other)`, which shares `other`'s TensorImpl; we pass a detached
alias so the parameter is a fresh leaf that shares storage with `data`
(the semantics users expect from torch.nn.Parameter).
"""
from .. import _C


class Parameter(_C.Tensor):
    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = _C._op_functions["empty"](0)
        if not isinstance(data, _C.Tensor):
            raise TypeError(f"Parameter: expected a Tensor as data, got {type(data).__name__}")
        super().__init__(data.detach())
        self.requires_grad_(bool(requires_grad))

    def __repr__(self):
        return "Parameter containing:\n" + _C.Tensor.__repr__(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.detach().clone(), self.requires_grad)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        # Pickled as its data plus the flag; see serialization.py.
        from ..serialization import _reduce_parameter
        return _reduce_parameter(self)


class Buffer(_C.Tensor):
    """A tensor that a Module registers as a buffer when assigned as an attribute
    (`self.running = nn.Buffer(t, persistent=False)`), as PyTorch's nn.Buffer."""

    def __init__(self, data=None, *, persistent=True):
        if data is None:
            data = _C._op_functions["empty"](0)
        if not isinstance(data, _C.Tensor):
            raise TypeError(f"Buffer: expected a Tensor as data, got {type(data).__name__}")
        super().__init__(data.detach())
        self.requires_grad_(bool(data.requires_grad))
        self.persistent = persistent
