"""Outside testing, ninth round: programs a PyTorch user porting code would
write, run eagerly and through tp.compile. Each test reproduces a bug the
suite missed: the compiled call must give eager's results or refuse clearly
(a CaptureError naming what it cannot do), never a silent difference."""

import warnings

import numpy as np
import pytest

import tensorplay as tp

nn = tp.nn
F = tp.nn.functional


# ---------------------------------------------------------------- out= resizes

def test_an_out_argument_of_another_shape_is_refused_not_left_stale():
    # Eager resizes an out= tensor of another shape (the `out=tp.empty(0)`
    # idiom, silently; a non-empty one with a deprecation warning). The capture
    # did not see the resize (the binding swaps the storage behind the
    # dispatcher), so the graph copied the result into out's old shape: an
    # error at the compiled call ("copy_: shapes [0] and [2, 3] cannot be
    # broadcast together"), or, where the result broadcasts to the old shape,
    # a silently wrong out: sum over dim 0 of a [2, 3] into an out of [2, 3]
    # filled both rows with the [3] sums, where eager resizes out to [3].
    x = tp.arange(6.0).reshape(2, 3)
    with pytest.warns(UserWarning, match="resized"):
        want = tp.sum(x, 0, out=tp.zeros(2, 3))
    assert want.shape == (3,)

    f = tp.compile(lambda x, o: tp.sum(x, 0, out=o), fullgraph=True)
    with pytest.raises(tp.compiler.CaptureError, match=r"sum\(out=...\).*\[2, 3\].*\[3\]"):
        f(x, tp.zeros(2, 3))
    g = tp.compile(lambda x, o: tp.add(x, 1, out=o), fullgraph=True)
    with pytest.raises(tp.compiler.CaptureError, match=r"add\(out=...\).*\[0\]"):
        g(x, tp.empty(0))
    h = tp.compile(lambda x, a, b: tp.sort(x, 1, out=(a, b)), fullgraph=True)
    with pytest.raises(tp.compiler.CaptureError, match=r"sort\(out=...\)"):
        h(x, tp.empty(0), tp.empty(0, dtype=tp.int64))


def test_out_arguments_that_need_no_resize_and_own_buffers_still_compile():
    x = tp.arange(6.0).reshape(2, 3)
    f = tp.compile(lambda x, o: tp.add(x, 1, out=o))
    for i in range(3):
        o = tp.empty(2, 3)
        r = f(x + i, o)
        assert r is o
        np.testing.assert_array_equal(o.numpy(), (x + i + 1).numpy())

    # A buffer the function allocates itself may be resized: it is the
    # captured program's own, and the copy into it is traced at its new shape.
    def g(x):
        o = tp.empty(0)
        tp.add(x, 1, out=o)
        return o * 2
    cg = tp.compile(g)
    for i in range(3):
        np.testing.assert_array_equal(cg(tp.arange(3.0) + i).numpy(), g(tp.arange(3.0) + i).numpy())


# ------------------------------------------------------------ Tensor.data = ...

def test_assigning_data_inside_a_compiled_function_is_refused_not_dropped():
    # `w.data = new` swaps w's memory outside the dispatcher. The capture
    # recorded nothing of it: the compiled calls after the first returned the
    # first call's `w + 1` and left w unchanged (eager: w holds x * 2 and the
    # result follows x), and a swap of an intermediate's data was lost even
    # at the first call. Now a CaptureError names it.
    def f(x, w):
        w.data = x * 2
        return w + 1
    w = tp.zeros(3)
    np.testing.assert_array_equal(f(tp.arange(3.0) + 1, w).numpy(), [3.0, 5.0, 7.0])
    np.testing.assert_array_equal(w.numpy(), [2.0, 4.0, 6.0])

    cf = tp.compile(f, fullgraph=True)
    with pytest.raises(tp.compiler.CaptureError, match=r"Tensor\.data"):
        cf(tp.arange(3.0), tp.zeros(3))

    m = nn.Linear(3, 2)

    def clamp_weights(x):  # a WGAN-style clip written as a rebinding
        m.weight.data = m.weight.data.clamp(-0.01, 0.01)
        return m(x)
    before = m.weight.detach().clone()
    with pytest.raises(tp.compiler.CaptureError, match=r"Tensor\.data"):
        tp.compile(clamp_weights, fullgraph=True)(tp.ones(1, 3))
    np.testing.assert_array_equal(m.weight.detach().numpy(), before.numpy())

    def g(x):
        t = x * 1
        t.data = x * 3
        return t + 1
    with pytest.raises(tp.compiler.CaptureError, match=r"Tensor\.data"):
        tp.compile(g, fullgraph=True)(tp.arange(3.0))


# ------------------------------------------------------------------ detach_()

def _grads(m):
    return [None if p.grad is None else p.grad.numpy().copy() for p in m.parameters()]


def test_detach_in_place_inside_a_compiled_function_cuts_the_gradient_as_eager():
    # `h.detach_()` only clears autograd fields, which the capture's tensors do
    # not carry: the graph kept differentiating through h, so under tp.compile
    # the first layer's parameters got gradients that eager (and PyTorch) never
    # gives them: a silently different training run (truncated backprop, a
    # frozen encoder written with detach_()).
    def run(C):
        tp.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))

        def f(x):
            h = m[0](x)
            h.detach_()
            assert not h.requires_grad
            return m[2](m[1](h)).pow(2).sum()
        g = C(f)
        for i in range(3):
            g(tp.randn(3, 4, generator=tp.Generator().manual_seed(i))).backward()
        return _grads(m)

    want, got = run(lambda f: f), run(tp.compile)
    assert want[0] is None and want[1] is None
    assert got[0] is None and got[1] is None
    for a, b in zip(got[2:], want[2:]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_detach_in_place_of_an_argument_inside_a_compiled_function_is_refused():
    # The argument's own autograd state would change at the capturing call only.
    def f(x, w):
        w.detach_()
        return (x * w).sum()
    a = tp.ones(3, requires_grad=True)
    with pytest.raises(tp.compiler.CaptureError, match=r"detach_\(\)"):
        tp.compile(f, fullgraph=True)(tp.ones(3), a * 2)


# --------------------------------------------------- inference_mode inside

def test_results_made_under_inference_mode_inside_a_compiled_function_are_inference_tensors():
    # `@tp.compile` over an `@tp.inference_mode()` feature extractor: eager's
    # features are inference tensors, which autograd and in-place writes outside
    # inference_mode refuse. The compiled call gave plain tensors (only the
    # caller's mode was looked at), so a head trained on them, or an in-place
    # normalisation of them, ran silently where eager raises.
    tp.manual_seed(0)
    body = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
    head = nn.Linear(6, 2)

    def feats(x):
        with tp.inference_mode():
            h = body(x)
        return h, h.t(), h * 2, x + 1

    cf = tp.compile(feats)
    x = tp.randn(3, 4, generator=tp.Generator().manual_seed(1))
    for _ in range(2):
        want, got = feats(x), cf(x)
        assert [r.is_inference() for r in want] == [True, True, False, False]
        assert [r.is_inference() for r in got] == [True, True, False, False]
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
        with pytest.raises(RuntimeError, match="inference tensor"):
            head(got[0]).sum().backward()
        with pytest.raises(RuntimeError, match="inference tensor"):
            got[0].add_(1)
    # Made outside the `with`: plain tensors, which train.
    head(cf(x)[2]).sum().backward()
    assert head.weight.grad is not None


# ------------------------- in-place writes inside the capture into saved values

def _relu_then_zero_a_column(lin, x):
    h = lin(x)
    h.relu_()  # relu_'s backward reads its result ...
    h[:, 0] = 0.0  # ... which this write changes
    return h.sum()


def _normalise_in_place_by_its_own_norm(lin, x):
    h = lin(x)
    h.div_(h.abs().sum())  # abs's backward reads h, which div_ then changes
    return h.exp().sum()


@pytest.mark.parametrize("f", [_relu_then_zero_a_column, _normalise_in_place_by_its_own_norm])
def test_an_in_place_write_inside_the_function_into_a_value_the_backward_saved_raises_as_eager(f):
    # Eager (and PyTorch) refuse the backward: "one of the variables needed for
    # gradient computation has been modified by an inplace operation". The
    # compiled graph is functional, so it gives a gradient (that of the
    # functional program) without a word.
    def run(C):
        tp.manual_seed(0)
        lin = nn.Linear(3, 4)
        g = C(lambda x: f(lin, x))
        g(tp.randn(2, 3, generator=tp.Generator().manual_seed(1))).backward()

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(lambda g: g)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(tp.compile)


# ------------------------------------------- Python's and NumPy's random draws

def test_python_and_numpy_random_draws_inside_a_compiled_function_are_refused_not_baked_in():
    # A ported augmentation: `if random.random() < 0.5: flip`. The capture ran
    # the draw once and baked the branch in: every compiled call flipped (or
    # none did), and `x * np.random.rand()` scaled by one number forever.
    import random

    def augment(x):
        if random.random() < 0.5:
            x = x.flip(-1)
        return x * 2

    def jitter(x):
        return x * (1 + 0.1 * np.random.rand())

    for f, what in [(augment, r"random\.random\(\)"), (jitter, r"np\.random\.rand\(\)")]:
        with pytest.raises(tp.compiler.CaptureError, match=what):
            tp.compile(f, fullgraph=True)(tp.arange(4.0))
    # Restored after the capture, also after a failed one.
    assert random.random.__module__ is None or random.random.__name__ == "random"
    assert np.random.rand.__name__ == "rand"
    random.random()
    np.random.rand()
    # tensorplay's own random operators are recorded and drawn at every call.
    f = tp.compile(lambda x: x + tp.rand(()))
    assert not np.array_equal(f(tp.zeros(2)).numpy(), f(tp.zeros(2)).numpy())
