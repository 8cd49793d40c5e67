"""tp.finfo / tp.iinfo (the machine limits of a dtype, PyTorch's fields) and
Tensor.is_signed / tp.is_signed."""
import sys

from ._C import Tensor


def _tp():
    return sys.modules[__package__]


def _is_float(dtype):
    tp = _tp()
    return dtype in (tp.float16, tp.bfloat16, tp.float32, tp.float64)


class finfo:
    """Machine limits of a floating point dtype (PyTorch's torch.finfo fields)."""
    _TABLE = {
        # bits, eps, max, tiny (smallest normal), smallest subnormal, resolution, mantissa bits
        "float16": (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 2.0 ** -24, 1e-3, 10),
        "bfloat16": (16, 2.0 ** -7, 3.3895313892515355e38, 1.1754943508222875e-38, 9.183549615799121e-41, 0.01, 7),
        "float32": (32, 2.0 ** -23, 3.4028234663852886e38, 1.1754943508222875e-38, 1.401298464324817e-45, 1e-6, 23),
        "float64": (64, 2.0 ** -52, 1.7976931348623157e308, 2.2250738585072014e-308, 5e-324, 1e-15, 52),
    }

    def __init__(self, type=None):  # noqa: A002
        tp = _tp()
        if type is None:
            type = tp.get_default_dtype()  # noqa: A001
        name = str(type).split(".")[-1]
        if name not in self._TABLE:
            raise TypeError(f"finfo: expects a floating point dtype, got {type}")
        self.dtype = name
        (self.bits, self.eps, self.max, self.tiny, self.smallest_subnormal, self.resolution,
         self._digits) = self._TABLE[name]
        self.min = -self.max
        self.smallest_normal = self.tiny

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype (PyTorch's torch.iinfo fields: bits, min, max, dtype)."""
    _TABLE = {"uint8": (8, 0, 255), "int8": (8, -128, 127), "int16": (16, -32768, 32767),
              "int32": (32, -2 ** 31, 2 ** 31 - 1), "int64": (64, -2 ** 63, 2 ** 63 - 1), "bool": (8, 0, 1)}

    def __init__(self, type):  # noqa: A002
        name = str(type).split(".")[-1]
        if name not in self._TABLE or name == "bool":
            raise TypeError(f"iinfo: expects an integer dtype, got {type}")
        self.dtype = name
        self.bits, self.min, self.max = self._TABLE[name]

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def is_signed(input):
    tp = _tp()
    return input.dtype not in (tp.uint8, tp.bool)


def install():
    tp = _tp()
    for name in ("finfo", "iinfo", "is_signed"):
        if not hasattr(tp, name):
            setattr(tp, name, globals()[name])
    Tensor.is_signed = is_signed
