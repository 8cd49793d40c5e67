"""Factories (empty/zeros/ones/full/arange/linspace/eye, *_like, rand/randn/
randint, in-place random fills) for every dtype and requires_grad, and the
random generators: seeding, Generator objects, state save/restore,
independence from the thread count."""

import numpy as np
import pytest

import tensorplay as tp

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def arr(t):
    return np.array(t.contiguous().numpy())


def as_f64(t):
    return arr(t.to(tp.float64))


@pytest.mark.parametrize("name", DTYPES)
def test_zeros_ones_empty_full_every_dtype(name):
    dt = getattr(tp, name)
    for f, v in ((tp.zeros, 0), (tp.ones, 1)):
        t = f(2, 3, dtype=dt)
        assert t.dtype == dt and tuple(t.shape) == (2, 3)
        np.testing.assert_array_equal(as_f64(t), np.full((2, 3), v))
        assert tuple(f((2, 3), dtype=dt).shape) == (2, 3)
        assert tuple(f([4], dtype=dt).shape) == (4,)
    e = tp.empty(3, 0, dtype=dt)
    assert e.dtype == dt and tuple(e.shape) == (3, 0)
    f = tp.full((2, 2), 1, dtype=dt)
    assert f.dtype == dt
    np.testing.assert_array_equal(as_f64(f), np.ones((2, 2)))


def test_defaults_and_full_dtype_inference():
    assert tp.zeros(2).dtype == tp.float32
    assert tp.empty([]).dtype == tp.float32 and tuple(tp.empty([]).shape) == ()
    assert tp.full((2,), 3).dtype == tp.int64
    assert tp.full((2,), 3.5).dtype == tp.float32
    assert tp.full((2,), True).dtype == tp.bool
    np.testing.assert_array_equal(arr(tp.full((2, 1), -2.5)), [[-2.5], [-2.5]])
    assert np.isnan(arr(tp.full((1,), float("nan")))).all()
    assert np.isneginf(arr(tp.full((1,), float("-inf")))).all()
    with pytest.raises(ValueError, match=r"zeros.*negative|zeros.*-1"):
        tp.zeros(2, -1)


@pytest.mark.parametrize("f", ["zeros", "ones", "empty", "rand", "randn"])
def test_requires_grad(f):
    t = getattr(tp, f)(2, 3, requires_grad=True)
    assert t.requires_grad and t.is_leaf
    t.sum().backward()
    np.testing.assert_array_equal(arr(t.grad), np.ones((2, 3)))
    assert not getattr(tp, f)(2).requires_grad
    assert tp.full((2,), 1.0, requires_grad=True).requires_grad
    assert tp.arange(0.0, 3.0, requires_grad=True).requires_grad


def test_arange_rules():
    assert tp.arange(5).dtype == tp.int64
    np.testing.assert_array_equal(arr(tp.arange(5)), np.arange(5))
    np.testing.assert_array_equal(arr(tp.arange(2, 11, 3)), np.arange(2, 11, 3))
    np.testing.assert_array_equal(arr(tp.arange(10, 0, -3)), np.arange(10, 0, -3))
    assert tp.arange(0, 1, 0.25).dtype == tp.float32
    np.testing.assert_allclose(arr(tp.arange(0, 1, 0.25)), [0, 0.25, 0.5, 0.75])
    assert tp.arange(3.0).dtype == tp.float32
    assert tp.arange(5, dtype=tp.float64).dtype == tp.float64
    np.testing.assert_allclose(arr(tp.arange(-1, 1, 0.1, dtype=tp.float64)), np.arange(-1, 1, 0.1), atol=1e-12)
    assert tuple(tp.arange(3, 3).shape) == (0,)
    for name in DTYPES[1:]:
        t = tp.arange(4, dtype=getattr(tp, name))
        assert t.dtype == getattr(tp, name)
        np.testing.assert_array_equal(as_f64(t), np.arange(4))
    with pytest.raises(ValueError, match="arange.*step must be nonzero"):
        tp.arange(0, 3, 0)
    with pytest.raises(ValueError, match="arange.*inconsistent with step"):
        tp.arange(0, 3, -1)


def test_linspace_eye():
    np.testing.assert_allclose(arr(tp.linspace(0, 1, 5)), np.linspace(0, 1, 5), rtol=1e-7)
    np.testing.assert_allclose(arr(tp.linspace(-3, 7, 11, dtype=tp.float64)), np.linspace(-3, 7, 11), rtol=1e-15)
    assert arr(tp.linspace(2, 5, 1)).tolist() == [2.0]
    assert tuple(tp.linspace(0, 1, 0).shape) == (0,)
    assert arr(tp.linspace(0, 1, 7))[-1] == 1.0  # the end point is exact
    assert tp.linspace(0, 10, 6, dtype=tp.int64).dtype == tp.int64
    np.testing.assert_array_equal(arr(tp.linspace(0, 10, 6, dtype=tp.int64)), [0, 2, 4, 6, 8, 10])
    with pytest.raises(ValueError, match="linspace.*non-negative"):
        tp.linspace(0, 1, -1)
    np.testing.assert_array_equal(arr(tp.eye(3)), np.eye(3))
    np.testing.assert_array_equal(arr(tp.eye(2, 4)), np.eye(2, 4))
    np.testing.assert_array_equal(arr(tp.eye(4, 2, dtype=tp.int64)), np.eye(4, 2))
    assert tp.eye(3, dtype=tp.bool).dtype == tp.bool
    assert tuple(tp.eye(0).shape) == (0, 0)
    with pytest.raises(ValueError, match="eye.*non-negative"):
        tp.eye(-1)


def test_like_factories():
    x = tp.ones(2, 3, dtype=tp.float64).t()  # non-contiguous
    for f, v in ((tp.zeros_like, 0), (tp.ones_like, 1)):
        t = f(x)
        assert t.dtype == tp.float64 and tuple(t.shape) == (3, 2)
        np.testing.assert_array_equal(arr(t), np.full((3, 2), v))
        assert f(x, dtype=tp.int32).dtype == tp.int32
    assert tuple(tp.empty_like(x).shape) == (3, 2)
    np.testing.assert_array_equal(arr(tp.full_like(x, 7)), np.full((3, 2), 7.0))
    assert tp.full_like(x, 7).dtype == tp.float64
    r = tp.rand_like(x)
    assert r.dtype == tp.float64 and ((arr(r) >= 0) & (arr(r) < 1)).all()
    assert tuple(tp.randn_like(x).shape) == (3, 2)
    ri = tp.randint_like(x, 10)
    assert ri.dtype == tp.float64 and ((arr(ri) >= 0) & (arr(ri) < 10)).all()
    ri = tp.randint_like(tp.zeros(50, dtype=tp.int64), 3, 6)
    assert ri.dtype == tp.int64 and set(arr(ri).tolist()) <= {3, 4, 5}
    xg = tp.ones(2, requires_grad=True)
    assert not tp.zeros_like(xg).requires_grad
    assert tp.zeros_like(xg, requires_grad=True).requires_grad


def test_rand_randn_randint_values():
    tp.manual_seed(1)
    u = arr(tp.rand(100000, dtype=tp.float64))
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    n = arr(tp.randn(100000))
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1) < 0.02
    r = arr(tp.randint(-3, 4, (10000,)))
    assert r.dtype == np.int64 and set(r.tolist()) == set(range(-3, 4))
    assert tp.randint(5, (2, 2)).dtype == tp.int64
    assert tp.randint(5, (3,), dtype=tp.float32).dtype == tp.float32
    assert tp.rand(3, dtype=tp.float16).dtype == tp.float16
    assert tuple(tp.rand(0, 3).shape) == (0, 3)
    with pytest.raises(ValueError, match="randint.*from.*less than.*to"):
        tp.randint(5, 5, (3,))
    with pytest.raises(TypeError, match="rand.*floating"):
        tp.rand(3, dtype=tp.int64)


def test_manual_seed_reproducible_and_thread_independent():
    tp.manual_seed(123)
    a, b, c = arr(tp.rand(1000)), arr(tp.randn(7, 9, dtype=tp.float64)), arr(tp.randint(0, 100, (500,)))
    old = tp.get_num_threads()
    try:
        for threads in (1, 2, 3):
            tp.set_num_threads(threads)
            tp.manual_seed(123)
            np.testing.assert_array_equal(arr(tp.rand(1000)), a)
            np.testing.assert_array_equal(arr(tp.randn(7, 9, dtype=tp.float64)), b)
            np.testing.assert_array_equal(arr(tp.randint(0, 100, (500,))), c)
    finally:
        tp.set_num_threads(old)
    assert not np.array_equal(arr(tp.rand(1000)), a)  # the stream moved on


def test_generator_objects():
    g1 = tp.Generator().manual_seed(7)
    g2 = tp.Generator()
    assert g2.manual_seed(7) is g2
    assert g1.initial_seed() == 7
    x1 = arr(tp.randn(50, generator=g1))
    tp.manual_seed(0)
    _ = tp.rand(10)  # the default stream does not disturb g2
    x2 = arr(tp.randn(50, generator=g2))
    np.testing.assert_array_equal(x1, x2)
    # get_state / set_state replays a stream
    s = g1.get_state()
    y = arr(tp.rand(20, generator=g1))
    g1.set_state(s)
    np.testing.assert_array_equal(arr(tp.rand(20, generator=g1)), y)
    # state of the default generator
    st = tp.get_rng_state()
    z = arr(tp.randint(0, 1000, (30,)))
    tp.set_rng_state(st)
    np.testing.assert_array_equal(arr(tp.randint(0, 1000, (30,))), z)
    # seed() picks a fresh seed and reports it
    sd = g1.seed()
    assert g1.initial_seed() == sd
    assert tp.manual_seed(5) is tp.default_generator
    assert tp.initial_seed() == 5
    with pytest.raises((TypeError, ValueError)):
        tp.rand(3, generator=3)
    with pytest.raises(ValueError, match="set_state.*uint8"):
        g1.set_state(tp.zeros(3))


def test_generator_keyword_on_like_and_inplace():
    g = tp.Generator().manual_seed(3)
    a = arr(tp.rand_like(tp.zeros(5), generator=g))
    g.manual_seed(3)
    np.testing.assert_array_equal(arr(tp.rand(5, generator=g)), a)
    t = tp.zeros(4, 5, dtype=tp.float64)
    g.manual_seed(1)
    t.normal_(2.0, 0.5, generator=g)
    v = arr(t)
    assert abs(v.mean() - 2.0) < 0.5 and v.std() > 0.1
    t.uniform_(-1, 3)
    assert (arr(t) >= -1).all() and (arr(t) < 3).all()
    nc = tp.zeros(6, 4).t()  # non-contiguous target
    nc.uniform_(5, 6)
    assert ((arr(nc) >= 5) & (arr(nc) < 6)).all()
    b = tp.zeros(1000).bernoulli_(0.3)
    assert set(arr(b).tolist()) <= {0.0, 1.0} and 200 < arr(b).sum() < 400
    p = tp.tensor(np.array([0.0, 1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(arr(tp.bernoulli(p)), [0.0, 1.0, 0.0, 1.0])
    with pytest.raises(TypeError, match="normal_.*floating"):
        tp.zeros(3, dtype=tp.int64).normal_()
    with pytest.raises(ValueError, match="bernoulli.*probabilities"):
        tp.bernoulli(tp.tensor(np.array([1.5])))
