"""Finite-difference gradient checks shared by the operator test files.

The output is reduced to a scalar with fixed random weights W, L = sum(f(x) * W),
so one backward covers the whole vector-Jacobian product (not only the sum of
the Jacobian's rows). Analytic gradients come from L.backward(); numerical ones
from (L(x + eps e_j) - L(x - eps e_j)) / 2 eps per element, in float64 under
no_grad. (tp.autograd.gradcheck is the library's own tool; these tests keep an
independent implementation so that a bug there cannot hide one here.)"""
import numpy as np

import tensorplay as tp


def _as_f64(t):
    return np.array(t.contiguous().numpy(), dtype=np.float64)


def check_gradients(fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-7):
    """Asserts fn's gradients w.r.t. every array; returns the analytic gradients."""
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    out_shape = tuple(fn(*[tp.tensor(a) for a in arrays]).shape)
    weights = np.random.default_rng(99).standard_normal(out_shape)

    def loss(arrs):
        with tp.no_grad():
            return float(np.sum(_as_f64(fn(*[tp.tensor(a) for a in arrs])) * weights))

    leaves = [tp.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*leaves)
    assert out.requires_grad, "the output does not require grad: is a derivative formula missing?"
    (out * tp.tensor(weights)).sum().backward()
    grads = []
    for i, a in enumerate(arrays):
        assert leaves[i].grad is not None, f"input {i} got no gradient"
        analytic = _as_f64(leaves[i].grad)
        assert analytic.shape == a.shape, f"grad of input {i}: shape {analytic.shape} vs {a.shape}"
        numeric = np.zeros_like(a)
        flat = a.reshape(-1)
        for j in range(flat.size):
            saved = flat[j]
            flat[j] = saved + eps
            plus = loss(arrays)
            flat[j] = saved - eps
            minus = loss(arrays)
            flat[j] = saved
            numeric.reshape(-1)[j] = (plus - minus) / (2 * eps)
        np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")
        grads.append(analytic)
    return grads
