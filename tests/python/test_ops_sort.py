"""Ordering operators: sort/argsort/msort, topk, kthvalue, median, unique,
count_nonzero, repeat_interleave, searchsorted/bucketize, randperm. NumPy is
the oracle for values, PyTorch (when installed) for index conventions."""
import numpy as np
import pytest

import tensorplay as tp
from tensorplay._sort_api import unique as tp_unique
from fd_check import check_gradients

DTYPES = ["float32", "float64", "int64", "int32", "bool", "float16"]
nan = float("nan")


def _data(dtype, shape=(3, 5), seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.permutation(np.arange(int(np.prod(shape)))).reshape(shape).astype(dtype) - 4


def _np(t):
    return np.asarray(t.contiguous().numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("desc", [False, True])
def test_sort_matches_numpy(dtype, dim, desc):
    a = _data(dtype)
    v, i = tp.sort(tp.tensor(a), dim=dim, descending=desc)
    order = np.argsort(-a.astype(np.float64) if desc else a, axis=dim, kind="stable")
    np.testing.assert_array_equal(_np(i), order)
    np.testing.assert_array_equal(_np(v), np.take_along_axis(a, order, dim))
    assert str(v.dtype).endswith(dtype)
    np.testing.assert_array_equal(_np(tp.argsort(tp.tensor(a), dim=dim, descending=desc)), order)


def test_sort_nan_last_and_stable_ties_vs_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[3, nan, 1, 1, -np.inf, nan, 2, 1], [0, 0, 0, nan, 5, -0.0, np.inf, 5]])
    for desc in (False, True):
        v, i = tp.tensor(a).sort(dim=1, descending=desc, stable=True)
        tv, ti = torch.sort(torch.tensor(a), dim=1, descending=desc, stable=True)
        np.testing.assert_array_equal(_np(v), tv.numpy())
        np.testing.assert_array_equal(_np(i), ti.numpy())


def test_sort_noncontiguous_zero_size_and_scalar():
    a = _data("float64", (4, 6))
    t = tp.tensor(a).transpose(0, 1)[::2]
    v, i = tp.sort(t, dim=1)
    np.testing.assert_array_equal(_np(v), np.sort(a.T[::2], axis=1))
    v, i = tp.sort(tp.tensor(np.zeros((0, 3))), dim=0)
    assert tuple(v.shape) == (0, 3) and tuple(i.shape) == (0, 3)
    v, i = tp.sort(tp.tensor(2.5))
    assert float(v) == 2.5 and int(i) == 0
    np.testing.assert_array_equal(_np(tp.msort(tp.tensor(a))), np.sort(a, axis=0))


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "float16"])
def test_topk(dtype, largest):
    a = _data(dtype, (4, 7))
    v, i = tp.topk(tp.tensor(a), 3, dim=1, largest=largest)
    order = np.argsort(-a.astype(np.float64) if largest else a, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(_np(i), order)
    np.testing.assert_array_equal(_np(v), np.take_along_axis(a, order, 1))
    v, i = tp.tensor(a).topk(0, dim=0)
    assert tuple(v.shape) == (0, 7)


def test_topk_vs_torch_with_nan():
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, nan, 3.0, -1.0, 7.0], [2.0, 2.5, -np.inf, 0.5, 9.0]])
    for largest in (True, False):
        v, i = tp.topk(tp.tensor(a), 2, largest=largest)
        tv, ti = torch.topk(torch.tensor(a), 2, largest=largest)
        np.testing.assert_array_equal(_np(v), tv.numpy())
        np.testing.assert_array_equal(_np(i), ti.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "float16"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue_and_median_dim(dtype, keepdim):
    a = _data(dtype, (3, 6))
    v, i = tp.kthvalue(tp.tensor(a), 2, dim=1, keepdim=keepdim)
    s = np.sort(a, axis=1)[:, 1]
    ref_i = np.argsort(a, axis=1, kind="stable")[:, 1]
    if keepdim:
        s, ref_i = s[:, None], ref_i[:, None]
    np.testing.assert_array_equal(_np(v), s)
    np.testing.assert_array_equal(_np(i), ref_i)
    v, i = tp.tensor(a).median(dim=0, keepdim=keepdim)
    lower = np.sort(a, axis=0)[(a.shape[0] - 1) // 2]
    np.testing.assert_array_equal(np.squeeze(_np(v)), lower)
    np.testing.assert_array_equal(np.squeeze(_np(tp.gather(tp.tensor(a), 0, i if keepdim else i.unsqueeze(0)))), lower)


def test_median_lower_and_nan_vs_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[4.0, 1.0, 3.0, 2.0], [1.0, nan, 0.0, 5.0]])
    assert float(tp.median(tp.tensor(a[0]))) == float(torch.median(torch.tensor(a[0])))
    assert np.isnan(float(tp.tensor(a).median()))
    v, i = tp.median(tp.tensor(a), 1)
    tv, ti = torch.median(torch.tensor(a), 1)
    np.testing.assert_array_equal(_np(v), tv.numpy())
    np.testing.assert_array_equal(_np(i), ti.numpy())
    v, i = tp.kthvalue(tp.tensor(a), 4, 1)
    tv, ti = torch.kthvalue(torch.tensor(a), 4, 1)
    np.testing.assert_array_equal(_np(v), tv.numpy())
    assert tp.median(tp.tensor(np.arange(7.0))).shape == ()


@pytest.mark.parametrize("make", [
    lambda x: tp.sort(x, dim=1)[0],
    lambda x: tp.sort(x, dim=0, descending=True)[0],
    lambda x: tp.topk(x, 2, dim=1)[0],
    lambda x: tp.kthvalue(x, 2, dim=0)[0],
    lambda x: tp.kthvalue(x, 3, dim=1, keepdim=True)[0],
    lambda x: tp.median(x, 1)[0],
    lambda x: tp.median(x),
    lambda x: tp.repeat_interleave(x, 2, dim=1),
    lambda x: tp.repeat_interleave(x, tp.tensor([1, 0, 3]), dim=0),
    lambda x: tp.repeat_interleave(x, 2),
])
def test_gradients(make):
    a = np.random.default_rng(3).permutation(15).reshape(3, 5) * 0.37 + 0.1
    check_gradients(make, a)


def test_unique_flat_and_dim_vs_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[3, 1, 3], [2, 1, 3], [3, 1, 3]])
    out = tp_unique(tp.tensor(a))
    np.testing.assert_array_equal(_np(out), np.unique(a))
    for dim in (None, 0, 1):
        v, inv, cnt = tp_unique(tp.tensor(a), return_inverse=True, return_counts=True, dim=dim)
        tv, tinv, tcnt = torch.unique(torch.tensor(a), return_inverse=True, return_counts=True, dim=dim)
        np.testing.assert_array_equal(_np(v), tv.numpy())
        np.testing.assert_array_equal(_np(inv), tinv.numpy())
        np.testing.assert_array_equal(_np(cnt), tcnt.numpy())
    v, c = tp_unique(tp.tensor([1.0, nan, 1.0, nan]), return_counts=True)
    assert _np(v).shape == (3,) and list(_np(c)) == [2, 1, 1]
    assert tuple(tp_unique(tp.tensor(np.zeros((0,)))).shape) == (0,)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique_dtypes(dtype):
    a = _data(dtype, (4, 5)) % 3 if dtype != "bool" else _data(dtype, (4, 5))
    v, inv = tp_unique(tp.tensor(a).transpose(0, 1), return_inverse=True)
    ref, ref_inv = np.unique(a.T, return_inverse=True)
    np.testing.assert_array_equal(_np(v), ref)
    np.testing.assert_array_equal(_np(inv), ref_inv.reshape(a.T.shape))


def test_count_nonzero():
    a = np.array([[0.0, -0.0, nan, 2.0], [1.0, 0.0, 0.0, 3.0]])
    assert int(tp.count_nonzero(tp.tensor(a))) == np.count_nonzero(a)
    np.testing.assert_array_equal(_np(tp.count_nonzero(tp.tensor(a), dim=1)), np.count_nonzero(a, axis=1))
    np.testing.assert_array_equal(_np(tp.tensor(a).count_nonzero(dim=[0, 1])), np.count_nonzero(a))
    assert str(tp.count_nonzero(tp.tensor([True, False])).dtype).endswith("int64")


def test_repeat_interleave():
    a = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(_np(tp.repeat_interleave(tp.tensor(a), 2)), np.repeat(a, 2))
    np.testing.assert_array_equal(_np(tp.tensor(a).repeat_interleave(2, dim=1)), np.repeat(a, 2, axis=1))
    np.testing.assert_array_equal(_np(tp.repeat_interleave(tp.tensor(a), tp.tensor([2, 0]), dim=0)),
                                  np.repeat(a, [2, 0], axis=0))
    np.testing.assert_array_equal(_np(tp.repeat_interleave(tp.tensor([1, 0, 2]))), [0, 2, 2])
    with pytest.raises(Exception, match="repeat_interleave"):
        tp.repeat_interleave(tp.tensor(a), tp.tensor([1, 2, 3]), dim=0)


def test_searchsorted_and_bucketize():
    seq = np.array([1.0, 2.0, 2.0, 5.0])
    vals = np.array([[0.0, 2.0, 6.0], [1.0, 5.0, 3.0]])
    for right in (False, True):
        side = "right" if right else "left"
        np.testing.assert_array_equal(_np(tp.searchsorted(tp.tensor(seq), tp.tensor(vals), right=right)),
                                      np.searchsorted(seq, vals, side=side))
        np.testing.assert_array_equal(_np(tp.bucketize(tp.tensor(vals), tp.tensor(seq), right=right)),
                                      np.searchsorted(seq, vals, side=side))
    seq2 = np.array([[1, 3, 5], [2, 4, 6]])
    got = _np(tp.searchsorted(tp.tensor(seq2), tp.tensor(np.array([[3, 6], [1, 5]]))))
    np.testing.assert_array_equal(got, [[1, 3], [0, 2]])
    with pytest.raises(Exception, match="searchsorted"):
        tp.searchsorted(tp.tensor(seq2), tp.tensor(np.zeros((3, 2))))


def test_randperm_reproducible_and_permutation():
    tp.manual_seed(7)
    p1 = _np(tp.randperm(1000))
    tp.manual_seed(7)
    p2 = _np(tp.randperm(1000))
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(np.sort(p1), np.arange(1000))
    assert not np.array_equal(p1, np.arange(1000))
    g = tp.Generator()
    g.manual_seed(3)
    q = tp.randperm(50, generator=g, dtype=tp.int32)
    assert str(q.dtype).endswith("int32")
    np.testing.assert_array_equal(np.sort(_np(q)), np.arange(50))
    assert tuple(tp.randperm(0).shape) == (0,)


def test_errors_name_op_and_values():
    x = tp.tensor(np.zeros((2, 3)))
    with pytest.raises(Exception, match=r"topk.*k=4"):
        tp.topk(x, 4)
    with pytest.raises(Exception, match=r"kthvalue.*k=0"):
        tp.kthvalue(x, 0)
    with pytest.raises(Exception, match="sort"):
        tp.sort(x, dim=2)
    with pytest.raises(Exception, match="median"):
        tp.median(tp.tensor(np.zeros((2, 0))), 1)
    with pytest.raises(Exception, match="randperm"):
        tp.randperm(-1)


def test_unique_consecutive_vs_torch():
    torch = pytest.importorskip("torch")
    from tensorplay._sort_api import unique_consecutive
    a = np.array([[1, 1, 2], [1, 1, 2], [3, 1, 2], [1, 1, 2]])
    assert list(_np(unique_consecutive(tp.tensor([1, 1, 2, 2, 1])))) == [1, 2, 1]
    for dim in (None, 0, 1):
        v, inv, cnt = tp.tensor(a).unique_consecutive(return_inverse=True, return_counts=True, dim=dim)
        tv, tinv, tcnt = torch.unique_consecutive(torch.tensor(a), return_inverse=True, return_counts=True, dim=dim)
        np.testing.assert_array_equal(_np(v), tv.numpy())
        np.testing.assert_array_equal(_np(inv), tinv.numpy())
        np.testing.assert_array_equal(_np(cnt), tcnt.numpy())


def test_results_independent_of_thread_count():
    a = np.random.default_rng(5).standard_normal((64, 3000))
    before = tp.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            tp.set_num_threads(n)
            tp.manual_seed(11)
            p = _np(tp.randperm(100000))
            v, i = tp.sort(tp.tensor(a), dim=1)
            results.append((p, _np(i), _np(tp.topk(tp.tensor(a), 5)[1])))
        for x, y in zip(*results):
            np.testing.assert_array_equal(x, y)
    finally:
        tp.set_num_threads(before)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_sorter_matches_torch(right):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(3)
    for seq_shape, val_shape in [((7,), (5,)), ((3, 6), (3, 4))]:
        s = torch.randint(0, 5, seq_shape, generator=g).double()  # ties included
        v = torch.randint(-1, 6, val_shape, generator=g).double()
        so = torch.argsort(s, stable=True)
        want = torch.searchsorted(s, v, sorter=so, right=right)
        got = tp.searchsorted(tp.tensor(s.numpy()), tp.tensor(v.numpy()), sorter=tp.tensor(so.numpy()), right=right)
        assert got.tolist() == want.tolist()
    with pytest.raises(ValueError, match="sorter of shape"):
        tp.searchsorted(tp.tensor([1.0, 2.0]), tp.tensor([1.0]), sorter=tp.tensor([0, 1, 2]))
