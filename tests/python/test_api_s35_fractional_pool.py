"""F.fractional_max_pool2d/3d and nn.FractionalMaxPool2d/3d against PyTorch, with fixed _random_samples:
values, indices, gradients, NaN/tie choice, unbatched input, tp.compile, errors."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _np(t):
    return t.detach().cpu().numpy()


CASES_2D = [((2, 3), (5, 4), None), (3, (9, 11), None), (2, (1, 1), None), ((1, 1), (11, 13), None),
            (2, None, (0.5, 0.5)), ((3, 2), None, (0.4, 0.7))]
CASES_3D = [((2, 3, 2), (5, 4, 3), None), (2, (5, 7, 6), None), ((3, 1, 2), (2, 8, 1), None), (2, None, 0.5)]


def _compare(nd, dtype, kernel, out, ratio, shape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    batch = shape[:-nd] if len(shape) == nd + 2 else (1,) + shape[:1]
    s = rng.random(batch + (nd,)).astype(dtype)
    tpf = F.fractional_max_pool2d if nd == 2 else F.fractional_max_pool3d
    thf = TF.fractional_max_pool2d if nd == 2 else TF.fractional_max_pool3d
    xa, xb = tp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    a, ia = tpf(xa, kernel, out, ratio, return_indices=True, _random_samples=tp.tensor(s))
    b, ib = thf(xb, kernel, out, ratio, return_indices=True, _random_samples=torch.tensor(s))
    np.testing.assert_array_equal(_np(a), _np(b))
    np.testing.assert_array_equal(_np(ia), _np(ib))
    assert ia.dtype == tp.int64
    w = rng.standard_normal(tuple(a.shape)).astype(dtype)
    (a * tp.tensor(w)).sum().backward()
    (b * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(_np(xa.grad), _np(xb.grad), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kernel,out,ratio", CASES_2D)
def test_fractional_max_pool2d_matches_torch(dtype, kernel, out, ratio):
    _compare(2, dtype, kernel, out, ratio, (2, 3, 11, 13))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kernel,out,ratio", CASES_3D)
def test_fractional_max_pool3d_matches_torch(dtype, kernel, out, ratio):
    _compare(3, dtype, kernel, out, ratio, (2, 3, 7, 9, 8))


def test_unbatched_inputs():
    _compare(2, "float32", 2, (4, 5), None, (3, 9, 10), seed=1)
    _compare(3, "float64", 2, (3, 3, 3), None, (2, 6, 5, 7), seed=2)


def test_ties_nan_and_minus_inf_pick_the_reference_element():
    rng = np.random.default_rng(3)
    x = np.round(rng.standard_normal((2, 2, 9, 8))).astype("float32")  # many ties
    x[0, 0, 1, 1] = x[0, 0, 1, 2] = x[1, 1, 5, 5] = np.nan
    x[0, 1, 3:7, :] = -np.inf
    s = rng.random((2, 2, 2)).astype("float32")
    xa, xb = tp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    a, ia = F.fractional_max_pool2d(xa, 3, (4, 4), return_indices=True, _random_samples=tp.tensor(s))
    b, ib = TF.fractional_max_pool2d(xb, 3, (4, 4), return_indices=True, _random_samples=torch.tensor(s))
    np.testing.assert_array_equal(_np(a), _np(b))
    np.testing.assert_array_equal(_np(ia), _np(ib))
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_array_equal(_np(xa.grad), _np(xb.grad))


def test_modules_match_torch_and_random_samples_default():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 10, 10)).astype("float32")
    s = rng.random((2, 3, 2)).astype("float32")
    m = tp.nn.FractionalMaxPool2d(3, output_ratio=0.5, return_indices=True, _random_samples=tp.tensor(s))
    tm = torch.nn.FractionalMaxPool2d(3, output_ratio=0.5, return_indices=True, _random_samples=torch.tensor(s))
    (a, ia), (b, ib) = m(tp.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_array_equal(_np(a), _np(b))
    np.testing.assert_array_equal(_np(ia), _np(ib))
    x3 = rng.standard_normal((1, 2, 6, 6, 6)).astype("float32")
    s3 = rng.random((1, 2, 3)).astype("float32")
    a = tp.nn.FractionalMaxPool3d(2, output_size=4, _random_samples=tp.tensor(s3))(tp.tensor(x3))
    b = torch.nn.FractionalMaxPool3d(2, output_size=4, _random_samples=torch.tensor(s3))(torch.tensor(x3))
    np.testing.assert_array_equal(_np(a), _np(b))
    # without samples: random windows, but each output is the max of a window, read at its index
    y, idx = tp.nn.FractionalMaxPool2d(2, output_size=(5, 4), return_indices=True)(tp.tensor(x))
    assert tuple(y.shape) == (2, 3, 5, 4)
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, _np(idx).reshape(2, 3, -1), 2).reshape(2, 3, 5, 4),
                                  _np(y))


def test_compiled_equals_eager():
    rng = np.random.default_rng(5)
    x = tp.tensor(rng.standard_normal((2, 3, 11, 9)).astype("float32"))
    s = tp.tensor(rng.random((2, 3, 2)).astype("float32"))

    def f(x, s):
        return F.fractional_max_pool2d(x, 2, (5, 4), return_indices=True, _random_samples=s)

    ye, ie = f(x, s)
    yc, ic = tp.compile(f)(x, s)
    np.testing.assert_array_equal(_np(yc), _np(ye))
    np.testing.assert_array_equal(_np(ic), _np(ie))
    s2 = tp.tensor(rng.random((2, 3, 2)).astype("float32"))  # samples are data: a new draw, no stale windows
    np.testing.assert_array_equal(_np(tp.compile(f)(x, s2)[1]), _np(f(x, s2)[1]))


def test_errors_name_the_op_and_shapes():
    x = tp.zeros(1, 2, 8, 8)
    with pytest.raises(ValueError, match="fractional_max_pool2d requires specifying either"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(ValueError, match=r"too large for input of shape \(1, 2, 8, 8\)"):
        F.fractional_max_pool2d(x, 3, (7, 7))
    with pytest.raises(ValueError, match="expected 3D .* or 4D"):
        F.fractional_max_pool2d(tp.zeros(8, 8), 2, 4)
    with pytest.raises(ValueError, match=r"_random_samples must have shape \(1, 2, 2\)"):
        F.fractional_max_pool2d(x, 2, 4, _random_samples=tp.zeros(1, 2, 3))
    with pytest.raises(ValueError, match="output_ratio"):
        F.fractional_max_pool3d(tp.zeros(1, 1, 4, 4, 4), 2, output_ratio=1.5)
    with pytest.raises(TypeError, match="floating point"):
        F.fractional_max_pool2d(tp.zeros(1, 2, 8, 8, dtype=tp.int64), 2, 4)
    with pytest.raises(ValueError, match="FractionalMaxPool2d requires"):
        tp.nn.FractionalMaxPool2d(2)


def test_empty_batch():
    a, ia = F.fractional_max_pool2d(tp.zeros(0, 2, 8, 8), 2, 4, return_indices=True,
                                    _random_samples=tp.zeros(0, 2, 2))
    assert tuple(a.shape) == (0, 2, 4, 4) and tuple(ia.shape) == (0, 2, 4, 4)


@pytest.mark.skipif(not tp.cuda.is_available(), reason="needs CUDA")
def test_cuda_equals_cpu():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 11, 9)).astype("float32")
    s = rng.random((2, 3, 2)).astype("float32")
    xa = tp.tensor(x, device="cuda", requires_grad=True)
    a, ia = F.fractional_max_pool2d(xa, 2, (5, 4), return_indices=True, _random_samples=tp.tensor(s, device="cuda"))
    b, ib = F.fractional_max_pool2d(tp.tensor(x), 2, (5, 4), return_indices=True, _random_samples=tp.tensor(s))
    np.testing.assert_array_equal(_np(a), _np(b))
    np.testing.assert_array_equal(_np(ia), _np(ib))
    a.sum().backward()
    assert xa.grad.device.type == "cuda"
