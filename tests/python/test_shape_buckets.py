"""Shape buckets (Section 10, Proposition 10.3): options={"shape_buckets": "pow2" or a
list} pads dynamic dims to their bucket and runs the version compiled at the bucket
sizes, when the program is padding-safe along those dims. Every result is compared
with eager at its own size; the number of versions is read from num_specializations,
whether a call ran padded from last_call_bucketed, and why not from last_bucket_refusal."""
import numpy as np
import pytest

import tensorplay as tp

BACKENDS = ["aot_eager", "stax"]


def pow2(n, floor=8):
    b = floor
    while b < n:
        b *= 2
    return b


def close(a, b):
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_row_function_pow2_one_version_per_bucket(backend):
    def f(x):
        return (x * 2).sum(1)

    cf = tp.compile(f, backend=backend, dynamic=True, options={"shape_buckets": "pow2"})
    sizes = list(range(2, 22))
    for n in sizes:
        x = tp.randn(n, 5)
        close(cf(x), f(x))
        assert cf.last_call_bucketed, (n, cf.last_bucket_refusal)
    assert cf.num_specializations == len({pow2(n) for n in sizes})  # 8, 16, 32
    assert cf.bucketed_calls == len(sizes)


def test_mlp_over_batch_sizes():
    w1, b1, w2 = tp.randn(6, 16), tp.randn(16), tp.randn(16, 3)

    def mlp(x):
        return tp.relu(x @ w1 + b1) @ w2

    cf = tp.compile(mlp, dynamic=True, options={"shape_buckets": "pow2"})
    sizes = [3, 9, 17, 5, 30, 12, 33, 2]
    for n in sizes:
        x = tp.randn(n, 6)
        close(cf(x), mlp(x))
        assert cf.last_call_bucketed, (n, cf.last_bucket_refusal)
    assert cf.num_specializations == len({pow2(n) for n in sizes})


def test_parameters_that_require_grad_are_not_padded_under_grad_mode():
    w = tp.randn(4, 3).requires_grad_()

    def f(x):
        return (1.0 / x) @ w  # backward through zero padding: 0 * inf = nan in w.grad

    cf = tp.compile(f, backend="aot_eager", dynamic=True, options={"shape_buckets": "pow2"})
    for n in [3, 5]:
        x = tp.randn(n, 4)
        y = cf(x)
        assert not cf.last_call_bucketed
        assert "requires grad" in cf.last_bucket_refusal
        y.sum().backward()
        g = w.grad.clone()
        w.grad = None
        f(x).sum().backward()
        close(g, w.grad)
        w.grad = None
    with tp.no_grad():
        for n in [3, 6, 10]:
            x = tp.randn(n, 4)
            close(cf(x), f(x))
            assert cf.last_call_bucketed, cf.last_bucket_refusal


def test_list_of_buckets_and_sizes_above_the_last():
    def f(x):
        return tp.softmax(x, 1) * 3 + 1

    cf = tp.compile(f, backend="aot_eager", dynamic=True, options={"shape_buckets": [4, 16, 32]})
    for n in [2, 3, 4, 5, 15, 16, 17, 31]:
        x = tp.randn(n, 7)
        close(cf(x), f(x))
        assert cf.last_call_bucketed, (n, cf.last_bucket_refusal)
    # 2..4 -> 4, 5..16 -> 16, 17..32 -> 32 (the dim of size 7 pads to 16 too: softmax refuses it)
    assert cf.num_specializations == 3
    for n in [33, 50]:
        x = tp.randn(n, 7)
        close(cf(x), f(x))
        assert not cf.last_call_bucketed


@pytest.mark.parametrize(
    "fn,word",
    [
        (lambda x: x.sum(0) + 1, "reduces"),
        (lambda x: (x - 5).amax(0), "reduces"),  # zero padding would win the max
        (lambda x: x.mean(0), "reduces"),  # would divide by the bucket size
        (lambda x: x.reshape(-1) * 2, "merges"),
        (lambda x: x.t() @ x, "contract"),
        (lambda x: tp.softmax(x, 0), "softmax"),
        (lambda x: x.cumsum(0), "cumsum"),
    ],
)
def test_refusals_run_unpadded_and_say_why(fn, word):
    cf = tp.compile(fn, backend="aot_eager", dynamic=True, options={"shape_buckets": "pow2"})
    for n in [3, 5, 6, 11]:
        x = tp.randn(n, 4)
        close(cf(x), fn(x))
        assert not cf.last_call_bucketed
        assert word in cf.last_bucket_refusal, cf.last_bucket_refusal


def test_size_dependent_python_is_refused():
    def f(x):
        if x.shape[0] > 10:
            return x * 2
        return x * 3

    cf = tp.compile(f, backend="aot_eager", dynamic=True, options={"shape_buckets": "pow2"})
    for n in [9, 10, 11, 12, 5]:
        x = tp.randn(n, 3)
        close(cf(x), f(x))
    x = tp.randn(9, 3)  # bucket 16 > 10 but 9 <= 10: padding would change the branch
    close(cf(x), f(x))
    assert not cf.last_call_bucketed


def test_a_size_used_as_a_number_is_refused():
    def f(x):
        return x * x.shape[0]  # the capture specializes the size: the bucket size would be baked in

    cf = tp.compile(f, backend="aot_eager", dynamic=True, options={"shape_buckets": "pow2"})
    for n in [3, 6, 11, 12]:
        x = tp.randn(n)
        close(cf(x), f(x))
        assert not cf.last_call_bucketed
        assert "specialized" in cf.last_bucket_refusal, cf.last_bucket_refusal
    # With a second dim, only that one pads (the refused dim stays unbucketed).
    for n in [3, 6, 11]:
        x = tp.randn(n, 5)
        close(cf(x), f(x))


def test_mutated_inputs_get_the_unpadded_part():
    def f(x, y):
        x.mul_(2)
        return x + y

    cf = tp.compile(f, backend="aot_eager", dynamic=True, options={"shape_buckets": "pow2"})
    for n in [3, 6, 12]:
        x, y = tp.randn(n, 4), tp.randn(n, 4)
        xe = x.clone()
        r = cf(x, y)
        re = f(xe, y)
        close(r, re)
        close(x, xe)
        assert cf.last_call_bucketed, cf.last_bucket_refusal


def test_results_that_are_views_of_inputs():
    def f(x):
        return x.t(), x * 2, x

    cf = tp.compile(f, backend="aot_eager", dynamic=True, options={"shape_buckets": "pow2"})
    for n in [3, 7, 13]:
        x = tp.randn(n, 4)
        t, y, same = cf(x)
        assert cf.last_call_bucketed, cf.last_bucket_refusal
        assert same is x
        close(t, x.t())
        close(y, x * 2)
        x.add_(1)  # eager's x.t() is a view: it sees the write
        close(t, x.t())


def test_automatic_dynamic_buckets_the_dims_that_changed():
    def f(x):
        return (x * 2).sum(1)

    cf = tp.compile(f, backend="aot_eager", options={"shape_buckets": "pow2"})
    x = tp.randn(5, 3)
    close(cf(x), f(x))
    assert not cf.last_call_bucketed  # the first call: nothing changed yet, static at 5
    for n in [6, 7, 9, 12]:
        x = tp.randn(n, 3)
        close(cf(x), f(x))
        assert cf.last_call_bucketed, cf.last_bucket_refusal
    assert cf.num_specializations == 3  # static [5, 3], buckets 8 and 16


def test_bad_option_is_a_value_error():
    with pytest.raises(ValueError, match="shape_buckets"):
        tp.compile(lambda x: x, options={"shape_buckets": "cube"})
    with pytest.raises(ValueError, match="shape_buckets"):
        tp.compile(lambda x: x, options={"shape_buckets": [16, 8]})
