"""Losses as a user calls them in eager mode, against PyTorch: saturated
probabilities into binary_cross_entropy, and targets whose shape differs from
the prediction's in the regression losses."""

import warnings

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

torch = pytest.importorskip("torch")


def _bce(mod, x, t, reduction="none"):
    xt = mod.tensor(np.array(x, np.float32))
    xt.requires_grad_(True)
    loss = mod.nn.functional.binary_cross_entropy(xt, mod.tensor(np.array(t, np.float32)), reduction=reduction)
    loss.sum().backward()
    return loss.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("x,t", [
    ([0.0, 1.0, 0.5, 0.25], [0.0, 1.0, 1.0, 0.5]),   # perfect predictions at the ends
    ([0.0, 1.0], [1.0, 0.0]),                          # confidently wrong: loss clamped at 100
])
def test_bce_at_exact_zero_and_one_has_finite_gradients(x, t):
    # log(0) = -inf used to make the derivative 0/0 = NaN even where the -100
    # clamp passes no gradient: one saturated probability poisoned the whole step.
    loss, grad = _bce(tp, x, t)
    want_loss, _ = _bce(torch, x, t)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
    assert np.isfinite(grad).all(), grad


def test_bce_after_a_saturated_sigmoid_matches_torch():
    # float32 sigmoid(20) is exactly 1.0: the usual way 0 and 1 reach the loss.
    z = np.array([20.0, -20.0, 0.3, 17.0, -30.0], np.float32)
    t = np.array([0.0, 1.0, 1.0, 1.0, 0.0], np.float32)
    got, want = [], []
    for mod, out in ((tp, got), (torch, want)):
        zt = mod.tensor(z)
        zt.requires_grad_(True)
        loss = mod.nn.functional.binary_cross_entropy(mod.sigmoid(zt), mod.tensor(t))
        loss.backward()
        out += [loss.item(), zt.grad.numpy()]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-7)


def test_bce_away_from_the_ends_matches_torch_in_first_and_second_derivatives():
    x = np.array([0.3, 0.6, 0.01], np.float64)
    t = np.array([0.2, 0.9, 1.0], np.float64)
    res = []
    for mod in (tp, torch):
        xt = mod.tensor(x)
        xt.requires_grad_(True)
        tt = mod.tensor(t)
        tt.requires_grad_(True)
        loss = mod.nn.functional.binary_cross_entropy(xt, tt)
        gx, gt = mod.autograd.grad(loss, [xt, tt], create_graph=True)
        (hx,) = mod.autograd.grad((gx * gx).sum(), [xt])
        res.append([loss.item(), gx.detach().numpy(), gt.detach().numpy(), hx.numpy()])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_bce_nan_input_stays_nan():
    loss, _ = _bce(tp, [float("nan"), 0.5], [1.0, 1.0])
    assert np.isnan(loss[0]) and np.isfinite(loss[1])


@pytest.mark.parametrize("fn", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_regression_loss_warns_when_target_broadcasts(fn):
    # A (N, 1) prediction against a (N,) target silently averages an N x N table.
    x = tp.tensor(np.arange(4, dtype=np.float32).reshape(4, 1))
    y = tp.tensor(np.arange(4, dtype=np.float32))
    with pytest.warns(UserWarning, match="differs from the input size"):
        got = getattr(F, fn)(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(torch.nn.functional, fn)(torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy()))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(F, fn)(x, x)  # same shapes: no warning


def test_loss_module_warns_too():
    with pytest.warns(UserWarning, match="differs from the input size"):
        tp.nn.MSELoss()(tp.ones(3, 1), tp.ones(3))
