"""GEMMs run OpenBLAS on one thread and split a large product into blocks of
the result across TensorPlay's own OpenMP threads: two thread pools (OpenBLAS's
and ours), each spin-waiting after its work, took the cores from one another
(a transformer training step at 2 threads ran 1.6x slower than at 1)."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorplay as tp


@pytest.fixture(params=[1, 2, 3])
def threads(request):
    before = tp.get_num_threads()
    tp.set_num_threads(request.param)
    yield request.param
    tp.set_num_threads(before)


# (M, K, N): split by rows (M >= N), by columns (N > M), sizes not a multiple
# of the 16-wide blocks, and one too small to split.
SHAPES = [(300, 70, 97), (97, 70, 300), (1024, 64, 33), (40, 512, 1000), (16, 16, 16), (17, 4096, 18)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_split_products_match_numpy_for_every_operand_layout(threads, shape, dtype):
    M, K, N = shape
    rng = np.random.default_rng(M * 7 + N)
    a, b = rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)
    tol = dict(rtol=1e-4, atol=1e-3) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    want = a.astype(np.float64) @ b.astype(np.float64)
    # a and b stored as given or as transposes: the four BLAS layouts
    for ta in (False, True):
        for tb in (False, True):
            ta_t = tp.from_numpy(np.ascontiguousarray(a.T)).t() if ta else tp.from_numpy(a)
            tb_t = tp.from_numpy(np.ascontiguousarray(b.T)).t() if tb else tp.from_numpy(b)
            np.testing.assert_allclose((ta_t @ tb_t).numpy(), want, **tol, err_msg=f"trans {ta} {tb}")
    # beta != 0: addmm adds into the blocks of C
    c = rng.standard_normal((M, N)).astype(dtype)
    got = tp.addmm(tp.from_numpy(c), tp.from_numpy(a), tp.from_numpy(b), beta=0.5, alpha=2.0)
    np.testing.assert_allclose(got.numpy(), 0.5 * c + 2.0 * want, **tol)


def test_batched_products_match_numpy(threads):
    rng = np.random.default_rng(0)
    for batch in (1, 2, 3, 8):
        a = rng.standard_normal((batch, 128, 64)).astype(np.float32)
        b = rng.standard_normal((batch, 64, 128)).astype(np.float32)
        np.testing.assert_allclose((tp.from_numpy(a) @ tp.from_numpy(b)).numpy(), a @ b, rtol=1e-4, atol=1e-3)


def test_compiled_batched_products_match_eager(threads):
    rng = np.random.default_rng(1)
    q = tp.from_numpy(rng.standard_normal((3, 4, 128, 64)).astype(np.float32))
    k = tp.from_numpy(rng.standard_normal((3, 4, 128, 64)).astype(np.float32))
    f = tp.compile(lambda q, k: (q @ k.transpose(-1, -2)).softmax(-1) @ k)
    want = (q @ k.transpose(-1, -2)).softmax(-1) @ k
    np.testing.assert_allclose(f(q, k).numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


CHILD = textwrap.dedent("""
    import ctypes, importlib.util, os
    import tensorplay as tp

    tp.set_num_threads(2)
    # float64 (float32 products may run TensorPlay's own kernel instead of OpenBLAS)
    a, b = tp.randn(512, 512, dtype=tp.float64), tp.randn(512, 512, dtype=tp.float64)
    c = a @ b  # large enough to split across our two threads
    lib_dir = os.path.join(list(importlib.util.find_spec("scipy_openblas32").submodule_search_locations)[0], "lib")
    name = [n for n in os.listdir(lib_dir) if n.startswith("libscipy_openblas") and n.endswith(".so")][0]
    lib = ctypes.CDLL(os.path.join(lib_dir, name))  # the handle already loaded
    print(tp.get_num_threads(), lib.scipy_openblas_get_num_threads())
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="dlopen semantics")
def test_gemms_leave_openblas_on_one_thread_at_two_threads():
    pytest.importorskip("scipy_openblas32")
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["2", "1"], out.stdout
