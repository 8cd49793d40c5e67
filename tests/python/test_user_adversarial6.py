"""What users do inside compiled functions that the earlier suites missed:
writes through x.detach() into a leaf that requires grad, changing
requires_grad inside the function, and `_base` of a result that views an
argument. Each test compares with eager TensorPlay (compiling must be
unobservable) or checks the error a capture must raise instead of a silently
different result."""
import numpy as np
import pytest

import tensorplay as tp


@pytest.fixture(autouse=True)
def _fresh():
    tp.compiler.reset()
    yield
    tp.compiler.reset()


def _leaf(values):
    return tp.tensor(np.asarray(values, dtype=np.float32)).requires_grad_()


def test_write_through_detach_into_grad_leaf_as_eager():
    # Eager allows `w.detach().add_(1)` on a leaf that requires grad (the detached
    # tensor has no autograd relation to w); the capture refused it as a write
    # through a view of the leaf.
    def f(x, w):
        w.detach().add_(1)
        return (x * w).sum()

    x = tp.tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32))
    w_e, w_c = _leaf([0.5, -1.0, 2.0]), _leaf([0.5, -1.0, 2.0])
    cf = tp.compile(f)
    for _ in range(3):
        le, lc = f(x, w_e), cf(x, w_c)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-6)
        np.testing.assert_array_equal(w_c.detach().numpy(), w_e.detach().numpy())
        le.backward()
        lc.backward()
        np.testing.assert_allclose(w_c.grad.numpy(), w_e.grad.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(w_c.detach().numpy(), [3.5, 2.0, 5.0])


def test_write_through_view_of_detach_into_grad_leaf():
    def f(x, w):
        w.detach()[1:].mul_(2)
        return x + w

    x = tp.ones(3)
    w_e, w_c = _leaf([1.0, 2.0, 3.0]), _leaf([1.0, 2.0, 3.0])
    cf = tp.compile(f)
    for _ in range(2):
        np.testing.assert_array_equal(cf(x, w_c).detach().numpy(), f(x, w_e).detach().numpy())
        np.testing.assert_array_equal(w_c.detach().numpy(), w_e.detach().numpy())


def test_write_through_detach_keeps_the_leafs_gradient():
    # The write is cut from the gradient as eager's is: d(x * w)/dw stays x
    # after w.detach().mul_(3), not 3x through the mul.
    def f(x, w):
        w.detach().mul_(3)
        return (x * w).sum()

    x = tp.tensor(np.array([1.0, -2.0], dtype=np.float32))
    w_e, w_c = _leaf([1.0, 2.0]), _leaf([1.0, 2.0])
    f(x, w_e).backward()
    tp.compile(f)(x, w_c).backward()
    np.testing.assert_array_equal(w_e.grad.numpy(), [1.0, -2.0])
    np.testing.assert_array_equal(w_c.grad.numpy(), w_e.grad.numpy())
    np.testing.assert_array_equal(w_c.detach().numpy(), [3.0, 6.0])


def test_module_parameter_updated_through_detach_in_forward():
    # A moving average kept in a parameter, updated through detach() in forward.
    class Net(tp.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = tp.nn.Parameter(tp.tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32)))

        def forward(self, x):
            self.w.detach().mul_(0.5).add_(x.detach() * 0.5)
            return (self.w * x).sum()

    net_e, net_c = Net(), Net()
    cf = tp.compile(net_c)
    for k in range(3):
        x = tp.tensor(np.array([k, 1.0, -1.0], dtype=np.float32))
        le, lc = net_e(x), cf(x)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-6)
        le.backward()
        lc.backward()
        np.testing.assert_allclose(net_c.w.detach().numpy(), net_e.w.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(net_c.w.grad.numpy(), net_e.w.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("write", ["detach", "no_grad", "no_grad_copy", "detach_slice"])
def test_write_without_grad_into_intermediate_with_history_raises(write):
    # Eager keeps h's history across a write under no_grad or through
    # h.detach(): d/dx sum(h * x) with h = 2x then scaled by 3 in place is
    # 6x + 2x. The compiled gradient lost the 2x (h's history) silently; the
    # graph cannot express the kept history, so the capture refuses.
    def f(x):
        h = x * 2
        if write == "detach":
            h.detach().mul_(3)
        elif write == "detach_slice":
            h.detach()[1:].mul_(3)
        else:
            with tp.no_grad():
                if write == "no_grad":
                    h.mul_(3)
                else:
                    h.copy_(h * 3)
        return (h * x).sum()

    x = _leaf([1.0, 2.0])
    f(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [8.0, 16.0] if write != "detach_slice" else [4.0, 16.0])
    with pytest.raises(tp.compiler.CaptureError, match="intermediate that requires grad"):
        tp.compile(f, fullgraph=True)(_leaf([1.0, 2.0]))
    # Without grad the same writes compile (nothing to keep).
    with tp.no_grad():
        y = tp.tensor(np.array([1.0, 2.0], dtype=np.float32))
        np.testing.assert_allclose(tp.compile(f)(y).item(), f(y).item(), rtol=1e-6)


def test_write_through_plain_view_of_grad_leaf_still_refused():
    # Without detach eager refuses the write; so must the compiled call.
    def f(x, w):
        w[1:].mul_(2)
        return x + w

    w = _leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        f(tp.ones(3), w)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        tp.compile(f)(tp.ones(3), w)


@pytest.mark.parametrize("make", [
    lambda x: x.detach().requires_grad_(),
    lambda x: x.clone().requires_grad_() * 2,
    lambda x: tp.zeros(3, requires_grad=True) + x,
    lambda x: tp.nn.Parameter(x.clone()),
], ids=["detach_requires_grad_", "clone_requires_grad_", "factory_requires_grad", "parameter"])
def test_new_leaf_inside_compiled_function(make):
    # Eager gives a tensor that requires grad; the compiled call used to return
    # one without requires_grad (and without grad_fn downstream): silently
    # different. The capture refuses, naming the call: an error under
    # fullgraph=True; by default the function runs step-wise, as eager.
    x = tp.ones(3)
    assert make(x).requires_grad
    with pytest.raises(tp.compiler.CaptureError, match="require grad"):
        tp.compile(make, fullgraph=True)(x)
    out = tp.compile(make)(x)
    assert out.requires_grad
    out.sum().backward()  # its graph is eager's


def test_requires_grad_false_on_argument_inside_compiled_function():
    def f(w):
        w.requires_grad_(False)
        return w * 2

    w = _leaf([1.0, 2.0])
    with pytest.raises(tp.compiler.CaptureError, match=r"requires_grad_\(False\)"):
        tp.compile(f, fullgraph=True)(w)
    assert w.requires_grad  # the failed capture left the caller's tensor as it was
    out = tp.compile(f)(w)  # step-wise: the change happens, as in eager
    assert not w.requires_grad and not out.requires_grad


def test_requires_grad_unchanged_inside_compiled_function_is_fine():
    def f(w, x):
        w.requires_grad_(True)   # already true: no change
        x.requires_grad_(False)  # already false
        return (w * x).sum()

    w, x = _leaf([1.0, 2.0]), tp.tensor(np.array([3.0, 4.0], dtype=np.float32))
    out = tp.compile(f)(w, x)
    out.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])


@pytest.mark.parametrize("fn", [lambda x: x[1:], lambda x: x.view(16), lambda x: x.t()[0],
                                lambda x: (x[1:], x * 2)],
                         ids=["slice", "view", "view_of_view", "tuple"])
def test_result_viewing_an_argument_has_it_as_base(fn):
    x = tp.randn(4, 4)
    first = lambda r: r[0] if isinstance(r, tuple) else r  # noqa: E731
    assert first(fn(x))._base is x
    c = first(tp.compile(fn)(x))
    assert c._base is x
    assert c._base is c._base
    c.fill_(7.0)  # the alias is real: the write reaches x
    np.testing.assert_array_equal(first(fn(x)).numpy(), np.full(tuple(c.shape), 7.0, dtype=np.float32))


def test_print_inside_compiled_function_warns_once(capsys):
    # print() runs while a call is captured and not on later calls (no Python
    # runs then): a UserWarning says so instead of a silently missing line.
    import builtins
    orig = builtins.print

    def f(x):
        print("step", x.shape)
        return x * 2

    cf = tp.compile(f)
    with pytest.warns(UserWarning, match=r"print\(\) inside compiled function"):
        cf(tp.ones(2))
    assert capsys.readouterr().out == "step (2,)\n"
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(cf(tp.ones(2)).numpy(), [2.0, 2.0])
        cf(tp.ones(3))  # a new shape captures again: it prints, and does not warn twice
    assert builtins.print is orig


def test_print_watch_restored_when_capture_fails():
    import builtins
    orig = builtins.print

    def f(x):
        print("before")
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        tp.compile(f)(tp.ones(2))
    assert builtins.print is orig


def test_function_without_print_does_not_warn():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tp.compile(lambda x: x + 1)(tp.ones(2))
