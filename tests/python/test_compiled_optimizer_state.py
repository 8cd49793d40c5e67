"""tp.compile(opt.step) against eager opt.step, step by step, when the optimizer's Python
state changes between steps: its state is reset (opt.state.clear(), a new defaultdict,
load_state_dict of a fresh optimizer), a parameter is replaced by a new object, and the
step is reached from inside another compiled function (refused: the capture would bake in
the state layout and the lr)."""
from collections import defaultdict

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn, optim

OPTIMIZERS = {
    "sgd_momentum": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
    "sgd_nesterov_wd": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
    "sgd_dampening": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.3),
    "adam": lambda ps: optim.Adam(ps, lr=0.1),
    "adam_amsgrad": lambda ps: optim.Adam(ps, lr=0.05, amsgrad=True, weight_decay=0.01),
    "adamw_amsgrad": lambda ps: optim.AdamW(ps, lr=0.05, amsgrad=True),
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01),
    "rmsprop_momentum_centered": lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
    "adagrad": lambda ps: optim.Adagrad(ps, lr=0.1),
    "adadelta": lambda ps: optim.Adadelta(ps, lr=1.0),
    "adamax": lambda ps: optim.Adamax(ps, lr=0.05),
    "nadam": lambda ps: optim.NAdam(ps, lr=0.05),
    "radam": lambda ps: optim.RAdam(ps, lr=0.05),
}


def _grads(m, i):
    g = tp.Generator().manual_seed(100 + i)
    x = tp.randn(5, 4, generator=g)
    m.zero_grad()
    (m(x) ** 2).sum().backward()


def _snapshot(m, opt):
    """Parameters and every state tensor (by parameter position and name), as numpy."""
    out = {f"p{k}": p.detach().numpy().copy() for k, p in enumerate(m.parameters())}
    for k, p in enumerate(opt.param_groups[0]["params"]):
        for name, v in sorted(opt.state.get(p, {}).items()):
            out[f"state{k}.{name}"] = v.numpy().copy() if isinstance(v, tp.Tensor) else v
    return out


def _compare(e, c, what):
    assert sorted(e) == sorted(c), f"{what}: state entries differ: eager {sorted(e)}, compiled {sorted(c)}"
    for k in e:
        np.testing.assert_allclose(np.asarray(c[k], dtype=np.float64), np.asarray(e[k], dtype=np.float64),
                                   rtol=1e-5, atol=1e-6, err_msg=f"{what}: {k}")


def _run_both(name, between, steps=6):
    """The same training run twice (eager opt.step, tp.compile(opt.step)); `between(i, m, opt)`
    changes the optimizer's Python state before step i. Compared after every step."""
    snaps = []
    for compiled in (False, True):
        tp.manual_seed(0)
        m = nn.Linear(4, 3)
        opt = OPTIMIZERS[name](m.parameters())
        step = tp.compile(opt.step) if compiled else opt.step
        run = []
        for i in range(steps):
            between(i, m, opt)
            _grads(m, i)
            step()
            run.append(_snapshot(m, opt))
        snaps.append(run)
    for i, (e, c) in enumerate(zip(*snaps)):
        _compare(e, c, f"{name} step {i}")


RESETS = {
    "clear": lambda opt, name: opt.state.clear(),
    "new_defaultdict": lambda opt, name: setattr(opt, "state", defaultdict(dict)),
    "load_fresh_state_dict": lambda opt, name: opt.load_state_dict(
        OPTIMIZERS[name](opt.param_groups[0]["params"]).state_dict()),
}


@pytest.mark.parametrize("reset", sorted(RESETS))
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_state_reset_between_compiled_steps_is_seen(name, reset):
    # The version captured at the first step (no state yet, creating it) has the same
    # key as a step after the reset, but does not replay the insertion into opt.state:
    # reused, it left opt.state[p] empty for good (momentum off, Adam re-initialised).
    # Reset twice, so a state created at construction (Adagrad) is recreated twice too.
    def between(i, m, opt):
        if i in (2, 4):
            RESETS[reset](opt, name)

    _run_both(name, between)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_replaced_parameter_gets_its_own_state(name):
    # After the weight is replaced by a new Parameter (and in the param group), the
    # old parameter stays a key of opt.state; a version captured before read and
    # wrote the old parameter's momentum buffer / moments.
    def between(i, m, opt):
        if i == 2:
            m.weight = nn.Parameter(tp.ones(3, 4) * 0.1)
            opt.param_groups[0]["params"][0] = m.weight
            if isinstance(opt, optim.Adagrad):  # (its state is made at construction, as PyTorch's)
                opt._init_state(m.weight, opt.param_groups[0])

    _run_both(name, between)


@pytest.mark.parametrize("name", ["sgd_momentum", "adam", "rmsprop_momentum_centered", "adadelta"])
def test_steady_state_steps_run_the_compiled_version(name):
    # The eager fallback for state-creating calls must not catch the steady state:
    # from the second step on the optimizer's Python update never runs.
    tp.manual_seed(0)
    m = nn.Linear(4, 3)
    opt = OPTIMIZERS[name](m.parameters())
    step = tp.compile(opt.step)
    for i in range(2):
        _grads(m, i)
        step()
    calls = []
    cls = type(opt)
    orig = cls._update
    cls._update = lambda self, *a: (calls.append(1), orig(self, *a))[1]
    try:
        for i in range(2, 5):
            _grads(m, i)
            step()
    finally:
        cls._update = orig
    assert calls == []
    opt.state.clear()  # the state-creating step runs eagerly (Python), then compiled again
    cls._update = lambda self, *a: (calls.append(1), orig(self, *a))[1]
    try:
        for i in range(5, 8):
            _grads(m, i)
            step()
    finally:
        cls._update = orig
    assert len(calls) == 2  # the weight and the bias, once


@pytest.mark.parametrize("name", ["sgd_momentum", "adam", "adagrad", "radam"])
def test_a_step_inside_another_compiled_function(name):
    # tp.compile(lambda: (clip_grad_norm_(...), opt.step())): captured once, its key knew
    # nothing of opt.state or lr, so the state was re-created at every call and never
    # written back, and a scheduler's lr was ignored. fullgraph=True refuses it; by
    # default the function runs step-wise (the step compiled on its own), as eager.
    def clip_and_step_of(m, opt):
        def clip_and_step():
            nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
        return clip_and_step

    tp.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = OPTIMIZERS[name](m.parameters())
    _grads_lin3(m)
    with pytest.raises(tp.compiler.CaptureError, match=r"step\(\) inside a compiled function.*tp\.compile\(opt\.step\)"):
        tp.compile(clip_and_step_of(m, opt), fullgraph=True)()
    # Nor through a compiled step called inside (it would be inlined into that capture).
    cstep = tp.compile(opt.step)
    with pytest.raises(tp.compiler.CaptureError, match=r"step\(\) inside a compiled function"):
        tp.compile(lambda: (nn.utils.clip_grad_norm_(m.parameters(), 1.0), cstep()), fullgraph=True)()

    def run(compiled):
        tp.manual_seed(0)
        m2 = nn.Linear(4, 3)
        opt2 = OPTIMIZERS[name](m2.parameters())
        f = clip_and_step_of(m2, opt2)
        f = tp.compile(f) if compiled else f
        out = []
        for i in range(4):
            _grads(m2, i)
            f()
            out.append(_snapshot(m2, opt2))
        return out

    for e, c in zip(run(False), run(True)):
        assert e.keys() == c.keys()
        for k in e:
            np.testing.assert_allclose(c[k], e[k], rtol=1e-5, atol=1e-7, err_msg=k)


def _grads_lin3(m):
    m.zero_grad()
    (m(tp.randn(4, 3)) ** 2).sum().backward()


def test_the_recommended_split_matches_eager_with_a_schedule():
    # What the refusal recommends: the clip compiled on its own, the step compiled itself.
    def run(compiled):
        tp.manual_seed(0)
        m = nn.Linear(3, 2)
        opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        sched = optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
        clip = lambda: nn.utils.clip_grad_norm_(m.parameters(), 1.0)  # noqa: E731
        clip, step = (tp.compile(clip), tp.compile(opt.step)) if compiled else (clip, opt.step)
        tp.manual_seed(1)
        out = []
        for _ in range(4):
            _grads_lin3(m)
            clip()
            step()
            sched.step()
            out.append(m.weight.detach().numpy().copy())
        return out

    for e, c in zip(run(False), run(True)):
        np.testing.assert_allclose(c, e, rtol=1e-6, atol=1e-7)


def test_a_scheduler_step_alone_inside_a_compiled_function():
    # (test_user_training_adversarial2 compiles opt.step() with sched.step(): the
    # optimizer's refusal comes first; the scheduler's own stays under fullgraph.)
    m = nn.Linear(3, 2)
    opt = optim.SGD(m.parameters(), lr=0.1)
    sched = optim.lr_scheduler.StepLR(opt, 2, 0.5)
    with pytest.raises(tp.compiler.CaptureError, match=r"StepLR\.step\(\) inside a compiled function"):
        tp.compile(lambda x: (sched.step(), x * 2)[1], fullgraph=True)(tp.tensor(1.0))
    assert opt.param_groups[0]["lr"] == 0.1
    f = tp.compile(lambda x: (sched.step(), x * 2)[1])  # step-wise: the schedule advances every call
    for _ in range(4):
        assert float(f(tp.tensor(1.0))) == 2.0
    assert opt.param_groups[0]["lr"] == 0.025


@pytest.mark.parametrize("name,versions", [("Adamax", 2), ("NAdam", 2), ("RAdam", 3), ("Adam", 2)])
def test_compiled_step_keeps_few_versions_and_equals_eager(name, versions):
    # Step-dependent factors (Adamax's lr / (1 - beta1^t), NAdam's mu product,
    # RAdam's rectification) read as Python numbers (addcdiv's value=, math.sqrt)
    # were data gates: a new version at every step until the version limit.
    # Versions: the state-creating first step, the steady one (RAdam: one more
    # when rho_t passes 5).
    tp.manual_seed(0)
    a, b = nn.Linear(8, 4), nn.Linear(8, 4)
    b.load_state_dict(a.state_dict())
    cls = getattr(optim, name)
    oa, ob = cls(a.parameters(), lr=0.01), cls(b.parameters(), lr=0.01)
    step = tp.compile(ob.step)
    x = tp.randn(16, 8)
    for _ in range(20):
        for m, o, s in ((a, oa, oa.step), (b, ob, step)):
            o.zero_grad()
            m(x).pow(2).mean().backward()
            s()
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(pb.detach().numpy(), pa.detach().numpy())
    assert step.num_specializations == versions


class _UserMomentum(optim.Optimizer):
    """A user's optimizer: its own step(), which never calls super().step()."""

    def __init__(self, params, lr=0.1, mom=0.9):
        super().__init__(params, dict(lr=lr, mom=mom))

    def step(self, closure=None):
        with tp.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    st = self.state[p]
                    if "buf" not in st:
                        st["buf"] = p.grad.clone()
                    else:
                        st["buf"].mul_(group["mom"]).add_(p.grad)
                    p.add_(st["buf"], alpha=-group["lr"])


def test_a_user_optimizers_own_step_inside_another_compiled_function_is_refused():
    # Before: its capture ran the Python once; after opt.state.clear() the cached
    # version (keyed by len(opt.state) == 0) never re-created the momentum buffers,
    # so every later step ran without momentum (weights off by 0.05 after 6 steps).
    tp.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = _UserMomentum(m.parameters())
    _grads_lin3(m)
    with pytest.raises(tp.compiler.CaptureError, match=r"_UserMomentum\.step\(\) inside a compiled function"):
        tp.compile(lambda: opt.step(), fullgraph=True)()
    assert not opt.state  # the refused capture changed nothing


def test_a_user_optimizers_compiled_step_matches_eager_across_a_state_reset():
    def run(compiled):
        tp.manual_seed(0)
        m = nn.Linear(4, 3)
        opt = _UserMomentum(m.parameters())
        step = tp.compile(opt.step) if compiled else opt.step
        out = []
        for i in range(6):
            if i == 3:
                opt.state.clear()
            _grads(m, i)
            step()
            out.append(_snapshot(m, opt))
        return out

    # The lifted lr and momentum are float64 inputs here (the user's update has no
    # _add_scaled), so compare within float32 rounding of each tensor's scale.
    for i, (e, c) in enumerate(zip(run(False), run(True))):
        assert sorted(e) == sorted(c), f"step {i}: state entries differ: {sorted(e)} vs {sorted(c)}"
        for k in e:
            np.testing.assert_allclose(c[k], e[k], rtol=1e-5, atol=1e-6 * np.abs(e[k]).max(), err_msg=f"step {i}: {k}")


def test_a_subclass_step_that_calls_super_still_works_eagerly_and_compiled():
    class Logged(optim.SGD):
        calls = 0

        def step(self, closure=None):
            Logged.calls += 1
            return super().step(closure)

    tp.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = Logged(m.parameters(), lr=0.1, momentum=0.9)
    _grads_lin3(m)
    opt.step()
    tp.compile(opt.step)()
    assert Logged.calls == 2
    with pytest.raises(tp.compiler.CaptureError, match=r"Logged\.step\(\) inside a compiled function"):
        tp.compile(lambda: opt.step(), fullgraph=True)()
