"""Whole-tensor reductions split across threads (issue 10).

A compiled `f(x).mean()` is one kernel of two loop nests (the sum over every
element with f fused into it, then the division); such a kernel used to run on
one thread. Now each long nest of a kernel over one outer iteration is split
into chunks across threads (KernelPlan::phased): a reduction keeps one partial
result per chunk and combines them in a fixed pairwise tree, the chunks a
function of the extent alone, so the result is the same bits at every thread
count and in every call (eager's reductions split by the thread count instead).
The results are checked against float64 NumPy within the error model (a float32
sum of n terms cascaded in blocks: a few ulps of sum|term|), against eager, and
bitwise across calls and thread counts. Compiled with strict_native=True: a
fallback to eager would fail."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

N_BIG = 3 * 65536 + 77  # odd: three grains and a ragged end, not a whole number of vectors


@pytest.fixture(autouse=True)
def _restore_threads():
    n = tp.get_num_threads()
    yield
    tp.set_num_threads(n)


def _f64(x):
    return x.numpy().astype(np.float64)


def _gelu64(a):
    from math import erfc
    v = np.vectorize(lambda t: 0.5 * t * erfc(-t / np.sqrt(2.0)))
    return v(a)


# name -> (compiled function, float64 reference, magnitude for the error bound)
CASES = {
    "sum": (lambda x: (x * x + 1.0).sum(), lambda a: (a * a + 1.0).sum(), lambda a: np.abs(a * a + 1.0).sum()),
    "mean_gelu": (lambda x: F.gelu(x).mean(), lambda a: _gelu64(a).mean(), lambda a: np.abs(_gelu64(a)).mean()),
    "amax": (lambda x: (x.exp() - 1.0).amax(), lambda a: (np.exp(a) - 1.0).max(), lambda a: np.abs(np.exp(a)).max()),
    # two split reductions in one kernel, the second reading the first's result
    "centered_mean": (lambda x: ((x - x.mean()) ** 2).mean(), lambda a: ((a - a.mean()) ** 2).mean(),
                      lambda a: (a * a).mean() + a.mean() ** 2),
    "var": (lambda x: x.sin().var(), lambda a: np.sin(a).var(ddof=1), lambda a: (np.sin(a) ** 2).mean()),
}


def _compiled(fn, **opts):
    return tp.compile(fn, strict_native=True, options=opts) if opts else tp.compile(fn, strict_native=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_whole_tensor_reduction_matches_float64_and_eager_at_1_2_3_threads(name):
    fn, ref, mag = CASES[name]
    x = tp.randn(N_BIG) * 2.0
    a = _f64(x)
    want, scale = ref(a), mag(a)
    cf = _compiled(fn)
    got = {}
    for nt in (1, 2, 3):
        tp.set_num_threads(nt)
        r1, r2 = cf(x), cf(x)
        assert r1.numpy().tobytes() == r2.numpy().tobytes(), (name, nt)  # bitwise equal between calls
        got[nt] = r1.numpy()
        # float32 terms, cascaded sums: within a few ulps of the magnitude
        assert abs(float(got[nt]) - want) <= 4e-6 * scale + 1e-30, (name, nt, float(got[nt]), want)
        e = fn(x).numpy()
        assert abs(float(got[nt]) - float(e)) <= 8e-6 * scale + 1e-30, (name, nt, float(got[nt]), float(e))
    # the chunks depend on the size alone: the same bits at every thread count
    assert got[1].tobytes() == got[2].tobytes() == got[3].tobytes(), (name, got)


def test_mean_of_fused_pointwise_runs_split_across_threads():
    # gelu(x).mean(): the sum nest is split (a parallel loop over fixed chunks,
    # partials combined afterwards), the division runs once after it.
    x = tp.randn(4096, 1024)
    cf = _compiled(lambda x: F.gelu(x).mean())
    cf(x)
    src = cf.last_source
    kernel = src[src.index("static void "):src.index("extern \"C\"")]
    assert kernel.count("#pragma omp parallel for") == 1, kernel
    assert "_part[" in kernel, kernel
    # A/B: the option keeps the old single-threaded kernel
    off = _compiled(lambda x: F.gelu(x).mean(), stax_split_phases="0")
    r_off = off(x)
    kernel_off = off.last_source[off.last_source.index("static void "):]
    assert "#pragma omp parallel" not in kernel_off.split("extern \"C\"")[0]
    np.testing.assert_allclose(cf(x).numpy(), r_off.numpy(), rtol=2e-6)


def test_whole_tensor_softmax_splits_every_phase():
    # amax, then sum(exp(x - m)), then the division written over every element:
    # three long nests of one kernel, each split (two reductions, one pointwise).
    def f(x):
        e = (x - x.amax()).exp()
        return e / e.sum()

    x = tp.randn(5 * 65536 + 3)
    cf = _compiled(f)
    for nt in (1, 2, 3):
        tp.set_num_threads(nt)
        out = cf(x)
        a = _f64(x)
        w = np.exp(a - a.max())
        np.testing.assert_allclose(_f64(out), w / w.sum(), rtol=2e-6, atol=1e-12)
    src = cf.last_source
    assert src[src.index("static void "):].count("#pragma omp parallel for") >= 3, src


@pytest.mark.parametrize("n", [10, 1000, 65535])
def test_tiny_whole_tensor_reductions_start_no_threads(n):
    x = tp.randn(n)
    cf = _compiled(lambda x: F.gelu(x).mean() + (x * x).sum())
    tp.set_num_threads(3)
    got = cf(x)
    a = _f64(x)
    want = _gelu64(a).mean() + (a * a).sum()
    assert abs(float(got) - want) <= 4e-6 * (np.abs(_gelu64(a)).mean() + (a * a).sum()), (float(got), want)
    src = cf.last_source
    assert "#pragma omp parallel" not in src[src.index("static void "):], src  # below two grains: one thread


def test_symbolic_whole_tensor_mean_is_split_and_short_calls_stay_on_one_thread():
    cf = tp.compile(lambda x: F.gelu(x).mean(), strict_native=True, dynamic=True)
    for n in (3 * 65536 + 5, 200_000, 17):
        x = tp.randn(n)
        for nt in (1, 3):
            tp.set_num_threads(nt)
            got = cf(x)
            a = _f64(x)
            assert abs(float(got) - _gelu64(a).mean()) <= 4e-6 * np.abs(_gelu64(a)).mean() + 1e-30, (n, nt)
    kernel = cf.last_source[cf.last_source.index("static void "):]
    assert "#pragma omp parallel for schedule(dynamic, 1) if (" in kernel, kernel


@pytest.mark.parametrize("name,fn,want", [
    ("sum_nan", lambda x: (x * 2.0).sum(), "nan"),
    ("mean_inf", lambda x: (x * 2.0).mean(), "inf"),
    ("mean_inf_minus_inf", lambda x: (x * 2.0).mean(), "nan"),
    ("amax_nan", lambda x: (x + 1.0).amax(), "nan"),
    ("amax_inf", lambda x: (x + 1.0).amax(), "inf"),
])
def test_nan_and_inf_propagate_through_the_split(name, fn, want):
    a = np.random.default_rng(0).standard_normal(3 * 65536 + 11).astype(np.float32)
    at = 2 * 65536 + 5  # in a later chunk than the first
    if name.endswith("nan"):
        a[at] = np.nan
    else:
        a[at] = np.inf
        if "minus" in name:
            a[17] = -np.inf
    x = tp.from_numpy(a)
    cf = _compiled(fn)
    for nt in (1, 2, 3):
        tp.set_num_threads(nt)
        got = float(cf(x))
        e = float(fn(x))
        if want == "nan":
            assert np.isnan(got) and np.isnan(e), (name, nt, got, e)
        else:
            assert got == np.inf and e == np.inf, (name, nt, got, e)


ROW_CASES = {
    "sum": (lambda x: (x * x).sum(-1), lambda a: (a * a).sum(-1), lambda a: (a * a).sum(-1)),
    "mean_gelu": (lambda x: F.gelu(x).mean(-1), lambda a: _gelu64(a).mean(-1), lambda a: np.abs(_gelu64(a)).mean(-1)),
    "amax": (lambda x: x.exp().amax(1), lambda a: np.exp(a).max(1), lambda a: np.exp(a).max(1)),
}


@pytest.mark.parametrize("name", sorted(ROW_CASES))
@pytest.mark.parametrize("rows", [2, 3])
def test_few_long_rows_are_split_per_row(name, rows):
    # 2 or 3 outputs of 196685 elements: the outer loop alone would give one
    # row to one thread; each row is split into fixed chunks too (one parallel
    # loop over every row's chunks), the same bits at every thread count.
    fn, ref, mag = ROW_CASES[name]
    x = tp.randn(rows, N_BIG)
    a = _f64(x)
    want, scale = ref(a), mag(a)
    cf = _compiled(fn)
    got = {}
    for nt in (1, 2, 3):
        tp.set_num_threads(nt)
        r1, r2 = cf(x), cf(x)
        assert r1.numpy().tobytes() == r2.numpy().tobytes(), (name, nt)
        got[nt] = r1.numpy()
        assert np.all(np.abs(got[nt] - want) <= 4e-6 * scale), (name, nt, got[nt], want)
        assert np.all(np.abs(got[nt] - fn(x).numpy()) <= 8e-6 * scale), (name, nt)
    assert got[1].tobytes() == got[2].tobytes() == got[3].tobytes(), (name, got)
    kernel = cf.last_source[cf.last_source.index("static void "):]
    assert f"_t < {rows * ((N_BIG + 32767) // 32768)}; " in kernel, kernel  # rows x chunks in one parallel loop


def test_many_rows_keep_the_parallel_outer_loop():
    # 64 rows: enough outputs for the threads; rows are not split.
    x = tp.randn(64, 70000)
    cf = _compiled(lambda x: (x * x).sum(-1))
    np.testing.assert_allclose(_f64(cf(x)), (_f64(x) ** 2).sum(-1), rtol=2e-6)
    kernel = cf.last_source[cf.last_source.index("static void "):]
    assert "_part[" not in kernel and "#pragma omp parallel for" in kernel, kernel


@pytest.mark.parametrize("name", ["count_plus_one", "int_sum", "any", "int_amin", "float64_sum"])
def test_split_phases_of_integer_bool_and_double_reductions(name):
    # Two nests (the reduction, then a scalar op on its result): integers and
    # bools combine exactly (equal to eager at every thread count), float64
    # within a few ulps of eager and the same bits at every thread count.
    x = tp.randn(3 * 65536 + 7)
    xi = tp.from_numpy(np.random.default_rng(0).integers(-1000, 1000, 3 * 65536 + 7))
    fn, a = {
        "count_plus_one": (lambda x: (x > 0).sum() + 1, x),
        "int_sum": (lambda x: (x * 3).sum() * 2, xi),
        "any": (lambda x: (x > 0.5).any().logical_not(), x),
        "int_amin": (lambda x: (x * 2).amin() - 1, xi),
        "float64_sum": (lambda x: (x.double() * x.double()).sum() / 3, x),
    }[name]
    cf = _compiled(fn)
    got = []
    for nt in (1, 2, 3):
        tp.set_num_threads(nt)
        r = cf(a).numpy()
        got.append(r.tobytes())
        e = fn(a).numpy()
        if name == "float64_sum":
            assert abs(float(r) - float(e)) <= 1e-13 * abs(float(e)), (float(r), float(e))
        else:
            assert r.dtype == e.dtype and r.tolist() == e.tolist(), (name, nt, r, e)
    assert got[0] == got[1] == got[2], name
    kernel = cf.last_source[cf.last_source.index("static void "):]
    assert kernel.count("#pragma omp parallel for") == 1, kernel


def test_nests_with_several_loops_split_their_first_loop():
    # A whole-tensor sum whose loads keep two loops (a transposed read does not
    # merge into one) is split over chunks of its first loop; a pointwise output
    # with two loops in the same kernel (x.t() - mean) runs its first loop in
    # parallel. Same bits at every thread count; values against float64.
    def f(x):
        s = (x.t() * x.t()).sum()
        return s, x.t() - x.mean()

    x = tp.randn(300, 1000)
    a = _f64(x)
    cf = _compiled(f)
    got = []
    for nt in (1, 2, 3):
        tp.set_num_threads(nt)
        s, y = cf(x)
        got.append((s.numpy().tobytes(), y.numpy().tobytes()))
        assert abs(float(s) - (a * a).sum()) <= 4e-6 * (a * a).sum(), (nt, float(s))
        np.testing.assert_allclose(_f64(y), a.T - a.mean(), rtol=1e-6, atol=1e-6)
    assert got[0] == got[1] == got[2]
    kernels = cf.last_source[cf.last_source.index("static void "):]
    assert "_part[" in kernels and kernels.count("#pragma omp parallel for") >= 2, kernels
