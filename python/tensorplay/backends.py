"""tp.backends: switches of the math libraries behind the operators.

``tp.backends.cuda.matmul.allow_tf32``: float32 CUDA matmuls may use TF32
tensor cores (10-bit mantissa inputs, float32 accumulation). Off by default,
so float32 products on the GPU match float32 ones on the CPU.
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
