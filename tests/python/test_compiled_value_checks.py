"""Data-dependent argument checks survive compilation (_value_check).

binary_cross_entropy raises on probabilities outside [0, 1] in eager (PyTorch
does too). A compiled function used to skip the check and return NaN, so a
model fed logits by mistake trained on NaN only when compiled. The check is
now graph nodes lowered to a Guard: the compiled call raises the same
ValueError, after every earlier good call, with static and dynamic shapes.
"""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

MSG = "binary_cross_entropy: all elements of input should be between 0 and 1"


def _bce(p, y):
    return F.binary_cross_entropy(p, y)


@pytest.mark.parametrize("bad", [1.5, -0.2, float("inf"), float("-inf")])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_compiled_bce_raises_like_eager_on_values_outside_zero_one(bad, reduction):
    f = lambda p, y: F.binary_cross_entropy(p, y, reduction=reduction)  # noqa: E731
    p, y = tp.tensor([0.25, bad, 0.5]), tp.tensor([1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match=MSG):
        f(p, y)
    with pytest.raises(ValueError, match=MSG):
        tp.compile(f)(p, y)


def test_the_error_is_also_a_runtime_error_when_compiled():
    # What code ported from PyTorch catches (eager raises the same class).
    with pytest.raises(RuntimeError, match=MSG):
        tp.compile(tp.nn.BCELoss())(tp.tensor([2.0, 0.5]), tp.tensor([1.0, 0.0]))


def test_good_calls_before_and_after_a_bad_one_equal_eager():
    cf = tp.compile(_bce)
    rng = np.random.default_rng(0)
    for step in range(6):
        pa = rng.uniform(0.01, 0.99, (8, 3)).astype(np.float32)
        if step == 3:
            pa[2, 1] = 1.25
        p, y = tp.from_numpy(pa), tp.from_numpy((rng.uniform(size=(8, 3)) > 0.5).astype(np.float32))
        if step == 3:
            with pytest.raises(ValueError, match=MSG):
                cf(p, y)
            continue
        np.testing.assert_allclose(cf(p, y).item(), _bce(p, y).item(), rtol=1e-6)


def test_nan_input_gives_nan_compiled_as_in_eager():
    p, y = tp.tensor([float("nan"), 0.5]), tp.tensor([1.0, 0.0])
    assert np.isnan(_bce(p, y).item())
    assert np.isnan(tp.compile(_bce)(p, y).item())


def test_ends_of_the_domain_stay_finite_compiled():
    p, y = tp.tensor([0.0, 1.0, 0.5], requires_grad=True), tp.tensor([1.0, 0.0, 1.0])
    loss = tp.compile(_bce)(p, y)
    loss.backward()
    assert np.isfinite(loss.item()) and np.isfinite(p.grad.numpy()).all()


def test_compiled_training_step_raises_when_the_model_emits_logits():
    # The user's mistake this check exists for: a model ending in Linear (no
    # sigmoid) fed to BCELoss. Eager raises; compiled raised nothing and
    # trained on NaN.
    tp.manual_seed(0)
    model = tp.nn.Linear(4, 1)
    x, y = tp.randn(16, 4) * 10, (tp.rand(16, 1) > 0.5).float()

    def loss_fn(x, y):
        return F.binary_cross_entropy(model(x), y)

    with pytest.raises(ValueError, match=MSG):
        loss_fn(x, y)
    with pytest.raises(ValueError, match=MSG):
        tp.compile(loss_fn)(x, y)
    # and after a good batch has compiled the region (the cached kernel checks too)
    cf = tp.compile(loss_fn)
    with tp.no_grad():
        model.bias.fill_(0.25)
    cf(x * 0, y).backward()
    assert model.weight.grad is not None
    with pytest.raises(ValueError, match=MSG):
        cf(x, y)


def test_compiled_training_with_sigmoid_equals_eager_step_by_step():
    def make():
        tp.manual_seed(1)
        m = tp.nn.Sequential(tp.nn.Linear(5, 8), tp.nn.Tanh(), tp.nn.Linear(8, 1), tp.nn.Sigmoid())
        return m, tp.optim.SGD(m.parameters(), lr=0.5)

    rng = np.random.default_rng(2)
    data = [(tp.from_numpy(rng.standard_normal((12, 5)).astype(np.float32)),
             tp.from_numpy((rng.uniform(size=(12, 1)) > 0.5).astype(np.float32))) for _ in range(5)]
    losses = []
    for compiled in (False, True):
        m, opt = make()

        def loss_fn(x, y):
            return F.binary_cross_entropy(m(x), y)
        run = tp.compile(loss_fn) if compiled else loss_fn
        out = []
        for x, y in data:
            opt.zero_grad()
            loss = run(x, y)
            loss.backward()
            out.append(loss.item())
            opt.step()
        losses.append(out)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)


def test_gradient_matches_finite_differences_and_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    pa = rng.uniform(0.05, 0.95, (4, 5))
    ya = rng.uniform(size=(4, 5))
    wa = rng.uniform(0.5, 2.0, (4, 5))
    p = tp.tensor(pa, dtype=tp.float64, requires_grad=True)
    f = tp.compile(lambda p, y, w: F.binary_cross_entropy(p, y, weight=w))
    loss = f(p, tp.tensor(ya), tp.tensor(wa))
    loss.backward()
    tpp = torch.tensor(pa, requires_grad=True)
    tl = torch.nn.functional.binary_cross_entropy(tpp, torch.tensor(ya), weight=torch.tensor(wa))
    tl.backward()
    np.testing.assert_allclose(loss.item(), tl.item(), rtol=1e-12)
    np.testing.assert_allclose(p.grad.numpy(), tpp.grad.numpy(), rtol=1e-10)


def test_dynamic_batch_sizes_check_every_call():
    cf = tp.compile(_bce, dynamic=True)
    for n in (4, 7, 9):
        p = tp.full((n, 2), 0.3)
        y = tp.ones(n, 2)
        np.testing.assert_allclose(cf(p, y).item(), _bce(p, y).item(), rtol=1e-6)
    bad = tp.full((11, 2), 0.3)
    bad[10, 1] = -0.5
    with pytest.raises(ValueError, match=MSG):
        cf(bad, tp.ones(11, 2))
    np.testing.assert_allclose(cf(tp.full((5, 2), 0.3), tp.ones(5, 2)).item(),
                               _bce(tp.full((5, 2), 0.3), tp.ones(5, 2)).item(), rtol=1e-6)


def test_large_input_checks_every_element_compiled():
    # Vector code checks the flag once per vector; the flag covers every
    # element, including the scalar tail's.
    n = 4099
    y = tp.ones(n)
    cf = tp.compile(lambda p, y: F.binary_cross_entropy(p, y, reduction="sum"))
    for pos in (0, 17, n - 1):
        p = tp.full((n,), 0.5)
        p[pos] = 1.0001
        with pytest.raises(ValueError, match=MSG):
            cf(p, y)
    np.testing.assert_allclose(cf(tp.full((n,), 0.5), y).item(), n * np.log(2.0), rtol=1e-5)


def test_strict_native_compiles_the_check_natively():
    cf = tp.compile(_bce, strict_native=True)
    np.testing.assert_allclose(cf(tp.tensor([0.5, 0.25]), tp.tensor([1.0, 0.0])).item(),
                               _bce(tp.tensor([0.5, 0.25]), tp.tensor([1.0, 0.0])).item(), rtol=1e-6)
    with pytest.raises(ValueError, match=MSG):
        cf(tp.tensor([0.5, 3.0]), tp.tensor([1.0, 0.0]))


def test_forward_mode_and_vmap_through_bce():
    p, y, t = tp.tensor([0.2, 0.7, 0.4], dtype=tp.float64), tp.tensor([1.0, 0.0, 1.0], dtype=tp.float64), \
        tp.tensor([1.0, -2.0, 0.5], dtype=tp.float64)
    _, jv = tp.func.jvp(lambda p: F.binary_cross_entropy(p, y), (p,), (t,))
    eps = 1e-6
    fd = (_bce(p + eps * t, y).item() - _bce(p - eps * t, y).item()) / (2 * eps)
    np.testing.assert_allclose(jv.item(), fd, rtol=1e-6)
    ps = tp.tensor([[0.2, 0.7], [0.5, 0.9]])
    ys = tp.tensor([[1.0, 0.0], [0.0, 1.0]])
    batched = tp.vmap(lambda p, y: F.binary_cross_entropy(p, y))(ps, ys)
    np.testing.assert_allclose(batched.numpy(), [_bce(ps[i], ys[i]).item() for i in range(2)], rtol=1e-6)
    with pytest.raises(ValueError, match=MSG):
        tp.vmap(lambda p, y: F.binary_cross_entropy(p, y))(ps * 2, ys)
