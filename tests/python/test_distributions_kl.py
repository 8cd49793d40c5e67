"""kl_divergence against torch, register_kl dispatch, argument validation
(ValueError like PyTorch's default validation), and log_prob under tp.compile."""
import numpy as np
import pytest
import tensorplay as tp

torch = pytest.importorskip("torch")
TD = torch.distributions
D = tp.distributions
rng = np.random.default_rng(1)


def _pos(*s):
    return rng.uniform(0.5, 2.5, size=s)


def _spd(n, batch=()):
    a = rng.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _simplex(*s):
    x = rng.uniform(0.05, 1.0, size=s)
    return x / x.sum(-1, keepdims=True)


KL_CASES = {
    "Normal": (lambda M, a, b: M.Normal(a, b), (rng.normal(size=(3, 1)), _pos(4)), (rng.normal(size=4), _pos(3, 1))),
    "Laplace": (lambda M, a, b: M.Laplace(a, b), (rng.normal(size=3), _pos(3)), (rng.normal(size=3), _pos(3))),
    "Uniform": (lambda M, a, b: M.Uniform(a, b), (np.array([0.0, -1.0, 0.2]), np.array([1.0, 0.5, 0.4])),
                (np.array([-1.0, -1.0, 0.3]), np.array([2.0, 0.5, 1.0]))),
    "Exponential": (lambda M, a: M.Exponential(a), (_pos(3),), (_pos(2, 1),)),
    "Gamma": (lambda M, a, b: M.Gamma(a, b), (_pos(3), _pos(3)), (_pos(3), _pos(3))),
    "Beta": (lambda M, a, b: M.Beta(a, b), (_pos(3), _pos(3)), (_pos(3), _pos(3))),
    "Dirichlet": (lambda M, a: M.Dirichlet(a), (_pos(2, 4),), (_pos(4),)),
    "Bernoulli": (lambda M, p: M.Bernoulli(probs=p), (np.array([0.0, 0.3, 1.0, 0.5]),),
                  (np.array([0.2, 0.6, 0.9, 0.0]),)),
    "Categorical": (lambda M, p: M.Categorical(probs=p), (_simplex(3, 5),), (_simplex(3, 5),)),
    "OneHotCategorical": (lambda M, p: M.OneHotCategorical(probs=p), (_simplex(2, 4),), (_simplex(2, 4),)),
    "Poisson": (lambda M, a: M.Poisson(a), (_pos(3),), (_pos(3),)),
    "MVN": (lambda M, m, S: M.MultivariateNormal(m, covariance_matrix=S), (rng.normal(size=(2, 3)), _spd(3)),
            (rng.normal(size=3), _spd(3, (2,)))),
    "Independent": (lambda M, a, b: M.Independent(M.Normal(a, b), 1), (rng.normal(size=(2, 3)), _pos(2, 3)),
                    (rng.normal(size=(2, 3)), _pos(2, 3))),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(KL_CASES))
def test_kl_matches_torch(name, dtype):
    ctor, pa, qa = KL_CASES[name]
    tdt = tp.float32 if dtype == np.float32 else tp.float64
    cdt = torch.float32 if dtype == np.float32 else torch.float64
    p_tp = ctor(D, *[tp.tensor(a.astype(dtype), dtype=tdt) for a in pa])
    q_tp = ctor(D, *[tp.tensor(a.astype(dtype), dtype=tdt) for a in qa])
    p_t = ctor(TD, *[torch.tensor(a.astype(dtype), dtype=cdt) for a in pa])
    q_t = ctor(TD, *[torch.tensor(a.astype(dtype), dtype=cdt) for a in qa])
    got = D.kl_divergence(p_tp, q_tp).numpy()
    want = TD.kl_divergence(p_t, q_t).numpy()
    tol = 5e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_kl_gradient_matches_torch():
    a, b = rng.normal(size=3), _pos(3)
    c, d = rng.normal(size=3), _pos(3)
    tps = [tp.tensor(x, dtype=tp.float64, requires_grad=True) for x in (a, b, c, d)]
    ts = [torch.tensor(x, requires_grad=True) for x in (a, b, c, d)]
    D.kl_divergence(D.Normal(tps[0], tps[1]), D.Normal(tps[2], tps[3])).sum().backward()
    TD.kl_divergence(TD.Normal(ts[0], ts[1]), TD.Normal(ts[2], ts[3])).sum().backward()
    for x, y in zip(tps, ts):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-12)


def test_register_kl_and_dispatch():
    class MyNormal(D.Normal):
        pass

    # A subclass inherits the parent's formula ...
    p, q = MyNormal(0.0, 1.0), D.Normal(1.0, 2.0)
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), D.kl_divergence(D.Normal(0.0, 1.0), q).numpy())

    # ... until a more specific pair is registered.
    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return tp.zeros(())

    assert float(D.kl_divergence(p, q)) == 0.0
    with pytest.raises(NotImplementedError, match="Normal.*Gamma|Gamma"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Gamma(1.0, 1.0))
    with pytest.raises(TypeError):
        D.register_kl("Normal", D.Normal)


# -- validation -----------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: D.Normal(tp.zeros(2), tp.tensor([1.0, -1.0])),
    lambda: D.Gamma(tp.tensor([-1.0]), 1.0),
    lambda: D.Bernoulli(probs=tp.tensor([1.5])),
    lambda: D.Categorical(probs=tp.tensor([0.5, -0.5, 1.0])),
    lambda: D.Dirichlet(tp.tensor([1.0, 0.0])),
    lambda: D.Uniform(tp.tensor([1.0]), tp.tensor([0.0])),
    lambda: D.MultivariateNormal(tp.zeros(2), covariance_matrix=tp.tensor([[1.0, 2.0], [2.0, 1.0]])),
    lambda: D.Beta(tp.tensor([1.0]), tp.tensor([0.0])),
    lambda: D.Poisson(tp.tensor([-1.0])),
    lambda: D.StudentT(tp.tensor([-2.0])),
])
def test_invalid_parameters_raise_value_error(make):
    with pytest.raises(ValueError):
        make()


def test_invalid_sample_raises_and_validate_args_false_skips():
    with pytest.raises(ValueError, match="support"):
        D.Gamma(1.0, 1.0).log_prob(tp.tensor(-1.0))
    with pytest.raises(ValueError, match="support"):
        D.Bernoulli(probs=tp.tensor(0.3)).log_prob(tp.tensor(0.5))
    with pytest.raises(ValueError, match="broadcastable"):
        D.Normal(tp.zeros(3), 1.0).log_prob(tp.zeros(4))
    with pytest.raises(ValueError, match="event_shape"):
        D.MultivariateNormal(tp.zeros(3), scale_tril=tp.eye(3)).log_prob(tp.zeros(2))
    # validate_args=False trusts the caller
    D.Normal(tp.zeros(2), tp.tensor([1.0, -1.0]), validate_args=False)
    D.Gamma(1.0, 1.0, validate_args=False).log_prob(tp.tensor(1.0))


def test_constructor_errors_name_the_problem():
    with pytest.raises(ValueError, match="probs.*logits|either"):
        D.Bernoulli()
    with pytest.raises(ValueError, match="exactly one"):
        D.MultivariateNormal(tp.zeros(2))
    with pytest.raises(ValueError, match="square"):
        D.MultivariateNormal(tp.zeros(2), covariance_matrix=tp.eye(3))
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        D.Independent(D.Normal(tp.zeros(2), 1.0), 2)
    with pytest.raises(TypeError):
        D.Normal("a", 1.0)


def test_default_validation_switch():
    D.Distribution.set_default_validate_args(False)
    try:
        D.Normal(0.0, -1.0)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)


# -- compiled log_prob ----------------------------------------------------------------

COMPILED = {
    "Normal": lambda loc, scale, x: D.Normal(loc, scale, validate_args=False).log_prob(x),
    "Gamma": lambda a, b, x: D.Gamma(a, b, validate_args=False).log_prob(x),
    "Beta": lambda a, b, x: D.Beta(a, b, validate_args=False).log_prob(x),
    "StudentT": lambda a, b, x: D.StudentT(a + 1.0, 0.0, b, validate_args=False).log_prob(x),
    "Laplace": lambda a, b, x: D.Laplace(a, b, validate_args=False).log_prob(x),
    "LogNormal": lambda a, b, x: D.LogNormal(a, b, validate_args=False).log_prob(x),
    "Categorical": lambda a, b, x: D.Categorical(logits=a * b, validate_args=False).log_prob((x[:, 0] * 4).long()),
    "NormalEntropyKL": lambda a, b, x: D.kl_divergence(D.Normal(a, b), D.Normal(x, b + 1.0)) + D.Normal(a, b).entropy(),
}


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_compiled_log_prob_matches_eager(name):
    fn = COMPILED[name]
    a = tp.tensor(rng.uniform(0.5, 2.0, size=(3, 4)), dtype=tp.float32)
    b = tp.tensor(rng.uniform(0.5, 2.0, size=(3, 4)), dtype=tp.float32)
    x = tp.tensor(rng.uniform(0.1, 0.9, size=(3, 4)), dtype=tp.float32)
    eager = fn(a, b, x)
    compiled = tp.compile(fn)(a, b, x)
    np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=1e-5, atol=1e-6)


def test_compiled_with_validation_matches_eager():
    def f(loc, scale, x):
        return D.Normal(loc, scale).log_prob(x)
    a, b, x = tp.zeros(4), tp.ones(4), tp.tensor([0.1, 0.2, -0.3, 1.0])
    np.testing.assert_allclose(tp.compile(f)(a, b, x).numpy(), f(a, b, x).numpy(), rtol=1e-6)
    # The validation's data-dependent check is a guard: bad data later still raises.
    with pytest.raises(ValueError, match="scale"):
        tp.compile(f)(a, -b, x)


def test_shape_errors_name_the_distribution():
    with pytest.raises(ValueError, match=r"Normal.*\(2,\).*\(3,\)"):
        D.Normal(tp.zeros(2), tp.ones(3))
    with pytest.raises(ValueError, match=r"Gamma.*\(2,\).*\(3,\)"):
        D.Gamma(tp.ones(2), tp.ones(3))
    with pytest.raises(ValueError, match="Normal.*Tensor"):
        D.Normal(0.0, 1.0).log_prob(1.0)
    with pytest.raises(ValueError):
        D.Normal(tp.zeros(2), 1.0).expand((3,))


@pytest.mark.parametrize("make", [
    lambda: D.Normal(0.0, 1.0), lambda: D.Bernoulli(probs=0.5), lambda: D.Gamma(2.0, 1.0), lambda: D.Beta(2.0, 3.0),
    lambda: D.Poisson(3.0), lambda: D.Binomial(5, probs=0.3), lambda: D.Geometric(probs=0.3),
    lambda: D.StudentT(3.0), lambda: D.Uniform(0.0, 1.0), lambda: D.Exponential(2.0), lambda: D.LogNormal(0.0, 1.0),
    lambda: D.Laplace(0.0, 1.0), lambda: D.Cauchy(0.0, 1.0), lambda: D.Chi2(3.0),
    lambda: D.RelaxedBernoulli(tp.tensor(0.5), probs=0.3),
])
def test_scalar_distributions_sample_and_score(make):
    d = make()
    assert d.batch_shape == () and d.event_shape == ()
    s = d.sample()
    assert tuple(s.shape) == ()
    assert tuple(d.sample((3,)).shape) == (3,)
    assert tuple(d.log_prob(s).shape) == ()
    assert tuple(d.expand((2, 2)).sample().shape) == (2, 2)


def test_float32_with_python_scalars_and_extreme_parameters():
    d = D.Normal(tp.zeros(3, dtype=tp.float32), 2.0)
    assert d.scale.dtype == tp.float32 and d.log_prob(tp.zeros(3)).dtype == tp.float32
    d64 = D.Gamma(tp.ones(2, dtype=tp.float64), 3)
    assert d64.rate.dtype == tp.float64
    # zero probabilities: entropy and KL stay finite / inf like torch's
    logits = np.array([[0.0, -np.inf, 1.0]])
    e = D.Categorical(logits=tp.tensor(logits)).entropy().numpy()
    et = torch.distributions.Categorical(logits=torch.tensor(logits)).entropy().numpy()
    np.testing.assert_allclose(e, et, rtol=1e-12)
    big = np.array([-200.0, -30.0, 0.0, 30.0, 200.0])
    v = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    want = torch.distributions.Bernoulli(logits=torch.tensor(big)).log_prob(torch.tensor(v)).numpy()
    # atol: at logit -30 ours is log1p(exp(-30)), torch's is 1% off that
    np.testing.assert_allclose(D.Bernoulli(logits=tp.tensor(big)).log_prob(tp.tensor(v)).numpy(), want,
                               rtol=1e-12, atol=1e-14)
