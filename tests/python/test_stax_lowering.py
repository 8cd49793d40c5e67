"""Every lowering rule of Stax, compiled under strict_native (so a fallback
cannot hide a missing rule) and compared with eager execution.

Tolerance: elementwise results may differ by a few ulps (vectorized exp/log
vs libm); reductions follow the summation error model of Section 13.3
(error ~ sqrt(n) * u * sum|a_i|)."""
import math

import numpy as np
import pytest

import tensorplay as tp

U32 = 2.0 ** -24


def _check(fn, *args, rtol=4e-6):
    cf = tp.compile(fn, strict_native=True)
    got = cf(*args)
    ref = fn(*args)
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape, (g.shape, r.shape)
        assert g.dtype == r.dtype, (g.dtype, r.dtype)
        gn, rn = g.numpy(), r.numpy()
        if rn.dtype.kind in "biu":
            np.testing.assert_array_equal(gn, rn)
        else:
            scale = np.abs(rn[np.isfinite(rn)]).max(initial=0)
            np.testing.assert_array_equal(np.isnan(gn), np.isnan(rn))
            np.testing.assert_array_equal(np.isinf(gn) * np.sign(gn), np.isinf(rn) * np.sign(rn))
            fin = np.isfinite(rn)
            np.testing.assert_allclose(gn[fin], rn[fin], rtol=rtol, atol=rtol * (1 + scale))
    return cf


X = lambda *s: tp.randn(*s)  # noqa: E731


CASES = {
    "pointwise_chain": (lambda x, y: (x * y - x / (y.abs() + 1)).tanh().sigmoid(), (X(33, 70), X(33, 70))),
    "exp_log_sqrt": (lambda x: (x.abs() + 1).log().sqrt() + (x * 0.5).exp(), (X(5, 129),)),
    "maximum_minimum_where": (lambda x, y: tp.where(x > y, tp.maximum(x, y), tp.minimum(x, y) * 2), (X(17, 31), X(17, 31))),
    "comparisons_to_bool": (lambda x, y: (x <= y), (X(9, 40), X(9, 40))),
    "broadcast_row_col": (lambda x, r, c: x * r + c, (X(40, 64), X(64), X(40, 1))),
    "scalar_first": (lambda x: 2 - x / 3, (X(100),)),
    "transpose_input": (lambda x: (x.t() + 1).relu(), (X(48, 80),)),
    "permute_3d": (lambda x: x.permute(2, 0, 1).exp(), (X(4, 6, 8),)),
    "slice_step": (lambda x: x[1::2, ::3] * 2, (X(20, 30),)),
    "select_index": (lambda x: x[3] + x[:, 2].unsqueeze(0).t(), (X(10, 10),)),
    "expand": (lambda x: x.expand(5, 7, 3) + 1, (X(7, 1),)),
    "reshape_contiguous": (lambda x: x.reshape(6, 20).sum(-1), (X(4, 30),)),
    "reshape_of_transpose": (lambda x: x.t().reshape(-1) * 2, (X(6, 10),)),
    "sum_dim0": (lambda x: x.sum(0), (X(64, 48),)),
    "sum_middle_keepdim": (lambda x: x.sum(1, keepdim=True) * x, (X(3, 50, 7),)),
    "sum_all": (lambda x: x.sum(), (X(37, 41),)),
    "sum_two_dims": (lambda x: x.sum((0, 2)), (X(8, 5, 9),)),
    "amax_and_mean": (lambda x: x.amax(-1) + x.mean(-1), (X(12, 333),)),
    "softmax_method": (lambda x: x.softmax(-1), (X(31, 77),)),
    "softmax_dim0": (lambda x: tp.softmax(x, 0), (X(31, 7),)),
    "two_outputs": (lambda x: (x.exp(), x.sum(-1)), (X(8, 16),)),
    "output_is_input": (lambda x, y: (x, x + y), (X(4), X(4))),
    "float64": (lambda x: (x * x).sum(-1).sqrt(), (tp.randn(20, 64, dtype=tp.float64),)),
    "int64_arith": (lambda a, b: (a * b + a).sum(-1), (tp.arange(0, 60).reshape(6, 10), tp.arange(1, 61).reshape(6, 10))),
    "int_to_float_promotion": (lambda a, x: a * x + a / 2, (tp.arange(0, 24).reshape(4, 6), X(4, 6))),
    "bool_mask": (lambda m, x: tp.where(m, x, -x), (tp.randn(5, 9) > 0, X(5, 9))),
    "to_dtype": (lambda x: x.double() * 3, (X(7, 5),)),
    "zero_dim_tensor_arg": (lambda x, s: x * s, (X(6, 6), tp.tensor(3.0))),
    "vector_tail_lengths": (lambda x: (x * 2).sum(-1), (X(3, 1000),)),
    "long_1d_chunked": (lambda x: (x * 2 + 1).exp(), (X(300000),)),
    "full_sum_chunked": (lambda x: (x * x).sum(), (X(1000, 1000),)),
    "full_amax_chunked": (lambda x: x.amax() + x.mean(), (X(300001),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_matches_eager(name):
    fn, args = CASES[name]
    _check(fn, *args, rtol=2e-5)


def test_sum_follows_the_summation_error_model():
    # Row sums of n positive terms: compiled and eager differ by rounding only,
    # within a few standard deviations of the statistical model (Corollary 13.1).
    n = 4096
    x = tp.rand(64, n)
    cf = tp.compile(lambda x: x.sum(-1), strict_native=True)
    got, ref = cf(x).numpy().astype(np.float64), x.numpy().astype(np.float64).sum(-1)
    bound = 6 * math.sqrt(n) * U32 * np.abs(x.numpy()).sum(-1)
    assert np.all(np.abs(got - ref) <= bound)


def test_special_values_propagate():
    x = tp.tensor([[float("nan"), 1.0, float("inf"), -float("inf"), -0.0, 2.0] * 6])
    for fn in (lambda x: x.relu(), lambda x: x.exp(), lambda x: tp.maximum(x, x * 0),
               lambda x: x.amax(-1), lambda x: x.abs().log()):
        _check(fn, x)


def test_generated_source_is_readable_and_vectorized_for_the_host():
    cf = tp.compile(lambda x, w: ((x + w).relu() * 2).sum(-1), strict_native=True)
    cf(tp.randn(64, 128), tp.randn(64, 128))
    src = cf.last_source
    assert "#include" not in src
    assert 'extern "C" void tp_entry' in src
    assert "add, relu, mul, sum" in src  # the operators as a comment
    assert "red0_v3" in src  # several vector accumulators
    if tp.compiler.host_isa() in ("avx512", "avx2"):
        assert "vector_size(" + ("64" if tp.compiler.host_isa() == "avx512" else "32") in src


def test_forcing_a_lower_isa_changes_the_cache_key(tmp_path):
    import subprocess
    import sys
    code = ("import tensorplay as tp\n"
            "cf = tp.compile(lambda x: (x*2).sum(-1), strict_native=True)\n"
            "x = tp.randn(4, 64)\n"
            "print(abs(cf(x) - (x*2).sum(-1)).amax().item(), tp.compiler.metrics.cache_misses)\n")
    env = dict(__import__("os").environ, TP_CACHE_DIR=str(tmp_path))
    outs = []
    for isa in ("scalar", None):
        e = dict(env)
        if isa:
            e["TP_STAX_ISA"] = isa
        else:
            e.pop("TP_STAX_ISA", None)
        r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.split())
    assert float(outs[0][0]) < 1e-3 and float(outs[1][0]) < 1e-3
    assert outs[0][1] == "1" and outs[1][1] == "1"  # both compiled: different keys
    keys = [p for p in tmp_path.glob("*/*") if p.is_dir()]
    assert len(keys) == (1 if tp.compiler.host_isa() == "scalar" else 2)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0,)])
def test_zero_size_inputs(shape):
    x = tp.randn(*shape)
    _check(lambda x: (x * 2).exp(), x)
    _check(lambda x: x.sum(-1), x)
    _check(lambda x: x.reshape(-1) + 1, x)
    if len(shape) == 2:
        _check(lambda x: x.t().exp() * x.sum(1).unsqueeze(0), x)


def test_compiled_function_called_inside_another_is_inlined():
    inner = tp.compile(lambda x: x.exp() * 2, strict_native=True)
    outer = tp.compile(lambda x: inner(x).sum(-1), strict_native=True)
    x = tp.randn(4, 32)
    tp.testing.assert_close(outer(x), (x.exp() * 2).sum(-1), terms=x.exp() * 2)
    # A second call with new data must not see the first call's values baked in.
    y = tp.randn(4, 32)
    tp.testing.assert_close(outer(y), (y.exp() * 2).sum(-1), terms=y.exp() * 2)
    assert "const" not in tp.compiler.capture(lambda x: inner(x).sum(-1), x).code


def test_keyword_arguments_and_defaults_bind_like_python():
    cf = tp.compile(lambda a, b=2.0: a * b, strict_native=True)
    x = tp.ones(3)
    assert cf(x).tolist() == [2.0, 2.0, 2.0]
    assert cf(x, b=3.0).tolist() == [3.0, 3.0, 3.0]
    assert cf(b=4.0, a=x).tolist() == [4.0, 4.0, 4.0]
    with pytest.raises(TypeError, match="unexpected keyword"):
        cf(x, c=1)
    with pytest.raises(TypeError, match="missing"):
        cf()


def test_add_sub_alpha_and_div_rounding_mode_are_lowered():
    # Regression: the lowering used to ignore alpha and rounding_mode (wrong results).
    x, y = tp.randn(64, 33), tp.randn(64, 33)
    _check(lambda a, b: tp.add(a, b, alpha=2) + tp.sub(a, b, alpha=-0.5), x, y)
    # Float floor division is generated (it was an extern call of div's
    # kernel; specials: test_cuda_small_ints.py).
    f = lambda a, b: tp.div(a, b, rounding_mode="floor")  # noqa: E731
    cf = tp.compile(f, strict_native=True)
    np.testing.assert_array_equal(cf(x, y).numpy(), f(x, y).numpy())
    assert "// extern" not in cf.last_source
