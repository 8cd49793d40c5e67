"""tp.utils.checkpoint against torch.utils.checkpoint: the same values and
gradients (inputs and the parameters used inside), random numbers replayed in
the recomputation, nothing kept inside the checkpointed function, and clear
errors where the recomputation cannot deliver a gradient."""
import warnings

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay.utils.checkpoint import checkpoint, checkpoint_sequential

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().numpy()


def _mlp(lib, seed=0):
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal((8, 8)).astype(np.float32) * 0.3 for _ in range(3)]
    return [lib.tensor(w).requires_grad_(True) for w in ws]


def _block(lib, w):
    act = tp.tanh if lib is tp else torch.tanh
    return lambda x: act(x @ w) * 2.0 + x


@pytest.mark.parametrize("use_reentrant", [True, False])
@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_values_and_gradients_match_torch(use_reentrant, input_requires_grad):
    xs = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    res = {}
    for lib, ck in ((tp, checkpoint), (torch, torch.utils.checkpoint.checkpoint)):
        if lib is torch and use_reentrant and not input_requires_grad:
            # PyTorch's reentrant variant records nothing here (its output does not
            # require grad); ours, as its non-reentrant one, gives the parameters'
            # gradients: compared with plain torch below.
            res[torch] = None
            continue
        ws = _mlp(lib)
        x = lib.tensor(xs).requires_grad_(input_requires_grad)
        h = x
        for w in ws:
            h = ck(_block(lib, w), h, use_reentrant=use_reentrant)
        h.pow(2).sum().backward()
        res[lib] = ([_np(h)] + [_np(w.grad) for w in ws] + ([_np(x.grad)] if input_requires_grad else []))
    want = res[torch]
    if want is None:
        ws = _mlp(torch)
        h = torch.tensor(xs)
        for w in ws:
            h = _block(torch, w)(h)
        h.pow(2).sum().backward()
        want = [h.detach().numpy()] + [w.grad.numpy() for w in ws]
    for a, b in zip(res[tp], want):
        # float32 sums of products: errors relative to the largest entry (cancellation)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * np.abs(b).max())


def test_keeps_only_the_inputs():
    w = tp.randn(64, 64, requires_grad=True)
    x = tp.randn(32, 64, requires_grad=True)

    def heavy(a):
        for _ in range(4):
            a = tp.tanh(a @ w)
        return a
    plain = heavy(x)
    ckpt = checkpoint(heavy, x, use_reentrant=False)
    saved_plain = sum(t.numel() for n in tp.autograd.graph.walk(plain.grad_fn) for t in n._saved_tensors)
    saved_ckpt = sum(t.numel() for n in tp.autograd.graph.walk(ckpt.grad_fn) for t in n._saved_tensors)
    assert saved_ckpt <= x.numel() < saved_plain
    np.testing.assert_array_equal(_np(ckpt), _np(plain))


def test_dropout_mask_is_replayed_in_the_recomputation():
    tp.manual_seed(0)
    x = tp.randn(16, 32, requires_grad=True)
    w = tp.randn(32, 32, requires_grad=True)
    f = lambda a: F.dropout(a @ w, p=0.5, training=True)  # noqa: E731
    tp.manual_seed(7)
    y = checkpoint(f, x, use_reentrant=False)
    y.sum().backward()
    gx, gw = _np(x.grad).copy(), _np(w.grad).copy()
    x.grad = w.grad = None
    tp.manual_seed(7)
    y2 = f(x)
    y2.sum().backward()
    np.testing.assert_array_equal(_np(y), _np(y2))
    np.testing.assert_allclose(gx, _np(x.grad), rtol=1e-6)
    np.testing.assert_allclose(gw, _np(w.grad), rtol=1e-6)
    # ... and the generator continues from where the forward left it, not the replay.
    tp.manual_seed(7)
    checkpoint(f, x, use_reentrant=False).sum().backward()
    after_ckpt = tp.rand(3)
    tp.manual_seed(7)
    f(x).sum().backward()
    np.testing.assert_array_equal(_np(after_ckpt), _np(tp.rand(3)))


def test_tuple_outputs_kwargs_and_non_tensor_arguments():
    a = tp.randn(3, 4, requires_grad=True)
    b = tp.randn(3, 4, requires_grad=True)

    def f(x, y, scale, *, shift):
        return x * scale + shift, (x * y).sum(1)
    p, q = checkpoint(f, a, b, 3.0, use_reentrant=False, shift=1.0)
    (p.sum() + q.sum()).backward()
    np.testing.assert_allclose(_np(a.grad), 3.0 + _np(b), rtol=1e-6)
    np.testing.assert_allclose(_np(b.grad), _np(a), rtol=1e-6)


def test_checkpoint_sequential_matches_torch():
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((5, 6)).astype(np.float32)
    tp.manual_seed(0)
    net = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(6, 6), nn.Tanh())])
    tnet = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(6, 6), torch.nn.Tanh())])
    with torch.no_grad():
        for p, q in zip(net.parameters(), tnet.parameters()):
            q.copy_(torch.from_numpy(_np(p)))
    y = checkpoint_sequential(net, 3, tp.tensor(xs, requires_grad=True), use_reentrant=False)
    ty = torch.utils.checkpoint.checkpoint_sequential(tnet, 3, torch.tensor(xs, requires_grad=True),
                                                      use_reentrant=False)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(_np(y), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    for p, q in zip(net.parameters(), tnet.parameters()):
        np.testing.assert_allclose(_np(p.grad), q.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_autograd_grad_reaches_the_inputs_and_refuses_hidden_parameters():
    x = tp.randn(3, 4, requires_grad=True)
    y = checkpoint(lambda a: (a * a).sin(), x, use_reentrant=False)
    (g,) = tp.autograd.grad(y.sum(), [x])
    np.testing.assert_allclose(_np(g), np.cos(_np(x) ** 2) * 2 * _np(x), rtol=1e-5)
    w = tp.randn(4, 4, requires_grad=True)
    z = checkpoint(lambda a: a @ w, x, use_reentrant=False)
    with pytest.raises(RuntimeError, match="loss.backward"):
        tp.autograd.grad(z.sum(), [x])


def test_no_grad_and_compiled_calls_run_the_function_directly():
    w = tp.randn(4, 4, requires_grad=True)
    x = tp.randn(2, 4)
    with tp.no_grad():
        y = checkpoint(lambda a: a @ w, x, use_reentrant=False)
    assert y.grad_fn is None and not y.requires_grad
    f = tp.compile(lambda a: checkpoint(lambda b: (b @ w).tanh(), a, use_reentrant=False).sum())
    f(x).backward()
    got = _np(w.grad).copy()
    w.grad = None
    (x @ w).tanh().sum().backward()
    np.testing.assert_allclose(got, _np(w.grad), rtol=1e-5, atol=1e-6)


def test_bad_arguments():
    x = tp.randn(2, requires_grad=True)
    with pytest.raises(TypeError, match="callable"):
        checkpoint(3, x, use_reentrant=False)
    with pytest.raises(TypeError, match="tensor or a tuple"):
        checkpoint(lambda a: [a], x, use_reentrant=False)
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential([tp.tanh], 0, x)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        checkpoint(tp.sin, x)
    assert any("use_reentrant" in str(r.message) for r in rec)
