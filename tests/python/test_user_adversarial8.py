"""Compiled training as a PyTorch user writes it (eighth round): results not
used in the loss, ... Each scenario runs eagerly and compiled and must give the
same losses, gradients (None where eager gives None), parameters and errors."""

import warnings

import numpy as np
import pytest

import tensorplay as tp

nn = tp.nn
F = tp.nn.functional


def _eager(f=None, **kw):
    return (lambda g: g) if f is None else f


def _grads(out, tag, params):
    for n, p in params:
        out.append((tag + " grad " + n, None if p.grad is None else p.grad.numpy().copy()))


def _same_run(scenario, rtol=1e-5, atol=1e-6):
    """Runs scenario(C) with C = identity (eager) and C = tp.compile; the records match."""
    want = scenario(_eager)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = scenario(tp.compile)
    assert [k for k, _ in got] == [k for k, _ in want]
    for (k, a), (_, b) in zip(got, want):
        if a is None or b is None or isinstance(a, (str, bool, int)):
            assert (a is None) == (b is None), k
            if a is not None:
                assert a == b, k
        else:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=k)


# ------------------------------------------- results not used in the loss

@pytest.mark.parametrize("backend", ["aot_eager", "stax"])
def test_an_input_that_only_feeds_an_unused_result_gets_no_gradient(backend):
    # Eager never reaches b's part of the graph when only the first result is
    # differentiated, so b.grad stays None. The compiled region's one backward
    # node handed zeros to every input, so b.grad became a zero tensor.
    def f(a, b):
        return (a * 2).sum(), (b * 3).sum(), a + b

    for C in (_eager, lambda fn: tp.compile(fn, backend=backend)):
        a = tp.randn(3, requires_grad=True)
        b = tp.randn(3, requires_grad=True)
        l1, _, _ = C(f)(a, b)
        l1.backward()
        assert b.grad is None
        np.testing.assert_allclose(a.grad.numpy(), np.full(3, 2.0))


def test_a_head_left_out_of_a_steps_loss_is_not_decayed_as_eager():
    # Two heads on a shared trunk, the loss of each step using one of them: the
    # other head's parameters have no gradient in eager and SGD skips them; with
    # zero gradients weight decay and momentum moved them (silently different
    # parameters after the second step).
    def scenario(C):
        tp.manual_seed(0)
        trunk, h1, h2 = nn.Linear(4, 5), nn.Linear(5, 2), nn.Linear(5, 2)
        mods = nn.ModuleList([trunk, h1, h2])

        def f(x):
            z = tp.relu(trunk(x))
            return h1(z), h2(z)

        cf = C(f)
        opt = tp.optim.SGD(mods.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)
        out = []
        for i in range(4):
            x = tp.randn(5, 4, generator=tp.Generator().manual_seed(i))
            opt.zero_grad()
            a, b = cf(x)
            loss = a.pow(2).mean() if i % 2 == 0 else b.pow(2).mean()
            loss.backward()
            _grads(out, str(i), mods.named_parameters())
            opt.step()
            out.append((f"loss {i}", loss.detach().numpy()))
            for k, v in mods.state_dict().items():
                out.append((f"{i} {k}", v.numpy().copy()))
        return out

    _same_run(scenario)


def test_an_explicit_zero_gradient_for_a_result_still_reaches_its_inputs():
    # The other side: a result differentiated with a zero gradient is reached in
    # eager, its inputs get zero gradients (not None).
    for C in (_eager, tp.compile):
        a = tp.randn(3, requires_grad=True)
        b = tp.randn(3, requires_grad=True)
        la, lb = C(lambda a, b: ((a * 2).sum(), (b * 3).sum()))(a, b)
        tp.autograd.backward([la, lb], [tp.tensor(1.0), tp.tensor(0.0)])
        np.testing.assert_allclose(b.grad.numpy(), np.zeros(3))


# --------------------------- observing the gradient of a result other results read

def _features_and_loss(x, w):
    h = x @ w
    return h, tp.tanh(h).sum()


@pytest.mark.parametrize("observe", ["hook", "retain_grad", "autograd.grad"])
def test_observing_a_result_that_another_result_is_computed_from_is_refused(observe):
    # `features, loss = f(x)` with the loss computed from the features inside
    # the function: in eager a hook on `features` sees (and may change) the
    # gradient coming from the loss, retain_grad() keeps it and autograd.grad
    # returns it. The compiled backward takes the loss's gradient to the inputs
    # without passing through `features`: the hook's change was lost (a wrong
    # w.grad), .grad and allow_unused autograd.grad gave None. Now refused.
    def observe_and_backward(h, loss):
        if observe == "hook":
            h.register_hook(lambda g: g * 2)
            loss.backward()
            return None
        if observe == "retain_grad":
            h.retain_grad()
            loss.backward()
            return h.grad
        return tp.autograd.grad(loss, [h], allow_unused=True)[0]

    tp.manual_seed(0)
    w = tp.randn(3, 3, requires_grad=True)
    x = tp.randn(2, 3)
    seen = observe_and_backward(*_features_and_loss(x, w))
    if seen is not None:
        np.testing.assert_allclose(seen.numpy(), (1 - tp.tanh(x @ w) ** 2).detach().numpy(), rtol=1e-5)
    w.grad = None
    h, loss = tp.compile(_features_and_loss)(x, w)
    with pytest.raises(RuntimeError, match="computed from it inside the region"):
        observe_and_backward(h, loss)


def test_observing_such_a_result_is_fine_when_only_it_is_differentiated():
    def run(C):
        tp.manual_seed(0)
        w = tp.randn(3, 3, requires_grad=True)
        h, loss = C(_features_and_loss)(tp.randn(2, 3), w)
        h.register_hook(lambda g: g * 2)
        h.retain_grad()
        (h * h).sum().backward()
        return h.grad.numpy(), w.grad.numpy()

    for a, b in zip(run(tp.compile), run(_eager)):
        np.testing.assert_allclose(a, b, rtol=1e-5)


@pytest.mark.parametrize("body", ["computed twice", "view of it"])
def test_results_eager_computes_apart_or_as_views_keep_their_hooks(body):
    # Not refused: the second result is `tanh(x @ w)` with `x @ w` computed
    # again (eager: another tensor; CSE merges the two in the graph), or a view
    # of the first (the caller makes it one, so its gradient passes through it).
    def f(x, w):
        h = x @ w
        return (h, tp.tanh(x @ w).sum()) if body == "computed twice" else (h, h.t())

    def run(C):
        tp.manual_seed(0)
        w = tp.randn(3, 3, requires_grad=True)
        h, second = C(f)(tp.randn(2, 3), w)
        h.register_hook(lambda g: g * 3)
        h.retain_grad()
        (second * second).sum().backward()
        return (None if h.grad is None else h.grad.numpy()), w.grad.numpy()

    got, want = run(tp.compile), run(_eager)
    assert (got[0] is None) == (want[0] is None)
    if got[0] is not None:
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)


# ------------------------------- a result written in place after the call, then backward

_READ_BY_EAGER = {
    "tanh": lambda x, w: tp.tanh(x @ w),
    "sigmoid": lambda x, w: tp.sigmoid(x @ w),
    "softmax": lambda x, w: tp.softmax(x @ w, -1),
    "exp": lambda x, w: (x @ w).exp(),
    "read by a product inside": lambda x, w: (lambda h: (h, (h * w[0]).sum()))(x @ w),
    "view of a tanh": lambda x, w: tp.tanh(x @ w).t(),
}
_NOT_READ_BY_EAGER = {
    "matmul": lambda x, w: x @ w,
    "add": lambda x, w: (x @ w) + 1,
    "dropout": lambda x, w: F.dropout(x @ w, 0.5, training=True),
    "layer_norm": lambda x, w: F.layer_norm(x @ w, (3,)),
    "max(dim)": lambda x, w: (x @ w).max(1).values,
    "read by a product with a constant": lambda x, w: (lambda h: (h, (h * 2).sum()))(x @ w),
}


def _write_then_backward(C, f, write):
    tp.manual_seed(0)
    w = tp.randn(3, 3, requires_grad=True)
    outs = C(lambda x: f(x, w))(tp.randn(4, 3))
    outs = outs if isinstance(outs, tuple) else (outs,)
    write(outs[0])
    sum((o * tp.arange(float(o.numel())).reshape(o.shape)).sum() for o in outs).backward()
    return w.grad.numpy()


def _mul_(y):
    y.mul_(2)


def _slice_add_(y):
    y[0].add_(1)


def _no_grad_add_(y):
    with tp.no_grad():
        y.add_(1)


@pytest.mark.parametrize("write", [_mul_, _slice_add_, _no_grad_add_])
@pytest.mark.parametrize("name", list(_READ_BY_EAGER))
def test_writing_into_a_result_the_backward_reads_raises_as_eager(name, write):
    # tanh's (sigmoid's, exp's, softmax's) backward reads its result: eager
    # raises when that result was written in place before the backward. The
    # compiled backward kept its own copy (or recomputed it) and silently gave
    # the gradient of the values before the write.
    f = _READ_BY_EAGER[name]
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as eager:
        _write_then_backward(_eager, f, write)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as compiled:
        _write_then_backward(tp.compile, f, write)
    assert type(compiled.value) is type(eager.value)


@pytest.mark.parametrize("name", list(_NOT_READ_BY_EAGER))
def test_writing_into_a_result_the_backward_does_not_read_still_trains(name):
    f = _NOT_READ_BY_EAGER[name]
    np.testing.assert_allclose(_write_then_backward(tp.compile, f, _mul_), _write_then_backward(_eager, f, _mul_),
                               rtol=1e-5, atol=1e-6)


def test_a_written_result_is_not_read_when_only_other_results_are_differentiated():
    def run(C):
        tp.manual_seed(0)
        w = tp.randn(3, 3, requires_grad=True)
        y, s = C(lambda x: (tp.tanh(x @ w), (x @ w.t()).sum()))(tp.randn(2, 3))
        y.mul_(2)
        s.backward()
        return w.grad.numpy()

    np.testing.assert_allclose(run(tp.compile), run(_eager), rtol=1e-5)


# ------------------------------------------- printing a loss inside a compiled function

@pytest.mark.parametrize("show", [
    lambda l: print("loss", l),
    lambda l: print(f"loss {l}"),
    lambda l: print("loss", l.item()),
    lambda l: print(f"loss {l.item():.4f}"),
    lambda l: print(f"loss {l:.4f}"),
    lambda l: print("loss", round(l.item(), 3)),
])
def test_printing_a_loss_inside_a_compiled_function(show, capsys):
    # print(loss) raised "cannot capture Tensor.numpy()" (the user never called
    # numpy), f"{loss.item():.4f}" raised "unsupported format string passed to
    # Tensor.__format__" and round(loss.item(), 3) "type Tensor doesn't define
    # __round__": inside a capture item() is a 0-d tensor. The capture runs on
    # the call's values; printing shows them as eager does (a float for item()).
    w = tp.tensor([0.5, -1.25, 2.0], requires_grad=True)

    def f(x):
        loss = (x * w).sum()
        show(loss)
        return loss * 2

    x = tp.tensor([1.0, 2.0, 3.0])
    want = f(x)
    eager_out = capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # print() inside a compiled function runs at capture only
        got = tp.compile(f)(x)
    compiled_out = capsys.readouterr().out
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy())
    # eager's tensor repr carries grad_fn; the capture runs without autograd
    assert compiled_out.split(", grad_fn")[0].rstrip(")\n") == eager_out.split(", grad_fn")[0].rstrip(")\n")


def test_a_zero_d_tensor_formats_as_its_number():
    assert f"{tp.tensor(1.23456):.3f}" == "1.235"
    assert f"{tp.tensor(3):d}" == "3"
    assert f"{tp.tensor(1.5, requires_grad=True):.2f}" == "1.50"
    assert f"{tp.tensor([1.0, 2.0])}" == str(tp.tensor([1.0, 2.0]))
    with pytest.raises(TypeError):
        f"{tp.tensor([1.0, 2.0]):.2f}"
