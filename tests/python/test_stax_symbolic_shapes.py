"""Dynamic shapes in the Stax backend (issue 11): one compiled region valid for
every size of its symbols. The front end is not needed: the test hook
`_testing_stax_symbolic` captures a function at distinctive sizes (37, 53,
61, ...), marks every size equal to one of them as a symbol, compiles the
symbolic graph once and calls that region at other sizes, compared with eager
at those sizes."""

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import _C

A, B, C = 37, 53, 61  # distinctive example sizes (hints)
OTHER = [(2, 3), (3, 2), (5, 7), (97, 1031), (A, B)]


def symbolic(fn, inputs, hints):
    run, source, code, externs, _ = _C._testing_stax_symbolic(fn, inputs, hints)
    return run, source, externs


def check(fn, make, hints, sizes_list, rtol=1e-5, atol=1e-5):
    """Compile fn on make(*hints) with the hints symbolic; compare with eager at every sizes."""
    run, source, externs = symbolic(fn, make(*hints), list(hints))
    assert "tp_size0" in source  # the kernels read the sizes at run time
    for sizes in sizes_list:
        inputs = make(*sizes)
        got = run(inputs)
        want = fn(*inputs)
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert tuple(g.shape) == tuple(w.shape), (sizes, g.shape, w.shape)
            assert g.dtype == w.dtype
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol, err_msg=str(sizes))
    return source, externs


def mat(r, c):
    return [tp.randn(r, c)]


# --- pointwise and broadcasting -------------------------------------------------

def test_example_1_1_both_dims_symbolic_is_one_generated_kernel():
    f = lambda x, w: ((x + w).relu() * 2).sum(-1)
    source, externs = check(f, lambda r, c: [tp.randn(r, c), tp.randn(c)], (A, B), OTHER)
    assert externs == 0


def test_symbolic_row_sum_prints_its_body_once_and_is_exact_across_blocks():
    # A symbolic row may be longer than one cascade block (4096 floats with
    # AVX-512), so its sum is blocked; the blocks go serially into a double
    # total, so the body is printed once (as in the static kernel), not once
    # for a one-block branch and once for the cascade (2x the C++ compile).
    f = lambda x, w: ((x + w).relu() * 2).sum(-1)
    make = lambda r, c: [tp.randn(r, c), tp.randn(c)]
    _, static_source, _, _, _ = _C._testing_stax_symbolic(f, make(A, B), [])
    run, source, externs = symbolic(f, make(A, B), [A, B])
    assert externs == 0
    assert source.count("tp_relu(") == static_source.count("tp_relu(")
    for r, c in [(3, 2), (2, 4095), (3, 4096), (2, 4097), (2, 3 * 4096 + 5), (2, 100003)]:
        x, w = make(r, c)
        got = run([x, w])[0].numpy()
        want = (np.maximum(x.numpy().astype(np.float64) + w.numpy(), 0) * 2).sum(-1)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-4, err_msg=str((r, c)))


def test_pointwise_family_with_broadcast_rows_and_columns():
    def f(x, row, col):
        y = tp.where(x > 0, x * row, x - col).exp() + (x * 0.5).sigmoid()
        return y.masked_fill(x < -1, 3.0), (x >= row).logical_and(x < col), x.abs().sqrt()
    make = lambda r, c: [tp.randn(r, c), tp.randn(c), tp.randn(r, 1)]
    _, externs = check(f, make, (A, B), OTHER)
    assert externs == 0


def test_only_dim0_symbolic_keeps_dim1_static():
    f = lambda x: (x * 3 + 1).tanh().sum(1)
    run, source, _ = symbolic(f, mat(A, B), [A])
    assert "tp_size1" not in source
    for r in (2, 5, 1000):
        x = tp.randn(r, B)
        np.testing.assert_allclose(run([x])[0].numpy(), f(x).numpy(), rtol=1e-5, atol=1e-5)


def test_input_of_other_shape_than_its_symbols_raises():
    run, _, _ = symbolic(lambda x, y: x + y, [tp.randn(A, B), tp.randn(A, B)], [A, B])
    with pytest.raises(ValueError, match="symbolic shape"):
        run([tp.randn(4, 5), tp.randn(4, 6)])
    with pytest.raises(ValueError, match="range"):
        run([tp.randn(1, 5), tp.randn(1, 5)])  # size 1 is below the symbols' minimum 2


# --- reductions -----------------------------------------------------------------

@pytest.mark.parametrize("name", ["sum0", "sum1", "sum_all", "amax", "amin", "prod", "mean1", "mean_all", "mean0"])
def test_reductions_over_symbolic_dims(name):
    fns = {
        "sum0": lambda x: x.sum(0),
        "sum1": lambda x: x.sum(1, keepdim=True),
        "sum_all": lambda x: x.sum(),
        "amax": lambda x: x.amax(0),
        "amin": lambda x: x.amin(1),
        "prod": lambda x: (x * 0.1 + 1).prod(1),
        "mean1": lambda x: x.mean(1),
        "mean_all": lambda x: x.mean(),
        "mean0": lambda x: x.mean(0, keepdim=True) * 2,
    }
    _, externs = check(fns[name], mat, (A, B), OTHER, rtol=1e-4, atol=1e-4)
    assert externs == 0


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp", "softmax0"])
def test_softmax_family_decompositions(name):
    fns = {
        "softmax": lambda x: tp.softmax(x, -1),
        "log_softmax": lambda x: tp.log_softmax(x, -1),
        "logsumexp": lambda x: tp.logsumexp(x, 1),
        "softmax0": lambda x: tp.softmax(x, 0),
    }
    _, externs = check(fns[name], mat, (A, B), OTHER, rtol=1e-4, atol=1e-5)
    assert externs == 0


def test_arg_reductions_and_scans():
    def f(x):
        v, i = x.max(1)
        return x.argmax(0), x.argmin(), v, i, x.cumsum(1), (x * 0.1 + 1).cumprod(0)
    check(f, mat, (A, B), OTHER, rtol=1e-4, atol=1e-4)


# --- views ----------------------------------------------------------------------

def test_views_permute_expand_slice_select():
    def f(x, v):
        t = x.t() * 2                      # permute
        e = v.unsqueeze(0).expand(x.shape[0], -1) + x  # expand to a symbolic size
        s = x[:, 1:] - x[:, :-1]           # slices, one with a symbolic end
        return t, e, s, x[0] + x[-1], x[:, 0], x.reshape(-1) * 3
    make = lambda r, c: [tp.randn(r, c), tp.randn(c)]
    check(f, make, (A, B), OTHER)


def test_symbolic_reshape_of_a_computed_value():
    def f(x):
        y = (x + 1).t()                    # not a buffer view: read through the flat index
        return y.reshape(-1).sum() + 0 * y.sum(), y.reshape(x.shape[1], x.shape[0]).exp()
    check(f, mat, (A, B), OTHER, rtol=1e-4, atol=1e-3)


# --- externs: GEMM and eager kernels ----------------------------------------------

def test_gemm_with_symbolic_m_k_n():
    f = lambda a, b: (a @ b).relu() + 1
    make = lambda m, k, n: [tp.randn(m, k), tp.randn(k, n)]
    run, source, externs = symbolic(f, make(A, B, C), [A, B, C])
    assert externs == 1
    for m, k, n in [(2, 3, 4), (5, 2, 9), (A, B, C), (200, 67, 131)]:
        a, b = make(m, k, n)
        np.testing.assert_allclose(run([a, b])[0].numpy(), f(a, b).numpy(), rtol=1e-4, atol=1e-4)


def test_linear_with_transposed_weight_and_symbolic_batch():
    w, bias = tp.randn(C, B), tp.randn(C)
    f = lambda x: tp.nn.functional.linear(x, w, bias).sum(1)
    run, _, externs = symbolic(f, [tp.randn(A, B)], [A])
    for r in (2, 3, 500):
        x = tp.randn(r, B)
        np.testing.assert_allclose(run([x])[0].numpy(), f(x).numpy(), rtol=1e-4, atol=1e-4)


def test_operators_without_symbolic_rules_run_as_extern_calls():
    def f(x):
        return x.sort(1)[0] + 1, x.argsort(0)
    _, externs = check(f, mat, (A, B), [(2, 3), (5, 7), (A, B)])
    assert externs >= 1


def test_movement_flip_roll_repeat_tril():
    def f(x):
        return (x.flip(0) * 2, x.flip([0, 1]).sum(0), x.roll(3, 1), x.roll((-2, 5), (0, 1)) + 1,
                x.repeat(2, 2).exp(), x.tril(1), x.triu(-1) * 3)
    _, externs = check(f, mat, (A, B), [(2, 2), (3, 7), (97, 1031), (A, B)], rtol=1e-4, atol=1e-4)
    assert externs == 0


def test_factories_of_symbolic_size():
    f = lambda x: x + tp.ones(x.shape[1]) + tp.arange(x.shape[1])
    check(f, mat, (A, B), OTHER)


# --- long 1-D loops: chunked across threads by the run-time size --------------------

@pytest.mark.parametrize("name", ["pointwise", "sum", "amax"])
def test_long_1d_loops_are_chunked_by_the_runtime_size(name):
    n = 70001  # the example is long enough to be split across threads
    f = {"pointwise": lambda x: (x * 2 + 1).relu(), "sum": lambda x: x.sum(), "amax": lambda x: (x * x).amax()}[name]
    run, source, _ = symbolic(f, [tp.randn(n)], [n])
    assert "omp parallel" in source and (name == "pointwise" or "tp_chunk" in source)
    for m in (2, 3, 4097, 65536, 200003, 1 << 21):
        x = tp.randn(m)
        got, want = run([x])[0].numpy(), f(x).numpy()
        if name == "sum":  # chunked and cascaded: within rounding of eager's order
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["var1", "std0", "var_all", "std_keep", "var_biased"])
def test_var_std_divide_by_the_runtime_count(name):
    fns = {
        "var1": lambda x: x.var(1),
        "std0": lambda x: x.std(0),
        "var_all": lambda x: x.var(),
        "std_keep": lambda x: x.std(1, keepdim=True) + x,
        "var_biased": lambda x: tp.var(x, 1, unbiased=False),
    }
    _, externs = check(fns[name], mat, (A, B), [(2, 2), (3, 7), (97, 1031), (A, B)], rtol=1e-4, atol=1e-4)
    assert externs == 0


def test_cat_of_symbolic_pieces_is_fused():
    def f(x, y):
        z = tp.cat([x, y * 2], 1)            # [a, b + c]
        return tp.cat([z, z + 1], 0).exp().sum(1)  # [2a]
    make = lambda a, b, c: [tp.randn(a, b), tp.randn(a, c)]
    run, source, externs = symbolic(f, make(A, B, C), [A, B, C])
    assert externs == 0
    for a, b, c in [(2, 3, 2), (5, 2, 7), (A, B, C), (64, 100, 300)]:
        x, y = make(a, b, c)
        np.testing.assert_allclose(run([x, y])[0].numpy(), f(x, y).numpy(), rtol=1e-4, atol=1e-3)


def test_indexing_of_symbolic_operands_is_fused():
    emb = tp.randn(10, 7)
    def f(x, idx, g, ids):
        # index_select along a symbolic dim, gather with a symbolic index, x[idx], embedding of symbolic ids
        return (x.index_select(1, idx) * 2, x.gather(1, g) + 1, x[idx].exp(),
                tp.nn.functional.embedding(ids, emb).sum(-1))
    make = lambda a, b: [tp.randn(a, b), tp.tensor([0, 1, 1]), tp.randint(0, 2, (a, b)), tp.randint(0, 10, (a, b))]
    _, externs = check(f, make, (A, B), [(2, 2), (3, 7), (97, 1031), (A, B)])
    assert externs == 0


def test_out_of_range_index_at_another_size_raises_index_error():
    f = lambda x, idx: x.index_select(1, idx) + 1
    run, _, _ = symbolic(f, [tp.randn(A, B), tp.tensor([0, 5])], [A, B])
    run([tp.randn(4, 6), tp.tensor([0, 5])])  # in range at 6 columns
    with pytest.raises(IndexError, match="index out of range"):
        run([tp.randn(4, 5), tp.tensor([0, 5])])  # 5 is out of range at 5 columns


def test_input_of_another_rank_raises_value_error():
    run, _, _ = symbolic(lambda x: x * 2, [tp.randn(A, B)], [A, B])
    with pytest.raises(ValueError):
        run([tp.randn(5)])
