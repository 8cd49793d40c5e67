"""Python numbers a compiled function reads besides its arguments: globals,
closure variables (and short lists of numbers in them) and number attributes of
the modules it calls. The capture bakes them into the graph, so they must select
the version; a changed value used to keep running the old one silently."""

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn

LR = 0.1
SCHEDULE = [1.0, 0.5]


def _sgd_step(w, g):
    w.sub_(g * LR * SCHEDULE[0])
    return w.sum()


def test_a_global_learning_rate_changed_between_calls():
    global LR
    f = tp.compile(_sgd_step, strict_native=True)
    w, g = tp.ones(4), tp.full((4,), 2.0)
    np.testing.assert_allclose(f(w, g).item(), 4 * (1 - 0.2), rtol=1e-6)
    try:
        LR = 0.01
        np.testing.assert_allclose(f(w, g).item(), 4 * (0.8 - 0.02), rtol=1e-6)
        SCHEDULE[0] = 0.5  # an element of a global list
        np.testing.assert_allclose(f(w, g).item(), 4 * (0.78 - 0.01), rtol=1e-6)
    finally:
        LR = 0.1
        SCHEDULE[0] = 1.0
    np.testing.assert_allclose(w.numpy(), np.full(4, 0.77), rtol=1e-6)


def test_closure_numbers_rebound_or_mutated():
    scale, shift = 2.0, [1.0]

    def f(x):
        return x * scale + shift[0]

    g = tp.compile(f, strict_native=True)
    x = tp.arange(3.0)
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    scale = 3.0  # noqa: F841 -- read by f through its closure cell
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    shift[0] = -1.0
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    np.testing.assert_allclose(g(x).numpy(), x.numpy() * 3 - 1)


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.temperature = 1.0

    def forward(self, x):
        return self.lin(x) / self.temperature


def test_module_number_attributes_changed_between_calls():
    tp.manual_seed(0)
    m = _Scaled()
    x = tp.randn(2, 3)
    for f in (tp.compile(m, strict_native=True), tp.compile(lambda x: m(x), strict_native=True)):
        m.temperature = 1.0
        with tp.no_grad():
            f(x)
            m.temperature = 4.0
            np.testing.assert_allclose(f(x).numpy(), m(x).numpy(), rtol=1e-6)


def test_dropout_probability_changed_between_calls():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    f = tp.compile(m, strict_native=True)
    x = tp.randn(3, 4)
    with tp.no_grad():
        f(x)
        m[1].p = 0.0  # the capture baked p = 0.5 in
        np.testing.assert_allclose(f(x).numpy(), m[0](x).numpy(), rtol=1e-6)


def test_unchanged_state_reuses_the_version():
    tp.manual_seed(0)
    m = _Scaled()
    f = tp.compile(lambda x: m(x) * LR)
    x = tp.randn(2, 3)
    with tp.no_grad():
        for _ in range(3):
            f(x)
    assert tp.compiler.metrics.compile_count == 1
    assert tp.compiler.metrics.recompiles == 0


def test_item_returned_by_a_compiled_step_is_a_python_float():
    # Eager returns floats; the capture's item() is a 0-d tensor of the graph,
    # which used to reach the caller (f"{acc:.3f}" raised TypeError).
    w = tp.randn(3, requires_grad=True)

    def step(x):
        loss = (x * w).sum()
        return loss, {"acc": (x > 0).float().mean().item(), "mean": x.mean().item()}

    g = tp.compile(step, strict_native=True)
    for _ in range(2):
        x = tp.randn(3)
        loss, stats = g(x)
        want = step(x)[1]
        assert type(stats["acc"]) is float and type(stats["mean"]) is float
        assert f"{stats['acc']:.3f}" == f"{want['acc']:.3f}"
        np.testing.assert_allclose(stats["mean"], want["mean"], rtol=1e-6)
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), x.numpy(), rtol=1e-6)


CONFIG_SCALE = 2.0


def _helper(x):
    return x * CONFIG_SCALE


def test_a_number_read_by_a_helper_the_function_calls():
    global CONFIG_SCALE
    f = tp.compile(lambda x: _helper(x) + 1, strict_native=True)
    x = tp.ones(3)
    np.testing.assert_allclose(f(x).numpy(), [3, 3, 3])
    try:
        CONFIG_SCALE = 5.0
        np.testing.assert_allclose(f(x).numpy(), [6, 6, 6])
    finally:
        CONFIG_SCALE = 2.0


# ---- numbers read through attribute / item paths (config objects) ----

import dataclasses  # noqa: E402
import types  # noqa: E402


class _Config:
    scale = 2.0


_CFG = _Config()


def test_a_number_attribute_of_a_plain_config_object():
    g = tp.compile(lambda x: x * _CFG.scale, backend="aot_eager")
    np.testing.assert_allclose(g(tp.ones(2)).numpy(), [2.0, 2.0])
    try:
        _CFG.scale = 3.0  # an instance attribute now shadows the class default
        np.testing.assert_allclose(g(tp.ones(2)).numpy(), [3.0, 3.0])
        _Config.scale = 5.0  # the shadowed class default does not matter
        np.testing.assert_allclose(g(tp.ones(2)).numpy(), [3.0, 3.0])
        del _CFG.scale
        np.testing.assert_allclose(g(tp.ones(2)).numpy(), [5.0, 5.0])
    finally:
        _Config.scale = 2.0
        _CFG.__dict__.pop("scale", None)


@dataclasses.dataclass
class _Optim:
    lr: float = 0.1
    betas: tuple = (0.9, 0.99)


@dataclasses.dataclass
class _TrainConfig:
    optim: _Optim = dataclasses.field(default_factory=_Optim)
    act: str = "relu"
    table: dict = dataclasses.field(default_factory=lambda: {"lr": 0.5, "layers": [{"scale": 1.0}]})


_TCFG = _TrainConfig()


def _act(x):
    return tp.relu(x) if _TCFG.act == "relu" else tp.tanh(x)


def test_nested_dataclass_chains_dict_entries_and_mode_strings():
    def f(x):
        y = _act(x) * _TCFG.optim.lr + _TCFG.optim.betas[1]
        return y * _TCFG.table["lr"] + _TCFG.table["layers"][0]["scale"]

    g = tp.compile(f, strict_native=True)
    x = tp.tensor([-1.0, 0.5, 2.0])
    old = dataclasses.replace(_TCFG)
    try:
        for change in (lambda: setattr(_TCFG.optim, "lr", 0.01),
                       lambda: setattr(_TCFG.optim, "betas", (0.9, 0.5)),
                       lambda: setattr(_TCFG, "optim", _Optim(lr=7.0)),   # the owner rebound
                       lambda: _TCFG.table.__setitem__("lr", 2.0),
                       lambda: _TCFG.table["layers"][0].__setitem__("scale", -3.0),
                       lambda: setattr(_TCFG, "act", "tanh")):
            change()
            np.testing.assert_allclose(g(x).numpy(), f(x).numpy(), rtol=1e-6)
    finally:
        _TCFG.optim, _TCFG.act, _TCFG.table = old.optim, old.act, {"lr": 0.5, "layers": [{"scale": 1.0}]}


_CFG_MODULE = types.ModuleType("user_config")  # stands for `import config` in a user's script
_CFG_MODULE.SCALE = 2.0


class _Scales:
    shift = 1.0  # a class used as a namespace


def test_python_module_and_class_attributes():
    g = tp.compile(lambda x: x * _CFG_MODULE.SCALE + _Scales.shift, strict_native=True)
    x = tp.ones(2)
    np.testing.assert_allclose(g(x).numpy(), [3, 3])
    try:
        _CFG_MODULE.SCALE = 4.0
        np.testing.assert_allclose(g(x).numpy(), [5, 5])
        _Scales.shift = -1.0
        np.testing.assert_allclose(g(x).numpy(), [3, 3])
    finally:
        _CFG_MODULE.SCALE, _Scales.shift = 2.0, 1.0


class _WithMethods:
    __slots__ = ("_k", "offset")

    def __init__(self):
        self._k, self.offset = 2.0, 0.0

    def scale(self):
        return self._k

    @property
    def twice(self):
        return self._k * 2


def test_numbers_read_by_methods_properties_slots_closures_and_defaults():
    obj = _WithMethods()

    def helper(x, c=obj):  # a default argument holding an object
        return x + c.offset

    def f(x):
        return helper(x * obj.scale() + obj.twice)

    g = tp.compile(f, strict_native=True)
    x = tp.ones(2)
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    obj._k = 3.0  # read by a method and a property
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    obj.offset = 10.0  # a __slots__ attribute read through a default argument
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    np.testing.assert_allclose(g(x).numpy(), [19.0, 19.0])


class _Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        if self.cfg["use_act"]:
            y = tp.relu(y)
        return y * self.cfg["scale"]


class _Net(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.blocks = nn.Sequential(_Block(cfg), _Block(cfg))

    def forward(self, x):
        return self.blocks(x)


@pytest.mark.parametrize("how", ["tp.compile", "module.compile"])
def test_a_config_dict_held_by_submodules(how):
    tp.manual_seed(0)
    cfg = {"use_act": True, "scale": 2.0}
    net = _Net(cfg)
    if how == "tp.compile":
        g = tp.compile(net, strict_native=True)
    else:
        net.compile(strict_native=True)
        g = net
    x = tp.randn(4, 3)
    with tp.no_grad():
        want = net.forward(x)
        np.testing.assert_allclose(g(x).numpy(), want.numpy(), rtol=1e-6)
        cfg["scale"] = 0.5
        np.testing.assert_allclose(g(x).numpy(), net.forward(x).numpy(), rtol=1e-6)
        cfg["use_act"] = False
        np.testing.assert_allclose(g(x).numpy(), net.forward(x).numpy(), rtol=1e-6)


def test_unchanged_config_reuses_the_version():
    cfg = _TrainConfig()
    g = tp.compile(lambda x: x * cfg.optim.lr, strict_native=True)
    x = tp.ones(2)
    g(x)
    before = tp.compiler.metrics.captures
    for _ in range(3):
        g(x)
    assert tp.compiler.metrics.captures == before


def test_a_number_computed_from_item_is_returned_as_a_float():
    g = tp.compile(lambda x: x.sum().item() * 2 + 1, backend="aot_eager")
    r = g(tp.ones(3))
    assert type(r) is float and r == 7.0
    # computed from item() and a tensor argument: a tensor, as in eager
    h = tp.compile(lambda x: x.sum().item() * x.sum(), backend="aot_eager")
    assert isinstance(h(tp.ones(3)), tp.Tensor)


# ---- arguments that are not tensors or numbers ----

def test_a_module_passed_as_an_argument():
    # `loss_fn(model, x, y)` compiled: used to raise TypeError for the module.
    tp.manual_seed(0)
    cfg = _TrainConfig()
    nets = [nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())

    def loss_fn(net, x, y):
        return ((net(x) - y) ** 2).mean() * cfg.optim.lr

    g = tp.compile(loss_fn, strict_native=True)
    opts = [tp.optim.SGD(n.parameters(), lr=0.5) for n in nets]
    x, y = tp.randn(5, 3), tp.randn(5, 2)
    for k in range(4):
        if k == 2:
            cfg.optim.lr = 2.0  # a closure's config: selects the version
        losses = []
        for i, (n, o) in enumerate(zip(nets, opts)):
            o.zero_grad()
            loss = (loss_fn if i == 0 else g)(n, x, y)
            loss.backward()
            o.step()
            losses.append(loss.item())
        np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    other = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))  # another object: its own version
    np.testing.assert_allclose(g(other, x, y).item(), loss_fn(other, x, y).item(), rtol=1e-5)
    nets[1].eval()
    with tp.no_grad():
        np.testing.assert_allclose(g(nets[1], x, y).item(), loss_fn(nets[1], x, y).item(), rtol=1e-5)


def test_a_generator_and_a_string_passed_as_arguments():
    def f(x, gen, act):
        y = x + tp.randn(x.shape, generator=gen)
        return tp.relu(y) if act == "relu" else tp.tanh(y)

    g = tp.compile(f, backend="aot_eager")
    g1, g2 = tp.Generator().manual_seed(3), tp.Generator().manual_seed(3)
    x = tp.zeros(5)
    for act in ("relu", "relu", "tanh"):
        np.testing.assert_array_equal(g(x, g2, act).numpy(), f(x, g1, act).numpy())


def test_keyword_only_parameters_with_defaults():
    def f(x, mask, dim=-1, *, eps=1e-5, scale):
        y = x.masked_fill(~mask, float("-inf")).softmax(dim)
        return y / (y.sum(-1, keepdim=True) + eps) * scale

    g = tp.compile(f, strict_native=True)
    x = tp.randn(3, 4)
    m = x > 0
    m[:, 0] = True
    for kw in ({"scale": 2.0}, {"scale": 2.0, "eps": 0.5}, {"eps": 0.5, "scale": tp.tensor(3.0)}):
        np.testing.assert_allclose(g(x, m, **kw).numpy(), f(x, m, **kw).numpy(), rtol=1e-6)
    np.testing.assert_allclose(g(x, m, 0, scale=1.0).numpy(), f(x, m, 0, scale=1.0).numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="scale"):
        g(x, m)


# ---- float arguments that change between calls (automatic dynamic) ----

@pytest.mark.parametrize("backend", ["aot_eager", "stax"])
def test_a_float_argument_that_changes_is_an_input_after_one_recompile(backend):
    def same(a, b):
        if backend == "aot_eager":
            np.testing.assert_array_equal(a, b)  # the same bits as eager
        else:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)

    f = lambda x, t: (x / t).softmax(-1)
    g = tp.compile(f, backend=backend, strict_native=backend == "stax")
    x = tp.randn(2, 5)
    before = tp.compiler.metrics.captures
    for t in np.linspace(0.5, 2.0, 6):
        same(g(x, float(t)).numpy(), f(x, float(t)).numpy())
    assert tp.compiler.metrics.captures - before == 2  # the first value, then one for all
    h = lambda i, s: i * s  # promoted as a Python number: float32, not float64
    gh = tp.compile(h, backend=backend)
    for s in (0.5, 0.25, 1.5):
        r, e = gh(tp.arange(3), s), h(tp.arange(3), s)
        assert r.dtype == e.dtype
        same(r.numpy(), e.numpy())


def test_a_changing_float_used_where_a_number_is_needed_or_returned():
    x = tp.randn(2, 5)
    k = lambda x, y, a: x.add(y, alpha=a)  # alpha must be a number: specialized by value again
    gk = tp.compile(k, backend="aot_eager")
    for a in (0.5, 0.25, 2.0):
        np.testing.assert_array_equal(gk(x, x, a).numpy(), k(x, x, a).numpy())
    m = lambda x, t: (x * t, t, t * 2)  # returned: floats, as in eager
    gm = tp.compile(m, backend="aot_eager")
    for t in (1.0, 3.0, 4.0):
        r = gm(x, t)
        assert type(r[1]) is float and r[1] == t and type(r[2]) is float and r[2] == 2 * t
    c = lambda x, t: x * 2 if t > 1.0 else x - 1  # a branch on it: a data gate
    gc = tp.compile(c, backend="aot_eager")
    for t in (0.5, 2.0, 0.7, 3.0):
        np.testing.assert_array_equal(gc(x, t).numpy(), c(x, t).numpy())
