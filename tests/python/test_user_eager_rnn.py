"""Recurrent layers (RNN, LSTM, GRU and their cells) and the parameter containers, as a
PyTorch user brings them: PyTorch's state_dict loaded as is, outputs, final states and
every gradient compared with torch 2.13; a small sequence classifier trained step by step."""

import copy

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")


def _compare(ctor, shapes, call):
    want_m, got_m = ctor(torch), ctor(tp)
    got_m.load_state_dict(want_m.state_dict())
    assert list(got_m.state_dict()) == list(want_m.state_dict())
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    results = []
    for mod, model in ((tp, got_m), (torch, want_m)):
        xs = [mod.tensor(a) for a in arrays]
        for x in xs:
            x.requires_grad_(True)
        out = call(model, xs)
        flat = []

        def collect(v):
            if isinstance(v, (tuple, list)):
                for u in v:
                    collect(u)
            elif v is not None:
                flat.append(v)
        collect(out)
        loss = 0
        for i, f in enumerate(flat):
            w = np.random.default_rng(i + 1).standard_normal(tuple(f.shape)).astype(np.float32)
            loss = loss + (f * mod.tensor(w)).sum()
        loss.backward()
        results.append(([f.detach().numpy() for f in flat], [x.grad.numpy() for x in xs],
                        {n: p.grad.numpy() for n, p in model.named_parameters()}))
    (go, gx, gp), (wo, wx, wp) = results
    assert [o.shape for o in go] == [o.shape for o in wo]
    for a, b in zip(go + gx, wo + wx):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert list(gp) == list(wp)
    for k in gp:
        np.testing.assert_allclose(gp[k], wp[k], rtol=2e-4, atol=2e-5, err_msg=k)


_seq = lambda m, xs: m(xs[0])  # noqa: E731


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("kw,shape", [
    ({}, (5, 2, 3)),
    ({"num_layers": 2, "bidirectional": True, "batch_first": True}, (2, 5, 3)),
    ({"bias": False, "num_layers": 2}, (5, 2, 3)),
    ({"bidirectional": True}, (5, 3)),  # unbatched
    ({"num_layers": 3, "dropout": 0.5, "eval": True}, (5, 2, 3)),
], ids=["plain", "2layer-bi-batch_first", "nobias", "unbatched", "dropout-eval"])
def test_recurrent_layers_match_torch(mode, kw, shape):
    kw = dict(kw)
    ev = kw.pop("eval", False)

    def ctor(mod):
        m = getattr(mod.nn, mode)(3, 4, **kw)
        return m.eval() if ev else m
    _compare(ctor, [shape], _seq)


def test_lstm_and_gru_with_initial_states():
    _compare(lambda mod: mod.nn.LSTM(3, 4, num_layers=2, bidirectional=True), [(5, 2, 3), (4, 2, 4), (4, 2, 4)],
             lambda m, xs: m(xs[0], (xs[1], xs[2])))
    _compare(lambda mod: mod.nn.LSTM(3, 4), [(5, 3), (1, 4), (1, 4)], lambda m, xs: m(xs[0], (xs[1], xs[2])))
    _compare(lambda mod: mod.nn.GRU(3, 4, num_layers=2, bidirectional=True), [(5, 2, 3), (4, 2, 4)],
             lambda m, xs: m(xs[0], xs[1]))
    _compare(lambda mod: mod.nn.RNN(3, 4, nonlinearity="relu", num_layers=2), [(5, 2, 3), (2, 2, 4)],
             lambda m, xs: m(xs[0], xs[1]))


def test_cells_match_torch():
    _compare(lambda mod: mod.nn.LSTMCell(3, 4), [(2, 3), (2, 4), (2, 4)], lambda m, xs: m(xs[0], (xs[1], xs[2])))
    _compare(lambda mod: mod.nn.LSTMCell(3, 4), [(2, 3)], _seq)
    _compare(lambda mod: mod.nn.GRUCell(3, 4), [(2, 3), (2, 4)], lambda m, xs: m(xs[0], xs[1]))
    _compare(lambda mod: mod.nn.GRUCell(3, 4, bias=False), [(3,), (4,)], lambda m, xs: m(xs[0], xs[1]))
    _compare(lambda mod: mod.nn.RNNCell(3, 4, nonlinearity="relu"), [(2, 3), (2, 4)], lambda m, xs: m(xs[0], xs[1]))


def _train_classifier(mod):
    class Net(mod.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = mod.nn.Embedding(10, 6, padding_idx=0)
            self.rnn = mod.nn.LSTM(6, 8, batch_first=True, num_layers=2, bidirectional=True)
            self.fc = mod.nn.Linear(16, 3)

        def forward(self, tokens):
            out, _ = self.rnn(self.emb(tokens))
            return self.fc(out[:, -1])
    net = Net()
    rng = np.random.default_rng(0)
    with mod.no_grad():
        for p in net.parameters():
            p.copy_(mod.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
    opt = mod.optim.Adam(net.parameters(), lr=0.01)
    tokens, labels = mod.tensor(rng.integers(0, 10, (4, 7))), mod.tensor(rng.integers(0, 3, 4))
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = mod.nn.functional.cross_entropy(net(tokens), labels)
        loss.backward()
        mod.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().numpy().copy() for p in net.parameters()]


def test_lstm_sequence_classifier_trains_like_torch():
    got, want = _train_classifier(tp), _train_classifier(torch)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-6)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


def test_compiled_lstm_matches_eager():
    tp.manual_seed(0)
    m = tp.nn.LSTM(3, 4, num_layers=2, batch_first=True)
    x = tp.randn(2, 5, 3)
    want, (wh, wc) = m(x)
    got, (gh, gc) = tp.compile(m)(x)
    for a, b in ((got, want), (gh, wh), (gc, wc)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_recurrent_bad_input_names_the_layer_and_shapes():
    with pytest.raises(ValueError, match=r"LSTM: input.size\(-1\) is 2 but input_size is 3"):
        tp.nn.LSTM(3, 4)(tp.ones(5, 2, 2))
    with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D"):
        tp.nn.LSTM(3, 4)(tp.ones(2, 5, 2, 3))
    with pytest.raises(ValueError, match=r"GRU: Expected hidden size \(1, 2, 4\), got \(1, 3, 4\)"):
        tp.nn.GRU(3, 4)(tp.ones(5, 2, 3), tp.ones(1, 3, 4))
    with pytest.raises(ValueError, match="tuple"):
        tp.nn.LSTM(3, 4)(tp.ones(5, 2, 3), (tp.ones(1, 2, 4),))
    with pytest.raises(ValueError, match="nonlinearity"):
        tp.nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="dropout"):
        tp.nn.LSTM(3, 4, dropout=2)
    with pytest.raises(ValueError, match="proj_size"):  # proj_size works (test_api_s35_rnn_utils) but < hidden
        tp.nn.LSTM(3, 4, proj_size=4)


# ---------------------------------------------------------------- parameter containers
def _container_model(mod):
    nn = mod.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.pl = nn.ParameterList([nn.Parameter(mod.ones(2)), mod.zeros(3)])
            self.pd = nn.ParameterDict({"a": nn.Parameter(mod.ones(1)), "b": mod.ones(2, 2)})
            self.pl.append(nn.Parameter(mod.ones(1) * 2))
            self.pd["c"] = nn.Parameter(mod.ones(3))

        def forward(self, x):
            return sum(p.sum() for p in self.pl) * x + self.pd["a"] * self.pd["b"].sum() + self.pd["c"].sum()
    return M()


def test_parameter_list_and_dict_register_like_torch():
    def run(mod):
        m = _container_model(mod)
        info = dict(names=[n for n, _ in m.named_parameters()], sd=list(m.state_dict()),
                    lens=(len(m.pl), len(m.pd)), kinds=[type(p).__name__ for p in m.pl], keys=list(m.pd.keys()))
        m(mod.ones(1)).sum().backward()
        mod.optim.SGD(m.parameters(), lr=0.1).step()
        info["after"] = [p.detach().numpy().copy() for p in m.parameters()]
        info["slice"] = [tuple(p.shape) for p in m.pl[1:]]
        info["popped"] = tuple(m.pd.pop("b").shape)
        info["sd2"] = list(m.state_dict())
        info["copy"] = [n for n, _ in copy.deepcopy(m).named_parameters()]
        return info
    got, want = run(tp), run(torch)
    assert got.pop("kinds") == want.pop("kinds") == ["Parameter"] * 3  # plain tensors become Parameters
    ga, wa = got.pop("after"), want.pop("after")
    assert got == want
    for a, b in zip(ga, wa):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_sequential_add_and_multiply_share_modules():
    nn = tp.nn
    a, b = nn.Sequential(nn.Linear(2, 2), nn.ReLU()), nn.Sequential(nn.Tanh())
    s = a + b
    assert [n for n, _ in s.named_children()] == ["0", "1", "2"] and s[0] is a[0]
    r = nn.Sequential(nn.Linear(2, 2)) * 2
    assert len(r) == 2 and r[0] is r[1] and len(list(r.parameters())) == 2
    a += b
    assert [type(m).__name__ for m in a] == ["Linear", "ReLU", "Tanh"]
    with pytest.raises(ValueError):
        a + nn.ModuleList([nn.ReLU()])
