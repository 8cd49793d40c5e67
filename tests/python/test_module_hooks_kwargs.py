"""Forward hooks with with_kwargs=True and prepend=True (PyTorch's signatures), eager and on a
compiled module, and CyclicLR against PyTorch step by step."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn

torch = pytest.importorskip("torch")


class Scale(nn.Module):
    def forward(self, x, *, factor=1.0):
        return x * factor


def test_forward_hooks_with_kwargs_see_and_replace_kwargs():
    m = Scale()
    seen = []

    def pre(mod, args, kwargs):
        seen.append(("pre", dict(kwargs)))
        return args, {"factor": kwargs.get("factor", 1.0) * 10}

    def post(mod, args, kwargs, out):
        seen.append(("post", dict(kwargs)))
        return out + 1

    h1 = m.register_forward_pre_hook(pre, with_kwargs=True)
    h2 = m.register_forward_hook(post, with_kwargs=True)
    x = tp.ones(2)
    np.testing.assert_allclose(m(x, factor=2.0).numpy(), [21.0, 21.0])
    assert seen == [("pre", {"factor": 2.0}), ("post", {"factor": 20.0})]
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(m(x, factor=2.0).numpy(), [2.0, 2.0])


def test_forward_hook_prepend_runs_first_same_order_as_torch():
    order, torch_order = [], []
    m, tm = nn.Identity(), torch.nn.Identity()
    for mod, log in ((m, order), (tm, torch_order)):
        mod.register_forward_hook(lambda *a, log=log: log.append("a"))
        mod.register_forward_hook(lambda *a, log=log: log.append("b"), prepend=True)
        mod.register_forward_pre_hook(lambda *a, log=log: log.append("pa"))
        mod.register_forward_pre_hook(lambda *a, log=log: log.append("pb"), prepend=True)
    m(tp.ones(1))
    tm(torch.ones(1))
    assert order == torch_order == ["pb", "pa", "b", "a"]


def test_pre_hook_with_kwargs_bad_return_is_a_clear_error():
    m = Scale()
    m.register_forward_pre_hook(lambda mod, args, kwargs: 3, with_kwargs=True)
    with pytest.raises(RuntimeError, match="new_args, new_kwargs"):
        m(tp.ones(1))


def test_kwargs_hooks_run_around_a_compiled_module():
    lin = nn.Linear(3, 2)
    calls = []
    lin.register_forward_hook(lambda mod, args, kwargs, out: (calls.append(1), out * 2)[1], with_kwargs=True)
    lin.compile()
    x = tp.ones(4, 3)
    y1 = lin(x)
    y2 = lin(x)
    ref = tp.nn.functional.linear(x, lin.weight, lin.bias) * 2
    np.testing.assert_allclose(y1.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(y2.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    assert len(calls) == 2  # every call, not once at capture


# ---------------------------------------------------------------- CyclicLR
@pytest.mark.parametrize("kw", [dict(mode="triangular"), dict(mode="triangular2", step_size_down=3),
                                dict(mode="exp_range", gamma=0.9), dict(scale_fn=lambda x: 0.5 ** x,
                                                                        scale_mode="iterations")])
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_cyclic_lr_matches_torch(kw, opt_name):
    w, pw = tp.zeros(2), torch.zeros(2)
    w.requires_grad_(True)
    pw.requires_grad_(True)
    okw = dict(lr=0.1, momentum=0.9) if opt_name == "SGD" else dict(lr=0.1)
    opt, popt = getattr(tp.optim, opt_name)([w], **okw), getattr(torch.optim, opt_name)([pw], **okw)
    s = tp.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4, **kw)
    ps = torch.optim.lr_scheduler.CyclicLR(popt, base_lr=0.01, max_lr=0.1, step_size_up=4, **kw)
    key = "momentum" if opt_name == "SGD" else "betas"
    for i in range(25):
        assert opt.param_groups[0]["lr"] == pytest.approx(popt.param_groups[0]["lr"], rel=1e-12, abs=1e-15), i
        assert np.allclose(opt.param_groups[0][key], popt.param_groups[0][key], rtol=1e-12)
        assert s.get_last_lr() == pytest.approx(ps.get_last_lr(), rel=1e-12)
        opt.step()
        popt.step()
        s.step()
        ps.step()
    # A restored scheduler continues the same schedule.
    s2 = tp.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4, **kw)
    s2.load_state_dict(s.state_dict())
    s.step()
    s2.step()
    assert s2.get_last_lr() == s.get_last_lr()


def test_cyclic_lr_errors():
    w = tp.zeros(2)
    w.requires_grad_(True)
    with pytest.raises(ValueError, match="momentum"):
        tp.optim.lr_scheduler.CyclicLR(tp.optim.Adagrad([w]), 0.01, 0.1)
    with pytest.raises(ValueError, match="mode"):
        tp.optim.lr_scheduler.CyclicLR(tp.optim.SGD([w], lr=0.1), 0.01, 0.1, mode="zigzag")
    with pytest.raises(ValueError, match="base_lr"):
        tp.optim.lr_scheduler.CyclicLR(tp.optim.SGD([w], lr=0.1), [0.01, 0.02], 0.1)
