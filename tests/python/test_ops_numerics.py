"""Numerical regressions checked against PyTorch (CPU), NumPy and finite differences: Python floats
keep 64 bits, bools never bind int parameters, aten's native_batch_norm order, broadcasting
cosine_similarity, 16-bit norms/attention accumulating in float32, all/any on uint8, integer
linspace/arange rounding, integer pow, stable log_softmax, gelu's negative tail, index_fill and
scatter_reduce(prod) gradients."""
import math

import numpy as np
import pytest
torch = pytest.importorskip("torch")

import tensorplay as tp
import tensorplay.nn.functional as F
from fd_check import check_gradients

TP_DT = {"float16": tp.float16, "bfloat16": tp.bfloat16, "float32": tp.float32, "float64": tp.float64}
TH_DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}


def to_torch(t):
    if t.dtype == tp.bfloat16:
        return torch.from_numpy(t.float().numpy().copy()).bfloat16()
    return torch.from_numpy(t.numpy().copy())


def from_torch(t):
    if t.dtype == torch.bfloat16:
        return tp.tensor(t.float().numpy()).to(tp.bfloat16)
    return tp.tensor(t.numpy())


def as_np(t):
    return t.double().numpy() if t.dtype.is_floating_point else t.numpy()


# ---------------------------------------------------------------- 1. Python floats keep 64 bits
F64_PATHS = {
    "tensor_scalar": lambda v: tp.tensor(v, dtype=tp.float64),
    "tensor_list": lambda v: tp.tensor([v, 2 * v], dtype=tp.float64),
    "tensor_nested": lambda v: tp.tensor([[v], [v]], dtype=tp.float64),
    "tensor_tuple": lambda v: tp.tensor((v, v), dtype=tp.float64),
    "tensor_of_f64_tensors": lambda v: tp.tensor([tp.tensor(v, dtype=tp.float64)], dtype=tp.float64),
    "as_tensor_list": lambda v: tp.as_tensor([v], dtype=tp.float64),
    "as_tensor_scalar": lambda v: tp.as_tensor(v, dtype=tp.float64),
    "full": lambda v: tp.full([3], v, dtype=tp.float64),
    "full_like": lambda v: tp.full_like(tp.zeros(2, dtype=tp.float64), v),
    "fill_": lambda v: tp.zeros(2, dtype=tp.float64).fill_(v),
    "new_tensor": lambda v: tp.zeros(1, dtype=tp.float64).new_tensor([v]),
    "new_full": lambda v: tp.zeros(1, dtype=tp.float64).new_full([2], v),
    "add_scalar": lambda v: tp.zeros(2, dtype=tp.float64) + v,
    "mul_scalar": lambda v: tp.ones(2, dtype=tp.float64) * v,
    "add_alpha": lambda v: tp.add(tp.zeros(2, dtype=tp.float64), tp.ones(2, dtype=tp.float64), alpha=v),
    "where_scalar": lambda v: tp.where(tp.tensor([True, False]), tp.zeros(2, dtype=tp.float64) + v, v),
    "masked_fill": lambda v: tp.zeros(2, dtype=tp.float64).masked_fill(tp.tensor([True, True]), v),
    "clamp_min": lambda v: tp.zeros(2, dtype=tp.float64).clamp(min=v),
    "setitem": lambda v: _setitem(v),
    "index_fill": lambda v: tp.zeros(2, dtype=tp.float64).index_fill(0, tp.tensor([0, 1]), v),
}


def _setitem(v):
    t = tp.zeros(2, dtype=tp.float64)
    t[0] = v
    t[1] = v
    return t


@pytest.mark.parametrize("path", sorted(F64_PATHS))
def test_float64_construction_keeps_all_bits(path):
    v = 0.1  # not representable in float32: rounding through float32 gives 0.10000000149011612
    t = F64_PATHS[path](v)
    assert t.dtype == tp.float64
    vals = np.asarray(t.numpy(), dtype=np.float64).reshape(-1)
    expected = {v, 2 * v}
    assert set(vals.tolist()) <= expected, vals


@pytest.mark.parametrize("make", [
    lambda m: np.float64(0.1), lambda m: [np.float64(0.1), 0.2], lambda m: [[np.float32(0.1)], [0.2]],
    lambda m: np.int32(3), lambda m: [np.int32(3), 4], lambda m: [np.float16(1.5)], lambda m: np.bool_(True),
    lambda m: [m.tensor(0.1, dtype=m.float64), 0.2], lambda m: [[m.tensor(0.1, dtype=m.float64)]],
    lambda m: [m.tensor(1, dtype=m.int32), 2], lambda m: [m.tensor(1, dtype=m.uint8), m.tensor(2, dtype=m.int8)],
    lambda m: [True, 1], lambda m: [1, 2.5], lambda m: [], lambda m: [[]], lambda m: 0.1,
])
def test_tensor_dtype_inference_matches_torch(make):
    # NumPy scalars and tensors inside the data keep their dtype (promoted together), so a
    # float64 value is never rounded through float32 on the way in.
    got, want = tp.tensor(make(tp)), torch.tensor(make(torch))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert got.tolist() == want.tolist()


def test_setitem_with_a_list_keeps_float64_bits():
    t = tp.zeros(2, 3, dtype=tp.float64)
    t[:, 1] = [0.1, 0.2]
    t[0, tp.tensor([0, 2])] = [0.3, 0.7]
    assert t.tolist() == [[0.3, 0.1, 0.7], [0.0, 0.2, 0.0]]
    u = tp.zeros(3, dtype=tp.int64)
    u[:] = [1.7, -2.5, 3]  # truncated like torch
    tu = torch.zeros(3, dtype=torch.int64)
    tu[:] = torch.tensor([1.7, -2.5, 3])
    assert u.tolist() == tu.tolist()


def test_tolist_on_tensors_that_require_grad_and_bfloat16():
    assert tp.tensor([0.5, 1.5], requires_grad=True).tolist() == [0.5, 1.5]
    assert tp.tensor([1.703125, -2.5]).to(tp.bfloat16).tolist() == [1.703125, -2.5]


def test_float64_item_and_python_round_trip():
    assert tp.tensor([0.1], dtype=tp.float64).item() == 0.1
    assert tp.tensor(0.1, dtype=tp.float64).item() == 0.1
    assert tp.tensor(1e300, dtype=tp.float64).item() == 1e300  # beyond float32's range
    assert tp.tensor([2.0 ** 60 + 2.0 ** 8], dtype=tp.float64).item() == 2.0 ** 60 + 2.0 ** 8
    # Default dtype stays float32, rounded once from the Python float.
    t = tp.tensor([0.1, 1e-46])
    assert t.dtype == tp.float32
    np.testing.assert_array_equal(t.numpy(), np.array([0.1, 1e-46], dtype=np.float32))
    # Integer targets truncate the Python float like PyTorch.
    assert tp.tensor([1.7, -1.7], dtype=tp.int64).tolist() == torch.tensor([1.7, -1.7], dtype=torch.int64).tolist()


def test_float64_factories_keep_all_bits():
    # linspace: PyTorch's formula exactly; arange: start + step * i rounded once (PyTorch's vectorized
    # kernel adds the step to a per-chunk base, so it can differ by an ulp; both are float64-accurate).
    for a, b in [(tp.linspace(0, 1, 11, dtype=tp.float64), torch.linspace(0, 1, 11, dtype=torch.float64)),
                 (tp.linspace(0.1, 0.7, 7, dtype=tp.float64), torch.linspace(0.1, 0.7, 7, dtype=torch.float64))]:
        assert a.tolist() == b.tolist()
    for args in [(0, 1, 0.1), (-3.0, 10.49, 0.3), (0.1, 0.2, 0.01)]:
        got = tp.arange(*args, dtype=tp.float64).tolist()
        exact = [float(np.float64(args[0]) + np.longdouble(args[2]) * i) for i in range(len(got))]
        assert len(got) == len(torch.arange(*args, dtype=torch.float64))
        np.testing.assert_allclose(got, exact, rtol=0, atol=1e-15)
        assert got[1] == args[0] + args[2]


def test_set_default_dtype_float64_keeps_bits():
    old = tp.get_default_dtype()
    tp.set_default_dtype(tp.float64)
    try:
        assert tp.tensor([0.1]).item() == 0.1
        assert tp.tensor(0.1).item() == 0.1
    finally:
        tp.set_default_dtype(old)


# ---------------------------------------------------------------- 2. a bool never binds an int
X2 = np.array([[1.0, 2.0, 7.0], [3.0, 5.0, -1.0]], dtype=np.float32)


@pytest.mark.parametrize("call", [
    "var(x, True)", "var(x, False)", "std(x, True)", "std(x, False)",
    "var(x, 1, False)", "std(x, 0, True)", "var(x, 1, True, True)", "std(x, [0, 1], False, True)",
    "var(x, None, False)",
    "var_mean(x, True)", "var_mean(x, False)", "std_mean(x, True)", "std_mean(x, False)",
    "var_mean(x, 1, False)", "std_mean(x, 0, True, True)", "var_mean(x, [0, 1], False, True)",
    "var(x, dim=1, unbiased=False)", "std_mean(x, dim=0, unbiased=False, keepdim=True)",
    "var(x, correction=0)", "std(x, 1, correction=2)",
])
def test_bool_positional_is_unbiased_not_dim(call):
    def run(mod, x):
        return eval(call, {"var": mod.var, "std": mod.std, "var_mean": mod.var_mean, "std_mean": mod.std_mean,
                           "x": x})
    got, want = run(tp, tp.tensor(X2)), run(torch, torch.tensor(X2))
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)


def test_bool_positional_methods():
    x, tx = tp.tensor(X2), torch.tensor(X2)
    np.testing.assert_allclose(x.var(False).numpy(), tx.var(False).numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.std(1, True, True).numpy(), tx.std(1, True, True).numpy(), rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda x: x.sum(True), lambda x: x.cumsum(True), lambda x: x.unsqueeze(True), lambda x: x.select(0, True),
    lambda x: x.argmax(True), lambda x: x.view(True, -1), lambda x: x.narrow(0, True, 1),
    lambda x: tp.zeros(True), lambda x: x.topk(True),
])
def test_bool_is_refused_for_int_parameters(call):
    # PyTorch raises TypeError for all of these: a bool is not an int argument.
    with pytest.raises(TypeError):
        call(tp.tensor(X2))


def test_bool_still_binds_bool_parameters():
    x = tp.tensor(X2)
    assert tuple(x.sum(0, True).shape) == (1, 3)
    assert tuple(x.sum(dim=1, keepdim=True).shape) == (2, 1)
    assert tuple(x.max(1, True).values.shape) == (2, 1)


# ---------------------------------------------------------------- 3. native_batch_norm: aten's order
@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_aten_argument_order(training):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    rm, rv = rng.standard_normal(3).astype(np.float32), rng.random(3).astype(np.float32) + 0.5
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    want = torch.native_batch_norm(torch.tensor(x), torch.tensor(w), torch.tensor(b), trm, trv, training, 0.1, 1e-5)
    prm, prv = tp.tensor(rm), tp.tensor(rv)
    got = tp.native_batch_norm(tp.tensor(x), tp.tensor(w), tp.tensor(b), prm, prv, training, 0.1, 1e-5)
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-5, atol=1e-5)
    if training:  # saved mean and 1/std; running stats updated in place
        np.testing.assert_allclose(got[1].numpy(), want[1].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[2].numpy(), want[2].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(prm.numpy(), trm.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(prv.numpy(), trv.numpy(), rtol=1e-5, atol=1e-6)
    # keywords by aten's names
    kw = tp.native_batch_norm(tp.tensor(x), weight=tp.tensor(w), bias=tp.tensor(b), running_mean=tp.tensor(rm),
                              running_var=tp.tensor(rv), training=False, momentum=0.1, eps=1e-5)
    wkw = torch.native_batch_norm(torch.tensor(x), torch.tensor(w), torch.tensor(b), torch.tensor(rm),
                                  torch.tensor(rv), False, 0.1, 1e-5)
    np.testing.assert_allclose(kw[0].numpy(), wkw[0].numpy(), rtol=1e-5, atol=1e-5)


def test_native_batch_norm_gradients():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 4))
    w, b = rng.standard_normal(2), rng.standard_normal(2)
    check_gradients(lambda x, w, b: tp.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)[0], x, w, b,
                    rtol=1e-4, atol=1e-6)


def test_batch_norm_keeps_functional_order():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    got = F.batch_norm(tp.tensor(x), tp.tensor(rm), tp.tensor(rv), tp.tensor(w), tp.tensor(b), training=False)
    want = torch.nn.functional.batch_norm(torch.tensor(x), torch.tensor(rm), torch.tensor(rv), torch.tensor(w),
                                          torch.tensor(b), training=False)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- 4. cosine_similarity broadcasts first
@pytest.mark.parametrize("shapes,dim", [(((1, 2, 3), (2, 1, 3)), 1), (((1, 2, 3), (2, 1, 3)), -1),
                                        (((1, 2, 3), (2, 1, 3)), 0), (((4, 1), (1, 5)), 0), (((3,), (2, 3)), -1),
                                        (((2, 3), (2, 3)), 1)])
def test_cosine_similarity_broadcasting(shapes, dim):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    got = F.cosine_similarity(tp.tensor(a), tp.tensor(b), dim=dim)
    want = torch.nn.functional.cosine_similarity(torch.tensor(a), torch.tensor(b), dim=dim)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert np.all(np.abs(got.numpy()) <= 1 + 1e-6)


def test_cosine_similarity_reported_case():
    a = tp.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    b = tp.tensor([[[1.0, 1.0, 0.0]], [[0.0, 1.0, 0.0]]])
    got = F.cosine_similarity(a, b)  # default dim=1: over the broadcast (2, 2, 3)
    want = torch.nn.functional.cosine_similarity(to_torch(a), to_torch(b))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


def test_cosine_similarity_gradients():
    rng = np.random.default_rng(4)
    check_gradients(lambda a, b: F.cosine_similarity(a, b, dim=1), rng.standard_normal((1, 2, 3)),
                    rng.standard_normal((2, 1, 3)))


# ---------------------------------------------------------------- 5. 16-bit norms and attention
def _err(got, ref64):
    return float(np.max(np.abs(as_np(got) - ref64)))


def test_rms_norm_float16_no_overflow():
    x = tp.tensor([[300.0, 400.0, 500.0]], dtype=tp.float16)
    got = tp.rms_norm(x, [3])
    want = torch.rms_norm(torch.tensor([[300.0, 400.0, 500.0]], dtype=torch.float16), [3])
    assert got.dtype == tp.float16
    np.testing.assert_array_equal(as_np(got), want.double().numpy())


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("weighted", [False, True])
def test_rms_norm_half_matches_torch(dt, weighted):
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(16, 33, generator=g) * 50).to(TH_DT[dt])
    w = torch.randn(33, generator=g).to(TH_DT[dt]) if weighted else None
    want = torch.rms_norm(x, [33], w)
    got = tp.rms_norm(from_torch(x), [33], None if w is None else from_torch(w))
    assert got.dtype == TP_DT[dt]
    # Rounded once from float32: equal to PyTorch's up to a float32 last-bit difference.
    np.testing.assert_allclose(as_np(got), want.double().numpy(), rtol=1e-2 if dt == "bfloat16" else 1e-3)


def test_rms_norm_half_gradient_flows():
    x = tp.tensor([[300.0, 400.0, 500.0]], dtype=tp.float16, requires_grad=True)
    tp.rms_norm(x, [3]).sum().backward()
    assert x.grad.dtype == tp.float16
    assert np.all(np.isfinite(as_np(x.grad)))


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_group_norm_half_accumulates_in_float32(dt):
    g = torch.Generator().manual_seed(6)
    x = torch.randn(4, 6, 5, 5, generator=g) * 10 + 3
    w, b = torch.randn(6, generator=g), torch.randn(6, generator=g)
    ref = torch.nn.functional.group_norm(x.double(), 3, w.double(), b.double()).numpy()
    xh, wh, bh = x.to(TH_DT[dt]), w.to(TH_DT[dt]), b.to(TH_DT[dt])
    ref_h = torch.nn.functional.group_norm(xh.double(), 3, wh.double(), bh.double()).numpy()
    torch_err = _err(torch.nn.functional.group_norm(xh, 3, wh, bh).to(torch.float64), ref_h)
    got = F.group_norm(from_torch(xh), 3, from_torch(wh), from_torch(bh))
    assert got.dtype == TP_DT[dt]
    assert _err(got, ref_h) <= 1.5 * torch_err + 1e-12
    assert np.isfinite(_err(got, ref))


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_half_accumulates_in_float32(dt, causal):
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(2, 3, 17, 64, generator=g).to(TH_DT[dt]) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                           is_causal=causal).numpy()
    torch_err = _err(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).double(), ref)
    got = F.scaled_dot_product_attention(from_torch(q), from_torch(k), from_torch(v), is_causal=causal)
    assert got.dtype == TP_DT[dt]
    assert _err(got, ref) <= 2 * torch_err + 1e-12


@pytest.mark.parametrize("float_mask", [False, True])
def test_sdpa_fully_masked_query_gives_zero_not_nan(float_mask):
    g = torch.Generator().manual_seed(11)
    q = torch.randn(2, 1, 3, 4, generator=g, dtype=torch.float64)
    m = torch.tensor([[False, False, False], [True, False, True], [True, True, True]])
    mask = torch.where(m, 0.0, float("-inf")).double() if float_mask else m
    w = torch.arange(4.0, dtype=torch.float64)
    tq = q.clone().requires_grad_(True)
    out = torch.nn.functional.scaled_dot_product_attention(tq, tq * 2, tq * 3, attn_mask=mask)
    (out * w).sum().backward()
    pq = tp.tensor(q.numpy(), requires_grad=True)
    got = F.scaled_dot_product_attention(pq, pq * 2, pq * 3, attn_mask=tp.tensor(mask.numpy()))
    (got * tp.tensor(w.numpy())).sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), out.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pq.grad.numpy(), tq.grad.numpy(), rtol=1e-12, atol=1e-13)
    assert np.all(got.detach().numpy()[:, :, 0] == 0)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_layer_norm_softmax_batch_norm_rounded_once(dt):
    g = torch.Generator().manual_seed(8)
    x = (torch.randn(8, 4, 32, generator=g) * 20).to(TH_DT[dt])
    w, b = torch.randn(32, generator=g).to(TH_DT[dt]), torch.randn(32, generator=g).to(TH_DT[dt])
    px = from_torch(x)
    checks = [
        (tp.layer_norm(px, [32], from_torch(w), from_torch(b)),
         torch.nn.functional.layer_norm(x.double(), [32], w.double(), b.double())),
        (tp.softmax(px, -1), torch.softmax(x.double(), -1)),
        (tp.log_softmax(px, 1), torch.log_softmax(x.double(), 1)),
        (F.batch_norm(px, None, None, training=True), torch.nn.functional.batch_norm(x.double(), None, None,
                                                                                       training=True)),
    ]
    ulp = 2.0 ** -10 if dt == "float16" else 2.0 ** -7
    for got, ref in checks:
        assert got.dtype == TP_DT[dt]
        ref = ref.numpy()
        # One rounding of a float32 result: within one 16-bit ulp of the exact value.
        assert np.all(np.abs(as_np(got) - ref) <= ulp * np.maximum(np.abs(ref), 2.0 ** -14) + 1e-6)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_batch_norm_updates_running_stats(dt):
    g = torch.Generator().manual_seed(9)
    x = (torch.randn(8, 3, 5, generator=g) * 4 + 3).to(TH_DT[dt])
    rm, rv = torch.zeros(3, dtype=TH_DT[dt]), torch.ones(3, dtype=TH_DT[dt])
    prm, prv = from_torch(rm), from_torch(rv)
    got = F.batch_norm(from_torch(x), prm, prv, training=True, momentum=0.5)
    want = torch.nn.functional.batch_norm(x, rm, rv, training=True, momentum=0.5)
    ulp = 2.0 ** -10 if dt == "float16" else 2.0 ** -7
    np.testing.assert_allclose(as_np(prm), rm.double().numpy(), rtol=2 * ulp, atol=1e-3)
    np.testing.assert_allclose(as_np(prv), rv.double().numpy(), rtol=2 * ulp)
    np.testing.assert_allclose(as_np(got), want.double().numpy(), rtol=2 * ulp, atol=4 * ulp)
    # evaluation with the updated statistics
    ev = F.batch_norm(from_torch(x), prm, prv, training=False)
    tev = torch.nn.functional.batch_norm(x, from_tp_stats(prm, dt), from_tp_stats(prv, dt), training=False)
    np.testing.assert_array_equal(as_np(ev), tev.double().numpy())


def from_tp_stats(t, dt):
    return torch.tensor(as_np(t)).to(TH_DT[dt])


# ---------------------------------------------------------------- 6. all/any on uint8
@pytest.mark.parametrize("fn", ["all", "any"])
@pytest.mark.parametrize("dt", ["uint8", "bool", "int32", "float32"])
def test_all_any_result_dtype(fn, dt):
    data = np.array([[0, 3], [2, 5]])
    x, tx = tp.tensor(data).to(getattr(tp, dt)), torch.tensor(data).to(getattr(torch, dt))
    for args in [(), (1,), (0, True)]:
        got, want = getattr(tp, fn)(x, *args), getattr(torch, fn)(tx, *args)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        assert got.tolist() == want.tolist()


# ---------------------------------------------------------------- 7. add bool alpha, diff n=0, int ranges
def test_add_bool_alpha():
    a, b = [False, False, True, True], [False, True, False, True]
    for alpha in [False, True]:
        got = tp.add(tp.tensor(a), tp.tensor(b), alpha=alpha)
        assert got.tolist() == torch.add(torch.tensor(a), torch.tensor(b), alpha=alpha).tolist()
        x = tp.tensor(a)
        x.add_(tp.tensor(b), alpha=alpha)
        assert x.tolist() == got.tolist()


def test_diff_n0_returns_a_copy_of_the_input():
    x = tp.tensor([1.0, 2.0, 4.0], requires_grad=True)
    for kw in [{}, {"prepend": tp.tensor([0.0])}, {"append": tp.tensor([9.0, 8.0])}]:
        got = tp.diff(x, n=0, **kw)
        want = torch.diff(torch.tensor([1.0, 2.0, 4.0]), n=0, **{k: to_torch(v) for k, v in kw.items()})
        assert got.tolist() == want.tolist()
    y = tp.diff(x, n=0)
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    y.detach()[0] = 5.0  # a copy, not a view
    assert x.tolist() == [1.0, 2.0, 4.0]


INT_DTS = ["int64", "int32", "int16", "int8", "uint8"]


@pytest.mark.parametrize("dt", INT_DTS)
def test_integer_linspace_matches_torch(dt):
    rng = np.random.default_rng(9)
    cases = [(4.3, -3, 10), (-27.95, 29.46, 7), (0.9, 0.1, 5), (-0.5, 0.5, 3), (2.5, 2.7, 1), (3, 3, 4), (0, 100, 33)]
    cases += [(float(a), float(b), int(n)) for a, b, n in zip(rng.uniform(-50, 50, 40), rng.uniform(-50, 50, 40),
                                                               rng.integers(1, 40, 40))]
    for a, b, n in cases:
        if dt == "uint8" and min(a, b) < 0:
            continue
        got = tp.linspace(a, b, n, dtype=getattr(tp, dt)).tolist()
        want = torch.linspace(a, b, n, dtype=getattr(torch, dt)).tolist()
        assert got == want, (a, b, n)


@pytest.mark.parametrize("dt", ["float64", "float32"])
def test_float_linspace_matches_torch(dt):
    rng = np.random.default_rng(10)
    for a, b, n in zip(rng.uniform(-50, 50, 60), rng.uniform(-50, 50, 60), rng.integers(1, 120, 60)):
        got = tp.linspace(float(a), float(b), int(n), dtype=TP_DT[dt]).tolist()
        assert got == torch.linspace(float(a), float(b), int(n), dtype=TH_DT[dt]).tolist()


@pytest.mark.parametrize("dt", INT_DTS)
def test_integer_arange_with_fractional_bounds_matches_torch(dt):
    # The oracle must be the torch the README pins: torch 2.11 (the GPU machine's) kills the
    # process with SIGFPE on some of these calls (its step truncates to 0 in the integer dtype).
    if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13):
        pytest.skip(f"needs torch >= 2.13 as the oracle, found {torch.__version__}")
    cases = [(-0.9, 2.1, 2.0), (0.5, 5, 1), (1.9, 5, 1.5), (-1.9, 5, 1.5), (0.9, 0.1, -1), (2.5, 0.5, -1.0),
             (0, 3.5, 1), (-3.5, 0, 1), (-0.5, 0.5, 1), (0, 5, 0.5), (-15.0, 13.9, 0.5), (0, 1, 0.3),
             (-0.5, 0.5, -1), (0.5, -0.5, 1), (3, 10, 2), (10, -4, -3)]
    for args in cases:
        if dt == "uint8" and min(args[:2]) < 0:
            continue
        try:
            want = torch.arange(*args, dtype=getattr(torch, dt)).tolist()
        except (RuntimeError, ValueError):
            with pytest.raises(ValueError):
                tp.arange(*args, dtype=getattr(tp, dt))
            continue
        assert tp.arange(*args, dtype=getattr(tp, dt)).tolist() == want, args


def test_float64_arange_close_to_torch():
    rng = np.random.default_rng(11)
    for a, b in zip(rng.uniform(-20, 20, 40), rng.uniform(-20, 20, 40)):
        for st in [0.3, 0.1, 1.5, 2.0]:
            lo, hi = sorted((float(a), float(b)))
            got = tp.arange(lo, hi, st, dtype=tp.float64).numpy()
            want = torch.arange(lo, hi, st, dtype=torch.float64).numpy()
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-14)


# ---------------------------------------------------------------- 8. index_fill / scatter_reduce(prod) grads
def test_index_fill_tensor_value_gets_gradient():
    idx = [0, 2, 2]
    x = tp.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    v = tp.tensor(7.0, requires_grad=True)
    out = x.index_fill(1, tp.tensor(idx), v)
    w = tp.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    (out * w).sum().backward()
    tx = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    tv = torch.tensor(7.0, requires_grad=True)
    tout = tx.index_fill(1, torch.tensor(idx), tv)
    (tout * torch.tensor(w.numpy())).sum().backward()
    assert out.detach().tolist() == tout.tolist()
    assert x.grad.tolist() == tx.grad.tolist()
    assert v.grad.item() == tv.grad.item()
    # Python numbers and other dtypes still work; a value of any other shape is refused.
    assert tp.tensor([1, 2, 3]).index_fill(0, tp.tensor([1]), 2.7).tolist() == [1, 2, 3]
    assert tp.tensor([1, 2, 3]).index_fill(0, tp.tensor([1]), -4).tolist() == [1, -4, 3]
    with pytest.raises(ValueError, match="0-dimensional"):
        tp.zeros(3).index_fill(0, tp.tensor([1]), tp.tensor([1.0]))


def test_index_fill_value_finite_differences():
    rng = np.random.default_rng(12)
    check_gradients(lambda x, v: tp.index_fill(x, 0, tp.tensor([1, 3]), v), rng.standard_normal((4, 2)),
                    np.array(0.5))


SR_SELF = np.array([[1.5, 0.0, -2.0, 3.0], [0.5, 2.0, 0.0, -1.0]])
SR_SRC = np.array([[2.0, 0.0, -1.5, 4.0, 0.5], [0.0, 0.0, 3.0, -2.0, 1.5]])
SR_INDEX = [[0, 1, 0, 3, 2], [1, 1, 0, 2, 3]]


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_gradient_matches_torch(include_self):
    # Positions with no zero, one zero (from self or from src) and two zeros.
    idx = tp.tensor(SR_INDEX)
    x, s = tp.tensor(SR_SELF, requires_grad=True), tp.tensor(SR_SRC, requires_grad=True)
    out = tp.scatter_reduce(x, 1, idx, s, "prod", include_self=include_self)
    w = np.arange(1.0, 9.0).reshape(2, 4)
    (out * tp.tensor(w)).sum().backward()
    tx, ts = torch.tensor(SR_SELF, requires_grad=True), torch.tensor(SR_SRC, requires_grad=True)
    tout = torch.scatter_reduce(tx, 1, torch.tensor(SR_INDEX), ts, "prod", include_self=include_self)
    (tout * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("with_zeros", [False, True])
def test_scatter_reduce_prod_finite_differences(include_self, with_zeros):
    rng = np.random.default_rng(13)
    x, s = rng.uniform(0.5, 2, (2, 4)) * rng.choice([-1, 1], (2, 4)), rng.uniform(0.5, 2, (2, 6))
    if with_zeros:  # a single zero per position: the product is smooth there
        x[0, 1] = 0.0
        s[1, 4] = 0.0
    index = tp.tensor([[0, 2, 0, 3, 3, 1], [1, 1, 0, 2, 3, 3]])
    check_gradients(lambda a, b: tp.scatter_reduce(a, 1, index, b, "prod", include_self=include_self), x, s,
                    rtol=1e-5, atol=1e-7)


def test_scatter_reduce_prod_src_larger_than_index():
    # src has more elements than index reads: the unread ones get a zero gradient.
    index = tp.tensor([[0, 1, 1]])
    check_gradients(lambda a, b: tp.scatter_reduce(a, 1, index, b, "prod"), np.array([[2.0, 3.0]]),
                    np.array([[5.0, 7.0, 11.0, 0.5], [13.0, 17.0, 19.0, 0.25]]))


# ---------------------------------------------------------------- 9. pow, log_softmax, gelu
def test_integer_pow_with_tensor_negative_exponent():
    assert (2 ** tp.tensor(-3)).tolist() == (2 ** torch.tensor(-3)).tolist()
    assert (2 ** tp.tensor([-3, 2])).tolist() == (2 ** torch.tensor([-3, 2])).tolist()
    bases, exps = [2, 1, -1, 0, -2, 3], [-1, -2, -3, 0, 2, 3]
    for e in exps:
        assert tp.pow(tp.tensor(bases), tp.tensor(e)).tolist() == torch.pow(torch.tensor(bases),
                                                                            torch.tensor(e)).tolist()
    assert (tp.tensor(bases) ** tp.tensor(exps)).tolist() == (torch.tensor(bases) ** torch.tensor(exps)).tolist()
    # A Python-number negative exponent is still refused, as in PyTorch.
    with pytest.raises(ValueError, match="negative integer powers"):
        tp.tensor([2, 3]) ** -1
    with pytest.raises(ValueError, match="negative integer powers"):
        tp.pow(tp.tensor([2]), -2)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("dim_layout", ["last", "first"])
def test_log_softmax_large_values_stable(dt, dim_layout):
    x = np.full((16, 3), 1e8) + np.arange(3)[None, :] * 0.0
    x[:, 1] = -1e8
    x[3, 2] = 1e8 + 64
    if dim_layout == "last":
        x = x.T.copy()
    dim = 0 if dim_layout == "first" else 1
    got = tp.log_softmax(tp.tensor(x).to(TP_DT[dt]), dim)
    want = torch.log_softmax(torch.tensor(x).to(TH_DT[dt]), dim)
    ref = torch.log_softmax(torch.tensor(x), dim).numpy()
    np.testing.assert_allclose(got.double().numpy(), want.double().numpy(), rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(got.double().numpy(), ref, rtol=1e-6, atol=1e-5)
    assert tp.log_softmax(tp.full([16], 1e8), 0)[0].item() == pytest.approx(-math.log(16), rel=1e-6)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_gelu_negative_tail_accurate(dt):
    xs = np.concatenate([np.linspace(-10, 10, 2001), [-5.0, -8.0, -9.5, 1e-6, -1e-6, 0.0, 30.0, -30.0]])
    got = F.gelu(tp.tensor(xs).to(TP_DT[dt])).double().numpy()
    exact = np.array([x * 0.5 * math.erfc(-x / math.sqrt(2)) for x in xs])
    want = torch.nn.functional.gelu(torch.tensor(xs).to(TH_DT[dt])).double().numpy()
    # Relative error against the exact value (torch's own float32 result is 17% off at -5).
    tol = 1e-5 if dt == "float32" else 1e-13
    rep = xs.astype(np.float32).astype(np.float64) if dt == "float32" else xs
    exact = np.array([x * 0.5 * math.erfc(-x / math.sqrt(2)) for x in rep])
    np.testing.assert_allclose(got, exact, rtol=tol, atol=1e-37)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)  # torch agrees away from the tail
    assert F.gelu(tp.tensor([-5.0])).item() == pytest.approx(-1.4332578593959731e-06, rel=1e-6)


def test_gelu_gradient_negative_tail():
    xs = np.array([-9.0, -6.0, -5.0, -3.0, -0.5, 0.0, 0.7, 4.0])
    x = tp.tensor(xs, requires_grad=True)
    F.gelu(x).sum().backward()
    exact = np.array([0.5 * math.erfc(-v / math.sqrt(2)) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi)
                      for v in xs])
    np.testing.assert_allclose(x.grad.numpy(), exact, rtol=1e-12, atol=1e-300)
    check_gradients(lambda t: F.gelu(t), xs)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["selu", "celu", "hardsigmoid", "hardswish", "softsign"])
def test_half_composite_activations_rounded_once(dt, name):
    # Composites written in Python compute in float32 for 16-bit inputs and round once, like
    # PyTorch's fused kernels (hardswish in bfloat16 had twice PyTorch's error).
    x = (torch.randn(4000, generator=torch.Generator().manual_seed(12)) * 4).to(TH_DT[dt])
    got = as_np(getattr(F, name)(from_torch(x)))
    want = getattr(torch.nn.functional, name)(x).double().numpy()
    exact = getattr(torch.nn.functional, name)(x.double()).numpy()
    if name == "softsign":  # PyTorch composes this one too (rounding twice): ours is at most as far off
        assert np.max(np.abs(got - exact)) <= np.max(np.abs(want - exact))
    else:
        np.testing.assert_array_equal(got, want)


HALF_GRAD_CASES = {
    "layer_norm": lambda m, f, x, w, b: f.layer_norm(x, [64], w, b),
    "softmax": lambda m, f, x, w, b: m.softmax(x, 1),
    "log_softmax": lambda m, f, x, w, b: m.log_softmax(x, 1),
    "batch_norm": lambda m, f, x, w, b: f.batch_norm(x, None, None, w, b, training=True),
    "rms_norm": lambda m, f, x, w, b: m.rms_norm(x, [64], w),
}


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(HALF_GRAD_CASES))
def test_half_norm_gradients_computed_in_float32(dt, name):
    # Derivative formulas of 16-bit tensors run in float32 and round once (softmax's dx in float16
    # was 4x PyTorch's error, layer_norm's in bfloat16 4x).
    fn = HALF_GRAD_CASES[name]
    gen = torch.Generator().manual_seed(13)
    X, W, B, G = (torch.randn(8, 64, generator=gen) * 3 + 1, torch.randn(64, generator=gen),
                  torch.randn(64, generator=gen), torch.randn(8, 64, generator=gen))
    T = TH_DT[dt]

    def torch_grads(cast):
        leaves = [cast(t).clone().requires_grad_(True) for t in (X.to(T), W.to(T), B.to(T))]
        (fn(torch, torch.nn.functional, *leaves) * cast(G.to(T))).sum().backward()
        return [None if t.grad is None else t.grad.double().numpy() for t in leaves]

    ref, theirs = torch_grads(lambda t: t.double()), torch_grads(lambda t: t)
    leaves = [from_torch(t.to(T)).requires_grad_(True) for t in (X, W, B)]
    (fn(tp, F, *leaves) * from_torch(G.to(T))).sum().backward()
    for leaf, r, t in zip(leaves, ref, theirs):
        if r is None:
            continue
        assert leaf.grad.dtype == TP_DT[dt]
        assert np.max(np.abs(as_np(leaf.grad) - r)) <= 2 * np.max(np.abs(t - r)) + 1e-6


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["gelu", "silu", "mish", "softplus", "elu", "sigmoid", "tanh"])
def test_half_unary_gradients_computed_in_float32(dt, name):
    # silu/mish in float16 had 4x PyTorch's gradient error (every op of the formula rounded).
    gen = torch.Generator().manual_seed(14)
    X, G = (torch.randn(2000, generator=gen) * 3).to(TH_DT[dt]), torch.randn(2000, generator=gen).to(TH_DT[dt])
    tfn = getattr(torch.nn.functional, name) if hasattr(torch.nn.functional, name) else getattr(torch, name)
    pfn = getattr(F, name)

    def torch_grad(cast):
        x = cast(X).clone().requires_grad_(True)
        (tfn(x) * cast(G)).sum().backward()
        return x.grad.double().numpy()

    ref, theirs = torch_grad(lambda t: t.double()), torch_grad(lambda t: t)
    x = from_torch(X).requires_grad_(True)
    (pfn(x) * from_torch(G)).sum().backward()
    assert x.grad.dtype == TP_DT[dt]
    assert np.max(np.abs(as_np(x.grad) - ref)) <= 1.5 * np.max(np.abs(theirs - ref)) + 1e-6


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["div", "addcdiv", "addcmul"])
def test_half_binary_gradients_computed_in_float32(dt, name):
    fns = {"div": lambda m, a, b: a / b, "addcdiv": lambda m, a, b: m.addcdiv(a, a, b, value=0.7),
           "addcmul": lambda m, a, b: m.addcmul(a, a, b, value=0.7)}
    fn = fns[name]
    gen = torch.Generator().manual_seed(15)
    A = (torch.randn(2000, generator=gen) * 2).to(TH_DT[dt])
    B = (torch.rand(2000, generator=gen) * 2 + 0.5).to(TH_DT[dt])

    def torch_grads(cast):
        a, b = cast(A).clone().requires_grad_(True), cast(B).clone().requires_grad_(True)
        (fn(torch, a, b) * 1.3).sum().backward()
        return a.grad.double().numpy(), b.grad.double().numpy()

    ref, theirs = torch_grads(lambda t: t.double()), torch_grads(lambda t: t)
    a, b = from_torch(A).requires_grad_(True), from_torch(B).requires_grad_(True)
    (fn(tp, a, b) * 1.3).sum().backward()
    for leaf, r, t in zip((a, b), ref, theirs):
        assert leaf.grad.dtype == TP_DT[dt]
        assert np.max(np.abs(as_np(leaf.grad) - r)) <= 1.2 * np.max(np.abs(t - r)) + 1e-6
