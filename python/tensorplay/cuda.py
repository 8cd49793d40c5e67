"""tensorplay.cuda: the CUDA device, loaded at run time.

Nothing here needs a CUDA toolkit: the driver (libcuda.so.1) and NVRTC are
opened with dlopen on first use. NVRTC comes from the system or from NVIDIA's
``nvidia-cuda-nvrtc`` wheel (``pip install tensorplay[cuda]``), whose library
folder is found on ``sys.path`` below. Without a GPU, ``is_available()`` is
False, ``device_count()`` is 0 and every move to "cuda" raises RuntimeError.
"""
import glob as _glob
import os as _os
import sys as _sys

from . import _C

_rt = _C._cuda


def _nvrtc_candidates():
    # The wheel puts the library in nvidia/cu13/lib (CUDA 13) or
    # nvidia/cuda_nvrtc/lib (CUDA 12) inside a site-packages folder.
    found = []
    env = _os.environ.get("TP_NVRTC_PATH")
    if env:
        found.append(env)
    for base in _sys.path:
        for pattern in ("nvidia/cu*/lib/libnvrtc.so*", "nvidia/cuda_nvrtc/lib/libnvrtc.so*"):
            for path in sorted(_glob.glob(_os.path.join(base or ".", pattern)), reverse=True):
                if "builtins" not in _os.path.basename(path) and path not in found:
                    found.append(path)
    return found


_rt.add_nvrtc_candidates(_nvrtc_candidates())


def _cublaslt_candidates():
    # The nvidia-cublas wheel: nvidia/cu13/lib (CUDA 13) or nvidia/cublas/lib (CUDA 12).
    found = []
    env = _os.environ.get("TP_CUBLASLT_PATH")
    if env:
        found.append(env)
    for base in _sys.path:
        for pattern in ("nvidia/cu*/lib/libcublasLt.so*", "nvidia/cublas/lib/libcublasLt.so*"):
            for path in sorted(_glob.glob(_os.path.join(base or ".", pattern)), reverse=True):
                if path not in found:
                    found.append(path)
    return found


_rt.add_cublaslt_candidates(_cublaslt_candidates())


def is_cublaslt_available():
    """True when cuBLASLt (the CUDA matmul library) can be loaded; no GPU needed."""
    return _rt.cublaslt_available()


def is_available():
    """True when the CUDA driver is loadable and at least one GPU is present."""
    return _rt.is_available()


def device_count():
    return _rt.device_count()


def current_device():
    return _rt.current_device()


def set_device(device):
    _rt.set_device(device)


def synchronize(device=None):
    """Waits until every kernel and copy queued on `device` has finished."""
    _rt.synchronize(device)


def get_device_name(device=None):
    return _rt.get_device_name(device)


def get_device_capability(device=None):
    return _rt.get_device_capability(device)


def memory_allocated(device=None):
    """Bytes held by live tensors (block sizes, rounded to 512 bytes) on `device`."""
    return _rt.memory_stats(device)[0]


def max_memory_allocated(device=None):
    return _rt.memory_stats(device)[1]


def memory_reserved(device=None):
    """Bytes the caching allocator holds from the driver, in use or cached."""
    return _rt.memory_stats(device)[2]


def reset_peak_memory_stats(device=None):
    _rt.reset_peak_memory_stats(device)


def empty_cache():
    """Returns every cached, unused segment to the driver."""
    _rt.empty_cache()


def is_nvrtc_available():
    return _rt.nvrtc_available()


def _kernel_sources():
    """Every CUDA kernel source the eager CUDA kernels generate, as (name, source) pairs."""
    return _rt.kernel_sources()


def _nvrtc_compile(source, name, arch):
    """Compiles `source` with NVRTC for sm_<arch>; returns the CUBIN bytes (no GPU needed)."""
    return _rt.nvrtc_compile(source, name, arch)


class device:
    """Context manager that makes `device` the current CUDA device."""

    def __init__(self, device):
        self._index = device if isinstance(device, int) else _C.device(device).index or 0
        self._prev = None

    def __enter__(self):
        self._prev = current_device()
        set_device(self._index)

    def __exit__(self, *exc):
        set_device(self._prev)
        return False
