"""var / std / var_mean / std_mean / layer_norm / native_layer_norm / group_norm
lowered natively with Welford (ReduceOp::Welford) under strict_native: equal to
eager within rounding and close to NumPy's float64 at several shapes (1-element
rows, long rows, a large mean), NaN and inf as eager, every float dtype, one
pass or two (compile option stax_welford), and one fused kernel for layer_norm
with its epilogue."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

MODES = ["auto", "one_pass", "two_pass"]


def compiled(fn, mode="auto"):
    return tp.compile(fn, strict_native=True, options={"stax_welford": mode})


@pytest.fixture(autouse=True)
def no_fallback():
    before = int(tp.compiler.metrics.fallback_count)
    yield
    assert int(tp.compiler.metrics.fallback_count) == before


def close(got, want, rtol, atol=0.0):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy().astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True)


def rows(shape, mean=0.0, seed=0, dtype=np.float32):
    return (np.random.default_rng(seed).standard_normal(shape) + mean).astype(dtype)


VAR_CASES = [
    ((7, 1000), (lambda x: x.var(-1)), {}),
    ((7, 1000), (lambda x: x.std(1, keepdim=True)), {}),
    ((4, 5, 33), (lambda x: x.var([1, 2], correction=0)), {}),
    ((6, 1), (lambda x: x.var(1, correction=0)), {}),  # 1-element rows: 0
    ((6, 1), (lambda x: x.std(1)), {}),                # 1-element rows, unbiased: NaN (0 / 0)
    ((300,), (lambda x: x.var()), {}),
    ((9, 17), (lambda x: x.var(0)), {}),               # over the strided dim: two sum nodes
    ((3, 4, 5), (lambda x: x.std(1)), {}),             # middle dim
    ((5, 70000), (lambda x: x.var(-1)), {}),           # long rows: one pass
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", range(len(VAR_CASES)))
def test_var_std_equal_eager_and_float64(k, dtype, mode):
    shape, fn, _ = VAR_CASES[k]
    x = tp.tensor(rows(shape, dtype=dtype))
    got, want = compiled(fn, mode)(x), fn(x)
    tol = 2e-6 if dtype == np.float32 else 1e-12
    close(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", MODES)
def test_var_mean_std_mean_results(mode):
    x = tp.tensor(rows((6, 257), mean=3.0))
    for fn in (lambda a: tp.var_mean(a, 1), lambda a: tp.std_mean(a, 1, keepdim=True),
               lambda a: tp.var_mean(a, [0, 1], correction=0), lambda a: tp.std_mean(a)):
        got, want = compiled(fn, mode)(x), fn(x)
        assert isinstance(got, tuple) and len(got) == 2
        for g, w in zip(got, want):
            close(g, w, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [lambda a: tp.var_mean(a, 1), lambda a: tp.std_mean(a, -1, keepdim=True),
                                lambda a: (a.var(1, correction=0), a.mean(1) * 2)])
def test_mean_beside_var_reads_the_welford_mean(fn, mode):
    # var_mean / std_mean reach Stax as var + mean of the same input and dims:
    # the mean is the Welford node's (one read of each row), not a second sum.
    x = tp.tensor(rows((33, 1000), mean=2.0))
    cf = compiled(fn, mode)
    for g, w in zip(cf(x), fn(x)):
        close(g, w, rtol=2e-6, atol=1e-6)
    src = cf.last_source
    assert "welford over" in src and "(sum over" not in src, src


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(64, 64), (16, 1000), (8, 2048), (4, 100003)])
def test_large_mean_accuracy_against_float64_not_far_from_eager(shape, mode):
    # 1e4 + randn breaks the naive E[x^2] - E[x]^2 (a float32 result would be
    # garbage); one pass keeps M2 in double (eager's error), the two-pass form
    # corrects the rounded mean's error.
    a = rows(shape, mean=1e4, seed=1)
    ref = a.astype(np.float64).var(-1, ddof=1)
    x = tp.tensor(a)
    got = compiled(lambda v: v.var(-1), mode)(x).numpy().astype(np.float64)
    eager = x.var(-1).numpy().astype(np.float64)
    err = np.max(np.abs(got - ref) / ref)
    err_eager = np.max(np.abs(eager - ref) / ref)
    if mode == "one_pass" or (mode == "auto" and shape[1] > 4096):
        assert err <= 2 * err_eager + 1e-12  # eager's accuracy: one rounding of a double M2
    else:
        # The corrected two-pass form: float32 partial sums of the squared deviations, whose
        # error grows with the terms per lane (n = 100003: ~1e-6 with AVX-512's 16 lanes,
        # 3.4e-6 with AVX2's 8); the uncorrected form is far worse on rows of mean 1e4.
        assert err < 5e-6


@pytest.mark.parametrize("mode", ["one_pass", "two_pass"])
def test_nan_and_inf_as_eager(mode):
    nan, inf = float("nan"), float("inf")
    a = np.array([[1.0, 2.0, nan, 4.0], [1.0, inf, 3.0, 4.0], [-inf, inf, 0.0, 1.0], [inf, inf, inf, inf],
                  [5.0, 5.0, 5.0, 5.0]], np.float32)
    a = np.repeat(a, 20, axis=1)  # long enough for vector lanes and a tail
    x = tp.tensor(a)
    for fn in (lambda v: v.var(1), lambda v: tp.var_mean(v, 1), lambda v: F.layer_norm(v, [80])):
        got, want = compiled(fn, mode)(x), fn(x)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            close(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
@pytest.mark.parametrize("shape", [(4, 1), (3, 7), (8, 1000), (2, 3, 129), (2, 9000)])
def test_layer_norm_equal_eager(shape, dtype, mode):
    x = tp.randn(*shape, dtype=dtype) * 3 + 2
    w = tp.randn(shape[-1], dtype=dtype)
    b = tp.randn(shape[-1], dtype=dtype)
    tol = 2e-5 if dtype == tp.float32 else 1e-12
    for fn in (lambda v: F.layer_norm(v, [shape[-1]], w, b), lambda v: F.layer_norm(v, [shape[-1]]),
               lambda v: F.layer_norm(v, list(shape[1:]), None, None, 1e-3)):
        close(compiled(fn, mode)(x), fn(x), rtol=tol, atol=tol)


def test_native_layer_norm_mean_and_rstd():
    x = tp.randn(5, 6, 40) + 100
    w, b = tp.randn(40), tp.randn(40)
    op = tp.native_layer_norm
    fn = lambda v: op(v, [40], w, b, 1e-5)
    got, want = compiled(fn)(x), fn(x)
    # Rows of mean 100: x - mean in float32 carries up to ~2.3e-5 of error in either
    # program (the summation orders differ), so each is compared with float64.
    xd, wd, bd = (t.numpy().astype(np.float64) for t in (x, w, b))
    mean, var = xd.mean(-1, keepdims=True), xd.var(-1, keepdims=True)
    exact = [(xd - mean) / np.sqrt(var + 1e-5) * wd + bd, mean, 1 / np.sqrt(var + 1e-5)]
    for g, wt, ex in zip(got, want, exact):
        assert tuple(g.shape) == tuple(wt.shape)
        err_c = np.abs(g.numpy().astype(np.float64) - ex.reshape(g.shape)).max()
        err_e = np.abs(wt.numpy().astype(np.float64) - ex.reshape(g.shape)).max()
        assert err_c <= 2 * err_e + 1e-6, (err_c, err_e)


def test_layer_norm_with_gelu_epilogue_is_one_kernel():
    x = tp.randn(64, 768)
    w, b = tp.randn(768), tp.randn(768)
    fn = lambda v: F.gelu(F.layer_norm(v, [768], w, b) * 2 + 1, approximate="tanh")
    cf = compiled(fn)
    close(cf(x), fn(x), rtol=1e-5, atol=1e-5)
    src = cf.last_source
    assert src.count("static void fused_") == 1, src
    assert "welford over" in src and "// extern" not in src


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
def test_group_norm_equal_eager(dtype):
    x = tp.randn(4, 8, 5, 6, dtype=dtype) + 10
    w, b = tp.randn(8, dtype=dtype), tp.randn(8, dtype=dtype)
    fn = lambda v: F.group_norm(v, 4, w, b)
    cf = compiled(fn)
    tol = 2e-5 if dtype == tp.float32 else 1e-12
    close(cf(x), fn(x), rtol=tol, atol=tol)
    assert "welford over" in cf.last_source


def test_bad_option_is_a_clear_error():
    with pytest.raises(Exception, match="stax_welford"):
        compiled(lambda v: v.var(1), "fast")(tp.randn(3, 4))
