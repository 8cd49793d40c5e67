"""The per-call path of a compiled function as users drive it: state that changes
between calls inside a loop (where CPython specializes the attribute stores and the
compiler checks dict versions instead of re-walking), parameters rebound through
every way Python offers (submodule, attribute, class attribute, __dict__), calls
through every calling convention (positional, keywords, *args/**kwargs,
functools.partial, the type's __call__), and the errors those calls raise."""

import functools

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.scale = 1.0

    def forward(self, x):
        return self.fc(x) * self.scale


def _same(a, b):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_module_number_attribute_changed_in_a_hot_loop():
    # The store in the loop is specialized by CPython after a few iterations; each
    # new value must still select (or build) the right version.
    m = _Scaled()
    cm = tp.compile(m)
    x = tp.randn(2, 4)
    for i in range(40):
        m.scale = float(i % 5)
        with tp.no_grad():
            _same(cm(x), m(x))


def test_training_flag_toggled_in_a_hot_loop():
    m = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    cm = tp.compile(m)
    x = tp.randn(3, 4)
    for i in range(30):
        m.train(i % 2 == 0)
        with tp.no_grad():
            if not m.training:
                _same(cm(x), m(x))
            else:
                tp.manual_seed(i)
                a = cm(x)
                tp.manual_seed(i)
                b = m(x)
                _same(a, b)


@pytest.mark.parametrize("how", ["submodule", "parameter", "data", "inplace"])
def test_parameters_rebound_between_calls_in_a_loop(how):
    m = _Scaled()
    cm = tp.compile(m)
    x = tp.randn(2, 4)
    for i in range(25):
        if how == "submodule":
            m.fc = nn.Linear(4, 3)
        elif how == "parameter":
            m.fc.weight = nn.Parameter(tp.randn(3, 4))
        elif how == "data":
            m.fc.weight.data = tp.randn(3, 4)
        else:
            with tp.no_grad():
                m.fc.bias.add_(1.0)
        with tp.no_grad():
            _same(cm(x), m(x))


def test_attribute_shadowed_by_a_class_property_after_the_first_calls():
    # A class attribute (a property here) now wins over the instance dict: the
    # compiled function must read what eager reads.
    class Holder:
        pass

    h = Holder()
    h.w = tp.ones(4)

    def f(x):
        return x * h.w

    cf = tp.compile(f)
    x = tp.randn(4)
    for _ in range(3):
        _same(cf(x), f(x))
    twos = tp.full((4,), 2.0)
    Holder.w = property(lambda self: twos)
    _same(f(x), x * 2)
    _same(cf(x), f(x))
    del Holder.w
    _same(cf(x), f(x))


def test_instance_dict_replaced_and_class_changed():
    class A:
        pass

    class B:
        pass

    a = A()
    a.w = tp.ones(4)

    def f(x):
        return x + a.w

    cf = tp.compile(f)
    x = tp.randn(4)
    _same(cf(x), f(x))
    a.__dict__ = {"w": tp.full((4,), 3.0)}
    _same(cf(x), f(x))
    a.__class__ = B
    a.w = tp.full((4,), 5.0)
    _same(cf(x), f(x))


def test_global_tensor_rebound_in_a_loop():
    ns = {"tp": tp}
    exec("W = None\ndef f(x):\n    return x * W\n", ns)
    f = ns["f"]
    cf = tp.compile(f)
    x = tp.randn(4)
    for i in range(20):
        ns["W"] = tp.full((4,), float(i))
        _same(cf(x), f(x))


def test_every_calling_convention_gives_eager_result():
    def f(x, y, scale=2.0):
        return x * scale + y

    cf = tp.compile(f)
    x, y = tp.randn(4), tp.randn(4)
    want = f(x, y)
    _same(cf(x, y), want)
    _same(cf(x, y=y), want)
    _same(cf(y=y, x=x), want)
    _same(cf(*(x, y)), want)
    _same(cf(*(x,), **{"y": y}), want)
    _same(functools.partial(cf, x)(y), want)
    _same(functools.partial(cf, scale=3.0)(x, y), f(x, y, 3.0))
    _same(type(cf).__call__(cf, x, y), want)
    _same(type(cf).__call__(cf, x, y=y, scale=3.0), f(x, y, 3.0))
    assert callable(cf)


def test_call_errors_keep_their_python_types():
    def f(x, y):
        return x + y

    cf = tp.compile(f)
    x = tp.randn(4)
    with pytest.raises(TypeError):
        cf(x)
    with pytest.raises(TypeError):
        cf(x, x, x)
    with pytest.raises(TypeError):
        cf(x, z=x)

    def g(x):
        raise KeyError("user error")

    with pytest.raises(KeyError, match="user error"):
        tp.compile(g)(x)

    def h(x):
        return x @ x.reshape(2, 2)

    with pytest.raises(ValueError, match="matmul"):
        tp.compile(h)(x)
    # The compiled function still works after each error.
    _same(cf(x, x), x + x)


def test_reentrant_call_of_the_same_compiled_function():
    # A backend whose region calls the very compiled function again (Python code
    # running inside a compiled call): each level keeps its own arguments.
    depth = [0]
    inner_results = []

    def backend(gm, example_inputs):
        def run(*args):
            if depth[0] == 0:
                depth[0] += 1
                try:
                    inner_results.append((args[0] * 2, args[1], cf(args[0] * 2, args[1])))
                finally:
                    depth[0] -= 1
            return gm(*args)
        return run

    cf = tp.compile(lambda x, y: x * y + 1, backend=backend)
    for _ in range(3):
        x, y = tp.randn(5), tp.randn(5)
        _same(cf(x, y), x * y + 1)
    assert len(inner_results) == 3
    for arg, y, got in inner_results:
        _same(got, arg * y + 1)


def test_config_numbers_changed_in_a_hot_loop_through_every_owner():
    # Python numbers the function reads through an object attribute, a dict item,
    # a closure cell and a nested object: each change (in a loop, where CPython
    # specializes the stores) selects the version eager's value needs.
    class Cfg:
        pass

    cfg = Cfg()
    cfg.scale = 1.0
    cfg.inner = Cfg()
    cfg.inner.shift = 0.0
    table = {"bias": 0.0}
    power = 1

    def make():
        def f(x):
            return (x * cfg.scale + cfg.inner.shift + table["bias"]) ** power
        return f

    f = make()
    cf = tp.compile(f)
    x = tp.rand(4) + 0.5
    for i in range(30):
        cfg.scale = float(i % 3)
        if i % 4 == 0:
            cfg.inner.shift = float(i)
        if i % 5 == 0:
            table["bias"] = float(i) / 2
        if i % 7 == 0:
            cfg.inner = Cfg()
            cfg.inner.shift = -1.0
        _same(cf(x), f(x))


def test_closure_cell_rebound_in_a_hot_loop():
    scale = 1.0

    def f(x):
        return x * scale

    cf = tp.compile(f)
    x = tp.randn(4)
    for i in range(25):
        scale = float(i)  # noqa: F841  (rebinds the cell f reads)
        _same(cf(x), x * float(i))


def test_config_attribute_shadowed_by_a_class_property():
    class Cfg:
        pass

    cfg = Cfg()
    cfg.scale = 2.0

    def f(x):
        return x * cfg.scale

    cf = tp.compile(f)
    x = tp.randn(4)
    for _ in range(3):
        _same(cf(x), x * 2.0)
    Cfg.scale = property(lambda self: 5.0)
    _same(cf(x), x * 5.0)
    del Cfg.scale
    _same(cf(x), x * 2.0)


def test_num_specializations_counts_versions_of_structured_and_object_arguments():
    # Calls with tuple/list/dict arguments or objects (a Generator) run in nested compiled
    # functions, one per argument structure; num_specializations reported 0 for them.
    gen = tp.Generator().manual_seed(3)
    cf = tp.compile(lambda x, g: x + tp.randn(x.shape[0], generator=g))
    cf(tp.ones(3), gen)
    cf(tp.ones(3), gen)
    assert cf.num_specializations == 1
    cf(tp.ones(4), gen)
    assert cf.num_specializations == 2
    pair = tp.compile(lambda xs: xs[0] * xs[1])
    pair((tp.ones(2), tp.ones(2)))
    pair([tp.ones(2), tp.ones(2)])  # another structure: another compiled function
    assert pair.num_specializations == 2
