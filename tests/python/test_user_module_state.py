"""Module state a capture bakes in, as a user's training script meets it: a
compiled training/eval step that calls a global model (train()/eval() between
calls), forward hooks added or removed after the first compiled call, and
gradient hooks registered inside a compiled function. Each used to give a
silently different result from eager (the first version kept running)."""

import warnings

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F


def _model():
    tp.manual_seed(1)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3))


def _losses(compiled):
    model = _model()
    opt = tp.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        return F.cross_entropy(model(x), y)

    def eval_step(x, y):
        return F.cross_entropy(model(x), y)

    if compiled:
        train_step = tp.compile(train_step, strict_native=True)
        eval_step = tp.compile(eval_step, strict_native=True)
    tp.manual_seed(0)
    x, y = tp.randn(16, 4), tp.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    out = []
    for i in range(6):
        model.train(i % 3 != 2)
        if model.training:
            tp.manual_seed(100 + i)
            loss = train_step(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        else:
            with tp.no_grad():
                loss = eval_step(x, y)
        out.append(loss.item())
    with tp.no_grad():
        model.eval()
        out.append(eval_step(x, y).item())
        model.train()
        tp.manual_seed(7)
        out.append(eval_step(x, y).item())
    return np.array(out), model[1].running_mean.numpy().copy()


def test_train_eval_toggles_of_a_global_model_select_the_compiled_version():
    eager, rm_eager = _losses(False)
    compiled, rm_compiled = _losses(True)
    np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rm_compiled, rm_eager, rtol=1e-5, atol=1e-6)


def test_eval_of_a_model_reached_through_an_object_attribute():
    class Trainer:
        def __init__(self):
            self.net = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.9))

        def predict(self, x):
            return self.net(x)

    t = Trainer()
    f = tp.compile(t.predict, strict_native=True)
    x = tp.randn(4, 3)
    with tp.no_grad():
        f(x)
        t.net.eval()
        np.testing.assert_allclose(f(x).numpy(), t.net(x).numpy(), rtol=1e-6)


@pytest.mark.parametrize("how", ["module", "function"])
def test_forward_hooks_added_or_removed_after_the_first_call(how):
    tp.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    f = tp.compile(model) if how == "module" else tp.compile(lambda x: model(x))
    x = tp.randn(3, 4)
    with tp.no_grad():
        f(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "hooks ran during capture"
            h = model[0].register_forward_hook(lambda m, args, out: out * 0)
            np.testing.assert_allclose(f(x).numpy(), model(x).numpy(), rtol=1e-6)
            h.remove()
            np.testing.assert_allclose(f(x).numpy(), model(x).numpy(), rtol=1e-6)
            h = model.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
            np.testing.assert_allclose(f(x).numpy(), model(x).numpy(), rtol=1e-6)
            h.remove()
        np.testing.assert_allclose(f(x).numpy(), model(x).numpy(), rtol=1e-6)


@pytest.mark.parametrize("method", ["register_hook", "retain_grad"])
def test_gradient_hooks_inside_a_compiled_function(method):
    # They used to fail with "doesn't require gradient" (the capture runs the
    # forward without autograd) or, on a leaf, to register once at capture. With
    # fullgraph=True they raise clearly; by default the function runs step-wise
    # (its autograd calls eagerly, as without tp.compile).
    w = tp.randn(4, 4, requires_grad=True)
    kept = []

    def f(x):
        h = x @ w
        if method == "register_hook":
            h.register_hook(lambda g: g * 2)
        else:
            h.retain_grad()
            kept.append(h)
        return h.sin().sum()

    x = tp.randn(3, 4, generator=tp.Generator().manual_seed(0))
    with pytest.raises(tp.compiler.CaptureError, match=f"Tensor.{method} inside a compiled function"):
        tp.compile(f, fullgraph=True)(x)
    grads = []
    for fn in (f, tp.compile(f)):
        w.grad = None
        fn(x).backward()
        grads.append((w.grad.numpy().copy(), kept[-1].grad.numpy().copy() if kept else None))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-6)
    if kept:
        np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-6)


def test_hooks_outside_the_compiled_function_still_run():
    w = tp.randn(4, 4, requires_grad=True)
    calls = []
    w.register_hook(lambda g: (calls.append(1), g * 3)[1])
    f = tp.compile(lambda x: (x @ w).tanh().sum(), strict_native=True)
    x = tp.randn(3, 4)
    out = f(x)
    out.register_hook(lambda g: (calls.append(2), g * 2)[1])
    out.backward()
    got = w.grad.numpy().copy()
    w.grad = None
    (x @ w).tanh().sum().backward()
    assert calls == [2, 1, 1]
    np.testing.assert_allclose(got, 2 * w.grad.numpy(), rtol=1e-5)


@pytest.mark.parametrize("body", ["backward", "autograd.grad", "opt.zero_grad", "model.zero_grad", "grad = None"])
def test_autograd_calls_inside_a_compiled_function(body):
    # backward() used to fail with "does not require grad" (the capture runs the
    # forward without autograd); zero_grad() ran once, at capture, so the
    # gradients of later calls accumulated silently. With fullgraph=True they
    # raise clearly; by default the function runs step-wise, and every call
    # clears and accumulates the gradients as eager does.
    results = []
    for mode in ("eager", "fullgraph", "default"):
        tp.manual_seed(0)
        model = nn.Linear(3, 1)
        opt = tp.optim.SGD(model.parameters(), lr=0.1)
        model(tp.ones(2, 3)).sum().backward()
        got = []

        def step(x):
            if body == "opt.zero_grad":
                opt.zero_grad()
            elif body == "model.zero_grad":
                model.zero_grad()
            elif body == "grad = None":
                model.weight.grad = None
            loss = model(x).sum()
            if body == "backward":
                loss.backward()
            elif body == "autograd.grad":
                got.append(tp.autograd.grad(loss, [model.weight])[0])
            return loss

        if mode == "fullgraph":
            with pytest.raises(tp.compiler.CaptureError, match="inside a compiled function"):
                tp.compile(step, fullgraph=True)(tp.ones(2, 3))
            continue
        fn = step if mode == "eager" else tp.compile(step)
        for _ in range(3):
            loss = fn(tp.ones(2, 3))
            if body in ("opt.zero_grad", "model.zero_grad", "grad = None"):
                loss.backward()
        results.append((model.weight.grad.numpy().copy(), [g.numpy() for g in got]))
    (ge, ae), (gc, ac) = results
    np.testing.assert_allclose(gc, ge, rtol=1e-6)
    assert len(ac) == len(ae)
    for a, b in zip(ac, ae):
        np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("how", ["module", "function"])
def test_submodules_replaced_or_appended_after_the_first_call(how):
    # Activations have no parameters, so no re-read tensor changed: the first
    # version (tanh) used to keep running.
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    f = tp.compile(model, strict_native=True) if how == "module" else tp.compile(lambda x: model(x), strict_native=True)
    x = tp.randn(5, 3)
    with tp.no_grad():
        np.testing.assert_allclose(f(x).numpy(), model(x).numpy(), rtol=1e-6)
        model[1] = nn.ReLU()
        np.testing.assert_allclose(f(x).numpy(), model(x).numpy(), rtol=1e-6)
        model.append(nn.Sigmoid())
        np.testing.assert_allclose(f(x).numpy(), model(x).numpy(), rtol=1e-6)
        model[3].register_forward_hook(lambda m, args, out: out * 0 + 1)  # a module added later: its hooks count
        if how == "module":  # run eagerly, as module.compile() does: refused under strict_native
            with pytest.raises(tp.compiler.BackendError, match="forward hooks"):
                f(x)
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.testing.assert_allclose(f(x).numpy(), np.ones((5, 2)), rtol=1e-6)


_GLOBAL_MODEL = None


def test_a_global_model_rebound_to_another_architecture():
    global _GLOBAL_MODEL
    tp.manual_seed(0)
    _GLOBAL_MODEL = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
    f = tp.compile(lambda x: _GLOBAL_MODEL(x), strict_native=True)
    x = tp.randn(2, 3)
    with tp.no_grad():
        f(x)
        _GLOBAL_MODEL = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        np.testing.assert_allclose(f(x).numpy(), _GLOBAL_MODEL(x).numpy(), rtol=1e-6)
    _GLOBAL_MODEL = None


def test_a_rebound_global_tensor_does_not_recapture():
    w = [tp.randn(3, 3)]
    f = tp.compile(lambda x: x @ w[0], strict_native=True)
    x = tp.randn(2, 3)
    for _ in range(4):
        w[0] = w[0] * 0.5
        np.testing.assert_allclose(f(x).numpy(), (x @ w[0]).numpy(), rtol=1e-5)
    assert tp.compiler.metrics.compile_count == 1


def test_forward_hook_side_effects_run_at_every_call_of_a_compiled_module():
    calls = []
    m = nn.Linear(2, 2)
    f = tp.compile(m, backend="aot_eager")
    x = tp.ones(1, 2)
    f(x)
    h1 = m.register_forward_hook(lambda mod, args, out: calls.append("post") or out * 2)
    h2 = m.register_forward_pre_hook(lambda mod, args: calls.append("pre") or (args[0] + 1,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the module's own hooks need no fallback
        for _ in range(3):
            with tp.no_grad():
                np.testing.assert_allclose(f(x).numpy(), m(x).numpy(), rtol=1e-6)
    assert calls == ["pre", "post"] * 6
    h1.remove()
    h2.remove()
    with tp.no_grad():
        np.testing.assert_allclose(f(x).numpy(), m.forward(x).numpy(), rtol=1e-6)
    assert len(calls) == 12


# ---- full backward hooks (PyTorch is the oracle) ----

import torch  # noqa: E402




def _backward_hook_run(lib, how):
    nnl = torch.nn if lib is torch else nn
    log = []

    class Net(nnl.Module):
        def __init__(self):
            super().__init__()
            self.lin = nnl.Linear(3, 2)

        def forward(self, x, scale, y):
            return self.lin(x) * scale + y, (x * y.sum()).sum()

    lib.manual_seed(0)
    m = Net()
    with (torch.no_grad() if lib is torch else tp.no_grad()):
        m.lin.weight.copy_(lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]]))
        m.lin.bias.copy_(lib.tensor([0.1, -0.2]))

    def lst(gs):
        return [None if g is None else np.asarray(g.tolist()) for g in gs]

    m.register_full_backward_pre_hook(lambda mod, go: log.append(("pre", lst(go))) or (go[0] * 2, go[1]))
    m.register_full_backward_hook(lambda mod, gi, go: log.append(("full", lst(gi), lst(go))) or (gi[0] + 1, None, gi[2]))
    if how == "compiled" and lib is tp:
        m = tp.compile(m, backend="aot_eager")
    x = lib.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    y = lib.tensor([0.5, -1.0], requires_grad=True)
    for _ in range(2):
        a, b = m(x, 3.0, y)
        ((a ** 2).sum() + b).backward()
    return log, x.grad.tolist(), y.grad.tolist()


@pytest.mark.parametrize("how", ["eager", "compiled"])
def test_module_full_backward_hooks_match_pytorch(how):
    want = _backward_hook_run(torch, how)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _backward_hook_run(tp, how)
    assert [e[0] for e in got[0]] == [e[0] for e in want[0]] == ["pre", "full"] * 2
    for ge, we in zip(got[0], want[0]):
        for gs, ws in zip(ge[1:], we[1:]):
            assert len(gs) == len(ws)
            for g, w in zip(gs, ws):
                assert (g is None) == (w is None)
                if g is not None:
                    np.testing.assert_allclose(g, w, rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)


def test_full_backward_hook_of_a_submodule_of_a_compiled_module_runs_every_backward():
    calls = []
    net = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    net[0].register_full_backward_hook(lambda mod, gi, go: calls.append(len(gi)))
    f = tp.compile(net, backend="aot_eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            f(tp.ones(1, 2, requires_grad=True)).sum().backward()
    assert calls == [1, 1, 1]
    h = net[1].register_full_backward_pre_hook(lambda mod, go: calls.append("pre"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(tp.ones(1, 2)).sum().backward()  # no input requires grad: the hook sees grad_input (None,)
    assert calls[3:] == ["pre", 1]
    h.remove()


def test_full_backward_hook_not_called_without_gradients():
    calls = []
    m = nn.Linear(2, 2)
    m.register_full_backward_hook(lambda *a: calls.append(1))
    with tp.no_grad():
        m(tp.ones(1, 2))
    m.weight.requires_grad_(False)
    m.bias.requires_grad_(False)
    m(tp.ones(1, 2))
    assert calls == []
