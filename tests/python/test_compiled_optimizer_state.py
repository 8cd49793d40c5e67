"""tp.compile(opt.step) against eager opt.step, step by step, when the optimizer's Python
state changes between steps: a parameter is replaced by a new object."""
import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn, optim

OPTIMIZERS = {
    "sgd_momentum": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
    "sgd_nesterov_wd": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
    "sgd_dampening": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.3),
    "adam": lambda ps: optim.Adam(ps, lr=0.1),
    "adam_amsgrad": lambda ps: optim.Adam(ps, lr=0.05, amsgrad=True, weight_decay=0.01),
    "adamw_amsgrad": lambda ps: optim.AdamW(ps, lr=0.05, amsgrad=True),
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01),
    "rmsprop_momentum_centered": lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
    "adagrad": lambda ps: optim.Adagrad(ps, lr=0.1),
    "adadelta": lambda ps: optim.Adadelta(ps, lr=1.0),
    "adamax": lambda ps: optim.Adamax(ps, lr=0.05),
    "nadam": lambda ps: optim.NAdam(ps, lr=0.05),
    "radam": lambda ps: optim.RAdam(ps, lr=0.05),
}


def _grads(m, i):
    g = tp.Generator().manual_seed(100 + i)
    x = tp.randn(5, 4, generator=g)
    m.zero_grad()
    (m(x) ** 2).sum().backward()


def _snapshot(m, opt):
    """Parameters and every state tensor (by parameter position and name), as numpy."""
    out = {f"p{k}": p.detach().numpy().copy() for k, p in enumerate(m.parameters())}
    for k, p in enumerate(opt.param_groups[0]["params"]):
        for name, v in sorted(opt.state.get(p, {}).items()):
            out[f"state{k}.{name}"] = v.numpy().copy() if isinstance(v, tp.Tensor) else v
    return out


def _compare(e, c, what):
    assert sorted(e) == sorted(c), f"{what}: state entries differ: eager {sorted(e)}, compiled {sorted(c)}"
    for k in e:
        np.testing.assert_allclose(np.asarray(c[k], dtype=np.float64), np.asarray(e[k], dtype=np.float64),
                                   rtol=1e-5, atol=1e-6, err_msg=f"{what}: {k}")


def _run_both(name, between, steps=6):
    """The same training run twice (eager opt.step, tp.compile(opt.step)); `between(i, m, opt)`
    changes the optimizer's Python state before step i. Compared after every step."""
    snaps = []
    for compiled in (False, True):
        tp.manual_seed(0)
        m = nn.Linear(4, 3)
        opt = OPTIMIZERS[name](m.parameters())
        step = tp.compile(opt.step) if compiled else opt.step
        run = []
        for i in range(steps):
            between(i, m, opt)
            _grads(m, i)
            step()
            run.append(_snapshot(m, opt))
        snaps.append(run)
    for i, (e, c) in enumerate(zip(*snaps)):
        _compare(e, c, f"{name} step {i}")


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_replaced_parameter_gets_its_own_state(name):
    # After the weight is replaced by a new Parameter (and in the param group), the
    # old parameter stays a key of opt.state; a version captured before read and
    # wrote the old parameter's momentum buffer / moments.
    def between(i, m, opt):
        if i == 2:
            m.weight = nn.Parameter(tp.ones(3, 4) * 0.1)
            opt.param_groups[0]["params"][0] = m.weight
            if isinstance(opt, optim.Adagrad):  # (its state is made at construction, as PyTorch's)
                opt._init_state(m.weight, opt.param_groups[0])

    _run_both(name, between)
