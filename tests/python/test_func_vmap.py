"""tp.func.vmap against torch.func.vmap and against a Python loop over the batch."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.func import vmap, grad, grad_and_value, jacrev, jacfwd, jvp, functional_call

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _np(x):
    if isinstance(x, (tuple, list)):
        return [_np(v) for v in x]
    if isinstance(x, dict):
        return {k: _np(v) for k, v in x.items()}
    if hasattr(x, "detach"):
        return x.detach().numpy()
    return np.asarray(x)


def _close(a, b, tol=1e-4):
    a, b = _np(a), _np(b)
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, tol)
        return
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _close(a[k], b[k], tol)
        return
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def _loop(f, args, in_dims=0):
    """The reference: f per example, stacked at 0."""
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    B = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    outs = [f(*[a.select(d, i) if d is not None else a for a, d in zip(args, dims)]) for i in range(B)]
    if isinstance(outs[0], tuple):
        return tuple(tp.stack([o[k] for o in outs]) for k in range(len(outs[0])))
    return tp.stack(outs)


def check(f_tp, f_torch, *arrays, in_dims=0, out_dims=0, tol=1e-4, loop=True):
    tps = [tp.tensor(a) for a in arrays]
    tos = [torch.tensor(a) for a in arrays]
    got = vmap(f_tp, in_dims, out_dims)(*tps)
    want = torch.func.vmap(f_torch, in_dims, out_dims)(*tos)
    _close(got, want, tol)
    if loop and out_dims == 0:
        _close(got, _loop(f_tp, tps, in_dims), tol)
    return got


# ---- pointwise ----
@pytest.mark.parametrize("name", ["exp", "sin", "tanh", "sigmoid", "relu", "abs", "neg"])
def test_unary(name):
    check(getattr(tp, name), getattr(torch, name), _rand(4, 3))


def test_binary_broadcasting_and_scalars():
    a, b, c = _rand(5, 3, 4), _rand(4), _rand(5, 1)
    check(lambda x, y, z: x * y + z - 2.5 / (1 + x * x), lambda x, y, z: x * y + z - 2.5 / (1 + x * x), a, b, c,
          in_dims=(0, None, 0))
    check(lambda x, y: tp.where(x > y, x, 0.0), lambda x, y: torch.where(x > y, x, 0.0), a, b, in_dims=(0, None))
    check(lambda x, y: tp.maximum(x, y) ** 2, lambda x, y: torch.maximum(x, y) ** 2, _rand(3, 4), _rand(3, 2, 4))


def test_in_dims_nonzero_and_negative():
    a = _rand(3, 6, 2)
    check(lambda x: x.exp().sum(0), lambda x: x.exp().sum(0), a, in_dims=1, loop=False)
    check(lambda x: x * 2, lambda x: x * 2, a, in_dims=-1, loop=False)
    _close(vmap(lambda x: x * 2, in_dims=-1)(tp.tensor(a)), (tp.tensor(a) * 2).movedim(-1, 0))


# ---- reductions ----
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "logsumexp"])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, True), (-1, False)])
def test_reductions_dim(op, dim, keepdim):
    check(lambda x: getattr(tp, op)(x, dim, keepdim=keepdim), lambda x: getattr(torch, op)(x, dim, keepdim=keepdim),
          _rand(4, 3, 5))


def test_reductions_all_and_max_dim():
    a = _rand(4, 3, 5)
    check(lambda x: x.sum(), lambda x: x.sum(), a)
    check(lambda x: x.mean(), lambda x: x.mean(), a)
    check(lambda x: x.max(dim=1)[0] + x.max(dim=0).values.sum(), lambda x: x.max(dim=1)[0] + x.max(dim=0).values.sum(), a)
    check(lambda x: x.max(), lambda x: x.max(), a)  # the reduce-all overload: per example


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_family(dim):
    a = _rand(3, 4, 5)
    check(lambda x: tp.softmax(x, dim), lambda x: torch.softmax(x, dim), a)
    check(lambda x: F.log_softmax(x, dim), lambda x: TF.log_softmax(x, dim), a)


# One line per operator, run through tp and torch alike (m is the module):
# each must match torch.func.vmap and a loop, and run through a batching rule.
_OPS = {
    "clamp": lambda m, x: m.clamp(x, -0.5, 0.5), "pow": lambda m, x: x.abs() ** 1.5, "var": lambda m, x: x.var(1),
    "std_keepdim": lambda m, x: x.std(0, keepdim=True), "std_all": lambda m, x: x.std(),
    "cumsum": lambda m, x: x.cumsum(-1), "flip": lambda m, x: x.flip(0), "roll": lambda m, x: x.roll(1, 1),
    "sort": lambda m, x: x.sort(1)[0], "topk": lambda m, x: x.topk(2, dim=-1)[1], "argmax": lambda m, x: x.argmax(-1),
    "argmax_all": lambda m, x: x.argmax(), "max_all": lambda m, x: x.max(), "min_dim": lambda m, x: x.min(1)[1],
    "gather": lambda m, x: x.gather(1, m.tensor([[0, 1], [2, 2], [4, 0]])),
    "index_select": lambda m, x: x.index_select(1, m.tensor([4, 0])), "narrow": lambda m, x: x.narrow(1, 1, 3),
    "split": lambda m, x: x.split(2, 1)[1], "chunk": lambda m, x: x.chunk(3, 0)[2], "unbind": lambda m, x: x.unbind(1)[2],
    "movedim": lambda m, x: x.movedim(0, -1), "tril": lambda m, x: x.tril(), "triu": lambda m, x: x.triu(1),
    "norm": lambda m, x: x.norm(dim=1), "prod": lambda m, x: x.prod(1), "amin": lambda m, x: x.amin((0, 1)),
    "mean_dims": lambda m, x: x.mean((0, -1)), "logical": lambda m, x: (x > 0) & (x < 1),
    "any": lambda m, x: (x > 1).any(1), "all": lambda m, x: (x > -3).all(), "repeat": lambda m, x: x.repeat(2, 1, 1),
    "tile": lambda m, x: x.tile((2,)), "masked_fill": lambda m, x: x.masked_fill(x > 0, 0.0),
    "softplus": lambda m, x: m.nn.functional.softplus(x), "silu": lambda m, x: m.nn.functional.silu(x),
    "elu": lambda m, x: m.nn.functional.elu(x), "leaky_relu": lambda m, x: m.nn.functional.leaky_relu(x, 0.1),
    "bce_logits": lambda m, x: m.nn.functional.binary_cross_entropy_with_logits(x, (x > 0).float()),
    "l1_loss": lambda m, x: m.nn.functional.l1_loss(x, x * 0.5),
    "cosine": lambda m, x: m.nn.functional.cosine_similarity(x, x + 1, dim=-1),
    "normalize": lambda m, x: m.nn.functional.normalize(x, dim=-1), "pad": lambda m, x: m.nn.functional.pad(x, (1, 2)),
    "avg_pool": lambda m, x: m.nn.functional.avg_pool1d(x, 2), "max_pool": lambda m, x: m.nn.functional.max_pool1d(x, 2),
    "einsum": lambda m, x: m.einsum("ij,kj->ik", x, x), "diagonal": lambda m, x: m.diagonal(x[:, :3]),
    "trace": lambda m, x: m.trace(x[:, :3]), "to_double": lambda m, x: x.to(m.float64) * 2,
    "full_like": lambda m, x: m.full_like(x, 3.0) + x, "linspace": lambda m, x: x * m.linspace(0, 1, 5),
    "minimum": lambda m, x: m.minimum(x, x.flip(0)), "max_other": lambda m, x: m.max(x, x * 2),
    "inv": lambda m, x: m.linalg.inv(x[:, :3] + 3 * m.eye(3)), "det": lambda m, x: m.linalg.det(x[:, :3] + 3 * m.eye(3)),
    "solve": lambda m, x: m.linalg.solve(x[:, :3] + 3 * m.eye(3), x[:, 3]),
}


@pytest.mark.parametrize("name", sorted(_OPS))
def test_op_table(name):
    f = _OPS[name]
    tp.func.vmap_fallback_counts.clear()
    check(lambda x: f(tp, x), lambda x: f(torch, x), _rand(4, 3, 5))
    assert not tp.func.vmap_fallback_counts, dict(tp.func.vmap_fallback_counts)


# ---- views and shapes ----
def test_views():
    a = _rand(3, 4, 6)
    check(lambda x: x.view(24).reshape(2, 12), lambda x: x.view(24).reshape(2, 12), a)
    check(lambda x: x.reshape(-1, 3), lambda x: x.reshape(-1, 3), a)
    check(lambda x: x.permute(1, 0), lambda x: x.permute(1, 0), a)
    check(lambda x: x.transpose(0, 1).t(), lambda x: x.transpose(0, 1).t(), a)
    check(lambda x: x.unsqueeze(-1).unsqueeze(0).squeeze(0), lambda x: x.unsqueeze(-1).unsqueeze(0).squeeze(0), a)
    check(lambda x: x[0:1].expand(5, 6), lambda x: x[0:1].expand(5, 6), a)
    check(lambda x: x.unsqueeze(0).expand(2, 4, 6), lambda x: x.unsqueeze(0).expand(2, 4, 6), a)
    check(lambda x: x[1:3, ::2] + x[0, 1] + x[:, -1].sum(), lambda x: x[1:3, ::2] + x[0, 1] + x[:, -1].sum(), a)
    check(lambda x: x[..., 2], lambda x: x[..., 2], a)


def test_cat_stack_mixed_batching():
    a, b = _rand(3, 4, 2), _rand(4, 2)
    check(lambda x, y: tp.cat([x, y], 0), lambda x, y: torch.cat([x, y], 0), a, b, in_dims=(0, None))
    check(lambda x, y: tp.cat([x, y], -1), lambda x, y: torch.cat([x, y], -1), a, b, in_dims=(0, None))
    check(lambda x, y: tp.stack([x, y], 1), lambda x, y: torch.stack([x, y], 1), a, b, in_dims=(0, None))


def test_index_with_tensor():
    a = _rand(3, 5, 2, 4)
    idx = [0, 3, 3]
    check(lambda x: x[tp.tensor(idx)], lambda x: x[torch.tensor(idx)], a)
    check(lambda x: x[:, tp.tensor([1, 0])], lambda x: x[:, torch.tensor([1, 0])], a)
    check(lambda x: x[tp.tensor(idx), :, tp.tensor([1, 0, 1])], lambda x: x[torch.tensor(idx), :, torch.tensor([1, 0, 1])], a)
    with pytest.raises(RuntimeError, match="vmap: nonzero gives results of different shapes"):
        vmap(lambda x: x[x > 0.5])(tp.tensor(a))
    # a batched index: per example
    ids = np.array([[0, 1], [4, 4], [2, 0]])
    got = vmap(lambda x, i: x[i])(tp.tensor(a), tp.tensor(ids))
    _close(got, torch.func.vmap(lambda x, i: x[i])(torch.tensor(a), torch.tensor(ids)))


# ---- matmul family ----
@pytest.mark.parametrize("sa,sb,da,db", [
    ((4, 3), (3, 2), 0, None), ((4, 3), (3, 2), None, 0), ((4, 3), (3, 2), 0, 0),
    ((3,), (3,), 0, 0), ((3,), (3, 2), 0, None), ((4, 3), (3,), None, 0), ((2, 4, 3), (3, 5), 0, 0),
    ((4, 3), (2, 3, 5), 0, 0), ((3,), (2, 3, 5), 0, None), ((3,), (3,), 0, None), ((3,), (3,), None, 0),
    ((3,), (3, 2), None, 0), ((4, 3), (3,), 0, None), ((2, 4, 3), (3,), 0, 0), ((3,), (2, 3, 5), None, 0)])
def test_matmul(sa, sb, da, db):
    B = 5
    a = _rand(*((B,) + sa if da == 0 else sa))
    b = _rand(*((B,) + sb if db == 0 else sb), seed=1)
    check(lambda x, y: x @ y, lambda x, y: x @ y, a, b, in_dims=(da, db))


def test_mm_bmm_linear_dot_outer():
    a, b, w, v = _rand(5, 4, 3), _rand(3, 2), _rand(6, 3), _rand(5, 3)
    check(lambda x, y: tp.mm(x, y), lambda x, y: torch.mm(x, y), a, b, in_dims=(0, None))
    check(lambda x: tp.bmm(x, x.transpose(1, 2)), lambda x: torch.bmm(x, x.transpose(1, 2)), _rand(5, 2, 4, 3))
    check(lambda x, y: F.linear(x, y), lambda x, y: TF.linear(x, y), a, w, in_dims=(0, None))
    check(lambda x, y: F.linear(x, y), lambda x, y: TF.linear(x, y), _rand(4, 3), _rand(4, 6, 3), in_dims=(None, 0))
    check(lambda x, y: tp.dot(x, y), lambda x, y: torch.dot(x, y), v, v * 2)
    check(lambda x, y: tp.dot(x, y), lambda x, y: torch.dot(x, y), v, _rand(3), in_dims=(0, None))
    check(lambda x, y: tp.outer(x, y), lambda x, y: torch.outer(x, y), v, _rand(4), in_dims=(0, None))


# ---- nn.functional ----
def test_nn_functional():
    x = _rand(4, 6, 5)
    check(lambda t: F.gelu(t) + F.relu(t) + tp.tanh(t), lambda t: TF.gelu(t) + TF.relu(t) + torch.tanh(t), x)
    check(lambda t: F.layer_norm(t, (5,)), lambda t: TF.layer_norm(t, (5,)), x)
    w, b = _rand(5), _rand(5, seed=2)
    check(lambda t, w, b: F.layer_norm(t, (5,), w, b), lambda t, w, b: TF.layer_norm(t, (5,), w, b), x, w, b,
          in_dims=(0, None, None))
    y = _rand(4, 6, 5, seed=3)
    check(lambda a, b: F.mse_loss(a, b), lambda a, b: TF.mse_loss(a, b), x, y)
    check(lambda a, b: F.mse_loss(a, b, reduction="sum"), lambda a, b: TF.mse_loss(a, b, reduction="sum"), x, y)


@pytest.mark.parametrize("batched_target", [True, False])
def test_cross_entropy(batched_target):
    logits = _rand(4, 6, 5)
    tgt = np.random.default_rng(0).integers(0, 5, size=(4, 6) if batched_target else (6,))
    got = vmap(F.cross_entropy, (0, 0 if batched_target else None))(tp.tensor(logits), tp.tensor(tgt))
    want = torch.func.vmap(TF.cross_entropy, (0, 0 if batched_target else None))(torch.tensor(logits),
                                                                                 torch.tensor(tgt))
    _close(got, want)


def test_embedding_and_single_sample_cross_entropy():
    w = _rand(10, 4)
    ids = np.array([[1, 2, 9], [0, 0, 3]])
    check(lambda i, w: F.embedding(i, w), lambda i, w: TF.embedding(i, w), ids, w, in_dims=(0, None))
    logits, tgt = _rand(6, 5), np.array([0, 4, 2, 2, 1, 3])
    check(lambda x, y: F.cross_entropy(x, y), lambda x, y: TF.cross_entropy(x, y), logits, tgt)
    check(lambda x, y: F.cross_entropy(x, y, reduction="sum"), lambda x, y: TF.cross_entropy(x, y, reduction="sum"),
          logits, tgt)


def test_squeeze_flatten_unflatten():
    a = _rand(4, 3, 1, 2)
    check(lambda x: x.squeeze(), lambda x: x.squeeze(), a)
    check(lambda x: x.flatten(), lambda x: x.flatten(), a)
    check(lambda x: x.unflatten(0, (3, 1)), lambda x: x.unflatten(0, (3, 1)), a)


@pytest.mark.parametrize("shape", [(3, 2, 6, 6), (3, 2, 2, 6, 6)])
def test_pool2d(shape):
    tp.func.vmap_fallback_counts.clear()
    x = _rand(*shape)
    check(lambda t: F.max_pool2d(t, 2) + F.avg_pool2d(t, 2), lambda t: TF.max_pool2d(t, 2) + TF.avg_pool2d(t, 2), x)
    assert not tp.func.vmap_fallback_counts


def test_conv2d():
    img, k, bias = _rand(3, 2, 7, 7), _rand(4, 2, 3, 3), _rand(4)
    check(lambda x, w, b: F.conv2d(x.unsqueeze(0), w, b, padding=1), lambda x, w, b: TF.conv2d(x.unsqueeze(0), w, b,
          padding=1), img, k, bias, in_dims=(0, None, None))
    check(lambda x, w: F.conv2d(x, w, stride=2), lambda x, w: TF.conv2d(x, w, stride=2), _rand(3, 2, 2, 7, 7), k,
          in_dims=(0, None))
    # one kernel per example (vmap over model copies): grouped into one convolution
    check(lambda x, w: F.conv2d(x.unsqueeze(0), w), lambda x, w: TF.conv2d(x.unsqueeze(0), w), img,
          _rand(3, 4, 2, 3, 3), in_dims=(0, 0))
    check(lambda x, w, b: F.conv2d(x, w, b, padding=1, stride=2), lambda x, w, b: TF.conv2d(x, w, b, padding=1, stride=2),
          _rand(2, 2, 6, 6), _rand(3, 4, 2, 3, 3), _rand(3, 4), in_dims=(None, 0, 0))
    check(lambda x, w: F.conv2d(x, w, groups=2), lambda x, w: TF.conv2d(x, w, groups=2), _rand(3, 2, 4, 6, 6),
          _rand(3, 4, 2, 3, 3), in_dims=(0, 0))


# ---- factories and randomness ----
def test_factories_like():
    a = _rand(3, 4)
    check(lambda x: tp.zeros_like(x) + tp.ones_like(x) * x, lambda x: torch.zeros_like(x) + torch.ones_like(x) * x, a)
    check(lambda x: x + tp.arange(4), lambda x: x + torch.arange(4), a)


def test_randomness_modes():
    x = tp.zeros(6, 3)
    with pytest.raises(RuntimeError, match="vmap: .*random"):
        vmap(lambda t: t + tp.randn(3))(x)
    d = vmap(lambda t: t + tp.randn(3), randomness="different")(x)
    assert d.shape == (6, 3) and not np.allclose(d[0].numpy(), d[1].numpy())
    s = vmap(lambda t: t + tp.randn(3), randomness="same")(x)
    assert s.shape == (6, 3) and np.allclose(s.numpy(), s[0:1].numpy())
    d = vmap(lambda t: t + tp.randn_like(t), randomness="different")(x)
    assert not np.allclose(d[0].numpy(), d[1].numpy())
    with pytest.raises(ValueError, match="vmap: randomness"):
        vmap(lambda t: t, randomness="sometimes")


def test_randomness_same_in_the_per_example_fallback():
    # jvp inside makes the whole function run per example: 'same' must still share the draws
    f = lambda x: jvp(tp.sin, (x,), (tp.ones_like(x),))[1] * 0 + tp.randn(3)
    s = vmap(f, randomness="same")(tp.zeros(4, 3))
    assert np.allclose(s.numpy(), s[0:1].numpy())
    d = vmap(f, randomness="different")(tp.zeros(4, 3))
    assert not np.allclose(d[0].numpy(), d[1].numpy())
    with pytest.raises(RuntimeError, match="vmap: .*randomness='error'"):
        vmap(f)(tp.zeros(4, 3))


def test_dropout_randomness():
    x = tp.ones(6, 1000)
    d = vmap(lambda t: F.dropout(t, 0.5, training=True), randomness="different")(x)
    assert 0.4 < float((d == 0).float().mean()) < 0.6
    assert not np.allclose(d[0].numpy(), d[1].numpy())
    s = vmap(lambda t: F.dropout(t, 0.5, training=True), randomness="same")(x)
    assert np.allclose(s.numpy(), s[0:1].numpy())


# ---- in-place ----
def test_inplace_on_batched_values():
    a = _rand(4, 3)
    check(lambda x: x.clone().add_(1).mul_(2), lambda x: x.clone().add_(1).mul_(2), a)

    def f(x):
        y = x * 1
        y[0] = 5.0
        return y
    check(f, f, a)


def test_inplace_write_to_input():
    x = tp.tensor(_rand(4, 3))
    ref = x.clone()
    vmap(lambda t: t.mul_(2))(x)
    _close(x, ref * 2)


def test_inplace_into_unmapped_input_is_refused():
    x, y = tp.tensor(_rand(4, 3)), tp.zeros(3)
    with pytest.raises(RuntimeError, match="vmap: the function writes in place into an unmapped input"):
        vmap(lambda a, b: b.add_(a), (0, None))(x, y)
    # a fresh tensor made inside the function may take batched values (the loop's result)
    check(lambda a: tp.zeros(3).add_(a), lambda a: torch.zeros(3) + a, _rand(4, 3))


# ---- pytrees, in_dims/out_dims ----
def test_pytree_inputs_outputs():
    a, b = tp.tensor(_rand(4, 3)), tp.tensor(_rand(3, 4))

    def f(d, pair):
        return {"s": d["x"] + pair[0], "p": (d["x"] * pair[1].sum(), pair[0])}

    got = vmap(f, in_dims=({"x": 0}, (None, 1)))({"x": a}, (tp.tensor(_rand(3)), b))
    want = torch.func.vmap(lambda d, p: {"s": d["x"] + p[0], "p": (d["x"] * p[1].sum(), p[0])},
                           in_dims=({"x": 0}, (None, 1)))({"x": torch.tensor(a.numpy())},
                                                          (torch.tensor(_rand(3)), torch.tensor(b.numpy())))
    _close(got["s"], want["s"])
    _close(got["p"][0], want["p"][0])
    _close(got["p"][1], want["p"][1])  # an unbatched output is expanded over the batch
    assert got["p"][1].shape == (4, 3)


def test_out_dims():
    a = _rand(4, 3, 2)
    check(lambda x: x * 2, lambda x: x * 2, a, out_dims=1)
    check(lambda x: (x.sum(0), x), lambda x: (x.sum(0), x), a, out_dims=(1, -1))
    got = vmap(lambda x, y: (x * 2, y), in_dims=(0, None), out_dims=(0, None))(tp.tensor(a), tp.ones(3))
    assert got[1].shape == (3,)


def test_non_tensor_args_and_kwargs():
    a = _rand(4, 3)
    got = vmap(lambda x, k, name: x * k if name == "mul" else x + k, in_dims=(0, None, None))(tp.tensor(a), 3, "mul")
    _close(got, a * 3)
    got = vmap(lambda x, scale=1.0: x * scale)(tp.tensor(a), scale=2.0)
    _close(got, a * 2)


def test_top_level_alias():
    assert tp.vmap is tp.func.vmap


def test_chunk_size():
    a = _rand(7, 3)
    check(lambda x: x.softmax(-1), lambda x: x.softmax(-1), a)
    _close(vmap(lambda x: x.softmax(-1), chunk_size=3)(tp.tensor(a)), torch.tensor(a).softmax(-1))


# ---- nesting ----
def test_nested_vmap():
    a, b = _rand(2, 3, 4), _rand(3, 4, seed=5)
    f_tp = lambda x, y: (x * y).sum(-1) + x.softmax(-1)[..., 0]
    f_to = lambda x, y: (x * y).sum(-1) + x.softmax(-1)[..., 0]
    got = vmap(vmap(f_tp, (0, 0)), (0, None))(tp.tensor(a), tp.tensor(b))
    want = torch.func.vmap(torch.func.vmap(f_to, (0, 0)), (0, None))(torch.tensor(a), torch.tensor(b))
    _close(got, want)
    got = vmap(vmap(f_tp, (1, None)), (0, 0))(tp.tensor(_rand(2, 4, 3, 4)), tp.tensor(_rand(2, 4)))
    want = torch.func.vmap(torch.func.vmap(f_to, (1, None)), (0, 0))(torch.tensor(_rand(2, 4, 3, 4)),
                                                                    torch.tensor(_rand(2, 4)))
    _close(got, want)
    # the inner vmap called inside a lambda: its capture nests in the outer one, no per-example loop
    tp.func.vmap_fallback_counts.clear()
    got = vmap(lambda x: vmap(lambda r: r.exp().sum())(x) * 2)(tp.tensor(a))
    _close(got, np.exp(a).sum(-1) * 2)
    got = vmap(lambda x, y: vmap(lambda r, s: (r * s).softmax(-1), (0, None))(x, y).sum(0), (0, None))(
        tp.tensor(a), tp.tensor(b[0]))
    want = torch.func.vmap(lambda x, y: torch.func.vmap(lambda r, s: (r * s).softmax(-1), (0, None))(x, y).sum(0),
                           (0, None))(torch.tensor(a), torch.tensor(b[0]))
    _close(got, want)
    assert not tp.func.vmap_fallback_counts
    # a transform inside the inner vmap of a lambda: the outer runs per example, still correct
    got = vmap(lambda x: vmap(grad(lambda r: (r.sin() * r).sum()))(x))(tp.tensor(a))
    want = torch.func.vmap(lambda x: torch.func.vmap(torch.func.grad(lambda r: (r.sin() * r).sum()))(x))(
        torch.tensor(a))
    _close(got, want)


def test_nested_out_dims():
    a = _rand(2, 3, 4)
    got = vmap(vmap(lambda x: x * 2, out_dims=1), out_dims=0)(tp.tensor(a))
    want = torch.func.vmap(torch.func.vmap(lambda x: x * 2, out_dims=1))(torch.tensor(a))
    _close(got, want)


# ---- composition with the other transforms ----
def test_per_sample_grads_of_model():
    model = tp.nn.Sequential(tp.nn.Linear(5, 8), tp.nn.Tanh(), tp.nn.Linear(8, 3))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = _rand(6, 5), np.random.default_rng(1).integers(0, 3, size=6)

    def loss(p, xb, yb):
        out = functional_call(model, p, (xb.unsqueeze(0),))
        return F.cross_entropy(out, yb.unsqueeze(0))

    got = vmap(grad(loss), in_dims=(None, 0, 0))(params, tp.tensor(x), tp.tensor(y))
    loop = [grad(loss)(params, tp.tensor(x[i]), tp.tensor(y[i])) for i in range(6)]
    for k in params:
        _close(got[k], tp.stack([g[k] for g in loop]))

    tmodel = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    tparams = {k: torch.tensor(v.numpy()) for k, v in params.items()}

    def tloss(p, xb, yb):
        return TF.cross_entropy(torch.func.functional_call(tmodel, p, (xb.unsqueeze(0),)), yb.unsqueeze(0))

    want = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(tparams, torch.tensor(x), torch.tensor(y))
    _close(got, {k: want[k] for k in got})


def test_grad_and_value_and_argnums():
    w, x = _rand(3), _rand(5, 3)
    f = lambda w, x: (tp.sin(w * x) ** 2).sum()
    tf = lambda w, x: (torch.sin(w * x) ** 2).sum()
    g, v = vmap(grad_and_value(f, argnums=(0, 1)), (None, 0))(tp.tensor(w), tp.tensor(x))
    tg, tv = torch.func.vmap(torch.func.grad_and_value(tf, argnums=(0, 1)), (None, 0))(torch.tensor(w),
                                                                                       torch.tensor(x))
    _close(g, list(tg))
    _close(v, tv)


def test_grad_has_aux():
    w, xs = _rand(3), _rand(5, 3)
    f = lambda w, x: ((w * x).sum() ** 2, x.sum())
    tf = lambda w, x: ((w * x).sum() ** 2, x.sum())
    g, aux = vmap(grad(f, has_aux=True), (None, 0))(tp.tensor(w), tp.tensor(xs))
    tg, taux = torch.func.vmap(torch.func.grad(tf, has_aux=True), (None, 0))(torch.tensor(w), torch.tensor(xs))
    _close(g, tg)
    _close(aux, taux)


def test_jvp_inside_vmap():
    x, t = _rand(4, 3), _rand(4, 3, seed=9)
    got = vmap(lambda a, b: jvp(lambda z: z.sin() * z, (a,), (b,)))(tp.tensor(x), tp.tensor(t))
    want = torch.func.vmap(lambda a, b: torch.func.jvp(lambda z: z.sin() * z, (a,), (b,)))(torch.tensor(x),
                                                                                            torch.tensor(t))
    _close(list(got), list(want))


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_jacobians_inside_vmap(jac):
    x, w = _rand(4, 3), _rand(2, 3)
    f = lambda a, w: tp.tanh(w @ a)
    tf = lambda a, w: torch.tanh(w @ a)
    got = vmap(getattr(tp.func, jac)(f), (0, None))(tp.tensor(x), tp.tensor(w))
    want = torch.func.vmap(getattr(torch.func, jac)(tf), (0, None))(torch.tensor(x), torch.tensor(w))
    _close(got, want)
    got = vmap(getattr(tp.func, jac)(f, argnums=1), (0, None))(tp.tensor(x), tp.tensor(w))
    want = torch.func.vmap(getattr(torch.func, jac)(tf, argnums=1), (0, None))(torch.tensor(x), torch.tensor(w))
    _close(got, want)


def test_hessian_per_example():
    x = _rand(4, 3)
    f = lambda a: (a.sin() * a.sum()).sum()
    tf = lambda a: (a.sin() * a.sum()).sum()
    got = vmap(jacrev(jacrev(f)))(tp.tensor(x))
    want = torch.func.vmap(torch.func.jacrev(torch.func.jacrev(tf)))(torch.tensor(x))
    _close(got, want, 1e-3)
    _close(got, tp.stack([jacrev(jacrev(f))(tp.tensor(x[i])) for i in range(4)]), 1e-4)
    _close(vmap(jacfwd(jacrev(f)))(tp.tensor(x)), want, 1e-3)


def test_vmap_of_vjp_fn():
    # the rows of a Jacobian from one vjp_fn over a batch of cotangents
    x = tp.tensor(_rand(3))
    out, fn = tp.func.vjp(lambda a: a.sin() * a.sum(), x)
    got = vmap(fn)(tp.eye(3))[0]
    want = torch.func.jacrev(lambda a: a.sin() * a.sum())(torch.tensor(x.numpy()))
    _close(got, want)


def test_grad_through_vmap():
    x, w = _rand(5, 3), _rand(3, 2)
    f = lambda w: vmap(lambda r, w: tp.tanh(r @ w).sum(), (0, None))(tp.tensor(x), w).pow(2).sum()
    tf = lambda w: torch.func.vmap(lambda r, w: torch.tanh(r @ w).sum(), (0, None))(torch.tensor(x), w).pow(2).sum()
    _close(grad(f)(tp.tensor(w)), torch.func.grad(tf)(torch.tensor(w)))
    tw = tp.tensor(w, requires_grad=True)
    f(tw).backward()
    _close(tw.grad, torch.func.grad(tf)(torch.tensor(w)))


def test_grad_of_per_sample_grads():
    x, w = _rand(5, 3), _rand(3, seed=1)
    f = lambda w, x: (w * x).sin().sum() ** 2
    outer = lambda w: vmap(grad(f), (None, 0))(w, tp.tensor(x)).pow(2).sum()
    touter = lambda w: torch.func.vmap(torch.func.grad(f), (None, 0))(w, torch.tensor(x)).pow(2).sum()
    _close(grad(outer)(tp.tensor(w)), torch.func.grad(touter)(torch.tensor(w)))


def test_vmap_of_vmap_of_grad():
    x = _rand(2, 3, 4)
    f = lambda a: (a.exp() * a).sum()
    got = vmap(vmap(grad(f)))(tp.tensor(x))
    want = torch.func.vmap(torch.func.vmap(torch.func.grad(lambda a: (a.exp() * a).sum())))(torch.tensor(x))
    _close(got, want)


def test_vmap_under_compile():
    f = lambda x, w: tp.tanh(x @ w).softmax(-1)
    c = tp.compile(vmap(f, (0, None)))
    x, w = tp.tensor(_rand(5, 3)), tp.tensor(_rand(3, 4))
    _close(c(x, w), vmap(f, (0, None))(x, w), 1e-5)


# ---- errors ----
def test_error_batch_size_mismatch():
    with pytest.raises(ValueError, match="vmap: .*different sizes"):
        vmap(lambda a, b: a + b)(tp.ones(3, 2), tp.ones(4, 2))


def test_error_in_dim_for_non_tensor():
    with pytest.raises(ValueError, match="vmap: in_dim 0 .*float"):
        vmap(lambda a, k: a * k)(tp.ones(3, 2), 2.0)


def test_error_dim_out_of_range():
    with pytest.raises(ValueError, match="vmap: in_dim 2 is out of range"):
        vmap(lambda a: a, in_dims=2)(tp.ones(3, 2))
    with pytest.raises(ValueError, match="vmap: out_dim 3 is out of range"):
        vmap(lambda a: a, out_dims=3)(tp.ones(3, 2))
    with pytest.raises(ValueError, match="vmap: .*in_dims"):
        vmap(lambda a, b: a, in_dims=(0,))(tp.ones(3), tp.ones(3))


def test_error_non_tensor_output():
    with pytest.raises(ValueError, match="vmap: .*returned a float"):
        vmap(lambda a: 3.0)(tp.ones(3, 2))


def test_error_empty_batch():
    with pytest.raises(ValueError, match="vmap: the mapped dims have size 0"):
        vmap(lambda a: a)(tp.ones(0, 3))


def test_error_all_unmapped():
    with pytest.raises(ValueError, match="vmap: at least one"):
        vmap(lambda a: a, in_dims=None)(tp.ones(3))


def test_error_data_dependent_control_flow():
    with pytest.raises(RuntimeError, match="vmap: .*control flow"):
        vmap(lambda a: a if a.sum() > 0 else -a)(tp.ones(3, 2))
    with pytest.raises(RuntimeError, match=r"vmap: .*item\(\)"):
        vmap(lambda a: a * a.sum().item())(tp.ones(3, 2))
    with pytest.raises(RuntimeError, match="vmap: .*control flow"):
        vmap(lambda a: a * float(a[0]))(tp.ones(3, 2))
    # the Tensor methods are restored after the refused capture
    assert tp.ones(2).sum().item() == 2.0


def test_graph_node_binding():
    # the binding the interpreter reads: args by name / number / None, attrs as Python values
    gm = tp.compiler.capture(lambda x: F.layer_norm(x * 2.0, (3,)).sum(1), tp.ones(2, 3))
    calls = [n for n in gm._node_info if n["op"] == "call_function"]
    assert [n["target"] for n in calls] == ["mul", "layer_norm", "sum"]
    assert calls[0]["args"] == ["arg0", 2.0] and calls[0]["shape"] == (2, 3)
    assert calls[1]["args"] == ["mul", None, None] and calls[1]["attrs"] == {"normalized_shape": [3], "eps": 1e-05}
    assert calls[2]["attrs"]["dim"] == [1] and calls[2]["attrs"]["keepdim"] is False
    out = tp._C._call_op("sum", [tp.ones(2, 3)], {"dim": [1], "keepdim": True, "dtype": tp.float64})[0]
    assert out.shape == (2, 1) and out.dtype == tp.float64
    with pytest.raises(ValueError, match="_call_op: no operator named 'nope'"):
        tp._C._call_op("nope", [], {})
    with pytest.raises(TypeError, match="_call_op"):
        tp._C._call_op("sum", [object()], {})


def test_fallback_warns_when_asked():
    import tensorplay._vmap as V
    V.warn_fallbacks = True
    try:
        with pytest.warns(UserWarning, match="vmap: no batching rule for index"):
            vmap(lambda x, i: x[i])(tp.ones(3, 2), tp.tensor([[0], [1], [1]]))
    finally:
        V.warn_fallbacks = False


def test_fallback_is_counted():
    tp.func.vmap_fallback_counts.clear()
    a, i = _rand(3, 4), np.array([[0, 1], [3, 3], [2, 0]])
    check(lambda x, i: tp.cumsum(x, 0)[i] + x.max(), lambda x, i: torch.cumsum(x, 0)[i] + x.max(), a, i)
    assert tp.func.vmap_fallback_counts["index"] == 1
    assert tp.func.vmap_fallback_counts["cumsum"] == 0 and tp.func.vmap_fallback_counts["max"] == 0
