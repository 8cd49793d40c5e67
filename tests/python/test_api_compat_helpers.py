"""Smaller PyTorch helpers ported code and test suites use: testing.make_tensor /
assert_allclose, autograd.Variable / is_tensor_like, utils.data.DistributedSampler,
linalg.householder_product (and orgqr)."""
import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.testing import make_tensor
from tensorplay.utils.data import DataLoader, DistributedSampler, TensorDataset


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.float16, tp.int64, tp.int32, tp.uint8, tp.bool])
def test_make_tensor_ranges_and_flags(dtype):
    t = make_tensor(40, 30, dtype=dtype)
    assert tuple(t.shape) == (40, 30) and t.dtype == dtype and t.is_contiguous()
    a = t.to(tp.float64).numpy()
    if dtype == tp.bool:
        assert set(np.unique(a)) == {0.0, 1.0}
    elif dtype == tp.uint8:
        assert a.min() >= 0 and a.max() <= 9
    elif dtype in (tp.int64, tp.int32):
        assert a.min() >= -9 and a.max() <= 9 and a.min() < 0
    else:
        assert a.min() >= -9 and a.max() <= 9 and a.std() > 3
    n = make_tensor((5, 6), dtype=dtype, noncontiguous=True)
    assert tuple(n.shape) == (5, 6) and not n.is_contiguous()
    z = make_tensor(200, dtype=dtype, exclude_zero=True, low=-1, high=1)
    assert (z != 0).all()


def test_make_tensor_low_high_grad_and_errors():
    t = make_tensor(1000, dtype=tp.float64, low=2.0, high=3.0, requires_grad=True)
    assert t.requires_grad and float(t.min()) >= 2.0 and float(t.max()) < 3.0
    assert make_tensor(dtype=tp.float32).dim() == 0
    i = make_tensor(500, dtype=tp.int64, low=5, high=7)
    assert set(np.unique(i.numpy())) <= {5, 6}
    with pytest.raises(ValueError, match="requires_grad"):
        make_tensor(3, dtype=tp.int64, requires_grad=True)
    with pytest.raises(ValueError, match="low"):
        make_tensor(3, dtype=tp.float32, low=2, high=1)


def test_assert_allclose_is_deprecated_but_works():
    with pytest.warns(FutureWarning):
        tp.testing.assert_allclose(tp.tensor([1.0, float("nan")]), tp.tensor([1.0, float("nan")], dtype=tp.float64))
    with pytest.warns(FutureWarning), pytest.raises(AssertionError):
        tp.testing.assert_allclose(tp.tensor([1.0]), tp.tensor([1.5]))


def test_variable_like_torch():
    x = tp.ones(2)
    v = tp.autograd.Variable(x)
    assert v is not x and v.data_ptr() == x.data_ptr() and not v.requires_grad
    w = tp.autograd.Variable(x * 2, requires_grad=True)
    assert w.requires_grad and w.grad_fn is None and w.is_leaf
    (w * 3).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])
    assert isinstance(x, tp.autograd.Variable) and not isinstance(3, tp.autograd.Variable)
    assert tuple(tp.autograd.Variable().shape) == (0,)
    with pytest.raises(TypeError):
        tp.autograd.Variable([1, 2])
    assert tp.autograd.is_tensor_like(x) and not tp.autograd.is_tensor_like(np.ones(2))


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (12, 4, False), (2, 5, False)])
def test_distributed_sampler_matches_torch_without_shuffle(n, replicas, drop_last):
    data = list(range(n))
    for rank in range(replicas):
        ours = DistributedSampler(data, replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = torch.utils.data.DistributedSampler(data, replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_distributed_sampler_shuffles_a_partition_per_epoch():
    data = list(range(11))
    shares = [DistributedSampler(data, 3, r, seed=7) for r in range(3)]
    first = [list(s) for s in shares]
    assert set(sum(first, [])) == set(data) and all(len(f) == 4 for f in first)
    assert [list(s) for s in shares] == first  # same epoch: same order
    for s in shares:
        s.set_epoch(1)
    second = [list(s) for s in shares]
    assert second != first and set(sum(second, [])) == set(data)
    ds = TensorDataset(tp.arange(11.0))
    loader = DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, 2, 1, shuffle=False))
    assert [b[0].tolist() for b in loader] == [[1.0, 3.0], [5.0, 7.0], [9.0, 0.0]]


def test_distributed_sampler_needs_replicas(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(ValueError, match="num_replicas"):
        DistributedSampler(list(range(4)))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert list(DistributedSampler(list(range(4)), shuffle=False)) == [1, 3]
    with pytest.raises(ValueError, match="rank"):
        DistributedSampler(list(range(4)), 2, 2)


@pytest.mark.parametrize("shape,k", [((5, 3), 3), ((2, 6, 4), 2), ((4, 4), 0)])
def test_householder_product_matches_torch_with_gradients(shape, k):
    rng = np.random.default_rng(2)
    A = rng.standard_normal(shape)
    tau = rng.standard_normal(shape[:-2] + (k,))
    a, t = tp.tensor(A, requires_grad=True), tp.tensor(tau, requires_grad=True)
    at, tt = torch.tensor(A, requires_grad=True), torch.tensor(tau, requires_grad=True)
    q, qt = tp.linalg.householder_product(a, t), torch.linalg.householder_product(at, tt)
    np.testing.assert_allclose(q.detach().numpy(), qt.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tp.orgqr(tp.tensor(A), tp.tensor(tau)).numpy(), qt.detach().numpy(), rtol=1e-12,
                               atol=1e-12)
    if k == 0:
        return  # the identity: nothing to differentiate
    g = rng.standard_normal(tuple(qt.shape))
    (q * tp.tensor(g)).sum().backward()
    (qt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_householder_product_of_geqrf_is_qr_q_and_errors():
    A = np.random.default_rng(4).standard_normal((6, 4))
    a, tau = torch.geqrf(torch.tensor(A))
    q = tp.linalg.householder_product(tp.tensor(a.numpy()), tp.tensor(tau.numpy()))
    np.testing.assert_allclose(np.abs(q.numpy()), np.abs(np.linalg.qr(A)[0]), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="rows"):
        tp.linalg.householder_product(tp.ones(2, 3, dtype=tp.float64), tp.ones(1, dtype=tp.float64))
    with pytest.raises(ValueError, match="tau"):
        tp.linalg.householder_product(tp.ones(4, 3, dtype=tp.float64), tp.ones(4, dtype=tp.float64))
