"""Autograd through device moves (issue 12, "autograd on CUDA"): x.cuda(), x.to("cuda"),
x.to("cuda:1"), y.cpu(), y.to("cpu"), x.to(other) of a tensor that requires grad give a
result with history (ToCopyBackward0, as in PyTorch) whose backward moves the gradient
back to the source's device; before the fix the result had no grad_fn and the source's
.grad stayed None. Also: a move inside tp.compile of a value that comes from the call is
the graph operator `_to_device` (each call moves its own value). A compiled region's buffers
live on one device, so such a graph is split at its moves into one generated region per
device and stage (compile/device_split.cpp); a symbolic graph with a move is interpreted.

The CPU-only group runs everywhere (a move to the same device is the tensor itself and
the dtype path still records); the rest needs one GPU (cuda:1 cases: two)."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

N_GPUS = tp.cuda.device_count()
gpu = pytest.mark.skipif(N_GPUS < 1, reason="no CUDA GPU")
two_gpus = pytest.mark.skipif(N_GPUS < 2, reason="needs two CUDA GPUs")
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) is not installed")


def _np(t):
    return t.detach().cpu().numpy()


def _dev(t):
    return str(t.device)


# ---- no GPU needed ----

def test_same_device_moves_are_self_and_dtype_records():
    w = tp.randn(3, 4, requires_grad=True)
    assert w.cpu() is w and w.to("cpu") is w and w.to(tp.randn(2)) is w
    y = w.to("cpu", tp.float64)
    assert y.requires_grad and not y.is_leaf and y.grad_fn is not None
    (y * 3).sum().backward()
    assert w.grad.dtype == tp.float32
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 4), 3.0))


# ---- one GPU ----

@gpu
@pytest.mark.parametrize("move", [lambda t: t.cuda(), lambda t: t.to("cuda"), lambda t: t.to("cuda:0"),
                                  lambda t: t.to(tp.device("cuda", 0)), lambda t: t.cuda(0),
                                  lambda t: t.to(tp.zeros(1, device="cuda"))],
                         ids=["cuda()", "to(cuda)", "to(cuda:0)", "to(device)", "cuda(0)", "to(other)"])
def test_cpu_to_cuda_records(move):
    w = tp.randn(4, 4, requires_grad=True)
    y = move(w)
    assert _dev(y) == "cuda:0"
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.name() == "ToCopyBackward0"
    (y * 2).sum().backward()
    assert w.grad is not None and _dev(w.grad) == "cpu"
    np.testing.assert_allclose(w.grad.numpy(), np.full((4, 4), 2.0))


@gpu
@pytest.mark.parametrize("move", [lambda t: t.cpu(), lambda t: t.to("cpu"), lambda t: t.to(tp.zeros(1))],
                         ids=["cpu()", "to(cpu)", "to(other)"])
def test_cuda_to_cpu_records(move):
    w = tp.randn(5, 3, device="cuda", requires_grad=True)
    y = move(w)
    assert _dev(y) == "cpu" and y.requires_grad and not y.is_leaf
    assert y.grad_fn.name() == "ToCopyBackward0"
    (y * y).sum().backward()
    assert _dev(w.grad) == "cuda:0"
    np.testing.assert_allclose(_np(w.grad), 2 * _np(w), rtol=1e-6)


@gpu
def test_round_trip_and_two_paths_accumulate():
    w = tp.randn(6, requires_grad=True)
    z = (w.cuda() * 2).cpu().cuda().cpu()          # cpu -> cuda -> cpu -> cuda -> cpu
    loss = (z * w).sum() + (w.cuda() ** 2).sum().cpu()  # two consumers of w, one on each device
    loss.backward()
    # d/dw (2w*w + w^2) = 6w
    np.testing.assert_allclose(w.grad.numpy(), 6 * w.detach().numpy(), rtol=1e-5)


@gpu
def test_example_from_the_issue():
    w = tp.randn(4, 4, requires_grad=True)
    loss = (w.cuda() * 2).sum()
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), np.full((4, 4), 2.0))


@gpu
def test_move_with_dtype_change():
    w = tp.randn(3, 3, requires_grad=True)
    y = w.to("cuda", tp.float64)  # converted on the host, then uploaded: two nodes
    assert y.dtype == tp.float64 and _dev(y) == "cuda:0" and y.grad_fn.name() == "ToCopyBackward0"
    (y * y).sum().backward()
    assert w.grad.dtype == tp.float32 and _dev(w.grad) == "cpu"
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.detach().numpy(), rtol=1e-6)

    c = tp.randn(3, 3, device="cuda", requires_grad=True)
    d = c.to("cpu", tp.float64)  # downloaded, then converted on the host
    assert d.dtype == tp.float64 and _dev(d) == "cpu"
    (d * 4).sum().backward()
    assert c.grad.dtype == tp.float32 and _dev(c.grad) == "cuda:0"
    np.testing.assert_allclose(_np(c.grad), np.full((3, 3), 4.0))


@gpu
def test_non_blocking_move_records():
    w = tp.randn(8).pin_memory().requires_grad_(True)
    y = w.to("cuda", non_blocking=True)
    np.testing.assert_array_equal(_np(y), w.detach().numpy())
    (y * 5).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.full(8, 5.0))


@gpu
def test_retain_grad_on_moved_tensor():
    w = tp.randn(4, requires_grad=True)
    y = w.cuda()
    y.retain_grad()
    (y * 3).sum().backward()
    assert _dev(y.grad) == "cuda:0"
    np.testing.assert_allclose(_np(y.grad), np.full(4, 3.0))
    np.testing.assert_allclose(w.grad.numpy(), np.full(4, 3.0))


@gpu
def test_no_grad_detach_and_same_device():
    w = tp.randn(4, requires_grad=True)
    with tp.no_grad():
        y = w.cuda()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    d = w.detach().cuda()
    assert not d.requires_grad and d.grad_fn is None
    e = w.cuda().detach()
    assert not e.requires_grad and e.grad_fn is None
    c = tp.randn(4, device="cuda", requires_grad=True)
    assert c.cuda() is c and c.to("cuda:0") is c and c.to(c) is c
    i = tp.arange(4)  # integers never require grad
    assert not i.cuda().requires_grad


@gpu
def test_double_backward_through_moves():
    w = tp.randn(5, requires_grad=True)
    z = (w.cuda() ** 3).sum()
    (g,) = tp.autograd.grad(z, w, create_graph=True)
    assert _dev(g) == "cpu" and g.requires_grad
    np.testing.assert_allclose(g.detach().numpy(), 3 * w.detach().numpy() ** 2, rtol=1e-5)
    g.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 6 * w.detach().numpy(), rtol=1e-5)


class _HostParamsGpuCompute(nn.Module):
    """Parameters on the CPU; the forward moves them and the input to the GPU."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        h = F.relu(F.linear(x.cuda(), self.fc1.weight.cuda(), self.fc1.bias.cuda()))
        return F.linear(h.cpu(), self.fc2.weight, self.fc2.bias)  # back on the host


@gpu
@needs_torch
def test_model_with_host_parameters_matches_torch():
    tp.manual_seed(0)
    m = _HostParamsGpuCompute()
    x = tp.randn(4, 6)
    target = tp.randn(4, 3)
    loss = ((m(x) - target) ** 2).mean()
    loss.backward()

    tm = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).double()
    with torch.no_grad():
        for tl, ml in ((tm[0], m.fc1), (tm[2], m.fc2)):
            tl.weight.copy_(torch.from_numpy(ml.weight.detach().numpy().astype(np.float64)))
            tl.bias.copy_(torch.from_numpy(ml.bias.detach().numpy().astype(np.float64)))
    tx = torch.from_numpy(x.numpy().astype(np.float64))
    tt = torch.from_numpy(target.numpy().astype(np.float64))
    tloss = ((tm(tx) - tt) ** 2).mean()
    tloss.backward()
    np.testing.assert_allclose(float(loss), tloss.item(), rtol=1e-4)
    for p, q in ((m.fc1.weight, tm[0].weight), (m.fc1.bias, tm[0].bias),
                 (m.fc2.weight, tm[2].weight), (m.fc2.bias, tm[2].bias)):
        assert p.grad is not None and _dev(p.grad) == "cpu"
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5)


@gpu
@needs_torch
def test_gpu_leaf_through_host_computation_matches_torch():
    a = tp.randn(3, 4, device="cuda", requires_grad=True)
    b = tp.randn(4, 2, requires_grad=True)
    out = (a.cpu() @ b).tanh().cuda()
    loss = (out * out).sum()
    loss.backward()
    ta = torch.tensor(_np(a), dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(b.detach().numpy(), dtype=torch.float64, requires_grad=True)
    tout = (ta @ tb).tanh()
    (tout * tout).sum().backward()
    assert _dev(a.grad) == "cuda:0" and _dev(b.grad) == "cpu"
    np.testing.assert_allclose(_np(a.grad), ta.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-4, atol=1e-5)


# ---- tp.compile: a move of a value that comes from the call cannot be captured ----

_MOVES = [lambda x: (x.cuda() * 2).cpu(), lambda x: (x * 2).to("cuda").sum(),
          lambda x: (x.cuda() + 1).cpu() * 2, lambda x: x.cuda().exp().to("cpu", tp.float64)]


@gpu
@pytest.mark.parametrize("body", _MOVES)
def test_compiled_move_of_call_value_uses_the_call_value(body):
    # The move is an operator of the captured graph (`_to_device`): each call
    # moves its own value (it used to raise CaptureError; recording the copy
    # made at capture would have returned stale results).
    f = tp.compile(body, options={"warn_fallback": False})
    for _ in range(3):
        x = tp.randn(5)
        got, want = f(x), body(x)
        assert _dev(got) == _dev(want) and got.dtype == want.dtype
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)


@gpu
def test_compiled_download_of_cuda_value():
    body = lambda x: (x * 2).cpu() + 1  # noqa: E731
    f = tp.compile(body, options={"warn_fallback": False})
    for _ in range(2):
        x = tp.randn(5, device="cuda")
        got = f(x)
        assert _dev(got) == "cpu"
        np.testing.assert_allclose(_np(got), _np(x) * 2 + 1, rtol=1e-6)


@gpu
def test_compiled_move_is_generated_code_on_both_sides():
    # Split at the move: each side is a generated region, so strict_native
    # holds and nothing falls back (it used to run the whole graph interpreted).
    body = lambda x: ((x.cuda() * 2).exp().cpu() + x).sum(0)  # noqa: E731
    f = tp.compile(body, strict_native=True)
    for _ in range(3):
        x = tp.randn(6, 5)
        got = f(x)
        assert _dev(got) == "cpu"
        np.testing.assert_allclose(_np(got), _np(body(x)), rtol=1e-5)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning either
        g = tp.compile(body)
        np.testing.assert_allclose(_np(g(x)), _np(body(x)), rtol=1e-5)


def _split_cases():
    def transposed_across(x):  # a non-contiguous value crosses the move
        return (x.t() * 3).cuda().sum(1).cpu()

    def several_results(x):  # a multi-result op before the move, its results used after
        v, i = x.cuda().max(1)
        return v.cpu() * 2, i.cpu()

    def round_trips(x):  # two moves each way, values reused across stages
        a = x.cuda() + 1
        b = a.cpu() * x
        c = b.cuda() * a
        return c.cpu() + b, a

    def returns_input_and_scalar(x):
        return x, (x.cuda() ** 2).mean().cpu(), x.cuda().sum()

    def cpu_scalar_into_cuda(x):  # a 0-d CPU tensor read by a CUDA operator
        s = x.sum()
        return (x.cuda() * s).cpu()

    def independent_sides(x):  # CPU work that does not depend on the GPU part
        return (x.cuda().sin()).cpu(), x.cos() * 2

    return [transposed_across, several_results, round_trips, returns_input_and_scalar, cpu_scalar_into_cuda,
            independent_sides]


@gpu
@pytest.mark.parametrize("body", _split_cases(), ids=lambda f: f.__name__)
def test_split_regions_match_eager(body):
    f = tp.compile(body, strict_native=True)
    for _ in range(3):
        x = tp.randn(7, 5)
        got, want = f(x), body(x)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert _dev(g) == _dev(w) and g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
            np.testing.assert_allclose(_np(g), _np(w), rtol=1e-5, atol=1e-6)


@gpu
def test_split_returned_input_is_the_input():
    f = tp.compile(lambda x: (x, (x.cuda() * 2).cpu()), strict_native=True)
    x = tp.randn(3)
    a, b = f(x)
    assert a is x or a.data_ptr() == x.data_ptr()
    np.testing.assert_allclose(_np(b), 2 * _np(x))


@gpu
def test_split_training_gradients_match_eager_under_strict_native():
    w = tp.randn(5, 4, requires_grad=True)
    b = tp.randn(4, device="cuda", requires_grad=True)

    def loss(x, w, b):
        h = (x @ w).cuda() + b
        return (h.relu().cpu() * x[:, :4]).sum()

    f = tp.compile(loss, strict_native=True)
    for _ in range(2):
        x = tp.randn(6, 5)
        le = loss(x, w, b)
        ge = tp.autograd.grad(le, [w, b])
        lc = f(x, w, b)
        gc = tp.autograd.grad(lc, [w, b])
        np.testing.assert_allclose(_np(lc), _np(le), rtol=1e-5)
        for a, e in zip(gc, ge):
            assert _dev(a) == _dev(e)
            np.testing.assert_allclose(_np(a), _np(e), rtol=1e-5, atol=1e-6)


@gpu
def test_split_with_dynamic_true_over_sizes():
    body = lambda x: (x.cuda() * 2).exp().cpu() - x  # noqa: E731
    f = tp.compile(body, dynamic=True, strict_native=True)
    for n in (5, 7, 9):
        x = tp.randn(n)
        np.testing.assert_allclose(_np(f(x)), _np(body(x)), rtol=1e-5)


@gpu
def test_training_with_a_gpu_parameter_and_a_host_loss():
    # The AOT layer made the loss's tangent on the first GPU input's device
    # although the loss is on the host ("mul: Expected all tensors to be on
    # the same device"): the region then ran with eager autograd.
    b = tp.randn(4, device="cuda", requires_grad=True)
    loss = lambda x, b: ((x.cuda() + b).relu().cpu() * x).sum()  # noqa: E731
    f = tp.compile(loss, backend="aot_eager", options={"warn_fallback": False})
    import warnings
    x = tp.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lc = f(x, b)
    (gc,) = tp.autograd.grad(lc, [b])
    (ge,) = tp.autograd.grad(loss(x, b), [b])
    assert _dev(gc) == "cuda:0"
    np.testing.assert_allclose(_np(gc), _np(ge), rtol=1e-5, atol=1e-6)


@gpu
def test_compiled_module_moving_its_parameters_trains_like_eager():
    m = _HostParamsGpuCompute()
    cm = tp.compile(m, strict_native=True)
    x = tp.randn(4, 6)
    ye = m(x)
    ye.sum().backward()
    ge = {n: _np(p.grad).copy() for n, p in m.named_parameters()}
    for p in m.parameters():
        p.grad = None
    yc = cm(x)
    assert _dev(yc) == "cpu" and yc.grad_fn is not None
    np.testing.assert_allclose(_np(yc), _np(ye), rtol=1e-5, atol=1e-6)
    yc.sum().backward()
    for n, p in m.named_parameters():
        assert _dev(p.grad) == "cpu", n
        np.testing.assert_allclose(_np(p.grad), ge[n], rtol=1e-5, atol=1e-6, err_msg=n)
    with tp.no_grad():  # a parameter updated between calls is read again, not the capture's copy
        m.fc1.weight.mul_(0.5)
    np.testing.assert_allclose(_np(cm(x)), _np(m(x)), rtol=1e-5, atol=1e-6)


@gpu
def test_compiled_move_gradient_reaches_the_source_device():
    w = tp.randn(4, 3, requires_grad=True)
    f = tp.compile(lambda w: (w.cuda() ** 2).sum().cpu(), options={"warn_fallback": False})
    f(w).backward()
    assert _dev(w.grad) == "cpu"
    np.testing.assert_allclose(_np(w.grad), 2 * _np(w), rtol=1e-6)


# ---- two GPUs ----

@two_gpus
def test_cuda0_to_cuda1_records():
    w = tp.randn(4, 3, device="cuda:0", requires_grad=True)
    y = w.to("cuda:1")
    assert _dev(y) == "cuda:1" and y.grad_fn.name() == "ToCopyBackward0"
    z = (y * y).sum().cpu()
    z.backward()
    assert _dev(w.grad) == "cuda:0"
    np.testing.assert_allclose(_np(w.grad), 2 * _np(w), rtol=1e-6)


@two_gpus
def test_cpu_cuda1_cuda0_chain():
    w = tp.randn(7, requires_grad=True)
    y = w.cuda(1).to("cuda:0").cuda(1)
    (y * 3).sum().backward()
    assert _dev(w.grad) == "cpu"
    np.testing.assert_allclose(w.grad.numpy(), np.full(7, 3.0))
