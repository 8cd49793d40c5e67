"""tp.testing.assert_close: dtype defaults, and tolerances that follow the
summation error model of Section 13.3 when the summed terms or an exact
reference are given."""

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.bench import errormodel


def _sequential_sum_f32(x):
    """Row sums in float32, one accumulator, left to right: a different rounding
    order from NumPy's pairwise float32 sum."""
    acc = np.zeros(x.shape[0], dtype=np.float32)
    for j in range(x.shape[1]):
        acc = (acc + x[:, j]).astype(np.float32)
    return acc


def _ill_conditioned_rows(rows=64, n=2048, seed=0):
    """Section 13.3's ill-conditioned case: N(0, 1) terms (scaled by 100), each row
    shifted so its exact sum nearly cancels."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, n)) * 100.0
    x -= x.mean(-1, keepdims=True)  # exact sums ~ 0: kappa huge
    x[:, 0] += rng.uniform(1e-3, 1e-2, rows)  # tiny nonzero sums
    return x.astype(np.float32)


def test_fixed_epsilon_rejects_but_model_accepts_ill_conditioned_sums():
    x = _ill_conditioned_rows()
    a = tp.tensor(x).sum(-1)  # TensorPlay's vectorized reduction
    e = tp.tensor(x.sum(-1))  # NumPy's pairwise float32 sum: another correct rounding order
    # both are ordinary rounding of the same sums, yet relative differences are huge
    diff = np.abs(a.numpy().astype(np.float64) - e.numpy().astype(np.float64))
    assert diff.max() > 1e-4
    with pytest.raises(AssertionError, match="differ beyond the tolerance"):
        tp.testing.assert_close(a, e)  # dtype defaults: 1e-5 + 1.3e-6 |e|
    tp.testing.assert_close(a, e, terms=tp.tensor(x))  # scaled by the model: passes
    tp.testing.assert_close(a, e, terms=x)  # NumPy terms work the same way
    _, kappa = tp.testing.summation_tolerance(x)
    assert kappa.max() > 1e5


def test_sequential_sum_needs_one_accumulator_in_the_model():
    # A left-to-right float32 sum has W = 1: its error is sqrt(16) times larger
    # than a 16-way sum's, and the model must be told (ways=1).
    x = _ill_conditioned_rows(seed=4)
    a = tp.tensor(x).sum(-1)
    e = tp.tensor(_sequential_sum_f32(x))
    tp.testing.assert_close(a, e, terms=x, ways=1)


def test_reference_mode_accepts_ill_conditioned_sums():
    x = _ill_conditioned_rows(seed=1)
    a = tp.tensor(x).sum(-1)
    e = tp.tensor(_sequential_sum_f32(x))  # the reference mode needs no W: it measures e's spread
    exact = x.astype(np.float64).sum(-1)
    tp.testing.assert_close(a, e, reference=exact)


def test_planted_error_in_well_conditioned_sum_is_rejected():
    rng = np.random.default_rng(2)
    x = rng.uniform(0.0, 1.0, (256, 2048)).astype(np.float32)  # kappa = 1
    a = tp.tensor(x).sum(-1).numpy()
    e = x.sum(-1)
    tp.testing.assert_close(a, e, terms=x)  # correct: passes
    bad = a.copy()
    bad[17] *= 1.0 + 1e-3  # one element off by 1e-3 relative
    with pytest.raises(AssertionError) as info:
        tp.testing.assert_close(bad, e, terms=x)
    text = str(info.value)
    assert "1 of 256 elements" in text
    assert "index (17,)" in text
    assert "kappa" in text and "n = 2048" in text and "W = 16" in text
    # the same planted error against an exact reference is rejected too
    with pytest.raises(AssertionError):
        tp.testing.assert_close(bad, e, reference=x.astype(np.float64).sum(-1))


def test_model_tolerance_matches_corollary_13_1():
    # one row of 2048 terms with mean 0.5 and variance 1/12 (exactly, by construction)
    n = 2048
    row = np.where(np.arange(n) % 2 == 0, 0.5 - np.sqrt(1 / 12), 0.5 + np.sqrt(1 / 12))
    tol, kappa = tp.testing.summation_tolerance(row[None, :], "float32", ways=16)
    u = 2.0**-24
    var = u * u / 3 * (n**3 * 0.25 / (3 * 256) + n**2 / 12 / 32 + 2 * n**2 * 0.25 + n / 12 * 4)
    z = 1.0 + 1.0  # one result: z_R = 1, plus the margin of 1
    assert tol[0] == pytest.approx(z * np.sqrt(2.0) * np.sqrt(var), rel=1e-12)
    assert kappa[0] == pytest.approx(1.0)


def test_dtype_defaults_and_overrides():
    x = tp.tensor([1.0, 2.0, 3.0])
    tp.testing.assert_close(x, x + 5e-6)  # within atol 1e-5
    with pytest.raises(AssertionError):
        tp.testing.assert_close(x, x + 1e-3)
    tp.testing.assert_close(x, x + 1e-3, atol=2e-3, rtol=0)
    d = tp.tensor([1.0, 2.0], dtype=tp.float64)
    with pytest.raises(AssertionError):
        tp.testing.assert_close(d, d + 1e-6)  # float64 is tighter
    i = tp.tensor([1, 2, 3])
    tp.testing.assert_close(i, tp.tensor([1, 2, 3]))
    with pytest.raises(AssertionError, match="1 of 3 elements"):
        tp.testing.assert_close(i, tp.tensor([1, 2, 4]))


def test_shape_and_dtype_mismatch_messages():
    with pytest.raises(AssertionError, match=r"shape mismatch: actual \(2, 3\) vs expected \(3, 2\)"):
        tp.testing.assert_close(tp.zeros(2, 3), tp.zeros(3, 2))
    with pytest.raises(AssertionError, match="dtype mismatch: actual float32 vs expected float64"):
        tp.testing.assert_close(tp.zeros(2), tp.zeros(2, dtype=tp.float64))
    tp.testing.assert_close(tp.zeros(2), tp.zeros(2, dtype=tp.float64), check_dtype=False)
    with pytest.raises(AssertionError, match=r"terms of shape \(4, 8\) reduced over dim -1 give results of shape"):
        tp.testing.assert_close(tp.zeros(3), tp.zeros(3), terms=np.zeros((4, 8)))


def test_nan_and_inf():
    nan, inf = float("nan"), float("inf")
    with pytest.raises(AssertionError, match="NaN"):
        tp.testing.assert_close(tp.tensor([nan, 1.0]), tp.tensor([nan, 1.0]))
    tp.testing.assert_close(tp.tensor([nan, 1.0]), tp.tensor([nan, 1.0]), equal_nan=True)
    with pytest.raises(AssertionError):
        tp.testing.assert_close(tp.tensor([nan]), tp.tensor([1.0]), equal_nan=True)
    tp.testing.assert_close(tp.tensor([inf, -inf]), tp.tensor([inf, -inf]))
    with pytest.raises(AssertionError):
        tp.testing.assert_close(tp.tensor([inf]), tp.tensor([-inf]))


def test_compiled_reduction_against_eager_with_terms():
    """The use the helper is for: a compiled reduction against eager on inputs
    whose rows cancel (the fixed epsilon would flag a compiler bug that is not)."""
    x = tp.tensor(_ill_conditioned_rows(rows=32, seed=3))
    f = lambda t: t.sum(-1)  # noqa: E731
    cf = tp.compile(f, strict_native=True)
    tp.testing.assert_close(cf(x), f(x), terms=x)


def test_msg_prefix_and_non_tensor_input():
    with pytest.raises(AssertionError, match="^my check: assert_close"):
        tp.testing.assert_close(np.float32(1.0), np.float32(2.0), msg="my check")
    with pytest.raises(TypeError, match="not a tensor"):
        tp.testing.assert_close(object(), 1.0)


def test_unit_roundoff_names():
    assert errormodel.unit_roundoff(tp.float32) == 2.0**-24
    assert errormodel.unit_roundoff("float64") == 2.0**-53
    assert errormodel.unit_roundoff(np.dtype("float16")) == 2.0**-11
    with pytest.raises(ValueError, match="not a floating dtype"):
        errormodel.unit_roundoff("int64")
