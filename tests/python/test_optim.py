"""tensorplay.optim: optimizers and lr schedulers against PyTorch (same start, same gradients, several steps)."""
import math

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn, optim


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def arr(t):
    return t.detach().numpy()


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def make_params(torch, dtype=np.float32):
    rng = np.random.default_rng(0)
    inits = [rng.standard_normal((3, 4)).astype(dtype), rng.standard_normal(4).astype(dtype)]
    tp_ps = [nn.Parameter(tp.tensor(a, dtype=tp.float64 if dtype == np.float64 else tp.float32)) for a in inits]
    t_ps = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in inits]
    return tp_ps, t_ps


def loss_tp(ps, x):
    y = tp.matmul(x, ps[0]) + ps[1]
    return (y * y).sum() + (ps[0] * ps[0] * ps[0]).sum()


def loss_torch(ps, x):
    y = x @ ps[0] + ps[1]
    return (y * y).sum() + (ps[0] ** 3).sum()


def run_side_by_side(torch, tp_cls, t_cls, kw, steps=6, dtype=np.float32, groups=None, rtol=1e-5, atol=1e-6):
    tp_ps, t_ps = make_params(torch, dtype)
    if groups:
        opt = tp_cls([dict(params=[tp_ps[0]], **groups[0]), dict(params=[tp_ps[1]], **groups[1])], **kw)
        topt = t_cls([dict(params=[t_ps[0]], **groups[0]), dict(params=[t_ps[1]], **groups[1])], **kw)
    else:
        opt, topt = tp_cls(tp_ps, **kw), t_cls(t_ps, **kw)
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(dtype)
    for _ in range(steps):
        opt.zero_grad()
        topt.zero_grad()
        loss_tp(tp_ps, tp.tensor(x)).backward()
        loss_torch(t_ps, torch.from_numpy(x)).backward()
        opt.step()
        topt.step()
        for a, b in zip(tp_ps, t_ps):
            close(arr(a), b.detach().numpy(), rtol, atol)
    return opt, topt, tp_ps, t_ps


SGD_CASES = [
    dict(lr=0.01),
    dict(lr=0.01, momentum=0.9),
    dict(lr=0.01, momentum=0.9, dampening=0.3),
    dict(lr=0.01, momentum=0.9, nesterov=True),
    dict(lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.1),
    dict(lr=0.01, weight_decay=0.05, maximize=True),
    dict(lr=0.005, momentum=0.5, weight_decay=0.01, maximize=True, dampening=0.1),
]

ADAM_CASES = [
    dict(),
    dict(lr=0.01, betas=(0.8, 0.9)),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.01, amsgrad=True, weight_decay=0.05, maximize=True),
    dict(lr=0.01, eps=1e-3),
]


@pytest.mark.parametrize("kw", SGD_CASES)
def test_sgd_matches_torch(torch, kw):
    run_side_by_side(torch, optim.SGD, torch.optim.SGD, kw)


@pytest.mark.parametrize("kw", ADAM_CASES)
def test_adam_matches_torch(torch, kw):
    run_side_by_side(torch, optim.Adam, torch.optim.Adam, kw, steps=8)


@pytest.mark.parametrize("kw", ADAM_CASES + [dict(lr=0.01, weight_decay=0.5)])
def test_adamw_matches_torch(torch, kw):
    run_side_by_side(torch, optim.AdamW, torch.optim.AdamW, kw, steps=8)


@pytest.mark.parametrize("cls", ["SGD", "Adam", "AdamW"])
def test_float64(torch, cls):
    kw = dict(lr=0.01, momentum=0.9) if cls == "SGD" else dict(lr=0.01, weight_decay=0.1, amsgrad=True)
    _, _, tp_ps, _ = run_side_by_side(torch, getattr(optim, cls), getattr(torch.optim, cls), kw,
                                      dtype=np.float64, rtol=1e-12, atol=1e-12)
    assert tp_ps[0].dtype == tp.float64


def test_param_groups_with_own_hyperparameters(torch):
    groups = [dict(lr=0.1), dict(lr=0.01, momentum=0.5)]
    opt, topt, _, _ = run_side_by_side(torch, optim.SGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9),
                                       groups=groups)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]
    assert [g["momentum"] for g in opt.param_groups] == [0.9, 0.5]


def test_state_dict_format_matches_torch(torch):
    for cls, kw in [("SGD", dict(lr=0.1, momentum=0.9)), ("SGD", dict(lr=0.1)), ("Adam", dict(amsgrad=True)),
                    ("AdamW", {})]:
        opt, topt, _, _ = run_side_by_side(torch, getattr(optim, cls), getattr(torch.optim, cls), kw, steps=2)
        sd, tsd = opt.state_dict(), topt.state_dict()
        assert sd["param_groups"] == [
            {k: (tuple(v) if isinstance(v, list) and k == "betas" else v) for k, v in g.items()}
            for g in tsd["param_groups"]]
        assert sorted(sd["state"]) == sorted(tsd["state"])
        for i, s in sd["state"].items():
            assert list(s) == list(tsd["state"][i])
            for k, v in s.items():
                close(arr(v), tsd["state"][i][k].numpy())
        if "step" in sd["state"].get(0, {}):
            assert sd["state"][0]["step"].dim() == 0 and sd["state"][0]["step"].dtype == tp.float32


@pytest.mark.parametrize("cls,kw", [("SGD", dict(lr=0.01, momentum=0.9, nesterov=True)),
                                    ("Adam", dict(lr=0.01, amsgrad=True)), ("AdamW", dict(lr=0.01))])
def test_load_state_dict_resumes_exactly(cls, kw):
    x = tp.tensor(np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))

    def train(ps, opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            loss_tp(ps, x).backward()
            opt.step()

    rng = np.random.default_rng(0)
    inits = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)]
    ref = [nn.Parameter(tp.tensor(a)) for a in inits]
    ref_opt = getattr(optim, cls)(ref, **kw)
    train(ref, ref_opt, 6)

    a = [nn.Parameter(tp.tensor(v)) for v in inits]
    a_opt = getattr(optim, cls)(a, **kw)
    train(a, a_opt, 3)
    b = [nn.Parameter(p.detach().clone()) for p in a]
    b_opt = getattr(optim, cls)(b, **kw)
    b_opt.load_state_dict(a_opt.state_dict())
    train(b, b_opt, 3)
    for p, q in zip(b, ref):
        close(arr(p), arr(q), 0, 0)
    # The loaded state is a copy, never an alias of the source optimizer's.
    if cls != "SGD":
        s_a, s_b = a_opt.state[a[0]], b_opt.state[b[0]]
        assert s_a["exp_avg"].data_ptr() != s_b["exp_avg"].data_ptr()


def test_load_state_dict_mismatch():
    p = [nn.Parameter(tp.ones(2)), nn.Parameter(tp.ones(3))]
    sd = optim.SGD(p, lr=0.1).state_dict()
    with pytest.raises(ValueError, match="size"):
        optim.SGD(p[:1], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="number of parameter groups"):
        optim.SGD([{"params": p[:1]}, {"params": p[1:]}], lr=0.1).load_state_dict(sd)


def test_zero_grad_modes():
    p = nn.Parameter(tp.ones(3))
    opt = optim.SGD([p], lr=0.1)
    (p * 2).sum().backward()
    opt.zero_grad(set_to_none=False)
    close(arr(p.grad), np.zeros(3))
    opt.zero_grad()
    assert p.grad is None


def test_step_skips_params_without_grad_and_closure():
    p, q = nn.Parameter(tp.ones(2)), nn.Parameter(tp.ones(2))
    opt = optim.Adam([p, q], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 2.0
    close(arr(q), [1.0, 1.0])
    assert q not in opt.state and len(opt.state) == 1
    close(arr(p), [0.9, 0.9], 1e-6)


def test_add_param_group_and_errors():
    p = nn.Parameter(tp.ones(2))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    q = nn.Parameter(tp.ones(1))
    opt.add_param_group({"params": q, "lr": 0.5})
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["momentum"] == 0.9
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [p]})
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="Tensors"):
        optim.SGD([1.0], lr=0.1)
    with pytest.raises(TypeError, match="iterable"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="ordered"):
        optim.SGD({p}, lr=0.1)
    with pytest.raises(ValueError, match="learning rate"):
        optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="beta"):
        optim.Adam([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], lr=0.1, nesterov=True)


def test_works_with_module_parameters():
    m = nn.Sequential(nn.Identity())
    m.w = nn.Parameter(tp.tensor([3.0]))
    opt = optim.SGD(m.parameters(), lr=0.25)
    for _ in range(20):
        opt.zero_grad()
        (m.w * m.w).sum().backward()
        opt.step()
    assert abs(m.w.item()) < 1e-3


def test_repr():
    r = repr(optim.SGD([nn.Parameter(tp.ones(1))], lr=0.1))
    assert r.startswith("SGD (\nParameter Group 0\n") and "    lr: 0.1" in r


# ---------------------------------------------------------------- schedulers
def _lr_sequences(torch, make_tp, make_torch, steps=25, lrs=(0.1, 0.05)):
    p, tp_q = nn.Parameter(tp.ones(1)), nn.Parameter(tp.ones(1))
    tq, tq2 = torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))
    opt = optim.SGD([{"params": [p], "lr": lrs[0]}, {"params": [tp_q], "lr": lrs[1]}], lr=lrs[0])
    topt = torch.optim.SGD([{"params": [tq], "lr": lrs[0]}, {"params": [tq2], "lr": lrs[1]}], lr=lrs[0])
    sched, tsched = make_tp(opt), make_torch(topt)
    ours, theirs = [sched.get_last_lr()], [tsched.get_last_lr()]
    for _ in range(steps):
        opt.step()
        topt.step()
        sched.step()
        tsched.step()
        ours.append(sched.get_last_lr())
        theirs.append(tsched.get_last_lr())
        assert [g["lr"] for g in opt.param_groups] == ours[-1]
    return np.array(ours), np.array(theirs), sched, tsched


def test_step_lr(torch):
    ours, theirs, s, ts = _lr_sequences(torch, lambda o: optim.lr_scheduler.StepLR(o, 4, gamma=0.5),
                                        lambda o: torch.optim.lr_scheduler.StepLR(o, 4, gamma=0.5))
    close(ours, theirs, 1e-12, 1e-15)
    assert s.last_epoch == ts.last_epoch == 25


@pytest.mark.parametrize("eta_min", [0.0, 0.01])
def test_cosine_annealing_lr(torch, eta_min):
    ours, theirs, _, _ = _lr_sequences(
        torch, lambda o: optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=eta_min),
        lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=eta_min), steps=35)
    close(ours, theirs, 1e-6, 1e-9)


def test_lambda_lr(torch):
    fns = [lambda e: 0.9 ** e, lambda e: 1.0 / (e + 1)]
    ours, theirs, _, _ = _lr_sequences(torch, lambda o: optim.lr_scheduler.LambdaLR(o, fns),
                                       lambda o: torch.optim.lr_scheduler.LambdaLR(o, fns))
    close(ours, theirs, 1e-12, 1e-15)
    single, tsingle, _, _ = _lr_sequences(torch, lambda o: optim.lr_scheduler.LambdaLR(o, lambda e: 0.5 ** e),
                                          lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 0.5 ** e))
    close(single, tsingle, 1e-12, 1e-15)


def test_scheduler_sets_initial_lr_and_state_dict_roundtrip():
    p = nn.Parameter(tp.ones(1))
    opt = optim.SGD([p], lr=1.0)
    s = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    assert opt.param_groups[0]["initial_lr"] == 1.0
    for _ in range(3):
        s.step()
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 3 and sd["base_lrs"] == [1.0]
    opt2 = optim.SGD([nn.Parameter(tp.ones(1))], lr=1.0)
    s2 = optim.lr_scheduler.StepLR(opt2, step_size=5)
    s2.load_state_dict(sd)
    assert s2.step_size == 2 and s2.last_epoch == 3 and s2.get_last_lr() == s.get_last_lr()


def test_cosine_closed_form_values():
    opt = optim.SGD([nn.Parameter(tp.ones(1))], lr=2.0)
    s = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.0)
    seen = [s.get_last_lr()[0]]
    for _ in range(8):
        s.step()
        seen.append(s.get_last_lr()[0])
    expected = [(1 + math.cos(math.pi * e / 4)) for e in range(9)]
    close(seen, expected, 1e-12, 1e-12)


def test_lambda_lr_wrong_count_and_state_dict():
    opt = optim.SGD([nn.Parameter(tp.ones(1))], lr=1.0)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas"):
        optim.lr_scheduler.LambdaLR(opt, [lambda e: 1, lambda e: 2])

    class Warmup:
        def __init__(self):
            self.n = 3

        def __call__(self, e):
            return min(1.0, (e + 1) / self.n)

    s = optim.lr_scheduler.LambdaLR(opt, [Warmup()])
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [{"n": 3}]
    assert optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0).state_dict()["lr_lambdas"] == [None]


def test_scheduler_requires_optimizer():
    with pytest.raises(TypeError, match="not an Optimizer"):
        optim.lr_scheduler.StepLR(object(), 2)


@pytest.mark.parametrize("name,kw", [
    ("MultiStepLR", dict(milestones=[3, 7, 7, 12], gamma=0.5)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("LinearLR", dict(start_factor=0.1, total_iters=6)),
    ("LinearLR", dict(start_factor=1.0, end_factor=0.2, total_iters=4)),
])
def test_more_schedulers_match_torch(torch, name, kw):
    ours, theirs, _, _ = _lr_sequences(torch, lambda o: getattr(optim.lr_scheduler, name)(o, **kw),
                                       lambda o: getattr(torch.optim.lr_scheduler, name)(o, **kw))
    close(ours, theirs, 1e-9, 1e-15)


@pytest.mark.parametrize("name,kw", [
    ("StepLR", dict(step_size=3, gamma=0.5)), ("MultiStepLR", dict(milestones=[2, 5], gamma=0.1)),
    ("ExponentialLR", dict(gamma=0.8)), ("LinearLR", dict(start_factor=0.25, total_iters=4)),
    ("CosineAnnealingLR", dict(T_max=6)),
])
def test_step_with_epoch_uses_closed_form(name, kw):
    opt = optim.SGD([nn.Parameter(tp.ones(1))], lr=1.0)
    s = getattr(optim.lr_scheduler, name)(opt, **kw)
    seq = [s.get_last_lr()[0]]
    for _ in range(8):
        s.step()
        seq.append(s.get_last_lr()[0])
    opt2 = optim.SGD([nn.Parameter(tp.ones(1))], lr=1.0)
    s2 = getattr(optim.lr_scheduler, name)(opt2, **kw)
    for e in (5, 2, 8):
        with pytest.warns(UserWarning, match="deprecated"):
            s2.step(e)
        assert s2.get_last_lr()[0] == pytest.approx(seq[e], rel=1e-12)


def test_linear_lr_validates_factors():
    opt = optim.SGD([nn.Parameter(tp.ones(1))], lr=1.0)
    with pytest.raises(ValueError, match="Starting"):
        optim.lr_scheduler.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="Ending"):
        optim.lr_scheduler.LinearLR(opt, end_factor=2)


@pytest.mark.parametrize("kw", [dict(), dict(mode="max", factor=0.5, patience=2), dict(threshold_mode="abs",
                                threshold=0.05, patience=1, cooldown=2), dict(patience=0, min_lr=[0.02, 0.004])])
def test_reduce_lr_on_plateau_matches_torch(torch, kw):
    metrics = [1.0, 0.9, 0.95, 0.97, 0.96, 0.89, 0.9, 0.9, 0.91, 0.92, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]
    p, q = nn.Parameter(tp.ones(1)), nn.Parameter(tp.ones(1))
    tq, tq2 = torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))
    opt = optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.05}], lr=0.1)
    topt = torch.optim.SGD([{"params": [tq]}, {"params": [tq2], "lr": 0.05}], lr=0.1)
    s = optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
    for value in metrics:
        s.step(value)
        ts.step(value)
        close(s.get_last_lr(), ts.get_last_lr(), 1e-12, 1e-15)
        assert s.num_bad_epochs == ts.num_bad_epochs and s.best == ts.best
    with pytest.raises(ValueError, match="Factor"):
        optim.lr_scheduler.ReduceLROnPlateau(opt, factor=1.0)
