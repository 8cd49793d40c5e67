"""Tensor indexing (basic views, advanced indexing, setitem) and the index
operators (index_select, gather, scatter, index_add, masked_fill, masked_select,
nonzero, where, embedding, one_hot) against NumPy, PyTorch where installed,
and finite differences."""
import numpy as np
import pytest

import tensorplay as tp

DTYPES = [tp.bool, tp.uint8, tp.int8, tp.int16, tp.int32, tp.int64, tp.float16, tp.bfloat16, tp.float32, tp.float64]


def make(arr, dtype=tp.float32):
    arr = np.asarray(arr)
    return tp.tensor(arr.astype(np.float32) if arr.dtype != np.bool_ else arr).to(dtype)


def to_np(t):
    if t.dtype in (tp.bfloat16, tp.float16):
        return t.float().numpy()
    return np.ascontiguousarray(t.numpy())


def as_dtype(arr, dtype):
    return np.asarray(arr).astype(bool) if dtype == tp.bool else np.asarray(arr)


def assert_same(t, want):
    got, want = to_np(t), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def grads_match(f, arrays, eps=1e-6):
    ts = [tp.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]
    out = f(*ts)
    w = np.random.default_rng(0).standard_normal(out.shape)
    (out * tp.tensor(w)).sum().backward()
    for i, a in enumerate(arrays):
        a = np.asarray(a, dtype=np.float64)
        num = np.zeros_like(a)
        for k in np.ndindex(a.shape):
            args = [np.asarray(x, dtype=np.float64).copy() for x in arrays]
            args[i][k] += eps
            up = float((f(*[tp.tensor(x) for x in args]).numpy() * w).sum())
            args[i][k] -= 2 * eps
            dn = float((f(*[tp.tensor(x) for x in args]).numpy() * w).sum())
            num[k] = (up - dn) / (2 * eps)
        got = ts[i].grad.numpy() if ts[i].grad is not None else np.zeros_like(a)
        np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-6)


A = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)

# Indices where NumPy and PyTorch agree (an int next to an advanced index
# differs: PyTorch selects first; see test_int_next_to_advanced_index_follows_pytorch).
BASIC = [
    0, -1, None, Ellipsis, slice(1, None), (1, 2), (slice(None), 1), (Ellipsis, 2), (None, 0), (0, None, Ellipsis, None),
    (slice(1, None), slice(None, None, 2)), (slice(-3, -1), Ellipsis, slice(None, None, 3)),
    (slice(5, 9),), (Ellipsis,), (), (1, Ellipsis, 4, None), (slice(None), None, slice(1, 3), -2),
]
ADVANCED = [
    [1, 0], ([0, 1, 1],), (slice(None), [2, 0, 2]), (slice(None), [0, 2], [1, 3]),
    ([0, 1], slice(None), [1, 3]),                       # separated: advanced dims go first
    (Ellipsis, [4, 0]), (None, [1], Ellipsis, [2]),
    (slice(None), [[0], [2]], [[1, 3]]),                 # index tensors broadcast
    ([-1, -2], slice(None), slice(1, 3)),
    (slice(None), np.array([[0, 1], [2, 2]])),
    (slice(None), slice(None), [], slice(None)),
    (np.array([True, False]),), (slice(None), np.array([True, False, True])),
    (A.sum(axis=(2, 3)) > 100,), (slice(None), slice(None), A[0, 0, :, 0] % 2 == 0, [1]),
    (True,), (False,), (0, True), (slice(None), None, [0, 0]),
]


def as_tp_index(idx):
    def conv(i):
        if isinstance(i, np.ndarray):
            return tp.tensor(i)
        return i
    return tuple(conv(i) for i in idx) if isinstance(idx, tuple) else conv(idx)


@pytest.mark.parametrize("idx", BASIC, ids=repr)
def test_basic_indexing_is_a_view(idx):
    x = tp.tensor(A)
    r = x[as_tp_index(idx)]
    assert_same(r, A[idx])
    if r.numel():
        end = x.data_ptr() + x.numel() * 8
        assert x.data_ptr() <= r.data_ptr() < end  # same storage: a view


@pytest.mark.parametrize("idx", ADVANCED, ids=repr)
def test_advanced_indexing_matches_numpy(idx):
    x = tp.tensor(A)
    assert_same(x[as_tp_index(idx)], A[idx])


@pytest.mark.parametrize("idx", ADVANCED, ids=repr)
def test_advanced_indexing_matches_torch(idx):
    torch = pytest.importorskip("torch")
    t = torch.tensor(A)

    def conv(i):
        return torch.tensor(i) if isinstance(i, np.ndarray) else i
    tidx = tuple(conv(i) for i in idx) if isinstance(idx, tuple) else conv(idx)
    assert_same(tp.tensor(A)[as_tp_index(idx)], t[tidx].numpy())


def test_int_next_to_advanced_index_follows_pytorch():
    torch = pytest.importorskip("torch")
    t = torch.tensor(A)
    x = tp.tensor(A)
    for idx in [(0, slice(None), [0, 1]), (1, [0, 2], slice(None), [1, 1]), ([1, 0], 2), (slice(None), 1, [0, 3])]:
        assert_same(x[idx], t[idx].numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_indexing_every_dtype_and_noncontiguous(dtype):
    a = np.arange(24).reshape(4, 6) % 5
    for x, base in [(make(a, dtype), a), (make(a.T.copy(), dtype).t(), a), (make(np.tile(a, 2), dtype)[:, ::2], np.tile(a, 2)[:, ::2])]:
        want = as_dtype(base, dtype)
        assert_same(x[[3, 0, -1]], want[[3, 0, -1]])
        assert_same(x[:, [5, 1]], want[:, [5, 1]])
        assert_same(x[1:, [0, 2]][[0, 2]], want[1:, [0, 2]][[0, 2]])
        assert_same(x[tp.tensor(base > 2)], want[base > 2])
        assert x[[0]].dtype == dtype
    e = make(a, dtype).expand(2, 4, 6)
    assert_same(e[:, [1, 2], 0], np.broadcast_to(as_dtype(a, dtype), (2, 4, 6))[:, [1, 2], 0])


def test_zero_d_tensor_indexing():
    x = tp.tensor(3.0)
    assert x[None].shape == (1,) and x[...].shape == () and x[()].shape == ()
    assert x[tp.tensor(True)].shape == (1,) and x[x > 0].shape == (1,) and x[x < 0].shape == (0,)
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 0"):
        x[0]
    x[...] = 5
    assert x.item() == 5
    x[None] = 6
    assert x.item() == 6


def test_index_tensor_dtypes_and_zero_d():
    x = tp.tensor(A)
    for dt in [tp.int64, tp.int32, tp.int16, tp.int8, tp.uint8]:
        if dt == tp.uint8:
            continue  # PyTorch reads a uint8 index as a mask (deprecated); not supported here
        i = tp.tensor([1, 0]).to(dt)
        assert_same(x[i], A[[1, 0]])
    assert_same(x[tp.tensor(1)], A[1])
    assert_same(x[:, tp.tensor(-1)], A[:, -1])
    assert_same(x[tp.tensor(True)], A[None])
    assert_same(x[np.int64(1), np.int32(2)], A[1, 2])
    assert_same(x[tp.zeros(0, dtype=tp.int64)], A[[]])
    assert_same(x[tp.zeros(2, 0, dtype=tp.int64)], A[np.zeros((2, 0), dtype=np.int64)])


def test_indexing_errors():
    x = tp.tensor(A)
    with pytest.raises(IndexError, match=r"index 7 is out of bounds for dimension 1 with size 3"):
        x[:, [0, 7]]
    with pytest.raises(IndexError, match=r"index -3 is out of bounds for dimension 0 with size 2"):
        x[[-3]]
    with pytest.raises(IndexError, match=r"too many indices.*4"):
        x[0, 0, 0, 0, 0]
    with pytest.raises(IndexError, match=r"single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match=r"mask"):
        x[tp.tensor([True, False, True])]
    with pytest.raises(IndexError, match=r"long, int, byte or bool"):
        x[tp.tensor([0.0])]
    with pytest.raises(IndexError, match="valid indices"):
        x["a"]
    with pytest.raises(ValueError, match=r"shape mismatch|broadcast"):
        x[[0, 1], :, [0, 1, 2]]
    with pytest.raises(ValueError, match="step"):
        x[::-1]
    with pytest.raises(IndexError, match=r"index 5 is out of bounds for dimension 0 with size 2"):
        x[5]
    with pytest.raises(IndexError, match=r"index -6 is out of bounds for dimension 2 with size 4"):
        x[1, ..., -6, :]


def test_advanced_indexing_gradient():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4, 2))
    grads_match(lambda t: t[[0, 2, 0]], [a])                                # repeated rows accumulate
    grads_match(lambda t: t[:, [1, 1, 3], [0, 1, 0]], [a])
    grads_match(lambda t: t[[0, 1], :, [1, 0]], [a])
    grads_match(lambda t: t[tp.tensor(a[:, :, 0] > 0)], [a])
    grads_match(lambda t: t.t()[1:, [0, 2]] if t.dim() == 2 else t, [a[:, :, 0]])


# ---------------------------------------------------------------------------
# setitem
def test_setitem_basic_and_advanced_vs_numpy():
    cases = [
        (0, 7), ((slice(None), 1), np.arange(5)), ((Ellipsis, slice(1, 3)), np.ones((2, 3, 4, 1)) * 3),
        ([1, 0], -1), ((slice(None), [0, 2]), np.arange(80).reshape(2, 2, 4, 5)),
        ((slice(None), [0, 2], [1, 3]), np.array([[5], [6]])), ([0, 0], 4),
        (A > 60, 0), ((A[:, :, 0, 0] > 30,), np.arange(20).reshape(4, 5)), ((slice(None), None, 1), 9),
        (True, 2), ((0, slice(None, None, 2), [1, 3]), 5),
    ]
    for idx, value in cases:
        want = A.copy()
        want[idx] = value
        x = tp.tensor(A)
        before = x._version
        tidx = tuple(tp.tensor(i) if isinstance(i, np.ndarray) else i for i in idx) if isinstance(idx, tuple) else (
            tp.tensor(idx) if isinstance(idx, np.ndarray) else idx)
        x[tidx] = tp.tensor(value) if isinstance(value, np.ndarray) else value
        assert_same(x, want)
        assert x._version > before


def test_setitem_through_a_view_bumps_the_shared_version():
    x = tp.zeros(4, 5)
    v = x[1:]
    before = x._version
    v[[0, 2], 1] = 3.0
    assert x._version > before and v._version == x._version
    assert x.numpy()[1, 1] == 3 and x.numpy()[3, 1] == 3


@pytest.mark.parametrize("dtype", DTYPES)
def test_setitem_every_dtype(dtype):
    a = np.arange(12).reshape(3, 4) % 3
    x = make(a, dtype)
    x[[2, 0]] = make(np.ones((2, 4)) * 2, dtype)
    x[x == make(1, dtype)] = 0 if dtype != tp.bool else False
    x[:, 1] = 1
    want = as_dtype(a, dtype).copy()
    want[[2, 0]] = 2 if dtype != tp.bool else True
    want[want == 1] = 0
    want[:, 1] = 1
    assert_same(x, as_dtype(want, dtype))


def test_setitem_converts_and_broadcasts_values():
    x = tp.zeros(2, 3, dtype=tp.int64)
    x[0] = tp.tensor([1.7, 2.2, -3.9])      # converted like copy_
    x[1, [0, 2]] = tp.tensor([[5.0]])       # leading size-1 dims are dropped, then broadcast
    np.testing.assert_array_equal(x.numpy(), [[1, 2, -3], [5, 0, 5]])
    x[:, [True, False, True]] = tp.tensor(8)
    np.testing.assert_array_equal(x.numpy(), [[8, 2, 8], [8, 0, 8]])
    with pytest.raises(ValueError, match="index_put_"):
        x[[0, 1]] = tp.ones(2, 2)
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 5]] = 1


def test_setitem_gradient():
    a = np.random.default_rng(1).standard_normal((3, 4))
    v = np.random.default_rng(2).standard_normal((2, 4))

    def f(t, u):
        y = t * 1.0
        y[[2, 0]] = u
        return y
    grads_match(f, [a, v])


# ---------------------------------------------------------------------------
# index operators
def test_index_select_gather_scatter_vs_numpy():
    a = np.arange(3 * 4 * 5).reshape(3, 4, 5).astype(np.float32)
    x = tp.tensor(a)
    i = np.array([3, 0, 3])
    for d in [0, 1, 2, -1]:
        ii = i % a.shape[d]
        assert_same(tp.index_select(x, d, tp.tensor(ii)), np.take(a, ii, axis=d))
    idx = np.random.default_rng(0).integers(0, 4, size=(3, 2, 5))
    assert_same(tp.gather(x, 1, tp.tensor(idx)), np.take_along_axis(a, idx, 1))
    assert_same(x.gather(-1, tp.tensor(idx % 5)), np.take_along_axis(a[:, :2], idx % 5, -1))
    def scattered(index, src, combine):
        out = a.copy()
        for i, j, k in np.ndindex(index.shape):
            out[i, index[i, j, k], k] = combine(out[i, index[i, j, k], k], src(i, j, k))
        return out
    perm = np.array([[2, 0, 1, 3]] * 3)[:, :, None].repeat(5, 2)
    assert_same(tp.scatter(x, 1, tp.tensor(perm), x), scattered(perm, lambda *e: a[e], lambda o, v: v))
    assert_same(x.scatter(1, tp.tensor(perm[:, :2]), -1.0), scattered(perm[:, :2], lambda *e: -1.0, lambda o, v: v))
    want = scattered(idx, lambda *e: a[e], lambda o, v: o + v)
    assert_same(tp.scatter_add(x, 1, tp.tensor(idx), x), want)
    assert_same(tp.scatter(x, 1, tp.tensor(idx), x, reduce="add"), want)
    want = scattered(idx, lambda *e: a[e], lambda o, v: o * v)
    assert_same(tp.scatter(x, 1, tp.tensor(idx), x, reduce="multiply"), want)


def test_index_add_alpha_and_inplace():
    a = np.zeros((4, 3), dtype=np.float32)
    src = np.arange(9, dtype=np.float32).reshape(3, 3)
    x = tp.tensor(a)
    idx = np.array([1, 3, 1])
    want = a.copy()
    np.add.at(want, idx, 2 * src)
    assert_same(tp.index_add(x, 0, tp.tensor(idx), tp.tensor(src), alpha=2), want)
    before = x._version
    x.index_add_(0, tp.tensor(idx), tp.tensor(src), alpha=2)
    assert_same(x, want)
    assert x._version == before + 1
    y = tp.zeros(3, 4, dtype=tp.float16)
    y.index_add_(1, tp.tensor([0, 0]), tp.ones(3, 2, dtype=tp.float16))
    assert_same(y, np.array([[2, 0, 0, 0]] * 3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_ops_every_dtype(dtype):
    a = np.arange(12).reshape(3, 4) % 4
    x = make(a, dtype)
    want = as_dtype(a, dtype)
    i = tp.tensor([2, 0])
    assert_same(tp.index_select(x, 1, i), want[:, [2, 0]])
    assert_same(tp.gather(x, 0, tp.tensor([[2, 1, 0, 0]])), np.take_along_axis(want, np.array([[2, 1, 0, 0]]), 0))
    s = tp.scatter(x, 1, tp.tensor([[3], [2], [1]]), make(np.ones((3, 1)), dtype))
    w = want.copy()
    w[[0, 1, 2], [3, 2, 1]] = 1
    assert_same(s, w)
    m = tp.tensor(a > 1)
    assert_same(tp.masked_fill(x, m, 0 if dtype != tp.bool else False), np.where(a > 1, 0, want))
    assert_same(tp.masked_select(x, m), want[a > 1])
    assert_same(tp.nonzero(x), np.argwhere(want))
    if dtype != tp.bool:
        sa = tp.scatter_add(x, 0, tp.tensor([[0, 0, 0, 0]]), x[:1])
        w = want.copy()
        w[0] = w[0] * 2
        assert_same(sa, w)


def test_masked_fill_forms():
    x = tp.tensor([[1.0, -2.0], [3.0, -4.0]])
    m = tp.tensor([[True, False], [False, True]])
    assert_same(x.masked_fill(m, 0.5), [[0.5, -2], [3, 0.5]])
    assert_same(x.masked_fill(m, tp.tensor(7.0)), [[7, -2], [3, 7]])
    assert_same(x.masked_fill(tp.tensor([True, False]), -1), [[-1, -2], [-1, -4]])   # mask broadcasts
    assert_same(tp.masked_fill(tp.tensor([1.0, 2.0]), tp.tensor([[True], [False]]), 0.0), [[0, 0], [1, 2]])
    y = x.clone()
    before = y._version
    y.masked_fill_(m, float("nan"))
    assert np.isnan(y.numpy()[0, 0]) and y._version == before + 1
    with pytest.raises(TypeError, match=r"masked_fill.*bool"):
        x.masked_fill(tp.tensor([1, 0]), 0.0)
    with pytest.raises(ValueError, match=r"masked_fill.*0-dimensional"):
        x.masked_fill(m, tp.tensor([1.0]))
    with pytest.raises(ValueError, match=r"masked_fill_"):
        tp.zeros(2).masked_fill_(m, 1.0)


def test_nonzero_where_forms():
    a = np.array([[0.0, -0.0, 1.0], [np.nan, 0.0, -2.0]], dtype=np.float32)
    x = tp.tensor(a)
    np.testing.assert_array_equal(tp.nonzero(x).numpy(), np.argwhere(a))
    got = tp.nonzero(x, as_tuple=True)
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, np.nonzero(a)):
        np.testing.assert_array_equal(g.numpy(), w)
    for g, w in zip(x.nonzero(as_tuple=True), np.nonzero(a)):
        np.testing.assert_array_equal(g.numpy(), w)
    for g, w in zip(tp.where(x != 0), np.where(a != 0)):
        np.testing.assert_array_equal(g.numpy(), w)
    assert tp.nonzero(tp.tensor(3.0)).shape == (1, 0)
    assert [t.numpy().tolist() for t in tp.nonzero(tp.tensor(3.0), as_tuple=True)] == [[0]]
    assert tp.nonzero(tp.zeros(0, 3)).shape == (0, 2)
    assert tp.nonzero(tp.tensor([1.0]).to(tp.bfloat16) * 0 - 0.0).shape == (0, 1)


def test_embedding_and_padding_gradient():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((5, 3))
    idx = np.array([[0, 4, 2], [2, 2, 1]])
    out = tp.embedding(tp.tensor(idx), tp.tensor(w))
    assert_same(out, w[idx])
    grads_match(lambda t: tp.embedding(tp.tensor(idx), t), [w])
    wt = tp.tensor(w, requires_grad=True)
    tp.embedding(tp.tensor(idx), wt, padding_idx=2).sum().backward()
    g = wt.grad.numpy()
    np.testing.assert_array_equal(g[2], 0)
    np.testing.assert_array_equal(g[:, 0], [1, 1, 0, 0, 1])
    wt.grad = None
    tp.embedding(tp.tensor(idx), wt, padding_idx=-3).sum().backward()
    np.testing.assert_array_equal(wt.grad.numpy()[2], 0)
    with pytest.raises(IndexError, match=r"embedding.*index 5 .*size 5"):
        tp.embedding(tp.tensor([5]), wt)
    with pytest.raises(ValueError, match=r"embedding.*2-D"):
        tp.embedding(tp.tensor([0]), tp.zeros(5))
    with pytest.raises(TypeError, match=r"embedding.*integer"):
        tp.embedding(tp.tensor([0.0]), wt)
    assert tp.embedding(tp.tensor([1, 3]).to(tp.int32), tp.tensor(w).to(tp.bfloat16)).dtype == tp.bfloat16


def test_embedding_matches_torch():
    torch = pytest.importorskip("torch")
    w = np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32)
    idx = np.array([[1, 5, 0], [5, 5, 3]])
    wt = tp.tensor(w, requires_grad=True)
    tw = torch.tensor(w, requires_grad=True)
    g = np.random.default_rng(6).standard_normal((2, 3, 4)).astype(np.float32)
    (tp.embedding(tp.tensor(idx), wt, padding_idx=5) * tp.tensor(g)).sum().backward()
    (torch.nn.functional.embedding(torch.tensor(idx), tw, padding_idx=5) * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(wt.grad.numpy(), tw.grad.numpy(), rtol=1e-6)


def test_one_hot():
    idx = np.array([[0, 3], [2, 1]])
    r = tp.one_hot(tp.tensor(idx))
    assert r.dtype == tp.int64
    np.testing.assert_array_equal(r.numpy(), np.eye(4, dtype=np.int64)[idx])
    np.testing.assert_array_equal(tp.one_hot(tp.tensor(idx).to(tp.int32), 6).numpy(), np.eye(6, dtype=np.int64)[idx])
    assert tp.one_hot(tp.zeros(0, dtype=tp.int64), 3).shape == (0, 3)
    with pytest.raises(ValueError, match=r"one_hot.*smaller than num_classes 3"):
        tp.one_hot(tp.tensor([3]), 3)
    with pytest.raises(ValueError, match=r"one_hot.*non-negative"):
        tp.one_hot(tp.tensor([-1]))
    with pytest.raises(ValueError, match=r"one_hot.*empty"):
        tp.one_hot(tp.zeros(0, dtype=tp.int64))
    with pytest.raises(TypeError, match="one_hot"):
        tp.one_hot(tp.tensor([1.0]))


def test_index_op_errors_name_op_index_and_size():
    x = tp.zeros(3, 4)
    with pytest.raises(IndexError, match=r"index_select: index 4 is out of bounds for dimension 1 with size 4"):
        tp.index_select(x, 1, tp.tensor([0, 4]))
    with pytest.raises(IndexError, match=r"index_select: index -1"):
        tp.index_select(x, 0, tp.tensor([-1]))
    with pytest.raises(IndexError, match=r"gather: index 3 is out of bounds for dimension 0 with size 3"):
        tp.gather(x, 0, tp.tensor([[3]]))
    with pytest.raises(IndexError, match=r"scatter.*index 9"):
        tp.scatter(x, 1, tp.tensor([[9]]), 1.0)
    with pytest.raises(IndexError, match=r"scatter_add.*index -2"):
        tp.scatter_add(x, 1, tp.tensor([[-2]]), x)
    with pytest.raises(IndexError, match=r"index_add.*index 7"):
        tp.index_add(x, 0, tp.tensor([7]), tp.ones(1, 4))
    with pytest.raises(ValueError, match=r"gather.*dimensions"):
        tp.gather(x, 0, tp.tensor([0]))
    with pytest.raises(ValueError, match=r"index_add.*source"):
        tp.index_add(x, 0, tp.tensor([0]), tp.ones(2, 4))
    with pytest.raises(ValueError, match=r"scatter.*reduce"):
        tp.scatter(x, 0, tp.tensor([[0]]), x, reduce="max")
    with pytest.raises(TypeError, match=r"index_select.*integer"):
        tp.index_select(x, 0, tp.tensor([0.0]))


@pytest.mark.parametrize("fn,shapes", [
    (lambda t: tp.index_select(t, 1, tp.tensor([2, 0, 2])), [(2, 3)]),
    (lambda t: tp.gather(t, 1, tp.tensor([[0, 0, 2], [1, 2, 1]])), [(2, 3)]),
    (lambda t, s: tp.scatter(t, 1, tp.tensor([[2, 0], [1, 2]]), s), [(2, 3), (2, 3)]),
    (lambda t: tp.scatter(t, 0, tp.tensor([[1, 0, 1]]), 0.0), [(2, 3)]),
    (lambda t, s: tp.scatter_add(t, 1, tp.tensor([[2, 2], [0, 1]]), s), [(2, 3), (2, 2)]),
    (lambda t, s: tp.index_add(t, 0, tp.tensor([1, 1, 0]), s, alpha=-1.5), [(2, 3), (3, 3)]),
    (lambda t: tp.masked_fill(t, tp.tensor([True, False, True]), 2.0), [(2, 3)]),
    (lambda t, v: tp.masked_fill(t, tp.tensor([[True], [False]]), v), [(2, 3), ()]),
    (lambda t: tp.masked_select(t, tp.tensor([[True, False, True]])), [(2, 3)]),
    (lambda t, v: tp.index_put(t, [tp.tensor([1, 0, 1])], v, accumulate=True), [(2, 3), (3, 3)]),
    (lambda t, v: tp.index_put(t, [None, tp.tensor([2])], v), [(2, 3), (1,)]),
])
def test_index_op_gradients(fn, shapes):
    rng = np.random.default_rng(7)
    grads_match(fn, [rng.standard_normal(s) for s in shapes])


def test_index_put_forms():
    x = tp.zeros(3, 4)
    x.index_put_((tp.tensor([0, 2]), tp.tensor([1, 3])), tp.tensor([5.0, 6.0]))
    x.index_put_((None, tp.tensor([0])), tp.tensor(1.0), accumulate=True)
    x.index_put_((tp.tensor([0, 0]),), tp.ones(4), accumulate=True)
    want = np.zeros((3, 4))
    want[[0, 2], [1, 3]] = [5, 6]
    want[:, 0] += 1
    want[0] += 2
    assert_same(x, want)
    y = tp.zeros(2, 2, dtype=tp.int8)
    y.index_put_((tp.tensor([1, 1, 1]),), tp.tensor(1).to(tp.int8), accumulate=True)
    assert_same(y, [[0, 0], [3, 3]])


def test_setitem_value_layouts():
    # Values broadcast along some index dims, index shapes with size-1 dims,
    # values that alias self, and a transposed destination.
    a = np.arange(20.0).reshape(4, 5)
    cases = [
        ((np.array([[0], [2]]), np.array([[1, 3, 4]])), np.array([[1.0], [2.0]])),
        ((np.array([[[0]], [[2]]]), np.array([[[1, 3]]])), np.array([7.0, 8.0])),
        ((slice(None), np.array([[0, 1], [3, 4]])), np.arange(16.0).reshape(4, 2, 2)),
        ((np.array([1, 3]), slice(None)), np.arange(5.0)[None, :]),
    ]
    for idx, value in cases:
        want = a.copy()
        want[idx] = value
        x = tp.tensor(a)
        x[tuple(tp.tensor(i) if isinstance(i, np.ndarray) else i for i in idx)] = tp.tensor(value)
        assert_same(x, want)
    x = tp.tensor(a)
    x[[0, 1]] = x[2:4]           # the value aliases self: read before written
    want = a.copy()
    want[[0, 1]] = a[2:4]
    assert_same(x, want)
    x = tp.tensor(a)
    x.t()[[0, 2], 1:3] = tp.tensor([[-1.0, -2.0], [-3.0, -4.0]])
    want = a.copy()
    want.T[[0, 2], 1:3] = [[-1, -2], [-3, -4]]
    assert_same(x, want)
    assert_same(tp.tensor(a).t()[[4, 0]][:, [1, 1]], a.T[[4, 0]][:, [1, 1]])


def test_index_fill_copy_take_along_dim():
    a = np.arange(24.0).reshape(2, 3, 4)
    x = tp.tensor(a)
    want = a.copy()
    want[:, [0, 2]] = -1
    assert_same(x.index_fill(1, tp.tensor([0, 2]), -1.0), want)
    src = np.arange(16.0).reshape(2, 2, 4)
    want = a.copy()
    want[:, [2, 0]] = src
    assert_same(x.index_copy(1, tp.tensor([2, 0]), tp.tensor(src)), want)
    ii = np.array([[[0], [2], [1]]])
    assert_same(tp.take_along_dim(x, tp.tensor(ii), 2), np.take_along_axis(a, np.broadcast_to(ii, (2, 3, 1)), 2))
    assert_same(tp.take_along_dim(x, tp.tensor([5, 0])), a.reshape(-1)[[5, 0]])
    grads_match(lambda t: t.index_fill(0, tp.tensor([1]), 0.0), [a[:, 0]])
    grads_match(lambda t, s: t.index_copy(0, tp.tensor([2, 0]), s), [a[0], src[0]])


def random_index(rng, shape, torch):
    """A random index tuple mixing ints, slices, None, Ellipsis, int lists/tensors and bool masks,
    returned for TensorPlay and for PyTorch."""
    items_tp, items_t, dim, used_ellipsis = [], [], 0, False
    while dim < len(shape):
        kind = rng.choice(["int", "slice", "none", "ellipsis", "list", "tensor", "mask", "stop"],
                          p=[.15, .2, .05, .05, .15, .2, .1, .1])
        if kind == "stop":
            break
        n = shape[dim]
        if kind == "int" and n > 0:
            v = int(rng.integers(-n, n))
            items_tp.append(v), items_t.append(v)
            dim += 1
        elif kind == "slice":
            s = slice(int(rng.integers(-n - 1, n + 1)), int(rng.integers(-n - 1, n + 2)), int(rng.integers(1, 3)))
            items_tp.append(s), items_t.append(s)
            dim += 1
        elif kind == "none":
            items_tp.append(None), items_t.append(None)
        elif kind == "ellipsis" and not used_ellipsis:
            used_ellipsis = True
            items_tp.append(...), items_t.append(...)
            dim = len(shape)  # conservatively: the rest is covered
        elif kind in ("list", "tensor") and n > 0:
            ishape = [(2,), (3,), (2, 1), (1, 2), ()][int(rng.integers(0, 5))]
            v = rng.integers(-n, n, size=ishape)
            if kind == "list" and v.ndim == 1:
                items_tp.append(v.tolist()), items_t.append(v.tolist())
            else:
                items_tp.append(tp.tensor(v)), items_t.append(torch.tensor(v))
            dim += 1
        elif kind == "mask" and n > 0:
            m = rng.random(n) > 0.5
            items_tp.append(tp.tensor(m)), items_t.append(torch.tensor(m))
            dim += 1
    return tuple(items_tp), tuple(items_t)


def test_random_indices_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(400):
        shape = tuple(int(s) for s in rng.integers(1, 5, size=int(rng.integers(1, 5))))
        a = rng.standard_normal(shape).astype(np.float32)
        itp, it = random_index(rng, shape, torch)
        try:
            want = torch.tensor(a)[it]
        except (IndexError, RuntimeError, ValueError):
            with pytest.raises((IndexError, ValueError, RuntimeError)):
                tp.tensor(a)[itp]
            continue
        got = tp.tensor(a)[itp]
        assert got.shape == tuple(want.shape), (shape, it)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        # the same index as a destination
        x, t = tp.tensor(a), torch.tensor(a)
        v = rng.standard_normal(tuple(want.shape)).astype(np.float32)
        x[itp] = tp.tensor(v)
        t[it] = torch.tensor(v)
        if not any(isinstance(i, (list, torch.Tensor)) for i in it):  # no repeated positions: deterministic
            np.testing.assert_array_equal(x.numpy(), t.numpy())
        checked += 1
    assert checked > 150


def test_scatter_reduce_sum_vs_numpy():
    a = np.arange(15.0).reshape(3, 5)
    src = np.arange(9.0).reshape(3, 3) - 4
    idx = np.array([[0, 0, 4], [1, 2, 1], [3, 3, 3]])
    want = a.copy()
    for i, j in np.ndindex(idx.shape):
        want[i, idx[i, j]] += src[i, j]
    assert_same(tp.scatter_reduce(tp.tensor(a), 1, tp.tensor(idx), tp.tensor(src), "sum"), want)
    assert_same(tp.tensor(a).scatter_reduce(1, tp.tensor(idx), tp.tensor(src), "sum"), want)
    with pytest.raises(ValueError, match=r"scatter_reduce.*reduce"):
        tp.scatter_reduce(tp.tensor(a), 1, tp.tensor(idx), tp.tensor(src), "max")


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_torch(reduce, include_self):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for dt in [np.float64, np.float32, np.int64]:
        a = (rng.standard_normal((3, 5)) * 4).astype(dt)
        src = (rng.standard_normal((3, 4)) * 4).astype(dt)
        idx = rng.integers(0, 5, (3, 3))
        got = tp.scatter_reduce(tp.tensor(a), 1, tp.tensor(idx), tp.tensor(src), reduce, include_self=include_self)
        want = torch.scatter_reduce(torch.tensor(a), 1, torch.tensor(idx), torch.tensor(src), reduce,
                                    include_self=include_self)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    if reduce == "prod":
        return
    a, src, idx = rng.standard_normal((3, 5)), rng.standard_normal((3, 3)), rng.integers(0, 5, (3, 3))
    src[0, 1], idx[0, 1] = src[0, 0], idx[0, 0]  # a tie for amax/amin
    w = rng.standard_normal((3, 5))
    x, s = tp.tensor(a, requires_grad=True), tp.tensor(src, requires_grad=True)
    tx, ts = torch.tensor(a, requires_grad=True), torch.tensor(src, requires_grad=True)
    (tp.scatter_reduce(x, 1, tp.tensor(idx), s, reduce, include_self=include_self) * tp.tensor(w)).sum().backward()
    (torch.scatter_reduce(tx, 1, torch.tensor(idx), ts, reduce, include_self=include_self) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-6, atol=1e-12)


def test_advanced_indexing_inside_compile():
    # While tracing, indices with whole dims are rewritten to leading indices on a permuted view.
    rng = np.random.default_rng(8)
    a = rng.standard_normal((3, 4, 5))
    x = tp.tensor(a)
    i, j = tp.tensor([0, 2]), tp.tensor([[1], [3]])
    cases = [lambda t: t[:, i] * 1, lambda t: t[i, :, i] + 1, lambda t: t[:, i, j] * 2, lambda t: t[..., i],
             lambda t: t.index_fill(1, i, 0.0) + 1, lambda t: t.index_copy(2, i, t[:, :, :2]) * 1,
             lambda t: t[:, None, i], lambda t: tp.index_put(t, [None, i], t[:, :2] * 2, accumulate=True)]
    for f in cases:
        want = f(x)
        got = tp.compile(f)(x)
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy())
    w = tp.tensor(a, requires_grad=True)
    tp.compile(lambda t: (t[:, i, j] * 3).sum())(w).backward()
    want = np.zeros_like(a)
    np.add.at(want, (slice(None), np.array([0, 2])[None, :], np.array([[1], [3]])), 3.0)
    np.testing.assert_allclose(w.grad.numpy(), want)


def test_masked_select_of_two_0d_operands_is_1d():
    # Found by the OpInfo oracle: a 0-d mask with a 0-d input raised IndexError.
    assert tp.masked_select(tp.tensor(3.0), tp.tensor(True)).tolist() == [3.0]
    assert tp.masked_select(tp.tensor(3.0), tp.tensor(False)).shape == (0,)
    assert tp.masked_select(tp.arange(3.0), tp.tensor(True)).tolist() == [0.0, 1.0, 2.0]


def test_an_empty_index_of_another_rank_gathers_and_scatters_nothing():
    # As PyTorch: the shape check is skipped for an empty index (OpInfo sample).
    x = tp.randn(5, requires_grad=True)
    idx = tp.zeros(2, 0, dtype=tp.int64)
    y = tp.gather(x, 0, idx)
    assert y.shape == (2, 0)
    y.sum().backward()
    assert x.grad.abs().sum().item() == 0
    assert tp.zeros(5).scatter_add(0, idx, tp.ones(2, 0)).abs().sum().item() == 0
    with pytest.raises(ValueError, match="same number of dimensions"):
        tp.gather(tp.randn(5), 0, tp.zeros(2, 1, dtype=tp.int64))
