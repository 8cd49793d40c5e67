"""Python-level helpers whose PyTorch signatures do not fit an operator schema:
functions returning Python bools (allclose, equal), varargs forms of list
operators (meshgrid, cartesian_prod), type queries and the Tensor.new_*
constructors. `install()` puts them on the tensorplay namespace and Tensor."""
import sys

from . import _C
from ._lazy_numpy import is_ndarray
from ._C import Tensor

_TYPE_NAMES = {
    "float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor",
    "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor",
    "uint8": "ByteTensor", "bool": "BoolTensor",
}


def _tp():
    return sys.modules[__package__]


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element of `input` is close to the matching one of `other` (see isclose)."""
    return bool(_tp().isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan).all().item())


def equal(input, other):
    """True when both tensors have the same shape and the same values (different shapes -> False)."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(_tp().eq(input, other).all().item())


def _tensor_list(tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


# The generated list-taking operators, saved by install() before the varargs
# forms below replace them on the namespace.
_generated = {}


def meshgrid(*tensors, indexing=None):
    """meshgrid(a, b, ...) or meshgrid([a, b, ...]); indexing 'ij' (default) or 'xy'."""
    return tuple(_generated["meshgrid"](_tensor_list(tensors), indexing=indexing))


def cartesian_prod(*tensors):
    return _generated["cartesian_prod"](_tensor_list(tensors))


def block_diag(*tensors):
    """block_diag(a, b, ...): the tensors (0-d, 1-D or 2-D) as blocks along the diagonal."""
    return _generated["block_diag"](list(tensors))


def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """(hist, bin_edges): `bins` an edge count or a 1-D tensor of increasing edges; `range` a pair (min, max)."""
    gen = _generated["histogram"]
    if isinstance(bins, Tensor):
        if range is not None:
            raise TypeError("histogram: range cannot be given together with a tensor of bin edges")
        return gen(input, bins, weight=weight, density=density)
    lo = hi = None
    if range is not None:
        if len(range) != 2:
            raise ValueError(f"histogram: range must be a pair (min, max), got {range!r}")
        lo, hi = float(range[0]), float(range[1])
    return gen(input, bins, range_min=lo, range_max=hi, weight=weight, density=density)


def _histogram_method(self, bins=100, *, range=None, weight=None, density=False):
    return histogram(self, bins, range=range, weight=weight, density=density)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of `elements` is in `test_elements` (either may be a Python number)."""
    gen = _generated["isin"]
    if not isinstance(elements, Tensor):
        if not isinstance(test_elements, Tensor):
            raise TypeError("isin: expected at least one of elements and test_elements to be a tensor")
        return gen(_scalar_like(elements, test_elements), test_elements, assume_unique=assume_unique, invert=invert)
    return gen(elements, test_elements, assume_unique=assume_unique, invert=invert)


def _scalar_like(value, like):
    """A 0-d tensor of a Python number on `like`'s device (isin promotes the pair as PyTorch does)."""
    tp = _tp()
    t = tp.tensor(value)
    return t.to(like.device) if like.device.type != "cpu" else t


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_floating_point(input):
    return input.is_floating_point()


def numel(input):
    return input.numel()


def is_nonzero(input):
    """The truth value of a one-element tensor."""
    if input.numel() != 1:
        raise RuntimeError(f"is_nonzero: expected a tensor with a single value, got shape {tuple(input.shape)}")
    return bool(input.item())


def as_tensor(data, dtype=None, device=None):
    """A tensor sharing `data`'s memory when possible: a tensor of the right dtype is returned
    as is, a NumPy array of the right dtype is wrapped without a copy."""
    tp = _tp()
    _C._check_target_device(device, "as_tensor")
    if isinstance(data, Tensor):
        t = data if dtype is None or data.dtype == dtype else data.to(dtype)
    elif is_ndarray(data):
        t = tp.from_numpy(data)
        t = t if dtype is None or t.dtype == dtype else t.to(dtype)
    else:
        t = tp.tensor(data, dtype=dtype)
    return _C._to_target_device(t, device, "as_tensor")  # device=None keeps t where it is


def _size_args(size):
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        return tuple(size[0])
    return tuple(size)


def _new(factory):
    def method(self, *size, dtype=None, device=None, requires_grad=False, pin_memory=False):
        _C._check_target_device(device, "new_" + factory.__name__)
        _C._check_pin_memory(pin_memory, "new_" + factory.__name__)
        # PyTorch: self's device by default. Built there by the factory (not moved
        # afterwards), so a capture records a constant of that device.
        out = factory(_size_args(size), dtype=dtype if dtype is not None else self.dtype,
                      device=device if device is not None else self.device)
        return out.requires_grad_(True) if requires_grad else out
    return method


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
              pin_memory=False):
    _C._check_target_device(device, "new_full")
    _C._check_pin_memory(pin_memory, "new_full")
    out = _tp().full(tuple(size), fill_value, dtype=dtype if dtype is not None else self.dtype,
                     device=device if device is not None else self.device)
    return out.requires_grad_(True) if requires_grad else out


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    tp = _tp()
    _C._check_target_device(device, "new_tensor")
    _C._check_pin_memory(pin_memory, "new_tensor")
    if isinstance(data, Tensor):
        out = data.detach().clone().to(dtype if dtype is not None else data.dtype)
        out = out.to(device if device is not None else self.device)  # recorded: data may be computed
    else:
        out = tp.tensor(data, dtype=dtype if dtype is not None else self.dtype,
                        device=device if device is not None else self.device)
    return out.requires_grad_(True) if requires_grad else out


def _type(self, dtype=None):
    """No argument: the PyTorch-style type name ('tensorplay.FloatTensor'); with a dtype: a conversion."""
    if dtype is None:
        name = str(self.dtype).rsplit(".", 1)[-1]
        return "tensorplay." + _TYPE_NAMES.get(name, name)
    return self.to(dtype)


# In-place operators that PyTorch also offers as functions (torch.relu_(x)); the
# generated bindings make in-place operators methods only.
_INPLACE_FUNCTIONS = (
    "abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "asin_",
    "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "detach_",
    "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "log10_", "log1p_", "log2_",
    "log_", "logit_", "nan_to_num_", "neg_", "negative_", "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_",
    "sin_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "zero_",
)


def _fill_with_tensor(generated):
    """Tensor.fill_(value) where value is a 0-d tensor carrying a derivative
    (requires grad, or a dual level is open): fill_ takes a number, which would
    drop value's gradient and tangent, so it is written as a copy of the value
    expanded to self's shape (PyTorch's fill_.Tensor has these derivatives)."""

    def fill_(self, value):
        if (isinstance(value, Tensor) and value.dim() == 0 and value.dtype.is_floating_point
                and self.dtype.is_floating_point and (value.requires_grad or _C._fwd_current_level() >= 0)):
            return self.copy_(value.expand(tuple(self.shape)))
        return generated(self, value)

    fill_._tp_generated = generated
    fill_.__doc__ = generated.__doc__
    return fill_


def detach(input):
    return input.detach()


def get_device(input):
    return input.get_device()


def _where_method(self, condition, other):
    """x.where(condition, y): x where condition holds, else y (tensorplay.where(condition, x, y))."""
    return _tp().where(condition, self, other)


def _atleast(name):
    """atleast_Nd(t), atleast_Nd(t1, t2, ...) and atleast_Nd([t1, t2]) as in PyTorch:
    one tensor gives a tensor, several (or a sequence) a tuple."""
    op = getattr(_tp(), name)

    def atleast(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            return tuple(op(t) for t in tensors[0])
        if len(tensors) == 1:
            return op(tensors[0])
        return tuple(op(t) for t in tensors)

    atleast.__name__ = atleast.__qualname__ = name
    return atleast


def install():
    tp = _tp()
    for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        if getattr(getattr(tp, name), "__name__", "") == name and getattr(tp, name).__module__ == __name__:
            continue  # already installed
        setattr(tp, name, _atleast(name))
    for name in ("meshgrid", "cartesian_prod", "block_diag", "histogram", "isin"):
        current = getattr(tp, name)
        if current not in (meshgrid, cartesian_prod, block_diag, histogram, isin):
            _generated.setdefault(name, current)
    Tensor.histogram = _histogram_method
    for fn in (allclose, equal, meshgrid, cartesian_prod, block_diag, histogram, isin, is_tensor, is_floating_point,
               numel, is_nonzero, as_tensor, detach, get_device):
        setattr(tp, fn.__name__, fn)
    if not hasattr(Tensor.fill_, "_tp_generated"):
        Tensor.fill_ = _fill_with_tensor(Tensor.fill_)
    for name in _INPLACE_FUNCTIONS:
        method = getattr(Tensor, name, None)
        if method is not None and not hasattr(tp, name):
            setattr(tp, name, method)
    if not hasattr(Tensor, "where"):
        Tensor.where = _where_method
    Tensor.ndimension = Tensor.dim  # PyTorch's older names
    Tensor.nelement = Tensor.numel
    Tensor.allclose = allclose
    Tensor.equal = equal
    Tensor.is_nonzero = is_nonzero
    Tensor.new_zeros = _new(tp.zeros)
    Tensor.new_ones = _new(tp.ones)
    Tensor.new_empty = _new(tp.empty)
    Tensor.new_full = _new_full
    Tensor.new_tensor = _new_tensor
    Tensor.type = _type
