"""Functionalization (Section 4, Proposition 4.4): in-place operators and writes
through views inside a compiled function become pure operators on the base, and
writes into the caller's tensors (arguments, parameters, buffers) happen after
the compiled code ran, exactly as eager's side effects."""

import random
import warnings

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from compile_check import assert_compiled_matches_eager

BACKENDS = ("eager", "stax")


def graph_code(cf):
    return cf.last_graph.code


# ------------------------------------------------------------ locals


def test_inplace_on_a_local_matches_eager():
    def f(x):
        y = x * 2
        y.add_(1)
        return y

    assert_compiled_matches_eager(f, tp.randn(3, 4))


def test_inplace_on_a_local_compiles_natively():
    # No scatter is needed: the graph is mul -> add, which Stax lowers.
    def f(x):
        y = x * 2
        y.add_(1)
        y.mul_(x)
        return y

    x = tp.randn(5)
    cf = tp.compile(f, strict_native=True)
    np.testing.assert_allclose(cf(x).numpy(), f(x).numpy(), rtol=1e-6)


def test_write_through_a_column_view_matches_eager():
    def f(x):
        y = x + 1
        y[:, 0].mul_(3)
        return y

    assert_compiled_matches_eager(f, tp.randn(3, 4))


def test_setitem_on_a_local_buffer_matches_eager():
    def f(x):
        buf = x.clone()
        buf[0] = 0
        buf[1:, 2] = x[1:, 0]
        return buf * 2

    assert_compiled_matches_eager(f, tp.randn(4, 3))


def test_views_of_a_written_base_see_the_write():
    # v is made before the write into y and read after it.
    def f(x):
        y = x * 1.5
        v = y[1]
        t = y.t()
        y.add_(10)
        return v * 2, t.sum(0)

    assert_compiled_matches_eager(f, tp.randn(3, 4))


def test_write_through_a_reshaped_view_is_an_as_strided_scatter():
    def f(x):
        y = x * 2
        y.view(-1)[::3].fill_(7)
        y.t()[1].neg_()
        return y

    x = tp.randn(4, 3)
    assert_compiled_matches_eager(f, x)
    cf = tp.compile(f, backend="eager")
    cf(x)
    code = graph_code(cf)
    assert "as_strided_scatter" in code
    assert "fill_(" not in code and "neg_(" not in code


def test_captured_graph_is_pure():
    def f(x):
        y = x.clone()
        y.add_(1)
        y[0].mul_(2)
        y[1:, :2] = 5
        return y

    cf = tp.compile(f, backend="eager")
    cf(tp.randn(3, 3))
    code = graph_code(cf)
    for op in ("add_(", "mul_(", "fill_(", "copy_("):
        assert op not in code, code
    assert "select_scatter" in code and "slice_scatter" in code


# ------------------------------------------------------------ inputs


def test_mutated_arguments_match_eager():
    def f(x, y, idx):
        x.add_(1)
        x[idx] = y[0]
        y.copy_(x[1:] * 2)
        return x.sum() + y.sum()

    assert_compiled_matches_eager(f, tp.randn(4, 3), tp.randn(3, 3), 0)


def test_returned_mutated_argument_is_the_callers_object():
    def f(x):
        x.mul_(2)
        return x

    x = tp.randn(3)
    cf = tp.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = cf(x)
    assert r is x
    assert_compiled_matches_eager(f, tp.randn(3))


def test_written_view_of_an_argument_is_returned_as_a_view():
    def f(x):
        v = x[1]
        v.mul_(3)
        return v

    assert_compiled_matches_eager(f, tp.randn(3, 2))


def test_argument_write_applies_once_and_bumps_the_version():
    def f(x):
        x.add_(1)
        return x * 2

    x = tp.zeros(3)
    cf = tp.compile(f, strict_native=True)
    v0 = x._version
    for k in range(1, 5):
        r = cf(x)
        np.testing.assert_array_equal(x.numpy(), np.full(3, float(k), np.float32))
        np.testing.assert_array_equal(r.numpy(), np.full(3, 2.0 * k, np.float32))
    assert x._version > v0


def test_unchanged_mutating_function_stays_on_the_first_level_entry():
    def f(x):
        x.add_(1)
        return x * 2

    x = tp.zeros(3)
    cf = tp.compile(f, strict_native=True)
    cf(x)
    before = tp.compiler.metrics.first_level_hits
    for _ in range(3):
        cf(x)
    assert tp.compiler.metrics.first_level_hits - before == 3
    np.testing.assert_array_equal(x.numpy(), np.full(3, 4.0, np.float32))


def test_write_into_a_global_is_applied():
    state = {"t": tp.zeros(2)}

    def f(x):
        state["t"].add_(x)
        return x + 1

    cf = tp.compile(f)
    for _ in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cf(tp.ones(2))
    np.testing.assert_array_equal(state["t"].numpy(), [3.0, 3.0])


def test_write_into_an_input_that_overlaps_another_input_is_refused():
    def f(x, y):
        x.add_(1)
        return y * 2

    base = tp.randn(4)
    with pytest.raises(tp.compiler.CaptureError, match="shares memory"):
        tp.compile(f, fullgraph=True)(base, base[1:])
    # The capture put the data back: a refused capture has no side effect.
    before = base.numpy().copy()
    with pytest.raises(tp.compiler.CaptureError):
        tp.compile(f, fullgraph=True)(base, base[1:])
    np.testing.assert_array_equal(base.numpy(), before)


def test_inplace_keeps_the_written_dtype():
    # float32 += float64 stays float32, int64 index_put_ / masked_fill_ keep int64.
    def f(x, d, i):
        y = x * 1
        y.add_(d)
        j = i * 2
        j.masked_fill_(j > 2, 7)
        j[0] = 3
        return y, j

    assert_compiled_matches_eager(f, tp.randn(3), tp.randn(3, dtype=tp.float64), tp.arange(3), check_grad=False)


# ------------------------------------------------------------ modules


@pytest.mark.parametrize("backend", BACKENDS)
def test_batchnorm_train_mode_running_stats_match_eager(backend):
    tp.manual_seed(0)
    m_eager = nn.BatchNorm2d(3)
    m_comp = nn.BatchNorm2d(3)
    m_comp.load_state_dict(m_eager.state_dict())
    cf = tp.compile(m_comp, backend=backend)
    with tp.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in range(4):
            x = tp.randn(4, 3, 5, 5) * (step + 1) + step
            np.testing.assert_allclose(cf(x).numpy(), m_eager(x).numpy(), rtol=1e-4, atol=1e-5)
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                np.testing.assert_allclose(getattr(m_comp, name).numpy(), getattr(m_eager, name).numpy(),
                                           rtol=1e-5, atol=1e-6, err_msg=f"{name} after call {step + 1}")


def test_batchnorm_eval_mode_does_not_write():
    m = nn.BatchNorm1d(4).eval()
    cf = tp.compile(m)
    before = m.running_mean.numpy().copy()
    with tp.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf(tp.randn(5, 4))
    np.testing.assert_array_equal(m.running_mean.numpy(), before)


# ------------------------------------------------------------ random programs


def _random_program(rng):
    """A function of (x [4, 6], y [4, 6]) made of random in-place writes, some
    through views, some into the arguments, and the values it returns."""
    steps = []
    for _ in range(rng.randint(2, 6)):
        target = rng.choice(["x", "y", "z"])
        view = rng.choice(["", "[1]", "[:, 2]", "[1:3]", "[:, ::2]", ".t()[0]", "[0:2, 1:4]", ".view(-1)[5:9]"])
        op = rng.choice(["add_(1.5)", "mul_(-2)", "fill_(0.25)", "neg_()", "copy_({src})", "clamp_(-1, 1)"])
        src = rng.choice(["0.5", "{t}{v} * 0 + 3"]).format(t=rng.choice(["x", "y", "z"]), v=view)
        steps.append(f"    {target}{view}.{op.format(src=src)}" if "copy_" not in op
                     else f"    {target}{view}.copy_(({src}) * 1)")
    ret = rng.choice(["z", "(z, x)", "z.sum() + x.sum()", "(z[1], y)", "[x, z * 2]"])
    body = "def f(x, y):\n    z = x * 2 + y\n" + "\n".join(steps) + f"\n    return {ret}\n"
    return body


@pytest.mark.parametrize("seed", range(12))
def test_random_inplace_view_programs_match_eager(seed):
    rng = random.Random(seed)
    src = _random_program(rng)
    ns = {}
    exec(src, ns)
    x, y = tp.randn(4, 6), tp.randn(4, 6)
    try:
        assert_compiled_matches_eager(ns["f"], x, y, backends=("eager", "stax"), check_grad=False)
    except AssertionError as e:
        raise AssertionError(f"{e}\nprogram:\n{src}") from None


# ------------------------------------------------------------ native code


def _column_write(x):
    y = x + 1
    y[:, 0].mul_(3)
    y[1] = 0
    return y


def _local_buffer(x):
    buf = x.clone()
    buf[0] = 0
    return buf * 2


def _input_column(x):
    x[:, 1].add_(1)
    return x.sum(1)


@pytest.mark.parametrize("fn,shape", [(_column_write, (3, 4)), (_local_buffer, (4, 3)), (_input_column, (2, 5))])
def test_writes_through_select_views_compile_natively(fn, shape):
    # select_scatter decomposes into where(constant mask, src, base) for Stax.
    cf = tp.compile(fn, strict_native=True)
    x = tp.randn(*shape)
    xe = x.clone()
    np.testing.assert_allclose(cf(x).numpy(), fn(xe).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(x.numpy(), xe.numpy())
    assert "select_scatter" in graph_code(cf)


def test_partial_slice_write_runs_slice_scatter_inside_the_region():
    def f(x):
        y = x * 2
        y[1:3] = 0
        return y

    # slice_scatter is a loop (lowering/scatters.cpp), fused with the product.
    cf = tp.compile(f, strict_native=True)
    x = tp.randn(4, 2)
    tp.testing.assert_close(cf(x), f(x))
    assert "// extern" not in cf.last_source and "slice_scatter" in cf.last_source
    assert_compiled_matches_eager(f, tp.randn(4, 2))


def test_advanced_index_and_mask_writes_into_an_argument():
    def f(x, i, m):
        x[i] = 5.0
        x[m] = -1.0
        return x * 1

    assert_compiled_matches_eager(f, tp.randn(5, 2), tp.tensor([0, 3]),
                                  tp.tensor([True, False, False, True, True]), check_grad=False)


def test_gradients_flow_through_functionalized_writes():
    # Training runs the pure graph with autograd: the scatter operators' derivatives.
    def g(w):
        y = w * 2
        y[:, 0].mul_(3)
        y[1:, 1] = y[:2, 0]
        v = y.view(-1)
        v[::2].add_(1)
        return y

    assert_compiled_matches_eager(g, tp.randn(3, 2).requires_grad_(True))


@pytest.mark.parametrize("name,args", [
    ("select_scatter", dict(dim=1, index=2)),
    ("slice_scatter", dict(dim=0, start=1, end=4, step=2)),
])
def test_scatter_operators_match_torch(name, args):
    torch = pytest.importorskip("torch")
    base = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    tb = torch.from_numpy(base)
    src_t = torch.randn(getattr(tb, "select" if name == "select_scatter" else "__getitem__")(
        *((args["dim"], args["index"]) if name == "select_scatter" else (slice(1, 4, 2),))).shape)
    want = getattr(torch, name)(tb, src_t, **args).numpy()
    got = getattr(tp, name)(tp.tensor(base), tp.tensor(src_t.numpy()), **args).numpy()
    np.testing.assert_array_equal(got, want)


def test_as_strided_scatter_matches_torch():
    torch = pytest.importorskip("torch")
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    src = -np.arange(3, dtype=np.float32)
    want = torch.as_strided_scatter(torch.from_numpy(base), torch.from_numpy(src), (3,), (5,), 0).numpy()
    got = tp.as_strided_scatter(tp.tensor(base), tp.tensor(src), [3], [5], 0).numpy()
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="as_strided_scatter"):
        tp.as_strided_scatter(tp.tensor(base), tp.tensor(np.zeros(3, np.float32)), [3], [5], 3)


def test_write_into_a_non_leaf_argument_keeps_its_history():
    def f(x):
        x.mul_(3)
        return x.sum()

    w_c = tp.randn(3).requires_grad_(True)
    w_e = tp.tensor(w_c.detach().numpy()).requires_grad_(True)
    cf = tp.compile(f, backend="eager")
    x_c, x_e = w_c * 2, w_e * 2
    r_c, r_e = cf(x_c), f(x_e)
    (r_c + x_c.sum()).backward()
    (r_e + x_e.sum()).backward()
    np.testing.assert_allclose(x_c.detach().numpy(), x_e.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(w_c.grad.numpy(), w_e.grad.numpy(), rtol=1e-6)


def test_write_into_a_leaf_that_requires_grad_is_refused_as_in_eager():
    def f(x):
        x.add_(1)
        return x * 2

    with pytest.raises(Exception, match="leaf Variable"):
        f(tp.randn(3).requires_grad_(True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception, match="leaf Variable"):
            tp.compile(f, backend="eager")(tp.randn(3).requires_grad_(True))


def test_tensor_made_inside_the_function_starts_fresh_every_call():
    # tp.tensor([...]) is made outside the operators (a free tensor of the graph);
    # eager makes a new one per call, so a write into it must not persist.
    def f(x):
        c = tp.tensor([1.0, 2.0, 3.0])
        c.add_(x)
        return c, c * 2

    cf = tp.compile(f, backend="eager")
    x = tp.ones(3)
    for _ in range(3):
        got, want = cf(x), f(x)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_writes_through_multi_result_views_and_transposes():
    def f(x):
        y = x * 1
        a, b = y.chunk(2)
        a.add_(1)
        u = y.unbind(1)
        u[2].mul_(0)
        y.diagonal().fill_(9)
        return y, b * 1

    def g(x):
        a, b = x.split(2)
        b.mul_(2)
        return a

    def h(x):
        x.t()[0].add_(1)
        x.t()[1:3].mul_(2)
        return x

    assert_compiled_matches_eager(f, tp.randn(4, 4), check_grad=False)
    assert_compiled_matches_eager(g, tp.randn(4, 3), check_grad=False)
    assert_compiled_matches_eager(h, tp.randn(3, 4), check_grad=False)


def test_write_through_a_diagonal_of_a_non_contiguous_input_names_the_fix():
    def f(x):
        x.diagonal().fill_(0)
        return x

    with pytest.raises(tp.compiler.CaptureError, match=r"diagonal(.|\n)*contiguous(.|\n)*test_compile_functionalize"):
        tp.compile(f, fullgraph=True)(tp.randn(3, 3).t())
