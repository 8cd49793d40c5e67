"""Adversarial user tests, round 4: training scripts, hooks, modes and dtypes as PyTorch users
write them.

Each test is a bug a user porting real code hit: a silent wrong result, a crash or a
misleading error. Compiled results are compared with eager ones ("compiling is
unobservable"), eager ones with PyTorch's semantics.
"""
import numpy as np
import pytest

import tensorplay as tp


# ---------------------------------------------------------------- inference_mode around compiled calls
@pytest.mark.parametrize("backend", ["stax", "eager"])
def test_results_of_a_compiled_call_under_inference_mode_are_inference_tensors(backend):
    # A compiled model run under tp.inference_mode() returned plain tensors: a later
    # in-place write outside inference_mode, or using them in autograd, went through
    # where the same code run eagerly raises.
    m = tp.nn.Linear(3, 2)
    x = tp.randn(4, 3)
    cm = tp.compile(m, backend=backend)
    with tp.inference_mode():
        e, c = m(x), cm(x)
    assert e.is_inference() and c.is_inference()
    for y in (e, c):
        with pytest.raises(RuntimeError, match="inference"):
            y.add_(1)
        with pytest.raises(RuntimeError, match="inference"):
            y * m.weight[0]  # recorded for autograd
    # Outside inference_mode the results are plain again, and training works.
    y = cm(x)
    assert not y.is_inference()
    y.sum().backward()
    assert m.weight.grad is not None


def test_compiled_results_that_alias_an_input_keep_the_inputs_kind():
    f = tp.compile(lambda a: (a * 2, a[1:], a))
    plain = tp.ones(3)
    with tp.inference_mode():
        inf = tp.ones(3)
        r = f(plain)
    assert [t.is_inference() for t in r] == [True, False, False]
    r = f(inf)  # outside inference_mode: new results are plain, views of the input are not
    assert [t.is_inference() for t in r] == [False, True, True]
    assert r[2] is inf


def test_a_view_of_an_inference_tensor_is_an_inference_tensor():
    # x[1:] of an inference tensor was a plain tensor, so writing through it outside
    # inference_mode slipped past the rule that refuses writing into x itself.
    with tp.inference_mode():
        x = tp.ones(3)
        inside = x.view(3)
    outside = x[1:]
    assert inside.is_inference() and outside.is_inference()
    with pytest.raises(RuntimeError, match="inference"):
        outside.add_(1)
    assert x.tolist() == [1.0, 1.0, 1.0]
    with tp.inference_mode():
        outside.add_(1)  # allowed inside, as for x
    assert x.tolist() == [1.0, 2.0, 2.0]
    # A view of a plain tensor made under inference_mode stays plain.
    n = tp.ones(3)
    with tp.inference_mode():
        v = n[1:]
    assert not v.is_inference()


# ---------------------------------------------------------------- containers of tensors that grow
def _grow_cases():
    def loop(xs):
        def f(y):
            for x in xs:
                y = y + x
            return y
        return f

    return {
        "sum over a closure list": (lambda xs: (lambda y: y + sum(xs)), list, lambda c: c.append(tp.full((2,), 5.0))),
        "for loop over a closure list": (loop, list, lambda c: c.append(tp.full((2,), 5.0))),
        "last element": (lambda xs: (lambda y: y + xs[-1]), list, lambda c: c.append(tp.full((2,), 5.0))),
        "len of a list of tensors": (lambda xs: (lambda y: y + len(xs)), list, lambda c: c.pop()),
        "dict values": (lambda d: (lambda y: y + sum(d.values())), dict, lambda c: c.__setitem__("b", tp.full((2,), 3.0))),
    }


@pytest.mark.parametrize("case", sorted(_grow_cases()))
def test_a_list_or_dict_of_tensors_that_grows_between_calls_selects_another_version(case):
    # A compiled function looping over a list (or dict) of tensors from its closure kept the
    # loop of its first call: after `cache.append(t)` it silently returned the old sum.
    make, kind, mutate = _grow_cases()[case]
    results = []
    for compiled in (False, True):
        c = [tp.ones(2)] if kind is list else {"a": tp.ones(2)}
        f = make(c)
        f = tp.compile(f) if compiled else f
        first = f(tp.zeros(2)).tolist()
        mutate(c)
        results.append((first, f(tp.zeros(2)).tolist(), f(tp.zeros(2)).tolist()))
    assert results[1] == results[0]


def test_a_list_of_tensors_on_a_module_that_grows_is_read_again():
    class Extra(tp.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tp.nn.Linear(2, 2)
            self.extra = []  # a plain list (not registered): tensors the user adds over time

        def forward(self, x):
            y = self.lin(x)
            for t in self.extra:
                y = y + t
            return y

    m = Extra()
    cm = tp.compile(m)
    x = tp.randn(3, 2)
    assert tp.allclose(cm(x), m(x))
    m.extra.append(tp.ones(2))
    assert tp.allclose(cm(x), m(x))
    m.extra.append(tp.full((2,), 2.0))
    assert tp.allclose(cm(x), m(x))
    m.extra.clear()
    assert tp.allclose(cm(x), m.lin(x))


def test_a_list_of_tensors_of_unchanged_length_does_not_recompile():
    xs = [tp.ones(2), tp.ones(2)]
    f = tp.compile(lambda y: y + sum(xs))
    f(tp.zeros(2))
    tp.compiler.reset()
    f = tp.compile(lambda y: y + sum(xs))
    for _ in range(3):
        assert f(tp.zeros(2)).tolist() == [2.0, 2.0]
    xs[0] = tp.full((2,), 4.0)  # replaced, same length: re-read as a free tensor, same version
    assert f(tp.zeros(2)).tolist() == [5.0, 5.0]
    assert tp.compiler.metrics.recompiles == 0


def test_compiled_module_with_keyword_only_forward_arguments():
    # tp.compile(module) whose forward takes keyword-only arguments raised
    # TypeError (plain functions already went through the keyword-only adapter);
    # the module stays reachable through the compiled object.
    class M(tp.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = tp.nn.Linear(4, 3)

        def forward(self, x, *, scale=1.0, bias=None):
            y = self.fc(x) * scale
            return y if bias is None else y + bias

    m = M()
    cm = tp.compile(m)
    x, b = tp.randn(2, 4), tp.randn(3)
    for kw in ({}, {"scale": 2.0}, {"scale": 3.0, "bias": b}, {"bias": b}):
        np.testing.assert_allclose(cm(x, **kw).detach().numpy(), m(x, **kw).detach().numpy(), rtol=1e-6)
    assert cm._orig_mod is m and cm.fc is m.fc and len(list(cm.parameters())) == 2
    with tp.no_grad():  # a parameter written between calls is read again
        m.fc.weight.mul_(0.5)
    np.testing.assert_allclose(cm(x, scale=2.0).detach().numpy(), m(x, scale=2.0).detach().numpy(), rtol=1e-6)
    cm(x, bias=b).sum().backward()
    assert m.fc.weight.grad is not None and m.fc.weight.grad.shape == (3, 4)
