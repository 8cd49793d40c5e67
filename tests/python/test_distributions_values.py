"""tp.distributions against torch.distributions: log_prob, entropy, moments,
cdf/icdf on the same parameters and values, float32 and float64, with
broadcasting batch shapes; parameter gradients of log_prob in float64."""
import numpy as np
import pytest
import tensorplay as tp

torch = pytest.importorskip("torch")
TD = torch.distributions
D = tp.distributions

rng = np.random.default_rng(0)


def _pos(*shape):
    return rng.uniform(0.5, 2.5, size=shape)


def _real(*shape):
    return rng.normal(size=shape)


def _unit(*shape):
    return rng.uniform(0.1, 0.9, size=shape)


def _simplex(*shape):
    x = rng.uniform(0.2, 1.0, size=shape)
    return x / x.sum(-1, keepdims=True)


def _spd(n, batch=()):
    a = rng.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


# name -> (constructor(lib_module, params), params, value)
# Parameters have shapes (3, 1) and (4,) so the batch shape (3, 4) comes from broadcasting.
CASES = {
    "Normal": (lambda M, p: M.Normal(p["a"], p["b"]), {"a": _real(3, 1), "b": _pos(4)}, _real(2, 3, 4)),
    "Laplace": (lambda M, p: M.Laplace(p["a"], p["b"]), {"a": _real(3, 1), "b": _pos(4)}, _real(2, 3, 4)),
    "Cauchy": (lambda M, p: M.Cauchy(p["a"], p["b"]), {"a": _real(3, 1), "b": _pos(4)}, _real(2, 3, 4)),
    "Uniform": (lambda M, p: M.Uniform(-p["a"].abs() - 0.5, p["b"]), {"a": _real(3, 1), "b": _pos(4) + 3},
                np.zeros((3, 4)) + 0.25),
    "Exponential": (lambda M, p: M.Exponential(p["b"]), {"b": _pos(3, 4)}, _pos(2, 3, 4)),
    "Gamma": (lambda M, p: M.Gamma(p["a"], p["b"]), {"a": _pos(3, 1), "b": _pos(4)}, _pos(3, 4)),
    "Chi2": (lambda M, p: M.Chi2(p["a"]), {"a": _pos(3, 4)}, _pos(3, 4)),
    "Beta": (lambda M, p: M.Beta(p["a"], p["b"]), {"a": _pos(3, 1), "b": _pos(4)}, _unit(3, 4)),
    "Dirichlet": (lambda M, p: M.Dirichlet(p["a"]), {"a": _pos(3, 4)}, _simplex(2, 3, 4)),
    "Poisson": (lambda M, p: M.Poisson(p["b"]), {"b": _pos(3, 4)}, rng.integers(0, 5, (3, 4)).astype(float)),
    "Bernoulli": (lambda M, p: M.Bernoulli(probs=p["p"]), {"p": _unit(3, 4)}, rng.integers(0, 2, (3, 4)).astype(float)),
    "BernoulliLogits": (lambda M, p: M.Bernoulli(logits=p["a"]), {"a": _real(3, 4)},
                        rng.integers(0, 2, (2, 3, 4)).astype(float)),
    "Geometric": (lambda M, p: M.Geometric(probs=p["p"]), {"p": _unit(3, 4)}, rng.integers(0, 6, (3, 4)).astype(float)),
    "Binomial": (lambda M, p: M.Binomial(10, probs=p["p"]), {"p": _unit(3, 4)},
                 rng.integers(0, 11, (3, 4)).astype(float)),
    "BinomialLogits": (lambda M, p: M.Binomial(p["n"], logits=p["a"]), {"n": np.array([5.0, 7.0, 9.0]), "a": _real(3)},
                       np.array([2.0, 0.0, 9.0])),
    "Categorical": (lambda M, p: M.Categorical(probs=p["p"]), {"p": _simplex(3, 5)}, np.array([0, 4, 2])),
    "CategoricalLogits": (lambda M, p: M.Categorical(logits=p["a"]), {"a": _real(3, 5)},
                          rng.integers(0, 5, (2, 3))),
    "OneHotCategorical": (lambda M, p: M.OneHotCategorical(probs=p["p"]), {"p": _simplex(3, 5)},
                          np.eye(5)[[1, 3, 0]]),
    "StudentT": (lambda M, p: M.StudentT(p["d"], p["a"], p["b"]), {"d": _pos(3, 1) + 2, "a": _real(4), "b": _pos(4)},
                 _real(3, 4)),
    "LogNormal": (lambda M, p: M.LogNormal(p["a"], p["b"]), {"a": _real(3, 1), "b": _pos(4)}, _pos(3, 4)),
    "MVNcov": (lambda M, p: M.MultivariateNormal(p["m"], covariance_matrix=p["S"]),
               {"m": _real(2, 3), "S": _spd(3)}, _real(4, 2, 3)),
    "MVNprec": (lambda M, p: M.MultivariateNormal(p["m"], precision_matrix=p["S"]),
                {"m": _real(3), "S": _spd(3, (2,))}, _real(2, 3)),
    "MVNtril": (lambda M, p: M.MultivariateNormal(p["m"], scale_tril=p["L"]),
                {"m": _real(3), "L": np.linalg.cholesky(_spd(3))}, _real(5, 3)),
    "Independent": (lambda M, p: M.Independent(M.Normal(p["a"], p["b"]), 1), {"a": _real(3, 4), "b": _pos(4)},
                    _real(3, 4)),
    "TransformedAffineExp": (lambda M, p: M.TransformedDistribution(
        M.Normal(p["a"], p["b"]), [M.transforms.AffineTransform(0.5, 2.0), M.transforms.ExpTransform()]),
        {"a": _real(3, 1), "b": _pos(4)}, _pos(3, 4)),
    "TransformedSigmoid": (lambda M, p: M.TransformedDistribution(
        M.Normal(p["a"], p["b"]), M.transforms.SigmoidTransform()), {"a": _real(3), "b": _pos(3)}, _unit(3)),
    "TransformedTanh": (lambda M, p: M.TransformedDistribution(
        M.Normal(p["a"], p["b"]), [M.transforms.TanhTransform()]), {"a": _real(3), "b": _pos(3)},
        _unit(3) * 2 - 1),
    "RelaxedBernoulli": (lambda M, p: M.RelaxedBernoulli(p["t"], probs=p["p"]), {"t": np.array(0.7), "p": _unit(3)},
                         _unit(3)),
    "RelaxedOneHotCategorical": (lambda M, p: M.RelaxedOneHotCategorical(p["t"], probs=p["p"]),
                                 {"t": np.array(0.7), "p": _simplex(2, 4)}, _simplex(2, 4)),
    "HalfNormal": (lambda M, p: M.HalfNormal(p["b"]), {"b": _pos(3, 4)}, _pos(3, 4)),
    "HalfCauchy": (lambda M, p: M.HalfCauchy(p["b"]), {"b": _pos(3, 4)}, _pos(3, 4)),
    "Gumbel": (lambda M, p: M.Gumbel(p["a"], p["b"]), {"a": _real(3, 1), "b": _pos(4)}, _real(3, 4)),
    "Weibull": (lambda M, p: M.Weibull(p["a"], p["b"]), {"a": _pos(3, 1), "b": _pos(4)}, _pos(3, 4)),
    "Pareto": (lambda M, p: M.Pareto(p["a"], p["b"] + 1.5), {"a": _unit(3, 1), "b": _pos(4)}, _pos(3, 4) + 1),
    "Multinomial": (lambda M, p: M.Multinomial(6, probs=p["p"]), {"p": _simplex(3, 4)},
                    np.array([[1.0, 2.0, 3.0, 0.0], [6.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 4.0]])),
    "NegativeBinomial": (lambda M, p: M.NegativeBinomial(p["a"] + 1, probs=p["p"]), {"a": _pos(3, 1), "p": _unit(4)},
                         rng.integers(0, 8, (3, 4)).astype(float)),
    "NegativeBinomialLogits": (lambda M, p: M.NegativeBinomial(p["b"], logits=p["a"]),
                               {"b": _pos(3), "a": _real(3)}, np.array([0.0, 3.0, 10.0])),
    "MixtureNormal": (lambda M, p: M.MixtureSameFamily(M.Categorical(probs=p["p"]), M.Normal(p["a"], p["b"])),
                      {"p": _simplex(2, 3), "a": _real(2, 3), "b": _pos(2, 3)}, _real(5, 2)),
    "MixtureMVN": (lambda M, p: M.MixtureSameFamily(
        M.Categorical(logits=p["l"]), M.Independent(M.Normal(p["a"], p["b"]), 1)),
        {"l": _real(3), "a": _real(3, 2), "b": _pos(3, 2)}, _real(4, 2)),
}

DISCRETE_INT = {"Categorical", "CategoricalLogits"}


def _make(name, lib, dtype, requires_grad=False):
    ctor, params, value = CASES[name]
    M = D if lib is tp else TD
    tdt = {np.float32: (tp.float32, torch.float32), np.float64: (tp.float64, torch.float64)}[dtype]
    dt = tdt[0] if lib is tp else tdt[1]
    ps = {k: lib.tensor(v.astype(dtype), dtype=dt, requires_grad=requires_grad) for k, v in params.items()}
    if name in DISCRETE_INT:
        val = lib.tensor(value.astype(np.int64))
    else:
        val = lib.tensor(value.astype(dtype), dtype=dt)
    return ctor(M, ps), val, ps


def _np(x):
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def _close(a, b, dtype):
    tol = 2e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_torch(name, dtype):
    d_tp, v_tp, _ = _make(name, tp, dtype)
    d_t, v_t, _ = _make(name, torch, dtype)
    assert tuple(d_tp.batch_shape) == tuple(d_t.batch_shape)
    assert tuple(d_tp.event_shape) == tuple(d_t.event_shape)
    _close(d_tp.log_prob(v_tp), d_t.log_prob(v_t), dtype)
    checked = 1
    for prop in ("mean", "mode", "variance", "stddev"):
        if name == "Weibull" and prop == "mode":
            continue  # concentration < 1: ours is 0 (the density's supremum is at 0), torch's nan
        try:
            expected = getattr(d_t, prop)
        except NotImplementedError:
            continue
        _close(getattr(d_tp, prop), expected, dtype)
        checked += 1
    for method in ("entropy",):
        try:
            expected = getattr(d_t, method)()
        except NotImplementedError:
            continue
        if name == "Multinomial" and dtype == np.float64:
            # torch evaluates lgamma(n + 1) in float32 here; ours is float64
            np.testing.assert_allclose(_np(d_tp.entropy()), _np(expected), rtol=1e-7)
        else:
            _close(getattr(d_tp, method)(), expected, dtype)
        checked += 1
    try:
        expected = d_t.cdf(v_t)
    except NotImplementedError:
        expected = None
    if expected is not None:
        _close(d_tp.cdf(v_tp), expected, dtype)
        q = d_t.cdf(v_t)
        try:
            expected_icdf = d_t.icdf(q)
        except NotImplementedError:
            expected_icdf = None
        if expected_icdf is not None:
            _close(d_tp.icdf(tp.tensor(_np(q))), expected_icdf, dtype)
    assert checked >= 2 or name.startswith("Transformed") or name.startswith("Relaxed")


GRAD_CASES = ["HalfNormal", "Gumbel", "Weibull", "Pareto", "Multinomial", "NegativeBinomial", "MixtureNormal",
              "Normal", "Laplace", "Cauchy", "Gamma", "Beta", "Dirichlet", "Bernoulli", "BernoulliLogits",
              "Categorical", "CategoricalLogits", "StudentT", "MVNcov", "MVNtril", "LogNormal", "Poisson",
              "Binomial", "Geometric", "Exponential", "TransformedAffineExp", "RelaxedBernoulli"]


@pytest.mark.parametrize("name", GRAD_CASES)
def test_log_prob_gradients_match_torch(name):
    d_tp, v_tp, p_tp = _make(name, tp, np.float64, requires_grad=True)
    d_t, v_t, p_t = _make(name, torch, np.float64, requires_grad=True)
    d_tp.log_prob(v_tp).sum().backward()
    d_t.log_prob(v_t).sum().backward()
    for k in p_t:
        _close(p_tp[k].grad, p_t[k].grad, np.float64)


def test_expand_matches_torch():
    for name in ["Normal", "Gamma", "Bernoulli", "Categorical", "Dirichlet", "MVNcov", "Beta", "StudentT",
                 "LogNormal", "Independent", "Binomial", "OneHotCategorical", "Uniform", "Gumbel", "Weibull",
                 "Pareto", "HalfNormal", "Multinomial", "NegativeBinomial", "MixtureNormal"]:
        d_tp, _, _ = _make(name, tp, np.float64)
        d_t, _, _ = _make(name, torch, np.float64)
        shape = (2,) + tuple(d_t.batch_shape)
        e_tp, e_t = d_tp.expand(shape), d_t.expand(torch.Size(shape))
        assert tuple(e_tp.batch_shape) == tuple(e_t.batch_shape), name
        assert tuple(e_tp.sample().shape) == tuple(e_t.sample().shape), name
        v = e_t.sample()
        _close(e_tp.log_prob(tp.tensor(v.numpy())), e_t.log_prob(v), np.float64)
