"""Reduction operators (sum, mean, prod, amax/amin, max/min, argmax/argmin, var/std,
norm, logsumexp, all/any, cumsum/cumprod) against NumPy, PyTorch as a second
oracle where installed, and gradients against float64 finite differences."""

import numpy as np
import pytest

import tensorplay as tp
from fd_check import check_gradients

RNG = np.random.default_rng(1234)


def T(a, **kw):
    return tp.tensor(np.asarray(a), **kw)


def N(t):
    return np.asarray(t.detach().contiguous().numpy())


def tp_dtype(np_dtype):
    return getattr(tp, np.dtype(np_dtype).name)


def has_dtype(name):
    return hasattr(tp, name)


def close(got, want, rtol=1e-5, atol=1e-6):
    got = N(got) if not isinstance(got, np.ndarray) else got
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} vs {want.shape}"
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def layouts(shape, seed=0, dtype=np.float64):
    """(numpy array, tensorplay tensor) pairs with the same values: contiguous,
    transposed, sliced with a step and expanded (stride 0)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(dtype)
    yield "contiguous", a, T(a)
    big = rng.standard_normal(shape[::-1]).astype(dtype)
    yield "transposed", big.T, T(big).permute(*reversed(range(len(shape))))
    wide = rng.standard_normal(shape[:-1] + (2 * shape[-1],)).astype(dtype)
    yield "sliced", wide[..., ::2], T(wide)[..., ::2]
    row = rng.standard_normal((1,) + shape[1:]).astype(dtype)
    yield "expanded", np.broadcast_to(row, shape), T(row).expand(*shape)


def gradcheck(fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-7):
    return check_gradients(fn, *arrays, eps=eps, rtol=rtol, atol=atol)


DIMS = [None, 0, -1, (0, 2), (1,), (0, 1, 2)]


def np_dims(d):
    return d if d is None or isinstance(d, int) else tuple(d)


# ------------------------------------------------------------------ sum / mean / prod
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_dims_keepdim(dim, keepdim):
    a = RNG.standard_normal((3, 4, 5))
    x = T(a)
    kw = {} if dim is None else {"dim": dim}
    close(x.sum(**kw, keepdim=keepdim), a.sum(axis=np_dims(dim), keepdims=keepdim), 1e-12, 1e-12)
    close(tp.mean(x, **kw, keepdim=keepdim), a.mean(axis=np_dims(dim), keepdims=keepdim), 1e-12, 1e-12)


@pytest.mark.parametrize("shape,dim", [((4, 6), 0), ((4, 6), 1), ((3, 4, 5), 1), ((3, 4, 5), (0, 2))])
def test_sum_mean_noncontiguous(shape, dim):
    for name, a, x in layouts(shape):
        close(x.sum(dim), a.sum(axis=np_dims(dim)), 1e-12, 1e-12)
        close(x.mean(dim), a.mean(axis=np_dims(dim)), 1e-12, 1e-12)
        close(x.prod(dim if isinstance(dim, int) else 0), a.prod(axis=dim if isinstance(dim, int) else 0), 1e-12, 1e-12)


@pytest.mark.parametrize("np_dtype", ["bool", "int8", "uint8", "int16", "int32", "int64", "float32", "float64"])
def test_sum_prod_dtypes(np_dtype):
    if not has_dtype(np.dtype(np_dtype).name):
        pytest.skip(f"no tp.{np_dtype}")
    a = (RNG.integers(-3, 4, size=(4, 5)) if np_dtype != "uint8" else RNG.integers(0, 4, size=(4, 5))).astype(np_dtype)
    x = T(a)
    want_dtype = a.dtype if a.dtype.kind == "f" else np.int64  # bool and integers accumulate in int64
    s = x.sum()
    assert s.dtype == tp_dtype(want_dtype)
    close(s, a.sum(dtype=want_dtype))
    close(x.sum(1), a.sum(axis=1, dtype=want_dtype))
    p = x.prod(1)
    assert p.dtype == tp_dtype(want_dtype)
    close(p, a.prod(axis=1, dtype=want_dtype))


def test_sum_dtype_argument():
    a = RNG.integers(-5, 5, size=(3, 4)).astype(np.int64)
    s = T(a).sum(1, dtype=tp.float64)
    assert s.dtype == tp.float64
    close(s, a.sum(1).astype(np.float64))
    f = RNG.standard_normal((3, 4)).astype(np.float32)
    s = T(f).sum(dtype=tp.float64)
    assert s.dtype == tp.float64
    close(s, f.astype(np.float64).sum(), 1e-12)
    m = T(a).mean(0, dtype=tp.float32)
    assert m.dtype == tp.float32
    close(m, a.mean(0))


def test_sum_integer_wraps_like_int64():
    a = np.array([2**62, 2**62, 2**62], dtype=np.int64)
    with np.errstate(over="ignore"):
        assert int(N(T(a).sum())) == int(a.sum())


def test_mean_of_integers_raises():
    with pytest.raises(Exception, match="mean"):
        T(np.arange(6)).mean()


def test_sum_mean_zero_size():
    e = np.zeros((0, 3))
    close(T(e).sum(), 0.0)
    close(T(e).sum(0), np.zeros(3))
    assert N(T(e).sum(1)).shape == (0,)
    assert np.isnan(N(T(e).mean()))
    close(T(e).prod(0), np.ones(3))
    close(T(np.zeros((2, 0), dtype=np.int64)).sum(1), np.zeros(2, dtype=np.int64))


def test_sum_0d():
    x = T(np.array(3.5))
    close(x.sum(), 3.5)
    close(x.sum(0), 3.5)
    close(x.mean(-1, keepdim=True), 3.5)


def test_float32_sum_accuracy_large():
    a = (RNG.standard_normal((1 << 20,)) + 1.0).astype(np.float32)
    ref = a.astype(np.float64).sum()
    got = float(N(T(a).sum()))
    assert abs(got - ref) <= 1e-6 * abs(ref) + 1e-3
    m = RNG.standard_normal((8192, 256)).astype(np.float32) + 3
    close(T(m).sum(0), m.astype(np.float64).sum(0), rtol=1e-6, atol=1e-3)
    close(T(m).sum(1), m.astype(np.float64).sum(1), rtol=1e-6, atol=1e-3)
    close(T(m.T).sum(1), m.astype(np.float64).sum(0), rtol=1e-6, atol=1e-3)


def test_sum_mean_large_parallel_paths():
    # Shapes that use the split-the-reduction paths (few outputs, many elements).
    a = RNG.standard_normal((3, 200000)).astype(np.float32)
    close(T(a).sum(1), a.astype(np.float64).sum(1), 1e-5, 1e-2)
    close(T(a).sum(0), a.sum(0), 1e-5, 1e-4)
    b = RNG.standard_normal((200000, 3)).astype(np.float32)
    close(T(b).sum(0), b.astype(np.float64).sum(0), 1e-5, 1e-2)
    close(T(b).amax(0), b.max(0))
    close(T(b).mean(0), b.astype(np.float64).mean(0), 1e-5, 1e-6)


def test_special_values_sum():
    a = np.array([[1.0, np.inf, 2.0], [np.nan, 1.0, 0.0], [np.inf, -np.inf, 1.0], [-0.0, -0.0, -0.0]])
    with np.errstate(invalid="ignore"):
        close(T(a).sum(1), a.sum(1))
        close(T(a).prod(1), a.prod(1))


# ------------------------------------------------------------------ amax / amin / max / min
@pytest.mark.parametrize("np_dtype", ["float32", "float64", "int64", "int32", "bool"])
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
def test_amax_amin(np_dtype, dim):
    if not has_dtype(np.dtype(np_dtype).name):
        pytest.skip(f"no tp.{np_dtype}")
    a = RNG.integers(-9, 9, size=(5, 7)).astype(np_dtype)
    x = T(a)
    kw = {} if dim is None else {"dim": dim}
    for keepdim in (False, True):
        got = x.amax(**kw, keepdim=keepdim)
        assert got.dtype == x.dtype
        close(got, a.max(axis=np_dims(dim), keepdims=keepdim))
        close(x.amin(**kw, keepdim=keepdim), a.min(axis=np_dims(dim), keepdims=keepdim))


def test_amax_noncontiguous():
    for name, a, x in layouts((6, 9)):
        for d in (0, 1):
            close(x.amax(d), a.max(d))
            close(x.amin(d), a.min(d))
        close(tp.max(x), a.max())
        close(tp.min(x), a.min())


def test_nan_propagates_in_extrema():
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0], [np.nan, -np.inf, np.inf]])
    close(T(a).amax(1), [np.nan, 6.0, np.nan])
    close(T(a).amin(1), [np.nan, 4.0, np.nan])
    close(T(a).amax(0), [np.nan, np.nan, np.inf])
    assert np.isnan(N(tp.max(T(a))))
    v, i = tp.max(T(a), 1)
    close(v, [np.nan, 6.0, np.nan])
    assert N(i).tolist() == [1, 2, 0]
    assert N(T(a).argmax(1)).tolist() == [1, 2, 0]
    assert N(T(a).argmin(1)).tolist() == [1, 0, 0]
    # NaN in a long row (vector path), at the end
    b = RNG.standard_normal((2, 1000))
    b[1, -1] = np.nan
    close(T(b).amax(1), [b[0].max(), np.nan])
    close(T(b.astype(np.float32)).amin(1), [b[0].astype(np.float32).min(), np.nan])


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
def test_nan_propagates_on_every_path(np_dtype):
    # Rows long enough for the vector loops, columns for the column-block loop,
    # NaNs scattered so some rows/columns have none.
    a = RNG.standard_normal((300, 517)).astype(np_dtype)
    a[RNG.integers(0, 300, 40), RNG.integers(0, 517, 40)] = np.nan
    for d in (0, 1):
        close(T(a).amax(d), a.max(d))
        close(T(a).amin(d), a.min(d))
        close(T(a.T.copy()).T.amax(d), a.max(d))
    close(T(a[:, :100]).amax(), np.max(a[:, :100]))
    clean = np.nan_to_num(a)
    close(T(clean).amax(0), clean.max(0))


def test_extrema_of_empty_raise_naming_the_op():
    e = T(np.zeros((0, 3)))
    for name in ("amax", "amin"):
        with pytest.raises(Exception, match=name):
            getattr(e, name)(0)
    with pytest.raises(Exception, match="max"):
        tp.max(e)
    with pytest.raises(Exception, match="argmax"):
        e.argmax()
    with pytest.raises(Exception, match="max"):
        tp.max(e, 0)
    close(e.amax(1), np.zeros((0,)))  # no slice is empty: fine


def test_max_overloads():
    a = RNG.standard_normal((4, 5))
    b = RNG.standard_normal((4, 5))
    x, y = T(a), T(b)
    close(tp.max(x), a.max())
    close(x.max(), a.max())
    values, indices = tp.max(x, 1)
    close(values, a.max(1))
    assert N(indices).tolist() == a.argmax(1).tolist()
    assert indices.dtype == tp.int64
    values, indices = x.min(0, keepdim=True)
    close(values, a.min(0, keepdims=True))
    assert N(indices).tolist() == a.argmin(0)[None].tolist()
    close(tp.max(x, y), np.maximum(a, b))
    close(x.min(y), np.minimum(a, b))


@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (0, False), (1, True), (-1, False)])
def test_argmax_argmin(dim, keepdim):
    a = RNG.integers(0, 4, size=(5, 6)).astype(np.float32)  # many ties: the first wins
    x = T(a)
    kw = {} if dim is None else {"dim": dim}
    got = x.argmax(**kw, keepdim=keepdim)
    assert got.dtype == tp.int64
    want = np.argmax(a, axis=dim, keepdims=keepdim) if dim is not None else np.argmax(a)
    if dim is None and keepdim:
        want = np.array(np.argmax(a)).reshape(1, 1)
    assert N(got).tolist() == np.asarray(want).tolist()
    want = np.argmin(a, axis=dim, keepdims=keepdim) if dim is not None else np.argmin(a)
    if dim is None and keepdim:
        want = np.array(np.argmin(a)).reshape(1, 1)
    assert N(x.argmin(**kw, keepdim=keepdim)).tolist() == np.asarray(want).tolist()


def test_argmax_noncontiguous_and_ints():
    for name, a, x in layouts((5, 7)):
        assert N(x.argmax(0)).tolist() == a.argmax(0).tolist(), name
        assert N(x.argmax()).tolist() == int(a.argmax()), name
    i = RNG.integers(-100, 100, size=(9, 4))
    assert N(T(i).argmin(0)).tolist() == i.argmin(0).tolist()


def test_extremum_grads_split_ties():
    a = np.array([[1.0, 3.0, 3.0], [2.0, 0.5, -1.0]])
    x = T(a, requires_grad=True)
    x.amax(1).sum().backward()
    close(x.grad, [[0, 0.5, 0.5], [1, 0, 0]])
    x = T(a, requires_grad=True)
    tp.max(x).backward()
    close(x.grad, [[0, 0.5, 0.5], [0, 0, 0]])
    x = T(a, requires_grad=True)
    x.amin(0).sum().backward()
    close(x.grad, [[1, 0, 0], [0, 1, 1]])
    # max.dim routes the whole gradient to the returned index
    x = T(a, requires_grad=True)
    v, i = tp.max(x, 1)
    (v * T(np.array([2.0, 5.0]))).sum().backward()
    close(x.grad, [[0, 2, 0], [5, 0, 0]])


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 2)])
def test_extremum_gradcheck(dim):
    a = RNG.permutation(24).reshape(2, 3, 4).astype(np.float64)  # distinct values
    kw = {} if dim is None else {"dim": dim}
    gradcheck(lambda x: x.amax(**kw), a)
    gradcheck(lambda x: x.amin(**kw, keepdim=True), a)
    if isinstance(dim, int):
        gradcheck(lambda x: tp.max(x, dim)[0], a)
        gradcheck(lambda x: tp.min(x, dim, keepdim=True)[0], a)


# ------------------------------------------------------------------ var / std
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 2)])
@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_std(dim, correction, keepdim):
    a = RNG.standard_normal((4, 5, 6))
    x = T(a)
    kw = {} if dim is None else {"dim": dim}
    close(x.var(**kw, correction=correction, keepdim=keepdim),
          a.var(axis=np_dims(dim), ddof=correction, keepdims=keepdim), 1e-10, 1e-12)
    close(tp.std(x, **kw, correction=correction, keepdim=keepdim),
          a.std(axis=np_dims(dim), ddof=correction, keepdims=keepdim), 1e-10, 1e-12)


def test_var_unbiased_form_and_noncontiguous():
    a = RNG.standard_normal((6, 7)).astype(np.float32)
    x = T(a)
    close(x.var(), a.var(ddof=1), 1e-5)
    close(x.var(1, False), a.var(1, ddof=0), 1e-5)
    close(x.std(0, unbiased=True), a.std(0, ddof=1), 1e-5)
    close(x.var(unbiased=False), a.var(), 1e-5)
    for name, b, y in layouts((5, 8)):
        close(y.var(0), b.var(0, ddof=1), 1e-10)
        close(y.std(1), b.std(1, ddof=1), 1e-10)


def test_var_mean_std_mean():
    a = RNG.standard_normal((4, 6))
    v, m = tp.var_mean(T(a), 1)
    close(v, a.var(1, ddof=1))
    close(m, a.mean(1))
    s, m = tp.std_mean(T(a), dim=0, correction=0, keepdim=True)
    close(s, a.std(0, keepdims=True))
    close(m, a.mean(0, keepdims=True))


def test_var_edge_cases():
    with np.errstate(divide="ignore", invalid="ignore"):
        one = np.array([[2.0], [3.0]])
        assert np.all(np.isnan(N(T(one).var(1)))) or np.all(np.isinf(N(T(one).var(1))))
        close(T(one).var(1, correction=0), [0.0, 0.0])
    with pytest.raises(Exception, match="var"):
        T(np.arange(5)).var()


def test_std_grad_of_constant_is_zero():
    x = T(np.full((2, 3), 1.5), requires_grad=True)
    x.std(1, correction=0).sum().backward()
    close(x.grad, np.zeros((2, 3)))


def test_var_std_gradcheck():
    a = RNG.standard_normal((3, 5))
    gradcheck(lambda x: x.var(1), a)
    gradcheck(lambda x: x.var(0, correction=0, keepdim=True), a)
    gradcheck(lambda x: x.std(), a)
    gradcheck(lambda x: tp.std(x, dim=1, correction=2), a)


# ------------------------------------------------------------------ norm
@pytest.mark.parametrize("p", [2, 1, 3, 0.5, 0, float("inf"), float("-inf"), "fro"])
@pytest.mark.parametrize("dim", [None, 1, (0, 1)])
def test_norm(p, dim):
    a = RNG.standard_normal((3, 4))
    a[0, 0] = 0.0
    kw = {} if dim is None else {"dim": dim}
    pn = 2 if p == "fro" else p
    ax = np_dims(dim)
    absa = np.abs(a)
    if pn == float("inf"):
        want = absa.max(axis=ax)
    elif pn == float("-inf"):
        want = absa.min(axis=ax)
    elif pn == 0:
        want = (a != 0).sum(axis=ax).astype(np.float64)
    else:
        want = (absa ** pn).sum(axis=ax) ** (1 / pn)
    close(tp.norm(T(a), p, **kw), want, 1e-10, 1e-12)
    close(T(a).norm(p, **kw, keepdim=True), np.asarray(want).reshape(
        np.sum(absa, axis=ax, keepdims=True).shape), 1e-10, 1e-12)


def test_norm_default_and_errors():
    a = RNG.standard_normal((5, 2)).astype(np.float32)
    close(T(a).norm(), np.linalg.norm(a), 1e-5)
    with pytest.raises(Exception, match="norm"):
        T(np.arange(4)).norm()
    close(tp.norm(T(a), "nuc"), np.linalg.norm(a, "nuc"), 1e-5)  # the nuclear norm (svdvals), as PyTorch
    with pytest.raises(Exception, match="norm"):
        tp.norm(T(a).reshape(5, 2, 1), "nuc")  # 'nuc' needs two dims


@pytest.mark.parametrize("p", [2, 1, 3, float("inf")])
def test_norm_gradcheck(p):
    a = RNG.standard_normal((3, 4)) + np.arange(12).reshape(3, 4) * 0.01  # no ties, no zeros
    gradcheck(lambda x: tp.norm(x, p, dim=1), a)
    gradcheck(lambda x: tp.norm(x, p), a)


def test_norm_grad_at_zero_is_zero():
    x = T(np.zeros((2, 3)), requires_grad=True)
    tp.norm(x).backward()
    close(x.grad, np.zeros((2, 3)))


# ------------------------------------------------------------------ logsumexp
def test_logsumexp():
    a = RNG.standard_normal((4, 5, 3)) * 30
    for dim in (0, 1, -1, (0, 2)):
        m = a.max(axis=dim, keepdims=True)
        want = np.log(np.exp(a - m).sum(axis=dim, keepdims=True)) + m
        close(T(a).logsumexp(dim, keepdim=True), want, 1e-12)
        close(tp.logsumexp(T(a), dim), np.squeeze(want, axis=dim), 1e-12)
    close(T(np.array([[1000.0, 1000.0]])).logsumexp(1), [1000.0 + np.log(2.0)])


def test_logsumexp_special_and_ints():
    a = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.nan, 1.0], [-np.inf, 0.0]])
    close(T(a).logsumexp(1), [-np.inf, np.inf, np.nan, 0.0])
    r = tp.logsumexp(T(np.arange(3)), 0)
    assert r.dtype == tp.float32
    close(r, np.log(np.exp(np.arange(3.0)).sum()), 1e-6)
    close(T(np.zeros((2, 0))).logsumexp(1), [-np.inf, -np.inf])


def test_logsumexp_gradcheck():
    gradcheck(lambda x: x.logsumexp(1), RNG.standard_normal((3, 4)))
    gradcheck(lambda x: x.logsumexp((0, 1), keepdim=True), RNG.standard_normal((3, 4)))


# ------------------------------------------------------------------ all / any
@pytest.mark.parametrize("np_dtype", ["bool", "int64", "float32", "float64", "int8"])
def test_all_any(np_dtype):
    if not has_dtype(np.dtype(np_dtype).name):
        pytest.skip(f"no tp.{np_dtype}")
    a = (RNG.integers(0, 3, size=(4, 5)) > 0).astype(np_dtype) if np_dtype == "bool" else \
        RNG.integers(0, 3, size=(4, 5)).astype(np_dtype)
    x = T(a)
    for dim in (None, 0, 1):
        kw = {} if dim is None else {"dim": dim}
        got = x.all(**kw)
        assert got.dtype == tp.bool
        assert N(got).tolist() == np.all(a, axis=dim).tolist()
        assert N(x.any(**kw)).tolist() == np.any(a, axis=dim).tolist()
        assert N(tp.any(x, **kw, keepdim=True)).tolist() == np.any(a, axis=dim, keepdims=True).tolist()


def test_all_any_special():
    a = np.array([np.nan, 1.0, -0.0])
    assert N(T(a).any()).tolist() is True
    assert N(T(a).all()).tolist() is False
    assert N(T(np.array([np.nan, 2.0])).all()).tolist() is True
    assert N(T(np.zeros((0,))).all()).tolist() is True
    assert N(T(np.zeros((0,))).any()).tolist() is False
    big = np.ones(100001, dtype=bool)
    big[77777] = False
    assert N(T(big).all()).tolist() is False
    assert N(T(~big).any()).tolist() is True


# ------------------------------------------------------------------ cumsum / cumprod
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cumsum_cumprod(dim):
    for name, a, x in layouts((3, 4, 5)):
        close(x.cumsum(dim), np.cumsum(a, axis=dim), 1e-12, 1e-12)
        close(tp.cumprod(x, dim), np.cumprod(a, axis=dim), 1e-12, 1e-12)


def test_cumsum_dtypes():
    b = RNG.integers(0, 2, size=(3, 4)).astype(bool)
    r = T(b).cumsum(1)
    assert r.dtype == tp.int64
    assert N(r).tolist() == np.cumsum(b, 1).tolist()
    i = RNG.integers(-4, 4, size=(3, 4))
    assert N(T(i).cumprod(0)).tolist() == np.cumprod(i, 0).tolist()
    f = T(i).cumsum(1, dtype=tp.float32)
    assert f.dtype == tp.float32
    close(f, np.cumsum(i, 1))
    close(T(np.array(2.5)).cumsum(0), 2.5)
    assert N(T(np.zeros((0, 3))).cumsum(0)).shape == (0, 3)


def test_cumsum_gradcheck():
    gradcheck(lambda x: x.cumsum(1), RNG.standard_normal((3, 4)))
    gradcheck(lambda x: x.cumsum(0), RNG.standard_normal((3, 4)))


@pytest.mark.parametrize("zeros", [[], [2], [1, 3], [0]])
def test_cumprod_gradcheck_with_zeros(zeros):
    a = RNG.standard_normal((2, 5)) + 0.5
    for z in zeros:
        a[0, z] = 0.0
    gradcheck(lambda x: x.cumprod(1), a)
    gradcheck(lambda x: x.cumprod(0), a)


# ------------------------------------------------------------------ gradients of sum/mean/prod
@pytest.mark.parametrize("dim", [None, 0, (0, 2)])
def test_sum_mean_gradcheck(dim):
    a = RNG.standard_normal((2, 3, 4))
    kw = {} if dim is None else {"dim": dim}
    gradcheck(lambda x: x.sum(**kw), a)
    gradcheck(lambda x: x.mean(**kw, keepdim=True), a)


@pytest.mark.parametrize("zeros", [[], [(0, 1)], [(0, 1), (0, 3)], [(0, 1), (1, 2)]])
def test_prod_gradcheck_with_zeros(zeros):
    a = RNG.standard_normal((2, 4)) + 0.3
    for z in zeros:
        a[z] = 0.0
    gradcheck(lambda x: x.prod(1), a)
    gradcheck(lambda x: x.prod(0, keepdim=True), a)
    gradcheck(lambda x: x.prod(), a)


def test_sum_dtype_grad_casts_back():
    x = T(RNG.standard_normal((3,)).astype(np.float32), requires_grad=True)
    x.sum(dtype=tp.float64).backward()
    assert x.grad.dtype == tp.float32
    close(x.grad, np.ones(3))


# ------------------------------------------------------------------ errors
def test_bad_dims_raise():
    x = T(np.zeros((2, 3)))
    with pytest.raises(Exception, match="sum"):
        x.sum(2)
    with pytest.raises(Exception, match="amax"):
        x.amax((0, 0))
    with pytest.raises(Exception, match="cumsum"):
        x.cumsum(5)
    with pytest.raises(Exception, match="argmax"):
        x.argmax(-3)


# ------------------------------------------------------------------ PyTorch as a second oracle
def test_against_torch():
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((5, 6, 7)).astype(np.float32)
    a[1, 2, 3] = np.nan
    x, t = T(a), torch.from_numpy(a.copy())
    pairs = [
        (x.sum(1), t.sum(1)), (x.mean((0, 2)), t.mean((0, 2))), (x.prod(2), t.prod(2)),
        (x.amax(0), t.amax(0)), (x.amin(-1, keepdim=True), t.amin(-1, keepdim=True)),
        (x.var(1), t.var(1)), (x.std(2, correction=0), t.std(2, correction=0)),
        (tp.norm(x, 3, dim=1), torch.norm(t, 3, dim=1)), (x.logsumexp(2), t.logsumexp(2)),
        (x.cumsum(1), t.cumsum(1)), (x.cumprod(0), t.cumprod(0)),
        (x.argmax(1), t.argmax(1)), (x.argmin(), t.argmin()),
        (tp.max(x, 2)[1], torch.max(t, 2)[1]), (tp.max(x), torch.max(t)),
    ]
    for i, (got, want) in enumerate(pairs):
        np.testing.assert_allclose(N(got).astype(np.float64), want.numpy().astype(np.float64), rtol=2e-5,
                                   atol=1e-5, equal_nan=True, err_msg=f"pair {i}")
    i = RNG.integers(-3, 3, size=(4, 5)).astype(np.int32)
    assert N(T(i).sum(1)).tolist() == torch.from_numpy(i).sum(1).tolist()
    assert N(T(i).cumsum(0)).tolist() == torch.from_numpy(i).cumsum(0).tolist()
