"""Python operator methods of Tensor that map onto the math operators
(&, |, ^, ~, <<, >>, **, //, % and their reflected and in-place forms).

Each one calls the generated operator function, so type promotion, broadcasting
and error messages are the operator's own. `install()` is called once by the
package; it only adds methods the binding does not define itself.
"""
import numbers

from . import _C


def _operand(x):
    # A SymInt (a size while a dynamic-shape capture runs: `x ** (x.shape[1] - 2)`, `x % n`) is a
    # number like the int it is in eager; refusing it raised "unsupported operand type(s)" only
    # when compiled.
    return isinstance(x, (_C.Tensor, numbers.Number, _C.SymInt))


def _reflected(name):
    def method(self, other):
        if not _operand(other):
            return NotImplemented
        return _op(name)(other, self)
    return method


def _inplace(name):
    def method(self, other):
        if not _operand(other):
            return NotImplemented
        return getattr(self, name + "_")(other)
    return method


def _op(name):
    import tensorplay
    return getattr(tensorplay, name)


_BINARY = {
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
    "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
    "pow": "pow",
    "floordiv": "floor_divide",
    "mod": "remainder",
}


def install():
    T = _C.Tensor
    for dunder, op in _BINARY.items():
        setattr(T, f"__{dunder}__", lambda self, other, _n=op: _forward_call(_n, self, other))
        setattr(T, f"__r{dunder}__", _reflected(op))
        setattr(T, f"__i{dunder}__", _inplace(op))
    T.__invert__ = lambda self: _op("bitwise_not")(self)
    # As torch.Tensor: NumPy defers to the tensor's reflected operator, so
    # `np.float32(0.5) * t` is a Tensor (with its autograd history). Without it
    # the NumPy scalar converted t with __array__: an ndarray, detached from the
    # graph, and for a tensor that requires grad an error about numpy().
    T.__array_priority__ = 1000
    if not hasattr(T, "__abs__"):
        T.__abs__ = lambda self: _op("abs")(self)


def _forward_call(name, self, other):
    if not _operand(other):
        return NotImplemented
    return _op(name)(self, other)
