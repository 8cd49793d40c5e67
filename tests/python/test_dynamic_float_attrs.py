"""Automatic dynamic float attributes: a Python float of the state a compiled
function reads (a module's `self.temperature`, a KL weight, a label-smoothing
or beta schedule, `cfg.scale` of an object it closes over, a global) that
changes between calls used to select a new version at every call (16, then the
function ran eagerly with a warning). Once it changed, it is a graph input (a
0-d float64 wrapped number, promoted as the Python number it is), so one
version serves every value, as float arguments do. Uses that need the number
(an operator attribute such as `alpha=`, `math.exp`, `round`, an assignment of
the attribute inside the function) keep it by value; a Python branch on it is a
guard (a version per side). Every case is checked against eager; aot_eager
runs eager's kernels, so its results must be the same bits."""
import math
import warnings

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn

BACKENDS = ["aot_eager", "stax"]


def same(a, b, backend):
    if isinstance(a, tp.Tensor):
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), (a.dtype, b.dtype, a.shape, b.shape)
        a, b = a.detach().numpy(), b.detach().numpy()
    if backend == "aot_eager":
        np.testing.assert_array_equal(a, b)  # eager's kernels: the same bits
    else:
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # fused reductions: another summation order


def no_fallback():
    """Warnings are errors: the fallback to eager after max_versions must not happen."""
    w = warnings.catch_warnings()
    w.__enter__()
    warnings.simplefilter("error")
    return w


class Tempered(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 4)
        self.temperature = 1.0
        self.kl_weight = 0.0

    def forward(self, x):
        logits = self.lin(x) / self.temperature
        return logits.log_softmax(-1), (logits * logits).mean() * self.kl_weight


def _pair():
    tp.manual_seed(0)
    a, b = Tempered(), Tempered()
    b.load_state_dict(a.state_dict())
    return a, b


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["module", "closure", "method"])
def test_a_schedule_over_30_training_steps_builds_at_most_two_versions(backend, how):
    model, ref = _pair()
    if how == "module":
        step = tp.compile(model, backend=backend)
    elif how == "closure":
        step = tp.compile(lambda x: model(x), backend=backend)
    else:
        model.compile(backend=backend)
        step = model
    x, target = tp.randn(8, 6), tp.arange(8) % 4
    before = tp.compiler.metrics.captures
    w = no_fallback()
    try:
        for i in range(30):
            for m in (model, ref):
                m.temperature = 0.5 * 0.99 ** i
                m.kl_weight = min(1.0, i / 10)
            logp, kl = step(x)
            elogp, ekl = ref(x)
            loss = -logp[tp.arange(8), target].mean() + kl
            eloss = -elogp[tp.arange(8), target].mean() + ekl
            same(loss, eloss, backend)
            loss.backward()
            eloss.backward()
            for p, q in zip(model.parameters(), ref.parameters()):
                same(p.grad, q.grad, backend)
                with tp.no_grad():
                    p.sub_(0.1 * p.grad)
                    q.sub_(0.1 * q.grad)
                p.grad = None
                q.grad = None
    finally:
        w.__exit__(None, None, None)
    # The first values by value, then one version for every later value of both floats.
    assert tp.compiler.metrics.captures - before <= 2
    if how != "method":
        assert step.num_specializations <= 2


def test_the_lifted_float_is_promoted_as_a_python_number():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.s = 0.1

        def forward(self, f32, f64, i64):
            return f32 * self.s, f64 * self.s, i64 * self.s, self.s * 3 + f32, f32 / (1 - self.s)

    m = M()
    cm = tp.compile(m, backend="aot_eager")
    f32, f64, i64 = tp.randn(5), tp.randn(5, dtype=tp.float64), tp.arange(5)
    for s in (0.1, 0.3, 1 / 3, 0.7, 1e-8, 123.456):
        m.s = s
        for r, e in zip(cm(f32, f64, i64), m(f32, f64, i64)):
            same(r, e, "aot_eager")  # float32 stays float32, an int tensor gives the default dtype
    assert cm.num_specializations == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_stax_results_equal_eager_bit_for_bit_for_pointwise_uses(backend):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.alpha = 0.5

        def forward(self, x, y):
            return self.alpha * x + (1 - self.alpha) * y, x * self.alpha

    m = M()
    cm = tp.compile(m, backend=backend)
    x, y = tp.randn(7), tp.randn(7)
    for i in range(10):
        m.alpha = 0.9 ** i + 0.01 * i
        for r, e in zip(cm(x, y), m(x, y)):
            np.testing.assert_array_equal(r.numpy(), e.numpy())
    assert cm.num_specializations == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_python_branch_on_the_attribute_is_respected(backend):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = 0.1

        def forward(self, x):
            if self.t > 0.5:
                return x * self.t
            return x - self.t

    m = M()
    cm = tp.compile(m, backend=backend)
    x = tp.randn(4)
    w = no_fallback()
    try:
        for t in (0.1, 0.2, 0.3, 0.6, 0.9, 0.4, 0.45, 0.95, 0.5, 0.55):
            m.t = t
            same(cm(x), m(x), backend)
    finally:
        w.__exit__(None, None, None)
    # The first value; then one version per side of the branch (a guard on the comparison).
    assert cm.num_specializations <= 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_attribute_used_where_an_operator_needs_a_number_is_kept_by_value(backend, capfd, monkeypatch):
    monkeypatch.setenv("TP_LOGS", "recompiles")

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = 0.5

        def forward(self, x, y):
            return x.add(y, alpha=self.a)

    m = M()
    cm = tp.compile(m, backend=backend)
    x, y = tp.randn(4), tp.randn(4)
    values = (0.5, 0.25, 2.0, 0.25, 3.0)
    for a in values:
        m.a = a
        same(cm(x, y), m(x, y), backend)
    # 0.5; 0.25 as an input, where alpha= read it as a number (a gate on its value):
    # kept by value from then on, so 2.0, 0.25 and 3.0 by value.
    assert cm.num_specializations == 5
    err = capfd.readouterr().err
    assert "M.a: a float that changed between calls is an input from now on" in err
    assert "M.a: a float kept by value from now on" in err


@pytest.mark.parametrize("use", ["exp", "round", "float", "int"])
def test_the_attribute_read_as_a_python_number_is_kept_by_value(use):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = 0.5

        def forward(self, x):
            if use == "exp":
                return x * math.exp(self.t)
            if use == "round":
                return x * round(self.t, 1)
            if use == "float":
                return x * float(self.t)
            return x * int(self.t * 10)

    m = M()
    cm = tp.compile(m, backend="aot_eager")
    x = tp.randn(4)
    w = no_fallback()
    try:
        for t in (0.5, 0.61, 0.72, 0.83, 0.94, 1.05, 1.16, 1.27, 1.38, 1.49, 1.51, 1.62):
            m.t = t
            same(cm(x), m(x), "aot_eager")
    finally:
        w.__exit__(None, None, None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attributes_of_nested_submodules(backend):
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.scale = 1.0

        def forward(self, x):
            return self.lin(x) * self.scale

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(Inner(), nn.ReLU(), Inner())
            self.eps = 1e-3

        def forward(self, x):
            return self.blocks(x) + self.eps

    tp.manual_seed(0)
    m = Outer()
    cm = tp.compile(m, backend=backend)
    x = tp.randn(2, 3, requires_grad=True)
    for i in range(12):
        m.blocks[0].scale = 1.0 + 0.1 * i
        m.blocks[2].scale = 2.0 - 0.05 * i
        m.eps = 1e-3 * (i + 1)
        r, e = cm(x), m(x)
        same(r, e, backend)
        (gx,) = tp.autograd.grad(r.sum(), [x])
        (ex,) = tp.autograd.grad(e.sum(), [x])
        same(gx, ex, backend)
    assert cm.num_specializations == 2


SCALE = 1.0


def _uses_global(x):
    return x * SCALE + 1


def test_a_float_global_is_lifted_too():
    # Decision: a global float (as a module attribute, a closure variable or an
    # attribute of a config object) that changes is an input as well; the global
    # holds the graph input only while the call is captured.
    global SCALE
    g = tp.compile(_uses_global, backend="aot_eager")
    x = tp.randn(5)
    try:
        for i in range(10):
            SCALE = 0.3 * i + 0.1
            same(g(x), _uses_global(x), "aot_eager")
            assert type(SCALE) is float and SCALE == 0.3 * i + 0.1  # restored after the capture
    finally:
        SCALE = 1.0
    assert g.num_specializations == 2


def test_a_closure_float_and_a_config_objects_float():
    class Cfg:
        pass

    cfg = Cfg()
    cfg.beta = 0.5
    shift = 0.0

    def f(x):
        return x * cfg.beta + shift

    g = tp.compile(f, backend="aot_eager")
    x = tp.randn(5)
    for i in range(10):
        cfg.beta = 0.5 + 0.1 * i
        shift = -0.25 * i  # noqa: F841 -- read by f through its closure cell
        same(g(x), f(x), "aot_eager")
    assert g.num_specializations == 2
    assert type(cfg.beta) is float


def test_a_returned_attribute_is_a_python_float():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = 1.0

        def forward(self, x):
            return x * self.t, self.t, self.t * 2

    m = M()
    cm = tp.compile(m, backend="aot_eager")
    x = tp.randn(3)
    for t in (1.0, 2.0, 3.0, 4.5):
        m.t = t
        r = cm(x)
        assert type(r[1]) is float and r[1] == t
        assert type(r[2]) is float and r[2] == 2 * t
    assert cm.num_specializations == 2


@pytest.mark.parametrize("write", ["assign", "augmented", "inplace_tensor"])
def test_the_function_writing_the_attribute_matches_eager(write):
    # An assignment inside the function is Python state a compiled version would
    # not repeat: the float stays by value (a capture per value, as before).
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = 1.0

        def forward(self, x):
            y = x * self.t
            if write == "assign":
                self.t = self.t * 0.5
            elif write == "augmented":
                self.t *= 0.5
            return y

    m, ref = M(), M()
    cm = tp.compile(m, backend="aot_eager")
    x = tp.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (16 versions, then eager: the old behaviour for such code)
        for i in range(6):
            if write == "inplace_tensor":
                m.t = ref.t = 1.0 + i
            same(cm(x), ref(x), "aot_eager")
            assert type(m.t) is float and m.t == ref.t


def test_int_attributes_stay_by_value_and_bool_attributes_too():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 1
            self.flag = False

        def forward(self, x):
            y = x * self.k
            return y.relu() if self.flag else y

    m = M()
    cm = tp.compile(m, backend="aot_eager")
    x = tp.randn(4)
    for k in (1, 2, 3, 2):
        m.k = k
        same(cm(x), m(x), "aot_eager")
    assert cm.num_specializations == 3  # an int attribute: one version per value (unchanged)
    for flag in (True, False, True):
        m.flag = flag
        same(cm(x), m(x), "aot_eager")
    assert cm.num_specializations == 4  # a bool: by value (k = 2, flag True is new)


def test_an_attribute_that_changes_type_is_by_value_again():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = 1.0

        def forward(self, x):
            return x * self.t

    m = M()
    cm = tp.compile(m, backend="aot_eager")
    x = tp.randn(3)
    for t in (1.0, 2.0, 3, 4.0, 5, 2.5):
        m.t = t
        same(cm(x), m(x), "aot_eager")
    # 1.0; then every float; the ints 3 and 5 by value.
    assert cm.num_specializations == 4


def test_dynamic_true_and_dynamic_sizes_together():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = 1.0

        def forward(self, x):
            return (x / self.t).softmax(-1)

    m = M()
    cm = tp.compile(m, dynamic=True)
    for i, n in enumerate((3, 5, 7, 9, 4, 6)):
        m.t = 0.5 + i
        x = tp.randn(n, 8)  # (never 8 rows: a size equal to the other dim would be a guard of its own)
        same(cm(x), m(x), "stax")
    assert cm.num_specializations <= 2


def test_the_option_keeps_floats_by_value():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = 1.0

        def forward(self, x):
            return x * self.t

    m = M()
    cm = tp.compile(m, backend="aot_eager", options={"dynamic_float_attrs": False})
    x = tp.randn(3)
    for t in (1.0, 2.0, 3.0):
        m.t = t
        same(cm(x), m(x), "aot_eager")
    assert cm.num_specializations == 3


def test_recompile_log_and_counters(capfd, monkeypatch):
    monkeypatch.setenv("TP_LOGS", "recompiles")
    m = Tempered()
    cm = tp.compile(m)
    x = tp.randn(2, 6)
    before = tp.compiler.metrics.recompiles
    with tp.no_grad():
        for i in range(5):
            m.temperature = 1.0 + i
            cm(x)
    err = capfd.readouterr().err
    assert "Tempered.temperature: a float that changed between calls is an input from now on" in err
    assert tp.compiler.metrics.recompiles - before == 1
    assert cm.num_specializations == 2


# ---- arithmetic among lifted numbers is Python's (float64), not the default dtype's ----
# Regressions: `1 - t` of a lifted float (argument or attribute) was computed in
# float32 (a wrapped number counted as the default dtype even with no tensor
# around), so `(1 - t) * y` was rounded twice and `t > 0.5` compared in float32:
# at t = 0.50000001 the compiled function took the other branch.

@pytest.mark.parametrize("backend", BACKENDS)
def test_a_branch_on_a_float_argument_compares_in_double(backend):
    f = lambda x, t: x * 2 if t > 0.5 else x - 1  # noqa: E731
    g = tp.compile(f, backend=backend)
    x = tp.randn(3)
    for t in (0.1, 0.2, 0.50000001, 0.49999999, 0.5 + 2 ** -40):
        same(g(x, t), f(x, t), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_arithmetic_on_a_lifted_float_is_done_in_double(backend):
    f = lambda x, y, i, z, t: ((1 - t) * y, y / (t * 3 - 1), i * (t / 7), z * (1 - t), t * 0.1, -t * y)  # noqa: E731
    g = tp.compile(f, backend=backend)
    x, y, i, z = tp.randn(3), tp.randn(1000), tp.arange(5), tp.tensor(1.5)  # z: a 0-d float32 tensor
    for t in (0.5, 0.91, 0.59144, 1 / 3, 0.7000000001):
        r, e = g(x, y, i, z, t), f(x, y, i, z, t)
        for a, b in zip(r, e):
            if isinstance(b, float):
                assert type(a) is float and a == b  # returned: the same double as Python's
            else:
                np.testing.assert_array_equal(a.numpy(), b.numpy())  # (pointwise: the same bits on stax too)
                assert a.dtype == b.dtype


def test_python_numbers_alone_keep_their_width_in_eager_ops():
    r = tp.sub(1, tp.tensor(0.91, dtype=tp.float64)).dtype  # a 0-d tensor, not a Python number: unchanged
    assert r == tp.float64
    x = tp.arange(4)
    assert (x * 0.5).dtype == tp.float32 and (x + 1).dtype == tp.int64  # mixed with tensors: unchanged
    # Python numbers as where's values with a tensor mask: the default dtype, as before
    # (grid_sample's reflection padding multiplies by such a sign).
    assert tp.where(x > 1, -1.0, 1.0).dtype == tp.float32
    g = tp.compile(lambda x, t: tp.where(x > 1, -t, t) * x, backend="aot_eager")
    for t in (0.5, 0.3):
        assert g(x.float(), t).dtype == tp.float32


def test_a_number_derived_from_the_float_stored_in_the_state_stays_a_float():
    # `cfg.derived = cfg.t + 1` inside the function: with cfg.t lifted, the
    # capture would leave the graph's tensor in cfg.derived; it is captured again
    # with the number instead, and the compiled calls are right.
    class Cfg:
        pass

    cfg = Cfg()
    cfg.t, cfg.derived = 1.0, 0.0

    def f(x):
        cfg.derived = cfg.t + 1
        return x * cfg.t

    g = tp.compile(f, backend="aot_eager")
    x = tp.randn(3)
    for t in (1.0, 2.0, 3.0):
        cfg.t = t
        same(g(x), x * t, "aot_eager")
        assert type(cfg.derived) is float


def test_nested_inputs_and_a_changing_float():
    # A tuple argument goes through a compiled function per argument structure
    # (compiler._NestedInputs): its floats are lifted the same way.
    tp.manual_seed(0)
    lin = nn.Linear(3, 3)
    lin.scale = 1.0

    def f(pair):
        a, b = pair
        return lin(a) * lin.scale + b

    g = tp.compile(f, backend="aot_eager")
    x = tp.randn(2, 3)
    for i in range(8):
        lin.scale = 0.5 + 0.25 * i
        same(g((x, x)), f((x, x)), "aot_eager")
    assert g.num_specializations == 2


@pytest.mark.parametrize("kind", ["np.float64", "np.float32", "IntEnum"])
def test_numpy_scalar_and_enum_attributes_select_the_version(kind):
    # Regression: a numpy.float64 (a float subclass), a numpy.float32 or an
    # IntEnum attribute was left out of the state, so a changed value kept
    # running the first capture's number.
    import enum

    class Level(enum.IntEnum):
        ONE = 1
        TWO = 2
        THREE = 3

    make = {"np.float64": np.float64, "np.float32": np.float32, "IntEnum": Level}[kind]

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = make(1)

        def forward(self, x):
            return x * int(self.t) if kind == "IntEnum" else x * self.t

    m = M()
    cm = tp.compile(m, backend="aot_eager")
    g = tp.compile(lambda x: m(x), backend="aot_eager")
    x = tp.ones(3)
    for v in (1, 2, 3, 2):
        m.t = make(v)
        same(cm(x), m(x), "aot_eager")
        same(g(x), m(x), "aot_eager")


def test_a_float_the_function_writes_is_refused_alone(capfd, monkeypatch):
    monkeypatch.setenv("TP_LOGS", "recompiles")

    class Cfg:
        pass

    cfg = Cfg()
    cfg.scale, cfg.decay = 1.0, 1.0

    def f(x):
        y = x * cfg.scale * cfg.decay
        cfg.decay *= 0.5  # Python state: eager halves it at every call
        return y

    g = tp.compile(f, backend="aot_eager")
    x = tp.randn(3)
    decay = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(5):
            cfg.scale = 1.0 + i
            same(g(x), x * (1.0 + i) * decay, "aot_eager")
            decay *= 0.5
            assert type(cfg.decay) is float and cfg.decay == decay
    err = capfd.readouterr().err
    assert "cfg.decay: a float kept by value from now on: the function assigns it" in err
    assert "cfg.scale: a float kept by value" not in err
