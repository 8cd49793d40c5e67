"""BatchNorm1d/2d/3d: batch statistics in training (updating running averages), running statistics in eval."""
import tensorplay as _tp
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import _check_device
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


class _BatchNorm(Module):
    _allowed_dims = ()
    _version = 2  # version 2 added num_batches_tracked (PyTorch's numbering)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # A checkpoint older than num_batches_tracked, or a state dict rebuilt without its
        # metadata (`{k.replace("module.", ""): v ...}`), loads with the count as it is, as in
        # PyTorch; a strict load of one made by state_dict() (version 2) still requires it.
        version = local_metadata.get("version", None)
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                               else _tp.tensor(0, dtype=_tp.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        _check_device(device)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(_tp.empty(num_features, dtype=dtype))
            if bias:
                self.bias = Parameter(_tp.empty(num_features, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _tp.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", _tp.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", _tp.zeros(1, dtype=_tp.int64).reshape([]))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def _check_input_dim(self, input):
        if input.dim() not in self._allowed_dims:
            want = " or ".join(f"{d}D" for d in self._allowed_dims)
            raise ValueError(f"{type(self).__name__}: expected {want} input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            # momentum=None means a cumulative (equal-weight) average over the batches seen.
            factor = 1.0 / self.num_batches_tracked.item() if self.momentum is None else self.momentum
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    _allowed_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _allowed_dims = (4,)


class BatchNorm3d(_BatchNorm):
    _allowed_dims = (5,)
