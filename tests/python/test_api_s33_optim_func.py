"""optim.Rprop step by step against torch.optim.Rprop (eager and tp.compile(step)), and
tp.func.stack_module_state / linearize: PyTorch's model-ensembling recipe
(vmap over functional_call of stacked states) against each model run alone."""
import copy

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.func import functional_call, linearize, stack_module_state, vmap

rng = np.random.default_rng(0)
W0 = rng.standard_normal((4, 3))
B0 = rng.standard_normal(3)
DATA = [(rng.standard_normal((6, 4)), rng.standard_normal((6, 3))) for _ in range(10)]


def _train(lib, opt_cls, kw, compiled=False, groups=False):
    w = lib.tensor(W0.copy(), requires_grad=True)
    b = lib.tensor(B0.copy(), requires_grad=True)
    params = [{"params": [w]}, {"params": [b], "lr": 0.05}] if groups else [w, b]
    opt = opt_cls(params, **kw)
    step = tp.compile(opt.step) if compiled else opt.step
    hist = []
    for x, y in DATA:
        opt.zero_grad()
        loss = ((lib.tensor(x) @ w + b - lib.tensor(y)) ** 2).sum()
        loss.backward()
        step()
        hist.append(np.concatenate([w.detach().numpy().ravel(), b.detach().numpy().ravel()]))
    return np.array(hist), opt


RPROP_CASES = [dict(), dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2)), dict(maximize=True),
               dict(lr=0.5, step_sizes=(0.01, 0.05))]


@pytest.mark.parametrize("kw", RPROP_CASES)
def test_rprop_matches_torch_each_step(kw):
    t, _ = _train(torch, torch.optim.Rprop, kw)
    a, _ = _train(tp, tp.optim.Rprop, kw)
    np.testing.assert_allclose(a, t, rtol=1e-12, atol=1e-12)


def test_rprop_param_groups_and_state_names():
    t, topt = _train(torch, torch.optim.Rprop, dict(lr=0.01), groups=True)
    a, opt = _train(tp, tp.optim.Rprop, dict(lr=0.01), groups=True)
    np.testing.assert_allclose(a, t, rtol=1e-12, atol=1e-12)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sorted(sd["state"][0]) == sorted(tsd["state"][0]) == ["prev", "step", "step_size"]
    for k in ("prev", "step_size"):
        np.testing.assert_allclose(sd["state"][0][k].numpy(), tsd["state"][0][k].numpy(), rtol=1e-12)
    assert float(sd["state"][1]["step"]) == float(tsd["state"][1]["step"]) == 10.0
    assert sd["param_groups"][0]["etas"] == tuple(tsd["param_groups"][0]["etas"])


def test_rprop_compiled_step_equals_eager():
    e, _ = _train(tp, tp.optim.Rprop, dict(lr=0.1))
    c, _ = _train(tp, tp.optim.Rprop, dict(lr=0.1), compiled=True)
    np.testing.assert_array_equal(c, e)


def test_rprop_state_dict_roundtrip_continues_identically():
    def one_more(opt, w, b):
        opt.zero_grad()
        x, y = DATA[0]
        ((tp.tensor(x) @ w + b - tp.tensor(y)) ** 2).sum().backward()
        opt.step()
        return w.detach().numpy().copy()

    a, opt = _train(tp, tp.optim.Rprop, dict(lr=0.05))
    w1, b1 = opt.param_groups[0]["params"]
    w2 = tp.tensor(w1.detach().numpy().copy(), requires_grad=True)
    b2 = tp.tensor(b1.detach().numpy().copy(), requires_grad=True)
    opt2 = tp.optim.Rprop([w2, b2], lr=0.05)
    opt2.load_state_dict(opt.state_dict())
    assert opt2.state_dict()["param_groups"][0]["step_sizes"] == (1e-6, 50)
    np.testing.assert_array_equal(one_more(opt, w1, b1), one_more(opt2, w2, b2))


def test_rprop_bad_arguments():
    p = [tp.zeros(2, requires_grad=True)]
    with pytest.raises(ValueError, match="eta"):
        tp.optim.Rprop(p, etas=(1.5, 1.2))
    with pytest.raises(ValueError, match="learning rate"):
        tp.optim.Rprop(p, lr=-1)
    with pytest.raises(NotImplementedError, match="Rprop"):
        tp.optim.Rprop(p, differentiable=True)


def test_all_dense_torch_optimizers_exist():
    for name in ("SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "ASGD", "NAdam", "RAdam", "RMSprop",
                 "Rprop", "LBFGS"):
        assert issubclass(getattr(tp.optim, name), tp.optim.Optimizer), name


# ---------------------------------------------------------------- func
class _Net(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = tp.nn.Linear(4, 8)
        self.bn = tp.nn.BatchNorm1d(8)
        self.l2 = tp.nn.Linear(8, 2)

    def forward(self, x):
        return self.l2(tp.relu(self.bn(self.l1(x))))


def _ensemble(n=3):
    tp.manual_seed(0)
    return [_Net().eval() for _ in range(n)]


def test_stack_module_state_shapes_and_leaves():
    models = _ensemble()
    params, buffers = stack_module_state(models)
    assert list(params) == [n for n, _ in models[0].named_parameters()]
    assert list(buffers) == [n for n, _ in models[0].named_buffers()]
    assert params["l1.weight"].shape == (3, 8, 4) and buffers["bn.running_mean"].shape == (3, 8)
    for p in params.values():
        assert p.is_leaf and p.requires_grad
    for b in buffers.values():
        assert not b.requires_grad
    np.testing.assert_array_equal(params["l2.bias"][1].detach().numpy(), models[1].l2.bias.detach().numpy())
    # new storage, not views of the models' tensors
    with tp.no_grad():
        params["l2.bias"].add_(1.0)
    assert not np.array_equal(params["l2.bias"][1].detach().numpy(), models[1].l2.bias.detach().numpy())


def test_ensemble_vmap_functional_call_matches_each_model():
    models = _ensemble()
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0])

    def fmodel(p, b, x):
        return functional_call(base, (p, b), (x,))

    x = tp.randn(5, 4)
    same = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
    xs = tp.randn(3, 5, 4)
    diff = vmap(fmodel)(params, buffers, xs)
    for i, m in enumerate(models):
        np.testing.assert_allclose(same[i].detach().numpy(), m(x).detach().numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(diff[i].detach().numpy(), m(xs[i]).detach().numpy(), rtol=1e-6, atol=1e-6)
    compiled = tp.compile(vmap(fmodel, in_dims=(0, 0, None)))(params, buffers, x)
    np.testing.assert_array_equal(compiled.detach().numpy(), same.detach().numpy())


def test_ensemble_gradients_match_per_model_backward():
    models = _ensemble()
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0])
    x = tp.randn(5, 4)
    out = vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), in_dims=(0, 0, None))(params, buffers, x)
    out.pow(2).sum().backward()
    for i, m in enumerate(models):
        m.zero_grad()
        m(x).pow(2).sum().backward()
        for name, p in m.named_parameters():
            np.testing.assert_allclose(params[name].grad[i].numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_ensemble_matches_torch_recipe():
    models = _ensemble(2)
    tmodels = []
    for m in models:
        tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                                 torch.nn.Linear(8, 2)).eval()
        for (tn, tparam), (n, p) in zip(list(tm.named_parameters()) + list(tm.named_buffers()),
                                        list(m.named_parameters()) + list(m.named_buffers())):
            tparam.data = torch.tensor(p.detach().numpy())
        tmodels.append(tm)
    tparams, tbuffers = torch.func.stack_module_state(tmodels)
    params, buffers = stack_module_state(models)
    assert [tuple(v.shape) for v in tparams.values()] == [tuple(v.shape) for v in params.values()]
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    tbase = copy.deepcopy(tmodels[0]).to("meta")
    tout = torch.func.vmap(lambda p, b, x: torch.func.functional_call(tbase, (p, b), (x,)),
                           in_dims=(0, 0, None))(tparams, tbuffers, torch.tensor(x))
    base = copy.deepcopy(models[0])
    out = vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), in_dims=(0, 0, None))(params, buffers,
                                                                                           tp.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_stack_module_state_errors():
    with pytest.raises(RuntimeError, match="stack_module_state.*at least one"):
        stack_module_state([])
    a, b = _Net(), _Net()
    b.eval()
    with pytest.raises(RuntimeError, match="stack_module_state.*training/eval"):
        stack_module_state([a, b])
    with pytest.raises(RuntimeError, match="stack_module_state.*same class"):
        stack_module_state([tp.nn.Linear(2, 2), tp.nn.Sequential(tp.nn.Linear(2, 2))])
    c, d = tp.nn.Linear(2, 2), tp.nn.Linear(2, 2)
    d.bias.requires_grad_(False)
    with pytest.raises(RuntimeError, match="stack_module_state.*requires_grad"):
        stack_module_state([c, d])
    with pytest.raises(RuntimeError, match="stack_module_state.*shapes"):
        stack_module_state([tp.nn.Linear(2, 2), tp.nn.Linear(2, 3)])


def test_linearize_matches_jvp_and_torch():
    x = np.array([0.3, -1.2, 2.0])
    v = np.array([1.0, 0.5, -2.0])

    def f(t, lib):
        return lib.sin(t) * t.exp()

    out, jfn = linearize(lambda t: f(t, tp), tp.tensor(x))
    tout, tjfn = torch.func.linearize(lambda t: f(t, torch), torch.tensor(x))
    np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=1e-12)
    np.testing.assert_allclose(jfn(tp.tensor(v)).numpy(), tjfn(torch.tensor(v)).numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="linearize"):
        jfn(tp.tensor(v), tp.tensor(v))
