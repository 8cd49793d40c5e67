"""Derivative formulas of the pointwise math operators, checked against central
finite differences in float64 (inputs kept away from kinks and domain edges),
including broadcast operands whose gradients are summed back to their shape."""

import numpy as np
import pytest

import tensorplay as tp
from fd_check import check_gradients


def gradcheck(fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-8):
    return check_gradients(fn, *arrays, eps=eps, rtol=rtol, atol=atol)


def uniform(lo, hi, shape=(3, 4), seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def away_from(points, lo, hi, shape=(3, 4), seed=0, gap=0.15):
    x = uniform(lo, hi, shape, seed)
    for p in points:
        close = np.abs(x - p) < gap
        x[close] = p + np.sign(x[close] - p + 1e-12) * gap
    return x


UNARY = {
    "exp": (-2, 2), "exp2": (-2, 2), "expm1": (-2, 2), "log": (0.2, 3), "log2": (0.2, 3), "log10": (0.2, 3),
    "log1p": (-0.5, 3), "sqrt": (0.2, 3), "rsqrt": (0.2, 3), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1.2, 1.2),
    "asin": (-0.8, 0.8), "acos": (-0.8, 0.8), "atan": (-3, 3), "sinh": (-2, 2), "cosh": (-2, 2), "tanh": (-2, 2),
    "asinh": (-3, 3), "acosh": (1.3, 4), "atanh": (-0.8, 0.8), "erf": (-2, 2), "erfc": (-2, 2),
    "erfinv": (-0.9, 0.9), "sigmoid": (-4, 4), "logit": (0.1, 0.9), "reciprocal": (0.3, 3), "silu": (-4, 4),
    "mish": (-4, 4), "softplus": (-4, 4), "gelu": (-3, 3), "frac": (0.1, 0.9), "square": (-3, 3), "neg": (-3, 3),
}
KINKED = {  # name -> (kink points, domain)
    "relu": ([0.0], (-2, 2)), "abs": ([0.0], (-2, 2)), "elu": ([0.0], (-2, 2)), "leaky_relu": ([0.0], (-2, 2)),
    "hardtanh": ([-1.0, 1.0], (-2, 2)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradients(name):
    gradcheck(getattr(tp, name), uniform(*UNARY[name]))


@pytest.mark.parametrize("name", sorted(KINKED))
def test_kinked_unary_gradients(name):
    points, dom = KINKED[name]
    gradcheck(getattr(tp, name), away_from(points, *dom))


def test_parameterized_unary_gradients():
    x = away_from([0.0], -3, 3)
    gradcheck(lambda t: tp.gelu(t, approximate="tanh"), x)
    gradcheck(lambda t: tp.softplus(t, beta=2, threshold=3), away_from([1.5], -3, 3))
    gradcheck(lambda t: tp.elu(t, alpha=0.7), x)
    gradcheck(lambda t: tp.leaky_relu(t, negative_slope=0.2), x)
    gradcheck(lambda t: tp.hardtanh(t, min_val=-0.5, max_val=2), away_from([-0.5, 2.0], -3, 3))
    gradcheck(lambda t: tp.logit(t, eps=0.2), away_from([0.2, 0.8], 0.05, 0.95))


def test_piecewise_constant_unary_gradients_are_zero():
    for name in ("sign", "floor", "ceil", "round", "trunc"):
        x = tp.tensor(uniform(-3, 3), requires_grad=True)
        getattr(tp, name)(x).sum().backward()
        assert np.all(np.asarray(x.grad.numpy()) == 0), name


BINARY = {
    "add": lambda a, b: tp.add(a, b), "sub": lambda a, b: tp.sub(a, b), "mul": tp.mul, "div": tp.div,
    "add_alpha": lambda a, b: tp.add(a, b, alpha=2.5), "sub_alpha": lambda a, b: tp.sub(a, b, alpha=-1.5),
    "pow": tp.pow, "atan2": tp.atan2, "hypot": tp.hypot, "maximum": tp.maximum, "minimum": tp.minimum,
    "remainder": tp.remainder, "fmod": tp.fmod,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_gradients_with_broadcasting(name):
    a = uniform(0.5, 2.5, (3, 4), seed=1)
    b = uniform(0.6, 1.9, (4,), seed=2)
    if name in ("remainder", "fmod"):
        b = np.array([0.7, 1.1, 1.3, 1.7])
        whole = np.random.default_rng(1).integers(-3, 4, (3, 4))
        a = (whole + uniform(0.2, 0.8, (3, 4), seed=3)) * b  # quotients away from the jumps
    if name in ("maximum", "minimum"):
        b = np.array([0.9, 1.4, 1.8, 2.2])
        a[np.abs(a - b) < 0.1] += 0.3
    gradcheck(BINARY[name], a, b)


def test_binary_gradients_with_scalars():
    x = uniform(0.5, 2.0)
    gradcheck(lambda t: t ** 3, x)
    gradcheck(lambda t: 2.0 ** t, x)
    gradcheck(lambda t: tp.pow(t, 0.5), x)
    gradcheck(lambda t: tp.pow(t, -1), x)
    gradcheck(lambda t: 3.0 / t, x)


def test_pow_gradient_at_zero_base():
    x = tp.tensor(np.array([0.0, 0.0, 2.0]), requires_grad=True)
    e = tp.tensor(np.array([0.0, 2.0, 3.0]), requires_grad=True)
    tp.pow(x, e).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad.numpy()), [0.0, 0.0, 12.0])
    np.testing.assert_allclose(np.asarray(e.grad.numpy()), [0.0, 0.0, 8.0 * np.log(2.0)])


def test_ternary_gradients():
    s, t1, t2 = uniform(-1, 1, (3, 4), 3), uniform(0.5, 2, (4,), 4), uniform(0.5, 2, (3, 1), 5)
    gradcheck(lambda a, b, c: tp.addcmul(a, b, c, value=0.7), s, t1, t2)
    gradcheck(lambda a, b, c: tp.addcdiv(a, b, c, value=-1.3), s, t1, t2)
    gradcheck(lambda a, b, w: tp.lerp(a, b, w), s, t1, uniform(0, 1, (3, 1), 6))
    gradcheck(lambda a, b: tp.lerp(a, b, 0.3), s, t1)
    c = np.random.default_rng(7).random((3, 4)) > 0.5
    gradcheck(lambda a, b: tp.where(tp.tensor(c), a, b), s, t1)


def test_clamp_gradients():
    x = away_from([-0.5, 0.5], -2, 2)
    gradcheck(lambda t: tp.clamp(t, -0.5, 0.5), x)
    gradcheck(lambda t: tp.clamp(t, min=-0.5), x)
    gradcheck(lambda t: tp.clamp(t, max=0.5), x)
    lo = np.full((4,), -0.5)
    hi = np.full((3, 1), 0.5)
    gradcheck(lambda t, l, h: tp.clamp(t, l, h), x, lo, hi)
    gradcheck(lambda t, l: tp.clamp_min(t, l), x, lo)
    gradcheck(lambda t, h: tp.clamp_max(t, h), x, hi)


def test_float32_gradient_dtype():
    x = tp.tensor(np.array([0.5, 1.5], np.float32), requires_grad=True)
    tp.sin(x).sum().backward()
    assert "float32" in str(x.grad.dtype)
    np.testing.assert_allclose(np.asarray(x.grad.numpy()), np.cos([0.5, 1.5]), rtol=1e-6)
