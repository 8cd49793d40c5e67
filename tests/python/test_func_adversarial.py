"""Regressions from an outside bug hunt on forward-mode AD and tp.func: each
test compares with torch.func (or an analytic value) on float64 inputs."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.autograd.forward_ad as fwAD

torch = pytest.importorskip("torch")
tfwAD = torch.autograd.forward_ad

X = [0.5, -1.2, 0.8]
Y = [1.5, 0.3, -2.0]
V = [0.3, -0.7, 1.1]


def _np(x):
    return np.asarray(x.detach().tolist() if hasattr(x, "detach") else x, dtype=float)


def _both(fn):
    """fn(L) for L = tensorplay and torch, as arrays."""
    return _np(fn(tp)), _np(fn(torch))


def _t(L, a):
    return L.tensor(a, dtype=L.float64)


# ---- double backward through a write into a view ----
def test_double_backward_through_a_write_into_a_view():
    # The gradient of z[1].copy_(a * a) reaches a through CopySlices; with
    # create_graph that step must be recorded (it was written through an
    # unrecorded region, so d/da of the gradient lost the a * a path).
    def run(L):
        a = _t(L, X).requires_grad_(True)
        z = L.zeros(2, 3, dtype=L.float64)
        z[1].copy_(a * a)
        w = z[1]  # a view whose history is regenerated from z's (ViewOfBase)
        out = ((z.sum(0) + w.sin()) * a.exp()).sum()
        (g,) = L.autograd.grad(out, [a], create_graph=True)
        return L.autograd.grad(g.sum(), [a])[0]
    ours, theirs = _both(run)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
