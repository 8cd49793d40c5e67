"""tp.compile end to end: results against eager under the summation error model
(Section 13.3), the three levels of reuse (first-level entry, specialization
cache, content-addressed disk cache), recompiles, backends, fallback and
strict_native, gradients through compiled code, and the debugging environment
variables."""

import json
import math
import os
import re
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorplay as tp
from compile_check import assert_compiled_matches_eager

U32 = 2.0**-24
U64 = 2.0**-53
METRICS = (
    "generated_kernel_count",
    "compile_count",
    "cache_hits",
    "cache_misses",
    "fallback_count",
    "recompiles",
    "first_level_hits",
    "specialization_hits",
)

EXAMPLE_1_1_SRC = "f = lambda x, w: ((x + w).relu() * 2).sum(-1)"
example_1_1 = lambda x, w: ((x + w).relu() * 2).sum(-1)  # noqa: E731  (Example 1.1, as users write it)


def softmax5(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


# ----------------------------------------------------------------- helpers


def metric(name):
    return int(getattr(tp.compiler.metrics, name))


def snapshot():
    return {n: metric(n) for n in METRICS}


def delta(before):
    now = snapshot()
    return {n: now[n] - before[n] for n in METRICS}


def values(t):
    return np.array(t.contiguous().numpy(), dtype=np.float64, copy=True)


def assert_rowsum_close(got, expected, terms, u=U32, k=4.0):
    """Row sums agree within the statistical summation error model: for a row of
    n terms a_i, |E| <~ k sqrt(n) u sum|a_i| (that is, a relative tolerance
    k sqrt(n) u times the condition number sum|a| / |sum a|)."""
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    terms = np.asarray(terms, np.float64)
    assert got.shape == expected.shape == terms.shape[:-1], (got.shape, expected.shape, terms.shape)
    n = terms.shape[-1]
    tol = k * math.sqrt(n) * u * np.abs(terms).sum(-1)
    bad = np.abs(got - expected) > tol
    assert not bad.any(), (
        f"{bad.sum()} rows outside k sqrt(n) u sum|a|: max diff {np.abs(got - expected).max():.3g}, "
        f"tol there {tol[bad].min():.3g}"
    )


def example_1_1_terms(x, w):
    return 2.0 * np.maximum(values(x) + values(w), 0.0)


def check_example_1_1(y, x, w, u=U32):
    """Compares y with Example 1.1 evaluated in float64 by NumPy."""
    terms = example_1_1_terms(x, w)
    assert y.shape == tuple(terms.shape[:-1])
    assert_rowsum_close(values(y), terms.sum(-1), terms, u=u)


def check_softmax(y, x, u=U32):
    a = values(x)
    e = np.exp(a - a.max(-1, keepdims=True))
    ref = e / e.sum(-1, keepdims=True)
    n = a.shape[-1]
    # e > 0: the row sum has condition 1; exp and the division add a few ulps.
    np.testing.assert_allclose(values(y), ref, rtol=4 * math.sqrt(n) * u + 16 * u, atol=0)


def run_python(script, env=None, timeout=180):
    """Runs a script in a NEW interpreter with this process's environment
    (so the same TP_CACHE_DIR); returns (returncode, stdout, stderr)."""
    env = dict(os.environ if env is None else env)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True, timeout=timeout
    )
    return proc.returncode, proc.stdout, proc.stderr


CHILD_EXAMPLE_1_1 = f"""
import json
import numpy as np
import tensorplay as tp
{EXAMPLE_1_1_SRC}
x, w = tp.randn(64, 128), tp.randn(64, 128)
cf = tp.compile(f)
y = cf(x, w)
e = f(x, w)
m = tp.compiler.metrics
print("RESULT " + json.dumps({{
    "metrics": {{n: int(getattr(m, n)) for n in {METRICS!r}}},
    "max_diff": float(np.abs(y.numpy().astype(np.float64) - e.numpy().astype(np.float64)).max()),
    "row_sum_scale": float(np.abs(e.numpy()).max()),
}}))
"""


def parse_result(stdout):
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError("child printed no RESULT line:\n" + stdout)


def cache_keys(cache_dir):
    """Key directories of the content-addressed cache: <2 hex>/<64 hex>/."""
    keys = []
    if not cache_dir.exists():
        return keys
    for prefix in cache_dir.iterdir():
        if prefix.is_dir() and re.fullmatch(r"[0-9a-f]{2}", prefix.name):
            for key in prefix.iterdir():
                if key.is_dir() and re.fullmatch(r"[0-9a-f]{64}", key.name):
                    keys.append(key)
    return keys


# ----------------------------------------------------- Example 1.1 correctness


@pytest.mark.parametrize("shape", [(64, 128), (8, 2048), (3, 5), (1, 1)])
def test_example_1_1_matches_eager_and_numpy(shape):
    x, w = tp.randn(*shape), tp.randn(*shape)
    cf = tp.compile(example_1_1)
    y = cf(x, w)
    e = example_1_1(x, w)
    assert y.shape == e.shape == (shape[0],)
    assert y.dtype == tp.float32
    assert_rowsum_close(values(y), values(e), example_1_1_terms(x, w))
    check_example_1_1(y, x, w)


def test_example_1_1_strict_native_generates_exactly_one_kernel():
    x, w = tp.randn(64, 128), tp.randn(64, 128)
    cf = tp.compile(example_1_1, strict_native=True)
    before = snapshot()
    y = cf(x, w)
    d = delta(before)
    assert d["generated_kernel_count"] == 1
    assert d["compile_count"] == 1
    assert d["fallback_count"] == 0
    assert d["recompiles"] == 0
    check_example_1_1(y, x, w)


def test_decorator_forms():
    @tp.compile
    def f1(x, w):
        return ((x + w).relu() * 2).sum(-1)

    @tp.compile(strict_native=True)
    def f2(x, w):
        return ((x + w).relu() * 2).sum(-1)

    x, w = tp.randn(4, 8), tp.randn(4, 8)
    check_example_1_1(f1(x, w), x, w)
    check_example_1_1(f2(x, w), x, w)


def test_softmax_compiled_matches_eager():
    x = tp.randn(32, 100) * 3
    cf = tp.compile(softmax5, strict_native=True)
    y = cf(x)
    e = softmax5(x)
    assert y.shape == (32, 100)
    check_softmax(y, x)
    # Compiled vs eager: the tolerance follows the spread of eager around float64.
    tp.testing.assert_close(y, e, reference=softmax5(x.double()))


def test_softmax_rows_not_multiple_of_vector_width():
    x = tp.randn(7, 1000)
    check_softmax(tp.compile(softmax5, strict_native=True)(x), x)


# --------------------------------------------------------- the disk cache


def test_cache_dir_has_one_key_with_source_and_shared_object(cache_dir):
    x, w = tp.randn(64, 128), tp.randn(64, 128)
    tp.compile(example_1_1, strict_native=True)(x, w)
    keys = cache_keys(cache_dir)
    assert len(keys) == 1, [str(k) for k in keys]
    key = keys[0]
    assert key.name[:2] == key.parent.name
    cpp = key / "kernel.cpp"
    so = key / "kernel.so"
    assert cpp.is_file() and so.is_file()
    assert 'extern "C"' in cpp.read_text()
    assert so.stat().st_size > 0
    assert metric("cache_misses") >= 1


def test_cache_dir_created_with_mode_0700(cache_dir):
    assert not cache_dir.exists()
    tp.compile(example_1_1)(tp.randn(4, 8), tp.randn(4, 8))
    assert cache_dir.is_dir()
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700


def test_nested_cache_dir_is_created(tmp_path, monkeypatch):
    deep = tmp_path / "a" / "b" / "cache"
    monkeypatch.setenv("TP_CACHE_DIR", str(deep))
    tp.compiler.reset()
    x, w = tp.randn(4, 8), tp.randn(4, 8)
    check_example_1_1(tp.compile(example_1_1)(x, w), x, w)
    assert len(cache_keys(deep)) >= 1
    assert stat.S_IMODE(deep.stat().st_mode) == 0o700


def test_reset_clears_metrics_and_memory_caches_but_not_disk():
    x, w = tp.randn(16, 32), tp.randn(16, 32)
    cf = tp.compile(example_1_1)
    cf(x, w)
    assert metric("compile_count") >= 1
    tp.compiler.reset()
    assert all(metric(n) == 0 for n in METRICS), snapshot()
    y = cf(x, w)  # in-process caches are gone: compiles again, artifact from disk
    assert metric("compile_count") == 1
    assert metric("cache_hits") >= 1
    assert metric("cache_misses") == 0
    check_example_1_1(y, x, w)


def test_second_process_hits_the_disk_cache(cache_dir):
    ns = {}
    exec(EXAMPLE_1_1_SRC, ns)
    x, w = tp.randn(64, 128), tp.randn(64, 128)
    tp.compile(ns["f"])(x, w)
    assert metric("cache_misses") >= 1
    rc, out, err = run_python(CHILD_EXAMPLE_1_1)
    assert rc == 0, err
    r = parse_result(out)
    assert r["metrics"]["cache_hits"] >= 1, r
    assert r["metrics"]["cache_misses"] == 0, r
    assert r["max_diff"] <= 4 * math.sqrt(128) * U32 * r["row_sum_scale"] * 2


def test_cold_process_then_warm_process(cache_dir):
    rc, out, err = run_python(CHILD_EXAMPLE_1_1)
    assert rc == 0, err
    cold = parse_result(out)["metrics"]
    rc, out, err = run_python(CHILD_EXAMPLE_1_1)
    assert rc == 0, err
    warm = parse_result(out)["metrics"]
    assert cold["cache_misses"] >= 1 and cold["generated_kernel_count"] >= 1
    assert warm["cache_hits"] >= 1 and warm["cache_misses"] == 0


def test_unwritable_cache_dir_warns_and_still_works(tmp_path, monkeypatch):
    blocker = tmp_path / "a_regular_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TP_CACHE_DIR", str(blocker / "cache"))
    tp.compiler.reset()
    x, w = tp.randn(8, 16), tp.randn(8, 16)
    with pytest.warns(Warning, match="(?i)cache"):
        y = tp.compile(example_1_1)(x, w)
    check_example_1_1(y, x, w)
    assert blocker.read_text() == "not a directory"


# ------------------------------------------------ in-process reuse and guards


def test_second_call_same_tensors_uses_first_level_entry():
    x, w = tp.randn(16, 32), tp.randn(16, 32)
    cf = tp.compile(example_1_1)
    y1 = cf(x, w)
    before = snapshot()
    y2 = cf(x, w)
    d = delta(before)
    assert d["first_level_hits"] == 1
    assert d["compile_count"] == 0 and d["generated_kernel_count"] == 0 and d["recompiles"] == 0
    np.testing.assert_array_equal(values(y1), values(y2))


def test_new_tensors_same_shapes_use_specialization_cache():
    cf = tp.compile(example_1_1)
    cf(tp.randn(16, 32), tp.randn(16, 32))
    x, w = tp.randn(16, 32), tp.randn(16, 32)
    before = snapshot()
    y = cf(x, w)
    d = delta(before)
    assert d["specialization_hits"] == 1
    assert d["first_level_hits"] == 0
    assert d["compile_count"] == 0 and d["recompiles"] == 0
    check_example_1_1(y, x, w)


def test_different_shape_recompiles():
    cf = tp.compile(example_1_1)
    cf(tp.randn(16, 32), tp.randn(16, 32))
    x, w = tp.randn(8, 48), tp.randn(8, 48)
    before = snapshot()
    y = cf(x, w)
    d = delta(before)
    assert d["compile_count"] == 1
    assert d["recompiles"] == 1
    check_example_1_1(y, x, w)


def test_different_dtype_recompiles_and_is_correct():
    cf = tp.compile(example_1_1)
    cf(tp.randn(16, 32), tp.randn(16, 32))
    x, w = tp.randn(16, 32, dtype=tp.float64), tp.randn(16, 32, dtype=tp.float64)
    before = snapshot()
    y = cf(x, w)
    assert delta(before)["compile_count"] == 1
    assert y.dtype == tp.float64
    check_example_1_1(y, x, w, u=U64)


def test_returning_to_earlier_shape_needs_no_compile():
    cf = tp.compile(example_1_1)
    cf(tp.randn(16, 32), tp.randn(16, 32))
    cf(tp.randn(8, 48), tp.randn(8, 48))
    x, w = tp.randn(16, 32), tp.randn(16, 32)
    before = snapshot()
    y = cf(x, w)
    d = delta(before)
    assert d["compile_count"] == 0
    assert d["specialization_hits"] == 1
    check_example_1_1(y, x, w)


def test_inplace_update_between_calls_is_seen():
    x, w = tp.randn(16, 32), tp.randn(16, 32)
    cf = tp.compile(example_1_1)
    y1 = values(cf(x, w))
    x.add_(1.0)
    before = snapshot()
    y2 = cf(x, w)
    assert delta(before)["compile_count"] == 0
    check_example_1_1(y2, x, w)
    assert np.all(values(y2) > y1)  # every term grew or stayed, and rows of 32 terms grew


def test_inplace_update_through_a_view_is_seen():
    x, w = tp.randn(4, 8), tp.randn(4, 8)
    cf = tp.compile(example_1_1)
    cf(x, w)
    x[1].add_(100.0)
    y = cf(x, w)
    check_example_1_1(y, x, w)
    assert values(y)[1] > 1000.0


def test_numpy_write_between_calls_is_seen():
    x, w = tp.zeros(2, 4), tp.zeros(2, 4)
    cf = tp.compile(example_1_1)
    assert cf(x, w).tolist() == [0.0, 0.0]
    x.numpy()[0, :] = 1.0  # zero-copy write
    assert cf(x, w).tolist() == [8.0, 0.0]


def test_each_call_returns_a_fresh_output():
    x, w = tp.randn(4, 8), tp.randn(4, 8)
    cf = tp.compile(example_1_1)
    y1 = cf(x, w)
    y2 = cf(x, w)
    keep = values(y2)
    y1.add_(1000.0)
    np.testing.assert_array_equal(values(y2), keep)


def test_python_scalars_are_specialized_by_value():
    cf = tp.compile(lambda x, s: x * s + 1)
    x = tp.tensor([1.0, 2.0, 3.0])
    assert cf(x, 2.0).tolist() == [3.0, 5.0, 7.0]
    before = snapshot()
    assert cf(x, 3.0).tolist() == [4.0, 7.0, 10.0]
    d = delta(before)
    assert d["recompiles"] == 1 and d["compile_count"] == 1
    before = snapshot()
    assert cf(x, 2.0).tolist() == [3.0, 5.0, 7.0]
    assert delta(before)["compile_count"] == 0


def test_zero_dim_tensor_argument_is_dynamic():
    cf = tp.compile(lambda x, s: x * s + 1)
    x = tp.tensor([1.0, 2.0, 3.0])
    assert cf(x, tp.tensor(2.0)).tolist() == [3.0, 5.0, 7.0]
    before = snapshot()
    assert cf(x, tp.tensor(3.0)).tolist() == [4.0, 7.0, 10.0]
    assert delta(before)["compile_count"] == 0


# ------------------------------------------------------ layouts and broadcasting


def test_transposed_input_then_contiguous_input():
    cf = tp.compile(example_1_1)
    xt = tp.randn(128, 64).t()  # 64 x 128, strides (1, 64)
    w = tp.randn(64, 128)
    check_example_1_1(cf(xt, w), xt, w)
    xc = xt.contiguous()  # same shape, other strides: must not reuse the strided kernel wrongly
    check_example_1_1(cf(xc, w), xc, w)
    # Two row sums of the same terms in different orders: Section 13.3's model of their difference.
    tp.testing.assert_close(cf(xc, w), cf(xt, w), terms=example_1_1_terms(xc, w))


def test_sliced_input_with_step_and_offset():
    base = tp.randn(20, 64)
    x = base[3:19:2, 1::2]  # 8 x 32, offset and strides (128, 2)
    w = tp.randn(8, 32)
    check_example_1_1(tp.compile(example_1_1)(x, w), x, w)


@pytest.mark.parametrize("w_shape", [(128,), (1, 128), (64, 1)])
def test_broadcasting_inputs(w_shape):
    x, w = tp.randn(64, 128), tp.randn(*w_shape)
    y = tp.compile(example_1_1)(x, w)
    wb = np.broadcast_to(values(w), (64, 128))
    terms = 2.0 * np.maximum(values(x) + wb, 0.0)
    assert_rowsum_close(values(y), terms.sum(-1), terms)


def test_expanded_input_with_zero_stride():
    x = tp.randn(64, 128)
    w = tp.randn(1, 128).expand(64, 128)
    check_example_1_1(tp.compile(example_1_1)(x, w), x, w)


# ------------------------------------------------------------------ backends


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_eager_backends_match_eager(backend):
    x, w = tp.randn(16, 32), tp.randn(16, 32)
    before = snapshot()
    y = tp.compile(example_1_1, backend=backend)(x, w)
    assert delta(before)["generated_kernel_count"] == 0
    assert_rowsum_close(values(y), values(example_1_1(x, w)), example_1_1_terms(x, w))
    s = tp.compile(softmax5, backend=backend)(x)
    check_softmax(s, x)
    assert_compiled_matches_eager(example_1_1, x, w, backends=(backend,))
    assert_compiled_matches_eager(softmax5, x, backends=(backend,))


def test_callable_backend_receives_graph_and_example_inputs():
    seen = {"backend_calls": 0, "runs": 0}

    def my_backend(gm, example_inputs):
        seen["backend_calls"] += 1
        seen["code"] = gm.code
        seen["shapes"] = [tuple(t.shape) for t in example_inputs]

        def run(*args):
            seen["runs"] += 1
            return gm(*args)

        return run

    cf = tp.compile(example_1_1, backend=my_backend)
    x, w = tp.randn(8, 16), tp.randn(8, 16)
    y = cf(x, w)
    assert seen["backend_calls"] == 1 and seen["runs"] == 1
    assert seen["shapes"] == [(8, 16), (8, 16)]
    for op in ("add", "relu", "mul", "sum"):
        assert op in seen["code"], seen["code"]
    check_example_1_1(y, x, w)
    cf(x, w)
    assert seen["backend_calls"] == 1 and seen["runs"] == 2


def test_callable_backend_result_is_what_the_call_returns():
    def plus_one_backend(gm, example_inputs):
        return lambda *args: gm(*args) + 1

    x = tp.tensor([[1.0, -1.0], [2.0, 3.0]])
    y = tp.compile(lambda a: a * 2, backend=plus_one_backend)(x)
    assert y.tolist() == [[3.0, -1.0], [5.0, 7.0]]


def test_registered_backend_by_name():
    calls = []

    def counting(gm, example_inputs):
        calls.append(len(example_inputs))
        return gm

    tp.compiler.register_backend("test_counting_backend", counting)
    x = tp.tensor([1.0, 2.0])
    y = tp.compile(lambda a: a * 3, backend="test_counting_backend")(x)
    assert y.tolist() == [3.0, 6.0]
    assert calls == [1]


# ----------------------------------------------------- fallback, strict_native


def test_errors_are_runtime_error_subclasses():
    assert issubclass(tp.compiler.BackendError, RuntimeError)
    assert issubclass(tp.compiler.CaptureError, RuntimeError)


def test_strict_native_raises_backend_error_naming_an_operator_that_cannot_run_in_a_region():
    # matmul runs as an extern call inside the region now (test_stax_extern.py);
    # an operator whose result shape depends on the data cannot.
    a = tp.randn(4, 5)
    with pytest.raises(tp.compiler.BackendError, match="nonzero"):
        cf = tp.compile(lambda a: tp.nonzero(a > 0) * 2, strict_native=True)
        cf(a)


def test_default_falls_back_for_nonzero_and_is_correct():
    a = tp.randn(4, 5)
    cf = tp.compile(lambda a: tp.nonzero(a > 0) * 2, options={"warn_fallback": False})
    before = snapshot()
    y = cf(a)
    assert delta(before)["fallback_count"] >= 1
    np.testing.assert_array_equal(values(y), np.argwhere(values(a) > 0) * 2)


# ------------------------------------------------------------------ autograd


def test_compiled_call_gives_correct_gradients():
    xa = np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32)
    wa = np.random.default_rng(1).standard_normal((6, 10)).astype(np.float32)
    f = lambda x, w: ((x + w).relu() * 2).sum(-1)  # noqa: E731
    x, w = tp.tensor(xa, requires_grad=True), tp.tensor(wa, requires_grad=True)
    y = tp.compile(f)(x, w)
    assert y.requires_grad
    y.sum().backward()
    expected = np.where(xa + wa > 0, 2.0, 0.0).astype(np.float32)
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    np.testing.assert_array_equal(w.grad.numpy(), expected)


def test_compiled_gradients_match_eager_for_smooth_function():
    f = lambda x, w: (x * w).tanh().sum(-1)  # noqa: E731
    xa = np.random.default_rng(2).standard_normal((5, 7))
    wa = np.random.default_rng(3).standard_normal((5, 7))
    xe, we = tp.tensor(xa, requires_grad=True), tp.tensor(wa, requires_grad=True)
    f(xe, we).sum().backward()
    xc, wc = tp.tensor(xa, requires_grad=True), tp.tensor(wa, requires_grad=True)
    tp.compile(f)(xc, wc).sum().backward()
    np.testing.assert_allclose(values(xc.grad), values(xe.grad), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(values(wc.grad), values(we.grad), rtol=1e-12, atol=1e-14)
    assert_compiled_matches_eager(f, xe, we, rtol=1e-12, atol=1e-14)


# --------------------------------------------------------- capture and logging


def test_capture_code_names_the_operators_and_graph_is_callable():
    x, w = tp.randn(4, 8), tp.randn(4, 8)
    gm = tp.compiler.capture(example_1_1, x, w)
    code = gm.code
    assert isinstance(code, str)
    for op in ("add", "relu", "mul", "sum"):
        assert op in code, code
    out = gm(x, w)
    out = out[0] if isinstance(out, (tuple, list)) else out
    check_example_1_1(out, x, w)


@pytest.mark.parametrize("topic, expected", [("code", 'extern "C"'), ("graph", "relu")])
def test_tp_logs_prints_code_and_graph(topic, expected):
    env = dict(os.environ, TP_LOGS=topic)
    rc, out, err = run_python(
        f"""
        import tensorplay as tp
        {EXAMPLE_1_1_SRC}
        tp.compile(f)(tp.randn(4, 8), tp.randn(4, 8))
        """,
        env=env,
    )
    assert rc == 0, err
    assert expected in out + err


def test_tp_logs_recompiles_says_why():
    env = dict(os.environ, TP_LOGS="recompiles")
    rc, out, err = run_python(
        f"""
        import tensorplay as tp
        {EXAMPLE_1_1_SRC}
        cf = tp.compile(f)
        cf(tp.randn(4, 8), tp.randn(4, 8))
        cf(tp.randn(5, 8), tp.randn(5, 8))
        """,
        env=env,
    )
    assert rc == 0, err
    assert re.search(r"recompil", out + err, re.IGNORECASE), out + err


def test_tp_logs_recompiles_names_a_rebound_parameter():
    env = dict(os.environ, TP_LOGS="recompiles")
    rc, out, err = run_python(
        """
        import tensorplay as tp
        from tensorplay import nn
        lin = nn.Linear(4, 4)
        cf = tp.compile(lin)
        with tp.no_grad():
            cf(tp.randn(2, 4))
            lin.weight = nn.Parameter(tp.zeros(4, 4, dtype=tp.float64))
            try:
                cf(tp.randn(2, 4))
            except Exception:
                pass
        """,
        env=env,
    )
    assert rc == 0, err
    assert re.search(r"guard failed: self\.weight: float64\[4, 4\]", out + err), out + err


def test_lower_debug_names_the_operator_that_could_not_be_lowered():
    env = dict(os.environ, TP_STAX_LOWER_DEBUG="1")
    rc, out, err = run_python(
        """
        import tensorplay as tp
        cf = tp.compile(lambda a: tp.nonzero(a > 0) * 2)
        cf(tp.randn(4, 5))
        """,
        env=env,
    )
    assert rc == 0, err
    assert "nonzero" in out + err


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "int32", "uint8"])
def test_narrow_dtypes_compile_natively_with_the_same_result(dtype):
    # CPU generated kernels take every integer and the 16-bit floats (before:
    # an eager fallback); small integers, exact in every one of them.
    dt = getattr(tp, dtype)
    x = tp.arange(12).reshape(3, 4).to(dt)
    tp.compiler.reset()
    got = tp.compile(lambda a: a * 2 + 1, strict_native=True)(x)
    want = x * 2 + 1
    assert got.dtype == want.dtype == dt
    assert got.float().numpy().tolist() == want.float().numpy().tolist()
    assert tp.compiler.metrics.fallback_count == 0


@pytest.mark.parametrize("backend", ["eager", "stax"])
def test_multi_result_operators_are_captured_with_getitem_nodes(backend):
    # max.dim, chunk and layer_norm return several tensors (or use an op that does).
    import tensorplay.nn.functional as F

    w, b = tp.randn(6), tp.randn(6)

    def f(x):
        a, c = x.chunk(2, dim=1)
        v, i = x.max(1)
        return F.layer_norm(x, (6,), w, b) + 1, a * c, v, i

    x = tp.randn(4, 6)
    got, want = tp.compile(f, backend=backend)(x), f(x)
    for g, e in zip(got, want):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, atol=1e-6)
    code = tp.compiler.capture(f, x).code
    assert re.search(r"getitem_1 = max_dim\[1\]  # int64\[4\]", code), code
    assert_compiled_matches_eager(f, x, backends=(backend,), params=[])


def test_module_with_layernorm_and_mlp_compiles_and_trains_like_eager():
    nn = tp.nn
    tp.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 1))
    x = tp.randn(5, 8)
    cm = tp.compile(m)
    np.testing.assert_allclose(cm(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert_compiled_matches_eager(m, x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["eager", "stax"])
def test_absent_optional_tensor_arguments_are_captured_as_none(backend):
    # Regression: an omitted Tensor? argument (conv bias, loss weight, layer_norm
    # weight) used to crash the tracer; it is a None argument of the node.
    import tensorplay.nn.functional as F

    x, w, t = tp.randn(2, 3, 8, 8), tp.randn(4, 3, 3, 3), tp.tensor([0, 1])

    def f(x, w):
        y = F.conv2d(x, w)
        return F.layer_norm(y, (6,)), F.cross_entropy(y.flatten(1)[:, :5], t)

    got, want = tp.compile(f, backend=backend)(x, w), f(x, w)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-5)
    assert "conv2d(arg0, arg1, None" in tp.compiler.capture(f, x, w).code
    assert_compiled_matches_eager(f, x, w, backends=(backend,), rtol=1e-5, atol=1e-5)
