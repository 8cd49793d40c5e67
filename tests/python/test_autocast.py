"""tp.autocast and tp.amp.GradScaler against PyTorch (CPU): result dtypes per op
category, nesting, the decorator form, gradients, tp.compile's versions per autocast
state, and a mixed-precision training loop eager vs compiled vs PyTorch."""
import math
import pickle

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = [("bfloat16", tp.bfloat16, torch.bfloat16), ("float16", tp.float16, torch.float16)]


def _pair(shape, dtype="float32", seed=0, positive=False):
    rng = np.random.default_rng(seed + len(shape) * 7)
    a = rng.standard_normal(shape).astype(np.float32)
    if positive:
        a = np.abs(a) + 0.5
    return tp.tensor(a).to(getattr(tp, dtype)), torch.tensor(a).to(getattr(torch, dtype))


def _name(dt):
    return str(dt).split(".")[-1]


# (name, function(lib, functional, inputs) -> tensor, input specs); each input is
# made for both libraries from one array. Specs: (shape, dtype) or ("long", values).
def _inputs(specs, low):
    tps, tts = [], []
    for i, (shape, dtype) in enumerate(specs):
        if dtype == "low":  # the autocast dtype (PyTorch refuses float16 beside bfloat16 in cat)
            dtype = low
        if shape == "long":
            tps.append(tp.tensor(dtype, dtype=tp.int64))
            tts.append(torch.tensor(dtype, dtype=torch.int64))
            continue
        positive = dtype.endswith("+")  # "bfloat16+": positive values (kl_div's target)
        a, b = _pair(shape, dtype.rstrip("+"), seed=i, positive=positive)
        tps.append(a)
        tts.append(b)
    return tps, tts


f32, b16, f64, low = "float32", "bfloat16", "float64", "low"
OPS = [
    # lower precision
    ("mm", lambda L, Fn, x: L.mm(x[0], x[1]), [((4, 5), f32), ((5, 3), f32)]),
    ("matmul", lambda L, Fn, x: x[0] @ x[1], [((2, 4, 5), f32), ((5, 3), f32)]),
    ("bmm", lambda L, Fn, x: L.bmm(x[0], x[1]), [((2, 4, 5), f32), ((2, 5, 3), f32)]),
    ("addmm", lambda L, Fn, x: L.addmm(x[0], x[1], x[2]), [((4, 3), f32), ((4, 5), f32), ((5, 3), f32)]),
    ("baddbmm", lambda L, Fn, x: L.baddbmm(x[0], x[1], x[2]),
     [((2, 4, 3), f32), ((2, 4, 5), f32), ((2, 5, 3), f32)]),
    ("linear", lambda L, Fn, x: Fn.linear(x[0], x[1], x[2]), [((4, 5), f32), ((3, 5), f32), ((3,), f32)]),
    ("linear_bf16_weight", lambda L, Fn, x: Fn.linear(x[0], x[1]), [((4, 5), f32), ((3, 5), b16)]),
    ("conv1d", lambda L, Fn, x: Fn.conv1d(x[0], x[1], x[2]), [((1, 2, 7), f32), ((3, 2, 3), f32), ((3,), f32)]),
    ("conv2d", lambda L, Fn, x: Fn.conv2d(x[0], x[1], padding=1), [((1, 2, 5, 5), f32), ((3, 2, 3, 3), f32)]),
    ("conv_transpose2d", lambda L, Fn, x: Fn.conv_transpose2d(x[0], x[1]),
     [((1, 2, 4, 4), f32), ((2, 3, 3, 3), f32)]),
    ("prelu", lambda L, Fn, x: Fn.prelu(x[0], x[1]), [((4, 3), f32), ((1,), f32)]),
    ("sdpa", lambda L, Fn, x: Fn.scaled_dot_product_attention(x[0], x[1], x[2]),
     [((2, 4, 8), f32), ((2, 4, 8), f32), ((2, 4, 8), f32)]),
    ("einsum_matmul", lambda L, Fn, x: L.einsum("ij,jk->ik", x[0], x[1]), [((4, 5), f32), ((5, 3), f32)]),
    ("einsum_sum", lambda L, Fn, x: L.einsum("ij->i", x[0]), [((4, 5), f32)]),
    ("mm_float64", lambda L, Fn, x: L.mm(x[0], x[1]), [((4, 5), f64), ((5, 3), f64)]),
    # float32
    ("mse_loss", lambda L, Fn, x: Fn.mse_loss(x[0], x[1]), [((4, 5), b16), ((4, 5), b16)]),
    ("l1_loss", lambda L, Fn, x: Fn.l1_loss(x[0], x[1]), [((4, 5), b16), ((4, 5), b16)]),
    ("smooth_l1_loss", lambda L, Fn, x: Fn.smooth_l1_loss(x[0], x[1]), [((4, 5), b16), ((4, 5), b16)]),
    ("huber_loss", lambda L, Fn, x: Fn.huber_loss(x[0], x[1]), [((4, 5), b16), ((4, 5), b16)]),
    ("kl_div", lambda L, Fn, x: Fn.kl_div(x[0], x[1], reduction="batchmean"), [((4, 5), b16), ((4, 5), b16 + "+")]),
    ("cross_entropy", lambda L, Fn, x: Fn.cross_entropy(x[0], x[1]), [((4, 5), b16), ("long", [0, 1, 4, 2])]),
    ("nll_loss", lambda L, Fn, x: Fn.nll_loss(x[0], x[1]), [((4, 5), b16), ("long", [0, 1, 4, 2])]),
    ("bce_with_logits", lambda L, Fn, x: Fn.binary_cross_entropy_with_logits(x[0], x[1]),
     [((4, 5), b16), ((4, 5), b16)]),
    ("binary_cross_entropy", lambda L, Fn, x: Fn.binary_cross_entropy(L.sigmoid(x[0]), L.sigmoid(x[1])),
     [((4, 5), b16), ((4, 5), b16)]),
    ("soft_margin_loss", lambda L, Fn, x: Fn.soft_margin_loss(x[0], x[1]), [((4, 5), b16), ((4, 5), b16)]),
    ("prod", lambda L, Fn, x: x[0].prod(), [((4, 5), b16)]),
    ("trace", lambda L, Fn, x: L.trace(x[0]), [((4, 4), b16)]),
    ("cdist", lambda L, Fn, x: L.cdist(x[0], x[1]), [((4, 3), b16), ((5, 3), b16)]),
    ("linalg_qr", lambda L, Fn, x: L.linalg.qr(x[0])[0], [((4, 4), b16)]),
    # promote
    ("cat_mixed", lambda L, Fn, x: L.cat([x[0], x[1]]), [((2, 3), low), ((2, 3), f32)]),
    ("cat_same", lambda L, Fn, x: L.cat([x[0], x[1]]), [((2, 3), low), ((2, 3), low)]),
    ("stack_mixed", lambda L, Fn, x: L.stack([x[0], x[1]]), [((2, 3), low), ((2, 3), f32)]),
    ("index_copy", lambda L, Fn, x: x[0].index_copy(0, x[2], x[1]), [((3, 4), f32), ((1, 4), low), ("long", [1])]),
    ("addcmul", lambda L, Fn, x: L.addcmul(x[0], x[1], x[2]), [((3, 4), f32), ((3, 4), low), ((3, 4), low)]),
    # not listed on the CPU: run in their inputs' dtypes
    ("exp", lambda L, Fn, x: L.exp(x[0]), [((4, 5), b16)]),
    ("softmax", lambda L, Fn, x: L.softmax(x[0], -1), [((4, 5), b16)]),
    ("log_softmax", lambda L, Fn, x: L.log_softmax(x[0], -1), [((4, 5), b16)]),
    ("layer_norm", lambda L, Fn, x: Fn.layer_norm(x[0], [5]), [((4, 5), b16)]),
    ("group_norm", lambda L, Fn, x: Fn.group_norm(x[0], 2), [((2, 4, 3), b16)]),
    ("sum", lambda L, Fn, x: x[0].sum(), [((4, 5), b16)]),
    ("cumsum", lambda L, Fn, x: x[0].cumsum(0), [((4, 5), b16)]),
    ("relu", lambda L, Fn, x: L.relu(x[0]), [((4, 5), b16)]),
    ("add_mixed", lambda L, Fn, x: x[0] + x[1], [((4, 5), b16), ((4, 5), f32)]),
    ("pow", lambda L, Fn, x: x[0].pow(2), [((4, 5), b16)]),
    ("mm_int", lambda L, Fn, x: L.mm(x[0].long(), x[1].long()), [((3, 3), f32), ((3, 3), f32)]),
    ("dot", lambda L, Fn, x: L.dot(x[0], x[1]), [((5,), f32), ((5,), f32)]),
    ("outer", lambda L, Fn, x: L.outer(x[0], x[1]), [((5,), f32), ((4,), f32)]),
    ("linalg_solve", lambda L, Fn, x: L.linalg.solve(x[0] + 4 * L.eye(4), x[1]), [((4, 4), b16), ((4, 2), b16)]),
]


@pytest.mark.parametrize("dname,tdt,ttdt", DTYPES, ids=[d[0] for d in DTYPES])
@pytest.mark.parametrize("name,fn,specs", OPS, ids=[o[0] for o in OPS])
def test_result_dtype_matches_pytorch(name, fn, specs, dname, tdt, ttdt):
    tps, tts = _inputs(specs, dname)
    with torch.autocast("cpu", dtype=ttdt):
        want = fn(torch, TF, tts)
    with tp.autocast("cpu", dtype=tdt):
        got = fn(tp, F, tps)
    assert _name(got.dtype) == _name(want.dtype), name
    # The values agree within the 16-bit error model (one rounding of each input and of the result).
    tol = 2e-2 if dname == "bfloat16" else 4e-3
    np.testing.assert_allclose(got.float().numpy(), want.float().detach().numpy(), rtol=tol * 4, atol=tol * 4)


def test_no_cast_outside_autocast_and_state_restored():
    a, _ = _pair((3, 3))
    assert (a @ a).dtype == tp.float32
    assert not tp.is_autocast_enabled("cpu")
    with tp.autocast("cpu", dtype=tp.float16):
        assert tp.is_autocast_enabled("cpu") and tp.get_autocast_dtype("cpu") == tp.float16
        assert not tp.is_autocast_enabled("cuda")  # per device type
        assert (a @ a).dtype == tp.float16
    assert not tp.is_autocast_enabled("cpu")
    assert tp.get_autocast_dtype("cpu") == tp.bfloat16  # PyTorch's default again
    assert tp.get_autocast_dtype("cuda") == tp.float16
    assert (a @ a).dtype == tp.float32


def test_nested_enabled_false_and_inner_dtype():
    a, _ = _pair((3, 3))
    with tp.autocast("cpu"):
        assert (a @ a).dtype == tp.bfloat16
        with tp.autocast("cpu", enabled=False):
            assert not tp.is_autocast_enabled("cpu")
            assert (a @ a).dtype == tp.float32
            # A 16-bit tensor met inside the disabled region stays 16-bit; float32 meets it by promotion.
            h = a.bfloat16()
            assert (h @ h).dtype == tp.bfloat16
        assert (a @ a).dtype == tp.bfloat16
        with tp.autocast("cpu", dtype=tp.float16):
            assert (a @ a).dtype == tp.float16
        assert (a @ a).dtype == tp.bfloat16
    assert (a @ a).dtype == tp.float32


def test_cuda_state_does_not_cast_cpu_tensors():
    a, _ = _pair((3, 3))
    with tp.autocast("cuda"):
        assert tp.is_autocast_enabled() and tp.is_autocast_enabled("cuda")
        assert (a @ a).dtype == tp.float32  # CPU tensors follow the "cpu" state only
    with tp.cuda.amp.autocast():
        assert tp.is_autocast_enabled("cuda")
    assert not tp.is_autocast_enabled("cuda")


def test_decorator_form():
    a, _ = _pair((3, 3))

    @tp.autocast("cpu")
    def f(x):
        return x @ x, tp.is_autocast_enabled("cpu")

    @tp.autocast("cpu", enabled=False)
    def g(x):
        return x @ x

    out, on = f(a)
    assert out.dtype == tp.bfloat16 and on
    assert not tp.is_autocast_enabled("cpu")
    with tp.autocast("cpu"):
        assert g(a).dtype == tp.float32
        assert tp.is_autocast_enabled("cpu")
    assert f.__name__ == "f"


def test_bad_arguments_raise():
    with pytest.raises(TypeError, match="float16 or tensorplay.bfloat16"):
        tp.autocast("cpu", dtype=tp.int32)
    with pytest.raises(RuntimeError, match="unsupported device_type 'tpu'"):
        tp.autocast(device_type="tpu")
    with pytest.raises(TypeError, match="device_type must be a string"):
        tp.autocast(tp.bfloat16)
    with pytest.raises(RuntimeError, match="tpu"):
        tp.amp.GradScaler("tpu")
    with pytest.raises(ValueError, match="growth factor"):
        tp.amp.GradScaler("cpu", growth_factor=0.5)
    with pytest.raises(ValueError):
        tp._C._set_autocast_dtype("cpu", tp.float64)


def test_gradients_are_float32_and_cast_backward_casts_back():
    rng = np.random.default_rng(1)
    wn, xn = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    w = tp.tensor(wn, requires_grad=True)
    tw = torch.tensor(wn, requires_grad=True)
    with tp.autocast("cpu"):
        y = tp.tensor(xn) @ w
        assert y.dtype == tp.bfloat16
        loss = F.mse_loss(y, tp.zeros(4, 3))
        assert loss.dtype == tp.float32
    loss.backward()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tloss = TF.mse_loss(torch.tensor(xn) @ tw, torch.zeros(4, 3))
    tloss.backward()
    assert w.dtype == tp.float32 and w.grad.dtype == tp.float32
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=3e-2, atol=3e-2)


def test_backward_inside_autocast_region_is_not_cast():
    w = tp.randn(4, 4, requires_grad=True)
    x = tp.randn(3, 4)
    with tp.autocast("cpu"):
        loss = (x @ w).float().exp().sum()
        loss.backward()  # the derivative formulas run in the forward's dtypes
    g1 = w.grad.clone()
    w.grad = None
    with tp.autocast("cpu"):
        loss = (x @ w).float().exp().sum()
    loss.backward()
    assert w.grad.dtype == tp.float32
    np.testing.assert_array_equal(g1.numpy(), w.grad.numpy())


def test_listed_composite_casts_once():
    # Attention is listed lower-precision: its inputs are cast once, its inner softmax and matmuls
    # are not cast again (they run as in a bfloat16 call outside autocast).
    q, _ = _pair((2, 4, 8))
    with tp.autocast("cpu"):
        got = F.scaled_dot_product_attention(q, q, q)
    want = F.scaled_dot_product_attention(q.bfloat16(), q.bfloat16(), q.bfloat16())
    assert got.dtype == tp.bfloat16
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    # linear's decomposition (matmul + add) sees bf16 inputs: same as the bf16 call outside autocast.
    x, _ = _pair((4, 5))
    w, _ = _pair((3, 5), seed=3)
    b, _ = _pair((3,), seed=4)
    with tp.autocast("cpu"):
        got = F.linear(x, w, b)
    np.testing.assert_array_equal(got.float().numpy(), F.linear(x.bfloat16(), w.bfloat16(), b.bfloat16()).float().numpy())


def test_cpp_callers_see_the_same_casts():
    # _C._call_op enters the C++ dispatcher directly (no Python wrapper): the casts happen there.
    a, _ = _pair((3, 3))
    with tp.autocast("cpu"):
        assert tp._C._call_op("mm", [a, a], {})[0].dtype == tp.bfloat16
        assert tp._C._call_op("mse_loss", [a.bfloat16(), a.bfloat16()], {"reduction": "mean"})[0].dtype == tp.float32
    assert tp._C._call_op("mm", [a, a], {})[0].dtype == tp.float32


def test_explicit_dtype_argument_is_kept():
    h = tp.randn(3, 4).bfloat16()
    with tp.autocast("cpu"):
        assert h.sum(dtype=tp.float64).dtype == tp.float64
        assert F.softmax(h, -1, dtype=tp.float32).dtype == tp.float32


def test_cast_cache_reuses_parameter_casts():
    w = tp.randn(4, 4, requires_grad=True)
    x = tp.randn(2, 4)
    with tp.autocast("cpu"):
        y1 = x @ w
        y2 = x @ w
        (y1.float().sum() + y2.float().sum()).backward()
    expected = 2 * x.bfloat16().float().sum(0, keepdim=True).t().expand(4, 4)
    np.testing.assert_allclose(w.grad.numpy(), expected.numpy(), rtol=2e-2, atol=2e-2)
    # An in-place change of the parameter inside the region is seen (the cache checks versions).
    with tp.autocast("cpu"):
        a = (tp.eye(4) @ w).float()
        with tp.no_grad():
            w.mul_(2)
        b = (tp.eye(4) @ w).float()
    np.testing.assert_allclose(b.detach().numpy(), 2 * a.detach().numpy(), rtol=1e-2, atol=1e-2)
    with tp.autocast("cpu", cache_enabled=False):
        assert not tp.is_autocast_cache_enabled()
        assert (x @ w).dtype == tp.bfloat16
    assert tp.is_autocast_cache_enabled()


# ---------------------------------------------------------------- tp.compile
def test_compiled_function_keeps_a_version_per_autocast_state():
    def f(x, w):
        return tp.relu(x @ w) + 1

    cf = tp.compile(f)
    x, _ = _pair((4, 5))
    w, _ = _pair((5, 3), seed=2)
    out32 = cf(x, w)
    assert out32.dtype == tp.float32
    with tp.autocast("cpu"):
        out16 = cf(x, w)
        assert out16.dtype == tp.bfloat16
        np.testing.assert_array_equal(out16.float().numpy(), f(x, w).float().numpy())
    with tp.autocast("cpu", dtype=tp.float16):
        assert cf(x, w).dtype == tp.float16
    # Back to each earlier state: the right version again (first-level entry and key).
    assert cf(x, w).dtype == tp.float32
    np.testing.assert_array_equal(cf(x, w).numpy(), out32.numpy())
    with tp.autocast("cpu"):
        assert cf(x, w).dtype == tp.bfloat16
        assert cf(x, w).dtype == tp.bfloat16
    with tp.autocast("cpu", enabled=False):
        assert cf(x, w).dtype == tp.float32
    assert cf.num_specializations == 3


def test_compiled_graph_records_the_casts():
    def f(x, w):
        return F.softmax(x @ w, -1)

    cf = tp.compile(f, backend="eager")
    x, _ = _pair((4, 5))
    w, _ = _pair((5, 3), seed=2)
    with tp.autocast("cpu"):
        got = cf(x, w)
        want = f(x, w)
    assert got.dtype == want.dtype == tp.bfloat16
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_capture_shows_the_casts_as_operators():
    def f(x, w):
        return tp.softmax(x @ w, -1)

    x, _ = _pair((4, 5))
    w, _ = _pair((5, 3), seed=2)
    with tp.autocast("cpu"):
        code = str(tp.compiler.capture(f, x, w))
    assert code.count("tp.Tensor.to(") == 2 and "dtype=tp.bfloat16" in code
    assert "to(" not in str(tp.compiler.capture(f, x, w))  # outside autocast: no casts


def test_compiled_attention_under_autocast_equals_eager():
    # The graph holds attention's parts after its single cast; running it must not cast them again.
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    q, _ = _pair((2, 4, 8))
    k, _ = _pair((2, 4, 8), seed=5)
    v, _ = _pair((2, 4, 8), seed=6)
    cf = tp.compile(f)
    with tp.autocast("cpu"):
        got = cf(q, k, v)
        want = f(q, k, v)
    assert got.dtype == tp.bfloat16
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2, atol=1e-2)


def test_function_entering_autocast_itself_is_compiled():
    def f(x):
        with tp.autocast("cpu"):
            y = x @ x
        return y.float() + 1

    cf = tp.compile(f)
    x, _ = _pair((4, 4))
    np.testing.assert_array_equal(cf(x).numpy(), f(x).numpy())
    np.testing.assert_array_equal(cf(x).numpy(), f(x).numpy())
    assert not tp.is_autocast_enabled("cpu")


# ---------------------------------------------------------------- training
class _MLP:
    def __init__(self, lib, ws):
        self.lib = lib
        nn = lib.nn
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        with lib.no_grad():
            for p, a in zip(self.net.parameters(), ws):
                p.copy_(lib.tensor(a))


def _training_losses(lib, mode, steps=6):
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal(s).astype(np.float32) * 0.3 for s in [(16, 8), (16,), (4, 16), (4,)]]
    x0, y0 = rng.standard_normal((32, 8)).astype(np.float32), rng.integers(0, 4, size=32)
    xs, ys = [x0] * steps, [y0] * steps  # one batch: the loss must go down
    net = _MLP(lib, ws).net
    opt = lib.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    Fn = lib.nn.functional
    scaler = lib.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)

    def loss_fn(x, y):
        with lib.autocast("cpu", dtype=lib.bfloat16):
            out = net(x)
            assert out.dtype == lib.bfloat16
            loss = Fn.cross_entropy(out, y)
        return loss

    if mode == "compiled":
        loss_fn = tp.compile(loss_fn)
    losses, scales = [], []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        loss = loss_fn(lib.tensor(x), lib.tensor(y))
        assert loss.dtype == lib.float32
        scaler.scale(loss).backward()
        for p in net.parameters():
            assert p.dtype == lib.float32 and p.grad.dtype == lib.float32
        scaler.step(opt)
        scaler.update()
        losses.append(float(loss.detach()))
        scales.append(scaler.get_scale())
    return losses, scales, [p.detach().float().numpy() for p in net.parameters()]


def test_training_loop_eager_compiled_and_pytorch_agree():
    eager, s_eager, p_eager = _training_losses(tp, "eager")
    fallbacks = tp.compiler.metrics.fallback_count
    compiled, s_comp, p_comp = _training_losses(tp, "compiled")
    assert tp.compiler.metrics.fallback_count == fallbacks
    ref, s_ref, p_ref = _training_losses(torch, "eager")
    assert s_eager == s_comp == s_ref == [1024.0, 1024.0, 2048.0, 2048.0, 2048.0, 4096.0]
    # bfloat16 has 8 significant bits: the losses agree to its rounding (per step).
    np.testing.assert_allclose(eager, ref, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(compiled, eager, rtol=1e-2, atol=1e-2)
    assert eager[-1] < eager[0]
    for a, b in zip(p_eager, p_ref):
        np.testing.assert_allclose(a, b, rtol=5e-2, atol=5e-2)


def test_compiled_training_step_region_with_autocast():
    # Forward+backward compiled together (AOT layer): the joint graph differentiates the casts.
    rng = np.random.default_rng(3)
    wn = rng.standard_normal((8, 4)).astype(np.float32)
    xn = rng.standard_normal((16, 8)).astype(np.float32)

    def run(compiled):
        w = tp.tensor(wn, requires_grad=True)

        def step(x):
            with tp.autocast("cpu"):
                out = tp.tanh(x @ w)
                return F.mse_loss(out, tp.zeros(16, 4))
        fn = tp.compile(step) if compiled else step
        loss = fn(tp.tensor(xn))
        loss.backward()
        return float(loss), w.grad.clone()

    l_e, g_e = run(False)
    m = tp.compiler.metrics
    regions, fallbacks = m.aot_regions, m.fallback_count
    l_c, g_c = run(True)
    assert m.aot_regions == regions + 1 and m.fallback_count == fallbacks  # a compiled training region
    assert g_c.dtype == tp.float32
    assert abs(l_e - l_c) < 1e-2 * max(1.0, abs(l_e))
    np.testing.assert_allclose(g_c.numpy(), g_e.numpy(), rtol=2e-2, atol=2e-2)


def test_grad_scaler_with_compiled_optimizer_step():
    net = tp.nn.Linear(4, 2)
    opt = tp.optim.Adam(net.parameters(), lr=0.01)
    opt.step = tp.compile(opt.step)
    scaler = tp.amp.GradScaler("cpu", init_scale=256.0)
    x = tp.randn(8, 4)
    before = [p.detach().clone() for p in net.parameters()]
    for _ in range(3):
        opt.zero_grad()
        with tp.autocast("cpu"):
            loss = net(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    assert all(not np.array_equal(a.numpy(), p.detach().numpy()) for a, p in zip(before, net.parameters()))


# ---------------------------------------------------------------- GradScaler
def test_grad_scaler_skips_step_on_inf_and_backs_off():
    p = tp.nn.Parameter(tp.ones(3))
    opt = tp.optim.SGD([p], lr=0.1)
    scaler = tp.amp.GradScaler("cpu", init_scale=8.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=2)
    assert scaler.get_scale() == 8.0

    def step(grad_value):
        opt.zero_grad()
        loss = (p * grad_value).sum()
        scaler.scale(loss).backward()
        np.testing.assert_allclose(p.grad.numpy(), np.full(3, grad_value * scaler.get_scale()))
        scaler.step(opt)
        scaler.update()

    step(float("inf"))
    np.testing.assert_array_equal(p.detach().numpy(), np.ones(3))  # skipped
    assert scaler.get_scale() == 4.0
    step(float("nan"))
    np.testing.assert_array_equal(p.detach().numpy(), np.ones(3))
    assert scaler.get_scale() == 2.0
    step(1.0)  # taken, with the gradient unscaled
    np.testing.assert_allclose(p.detach().numpy(), np.full(3, 0.9), rtol=1e-6)
    assert scaler.get_scale() == 2.0 and scaler._get_growth_tracker() == 1
    step(1.0)
    assert scaler.get_scale() == 4.0 and scaler._get_growth_tracker() == 0


def test_grad_scaler_unscale_then_clip_and_errors():
    p = tp.nn.Parameter(tp.ones(2))
    opt = tp.optim.SGD([p], lr=1.0)
    scaler = tp.amp.GradScaler("cpu", init_scale=4.0)
    scaler.scale((p * 3).sum()).backward()
    scaler.unscale_(opt)
    np.testing.assert_allclose(p.grad.numpy(), [3.0, 3.0])
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    tp.nn.utils.clip_grad_norm_([p], 1.0)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(p.detach().numpy(), 1 - 1 / math.sqrt(2), rtol=1e-5)


def test_grad_scaler_refuses_float16_gradients():
    p = tp.nn.Parameter(tp.ones(2).half())
    opt = tp.optim.SGD([p], lr=1.0)
    scaler = tp.amp.GradScaler("cpu")
    scaler.scale(p.float().sum()).backward()
    with pytest.raises(ValueError, match="FP16 gradients"):
        scaler.step(opt)


def test_grad_scaler_state_dict_and_disabled():
    s = tp.amp.GradScaler("cpu", init_scale=32.0, growth_interval=7)
    s._growth_tracker = 3
    sd = s.state_dict()
    assert sd == {"scale": 32.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 7,
                  "_growth_tracker": 3}
    t = tp.amp.GradScaler("cpu")
    t.load_state_dict(sd)
    assert t.get_scale() == 32.0 and t.get_growth_interval() == 7 and t._get_growth_tracker() == 3
    t2 = pickle.loads(pickle.dumps(t))
    assert t2.get_scale() == 32.0
    # PyTorch's own state dict loads too.
    ts = torch.amp.GradScaler("cpu", init_scale=64.0)
    t.load_state_dict(ts.state_dict())
    assert t.get_scale() == 64.0
    off = tp.amp.GradScaler("cpu", enabled=False)
    loss = tp.tensor(2.0)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    # CUDA unavailable: torch.cuda.amp.GradScaler's rule, a warning and a disabled scaler.
    if not tp.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            c = tp.cuda.amp.GradScaler()
        assert not c.is_enabled()


def test_custom_fwd_casts_inputs():
    class Sq(tp.autograd.Function):
        @staticmethod
        @tp.amp.custom_fwd(device_type="cpu", cast_inputs=tp.float32)
        def forward(ctx, x):
            ctx.save_for_backward(x)
            assert not tp.is_autocast_enabled("cpu")
            return x @ x

        @staticmethod
        @tp.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g @ x.t() + x.t() @ g

    x = tp.randn(3, 3).bfloat16().requires_grad_()
    with tp.autocast("cpu"):
        y = Sq.apply(x)
    assert y.dtype == tp.float32
    y.sum().backward()
    assert x.grad.dtype == tp.bfloat16
