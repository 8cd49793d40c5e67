"""Lowering families of the Stax registry, each checked against eager under
strict_native (no fallback): movement (flip, roll, repeat, tril/triu, cat),
indexing (index_select, gather, embedding, x[idx]) as checked indirect loads,
factories (arange), predicates, pow, prod."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.testing import assert_close


def compiled(fn):
    return tp.compile(fn, strict_native=True)


def check(fn, *args, exact=True):
    want = fn(*args)
    c = compiled(fn)
    got = c(*args)
    if exact:
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    else:
        assert_close(got, want, equal_nan=True)
    assert got.dtype == want.dtype and got.shape == want.shape
    return c


X = tp.randn(6, 7)
X3 = tp.randn(3, 4, 5)


@pytest.mark.parametrize("fn", [
    lambda x: x.flip(1) * 2,
    lambda x: x.flip(0, 1) + 1,
    lambda x: x.t().flip(0),
    lambda x: x.roll(2, 1),
    lambda x: x.roll(-3, 0),
    lambda x: x.roll((1, -2), (0, 1)),
    lambda x: x.roll(5),  # flattened
    lambda x: x.repeat(2, 3),
    lambda x: x.repeat(2, 1, 2),  # a leading new dim
    lambda x: x.tril(),
    lambda x: x.tril(-2) + x.triu(3),
    lambda x: (x * 2).triu(1),
    lambda x: tp.cat([x, x * 2], 1),
    lambda x: tp.cat([x, x.abs() * 3, x[:2]], 0),
    lambda x: tp.stack([x, -x], 1),
    lambda x: F.pad(x, (1, 2)),
    lambda x: F.pad(x, (2, 0, 1, 3), value=-1.5),
    lambda x: tp.cat([x, tp.zeros(0, 7)], 0),
], ids=lambda f: f.__code__.co_consts[0] if False else None)
def test_movement(fn):
    check(fn, X)


def test_movement_3d_and_ints():
    check(lambda x: x.flip(2).roll(1, 0), X3)
    check(lambda x: tp.cat([x, x], 2).tril(), X3)
    xi = tp.randint(-5, 5, (4, 6))
    check(lambda x: tp.cat([x, x * 3], 0).flip(1), xi)
    xb = X > 0
    check(lambda x: x.roll(1, 1).repeat(1, 2), xb)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim):
    idx = tp.tensor([3, 0, 0, 5, 1])
    check(lambda x, i: x.index_select(dim, i) * 2, X, idx)
    check(lambda x, i: (x.t() + 1).index_select(dim, i), X, idx)  # computed, transposed source


def test_gather_embedding_index():
    g = tp.randint(0, 7, (6, 3))
    check(lambda x, i: x.gather(1, i) + 1, X, g)
    g0 = tp.randint(0, 6, (2, 7))
    check(lambda x, i: x.gather(0, i), X, g0)
    w = tp.randn(10, 4)
    ids = tp.tensor([[1, 9, 0], [4, 4, 2]])
    check(lambda i, w: F.embedding(i, w).relu(), ids, w)
    neg = tp.tensor([-1, 2, -6, 0])
    check(lambda x, i: x[i] * 3, X, neg)
    check(lambda x, i: x[i], X, tp.tensor([[0, 1], [5, -2]]))


@pytest.mark.parametrize("op, bad", [
    (lambda x, i: x.index_select(0, i), tp.tensor([0, 6])),
    (lambda x, i: x.index_select(1, i), tp.tensor([-1])),
    (lambda x, i: x[i], tp.tensor([7])),
    (lambda x, i: x[i], tp.tensor([-7])),
    (lambda x, i: x.gather(1, i), tp.tensor([[9]])),
])
def test_index_out_of_range_raises(op, bad):
    good = tp.zeros(bad.shape, dtype=tp.int64)
    c = compiled(op)
    c(X, good)  # compiles with valid indices
    shown = str(int(bad.view(-1)[-1]))  # the bad index is named, as eager names it
    with pytest.raises(IndexError, match=rf"index {shown} is out of bounds .*in a compiled region"):
        c(X, bad)
    with pytest.raises(IndexError):
        op(X, bad)  # eager agrees


def test_embedding_out_of_range_raises():
    w = tp.randn(5, 3)
    c = compiled(lambda i, w: F.embedding(i, w) * 2)
    c(tp.tensor([0, 4]), w)
    with pytest.raises(IndexError, match="index 5 is out of bounds"):
        c(tp.tensor([0, 5]), w)


@pytest.mark.parametrize("fn", [
    lambda: tp.arange(12) * 2,
    lambda: tp.arange(3, 20, 4) - 1,
    lambda: tp.arange(10, 0, -3),
    lambda: tp.arange(8, dtype=tp.float32) / 3,
    lambda: tp.arange(2.0, 9.0) * 0.5,
    lambda: tp.arange(6, dtype=tp.float64).exp(),
])
def test_arange(fn):
    check(fn)


def test_predicates_and_pow():
    x = tp.tensor([0.0, -1.5, float("inf"), float("-inf"), float("nan"), 2.0, 1e-30])
    for f in (lambda x: x.isnan(), lambda x: x.isinf(), lambda x: x.isfinite(), lambda x: x.nan_to_num(),
              lambda x: tp.where(x.isnan(), 0.0, x) * 2):
        check(f, x)
    check(lambda x: x.isnan() | x.isinf(), tp.arange(5))
    check(lambda x: (x > 0) & (x < 1) ^ (x == 0) | ~(x > 2), X)
    xi = tp.randint(-50, 50, (4, 9))
    check(lambda x, y: (x & y) | (x ^ 7) + ~y, xi, xi.flip(0))
    check(lambda x, y: x.abs().pow(y), X, tp.randn(6, 7), exact=False)
    check(lambda x: x.pow(1.7), X, exact=False)  # NaN for negative bases, as eager
    check(lambda x: tp.pow(x.abs() + 1, -0.3), X.double(), exact=False)


@pytest.mark.parametrize("fn", [
    lambda x: x.prod(1),
    lambda x: x.prod(0, keepdim=True),
    lambda x: x.prod(),
    lambda x: (x * 0.5 + 1).prod(-1),
])
def test_prod(fn):
    check(fn, X, exact=False)
    check(fn, tp.randn(3, 300) * 0.1 + 1, exact=False)


def test_prod_special_and_ints():
    x = tp.tensor([[1.0, float("nan"), 2.0], [0.0, float("inf"), 3.0], [-2.0, 4.0, 0.5]])
    check(lambda x: x.prod(1), x)
    xi = tp.randint(-3, 4, (5, 40))
    check(lambda x: x.prod(1), xi)  # int64 wraps as eager
    check(lambda x: (x > 0).prod(0), X)


def test_movement_does_not_recompute_source_per_piece():
    # a piecewise cat of a costly value: the value stays one node per element
    c = check(lambda x: tp.cat([x.exp(), x.exp() * 2], 1), X, exact=False)
    del c


@pytest.mark.parametrize("fn", [
    lambda x: x.var(1),
    lambda x: x.std(0, keepdim=True),
    lambda x: x.var(),
    lambda x: x.var(1, correction=0) + x.std(1, unbiased=False),
    lambda x: tp.var_mean(x, 1)[0] * tp.var_mean(x, 1)[1],
    lambda x: tp.std_mean(x, (0, 1))[0],
    lambda x: x.logsumexp(1),
    lambda x: x.logsumexp((0, 1), keepdim=True),
    lambda x: (x * 30).logsumexp(0) - x.sum(0),
])
def test_var_std_logsumexp(fn):
    x = tp.randn(64, 300) * 3 + 100  # a large mean: the two-pass form keeps the variance exact
    check(fn, x, exact=False)
    check(fn, x.double(), exact=False)


def test_logsumexp_special_values_and_ints():
    inf, nan = float("inf"), float("nan")
    x = tp.tensor([[1.0, 2.0, 3.0], [-inf, -inf, -inf], [inf, 1.0, 2.0], [nan, 0.0, 1.0], [1e30, 1e30, 0.0]])
    check(lambda x: x.logsumexp(1), x, exact=False)
    check(lambda x: x.logsumexp(1), tp.randint(-5, 5, (4, 6)), exact=False)  # integers promote to float32
    check(lambda x: x.var(1, correction=3), tp.randn(4, 3), exact=False)  # divisor 0: inf/nan as eager


@pytest.mark.parametrize("fn", [
    lambda x: x.cumsum(1),
    lambda x: x.cumsum(0) * 2,
    lambda x: (x * 0.5 + 1).cumprod(-1),
    lambda x: x.exp().cumsum(1).log(),
    lambda x: (x - x.amax(1, keepdim=True)).cumsum(1),  # reads a reduction of the same kernel
    lambda x: x.cumsum(1)[:, -1] - x.sum(1),
])
def test_cumsum_cumprod_equal_eager(fn):
    check(fn, tp.randn(5, 700), exact=False)
    # float accumulation in double, each step rounded once: equal to eager bit for bit
    x = tp.randn(9, 33, dtype=tp.float64)
    check(lambda x: x.cumsum(1), x)
    check(lambda x: x.cumprod(0), x)


def test_scans_of_ints_bools_and_middle_dims():
    xi = tp.randint(-(2**40), 2**40, (3, 50))
    check(lambda x: x.cumprod(1), xi)  # wraps as eager
    check(lambda x: x.cumsum(0), xi)
    check(lambda x: (x > 0).cumsum(1), X)
    x3 = tp.randn(3, 4, 5)
    check(lambda x: x.cumsum(1), x3)
    check(lambda x: x.cumsum(2, dtype=tp.float64), x3)
    check(lambda x: x[:, :1].cumsum(1), x3)


@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0), ceil_mode=True),
    dict(kernel_size=3, stride=2, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=2, divisor_override=3),
])
def test_avg_pool2d(kw):
    img = tp.randn(2, 3, 7, 9)
    check(lambda x: F.avg_pool2d(x.relu(), **kw) * 2, img, exact=False)
    check(lambda x: F.avg_pool2d(x, **kw), img[0].double(), exact=False)  # 3-D input
