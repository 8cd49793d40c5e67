"""optim.Adafactor against torch.optim.Adafactor step by step (factored second
moment for matrices, plain for vectors, weight decay, maximize, the RMS clip),
its state_dict layout, tp.compile(opt.step) and bad arguments."""
import numpy as np
import pytest
import torch

import tensorplay as tp


def run(lib, params0, grads, steps, **kw):
    params = [lib.tensor(p.copy(), requires_grad=True) for p in params0]
    opt = (tp.optim.Adafactor if lib is tp else torch.optim.Adafactor)(params, **kw)
    for k in range(steps):
        for p, g in zip(params, grads):
            p.grad = lib.tensor(g * (1 + 0.3 * k))
        opt.step()
    return [p.detach().numpy() for p in params], opt


@pytest.mark.parametrize("kw", [dict(), dict(lr=0.05, weight_decay=0.1), dict(maximize=True, d=1.5),
                                dict(beta2_decay=-0.5, eps=(1e-20, 1e-2)), dict(lr=1.0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_torch_step_by_step(kw, dtype):
    rng = np.random.default_rng(0)
    params0 = [rng.standard_normal(s).astype(dtype) for s in [(5, 4), (3,), (2, 3, 4), (1, 6)]]
    grads = [rng.standard_normal(p.shape).astype(dtype) for p in params0]
    ours, opt = run(tp, params0, grads, 6, **kw)
    theirs, topt = run(torch, params0, grads, 6, **kw)
    tol = 2e-5 if dtype == np.float32 else 1e-11
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    st, tst = opt.state_dict()["state"], topt.state_dict()["state"]
    for i in st:
        assert set(st[i]) == set(tst[i])
        for k in st[i]:
            np.testing.assert_allclose(np.asarray(st[i][k].numpy()), tst[i][k].numpy(), rtol=tol * 10, atol=1e-12)


def test_compiled_step_equals_eager():
    rng = np.random.default_rng(1)
    p0 = [rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)]
    g = [rng.standard_normal(p.shape).astype(np.float32) for p in p0]
    results = []
    for compiled in (False, True):
        params = [tp.tensor(p.copy(), requires_grad=True) for p in p0]
        opt = tp.optim.Adafactor(params, lr=0.03, weight_decay=0.01)
        step = tp.compile(opt.step, options={"warn_fallback": False}) if compiled else opt.step
        for k in range(5):
            for p, gg in zip(params, g):
                p.grad = tp.tensor(gg * (k + 1))
            step()
        results.append([p.detach().numpy() for p in params])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_trains_a_model():
    tp.manual_seed(0)
    model = tp.nn.Sequential(tp.nn.Linear(8, 16), tp.nn.Tanh(), tp.nn.Linear(16, 1))
    opt = tp.optim.Adafactor(model.parameters(), lr=0.05)
    x, y = tp.randn(64, 8), tp.randn(64, 1)
    first = None
    for _ in range(60):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        first = first if first is not None else float(loss)
    assert float(loss) < 0.7 * first


@pytest.mark.parametrize("kw,match", [(dict(lr=-1.0), "Learning rate"), (dict(beta2_decay=0.5), "beta2_decay"),
                                      (dict(eps=(None, -1.0)), "epsilon2"), (dict(d=0.5), "Clipping"),
                                      (dict(weight_decay=-1.0), "weight_decay")])
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        tp.optim.Adafactor([tp.ones(2, requires_grad=True)], **kw)
