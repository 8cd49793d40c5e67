"""Compiled functions that return an input (or a view of one), typically one they
wrote in place: `lambda a, s, b: a.mul_(s).add_(b)`. The call hands back the
input object itself, as eager does, so the backend must not compute that result
as a graph output of its own (it did: a second full pass over `a` and a copy).
The write into the input still happens once per call. Each case is checked against
eager: values, `is` identity, memory aliasing, and the graph's output count."""

import re

import numpy as np
import pytest

import tensorplay as tp


def graph_outputs(cf):
    """The values the compiled graph returns (the backend computes each one)."""
    m = re.search(r"^\s*return (.*)$", cf.last_graph.code, re.M)
    assert m, cf.last_graph.code
    body = m.group(1).strip()
    if body.startswith("(") and body.endswith(")"):
        body = body[1:-1]
    return [v for v in (s.strip() for s in body.split(",")) if v]


def pair(*arrays):
    return [tp.tensor(a.copy()) for a in arrays], [tp.tensor(a.copy()) for a in arrays]


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def mul_add(a, s, b):
    return a.mul_(s).add_(b)


@pytest.mark.parametrize("opts", [{}, {"strict_native": True}, {"dynamic": True}])
def test_returned_mutated_input_is_not_a_second_output(opts):
    (ae, be), (ac, bc) = pair(rand(1000), rand(1000, seed=1))
    cf = tp.compile(mul_add, **opts)
    for call in range(3):  # capture, then cache hits
        re_, rc = mul_add(ae, 1.5, be), cf(ac, 1.5, bc)
        assert rc is ac and re_ is ae
        # Written exactly once per call: the values after three calls agree.
        np.testing.assert_allclose(ac.numpy(), ae.numpy(), rtol=1e-5, atol=1e-5)
    # The mutated input's final value is the only graph output (was `(add, add)`).
    assert len(graph_outputs(cf)) == 1, cf.last_graph.code


def test_returned_mutated_input_dynamic_sizes():
    cf = tp.compile(mul_add, dynamic=True)
    for n in (64, 100, 257):
        (ae, be), (ac, bc) = pair(rand(n, seed=n), rand(n, seed=n + 1))
        rc = cf(ac, 0.5, bc)
        mul_add(ae, 0.5, be)
        assert rc is ac
        np.testing.assert_allclose(ac.numpy(), ae.numpy(), rtol=1e-5, atol=1e-5)
        assert len(graph_outputs(cf)) == 1


def test_return_input_after_statement_mutation():
    def f(a, b):
        a.add_(b)
        a.mul_(2)
        return a

    (ae, be), (ac, bc) = pair(rand(4, 5), rand(5, seed=2))
    cf = tp.compile(f)
    for _ in range(2):
        assert f(ae, be) is ae and cf(ac, bc) is ac
        np.testing.assert_allclose(ac.numpy(), ae.numpy(), rtol=1e-6)
    assert len(graph_outputs(cf)) == 1


def test_return_mutated_input_and_a_fresh_result():
    def f(a):
        a.mul_(3)
        return a, a + 1

    (ae,), (ac,) = pair(rand(6, 7))
    cf = tp.compile(f)
    for _ in range(2):
        e0, e1 = f(ae)
        c0, c1 = cf(ac)
        assert c0 is ac and e0 is ae
        np.testing.assert_allclose(c1.numpy(), e1.numpy(), rtol=1e-6)
        assert c1.data_ptr() != ac.data_ptr()
        np.testing.assert_allclose(ac.numpy(), ae.numpy(), rtol=1e-6)
    assert len(graph_outputs(cf)) == 2  # a + 1 and a's final value


@pytest.mark.parametrize("view", [lambda a: a[0], lambda a: a.view(-1), lambda a: a.t(), lambda a: a[:, 1:3]],
                         ids=["select", "view", "t", "slice"])
def test_returned_view_of_mutated_input_aliases_it(view):
    def f(a, b):
        a.add_(b)
        return view(a)

    (ae, be), (ac, bc) = pair(rand(4, 5), rand(4, 5, seed=3))
    cf = tp.compile(f)
    for _ in range(2):
        re_, rc = f(ae, be), cf(ac, bc)
        assert rc.shape == re_.shape and rc.stride() == re_.stride()
        np.testing.assert_allclose(rc.numpy(), re_.numpy(), rtol=1e-6)
        np.testing.assert_allclose(ac.numpy(), ae.numpy(), rtol=1e-6)
        # A view of the input, as in eager: a later write into `a` shows in it.
        ac.add_(1.0)
        ae.add_(1.0)
        np.testing.assert_allclose(rc.numpy(), re_.numpy(), rtol=1e-6)
    assert len(graph_outputs(cf)) == 1  # only a's final value, not a copy of the view


def test_returned_view_of_unmutated_input_is_a_view():
    def f(a):
        return a.t(), a.sum()

    a = tp.tensor(rand(3, 4))
    cf = tp.compile(f)
    v, s = cf(a)
    assert v.data_ptr() == a.data_ptr() and v.shape == (4, 3)
    a.mul_(2)
    np.testing.assert_allclose(v.numpy(), a.numpy().T)
    np.testing.assert_allclose(s.item(), f(tp.tensor(rand(3, 4)))[1].item(), rtol=1e-5)
    assert len(graph_outputs(cf)) == 1


def test_identity_returns_the_input_and_computes_nothing():
    cf = tp.compile(lambda a: a)
    a = tp.tensor(rand(5))
    for _ in range(2):
        assert cf(a) is a
    assert a._version == 0
    assert graph_outputs(cf) == []


def test_input_requiring_grad_mutated_under_no_grad():
    def f(w, g):
        w.sub_(g, alpha=0.1)
        return w

    we, wc = tp.tensor(rand(8), requires_grad=True), tp.tensor(rand(8), requires_grad=True)
    g = tp.tensor(rand(8, seed=4))
    cf = tp.compile(f)
    for _ in range(3):
        with tp.no_grad():
            re_, rc = f(we, g), cf(wc, g)
        assert re_ is we and rc is wc
        assert rc.requires_grad and rc.grad_fn is None  # still the leaf
        np.testing.assert_allclose(wc.detach().numpy(), we.detach().numpy(), rtol=1e-6)
    assert len(graph_outputs(cf)) == 1


def test_no_grad_write_inside_function_with_grad_on():
    def f(w):
        with tp.no_grad():
            w.clamp_(-0.5, 0.5)
        return w

    we, wc = tp.tensor(rand(8), requires_grad=True), tp.tensor(rand(8), requires_grad=True)
    cf = tp.compile(f)
    re_, rc = f(we), cf(wc)
    assert re_ is we and rc is wc and rc.grad_fn is None
    np.testing.assert_allclose(wc.detach().numpy(), we.detach().numpy())


def test_recorded_mutation_of_non_leaf_keeps_gradients():
    def f(x):
        x.mul_(3)
        return x

    def run(fn):
        w = tp.tensor(rand(6), requires_grad=True)
        x = w * 2
        out = fn(x)
        assert out is x
        (out * out).sum().backward()
        return out.detach().numpy(), w.grad.numpy()

    cf = tp.compile(f)
    for _ in range(2):
        (oe, ge), (oc, gc) = run(f), run(cf)
        np.testing.assert_allclose(oc, oe, rtol=1e-6)
        np.testing.assert_allclose(gc, ge, rtol=1e-5)


@pytest.mark.parametrize("backend", ["stax", "eager", "aot_eager", "callable"])
def test_every_backend_returns_the_input_and_its_views(backend):
    be = (lambda gm, example_inputs: gm) if backend == "callable" else backend

    def f(a, b):
        a.add_(b)
        return a, a[1:], (a * 2).sum()

    (ae, be_), (ac, bc) = pair(rand(4, 3), rand(4, 3, seed=7))
    cf = tp.compile(f, backend=be)
    for _ in range(2):
        e, c = f(ae, be_), cf(ac, bc)
        assert c[0] is ac and c[1].data_ptr() == ac[1:].data_ptr()
        for x, y in zip(c, e):
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-6)
    assert len(graph_outputs(cf)) == 2  # the sum and a's final value


def test_view_of_an_input_in_training_keeps_its_gradient():
    def f(x):
        return x.t(), (x * 2).sum()

    cf = tp.compile(f)
    x = tp.tensor(rand(3, 4), requires_grad=True)
    for _ in range(2):
        v, s = cf(x)
        assert v.data_ptr() == x.data_ptr() and v.requires_grad
        (v.sum() * 3 + s).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((3, 4), 10.0))


class _Stats(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", tp.zeros(4))
        self.scale = tp.nn.Parameter(tp.ones(4))

    def forward(self, x):
        self.total.add_(x.sum(0))
        return self.total, self.scale, x * self.scale


def test_returned_buffer_and_parameter_are_the_owners_objects():
    # eager returns the module's own objects (the Parameter stays one); the
    # compiled call returned new wrappers of the same tensors
    m = _Stats()
    cm = tp.compile(m)
    x = tp.ones(2, 4)
    for call in range(3):
        total, scale, y = cm(x)
        assert total is m.total and scale is m.scale and isinstance(scale, tp.nn.Parameter)
        np.testing.assert_allclose(m.total.numpy(), np.full(4, 2.0 * (call + 1)))
    m.total = tp.zeros(4)  # a new buffer object: the next calls return (and write) it
    for call in range(2):
        total, _, _ = cm(x)
        assert total is m.total
        np.testing.assert_allclose(m.total.numpy(), np.full(4, 2.0 * (call + 1)))
    assert len(graph_outputs(cm)) == 2  # x * scale and total's final value


def test_returned_closure_tensor_is_that_object():
    w = tp.tensor(rand(3))

    def f(x):
        w.mul_(2)
        return w, x + w

    cf = tp.compile(f)
    x = tp.tensor(rand(3, seed=8))
    ref = w.numpy().copy()
    for call in range(2):
        r, _ = cf(x)
        assert r is w
    np.testing.assert_allclose(w.numpy(), ref * 4, rtol=1e-6)
