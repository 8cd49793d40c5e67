"""tp.normal (its four overloads, generator=, out=, zero gradients as PyTorch's), the in-place
random fills exponential_/cauchy_/log_normal_/geometric_/random_, and their draws under tp.compile.
tensorplay's generator is not PyTorch's, so values are checked statistically (moments of large
draws) and by reproducibility with a seed; compiled draws must equal eager's exactly."""
import math

import numpy as np
import pytest
import torch

import tensorplay as tp

N = 200_000


def _np(t):
    return t.detach().numpy()


# ------------------------------------------------------------------ tp.normal
def test_normal_float_float_size_moments_and_dtype():
    x = tp.normal(2.0, 3.0, (N,))
    assert x.shape == (N,) and x.dtype == tp.float32
    assert abs(float(x.mean()) - 2.0) < 0.05 and abs(float(x.std()) - 3.0) < 0.05
    assert tp.normal(0.0, 1.0, size=(2, 3), dtype=tp.float64).dtype == tp.float64
    assert tp.normal(0.0, 1.0, [4]).shape == (4,)
    assert tp.normal(0.0, 1.0, (2,), requires_grad=True).requires_grad


def test_normal_tensor_overloads_shapes_dtypes_and_moments():
    mean = tp.tensor([-5.0, 0.0, 5.0]).reshape([3, 1]).expand([3, N // 10]).contiguous()
    std = tp.tensor([0.5, 1.0, 2.0]).reshape([3, 1])
    y = tp.normal(mean, std)
    assert y.shape == (3, N // 10)
    m, s = _np(y).mean(1), _np(y).std(1)
    np.testing.assert_allclose(m, [-5, 0, 5], atol=0.05)
    np.testing.assert_allclose(s, [0.5, 1, 2], rtol=0.03)
    # Tensor mean, float std / float mean, Tensor std; dtype from mean (else std) as torch's
    assert tp.normal(tp.zeros(2, dtype=tp.float64), 1.0).dtype == tp.float64
    assert tp.normal(0.0, tp.ones(2, dtype=tp.float64)).dtype == tp.float64
    assert tp.normal(tp.zeros(2, dtype=tp.float64), tp.ones(2)).dtype == tp.float64
    assert tp.normal(tp.zeros(2), tp.ones(2, dtype=tp.float64)).dtype == tp.float32
    assert tp.normal(mean=tp.zeros(4)).shape == (4,)
    z = tp.normal(3.0, tp.zeros(5))
    assert _np(z).tolist() == [3.0] * 5
    # broadcasting of mean and std, as torch's
    assert tp.normal(tp.zeros(2, 3), tp.ones(3)).shape == torch.normal(torch.zeros(2, 3), torch.ones(3)).shape


def test_normal_generator_reproducible_and_independent_of_default():
    g1, g2 = tp.Generator(), tp.Generator()
    g1.manual_seed(7)
    g2.manual_seed(7)
    tp.manual_seed(0)
    a = tp.normal(tp.zeros(50), 2.0, generator=g1)
    tp.randn(10)  # the default generator moves; g2 does not
    b = tp.normal(tp.zeros(50), 2.0, generator=g2)
    assert np.array_equal(_np(a), _np(b))
    tp.manual_seed(3)
    c = tp.normal(1.0, 2.0, (20,))
    tp.manual_seed(3)
    d = tp.normal(1.0, 2.0, (20,))
    assert np.array_equal(_np(c), _np(d))
    assert not np.array_equal(_np(c), _np(tp.normal(1.0, 2.0, (20,))))


def test_normal_out():
    out = tp.empty(6)
    r = tp.normal(0.0, 1.0, (6,), out=out)
    assert r is out
    out2 = tp.empty(3)
    g = tp.Generator()
    g.manual_seed(1)
    tp.normal(tp.zeros(3), tp.ones(3), generator=g, out=out2)
    g.manual_seed(1)
    assert np.array_equal(_np(out2), _np(tp.normal(tp.zeros(3), tp.ones(3), generator=g)))


def test_normal_gradients_are_zero_as_pytorch():
    m = tp.zeros(2, 3, requires_grad=True)
    s = tp.ones(3, requires_grad=True)
    y = tp.normal(m, s)
    assert y.requires_grad
    y.sum().backward()
    tm, ts = torch.zeros(2, 3, requires_grad=True), torch.ones(3, requires_grad=True)
    torch.normal(tm, ts).sum().backward()
    assert np.array_equal(_np(m.grad), tm.grad.numpy()) and np.array_equal(_np(s.grad), ts.grad.numpy())
    m2 = tp.zeros(3, requires_grad=True)
    tp.normal(m2, 2.0).sum().backward()
    assert _np(m2.grad).tolist() == [0.0, 0.0, 0.0]


def test_normal_bad_input_names_function():
    with pytest.raises(RuntimeError, match="normal.*std >= 0"):
        tp.normal(0.0, -1.0, (2,))
    with pytest.raises(RuntimeError, match="normal.*std >= 0"):
        tp.normal(tp.zeros(2), tp.tensor([1.0, -1.0]))
    with pytest.raises(RuntimeError, match="normal.*std >= 0"):
        tp.normal(tp.zeros(2), -2.0)
    with pytest.raises(TypeError, match="normal.*size"):
        tp.normal(0.0, 1.0)
    with pytest.raises(RuntimeError, match="normal.*floating point"):
        tp.normal(tp.zeros(2, dtype=tp.int64), 1.0)
    with pytest.raises(RuntimeError, match="normal.*floating point"):
        tp.normal(0.0, 1.0, (2,), dtype=tp.int32)
    with pytest.raises(RuntimeError, match="normal.*broadcast"):
        tp.normal(tp.zeros(2, 3), tp.ones(6))
    with pytest.raises(RuntimeError, match="normal: out"):
        tp.normal(tp.zeros(2), 1.0, out=tp.empty(5))
    with pytest.raises(TypeError, match="normal"):
        tp.normal("a", 1.0, (2,))


def test_normal_compiled_equals_eager():
    def f(m, s):
        return tp.normal(m, s) + tp.normal(m, 0.5) + tp.normal(1.0, s) + tp.normal(0.0, 2.0, (3,))

    cf = tp.compile(f)
    m, s = tp.tensor([0.0, 1.0, 2.0]), tp.tensor([1.0, 0.5, 2.0])
    for seed in (0, 1, 2):
        tp.manual_seed(seed)
        e = f(m, s)
        tp.manual_seed(seed)
        c = cf(m, s)
        assert np.array_equal(_np(e), _np(c))
        # the generator advanced by as much as eager's draws
        after_c = tp.randn(2)
        tp.manual_seed(seed)
        f(m, s)
        assert np.array_equal(_np(after_c), _np(tp.randn(2)))


# ----------------------------------------------------------- in-place fills
def test_exponential_moments():
    x = tp.empty(N).exponential_(2.0)
    v = _np(x)
    assert v.min() >= 0
    assert abs(v.mean() - 0.5) < 0.01 and abs(v.std() - 0.5) < 0.01
    assert tp.empty(3, dtype=tp.float64).exponential_().dtype == tp.float64


def test_cauchy_median_and_quartiles():
    v = _np(tp.empty(N).cauchy_(1.0, 2.0))
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    assert abs(med - 1.0) < 0.05 and abs(q1 - (-1.0)) < 0.08 and abs(q3 - 3.0) < 0.08


def test_log_normal_moments():
    v = _np(tp.empty(N, dtype=tp.float64).log_normal_(0.5, 0.25))
    assert v.min() > 0
    lv = np.log(v)
    assert abs(lv.mean() - 0.5) < 0.005 and abs(lv.std() - 0.25) < 0.005


def test_geometric_moments_float_and_int():
    v = _np(tp.empty(N).geometric_(0.25))
    assert v.min() >= 1 and np.all(v == np.round(v))
    assert abs(v.mean() - 4.0) < 0.05 and abs(v.var() - 12.0) < 0.5
    i = tp.zeros(1000, dtype=tp.int32).geometric_(0.5)
    assert i.dtype == tp.int32 and _np(i).min() >= 1


def test_random_ranges():
    v = _np(tp.empty(N).random_(3, 7))
    assert set(np.unique(v).tolist()) == {3.0, 4.0, 5.0, 6.0}
    v = _np(tp.zeros(N, dtype=tp.int64).random_(5))
    assert set(np.unique(v).tolist()) == {0, 1, 2, 3, 4}
    v = _np(tp.empty(N).random_(to=3))  # torch spelling random_(from=0, to=...)
    assert v.max() <= 2
    f = _np(tp.empty(N).random_())
    assert f.min() >= 0 and f.max() <= 2 ** 24 and f.max() > 2 ** 22
    u8 = _np(tp.zeros(N, dtype=tp.uint8).random_())
    assert u8.max() >= 250
    b = _np(tp.zeros(1000, dtype=tp.bool).random_())
    assert b.any() and not b.all()


def test_fills_use_generator_and_seed():
    for name, args in (("exponential_", (1.5,)), ("cauchy_", ()), ("log_normal_", ()), ("geometric_", (0.3,)),
                       ("random_", (0, 100))):
        g = tp.Generator()
        g.manual_seed(11)
        a = getattr(tp.empty(40), name)(*args, generator=g)
        g.manual_seed(11)
        b = getattr(tp.empty(40), name)(*args, generator=g)
        assert np.array_equal(_np(a), _np(b)), name
        tp.manual_seed(5)
        c = getattr(tp.empty(40), name)(*args)
        tp.manual_seed(5)
        d = getattr(tp.empty(40), name)(*args)
        assert np.array_equal(_np(c), _np(d)), name


def test_fills_compiled_equal_eager():
    def f(x):
        a = x.clone().exponential_(2.0)
        b = x.clone().cauchy_()
        c = x.clone().log_normal_(0.0, 0.5)
        d = x.clone().geometric_(0.4)
        e = x.clone().random_(0, 10)
        return a + b + c + d + e

    cf = tp.compile(f)
    x = tp.zeros(8)
    tp.manual_seed(4)
    e = f(x)
    tp.manual_seed(4)
    c = cf(x)
    assert np.array_equal(_np(e), _np(c))


def test_fill_bad_input_names_function():
    with pytest.raises(RuntimeError, match="exponential_"):
        tp.empty(3).exponential_(-1.0)
    with pytest.raises(RuntimeError, match="exponential_.*floating"):
        tp.zeros(3, dtype=tp.int64).exponential_()
    with pytest.raises(RuntimeError, match="geometric_"):
        tp.empty(3).geometric_(1.5)
    with pytest.raises(RuntimeError, match="cauchy_"):
        tp.empty(3).cauchy_(0.0, 0.0)
    with pytest.raises(RuntimeError, match="random_"):
        tp.empty(3).random_(5, 2)
    with pytest.raises(RuntimeError, match="random_"):
        tp.zeros(3, dtype=tp.uint8).random_(0, 1000)


def test_statistics_match_torch_distribution_of_same_parameters():
    # the same distributions as torch's fills: compare moments of both
    t = torch.empty(N).exponential_(3.0).numpy()
    a = _np(tp.empty(N).exponential_(3.0))
    assert abs(a.mean() - t.mean()) < 0.01 and abs(a.std() - t.std()) < 0.01
    t = torch.empty(N).geometric_(0.6).numpy()
    a = _np(tp.empty(N).geometric_(0.6))
    assert abs(a.mean() - t.mean()) < 0.02
    assert math.isclose(float(tp.normal(0.0, 1.0, (N,)).std()), 1.0, abs_tol=0.01)
