"""Dynamic shapes (Section 10): symbolic sizes, shape guards, automatic dynamic,
mark_dynamic / mark_static. Compiled results are checked against eager on many
sizes; the number of versions a function builds is read from num_specializations.
The tests pass whether or not the Stax backend lowers symbolic graphs yet (until
it does, a symbolic region under backend="stax" is interpreted)."""
import os
import random
import re
import subprocess
import sys
import textwrap

os.environ.setdefault("TP_SYMBOLIC_STRICT", "1")  # a wrong shape rule is an error here, not a specialization

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tensorplay as tp  # noqa: E402

BACKENDS = ["aot_eager", "stax"]


def run_python(script, env=None, timeout=180):
    env = dict(os.environ if env is None else env)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def close(a, b):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y)
        return
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def quiet(fn, **kw):
    kw.setdefault("options", {"warn_fallback": False})
    return tp.compile(fn, **kw)


@pytest.mark.parametrize("backend", BACKENDS)
def test_example_1_1_many_batch_sizes_one_version(backend):
    f = lambda x, w: ((x + w).relu() * 2).sum(-1)  # noqa: E731
    cf = quiet(f, backend=backend, dynamic=True)
    w = tp.randn(16)
    for n in [8, 2, 3, 5, 7, 13, 64, 100, 257, 31]:
        x = tp.randn(n, 16)
        close(cf(x, w), f(x, w))
    assert cf.num_specializations == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_sizes_zero_and_one_are_specialized(backend):
    f = lambda x: (x * 2).sum(1)  # noqa: E731
    cf = quiet(f, backend=backend, dynamic=True)
    for n in [8, 0, 1, 9, 0, 1, 2, 97]:
        x = tp.randn(n, 4)
        close(cf(x), f(x))
    assert cf.num_specializations == 3  # the general size, 0, 1


def test_default_is_automatic_dynamic():
    f = lambda x: (x * 2).sum(1)  # noqa: E731
    cf = quiet(f, backend="aot_eager")
    sizes = [8, 16, 3, 5, 64, 11, 12, 100]
    for n in sizes:
        x = tp.randn(n, 4)
        close(cf(x), f(x))
    # The first call is static; the second recompiles dim 0 as symbolic; the rest hit.
    assert cf.num_specializations == 2
    # The static dim stays static: a new width recompiles.
    x = tp.randn(7, 5)
    close(cf(x), f(x))
    assert cf.num_specializations == 3


def test_whole_tensor_max_and_min_stay_symbolic():
    # Regression: max(x)/min(x) (no dim) had no symbolic shape rule, so the
    # capture specialized every size and recompiled at each new batch size.
    def f(x):
        return x.max(), x.min(), x.var(-1)
    cf = tp.compile(f, strict_native=True)
    for n in [8, 16, 24, 333]:
        x = tp.randn(n, 128)
        for got, want in zip(cf(x), f(x)):
            close(got, want)
    assert cf.num_specializations == 2  # static at 8, symbolic from 16 on


def test_default_with_stax_is_correct_for_changing_sizes():
    f = lambda x: (x * 2).sum(1)  # noqa: E731
    cf = quiet(f)
    for n in [8, 16, 3, 5, 64, 11, 12, 100]:
        x = tp.randn(n, 4)
        close(cf(x), f(x))
    assert 2 <= cf.num_specializations <= 8


def test_dynamic_false_recompiles_per_size():
    f = lambda x: x + 1  # noqa: E731
    cf = quiet(f, backend="aot_eager", dynamic=False)
    for n in [4, 5, 6]:
        cf(tp.randn(n))
    assert cf.num_specializations == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_shape_branch_both_sides(backend):
    def f(x):
        if x.shape[0] > 16:
            return x.sum(0)
        return x * 3

    cf = quiet(f, backend=backend, dynamic=True)
    for n in [8, 20, 9, 33, 2, 17, 16, 100]:
        x = tp.randn(n, 3)
        close(cf(x), f(x))
    assert cf.num_specializations == 2


@pytest.mark.parametrize("n0", [2, 3, 7, 8, 64])
def test_views_and_reductions_over_symbolic_dims(n0):
    def f(x, y):
        n = x.shape[0]
        a = x.reshape(n, -1).sum(1)
        b = x.flatten()[1:] * 2
        c = x.view(-1, x.shape[2]).mean(0)
        d = x.transpose(0, 1).permute(2, 1, 0).amax(-1)
        e = x.unsqueeze(1).expand(-1, 2, -1, -1).sum(1)
        g = x[1:, :2].softmax(-1)
        h = x[-1] + x[0] + x.narrow(0, 0, 2).sum(0)
        i = x @ y
        j = tp.cat([x, x * 2], 0).sum((1, 2))
        k = tp.zeros(x.shape[0], 2) + x.size(0)
        m = x.numel() * x[:, 0, 0]
        return a, b, c, d, e, g, h, i, j, k, m

    cf = quiet(f, backend="aot_eager", dynamic=True)
    y = tp.randn(4, 5)
    sizes = [n0] + [random.Random(n0).randint(2, 50) for _ in range(4)] + [n0 + 1]
    for n in sizes:
        x = tp.randn(n, 3, 4)
        close(cf(x, y), f(x, y))
    # numel() used as a number and x.size(0) added to a tensor specialize dim 0.
    assert cf.num_specializations == len(set(sizes))


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_without_specialization(backend):
    def f(x):
        n = x.shape[0]
        a = x.reshape(n, -1) * 2
        b = x.view(x.size(0) * 3, -1)
        c = x.flatten(0, 1).unsqueeze(0).squeeze(0)
        d = x[1:].sum(0) + x[:-1].mean(0)
        return a, b, c, d

    cf = quiet(f, backend=backend, dynamic=True)
    for n in [5, 2, 6, 31, 64, 3]:  # 4 first would share a symbol with dim 2 (duck sizing)
        x = tp.randn(n, 3, 4)
        close(cf(x), f(x))
    assert cf.num_specializations == 1


def test_symint_arithmetic_and_divisibility():
    def f(x):
        n = x.shape[0]
        return x.view(n // 2, 2 * x.shape[1]) + 1

    cf = quiet(f, backend="aot_eager", dynamic=True)
    for n in [8, 10, 2, 64]:
        x = tp.randn(n, 3)
        close(cf(x), f(x))
    assert cf.num_specializations == 1
    with pytest.raises(Exception):  # odd: the guard fails, the recapture raises as eager does
        cf(tp.randn(7, 3))
    with pytest.raises(Exception):
        f(tp.randn(7, 3))


def test_python_int_use_specializes():
    def f(x):
        out = x[0]
        for i in range(1, x.shape[0]):  # range() needs an int: the size is fixed
            out = out + x[i]
        return out

    cf = quiet(f, backend="aot_eager", dynamic=True)
    for n in [3, 4, 3, 4, 5]:
        x = tp.randn(n, 2)
        close(cf(x), f(x))
    assert cf.num_specializations == 3


def test_duck_sizing_and_broadcast_unification():
    f = lambda x, y: x + y  # noqa: E731
    cf = quiet(f, backend="aot_eager", dynamic=True)
    for n in [4, 9, 33]:
        x, y = tp.randn(n, 3), tp.randn(n, 3)
        close(cf(x, y), f(x, y))
    assert cf.num_specializations == 1
    with pytest.raises(Exception):
        cf(tp.randn(4, 3), tp.randn(5, 3))


def test_symbolic_matmul_batch():
    f = lambda x, w, b: tp.nn.functional.linear(x, w, b).relu()  # noqa: E731
    cf = quiet(f, backend="aot_eager", dynamic=True)
    w, b = tp.randn(6, 5), tp.randn(6)
    for n in [2, 7, 40]:
        x = tp.randn(n, 5)
        close(cf(x, w, b), f(x, w, b))
    assert cf.num_specializations == 1


def test_in_place_writes_on_symbolic_inputs():
    def f(x):
        x.add_(1)
        x[0] = 0
        x[1:, 0] = 5
        return x * 2

    cf = quiet(f, backend="aot_eager", dynamic=True)
    for n in [3, 6, 11]:
        a = tp.randn(n, 4)
        b = a.clone()
        close(cf(a), f(b))
        close(a, b)
    assert cf.num_specializations == 1


def test_data_gate_with_symbolic_sizes():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    cf = quiet(f, backend="aot_eager", dynamic=True)
    for n, sign in [(4, 1), (9, -1), (17, 1), (5, -1)]:
        x = tp.rand(n, 3) * sign
        close(cf(x), f(x))
    assert cf.num_specializations == 2


def test_mark_dynamic_range_and_mark_static():
    f = lambda x: (x * 2).sum(1)  # noqa: E731
    cf = quiet(f, backend="aot_eager")  # default mode: marks decide
    rng = random.Random(0)
    for _ in range(8):
        n = rng.randint(2, 64)
        x = tp.mark_dynamic(tp.randn(n, 4), 0, min=2, max=64)
        close(cf(x), f(x))
    assert cf.num_specializations == 1
    x = tp.randn(100, 4)  # outside the declared range: a version of its own
    close(cf(x), f(x))
    assert cf.num_specializations == 2

    g = quiet(lambda x: x + 1, backend="aot_eager", dynamic=True)
    for n in [4, 5, 6]:
        g(tp.mark_static(tp.randn(n), 0))
    assert g.num_specializations == 3


def test_mark_dynamic_errors():
    with pytest.raises(IndexError):
        tp.mark_dynamic(tp.randn(3), 1)
    with pytest.raises(ValueError):
        tp.mark_dynamic(tp.randn(3), 0, min=5, max=4)


def test_symint_outside_capture_and_repr():
    seen = {}

    def f(x):
        n = x.shape[0]
        seen["type"] = type(n).__name__
        seen["repr"] = repr(n)
        return x * 2

    quiet(f, backend="aot_eager", dynamic=True)(tp.randn(5, 2))
    assert seen["type"] == "SymInt"
    assert seen["repr"] == "x.size(0)"
    assert tp.randn(5, 2).shape == (5, 2)  # eager sizes stay ints


def test_grad_through_symbolic_capture():
    def f(x, w):
        return ((x @ w).tanh() * x.shape[1]).sum()

    for backend in ["eager", "aot_eager"]:
        cf = quiet(f, backend=backend, dynamic=True)
        w = tp.randn(3, 2, requires_grad=True)
        for n in [4, 7]:
            x = tp.randn(n, 3, requires_grad=True)
            cf(x, w).backward()
            gx, gw = x.grad, w.grad
            x2 = x.detach().clone().requires_grad_(True)
            w2 = w.detach().clone().requires_grad_(True)
            f(x2, w2).backward()
            close(gx, x2.grad)
            w.grad = None


def test_recompile_log_names_the_failed_guard():
    rc, out, err = run_python(
        """
        import tensorplay as tp
        def f(x):
            if x.shape[0] % 8 == 0:
                return x * 2
            return x + 1
        cf = tp.compile(f, backend="aot_eager", dynamic=True)
        cf(tp.randn(16, 3))
        cf(tp.randn(24, 3))
        cf(tp.randn(12, 3))
        cf(tp.randn(1, 3))
        """,
        env=dict(os.environ, TP_LOGS="recompiles"),
    )
    assert rc == 0, err
    log = out + err
    assert re.search(r"guard failed: \(?x\.size\(0\) % 8\)? == 0 \(at .*:4\) \(got x\.size\(0\) = 12\)", log), log
    assert "guard failed: x.size(0) >= 2 (got 1)" in log, log
    assert log.count("recompiling") == 2, log


@pytest.mark.parametrize("backend", BACKENDS)
def test_factories_stack_and_indexing_stay_symbolic(backend):
    emb = tp.randn(10, 3)

    def f(x, idx):
        z = tp.zeros(x.shape[0], 3) + tp.ones(x.size(0), 1)
        s = tp.stack([x, x * 2], 0).sum(0)
        e = tp.nn.functional.embedding(idx, emb)
        i = emb.index_select(0, idx) * x
        g = x.gather(1, tp.zeros(x.shape[0], 1, dtype=tp.int64))
        return z + s + e, i, g

    cf = quiet(f, backend=backend, dynamic=True)
    for n in [6, 2, 9, 40]:
        x = tp.randn(n, 3)
        idx = tp.randint(0, 10, (n,))
        close(cf(x, idx), f(x, idx))
    assert cf.num_specializations == 1


def test_shape_tuple_comparison_and_unification_guards():
    def f(x, y):
        if x.shape == y.shape:
            return x + y
        return x.sum() + y.sum()

    cf = quiet(f, backend="aot_eager", dynamic=True)
    for a, b in [((4, 3), (4, 3)), ((7, 3), (7, 3)), ((4, 3), (5, 3)), ((9, 3), (2, 3)), ((6, 2), (6, 2))]:
        x, y = tp.randn(*a), tp.randn(*b)
        close(cf(x, y), f(x, y))
    assert cf.num_specializations == 2


def test_returned_sizes_are_plain_ints_of_each_call():
    f = lambda x: (x * 2, x.shape, x.shape[0] * 2)  # noqa: E731
    cf = quiet(f, backend="aot_eager", dynamic=True)
    for n in [4, 6, 4]:
        y, shape, twice = cf(tp.randn(n, 3))
        assert shape == (n, 3) and twice == 2 * n
        assert all(type(d) is int for d in shape) and type(twice) is int
    assert cf.num_specializations == 2


def test_declared_range_implies_guards_away():
    rc, out, err = run_python(
        """
        import tensorplay as tp
        def f(x):
            if x.shape[0] <= 64:
                return x * 2
            return x + 1
        cf = tp.compile(f, backend="aot_eager")
        cf(tp.mark_dynamic(tp.randn(16, 3), 0, max=64))
        g = tp.compile(f, backend="aot_eager", dynamic=True)
        g(tp.randn(16, 3))
        """,
        env=dict(os.environ, TP_LOGS="guards"),
    )
    assert rc == 0, err
    log = out + err
    assert "x.size(0) in [2, 64]; shape guards: none" in log, log  # implied by the declared range
    assert "x.size(0) <= 64" in log, log  # without a range: a run-time guard


def test_small_model_one_version_for_all_batch_and_sequence_sizes():
    from tensorplay import nn

    m = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 8))

    def f(x):
        h = m(x)  # linear of a 3-D input: views to 2-D and back to the batch dims
        a = (h @ h.transpose(-1, -2)).softmax(-1)
        target = tp.zeros(h.shape[0] * h.shape[1], dtype=tp.int64)
        return (a @ h).mean(1), tp.nn.functional.cross_entropy(h.reshape(-1, 8), target)

    cf = quiet(f, backend="aot_eager", dynamic=True)
    with tp.no_grad():
        for b, t in [(2, 5), (3, 7), (4, 9), (8, 3), (5, 2)]:
            x = tp.randn(b, t, 16)
            close(cf(x), f(x))
    assert cf.num_specializations == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_symbolic_slice_bounds(backend):
    def f(x):
        n = x.shape[0]
        return x[: n // 2] * 2, x[n - 2 :], x[1 : n - 1].sum(0)

    cf = quiet(f, backend=backend, dynamic=True)
    for n in [6, 4, 9, 31, 2, 3]:
        x = tp.randn(n, 3)
        close(cf(x), f(x))
    assert cf.num_specializations == 1


def test_small_cnn_with_a_symbolic_batch():
    from tensorplay import nn

    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5))
    net.eval()
    cf = quiet(net, backend="aot_eager", dynamic=True)
    with tp.no_grad():
        for b in [2, 5, 3, 16]:
            x = tp.randn(b, 3, 8, 8)
            close(cf(x), net(x))
        # A new spatial size is a new version (only the batch dim is symbolic through conv and pooling).
        x = tp.randn(2, 3, 10, 10)
        close(cf(x), net(x))
    assert cf.num_specializations == 2


def test_unbatched_conv_fixes_channels():
    conv = tp.nn.Conv2d(4, 4, 3)  # equal channel counts: a passed-through dim 0 would go unnoticed
    cf = quiet(conv, backend="aot_eager", dynamic=True)
    with tp.no_grad():
        for c_h in [6, 7]:
            x = tp.randn(4, c_h, c_h)
            close(cf(x), conv(x))
