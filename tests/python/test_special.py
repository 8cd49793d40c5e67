"""tp.special and the special functions lgamma/digamma/polygamma/i0/i1 against torch.special
(values and gradients), finite-difference gradchecks, and the edge values PyTorch defines."""
import math

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")

X = np.concatenate([np.linspace(-7.7, 40, 97), [0.5, 1.0, 2.0, 1e-3, 100.3, -0.5, 1e-8]])
POS = np.concatenate([np.linspace(0.05, 30, 60), [1e-3, 0.5, 1.0, 2.0, 100.3]])


def _rel(a, b):
    return np.nanmax(np.abs(a - b) / np.maximum(1.0, np.abs(b)))


CASES = [
    ("lgamma", lambda x: tp.lgamma(x), lambda x: torch.lgamma(x), X),
    ("special.gammaln", lambda x: tp.special.gammaln(x), lambda x: torch.special.gammaln(x), X),
    ("digamma", lambda x: tp.digamma(x), lambda x: torch.digamma(x), X),
    ("special.psi", lambda x: tp.special.psi(x), lambda x: torch.special.psi(x), POS),
    ("polygamma1", lambda x: tp.polygamma(1, x), lambda x: torch.polygamma(1, x), POS),
    ("polygamma2", lambda x: tp.special.polygamma(2, x), lambda x: torch.special.polygamma(2, x), POS),
    ("polygamma3", lambda x: tp.polygamma(3, x), lambda x: torch.polygamma(3, x), X),
    ("i0", lambda x: tp.i0(x), lambda x: torch.i0(x), np.linspace(-40, 40, 101)),
    ("special.i1", lambda x: tp.special.i1(x), lambda x: torch.special.i1(x), np.linspace(-40, 40, 101)),
    ("sinc", lambda x: tp.special.sinc(x), lambda x: torch.special.sinc(x), np.linspace(-3, 3, 13)),
    ("ndtr", lambda x: tp.special.ndtr(x), lambda x: torch.special.ndtr(x), np.linspace(-5, 5, 21)),
    ("expit", lambda x: tp.special.expit(x), lambda x: torch.special.expit(x), np.linspace(-5, 5, 21)),
]


@pytest.mark.parametrize("name,f,g,x", CASES, ids=[c[0] for c in CASES])
def test_values_and_grads_match_torch(name, f, g, x):
    a = tp.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    r, tr = f(a), g(t)
    # torch's own trigamma is off by ~1e-9 relative near 0.5 (mpmath agrees with us: below)
    assert _rel(r.detach().numpy(), tr.detach().numpy()) < 1e-8
    r.sum().backward()
    tr.sum().backward()
    assert _rel(a.grad.numpy(), t.grad.numpy()) < 1e-8


@pytest.mark.parametrize("fn", [tp.lgamma, tp.digamma, lambda x: tp.polygamma(2, x), tp.i0, tp.special.i1])
def test_gradcheck(fn):
    x = tp.tensor([0.3, 1.7, 4.2, 11.0], dtype=tp.float64, requires_grad=True)
    assert tp.autograd.gradcheck(fn, (x,))
    assert tp.autograd.gradgradcheck(fn, (x,))


def test_i1_grad_at_zero_is_half():
    x = tp.tensor([0.0], dtype=tp.float64, requires_grad=True)
    tp.special.i1(x).sum().backward()
    assert x.grad.item() == 0.5


def test_edge_values_and_dtypes():
    assert tp.digamma(tp.tensor([0.0, -1.0])).tolist()[0] == -math.inf
    assert math.isnan(tp.digamma(tp.tensor([-1.0])).item())
    assert tp.lgamma(tp.tensor([0.0])).item() == math.inf
    assert tp.lgamma(tp.tensor([1, 2, 3])).dtype == tp.float32  # integers -> float32, as torch
    np.testing.assert_allclose(tp.lgamma(tp.tensor([1, 2, 5])).numpy(), [0, 0, math.log(24)], atol=1e-6)
    assert tp.i0(tp.tensor([1.0], dtype=tp.float32)).dtype == tp.float32
    with pytest.raises(ValueError, match="polygamma.*non-negative"):
        tp.polygamma(-1, tp.tensor([1.0]))


def test_composed_aliases():
    a = np.array([2.5, 3.0, 7.25])
    np.testing.assert_allclose(tp.special.multigammaln(tp.tensor(a), 3).numpy(),
                               torch.special.multigammaln(torch.tensor(a), 3).numpy(), atol=1e-12)
    x, y = np.array([0.0, 1.0, 2.0]), np.array([-1.0, 0.5, np.nan])
    np.testing.assert_array_equal(np.isnan(tp.special.xlog1py(tp.tensor(x), tp.tensor(y)).numpy()), [False, False, True])
    np.testing.assert_allclose(tp.special.xlog1py(tp.tensor(x), tp.tensor(y)).numpy()[:2], [0.0, math.log(1.5)])
    e = np.array([-1.0, 0.0, 0.5, 2.0])
    np.testing.assert_allclose(tp.special.entr(tp.tensor(e)).numpy(), torch.special.entr(torch.tensor(e)).numpy())
    s = tp.tensor([0.0], requires_grad=True)
    tp.special.sinc(s).sum().backward()
    assert s.grad.item() == 0.0  # not NaN at the removable singularity
    assert set(tp.special.__all__) <= set(dir(torch.special))


def test_compiled_matches_eager():
    def f(x):
        return tp.lgamma(x) + tp.digamma(x) * 2 + tp.i0(x)

    x = tp.tensor(POS[:10])
    np.testing.assert_allclose(tp.compile(f, fullgraph=False)(x).numpy(), f(x).numpy(), rtol=1e-12)


def test_polygamma_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    for n in (1, 2, 4):
        for x in (0.0123, 0.5576271186440678, 3.3, 19.9, 57.0, -2.5):
            want = float(mpmath.psi(n, x))
            got = tp.polygamma(n, tp.tensor([x], dtype=tp.float64)).item()
            assert abs(got - want) <= 1e-13 * max(1.0, abs(want)), (n, x, got, want)
    for x in (0.0123, 0.5, 3.3, -2.5, 57.0):
        assert abs(tp.digamma(tp.tensor([x], dtype=tp.float64)).item() - float(mpmath.digamma(x))) < 1e-13 * max(
            1.0, abs(float(mpmath.digamma(x))))
        assert abs(tp.i0(tp.tensor([x], dtype=tp.float64)).item() - float(mpmath.besseli(0, x))) < 1e-13 * float(
            mpmath.besseli(0, x))


# ---- polygamma / digamma for x < 0: the reflection formula (bounded cost) ----

def _neg_grid():
    rng = np.random.default_rng(7)
    return np.concatenate([-rng.uniform(0, 60, 200), -10 ** rng.uniform(-6, 2.5, 100), -np.arange(0.5, 40, 1.0),
                           [-1e-8, -0.999999, -3.0000001, -2.9999999, -137.25]])


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 12])
def test_polygamma_negative_against_mpmath(n):
    # The error is measured against the larger of the two reflection terms: even n
    # cross zero between poles, where no method keeps a relative error.
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    x = _neg_grid()
    got = tp.polygamma(n, tp.tensor(x, dtype=tp.float64)).numpy()
    for xi, gi in zip(x, got):
        want = mpmath.polygamma(n, mpmath.mpf(xi))
        scale = abs(want) + abs(mpmath.polygamma(n, 1 - mpmath.mpf(xi)))
        # 1e-13: the x > 0 series itself (psi^(12)(19.5) is 3.7e-14 off; same before the reflection)
        assert abs(gi - float(want)) <= 1e-13 * float(scale), (n, xi, gi, float(want))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_polygamma_negative_against_torch(n):
    # torch sums the series term by term (n >= 2) or takes sin(pi x) of the unreduced x
    # (n = 1): its error is relative to the nearest pole's term n!/d^(n+1), so that is the
    # scale here (at the half-integers of even n torch is 1e-8 off where mpmath agrees with
    # us to 1e-13: test_polygamma_negative_against_mpmath).
    x = _neg_grid()
    x = x[np.abs(x - np.round(x)) > 1e-3]
    got = tp.polygamma(n, tp.tensor(x, dtype=tp.float64)).numpy()
    want = torch.polygamma(n, torch.tensor(x, dtype=torch.float64)).numpy()
    pole_term = math.factorial(n) / np.abs(x - np.round(x)) ** (n + 1)
    assert np.all(np.abs(got - want) <= 1e-9 * (np.abs(want) + pole_term)), n
    # float32 is computed in double and rounded once (torch's float32 loses 1e-3 near poles)
    x32 = tp.tensor(x, dtype=tp.float32)
    np.testing.assert_array_equal(tp.polygamma(n, x32).numpy(),
                                  tp.polygamma(n, x32.double()).float().numpy())


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_polygamma_special_values_match_torch(n):
    # -inf: NaN for n = 1 (torch's trigamma), (-1)^(n+1) inf otherwise (torch's zeta pole);
    # poles 0, -0, negative integers: the same signed infinity (torch's n = 1 rounds sin(pi x)
    # at negative integers into ~1e32 there; the pole is +inf); NaN stays NaN.
    x = [-math.inf, 0.0, -0.0, math.nan] + ([-1.0, -2.0, -7.0, -1e20] if n > 1 else [])
    got = tp.polygamma(n, tp.tensor(x, dtype=tp.float64)).numpy()
    want = torch.polygamma(n, torch.tensor(x, dtype=torch.float64)).numpy()
    np.testing.assert_array_equal(got, want)
    if n == 1:
        assert tp.polygamma(1, tp.tensor([-1.0, -2.0, -1e20], dtype=tp.float64)).tolist() == [math.inf] * 3


def test_polygamma_huge_negative_returns():
    # The Hurwitz-zeta recurrence used to take |x| steps for x < 0 (x = -1e12 + 0.5 hung on
    # both devices); run in a subprocess so a regression fails instead of hanging the suite.
    import subprocess
    import sys
    code = ("import tensorplay as tp\n"
            "x = tp.tensor([-1e12 + 0.5, -1e15 - 0.25, -4503599627370495.5, -1e300], dtype=tp.float64)\n"
            "for n in (1, 2, 3, 6, 161, 200):\n"
            "    print(n, tp.polygamma(n, x).tolist())\n"
            "print('d', tp.digamma(x).tolist())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = {ln.split(" ", 1)[0]: eval(ln.split(" ", 1)[1], {"inf": math.inf, "nan": math.nan})
            for ln in r.stdout.splitlines()}
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 160
    # mpmath's own polygamma loops over |x| too: the reference is the reflection identity in
    # 160 digits (the numerical derivative is ~1e-96 off at 100 digits, where psi^(6) is 1e-92), with mpmath's cot and its numerical n-th derivative (not our polynomials).
    for n in (1, 2, 3, 6):
        for xi, gi in zip([-1e12 + 0.5, -1e15 - 0.25, -4503599627370495.5], rows[str(n)][:3]):
            x = mpmath.mpf(xi)
            mirror = (-1) ** n * mpmath.polygamma(n, 1 - x)
            r = x - mpmath.nint(x)  # cot has period pi: differentiate where the steps are exact
            want = mirror - mpmath.pi ** (n + 1) * mpmath.diff(mpmath.cot, mpmath.pi * r, n)
            scale = abs(want) + abs(mirror)
            assert abs(gi - float(want)) <= 1e-14 * float(scale), (n, xi, gi, float(want))
        assert rows[str(n)][3] == (math.inf if n % 2 else -math.inf)  # an integer: a pole
    assert rows["161"][0] == math.inf  # n! 2^(n+1) past the largest double
    for xi, gi in zip([-1e12 + 0.5, -1e15 - 0.25, -4503599627370495.5], rows["d"][:3]):
        x = mpmath.mpf(xi)
        want = float(mpmath.digamma(1 - x) - mpmath.pi * mpmath.cot(mpmath.pi * x))
        assert abs(gi - want) <= 1e-14 * abs(want), (xi, gi, want)


# ---- polygamma at +-inf and NaN: torch's values for every order ----

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma_at_infinities_and_nan_matches_torch(n, dtype):
    # torch: psi(inf) = inf, psi'(inf) = 0, psi^(n)(inf) = NaN for n >= 2 (we gave 0),
    # -inf: NaN for n <= 1, (-1)^(n+1) inf after; NaN stays NaN.
    x = [math.inf, -math.inf, math.nan]
    want = torch.polygamma(n, torch.tensor(x, dtype=getattr(torch, dtype))).numpy()
    got = tp.polygamma(n, tp.tensor(x, dtype=getattr(tp, dtype))).numpy()
    np.testing.assert_array_equal(got, want)
    # Generated code (Stax) uses the same algorithm source.
    cf = tp.compile(lambda t: tp.special.polygamma(n, t) * 1.0, fullgraph=False)
    np.testing.assert_array_equal(cf(tp.tensor(x, dtype=getattr(tp, dtype))).numpy(), want)


@pytest.mark.skipif(not tp.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma_at_infinities_and_nan_matches_torch_cuda(n):
    x = [math.inf, -math.inf, math.nan]
    want = torch.polygamma(n, torch.tensor(x, dtype=torch.float32)).numpy()
    got = tp.polygamma(n, tp.tensor(x, device="cuda")).cpu().numpy()
    np.testing.assert_array_equal(got, want)
