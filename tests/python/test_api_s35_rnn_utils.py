"""tp.nn.utils.rnn (padding and packing) and the recurrent layers on PackedSequence inputs and with LSTM
proj_size, against PyTorch: values, gradients, state_dict names."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.utils.rnn as R

torch = pytest.importorskip("torch")
TR = torch.nn.utils.rnn


def _np(t):
    return t.detach().cpu().numpy()


def _pair(lengths, feat=3, seed=0, dtype="float64"):
    rng = np.random.default_rng(seed)
    seqs = [rng.standard_normal((n, feat)).astype(dtype) for n in lengths]
    tps = [tp.tensor(s, requires_grad=True) for s in seqs]
    ths = [torch.tensor(s, requires_grad=True) for s in seqs]
    return tps, ths


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_matches_torch(batch_first, side):
    a, b = _pair([2, 5, 3])
    got = R.pad_sequence(a, batch_first=batch_first, padding_value=-1.5, padding_side=side)
    want = TR.pad_sequence(b, batch_first=batch_first, padding_value=-1.5, padding_side=side)
    np.testing.assert_array_equal(_np(got), _np(want))
    got.sum().backward()
    for x in a:
        np.testing.assert_array_equal(_np(x.grad), np.ones(x.shape))


@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_padded_roundtrip(enforce_sorted, batch_first):
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    a, b = _pair(lengths)
    pa = R.pad_sequence(a, batch_first=batch_first)
    pb = TR.pad_sequence(b, batch_first=batch_first)
    ka = R.pack_padded_sequence(pa, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    kb = TR.pack_padded_sequence(pb, torch.tensor(lengths), batch_first=batch_first, enforce_sorted=enforce_sorted)
    np.testing.assert_array_equal(_np(ka.data), _np(kb.data))
    assert ka.batch_sizes.tolist() == kb.batch_sizes.tolist()
    assert ka.batch_sizes.dtype == tp.int64
    if enforce_sorted:
        assert ka.sorted_indices is None and ka.unsorted_indices is None
    else:
        assert ka.sorted_indices.tolist() == kb.sorted_indices.tolist()
        assert ka.unsorted_indices.tolist() == kb.unsorted_indices.tolist()
    ua, la = R.pad_packed_sequence(ka, batch_first=batch_first, padding_value=7.0, total_length=6)
    ub, lb = TR.pad_packed_sequence(kb, batch_first=batch_first, padding_value=7.0, total_length=6)
    np.testing.assert_array_equal(_np(ua), _np(ub))
    assert la.tolist() == lb.tolist() and la.dtype == tp.int64
    w = np.random.default_rng(1).standard_normal(tuple(ua.shape))
    (ua * tp.tensor(w)).sum().backward()
    (ub * torch.tensor(w)).sum().backward()
    for x, y in zip(a, b):
        np.testing.assert_allclose(_np(x.grad), _np(y.grad), rtol=1e-12)


def test_pack_unpack_unpad_sequence():
    a, b = _pair([2, 4, 1])
    ka = R.pack_sequence(a, enforce_sorted=False)
    kb = TR.pack_sequence(b, enforce_sorted=False)
    np.testing.assert_array_equal(_np(ka.data), _np(kb.data))
    for x, y in zip(R.unpack_sequence(ka), TR.unpack_sequence(kb)):
        np.testing.assert_array_equal(_np(x), _np(y))
    padded = R.pad_sequence(a, batch_first=True)
    for x, y in zip(R.unpad_sequence(padded, tp.tensor([2, 4, 1]), batch_first=True), a):
        np.testing.assert_array_equal(_np(x), _np(y))


def test_packed_sequence_is_a_namedtuple_with_to():
    a, _ = _pair([3, 2])
    k = R.pack_sequence(a)
    data, batch_sizes, si, ui = k
    assert batch_sizes.tolist() == [2, 2, 1] and si is None and ui is None
    k32 = k.float()
    assert isinstance(k32, R.PackedSequence) and k32.data.dtype == tp.float32
    assert k32.batch_sizes is k.batch_sizes
    assert tp.nn.utils.PackedSequence is R.PackedSequence
    assert R.invert_permutation(tp.tensor([2, 0, 1])).tolist() == [1, 2, 0]


def test_errors_name_the_op():
    a, _ = _pair([2, 3])
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        R.pack_sequence(a)
    padded = R.pad_sequence(a)
    with pytest.raises(RuntimeError, match="greater than 0"):
        R.pack_padded_sequence(padded, [3, 0], enforce_sorted=False)
    with pytest.raises(ValueError, match="pack_padded_sequence: expected 2 lengths"):
        R.pack_padded_sequence(padded, [3, 2, 1])
    with pytest.raises(RuntimeError, match="exceeds"):
        R.pack_padded_sequence(padded, [4, 2])
    with pytest.raises(ValueError, match="total_length"):
        R.pad_packed_sequence(R.pack_sequence(a, enforce_sorted=False), total_length=2)
    with pytest.raises(RuntimeError, match="trailing shape"):
        R.pad_sequence([tp.zeros(2, 3), tp.zeros(2, 4)])
    with pytest.raises(TypeError, match="PackedSequence"):
        R.pad_packed_sequence(padded)


def _load(m, tm):
    m.load_state_dict({k: tp.tensor(_np(v)) for k, v in tm.state_dict().items()})


def _grads_close(m, tm, rtol=1e-9, atol=1e-11):
    got = dict(m.named_parameters())
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(_np(got[name].grad), _np(p.grad), rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("with_h0", [False, True])
def test_rnn_on_packed_sequence_matches_torch(mode, bidirectional, enforce_sorted, with_h0):
    lengths = [5, 4, 2, 2, 1] if enforce_sorted else [2, 5, 1, 4, 2]
    a, b = _pair(lengths, feat=3, seed=3)
    torch.manual_seed(0)
    tm = getattr(torch.nn, mode)(3, 4, num_layers=2, bidirectional=bidirectional).double()
    m = getattr(tp.nn, mode)(3, 4, num_layers=2, bidirectional=bidirectional, dtype=tp.float64)
    _load(m, tm)
    ka = R.pack_sequence(a, enforce_sorted=enforce_sorted)
    kb = TR.pack_sequence(b, enforce_sorted=enforce_sorted)
    hx_a = hx_b = None
    if with_h0:
        rng = np.random.default_rng(7)
        shape = (2 * (2 if bidirectional else 1), len(lengths), 4)
        h0 = [rng.standard_normal(shape) for _ in range(2 if mode == "LSTM" else 1)]
        ta = [tp.tensor(h, requires_grad=True) for h in h0]
        tb = [torch.tensor(h, requires_grad=True) for h in h0]
        hx_a, hx_b = (tuple(ta), tuple(tb)) if mode == "LSTM" else (ta[0], tb[0])
    oa, ha = m(ka, hx_a)
    ob, hb = tm(kb, hx_b)
    assert isinstance(oa, R.PackedSequence)
    assert oa.batch_sizes.tolist() == ob.batch_sizes.tolist()
    np.testing.assert_allclose(_np(oa.data), _np(ob.data), rtol=1e-10, atol=1e-12)
    ha = ha if isinstance(ha, tuple) else (ha,)
    hb = hb if isinstance(hb, tuple) else (hb,)
    for x, y in zip(ha, hb):
        np.testing.assert_allclose(_np(x), _np(y), rtol=1e-10, atol=1e-12)
    pa, _ = R.pad_packed_sequence(oa, batch_first=True)
    pb, _ = TR.pad_packed_sequence(ob, batch_first=True)
    rng = np.random.default_rng(9)
    w = rng.standard_normal(tuple(pa.shape))
    wh = [rng.standard_normal(tuple(x.shape)) for x in ha]
    loss_a = (pa * tp.tensor(w)).sum() + sum((x * tp.tensor(v)).sum() for x, v in zip(ha, wh))
    loss_b = (pb * torch.tensor(w)).sum() + sum((x * torch.tensor(v)).sum() for x, v in zip(hb, wh))
    loss_a.backward()
    loss_b.backward()
    _grads_close(m, tm)
    for x, y in zip(a, b):
        np.testing.assert_allclose(_np(x.grad), _np(y.grad), rtol=1e-9, atol=1e-11)
    if with_h0:
        for x, y in zip(ta, tb):
            np.testing.assert_allclose(_np(x.grad), _np(y.grad), rtol=1e-9, atol=1e-11)


def test_rnn_packed_batch_first_padded_equals_torch():
    lengths = [3, 6, 2]
    a, b = _pair(lengths, feat=2, seed=5, dtype="float32")
    torch.manual_seed(1)
    tm = torch.nn.GRU(2, 3, batch_first=True)
    m = tp.nn.GRU(2, 3, batch_first=True)
    _load(m, tm)
    pa = R.pack_padded_sequence(R.pad_sequence(a, batch_first=True), tp.tensor(lengths), batch_first=True,
                                enforce_sorted=False)
    pb = TR.pack_padded_sequence(TR.pad_sequence(b, batch_first=True), torch.tensor(lengths), batch_first=True,
                                 enforce_sorted=False)
    oa, ha = m(pa)
    ob, hb = tm(pb)
    ua, la = R.pad_packed_sequence(oa, batch_first=True)
    ub, lb = TR.pad_packed_sequence(ob, batch_first=True)
    np.testing.assert_allclose(_np(ua), _np(ub), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(ha), _np(hb), rtol=1e-5, atol=1e-6)
    assert la.tolist() == lengths


def test_rnn_packed_input_errors():
    m = tp.nn.LSTM(3, 4)
    k = R.pack_sequence([tp.zeros(2, 5)])
    with pytest.raises(ValueError, match="input_size is 3"):
        m(k)
    k = R.pack_sequence([tp.zeros(2, 3), tp.zeros(1, 3)])
    with pytest.raises(ValueError, match="Expected hidden size"):
        m(k, (tp.zeros(1, 3, 4), tp.zeros(1, 3, 4)))


def test_rnn_packed_under_compile_equals_eager():
    torch.manual_seed(0)
    m = tp.nn.LSTM(3, 4, bidirectional=True)
    rng = np.random.default_rng(2)
    padded = tp.tensor(rng.standard_normal((4, 3, 3)).astype("float32"))

    def f(x):
        k = R.pack_padded_sequence(x, [2, 4, 3], enforce_sorted=False)
        out, (h, c) = m(k)
        y, _ = R.pad_packed_sequence(out)
        return y, h

    ye, he = f(padded)
    yc, hc = tp.compile(f)(padded)
    np.testing.assert_allclose(_np(yc), _np(ye), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(hc), _np(he), rtol=1e-5, atol=1e-6)


# ---- LSTM proj_size ----

@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_lstm_proj_size_matches_torch(bidirectional, batch_first):
    torch.manual_seed(0)
    kw = dict(num_layers=2, bidirectional=bidirectional, proj_size=3, batch_first=batch_first)
    tm = torch.nn.LSTM(4, 6, **kw).double()
    m = tp.nn.LSTM(4, 6, dtype=tp.float64, **kw)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    assert [[tuple(p.shape) for p in g] for g in m.all_weights] == \
        [[tuple(p.shape) for p in g] for g in tm.all_weights]
    _load(m, tm)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 5, 4) if batch_first else (5, 2, 4))
    dirs = 2 if bidirectional else 1
    h0 = rng.standard_normal((2 * dirs, 2, 3))
    c0 = rng.standard_normal((2 * dirs, 2, 6))
    xa, xb = tp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oa, (ha, ca) = m(xa, (tp.tensor(h0), tp.tensor(c0)))
    ob, (hb, cb) = tm(xb, (torch.tensor(h0), torch.tensor(c0)))
    assert tuple(oa.shape) == tuple(ob.shape) and tuple(ha.shape) == (2 * dirs, 2, 3)
    for u, v in ((oa, ob), (ha, hb), (ca, cb)):
        np.testing.assert_allclose(_np(u), _np(v), rtol=1e-10, atol=1e-12)
    (oa.sum() + ha.pow(2).sum() + ca.sum()).backward()
    (ob.sum() + hb.pow(2).sum() + cb.sum()).backward()
    _grads_close(m, tm)
    np.testing.assert_allclose(_np(xa.grad), _np(xb.grad), rtol=1e-9, atol=1e-11)


def test_lstm_proj_size_unbatched_default_state_and_packed():
    torch.manual_seed(2)
    tm = torch.nn.LSTM(3, 5, proj_size=2)
    m = tp.nn.LSTM(3, 5, proj_size=2)
    _load(m, tm)
    x = np.random.default_rng(0).standard_normal((4, 3)).astype("float32")
    oa, (ha, ca) = m(tp.tensor(x))
    ob, (hb, cb) = tm(torch.tensor(x))
    for u, v in ((oa, ob), (ha, hb), (ca, cb)):
        np.testing.assert_allclose(_np(u), _np(v), rtol=1e-5, atol=1e-6)
    a, b = _pair([3, 1, 2], feat=3, dtype="float32")
    oa, (ha, ca) = m(R.pack_sequence(a, enforce_sorted=False))
    ob, (hb, cb) = tm(TR.pack_sequence(b, enforce_sorted=False))
    for u, v in ((oa.data, ob.data), (ha, hb), (ca, cb)):
        np.testing.assert_allclose(_np(u), _np(v), rtol=1e-5, atol=1e-6)
    assert "proj_size=2" in repr(m)


def test_proj_size_errors():
    with pytest.raises(ValueError, match="smaller than hidden_size"):
        tp.nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="non-negative"):
        tp.nn.LSTM(3, 4, proj_size=-1)
    m = tp.nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="Expected hidden size"):
        m(tp.zeros(2, 1, 3), (tp.zeros(1, 1, 4), tp.zeros(1, 1, 4)))


@pytest.mark.skipif(not tp.cuda.is_available(), reason="needs CUDA")
def test_packed_lstm_on_cuda_equals_cpu():
    torch.manual_seed(0)
    m = tp.nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2, dtype=tp.float64)
    a, _ = _pair([2, 5, 3])
    k = R.pack_sequence(a, enforce_sorted=False)
    out, (h, c) = m(k)
    m.to("cuda")
    kg = R.pack_sequence([s.detach().to("cuda") for s in a], enforce_sorted=False)
    og, (hg, cg) = m(kg)
    assert og.data.device.type == "cuda"
    for u, v in ((og.data, out.data), (hg, h), (cg, c)):
        np.testing.assert_allclose(_np(u), _np(v), rtol=1e-10, atol=1e-12)
    pg, lg = R.pad_packed_sequence(og, batch_first=True)
    assert lg.tolist() == [2, 5, 3] and pg.device.type == "cuda"


def test_packed_gru_compiled_with_tensor_lengths_follows_new_lengths():
    torch.manual_seed(0)
    m = tp.nn.GRU(3, 4, num_layers=2)
    x = tp.tensor(np.random.default_rng(3).standard_normal((5, 3, 3)).astype("float32"))

    def f(x, lengths):
        out, h = m(R.pack_padded_sequence(x, lengths, enforce_sorted=False))
        return R.pad_packed_sequence(out)[0], h

    cf = tp.compile(f)
    for lengths in ([5, 2, 4], [3, 5, 1]):  # the lengths are data gates: new lengths, a new specialization
        L = tp.tensor(lengths)
        for u, v in zip(cf(x, L), f(x, L)):
            np.testing.assert_allclose(_np(u), _np(v), rtol=1e-5, atol=1e-6)
