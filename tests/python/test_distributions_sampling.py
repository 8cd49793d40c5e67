"""Sampling from tp.distributions with TensorPlay's RNG: shapes, seeding,
sample moments, and reparameterized gradients (rsample)."""

import numpy as np
import pytest
import tensorplay as tp

D = tp.distributions
N = 20000


def _np(x):
    return x.detach().numpy()


def _t(x, dtype=tp.float64, **kw):
    return tp.tensor(np.asarray(x, dtype=np.float64), dtype=dtype, **kw)


MOMENT_CASES = {
    "Normal": lambda: D.Normal(_t([0.5, -1.0]), _t([1.0, 2.0])),
    "Laplace": lambda: D.Laplace(_t([0.5, -1.0]), _t([1.0, 0.5])),
    "Uniform": lambda: D.Uniform(_t([0.0, -2.0]), _t([1.0, 3.0])),
    "Exponential": lambda: D.Exponential(_t([0.5, 2.0])),
    "Gamma": lambda: D.Gamma(_t([0.3, 1.0, 4.5]), _t([1.0, 2.0, 0.5])),
    "Chi2": lambda: D.Chi2(_t([1.0, 5.0])),
    "Beta": lambda: D.Beta(_t([0.5, 2.0]), _t([0.7, 5.0])),
    "Dirichlet": lambda: D.Dirichlet(_t([[0.5, 1.0, 3.0], [2.0, 2.0, 2.0]])),
    "Poisson": lambda: D.Poisson(_t([0.5, 4.0, 30.0])),
    "Binomial": lambda: D.Binomial(_t([10.0, 3.0]), probs=_t([0.3, 0.9])),
    "Bernoulli": lambda: D.Bernoulli(probs=_t([0.2, 0.7])),
    "Geometric": lambda: D.Geometric(probs=_t([0.3, 0.8])),
    "Categorical": None,  # checked by frequencies below
    "OneHotCategorical": lambda: D.OneHotCategorical(probs=_t([[0.2, 0.3, 0.5]])),
    "StudentT": lambda: D.StudentT(_t([5.0, 10.0]), _t([1.0, 0.0]), _t([1.0, 2.0])),
    "LogNormal": lambda: D.LogNormal(_t([0.0, 0.5]), _t([0.25, 0.5])),
    "HalfNormal": lambda: D.HalfNormal(_t([0.5, 2.0])),
    "Gumbel": lambda: D.Gumbel(_t([0.0, 1.0]), _t([1.0, 0.5])),
    "Weibull": lambda: D.Weibull(_t([1.0, 2.0]), _t([1.5, 3.0])),
    "Pareto": lambda: D.Pareto(_t([1.0, 2.0]), _t([5.0, 6.0])),
    "Multinomial": lambda: D.Multinomial(7, probs=_t([[0.2, 0.3, 0.5]])),
    "NegativeBinomial": lambda: D.NegativeBinomial(_t([3.0, 10.0]), probs=_t([0.4, 0.7])),
    "MixtureSameFamily": lambda: D.MixtureSameFamily(D.Categorical(probs=_t([0.3, 0.7])),
                                                     D.Normal(_t([-2.0, 1.0]), _t([0.5, 1.0]))),
    "MultivariateNormal": lambda: D.MultivariateNormal(
        _t([1.0, -1.0]), covariance_matrix=_t([[2.0, 0.5], [0.5, 1.0]])),
}


@pytest.mark.parametrize("name", sorted(k for k, v in MOMENT_CASES.items() if v is not None))
def test_sample_moments(name):
    tp.manual_seed(1234)
    d = MOMENT_CASES[name]()
    x = d.sample((N,))
    assert tuple(x.shape) == (N,) + tuple(d.batch_shape) + tuple(d.event_shape)
    xs = _np(x)
    mean, var = _np(d.mean), _np(d.variance)
    # 5-sigma bounds on the sample mean and a looser one on the sample variance.
    se = np.sqrt(var / N)
    assert np.all(np.abs(xs.mean(0) - mean) < 5 * se + 1e-12), (xs.mean(0), mean)
    assert np.allclose(xs.var(0), var, rtol=0.1, atol=1e-3), (xs.var(0), var)
    if d.support is not None:
        assert bool(d.support.check(x).all())


def test_categorical_frequencies():
    tp.manual_seed(0)
    p = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])
    d = D.Categorical(probs=_t(p))
    x = _np(d.sample((N,)))
    assert x.shape == (N, 2)
    for b in range(2):
        freq = np.bincount(x[:, b], minlength=3) / N
        assert np.allclose(freq, p[b], atol=0.02)


def test_mvn_sample_covariance():
    tp.manual_seed(3)
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    x = _np(D.MultivariateNormal(_t([1.0, -1.0]), covariance_matrix=_t(cov)).sample((N,)))
    assert np.allclose(np.cov(x.T), cov, atol=0.08)


def test_manual_seed_reproducible():
    def draw():
        tp.manual_seed(42)
        return [_np(D.Normal(0.0, 1.0).sample((5,))), _np(D.Gamma(_t([0.5, 3.0]), 1.0).sample((4,))),
                _np(D.Categorical(logits=_t([0.0, 1.0, 2.0])).sample((6,)))]
    for a, b in zip(draw(), draw()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
def test_sample_dtype_and_no_grad(dtype):
    loc = tp.zeros(3, dtype=dtype, requires_grad=True)
    d = D.Normal(loc, 1.0)
    s = d.sample((2,))
    assert s.dtype == dtype and not s.requires_grad
    r = d.rsample((2,))
    assert r.dtype == dtype and r.requires_grad
    g = D.Gamma(tp.ones(3, dtype=dtype), 1.0).sample()
    assert g.dtype == dtype


def _rsample_grads(make, n=N):
    tp.manual_seed(7)
    params = make()
    d = params[0]
    x = d.rsample((n,))
    return d, params[1:], x


def test_normal_rsample_gradient_is_pathwise():
    loc = _t([0.5, -1.0], requires_grad=True)
    scale = _t([1.0, 2.0], requires_grad=True)
    tp.manual_seed(7)
    x = D.Normal(loc, scale).rsample((N,))
    (x ** 2).mean(0).sum().backward()
    eps = (_np(x) - _np(loc)) / _np(scale)
    # d/dloc mean((loc + s eps)^2) = 2 mean(x), d/dscale = 2 mean(x eps): exact for these draws
    np.testing.assert_allclose(_np(loc.grad), 2 * _np(x).mean(0), rtol=1e-10)
    np.testing.assert_allclose(_np(scale.grad), 2 * (_np(x) * eps).mean(0), rtol=1e-9)
    # and close to the true gradient of E[x^2] = loc^2 + scale^2
    np.testing.assert_allclose(_np(loc.grad), 2 * _np(loc), atol=0.1)
    np.testing.assert_allclose(_np(scale.grad), 2 * _np(scale), atol=0.1)


@pytest.mark.parametrize("family", ["Laplace", "Cauchy", "LogNormal", "Uniform", "Exponential"])
def test_rsample_gradient_flows(family):
    a = _t([0.5, 1.5], requires_grad=True)
    b = _t([1.0, 2.0], requires_grad=True)
    d = {"Laplace": lambda: D.Laplace(a, b), "Cauchy": lambda: D.Cauchy(a, b),
         "LogNormal": lambda: D.LogNormal(a, b), "Uniform": lambda: D.Uniform(a, a + b),
         "Exponential": lambda: D.Exponential(b)}[family]()
    tp.manual_seed(5)
    x = d.rsample((1000,))
    x.sum().backward()
    # Each of these samples is monotone in its location / rate and the pathwise
    # derivative has a closed form in the sample itself.
    xs = _np(x)
    if family in ("Laplace", "Cauchy"):
        np.testing.assert_allclose(_np(a.grad), [1000, 1000])
        np.testing.assert_allclose(_np(b.grad), ((xs - _np(a)) / _np(b)).sum(0), rtol=1e-9)
    elif family == "LogNormal":
        np.testing.assert_allclose(_np(a.grad), xs.sum(0), rtol=1e-9)
    elif family == "Uniform":
        np.testing.assert_allclose(_np(a.grad), [1000, 1000])
    else:
        np.testing.assert_allclose(_np(b.grad), (-xs / _np(b)).sum(0), rtol=1e-9)


def test_mvn_rsample_gradient():
    loc = _t([1.0, -1.0], requires_grad=True)
    L = _t([[1.5, 0.0], [0.3, 0.7]], requires_grad=True)
    tp.manual_seed(11)
    x = D.MultivariateNormal(loc, scale_tril=L).rsample((N,))
    (x ** 2).sum(-1).mean().backward()
    # E|x|^2 = |loc|^2 + ||L||_F^2
    np.testing.assert_allclose(_np(loc.grad), 2 * _np(loc), atol=0.1)
    np.testing.assert_allclose(np.tril(_np(L.grad)), 2 * _np(L), atol=0.1)


def test_relaxed_rsample_gradient_reaches_logits():
    logits = _t([[0.1, 0.5, -0.3]], requires_grad=True)
    d = D.RelaxedOneHotCategorical(tp.tensor(0.5, dtype=tp.float64), logits=logits)
    tp.manual_seed(2)
    x = d.rsample((100,))
    assert tuple(x.shape) == (100, 1, 3)
    np.testing.assert_allclose(_np(x).sum(-1), 1.0, rtol=1e-10)
    x[..., 0].sum().backward()
    assert logits.grad is not None and np.all(np.isfinite(_np(logits.grad)))
    p = _t([0.3, 0.6], requires_grad=True)
    y = D.RelaxedBernoulli(tp.tensor(0.5, dtype=tp.float64), probs=p).rsample((100,))
    assert bool(((y > 0) & (y < 1)).all())
    y.sum().backward()
    assert np.all(_np(p.grad) > 0)


def test_gamma_rsample_rate_gradient():
    rate = _t([2.0], requires_grad=True)
    tp.manual_seed(1)
    x = D.Gamma(_t([3.0]), rate).rsample((N,))
    x.mean().backward()
    np.testing.assert_allclose(_np(rate.grad), -_np(x).mean() / 2.0, rtol=1e-9)


GAMMA_POINTS = [(0.3, 0.05), (1.0, 0.1), (2.0, 1.5), (5.0, 2.3063), (3.0, 20.0), (0.5, 1e-30), (50.0, 41.0),
                (500.0, 481.3), (0.01, 1e-40)]


def test_standard_gamma_grad_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    from tensorplay.distributions._igamma import standard_gamma_grad
    mpmath.mp.dps = 40
    a = _t([p[0] for p in GAMMA_POINTS])
    x = _t([p[1] for p in GAMMA_POINTS])
    got = _np(standard_gamma_grad(a, x))
    for g, (aa, xx) in zip(got, GAMMA_POINTS):
        am, xm = mpmath.mpf(aa), mpmath.mpf(xx)
        dpda = mpmath.diff(lambda t: mpmath.gammainc(t, 0, xm, regularized=True), am)
        pdf = xm ** (am - 1) * mpmath.exp(-xm) / mpmath.gamma(am)
        np.testing.assert_allclose(g, float(-dpda / pdf), rtol=1e-7, err_msg=str((aa, xx)))


def test_gamma_rsample_concentration_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    alpha = _t([0.4, 1.0, 3.0, 20.0], requires_grad=True)
    tp.manual_seed(4)
    x = D.Gamma(alpha, 1.0).rsample((500,))
    x.sum().backward()
    # torch's per-sample gradient at the same samples (its approximations are good to ~1e-4)
    want = torch._standard_gamma_grad(torch.tensor(_np(alpha)).expand(500, 4), torch.tensor(_np(x))).sum(0)
    np.testing.assert_allclose(_np(alpha.grad), want.numpy(), rtol=1e-3)
    # and the Monte-Carlo gradient of E[x] = alpha is 1
    np.testing.assert_allclose(_np(alpha.grad) / 500, 1.0, atol=0.15)


def test_beta_dirichlet_studentt_rsample_gradients():
    tp.manual_seed(6)
    c = _t([2.0, 3.0], requires_grad=True)
    y = D.Beta(c[0], c[1]).rsample((N,))
    y.mean().backward()
    # d/da a/(a+b) = b/(a+b)^2, d/db = -a/(a+b)^2
    np.testing.assert_allclose(_np(c.grad), [3 / 25, -2 / 25], atol=0.01)
    conc = _t([1.0, 2.0, 3.0], requires_grad=True)
    z = D.Dirichlet(conc).rsample((N,))
    z[:, 0].mean().backward()
    # d/dc_j c_0 / sum(c): (sum - c_0)/sum^2 for j = 0, -c_0/sum^2 otherwise
    np.testing.assert_allclose(_np(conc.grad), [5 / 36, -1 / 36, -1 / 36], atol=0.01)
    df = _t([6.0], requires_grad=True)
    t = D.StudentT(df).rsample((N,))
    (t ** 2).mean().backward()
    # E[t^2] = df / (df - 2); derivative -2 / (df - 2)^2 = -0.125
    np.testing.assert_allclose(_np(df.grad), [-0.125], atol=0.04)


def test_gamma_cdf_gradient_in_value():
    torch = pytest.importorskip("torch")
    v = _t([0.3, 1.0, 4.0], requires_grad=True)
    D.Gamma(_t([2.0, 0.5, 3.0]), _t([1.0, 2.0, 0.5])).cdf(v).sum().backward()
    vt = torch.tensor(_np(v), requires_grad=True)
    torch.distributions.Gamma(torch.tensor([2.0, 0.5, 3.0], dtype=torch.float64),
                              torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)).cdf(vt).sum().backward()
    np.testing.assert_allclose(_np(v.grad), vt.grad.numpy(), rtol=1e-10)


def test_sample_shapes():
    d = D.Normal(tp.zeros(2, 3), 1.0)
    assert tuple(d.sample().shape) == (2, 3)
    assert tuple(d.sample((4,)).shape) == (4, 2, 3)
    assert tuple(d.sample((4, 5)).shape) == (4, 5, 2, 3)
    assert tuple(D.Dirichlet(tp.ones(2, 3)).sample((4,)).shape) == (4, 2, 3)
    assert tuple(D.Categorical(logits=tp.zeros(2, 3)).sample((4, 5)).shape) == (4, 5, 2)
    assert tuple(D.Independent(D.Normal(tp.zeros(2, 3), 1.0), 1).sample((4,)).shape) == (4, 2, 3)
    assert tuple(D.Bernoulli(probs=tp.full((2,), 0.5)).enumerate_support().shape) == (2, 2)
