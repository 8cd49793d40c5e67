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
