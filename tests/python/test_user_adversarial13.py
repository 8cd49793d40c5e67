"""Outside testing, thirteenth round: PyTorch-style training steps under
tp.compile (optimizers with a learning-rate schedule, compiled opt.step, the
step-wise whole training step) compared with eager TensorPlay and PyTorch."""

import collections
import dataclasses
import functools
import typing
import warnings

import numpy as np
import pytest

import tensorplay as tp

nn = tp.nn


def _fallbacks(seen):
    return [str(w.message) for w in seen if "eagerly" in str(w.message)]


# ------------------- compiled optimizer steps under a learning-rate schedule

@pytest.mark.parametrize("name,kw", [
    ("RMSprop", {}),
    ("RMSprop", {"momentum": 0.9, "centered": True, "weight_decay": 0.1}),
    ("Adadelta", {"weight_decay": 0.1}),
    ("Adafactor", {"weight_decay": 0.1}),
])
def test_a_compiled_step_under_a_schedule_keeps_one_version(name, kw):
    # RMSprop and Adadelta passed the lifted lr (a 0-d tensor of the graph) as
    # add_'s alpha / addcdiv_'s value, a number, and Adafactor read float(lr):
    # a data gate, so every new lr compiled another version and after 8 the
    # step ran eagerly with a warning.
    res = []
    for compiled in (False, True):
        tp.manual_seed(0)
        m = nn.Linear(3, 2)
        opt = getattr(tp.optim, name)(m.parameters(), lr=0.01, **kw)
        sch = tp.optim.lr_scheduler.LambdaLR(opt, lambda e: 1 / (1 + e))
        st = tp.compile(opt.step) if compiled else opt.step
        x = tp.randn(4, 3)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(12):
                opt.zero_grad()
                m(x).pow(2).sum().backward()
                st()
                sch.step()
        assert not _fallbacks(seen)
        res.append([p.detach().numpy().copy() for p in m.parameters()])
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("how", ["step", "training_step"])
def test_asgd_under_compile_trains_as_eager(how):
    # ASGD's update raised NotImplementedError under tp.compile(opt.step), and
    # so a compiled whole training step with ASGD crashed (the step-wise run
    # falls back only on capture errors).
    res = []
    for compiled in (False, True):
        tp.manual_seed(0)
        m = nn.Linear(3, 2)
        opt = tp.optim.ASGD(m.parameters(), lr=0.05, t0=3, weight_decay=0.01)
        sch = tp.optim.lr_scheduler.LambdaLR(opt, lambda e: 1 / (1 + e))
        st = tp.compile(opt.step) if compiled and how == "step" else opt.step

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            st()
            sch.step()
            return loss.detach()

        f = tp.compile(step) if compiled and how == "training_step" else step
        x = tp.randn(4, 3)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(8):
                f(x)
        assert not _fallbacks(seen)
        s = opt.state[m.weight]
        res.append([m.weight.detach().numpy().copy(), s["ax"].numpy().copy(), s["eta"].numpy().copy(),
                    s["mu"].numpy().copy()])
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)


# ------------------- Python side effects of a step-wise training step

class _CountingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1
        h = self.lin(x)
        self.last = h.detach()  # a capture refuses this: the module runs eagerly
        return h.relu()


def test_a_module_whose_capture_fails_counts_its_calls_once():
    # In a step-wise training step each module call is compiled; the capture of
    # this forward ran `self.calls += 1` and was refused at the tensor
    # assignment, and the eager fallback ran it again: 5 calls after 4 steps.
    out = []
    for compiled in (False, True):
        tp.manual_seed(0)
        m = _CountingNet()
        opt = tp.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m(x).sum()
            loss.backward()
            opt.step()
            return loss.detach()

        f = tp.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(4):
                f(tp.randn(3, 4))
        out.append((m.calls, m.last.numpy().copy(), m.lin.weight.detach().numpy().copy()))
    assert out[0][0] == out[1][0] == 4
    np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(out[1][2], out[0][2], rtol=1e-6, atol=1e-7)


_steps = {"n": 0}
_log = []


def _delegated_update(model, opt, x):
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    return loss


def test_a_step_that_delegates_backward_to_a_helper_runs_its_python_once():
    # A compiled function that does not itself name backward was captured first;
    # the backward in the helper it calls was refused and the function re-ran
    # step-wise, so the step counter and the log saw the first step twice.
    tp.manual_seed(0)
    m = nn.Linear(4, 2)
    opt = tp.optim.SGD(m.parameters(), lr=0.1)
    _steps["n"] = 0
    _log.clear()

    def train_step(x):
        _steps["n"] += 1
        _log.append(_steps["n"])
        return _delegated_update(m, opt, x).detach()

    class Trainer:
        def __init__(self):
            self.n = 0

        def fit(self, x):
            self.n += 1
            return self._update(x)

        def _update(self, x):
            return _delegated_update(m, opt, x).item()

    cf = tp.compile(train_step)
    t = Trainer()
    ct = tp.compile(t.fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            cf(tp.randn(3, 4))
            ct(tp.randn(3, 4))
    assert _steps["n"] == 3 and _log == [1, 2, 3]
    assert t.n == 3


def test_a_training_step_with_a_gradient_penalty_trains_as_eager():
    # WGAN-GP's penalty differentiates a gradient (autograd.grad with
    # create_graph=True). The step-wise run compiled the critic, whose backward
    # region has no derivative: the compiled step raised "double backward
    # through the compiled region" where eager (and the same code uncompiled)
    # trains. Its modules now run eagerly (with a warning saying why).
    out = []
    for compiled in (False, True):
        tp.manual_seed(0)
        critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
        opt = tp.optim.Adam(critic.parameters(), lr=0.01)

        def step(real, fake):
            opt.zero_grad()
            eps = tp.rand(real.shape[0], 1)
            mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
            score = critic(mix)
            g, = tp.autograd.grad(score.sum(), mix, create_graph=True)
            loss = critic(fake).mean() - critic(real).mean() + 10 * (g.norm(2, dim=1) - 1).pow(2).mean()
            loss.backward()
            opt.step()
            return loss.item()

        f = tp.compile(step) if compiled else step
        rs = np.random.RandomState(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            losses = [f(tp.tensor(rs.randn(6, 2).astype(np.float32)), tp.tensor(rs.randn(6, 2).astype(np.float32)))
                      for _ in range(4)]
        out.append((losses, [p.detach().numpy().copy() for p in critic.parameters()]))
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-5, atol=1e-6)
    for a, b in zip(out[1][1], out[0][1]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


# ------------------- model outputs as dataclasses (transformers' ModelOutput style)

@dataclasses.dataclass
class _Output:
    loss: typing.Any = None
    logits: typing.Any = None
    hidden: typing.Any = None
    n_tokens: int = dataclasses.field(default=0, init=False)


@dataclasses.dataclass(frozen=True)
class _FrozenOutput:
    logits: typing.Any
    scale: float


class _RecordNet(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.kind = kind

    def forward(self, x, labels=None):
        logits = self.lin(x)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        if self.kind == "dataclass":
            out = _Output(loss=loss, logits=logits, hidden=(x.tanh(), None))
            out.n_tokens = 7
            return out
        if self.kind == "frozen":
            return _FrozenOutput(logits=logits, scale=0.5)
        return collections.OrderedDict([("logits", logits), ("loss", loss)])


@pytest.mark.parametrize("kind", ["dataclass", "frozen", "ordereddict"])
def test_a_model_returning_a_dataclass_or_ordereddict_compiles(kind):
    # tp.compile(model) raised CaptureError "compiled functions must return
    # tensors, numbers, None, or tuples/lists/dicts of them, got _Output", and in
    # a compiled training step such a model ran eagerly with a warning.
    def loss_of(o):
        if kind == "frozen":
            return o.logits.pow(2).mean() * o.scale
        return o["loss"] if kind == "ordereddict" else o.loss

    tp.manual_seed(0)
    m = _RecordNet(kind)
    x, y = tp.randn(5, 4), tp.tensor([0, 1, 2, 1, 0])
    cm = tp.compile(m)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        oc = cm(x, labels=y)
    assert not _fallbacks(seen)
    oe = m(x, labels=y)
    assert type(oc) is type(oe)
    if kind == "dataclass":
        assert oc.n_tokens == 7 and oc.hidden[1] is None
        np.testing.assert_allclose(oc.hidden[0].numpy(), oe.hidden[0].numpy(), rtol=1e-6)
    gc = tp.autograd.grad(loss_of(oc), [m.lin.weight])[0]
    ge = tp.autograd.grad(loss_of(oe), [m.lin.weight])[0]
    np.testing.assert_allclose(loss_of(oc).item(), loss_of(oe).item(), rtol=1e-6)
    np.testing.assert_allclose(gc.numpy(), ge.numpy(), rtol=1e-5, atol=1e-7)

    # and inside a compiled training step (the model is a step-wise piece)
    res = []
    for compiled in (False, True):
        tp.manual_seed(0)
        m = _RecordNet(kind)
        opt = tp.optim.SGD(m.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = loss_of(m(x, labels=y))
            loss.backward()
            opt.step()
            return loss.item()

        f = tp.compile(step) if compiled else step
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            losses = [f(x, y) for _ in range(3)]
        assert not _fallbacks(seen)
        res.append((losses, m.lin.weight.detach().numpy().copy()))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-6)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["SGD", "AdamW"])
@pytest.mark.parametrize("np_type", [np.float64, np.float32])
def test_a_numpy_learning_rate_schedule_under_a_compiled_step(name, np_type):
    # `for g in opt.param_groups: g["lr"] = lrs[i]` with lrs from np.linspace:
    # only exact Python floats were lifted to inputs, so each np.float64 lr was
    # a new version (compiled at every step, and SGD's update then differed
    # from eager in the last bit), and AdamW's `lr * wd` with the lifted wd
    # made NumPy convert the graph tensor: CaptureError "cannot capture Tensor.numpy()".
    lrs = np.linspace(0.01, 0.001, 10)
    res = []
    for compiled in (False, True):
        tp.manual_seed(0)
        m = nn.Linear(3, 2)
        opt = getattr(tp.optim, name)(m.parameters(), lr=0.01, weight_decay=0.01, momentum=0.9) \
            if name == "SGD" else tp.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.01)
        st = tp.compile(opt.step) if compiled else opt.step
        x = tp.randn(4, 3)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for i in range(10):
                for g in opt.param_groups:
                    g["lr"] = np_type(lrs[i])
                opt.zero_grad()
                m(x).pow(2).sum().backward()
                st()
        assert not _fallbacks(seen)
        res.append([p.detach().numpy().copy() for p in m.parameters()])
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)


class _Tempered(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = 1.0

    def forward(self, x):
        return (x / self.t).softmax(-1)


@pytest.mark.parametrize("np_type", [np.float64, np.float32])
def test_numpy_float_arguments_and_attributes_become_inputs_after_a_change(np_type):
    # A scale passed as a NumPy float (or a module's `self.t = np.float32(...)`,
    # values taken from a NumPy schedule) was kept by value: every new value
    # compiled a new version, without bound; Python floats become inputs once
    # they change (automatic dynamic floats), and NumPy ones now do too.
    def f(x, s):
        return (x * s).sin()

    cf = tp.compile(f)
    m = _Tempered()
    cm = tp.compile(m)
    x = tp.randn(4, 5)
    for i in range(10):
        s = np_type(0.1 * (i + 1))
        np.testing.assert_allclose(cf(x, s).numpy(), f(x, s).numpy(), rtol=1e-6, atol=1e-7)
        m.t = np_type(0.5 + 0.1 * i)
        np.testing.assert_allclose(cm(x).numpy(), m(x).numpy(), rtol=1e-6, atol=1e-7)
    assert cf.num_specializations <= 3, cf.num_specializations
    assert cm.num_specializations <= 3, cm.num_specializations


def test_a_compiled_function_calling_an_optimizer_step_that_was_itself_compiled():
    # `opt.step = tp.compile(opt.step)` and then, as PyTorch's "compiling the
    # optimizer" recipe does, a compiled function that calls opt.step(): the
    # compiled step refused the enclosing capture without noting the refusal,
    # so instead of running step-wise the call raised CaptureError.
    res = []
    for compiled in (False, True):
        tp.manual_seed(0)
        m = nn.Linear(3, 2)
        opt = tp.optim.Adam(m.parameters(), lr=0.01)
        sch = tp.optim.lr_scheduler.StepLR(opt, 2, 0.5)
        if compiled:
            opt.step = tp.compile(opt.step)

        def fn():
            opt.step()

        f = tp.compile(fn) if compiled else fn
        x = tp.randn(4, 3)
        for _ in range(6):
            opt.zero_grad()
            m(x).pow(2).sum().backward()
            f()
            sch.step()
        res.append([p.detach().numpy().copy() for p in m.parameters()])
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)


def test_a_compiled_grad_scaler_update_unscales_once():
    # A compiled function doing the GradScaler tail of a step (unscale_, clip,
    # scaler.step, scaler.update) was captured first: unscale_ ran and recorded
    # it, the capture was refused at scaler.step(opt), and the step-wise re-run
    # called unscale_ again: "unscale_() has already been called".
    res = []
    for compiled in (False, True):
        tp.manual_seed(0)
        m = nn.Linear(3, 2)
        opt = tp.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        scaler = tp.amp.GradScaler("cpu", init_scale=1024.0)

        def finish():
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(m.parameters(), 0.1)
            scaler.step(opt)
            scaler.update()

        f = tp.compile(finish) if compiled else finish
        x = tp.randn(4, 3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(4):
                opt.zero_grad()
                scaler.scale(m(x).pow(2).sum()).backward()
                f()
        res.append(([p.detach().numpy().copy() for p in m.parameters()], scaler.get_scale()))
    assert res[0][1] == res[1][1]
    for a, b in zip(res[0][0], res[1][0]):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


def test_python_side_effects_before_a_compiled_optimizer_step_run_once():
    # A compiled function that logs and then steps the optimizer and the
    # scheduler (naming neither backward nor zero_grad) was captured first: the
    # append and `self.n += 1` ran, the capture was refused at opt.step(), and
    # the step-wise re-run ran them again (history [0, 0, 1, 2], n == 4).
    tp.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = tp.optim.SGD(m.parameters(), lr=0.1)
    sch = tp.optim.lr_scheduler.StepLR(opt, 1, 0.5)
    hist = []

    def finish(v):
        hist.append(v)
        opt.step()
        sch.step()

    class Trainer:
        def __init__(self):
            self.opt = opt
            self.n = 0

        def finish(self):
            self.n += 1
            self.opt.step()

    t = Trainer()
    f, g = tp.compile(finish), tp.compile(t.finish)
    x = tp.randn(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(3):
            opt.zero_grad()
            m(x).pow(2).sum().backward()
            f(float(i))
            opt.zero_grad()
            m(x).pow(2).sum().backward()
            g()
    assert hist == [0.0, 1.0, 2.0]
    assert t.n == 3


class _VarArgsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)

    def forward(self, x, *extra, mode="sum", **kw):
        h = self.a(x)
        for e in extra:
            h = h * e
        if mode == "sum":
            h = h + kw.get("bias", 0.0)
        return h


def test_a_forward_with_star_args_and_keyword_parameters_compiles():
    # forward(self, x, *extra, mode="sum", **kw): the binder refused any call
    # with "keyword-only and **kwargs parameters are not supported" (TypeError),
    # in tp.compile(model) and inside a compiled training step alike.
    tp.manual_seed(0)
    m = _VarArgsNet()
    cm = tp.compile(m)
    x, e = tp.randn(2, 4), tp.randn(3)
    for args, kw in [((x,), {}), ((x, e), {}), ((x, e, e), {"mode": "none"}), ((x, e, e * 2), {"bias": 1.0}),
                     ((x,), {"bias": 2.0})]:
        np.testing.assert_allclose(cm(*args, **kw).detach().numpy(), m(*args, **kw).detach().numpy(),
                                   rtol=1e-6, atol=1e-7)

    def f(x, *extra, scale=1.0):
        for t in extra:
            x = x + t
        return x * scale

    cf = tp.compile(f)
    np.testing.assert_allclose(cf(x, x, x, scale=3.0).numpy(), f(x, x, x, scale=3.0).numpy(), rtol=1e-6)

    res = []
    for compiled in (False, True):
        tp.manual_seed(0)
        m = _VarArgsNet()
        opt = tp.optim.SGD(m.parameters(), lr=0.1)

        def step(x, i):
            opt.zero_grad()
            loss = m(x, tp.ones(3) * i, mode="sum" if i % 2 else "none", bias=0.5 * i).pow(2).mean()
            loss.backward()
            opt.step()
            return loss.item()

        g = tp.compile(step) if compiled else step
        res.append(([g(x, i) for i in range(4)], m.a.weight.detach().numpy().copy()))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-6)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name,flag", [("AdamW", "fused"), ("Adam", "capturable"), ("SGD", "fused"),
                                       ("Adagrad", "fused"), ("RMSprop", "capturable"), ("NAdam", "capturable")])
def test_optimizers_accept_pytorchs_fused_and_capturable_flags(name, flag):
    # Code written for PyTorch (nanoGPT's AdamW(..., fused=True) on CUDA, capturable=True
    # for CUDA graphs) raised NotImplementedError at construction; the flags name
    # implementations of the same update, which they now run (eagerly and compiled).
    res = []
    for kw, compiled in [({}, False), ({flag: True}, False), ({flag: True}, True)]:
        tp.manual_seed(0)
        m = nn.Linear(3, 2)
        opt = getattr(tp.optim, name)(m.parameters(), lr=0.01, **kw)
        assert opt.param_groups[0][flag] is (kw.get(flag, opt.param_groups[0][flag]))
        st = tp.compile(opt.step) if compiled else opt.step
        x = tp.randn(4, 3)
        for _ in range(4):
            opt.zero_grad()
            m(x).pow(2).sum().backward()
            st()
        res.append([p.detach().numpy().copy() for p in m.parameters()])
    for r in res[1:]:
        for a, b in zip(res[0], r):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(NotImplementedError):
        getattr(tp.optim, name)(nn.Linear(3, 2).parameters(), lr=0.01, differentiable=True)


_partial_log = []


def _partial_train_step(model, optimizer, x):
    _partial_log.append(1)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def test_a_compiled_partial_training_step_runs_its_python_once():
    # tp.compile(functools.partial(train_step, model, opt)): the check for a
    # training step looked only at a plain function's code, so the partial was
    # captured first and its Python before the refused zero_grad ran twice.
    tp.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = tp.optim.SGD(m.parameters(), lr=0.1)
    _partial_log.clear()
    f = tp.compile(functools.partial(_partial_train_step, m, opt))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        losses = [f(tp.randn(4, 3)) for _ in range(3)]
    assert _partial_log == [1, 1, 1]
    assert losses[0] > 0


class _StepObject:
    def __init__(self, model, opt):
        self.model, self.opt, self.n = model, opt, 0

    def __call__(self, x):
        self.n += 1
        loss = self.model(x).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


def test_a_compiled_callable_training_step_object_runs_its_python_once():
    # tp.compile(step_object) where the object's __call__ trains: only plain
    # functions were checked for training calls, so the first call was captured,
    # refused at zero_grad and re-run step-wise (n == 4 after 3 calls).
    tp.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = tp.optim.SGD(m.parameters(), lr=0.1)
    st = _StepObject(m, opt)
    f = tp.compile(st)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            f(tp.randn(4, 3))
    assert st.n == 3


def test_a_star_args_function_called_with_as_many_arguments_as_its_parameters():
    # The *args support above bound a positional call only when its count differed
    # from the adapter's parameter count: a wrapper `def w(*args, **kwargs)` (vmap's)
    # called with two tensors passed them as (args tuple, kwargs dict) and raised
    # "argument after ** must be a mapping".
    def w(*args, **kwargs):
        return args[0] * 2 + args[1] + kwargs.get("bias", 0)

    f = tp.compile(w)
    x, y = tp.randn(3), tp.randn(3)
    for call in ((x, y), (x, y, x)):
        np.testing.assert_allclose(f(*call).numpy(), w(*call).numpy(), rtol=1e-6)
    np.testing.assert_allclose(f(x, y, bias=1.0).numpy(), w(x, y, bias=1.0).numpy(), rtol=1e-6)
