"""Training loops as a user writes them, compiled piece by piece (the model,
optimizer.step, gradient clipping), against eager TensorPlay and PyTorch."""

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F


def _data():
    tp.manual_seed(0)
    return tp.randn(16, 8), tp.randn(16, 4)


def _model():
    tp.manual_seed(1)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _torch_model():
    tm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    with torch.no_grad():
        for p, q in zip(tm.parameters(), _model().parameters()):
            p.copy_(torch.from_numpy(q.detach().numpy()))
    return tm


def _tp_losses(kw, compiled, clip):
    x, y = _data()
    model = _model()
    opt = tp.optim.SGD(model.parameters(), **kw)
    fwd, step = model, opt.step
    clip_fn = lambda: nn.utils.clip_grad_norm_(model.parameters(), clip)  # noqa: E731
    if compiled:
        fwd, step = tp.compile(model, strict_native=True), tp.compile(opt.step, strict_native=True)
        clip_fn = tp.compile(clip_fn, strict_native=True)
    losses, norms = [], []
    for _ in range(6):
        opt.zero_grad()
        loss = F.mse_loss(fwd(x), y)
        loss.backward()
        if clip is not None:
            norms.append(float(clip_fn()))
        step()
        losses.append(loss.item())
    return np.array(losses), norms, [p.detach().numpy().copy() for p in model.parameters()]


def _torch_losses(kw, clip):
    x, y = (torch.from_numpy(t.numpy()) for t in _data())
    tm = _torch_model()
    opt = torch.optim.SGD(tm.parameters(), **kw)
    losses, norms = [], []
    for _ in range(6):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(tm(x), y)
        loss.backward()
        if clip is not None:
            norms.append(float(torch.nn.utils.clip_grad_norm_(tm.parameters(), clip)))
        opt.step()
        losses.append(loss.item())
    return np.array(losses), norms, [p.detach().numpy() for p in tm.parameters()]


@pytest.mark.parametrize("kw", [
    dict(lr=0.1, momentum=0.9, weight_decay=0.01),  # the first step's buffer was a detach of an intermediate
    dict(lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.01, maximize=True),
])
def test_compiled_sgd_step_with_momentum_and_weight_decay(kw):
    want = _torch_losses(kw, None)
    got = _tp_losses(kw, True, None)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-6)
    for p, q in zip(got[2], want[2]):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("clip", [0.5, 50.0])  # clipping every step / never (the other branch)
def test_compiled_gradient_clipping_in_a_training_loop(clip):
    kw = dict(lr=0.05, momentum=0.5)
    want = _torch_losses(kw, clip)
    eager = _tp_losses(kw, False, clip)
    got = _tp_losses(kw, True, clip)
    np.testing.assert_allclose(eager[0], want[0], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4)
    for p, q in zip(got[2], want[2]):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-5)


def test_compiled_inf_norm_clipping():
    tp.manual_seed(1)
    model = nn.Linear(4, 3)
    clip = tp.compile(lambda: nn.utils.clip_grad_norm_(model.parameters(), 0.5, norm_type=float("inf")),
                      strict_native=True)
    x = tp.randn(5, 4)
    model(x).pow(2).sum().backward()
    want = [p.grad.numpy().copy() for p in model.parameters()]
    scale = 0.5 / (max(np.abs(g).max() for g in want) + 1e-6)
    clip()
    for p, g in zip(model.parameters(), want):
        np.testing.assert_allclose(p.grad.numpy(), g * scale, rtol=1e-5)


def test_detach_inside_a_compiled_loss_stops_the_gradient_as_in_eager():
    # A target network / stop-gradient term; x.detach() inside a compiled
    # function used to raise CaptureError.
    tp.manual_seed(0)
    net, target = nn.Linear(3, 3), nn.Linear(3, 3)
    x = tp.randn(4, 3)

    def loss_fn(x):
        y = net(x)
        return ((y - target(x).detach()) ** 2).mean() + (y * y.detach()).mean()

    compiled = tp.compile(loss_fn, strict_native=True)
    compiled(x).backward()
    got = [p.grad.numpy().copy() for p in net.parameters()]
    assert all(p.grad is None for p in target.parameters())
    net.zero_grad()
    loss_fn(x).backward()
    for g, p in zip(got, net.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-5, atol=1e-6)


class _ClampedLinear(nn.Module):
    """Weight constraints applied in forward under no_grad (max-norm style):
    the parameter is written in place and stays the leaf that gets the gradient."""

    def __init__(self, how):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.how = how

    def forward(self, x):
        with tp.no_grad():
            w = self.lin.weight
            if self.how == "clamp_":
                w.clamp_(-0.1, 0.1)
            elif self.how == "two writes":
                w.mul_(0.5)
                w.add_(0.01)
            elif self.how == "row fill_":
                w[0].fill_(0.2)
            else:
                w.copy_(w / w.norm())
        return self.lin(x)


@pytest.mark.parametrize("backend", ["stax", "aot_eager", "eager"])
@pytest.mark.parametrize("how", ["clamp_", "two writes", "row fill_", "copy_"])
def test_parameter_written_under_no_grad_in_forward_keeps_its_gradient(backend, how):
    # The compiled weight gradient used to be None (the written value was a
    # no_grad node of the graph, so no gradient reached the parameter).
    tp.manual_seed(0)
    model, ref = _ClampedLinear(how), _ClampedLinear(how)
    ref.load_state_dict(model.state_dict())
    compiled = tp.compile(model, backend=backend, strict_native=backend == "stax")
    x = tp.randn(2, 3)
    for _ in range(2):
        got, want = compiled(x), ref(x)
        got.sum().backward()
        want.sum().backward()
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
        assert model.lin.weight.grad is not None
        np.testing.assert_allclose(model.lin.weight.grad.numpy(), ref.lin.weight.grad.numpy(), rtol=1e-5)
        np.testing.assert_allclose(model.lin.weight.detach().numpy(), ref.lin.weight.detach().numpy(), rtol=1e-6)
        with tp.no_grad():
            model.lin.weight.add_(0.3)
            ref.lin.weight.add_(0.3)


def test_dynamic_batch_of_one_sliced_sequence_compiles():
    # A language model's `idx[:, :-1]` at batch size 1 is contiguous with a
    # stride on its size-1 dim that differs from the canonical one; Stax refused
    # it as "not contiguous" (an eager fallback, a BackendError under strict_native).
    f = tp.compile(lambda x: (x * 2).sum(-1) + x[:, :1], dynamic=True, strict_native=True)
    for n in (10, 7, 12):
        base = tp.randn(1, n)
        x = base[:, :-1]
        assert x.is_contiguous() and x.stride(0) == n
        np.testing.assert_allclose(f(x).numpy(), ((x * 2).sum(-1) + x[:, :1]).numpy(), rtol=1e-5)


# ---- compiled optimizer steps under learning-rate schedules ----

def _sched_run(make_opt, make_sched, compiled, backend, steps=6):
    tp.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    opt = make_opt(m.parameters())
    sched = make_sched(opt)
    step = tp.compile(opt.step, backend=backend) if compiled else opt.step
    x = tp.randn(5, 3)
    history = []
    for _ in range(steps):
        opt.zero_grad()
        (m(x) ** 2).mean().backward()
        step()
        sched.step()
        history.append([p.detach().numpy().copy() for p in m.parameters()])
    return history


_OPTIMIZERS = {
    "sgd": lambda ps: tp.optim.SGD(ps, lr=0.1),
    "sgd_momentum_wd": lambda ps: tp.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd_nesterov": lambda ps: tp.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    "sgd_dampening": lambda ps: tp.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1),
    "adam": lambda ps: tp.optim.Adam(ps, lr=0.01),
    "adam_wd_amsgrad": lambda ps: tp.optim.Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
    "adamw": lambda ps: tp.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
}
_SCHEDULES = {
    "exponential": lambda o: tp.optim.lr_scheduler.ExponentialLR(o, gamma=0.7),
    "step": lambda o: tp.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5),
    "cosine": lambda o: tp.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4),
}


@pytest.mark.parametrize("sched", sorted(_SCHEDULES))
@pytest.mark.parametrize("optim", sorted(_OPTIMIZERS))
def test_compiled_optimizer_step_under_a_schedule_equals_eager_step_by_step(optim, sched):
    want = _sched_run(_OPTIMIZERS[optim], _SCHEDULES[sched], False, None)
    before = tp.compiler.metrics.captures
    got = _sched_run(_OPTIMIZERS[optim], _SCHEDULES[sched], True, "aot_eager")
    # the first step (creating the state) and the later ones; a cosine schedule that
    # reaches lr == 0 exactly is no different: lr is an input whatever its value
    assert tp.compiler.metrics.captures - before <= 2
    for k, (w, g) in enumerate(zip(want, got)):
        for a, b in zip(w, g):
            np.testing.assert_array_equal(b, a, err_msg=f"step {k}")  # the same bits as eager


@pytest.mark.parametrize("optim", ["sgd_momentum_wd", "adamw"])
def test_compiled_optimizer_step_under_a_schedule_with_generated_code(optim):
    want = _sched_run(_OPTIMIZERS[optim], _SCHEDULES["exponential"], False, None)
    got = _sched_run(_OPTIMIZERS[optim], _SCHEDULES["exponential"], True, "stax")
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_compiled_optimizer_step_under_a_learning_rate_schedule_compiles_once():
    tp.compiler.reset()
    m = nn.Linear(2, 2)
    opt = tp.optim.SGD(m.parameters(), lr=0.1)
    sched = tp.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    step = tp.compile(opt.step, backend="aot_eager")
    for _ in range(4):
        m(tp.ones(1, 2)).sum().backward()
        step()
        sched.step()
    assert tp.compiler.metrics.recompiles <= 1


def test_hyperparameters_set_by_hand_and_a_zero_weight_decay_turned_on():
    tp.manual_seed(0)
    ms = [nn.Linear(2, 2) for _ in range(2)]
    ms[1].load_state_dict(ms[0].state_dict())
    opts = [tp.optim.SGD(m.parameters(), lr=0.1, momentum=0.5) for m in ms]
    step = tp.compile(opts[1].step, backend="aot_eager")
    for k in range(5):
        for m, o, s in zip(ms, opts, (opts[0].step, step)):
            if k == 2:
                o.param_groups[0]["weight_decay"] = 0.5  # a zero (constant) one becomes an input
            if k == 3:
                o.param_groups[0]["momentum"] = 0.25
            m.zero_grad()
            m(tp.ones(1, 2)).sum().backward()
            s()
        np.testing.assert_array_equal(ms[1].weight.detach().numpy(), ms[0].weight.detach().numpy())


@pytest.mark.parametrize("backend", ["aot_eager", "stax"])
def test_enable_grad_inside_a_compiled_function_called_under_no_grad(backend):
    w = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = tp.tensor([0.5, 1.0, -1.0], requires_grad=True)

    def f(x):
        a = (x * v).sum()  # under the caller's no_grad: no history
        with tp.enable_grad():
            r = (x * w).sum() * a
        return r, a

    g = tp.compile(f, backend=backend)
    x = tp.tensor([1.0, -2.0, 0.5])
    with tp.no_grad():
        r, a = g(x)
    assert r.requires_grad and not a.requires_grad
    r.backward()
    np.testing.assert_allclose(w.grad.numpy(), x.numpy() * a.item(), rtol=1e-6)
    assert v.grad is None
    with tp.no_grad():  # the function with no switch inside: nothing requires grad
        assert not tp.compile(lambda x: (x * w).sum(), backend=backend)(x).requires_grad


@pytest.mark.parametrize("optim", ["adam", "adamw", "sgd_momentum_wd"])
def test_compiled_optimizer_step_with_generated_code_on_same_shaped_parameters(optim):
    # Stax used a parameter's memory (its in-place result) as the scratch of a
    # value shared between the parameters' loop nests before reading the
    # parameter: every parameter after the first came out as garbage.
    tp.manual_seed(0)
    ps = [[tp.randn(8).requires_grad_(True) for _ in range(4)]]
    ps.append([p.detach().clone().requires_grad_(True) for p in ps[0]])
    opts = [_OPTIMIZERS[optim](p) for p in ps]
    step = tp.compile(opts[1].step, backend="stax")
    for _ in range(3):
        for i in range(2):
            opts[i].zero_grad()
            sum((p * (j + 1.0)).sum() ** 2 for j, p in enumerate(ps[i])).backward()
            (opts[i].step if i == 0 else step)()
        for a, b in zip(*ps):
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6, atol=1e-7)
