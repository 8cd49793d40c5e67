"""tp.backends: switches of the math libraries behind the operators.

``tp.backends.cuda.matmul.allow_tf32``: float32 CUDA matmuls may use TF32
tensor cores (10-bit mantissa inputs, float32 accumulation). Off by default,
so float32 products on the GPU match float32 ones on the CPU. It also governs
float32 convolutions through cuDNN (conv2d ran as a matmul before cuDNN).

``tp.backends.cudnn.enabled``: conv2d on CUDA runs through cuDNN where it
loads (``tp.backends.cudnn.is_available()``); False sends it to im2col + cuBLASLt.
"""
from . import _C


class _CudaMatmul:
    @property
    def allow_tf32(self):
        return _C._cuda.allow_tf32()

    @allow_tf32.setter
    def allow_tf32(self, on):
        _C._cuda.set_allow_tf32(bool(on))


class _Cuda:
    matmul = _CudaMatmul()


cuda = _Cuda()


class _Cudnn:
    @property
    def enabled(self):
        return _C._cuda.cudnn_enabled()

    @enabled.setter
    def enabled(self, on):
        _C._cuda.set_cudnn_enabled(bool(on))

    def is_available(self):
        from . import cuda as _cuda_module
        return _cuda_module.is_cudnn_available()

    def version(self):
        """cuDNN's version (e.g. 92801), or None when it does not load."""
        return _C._cuda.cudnn_version() or None


cudnn = _Cudnn()
