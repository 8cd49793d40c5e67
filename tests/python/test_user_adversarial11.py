"""Outside testing, eleventh round: a user's training code under tp.compile
compared with eager TensorPlay (and PyTorch's behaviour): in-place writes into
values the backward saved, exceptions raised inside a compiled function, and
the composition of tp.func transforms with tp.compile."""

import numpy as np
import pytest

import tensorplay as tp

nn = tp.nn


# ------------------- in-place writes into saved values: only where eager raises

def _h(lin, x):
    return lin(x)


_WRITES = {
    # eager trains: nothing saved is written, or the reader is off the result's path
    "mul_by_number_then_add_": (lambda lin, x: (lambda h: ((h * 2) + h.add_(1)).sum())(_h(lin, x)), False),
    "relu_": (lambda lin, x: _h(lin, x).relu_().sum(), False),
    "sin_then_mul_": (lambda lin, x: _h(lin, x).sin_().mul_(2).sum(), False),
    "exp_then_add_": (lambda lin, x: (lambda h: (lambda a: (h.add_(1) + a).sum())(h.exp()))(_h(lin, x)), False),
    "sin_off_the_path_then_add_": (lambda lin, x: (lambda h: (lambda a: h.add_(1).sum())(h.sin()))(_h(lin, x)),
                                   False),
    # eager raises "modified by an inplace operation" at backward
    "sin_then_add_": (lambda lin, x: (lambda h: (lambda a: (h.add_(1) + a).sum())(h.sin()))(_h(lin, x)), True),
    "sigmoid_then_write_through_a_view": (
        lambda lin, x: (lambda a: (a.__setitem__((0,), 0.0), a.sum())[1])(_h(lin, x).sigmoid()), True),
    "mul_then_zero_the_other_factor": (
        lambda lin, x: (lambda h, k: (lambda y: (k.zero_(), y.sum())[1])(h * k))(_h(lin, x), _h(lin, x) + 0), True),
}


@pytest.mark.parametrize("name", sorted(_WRITES))
def test_an_in_place_write_after_a_save_trains_or_raises_exactly_as_eager(name):
    f, raises = _WRITES[name]

    def run(C):
        tp.manual_seed(0)
        lin = nn.Linear(3, 4)
        g = C(lambda x: f(lin, x))
        out = g(tp.randn(2, 3, generator=tp.Generator().manual_seed(1)))  # the forward itself never raises
        if raises:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                out.backward()
            return None
        out.backward()
        return lin.weight.grad.numpy().copy()

    want, got = run(lambda g: g), run(tp.compile)
    if not raises:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ----------------- the user's exception inside a compiled function (a recapture)

def test_an_exception_raised_by_the_function_keeps_the_writes_eager_made_before_it():
    # A new input shape recaptures; the function raises after its BatchNorm
    # updated the running statistics and a counter was bumped. Eager (and
    # torch.compile) keep those writes; the capture used to put them back, so
    # the compiled module's statistics and counters fell behind eager's.
    def run(C):
        tp.manual_seed(0)
        m = nn.BatchNorm1d(3)
        cnt = tp.zeros(1)

        def f(x):
            y = m(x)
            cnt.add_(1)
            if x.shape[0] == 5:
                raise ValueError("a bad batch")
            return y

        cf = C(f)
        g = tp.Generator().manual_seed(2)
        cf(tp.randn(4, 3, generator=g))
        with pytest.raises(ValueError, match="a bad batch"):
            cf(tp.randn(5, 3, generator=g))
        cf(tp.randn(4, 3, generator=g))
        return int(m.num_batches_tracked), float(cnt), m.running_mean.numpy().copy()

    want, got = run(lambda f: f), run(tp.compile)
    assert got[:2] == want[:2] == (3, 3.0)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)


def test_an_exception_after_random_draws_leaves_the_generator_where_eager_does():
    def run(C):
        g = tp.Generator().manual_seed(1)
        buf = tp.zeros(3)

        def f(x, k):
            y = x + tp.rand(3, generator=g)
            buf.add_(y)
            if k.shape[0] == 2:
                raise KeyError("stop")
            return y

        cf = C(f)
        cf(tp.ones(3), tp.ones(1))
        with pytest.raises(KeyError):
            cf(tp.ones(3), tp.ones(2))
        return buf.numpy().copy(), tp.rand(2, generator=g).numpy()

    want, got = run(lambda f: f), run(tp.compile)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_an_exception_with_a_lifted_float_argument_writes_once():
    # A float argument that changed between calls is an input of a retried
    # capture: the first attempt's writes are put back, the retry's kept.
    def run(C):
        cnt = tp.zeros(1)

        def h(x, s):
            cnt.add_(1)
            if s > 2.5:
                raise ValueError("big")
            return x * s

        ch = C(h)
        ch(tp.ones(2), 1.0)
        ch(tp.ones(2), 2.0)
        with pytest.raises(ValueError):
            ch(tp.ones(2), 3.0)
        return float(cnt)

    assert run(tp.compile) == run(lambda f: f) == 3.0


def test_a_capture_failure_still_puts_the_inputs_back():
    x = tp.ones(3)

    def f(x):
        x.add_(1)
        x.numpy()  # data copied out of the program: a capture failure, not the user's error
        return x * 2

    with pytest.raises(tp.compiler.CaptureError, match="numpy"):
        tp.compile(f, fullgraph=True)(x)
    np.testing.assert_array_equal(x.numpy(), np.ones(3, np.float32))


# ------------------------------------------ tp.func transforms and tp.compile

def _f(x):
    return (x.sin() * x).sum()


def test_transforms_of_a_compiled_function_match_eager():
    x = tp.randn(4, generator=tp.Generator().manual_seed(0))
    v = tp.randn(4, generator=tp.Generator().manual_seed(1))
    cf = tp.compile(_f)
    np.testing.assert_allclose(tp.func.grad(cf)(x).numpy(), tp.func.grad(_f)(x).numpy(), rtol=1e-6)
    W = tp.randn(5, 4, generator=tp.Generator().manual_seed(2))
    np.testing.assert_allclose(tp.func.vmap(tp.func.grad(cf))(W).numpy(), tp.func.vmap(tp.func.grad(_f))(W).numpy(),
                               rtol=1e-6)
    (o1, t1), (o2, t2) = tp.func.jvp(cf, (x,), (v,)), tp.func.jvp(_f, (x,), (v,))
    np.testing.assert_allclose([float(o1), float(t1)], [float(o2), float(t2)], rtol=1e-6)


def test_compiling_a_grad_transform():
    x = tp.randn(4, generator=tp.Generator().manual_seed(0))
    np.testing.assert_allclose(tp.compile(tp.func.grad(_f))(x).numpy(), tp.func.grad(_f)(x).numpy(), rtol=1e-6)


def test_an_inner_exception_the_function_caught_does_not_keep_writes_of_a_failed_capture():
    # The inner compiled function raises the user's ValueError, which the outer
    # function catches; the outer capture then fails (numpy()): a capture failure
    # puts the input back, whatever exceptions were caught on the way.
    def check(x):
        if x.shape[0] == 3:
            raise ValueError("inner")
        return x * 2

    inner = tp.compile(check)
    x = tp.ones(3)

    def outer(x):
        x.add_(1)
        try:
            inner(x)
        except ValueError:
            pass
        x.numpy()
        return x

    with pytest.raises(tp.compiler.CaptureError, match="numpy"):
        tp.compile(outer, fullgraph=True)(x)
    np.testing.assert_array_equal(x.numpy(), np.ones(3, np.float32))
