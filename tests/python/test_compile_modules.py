"""Module.compile() (PyTorch 2.2's form), train()/eval() in the key, hooks as in
eager, and arguments that are nested tuples/lists/dicts of tensors."""

import collections
import warnings

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn


def _captures():
    return tp.compiler.metrics.captures


def test_module_compile_runs_the_module_compiled():
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    x = tp.randn(3, 4)
    with tp.no_grad():
        want = m(x).numpy()
        m.compile(backend="eager")
        before = _captures()
        got = m(x).numpy()
        assert _captures() == before + 1
        m(x)
        assert _captures() == before + 1
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_train_and_eval_select_their_own_version():
    tp.manual_seed(0)
    eager = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    comp = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    comp.load_state_dict(eager.state_dict())
    comp.compile(backend="eager")
    with tp.no_grad():
        for mode in ("train", "eval", "train", "eval", "train"):
            getattr(eager, mode)()
            getattr(comp, mode)()
            x = tp.randn(6, 3)
            np.testing.assert_allclose(comp(x).numpy(), eager(x).numpy(), rtol=1e-5, atol=1e-6, err_msg=mode)
            np.testing.assert_allclose(comp[1].running_mean.numpy(), eager[1].running_mean.numpy(), rtol=1e-5,
                                       atol=1e-7, err_msg=mode)
        before = _captures()
        comp.eval()
        comp(tp.randn(6, 3))
        comp.train()
        comp(tp.randn(6, 3))
        assert _captures() == before  # both versions cached


def test_forward_hooks_run_on_every_call_as_in_eager():
    m = nn.Linear(3, 3).eval()
    calls = []

    def pre(mod, args):
        calls.append("pre")
        return (args[0] * 2,)

    def post(mod, args, out):
        calls.append("post")
        return out + 1

    m.compile(backend="eager")
    x = tp.randn(2, 3)
    with tp.no_grad():
        plain = m.forward(x * 2) + 1
        h1 = m.register_forward_pre_hook(pre)
        h2 = m.register_forward_hook(post)
        for k in range(3):
            np.testing.assert_allclose(m(x).numpy(), plain.numpy(), rtol=1e-6)
        assert calls == ["pre", "post"] * 3
        h1.remove()
        h2.remove()
        np.testing.assert_allclose(m(x).numpy(), m.forward(x).numpy(), rtol=1e-6)


def test_submodule_hook_added_after_compile_is_seen():
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU()).eval()
    m.compile(backend="eager")
    x = tp.randn(2, 3)
    with tp.no_grad():
        m(x)
        m[0].register_forward_hook(lambda mod, a, out: out * 0 - 5)
        np.testing.assert_array_equal(m(x).numpy(), np.zeros((2, 3), np.float32))


Pair = collections.namedtuple("Pair", "a b")


def nested_fn(pair, d, lst, scale):
    return pair[0] * d["w"] + lst[1] * scale, {"sum": pair.b + lst[0]}


def test_nested_arguments_are_flattened_and_match_eager():
    args = (Pair(tp.randn(3), tp.randn(3)), {"w": tp.randn(3)}, [tp.randn(3), tp.randn(3)], 2.0)
    cf = tp.compile(nested_fn, backend="eager")
    before = _captures()
    for _ in range(3):
        got, want = cf(*args), nested_fn(*args)
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-6)
        np.testing.assert_allclose(got[1]["sum"].numpy(), want[1]["sum"].numpy(), rtol=1e-6)
        assert type(got[1]) is dict
    assert _captures() == before + 1
    # Another structure (a longer list) is another version.
    args2 = (args[0], args[1], [tp.randn(3), tp.randn(3), tp.randn(3)], 2.0)
    np.testing.assert_allclose(cf(*args2)[0].numpy(), nested_fn(*args2)[0].numpy(), rtol=1e-6)
    assert _captures() == before + 2


def test_nested_argument_writes_reach_the_callers_tensors():
    def f(state):
        state["count"].add_(1)
        state["buf"][0] = state["count"]
        return state["buf"] * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf = tp.compile(f)
        s_c = {"count": tp.zeros(()), "buf": tp.zeros(3)}
        s_e = {"count": tp.zeros(()), "buf": tp.zeros(3)}
        for _ in range(3):
            np.testing.assert_array_equal(cf(s_c).numpy(), f(s_e).numpy())
    np.testing.assert_array_equal(s_c["buf"].numpy(), s_e["buf"].numpy())
    assert float(s_c["count"]) == 3.0


def test_nested_argument_returned_is_the_callers_object():
    def f(pair):
        return pair[0]

    t = tp.randn(2)
    assert tp.compile(f, backend="eager")((t, tp.randn(2))) is t


def test_tp_compile_of_a_module_keys_on_training_flags(capfd):
    import os

    tp.manual_seed(0)
    eager = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Dropout(0.0))
    comp = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Dropout(0.0))
    comp.load_state_dict(eager.state_dict())
    cf = tp.compile(comp, backend="eager")
    x = tp.randn(6, 3)
    with tp.no_grad():
        for mode in ("train", "eval", "train", "eval"):
            getattr(eager, mode)()
            getattr(comp, mode)()
            np.testing.assert_allclose(cf(x).numpy(), eager(x).numpy(), rtol=1e-5, atol=1e-6, err_msg=mode)
        assert cf.num_specializations == 2
        comp[1].train()  # one submodule's flag alone selects another version
        os.environ["TP_LOGS"] = "recompiles"
        try:
            cf(x)
        finally:
            del os.environ["TP_LOGS"]
    assert "module training" in capfd.readouterr().err
    assert cf.num_specializations == 3


def test_module_with_nested_input_keys_on_training_flags():
    class Pairwise(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.0)
            self.bn = nn.BatchNorm1d(3)

        def forward(self, pair):
            return self.bn(pair[0] + pair[1])

    tp.manual_seed(0)
    eager, comp = Pairwise(), Pairwise()
    comp.load_state_dict(eager.state_dict())
    cf = tp.compile(comp, backend="eager")
    with tp.no_grad():
        for mode in ("train", "eval", "train"):
            getattr(eager, mode)()
            getattr(comp, mode)()
            a, b = tp.randn(5, 3), tp.randn(5, 3)
            np.testing.assert_allclose(cf((a, b)).numpy(), eager((a, b)).numpy(), rtol=1e-5, atol=1e-6, err_msg=mode)


def test_submodule_hook_side_effects_happen_at_every_call():
    # Regression: a forward hook of a submodule ran only during the capture, so a
    # hook with a Python side effect (counting calls) silently stopped running.
    calls = []
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    net[0].register_forward_hook(lambda m, args, out: calls.append(out.shape))
    net.compile()
    x = tp.randn(2, 4)
    with pytest.warns(UserWarning, match="forward hooks"):
        net(x)
    net(x)
    net(x)
    assert len(calls) == 3
    strict = nn.Sequential(nn.Linear(4, 3))
    strict[0].register_forward_pre_hook(lambda m, args: None)
    strict.compile(strict_native=True)
    with pytest.raises(tp.compiler.BackendError, match="forward hooks"):
        strict(x)


def test_hooks_traced_by_tp_compile_warn_that_side_effects_happen_at_capture():
    # A function calling a hooked module traces the hook (its tensor effect is
    # compiled in) and says its Python side effects happen once.
    net = nn.Sequential(nn.Linear(4, 3))
    net[0].register_forward_hook(lambda m, args, out: out * 2)
    cf = tp.compile(lambda x: net(x))
    x = tp.randn(2, 4)
    with pytest.warns(UserWarning, match="side effects happen only once, at capture"):
        y = cf(x)
    np.testing.assert_allclose(y.detach().numpy(), net(x).detach().numpy(), rtol=1e-6)  # tensor effect compiled in


def test_hooks_of_submodules_of_a_module_given_to_tp_compile_run_at_every_call():
    # tp.compile(module) runs as module.compile() does: a hooked submodule's state
    # runs eagerly (said once), so the hook's side effects happen at every call.
    calls = []
    net = nn.Sequential(nn.Linear(4, 3))
    net[0].register_forward_hook(lambda m, args, out: calls.append(1) or out * 2)
    cf = tp.compile(net)
    x = tp.randn(2, 4)
    with pytest.warns(UserWarning, match="running eagerly"):
        y = cf(x)
    cf(x)
    assert len(calls) == 3 - 1
    with pytest.raises(tp.compiler.BackendError, match="forward hooks"):
        tp.compile(net, strict_native=True)(x)
    np.testing.assert_allclose(y.detach().numpy(), net(x).detach().numpy(), rtol=1e-6)  # tensor effect compiled in
