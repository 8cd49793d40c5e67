"""Misc operators (ops/misc_ops.cpp) and the Python helpers of _misc_api.py,
against NumPy and, where installed, PyTorch."""
import numpy as np
import pytest

import tensorplay as tp
from tensorplay import _misc_api
from fd_check import check_gradients

_misc_api.install()  # the package may not install it yet
INF, NAN = float("inf"), float("nan")


def np_of(t):
    return np.asarray(t.numpy())


SPECIAL = np.array([0.0, -0.0, 1.5, -2.0, INF, -INF, NAN, 1e-300], dtype=np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_isclose_allclose_vs_numpy(dtype):
    a = np.array([1.0, 2.0, INF, -INF, NAN, 0.0, 1e-9], dtype=dtype)
    b = np.array([1.0 + 1e-6, 2.1, INF, INF, NAN, 1e-9, 0.0], dtype=dtype)
    for eqn in (False, True):
        got = np_of(tp.isclose(tp.tensor(a), tp.tensor(b), equal_nan=eqn))
        np.testing.assert_array_equal(got, np.isclose(a, b, equal_nan=eqn))
    assert tp.allclose(tp.tensor(a[:2]), tp.tensor(a[:2])) is True
    assert tp.tensor(a).allclose(tp.tensor(b)) is False
    # broadcasting and integers
    x = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(np_of(tp.isclose(tp.tensor(x), tp.tensor(x[:1]))), np.isclose(x, x[:1]))
    assert np_of(tp.isclose(tp.zeros(0), tp.zeros(0))).shape == (0,)


def test_equal():
    assert tp.equal(tp.tensor([1, 2]), tp.tensor([1, 2])) is True
    assert tp.equal(tp.tensor([1, 2]), tp.tensor([1, 3])) is False
    assert tp.equal(tp.ones(2), tp.ones(3)) is False
    assert tp.ones(2, 2).equal(tp.ones(2, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_to_num(dtype):
    a = SPECIAL.astype(dtype)
    np.testing.assert_array_equal(np_of(tp.nan_to_num(tp.tensor(a))), np.nan_to_num(a))
    np.testing.assert_array_equal(np_of(tp.tensor(a).nan_to_num(nan=1.0, posinf=2.0, neginf=-3.0)),
                                  np.nan_to_num(a, nan=1.0, posinf=2.0, neginf=-3.0))
    t = tp.tensor(a)
    t.nan_to_num_()
    np.testing.assert_array_equal(np_of(t), np.nan_to_num(a))
    np.testing.assert_array_equal(np_of(tp.nan_to_num(tp.tensor([1, 2]))), [1, 2])


def test_clip_alias():
    x = np.linspace(-3, 3, 7)
    np.testing.assert_allclose(np_of(tp.clip(tp.tensor(x), -1.0, 2.0)), np.clip(x, -1, 2))
    t = tp.tensor(x)
    t.clip_(min=0.0)
    np.testing.assert_allclose(np_of(t), np.clip(x, 0, None))


@pytest.mark.parametrize("k", [-2, 0, 1])
def test_diag_trace(k):
    v = np.array([1, 2, 3])
    np.testing.assert_array_equal(np_of(tp.diag(tp.tensor(v), k)), np.diag(v, k))
    m = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(np_of(tp.diag(tp.tensor(m), k)), np.diag(m, k))
    np.testing.assert_array_equal(np_of(tp.diag(tp.tensor([True, False]))), np.diag([True, False]))
    assert float(tp.trace(tp.tensor(m)).item()) == np.trace(m)
    check_gradients(lambda a: tp.diag(a, k), np.random.default_rng(0).standard_normal(3))
    check_gradients(lambda a: tp.trace(a), np.random.default_rng(1).standard_normal((3, 4)))


def test_tril_triu_inplace():
    m = np.arange(16.0).reshape(4, 4)
    t = tp.tensor(m)
    t.tril_(-1)
    np.testing.assert_array_equal(np_of(t), np.tril(m, -1))
    t = tp.tensor(m)
    t.triu_(1)
    np.testing.assert_array_equal(np_of(t), np.triu(m, 1))


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((7, 3), False), ((7, 3), True), ((3, 7), True),
                                        ((3, 3, 3), False), ((0, 2), False)])
def test_fill_diagonal(shape, wrap):
    a = np.zeros(shape)
    t = tp.tensor(a)
    t.fill_diagonal_(5.0, wrap=wrap)
    np.fill_diagonal(a, 5.0, wrap=wrap)
    np.testing.assert_array_equal(np_of(t), a)


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_cartesian(indexing):
    a, b, c = np.arange(3), np.arange(2) + 10, np.arange(4) + 20
    got = tp.meshgrid(tp.tensor(a), tp.tensor(b), tp.tensor(c), indexing=indexing)
    for g, e in zip(got, np.meshgrid(a, b, c, indexing=indexing)):
        np.testing.assert_array_equal(np_of(g), e)
    got = tp.meshgrid([tp.tensor(a), tp.tensor(b)], indexing=indexing)
    for g, e in zip(got, np.meshgrid(a, b, indexing=indexing)):
        np.testing.assert_array_equal(np_of(g), e)
    prod = np_of(tp.cartesian_prod(tp.tensor(a), tp.tensor(b)))
    np.testing.assert_array_equal(prod, np.array([[x, y] for x in a for y in b]))
    with pytest.raises(Exception, match="meshgrid"):
        tp.meshgrid(tp.tensor(a), indexing="yx")


def test_cross():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((1, 3))
    np.testing.assert_allclose(np_of(tp.cross(tp.tensor(a), tp.tensor(b), dim=1)), np.cross(a, b), rtol=1e-12)
    np.testing.assert_allclose(np_of(tp.cross(tp.tensor(a.T), tp.tensor(b.T))), np.cross(a, b).T, rtol=1e-12)
    check_gradients(lambda x, y: tp.cross(x, y, dim=-1), a, b)
    with pytest.raises(Exception, match="cross"):
        tp.cross(tp.ones(4, 2), tp.ones(4, 2))


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, INF])
def test_cdist_dist(p):
    rng = np.random.default_rng(3)
    x1, x2 = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 5, 3))
    d = x1[:, :, None, :] - x2[:, None, :, :]
    ref = (np.count_nonzero(d, axis=-1) if p == 0 else np.max(np.abs(d), -1) if p == INF
           else np.sum(np.abs(d) ** p, -1) ** (1 / p))
    np.testing.assert_allclose(np_of(tp.cdist(tp.tensor(x1), tp.tensor(x2), p=p)), ref, rtol=1e-10)
    # accurate for nearly equal points (no |x|^2 - 2xy + |y|^2 cancellation)
    big = np.array([[1e4, 1e4, 1e4]])
    np.testing.assert_allclose(np_of(tp.cdist(tp.tensor(big), tp.tensor(big + 1e-6))), [[np.sqrt(3) * 1e-6]],
                               rtol=1e-6)
    a, b = rng.standard_normal(5), rng.standard_normal(5)
    ref = np.linalg.norm(a - b, ord=p) if p else np.count_nonzero(a - b)
    np.testing.assert_allclose(float(tp.dist(tp.tensor(a), tp.tensor(b), p).item()), ref, rtol=1e-10)
    if p in (1.0, 2.0, 3.0):
        check_gradients(lambda u, v: tp.cdist(u, v, p=p), x1[0], x2[0])


def test_logaddexp_logcumsumexp():
    a = np.array([0.0, 1.0, -INF, INF, INF, -INF, NAN, 1000.0, -1000.0])
    b = np.array([0.0, -2.0, -INF, INF, -INF, 3.0, 1.0, 1000.0, 5.0])
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(np_of(tp.logaddexp(tp.tensor(a), tp.tensor(b))), np.logaddexp(a, b))
    x = np.array([[-1000.0, 0.0, 1.0, 1000.0], [3.0, -INF, 2.0, 0.5]])
    ref = np.logaddexp.accumulate(x, axis=1)
    np.testing.assert_allclose(np_of(tp.logcumsumexp(tp.tensor(x), 1)), ref, rtol=1e-12)
    np.testing.assert_allclose(np_of(tp.logcumsumexp(tp.tensor(x), 0)), np.logaddexp.accumulate(x, axis=0))
    assert np_of(tp.logcumsumexp(tp.zeros(0, 3), 0)).shape == (0, 3)
    r = np.random.default_rng(4).standard_normal((3, 5))
    check_gradients(lambda t: tp.logcumsumexp(t, 1), r)
    check_gradients(lambda s, t: tp.logaddexp(s, t), r, r[::-1] * 2)


def test_diff():
    x = np.array([1, 4, 9, 16, 25])
    for n in (0, 1, 2, 6):
        np.testing.assert_array_equal(np_of(tp.diff(tp.tensor(x), n=n)), np.diff(x, n=n))
    m = np.arange(12.0).reshape(3, 4) ** 2
    np.testing.assert_array_equal(np_of(tp.diff(tp.tensor(m), dim=0)), np.diff(m, axis=0))
    np.testing.assert_array_equal(np_of(tp.diff(tp.tensor(m), prepend=tp.zeros(3, 1, dtype=tp.float64))),
                                  np.diff(m, prepend=0))
    np.testing.assert_array_equal(np_of(tp.diff(tp.tensor([True, False, False]))), [True, False])
    check_gradients(lambda t: tp.diff(t, n=2), m)


def test_sign_functions():
    a = SPECIAL
    np.testing.assert_array_equal(np_of(tp.signbit(tp.tensor(a)))[:6], np.signbit(a)[:6])
    np.testing.assert_array_equal(np_of(tp.signbit(tp.tensor([-3, 0, 2]))), [True, False, False])
    b = np.array([1.0, -1.0, -0.0, 0.0, 2.0, -3.0, 1.0, -1.0])
    np.testing.assert_array_equal(np_of(tp.copysign(tp.tensor(a), tp.tensor(b))), np.copysign(a, b))
    assert tp.copysign(tp.tensor([1, 2]), tp.tensor([-1, 1])).dtype == tp.float32
    x = np.array([-1.0, 0.0, 2.0, -0.0])
    np.testing.assert_array_equal(np_of(tp.heaviside(tp.tensor(x), tp.tensor(np.array([0.5])))), np.heaviside(x, 0.5))


def test_xlogy_angles_float_power_positive():
    x = np.array([0.0, 0.0, 1.0, 2.0, 3.0])
    y = np.array([0.0, INF, 2.0, NAN, 0.5])
    ref = np.where(np.isnan(y), np.nan, np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1, y))))
    np.testing.assert_allclose(np_of(tp.xlogy(tp.tensor(x), tp.tensor(y))), ref)
    np.testing.assert_allclose(np_of(tp.deg2rad(tp.tensor([180, 90]))), np.deg2rad([180, 90]), rtol=1e-6)
    np.testing.assert_allclose(np_of(tp.rad2deg(tp.tensor([np.pi]))), [180.0])
    fp = tp.float_power(tp.tensor([2, 3]), 2)
    assert fp.dtype == tp.float64 and np_of(fp).tolist() == [4.0, 9.0]
    t = tp.tensor([1.0])
    assert np_of(tp.positive(t)).tolist() == [1.0]
    with pytest.raises(Exception, match="positive"):
        tp.positive(tp.tensor([True]))


def test_aliases():
    x = tp.tensor([-1.5, 2.5])
    np.testing.assert_array_equal(np_of(tp.absolute(x)), [1.5, 2.5])
    np.testing.assert_array_equal(np_of(tp.negative(x)), [1.5, -2.5])
    np.testing.assert_array_equal(np_of(tp.fix(x)), [-1.0, 2.0])
    np.testing.assert_array_equal(np_of(tp.true_divide(tp.tensor([1, 2]), 2)), [0.5, 1.0])
    np.testing.assert_array_equal(np_of(tp.multiply(x, 2)), [-3.0, 5.0])
    np.testing.assert_array_equal(np_of(tp.subtract(x, 1, alpha=2)), [-3.5, 0.5])
    np.testing.assert_array_equal(np_of(tp.divide(tp.tensor([7]), 2, rounding_mode="floor")), [3])
    y = tp.tensor([-1.5, 2.5])
    y.negative_()
    y.multiply_(2)
    np.testing.assert_array_equal(np_of(y), [3.0, -5.0])


def test_python_helpers():
    t = tp.ones(2, dtype=tp.float64)
    z = t.new_zeros(2, 3)
    assert tuple(z.shape) == (2, 3) and z.dtype == tp.float64
    assert t.new_ones((1,), dtype=tp.int64).dtype == tp.int64
    assert tuple(t.new_empty([4]).shape) == (4,)
    assert np_of(t.new_full((2,), 7)).tolist() == [7.0, 7.0]
    nt = t.new_tensor([1, 2], requires_grad=True)
    assert nt.dtype == tp.float64 and nt.requires_grad
    assert tp.ones(1).type() == "tensorplay.FloatTensor"
    assert tp.ones(1).type(tp.int64).dtype == tp.int64
    assert tp.is_tensor(t) and not tp.is_tensor([1])
    assert tp.is_floating_point(t) and not tp.is_floating_point(tp.tensor([1]))
    assert tp.numel(tp.ones(2, 3)) == 6
    assert tp.as_tensor(t) is t
    a = np.arange(3.0)
    s = tp.as_tensor(a)
    a[0] = 42.0
    assert np_of(s)[0] == 42.0
    assert tp.as_tensor([1, 2], dtype=tp.float32).dtype == tp.float32
    assert tp.is_nonzero(tp.tensor([1])) and not tp.is_nonzero(tp.tensor(0.0))


def test_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x1, x2 = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    np.testing.assert_allclose(np_of(tp.cdist(tp.tensor(x1), tp.tensor(x2))),
                               torch.cdist(torch.tensor(x1), torch.tensor(x2)).numpy(), rtol=1e-10)
    x = rng.standard_normal((3, 6))
    np.testing.assert_allclose(np_of(tp.logcumsumexp(tp.tensor(x), 1)),
                               torch.logcumsumexp(torch.tensor(x), 1).numpy(), rtol=1e-12)
    a = torch.zeros(7, 3)
    a.fill_diagonal_(2.0, wrap=True)
    t = tp.zeros(7, 3)
    t.fill_diagonal_(2.0, wrap=True)
    np.testing.assert_array_equal(np_of(t), a.numpy())
    v = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(np_of(tp.xlogy(tp.tensor(v), tp.tensor([0.0]))),
                                  torch.xlogy(torch.tensor(v), torch.tensor([0.0])).numpy())
    np.testing.assert_array_equal(np_of(tp.diag(tp.tensor(v), -1)), torch.diag(torch.tensor(v), -1).numpy())


def test_noncontiguous_and_narrow_dtypes():
    m = np.arange(20.0).reshape(4, 5)
    t = tp.tensor(m).t()  # transposed view
    np.testing.assert_array_equal(np_of(tp.diff(t, dim=0)), np.diff(m.T, axis=0))
    np.testing.assert_array_equal(np_of(tp.diag(t)), np.diag(m.T))
    e = tp.tensor(np.array([1.0, 2.0, 3.0])).unsqueeze(0).expand(2, 3)  # expanded view
    np.testing.assert_allclose(np_of(tp.logcumsumexp(e, 1)), np.logaddexp.accumulate(np.tile([1.0, 2, 3], (2, 1)), 1))
    h = tp.tensor([1.0, float("inf"), float("nan")], dtype=tp.float16)
    out = tp.nan_to_num(h)
    assert out.dtype == tp.float16 and np_of(out.to(tp.float32)).tolist() == [1.0, 65504.0, 0.0]
    i8 = tp.tensor([1, 5, 2], dtype=tp.int8)
    assert tp.diff(i8).dtype == tp.int8 and np_of(tp.diff(i8)).tolist() == [4, -3]


def test_bad_arguments_raise():
    with pytest.raises(Exception, match="diag"):
        tp.diag(tp.ones(2, 2, 2))
    with pytest.raises(Exception, match="trace"):
        tp.trace(tp.ones(3))
    with pytest.raises(Exception, match="cdist"):
        tp.cdist(tp.ones(2, 3), tp.ones(2, 4))
    with pytest.raises(Exception, match="isclose"):
        tp.isclose(tp.ones(2), tp.ones(2, dtype=tp.float64))
    with pytest.raises(Exception, match="fill_diagonal_"):
        tp.ones(2, 3, 2).fill_diagonal_(1.0)


def test_more_gradients():
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(4), rng.uniform(0.5, 2.0, 4)
    check_gradients(lambda a, b: tp.xlogy(a, b), x, y)
    signs = tp.tensor(rng.standard_normal(4))  # the sign source has no gradient
    check_gradients(lambda a: tp.copysign(a, signs), x)
    check_gradients(lambda a: tp.nan_to_num(a), x)
    check_gradients(lambda a, b: tp.dist(a, b, 3), x, y)
    eq = tp.tensor([1.0, 2.0], dtype=tp.float64, requires_grad=True)
    tp.cdist(eq.reshape(1, 2), eq.detach().reshape(1, 2)).sum().backward()
    assert np_of(eq.grad).tolist() == [0.0, 0.0]  # zero distance: zero gradient, not NaN
