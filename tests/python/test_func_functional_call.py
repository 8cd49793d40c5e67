"""tp.func.functional_call (tp.nn.utils.stateless): a module run on given
parameters and buffers, against PyTorch's torch.func.functional_call, and
under tp.func.grad and tp.compile."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
from tensorplay.func import functional_call

torch = pytest.importorskip("torch")


def _pair():
    """The same small model in both libraries, with a BatchNorm (buffers)."""
    tp.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 2))
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for (_, a), (_, b) in zip(m.named_parameters(), t.named_parameters()):
            b.copy_(torch.from_numpy(a.detach().numpy()))
    return m, t


def _np(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _given(named, scale=0.5):
    return {k: v.detach() * scale + 0.1 for k, v in named}


def test_matches_torch_and_leaves_module_unchanged():
    m, t = _pair()
    xa = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    p_tp, p_th = _given(m.named_parameters()), _given(t.named_parameters())
    before = {k: v.detach().numpy().copy() for k, v in m.named_parameters()}
    out = functional_call(m, p_tp, (tp.from_numpy(xa),))
    ref = torch.func.functional_call(t, p_th, (torch.from_numpy(xa),))
    np.testing.assert_allclose(_np(out), _np(ref), rtol=1e-5, atol=1e-6)
    for k, v in m.named_parameters():
        np.testing.assert_array_equal(v.detach().numpy(), before[k], err_msg=k)
    # Buffers not given are the module's own, updated by the forward as in PyTorch.
    for k, v in m.named_buffers():
        np.testing.assert_allclose(_np(v), _np(t.state_dict()[k]), rtol=1e-5, atol=1e-7, err_msg=k)
    # The module's own parameters still produce its own output.
    np.testing.assert_allclose(_np(m(tp.from_numpy(xa))), _np(t(torch.from_numpy(xa))), rtol=1e-5, atol=1e-6)


def test_buffers_updated_in_forward_land_in_the_given_buffers():
    m, t = _pair()
    x = tp.randn(8, 3)
    bufs = {k: v.clone() for k, v in m.named_buffers()}
    rm0 = m[1].running_mean.clone()
    functional_call(m, bufs, (x,))
    assert tp.equal(m[1].running_mean, rm0)
    assert not tp.equal(bufs["1.running_mean"], rm0)
    assert int(bufs["1.num_batches_tracked"]) == 1 and int(m[1].num_batches_tracked) == 0


def test_gradients_reach_the_given_tensors_and_grad_over_a_dict():
    m, _ = _pair()
    m.eval()
    x = tp.randn(5, 3)
    params = {k: v.detach().clone().requires_grad_(True) for k, v in m.named_parameters()}
    functional_call(m, params, x).pow(2).sum().backward()
    assert all(p.grad is None for p in m.parameters())
    g = tp.func.grad(lambda p: functional_call(m, p, (x,)).pow(2).sum())(
        {k: v.detach() for k, v in params.items()})
    assert list(g) == list(params)
    for k in params:
        np.testing.assert_allclose(g[k].numpy(), params[k].grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    # against the module's own backward (same values)
    m.zero_grad()
    functional_call(m, {k: p for k, p in m.named_parameters()}, (x,)).pow(2).sum().backward()
    m2_grad = {k: p.grad.clone() for k, p in m.named_parameters()}
    for k in params:
        np.testing.assert_allclose(m2_grad[k].numpy(), params[k].grad.numpy(), rtol=1e-6, err_msg=k)


def test_jvp_over_a_dict_of_parameters():
    lin = nn.Linear(3, 2)
    x = tp.randn(4, 3)
    p = {k: v.detach() for k, v in lin.named_parameters()}
    tan = {k: tp.ones_like(v) for k, v in p.items()}
    out, jv = tp.func.jvp(lambda q: functional_call(lin, q, (x,)), (p,), (tan,))
    np.testing.assert_allclose(jv.numpy(), (x.sum(1, keepdim=True) + 1).expand(4, 2).numpy(), rtol=1e-5)
    np.testing.assert_allclose(out.numpy(), lin(x).detach().numpy(), rtol=1e-6)


def test_tied_weights_follow_one_key_unless_untied():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    class TiedT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    m, t = Tied(), TiedT()
    with torch.no_grad():
        for k, v in m.state_dict().items():
            t.state_dict()[k].copy_(torch.from_numpy(v.numpy()))
    w = np.zeros((3, 3), np.float32)
    x = np.ones((1, 3), np.float32)
    for tie in (True, False):
        a = functional_call(m, {"a.weight": tp.from_numpy(w)}, tp.from_numpy(x), tie_weights=tie)
        b = torch.func.functional_call(t, {"a.weight": torch.from_numpy(w)}, torch.from_numpy(x), tie_weights=tie)
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="tied"):
        functional_call(m, {"a.weight": tp.zeros(3, 3), "b.weight": tp.ones(3, 3)}, tp.ones(1, 3))
    same = tp.zeros(3, 3)
    functional_call(m, {"a.weight": same, "b.weight": same}, tp.ones(1, 3))


def test_keys_strictness_and_bad_values():
    m, _ = _pair()
    x = tp.randn(4, 3)
    with pytest.raises(RuntimeError, match="missing key.*1.running_mean"):
        functional_call(m, _given(m.named_parameters()), (x,), strict=True)
    full = dict(_given(m.named_parameters()), **{k: v.clone() for k, v in m.named_buffers()})
    functional_call(m, full, (x,), strict=True)
    with pytest.raises(RuntimeError, match="unexpected key.*'extra'"):
        functional_call(m, dict(full, extra=tp.ones(1)), (x,), strict=True)
    # Not strict: an unknown name is an attribute during the call only (as PyTorch).
    functional_call(m, {"extra": tp.ones(1)}, (x,))
    assert not hasattr(m, "extra")
    with pytest.raises(ValueError, match="several of the dictionaries"):
        functional_call(m, ({"0.weight": tp.ones(4, 3)}, {"0.weight": tp.ones(4, 3)}), (x,))
    with pytest.raises(TypeError, match="'0.weight' is a int"):
        functional_call(m, {"0.weight": 3}, (x,))
    with pytest.raises(AttributeError, match="names no submodule 'nope'"):
        functional_call(m, {"nope.weight": tp.ones(1)}, (x,))
    with pytest.raises(RuntimeError, match=r"\(4x3\).*\(2x2\)|4, 3.*2, 2|shapes"):
        functional_call(m, {"0.weight": tp.ones(2, 2)}, (x,))
    # The failed calls restored the module.
    np.testing.assert_array_equal(m[0].weight.detach().numpy(), _pair()[0][0].weight.detach().numpy())


def test_kwargs_and_single_argument():
    class K(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x, *, scale=1.0):
            return self.lin(x) * scale

    k = K()
    x = tp.randn(3, 2)
    p = {"lin.weight": tp.eye(2), "lin.bias": tp.zeros(2)}
    np.testing.assert_allclose(functional_call(k, p, x, {"scale": 2.0}).numpy(), (x * 2).numpy(), rtol=1e-6)
    np.testing.assert_allclose(functional_call(k, p, args=(x,)).numpy(), x.numpy(), rtol=1e-6)


def test_compiled_functional_call_reads_the_given_tensors_every_call():
    m, _ = _pair()
    m.eval()
    x = tp.randn(5, 3)
    cf = tp.compile(lambda p, x: functional_call(m, p, (x,)))
    for i in range(3):
        p = {k: v.detach() * (1 + i) for k, v in m.named_parameters()}
        np.testing.assert_allclose(cf(p, x).numpy(), functional_call(m, p, (x,)).numpy(), rtol=1e-5, atol=1e-6)
    # Only some names given: the others are the module's, read live.
    part = tp.compile(lambda w, x: functional_call(m, {"3.weight": w}, (x,)))
    w = tp.randn(2, 4)
    part(w, x)
    with tp.no_grad():
        m[0].weight.mul_(2)
    np.testing.assert_allclose(_np(part(w, x)), _np(functional_call(m, {"3.weight": w}, (x,))),
                               rtol=1e-5, atol=1e-6)
    assert m[3].weight is not w and "3.weight" in dict(m.named_parameters())


def test_compiled_training_through_functional_call():
    lin = nn.Linear(3, 1)
    x, y = tp.randn(8, 3), tp.randn(8, 1)
    p = {k: v.detach().clone().requires_grad_(True) for k, v in lin.named_parameters()}
    q = {k: v.detach().clone().requires_grad_(True) for k, v in lin.named_parameters()}
    loss = lambda p, x, y: (functional_call(lin, p, (x,)) - y).pow(2).mean()  # noqa: E731
    closs = tp.compile(loss)
    for _ in range(3):
        a, b = closs(p, x, y), loss(q, x, y)
        a.backward()
        b.backward()
        np.testing.assert_allclose(a.item(), b.item(), rtol=1e-6)
        with tp.no_grad():
            for d in (p, q):
                for v in d.values():
                    v -= 0.1 * v.grad
                    v.grad = None
    for k in p:
        np.testing.assert_allclose(p[k].detach().numpy(), q[k].detach().numpy(), rtol=1e-5, atol=1e-6)
    assert all(v.grad is None for v in lin.parameters())
