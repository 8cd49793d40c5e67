"""The operator set users of PyTorch expect, checked by name: every operator of
the list below exists as tensorplay.<name> (or tensorplay.nn.functional.<name>),
runs on a small input and agrees with the Tensor method where PyTorch has one.
Numerical checks live in the per-family test files."""
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

UNARY = """exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh asinh
acosh atanh erf erfc erfinv sigmoid logit relu abs sign floor ceil round trunc frac reciprocal square neg
isnan isinf isfinite logical_not""".split()
UNARY_F = "gelu silu mish softplus elu leaky_relu hardtanh".split()
BINARY = """add sub mul div floor_divide remainder fmod pow atan2 maximum minimum hypot eq ne lt le gt ge
logical_and logical_or logical_xor""".split()
BITWISE = "bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift".split()
REDUCTIONS = "sum mean prod amax amin max min argmax argmin var std norm logsumexp all any".split()
SHAPE = """view reshape flatten unflatten transpose permute expand squeeze unsqueeze narrow select t unbind
split chunk flip roll repeat tile tril triu diagonal""".split()


def _x(shape=(3, 4)):
    return (tp.rand(*shape) * 0.8 + 0.1)  # inside every unary domain used here


@pytest.mark.parametrize("name", UNARY)
def test_unary_function_and_method(name):
    x = _x()
    y = getattr(tp, name)(x)
    assert y.shape == x.shape
    assert getattr(x, name)().shape == x.shape


@pytest.mark.parametrize("name", UNARY_F)
def test_unary_activations_in_functional(name):
    x = _x() - 0.5
    assert getattr(F, name)(x).shape == x.shape


def test_gelu_tanh_and_bitwise_not():
    assert F.gelu(_x(), approximate="tanh").shape == (3, 4)
    assert tp.bitwise_not(tp.arange(4)).numpy().tolist() == [-1, -2, -3, -4]


@pytest.mark.parametrize("name", BINARY)
def test_binary(name):
    x, y = _x(), _x((4,))
    assert getattr(tp, name)(x, y).shape == (3, 4)
    assert getattr(x, name)(y).shape == (3, 4)


@pytest.mark.parametrize("name", BITWISE)
def test_bitwise(name):
    a, b = tp.arange(6), tp.tensor([1])
    assert getattr(tp, name)(a, b).dtype == tp.int64


def test_alpha_rounding_mode_and_ternaries():
    x, y = _x(), _x()
    assert tp.add(x, y, alpha=2).shape == tp.sub(x, y, alpha=3).shape
    assert tp.div(x, y, rounding_mode="floor").shape == tp.div(x, y, rounding_mode="trunc").shape
    for r in (tp.where(x > 0.5, x, y), tp.addcmul(x, x, y, value=2), tp.addcdiv(x, x, y, value=0.5),
              tp.lerp(x, y, 0.3), tp.clamp(x, 0.2, 0.6), tp.clamp(x, min=0.3)):
        assert r.shape == (3, 4)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions(name):
    x = _x()
    if name in ("all", "any"):
        x = x > 0.5
    args = ((0, 1),) if name == "logsumexp" else ()  # PyTorch requires its dim
    assert getattr(tp, name)(x, *args).dim() == 0
    assert getattr(x, name)(*args).dim() == 0


def test_reduction_forms():
    x = _x()
    assert x.max(1).indices.dtype == tp.int64 and x.min(dim=0).values.shape == (4,)
    assert x.var(1, correction=0).shape == (3,) and x.std(0, keepdim=True).shape == (1, 4)
    assert tp.cumsum(x, 1).shape == x.shape and tp.cumprod(x, 0).shape == x.shape
    assert tp.argmax(x, 1).shape == (3,) and tp.logsumexp(x, 1).shape == (3,)


def test_normalization_and_activations_with_state():
    x = _x((2, 3, 4))
    assert tp.softmax(x, -1).shape == x.shape and tp.log_softmax(x, 1).shape == x.shape
    assert F.layer_norm(x, (4,)).shape == x.shape and F.rms_norm(x, (4,)).shape == x.shape
    rm, rv = tp.zeros(3), tp.ones(3)
    assert F.batch_norm(x, rm, rv, training=True).shape == x.shape
    assert F.batch_norm(x, rm, rv, training=False).shape == x.shape
    assert F.dropout(x, 0.5, training=True).shape == x.shape


def test_linear_algebra():
    a, b = _x((2, 3, 4)), _x((4, 5))
    assert tp.matmul(a, b).shape == (2, 3, 5) and (a @ b).shape == (2, 3, 5)
    assert tp.mm(_x((3, 4)), b).shape == (3, 5) and tp.bmm(a, _x((2, 4, 5))).shape == (2, 3, 5)
    assert tp.addmm(_x((3, 5)), _x((3, 4)), b).shape == (3, 5)
    assert F.linear(_x((3, 4)), _x((5, 4)), _x((5,))).shape == (3, 5)
    assert tp.baddbmm(_x((2, 3, 5)), a, _x((2, 4, 5))).shape == (2, 3, 5)
    assert tp.einsum("bij,jk->bik", a, b).shape == (2, 3, 5)


@pytest.mark.parametrize("name", SHAPE)
def test_shape_ops_exist(name):
    assert callable(getattr(tp.Tensor, name))


def test_shape_ops_run():
    x = _x((2, 3, 4))
    assert x.flatten().shape == (24,) and x.unflatten(2, (2, 2)).shape == (2, 3, 2, 2)
    assert x.narrow(2, 1, 2).shape == (2, 3, 2) and len(x.unbind(0)) == 2
    assert len(x.split(2, dim=2)) == 2 and len(x.chunk(3, 1)) == 3
    assert tp.cat([x, x], 1).shape == (2, 6, 4) and tp.stack([x, x]).shape == (2, 2, 3, 4)
    assert x.flip(0).shape == x.shape and x.roll(1, 2).shape == x.shape
    assert x.repeat(1, 2, 1).shape == (2, 6, 4) and x.tile((2,)).shape == (2, 3, 8)
    m = _x((4, 4))
    assert m.tril().shape == m.triu(1).shape == (4, 4) and m.diagonal().shape == (4,)
    assert x[:, ::2, 1].shape == (2, 2) and m.t().shape == (4, 4)


def test_indexing_ops():
    x = _x((4, 5))
    idx = tp.tensor([0, 2])
    assert x[idx].shape == (2, 5) and x[x > 0.5].dim() == 1
    assert tp.index_select(x, 1, idx).shape == (4, 2)
    assert tp.gather(x, 1, tp.zeros(4, 2, dtype=tp.int64)).shape == (4, 2)
    assert tp.scatter(x, 1, tp.zeros(4, 1, dtype=tp.int64), _x((4, 1))).shape == x.shape
    assert tp.scatter_add(x, 1, tp.zeros(4, 1, dtype=tp.int64), _x((4, 1))).shape == x.shape
    assert tp.index_add(x, 0, idx, _x((2, 5))).shape == x.shape
    assert tp.masked_fill(x, x > 0.5, 0.0).shape == x.shape
    assert tp.masked_select(x, x > 0.5).dim() == 1 and tp.nonzero(x > 0.5).shape[1] == 2
    assert F.embedding(idx, x).shape == (2, 5) and F.one_hot(idx, 3).shape == (2, 3)


def test_nn_ops():
    x = _x((2, 3, 8, 8))
    assert F.conv2d(x, _x((4, 3, 3, 3)), stride=2, padding=1).shape == (2, 4, 4, 4)
    assert F.conv2d(x, _x((3, 1, 3, 3)), groups=3, dilation=2).shape == (2, 3, 4, 4)
    assert F.conv1d(_x((2, 3, 10)), _x((4, 3, 3))).shape == (2, 4, 8)
    assert F.max_pool2d(x, 2).shape == (2, 3, 4, 4) and F.avg_pool2d(x, 2).shape == (2, 3, 4, 4)
    assert F.adaptive_avg_pool2d(x, (1, 1)).shape == (2, 3, 1, 1)
    logits, target = _x((4, 5)), tp.tensor([0, 1, 4, 2])
    for loss in (F.mse_loss(logits, _x((4, 5))), F.cross_entropy(logits, target, label_smoothing=0.1),
                 F.cross_entropy(logits, target, ignore_index=1), F.nll_loss(tp.log_softmax(logits, 1), target),
                 F.binary_cross_entropy(_x((4,)), _x((4,))),
                 F.binary_cross_entropy_with_logits(_x((4,)), _x((4,)))):
        assert loss.dim() == 0


def test_factories_and_random():
    assert tp.empty(2, 3).shape == (2, 3) and tp.full((2,), 7).dtype == tp.int64
    assert tp.arange(0, 1, 0.25).shape == (4,) and tp.linspace(0, 1, 5).shape == (5,)
    assert tp.eye(3).shape == (3, 3) and tp.eye(2, 4).shape == (2, 4)
    x = _x()
    for f in (tp.zeros_like, tp.ones_like, tp.empty_like, tp.rand_like, tp.randn_like):
        assert f(x).shape == x.shape
    assert tp.full_like(x, 2).shape == x.shape
    assert tp.randint(0, 10, (5,)).dtype == tp.int64 and tp.randint(5, (3,)).shape == (3,)
    g = tp.Generator().manual_seed(3)
    a = tp.rand(4, generator=g)
    g.manual_seed(3)
    assert a.numpy().tolist() == tp.rand(4, generator=g).numpy().tolist()
    tp.manual_seed(1)
    b = tp.randn(3)
    tp.manual_seed(1)
    assert b.numpy().tolist() == tp.randn(3).numpy().tolist()


def test_common_pytorch_idioms_beyond_the_issue_list():
    x = tp.randn(4, 5)
    assert x.type(tp.float64).dtype == tp.float64 and x.new_zeros(2, 3).shape == (2, 3)
    assert x.new_full((2,), 3.0).dtype == x.dtype and x.new_tensor([1.0]).shape == (1,)
    assert sorted(tp.randperm(5).numpy().tolist()) == [0, 1, 2, 3, 4]
    assert tp.allclose(x, x) is True and tp.equal(x, x) is True and tp.isclose(x, x).all().item()
    assert x.repeat_interleave(2, dim=0).shape == (8, 5)
    v, i = tp.sort(x, dim=1)
    assert v.shape == i.shape == (4, 5) and tp.topk(x, 2).values.shape == (4, 2)
    assert x.argsort().shape == (4, 5) and x.median().dim() == 0
    assert tp.unique(tp.tensor([1, 2, 2])).numpy().tolist() == [1, 2]
    assert tp.is_tensor(x) and tp.numel(x) == 20 and tp.as_tensor([1, 2]).dtype == tp.int64
    assert tp.diag(tp.ones(3)).shape == (3, 3) and tp.ones(3, 3).trace().item() == 3.0
    a, b = tp.meshgrid(tp.arange(2), tp.arange(3), indexing="ij")
    assert a.shape == b.shape == (2, 3)
    assert x.clip(0, 1).max().item() <= 1 and tp.nan_to_num(x).shape == x.shape
    assert x.sum(axis=0).shape == (5,) and tp.count_nonzero(x).dim() == 0
    assert tp.ones(3, 3).triu_().sum().item() == 6 and tp.zeros(3, 3).fill_diagonal_(1).sum().item() == 3
