"""Adversarial user tests, round 3: compiled inference and eager parity with PyTorch.

Each test is a bug a new user hit: a silent wrong result, a crash or a misleading error.
Compiled results are compared with eager ones ("compiling is unobservable"), eager ones
with PyTorch's where torch is installed.
"""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F


# ---------------------------------------------------------------- in-place methods return self
def test_index_put_returns_the_callers_tensor_object():
    # x.index_put_(...) returned a second Python wrapper of x: `r is x` was False (every other
    # in-place method, and PyTorch, give back the caller's object).
    x = tp.zeros(3, 4)
    r = x.index_put_((tp.tensor([0, 0, 2]),), tp.ones(3, 4), accumulate=True)
    assert r is x
    assert x[0].tolist() == [2.0] * 4 and x[2].tolist() == [1.0] * 4
    r = tp.index_put_(x, (tp.tensor([1]),), tp.tensor(5.0))
    assert r is x and x[1].tolist() == [5.0] * 4


def test_index_put_in_a_compiled_function_returns_the_argument_as_eager():
    def f(x):
        return x.index_put_((tp.tensor([0, 0, 2]),), tp.ones(3, 4), accumulate=True)

    a, b = tp.zeros(3, 4), tp.zeros(3, 4)
    assert f(a) is a
    assert tp.compile(f)(b) is b
    assert tp.equal(a, b)


# ---------------------------------------------------------------- binary_cross_entropy's domain
@pytest.mark.parametrize("bad", [1.5, -0.2, float("inf")])
def test_binary_cross_entropy_refuses_inputs_outside_zero_one(bad):
    # Logits passed by mistake gave a silent NaN loss; PyTorch raises.
    x = tp.tensor([bad, 0.5])
    with pytest.raises(ValueError, match="binary_cross_entropy: all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(x, tp.tensor([1.0, 0.0]))
    with pytest.raises(RuntimeError):  # what code ported from PyTorch catches
        tp.nn.BCELoss()(x, tp.tensor([1.0, 0.0]))


def test_binary_cross_entropy_at_the_ends_of_its_domain_still_works():
    x = tp.tensor([0.0, 1.0, 0.5], requires_grad=True)
    loss = F.binary_cross_entropy(x, tp.tensor([1.0, 0.0, 1.0]))
    assert np.isfinite(loss.item())
    loss.backward()
    assert np.isfinite(x.grad.numpy()).all()


# ---------------------------------------------------------------- default dtype is part of the guard
def test_set_default_dtype_between_compiled_calls_selects_another_version():
    # The capture baked the default dtype into factories and promotion: after
    # tp.set_default_dtype(tp.float64) the compiled function kept returning float32.
    def f(x):
        return x + tp.zeros(3), tp.arange(3) * 0.5, tp.full((2,), 1.5), tp.tensor([1, 2]) / 2

    cf = tp.compile(f)
    x = tp.randn(3)
    assert [r.dtype for r in cf(x)] == [tp.float32] * 4
    old = tp.get_default_dtype()
    try:
        tp.set_default_dtype(tp.float64)
        eager, compiled = f(x), cf(x)
        assert [r.dtype for r in compiled] == [r.dtype for r in eager] == [tp.float64] * 4
        for e, c in zip(eager, compiled):
            np.testing.assert_allclose(c.numpy(), e.numpy())
    finally:
        tp.set_default_dtype(old)
    assert [r.dtype for r in cf(x)] == [tp.float32] * 4  # and back (the first-level entry too)


def test_a_default_dtype_change_is_named_in_the_recompile_log(capfd, monkeypatch):
    monkeypatch.setenv("TP_LOGS", "recompiles")
    cf = tp.compile(lambda x: x + tp.ones(2))
    x = tp.randn(2)
    cf(x)
    old = tp.get_default_dtype()
    try:
        tp.set_default_dtype(tp.float64)
        assert cf(x).dtype == tp.float64
    finally:
        tp.set_default_dtype(old)
    assert "default dtype" in capfd.readouterr().err


# ---------------------------------------------------------------- returning a dtype
def test_a_compiled_function_may_return_a_dtype():
    # `return y, y.dtype` raised CaptureError ("must return tensors, numbers, ...").
    def f(x):
        y = x * 2
        return y, y.dtype, (x > 0).dtype

    cf = tp.compile(f)
    for x in (tp.randn(3), tp.randn(3).double(), tp.tensor([1, 2])):
        y, dt, bdt = cf(x)
        assert dt == x.dtype and bdt == tp.bool
        assert tp.equal(y, x * 2)


# ---------------------------------------------------------------- integers out of range
@pytest.mark.parametrize("data", [2**63, [2**63], [1, 2**64], [[-2**63 - 1]]])
def test_tensor_of_an_int_beyond_int64_raises_clearly(data):
    # tp.tensor(2**63) wrapped silently to -2**63; [2**64] raised "NumPy dtype object".
    with pytest.raises(ValueError, match="out of range for int64"):
        tp.tensor(data)
    with pytest.raises(RuntimeError):
        tp.tensor(data)


def test_tensor_at_the_ends_of_int64_still_works():
    assert tp.tensor([2**63 - 1, -2**63]).tolist() == [2**63 - 1, -2**63]
    assert tp.tensor(2**63 - 1).item() == 2**63 - 1
    assert tp.tensor([1.5, 2**63]).dtype == tp.float32  # a float leaf makes it floating


@pytest.mark.parametrize("call", [
    lambda: tp.zeros(3, dtype=tp.uint8).fill_(300),
    lambda: tp.zeros(3, dtype=tp.int8).fill_(-129),
    lambda: tp.zeros(3, dtype=tp.int32).fill_(float("inf")),
    lambda: tp.zeros(3, dtype=tp.int64).fill_(float("nan")),
    lambda: tp.zeros(3, dtype=tp.float16).fill_(1e6),
    lambda: tp.full((2,), float("nan"), dtype=tp.int32),
    lambda: tp.full((2,), 300, dtype=tp.uint8),
    lambda: tp.full_like(tp.zeros(2, dtype=tp.int16), 40000),
])
def test_filling_a_value_the_dtype_cannot_hold_raises(call):
    # uint8 fill_(300) gave 44, full(nan, int32) gave 0: PyTorch raises for these.
    with pytest.raises(ValueError, match="cannot be converted to type"):
        call()


def test_fills_within_range_keep_working():
    assert tp.zeros(2, dtype=tp.uint8).fill_(255).tolist() == [255, 255]
    assert tp.zeros(2, dtype=tp.uint8).fill_(-1).tolist() == [255, 255]  # wraps, as PyTorch allows
    assert tp.zeros(2, dtype=tp.int8).fill_(-128).tolist() == [-128, -128]
    assert tp.zeros(2, dtype=tp.int32).fill_(1.7).tolist() == [1, 1]
    assert tp.zeros(2, dtype=tp.float16).fill_(float("-inf")).tolist() == [float("-inf")] * 2
    assert tp.zeros(2, dtype=tp.float16).fill_(65504.0).tolist() == [65504.0] * 2
    assert tp.zeros(2, dtype=tp.bool).fill_(7).tolist() == [True, True]
    assert tp.full((2,), -1e9).tolist() == [-1e9, -1e9]
    x = tp.tensor([1.0, 2.0]).half().masked_fill(tp.tensor([True, False]), float("-inf"))
    assert x.tolist() == [float("-inf"), 2.0]
    assert tp.ones(2, dtype=tp.int64).masked_fill(tp.tensor([True, False]), 2**62).tolist() == [2**62, 1]


# ---------------------------------------------------------------- integer division by zero's message
@pytest.mark.parametrize("op, name", [(lambda a, b: a // b, "floor_divide"), (lambda a, b: a % b, "remainder"),
                                      (lambda a, b: tp.div(a, b, rounding_mode="trunc"), "div")])
def test_integer_division_by_zero_names_the_operator_once(op, name):
    # The message read "floor_divide: floor_divide: integer division by zero (in ZeroDivisionError)".
    a, b = tp.tensor([3, -4]), tp.tensor([1, 0])
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as info:
        op(a, b)
    msg = str(info.value)
    assert msg.startswith(f"{name}: integer division by zero"), msg
    assert "(in ZeroDivisionError)" not in msg and not msg.startswith(f"{name}: {name}:")
    with pytest.raises(RuntimeError, match="integer division by zero"):
        tp.compile(op)(a, b)


# ---------------------------------------------------------------- masks computed from symbolic sizes
@pytest.mark.parametrize("dynamic", [True, None])
def test_a_causal_mask_over_a_growing_kv_cache_follows_the_length(dynamic):
    # tril(S - T) of a KV-cache decoding step: Stax read the diagonal as the constant of the
    # capture, so the symbolic version masked the newest key at every later length (the
    # decoded tokens diverged from eager from the third step on).
    def step(q, k, v):
        T, S = q.shape[1], k.shape[1]
        mask = tp.ones(T, S, dtype=tp.bool).tril(S - T)
        s = (q @ k.transpose(1, 2)).masked_fill(~mask, float("-inf"))
        return s.softmax(-1) @ v, mask

    cf = tp.compile(step, dynamic=dynamic)
    for S in (4, 5, 6, 7, 9):
        q, k, v = tp.randn(2, 1, 8), tp.randn(2, S, 8), tp.randn(2, S, 8)
        (oe, me), (oc, mc) = step(q, k, v), cf(q, k, v)
        assert mc.tolist() == me.tolist(), S
        np.testing.assert_allclose(oc.numpy(), oe.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["tril", "triu"])
def test_tril_and_triu_with_a_diagonal_from_sizes(op):
    def f(x):
        n = x.shape[1]
        return getattr(x, op)(n - 2), getattr(tp.ones(3, n), op)(2 - n)

    cf = tp.compile(f, dynamic=True)
    for n in (3, 4, 6):
        x = tp.randn(3, n)
        for e, c in zip(f(x), cf(x)):
            assert tp.equal(e, c), n


def test_roll_by_a_shift_from_sizes():
    def f(x):
        return x.roll(x.shape[0] // 2, 0) * 2

    cf = tp.compile(f, dynamic=True)
    for n in (4, 5, 7):
        x = tp.arange(float(n * 3)).reshape(n, 3)
        assert tp.equal(cf(x), f(x)), n


def test_decoding_with_a_kv_cache_matches_eager_token_for_token():
    nn = tp.nn
    tp.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.o, self.n = nn.Linear(8, 24), nn.Linear(8, 8), nn.LayerNorm(8)

        def forward(self, x, past=None):
            q, k, v = self.qkv(self.n(x)).chunk(3, -1)
            if past is not None:
                k, v = tp.cat([past[0], k], 1), tp.cat([past[1], v], 1)
            T, S = q.shape[1], k.shape[1]
            mask = tp.ones(T, S, dtype=tp.bool).tril(S - T)
            a = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], attn_mask=mask)[:, 0]
            return x + self.o(a), (k, v)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.e, self.blocks, self.head = nn.Embedding(16, 8), nn.ModuleList([Block(), Block()]), nn.Linear(8, 16)

        def forward(self, ids, pasts=None):
            x, new = self.e(ids), []
            for i, b in enumerate(self.blocks):
                x, p = b(x, None if pasts is None else pasts[i])
                new.append(p)
            return self.head(x[:, -1]), new

    lm = LM().eval()
    clm = tp.compile(lm)
    with tp.no_grad():
        ids = tp.tensor([[1, 2, 3]])
        (le, pe), (lc, pc) = lm(ids), clm(ids)
        for _ in range(8):
            np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-4, atol=1e-5)
            te, tc = le.argmax(-1, keepdim=True), lc.argmax(-1, keepdim=True)
            assert te.tolist() == tc.tolist()
            (le, pe), (lc, pc) = lm(te, pe), clm(tc, pc)


@pytest.mark.parametrize("op", [lambda x, n: x ** (n - 2), lambda x, n: x // n, lambda x, n: x % n,
                                lambda x, n: n ** x.clamp(0, 2), lambda x, n: (x > 0) ^ (n > 4),
                                lambda x, n: x.long() << (n - 4), lambda x, n: n // x.long().clamp(min=1)])
def test_python_operators_between_a_tensor_and_a_size_under_dynamic_shapes(op):
    # `x ** (x.shape[1] - 2)` raised TypeError("unsupported operand type(s) for ** or pow():
    # 'Tensor' and 'SymInt'") in a dynamic capture; in eager the size is an int.
    def f(x):
        return op(x, x.shape[1])

    cf = tp.compile(f, dynamic=True)
    for n in (4, 5, 7):
        x = tp.randn(3, n)
        e, c = f(x), cf(x)
        assert c.dtype == e.dtype
        np.testing.assert_allclose(c.float().numpy(), e.float().numpy(), rtol=1e-5, atol=1e-6)


def test_topk_with_k_from_sizes():
    # k = size - 1 raised "internal: extern topk result 0 has shape [3, 4], planned [3, 3]".
    def f(x):
        v, i = x.topk(x.shape[1] - 1, 1)
        return v * 2, i

    cf = tp.compile(f, dynamic=True)
    for n in (4, 5, 7):
        x = tp.randn(3, n)
        for e, c in zip(f(x), cf(x)):
            assert tp.equal(e, c), n


@pytest.mark.parametrize("kw", [dict(size=(4, 9), mode="bilinear", align_corners=True),
                                dict(size=(6, 5), mode="bicubic"),
                                dict(scale_factor=2, mode="bicubic", align_corners=True),
                                dict(scale_factor=1.5, mode="bilinear")])
def test_interpolate_compiled_at_several_input_sizes(kw):
    # From the second input size on (automatic dynamic shapes) bilinear with align_corners and
    # bicubic raised "cannot build a tensor from ndarray with NumPy dtype object".
    f = lambda x: F.interpolate(x, **kw)  # noqa: E731
    cf = tp.compile(f)
    for shape in [(2, 3, 5, 7), (2, 3, 6, 8), (1, 3, 4, 4)]:
        x = tp.randn(*shape)
        np.testing.assert_allclose(cf(x).numpy(), f(x).numpy(), rtol=1e-5, atol=1e-5)


def test_conv_transpose_under_dynamic_shapes_follows_the_input_size():
    # conv_transpose2d is conv2d_input_grad of a size computed from the input's sizes; the
    # symbolic version took that size as its result at every input size: (2, 3, 6, 8) gave the
    # (2, 2, 12, 16) of the first capture's (2, 3, 5, 7) instead of (2, 2, 14, 18).
    w = tp.randn(3, 2, 3, 3)

    def f(x):
        return F.conv_transpose2d(x, w, stride=2, output_padding=1), F.conv_transpose1d(x[:, :, 0], w[:, :, 0])

    cf = tp.compile(f, dynamic=True)
    for shape in [(2, 3, 5, 7), (2, 3, 6, 8), (3, 3, 5, 9)]:
        x = tp.randn(*shape)
        for e, c in zip(f(x), cf(x)):
            assert tuple(c.shape) == tuple(e.shape), shape
            np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-4, atol=1e-5)


def test_layer_norm_over_dims_that_change_refuses_the_wrong_size_as_eager():
    # F.layer_norm(x, (5, 7)) compiled with dynamic=True normalized a [2, 3, 6, 8] input
    # (eager raises: the trailing dims must equal normalized_shape).
    f = lambda x: F.layer_norm(x, (5, 7))  # noqa: E731
    cf = tp.compile(f, dynamic=True)
    x = tp.randn(2, 3, 5, 7)
    np.testing.assert_allclose(cf(x).numpy(), f(x).numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="layer_norm"):
        cf(tp.randn(2, 3, 6, 8))
    g = lambda x: F.layer_norm(x, x.shape[-2:])  # noqa: E731  (normalized_shape from sizes: symbolic)
    cg = tp.compile(g, dynamic=True)
    for shape in [(2, 5, 7), (2, 6, 8), (3, 4, 9)]:
        x = tp.randn(*shape)
        np.testing.assert_allclose(cg(x).numpy(), g(x).numpy(), rtol=1e-5, atol=1e-5)


def test_indexing_with_a_uint8_tensor_is_refused_naming_both_meanings():
    # x[uint8 tensor] took the values as positions; PyTorch reads them as a mask.
    x = tp.arange(6.0).reshape(2, 3)
    with pytest.raises(IndexError, match="uint8"):
        x[tp.tensor([1, 0], dtype=tp.uint8)]
    with pytest.raises(IndexError, match="uint8"):
        x[tp.tensor([1], dtype=tp.uint8)] = 0.0
    assert x[tp.tensor([True, False])].tolist() == [[0.0, 1.0, 2.0]]
    assert x[tp.tensor([1], dtype=tp.int8)].tolist() == [[3.0, 4.0, 5.0]]


def test_interpolate_to_a_size_that_overflows_raises_instead_of_swapping():
    with pytest.raises(RuntimeError, match="interpolate: .*too many elements"):
        F.interpolate(tp.randn(1, 1, 2, 2), scale_factor=1e9)
