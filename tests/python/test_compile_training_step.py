"""A whole training step under tp.compile (zero_grad, forward, loss.backward(),
clipping, optimizer.step() and a scheduler inside the compiled function), as
PyTorch 2 users write it. The function runs step-wise (_stepwise.py): its module
calls and optimizer steps are compiled, the rest runs as Python, and everything
the user can see equals eager training step by step."""
import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn


def _gen(seed):
    return tp.Generator().manual_seed(seed)


def _mlp(seed):
    tp.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 5))


def _data(n=3):
    return [(tp.randn(16, 12, generator=_gen(10 + i)), tp.randint(0, 5, (16,), generator=_gen(20 + i)))
            for i in range(n)]


def _make_step(model, opt, loss_fn, sched=None, clip=None):
    def train_step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()
        return loss
    return train_step


@pytest.mark.parametrize("make_opt", [
    lambda ps: tp.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda ps: tp.optim.Adam(ps, lr=1e-2),
    lambda ps: tp.optim.AdamW(ps, lr=1e-2, amsgrad=True),
], ids=["sgd", "adam", "adamw"])
def test_compiled_training_step_equals_eager_step_by_step(make_opt):
    runs = []
    for compiled in (False, True):
        model = _mlp(0)
        opt = make_opt(model.parameters())
        sched = tp.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        step = _make_step(model, opt, nn.CrossEntropyLoss(label_smoothing=0.1), sched, clip=1.0)
        if compiled:
            tp.compiler.reset()
            step = tp.compile(step)
        losses = [step(x, y) for x, y in _data(5)]
        runs.append(([float(v) for v in losses], [p.detach().numpy().copy() for p in model.parameters()],
                     opt.param_groups[0]["lr"], losses[-1].requires_grad))
        if compiled:
            assert step._stepwise_on
            m = tp.compiler.metrics
            assert m.aot_regions >= 1 and m.fallback_count == 0  # the model's forward and backward are generated
    (le, pe, lre, rge), (lc, pc, lrc, rgc) = runs
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert lrc == lre and rgc == rge


def test_python_side_effects_happen_once_per_call():
    model = _mlp(1)
    opt = tp.optim.SGD(model.parameters(), lr=0.1)
    log = []

    @tp.compile
    def train_step(x, y):
        log.append("start")
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        log.append(float(loss))
        return loss

    for x, y in _data(2):
        train_step(x, y)
    assert len(log) == 4 and log[0] == log[2] == "start"


def test_backward_in_a_helper_switches_at_the_refusal_and_stays_exact():
    # The function's own code names neither backward nor zero_grad: the first
    # capture is refused at the helper's backward(), its writes are put back, and
    # the call runs step-wise. (The helper and the optimizer are reached through
    # a dict: a helper called by name, or an optimizer named by the function, is
    # seen by names_autograd_calls, which starts step-wise.)
    def run_backward(loss):
        loss.backward()

    helpers = {"backward": run_backward}

    outs = []
    for compiled in (False, True):
        model = _mlp(2)
        bn = nn.BatchNorm1d(5)
        helpers["opt"] = tp.optim.SGD(list(model.parameters()) + list(bn.parameters()), lr=0.05, momentum=0.5)

        def step(x, y):
            out = bn(model(x))
            loss = nn.functional.cross_entropy(out, y)
            helpers["backward"](loss)
            helpers["opt"].step()
            for p in model.parameters():
                p.grad = None
            for p in bn.parameters():
                p.grad = None
            return loss

        if compiled:
            step = tp.compile(step)
            assert not step._stepwise_on
        losses = [float(step(x, y)) for x, y in _data(3)]
        outs.append((losses, bn.running_mean.numpy().copy(), int(bn.num_batches_tracked)))
        if compiled:
            assert step._stepwise_on
    (le, rme, nbe), (lc, rmc, nbc) = outs
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    np.testing.assert_allclose(rmc, rme, rtol=1e-5, atol=1e-7)
    assert nbc == nbe == 3  # the refused capture's BatchNorm update was put back


def test_gradient_accumulation_and_a_module_that_cannot_be_captured():
    class DataDependent(nn.Module):  # a Python branch on a value: no single graph
        def forward(self, x):
            return x * 2 if float(x.sum()) > 0 else x - 1

    runs = []
    for compiled in (False, True):
        model = _mlp(3)
        odd = DataDependent()
        opt = tp.optim.Adam(model.parameters(), lr=1e-2)

        def step(batches):
            opt.zero_grad()
            total = 0.0
            for x, y in batches:
                loss = nn.functional.cross_entropy(odd(model(x)), y) / len(batches)
                loss.backward()
                total += float(loss)
            opt.step()
            return total

        if compiled:
            step = tp.compile(step, options={"warn_fallback": False})
        runs.append(([step(_data(3)) for _ in range(3)], [p.detach().numpy().copy() for p in model.parameters()]))
    np.testing.assert_allclose(runs[1][0], runs[0][0], rtol=1e-5)
    for a, b in zip(runs[1][1], runs[0][1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_fullgraph_and_strict_native_keep_the_refusal():
    model = _mlp(4)
    opt = tp.optim.SGD(model.parameters(), lr=0.1)
    step = _make_step(model, opt, nn.CrossEntropyLoss())
    x, y = _data(1)[0]
    for kw in ({"fullgraph": True}, {"strict_native": True}):
        with pytest.raises(tp.compiler.CaptureError, match="inside a compiled function"):
            tp.compile(step, **kw)(x, y)


def test_functions_without_autograd_calls_still_compile_as_one_graph():
    model = _mlp(5)

    @tp.compile
    def predict(x):
        return model(x).softmax(-1)

    with tp.no_grad():
        predict(_data(1)[0][0])
    assert not predict._stepwise_on


def test_a_compiled_model_inside_a_compiled_step():
    runs = []
    for compiled in (False, True):
        model = _mlp(6)
        inner = tp.compile(model) if compiled else model
        opt = tp.optim.SGD(model.parameters(), lr=0.1)
        step = _make_step(inner, opt, nn.CrossEntropyLoss())
        step = tp.compile(step) if compiled else step
        runs.append([float(step(x, y)) for x, y in _data(3)])
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-5)


def test_an_amp_training_step_with_grad_scaler_and_clipping():
    def run(compiled):
        model = _mlp(7)
        opt = tp.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        scaler = tp.amp.GradScaler("cpu")

        def step(x, y):
            opt.zero_grad()
            with tp.autocast("cpu", dtype=tp.bfloat16):
                loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            scaler.step(opt)
            scaler.update()
            return loss

        f = tp.compile(step) if compiled else step
        losses = [float(f(x, y)) for x, y in _data(4)]
        return losses, [p.detach().numpy().copy() for p in model.parameters()]

    (le, pe), (lc, pc) = run(False), run(True)
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
