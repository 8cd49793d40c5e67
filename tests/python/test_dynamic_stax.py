"""Dynamic shapes through the default backend (Stax), tested as a user would:
tp.compile(fn) / dynamic=True / tp.mark_dynamic, called at many sizes (0, 1, 2,
primes, large, inside and outside declared ranges), results compared with eager
at every size, and the number of versions (num_specializations) checked against
the issue's figures: 64 sizes with dynamic=True -> at most 2 versions, 8 sizes
with the default -> at most 3. strict_native=True makes a region Stax cannot
generate an error instead of a silent eager fallback."""
import os
import random

os.environ.setdefault("TP_SYMBOLIC_STRICT", "1")  # a wrong shape rule is an error here, not a specialization

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tensorplay as tp  # noqa: E402
import tensorplay.nn as nn  # noqa: E402
import tensorplay.nn.functional as F  # noqa: E402


def close(a, b, tol=1e-4):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y, tol)
        return
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    assert a.dtype == b.dtype
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)


def stax(fn, dynamic=True, strict=True):
    return tp.compile(fn, dynamic=dynamic, strict_native=strict)


SIZES = [2, 3, 5, 7, 8, 13, 31, 64, 97, 257, 1031, 4099]


def test_example_1_1_64_sizes_dynamic_true_at_most_two_versions():
    f = lambda x, w: ((x + w).relu() * 2).sum(-1)  # noqa: E731
    cf = stax(f)
    w = tp.randn(33)
    for n in range(2, 66):
        x = tp.randn(n, 33)
        close(cf(x, w), f(x, w))
    assert cf.num_specializations <= 2


def test_default_eight_sizes_at_most_three_versions_and_correct():
    f = lambda x, w: ((x + w).relu() * 2).sum(-1)  # noqa: E731
    cf = stax(f, dynamic=None)
    w = tp.randn(40)
    for n in [8, 16, 3, 5, 64, 11, 12, 100]:
        x = tp.randn(n, 40)
        close(cf(x, w), f(x, w))
    assert cf.num_specializations <= 3


@pytest.mark.parametrize("dynamic", [True, None])
def test_sizes_zero_one_two_primes_large(dynamic):
    f = lambda x: (x.exp() - x.amax(1, keepdim=True)).sum(1) * 0.5 + x.mean(1)  # noqa: E731
    cf = stax(f, dynamic=dynamic)
    rng = random.Random(1)
    for r in [0, 1, 2, 3, 1, 0, 17, 4099, 2]:
        c = rng.choice([1, 2, 3, 7, 61, 128])
        x = tp.randn(r, c)
        close(cf(x, ), f(x))


def test_random_shapes_inside_and_outside_declared_range():
    f = lambda x: F.softmax(x * 2, -1) + x.sum(0)  # noqa: E731
    cf = stax(f, dynamic=None)
    rng = random.Random(2)
    for _ in range(12):
        n = rng.randint(2, 64)
        x = tp.mark_dynamic(tp.randn(n, 6), 0, min=2, max=64)
        close(cf(x), f(x))
    assert cf.num_specializations == 1
    for n in [65, 200, 1]:
        x = tp.randn(n, 6)
        close(cf(x), f(x))
    assert cf.num_specializations >= 2


def test_shape_branch_both_sides():
    def f(x):
        if x.shape[0] > 16:
            return (x * 2).sum(0)
        return (x - 1).amax(0)
    cf = stax(f)
    for n in [3, 40, 5, 17, 16, 100, 2]:
        x = tp.randn(n, 9)
        close(cf(x), f(x))
    assert cf.num_specializations == 2


def test_views_reshapes_reductions_over_symbolic_dims():
    def f(x):
        n, m = x.shape
        y = x.reshape(n * m).view(n, m).t().contiguous()
        z = x.transpose(0, 1).reshape(m, n).sum(1)
        return y.mean(0), z, x.unsqueeze(0).expand(2, n, m).sum(0), x[1:, ::2].sum(), x.flatten().cumsum(0)
    cf = stax(f)
    for n, m in [(3, 4), (5, 7), (13, 2), (31, 64), (97, 5)]:
        x = tp.randn(n, m)
        close(cf(x), f(x))
    assert cf.num_specializations == 1


def test_softmax_layer_norm_matmul_linear_cat_indexing():
    W = tp.randn(24, 16)
    b = tp.randn(24)
    g = tp.randn(24)

    def f(x, y):
        h = F.linear(x, W, b)
        h = F.layer_norm(h, (24,), g, None)
        s = F.softmax(h @ h.t(), -1)
        c = tp.cat([h, x @ W.t()], 0)
        return s, c[-1], c[2:].mean(0), F.log_softmax(y, 0), tp.cat([x, x], 1)[:, 3]
    cf = stax(f)
    for n in [2, 3, 7, 29, 64, 101]:
        x, y = tp.randn(n, 16), tp.randn(n + 3)
        close(cf(x, y), f(x, y))
    assert cf.num_specializations == 1


def test_in_place_update_of_symbolic_input_and_view_outputs():
    def f(x, y):
        x.mul_(2).add_(1)
        y[1:] += x[:-1].sum(1)
        return x.t(), y[::2], x.view(-1)
    cf = stax(f)
    for n in [3, 8, 31, 257]:
        x, y = tp.randn(n, 5), tp.randn(n)
        xe, ye = x.clone(), y.clone()
        got = cf(x, y)
        want = f(xe, ye)
        close(got, want)
        close(x, xe)
        close(y, ye)
        got[0].mul_(0)  # outputs that are views of inputs write through, as in eager
        assert float(x.abs().sum()) == 0.0
    assert cf.num_specializations == 1


def test_first_level_entry_with_symbolic_version():
    f = lambda x: x * 2 + x.sum()  # noqa: E731
    cf = stax(f)
    a, b = tp.randn(7), tp.randn(11)
    for _ in range(3):
        close(cf(a), f(a))
        close(cf(b), f(b))
    a.add_(1)  # same object, new version: re-checked, not a stale entry
    close(cf(a), f(a))
    a.data = tp.randn(13)
    close(cf(a), f(a))
    assert cf.num_specializations == 1


class MLP(nn.Module):
    def __init__(self, d=16, h=32):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.d, self.heads = d, heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = MLP(d, 4 * d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.softmax((q @ k.transpose(-2, -1)) * (1.0 / (d // h) ** 0.5), -1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


SEQS = [3, 5, 7, 8, 11, 13, 16, 17, 23, 29, 31, 32, 41, 64, 97, 128]


@pytest.mark.parametrize("dynamic", [True, None])
def test_mlp_many_batch_sizes(dynamic):
    tp.manual_seed(0)
    m = MLP()
    cf = stax(m, dynamic=dynamic)
    with tp.no_grad():
        for n in [4, 9, 2, 31, 64, 5, 17, 128]:
            x = tp.randn(n, 16)
            close(cf(x), m(x))
    assert cf.num_specializations <= (1 if dynamic else 2)


@pytest.mark.parametrize("dynamic", [True, None])
def test_transformer_block_16_sequence_lengths_several_batches(dynamic):
    tp.manual_seed(0)
    m = Block()
    cf = stax(m, dynamic=dynamic)
    with tp.no_grad():
        for b in [2, 3, 4]:
            # Each batch size starts at another length than itself: a call whose batch
            # size equals its length shares one symbol for both (duck sizing) and the
            # next length then builds one more version.
            for t in SEQS[b:] + SEQS[:b]:
                x = tp.randn(b, t, 16)
                close(cf(x), m(x))
    # dynamic=True: one version (batch and sequence both symbolic); the default:
    # the first capture static, then each dim that changed symbolic.
    assert cf.num_specializations <= (1 if dynamic else 3)


def test_reshape_to_one_symbolic_dim_stays_symbolic():
    # Regression: a one-element reshape size (x.reshape(n * m), x[:, :1].reshape(n))
    # was not carried to the view node, so the capture specialized every size.
    fs = [lambda x: x.reshape(x.shape[0] * x.shape[1]) * 2,
          lambda x: x.reshape([x.shape[0] * x.shape[1]]) + 1,
          lambda x: x[:, :1].reshape(x.shape[0]) * 2]
    for f in fs:
        cf = stax(f)
        for n, m in [(2, 3), (5, 7), (13, 2), (31, 64)]:
            x = tp.randn(n, m)
            close(cf(x), f(x))
        assert cf.num_specializations == 1


def test_derived_size_of_one_is_guarded_not_dropped():
    # Regression: x[1:] at x.size(0) = 2 has a symbolic size (s0 - 1) whose example
    # value is 1; Stax took it for a size-1 dim and summed one row at every size.
    fs = [lambda x: x[1:].sum(), lambda x: x[1:, ::2].sum(), lambda x: x[:-1].sum(0) * 2]
    for f in fs:
        cf = stax(f)
        for n, m in [(2, 3), (5, 7), (13, 2), (31, 64), (2, 5)]:
            x = tp.randn(n, m)
            close(cf(x), f(x))
        assert cf.num_specializations <= 2  # size 2 fixed, every other size symbolic


def test_literal_indices_keep_derived_dims_symbolic():
    # Regression: x[2:] / x[:, 3] on a size computed from symbols (a cat) took the
    # literal for a size and specialized every call.
    fs = [lambda x: tp.cat([x, x], 0)[2:].mean(0), lambda x: tp.cat([x, x], 1)[:, 3],
          lambda x: x[3:] * 2, lambda x: x[:, -2] + x[-1, 2]]
    for f in fs:
        cf = stax(f)
        for n in [5, 7, 29, 64, 101]:
            x = tp.randn(n, n + 2)
            close(cf(x), f(x))
        assert cf.num_specializations == 1


@pytest.mark.parametrize("dynamic", [True, None])
def test_multihead_attention_many_lengths(dynamic):
    tp.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    ln = nn.LayerNorm(16)

    def f(x):
        h = ln(x)
        return mha(h, h, h, need_weights=False)[0] + x

    cf = tp.compile(f, dynamic=dynamic)  # fallbacks allowed: the result must match eager
    with tp.no_grad():
        for b, t in [(2, 5), (2, 9), (3, 9), (3, 16), (4, 31), (2, 64), (5, 7), (1, 3), (2, 1)]:
            x = tp.randn(b, t, 16)
            close(cf(x), f(x))
    assert cf.num_specializations <= 5  # sizes 1 are versions of their own


def test_symbolic_inner_dim_of_matmul_and_sizes_zero():
    f = lambda a, b: F.softmax(a @ b, -1).sum(0)  # noqa: E731
    cf = stax(f)
    for m, k, n in [(3, 5, 7), (8, 2, 4), (31, 17, 13), (64, 64, 3)]:
        a, b = tp.randn(m, k), tp.randn(k, n)
        close(cf(a, b), f(a, b))
    assert cf.num_specializations == 1
    g = lambda x: (x * 2).sum(-1) + 1  # noqa: E731
    cg = stax(g)
    for n in [0, 5, 0, 7]:
        x = tp.randn(n, 3)
        close(cg(x), g(x))


def test_grad_through_symbolic_stax_capture():
    w = tp.randn(8, 4, requires_grad=True)

    def f(x):
        return F.gelu(x @ w).pow(2).mean()

    cf = tp.compile(f, dynamic=True)
    for n in [3, 17, 64]:
        x = tp.randn(n, 8)
        w.grad = None
        cf(x).backward()
        g1 = w.grad.clone()
        w.grad = None
        f(x).backward()
        close(g1, w.grad)


@pytest.mark.parametrize("dynamic", [False, True])
def test_transposed_reshape_written_by_its_source_loops(dynamic):
    # The head merge of attention: a reshape of a computed (transposed) value is
    # written by the source's loops; every size must still give eager's values,
    # as an output, before a GEMM and inside a pointwise chain.
    def out(x):
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)

    def gemm(x, w):
        return (x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1) @ w).relu()

    def chain(x):
        return (x * 2).transpose(1, 2).reshape(x.shape[0], x.shape[2], -1) + 1

    w = tp.randn(256, 32)
    fs = [tp.compile(f, dynamic=dynamic, strict_native=True) for f in (out, gemm, chain)]
    for s in [(8, 4, 128, 64), (3, 4, 7, 64), (2, 4, 33, 64), (5, 3, 9, 7)]:
        x = tp.randn(*s)
        np.testing.assert_array_equal(fs[0](x).numpy(), out(x).numpy())
        np.testing.assert_array_equal(fs[2](x).numpy(), chain(x).numpy())
        if s[1] * s[3] == 256:
            np.testing.assert_allclose(fs[1](x, w).numpy(), gemm(x, w).numpy(), rtol=1e-5, atol=1e-5)


# --- layer_norm / group_norm with symbolic normalized dims -------------------------

def _generated_sources(cache_dir):
    return [p.read_text() for p in sorted(cache_dir.rglob("kernel.cpp"))]


def _ln_reference(x, w, b, eps=1e-5):
    x64 = x.numpy().astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    y = (x64 - mean) / np.sqrt(x64.var(-1, keepdims=True) + eps)
    if w is not None:
        y = y * w.numpy()
    if b is not None:
        y = y + b.numpy()
    return y


def test_layer_norm_over_symbolic_features_is_one_fused_kernel(cache_dir):
    # dynamic=True makes the normalized (feature) dim a size variable: layer_norm
    # keeps its Welford rule (the element count read at run time) and fuses with
    # its neighbours, instead of running as an extern call of the eager kernel.
    def f(x, w, b):
        return F.gelu(F.layer_norm(x * 2, (x.shape[-1],), w, b)) + 1

    def g(x):
        return F.layer_norm(x, (x.shape[-1],))

    cf, cg = stax(f), stax(g)
    for rows, d in [(3, 13), (2, 2), (5, 3), (2, 97), (7, 1031), (3, 4099), (4, 64)]:
        x = tp.randn(rows, d) * 3 + 1
        w, b = tp.randn(d), tp.randn(d)
        ref = _ln_reference(x * 2, w, b)
        ref = 0.5 * ref * (1 + np.vectorize(__import__("math").erf)(ref / np.sqrt(2))) + 1
        np.testing.assert_allclose(cf(x, w, b).numpy(), ref, rtol=1e-4, atol=1e-4, err_msg=str((rows, d)))
        np.testing.assert_allclose(cg(x).numpy(), _ln_reference(x, None, None), rtol=1e-4, atol=1e-4)
        close(cf(x, w, b), f(x, w, b))
    assert cf.num_specializations == 1 and cg.num_specializations == 1
    # A feature dim of 1 is specialized (a new version), still right: all zeros plus bias.
    x1 = tp.randn(4, 1)
    close(cg(x1), g(x1))
    sources = _generated_sources(cache_dir)
    assert sources
    for src in sources:
        assert "ext(ctx" not in src  # no extern call at all: layer_norm and gelu are generated
    symbolic = [s for s in sources if "tp_size" in s]
    assert symbolic and all("welford over" in s for s in symbolic)


def test_layer_norm_in_a_dynamic_transformer_block_is_not_an_extern_call(cache_dir):
    tp.manual_seed(0)
    m = Block()
    cf = stax(m, dynamic=True)
    with tp.no_grad():
        for b, t in [(2, 5), (3, 17), (4, 31), (2, 64)]:
            x = tp.randn(b, t, 16)
            close(cf(x), m(x))
    assert cf.num_specializations == 1
    src = "\n".join(_generated_sources(cache_dir))
    assert "welford over" in src
    assert "layer_norm" in src
    import re
    assert not re.search(r"// extern \d+: (native_)?layer_norm", src)


def test_group_norm_with_symbolic_batch_and_spatial_dims(cache_dir):
    w, b = tp.randn(6), tp.randn(6)

    def f(x):
        return F.group_norm(x, 3, w, b).relu()

    cf = stax(f)
    for s in [(2, 6, 5, 7), (3, 6, 2, 13), (5, 6, 11, 3), (2, 6, 32, 32)]:
        x = tp.randn(*s)
        close(cf(x), f(x))
    assert cf.num_specializations <= 2
    for src in _generated_sources(cache_dir):
        assert "ext(ctx" not in src


def test_layer_norm_declared_short_rows_take_two_passes(cache_dir):
    # A feature dim declared at most 1024 long stays within the two-pass
    # Welford form (the static kernel's for short rows); unbounded, one pass.
    def f(x):
        return F.layer_norm(x, (x.shape[-1],))

    cf = tp.compile(f, dynamic=None, strict_native=True)
    for d in [5, 64, 1024, 3]:
        x = tp.randn(6, d)
        tp.mark_dynamic(x, 1, min=2, max=1024)
        close(cf(x), f(x))
    assert cf.num_specializations == 1
    src = "\n".join(s for s in _generated_sources(cache_dir) if "tp_size" in s)
    assert "two passes" in src and "one pass" not in src


# --- split / chunk / unbind of symbolic dims -----------------------------------------

def _check_pieces(cf, fn, x):
    got, want = cf(x), fn(x)
    got, want = (list(got), list(want)) if isinstance(want, (tuple, list)) else ([got], [want])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w, 1e-5)


def test_chunk_of_symbolic_dim_keeps_every_dim_symbolic():
    # q, k, v = qkv.chunk(3, dim=-1) under dynamic=True: the feature dim is a
    # symbol too; the guard size % 3 == 0 makes every piece size // 3 long, so
    # batch, length and features stay symbolic (one version). It used to
    # specialize all three sizes of qkv (a version per call).
    def f(qkv):
        q, k, v = qkv.chunk(3, dim=-1)
        return (q * k).sum(-1) + v.amax(-1), q * k

    def g(qkv):
        q, k, v = qkv.chunk(3, dim=-1)
        return q * v + k  # the pieces have one symbolic size

    cf, cg = stax(f), stax(g)
    for b, t, d in [(2, 5, 12), (3, 7, 12), (4, 11, 30), (5, 31, 3 * 97), (2, 3, 6)]:
        _check_pieces(cf, f, tp.randn(b, t, d))
        _check_pieces(cg, g, tp.randn(b, t, d))
    assert cf.num_specializations == 1 and cg.num_specializations == 1
    # A size that is not a multiple of 3 fails the guard: a new version, right values.
    _check_pieces(cf, f, tp.randn(3, 5, 13))
    assert cf.num_specializations == 2


def test_chunk_with_a_ragged_last_piece_specializes_only_the_split_dim():
    def f(x):
        return [p * 2 for p in x.chunk(3, dim=1)]

    cf = stax(f)
    for b in [2, 3, 5, 17, 64]:
        _check_pieces(cf, f, tp.randn(b, 10))  # 10 = 4 + 4 + 2: pieces depend on the size
    assert cf.num_specializations == 1  # the batch dim stayed symbolic
    _check_pieces(cf, f, tp.randn(4, 11))
    assert cf.num_specializations == 2


def test_split_with_constant_size_guards_the_number_of_pieces():
    def f(x):
        return [p * 2 + 1 for p in x.split(5, dim=1)]

    cf = stax(f)
    for b, n in [(2, 14), (3, 13), (4, 11), (6, 15), (9, 12)]:  # three pieces: 10 < n <= 15
        _check_pieces(cf, f, tp.randn(b, n))
    assert cf.num_specializations == 1
    _check_pieces(cf, f, tp.randn(3, 21))  # five pieces: another version
    assert cf.num_specializations == 2


def test_unbind_specializes_only_the_unbound_dim():
    def f(x):
        a, b, c = x.unbind(1)
        return a * b - c

    cf = stax(f)
    for b, t in [(2, 5), (4, 7), (5, 11), (7, 31)]:
        _check_pieces(cf, f, tp.randn(b, 3, t))
    assert cf.num_specializations == 1


@pytest.mark.parametrize("op", ["unbind", "split1", "chunk2"])
def test_pieces_of_a_dim_of_size_two_count_right_at_other_sizes(op):
    # With two pieces their bounds (0, 1, 2) do not look computed from the size;
    # the number of pieces still depends on it, so a call with three must not
    # reuse a version that returns two.
    fns = {
        "unbind": lambda x: [p * 2 for p in x.unbind(1)],
        "split1": lambda x: [p * 2 for p in x.split(1, dim=1)],
        "chunk2": lambda x: [p * 2 for p in x.chunk(2, dim=1)],
    }
    f = fns[op]
    cf = stax(f)
    for b, n in [(4, 2), (5, 3), (6, 4), (7, 2), (3, 5)]:
        _check_pieces(cf, f, tp.randn(b, n, 5))


@pytest.mark.parametrize("k", range(4))
def test_symbolic_var_mean_sums_each_row_once_for_the_mean(k):
    # var_mean reaches Stax as var + mean; with symbolic sizes var is the
    # two-pass rule (sum, then squared deviations) and the mean reads its sum / N
    # instead of a third reduction.
    fn = [lambda x: tp.var_mean(x, 1), lambda x: tp.std_mean(x, 1, keepdim=True), lambda x: tp.var_mean(x, 0),
          lambda x: (x.var(1, correction=0), x.mean(1) * 2, x.mean(1, keepdim=True) + x)][k]
    cf = stax(fn)
    for r, c in [(3, 5), (2, 7), (37, 53), (97, 1031)]:
        x = tp.randn(r, c) + 2
        close(cf(x), fn(x), 1e-5)
    assert cf.num_specializations == 1
    assert cf.last_source.count("(sum over") == 2, cf.last_source


REST_SIZES = [2, 3, 5, 7, 15, 16, 17, 31, 33, 63, 64, 65, 97, 127, 1000, 4099]


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
@pytest.mark.parametrize("op", ["sum", "amax", "amin", "prod", "softmax", "logsumexp"])
def test_symbolic_row_reductions_rest_after_the_vector_loop(op, dtype):
    # With AVX-512 a reduction over a symbolic row ends in one loop of vector
    # steps, the last one masked (TailMode::MaskedLoop): the rows here leave
    # 0..W*lanes-1 elements after the W-vector loop, and values with a sign
    # and magnitude such that a dead lane's 0 (or exp(0) = 1) would win a max,
    # a min, change a product or a sum. Sizes 0 and 1 go to their own versions.
    fns = {
        "sum": lambda x: (x * 3 - 1).sum(-1),
        "amax": lambda x: (x - 5).amax(-1),
        "amin": lambda x: (x + 5).amin(-1),
        "prod": lambda x: (x * 0.01 + 1).prod(-1),
        "softmax": lambda x: F.softmax(x, -1),
        "logsumexp": lambda x: ((x - 3).exp().sum(-1) + 1e-3).log(),
    }
    f = fns[op]
    cf = stax(f)
    tol = 2e-5 if dtype == tp.float32 else 1e-10
    for n in ([1] if op in ("amax", "amin") else [0, 1]) + REST_SIZES:  # an empty max is an error
        for rows in (3, 2):
            x = tp.rand(rows, n, dtype=dtype) * 2 - 1 if n else tp.zeros(rows, 0, dtype=dtype)
            got, want = cf(x), f(x)
            assert got.dtype == dtype
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol, err_msg=str((op, rows, n)))
    # a non-contiguous view (every other column of a wider tensor) at the same sizes
    for n in (5, 17, 65, 1000):
        base = tp.rand(4, 2 * n, dtype=dtype) * 2 - 1
        x = base[:, ::2]
        np.testing.assert_allclose(cf(x).numpy(), f(x).numpy(), rtol=tol, atol=tol, err_msg=str((op, "view", n)))
    fresh = stax(f)
    fresh(tp.rand(3, 97, dtype=dtype))
    src = fresh.last_source  # the symbolic version's: it reads the sizes
    assert "tp_size" in src
    if "avx512" in open("/proc/cpuinfo").read():
        assert "the last one masked" in src and "tp_mask_below(" in src
