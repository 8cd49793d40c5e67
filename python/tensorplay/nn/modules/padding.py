"""The padding layers: Zero/Constant/Reflection/Replication/CircularPad 1d-3d, each a module over
F.pad with its mode and the number of trailing dims it pads."""
from .. import functional as F
from .module import Module

__all__ = ["ZeroPad1d", "ConstantPad1d", "ReflectionPad1d", "ReplicationPad1d", "CircularPad1d", "ZeroPad2d",
           "ConstantPad2d", "ReflectionPad2d", "ReplicationPad2d", "CircularPad2d", "ZeroPad3d", "ConstantPad3d",
           "ReflectionPad3d", "ReplicationPad3d", "CircularPad3d"]


class _PadNd(Module):
    _mode = "constant"
    _nd = 1

    def __init__(self, padding, value=0.0):
        super().__init__()
        if isinstance(padding, int):
            padding = (padding,) * (2 * self._nd)
        padding = tuple(int(p) for p in padding)
        if len(padding) != 2 * self._nd:
            raise ValueError(f"{type(self).__name__}: padding must be an int or a {2 * self._nd}-tuple, got "
                             f"{padding!r}")
        self.padding = padding
        self.value = value

    def forward(self, input):
        if input.dim() not in (self._nd + 1, self._nd + 2):
            raise ValueError(f"{type(self).__name__}: expected {self._nd + 1}D or {self._nd + 2}D input, got "
                             f"input of shape {tuple(input.shape)}")
        if self._mode == "constant":
            return F.pad(input, self.padding, mode="constant", value=self.value)
        return F.pad(input, self.padding, mode=self._mode)

    def extra_repr(self):
        return f"padding={self.padding}" + (f", value={self.value}" if self._mode == "constant" else "")


def _pad_class(name, mode, nd, constant_arg):
    if constant_arg:
        def __init__(self, padding, value):
            _PadNd.__init__(self, padding, value)
    elif mode == "constant":  # ZeroPad
        def __init__(self, padding):
            _PadNd.__init__(self, padding, 0.0)
    else:
        def __init__(self, padding):
            _PadNd.__init__(self, padding)
    return type(name, (_PadNd,), {"_mode": mode, "_nd": nd, "__init__": __init__, "__module__": __name__,
                                  "__doc__": f"Pads the last {nd} dims ({mode} mode); padding is an int or "
                                             f"(left, right{', top, bottom' if nd > 1 else ''}"
                                             f"{', front, back' if nd > 2 else ''})."})


for _nd in (1, 2, 3):
    globals()[f"ZeroPad{_nd}d"] = _pad_class(f"ZeroPad{_nd}d", "constant", _nd, False)
    globals()[f"ConstantPad{_nd}d"] = _pad_class(f"ConstantPad{_nd}d", "constant", _nd, True)
    globals()[f"ReflectionPad{_nd}d"] = _pad_class(f"ReflectionPad{_nd}d", "reflect", _nd, False)
    globals()[f"ReplicationPad{_nd}d"] = _pad_class(f"ReplicationPad{_nd}d", "replicate", _nd, False)
    globals()[f"CircularPad{_nd}d"] = _pad_class(f"CircularPad{_nd}d", "circular", _nd, False)
