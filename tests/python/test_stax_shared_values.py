"""A value used more than once is computed once (Stax core rebuild, step 1).

Lowering used to rebuild a value at every use by calling its producer again,
so a value used twice was copied into both consumers and the generated source
doubled with every such step (16 chained `x*x*0.5 + 0.25` gave 31 MB of C++).
The loop IR is now a DAG (hash-consed nodes, lowering memoized per index) and
the code generator names each shared value once per loop body. The bounds below
are structural (size of the source, number of exp calls), not timings; results
are compared with eager."""
import numpy as np

import tensorplay as tp
import tensorplay.nn.functional as F


def _compile(fn, *args):
    cf = tp.compile(fn, strict_native=True)
    out = cf(*args)
    return cf, out


def _kernels(src):
    # The generated kernels, without the prelude (which defines tp_exp etc.).
    return src[src.index("static void "):]  # from the first kernel on: the prelude defines none


def _chain(x, n=16):
    for _ in range(n):
        x = x * x * 0.5 + 0.25
    return x


def test_chained_square_source_stays_small_and_equals_eager():
    x = tp.rand(64, 64)  # in [0, 1): the chain stays finite
    cf, out = _compile(_chain, x)
    assert len(cf.last_source) <= 100_000, len(cf.last_source)
    # Every product is rounded as eager rounds it: bitwise equal.
    np.testing.assert_array_equal(out.numpy(), _chain(x).numpy())


def test_chained_square_source_grows_linearly():
    x = tp.randn(8, 32)
    sizes = [len(_compile(lambda x, n=n: _chain(x, n), x)[0].last_source) for n in (4, 8, 16)]
    # Each step adds a bounded amount of code: 8 more steps cost about what the
    # first 4 more did (twice that, as 8 = 2 * 4), never a doubling per step.
    assert sizes[2] - sizes[1] <= 3 * (sizes[1] - sizes[0]) + 1000, sizes


def test_two_stacked_gelus_compute_two_exps_per_element():
    x = tp.randn(64, 64) * 3
    cf, out = _compile(lambda x: F.gelu(F.gelu(x)), x)
    body = _kernels(cf.last_source)
    loops = body.count("for (; ")  # the vector loop and its scalar tail (or the scalar loop alone)
    assert body.count("tp_exp(") <= 2 * loops, body.count("tp_exp(")
    np.testing.assert_allclose(out.numpy(), F.gelu(F.gelu(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_eight_stacked_gelus_source_stays_small_and_equals_eager():
    def f(x):
        for _ in range(8):
            x = F.gelu(x)
        return x

    x = tp.randn(64, 64) * 3
    cf, out = _compile(f, x)
    assert len(cf.last_source) <= 100_000, len(cf.last_source)
    np.testing.assert_allclose(out.numpy(), f(x).numpy(), rtol=1e-5, atol=1e-6)


def test_value_used_three_times_is_computed_once_per_element():
    def f(x):
        y = x.exp()
        return y * y + y

    x = tp.randn(16, 40)
    cf, out = _compile(f, x)
    body = _kernels(cf.last_source)
    # one exp per emitted loop body (a masked tail step is a body too)
    assert body.count("tp_exp(") <= body.count("for (; ") + body.count("// masked tail"), body
    np.testing.assert_allclose(out.numpy(), f(x).numpy(), rtol=4e-6)


def test_shared_value_in_a_reduction_and_after_it():
    # softmax-like: a value shared between a reduction's body and a later nest.
    def f(x):
        y = (x * x).exp()
        return (y * y).sum(-1, keepdim=True) + y

    x = tp.randn(8, 100) * 0.5
    _, out = _compile(f, x)
    np.testing.assert_allclose(out.numpy(), f(x).numpy(), rtol=2e-5)


def test_zero_and_negative_zero_constants_stay_distinct():
    # Equal subexpressions are one node: +0.0 and -0.0 are not equal constants.
    x = tp.tensor([[1.0, -2.0, 3.0, 0.0]])
    _, (a, b) = _compile(lambda x: (x * 0.0, x * -0.0), x)
    ra, rb = x * 0.0, x * -0.0
    np.testing.assert_array_equal(np.signbit(a.numpy()), np.signbit(ra.numpy()))
    np.testing.assert_array_equal(np.signbit(b.numpy()), np.signbit(rb.numpy()))
