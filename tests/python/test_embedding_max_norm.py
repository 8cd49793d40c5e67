"""nn.Embedding / F.embedding with max_norm, norm_type and scale_grad_by_freq against torch:
the in-place renormalization of the looked-up rows, the outputs, the gradients, from_pretrained,
and the same inside tp.compile."""
import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F

W0 = (np.random.RandomState(0).randn(7, 3) * 2).astype(np.float32)
IDX = np.array([[0, 2, 2], [5, 2, 1]])
G = np.random.RandomState(1).randn(2, 3, 3).astype(np.float32)


def close(a, b, tol=2e-7):
    a = a.detach().numpy() if hasattr(a, "detach") else a
    b = b.detach().numpy() if hasattr(b, "detach") else b
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("freq", [False, True])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_module_matches_torch(norm_type, freq, padding_idx):
    a = tp.nn.Embedding.from_pretrained(tp.tensor(W0), freeze=False, max_norm=1.5, norm_type=norm_type,
                                        scale_grad_by_freq=freq, padding_idx=padding_idx)
    b = torch.nn.Embedding.from_pretrained(torch.tensor(W0), freeze=False, max_norm=1.5, norm_type=norm_type,
                                           scale_grad_by_freq=freq, padding_idx=padding_idx)
    oa, ob = a(tp.tensor(IDX)), b(torch.tensor(IDX))
    close(oa, ob)
    close(a.weight, b.weight)  # looked-up rows renormalized in place, the others untouched
    (oa * tp.tensor(G)).sum().backward()
    (ob * torch.tensor(G)).sum().backward()
    close(a.weight.grad, b.weight.grad)
    assert a.weight._version == b.weight._version == 1
    assert repr(a) == repr(b)


def test_rows_not_looked_up_are_untouched_and_small_rows_exact():
    w = tp.tensor(W0)
    F.embedding(tp.tensor([0, 6]), w, max_norm=1.0)
    norms = np.linalg.norm(W0, axis=1)
    got = w.numpy()
    for r in range(7):
        if r in (0, 6) and norms[r] > 1.0:
            assert abs(np.linalg.norm(got[r]) - 1.0) < 1e-5
        else:
            np.testing.assert_array_equal(got[r], W0[r])
    w2 = tp.tensor(W0 * 0.01)
    F.embedding(tp.tensor([0, 1]), w2, max_norm=1.0)
    np.testing.assert_array_equal(w2.numpy(), W0 * 0.01)


def test_functional_matches_torch_and_float64():
    for dt, tdt in ((tp.float32, torch.float32), (tp.float64, torch.float64)):
        wa = tp.tensor(W0).to(dt).requires_grad_()
        wb = torch.tensor(W0).to(tdt).requires_grad_()
        oa = F.embedding(tp.tensor(IDX), wa, max_norm=2.0)
        ob = torch.nn.functional.embedding(torch.tensor(IDX), wb, max_norm=2.0)
        close(oa, ob, 1e-6)
        close(wa, wb, 1e-6)
        oa.sum().backward()
        ob.sum().backward()
        close(wa.grad, wb.grad)


def test_bfloat16_weight():
    wa = tp.tensor(W0).to(tp.bfloat16)
    wb = torch.tensor(W0).to(torch.bfloat16)
    F.embedding(tp.tensor(IDX), wa, max_norm=1.0)
    torch.nn.functional.embedding(torch.tensor(IDX), wb, max_norm=1.0)
    np.testing.assert_allclose(wa.to(tp.float32).numpy(), wb.float().numpy(), rtol=1e-2, atol=1e-2)


def test_from_pretrained_frozen_with_max_norm():
    a = tp.nn.Embedding.from_pretrained(tp.tensor(W0), max_norm=1.0)
    b = torch.nn.Embedding.from_pretrained(torch.tensor(W0), max_norm=1.0)
    close(a(tp.tensor([3, 4])), b(torch.tensor([3, 4])))
    close(a.weight, b.weight)
    assert not a.weight.requires_grad


def test_scale_grad_by_freq_alone():
    a = tp.nn.Embedding.from_pretrained(tp.tensor(W0), freeze=False, scale_grad_by_freq=True)
    b = torch.nn.Embedding.from_pretrained(torch.tensor(W0), freeze=False, scale_grad_by_freq=True)
    idx = np.array([1, 1, 1, 4, 1])
    a(tp.tensor(idx)).sum().backward()
    b(torch.tensor(idx)).sum().backward()
    close(a.weight.grad, b.weight.grad)
    np.testing.assert_allclose(a.weight.grad.numpy()[1], np.ones(3))


def test_scale_grad_by_freq_gradcheck_like():
    """The gradient is linear in the output gradient: compare with the explicit mean per row."""
    w = tp.tensor(W0.astype(np.float64), requires_grad=True)
    idx = tp.tensor([[2, 2], [2, 0]])
    g = tp.tensor(np.random.RandomState(3).randn(2, 2, 3))
    (F.embedding(idx, w, scale_grad_by_freq=True) * g).sum().backward()
    gn = g.numpy()
    expect = np.zeros_like(W0, dtype=np.float64)
    expect[2] = (gn[0, 0] + gn[0, 1] + gn[1, 0]) / 3
    expect[0] = gn[1, 1]
    np.testing.assert_allclose(w.grad.numpy(), expect, rtol=1e-12)


def test_max_norm_errors_name_embedding():
    w = tp.tensor(W0)
    with pytest.raises(IndexError, match="embedding"):
        F.embedding(tp.tensor([7]), w, max_norm=1.0)
    with pytest.raises(TypeError, match="embedding: with max_norm, the indices"):
        F.embedding(tp.tensor([1.0]), w, max_norm=1.0)
    with pytest.raises(NotImplementedError, match="sparse"):
        tp.nn.Embedding(3, 2, sparse=True)


def test_max_norm_inside_compile_matches_eager():
    def make():
        return tp.nn.Embedding.from_pretrained(tp.tensor(W0), freeze=False, max_norm=1.0, scale_grad_by_freq=True)

    eager, comp = make(), make()
    f = tp.compile(lambda i: (comp(i) * 2).sum())
    for idx in ([1, 2, 2], [0, 3], [1, 2, 2]):
        ra = (eager(tp.tensor(idx)) * 2).sum()
        rb = f(tp.tensor(idx))
        close(ra, rb, 1e-6)
        close(eager.weight, comp.weight, 1e-7)
        ra.backward()
        rb.backward()
        close(eager.weight.grad, comp.weight.grad, 1e-6)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_max_norm_matches_torch(mode):
    a = tp.nn.EmbeddingBag.from_pretrained(tp.tensor(W0), freeze=False, max_norm=1.2, mode=mode)
    b = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(W0), freeze=False, max_norm=1.2, mode=mode)
    oa, ob = a(tp.tensor(IDX)), b(torch.tensor(IDX))
    close(oa, ob, 1e-6)
    close(a.weight, b.weight)
    oa.sum().backward()
    ob.sum().backward()
    close(a.weight.grad, b.weight.grad, 1e-6)
