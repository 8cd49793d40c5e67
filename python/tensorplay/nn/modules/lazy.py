"""Lazy modules: a layer whose input size (Linear's in_features, a convolution's
in_channels, a norm's num_features) is taken from the first input, as
PyTorch's LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm* and
LazyInstanceNorm* do.

One mechanism for all of them: the lazy module is built as its target layer
with a placeholder size (inside fork_rng, so building it draws nothing from
the user's random stream), then every parameter and buffer is replaced by an
empty one. The first forward builds the target layer for the real size (its
constructor initializes the weights, drawing random numbers as the eager
layer would), moves those values into the same Parameter objects through
`.data` (a reference taken earlier, an optimizer's for instance, stays
valid), and the module becomes the target class. Run one eager forward before
tp.compile (a capture refuses the `.data` assignment)."""
import tensorplay as _tp
from ..parameter import Parameter
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .conv import Conv1d, Conv2d, Conv3d
from .extra_layers import (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, InstanceNorm1d, InstanceNorm2d,
                           InstanceNorm3d)
from .linear import Linear
from .module import Module

__all__ = ["LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]

# Module bookkeeping that belongs to the lazy module itself, never copied from a built layer.
_OWN = {"training", "_parameters", "_buffers", "_non_persistent_buffers_set", "_modules", "_forward_pre_hooks",
        "_forward_hooks", "_backward_pre_hooks", "_backward_hooks", "_compiled_call"}


class _LazyMixin:
    """cls_to_become: the target layer. _size_attr: the attribute the first input sets.
    _placeholder: a size the target's constructor accepts (for the placeholder build)."""
    cls_to_become = None
    _size_attr = ""

    def _lazy_setup(self, args, kwargs, placeholder):
        with _tp.random.fork_rng():
            proto = self.cls_to_become(placeholder, *args, **kwargs)
        Module.__init__(self)
        self._lazy_args, self._lazy_kwargs = args, dict(kwargs)
        for k, v in proto.__dict__.items():
            if k not in _OWN:
                object.__setattr__(self, k, v)
        for name, p in proto._parameters.items():
            self._parameters[name] = None if p is None else Parameter(_tp.empty(0, dtype=p.dtype),
                                                                      requires_grad=p.requires_grad)
        for name, b in proto._buffers.items():
            self._buffers[name] = None if b is None else _tp.empty(0, dtype=b.dtype)
        self._non_persistent_buffers_set.update(proto._non_persistent_buffers_set)
        object.__setattr__(self, self._size_attr, 0)
        # A forward pre-hook (as in PyTorch) initializes at the first call, before
        # any other hook or the forward sees the module. tp.compile(model) sees a
        # hook on a submodule and runs that call eagerly; the hook removes itself.
        self._lazy_hook = self.register_forward_pre_hook(_LazyMixin._lazy_pre_hook, with_kwargs=True)

    @staticmethod
    def _lazy_pre_hook(module, args, kwargs):
        module.initialize_parameters(args[0] if args else next(iter(kwargs.values()), None))

    def has_uninitialized_params(self):
        return True

    def reset_parameters(self):
        pass  # nothing to initialize before the first input gives the shapes

    def reset_running_stats(self):
        pass

    def _input_size(self, input):  # the size the first input gives
        raise NotImplementedError

    def initialize_parameters(self, input):
        """Gives the parameters and buffers their shapes from `input` and
        makes this module an instance of cls_to_become."""
        if _tp._C._is_tracing():
            from ...compiler import CaptureError
            raise CaptureError(f"{type(self).__name__}: a lazy module gets its parameters' shapes from its first "
                               "input, and that call cannot be captured (it creates parameters); run one eager "
                               "call first, or compile the model itself (tp.compile(model) runs its first call "
                               "eagerly)")
        if not isinstance(input, _tp.Tensor):
            raise TypeError(f"{type(self).__name__}: expected a Tensor input, got {type(input).__name__}")
        size = int(self._input_size(input))
        if size <= 0:
            raise ValueError(f"{type(self).__name__}: the input's {self._size_attr} must be positive, got {size} "
                             f"(input shape {list(input.shape)})")
        real = self.cls_to_become(size, *self._lazy_args, **self._lazy_kwargs)
        with _tp.no_grad():
            # .to(device) / .double() before the first call moved the empty tensors:
            # the real values follow them there
            for name, p in real._parameters.items():
                if p is not None:
                    old = self._parameters[name]
                    self._parameters[name].data = p.data.to(device=old.device, dtype=old.dtype)
            for name, b in real._buffers.items():
                old = self._buffers.get(name)
                if b is not None and old is not None:
                    b = b.to(device=old.device, dtype=old.dtype if b.is_floating_point() else b.dtype)
                self._buffers[name] = b
        for k, v in real.__dict__.items():
            if k not in _OWN:
                object.__setattr__(self, k, v)
        self._lazy_hook.remove()
        del self._lazy_args, self._lazy_kwargs, self._lazy_hook
        self.__class__ = self.cls_to_become

    def forward(self, *args, **kwargs):  # module.forward(x) called directly, without the pre-hook
        target = self.cls_to_become
        self.initialize_parameters(args[0] if args else next(iter(kwargs.values()), None))
        return target.forward(self, *args, **kwargs)


def _channels(module, input, spatial):
    """Channels of a batched (N, C, *spatial) or unbatched (C, *spatial) input."""
    if input.dim() not in (spatial + 1, spatial + 2):
        raise ValueError(f"{type(module).__name__}: expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) "
                         f"input, got shape {list(input.shape)}")
    return input.shape[0] if input.dim() == spatial + 1 else input.shape[1]


class LazyLinear(_LazyMixin, Linear):
    cls_to_become = Linear
    _size_attr = "in_features"

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        self._lazy_setup((out_features,), dict(bias=bias, device=device, dtype=dtype), 1)

    def _input_size(self, input):
        if input.dim() < 1:
            raise ValueError(f"LazyLinear: the input must have at least 1 dimension, got shape {list(input.shape)}")
        return input.shape[-1]


class _LazyConvNd(_LazyMixin):
    _size_attr = "in_channels"

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, *rest, **kwargs):
        groups = kwargs.get("groups", 1)
        # the placeholder in_channels must be divisible by groups
        self._lazy_setup((out_channels, kernel_size, stride, padding) + tuple(rest), kwargs,
                         groups if isinstance(groups, int) and groups > 0 else 1)

    def _input_size(self, input):
        return _channels(self, input, self.cls_to_become._nd)


def _conv_kwargs(dilation=1, groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
    return dict(dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode, device=device, dtype=dtype)


def _conv_transpose_kwargs(output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                           dtype=None):
    return dict(output_padding=output_padding, groups=groups, bias=bias, dilation=dilation,
                padding_mode=padding_mode, device=device, dtype=dtype)


def _lazy_conv(target, doc_name):
    class _Lazy(_LazyConvNd, target):
        cls_to_become = target

        def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                     padding_mode="zeros", device=None, dtype=None):
            _LazyConvNd.__init__(self, out_channels, kernel_size, stride, padding,
                                 **_conv_kwargs(dilation, groups, bias, padding_mode, device, dtype))
    _Lazy.__name__ = _Lazy.__qualname__ = doc_name
    return _Lazy


def _lazy_conv_transpose(target, doc_name):
    class _Lazy(_LazyConvNd, target):
        cls_to_become = target

        def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                     dilation=1, padding_mode="zeros", device=None, dtype=None):
            _LazyConvNd.__init__(self, out_channels, kernel_size, stride, padding,
                                 **_conv_transpose_kwargs(output_padding, groups, bias, dilation, padding_mode,
                                                          device, dtype))
    _Lazy.__name__ = _Lazy.__qualname__ = doc_name
    return _Lazy


def _lazy_norm(target, doc_name, spatial, instance):
    class _Lazy(_LazyMixin, target):
        cls_to_become = target
        _size_attr = "num_features"

        # PyTorch's lazy norms (instance norms too) default to affine and running statistics.
        def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None,
                     *, bias=True):
            if instance and not bias:
                raise TypeError(f"{doc_name}: bias=False is not supported (InstanceNorm has no bias argument)")
            self._lazy_setup((eps, momentum, affine, track_running_stats, device, dtype),
                             {} if instance else {"bias": bias}, 1)

        def _input_size(self, input):
            if instance:
                return _channels(self, input, spatial)
            if input.dim() not in target._allowed_dims:
                want = " or ".join(f"{d}D" for d in target._allowed_dims)
                raise ValueError(f"{doc_name}: expected {want} input, got shape {list(input.shape)}")
            return input.shape[1]
    _Lazy.__name__ = _Lazy.__qualname__ = doc_name
    return _Lazy


LazyConv1d = _lazy_conv(Conv1d, "LazyConv1d")
LazyConv2d = _lazy_conv(Conv2d, "LazyConv2d")
LazyConv3d = _lazy_conv(Conv3d, "LazyConv3d")
LazyConvTranspose1d = _lazy_conv_transpose(ConvTranspose1d, "LazyConvTranspose1d")
LazyConvTranspose2d = _lazy_conv_transpose(ConvTranspose2d, "LazyConvTranspose2d")
LazyConvTranspose3d = _lazy_conv_transpose(ConvTranspose3d, "LazyConvTranspose3d")
LazyBatchNorm1d = _lazy_norm(BatchNorm1d, "LazyBatchNorm1d", 1, False)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d, "LazyBatchNorm2d", 2, False)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d, "LazyBatchNorm3d", 3, False)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d, "LazyInstanceNorm1d", 1, True)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d, "LazyInstanceNorm2d", 2, True)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d, "LazyInstanceNorm3d", 3, True)
