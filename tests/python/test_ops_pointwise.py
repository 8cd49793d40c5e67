"""Pointwise math operators against NumPy (and PyTorch where installed): dtypes
and type promotion, broadcasting, non-contiguous inputs, zero-size tensors,
special values (+-0, +-inf, NaN), in-place variants, operator dunders and errors."""

import math

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import _ops_dunders

_ops_dunders.install()

NP_DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32,
             "bool": np.bool_, "float16": np.float16, "int8": np.int8, "uint8": np.uint8, "int16": np.int16}
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-30, 40.0, -40.0])


def T(a):
    return tp.tensor(np.asarray(a))


def N(t):
    return np.asarray(t.contiguous().numpy())


def dtname(t):
    return str(t.dtype).replace("tensorplay.", "").replace("tp.", "")


def check(got, want, rtol, atol=0.0):
    got_a = N(got)
    want = np.asarray(want)
    assert got_a.shape == want.shape, (got_a.shape, want.shape)
    if want.dtype.kind == "f" or got_a.dtype.kind == "f":
        np.testing.assert_allclose(got_a.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got_a, want)


def _erfinv_one(v):
    if math.isnan(v) or abs(v) > 1:
        return math.nan
    if abs(v) == 1:
        return math.copysign(math.inf, v)
    lo, hi = -7.0, 7.0  # bisection in float64
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if math.erf(mid) < v:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _erfinv(x):
    return np.vectorize(_erfinv_one, otypes=[np.float64])(x)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _erfc(x):
    return np.vectorize(math.erfc, otypes=[np.float64])(x)


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def _softplus(x, beta=1.0, threshold=20.0):
    with np.errstate(over="ignore"):
        return np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta)


# name -> (reference on float64, domain of test values, float32 rtol)
UNARY = {
    "exp": (np.exp, (-10, 10), 1e-6),
    "exp2": (np.exp2, (-10, 10), 1e-6),
    "expm1": (np.expm1, (-5, 5), 1e-6),
    "log": (np.log, (1e-3, 100), 1e-6),
    "log2": (np.log2, (1e-3, 100), 1e-6),
    "log10": (np.log10, (1e-3, 100), 1e-6),
    "log1p": (np.log1p, (-0.9, 10), 1e-6),
    "sqrt": (np.sqrt, (0, 100), 1e-6),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (1e-2, 100), 1e-6),
    "sin": (np.sin, (-10, 10), 1e-6),
    "cos": (np.cos, (-10, 10), 1e-6),
    "tan": (np.tan, (-1.4, 1.4), 1e-6),
    "asin": (np.arcsin, (-1, 1), 1e-6),
    "acos": (np.arccos, (-1, 1), 1e-6),
    "atan": (np.arctan, (-10, 10), 1e-6),
    "sinh": (np.sinh, (-5, 5), 1e-6),
    "cosh": (np.cosh, (-5, 5), 1e-6),
    "tanh": (np.tanh, (-5, 5), 1e-6),
    "asinh": (np.arcsinh, (-10, 10), 1e-6),
    "acosh": (np.arccosh, (1, 10), 1e-6),
    "atanh": (np.arctanh, (-0.99, 0.99), 1e-6),
    "erf": (_erf, (-3, 3), 1e-6),
    "erfc": (_erfc, (-3, 3), 1e-5),
    "erfinv": (_erfinv, (-0.999, 0.999), 2e-6),
    "sigmoid": (_sigmoid, (-10, 10), 1e-6),
    "logit": (lambda x: np.log(x / (1 - x)), (0.01, 0.99), 1e-5),
    "reciprocal": (lambda x: 1 / x, (0.1, 10), 1e-6),
    "relu": (lambda x: np.maximum(x, 0), (-5, 5), 0),
    "gelu": (lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), (-5, 5), 1e-6),
    "silu": (lambda x: x * _sigmoid(x), (-10, 10), 1e-6),
    "mish": (lambda x: x * np.tanh(_softplus(x)), (-10, 10), 1e-6),
    "softplus": (_softplus, (-10, 30), 1e-6),
    "elu": (lambda x: np.where(x > 0, x, np.expm1(x)), (-5, 5), 1e-6),
    "leaky_relu": (lambda x: np.where(x > 0, x, 0.01 * x), (-5, 5), 1e-6),
    "hardtanh": (lambda x: np.clip(x, -1, 1), (-3, 3), 0),
    "abs": (np.abs, (-5, 5), 0),
    "neg": (np.negative, (-5, 5), 0),
    "sign": (np.sign, (-5, 5), 0),
    "floor": (np.floor, (-5, 5), 0),
    "ceil": (np.ceil, (-5, 5), 0),
    "round": (np.round, (-5, 5), 0),
    "trunc": (np.trunc, (-5, 5), 0),
    "frac": (lambda x: x - np.trunc(x), (-5, 5), 1e-6),
    "square": (np.square, (-5, 5), 1e-7),
}
FLOAT_VALUED = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin",
                "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "sigmoid",
                "logit", "reciprocal"}
FLOAT_ONLY = {"gelu", "silu", "mish", "softplus", "elu", "leaky_relu", "frac"}


def values_in(domain, shape, dtype, seed=0):
    lo, hi = domain
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_values(name, dtype):
    ref, domain, rtol32 = UNARY[name]
    x = values_in(domain, (37, 19), NP_DTYPES[dtype])
    out = getattr(tp, name)(T(x))
    assert dtname(out) == dtype
    rtol = rtol32 * 4 if dtype == "float32" else 1e-12
    if name == "erfinv" and dtype == "float64":
        rtol = 1e-9
    check(out, ref(x.astype(np.float64)), rtol=rtol, atol=1e-6 if dtype == "float32" else 1e-13)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_long_vectors_and_tails(name):
    # lengths around the vector widths exercise full vectors plus padded tails
    ref, domain, rtol32 = UNARY[name]
    for n in (1, 7, 15, 16, 17, 33, 1000):
        x = values_in(domain, (n,), np.float32, seed=n)
        check(getattr(tp, name)(T(x)), ref(x.astype(np.float64)), rtol=rtol32 * 4, atol=1e-6)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_noncontiguous_and_empty(name):
    ref, domain, rtol32 = UNARY[name]
    base = values_in(domain, (6, 10), np.float32)
    f = getattr(tp, name)
    t = T(base)
    for view, arr in [(t.t(), base.T), (t[:, ::3], base[:, ::3]), (t[1:5, 2:9:2], base[1:5, 2:9:2])]:
        check(f(view), ref(arr.astype(np.float64)), rtol=rtol32 * 4, atol=1e-6)
    col = T(base[:, :1])
    check(f(col.expand(6, 4)), ref(np.broadcast_to(base[:, :1], (6, 4)).astype(np.float64)), rtol=rtol32 * 4, atol=1e-6)
    empty = f(tp.tensor(np.zeros((0, 3), np.float32)))
    assert tuple(empty.shape) == (0, 3)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values_against_numpy(name):
    if name in ("erfinv",):
        x = np.array([0.0, -0.0, 1.0, -1.0, np.nan, 2.0, -2.0, np.inf, 0.5])
    else:
        x = SPECIAL
    ref = UNARY[name][0]
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    for dt in (np.float32, np.float64):
        got = N(getattr(tp, name)(T(x.astype(dt)))).astype(np.float64)
        if name == "sign":  # PyTorch: sign(NaN) = 0
            want = np.where(np.isnan(x), 0.0, want)
        if name in ("gelu", "silu", "mish"):  # at -inf/inf the formulas give NaN in PyTorch as well: skip
            keep = np.isfinite(x)
            got, want2 = got[keep], want[keep]
        else:
            want2 = want
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(got, want2.astype(dt).astype(np.float64), rtol=5e-6 if dt == np.float32 else 1e-12,
                                       atol=1e-30, equal_nan=True, err_msg=f"{name} {dt}")


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_torch_on_special_values(name):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    fn = getattr(torch, name, None) or getattr(F, name)
    x = SPECIAL.astype(np.float32)
    want = fn(torch.from_numpy(x)).numpy()
    got = N(getattr(tp, name)(T(x)))
    if name in ("gelu",):  # PyTorch's vectorized gelu gives NaN at +inf; ours gives inf
        keep = np.isfinite(x)
        got, want = got[keep], want[keep]
    np.testing.assert_allclose(got, want, rtol=5e-6, atol=1e-30, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool", "uint8"])
def test_unary_integer_dtypes(name, dtype):
    x = np.array([[0, 1, 2], [3, 1, 0]]).astype(NP_DTYPES[dtype])
    f = getattr(tp, name)
    if name in FLOAT_ONLY or (dtype == "bool" and name in ("abs", "neg", "relu", "floor", "ceil", "round",
                                                          "trunc", "hardtanh")):
        with pytest.raises(TypeError, match=name):
            f(T(x))
        return
    out = f(T(x))
    ref = UNARY[name][0]
    if name in FLOAT_VALUED:
        assert dtname(out) == "float32"
        with np.errstate(all="ignore"):
            want = ref(x.astype(np.float64))
        check(out, want.astype(np.float32), rtol=2e-6, atol=1e-6)
    elif name == "square" and dtype == "bool":
        assert dtname(out) == "int64"
        check(out, x.astype(np.int64) ** 2, 0)
    else:
        assert dtname(out) == dtype
        check(out, ref(x).astype(NP_DTYPES[dtype]) if dtype != "bool" else x, 0)


def test_unary_int64_neg_abs_wrap():
    big = np.array([np.iinfo(np.int64).min, -5, 7])
    check(tp.neg(T(big)), -big, 0)  # INT64_MIN wraps to itself, like NumPy and PyTorch
    check(tp.abs(T(big)), np.abs(big), 0)


def test_unary_float16_bfloat16_compute_in_float32():
    x = np.array([0.5, -1.0, 2.0], np.float16)
    out = tp.exp(T(x))
    assert dtname(out) == "float16"
    check(out, np.exp(x.astype(np.float32)).astype(np.float16), rtol=1e-3)
    b = tp.tensor([0.5, 1.0]).to(tp.bfloat16)
    assert dtname(tp.sin(b)) == "bfloat16"


def test_unary_parameters():
    x = np.linspace(-5, 5, 41).astype(np.float32)
    check(tp.softplus(T(x), beta=2, threshold=3), _softplus(x.astype(np.float64), 2.0, 3.0), rtol=1e-6, atol=1e-7)
    check(tp.elu(T(x), alpha=0.5), np.where(x > 0, x, 0.5 * np.expm1(x)), rtol=1e-6, atol=1e-7)
    check(tp.leaky_relu(T(x), negative_slope=0.2), np.where(x > 0, x, 0.2 * x), rtol=1e-6)
    check(tp.hardtanh(T(x), min_val=-2, max_val=0.5), np.clip(x, -2, 0.5), 0)
    # Reference in float64: in float32 the formula's 1 + tanh cancels for x < -3 and NumPy's own
    # float32 value is off by ~4e-4 relative there (which one ours matched depended on the CPU's ISA).
    xd = x.astype(np.float64)
    g_tanh = 0.5 * xd * (1 + np.tanh(math.sqrt(2 / math.pi) * (xd + 0.044715 * xd ** 3)))
    check(tp.gelu(T(x), approximate="tanh"), g_tanh, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="gelu"):
        tp.gelu(T(x), approximate="fast")
    p = np.array([0.0, 0.05, 0.3, 0.97, 1.0], np.float32)
    e = 0.1
    pc = np.clip(p, e, 1 - e)
    check(tp.logit(T(p), eps=e), np.log(pc / (1 - pc)), rtol=1e-6)
    v = np.array([1.2345, -2.5, 0.5, 1.5, 1234.5678], np.float64)
    check(tp.round(T(v), decimals=2), np.round(v, 2), rtol=1e-12)
    check(tp.round(T(v), decimals=-2), np.round(v, -2), rtol=1e-12)
    check(tp.round(T(v)), np.round(v), 0)  # half to even


def test_unary_bool_outputs():
    x = SPECIAL.astype(np.float32)
    check(tp.isnan(T(x)), np.isnan(x), 0)
    check(tp.isinf(T(x)), np.isinf(x), 0)
    check(tp.isfinite(T(x)), np.isfinite(x), 0)
    check(tp.logical_not(T(x)), np.logical_not(x), 0)
    i = np.array([0, 3, -2])
    check(tp.isfinite(T(i)), np.ones(3, bool), 0)
    check(tp.isnan(T(i)), np.zeros(3, bool), 0)
    check(tp.logical_not(T(i)), np.logical_not(i), 0)
    check(tp.bitwise_not(T(i)), ~i, 0)
    check(tp.bitwise_not(T(np.array([True, False]))), np.array([False, True]), 0)
    check(~T(i), ~i, 0)
    with pytest.raises(TypeError, match="bitwise_not"):
        tp.bitwise_not(T(x))


# ------------------------------------------------------------------ binary

def _floor_div(a, b):
    with np.errstate(all="ignore"):
        return np.floor_divide(a, b)


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floor_divide": _floor_div, "remainder": np.remainder, "fmod": np.fmod, "pow": np.power,
    "atan2": np.arctan2, "maximum": np.maximum, "minimum": np.minimum, "hypot": np.hypot,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_float_broadcasting(name, dtype):
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 4, (5, 1, 7)).astype(dtype)
    b = rng.uniform(-3, 3, (4, 1)).astype(dtype)
    b[np.abs(b) < 0.1] = 0.7
    if name == "pow":
        b = b.round()  # integral exponents keep negative bases real
        a = a - 2
    want = BINARY[name](a.astype(np.float64), b.astype(np.float64))
    out = getattr(tp, name)(T(a), T(b))
    assert tuple(out.shape) == (5, 4, 7)
    rtol = 4e-6 if dtype == "float32" else 1e-12
    check(out, want.astype(want.dtype if want.dtype == bool else dtype), rtol=rtol, atol=1e-6 if dtype == "float32" else 0)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_noncontiguous_and_empty(name):
    rng = np.random.default_rng(2)
    a = rng.uniform(0.5, 3, (8, 6)).astype(np.float32)
    b = rng.uniform(0.5, 3, (6, 8)).astype(np.float32)
    f = getattr(tp, name)
    check(f(T(a), T(b).t()), BINARY[name](a.astype(np.float64), b.T.astype(np.float64)).astype(
        np.float32 if name not in ("eq", "ne", "lt", "le", "gt", "ge") and not name.startswith("logical") else bool),
          rtol=4e-6, atol=1e-6)
    check(f(T(a)[::2, 1::2], T(a)[1::2, ::2]), BINARY[name](a[::2, 1::2].astype(np.float64), a[1::2, ::2].astype(np.float64)).astype(
        np.float32 if name not in ("eq", "ne", "lt", "le", "gt", "ge") and not name.startswith("logical") else bool),
          rtol=4e-6, atol=1e-6)
    out = f(tp.tensor(np.zeros((0, 4), np.float32)), tp.tensor(np.ones((1, 4), np.float32)))
    assert tuple(out.shape) == (0, 4)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "floor_divide", "remainder", "fmod", "maximum", "minimum",
                                  "eq", "lt", "ge", "logical_and", "logical_xor"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
def test_binary_integer(name, dtype):
    rng = np.random.default_rng(3)
    lo = 0 if dtype == "uint8" else -20
    a = rng.integers(lo, 20, (6, 5)).astype(dtype)
    b = rng.integers(1, 9, (5,)).astype(dtype)
    if dtype != "uint8":
        b[::2] *= -1
    out = getattr(tp, name)(T(a), T(b))
    with np.errstate(all="ignore"):
        want = BINARY[name](a, b)
    check(out, want, 0)


@pytest.mark.parametrize("name", ["remainder", "fmod", "floor_divide"])
def test_float_modulo_special_values(name):
    a = np.array([5.0, -5.0, 5.0, -5.0, 0.0, -0.0, np.inf, 5.0, 5.0, np.nan, 5.0, 1e30, 7.5])
    b = np.array([3.0, 3.0, -3.0, -3.0, 5.0, 5.0, 3.0, np.inf, -np.inf, 2.0, 0.0, 3.0, 2.5])
    for dt in (np.float32, np.float64):
        with np.errstate(all="ignore"):
            want = BINARY[name](a.astype(dt), b.astype(dt))
        got = N(getattr(tp, name)(T(a.astype(dt)), T(b.astype(dt))))
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True, err_msg=f"{name} {dt}")
        assert np.array_equal(np.signbit(got[~np.isnan(got) & (got == 0)]), np.signbit(want[~np.isnan(want) & (want == 0)])) or name == "remainder"


def test_float_fmod_large_quotients_are_exact():
    rng = np.random.default_rng(4)
    a = (rng.standard_normal(4000) * 10.0 ** rng.integers(-3, 30, 4000)).astype(np.float32)
    b = (rng.standard_normal(4000) * 10.0 ** rng.integers(-3, 5, 4000)).astype(np.float32)
    check(tp.fmod(T(a), T(b)), np.fmod(a, b), 0)
    check(tp.remainder(T(a), T(b)), np.remainder(a, b), rtol=1e-6)


def test_integer_division_by_zero_raises():
    for name in ("remainder", "fmod", "floor_divide"):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            getattr(tp, name)(tp.tensor([1, 2]), tp.tensor([1, 0]))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        tp.div(tp.tensor([1, 2]), 0, rounding_mode="trunc")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        tp.tensor([4]) // 0
    # true division of integers by zero gives inf/nan like PyTorch
    check(tp.tensor([1, 0]) / tp.tensor([0, 0]), np.array([np.inf, np.nan], np.float32), 0)


def test_div_rounding_modes():
    a = np.array([7, -7, 7, -7, 0, -9223372036854775807 - 1])
    b = np.array([2, 2, -2, -2, 3, -1])
    check(tp.div(T(a), T(b), rounding_mode="trunc"), np.array([3, -3, -3, 3, 0, -9223372036854775807 - 1]), 0)
    check(tp.div(T(a), T(b), rounding_mode="floor"), np.array([3, -4, -4, 3, 0, -9223372036854775807 - 1]), 0)
    fa, fb = a[:5].astype(np.float32) + 0.5, b[:5].astype(np.float32)
    check(tp.div(T(fa), T(fb), rounding_mode="trunc"), np.trunc(fa / fb), 0)
    check(tp.div(T(fa), T(fb), rounding_mode="floor"), np.floor_divide(fa, fb), 0)
    out = tp.div(T(a[:5]), T(b[:5]))
    assert dtname(out) == "float32"
    with pytest.raises(ValueError, match="rounding_mode"):
        tp.div(T(fa), T(fb), rounding_mode="round")


def test_add_sub_alpha_and_promotion():
    a = np.array([1.0, 2.0], np.float32)
    b = np.array([10, 20])
    check(tp.add(T(a), T(b), alpha=2), a + 2 * b, 0)
    check(tp.sub(T(a), T(b), alpha=0.5), a - 0.5 * b, 0)
    check(tp.add(T(b), T(b), alpha=3), b + 3 * b, 0)
    with pytest.raises(TypeError, match="alpha"):
        tp.add(T(b), T(b), alpha=0.5)
    assert dtname(tp.add(T(b), 1.5)) == "float32"
    assert dtname(tp.add(T(b.astype(np.int32)), 1)) == "int32"
    assert dtname(tp.add(T(b.astype(np.int32)), T(b))) == "int64"
    assert dtname(tp.mul(T(np.array([True, False])), T(np.array([True, True])))) == "bool"
    assert dtname(tp.add(T(a), T(np.array(2.0)))) == "float32"  # a 0-d float64 does not widen
    with pytest.raises(TypeError, match="sub"):
        tp.sub(T(np.array([True])), T(np.array([False])))


def test_pow_forms():
    x = np.array([[-2.0, -0.5, 0.0, 0.5, 3.0]], np.float32)
    for e in (2, 3, 0.5, -0.5, -1, -2, 0, 1.7):
        with np.errstate(all="ignore"):
            want = np.power(x.astype(np.float64), e).astype(np.float32)
        got = tp.pow(T(x), e)
        np.testing.assert_allclose(N(got), want, rtol=2e-6, equal_nan=True, err_msg=str(e))
        np.testing.assert_allclose(N(T(x) ** e), want, rtol=2e-6, equal_nan=True)
    check(2 ** T(x), np.power(2.0, x), rtol=2e-6)
    check(tp.pow(2, T(x)), np.power(2.0, x), rtol=2e-6)
    i = np.array([2, 3, -2])
    check(T(i) ** 3, i ** 3, 0)
    check(tp.pow(T(i), T(np.array([-1, 2, -1]))), np.array([0, 9, 0]), 0)
    check(tp.pow(T(np.array([1, -1, -1])), T(np.array([-3, -3, -2]))), np.array([1, -1, 1]), 0)
    assert dtname(T(i) ** 0.5) == "float32"
    with pytest.raises(ValueError, match="negative"):
        T(i) ** -1
    sv = np.array([-np.inf, -1.0, -0.0, np.nan, 1.0])
    ev = np.array([0.5, np.inf, -3.0, 0.0, np.nan])
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(N(tp.pow(T(sv.astype(np.float32)), T(ev.astype(np.float32)))),
                                   np.power(sv, ev).astype(np.float32), equal_nan=True)


def test_pow_negative_bases_many_lanes():
    rng = np.random.default_rng(5)
    a = rng.standard_normal(1000).astype(np.float32)
    b = rng.integers(-4, 5, 1000).astype(np.float32)
    b[::3] += 0.5
    with np.errstate(all="ignore"):
        want = np.power(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(N(tp.pow(T(a), T(b))), want, rtol=4e-6, equal_nan=True)


def test_maximum_minimum_nan_propagation():
    a = np.array([1.0, np.nan, 3.0, -np.inf])
    b = np.array([np.nan, 2.0, 1.0, 0.0])
    check(tp.maximum(T(a), T(b)), np.maximum(a, b), 0)
    check(tp.minimum(T(a), T(b)), np.minimum(a, b), 0)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                                  "bitwise_right_shift"])
def test_bitwise(name):
    a = np.array([[0, 1, 5, -8, 255, -1]])
    b = np.array([[3], [1]])
    ref = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
           "bitwise_left_shift": np.left_shift, "bitwise_right_shift": np.right_shift}[name]
    check(getattr(tp, name)(T(a), T(b)), ref(a, b), 0)
    check(getattr(tp, name)(T(a.astype(np.int32)), 2), ref(a.astype(np.int32), 2), 0)
    if not name.endswith("shift"):
        p, q = np.array([True, False, True]), np.array([True, True, False])
        check(getattr(tp, name)(T(p), T(q)), ref(p, q), 0)
    with pytest.raises(TypeError, match=name) as e:
        getattr(tp, name)(tp.tensor([1.0]), tp.tensor([1.0]))
    assert "float32" in str(e.value)


def test_shift_by_large_amounts():
    a = np.array([1, -1, 16, -16])
    check(tp.bitwise_left_shift(T(a), T(np.array([64, 65, 3, 70]))), np.array([0, 0, 128, 0]), 0)
    check(tp.bitwise_right_shift(T(a), T(np.array([64, 70, 2, 70]))), np.array([0, -1, 4, -1]), 0)


def test_dunders():
    a = np.array([6, 3, -7])
    t = T(a)
    check(t & 3, a & 3, 0)
    check(5 | t, 5 | a, 0)
    check(t ^ t, a ^ a, 0)
    check(~t, ~a, 0)
    check(t << 1, a << 1, 0)
    check(1 << T(np.array([1, 2])), np.array([2, 4]), 0)
    check(t >> 1, a >> 1, 0)
    check(t ** 2, a ** 2, 0)
    check(2 ** T(np.array([1, 3])), np.array([2, 8]), 0)
    check(t // 4, a // 4, 0)
    check(-20 // T(np.array([3, -3])), np.array([-20 // 3, -20 // -3]), 0)
    check(t % 4, a % 4, 0)
    check(10 % T(np.array([3, -3])), np.array([1, -2]), 0)
    u = T(a.copy())
    u //= 2
    check(u, a // 2, 0)
    u **= 2
    check(u, (a // 2) ** 2, 0)
    u %= 3
    check(u, ((a // 2) ** 2) % 3, 0)
    u &= 1
    u |= 4
    u ^= 1
    u <<= 1
    u >>= 1
    check(u, ((((((a // 2) ** 2) % 3) & 1) | 4) ^ 1), 0)


def test_broadcast_error_names_op_shapes():
    for name in ("add", "atan2", "remainder", "bitwise_and", "logical_or", "pow"):
        with pytest.raises(ValueError) as e:
            getattr(tp, name)(tp.tensor(np.ones((2, 3), np.int64)), tp.tensor(np.ones((4,), np.int64)))
        msg = str(e.value)
        assert name in msg and "[2, 3]" in msg and "[4]" in msg, msg


# ------------------------------------------------------------------ ternary

def test_where():
    c = np.array([[True, False, True]])
    a = np.arange(6.0).reshape(2, 3).astype(np.float32)
    check(tp.where(T(c), T(a), 0.5), np.where(c, a, 0.5), 0)
    check(tp.where(T(c), T(np.array([1, 2, 3])), T(a)), np.where(c, [1, 2, 3], a), 0)
    with pytest.raises(TypeError, match="where"):
        tp.where(T(a), T(a), T(a))


def test_addcmul_addcdiv():
    rng = np.random.default_rng(6)
    s, t1, t2 = (rng.standard_normal(sh).astype(np.float32) for sh in ((3, 4), (4,), (3, 1)))
    check(tp.addcmul(T(s), T(t1), T(t2), value=0.5), s + 0.5 * t1 * t2, rtol=1e-6, atol=1e-6)
    check(tp.addcdiv(T(s), T(t1), T(t2), value=-2), s - 2 * t1 / t2, rtol=1e-5, atol=1e-5)
    i = np.array([1, 2, 3])
    check(tp.addcmul(T(i), T(i), T(i), value=2), i + 2 * i * i, 0)
    with pytest.raises(TypeError, match="addcdiv"):
        tp.addcdiv(T(i), T(i), T(i))


def test_lerp():
    a = np.array([0.0, 1.0, -2.0, 10.0], np.float32)
    b = np.array([1.0, 3.0, 2.0, -10.0], np.float32)
    for w in (0.0, 0.25, 0.5, 0.75, 1.0):
        check(tp.lerp(T(a), T(b), w), a + w * (b - a), rtol=1e-6, atol=1e-6)
    w = np.array([0.1, 0.9, 1.0, 0.0], np.float32)
    got = N(tp.lerp(T(a), T(b), T(w)))
    np.testing.assert_allclose(got, a + w * (b - a), rtol=1e-6, atol=1e-6)
    assert got[2] == b[2] and got[3] == a[3]  # exact at weight 1 and 0


def test_clamp():
    x = np.array([-3.0, -0.5, 0.0, 0.7, 5.0, np.nan], np.float32)
    check(tp.clamp(T(x), -1, 1), np.clip(x, -1, 1), 0)
    check(tp.clamp(T(x), min=0), np.maximum(x, 0), 0)
    check(tp.clamp(T(x), max=0), np.minimum(x, 0), 0)
    check(tp.clamp(T(x), 2, 1), np.full(6, 1.0, np.float32) * np.where(np.isnan(x), np.nan, 1), 0)  # min > max -> max
    lo = np.array([-2.0, 0.0, 0.1, 0.0, 1.0, 0.0], np.float32)
    hi = np.array([0.0, 1.0, 0.5, 0.5, 4.0, 1.0], np.float32)
    check(tp.clamp(T(x), T(lo), T(hi)), np.minimum(np.maximum(x, lo), hi), 0)
    check(tp.clamp_min(T(x), T(lo)), np.maximum(x, lo), 0)
    check(tp.clamp_max(T(x), T(hi)), np.minimum(x, hi), 0)
    i = np.array([1, 5, -3])
    check(tp.clamp(T(i), 0, 3), np.clip(i, 0, 3), 0)
    out = tp.clamp(T(i), 2, 3.5)
    assert dtname(out) == "float32"
    check(out, np.clip(i, 2, 3.5).astype(np.float32), 0)
    with pytest.raises(ValueError, match="clamp"):
        tp.clamp(T(x))
    check(tp.clamp(T(x), T(np.array(np.nan, np.float32)), None), np.full(6, np.nan, np.float32), 0)


# ------------------------------------------------------------------ in-place

def test_inplace_variants():
    a = np.array([0.5, -1.0, 2.0], np.float32)
    t = T(a)
    v = t._version if hasattr(t, "_version") else None
    r = t.exp_()
    assert r is t or np.array_equal(N(r), N(t))
    check(t, np.exp(a), rtol=1e-6)
    if v is not None:
        assert t._version > v
    t = T(a)
    t.add_(T(np.ones(3, np.float32)), alpha=2)
    check(t, a + 2, 0)
    t.clamp_(0, 1)
    check(t, np.clip(a + 2, 0, 1), 0)
    t = T(a)
    t.mul_(2).sub_(1)
    check(t, a * 2 - 1, 0)
    t = T(a)
    t.div_(2, rounding_mode="floor")
    check(t, np.floor(a / 2), 0)
    i = T(np.array([1, 2, 3]))
    with pytest.raises(TypeError, match="can't be cast to the desired output type"):
        i.exp_()
    with pytest.raises(TypeError, match="can't be cast"):
        i.add_(1.5)
    i.add_(2)
    check(i, np.array([3, 4, 5]), 0)
    f = T(a.copy())
    f.add_(T(np.array([1, 2, 3])))  # int operand into float self is fine
    check(f, a + np.array([1, 2, 3]), 0)
    with pytest.raises(ValueError, match="add_"):
        T(np.ones(3, np.float32)).add_(T(np.ones((2, 3), np.float32)))


def test_inplace_on_views_and_narrow_dtypes():
    base = np.arange(12.0).reshape(3, 4).astype(np.float32)
    t = T(base)
    t.t().sin_()
    check(t, np.sin(base), rtol=1e-6, atol=1e-6)
    t = T(base)
    row = t[1]
    row.neg_()
    want = base.copy()
    want[1] = -want[1]
    check(t, want, 0)
    h = T(np.array([1.0, 2.0], np.float16))
    h.sqrt_()
    assert dtname(h) == "float16"
    check(h, np.sqrt(np.array([1.0, 2.0])).astype(np.float16), rtol=1e-3)
    i8 = T(np.array([100, -100], np.int8))
    i8.add_(100)
    check(i8, np.array([100, -100], np.int8) + np.int8(100), 0)  # wraps like int8


def test_inplace_operand_overlapping_self():
    a = np.arange(6.0).astype(np.float32)
    t = T(a)
    t[1:].add_(t[:-1])
    want = a.copy()
    want[1:] = a[1:] + a[:-1]
    check(t, want, 0)


# ------------------------------------------------------------------ torch oracle

@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_torch(name):
    torch = pytest.importorskip("torch")
    a = np.array([5.0, -5.0, 5.0, -5.0, 0.0, -0.0, np.inf, 5.0, -np.inf, np.nan, 2.0, 0.5, 1.0, -1.5], np.float32)
    b = np.array([3.0, 3.0, -3.0, -3.0, 5.0, -5.0, 3.0, np.inf, 2.0, 2.0, np.nan, -2.0, np.inf, 2.0], np.float32)
    want = getattr(torch, name)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    got = N(getattr(tp, name)(T(a), T(b)))
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-6, equal_nan=True, err_msg=name)


def test_float32_pow_accuracy_over_wide_ranges():
    # float32 pow is computed as 2^(y log2|x|) in double: results within an ulp of float64 pow
    rng = np.random.default_rng(8)
    n = 20000
    cases = [(rng.standard_normal(n), rng.standard_normal(n)),
             (np.abs(rng.standard_normal(n)) * 10.0 ** rng.integers(-40, 38, n), rng.uniform(-3, 3, n)),
             (rng.uniform(0, 2, n), rng.uniform(-100, 100, n)),
             (rng.integers(-10, 10, n) * 1.0, rng.integers(-30, 30, n) * 1.0)]
    for x, y in cases:
        x, y = x.astype(np.float32), y.astype(np.float32)
        got = N(tp.pow(T(x), T(y))).astype(np.float64)
        with np.errstate(all="ignore"):
            want = np.power(x.astype(np.float64), y.astype(np.float64))
            wf = want.astype(np.float32).astype(np.float64)
        assert np.array_equal(np.isnan(got), np.isnan(wf))
        assert np.array_equal(got[np.isinf(wf)], wf[np.isinf(wf)])
        fin = np.isfinite(wf)
        assert np.all(np.isfinite(got[fin]))
        ulp = np.abs(got[fin] - want[fin]) / np.spacing(np.abs(wf[fin]).astype(np.float32)).astype(np.float64)
        assert ulp.max() <= 1.0
