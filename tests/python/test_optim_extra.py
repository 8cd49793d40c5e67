"""Adamax, NAdam, RAdam, Adadelta and LBFGS against PyTorch: parameters after every step on
the same data, state_dict round trips (to and from PyTorch's layout), and bad arguments."""
import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")

rng = np.random.default_rng(1)
A = rng.standard_normal((5, 4))
B = rng.standard_normal((5, 3))


def _params(lib, w0, b0):
    w = lib.tensor(np.array(w0))
    b = lib.tensor(np.array(b0))
    w.requires_grad_(True)
    b.requires_grad_(True)
    return w, b


def _loss(lib, w, b, a, t):
    out = (lib.tensor(a) @ w + b).tanh()
    return ((out - lib.tensor(t)) ** 2).sum() + (w ** 2).sum() * 0.01


CONFIGS = [
    ("Adamax", {}), ("Adamax", dict(lr=0.05, betas=(0.8, 0.9), weight_decay=0.1, maximize=True)),
    ("NAdam", {}), ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", {}), ("RAdam", dict(lr=0.05, betas=(0.8, 0.7), weight_decay=0.1)),
    ("RAdam", dict(lr=0.05, betas=(0.8, 0.7), weight_decay=0.1, decoupled_weight_decay=True)),
    ("Adadelta", {}), ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1, maximize=True)),
    ("ASGD", dict(lr=0.05)), ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=4, weight_decay=0.1)),
]


@pytest.mark.parametrize("name,kw", CONFIGS)
def test_optimizer_matches_torch_step_by_step(name, kw):
    w0, b0 = rng.standard_normal((4, 3)), rng.standard_normal(3)
    tw, tb = _params(tp, w0, b0)
    pw, pb = _params(torch, w0, b0)
    opt = getattr(tp.optim, name)([tw, tb], **kw)
    ref = getattr(torch.optim, name)([pw, pb], **kw)
    for step in range(12):  # RAdam switches to rectified steps after step 5 with these betas
        a, t = rng.standard_normal((5, 4)), rng.standard_normal((5, 3))
        for o, lib, w, b in ((opt, tp, tw, tb), (ref, torch, pw, pb)):
            o.zero_grad()
            _loss(lib, w, b, a, t).backward()
            o.step()
        np.testing.assert_allclose(tw.detach().numpy(), pw.detach().numpy(), rtol=1e-12, atol=1e-12,
                                   err_msg=f"{name} step {step}")
        np.testing.assert_allclose(tb.detach().numpy(), pb.detach().numpy(), rtol=1e-12, atol=1e-12)


def _to_torch_state(sd):
    conv = lambda v: torch.tensor(v.numpy()) if isinstance(v, tp.Tensor) else v  # noqa: E731
    return {"state": {k: {n: conv(v) for n, v in s.items()} for k, s in sd["state"].items()},
            "param_groups": [dict(g) for g in sd["param_groups"]]}


def _from_torch_state(sd):
    conv = lambda v: tp.tensor(v.numpy()) if isinstance(v, torch.Tensor) else v  # noqa: E731
    return {"state": {k: {n: conv(v) for n, v in s.items()} for k, s in sd["state"].items()},
            "param_groups": [dict(g) for g in sd["param_groups"]]}


@pytest.mark.parametrize("name", ["Adamax", "NAdam", "RAdam", "Adadelta", "ASGD"])
def test_state_dict_round_trip_and_torch_interchange(name):
    w0, b0 = rng.standard_normal((4, 3)), rng.standard_normal(3)
    tw, tb = _params(tp, w0, b0)
    pw, pb = _params(torch, w0, b0)
    opt = getattr(tp.optim, name)([tw, tb], lr=0.03)
    ref = getattr(torch.optim, name)([pw, pb], lr=0.03)
    data = [(rng.standard_normal((5, 4)), rng.standard_normal((5, 3))) for _ in range(6)]

    def run(o, lib, w, b, batch):
        o.zero_grad()
        _loss(lib, w, b, *batch).backward()
        o.step()

    for batch in data[:3]:
        run(opt, tp, tw, tb, batch)
        run(ref, torch, pw, pb, batch)
    sd = opt.state_dict()
    assert set(sd["state"][0]) == set(ref.state_dict()["state"][0])
    # PyTorch's state loads into ours and ours into PyTorch's; both continue identically.
    tw2, tb2 = _params(tp, tw.detach().numpy(), tb.detach().numpy())
    opt2 = getattr(tp.optim, name)([tw2, tb2], lr=0.03)
    opt2.load_state_dict(_from_torch_state(ref.state_dict()))
    pw2, pb2 = _params(torch, pw.detach().numpy(), pb.detach().numpy())
    ref2 = getattr(torch.optim, name)([pw2, pb2], lr=0.03)
    ref2.load_state_dict(_to_torch_state(sd))
    # A round trip through our own state_dict (a copy, not an alias).
    tw3, tb3 = _params(tp, tw.detach().numpy(), tb.detach().numpy())
    opt3 = getattr(tp.optim, name)([tw3, tb3], lr=0.03)
    opt3.load_state_dict(sd)
    for batch in data[3:]:
        run(opt, tp, tw, tb, batch)
        run(opt2, tp, tw2, tb2, batch)
        run(opt3, tp, tw3, tb3, batch)
        run(ref2, torch, pw2, pb2, batch)
    # Loaded states match each other exactly and the uninterrupted run closely (as in PyTorch,
    # loading casts floating state to the parameter's dtype: NAdam's float32 mu_product becomes
    # float64, which changes the last bits).
    np.testing.assert_allclose(tw3.detach().numpy(), tw2.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pw2.detach().numpy(), tw2.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tw2.detach().numpy(), tw.detach().numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name,kw,match", [
    ("Adamax", dict(lr=-1), "learning rate"), ("NAdam", dict(betas=(1.0, 0.9)), "beta"),
    ("NAdam", dict(momentum_decay=-1), "momentum_decay"), ("RAdam", dict(eps=-1), "epsilon"),
    ("Adadelta", dict(rho=1.5), "rho"), ("Adadelta", dict(weight_decay=-1), "weight_decay"),
    ("LBFGS", dict(line_search_fn="armijo"), "strong_wolfe"),
])
def test_bad_arguments(name, kw, match):
    w = tp.zeros(3)
    w.requires_grad_(True)
    with pytest.raises(ValueError, match=match):
        getattr(tp.optim, name)([w], **kw)


# ---------------------------------------------------------------- LBFGS
def _rosenbrock(lib, x):
    return ((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()


def _logistic(lib, x):
    z = lib.tensor(A) @ x[:4].reshape(4, 1) + x[4]
    y = lib.tensor((B[:, :1] > 0) * 2.0 - 1)
    return (1 + (-y * z).exp()).log().sum() + 0.05 * (x ** 2).sum()


# Rosenbrock is ill-conditioned: over 20 iterations a step, the last-bit differences of dot
# products (BLAS summation order differs from PyTorch's) grow to ~1e-8, hence its tolerance.
@pytest.mark.parametrize("objective,tol", [(_logistic, 1e-11), (_rosenbrock, 1e-6)])
@pytest.mark.parametrize("kw", [dict(), dict(line_search_fn="strong_wolfe"),
                                dict(lr=0.5, history_size=3, max_iter=7, line_search_fn="strong_wolfe"),
                                dict(lr=0.01, history_size=2, max_iter=5)])
def test_lbfgs_matches_torch_step_by_step(kw, objective, tol):
    x0 = np.array([-1.2, 1.0, -0.5, 0.8, 0.3])
    tx, px = tp.tensor(x0.copy()), torch.tensor(x0.copy())
    tx.requires_grad_(True)
    px.requires_grad_(True)
    opt, ref = tp.optim.LBFGS([tx], **kw), torch.optim.LBFGS([px], **kw)
    counts = {"tp": 0, "torch": 0}

    def closure_for(o, lib, x, key):
        def closure():
            counts[key] += 1
            o.zero_grad()
            loss = objective(lib, x)
            loss.backward()
            return loss
        return closure

    for step in range(6):
        l1 = opt.step(closure_for(opt, tp, tx, "tp"))
        l2 = ref.step(closure_for(ref, torch, px, "torch"))
        assert abs(float(l1) - float(l2.detach())) <= tol * max(1.0, abs(float(l2.detach())))
        np.testing.assert_allclose(tx.detach().numpy(), px.detach().numpy(), rtol=tol, atol=tol,
                                   err_msg=f"step {step}")
        assert counts["tp"] == counts["torch"]
    assert opt.state[tx]["func_evals"] == ref.state[px]["func_evals"]
    assert opt.state[tx]["n_iter"] == ref.state[px]["n_iter"]


def test_lbfgs_strong_wolfe_converges_on_a_model_and_errors():
    a, t = tp.tensor(A), tp.tensor(B)
    w = tp.zeros(4, 3, dtype=tp.float64)
    w.requires_grad_(True)
    opt = tp.optim.LBFGS([w], line_search_fn="strong_wolfe", max_iter=100, tolerance_grad=1e-10,
                         tolerance_change=1e-14)

    def closure():
        opt.zero_grad()
        loss = ((a @ w - t) ** 2).sum()
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure)
    lstsq = np.linalg.lstsq(A, B, rcond=None)[0]
    np.testing.assert_allclose(w.detach().numpy(), lstsq, rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="closure"):
        opt.step()
    w2 = tp.zeros(2)
    w2.requires_grad_(True)
    with pytest.raises(ValueError, match="parameter groups"):
        tp.optim.LBFGS([{"params": [w]}, {"params": [w2]}])
    # The state (curvature pairs) survives a state_dict round trip.
    opt2 = tp.optim.LBFGS([w], line_search_fn="strong_wolfe")
    opt2.load_state_dict(opt.state_dict())
    assert opt2.state[w]["n_iter"] == opt.state[w]["n_iter"]


# Under tp.compile(optimizer.step) the step count is a 0-d float32 tensor: factors computed from it
# in float32 (NAdam's 0.96 ** (step * momentum_decay)) drifted 3e-9 from eager. A few ulps remain
# (fused multiplications and divisions round differently).
@pytest.mark.parametrize("name,tol", [("Adamax", 1e-13), ("NAdam", 1e-13), ("RAdam", 1e-13), ("Adadelta", 1e-13)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_step_matches_eager(name, tol, dtype):
    dt = getattr(tp, dtype)
    tol = max(tol, 1e-6) if dtype == "float32" else tol
    x0 = rng.standard_normal(6)
    w, w2 = tp.tensor(x0).to(dt), tp.tensor(x0).to(dt)
    w.requires_grad_(True)
    w2.requires_grad_(True)
    kw = dict(lr=0.1, weight_decay=0.05)
    opt, opt2 = getattr(tp.optim, name)([w], **kw), getattr(tp.optim, name)([w2], **kw)
    step = tp.compile(opt.step)
    for i in range(8):  # RAdam changes branch at step 6
        for x, o, f in ((w, opt, step), (w2, opt2, opt2.step)):
            o.zero_grad()
            ((x ** 3).sum() + (x * x).sum()).backward()
            f()
        np.testing.assert_allclose(w.detach().numpy(), w2.detach().numpy(), rtol=tol, atol=tol, err_msg=f"step {i}")


def test_lbfgs_loaded_state_does_not_share_history_with_the_source():
    # load_state_dict used to keep the checkpoint's lists (old_dirs, old_stps, ro): stepping the
    # loaded optimizer appended to the source optimizer's curvature history.
    def make():
        w = tp.tensor(np.array([1.5, -0.5, 2.0]))
        w.requires_grad_(True)
        return w, tp.optim.LBFGS([w], max_iter=3, history_size=10)

    def closure_for(w, opt):
        def closure():
            opt.zero_grad()
            loss = ((w - 1) ** 4).sum() + (w ** 2).sum()
            loss.backward()
            return loss
        return closure

    w1, o1 = make()
    o1.step(closure_for(w1, o1))
    sd = o1.state_dict()
    w2, o2 = make()
    o2.load_state_dict(sd)
    before = len(o1.state[w1]["old_dirs"])
    o2.step(closure_for(w2, o2))
    assert len(o2.state[w2]["old_dirs"]) > before
    assert len(o1.state[w1]["old_dirs"]) == before
    assert o2.state[w2]["old_dirs"] is not o1.state[w1]["old_dirs"]
