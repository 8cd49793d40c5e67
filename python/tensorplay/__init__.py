"""TensorPlay: tensors with eager execution and the Stax compiler.

    import tensorplay as tp
    cf = tp.compile(f)      # capture, fuse, generate C++, cache, run
    y = cf(x, w)

Everything that computes lives in the C++ extension ``tensorplay._C``; this
package only arranges the Python-facing names.
"""
import math as _math
import os as _os

from . import _C
from ._C import (  # noqa: F401  (re-exported API)
    Tensor,
    dtype,
    device,
    memory_format,
    from_numpy,
    is_grad_enabled, set_num_threads, get_num_threads,
    promote_types, can_cast, result_type, get_default_dtype, set_default_dtype,
)
# Every registered operator with a schema (generated in C++, op_binding.cpp);
# these replace the hand-written bindings of the same name.
globals().update(_C._op_functions)
from ._sort_api import unique, unique_consecutive  # noqa: E402  (PyTorch's return convention)
from . import _misc_api  # noqa: E402
_misc_api.install()  # allclose/equal (Python bools), new_* methods, type(), as_tensor, is_tensor, ...
from ._factories import *  # noqa: F401,F403,E402  (Generator, seeds, einsum's varargs form)
from . import _ops_dunders  # noqa: E402
_ops_dunders.install()  # &, |, ^, ~, <<, >>, **, //, % and their reflected / in-place forms
from ._tensor import tensor, _install_tensor_extras
from ._grad_mode import no_grad, enable_grad, set_grad_enabled, inference_mode, is_inference_mode_enabled
from ._deterministic import (  # noqa: F401,E402
    use_deterministic_algorithms, are_deterministic_algorithms_enabled,
    is_deterministic_algorithms_warn_only_enabled,
)
from ._C import from_dlpack  # noqa: F401  (dlpack.cpp)
from ._tensor_str import set_printoptions  # noqa: F401
from . import autograd  # noqa: F401
from . import cuda  # noqa: F401,E402  (tp.cuda: loaded at run time, works without a GPU)
from . import backends  # noqa: F401,E402  (tp.backends.cuda.matmul.allow_tf32)
from . import compiler  # noqa: F401
from .compiler import compile  # noqa: F401  (tp.compile shadows the builtin on purpose, like torch.compile)
from .compiler import mark_dynamic, mark_static  # noqa: F401  (dynamic shapes)
from ._C import SymInt  # noqa: F401
from . import linalg  # noqa: F401,E402  (tp.linalg over LAPACK; also tp.det, Tensor.inverse, ...)
linalg._install()
from . import _composite_api  # noqa: E402
_composite_api.install()  # ravel, tensordot, kron, fmax, cov, quantile, ...: compositions of operators
from . import _scatter_api  # noqa: E402
_scatter_api.install()  # index_reduce, put, diagonal_scatter: compositions of scatter operators
from . import _inplace_views  # noqa: E402
_inplace_views.install()  # squeeze_, unsqueeze_, t_, transpose_, resize_, ...
from . import _linalg_lu  # noqa: E402
_linalg_lu.install()  # linalg.lu_factor(_ex), lu, lu_solve, tp.lu_unpack over linalg_lu_factor_ex
from . import _creation_api  # noqa: E402
_creation_api.install()  # asarray, frombuffer, set_default_device, get_default_device
from . import _random_counts  # noqa: E402
_random_counts.install()  # poisson, binomial
from . import _linalg_legacy  # noqa: E402
_linalg_legacy.install()  # cholesky_solve, cholesky_inverse, triangular_solve over linalg.solve_triangular
from . import _float_classify_api  # noqa: E402
_float_classify_api.install()  # isposinf, isneginf, isreal, frexp, nextafter
from . import _torch_spellings  # noqa: E402
_torch_spellings.install()  # torch.<functional op> top-level names, vdot, rsub, empty_strided, ...
from . import _storage  # noqa: E402
_storage.install()  # Tensor.untyped_storage(), storage(), is_set_to
from . import special  # noqa: F401,E402  (tp.special: lgamma, digamma, polygamma, i0, ... and torch.special aliases)
from . import nn, optim  # noqa: F401,E402  (tp.distributions loads on first use: __getattr__ below)
from . import func  # noqa: F401,E402  (tp.func: jvp/vjp/grad/jacrev/jacfwd/vmap; also loads tp.autograd.forward_ad)
from .func import vmap  # noqa: F401,E402  (torch.vmap spelling)
from . import utils  # noqa: F401,E402  (tp.utils.checkpoint, tp.utils.data)
from . import random  # noqa: F401,E402  (tp.random: fork_rng and the seeding functions)
from . import amp  # noqa: F401,E402  (tp.amp: autocast + GradScaler; the casts happen in the dispatcher)
from . import cpu  # noqa: F401,E402  (tp.cpu.amp spellings)
from .amp.autocast_mode import (  # noqa: F401,E402  (torch.autocast & co. spellings)
    autocast, is_autocast_enabled, set_autocast_enabled, get_autocast_dtype, set_autocast_dtype,
    is_autocast_cpu_enabled, get_autocast_cpu_dtype, get_autocast_gpu_dtype, is_autocast_cache_enabled,
    set_autocast_cache_enabled, clear_autocast_cache,
)
from . import (  # noqa: E402  (PyTorch names composed in Python, one concept per module)
    _dtype_info, _random_fills, _broadcasting, _real_only_complex, _special_methods, _inplace_forms,
    _matmul_precision, _window_functions, _tensor_properties,
)
for _m in (_dtype_info, _random_fills, _broadcasting, _real_only_complex, _special_methods, _inplace_forms,
           _matmul_precision, _window_functions, _tensor_properties):
    _m.install()
del _m
pi, e, inf, nan, newaxis = _math.pi, _math.e, _math.inf, _math.nan, None  # noqa: E402
from .serialization import save, load  # noqa: F401,E402

contiguous_format = memory_format.contiguous_format
preserve_format = memory_format.preserve_format
channels_last = memory_format.channels_last
channels_last_3d = memory_format.channels_last_3d

bool = dtype.bool  # noqa: A001
uint8 = dtype.uint8
int8 = dtype.int8
int16 = dtype.int16
short = dtype.int16
int32 = dtype.int32
int = dtype.int32  # noqa: A001
int64 = dtype.int64
long = dtype.int64
float16 = dtype.float16
half = dtype.float16
bfloat16 = dtype.bfloat16
float32 = dtype.float32
float = dtype.float32  # noqa: A001
float64 = dtype.float64
double = dtype.float64


def _find_blas():
    # OpenBLAS comes from the scipy-openblas32 wheel and is loaded at run time
    # (dlopen), so the extension has no link-time dependency on it. It is
    # loaded at the first GEMM, not here: loading starts its worker threads,
    # whose spin would cost every import ~0.1 s of CPU (a first compile's g++
    # shares the cores with it).
    # The wheel's module is not imported for its path: importing it loads the
    # library (ctypes), which is what we defer.
    import importlib.util as _iu
    spec = _iu.find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:
        return
    lib_dir = _os.path.join(list(spec.submodule_search_locations)[0], "lib")
    try:
        names = sorted(n for n in _os.listdir(lib_dir) if n.startswith("libscipy_openblas") and n.endswith(".so"))
    except OSError:
        return
    if names:
        _C._prefer_blas_library(_os.path.join(lib_dir, names[0]))


_find_blas()
_install_tensor_extras()

__version__ = "0.1.0"


def __getattr__(name):
    # tp.testing is imported on first use: `import tensorplay` stays as fast as
    # before (it is part of every cold start the benchmark measures).
    # So are tp.profiler and tp.distributions.
    if name in ("testing", "profiler", "distributions"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'tensorplay' has no attribute {name!r}")
