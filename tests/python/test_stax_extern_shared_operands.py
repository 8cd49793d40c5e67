"""A value that feeds a GEMM through a reshape (a linear layer flattening
[batch, seq, features]) and is also returned (an activation saved for the
backward) is computed once, into the returned buffer, which the GEMM reads:
before, the region computed it a second time in a kernel of its own at its
end and wrote it twice."""
import numpy as np

import tensorplay as tp


def _mlp_block(x, w1, w2):
    h = (x @ w1.t()).relu()                      # [b, s, f]
    y = h.reshape(-1, h.shape[-1]) @ w2.t()      # the GEMM reads h through a view
    return y, h                                  # h returned as well


def _inputs():
    r = np.random.default_rng(0)
    x = tp.from_numpy(r.standard_normal((4, 8, 16)).astype(np.float32))
    w1 = tp.from_numpy(r.standard_normal((32, 16)).astype(np.float32))
    w2 = tp.from_numpy(r.standard_normal((8, 32)).astype(np.float32))
    return x, w1, w2


def _kernels_reading(cf, op):
    return [k for k in cf.last_kernels if op in {o.strip() for part in k["origin"].split(";") for o in part.split(",")}]


def test_value_fed_to_a_gemm_and_returned_is_computed_once():
    args = _inputs()
    cf = tp.compile(_mlp_block, backend="stax", options={"warn_fallback": False})
    with tp.no_grad():
        y, h = cf(*args)
        ye, he = _mlp_block(*args)
    np.testing.assert_allclose(y.numpy(), ye.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(h.numpy(), he.numpy())
    assert tuple(h.shape) == (4, 8, 32) and h.is_contiguous()
    relu_kernels = _kernels_reading(cf, "relu")
    assert len(relu_kernels) == 1, relu_kernels


def test_returned_value_is_not_aliased_by_a_later_call():
    # The returned buffer is the region's output (fresh per call), not a kept temporary.
    x, w1, w2 = _inputs()
    cf = tp.compile(_mlp_block, backend="stax", options={"warn_fallback": False})
    with tp.no_grad():
        _, h1 = cf(x, w1, w2)
        first = h1.numpy().copy()
        _, h2 = cf(x * 2, w1, w2)
    np.testing.assert_array_equal(h1.numpy(), first)
    assert h1.data_ptr() != h2.data_ptr()


def test_training_step_gradients_match_eager():
    x, w1, w2 = _inputs()
    w1.requires_grad_(True)
    w2.requires_grad_(True)
    loss = lambda x, w1, w2: sum(t.square().mean() for t in _mlp_block(x, w1, w2))  # noqa: E731
    cf = tp.compile(loss, options={"warn_fallback": False})
    cf(x, w1, w2).backward()
    g = [w1.grad.numpy().copy(), w2.grad.numpy().copy()]
    w1.grad = w2.grad = None
    loss(x, w1, w2).backward()
    np.testing.assert_allclose(g[0], w1.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g[1], w2.grad.numpy(), rtol=1e-5, atol=1e-6)


def _relu_backward_grads(h, go, x):
    g = tp.where(h > 0, go, tp.zeros_like(go))   # relu's backward
    return g.t() @ x, g.sum(0)                    # weight gradient (GEMM) and bias gradient (column sum)


def test_gemm_operand_read_by_another_kernel_is_computed_once():
    r = np.random.default_rng(1)
    h, go = (tp.from_numpy(r.standard_normal((64, 32)).astype(np.float32)) for _ in range(2))
    x = tp.from_numpy(r.standard_normal((64, 16)).astype(np.float32))
    cf = tp.compile(_relu_backward_grads, backend="stax", options={"warn_fallback": False})
    with tp.no_grad():
        dw, db = cf(h, go, x)
        dwe, dbe = _relu_backward_grads(h, go, x)
    np.testing.assert_allclose(dw.numpy(), dwe.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db.numpy(), dbe.numpy(), rtol=1e-5, atol=1e-5)
    assert len(_kernels_reading(cf, "where")) == 1, cf.last_kernels


def test_returned_reshape_of_a_gemm_result_keeps_the_gemms_planned_shape():
    # Regression: the returned reshape of an extern call's result made that
    # result's buffer the output in the output's shape, which the call then
    # rejected (CPU: a ValueError; CUDA: "_gemm_bgrad result 1 has shape [1, 10], planned [10]").
    r = np.random.default_rng(2)
    a = tp.from_numpy(r.standard_normal((4, 3)).astype(np.float32))
    b = tp.from_numpy(r.standard_normal((3, 5)).astype(np.float32))
    fns = [lambda a, b: (a @ b).reshape(-1),
           lambda a, b: (a @ b).view(2, 10),
           lambda a, b: ((a @ b).relu().sum(0, keepdim=True).reshape(-1), (a @ b).reshape(5, 4))]
    for fn in fns:
        cf = tp.compile(fn, backend="stax", options={"warn_fallback": False})
        with tp.no_grad():
            got, want = cf(a, b), fn(a, b)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            assert tuple(g.shape) == tuple(w.shape)
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
