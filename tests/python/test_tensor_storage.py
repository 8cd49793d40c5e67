"""Tensor.untyped_storage() / storage() / is_set_to as PyTorch code uses them:
telling which tensors share memory (checkpoint writers de-duplicate tied
weights this way), sizes in bytes and elements, element reads and writes
through the typed storage, and the refusal inside tp.compile."""
import numpy as np
import pytest
import torch

import tensorplay as tp


def test_views_share_their_storage_like_torch():
    x, xt = tp.arange(12.0).reshape(3, 4), torch.arange(12.0).reshape(3, 4)
    for f in (lambda a: a[1], lambda a: a.t(), lambda a: a[:, 1:3], lambda a: a.reshape(12)):
        s, st = f(x).untyped_storage(), f(xt).untyped_storage()
        assert s.data_ptr() == x.untyped_storage().data_ptr()
        assert s.nbytes() == st.nbytes() == 48 and len(s) == 48
    assert x.clone().untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert x[1].untyped_storage() == x.untyped_storage()


def test_tied_weights_are_found_by_storage():
    emb = tp.nn.Embedding(10, 4)
    head = tp.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    ptrs = {}
    for name, p in list(emb.named_parameters(prefix="emb")) + list(head.named_parameters(prefix="head")):
        ptrs.setdefault((p.untyped_storage().data_ptr(), p.untyped_storage().nbytes()), []).append(name)
    assert list(ptrs.values()) == [["emb.weight", "head.weight"]]


def test_bytes_match_numpy():
    for dt, npdt in ((tp.float32, np.float32), (tp.float64, np.float64), (tp.float16, np.float16),
                     (tp.int64, np.int64), (tp.int16, np.int16), (tp.uint8, np.uint8), (tp.bool, np.bool_)):
        a = np.array([1.5, -2.0, 0.0, 7.0]).astype(npdt)
        t = tp.tensor(a)
        assert t.untyped_storage().tolist() == list(a.view(np.uint8))
        assert t.untyped_storage()[1] == int(a.view(np.uint8)[1])
        assert t.untyped_storage().element_size() == 1


def test_typed_storage_reads_and_writes_the_tensor():
    x = tp.arange(6.0).reshape(2, 3)
    s = x[1].storage()  # the whole storage, not only the view's part
    assert s.size() == len(s) == 6 and s.dtype == tp.float32 and s.element_size() == 4 and s.nbytes() == 24
    assert s.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and s[4] == 4.0 and list(s) == s.tolist()
    v = x._version
    s[0] = 9.0
    assert float(x[0, 0]) == 9.0 and x._version > v
    s.fill_(1.0)
    assert float(x.sum()) == 6.0
    assert s.data_ptr() == x.data_ptr() and s.untyped().nbytes() == 24
    assert tp.is_storage(s) and tp.is_storage(s.untyped()) and not tp.is_storage(x)


def test_is_set_to():
    x, xt = tp.zeros(4, 4), torch.zeros(4, 4)
    cases = [(lambda a: a, lambda a: a), (lambda a: a[1], lambda a: a[1]), (lambda a: a[1], lambda a: a[2]),
             (lambda a: a.t(), lambda a: a), (lambda a: a.view(16), lambda a: a.reshape(16))]
    for f, g in cases:
        assert f(x).is_set_to(g(x)) == f(xt).is_set_to(g(xt))
    assert not x.is_set_to(x.clone())
    with pytest.raises(TypeError):
        x.is_set_to(3)


def test_refused_inside_compile():
    f = tp.compile(lambda x: x * x.untyped_storage().nbytes(), fullgraph=True)
    with pytest.raises(tp.compiler.CaptureError, match="untyped_storage"):
        f(tp.ones(3))
    g = tp.compile(lambda x: x + x.storage()[0], fullgraph=True)
    with pytest.raises(tp.compiler.CaptureError, match="storage"):
        g(tp.ones(3))
