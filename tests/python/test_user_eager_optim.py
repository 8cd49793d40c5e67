"""Optimizers and learning-rate schedules a PyTorch user reaches for, step by step against
PyTorch: RMSprop and Adagrad in every option, their state_dict round trip mid-training,
compiled steps, and the schedulers of a typical recipe (OneCycleLR, warmup + cosine via
SequentialLR, SGDR restarts with fractional epochs, ConstantLR, PolynomialLR,
MultiplicativeLR, ChainedScheduler), also resumed from a checkpoint."""

import io
import warnings

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")


def _model(mod):
    rng = np.random.default_rng(0)
    m = mod.nn.Sequential(mod.nn.Linear(6, 8), mod.nn.Tanh(), mod.nn.Linear(8, 3))
    with mod.no_grad():
        for p in m.parameters():
            p.copy_(mod.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.4))
    return m


def _data(mod):
    rng = np.random.default_rng(1)
    return (mod.tensor(rng.standard_normal((10, 6)).astype(np.float32)),
            mod.tensor(rng.integers(0, 3, 10)))


def _steps(mod, model, opt, n, step=None):
    x, y = _data(mod)
    losses = []
    for _ in range(n):
        opt.zero_grad()
        loss = mod.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        (step or opt.step)()
        losses.append(loss.item())
    return losses


def _params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


_CONFIGS = [
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-3, momentum=0.5, centered=True, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.5)),
    ("Adagrad", dict(lr=0.1, eps=1e-3, maximize=True)),
]


@pytest.mark.parametrize("name,kw", _CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(_CONFIGS)])
def test_optimizer_trains_like_torch(name, kw):
    got_m, want_m = _model(tp), _model(torch)
    got = _steps(tp, got_m, getattr(tp.optim, name)(got_m.parameters(), **kw), 8)
    want = _steps(torch, want_m, getattr(torch.optim, name)(want_m.parameters(), **kw), 8)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for a, b in zip(_params(got_m), _params(want_m)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name,kw", _CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(_CONFIGS)])
def test_optimizer_state_dict_resumes_exactly(name, kw):
    def run(mod):
        model = _model(mod)
        opt = getattr(mod.optim, name)(model.parameters(), **kw)
        before = opt.state_dict()
        _steps(mod, model, opt, 3)
        buf = io.BytesIO()
        mod.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
        buf.seek(0)
        ckpt = mod.load(buf)
        model2 = _model(mod)
        opt2 = getattr(mod.optim, name)(model2.parameters(), **kw)
        model2.load_state_dict(ckpt["model"])
        opt2.load_state_dict(ckpt["opt"])
        _steps(mod, model2, opt2, 3)
        saved = ckpt["opt"]
        return (len(before["state"]), sorted(saved["state"][0]), sorted(saved["param_groups"][0]), _params(model2))
    got, want = run(tp), run(torch)
    assert got[:3] == want[:3]  # Adagrad's state exists before the first step, as in PyTorch
    for a, b in zip(got[3], want[3]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name,kw", [("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
                                     ("Adagrad", dict(lr=0.1, lr_decay=0.1))])
def test_compiled_step_matches_torch(name, kw):
    got_m, want_m = _model(tp), _model(torch)
    opt = getattr(tp.optim, name)(got_m.parameters(), **kw)
    got = _steps(tp, got_m, opt, 5, step=tp.compile(opt.step))
    want = _steps(torch, want_m, getattr(torch.optim, name)(want_m.parameters(), **kw), 5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for a, b in zip(_params(got_m), _params(want_m)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_optimizer_argument_errors():
    params = list(_model(tp).parameters())
    for cls, kw in [(tp.optim.RMSprop, dict(lr=-1)), (tp.optim.RMSprop, dict(alpha=-1)),
                    (tp.optim.RMSprop, dict(momentum=-1)), (tp.optim.Adagrad, dict(lr_decay=-1)),
                    (tp.optim.Adagrad, dict(initial_accumulator_value=-1)), (tp.optim.Adagrad, dict(eps=-1))]:
        with pytest.raises(ValueError, match="Invalid"):
            cls(params, **kw)


# ---------------------------------------------------------------- schedulers
def _opt(mod, name="SGD"):
    m = mod.nn.Linear(2, 2)
    groups = [{"params": [m.weight]}, {"params": [m.bias], "lr": 0.05}]
    kw = dict(lr=0.1, momentum=0.9) if name == "SGD" else dict(lr=0.1)
    return getattr(mod.optim, name)(groups, **kw)


_SCHEDULES = {
    "ConstantLR": lambda L, o: L.ConstantLR(o, factor=0.5, total_iters=3),
    "PolynomialLR": lambda L, o: L.PolynomialLR(o, total_iters=6, power=2.0),
    "MultiplicativeLR": lambda L, o: L.MultiplicativeLR(o, [lambda e: 0.9, lambda e: 0.5 if e % 2 else 1.0]),
    "SGDR": lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=3),
    "SGDR-mult": lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=0.01),
    "OneCycleLR": lambda L, o: L.OneCycleLR(o, max_lr=1.0, total_steps=12),
    "OneCycleLR-linear-3phase": lambda L, o: L.OneCycleLR(o, max_lr=[1.0, 0.5], epochs=3, steps_per_epoch=4,
                                                          anneal_strategy="linear", three_phase=True, pct_start=0.25),
    "OneCycleLR-no-momentum": lambda L, o: L.OneCycleLR(o, max_lr=1.0, total_steps=12, cycle_momentum=False,
                                                        div_factor=10.0, final_div_factor=100.0),
    "SequentialLR-3": lambda L, o: L.SequentialLR(o, [L.ConstantLR(o, factor=0.1, total_iters=2),
                                                      L.ExponentialLR(o, gamma=0.9), L.StepLR(o, 3, 0.5)],
                                                  milestones=[2, 6]),
    "ChainedScheduler": lambda L, o: L.ChainedScheduler([L.ConstantLR(o, factor=0.1, total_iters=2),
                                                         L.ExponentialLR(o, gamma=0.9)]),
}


def _schedule(mod, build, opt_name="SGD", ckpt=None, epochs=None):
    opt = _opt(mod, opt_name)
    sched = build(mod.optim.lr_scheduler, opt)
    lrs = []
    for i in range(12):
        opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched.step() if epochs is None else sched.step(epochs[i])
        lrs.append([g["lr"] for g in opt.param_groups]
                   + [g.get("momentum", g.get("betas", (0.0,))[0]) for g in opt.param_groups])
        if ckpt == i:  # resume: a new optimizer and scheduler, then both state dicts
            saved_opt, saved_sched = opt.state_dict(), sched.state_dict()
            opt = _opt(mod, opt_name)
            opt.load_state_dict(saved_opt)
            sched = build(mod.optim.lr_scheduler, opt)
            sched.load_state_dict(saved_sched)
    return np.array(lrs), sched.get_last_lr()


@pytest.mark.parametrize("key", list(_SCHEDULES))
@pytest.mark.parametrize("ckpt", [None, 5])
def test_scheduler_values_match_torch(key, ckpt):
    got, got_last = _schedule(tp, _SCHEDULES[key], ckpt=ckpt)
    want, want_last = _schedule(torch, _SCHEDULES[key], ckpt=ckpt)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(got_last, want_last, rtol=1e-6)


def test_warmup_then_cosine_with_sequential_lr():
    def build(L, o):
        return L.SequentialLR(o, [L.LinearLR(o, start_factor=0.1, total_iters=4), L.CosineAnnealingLR(o, T_max=8)],
                              milestones=[4])
    np.testing.assert_allclose(_schedule(tp, build)[0], _schedule(torch, build)[0], rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("ckpt", [None, 4])
def test_one_cycle_drives_adam_beta1(ckpt):
    got = _schedule(tp, _SCHEDULES["OneCycleLR"], "Adam", ckpt)[0]
    want = _schedule(torch, _SCHEDULES["OneCycleLR"], "Adam", ckpt)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("key,epochs", [("SGDR", [i / 2 for i in range(1, 13)]),
                                        ("SGDR-mult", [i * 0.75 for i in range(1, 13)]),
                                        ("ConstantLR", [0, 1, 2, 3, 4, 2, 1, 5, 6, 7, 8, 9]),
                                        ("PolynomialLR", [0, 1, 2, 3, 4, 2, 1, 5, 6, 7, 8, 9])])
def test_scheduler_step_with_an_epoch(key, epochs):
    got = _schedule(tp, _SCHEDULES[key], epochs=epochs)[0]
    want = _schedule(torch, _SCHEDULES[key], epochs=epochs)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)


def test_scheduler_errors():
    L = tp.optim.lr_scheduler
    bad = [lambda o: L.OneCycleLR(o, max_lr=1.0),
           lambda o: L.OneCycleLR(o, max_lr=1.0, total_steps=5, pct_start=1),
           lambda o: L.OneCycleLR(o, max_lr=[1.0], total_steps=5),
           lambda o: L.CosineAnnealingWarmRestarts(o, T_0=0),
           lambda o: L.ConstantLR(o, factor=2),
           lambda o: L.SequentialLR(o, [L.StepLR(o, 2)], milestones=[1]),
           lambda o: L.SequentialLR(o, [L.StepLR(_opt(tp), 2), L.StepLR(o, 2)], milestones=[1]),
           lambda o: L.ChainedScheduler([])]
    for make in bad:
        with pytest.raises(ValueError):
            make(_opt(tp))
    with pytest.raises(ValueError, match="momentum"):
        L.OneCycleLR(_opt(tp, "Adagrad"), max_lr=1.0, total_steps=5)
    sched = L.OneCycleLR(_opt(tp), max_lr=1.0, total_steps=3)
    for _ in range(3):
        sched.step()
    with pytest.raises(ValueError, match="total steps"):
        sched.step()
