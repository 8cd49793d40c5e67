"""Fused attention in CUDA regions (issue 12 figure): matmul(q, kᵀ)·c →
softmax → matmul(·, v) becomes one `_attention` call whose kernel keeps the
scores on chip (online softmax) and reads q, k, v through their strides.
Without a GPU: which chains are rewritten (`_stax_cuda_externs`), that the
rewritten graph computes the original (run on the CPU, `_attention` is the
unfused reference), and that the kernel compiles with NVRTC. On a GPU:
tp.compile under strict_native against a float64 NumPy reference, for ragged
tiles, narrow and unequal head dims, strided heads, both load variants, large
scores, and a whole transformer encoder block."""
import math

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay import _C

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")


def _attn(q, k, v):
    return tp.matmul(q, k.transpose(-2, -1)).mul(1.0 / math.sqrt(q.shape[-1])).softmax(-1).matmul(v)


def _attn_div(q, k, v):
    return (tp.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])).softmax(-1) @ v


def _attn_noscale(q, k, v):
    return tp.matmul(q, k.permute(0, 2, 1)).softmax(-1) @ v


def _sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def _heads(x, w):
    """Self-attention heads read straight from a projection: [B, T, 3·H·D] -> q, k, v [B, H, T, D]."""
    B, T, _ = x.shape
    qkv = (x @ w).view(B, T, 3, 4, 16)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    o = F.scaled_dot_product_attention(q, k, v)
    return o.transpose(1, 2).reshape(B, T, 64)


def _qkv(B=2, H=3, L=20, S=24, D=16, DV=None, dt=tp.float32, seed=0):
    tp.manual_seed(seed)
    shape = (B, H) if H else (B,)
    return (tp.randn(*shape, L, D).to(dt), tp.randn(*shape, S, D).to(dt), tp.randn(*shape, S, DV or D).to(dt))


def _reference(q, k, v, scale=None):
    q, k, v = (np.asarray(t.cpu().numpy(), dtype=np.float64) for t in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


# name: (function, args) that take the fused call
FUSED = {
    "mul_scale": (_attn, _qkv()),
    "div_scale": (_attn_div, _qkv()),
    "no_scale_rank3": (_attn_noscale, _qkv(H=0)),
    "sdpa": (_sdpa, _qkv()),
    "dv_differs": (_attn, _qkv(DV=8)),
    "head_dim_64": (_attn, _qkv(D=64)),
}

NOT_FUSED = {
    # A mask between the scores and softmax: not the chain the kernel computes.
    "masked": (lambda q, k, v: (tp.matmul(q, k.transpose(-2, -1)) + 1.0).softmax(-1) @ v, _qkv()),
    # Heads wider than the kernel's 64.
    "head_dim_80": (_attn, _qkv(D=80)),
    # The probabilities are a result too: they must reach memory.
    "weights_returned": (lambda q, k, v: (lambda p: (p @ v, p))(tp.matmul(q, k.transpose(-2, -1)).softmax(-1)),
                         _qkv()),
    # softmax over the queries, not the keys.
    "softmax_dim_2": (lambda q, k, v: tp.matmul(q, k.transpose(-2, -1)).softmax(2) @ v, _qkv()),
    # A key batch broadcast against the queries' batch.
    "broadcast_k": (_attn, (_qkv()[0], tp.randn(1, 3, 24, 16), tp.randn(1, 3, 24, 16))),
    # float64: the kernel is float32 only.
    "float64": (_attn, _qkv(dt=tp.float64)),
}


@pytest.mark.parametrize("name", sorted(FUSED))
def test_attention_chains_take_the_fused_call(name):
    fn, args = FUSED[name]
    got = _C._stax_cuda_externs(_C._capture(fn, *args))
    assert got == ["_attention"]


@pytest.mark.parametrize("name", sorted(NOT_FUSED))
def test_other_chains_are_left_alone(name):
    fn, args = NOT_FUSED[name]
    assert "_attention" not in _C._stax_cuda_externs(_C._capture(fn, *args))


def test_transformer_block_attention_is_fused():
    m = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).eval()
    with tp.no_grad():
        gm = _C._capture(lambda x: m(x), tp.randn(2, 10, 64))
    got = _C._stax_cuda_externs(gm)
    assert got.count("_attention") == 1 and "matmul" not in got
    # The result is planned heads-inner: merging the heads needs no copy kernel, and the
    # generated kernels left are the two residual + layer_norm rows.
    kernels = [k[0] for k in _C._stax_cuda_kernels(gm)]
    assert len(kernels) == 2 and not any("clone" in k for k in kernels)


@pytest.mark.parametrize("name", sorted(FUSED) + ["heads_from_projection"])
def test_rewritten_graph_computes_the_original(name):
    if name == "heads_from_projection":
        fn, args = _heads, (tp.randn(2, 12, 32), tp.randn(32, 192) / 6)
    else:
        fn, args = FUSED[name]
    gm = _C._stax_attention_pass(_C._capture(fn, *args))
    assert "_attention" in gm.code
    got, want = gm(*args), fn(*args)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_rewrite_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("TP_CUDA_FUSED_ATTENTION", "0")
    fn, args = FUSED["mul_scale"]
    assert "_attention" not in _C._stax_cuda_externs(_C._capture(fn, *args))


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
def test_attention_kernel_sources_compile(arch):
    srcs = [(n, s) for n, s in tp.cuda._kernel_sources() if n.startswith("tp_attention")]
    assert sorted(n for n, _ in srcs) == ["tp_attention_f32", "tp_attention_f32_v4"]
    for name, src in srcs:
        assert tp.cuda._nvrtc_compile(src, name, arch)[:4] == b"\x7fELF"


# ---------------------------------------------------------------- with a GPU

SHAPES = {
    "one_tile": dict(B=2, H=3, L=20, S=24, D=16),
    "ragged_tiles": dict(B=2, H=2, L=130, S=77, D=40),  # L, S not multiples of 64
    "full_tiles": dict(B=2, H=8, L=256, S=256, D=64),
    "odd_head_dim": dict(B=1, H=2, L=65, S=129, D=33),  # scalar loads (rows not 16-byte aligned)
    "dv_differs": dict(B=2, H=2, L=70, S=90, D=24, DV=56),
    "rank3": dict(B=3, H=0, L=100, S=31, D=64),
    "one_key": dict(B=2, H=2, L=9, S=1, D=8),
}


def _check(fn, args, ref, rtol=2e-5, atol=2e-5):
    assert _C._stax_cuda_externs(_C._capture(fn, *args)) == ["_attention"]
    f = tp.compile(fn, strict_native=True)
    got = f(*[a.cuda() for a in args])
    np.testing.assert_allclose(got.cpu().numpy(), ref, rtol=rtol, atol=atol)
    return got


@gpu
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_fused_attention_matches_float64(name):
    args = _qkv(**SHAPES[name])
    _check(_attn, args, _reference(*args))


@gpu
def test_fused_attention_with_strided_heads():
    # q, k, v are [B, H, T, D] views of one projection (head stride 16, row stride 192): read in place.
    x, w = tp.randn(2, 100, 32), tp.randn(32, 192) / 6
    f = tp.compile(_heads, strict_native=True)
    got = f(x.cuda(), w.cuda()).cpu().numpy()
    np.testing.assert_allclose(got, _heads(x, w).numpy(), rtol=1e-4, atol=1e-4)


@gpu
def test_fused_attention_on_a_transposed_key_layout():
    # k with unit stride along the keys, not along d (the scalar-load variant).
    q, k, v = _qkv(B=2, H=2, L=70, S=80, D=32)
    kt = k.transpose(-2, -1).contiguous().transpose(-2, -1)
    _check(_attn, (q, kt, v), _reference(q, k, v))


@gpu
def test_large_scores_stay_finite():
    # Scores in the thousands: exp would overflow without the running maximum.
    q, k, v = _qkv(B=1, H=2, L=96, S=200, D=64)
    q = q * 40.0
    got = _check(_attn, (q, k, v), _reference(q, k, v), rtol=1e-4, atol=1e-4)
    assert np.isfinite(got.cpu().numpy()).all()


@gpu
def test_fused_attention_is_deterministic():
    args = _qkv(B=2, H=4, L=128, S=192, D=64)
    f = tp.compile(_attn, strict_native=True)
    a, b = f(*[t.cuda() for t in args]), f(*[t.cuda() for t in args])
    np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())


@gpu
def test_transformer_block_compiled_matches_eager():
    tp.manual_seed(0)
    m = nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True).eval()
    x = tp.randn(4, 70, 128)
    with tp.no_grad():
        want = m(x).numpy()
        m = m._apply(lambda t: t.to("cuda"))
        got = tp.compile(m, strict_native=True)(x.cuda()).cpu().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
