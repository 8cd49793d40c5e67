"""The tp.special functions added in batch 3 (csrc/ops/special_bessel_ops.cpp, special_binary_ops.cpp)
against PyTorch on float32 and float64 over wide ranges and edge values, against mpmath where PyTorch's own
values are less accurate, with gradients where PyTorch has them, and under tp.compile."""
import math

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().cpu().numpy()


EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-300, -1e-300, 1e300, -1e300, 1e-320]
WIDE = np.concatenate([np.linspace(-60, 60, 4801), np.geomspace(1e-8, 1e6, 400), -np.geomspace(1e-8, 1e6, 200),
                       EDGES])

# name -> (rtol, atol) against PyTorch in float64. PyTorch's J/Y are accurate to only ~1e-6 near x = 5
# (measured against mpmath below), so they are compared loosely here and tightly against mpmath.
UNARY = {
    "bessel_j0": (2e-6, 2e-6), "bessel_j1": (2e-6, 2e-6), "bessel_y0": (2e-6, 2e-6), "bessel_y1": (2e-6, 2e-6),
    "modified_bessel_i0": (1e-13, 0), "modified_bessel_i1": (1e-13, 0),
    "modified_bessel_k0": (1e-13, 1e-300), "modified_bessel_k1": (1e-13, 1e-300),
    "scaled_modified_bessel_k0": (1e-13, 0), "scaled_modified_bessel_k1": (1e-13, 0),
    "spherical_bessel_j0": (1e-14, 1e-300), "i0e": (1e-14, 0), "i1e": (1e-14, 0), "erfcx": (1e-13, 0),
    "log_ndtr": (1e-13, 0),
}


def _compare(a, b, rtol, atol, x):
    bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    assert not bad.any(), f"{bad.sum()} differ, e.g. x={x[bad][:4]}: got {a[bad][:4]}, torch {b[bad][:4]}"


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float64_matches_torch(name):
    rtol, atol = UNARY[name]
    x = WIDE
    if name.startswith(("modified_bessel_k", "scaled_modified")):
        x = x[x != 1e-320]  # PyTorch returns inf/NaN for K at subnormals; the true K0(1e-320) is 736.3
    if name.startswith("bessel_"):
        x = x[~np.isinf(x)]  # at +-inf these give the limit 0, PyTorch NaN (test_unary_edge_values)
    a = _np(getattr(tp.special, name)(tp.tensor(x)))
    b = getattr(torch.special, name)(torch.tensor(x)).numpy()
    _compare(a, b, rtol, atol, x)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float32_matches_torch(name):
    x = np.linspace(-30, 30, 1201).astype("float32")
    y = getattr(tp.special, name)(tp.tensor(x))
    assert y.dtype == tp.float32
    b = getattr(torch.special, name)(torch.tensor(x)).numpy()
    _compare(_np(y), b, 2e-5, 2e-6, x)


def test_ndtri_matches_torch():
    p = np.concatenate([np.linspace(0, 1, 20001), np.geomspace(1e-300, 0.5, 500), 1 - np.geomspace(1e-16, 0.5, 100),
                        [-1.0, 2.0, math.nan, math.inf, 5e-324]])
    _compare(_np(tp.special.ndtri(tp.tensor(p))), torch.special.ndtri(torch.tensor(p)).numpy(), 1e-13, 1e-16, p)
    q = np.linspace(0, 1, 1001).astype("float32")
    _compare(_np(tp.special.ndtri(tp.tensor(q))), torch.special.ndtri(torch.tensor(q)).numpy(), 1e-5, 1e-6, q)


def test_bessel_j_y_accuracy_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    x = np.concatenate([np.linspace(0.01, 60, 601), np.geomspace(1e-6, 1e5, 80)])
    funcs = {"bessel_j0": lambda v: mpmath.besselj(0, v), "bessel_j1": lambda v: mpmath.besselj(1, v),
             "bessel_y0": lambda v: mpmath.bessely(0, v), "bessel_y1": lambda v: mpmath.bessely(1, v),
             "modified_bessel_k0": lambda v: mpmath.besselk(0, v), "modified_bessel_k1": lambda v: mpmath.besselk(1, v)}
    x = x[x < 700]  # K underflows past ~700
    envelope = np.maximum(1e-300, np.minimum(1, 1 / np.sqrt(x)))
    for name, f in funcs.items():
        got = _np(getattr(tp.special, name)(tp.tensor(x)))
        want = np.array([float(f(mpmath.mpf(float(v)))) for v in x])
        scale = np.abs(want) if "modified" in name else np.maximum(np.abs(want), envelope)
        err = np.abs(got - want) / scale
        assert err.max() < 1e-13, (name, err.max(), x[err.argmax()])


def test_airy_ai_against_mpmath_and_torch():
    mpmath = pytest.importorskip("mpmath")
    x = np.concatenate([np.linspace(-60, 30, 451), [-12.0001, -11.9999, 0.9999, 1.0001, 0.0, 100.0]])
    got = _np(tp.special.airy_ai(tp.tensor(x)))
    want = np.array([float(mpmath.airyai(mpmath.mpf(float(v)))) for v in x])
    envelope = np.where(x < 0, np.abs(x) ** -0.25 / math.sqrt(math.pi), np.abs(want))  # oscillation amplitude
    # 1e-12: for x < 0 the phase zeta = 2/3 |x|^1.5 (310 at x = -60) carries its own rounding, ulp(zeta)
    assert (np.abs(got - want) / np.maximum(envelope, 1e-300)).max() < 1e-12
    # PyTorch's float64 Ai is off by up to 6e-6 near x = -2
    _compare(got, torch.special.airy_ai(torch.tensor(x)).numpy(), 1e-5, 1e-5, x)
    f32 = np.linspace(-20, 20, 401).astype("float32")
    _compare(_np(tp.special.airy_ai(tp.tensor(f32))), torch.special.airy_ai(torch.tensor(f32)).numpy(), 2e-5, 2e-6,
             f32)
    # +-inf: the limit 0 (PyTorch gives NaN)
    np.testing.assert_array_equal(_np(tp.special.airy_ai(tp.tensor([math.inf, -math.inf, math.nan]))),
                                  [0, 0, math.nan])


def test_unary_edge_values():
    s = tp.special
    inf, nan = math.inf, math.nan
    x = tp.tensor([0.0, -1.0, inf, -inf, nan], dtype=tp.float64)
    np.testing.assert_array_equal(_np(s.bessel_y0(x)), [-inf, nan, 0, nan, nan])
    # the smallest subnormal: Y0 = (2/pi)(log(x/2) + gamma) = -473.999..., Y1 overflows to -inf
    np.testing.assert_allclose(_np(s.bessel_y0(tp.tensor([5e-324], dtype=tp.float64))), [-473.99907342], rtol=1e-9)
    assert _np(s.bessel_y1(tp.tensor([5e-324], dtype=tp.float64)))[0] == -inf
    np.testing.assert_array_equal(_np(s.bessel_y1(x)), [-inf, nan, 0, nan, nan])
    np.testing.assert_array_equal(_np(s.bessel_j0(x)), [1, _np(s.bessel_j0(tp.tensor([1.0], dtype=tp.float64)))[0],
                                                        0, 0, nan])
    np.testing.assert_array_equal(_np(s.modified_bessel_k0(x)), [inf, nan, 0, nan, nan])
    np.testing.assert_array_equal(_np(s.erfcx(x))[[0, 2, 4]], [1, 0, nan])
    assert _np(s.erfcx(tp.tensor([-30.0], dtype=tp.float64)))[0] == inf
    np.testing.assert_array_equal(_np(s.log_ndtr(tp.tensor([inf, -inf], dtype=tp.float64))), [0, -inf])
    np.testing.assert_array_equal(_np(s.ndtri(tp.tensor([0.0, 1.0, -0.5], dtype=tp.float64))), [-inf, inf, nan])
    assert s.bessel_j0(tp.tensor([1, 2])).dtype == tp.float32  # integers compute in float32, as in PyTorch


@pytest.mark.parametrize("name", ["i0e", "i1e", "erfcx", "log_ndtr", "ndtri"])
def test_unary_gradients_match_torch(name):
    x = np.array([-7.5, -1.2, -0.3, 0.0, 0.4, 2.5, 9.0, 40.0])
    if name == "ndtri":
        x = np.array([1e-10, 0.01, 0.3, 0.5, 0.77, 0.999])
    a = tp.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    (ga,) = tp.autograd.grad(getattr(tp.special, name)(a).sum(), [a])
    (gb,) = torch.autograd.grad(getattr(torch.special, name)(b).sum(), b)
    np.testing.assert_allclose(_np(ga), gb.numpy(), rtol=1e-12, atol=1e-300)


def test_bessel_functions_are_not_differentiable_as_in_torch():
    x = tp.tensor([0.5, 1.5], dtype=tp.float64, requires_grad=True)
    for name in ["bessel_j0", "bessel_y1", "modified_bessel_k0", "spherical_bessel_j0"]:
        assert not getattr(tp.special, name)(x).requires_grad
        assert not getattr(torch.special, name)(torch.tensor([0.5], requires_grad=True)).requires_grad


POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
         "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
         "legendre_polynomial_p"]


@pytest.mark.parametrize("name", POLYS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_polynomials_match_torch(name, dtype):
    # NaN x is left out: PyTorch's values there are not NaN for some degrees (finite numbers from its
    # closed forms); these give 0 for n < 0, 1 for n = 0 and NaN otherwise
    xs = np.concatenate([np.linspace(-1.5, 1.5, 61), [-1, 1, 0, 0.5, math.inf, -math.inf]])
    if dtype == "float64":  # float32: PyTorch's float recurrence overflows to inf - inf = NaN, these round to inf
        xs = np.concatenate([xs, [3, -4, 10.0]])
    ns = np.array([-2, -1, 0, 1, 2, 3, 5, 7, 8, 9, 10, 15, 25, 40], dtype=dtype)
    x, n = np.meshgrid(xs.astype(dtype), ns)
    a = _np(getattr(tp.special, name)(tp.tensor(x), tp.tensor(n)))
    b = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n)).numpy()
    rtol, atol = (1e-9, 1e-12) if dtype == "float64" else (2e-4, 1e-5)
    _compare(a, b, rtol, atol, x)
    nan_x = _np(getattr(tp.special, name)(tp.tensor([math.nan] * 3), tp.tensor([-1.0, 0.0, 3.0])))
    np.testing.assert_array_equal(nan_x, [0, 1, math.nan])


def test_polynomials_broadcast_and_scalar_degree():
    x = np.linspace(-1, 1, 7)
    a = _np(tp.special.legendre_polynomial_p(tp.tensor(x), 3))
    b = torch.special.legendre_polynomial_p(torch.tensor(x), 3).numpy()
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    xs = tp.tensor(x).reshape(7, 1)
    ns = tp.tensor([0.0, 1.0, 2.0, 3.0])
    assert tuple(tp.special.hermite_polynomial_h(xs, ns).shape) == (7, 4)


def test_zeta_matches_torch_and_limits():
    z = np.array([1, 1.5, 2, 3, 4.5, 10, 50, 0.5, math.nan])
    q = np.array([1, 0.5, 2, 10, 100, -1, -1.5, -2.5, 0, math.inf, 1e-5, math.nan])
    zz, qq = np.meshgrid(z, q)
    a = _np(tp.special.zeta(tp.tensor(zz), tp.tensor(qq)))
    b = torch.special.zeta(torch.tensor(zz), torch.tensor(qq)).numpy()
    _compare(a, b, 1e-12, 0, zz)
    # x = inf: the limits (PyTorch's series gives NaN)
    np.testing.assert_array_equal(_np(tp.special.zeta(tp.tensor([math.inf] * 3), tp.tensor([1.0, 2.0, 0.5]))),
                                  [1, 0, math.inf])
    assert tp.special.zeta(2.0, tp.tensor([1.0], dtype=tp.float64)).item() == pytest.approx(math.pi ** 2 / 6, rel=1e-15)
    np.testing.assert_allclose(_np(tp.special.zeta(tp.tensor([2.0, 3.0], dtype=tp.float32), 1.0)),
                               torch.special.zeta(torch.tensor([2.0, 3.0]), 1.0).numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma_matches_torch(name):
    av = np.array([0, 1e-3, 0.5, 1, 2.5, 10, 50, 100, -1, math.inf, math.nan])
    xv = np.array([0, 1e-3, 0.5, 1, 2, 5, 10, 30, 99, 150, math.inf, -1, math.nan])
    a, x = np.meshgrid(av, xv)
    got = _np(getattr(tp.special, name)(tp.tensor(a), tp.tensor(x)))
    want = getattr(torch.special, name)(torch.tensor(a), torch.tensor(x)).numpy()
    # PyTorch is off by 2e-10 at a = x = 100 (these are exact there against mpmath: checked below)
    _compare(got, want, 1e-9, 1e-15, a)
    f32 = _np(getattr(tp.special, name)(tp.tensor(a.astype("float32")), tp.tensor(x.astype("float32"))))
    _compare(f32, want.astype("float32"), 1e-5, 1e-6, a)


def test_incomplete_gamma_accuracy_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    for a, x in [(100.0, 100.0), (0.5, 3.0), (30.0, 20.0), (7.0, 40.0)]:
        want = float(mpmath.gammainc(a, 0, x, regularized=True))
        got = tp.special.gammainc(tp.tensor([a], dtype=tp.float64), tp.tensor([x], dtype=tp.float64)).item()
        assert got == pytest.approx(want, rel=1e-13)


def test_incomplete_gamma_gradient_in_x_and_error_in_a():
    a = np.array([0.5, 2.0, 7.0])
    x = np.array([0.3, 2.5, 9.0])
    for name in ["gammainc", "gammaincc"]:
        tx = tp.tensor(x, requires_grad=True)
        bx = torch.tensor(x, requires_grad=True)
        (ga,) = tp.autograd.grad(getattr(tp.special, name)(tp.tensor(a), tx).sum(), [tx])
        (gb,) = torch.autograd.grad(getattr(torch.special, name)(torch.tensor(a), bx).sum(), bx)
        np.testing.assert_allclose(_np(ga), gb.numpy(), rtol=1e-12)
        ta = tp.tensor(a, requires_grad=True)
        with pytest.raises(NotImplementedError, match=f"{name}: the derivative with respect to the first"):
            getattr(tp.special, name)(ta, tp.tensor(x)).sum().backward()


def test_compiled_equals_eager():
    x = tp.tensor(np.linspace(0.1, 20, 64))
    n = tp.tensor(np.arange(64, dtype="float64") % 9)

    def f(x, n):
        s = tp.special
        return (s.bessel_j0(x) + s.bessel_y1(x) * s.i1e(x) + s.erfcx(x) + s.log_ndtr(-x)
                + s.chebyshev_polynomial_t(x / 20, n) + s.gammainc(x, n + 1) + s.zeta(x + 1, n + 1) * 2)

    np.testing.assert_array_equal(_np(tp.compile(f)(x, n)), _np(f(x, n)))


def test_bad_input_errors_name_the_op():
    with pytest.raises(TypeError, match="special.bessel_j0: expected a Tensor"):
        tp.special.bessel_j0([1.0, 2.0])
    with pytest.raises(TypeError, match="special.zeta: expected at least one Tensor"):
        tp.special.zeta(2.0, 1.0)
    with pytest.raises(ValueError, match="special_gammainc"):
        tp.special.gammainc(tp.ones(3), tp.ones(4))
    with pytest.raises(TypeError, match="special.hermite_polynomial_h: n must be a Tensor or a real number"):
        tp.special.hermite_polynomial_h(tp.ones(3), "2")


@pytest.mark.skipif(not tp.cuda.is_available(), reason="needs CUDA")
def test_cuda_gives_the_cpu_results():
    x = np.concatenate([np.linspace(-20, 20, 81), [0.0, math.inf, math.nan]])
    p = np.linspace(0, 1, 41)
    for name in sorted(UNARY) + ["ndtri", "airy_ai"]:
        v = p if name == "ndtri" else x
        for dt in (tp.float32, tp.float64):
            cpu = getattr(tp.special, name)(tp.tensor(v, dtype=dt))
            gpu = getattr(tp.special, name)(tp.tensor(v, dtype=dt, device="cuda"))
            assert gpu.device.type == "cuda"
            np.testing.assert_array_equal(_np(gpu), _np(cpu), err_msg=name)
    n = tp.tensor(np.arange(84) % 12, dtype=tp.float64)
    for name in POLYS + ["zeta", "gammainc", "gammaincc"]:
        a = tp.tensor(np.abs(x) + 1 if name in ("zeta", "gammainc", "gammaincc") else x / 20)
        cpu = getattr(tp.special, name)(a, n)
        gpu = getattr(tp.special, name)(a.to("cuda"), n.to("cuda"))
        np.testing.assert_array_equal(_np(gpu), _np(cpu), err_msg=name)
    xg = tp.tensor([0.5, -2.0, 3.0], dtype=tp.float64, device="cuda", requires_grad=True)
    (g,) = tp.autograd.grad(tp.special.erfcx(xg).sum(), [xg])
    assert g.device.type == "cuda"
    mpmath = pytest.importorskip("mpmath")
    exact = [float(2 * mpmath.mpf(v) * mpmath.exp(mpmath.mpf(v) ** 2) * mpmath.erfc(v) - 2 / mpmath.sqrt(mpmath.pi))
             for v in (0.5, -2.0, 3.0)]
    np.testing.assert_allclose(_np(g), exact, rtol=1e-12)


def test_forward_mode_tangents_equal_the_reverse_gradients():
    import tensorplay.autograd.forward_ad as fwAD
    x = np.array([-2.0, -0.3, 0.0, 0.7, 3.0])
    p = np.array([1e-8, 0.02, 0.3, 0.5, 0.9])
    for name in ["i0e", "i1e", "erfcx", "log_ndtr", "ndtri"]:
        v = p if name == "ndtri" else x
        xr = tp.tensor(v, requires_grad=True)
        (g,) = tp.autograd.grad(getattr(tp.special, name)(xr).sum(), [xr])
        with fwAD.dual_level():
            out = getattr(tp.special, name)(fwAD.make_dual(tp.tensor(v), tp.ones(5, dtype=tp.float64)))
            np.testing.assert_allclose(_np(fwAD.unpack_dual(out).tangent), _np(g), rtol=1e-14, err_msg=name)
    a = tp.tensor([0.5, 2.0, 7.0, 3.0, 1.0])
    xr = tp.tensor([0.3, 2.5, 9.0, 1.0, 4.0], dtype=tp.float64, requires_grad=True)
    (g,) = tp.autograd.grad(tp.special.gammaincc(a.double(), xr).sum(), [xr])
    with fwAD.dual_level():
        out = tp.special.gammaincc(a.double(), fwAD.make_dual(xr.detach(), tp.ones(5, dtype=tp.float64)))
        np.testing.assert_allclose(_np(fwAD.unpack_dual(out).tangent), _np(g), rtol=1e-14)
        with pytest.raises(NotImplementedError, match="first argument"):
            tp.special.gammainc(fwAD.make_dual(a.double(), tp.ones(5, dtype=tp.float64)), xr.detach())
