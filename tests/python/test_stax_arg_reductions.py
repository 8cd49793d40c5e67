"""argmax / argmin / max.dim / min.dim lowered to loop reductions (no extern
call), under strict_native, equal to eager exactly: first index of ties, the
first NaN, -inf, ints and bools, 0-d / size-1 / middle dims, keepdim."""
import numpy as np
import pytest

import tensorplay as tp


def run(fn, *args):
    want = fn(*args)
    cf = tp.compile(fn, strict_native=True)
    got = cf(*args)
    if not isinstance(want, (tuple, list)):
        want, got = (want,), (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert "// extern" not in cf.last_source
    return cf


def t(a, dtype=None):
    return tp.tensor(np.asarray(a)) if dtype is None else tp.tensor(np.asarray(a), dtype=dtype)


nan, inf = float("nan"), float("inf")
TIES = t(np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 0.0, 2.0], [-inf, -inf, -inf, -inf]], np.float32))
NANS = t(np.array([[1.0, nan, 5.0, nan], [nan, 0.0, nan, 9.0], [inf, 1.0, inf, -inf]], np.float32))
X3 = tp.randn(3, 4, 5)
INTS = t(np.array([[3, 7, 7, -2], [-5, -5, 0, 1]], np.int64))
BOOLS = t(np.array([[False, True, True], [False, False, False], [True, False, True]]))


ARG_FNS = [
    lambda x: x.argmax(),
    lambda x: x.argmin(),
    lambda x: x.argmax(0),
    lambda x: x.argmin(1),
    lambda x: x.argmax(-1, keepdim=True),
    lambda x: x.argmin(0, keepdim=True),
    lambda x: x.argmin(None, keepdim=True),
]
DIM_FNS = [
    lambda x: x.max(0),
    lambda x: x.min(1),
    lambda x: x.max(-1, keepdim=True),
    lambda x: x.min(0, keepdim=True),
]


@pytest.mark.parametrize("x", [TIES, NANS, X3, INTS, BOOLS], ids=["ties", "nan", "3d", "int64", "bool"])
@pytest.mark.parametrize("k", range(len(ARG_FNS)))
def test_arg_reductions_equal_eager(x, k):
    run(ARG_FNS[k], x)


@pytest.mark.parametrize("x", [TIES, NANS, X3, INTS, BOOLS], ids=["ties", "nan", "3d", "int64", "bool"])
@pytest.mark.parametrize("k", range(len(DIM_FNS)))
def test_max_min_dim_values_and_indices_equal_eager(x, k):
    run(lambda a: tuple(DIM_FNS[k](a)), x)


def test_middle_dim_size_one_and_0d():
    run(lambda a: a.argmax(1), X3)
    run(lambda a: tuple(a.min(1, keepdim=True)), X3)
    one = tp.randn(3, 1, 4)
    run(lambda a: a.argmax(1), one)
    run(lambda a: tuple(a.max(1)), one)
    run(lambda a: a.argmin(), t(np.float32(2.5)))
    run(lambda a: a.argmax(0), t(np.float32(2.5)))
    run(lambda a: tuple(a.max(0)), t(np.float32(-1.0)))


def test_arg_reduction_fused_with_neighbours():
    # The index feeds pointwise consumers in the same region.
    run(lambda a: (a * 2 - 1).argmax(1) + 1, X3)
    run(lambda a: (lambda v, i: (v * 3 + 1, i * 2))(*a.abs().max(2)), X3)


def test_one_pass_single_kernel_and_signed_zero_value_is_the_element_at_the_index():
    # max.dim's value is the element at the returned index, so among tied
    # -0.0 / +0.0 it has eager's sign (the two-pass amax form returned the
    # other zero); and the input is read by one reduction loop, not two.
    z = t(np.array([[-0.0, 0.0, -0.0], [0.0, -0.0, 0.0], [-1.0, -0.0, 0.0]], np.float32))
    for fn in (lambda a: tuple(a.max(1)), lambda a: tuple(a.min(1)), lambda a: tuple(a.max(0))):
        want = fn(z)
        got = tp.compile(fn, strict_native=True)(z)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
            assert (np.signbit(g.numpy()) == np.signbit(w.numpy())).all()
    cf = run(lambda a: a.argmax(1), X3)
    assert cf.last_source.count("(argmax over") == 1
    assert "(max over" not in cf.last_source and "(min over" not in cf.last_source


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
def test_arg_reductions_long_rows_with_nan_and_inf_equal_eager(dtype):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 3001))
    a[1, 1700] = np.nan
    a[1, 2500] = np.nan
    a[2, :] = -np.inf
    a[3, 10] = np.inf
    a[3, 2999] = np.inf
    x = tp.tensor(a, dtype=dtype)
    for fn in (lambda v: v.argmax(1), lambda v: v.argmin(1), lambda v: v.argmax(), lambda v: tuple(v.max(1)),
               lambda v: tuple(v.min(1))):
        run(fn, x)


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
@pytest.mark.parametrize("shape", [(7, 37), (3, 5, 40), (2, 100)])
def test_vector_lanes_keep_the_first_index_of_ties_and_nans(dtype, shape):
    # Vectorized arg reductions keep one (value, position) per lane and merge
    # the lanes and the scalar tail at the end: ties between lanes, between a
    # lane and the tail of an earlier row (flat argmax), signed zeros and NaNs
    # must still give eager's first index.
    rng = np.random.default_rng(7)
    a = rng.integers(-2, 3, size=shape).astype(np.float64)  # many ties
    cases = [a, np.where(a == 0, -0.0, a), np.full(shape, 2.0)]
    z = np.zeros(shape)
    z.flat[1::2] = -0.0
    cases.append(z)
    n = a.copy()
    n.flat[n.size // 2] = np.nan
    n.flat[n.size - 1] = np.nan
    cases.append(n)
    for c in cases:
        x = tp.tensor(c, dtype=dtype)
        for fn in (lambda v: v.argmax(-1), lambda v: v.argmin(-1), lambda v: v.argmax(), lambda v: v.argmin(),
                   lambda v: tuple(v.max(-1)), lambda v: tuple(v.min(-1))):
            run(fn, x)
