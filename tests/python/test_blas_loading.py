"""OpenBLAS is loaded at the first GEMM, not at `import tensorplay`: loading it
starts worker threads whose spin costs every import's first ~0.1 s of CPU (a
first compile's g++ shared the cores with it)."""
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import importlib.util
    import os
    import tensorplay as tp

    # the wheel's lib folder (numpy's own OpenBLAS lives elsewhere); importing
    # scipy_openblas32 would load the library itself
    LIB = os.path.join(list(importlib.util.find_spec("scipy_openblas32").submodule_search_locations)[0], "lib")

    def blas_mapped():
        with open("/proc/self/maps") as f:
            return any(LIB in line for line in f)

    before = blas_mapped()
    y = (tp.ones(3, 4) * 2).sum()  # no GEMM: no BLAS
    middle = blas_mapped()
    z = tp.ones(2, 3) @ tp.ones(3, 2)
    after = blas_mapped()
    print(before, middle, after, z.tolist(), tp._C._blas_library())
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_openblas_is_loaded_at_the_first_gemm_not_at_import():
    pytest.importorskip("scipy_openblas32")
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, middle, after, z, path = out.stdout.split(" ", 4)
    assert (before, middle, after) == ("False", "False", "True"), out.stdout
    assert "[[3.0, 3.0], [3.0, 3.0]]" in out.stdout
    assert "openblas" in path


CHILD_PARALLEL_FIRST = textwrap.dedent("""
    import ctypes, importlib.util, os
    import numpy as np
    import tensorplay as tp

    tp.set_num_threads(2)
    a, b = tp.randn(4, 128, 128), tp.randn(4, 128, 128)
    c = a @ b  # the process's first GEMMs: one product per thread, BLAS set to one thread first
    np.testing.assert_allclose(c.numpy(), a.numpy() @ b.numpy(), rtol=1e-4, atol=1e-4)
    lib_dir = os.path.join(list(importlib.util.find_spec("scipy_openblas32").submodule_search_locations)[0], "lib")
    name = [n for n in os.listdir(lib_dir) if n.startswith("libscipy_openblas") and n.endswith(".so")][0]
    lib = ctypes.CDLL(os.path.join(lib_dir, name))  # the handle already loaded
    print(lib.scipy_openblas_get_num_threads())
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="dlopen semantics")
def test_first_gemms_inside_a_parallel_region_find_blas_on_one_thread():
    # Regression: with the library loaded lazily, use_one_thread() before the
    # first GEMM found nothing loaded and left BLAS at its default thread count
    # for the GEMMs that each of our threads runs.
    pytest.importorskip("scipy_openblas32")
    out = subprocess.run([sys.executable, "-c", CHILD_PARALLEL_FIRST], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "1", out.stdout
