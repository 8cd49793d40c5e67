"""tp.amp.GradScaler step by step against torch.amp.GradScaler('cpu') (skipped steps, backoff,
growth, state dicts), disabled tp.autocast, window functions, float32 matmul precision and the added
linalg functions (solve_ex, cond, vander, tensorinv, tensorsolve) against PyTorch."""
import numpy as np
import pytest
import torch

import tensorplay as tp

rng = np.random.default_rng(0)
W0 = rng.standard_normal((4, 3)).astype(np.float32)
DATA = [(rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32))
        for _ in range(10)]


def _run_scaler(lib, make_scaler, overflow_steps=(2, 3, 7), unscale_at=5, enabled=True):
    w = lib.tensor(W0.copy(), requires_grad=True)
    opt = (torch.optim.SGD if lib is torch else tp.optim.SGD)([w], lr=0.01, momentum=0.9)
    sc = make_scaler(init_scale=1024.0, growth_interval=2, enabled=enabled)
    hist = []
    for i, (x, y) in enumerate(DATA):
        opt.zero_grad()
        loss = ((lib.tensor(x) @ w - lib.tensor(y)) ** 2).sum()
        if i in overflow_steps:
            loss = loss * float("inf")
        sc.scale(loss).backward()
        if i == unscale_at:
            sc.unscale_(opt)
            # the gradients are unscaled in place: what clip_grad_norm_ would see
            hist.append(("grad", w.grad.detach().numpy().copy()))
        sc.step(opt)
        sc.update()
        hist.append((sc.get_scale(), w.detach().numpy().copy()))
    return hist, sc


@pytest.mark.parametrize("enabled", [True, False])
def test_grad_scaler_matches_torch(enabled):
    a, tsc = _run_scaler(torch, lambda **k: torch.amp.GradScaler("cpu", **k), enabled=enabled)
    b, sc = _run_scaler(tp, lambda **k: tp.amp.GradScaler("cpu", **k), enabled=enabled)
    assert len(a) == len(b)
    for (s1, w1), (s2, w2) in zip(a, b):
        assert s1 == s2
        np.testing.assert_allclose(w2, w1, rtol=1e-5, atol=1e-6)
    assert sc.state_dict() == tsc.state_dict()
    assert sc.is_enabled() == enabled


def test_grad_scaler_skips_overflow_steps_and_state_roundtrip():
    w = tp.tensor(W0.copy(), requires_grad=True)
    opt = tp.optim.SGD([w], lr=0.1)
    sc = tp.amp.GradScaler("cpu", init_scale=8.0, growth_interval=1)
    (w.sum() * float("nan")).backward()
    before = w.detach().numpy().copy()
    assert sc.step(opt) is None
    sc.update()
    np.testing.assert_array_equal(w.detach().numpy(), before)
    assert sc.get_scale() == 4.0
    sc2 = tp.amp.GradScaler("cpu")
    sc2.load_state_dict(sc.state_dict())
    assert sc2.get_scale() == 4.0 and sc2.get_growth_interval() == 1
    with pytest.raises(RuntimeError, match="state dict is empty"):
        sc2.load_state_dict(tp.amp.GradScaler("cpu", enabled=False).state_dict())


def test_grad_scaler_errors():
    w = tp.zeros(2, requires_grad=True)
    opt = tp.optim.SGD([w], lr=0.1)
    sc = tp.amp.GradScaler("cpu")
    sc.scale(w.sum()).backward()
    sc.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_.*already"):
        sc.unscale_(opt)
    sc.step(opt)
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called"):
        sc.step(opt)
    sc.update()
    with pytest.raises(RuntimeError, match="No inf checks"):
        sc.update()
    with pytest.raises(ValueError, match="growth factor"):
        tp.amp.GradScaler("cpu", growth_factor=0.5)
    assert [t.numpy().tolist() for t in sc.scale([tp.ones(1), tp.ones(2)])] == [[sc.get_scale()], [sc.get_scale()] * 2]


def test_autocast_disabled_is_noop():
    # (enabled autocast is covered by test_autocast.py)
    with tp.autocast("cpu", enabled=False):
        y = tp.ones(2, 2) @ tp.ones(2, 2)
    assert y.dtype == tp.float32
    with tp.amp.autocast("cpu", dtype=tp.bfloat16, enabled=False):
        assert (tp.ones(2, 2) @ tp.ones(2, 2)).dtype == tp.float32


def test_float32_matmul_precision():
    old = tp.backends.cuda.matmul.allow_tf32
    try:
        tp.set_float32_matmul_precision("high")
        assert tp.get_float32_matmul_precision() == "high" and tp.backends.cuda.matmul.allow_tf32
        tp.set_float32_matmul_precision("highest")
        assert tp.get_float32_matmul_precision() == "highest" and not tp.backends.cuda.matmul.allow_tf32
        with pytest.raises(RuntimeError, match="set_float32_matmul_precision"):
            tp.set_float32_matmul_precision("low")
    finally:
        tp.backends.cuda.matmul.allow_tf32 = old


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
def test_windows_match_torch(name):
    for n in (0, 1, 2, 7, 16):
        for periodic in (True, False):
            a = getattr(tp, name)(n, periodic, dtype=tp.float64)
            b = getattr(torch, name)(n, periodic, dtype=torch.float64)
            assert a.shape == tuple(b.shape)
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-12)
    assert getattr(tp, name)(5).dtype == tp.float32
    with pytest.raises(RuntimeError, match=name):
        getattr(tp, name)(-1)
    with pytest.raises(RuntimeError, match=name):
        getattr(tp, name)(4, dtype=tp.int64)


def test_window_parameters():
    np.testing.assert_allclose(tp.hamming_window(9, False, 0.5, 0.5, dtype=tp.float64).numpy(),
                               torch.hamming_window(9, False, 0.5, 0.5, dtype=torch.float64).numpy(), atol=1e-12)
    np.testing.assert_allclose(tp.kaiser_window(9, True, 5.0, dtype=tp.float64).numpy(),
                               torch.kaiser_window(9, True, 5.0, dtype=torch.float64).numpy(), atol=1e-10)


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", float("inf"), float("-inf"), 1, -1])
def test_cond_matches_torch(p):
    A = rng.standard_normal((3, 4, 4))
    np.testing.assert_allclose(tp.linalg.cond(tp.tensor(A), p).numpy(), torch.linalg.cond(torch.tensor(A), p).numpy(),
                               rtol=1e-10)


def test_cond_singular_and_errors():
    S = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert float(tp.linalg.cond(tp.tensor(S), "fro")) == float("inf")
    assert float(tp.linalg.cond(tp.tensor(S))) > 1e15
    with pytest.raises(RuntimeError, match="cond"):
        tp.linalg.cond(tp.tensor(S), "bad")
    with pytest.raises(RuntimeError, match="cond"):
        tp.linalg.cond(tp.ones(3))


def test_solve_ex():
    A, B = rng.standard_normal((3, 4, 4)), rng.standard_normal((3, 4, 2))
    r, tr = tp.linalg.solve_ex(tp.tensor(A), tp.tensor(B)), torch.linalg.solve_ex(torch.tensor(A), torch.tensor(B))
    np.testing.assert_allclose(r.result.numpy(), tr.result.numpy(), rtol=1e-10)
    assert r.info.numpy().tolist() == [0, 0, 0]
    S = tp.tensor(np.array([[1.0, 2.0], [2.0, 4.0]]))
    res, info = tp.linalg.solve_ex(S, tp.ones(2, dtype=tp.float64))
    assert int(info) > 0
    with pytest.raises(tp.linalg.LinAlgError):
        tp.linalg.solve_ex(S, tp.ones(2, dtype=tp.float64), check_errors=True)


def test_vander_tensorinv_tensorsolve():
    x = rng.standard_normal((2, 4))
    for n in (None, 2, 6):
        np.testing.assert_allclose(tp.linalg.vander(tp.tensor(x), N=n).numpy(),
                                   torch.linalg.vander(torch.tensor(x), N=n).numpy(), rtol=1e-12)
    T = rng.standard_normal((4, 6, 8, 3))
    np.testing.assert_allclose(tp.linalg.tensorinv(tp.tensor(T), 2).numpy(),
                               torch.linalg.tensorinv(torch.tensor(T), 2).numpy(), rtol=1e-8, atol=1e-10)
    A, B = rng.standard_normal((2, 3, 6)), rng.standard_normal((2, 3))
    np.testing.assert_allclose(tp.linalg.tensorsolve(tp.tensor(A), tp.tensor(B)).numpy(),
                               torch.linalg.tensorsolve(torch.tensor(A), torch.tensor(B)).numpy(), rtol=1e-10)
    A3 = rng.standard_normal((6, 2, 3))
    np.testing.assert_allclose(tp.linalg.tensorsolve(tp.tensor(A3), tp.tensor(B), dims=(0,)).numpy(),
                               torch.linalg.tensorsolve(torch.tensor(A3), torch.tensor(B), dims=(0,)).numpy(),
                               rtol=1e-10)
    with pytest.raises(RuntimeError, match="vander"):
        tp.linalg.vander(tp.tensor(x), N=1)
    with pytest.raises(RuntimeError, match="tensorinv"):
        tp.linalg.tensorinv(tp.ones(2, 3, 4), 1)
    with pytest.raises(RuntimeError, match="tensorsolve"):
        tp.linalg.tensorsolve(tp.ones(2, 3, 5), tp.ones(2, 3))
    # gradients through vander and tensorinv against torch
    xt, txt = tp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    tp.linalg.vander(xt).pow(2).sum().backward()
    torch.linalg.vander(txt).pow(2).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), txt.grad.numpy(), rtol=1e-10)
