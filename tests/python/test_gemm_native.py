"""Float32 products on AVX-512 CPUs run TensorPlay's own GEMM kernel
(csrc/ops/vec/sgemm_avx512.cpp) instead of OpenBLAS's, which runs at half the
FMA width where OPENBLAS_CORETYPE pins it to Haswell. These tests drive the
kernel across its blocking (14 x 32 register tiles, K blocks of 512, row
blocks of 336, column blocks of 3072) and every operand layout, and check it
against NumPy in float64, against the BLAS library (TP_GEMM=blas), and for
results that do not depend on the thread count."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import _C

NATIVE = _C._float32_gemm_kernel() == "avx512"


@pytest.fixture(params=[1, 2])
def threads(request):
    before = tp.get_num_threads()
    tp.set_num_threads(request.param)
    yield request.param
    tp.set_num_threads(before)


def operand(x, transposed, wider):
    """x as a tensor stored as given or transposed, inside wider storage (leading dimension > columns)."""
    base = np.ascontiguousarray(x.T) if transposed else x
    if wider:
        pad = np.full((base.shape[0], base.shape[1] + 5), np.nan, dtype=x.dtype)
        pad[:, : base.shape[1]] = base
        t = tp.from_numpy(pad)[:, : base.shape[1]]
    else:
        t = tp.from_numpy(base)
    return t.t() if transposed else t


# (M, K, N) around the kernel's edges: a partial tile in both directions, one
# row past a row block (337 = 336 + 1), one k past a K block (513), one column
# block plus a partial tile (3105 = 3072 + 33), the smallest shape the kernel
# takes (16 x 16 x 32) and shapes just under it (the BLAS library's).
SHAPES = [(16, 16, 32), (29, 17, 47), (337, 513, 65), (45, 1100, 3105), (15, 64, 64), (64, 15, 64), (64, 64, 31),
          (128, 256, 96)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_products_match_numpy_for_every_layout_and_leading_dimension(threads, shape):
    M, K, N = shape
    rng = np.random.default_rng(M * 31 + K * 7 + N)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = dict(rtol=2e-5, atol=2e-5 * np.sqrt(K))
    for ta in (False, True):
        for tb in (False, True):
            for wider in (False, True):
                got = operand(a, ta, wider) @ operand(b, tb, wider)
                np.testing.assert_allclose(got.numpy(), want, **tol, err_msg=f"trans {ta} {tb} wider {wider}")


@pytest.mark.parametrize("beta,alpha", [(0.5, 2.0), (1.0, -1.0), (0.0, 3.0)])
def test_addmm_scales_and_adds_into_the_result(threads, beta, alpha):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((300, 700)).astype(np.float32), rng.standard_normal((700, 200)).astype(np.float32)
    c = rng.standard_normal((300, 200)).astype(np.float32)
    if beta == 0.0:
        c[:] = np.nan  # beta == 0 ignores the input, NaN included (as PyTorch and BLAS do)
    got = tp.addmm(tp.from_numpy(c), tp.from_numpy(a), tp.from_numpy(b), beta=beta, alpha=alpha).numpy()
    want = alpha * (a.astype(np.float64) @ b) + (0.0 if beta == 0.0 else beta * c)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_inf_and_nan_propagate_as_numpy_does():
    a = np.ones((64, 64), np.float32)
    b = np.ones((64, 64), np.float32)
    a[3, 5] = np.inf
    b[5, 7] = 0.0  # inf * 0 = nan in that one product
    a[10, 0] = np.nan
    got = (tp.from_numpy(a) @ tp.from_numpy(b)).numpy()
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    # the zero padding of the kernel's edge tiles never reaches the result
    assert np.isnan(got[3, 7]) and np.isinf(got[3, 0]) and np.isnan(got[10]).all()


@pytest.mark.skipif(not NATIVE, reason="OpenBLAS's kernels (no AVX-512, TP_GEMM=blas) do not promise it")
def test_results_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(5)
    a = tp.from_numpy(rng.standard_normal((1000, 700)).astype(np.float32))
    b = tp.from_numpy(rng.standard_normal((700, 900)).astype(np.float32))
    before = tp.get_num_threads()
    try:
        outs = []
        for n in (1, 2, 3):
            tp.set_num_threads(n)
            outs.append((a @ b).numpy())
    finally:
        tp.set_num_threads(before)
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


def test_batched_and_linear_products_match_numpy(threads):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 5, 100, 72)).astype(np.float32)
    y = rng.standard_normal((3, 5, 72, 40)).astype(np.float32)
    np.testing.assert_allclose((tp.from_numpy(x) @ tp.from_numpy(y)).numpy(), x.astype(np.float64) @ y,
                               rtol=1e-4, atol=1e-4)
    w = rng.standard_normal((48, 72)).astype(np.float32)
    bias = rng.standard_normal(48).astype(np.float32)
    got = tp.nn.functional.linear(tp.from_numpy(x), tp.from_numpy(w), tp.from_numpy(bias)).numpy()
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.T + bias, rtol=1e-4, atol=1e-4)


RUN = textwrap.dedent("""
    import numpy as np, tensorplay as tp
    from tensorplay import _C
    rng = np.random.default_rng(0)
    a = tp.from_numpy(rng.standard_normal((300, 500)).astype(np.float32))
    b = tp.from_numpy(rng.standard_normal((500, 400)).astype(np.float32))
    np.save(OUT, (a @ b).numpy())
    print(_C._float32_gemm_kernel())
""")


def run_child(tmp_path, env_value, name):
    env = dict(os.environ)
    env.pop("TP_GEMM", None)
    if env_value is not None:
        env["TP_GEMM"] = env_value
    out = tmp_path / f"{name}.npy"
    r = subprocess.run([sys.executable, "-c", f"OUT = {str(out)!r}\n" + RUN], env=env, capture_output=True,
                       text=True, timeout=120)
    return r, out


def test_tp_gemm_blas_keeps_the_library_and_agrees(tmp_path):
    r1, o1 = run_child(tmp_path, None, "default")
    r2, o2 = run_child(tmp_path, "blas", "blas")
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    assert r1.stdout.split()[-1] == ("avx512" if NATIVE else "blas")
    assert r2.stdout.split()[-1] == "blas"
    np.testing.assert_allclose(np.load(o1), np.load(o2), rtol=1e-4, atol=1e-4)


def test_a_bad_tp_gemm_is_a_clear_error(tmp_path):
    r, _ = run_child(tmp_path, "fast", "bad")
    assert r.returncode != 0
    assert "TP_GEMM='fast'" in r.stderr and "blas, native" in r.stderr, r.stderr


@pytest.mark.skipif(not NATIVE, reason="this CPU has no AVX-512: the BLAS library runs every product")
def test_gradients_of_a_linear_layer_match_finite_differences():
    rng = np.random.default_rng(8)
    x = tp.from_numpy(rng.standard_normal((40, 64)).astype(np.float64)).float()
    w = tp.from_numpy(rng.standard_normal((64, 48)).astype(np.float32)).requires_grad_()
    loss = (x @ w).tanh().sum()
    loss.backward()
    xd, wd = x.numpy().astype(np.float64), w.detach().numpy().astype(np.float64)
    eps, i, j = 1e-3, 7, 11
    wp, wm = wd.copy(), wd.copy()
    wp[i, j] += eps
    wm[i, j] -= eps
    fd = (np.tanh(xd @ wp).sum() - np.tanh(xd @ wm).sum()) / (2 * eps)
    assert abs(w.grad.numpy()[i, j] - fd) < 1e-2 * max(1.0, abs(fd))
