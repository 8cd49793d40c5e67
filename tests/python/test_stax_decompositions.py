"""Decompositions of the activation, ternary and other pointwise operators for Stax.

Each operator keeps its eager kernel and also carries a decomposition into
operators Stax lowers; compiling under strict_native proves the decomposition
was used (a fallback would raise), and the result must match the eager kernel
within float32 rounding (the two differ only by exp/log/tanh implementations,
and for float32 erf / exact gelu by a fitted erf of <= 1.2 ulp). Operators or
arguments without a faithful decomposition (float64 erf, pow by other numbers)
must stay whole: they fall back, and strict mode names them.
Special values (+-0, +-inf, NaN, huge and tiny magnitudes), non-contiguous and
broadcast inputs and every attribute are covered."""
import math

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn

DTYPES = [tp.float32, tp.float64]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-8, -1e-8, 1e-30, -1e-30, 3.0, -3.0, 9.0, -9.0, 25.0, -25.0,
           90.0, -90.0, 800.0, -800.0, math.inf, -math.inf, math.nan]


def _metric(name):
    return int(getattr(tp.compiler.metrics, name))


def _assert_close(got, ref, rtol):
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    gn, rn = got.numpy(), ref.numpy()
    if rn.dtype.kind in "biu":
        np.testing.assert_array_equal(gn, rn)
        return
    np.testing.assert_array_equal(np.isnan(gn), np.isnan(rn))
    np.testing.assert_array_equal(np.isinf(gn) * np.sign(gn), np.isinf(rn) * np.sign(rn))
    fin = np.isfinite(rn)
    np.testing.assert_allclose(gn[fin], rn[fin], rtol=rtol, atol=rtol)


def _prepare(name, x):
    return x * 0.125 + 0.5 if name.startswith("logit") and x.dtype.is_floating_point else x


def _check(fn, *args):
    """fn compiled for Stax only (strict) against eager; returns the compiled function."""
    rtol = 1e-10 if any(getattr(a, "dtype", None) == tp.float64 for a in args) else 2e-6
    cf = tp.compile(fn, backend="stax", strict_native=True)
    _assert_close(cf(*args), fn(*args), rtol)
    return cf


def _inputs(dtype, lo=-6.0, hi=6.0):
    """A random matrix, its transpose (non-contiguous) and a vector of special values."""
    rng = np.random.default_rng(7)
    m = tp.tensor(rng.uniform(lo, hi, (37, 19)), dtype=dtype)
    return [m, m.t(), tp.tensor(SPECIAL, dtype=dtype)]


UNARY = {
    "silu": tp.silu,
    "gelu_tanh": lambda x: tp.gelu(x, approximate="tanh"),
    "mish": tp.mish,
    "softplus": tp.softplus,
    "softplus_beta_threshold": lambda x: tp.softplus(x, 2.5, 3),
    "softplus_small_beta": lambda x: tp.softplus(x, 0.25, 40),
    "softplus_negative_beta": lambda x: tp.softplus(x, -1.5, 2),
    "elu": tp.elu,
    "elu_alpha": lambda x: tp.elu(x, 0.35),
    "leaky_relu": tp.leaky_relu,
    "leaky_relu_slope": lambda x: tp.leaky_relu(x, -0.7),
    "hardtanh": tp.hardtanh,
    "hardtanh_bounds": lambda x: tp.hardtanh(x, -0.25, 2.0),
    "hardtanh_crossed": lambda x: tp.hardtanh(x, 1.0, -1.0),
    "hardtanh_nan_bound": lambda x: tp.hardtanh(x, math.nan, 0.5),
    "hardtanh_inf_bound": lambda x: tp.hardtanh(x, -math.inf, 0.5),
    "log1p": tp.log1p,
    "expm1": tp.expm1,
    "pow_2": lambda x: x**2,
    "pow_int_2": lambda x: tp.pow(x, 2),
    "pow_half": lambda x: x**0.5,
    "pow_minus_half": lambda x: x**-0.5,
    "pow_minus_1": lambda x: x**-1.0,
    "rsqrt": tp.rsqrt,
    "reciprocal": tp.reciprocal,
    "square": tp.square,
    "sign": tp.sign,
    # logit's inputs are mapped into (0, 1) and beyond by _prepare, outside the
    # compiled function: logit amplifies any input difference by 1 / (x (1 - x)).
    "logit": tp.logit,
    "logit_eps": lambda x: tp.logit(x, 0.05),
    "logit_eps_zero": lambda x: tp.logit(x, 0.0),
    "logit_eps_negative": lambda x: tp.logit(x, -0.5),
    "logit_eps_tiny_negative": lambda x: tp.logit(x, -1e-60),
    "clamp_scalars": lambda x: tp.clamp(x, -0.5, 0.75),
    "clamp_min_only": lambda x: tp.clamp(x, min=0.1),
    "clamp_max_only": lambda x: tp.clamp(x, max=-0.1),
    "clamp_crossed": lambda x: tp.clamp(x, 1.0, -1.0),
    "clamp_nan_bound": lambda x: tp.clamp(x, math.nan, 1.0),
    "clamp_min": lambda x: tp.clamp_min(x, -1.5),
    "clamp_max": lambda x: tp.clamp_max(x, 2.5),
    "addcmul": lambda x: tp.addcmul(x, x, x * 0.5),
    "addcmul_value": lambda x: tp.addcmul(x, x, x.abs(), value=-0.3),
    "addcdiv": lambda x: tp.addcdiv(x, x, x.abs() + 1),
    "addcdiv_value": lambda x: tp.addcdiv(x, x * 3, x, value=2),
    "lerp_scalar": lambda x: tp.lerp(x, x * 2 + 1, 0.3),
    "lerp_scalar_high": lambda x: tp.lerp(x, -x, 0.8),
    "lerp_tensor_weight": lambda x: tp.lerp(x, x.exp(), tp.sigmoid(x * 3) * 1.4 - 0.2),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_eager(name, dtype):
    for x in _inputs(dtype):
        _check(UNARY[name], _prepare(name, x))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_extreme_magnitudes(dtype):
    # Ranges where exp overflows or underflows and where log1p/expm1 need the
    # cancellation-free forms (tiny arguments).
    for x in _inputs(dtype, -120.0, 120.0) + _inputs(dtype, -1e-6, 1e-6):
        for name in ("silu", "mish", "softplus", "softplus_beta_threshold", "elu", "gelu_tanh", "logit", "log1p",
                     "expm1"):
            _check(UNARY[name], _prepare(name, x))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast_tensor_operands(dtype):
    rng = np.random.default_rng(3)
    x = tp.tensor(rng.standard_normal((8, 13)), dtype=dtype)
    row = tp.tensor(rng.standard_normal(13), dtype=dtype)
    col = tp.tensor(rng.uniform(0.5, 2.0, (8, 1)), dtype=dtype)
    _check(lambda x, lo, hi: tp.clamp(x, lo, hi), x, row - 0.5, row + 0.5)
    _check(lambda x, lo: tp.clamp(x, min=lo), x, row)
    _check(lambda x, hi: tp.clamp(x, max=hi), x, col)
    _check(lambda x, lo: tp.clamp_min(x, lo), x, col)
    _check(lambda x, hi: tp.clamp_max(x, hi), x, row)
    _check(lambda x, a, b: tp.addcmul(x, a, b, value=0.25), x, row, col)
    _check(lambda x, a, b: tp.addcdiv(x, a, b, value=-2), col, row, col)
    _check(lambda x, e, w: tp.lerp(x, e, w), x, row, col - 1)
    _check(lambda x, e, w: tp.lerp(x, e, w), row, x, tp.sigmoid(x))


def test_mixed_dtypes_promote_like_eager():
    rng = np.random.default_rng(5)
    x32 = tp.tensor(rng.standard_normal((6, 7)), dtype=tp.float32)
    x64 = tp.tensor(rng.standard_normal((6, 7)), dtype=tp.float64)
    i64 = tp.tensor(rng.integers(-5, 5, (6, 7)), dtype=tp.int64)
    _check(lambda x, lo: tp.clamp(x, lo, 0.5), x32, x64)
    _check(lambda x, lo: tp.clamp_min(x, lo), i64, x32)
    _check(lambda x, a, b: tp.addcmul(x, a, b), x32, i64, x64)
    _check(lambda x, a, b: tp.addcdiv(x, a, b), i64, x32, x32.abs() + 1)
    # lerp does not promote between its ends (PyTorch's rule): eager and compiled both raise
    for fn in (lambda x, e: tp.lerp(x, e, 0.25), tp.compile(lambda x, e: tp.lerp(x, e, 0.25))):
        with pytest.raises(RuntimeError, match="lerp: expected dtype float32 for `end`"):
            fn(x32, x64)


def test_integer_and_bool_inputs():
    rng = np.random.default_rng(11)
    i = tp.tensor(rng.integers(-50, 50, (9, 11)), dtype=tp.int64)
    b = tp.tensor(rng.integers(0, 2, (9, 11)).astype(bool))
    big = tp.tensor([2**40, -(2**40) - 3, 3037000500, -7, 0], dtype=tp.int64)
    for x in (i, i.t(), big):
        _check(tp.square, x)  # wraps like the kernel
        _check(tp.sign, x)
        _check(tp.hardtanh, x)
        _check(lambda x: tp.hardtanh(x, -3.7, 12.9), x)  # integer kernel truncates the bounds
        _check(tp.reciprocal, x)  # float-valued
        _check(tp.rsqrt, x.abs())
        _check(lambda x: tp.clamp(x, -3, 20), x)
        _check(lambda x: tp.clamp(x, -3.5), x)  # a float bound makes a float result
        _check(lambda x: tp.addcmul(x, x, x, value=3), x)
        _check(lambda x: tp.logit(x), x)
        _check(lambda x: x**2, x)
        _check(lambda x: x**0.5, x.abs())
        _check(lambda x: x**-1.0, x)
        _check(tp.log1p, x.abs())
        _check(tp.expm1, x % 7)
    _check(tp.square, b)  # bool squares to int64
    _check(lambda b: b**2, b)
    _check(tp.sign, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_zero_size_and_zero_dim(dtype):
    for x in (tp.zeros(0, 5, dtype=dtype), tp.tensor(0.75, dtype=dtype)):
        for name in ("silu", "softplus", "elu", "clamp_scalars", "lerp_scalar", "addcmul", "logit_eps"):
            _check(UNARY[name], _prepare(name, x))


ACTIVATION_CHAINS = {
    "gelu_tanh_silu": lambda x: tp.silu(tp.gelu(x, approximate="tanh") * 1.5),
    "mish_softplus": lambda x: tp.mish(x) + tp.softplus(x, 2, 5),
    "elu_leaky_hardtanh": lambda x: tp.hardtanh(tp.elu(x) - tp.leaky_relu(x, 0.1)),
    "clamp_lerp_addcmul": lambda x: tp.addcmul(tp.lerp(x, tp.clamp(x, -1, 1), 0.6), x, x, value=0.1),
    "softmax_of_gelu": lambda x: tp.softmax(tp.gelu(x, approximate="tanh"), -1),
    "exact_gelu_erf": lambda x: tp.gelu(x) - tp.erf(x) * 0.5,
}


@pytest.mark.parametrize("name", sorted(ACTIVATION_CHAINS))
def test_activation_graphs_generate_kernels(name):
    x = tp.randn(16, 40)
    kernels, fallbacks = _metric("generated_kernel_count"), _metric("fallback_count")
    cf = tp.compile(ACTIVATION_CHAINS[name], backend="stax")
    _assert_close(cf(x), ACTIVATION_CHAINS[name](x), 2e-6)
    assert _metric("generated_kernel_count") > kernels
    assert _metric("fallback_count") == fallbacks


def test_activation_module_generates_kernels():
    model = nn.Sequential(nn.GELU(approximate="tanh"), nn.SiLU(), nn.LayerNorm(24), nn.GELU())
    x = tp.randn(10, 24)
    kernels, fallbacks = _metric("generated_kernel_count"), _metric("fallback_count")
    with tp.no_grad():
        cf = tp.compile(model, backend="stax")
        _assert_close(cf(x), model(x), 5e-6)
    assert _metric("generated_kernel_count") > kernels
    assert _metric("fallback_count") == fallbacks


def test_mlp_module_matches_eager():
    # Linear is not lowered yet, so this graph falls back; the result must still be right.
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 16), nn.SiLU(),
                          nn.LayerNorm(16), nn.GELU())
    x = tp.randn(7, 12)
    with tp.no_grad():
        cf = tp.compile(model, backend="stax")
        _assert_close(cf(x), model(x), 5e-6)


def test_erf_and_exact_gelu_float32():
    # float32 erf is built from exp and fitted polynomials (<= 1.2 ulp from the true erf).
    tiny = tp.tensor(np.concatenate([[1e-38, -1e-38, 1e-20], np.linspace(-1e-3, 1e-3, 101)]), dtype=tp.float32)
    wide = tp.tensor(np.linspace(-12, 12, 4001), dtype=tp.float32)
    for x in _inputs(tp.float32) + [tiny, wide, tp.zeros(0, 3), tp.tensor(0.3)]:
        _check(tp.erf, x)
        _check(tp.gelu, x)
        _check(lambda x: tp.gelu(x, approximate="none") * 2, x)
    _check(tp.erf, tp.tensor([-3, 0, 1, 2, 7], dtype=tp.int64))  # float-valued


@pytest.mark.parametrize("fn,name", [(tp.gelu, "gelu"), (tp.erf, "erf")])
def test_float64_erf_is_not_decomposed(fn, name):
    # No float64-accurate erf from the lowered operators: the operator stays
    # and runs as an extern call of its kernel inside the region (the `* 2`
    # around it is still a generated kernel).
    x = tp.randn(5, 6, dtype=tp.float64)
    fallbacks = _metric("fallback_count")
    cf = tp.compile(lambda x: fn(x) * 2, backend="stax", strict_native=True)
    _assert_close(cf(x), fn(x) * 2, 1e-15)
    assert _metric("fallback_count") == fallbacks
    assert f"// extern 0: {name} (kernel" in cf.last_source


@pytest.mark.parametrize("fn", [lambda x: x**3, lambda x: 2**x, lambda x, y: x**y], ids=["cube", "rpow", "tensor"])
def test_pow_without_exact_shortcut_lowers_to_libm_pow(fn):
    # Not exp(e * log(x)) (negative bases, rounding): the generated code calls
    # libm's pow, which eager's vectorized pow agrees with to an ulp or two.
    args = (tp.randn(4, 5), tp.randn(4, 5))[: fn.__code__.co_argcount]
    got = tp.compile(fn, backend="stax", strict_native=True)(*args)
    want = fn(*args)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=0, equal_nan=True)
    assert np.array_equal(np.isnan(got.numpy()), np.isnan(want.numpy()))


def test_eager_calls_keep_their_kernels():
    # The decomposition is only for the compiler: an eager call is one operator
    # (its own backward), not the primitives.
    x = tp.randn(4, 3, dtype=tp.float64, requires_grad=True)
    y = tp.gelu(x, approximate="tanh")
    assert "gelu" in type(y.grad_fn).__name__.lower() or "gelu" in str(y.grad_fn).lower()
    assert tp.autograd.gradcheck(lambda t: tp.softplus(t, 2, 1), (x,))


def test_compiled_with_grad_uses_eager_formulas():
    x = tp.randn(6, 5, dtype=tp.float64, requires_grad=True)
    f = lambda x: tp.mish(x).sum()  # noqa: E731
    cf = tp.compile(f, backend="stax")
    (g,) = tp.autograd.grad(cf(x), (x,))
    (ref,) = tp.autograd.grad(f(x), (x,))
    np.testing.assert_allclose(g.numpy(), ref.numpy(), rtol=1e-12)
