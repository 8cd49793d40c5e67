"""Adversarial user tests, round 5: training loops and calling conventions of
PyTorch users, under tp.compile.

Each test is a bug found by writing a realistic user program: a silent wrong
result, a crash or a misleading error. Compiled results are compared with eager
ones ("compiling is unobservable") and, where the semantics come from PyTorch,
with torch (CPU).
"""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn


def _np(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- keyword arguments of a compiled module
class _Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, mask=None, scale=1.0):
        y = self.fc(x) * scale
        return y if mask is None else y.masked_fill(mask, 0.0)


class _Extra(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, **extra):
        y = self.fc(x)
        if "bias" in extra:
            y = y + extra["bias"]
        return y.relu() if extra.get("act") == "relu" else y


@pytest.mark.parametrize("how", ["tp.compile", "Module.compile", "hooked"])
def test_a_compiled_module_called_with_keyword_arguments(how):
    # `model(x, mask=m)` on tp.compile(model) raised "keyword-only and **kwargs
    # parameters are not supported": keywords were bound against the module's
    # __call__(*args, **kwargs) instead of its forward's signature.
    m = _Masked()
    if how == "Module.compile":
        m.compile()
        cm = m
    else:
        if how == "hooked":
            m.register_forward_hook(lambda mod, args, out: None)
        cm = tp.compile(m)
    x = tp.randn(2, 3)
    mask = tp.tensor([[True, False, True], [False, False, True]])
    calls = [((x,), {}), ((x, mask), {}), ((x,), {"mask": mask}), ((x,), {"scale": 3.0}),
             ((x, mask), {"scale": 2.0}), ((), {"x": x, "scale": 4.0, "mask": mask}), ((x,), {})]
    for args, kw in calls:
        np.testing.assert_allclose(_np(cm(*args, **kw)), _np(m.forward(*args, **kw)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("how", ["module", "function"])
def test_double_star_keyword_arguments_reach_the_compiled_function(how):
    # A forward(self, x, **extra) / def f(x, **kw) raised TypeError for any keyword;
    # the extra keywords are now one dict argument (its keys select the version).
    b = tp.randn(3)
    x = tp.randn(2, 3)
    if how == "module":
        m = _Extra()
        cf, ref = tp.compile(m), m.forward
    else:
        def ref(x, **kw):
            return x * kw.get("s", 1.0) + (kw["b"] if "b" in kw else 0)
        cf = tp.compile(ref)
    kws = ([{}, {"bias": b}, {"act": "relu"}, {"bias": b, "act": "relu"}, {"act": "relu", "bias": b * 2}]
           if how == "module" else [{}, {"s": 2.0}, {"b": b}, {"s": 3.0, "b": b}, {"b": b * 2, "s": 3.0}])
    for kw in kws:
        np.testing.assert_allclose(_np(cf(x, **kw)), _np(ref(x, **kw)), rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError):
        cf(x, 1)  # too many positional arguments, as eager
