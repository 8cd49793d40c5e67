"""Float math lowered natively (no fallback): trigonometric, hyperbolic,
exp2/log2/log10/erfc, the rounding operators and atan2/hypot/fmod/remainder.
Compiled under strict_native (a fallback would raise) and compared with eager
within a few ulp, over special values: +-0, +-inf, NaN, halves (rounding ties),
large arguments, a subnormal, values outside a function's domain."""
import numpy as np
import pytest

import tensorplay as tp

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 0.999, -0.999, 10.0, -7.25, 1e5, 1e30, -1e30,
           1e-40, float("inf"), -float("inf"), float("nan"), 88.0, -103.0, 1e-3]

UNARY = "sin cos tan asin acos atan sinh cosh asinh acosh atanh exp2 log2 log10 erfc floor ceil round trunc frac".split()
BINARY = "atan2 hypot fmod remainder".split()


def _close(got, ref, ulps=4):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    g, r = got[ok], ref[ok]
    np.testing.assert_array_equal(np.isinf(g), np.isinf(r))
    fin = np.isfinite(r)
    np.testing.assert_array_equal(g[~fin], r[~fin])
    # the sign of a zero too (floor(-0.5) is -0.0, remainder(-0.0, 3) is -0.0)
    np.testing.assert_array_equal(np.signbit(g[r == 0]), np.signbit(r[r == 0]))
    tiny = np.finfo(r.dtype).smallest_subnormal
    bound = ulps * np.spacing(np.abs(r[fin]).astype(r.dtype)) + ulps * tiny
    assert np.all(np.abs(g[fin].astype(np.float64) - r[fin].astype(np.float64)) <= bound), (g[fin], r[fin])


def _unary(name):
    fn = getattr(tp, name)
    return lambda x: fn(x)


def _binary(name):
    fn = getattr(tp, name)
    return lambda a, b: fn(a, b)


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_eager(name, dtype):
    # 3 copies: both the vector loop and its scalar tail see every value
    x = tp.tensor([SPECIAL * 3], dtype=dtype)
    f = _unary(name)
    _close(tp.compile(f, strict_native=True)(x).numpy(), f(x).numpy())


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
@pytest.mark.parametrize("name", BINARY)
def test_binary_matches_eager(name, dtype):
    a_vals = [3.0, -3.0, 0.5, -0.0, 0.0, float("inf"), float("nan"), 1e30, 2.0, -7.5, 5.0, 1.0]
    b_vals = [2.0, 2.0, -2.0, 3.0, -3.0, 1.0, 1.0, -7.0, float("inf"), 2.5, -0.0, float("nan")]
    a = tp.tensor([a_vals * 4], dtype=dtype)
    b = tp.tensor([b_vals * 4], dtype=dtype)
    f = _binary(name)
    _close(tp.compile(f, strict_native=True)(a, b).numpy(), f(a, b).numpy())


def test_remainder_takes_the_divisors_sign_with_a_scalar_divisor():
    x = tp.tensor([[-7.0, -1.0, -0.0, 0.0, 1.0, 7.0, 8.5, -8.5] * 3])
    for d in (3.0, -3.0):
        f = lambda x, d=d: tp.remainder(x, d)
        got = tp.compile(lambda x: tp.remainder(x, d), strict_native=True)(x).numpy()
        _close(got, f(x).numpy(), ulps=0)
        assert np.all((got == 0) | (np.sign(got) == np.sign(d)))


def test_libm_ops_fuse_with_arithmetic_and_broadcast():
    def f(x, y):
        return tp.sin(x) * tp.cos(y) + tp.atan2(x, y).sum(-1, keepdim=True) + tp.floor(x * 3)

    x, y = tp.randn(8, 37) * 4, tp.randn(1, 37) * 4
    cf = tp.compile(f, strict_native=True)
    np.testing.assert_allclose(cf(x, y).numpy(), f(x, y).numpy(), rtol=1e-5, atol=1e-4)
    assert "#include" not in cf.last_source and "__builtin_sinf" in cf.last_source


def test_integer_input_computes_in_the_default_float():
    x = tp.tensor([[0, 1, -2, 3, 100, -100, 7, 5] * 3])
    _close(tp.compile(lambda x: tp.sin(x), strict_native=True)(x).numpy(), tp.sin(x).numpy())


def test_integer_rounding_and_decimals_run_their_kernels_inside_the_region():
    # No loop form for these: the rules decline and the operator runs as an
    # extern call of its eager kernel (no whole-region fallback).
    x = tp.tensor([[1, -2, 3]])
    cf = tp.compile(lambda x: tp.floor(x), strict_native=True)
    np.testing.assert_array_equal(cf(x).numpy(), x.numpy())
    assert "// extern 0: floor" in cf.last_source
    y = tp.tensor([[1.25, -2.35, 3.5]])
    cf = tp.compile(lambda y: tp.round(y, decimals=1), strict_native=True)
    np.testing.assert_array_equal(cf(y).numpy(), tp.round(y, decimals=1).numpy())
    assert "// extern 0: round" in cf.last_source


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.int64])
def test_masked_fill_matches_eager(dtype):
    x = (tp.randn(6, 40) * 10).to(dtype)
    m = tp.randn(1, 40) > 0  # broadcast mask
    cases = [lambda x, m: x.masked_fill(m, 2.5), lambda x, m: x.masked_fill(m, float("-inf")) if dtype != tp.int64
             else x.masked_fill(m, -3), lambda x, m: x.masked_fill(x > 1, tp.tensor(7.0)) * 2]
    for f in cases:
        got = tp.compile(f, strict_native=True)(x, m).numpy()
        np.testing.assert_array_equal(got, f(x, m).numpy())
