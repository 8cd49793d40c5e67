"""Outside testing, tenth round: a PyTorch user changes the program a compiled
function runs between calls by rebinding Python state that is not a number: a
loss module's `reduction`, a mode string on a module, an activation function
held in an attribute, a global or a closure. torch.compile guards these; a
version built for the old state must not keep running (it did: silently the old
loss, the old activation, with gradients to match)."""

import enum
import functools
import warnings

import numpy as np
import pytest

import tensorplay as tp

nn = tp.nn
F = tp.nn.functional


def _data():
    g = tp.Generator().manual_seed(3)
    return tp.randn(6, 4, generator=g), tp.tensor([0, 1, 2, 1, 0, 2])


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("compile_what", ["criterion", "function"])
def test_a_loss_modules_reduction_changed_between_calls(compile_what):
    tp.manual_seed(0)
    lin = nn.Linear(4, 3)
    crit = nn.CrossEntropyLoss()
    x, y = _data()
    if compile_what == "criterion":
        run = tp.compile(crit)
        call = lambda: run(lin(x), y)  # noqa: E731
    else:
        run = tp.compile(lambda x, y: crit(lin(x), y))
        call = lambda: run(x, y)  # noqa: E731
    for reduction in ["mean", "sum", "none", "mean"]:
        crit.reduction = reduction
        want = crit(lin(x), y)
        lin.zero_grad()
        want.sum().backward()
        want_grad = lin.weight.grad.numpy().copy()
        lin.zero_grad()
        got = call()
        got.sum().backward()
        assert tuple(got.shape) == tuple(want.shape), reduction
        _close(got.detach().numpy(), want.detach().numpy())
        _close(lin.weight.grad.numpy(), want_grad)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        tp.manual_seed(0)
        self.l1 = nn.Linear(4, 8)
        self.l2 = nn.Linear(8, 3)
        self.act = F.relu
        self.mode = "plain"

    def forward(self, x):
        h = self.act(self.l1(x))
        if self.mode == "scaled":
            h = h * 2
        return self.l2(h)


def _train(model, compiled, change_at, change):
    step = tp.compile(model) if compiled else model
    opt = tp.optim.SGD(model.parameters(), lr=0.1)
    out = []
    for i in range(5):
        if i == change_at:
            change(model)
        g = tp.Generator().manual_seed(i)
        x, y = tp.randn(6, 4, generator=g), tp.randint(0, 3, (6,), generator=g)
        opt.zero_grad()
        loss = F.cross_entropy(step(x), y)
        loss.backward()
        opt.step()
        out.append(loss.item())
    out.extend(p.detach().numpy().copy() for p in model.parameters())
    return out


@pytest.mark.parametrize("change", [
    lambda m: setattr(m, "mode", "scaled"),
    lambda m: setattr(m, "act", F.gelu),
    lambda m: setattr(m, "act", tp.tanh),
    lambda m: setattr(m, "act", functools.partial(F.leaky_relu, negative_slope=0.2)),
], ids=["mode string", "python function", "bound operator", "partial"])
def test_a_modules_mode_string_or_activation_changed_mid_training(change):
    want = _train(_Block(), False, 2, change)
    got = _train(_Block(), True, 2, change)
    for a, b in zip(got, want):
        _close(a, b)


def test_two_partials_of_one_function_are_two_programs():
    m = _Block()
    cm = tp.compile(m)
    x, _ = _data()
    for slope in [0.1, 0.3, 0.1]:
        m.act = functools.partial(F.leaky_relu, negative_slope=slope)
        _close(cm(x).detach().numpy(), m(x).detach().numpy())


ACT = F.relu


def _uses_global(lin, x):
    return ACT(lin(x)).sum()


def test_a_global_activation_rebound_between_calls():
    global ACT
    tp.manual_seed(0)
    lin = nn.Linear(4, 3)
    x, _ = _data()
    cf = tp.compile(_uses_global)
    try:
        for act in [F.relu, tp.tanh, tp.sigmoid, F.relu]:
            ACT = act
            _close(cf(lin, x).item(), _uses_global(lin, x).item())
    finally:
        ACT = F.relu


def test_a_closure_or_config_attribute_function_rebound_between_calls():
    tp.manual_seed(0)
    lin = nn.Linear(4, 3)
    x, _ = _data()

    class Cfg:
        pass

    cfg = Cfg()
    cfg.act = F.relu
    act = F.relu

    def f(x):
        return act(lin(x)).sum() + cfg.act(lin(x)).sum()

    cf = tp.compile(f)
    for a, b in [(F.relu, F.relu), (tp.tanh, F.relu), (tp.tanh, F.silu), (F.relu, F.relu)]:
        act, cfg.act = a, b
        _close(cf(x).item(), f(x).item())


def test_an_unchanged_activation_does_not_recompile():
    m = _Block()
    cm = tp.compile(m)
    x, _ = _data()
    cm(x)
    before = tp.compiler.metrics.recompiles
    for _ in range(3):
        cm(x)
        m.act = F.relu  # (the same function again)
    assert tp.compiler.metrics.recompiles == before


class _Mode(enum.Enum):
    TRAIN = "train"
    SHARPEN = "sharpen"


class _Masked(nn.Module):
    def __init__(self):
        super().__init__()
        tp.manual_seed(0)
        self.l = nn.Linear(4, 3)
        self.mask = None  # set later by the user (a plain attribute, not a buffer)
        self.mode = _Mode.TRAIN

    def forward(self, x):
        h = self.l(x)
        if self.mask is not None:
            h = h * self.mask
        if self.mode is _Mode.SHARPEN:
            h = h * 3
        return h


@pytest.mark.parametrize("change", [
    lambda m: setattr(m, "mask", tp.tensor([1.0, 0.0, 1.0])),
    lambda m: setattr(m, "mode", _Mode.SHARPEN),
], ids=["None then a tensor", "enum member"])
def test_a_module_attribute_set_from_none_or_to_another_enum_member(change):
    m = _Masked()
    cm = tp.compile(m)
    x, _ = _data()
    _close(cm(x).detach().numpy(), m(x).detach().numpy())
    change(m)
    want = m(x)
    want.sum().backward()
    want_grad = m.l.weight.grad.numpy().copy()
    m.l.weight.grad = None
    got = cm(x)
    got.sum().backward()
    _close(got.detach().numpy(), want.detach().numpy())
    _close(m.l.weight.grad.numpy(), want_grad)


def test_an_enum_member_of_a_config_object_changed_between_calls():
    tp.manual_seed(0)
    lin = nn.Linear(4, 3)

    class Cfg:
        mode = _Mode.TRAIN

    cfg = Cfg()

    def f(x):
        h = lin(x)
        return h * 3 if cfg.mode is _Mode.SHARPEN else h

    cf = tp.compile(f)
    x, _ = _data()
    for mode in [_Mode.TRAIN, _Mode.SHARPEN, _Mode.TRAIN]:
        cfg.mode = mode
        _close(cf(x).detach().numpy(), f(x).detach().numpy())


class _WithHelper(nn.Module):
    def __init__(self):
        super().__init__()
        tp.manual_seed(0)
        self.l = nn.Linear(4, 3)

    def forward(self, x):
        return self.helper(x)

    def helper(self, x):
        return self.l(x).relu()


@pytest.mark.parametrize("name", ["forward", "helper"])
def test_an_instances_own_method_replaced_after_the_first_call(name):
    # (monkeypatching an instance: `model.forward = ...` for a quick experiment)
    m = _WithHelper()
    cm = tp.compile(m)
    x, _ = _data()
    _close(cm(x).detach().numpy(), m(x).detach().numpy())
    setattr(m, name, lambda x: m.l(x).tanh() * 2)
    _close(cm(x).detach().numpy(), m(x).detach().numpy())
    delattr(m, name)  # back to the class's method
    _close(cm(x).detach().numpy(), m(x).detach().numpy())


def test_a_class_level_setting_of_a_module_subclass_changed_between_calls():
    class Net(nn.Module):
        scale = 2.0
        act = "relu"

        def __init__(self):
            super().__init__()
            tp.manual_seed(0)
            self.l = nn.Linear(4, 3)

        def forward(self, x):
            h = self.l(x) * self.scale
            return h.relu() if self.act == "relu" else h.tanh()

    m = Net()
    cm = tp.compile(m)
    x, _ = _data()
    _close(cm(x).detach().numpy(), m(x).detach().numpy())
    Net.scale = 3.0
    _close(cm(x).detach().numpy(), m(x).detach().numpy())
    Net.act = "tanh"
    _close(cm(x).detach().numpy(), m(x).detach().numpy())
    m.scale = 0.5  # an instance attribute now hides the class's
    _close(cm(x).detach().numpy(), m(x).detach().numpy())


@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp_over_an_empty_dim_compiled_is_minus_infinity_as_eager(keepdim):
    # (a masked attention row or a bucket with no candidates: eager and PyTorch give
    # -inf; the compiled decomposition's amax refused the empty dim)
    import torch

    x = tp.zeros(3, 0, requires_grad=True)
    f = lambda x: tp.logsumexp(x * 2, dim=1, keepdim=keepdim)  # noqa: E731
    want = torch.logsumexp(torch.zeros(3, 0), 1, keepdim=keepdim).numpy()
    np.testing.assert_array_equal(f(x).detach().numpy(), want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no "running eagerly instead" fallback either)
        with tp.no_grad():
            np.testing.assert_array_equal(tp.compile(f)(x).numpy(), want)
        got = tp.compile(f)(x)
    np.testing.assert_array_equal(got.detach().numpy(), want)
    got.sum().backward()
    assert tuple(x.grad.shape) == (3, 0)


def test_a_partial_made_anew_with_the_same_arguments_does_not_recompile():
    m = _Block()
    cm = tp.compile(m)
    x, _ = _data()
    m.act = functools.partial(F.leaky_relu, negative_slope=0.2)
    cm(x)
    before = tp.compiler.metrics.recompiles
    for _ in range(3):
        m.act = functools.partial(F.leaky_relu, negative_slope=0.2)
        _close(cm(x).detach().numpy(), m(x).detach().numpy())
    assert tp.compiler.metrics.recompiles == before


def test_a_dtype_held_by_a_module_or_a_config_changed_between_calls():
    class Cast(nn.Module):
        def __init__(self):
            super().__init__()
            tp.manual_seed(0)
            self.l = nn.Linear(4, 3)
            self.out_dtype = tp.float32

        def forward(self, x):
            return self.l(x).to(self.out_dtype) * 2

    class Cfg:
        dtype = tp.float32

    m, cfg = Cast(), Cfg()
    cm = tp.compile(m)
    f = lambda x: x.to(cfg.dtype) + 1  # noqa: E731
    cf = tp.compile(f)
    x, _ = _data()
    for dt in [tp.float32, tp.float64, tp.float32]:
        m.out_dtype = cfg.dtype = dt
        assert cm(x).dtype == m(x).dtype == dt
        assert cf(x).dtype == f(x).dtype == dt
        _close(cm(x).detach().numpy(), m(x).detach().numpy())


def test_a_modules_tuple_of_mode_strings_changed_between_calls():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            tp.manual_seed(0)
            self.l = nn.Linear(4, 3)
            self.acts = ("relu",)

        def forward(self, x):
            h = self.l(x)
            for a in self.acts:
                h = h.relu() if a == "relu" else h.tanh()
            return h

    m = Net()
    cm = tp.compile(m)
    x, _ = _data()
    for acts in [("relu",), ("tanh",), ("tanh", "relu"), ("relu",)]:
        m.acts = acts
        _close(cm(x).detach().numpy(), m(x).detach().numpy())


# ---------------------- class-level methods, flag sets, composite error names

def test_a_method_replaced_on_the_class_after_the_first_call():
    class Net(_WithHelper):
        pass

    m = Net()
    cm = tp.compile(m)
    x, _ = _data()
    cm(x)
    Net.helper = lambda self, x: self.l(x).tanh() * 2
    _close(cm(x).detach().numpy(), m(x).detach().numpy())


def test_a_set_of_flags_changed_between_calls():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            tp.manual_seed(0)
            self.l = nn.Linear(4, 3)
            self.flags = set()

        def forward(self, x):
            return self.l(x) * (3 if "triple" in self.flags else 1)

    m = Net()
    cm = tp.compile(m)
    x, _ = _data()
    cm(x)
    m.flags.add("triple")
    _close(cm(x).detach().numpy(), m(x).detach().numpy())


def test_an_out_of_range_target_in_a_compiled_loss_names_cross_entropy():
    tp.manual_seed(0)
    f = lambda x, y: F.cross_entropy(x, y)  # noqa: E731
    cf = tp.compile(f)
    cf(tp.randn(4, 3), tp.tensor([0, 1, 2, 1]))
    with pytest.raises(IndexError, match="cross_entropy"):
        f(tp.randn(4, 3), tp.tensor([0, 1, 3, 1]))
    with pytest.raises(IndexError, match="cross_entropy"):
        cf(tp.randn(4, 3), tp.tensor([0, 1, 3, 1]))


def test_forward_replaced_on_the_class_or_a_base_after_the_first_call():
    class Net(_WithHelper):
        pass

    m = Net()
    cm = tp.compile(m)
    cf = tp.compile(lambda x: m(x) + 1)
    x, _ = _data()
    cm(x), cf(x)
    Net.forward = lambda self, x: self.l(x).sigmoid()
    _close(cm(x).detach().numpy(), m(x).detach().numpy())
    _close(cf(x).detach().numpy(), (m(x) + 1).detach().numpy())
    del Net.forward  # back to the base's: a helper patched there is seen too
    _WithHelper_helper = _WithHelper.helper
    try:
        _WithHelper.helper = lambda self, x: self.l(x).abs()
        _close(cm(x).detach().numpy(), m(x).detach().numpy())
        _close(cf(x).detach().numpy(), (m(x) + 1).detach().numpy())
    finally:
        _WithHelper.helper = _WithHelper_helper
    _close(cm(x).detach().numpy(), m(x).detach().numpy())


def test_a_set_or_list_attribute_changed_in_place_between_calls():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            tp.manual_seed(0)
            self.l = nn.Linear(4, 3)
            self.flags = {"a"}
            self.acts = ["relu"]

        def forward(self, x):
            h = self.l(x) * (3 if "triple" in self.flags else 1)
            for a in self.acts:
                h = h.relu() if a == "relu" else h.tanh()
            return h

    m = Net()
    cm = tp.compile(m)
    x, _ = _data()
    for change in [lambda: None, lambda: (m.flags.discard("a"), m.flags.add("triple")),  # same size
                   lambda: m.acts.append("tanh"), lambda: m.acts.__setitem__(0, "tanh"),
                   lambda: m.flags.clear(), lambda: m.acts.clear()]:
        change()
        _close(cm(x).detach().numpy(), m(x).detach().numpy())


@pytest.mark.parametrize("op", ["getitem", "gather", "index_select", "embedding"])
def test_a_compiled_index_error_names_the_bad_index_as_eager_does(op):
    w = tp.randn(5, 2)
    f = {"getitem": lambda w, i: w[i] * 2,
         "gather": lambda w, i: w.gather(0, i.view(-1, 1).expand(-1, 2)) * 2,
         "index_select": lambda w, i: w.index_select(0, i) * 2,
         "embedding": lambda w, i: F.embedding(i, w) * 2}[op]
    cf = tp.compile(f)
    cf(w, tp.tensor([1, 2]))
    for bad, shown in [([1, 7], "7"), ([3, 11], "11")]:
        with pytest.raises(IndexError, match=rf"\b{shown}\b"):
            f(w, tp.tensor(bad))
        with pytest.raises(IndexError, match=rf"\b{shown}\b"):
            cf(w, tp.tensor(bad))
    assert cf(w, tp.tensor([4, 0])).shape == f(w, tp.tensor([4, 0])).shape
