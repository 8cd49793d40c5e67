"""Random operators inside compiled functions (issue 9, item 3).

A random operator is captured as a functional draw (`philox_random`) whose
randomness is an input of the region: the generator's seed and the first
counter of the call's range. Every call reserves exactly as many counters as
eager's calls would, so the generator stands where eager leaves it, and the
draws use the same Philox counters and transforms as eager: compiled and eager
agree bit for bit (ARCHITECTURE.md, capture of random operators).
"""

import warnings

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn


def _metric(name):
    return getattr(tp.compiler.metrics, name)


def _state(gen=None):
    return (gen or tp.default_generator).get_state().numpy().tolist()


def _np(t):
    t = t.detach()
    return (t.float() if t.dtype == tp.bfloat16 else t).numpy()  # exact: every bfloat16 is a float32


def _same(a, b):
    """Bit-for-bit equality of two tensors (or tuples of tensors)."""
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(_np(a), _np(b))


def _compile(f, **kw):
    """Stax with strict_native (the draws and their maps are generated code)."""
    kw.setdefault("strict_native", True)
    return tp.compile(f, **kw)


# ---------------------------------------------------------------- one function per random operator


def f_rand(x):
    return x + tp.rand(3, 5)


def f_randn(x):
    # `randn + x`: generated code must round the normal sample before the add (no FMA).
    return x * tp.randn(3, 5), tp.randn(3, 5) + x


def f_rand_float64(x):
    # x.max(), not x.sum(): a float32 sum's rounding depends on the summation order
    # (vector width), and this test is about the draws being bit for bit.
    return tp.rand(7, dtype=tp.float64), tp.randn(2, 3, dtype=tp.float64) + x.max()


def f_rand_float16(x):
    return tp.rand(9, dtype=tp.float16), tp.randn(9, dtype=tp.bfloat16)


def f_randint(x):
    return tp.randint(0, 10, (4, 6)), tp.randint(-3, 3, (5,), dtype=tp.int32), x


def f_like(x):
    return tp.rand_like(x), tp.randn_like(x) * 2


def f_randperm(x):
    return tp.randperm(11), x * 2


def f_bernoulli(x):
    return tp.bernoulli(x.sigmoid())


def f_normal_(x):
    y = x * 1
    y.normal_(2.0, 3.0)
    return y


def f_uniform_(x):
    y = x * 1
    y.uniform_(-1.0, 3.0)
    return y


def f_bernoulli_(x):
    y = x * 1
    y.bernoulli_(0.3)
    return y


def f_dropout(x):
    return F.dropout(x, 0.3, True) + 1


def f_dropout_inplace(x):
    y = x * 1
    F.dropout(y, 0.2, True, inplace=True)
    return y


def f_mixed(x):
    # Several draws of one generator: each must sit at eager's offset.
    a = tp.rand(5)
    b = F.dropout(x, 0.5, True)
    c = tp.randn(3, dtype=tp.float64)
    y = x.clone()
    y.uniform_()
    return a, b, c, y, tp.randint(5, (3,))


def f_mixed_native(x):
    a = tp.rand(5)
    b = F.dropout(x, 0.5, True)
    c = tp.randn(3, dtype=tp.float64)
    y = x.clone()
    y.uniform_()
    return a, b, c, y


# Stax generates code for uniform and normal float32/float64 draws (and the
# pointwise maps of dropout, bernoulli, normal_, uniform_); randint, randperm and
# 16-bit draws are extern calls of the eager kernel inside the native region.
LOWERED = [f_rand, f_randn, f_rand_float64, f_like, f_bernoulli, f_normal_, f_uniform_, f_bernoulli_, f_dropout,
           f_dropout_inplace, f_mixed_native]
NOT_LOWERED = [f_rand_float16, f_randint, f_randperm, f_mixed]


@pytest.mark.parametrize("f", LOWERED + NOT_LOWERED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["eager", "aot_eager", "stax"])
def test_compiled_draws_equal_eager_bit_for_bit_and_leave_the_same_generator_state(f, backend):
    x = tp.randn(3, 5)
    x2 = x.clone()  # a new object of the same shape: the specialization cache
    tp.manual_seed(1234)
    expected = [f(x), f(x), f(x)]
    state_after_eager = _state()
    native = backend == "stax" and f in LOWERED
    fallbacks = _metric("fallback_count")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stax, NOT_LOWERED: the region falls back to the interpreter
        cf = tp.compile(f, backend=backend, strict_native=native)
        tp.manual_seed(1234)
        got = [cf(x), cf(x), cf(x2)]  # capture, first-level entry, specialization cache
    for e, g in zip(expected, got):
        _same(e, g)
    assert _state() == state_after_eager
    if native:
        assert _metric("fallback_count") == fallbacks


def test_the_captured_graph_draws_from_the_generator_state_input():
    g = tp.compiler.capture(f_mixed, tp.randn(4))
    code = g.code
    # One state input per draw: each call places draw k after the counters of the
    # draws before it (rand(5) 2 counters, dropout of 4 floats 1, randn(3) float64 2,
    # uniform_ 2), so the places can follow the sizes of a dynamic capture.
    assert "def forward(arg0, rng_state, rng_state_1, rng_state_2, rng_state_3, rng_state_4)" in code
    for k in ("", "_1", "_2", "_3", "_4"):
        assert code.count(f"philox_random(rng_state{k},") == 1
    assert code.count("offset=0)") == 5
    # Capture itself leaves the generator as it was.
    x = tp.randn(4)
    before = _state()
    tp.compiler.capture(f_mixed, x)
    assert _state() == before


# ---------------------------------------------------------------- calls, seeds, generator state


def test_successive_calls_draw_different_numbers():
    cf = _compile(f_rand)
    x = tp.zeros(3, 5)
    a, b, c = cf(x), cf(x), cf(x)  # b and c: the first-level entry
    assert not np.array_equal(_np(a), _np(b))
    assert not np.array_equal(_np(b), _np(c))


def test_manual_seed_makes_a_compiled_function_reproducible():
    cf = _compile(f_mixed_native)
    x = tp.randn(6)
    tp.manual_seed(7)
    first = [cf(x), cf(x)]
    tp.manual_seed(7)
    again = [cf(x), cf(x)]
    for a, b in zip(first, again):
        _same(a, b)
    tp.manual_seed(8)
    other = cf(x)
    assert not np.array_equal(_np(other[0]), _np(first[0][0]))


@pytest.mark.parametrize("order", ["eager_then_compiled", "compiled_then_eager", "interleaved"])
@pytest.mark.parametrize("f,kw", [(f_mixed_native, {}), (f_mixed, {"backend": "eager", "strict_native": False})],
                         ids=["stax", "eager"])
def test_interleaving_eager_and_compiled_calls_gives_eager_sequence(order, f, kw):
    x = tp.randn(4, 4)
    plan = {"eager_then_compiled": "eecc", "compiled_then_eager": "ccee", "interleaved": "ecec"}[order]
    cf = _compile(f, **kw)
    tp.manual_seed(99)
    reference = [f(x) for _ in plan]
    ref_state = _state()
    tp.manual_seed(99)
    got = [(cf if step == "c" else f)(x) for step in plan]
    for a, b in zip(reference, got):
        _same(a, b)
    assert _state() == ref_state
    # And the next eager draws continue from the same place.
    tp.manual_seed(99)
    for _ in plan:
        f(x)
    nxt = tp.rand(5)
    tp.manual_seed(99)
    for step in plan:
        (cf if step == "c" else f)(x)
    _same(tp.rand(5), nxt)


def test_an_explicit_generator_is_the_one_advanced():
    g = tp.Generator()

    def f(x):
        return x + tp.rand(4, generator=g), tp.randn(4, dtype=tp.float64, generator=g)

    x = tp.zeros(4)
    g.manual_seed(5)
    expected = [f(x), f(x)]
    g_state, default_state = _state(g), _state()
    cf = _compile(f)
    g.manual_seed(5)
    got = [cf(x), cf(x)]
    for a, b in zip(expected, got):
        _same(a, b)
    assert _state(g) == g_state
    assert _state() == default_state  # the default generator was not touched


def test_two_generators_in_one_function_each_advance_as_in_eager():
    g = tp.Generator()

    def f(x):
        return tp.rand(5, generator=g) + x, tp.rand(5) + x, tp.randint(0, 100, (3,), generator=g)

    x = tp.zeros(5)
    g.manual_seed(1)
    tp.manual_seed(2)
    expected = [f(x), f(x)]
    states = _state(g), _state()
    cf = _compile(f, backend="eager", strict_native=False)
    g.manual_seed(1)
    tp.manual_seed(2)
    got = [cf(x), cf(x)]
    for a, b in zip(expected, got):
        _same(a, b)
    assert (_state(g), _state()) == states


@pytest.mark.parametrize("backend", ["stax", "eager"])
def test_results_do_not_depend_on_the_thread_count(backend):
    x = tp.randn(64, 1025)

    def f(x):
        return F.dropout(x, 0.25, True), tp.randn(64, 1025), tp.rand(64, 1025, dtype=tp.float64), tp.randn(300001)

    cf = _compile(f, backend=backend)
    old = tp.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            tp.set_num_threads(n)
            tp.manual_seed(3)
            results.append(cf(x))
    finally:
        tp.set_num_threads(old)
    _same(results[0], results[1])


# ---------------------------------------------------------------- statistics


N = 200_000


def test_uniform_and_normal_moments():
    def f(x):
        y = x.clone()
        y.normal_(2.0, 3.0)
        z = x.clone()
        z.uniform_(-1.0, 3.0)
        return tp.rand(N), tp.randn(N), y, z, tp.randn(N, dtype=tp.float64)

    u, n, y, z, n64 = (_np(t).astype(np.float64) for t in _compile(f)(tp.zeros(N)))
    # Standard errors at n = 2e5: mean of U(0,1) 6.5e-4, of N(0,1) 2.2e-3; bounds are ~6 sigma.
    assert abs(u.mean() - 0.5) < 4e-3 and abs(u.var() - 1 / 12) < 2e-3
    assert u.min() >= 0 and u.max() < 1
    assert abs(n.mean()) < 1.5e-2 and abs(n.var() - 1) < 2e-2
    assert abs(n64.mean()) < 1.5e-2 and abs(n64.var() - 1) < 2e-2
    assert abs(y.mean() - 2) < 4.5e-2 and abs(y.std() - 3) < 3e-2
    assert abs(z.mean() - 1) < 1.6e-2 and abs(z.var() - 16 / 12) < 3e-2 and z.min() >= -1 and z.max() < 3


def test_randint_covers_its_range_uniformly():
    r = _np(_compile(lambda x: tp.randint(-2, 3, (N,)) + x, backend="eager")(tp.zeros(N, dtype=tp.int64)))
    assert set(np.unique(r)) == {-2, -1, 0, 1, 2}
    counts = np.bincount(r + 2) / N
    assert np.all(np.abs(counts - 0.2) < 6e-3)


def test_randperm_is_a_permutation():
    p = _np(_compile(lambda x: tp.randperm(1000) + x, backend="eager")(tp.zeros(1000, dtype=tp.int64)))
    assert sorted(p.tolist()) == list(range(1000))
    assert not np.array_equal(p, np.arange(1000))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_bernoulli_and_dropout_keep_rates_and_scaling(p):
    def f(x):
        b = x.clone()
        b.bernoulli_(p)
        return tp.bernoulli(x * 0 + p), b, F.dropout(x, p, True)

    x = tp.rand(N) + 1  # no zeros: a zero in the dropout result means dropped
    b1, b2, d = (_np(t) for t in _compile(f)(x))
    sigma = np.sqrt(p * (1 - p) / N)
    assert set(np.unique(b1)) <= {0.0, 1.0} and abs(b1.mean() - p) < 6 * sigma
    assert set(np.unique(b2)) <= {0.0, 1.0} and abs(b2.mean() - p) < 6 * sigma
    kept = d != 0
    assert abs(kept.mean() - (1 - p)) < 6 * sigma
    np.testing.assert_array_equal(d[kept], (_np(x) * np.float32(1 / (1 - p)))[kept])


def test_dropout_extremes():
    x = tp.rand(1000) + 1

    def f(x):
        return F.dropout(x, 1.0, True), F.dropout(x, 0.0, True)

    zero, same = _compile(f)(x)
    assert not _np(zero).any()
    _same(same, x)


# ---------------------------------------------------------------- modules and gradients


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x).relu())


def test_dropout_module_in_train_and_eval():
    tp.manual_seed(0)
    net = Net()
    cm = tp.compile(net, backend="eager")
    x = tp.rand(32, 16) + 1
    with tp.no_grad():
        net.train()
        tp.manual_seed(11)
        eager_train = net(x)
        tp.manual_seed(11)
        compiled_train = cm(x)
        _same(eager_train, compiled_train)
        assert (_np(compiled_train) == 0).mean() > 0.3  # dropped (relu zeros included)
        net.eval()
        before = _state()
        _same(cm(x), net(x))
        assert _state() == before  # eval mode draws nothing
        net.train()
        assert not np.array_equal(_np(cm(x)), _np(compiled_train))


def test_dropout_module_compiles_natively_in_train_and_eval():
    net = nn.Sequential(nn.Dropout(0.25), nn.ReLU())
    cm = tp.compile(net, strict_native=True)
    x = tp.rand(64, 33) + 1
    fallbacks = _metric("fallback_count")
    with tp.no_grad():
        tp.manual_seed(2)
        eager = [net(x), net(x)]
        tp.manual_seed(2)
        _same(cm(x), eager[0])
        _same(cm(x), eager[1])
        net.eval()
        _same(cm(x), x)
        net.train()
        assert (_np(cm(x)) == 0).any()
    assert _metric("fallback_count") == fallbacks


def test_gradients_through_dropout_use_the_forward_mask():
    def f(x, w):
        return F.dropout(x * w, 0.4, True)

    x = tp.rand(50, 20) + 0.5
    w0 = tp.rand(20) + 0.5
    tp.manual_seed(21)
    we = w0.clone().requires_grad_(True)
    ye = f(x, we)
    ye.sum().backward()
    cf = _compile(f, backend="eager")  # a call that needs grad interprets the graph with autograd
    tp.manual_seed(21)
    wc = w0.clone().requires_grad_(True)
    yc = cf(x, wc)
    assert yc.grad_fn is not None
    yc.sum().backward()
    _same(yc, ye)
    np.testing.assert_allclose(_np(wc.grad), _np(we.grad), rtol=1e-6)
    # The gradient reads the very mask of this forward: d/dw sum(mask * x * w / 0.6) = sum over kept rows of x / 0.6.
    mask = _np(yc) != 0
    expected = (mask * _np(x) / np.float32(0.6)).sum(0)
    np.testing.assert_allclose(_np(wc.grad), expected, rtol=1e-5)


def test_in_place_random_fill_of_an_input_is_applied_to_the_caller():
    def f(x):
        x.normal_()
        return x * 2

    a = tp.zeros(10)
    b = tp.zeros(10)
    tp.manual_seed(4)
    ra = f(a)
    cf = _compile(f)
    tp.manual_seed(4)
    rb = cf(b)
    _same(a, b)
    _same(ra, rb)


# ---------------------------------------------------------------- what is refused


def test_reseeding_inside_the_compiled_function_is_a_capture_error():
    def f(x):
        tp.manual_seed(0)
        return x + tp.rand(3)

    with pytest.raises(tp.compiler.CaptureError, match="seed outside the compiled function"):
        _compile(f)(tp.zeros(3))

    def g(x):
        y = x + tp.rand(3)
        tp.manual_seed(0)
        return y

    with pytest.raises(tp.compiler.CaptureError, match="reseeds a generator"):
        _compile(g)(tp.zeros(3))


def test_a_data_gate_on_a_random_value_is_a_capture_error():
    def f(x):
        if tp.rand(()) > 0.5:
            return x + 1
        return x - 1

    with pytest.raises(tp.compiler.CaptureError, match="random operator"):
        _compile(f)(tp.zeros(3))


@pytest.mark.parametrize("f", NOT_LOWERED, ids=lambda f: f.__name__)
def test_draws_stax_does_not_generate_run_as_eager_kernels_inside_a_native_region(f):
    # randint, randperm and 16-bit draws are extern calls of the eager kernel
    # at eager's offsets (they sent the region to eager while CPU regions had
    # no int32 / 16-bit buffers): strict_native passes, values bit for bit.
    x = tp.randn(3, 5)
    cf = tp.compile(f, strict_native=True)
    tp.manual_seed(5)
    got = cf(x)
    tp.manual_seed(5)
    _same(got, f(x))
    assert "extern" in cf.last_source and "philox_random" in cf.last_source


def test_stax_generates_the_draws():
    x = tp.randn(3, 5)
    cf = _compile(f_mixed_native)
    cf(x)
    assert "tp_philox_uniform_f32(" in cf.last_source and "tp_philox_normal_f64(" in cf.last_source


def test_a_custom_backend_receives_the_generator_state_as_an_input():
    seen = []

    def backend(gm, example_inputs):
        seen.append([tuple(t.shape) for t in example_inputs])
        return gm

    cf = tp.compile(f_rand, backend=backend)
    x = tp.zeros(3, 5)
    tp.manual_seed(0)
    expected = f_rand(x), f_rand(x)
    tp.manual_seed(0)
    _same(cf(x), expected[0])
    _same(cf(x), expected[1])
    assert seen == [[(3, 5), (2,)]]  # the argument, then [seed, first counter]
