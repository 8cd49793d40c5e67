"""Session 37 (hunt 2): a PyTorch 2 user's view of graph breaks (fullgraph=False)."""
import warnings

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn


def _break_warnings(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = fn(*args, **kwargs)
    return r, [x for x in w if "graph break" in str(x.message)]


def test_graph_break_with_string_or_nested_arguments_warns_once_naming_the_function():
    # A string or container argument routes the call through one compiled function
    # per argument structure (_NestedInputs): each one broke on its own, warning
    # "graph break in _NestedInputs.__call__.<locals>.flat" from compiler.py, once
    # per new string value, and capturing again (the Python before the break ran
    # twice each time).
    seen = []
    lin = nn.Linear(3, 3)

    def scaled(x, mode, cfg):
        seen.append(mode)
        y = lin(x) if mode == "a" else -lin(x)
        return y * cfg["k"] + float(np.abs(y.detach().numpy()).max())

    cf = tp.compile(scaled)
    x = tp.randn(2, 3)
    r, w = _break_warnings(cf, x, "a", {"k": tp.tensor(2.0)})
    assert len(w) == 1 and "scaled: it runs as Python" in str(w[0].message)
    assert w[0].filename == __file__
    del seen[:]
    for mode in ["b", "a", "c"]:
        k = {"k": tp.tensor(3.0)}
        r, w = _break_warnings(cf, x, mode, k)
        assert w == []
        want = scaled(x, mode, k)
        np.testing.assert_allclose(r.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    assert seen == ["b", "b", "a", "a", "c", "c"]  # step-wise: once per call (plus eager's)


class _BreaksWithDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.drop = nn.Dropout(0.25)
        self.forwards = 0

    def forward(self, x):
        self.forwards += 1
        h = self.drop(self.lin(x))
        return h / float(np.abs(h.detach().numpy()).max())


def test_module_compile_breaking_forward_breaks_once_across_train_eval():
    # module.compile() keeps one compiled forward per train/eval state: each one
    # captured the forward again after the other had broken, warning a second time
    # (from compiler.py) and running the forward's Python twice in that call.
    tp.manual_seed(0)
    m = _BreaksWithDropout()
    m.compile()
    x = tp.randn(4, 3)
    _, w = _break_warnings(m, x)
    assert len(w) == 1 and w[0].filename == __file__
    m.eval()
    before = m.forwards
    r, w = _break_warnings(m, x)
    assert w == [] and m.forwards == before + 1
    with tp.no_grad():
        want = m.forward(x)
    np.testing.assert_allclose(r.detach().numpy(), want.numpy(), rtol=1e-6)


STEPS = 0


def _count_and_break(x):
    global STEPS
    STEPS += 1
    return x * float(x.numpy().sum()) + STEPS


class _Counts(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = self.lin(x)
        return y * float(np.abs(y.detach().numpy()).max()) + self.calls


def test_counters_before_a_graph_break_count_the_first_call_once():
    # The refused capture ran the Python before the break (self.calls += 1,
    # `global STEPS; STEPS += 1`), then the step-wise run ran it again: the first
    # call counted twice, and every later result was off by one (a silent
    # difference from eager, where tp.compile without the break counts right).
    global STEPS
    STEPS = 0
    cf = tp.compile(_count_and_break)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [float(cf(tp.ones(2))[0]) for _ in range(3)]
    assert STEPS == 3 and got == [3.0, 4.0, 5.0]

    tp.manual_seed(0)
    m, ref = _Counts(), _Counts()
    ref.load_state_dict(m.state_dict())
    cm = tp.compile(m)
    x = tp.randn(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            r, e = cm(x), ref(x)
            np.testing.assert_allclose(r.detach().numpy(), e.detach().numpy(), rtol=1e-6)
    assert m.calls == ref.calls == 3


def test_compiler_disable_and_is_compiling_exist_and_run_python_at_every_call():
    # A PyTorch 2 user marks logging/NumPy helpers @torch.compiler.disable and
    # tests torch.compiler.is_compiling(): tp.compiler had neither
    # (AttributeError). A disabled helper called by a compiled function is a graph
    # break, so it runs at every call rather than once at capture.
    log = []

    @tp.compiler.disable
    def record(t):
        log.append(float(t.sum()))

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            h = self.lin(x)
            record(h)
            return h.relu()

    tp.manual_seed(0)
    m = M()
    cm = tp.compile(m)
    x = tp.randn(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            r = cm(x)
    assert len(log) == 3
    np.testing.assert_allclose(r.detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    with pytest.raises(tp.compiler.CaptureError, match="disable"):
        tp.compile(M(), fullgraph=True)(x)
    seen = []
    tp.compile(lambda t: seen.append(tp.compiler.is_compiling()) or t * 2)(tp.ones(2))
    assert seen == [True] and not tp.compiler.is_compiling()


def test_container_argument_mutations_reach_the_caller():
    # Container arguments are flattened and rebuilt for the compiled function, so
    # `acc.append(...)` or `cache["k"] = ...` went to the rebuilt copy: the caller's
    # list stayed empty and the dict lost the new key, silently. Such a change is
    # now a graph break (the function runs as Python with the caller's objects).
    def collect(x, acc, cache):
        y = x * 2
        acc.append(y)
        cache["y"] = y + 1
        return y.sum()

    cf = tp.compile(collect)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(3):
            acc, cache = [], {"x": tp.ones(2)}
            r = cf(tp.ones(2) * i, acc, cache)
            assert float(r) == 4.0 * i and len(acc) == 1 and sorted(cache) == ["x", "y"]
            np.testing.assert_allclose(cache["y"].numpy(), [2.0 * i + 1] * 2)
    readonly = tp.compile(lambda d, lst: d["x"] + lst[0])
    assert float(readonly({"x": tp.ones(1)}, [tp.ones(1)])[0]) == 2.0 and not readonly._stepwise_on


def test_dataclass_and_dict_subclass_arguments_and_results():
    # A dataclass argument was held by identity: every call with a new batch object
    # captured and compiled again (and kept the version). A defaultdict argument
    # arrived as a plain dict (d["missing"] raised KeyError); a dataclass or
    # OrderedDict result was a graph break (the whole function ran eagerly).
    import collections
    from dataclasses import dataclass

    @dataclass
    class Batch:
        x: tp.Tensor
        y: tp.Tensor
        tag: str = "train"

    @dataclass(frozen=True)
    class Out:
        logits: tp.Tensor
        loss: tp.Tensor
        n: int

    tp.manual_seed(0)
    lin = nn.Linear(3, 2)

    def step(b):
        logits = lin(b.x)
        return Out(logits, (logits - b.y).square().mean(), 7)

    cf = tp.compile(step)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(4):
            b = Batch(tp.randn(4, 3), tp.randn(4, 2))
            r, e = cf(b), step(b)
            assert type(r) is Out and r.n == 7
            np.testing.assert_allclose(r.logits.detach().numpy(), e.logits.detach().numpy(), rtol=1e-6)
            np.testing.assert_allclose(float(r.loss), float(e.loss), rtol=1e-6)
    assert not [x for x in w if "graph break" in str(x.message)]
    assert cf.num_specializations == 1 and not cf._stepwise_on
    r.loss.backward()
    assert lin.weight.grad is not None

    def counts(d):
        return collections.OrderedDict(total=d["a"] * (2 if d.default_factory is list else 1) + 1)

    cd = tp.compile(counts)
    dd = collections.defaultdict(list, a=tp.ones(2))
    r = cd(dd)
    assert type(r) is collections.OrderedDict and list(r) == ["total"]
    np.testing.assert_allclose(r["total"].numpy(), [3.0, 3.0])
    assert not cd._stepwise_on
    grows = tp.compile(lambda d: d["a"] * len(d["missing"]))  # the read adds the key, as in eager
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grows(dd)
    assert sorted(dd) == ["a", "missing"]


def test_requires_grad_of_an_intermediate_reads_as_in_eager():
    # A capture runs the operators without autograd, so `h.requires_grad` of an
    # intermediate read False: `if h.requires_grad: ...` took the other branch at
    # every call and `return y, y.requires_grad` gave False (eager, torch.compile: True);
    # h.is_leaf gave True.
    tp.manual_seed(0)
    lin = nn.Linear(3, 3)

    def f(x):
        h = lin(x)
        if h.requires_grad:
            h = h * 2
        return h, h.requires_grad, x.requires_grad, h.is_leaf

    cf = tp.compile(f)
    x = tp.randn(2, 3)
    r, e = cf(x), f(x)
    assert r[1:] == e[1:] == (True, False, False)
    np.testing.assert_allclose(r[0].detach().numpy(), e[0].detach().numpy(), rtol=1e-6)
    with tp.no_grad():
        r, e = cf(x), f(x)
    assert r[1:] == e[1:] == (False, False, True)
    np.testing.assert_allclose(r[0].numpy(), e[0].numpy(), rtol=1e-6)


def test_compiled_sequential_supports_len_indexing_and_iteration():
    # `model = tp.compile(model)` of an nn.Sequential: len(model), model[0] and
    # `for layer in model` raised TypeError (special methods are looked up on the
    # type, not through the attribute forwarding); torch.compile's module answers.
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    cm = tp.compile(seq)
    assert len(cm) == 3 and cm[0] is seq[0] and [type(m) for m in cm] == [nn.Linear, nn.ReLU, nn.Linear]
    assert bool(cm) and bool(tp.compile(nn.Linear(2, 2))) and bool(tp.compile(lambda x: x + 1))
    with pytest.raises(TypeError):
        len(tp.compile(lambda x: x + 1))
    x = tp.randn(4, 2)
    np.testing.assert_allclose(cm(x).detach().numpy(), seq(x).detach().numpy(), rtol=1e-6)


def test_a_refusal_the_function_catches_still_breaks_the_graph():
    # `try: s = float(x.numpy().sum()) except Exception: s = -1.0`: the capture's
    # refusal of numpy() was caught by the user's code, the capture went on down the
    # except branch (which eager never takes) and every call returned x - 1. The
    # same for Python's random and for a buffer rebinding wrapped in try/except.
    def f(x):
        try:
            s = float(x.numpy().sum())
        except Exception:
            s = -1.0
        return x + s

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", tp.zeros(1))

        def forward(self, x):
            try:
                self.steps = self.steps + 1
            except Exception:
                pass
            return x + self.steps

    cf = tp.compile(f)
    m = M()
    cm = tp.compile(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(1, 4):
            x = tp.ones(2) * i
            np.testing.assert_allclose(cf(x).numpy(), f(x).numpy())
            np.testing.assert_allclose(cm(tp.zeros(1)).numpy(), [float(i)])
    assert float(m.steps) == 3.0
    with pytest.raises(tp.compiler.CaptureError, match="caught"):
        tp.compile(f, fullgraph=True)(tp.ones(2))
