"""The eager tensor surface of tensorplay, checked against NumPy as the oracle."""

import math

import numpy as np
import pytest

import tensorplay as tp

FLOAT_DTYPES = [(tp.float32, np.float32), (tp.float64, np.float64)]
U = {np.float32: 2.0**-24, np.float64: 2.0**-53}


def arr(t):
    """An independent NumPy copy of a tensor's values (works for views too)."""
    return np.array(t.contiguous().numpy(), copy=True)


def rtol_for(np_dtype, ulps=8):
    return ulps * 2 * U[np_dtype]


def assert_close(t, expected, np_dtype=None, ulps=8, atol=0.0):
    expected = np.asarray(expected)
    got = arr(t)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    np_dtype = np_dtype or got.dtype.type
    np.testing.assert_allclose(got, expected, rtol=rtol_for(np_dtype, ulps), atol=atol)


def sample(shape, np_dtype, positive=False, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.1
    return a.astype(np_dtype)


# --------------------------------------------------------------------- creation


def test_zeros_ones_full_shape_dtype_and_values():
    z = tp.zeros(2, 3)
    o = tp.ones(2, 3)
    f = tp.full((2, 3), 7.5)
    assert z.shape == (2, 3) and o.shape == (2, 3) and f.shape == (2, 3)
    assert z.dtype == tp.float32 and o.dtype == tp.float32
    np.testing.assert_array_equal(arr(z), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(arr(o), np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(arr(f), np.full((2, 3), 7.5, np.float32))


def test_shape_is_a_tuple():
    x = tp.zeros(4, 5, 6)
    assert isinstance(x.shape, tuple)
    assert x.shape == (4, 5, 6)


def test_creation_with_dtype():
    assert tp.zeros(3, dtype=tp.float64).dtype == tp.float64
    assert tp.ones(3, dtype=tp.int64).dtype == tp.int64
    assert tp.randn(3, dtype=tp.float64).dtype == tp.float64
    assert tp.rand(3, dtype=tp.float64).dtype == tp.float64
    np.testing.assert_array_equal(arr(tp.ones(3, dtype=tp.int64)), np.ones(3, np.int64))


def test_arange_integer_and_float():
    a = tp.arange(5)
    assert a.dtype == tp.int64
    assert a.tolist() == [0, 1, 2, 3, 4]
    b = tp.arange(2, 11, 3)
    assert b.tolist() == [2, 5, 8]
    c = tp.arange(0, 1, 0.25, dtype=tp.float64)
    assert c.dtype == tp.float64
    np.testing.assert_allclose(arr(c), [0.0, 0.25, 0.5, 0.75])


def test_randn_statistics():
    x = arr(tp.randn(200, 100))
    assert x.dtype == np.float32
    assert abs(x.mean()) < 0.03  # sd of the mean is 0.007
    assert 0.97 < x.std() < 1.03
    assert len(np.unique(x)) > 19000


def test_rand_in_unit_interval():
    x = arr(tp.rand(10000))
    assert x.dtype == np.float32
    assert x.min() >= 0.0 and x.max() < 1.0
    assert 0.48 < x.mean() < 0.52


def test_manual_seed_reproducible():
    tp.manual_seed(123)
    a = arr(tp.randn(16))
    tp.manual_seed(123)
    b = arr(tp.randn(16))
    tp.manual_seed(124)
    c = arr(tp.randn(16))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_tensor_from_nested_lists_dtypes():
    f = tp.tensor([[1.0, 2.0], [3.0, 4.0]])
    i = tp.tensor([1, 2, 3])
    b = tp.tensor([True, False])
    assert f.dtype == tp.float32 and f.shape == (2, 2)
    assert i.dtype == tp.int64 and i.shape == (3,)
    assert b.dtype == tp.bool and b.shape == (2,)
    assert f.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert i.tolist() == [1, 2, 3]
    assert b.tolist() == [True, False]


def test_tensor_explicit_dtype_and_scalar():
    x = tp.tensor([1, 2], dtype=tp.float64)
    assert x.dtype == tp.float64
    assert x.tolist() == [1.0, 2.0]
    s = tp.tensor(3.5)
    assert s.shape == ()
    assert s.item() == 3.5


def test_tensor_from_ndarray_keeps_dtype_and_copies():
    a = np.array([[1.5, 2.5]], dtype=np.float64)
    t = tp.tensor(a)
    assert t.dtype == tp.float64
    assert t.tolist() == [[1.5, 2.5]]
    a[0, 0] = 100.0  # tp.tensor copies (from_numpy is the zero-copy one)
    assert t.tolist() == [[1.5, 2.5]]


# ------------------------------------------------------ views and their strides


def test_contiguous_strides_in_elements():
    x = tp.zeros(2, 3, 4)
    assert tuple(x.stride()) == (12, 4, 1)


def test_transpose_and_t_strides():
    x = tp.zeros(2, 3, 4)
    assert x.transpose(0, 2).shape == (4, 3, 2)
    assert tuple(x.transpose(0, 2).stride()) == (1, 4, 12)
    m = tp.zeros(3, 5)
    assert m.t().shape == (5, 3)
    assert tuple(m.t().stride()) == (1, 5)


def test_permute_strides():
    x = tp.zeros(2, 3, 4)
    p = x.permute(2, 0, 1)
    assert p.shape == (4, 2, 3)
    assert tuple(p.stride()) == (1, 12, 4)


def test_expand_has_zero_stride():
    x = tp.zeros(3, 1)
    e = x.expand(3, 4)
    assert e.shape == (3, 4)
    assert tuple(e.stride()) == (1, 0)


def test_slice_with_step_strides():
    x = tp.zeros(4, 6)
    s = x[1:4:2, ::2]
    assert s.shape == (2, 3)
    assert tuple(s.stride()) == (12, 2)
    assert tuple(x[1:4, 3].stride()) == (6,)


def test_view_shares_storage():
    x = tp.zeros(2, 3)
    v = x.view(6)
    v.add_(1.0)
    np.testing.assert_array_equal(arr(x), np.ones((2, 3), np.float32))
    x.mul_(3.0)
    np.testing.assert_array_equal(arr(v), np.full(6, 3.0, np.float32))


def test_transpose_shares_storage():
    x = tp.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = x.transpose(0, 1)
    x.add_(10.0)
    np.testing.assert_array_equal(arr(t), np.arange(6, dtype=np.float32).reshape(2, 3).T + 10)


def test_inplace_on_transposed_view_writes_base():
    x = tp.zeros(2, 3)
    t = x.t()
    t.add_(tp.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    np.testing.assert_array_equal(arr(x), np.array([[1, 3, 5], [2, 4, 6]], np.float32))


def test_permute_and_expand_share_storage():
    x = tp.zeros(2, 1, 3)
    p = x.permute(2, 0, 1)
    e = x.expand(2, 4, 3)
    x.add_(tp.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(arr(p)[:, 0, 0], [1, 2, 3])
    np.testing.assert_array_equal(arr(e)[1, 3], [1, 2, 3])


def test_slice_shares_storage():
    x = tp.zeros(4, 6)
    s = x[1:3, ::2]
    s.fill_(5.0)
    expected = np.zeros((4, 6), np.float32)
    expected[1:3, ::2] = 5.0
    np.testing.assert_array_equal(arr(x), expected)


def test_getitem_matches_numpy():
    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    x = tp.tensor(a)
    for index in [
        1,
        -1,
        (0, 2),
        (slice(None), 1),
        (slice(None), slice(None, None, 2)),
        (slice(1, None), slice(0, 3, 2), slice(None, None, 3)),
        (None, 0),
        (Ellipsis, 1),
        (0, Ellipsis, None),
        (slice(None), None, slice(1, 3)),
    ]:
        got = x[index]
        assert got.shape == a[index].shape, index
        np.testing.assert_array_equal(arr(got), a[index], err_msg=str(index))


def test_reshape_and_view_values():
    a = np.arange(24, dtype=np.float32)
    x = tp.tensor(a)
    np.testing.assert_array_equal(arr(x.view(2, 3, 4)), a.reshape(2, 3, 4))
    np.testing.assert_array_equal(arr(x.reshape(4, 6)), a.reshape(4, 6))
    np.testing.assert_array_equal(arr(x.reshape(4, -1)), a.reshape(4, -1))


def test_reshape_of_noncontiguous_copies_values():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = tp.tensor(a).t()
    np.testing.assert_array_equal(arr(x.reshape(6)), a.T.reshape(6))


def test_contiguous_makes_standard_strides():
    x = tp.zeros(3, 5).t()
    c = x.contiguous()
    assert c.shape == (5, 3)
    assert tuple(c.stride()) == (3, 1)


def test_clone_is_independent():
    x = tp.ones(3)
    c = x.clone()
    x.add_(1.0)
    assert c.tolist() == [1.0, 1.0, 1.0]
    assert x.tolist() == [2.0, 2.0, 2.0]


def test_to_dtype():
    x = tp.tensor([1.75, -1.75, 2.0])
    d = x.to(tp.float64)
    assert d.dtype == tp.float64
    assert d.tolist() == [1.75, -1.75, 2.0]
    i = x.to(tp.int64)
    assert i.dtype == tp.int64
    assert i.tolist() == [1, -1, 2]  # truncation toward zero, as C++ and NumPy


# ------------------------------------------------------------ NumPy interchange


def test_numpy_is_zero_copy_tensor_to_numpy():
    x = tp.zeros(2, 3)
    a = x.numpy()
    assert a.dtype == np.float32 and a.shape == (2, 3)
    a[0, 1] = 42.0
    assert x[0, 1].item() == 42.0
    x.add_(1.0)
    assert a[1, 2] == 1.0 and a[0, 1] == 43.0


def test_from_numpy_is_zero_copy_numpy_to_tensor():
    a = np.zeros((2, 3), dtype=np.float64)
    x = tp.from_numpy(a)
    assert x.dtype == tp.float64 and x.shape == (2, 3)
    a[1, 1] = 7.0
    assert x[1, 1].item() == 7.0
    x.mul_(2.0)
    assert a[1, 1] == 14.0


@pytest.mark.parametrize("np_dtype,tp_name", [(np.float32, "float32"), (np.float64, "float64"), (np.int64, "int64"), (np.bool_, "bool")])
def test_numpy_dtype_round_trip(np_dtype, tp_name):
    a = (np.arange(6) % 3).astype(np_dtype)
    x = tp.from_numpy(a)
    assert x.dtype == getattr(tp, tp_name)
    assert x.numpy().dtype == np_dtype
    np.testing.assert_array_equal(x.numpy(), a)


def test_tolist_and_item():
    x = tp.tensor([[1.5, 2.0], [3.0, -4.0]])
    assert x.tolist() == [[1.5, 2.0], [3.0, -4.0]]
    assert x[1, 1].item() == -4.0
    assert isinstance(tp.tensor([5]).item(), int)
    assert tp.tensor([5]).item() == 5
    assert tp.tensor([True]).item() is True
    assert isinstance(tp.tensor([2.5]).item(), float)


# ----------------------------------------------------------------- broadcasting


def test_broadcast_column_plus_row():
    a = np.arange(3, dtype=np.float32).reshape(3, 1)
    b = np.arange(4, dtype=np.float32).reshape(1, 4) * 10
    out = tp.tensor(a) + tp.tensor(b)
    assert out.shape == (3, 4)
    np.testing.assert_array_equal(arr(out), a + b)


def test_broadcast_trailing_vector_and_leading_dims():
    a = sample((2, 3, 4), np.float32)
    b = sample((4,), np.float32, seed=1)
    c = sample((3, 1), np.float32, seed=2)
    assert_close(tp.tensor(a) * tp.tensor(b), a * b)
    assert_close(tp.tensor(a) - tp.tensor(c), a - c)
    assert_close(tp.tensor(b) / (tp.tensor(c) + 10.0), b / (c + 10.0))


def test_broadcast_zero_dim_tensor():
    a = sample((3, 4), np.float32)
    s = tp.tensor(2.5)
    assert_close(tp.tensor(a) * s, a * np.float32(2.5))
    assert_close(s + tp.tensor(a), np.float32(2.5) + a)


def test_python_scalars_on_either_side():
    a = sample((5,), np.float32, positive=True)
    x = tp.tensor(a)
    assert_close(x * 2, a * 2)
    assert_close(2 * x, 2 * a)
    assert_close(x + 1.5, a + np.float32(1.5))
    assert_close(1.5 + x, np.float32(1.5) + a)
    assert_close(x - 1, a - 1)
    assert_close(1 - x, 1 - a)
    assert_close(x / 4, a / 4)
    assert_close(1 / x, np.float32(1) / a)
    assert (x * 2).dtype == tp.float32


# ----------------------------------------------------- operators against NumPy

BINARY = [
    ("add", lambda a, b: a + b, np.add),
    ("sub", lambda a, b: a - b, np.subtract),
    ("mul", lambda a, b: a * b, np.multiply),
    ("div", lambda a, b: a / b, np.divide),
]


@pytest.mark.parametrize("tp_dtype,np_dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name,op,ref", BINARY)
def test_binary_operator_float(name, op, ref, tp_dtype, np_dtype):
    a = sample((4, 5), np_dtype)
    b = sample((4, 5), np_dtype, positive=True, seed=1)
    out = op(tp.tensor(a), tp.tensor(b))
    assert out.dtype == tp_dtype
    assert_close(out, ref(a, b), np_dtype, ulps=1)


@pytest.mark.parametrize("tp_dtype,np_dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name,op,ref", BINARY)
def test_binary_function_float(name, op, ref, tp_dtype, np_dtype):
    a = sample((3, 4), np_dtype)
    b = sample((3, 4), np_dtype, positive=True, seed=1)
    out = getattr(tp, name)(tp.tensor(a), tp.tensor(b))
    assert out.dtype == tp_dtype
    assert_close(out, ref(a, b), np_dtype, ulps=1)


@pytest.mark.parametrize("name,ref", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply)])
def test_binary_int64_exact(name, ref):
    a = np.array([[1, -2, 3], [40, 50, -60]], dtype=np.int64)
    b = np.array([[7, 8, -9], [1, 2, 3]], dtype=np.int64)
    out = getattr(tp, name)(tp.tensor(a), tp.tensor(b))
    assert out.dtype == tp.int64
    np.testing.assert_array_equal(arr(out), ref(a, b))


@pytest.mark.parametrize("tp_dtype,np_dtype", FLOAT_DTYPES)
def test_maximum_minimum(tp_dtype, np_dtype):
    a = sample((6,), np_dtype)
    b = sample((6,), np_dtype, seed=3)
    np.testing.assert_array_equal(arr(tp.maximum(tp.tensor(a), tp.tensor(b))), np.maximum(a, b))
    np.testing.assert_array_equal(arr(tp.minimum(tp.tensor(a), tp.tensor(b))), np.minimum(a, b))


def test_maximum_minimum_int64():
    a = np.array([1, 5, -3], dtype=np.int64)
    b = np.array([2, 4, -3], dtype=np.int64)
    assert tp.maximum(tp.tensor(a), tp.tensor(b)).tolist() == [2, 5, -3]
    assert tp.minimum(tp.tensor(a), tp.tensor(b)).tolist() == [1, 4, -3]


UNARY = [
    ("relu", lambda a: np.maximum(a, 0), False, 0),
    ("exp", np.exp, False, 4),
    ("log", np.log, True, 4),
    ("sqrt", np.sqrt, True, 1),
    ("tanh", np.tanh, False, 4),
    ("sigmoid", lambda a: 1 / (1 + np.exp(-a)), False, 4),
    ("abs", np.abs, False, 0),
]


@pytest.mark.parametrize("tp_dtype,np_dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name,ref,positive,ulps", UNARY)
def test_unary_method_and_function(name, ref, positive, ulps, tp_dtype, np_dtype):
    a = sample((5, 7), np_dtype, positive=positive) * 2
    expected = ref(a.astype(np.float64))
    m = getattr(tp.tensor(a), name)()
    f = getattr(tp, name)(tp.tensor(a))
    assert m.dtype == tp_dtype and f.dtype == tp_dtype
    tiny = 4 * np.finfo(np_dtype).tiny
    assert_close(m, expected.astype(np_dtype), np_dtype, ulps=max(ulps, 1), atol=tiny)
    assert_close(f, expected.astype(np_dtype), np_dtype, ulps=max(ulps, 1), atol=tiny)


def test_relu_and_abs_exact_at_zero_and_sign():
    x = tp.tensor([-2.0, -0.0, 0.0, 3.0])
    assert x.relu().tolist() == [0.0, 0.0, 0.0, 3.0]
    assert x.abs().tolist() == [2.0, 0.0, 0.0, 3.0]


@pytest.mark.parametrize("tp_dtype,np_dtype", FLOAT_DTYPES)
def test_negation(tp_dtype, np_dtype):
    a = sample((3, 3), np_dtype)
    np.testing.assert_array_equal(arr(-tp.tensor(a)), -a)
    np.testing.assert_array_equal(arr(tp.neg(tp.tensor(a))), -a)


def test_abs_and_neg_int64():
    x = tp.tensor([-3, 0, 4])
    assert (-x).tolist() == [3, 0, -4]
    assert x.abs().tolist() == [3, 0, 4]


COMPARE = [
    ("eq", lambda a, b: a == b, np.equal),
    ("ne", lambda a, b: a != b, np.not_equal),
    ("lt", lambda a, b: a < b, np.less),
    ("le", lambda a, b: a <= b, np.less_equal),
    ("gt", lambda a, b: a > b, np.greater),
    ("ge", lambda a, b: a >= b, np.greater_equal),
]


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("name,op,ref", COMPARE)
def test_comparisons_give_bool(name, op, ref, np_dtype):
    a = np.array([[1, 2, 3], [4, 5, 6]], dtype=np_dtype)
    b = np.array([[1, 3, 2], [4, 4, 7]], dtype=np_dtype)
    for out in (op(tp.tensor(a), tp.tensor(b)), getattr(tp, name)(tp.tensor(a), tp.tensor(b))):
        assert out.dtype == tp.bool
        np.testing.assert_array_equal(out.numpy(), ref(a, b))


def test_comparison_with_python_scalar_and_bool_equality():
    x = tp.tensor([0.5, 1.5, 2.5])
    assert (x > 1.0).tolist() == [False, True, True]
    b = tp.tensor([True, False, True])
    c = tp.tensor([True, True, False])
    assert (b == c).tolist() == [True, False, False]
    assert tp.ne(b, c).tolist() == [False, True, True]


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64, np.int64])
def test_where(np_dtype):
    cond = np.array([[True, False, True], [False, False, True]])
    a = np.arange(6, dtype=np_dtype).reshape(2, 3)
    b = -np.arange(6, dtype=np_dtype).reshape(2, 3) - 10
    out = tp.where(tp.tensor(cond), tp.tensor(a), tp.tensor(b))
    np.testing.assert_array_equal(arr(out), np.where(cond, a, b))


def test_where_broadcasts():
    cond = np.array([True, False, True])
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([[-1.0], [-2.0]], dtype=np.float32)
    out = tp.where(tp.tensor(cond), tp.tensor(a), tp.tensor(b))
    assert out.shape == (2, 3)
    np.testing.assert_array_equal(arr(out), np.where(cond, a, b))


# ---------------------------------------------------------------- reductions


def sum_tol(a, axis, np_dtype):
    """Summation error model: |E| <~ 4 sqrt(n) u sum|a| along the axis."""
    n = a.shape[axis] if axis is not None else a.size
    return 4 * math.sqrt(n) * U[np_dtype] * np.abs(a.astype(np.float64)).sum(axis=axis) + np.finfo(np_dtype).tiny


@pytest.mark.parametrize("tp_dtype,np_dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2, -3])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_dims(dim, keepdim, tp_dtype, np_dtype):
    a = sample((3, 4, 50), np_dtype)
    out = tp.tensor(a).sum(dim, keepdim=keepdim)
    expected = a.astype(np.float64).sum(axis=dim, keepdims=keepdim)
    got = arr(out)
    assert out.dtype == tp_dtype
    assert got.shape == expected.shape
    tol = sum_tol(a, dim, np_dtype)
    if keepdim:
        tol = np.expand_dims(tol, dim)
    assert np.all(np.abs(got - expected) <= tol)


@pytest.mark.parametrize("tp_dtype,np_dtype", FLOAT_DTYPES)
def test_sum_all_is_zero_dim(tp_dtype, np_dtype):
    a = sample((30, 40), np_dtype)
    s = tp.tensor(a).sum()
    assert s.shape == ()
    assert s.dtype == tp_dtype
    assert abs(s.item() - a.astype(np.float64).sum()) <= sum_tol(a, None, np_dtype)
    assert abs(tp.sum(tp.tensor(a)).item() - a.astype(np.float64).sum()) <= sum_tol(a, None, np_dtype)


def test_sum_keyword_dim():
    a = sample((3, 4), np.float64)
    np.testing.assert_allclose(arr(tp.tensor(a).sum(dim=1)), a.sum(1), rtol=1e-14)
    np.testing.assert_allclose(arr(tp.sum(tp.tensor(a), -1, keepdim=True)), a.sum(-1, keepdims=True), rtol=1e-14)


def test_sum_int64_exact():
    x = tp.tensor([[1, 2, 3], [4, 5, 6]])
    assert x.sum(0).tolist() == [5, 7, 9]
    assert x.sum(-1).tolist() == [6, 15]
    assert x.sum().item() == 21


@pytest.mark.parametrize("tp_dtype,np_dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_amax_dims(dim, keepdim, tp_dtype, np_dtype):
    a = sample((5, 6), np_dtype)
    out = tp.tensor(a).amax(dim, keepdim=keepdim)
    assert out.dtype == tp_dtype
    np.testing.assert_array_equal(arr(out), a.max(axis=dim, keepdims=keepdim))
    np.testing.assert_array_equal(arr(tp.amax(tp.tensor(a), dim, keepdim=keepdim)), a.max(axis=dim, keepdims=keepdim))


def test_amax_int64_and_negative_values():
    x = tp.tensor([[-5, -2, -9], [3, 1, 2]])
    assert x.amax(1).tolist() == [-2, 3]
    assert x.amax(0).tolist() == [3, 1, 2]


@pytest.mark.parametrize("tp_dtype,np_dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean_dims(dim, keepdim, tp_dtype, np_dtype):
    a = sample((6, 40), np_dtype)
    out = tp.tensor(a).mean(dim, keepdim=keepdim)
    expected = a.astype(np.float64).mean(axis=dim, keepdims=keepdim)
    tol = sum_tol(a, dim, np_dtype) / a.shape[dim] + 2 * U[np_dtype] * np.abs(expected).reshape(-1).max()
    if keepdim:
        tol = np.expand_dims(tol, dim)
    assert out.dtype == tp_dtype
    assert np.all(np.abs(arr(out) - expected) <= tol)
    assert abs(tp.mean(tp.tensor(a)).item() - a.astype(np.float64).mean()) <= 1e-5


def test_reduction_over_noncontiguous_input():
    a = sample((7, 9), np.float64)
    x = tp.tensor(a).t()
    np.testing.assert_allclose(arr(x.sum(-1)), a.T.sum(-1), rtol=1e-13)
    np.testing.assert_array_equal(arr(x.amax(0)), a.T.max(0))


@pytest.mark.parametrize("tp_dtype,np_dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dim, tp_dtype, np_dtype):
    a = sample((4, 30), np_dtype) * 3
    a64 = a.astype(np.float64)
    e = np.exp(a64 - a64.max(axis=dim, keepdims=True))
    expected = e / e.sum(axis=dim, keepdims=True)
    for out in (tp.tensor(a).softmax(dim), tp.softmax(tp.tensor(a), dim)):
        assert out.dtype == tp_dtype
        got = arr(out)
        n = a.shape[dim]
        rtol = 4 * math.sqrt(n) * U[np_dtype] + 16 * U[np_dtype]
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=np.finfo(np_dtype).tiny)
        np.testing.assert_allclose(got.sum(axis=dim), 1.0, rtol=4 * math.sqrt(n) * U[np_dtype] + n * U[np_dtype])


def test_softmax_large_values_do_not_overflow():
    x = tp.tensor([[1000.0, 1001.0, 1002.0]])
    got = arr(x.softmax(-1))
    assert np.all(np.isfinite(got))
    e = np.exp(np.array([-2.0, -1.0, 0.0]))
    np.testing.assert_allclose(got[0], e / e.sum(), rtol=1e-6)


# ----------------------------------------------------------------- matmul


@pytest.mark.parametrize("tp_dtype,np_dtype", FLOAT_DTYPES)
def test_matmul_2d(tp_dtype, np_dtype):
    a = sample((7, 33), np_dtype)
    b = sample((33, 5), np_dtype, seed=1)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    # Each entry is a dot product of 33 terms: the summation error model again.
    tol = 4 * math.sqrt(33) * U[np_dtype] * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)) * 2
    for out in (tp.tensor(a) @ tp.tensor(b), tp.matmul(tp.tensor(a), tp.tensor(b)), tp.tensor(a).matmul(tp.tensor(b))):
        assert out.shape == (7, 5)
        assert out.dtype == tp_dtype
        assert np.all(np.abs(arr(out) - expected) <= tol)


def test_matmul_transposed_operand():
    a = sample((6, 4), np.float64)
    b = sample((6, 3), np.float64, seed=1)
    out = tp.tensor(a).t() @ tp.tensor(b)
    np.testing.assert_allclose(arr(out), a.T @ b, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------- in-place


def test_inplace_arithmetic():
    a = sample((3, 4), np.float64)
    x = tp.tensor(a)
    x.add_(tp.tensor(np.ones((3, 4))))
    x.mul_(2.0)
    x.sub_(0.5)
    x.div_(4.0)
    np.testing.assert_allclose(arr(x), ((a + 1) * 2 - 0.5) / 4, rtol=1e-15)


def test_inplace_returns_the_updated_tensor():
    x = tp.zeros(3)
    y = x.add_(2.0)
    assert y.tolist() == [2.0, 2.0, 2.0]
    y.mul_(3.0)  # y is x (or a view of the same storage)
    assert x.tolist() == [6.0, 6.0, 6.0]


def test_inplace_broadcast_operand():
    x = tp.zeros(2, 3)
    x.add_(tp.tensor([1.0, 2.0, 3.0]))
    x.mul_(tp.tensor([[1.0], [10.0]]))
    assert x.tolist() == [[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]]


def test_fill_zero_copy():
    x = tp.ones(2, 2)
    x.fill_(3.5)
    assert x.tolist() == [[3.5, 3.5], [3.5, 3.5]]
    x.zero_()
    assert x.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    src = tp.tensor([[1.0, 2.0], [3.0, 4.0]])
    x.copy_(src)
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    src.add_(1.0)  # copy_ copied the values, not the storage
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_copy_into_transposed_view():
    x = tp.zeros(2, 3)
    x.t().copy_(tp.tensor([[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]))
    assert x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_inplace_is_visible_in_previous_numpy_view_and_views():
    x = tp.zeros(4)
    a = x.numpy()
    v = x[1:3]
    x.add_(1.0)
    v.mul_(5.0)
    np.testing.assert_array_equal(a, [1.0, 5.0, 5.0, 1.0])


def test_out_of_place_ops_do_not_modify_inputs():
    a = sample((3, 3), np.float32)
    x = tp.tensor(a)
    _ = (x + 1).relu() * 2
    _ = x.exp().sum(-1)
    np.testing.assert_array_equal(arr(x), a)
