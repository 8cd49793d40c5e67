"""Automatic dynamic int arguments: a Python int argument of a compiled function
whose value changes between calls (a KV-cache decode position, a loop index, a
length) is made symbolic after it changed once, so later values reuse one
version instead of capturing a new one each call (and running eagerly after
max_versions). Every use is checked against eager at many values, the number of
versions (num_specializations) against the promise (a 40-step decode loop: at
most 2), and uses that have no symbolic form must stay correct by value."""
import os

os.environ.setdefault("TP_SYMBOLIC_STRICT", "1")  # a wrong shape rule is an error here, not a specialization

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tensorplay as tp  # noqa: E402


def close(a, b, tol=1e-5):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y, tol)
        return
    if not isinstance(a, tp.Tensor):
        assert a == b and type(a) is type(b), (a, b)
        return
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)


BACKENDS = ["stax", "aot_eager"]


def run_values(f, make, values, backend="stax", dynamic=None, **kw):
    cf = tp.compile(f, backend=backend, dynamic=dynamic, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: never eager after max_versions
        for v in values:
            args = make(v)
            close(cf(*args), f(*make(v)))
    return cf


VALUES = [0, 1, 2, 3, 5, 7, 8, 13, 4, 9, 20, 31, 6, 1, 0, 15]


@pytest.mark.parametrize("backend", BACKENDS)
def test_slice_prefix_of_cache(backend):
    cache = tp.randn(2, 40, 8)
    f = lambda c, pos: c[:, :pos].sum(1) * 2  # noqa: E731
    cf = run_values(f, lambda p: (cache, p), VALUES, backend)
    assert cf.num_specializations <= 3  # pos = 0 by value, pos = 1 (an empty / one-row slice: guarded), the rest


@pytest.mark.parametrize("backend", BACKENDS)
def test_slice_through_pos_plus_one(backend):
    cache = tp.randn(2, 40, 8)
    f = lambda c, pos: (c[:, :pos + 1] * 3).sum(1)  # noqa: E731
    cf = run_values(f, lambda p: (cache, p), VALUES, backend)
    assert cf.num_specializations <= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_narrow_at_pos(backend):
    x = tp.randn(3, 40, 4)
    f = lambda x, pos: x.narrow(1, pos, 1) + 1  # noqa: E731
    cf = run_values(f, lambda p: (x, p), VALUES, backend)
    assert cf.num_specializations <= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_as_scalar_follows_type_promotion(backend):
    xf = tp.randn(5)
    xi = tp.arange(5, dtype=tp.int32)
    xb = tp.tensor([True, False, True])
    for x, want in [(xf, tp.float32), (xi, tp.int32), (xb, tp.int64)]:
        f = lambda x, pos: (x + pos, pos * x, x * 2 - pos, x * (pos + 1))  # noqa: E731
        cf = run_values(f, lambda p: (x, p), VALUES, backend)
        assert cf(x, 11)[0].dtype == want
        assert cf.num_specializations <= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_write_into_cache_at_pos(backend):
    def f(cache, k, pos):
        cache[:, pos] = k
        return cache.sum()

    k = tp.randn(2, 4)
    ce, cc = tp.zeros(2, 40, 4), tp.zeros(2, 40, 4)
    cf = tp.compile(f, backend=backend)
    for p in VALUES:
        close(cf(cc, k * p, p), f(ce, k * p, p))
        close(cc, ce)
    assert cf.num_specializations <= 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_copy_at_pos(backend):
    def f(cache, k, pos):
        cache.index_copy_(1, tp.tensor([pos]), k)
        return cache * 1

    k = tp.randn(2, 1, 4)
    ce, cc = tp.zeros(2, 40, 4), tp.zeros(2, 40, 4)
    cf = tp.compile(f, backend=backend)
    for p in VALUES:
        close(cf(cc, k + p, p), f(ce, k + p, p))
        close(cc, ce)
    assert cf.num_specializations <= 2  # tp.tensor([pos]) is built from pos's value input


@pytest.mark.parametrize("backend", BACKENDS)
def test_reshape_with_int_size(backend):
    f = lambda x, t: x.reshape(2, t, -1) * 2  # noqa: E731
    xs = {t: tp.randn(2 * t * 3) for t in range(13)}
    cf = run_values(f, lambda t: (xs[t], t), [2, 3, 4, 5, 6, 7, 9, 12], backend)
    assert cf.num_specializations <= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_arange_of_int(backend):
    # arange has no symbolic size rule: the int is kept by value after one try, never wrong.
    f = lambda x, n: x * 2 + tp.arange(n).float().sum()  # noqa: E731
    x = tp.randn(3)
    run_values(f, lambda n: (x, n), [3, 4, 5, 6, 3, 7], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_range_loop_unrolls_and_stays_correct(backend):
    def f(x, n):
        for i in range(n):
            x = x * 0.5 + i
        return x

    x = tp.randn(4)
    cf = run_values(f, lambda n: (x, n), [2, 3, 4, 5, 2, 3], backend)
    # range(n) fixes n: one version per value (n kept by value after the symbolic try)
    assert cf.num_specializations <= 6


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_branch_on_int_is_guarded(backend):
    def f(x, pos):
        if pos > 10:
            return x * 2
        return x - 1

    x = tp.randn(4)
    cf = run_values(f, lambda p: (x, p), [3, 4, 5, 12, 20, 6, 11, 10, 30, 2], backend)
    assert cf.num_specializations <= 3


def test_bools_stay_by_value():
    f = lambda x, flag: x * 2 if flag else x - 1  # noqa: E731
    x = tp.randn(4)
    run_values(f, lambda b: (x, b), [True, False, True, False])


def test_ints_inside_tuples_and_lists():
    cache = tp.randn(2, 40, 8)
    f = lambda c, span: c[:, span[0]:span[1]].sum(1)  # noqa: E731
    cf = run_values(f, lambda p: (cache, (p, p + 3)), [2, 3, 4, 5, 6, 10, 20])
    g = lambda c, span: c[:, span[0]:span[1]].mean(1)  # noqa: E731
    run_values(g, lambda p: (cache, [1, p + 2]), [2, 3, 4, 5, 6, 10, 20])
    assert cf(cache, (3, 6)).shape == (2, 8)


def test_dynamic_true_is_symbolic_from_the_first_call():
    cache = tp.randn(2, 40, 8)
    f = lambda c, pos: c[:, :pos + 1].sum(1)  # noqa: E731
    cf = run_values(f, lambda p: (cache, p), [3, 4, 5, 6, 7, 8], dynamic=True)
    assert cf.num_specializations == 1


def test_dynamic_false_and_opt_out_keep_ints_by_value():
    cache = tp.randn(2, 40, 8)
    f = lambda c, pos: c[:, :pos + 1].sum(1)  # noqa: E731
    cf = run_values(f, lambda p: (cache, p), [3, 4, 5, 6], dynamic=False)
    assert cf.num_specializations == 4
    cf = run_values(f, lambda p: (cache, p), [3, 4, 5, 6], options={"dynamic_ints": False})
    assert cf.num_specializations == 4


def test_returned_int_stays_an_int():
    f = lambda x, pos: (x + 1, pos + 1, 2 * pos - 1, pos / 2)  # noqa: E731
    x = tp.randn(3)
    cf = run_values(f, lambda p: (x, p), [3, 4, 5, 6, 9])
    assert cf.num_specializations <= 2
    r = cf(x, 7)
    assert r[1:] == (8, 13, 3.5) and type(r[1]) is int and type(r[3]) is float


@pytest.mark.parametrize("backend", BACKENDS)
def test_affine_and_float_uses(backend):
    f = lambda x, n: (x * (2 * n - 1) + 0.5 * n, x / n, n / (x.abs() + 1), x * tp.tensor(n))  # noqa: E731
    x = tp.randn(6)
    cf = run_values(f, lambda n: (x, n), [3, 4, 5, 6, 11, 2], backend)
    assert cf.num_specializations <= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_dim_arguments_are_never_symbolic(backend):
    # A dim index read by shape rules as its capture value: specialized (by value), never reused wrongly.
    x = tp.randn(3, 4, 5)
    for f in [lambda x, d: x.sum(d) * 2, lambda x, d: x.transpose(0, d) * 2, lambda x, d: x.softmax(d),
              lambda x, d: x.cumsum(d - 1)]:
        run_values(f, lambda d: (x, d), [0, 1, 2, 1, 2, 0], backend, dynamic=True)
        run_values(f, lambda d: (x, d), [1, 2, 1, 2, 0], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unfold_window_from_an_int(backend):
    x = tp.randn(12, 10)
    f = lambda x, n: x.unfold(0, n, 1) * 1  # noqa: E731
    run_values(f, lambda n: (x, n), [3, 5, 4, 6, 3], backend)
    g = lambda x, n: x.unfold(1, 2, n) * 1  # noqa: E731
    run_values(g, lambda n: (x, n), [3, 5, 4, 6, 3], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like", "full_like", "rand_like"])
def test_like_factories_follow_symbolic_sizes(backend, name):
    # Regression: a *_like of a symbolic tensor recorded the capture's sizes unguarded,
    # so a dynamic-shape version returned the first call's shape for every input.
    fn = getattr(tp, name)
    if name == "full_like":
        f = lambda x: fn(x, 3.0) * 2  # noqa: E731
    elif name == "empty_like":
        f = lambda x: fn(x).fill_(1.0) * 2  # noqa: E731  (its values are garbage)
    else:
        f = lambda x: fn(x) * 0 + 1  # noqa: E731
    cf = tp.compile(f, dynamic=True, backend=backend)
    for n in [3, 5, 4, 9]:
        x = tp.randn(n, 10)
        close(cf(x), f(x))
    # One version for every size, random draws too: a draw's counters and the places
    # of the draws after it follow the call's sizes (test_dynamic_random.py).
    assert cf.num_specializations == 1
    g = lambda c, n: tp.ones_like(c[:n]) * 2  # noqa: E731
    c = tp.randn(12, 10)
    run_values(g, lambda n: (c, n), [3, 5, 4, 6], backend)


def test_int_out_of_range_raises_clearly():
    cache = tp.randn(2, 10, 4)
    f = lambda c, pos: c.narrow(1, pos, 1) * 2  # noqa: E731
    cf = tp.compile(f)
    for p in [2, 3, 4]:
        close(cf(cache, p), f(cache, p))
    with pytest.raises(Exception, match="narrow|out of range|size|start"):
        cf(cache, 12)
    n = cf.num_specializations
    for p in [5, 6, 7, 8]:  # still the symbolic version: the error was the value's, not the int's
        close(cf(cache, p), f(cache, p))
    assert cf.num_specializations == n


def test_negative_and_huge_ints_stay_correct():
    x = tp.randn(40)
    f = lambda x, pos: x[pos] * 2 + pos  # noqa: E731
    run_values(f, lambda p: (x, p), [3, 4, -1, 5, -7, 39, -40])
    g = lambda x, n: x * 2 + n  # noqa: E731
    run_values(g, lambda n: (x, n), [3, 4, 1 << 40, 5])


def _decode_step(q, k, v, kc, vc, pos):
    # Append this step's key/value at pos, attend over the first pos + 1 entries.
    kc[:, pos] = k
    vc[:, pos] = v
    keys = kc[:, :pos + 1]
    vals = vc[:, :pos + 1]
    scores = (q.unsqueeze(1) * keys).sum(-1) / 4.0
    w = scores.softmax(-1)
    return (w.unsqueeze(-1) * vals).sum(1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_kv_cache_decode_loop_40_steps_at_most_two_versions(backend):
    tp.manual_seed(0)
    b, steps, d = 2, 40, 16
    kc_e, vc_e = tp.zeros(b, steps, d), tp.zeros(b, steps, d)
    kc_c, vc_c = tp.zeros(b, steps, d), tp.zeros(b, steps, d)
    cf = tp.compile(_decode_step, backend=backend, strict_native=backend == "stax")  # generated code, no fallback
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for pos in range(steps):
            q, k, v = tp.randn(b, d), tp.randn(b, d), tp.randn(b, d)
            close(cf(q, k, v, kc_c, vc_c, pos), _decode_step(q, k, v, kc_e, vc_e, pos))
            close(kc_c, kc_e)
            close(vc_c, vc_e)
    assert cf.num_specializations <= 2


def test_kv_cache_decode_with_pos_scalar_and_causal_bias():
    def step(q, kc, pos):
        keys = kc[:, :pos + 1]
        scores = (q.unsqueeze(1) * keys).sum(-1) - 0.01 * pos
        return scores.softmax(-1) * (pos + 1)

    kc = tp.randn(2, 40, 8)
    cf = tp.compile(step)
    for pos in range(40):
        q = tp.randn(2, 8)
        close(cf(q, kc, pos), step(q, kc, pos))
    assert cf.num_specializations <= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_with_an_int_argument(backend):
    w = tp.randn(40, 4, requires_grad=True)

    def f(x, w, n):
        return (x[:, :n] * w[:n].t().sum(0)).pow(2).sum() + n * w[:n].sum()

    cf = tp.compile(f, backend=backend)
    for n in [2, 3, 5, 8, 13, 21, 4]:
        x = tp.randn(3, 40)
        w.grad = None
        cf(x, w, n).backward()
        gc = w.grad.clone()
        w.grad = None
        f(x, w, n).backward()
        close(gc, w.grad, 1e-4)
    assert cf.num_specializations <= 3


@pytest.mark.parametrize("dynamic", [False, None, True])
def test_cache_writes_generate_code(dynamic):
    # select_scatter's Stax lowering (symbolic index, non-contiguous src, negative
    # index, a number, a dtype cast): generated code (strict_native), equal to eager.
    def f(c, k, pos):
        c[:, pos] = k.t()
        c[1, -1] = 7
        return c * 1

    cf = tp.compile(f, dynamic=dynamic, strict_native=True)
    ce, cc = tp.zeros(3, 8, 4), tp.zeros(3, 8, 4)
    for p in [0, 2, 3, 5, -1, 7, 4]:
        k = tp.randn(4, 3)
        close(cf(cc, k, p), f(ce, k, p))
        close(cc, ce)

    def g(c, k, pos):
        c[:, pos] = k
        return c + 0

    cg = tp.compile(g, dynamic=dynamic, strict_native=True)
    ge, gc = tp.zeros(3, 8, dtype=tp.int64), tp.zeros(3, 8, dtype=tp.int64)
    for p in [1, 2, 3, 6]:
        k = tp.arange(3) * 2
        close(cg(gc, k, p), g(ge, k, p))
