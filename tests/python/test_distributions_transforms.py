"""tp.distributions.transforms against torch's: forward, inverse,
log|det J|, signs, composition, event dims; TransformedDistribution's
cdf/icdf through decreasing maps."""
import numpy as np
import pytest
import tensorplay as tp

torch = pytest.importorskip("torch")
TT = torch.distributions.transforms
T = tp.distributions.transforms
D = tp.distributions
rng = np.random.default_rng(2)


def _both(make):
    return make(T, tp), make(TT, torch)


TRANSFORMS = {
    "exp": lambda M, L: M.ExpTransform(),
    "sigmoid": lambda M, L: M.SigmoidTransform(),
    "tanh": lambda M, L: M.TanhTransform(),
    "affine_scalar": lambda M, L: M.AffineTransform(0.5, -2.0),
    "affine_tensor": lambda M, L: M.AffineTransform(L.tensor([0.1, 0.2, 0.3], dtype=L.float64),
                                                    L.tensor([1.5, -0.5, 2.0], dtype=L.float64)),
    "affine_event": lambda M, L: M.AffineTransform(0.0, L.tensor([1.5, -0.5, 2.0], dtype=L.float64), event_dim=1),
    "compose": lambda M, L: M.ComposeTransform([M.AffineTransform(0.3, 0.7), M.TanhTransform(),
                                                M.AffineTransform(1.0, 2.0)]),
    "exp_inv": lambda M, L: M.ExpTransform().inv,
    "power": lambda M, L: M.PowerTransform(L.tensor(2.5, dtype=L.float64)),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_transform_matches_torch(name):
    t_tp, t_t = _both(TRANSFORMS[name])
    x = rng.uniform(0.1, 0.9, size=(4, 3))
    xp, xt = tp.tensor(x), torch.tensor(x)
    yp, yt = t_tp(xp), t_t(xt)
    np.testing.assert_allclose(yp.numpy(), yt.numpy(), rtol=1e-12)
    np.testing.assert_allclose(t_tp.inv(yp).numpy(), x, rtol=1e-9)
    np.testing.assert_allclose(t_tp.log_abs_det_jacobian(xp, yp).numpy(), t_t.log_abs_det_jacobian(xt, yt).numpy(),
                               rtol=1e-10, atol=1e-12)
    assert t_tp.domain.event_dim == t_t.domain.event_dim
    assert t_tp.codomain.event_dim == t_t.codomain.event_dim
    if name not in ("power", "affine_tensor", "affine_event"):
        assert t_tp.sign == t_t.sign


def test_transformed_distribution_decreasing_cdf_and_icdf():
    for M, L in ((D, tp), (torch.distributions, torch)):
        base = M.Normal(L.tensor([0.2, -0.3], dtype=L.float64), L.tensor([1.0, 2.0], dtype=L.float64))
        d = M.TransformedDistribution(base, [M.transforms.AffineTransform(1.0, -3.0), M.transforms.ExpTransform()])
        v = L.tensor([0.5, 4.0], dtype=L.float64)
        if L is tp:
            got = (d.cdf(v).numpy(), d.icdf(L.tensor([0.3, 0.8], dtype=L.float64)).numpy(), d.log_prob(v).numpy())
        else:
            want = (d.cdf(v).numpy(), d.icdf(L.tensor([0.3, 0.8], dtype=L.float64)).numpy(), d.log_prob(v).numpy())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10)


def test_transformed_distribution_event_dims_and_samples():
    base = D.Normal(tp.zeros(2, 3), 1.0)
    d = D.TransformedDistribution(base, D.AffineTransform(0.0, tp.ones(3) * 2, event_dim=1))
    assert d.batch_shape == (2,) and d.event_shape == (3,)
    tp.manual_seed(0)
    s = d.rsample((5,))
    assert tuple(s.shape) == (5, 2, 3)
    assert tuple(d.log_prob(s).shape) == (5, 2)
    td = torch.distributions
    dt = td.TransformedDistribution(td.Normal(torch.zeros(2, 3), 1.0), td.AffineTransform(0.0, torch.ones(3) * 2,
                                                                                         event_dim=1))
    np.testing.assert_allclose(d.log_prob(s).detach().numpy(), dt.log_prob(torch.tensor(s.numpy())).numpy(),
                               rtol=1e-5)
    with pytest.raises(ValueError, match="Transform"):
        D.TransformedDistribution(base, ["exp"])


def test_tanh_squashed_gaussian_log_prob_gradient_matches_torch():
    # the SAC-style policy: tanh(Normal(mu, sigma))
    mu = rng.normal(size=3)
    sig = rng.uniform(0.5, 1.5, size=3)
    y = rng.uniform(-0.9, 0.9, size=3)
    mp, sp = tp.tensor(mu, requires_grad=True), tp.tensor(sig, requires_grad=True)
    mt, st = torch.tensor(mu, requires_grad=True), torch.tensor(sig, requires_grad=True)
    D.TransformedDistribution(D.Normal(mp, sp), [D.TanhTransform()]).log_prob(tp.tensor(y)).sum().backward()
    td = torch.distributions
    td.TransformedDistribution(td.Normal(mt, st), [td.TanhTransform()]).log_prob(torch.tensor(y)).sum().backward()
    np.testing.assert_allclose(mp.grad.numpy(), mt.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(sp.grad.numpy(), st.grad.numpy(), rtol=1e-10)
