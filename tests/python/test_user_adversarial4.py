"""Adversarial user tests, round 4: training scripts, hooks, modes and dtypes as PyTorch users
write them.

Each test is a bug a user porting real code hit: a silent wrong result, a crash or a
misleading error. Compiled results are compared with eager ones ("compiling is
unobservable"), eager ones with PyTorch's semantics.
"""
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
