"""Dynamic shapes in training through derivative formulas that compute with
sizes (issue 11, item 5). cat's gradient slices at sums of its inputs' sizes,
slice/narrow/split/chunk/select gradients scatter at the forward's bounds, and
pad is composed of narrow/flip/expand/cat (x[n - 1] with a SymInt index is a
symbolic select; repeat's gradient reshapes to [count, size] pairs): each formula hands the joint trace
expressions of the symbolic sizes (ops/size_expr.h, the forward's symbolic
attributes), so one forward and one backward artifact serve every size. Each
case is trained compiled (dynamic=True, strict_native=True: no eager fallback
hides anything) at several sizes of the symbolic dim: loss, the input's and
the weight's gradients against eager, the input's gradient against finite
differences (float64, through the compiled function), one version for all
sizes >= 2, and its own static version for a size 0 or 1 (0/1 specialization)."""
import os

os.environ.setdefault("TP_SYMBOLIC_STRICT", "1")  # a wrong shape rule is an error here, not a specialization

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tensorplay as tp  # noqa: E402
import tensorplay.nn.functional as F  # noqa: E402

D = tp.float64


def weight():
    tp.manual_seed(7)
    return tp.randn(4, 4, dtype=D, requires_grad=True)


# name -> (function of (x, w) with x of shape [n, 4], sizes >= 2 (the first is
# the capture's), sizes 0/1 the function accepts)
CASES = {
    "cat": (lambda x, w: tp.cat([x @ w, x], 0).sin().sum(), [5, 2, 3, 7, 13], [1, 0]),
    "cat_three_with_a_static_part": (
        lambda x, w: (tp.cat([x, tp.ones(3, 4, dtype=D), (x @ w).tanh()], 0) ** 3).sum(), [6, 2, 11], [1, 0]),
    "cat_along_dim_1": (lambda x, w: tp.cat([(x @ w).t(), x.t() * 2], 1).sin().sum(), [5, 2, 4, 17], [1]),
    "stack_unbind": (lambda x, w: sum((p * (i + 1)).sin().sum() for i, p in
                                      enumerate(tp.stack([x @ w, x], 0).unbind(0))), [6, 2, 7], [1]),
    "pad_constant": (lambda x, w: F.pad(x @ w, (1, 0, 2, 3), value=0.5).sin().sum(), [5, 2, 3, 11], [1, 0]),
    "pad_reflect": (lambda x, w: F.pad((x @ w).unsqueeze(0), (0, 0, 1, 2), mode="reflect").sin().sum(),
                    [6, 3, 5, 13], []),
    "pad_replicate": (lambda x, w: F.pad((x @ w).unsqueeze(0), (0, 0, 2, 1), mode="replicate").sin().sum(),
                      [5, 2, 3, 7], [1]),
    "pad_circular": (lambda x, w: F.pad((x @ w).unsqueeze(0), (0, 0, 2, 1), mode="circular").sin().sum(),
                     [5, 2, 3, 7], []),
    "pad_crop": (lambda x, w: F.pad(x @ w, (0, 0, -1, 1)).sin().sum(), [6, 2, 3, 7], []),
    "slice_symbolic_end": (lambda x, w: (x @ w)[: x.size(0) // 2].sin().sum(), [9, 4, 5, 11], []),
    "slice_symbolic_negative_start": (lambda x, w: (x @ w)[-(x.size(0) // 2):].sin().sum(), [9, 4, 5, 13], []),
    "slice_constant_bounds_and_step": (lambda x, w: (x @ w)[1:-1:2].sin().sum(), [9, 4, 7, 13], []),
    "narrow_symbolic_length": (lambda x, w: (x @ w).narrow(0, 1, x.size(0) - 1).sin().sum(), [5, 3, 7, 13], []),
    "narrow_negative_start": (lambda x, w: (x @ w).narrow(0, -3, 2).sin().sum(), [6, 3, 5, 11], []),
    "select_symbolic_index": (lambda x, w: (x @ w)[x.size(0) - 1].sin().sum() + x[x.size(0) // 2].sum(),
                              [5, 2, 3, 7, 13], [1]),
    "select_negative_literal": (lambda x, w: (x @ w)[-2].sin().sum(), [5, 2, 3, 7], []),
    "select_operator_symbolic_index": (lambda x, w: (x @ w).select(0, x.size(0) // 2).sin().sum(), [6, 2, 3, 11], [1]),
    "repeat": (lambda x, w: ((x @ w).repeat(3, 2) * tp.arange(8.0, dtype=D)).sin().sum(), [5, 2, 3, 7], [1, 0]),
    "repeat_with_a_leading_dim": (lambda x, w: (x @ w).repeat(2, 1, 1).sin().sum() + x.tile((2,)).sum(),
                                  [5, 2, 3, 7], [1]),
    "sort": (lambda x, w: ((x @ w).sort(0)[0] * tp.arange(4.0, dtype=D)).sin().sum(), [5, 2, 3, 7], [1]),
    "topk": (lambda x, w: (x @ w).topk(2, 0)[0].sin().sum() + x.topk(1, 1)[0].sum(), [5, 2, 3, 7], []),
    "index_with_tensors": (lambda x, w: (x @ w)[tp.tensor([0, 1, 0])].sin().sum() + (x @ w)[:, [3, 1]].cos().sum(),
                           [5, 2, 3, 7], []),
    "split_with_an_int_size": (lambda x, w: sum((p * (i + 1)).sin().sum() for i, p in
                                                enumerate(tp.split(x @ w, 4, 0))), [10, 11, 12], []),
    "chunk": (lambda x, w: sum((p * (i + 1)).sin().sum() for i, p in enumerate((x @ w).chunk(2, 0))),
              [8, 4, 6, 14], []),
}


def close(a, b, tol=1e-9):
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)


def step(cf, f, w, n, seed):
    tp.manual_seed(seed)
    x = tp.randn(n, 4, dtype=D, requires_grad=True)
    w.grad = None
    loss = cf(x, w)
    loss.backward()
    got = (loss.detach(), x.grad.clone(), w.grad.clone())
    x.grad = None
    w.grad = None
    ref = f(x, w)
    ref.backward()
    close(got[0], ref.detach())
    close(got[1], x.grad)
    close(got[2], w.grad)
    return x.detach().clone().requires_grad_(True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_symbolic_training_matches_eager_and_finite_differences(name):
    f, sizes, small = CASES[name]
    w = weight()
    cf = tp.compile(lambda x: f(x, w), dynamic=True, strict_native=True)
    g = lambda x, w: f(x, w)  # noqa: E731
    for i, n in enumerate(sizes):
        x = step(lambda x, w: cf(x), g, w, n, i)
        # The compiled function's input gradient against central differences
        # of the compiled function itself (the same version: same sizes).
        assert tp.autograd.gradcheck(cf, (x,), eps=1e-6, atol=1e-6)
    # One training version for every size, and one inference version (gradcheck's
    # finite differences run under no_grad).
    assert cf.num_specializations == 2, name
    for k, n in enumerate(small):  # a symbolic dim of 0 or 1: its own static version, correct
        step(lambda x, w: cf(x), g, w, n, 50 + k)
        assert cf.num_specializations == 3 + k, name


def test_no_refusal_is_reported(monkeypatch, capfd):
    monkeypatch.setenv("TP_LOGS", "recompiles")
    for name in ["cat", "pad_reflect", "narrow_symbolic_length", "chunk"]:
        f, sizes, _ = CASES[name]
        w = weight()
        cf = tp.compile(lambda x: f(x, w), dynamic=True, strict_native=True)
        for i, n in enumerate(sizes):
            step(lambda x, w: cf(x), f, w, n, i)
        assert cf.num_specializations == 1, name
    assert "made static" not in capfd.readouterr().err


def test_slice_gradient_with_symbolic_bounds_is_zero_outside_the_slice():
    # The scatter of the slice's gradient evaluates its bounds at each call:
    # rows outside [n // 3, n - 1) get no gradient at every size.
    w = weight()
    cf = tp.compile(lambda x: (x @ w)[x.size(0) // 3: x.size(0) - 1].sum(), dynamic=True, strict_native=True)
    for n in [9, 4, 7, 16, 31]:
        x = tp.randn(n, 4, dtype=D, requires_grad=True)
        cf(x).backward()
        lo, hi = n // 3, n - 1
        expect = np.zeros((n, 4))
        expect[lo:hi] = w.detach().numpy().sum(1)
        np.testing.assert_allclose(x.grad.numpy(), expect, atol=1e-12)
    assert cf.num_specializations == 1


def test_cat_of_a_training_mlp_with_a_varying_batch():
    # A model that concatenates two feature paths along the batch: one version.
    tp.manual_seed(3)
    a, b = tp.nn.Linear(6, 5), tp.nn.Linear(6, 5)
    params = list(a.parameters()) + list(b.parameters())

    def loss(x):
        return tp.cat([a(x).relu(), b(x[1:]).tanh()], 0).pow(2).mean()

    cf = tp.compile(loss, dynamic=True, strict_native=True)
    for n in [12, 3, 5, 29, 64]:
        x = tp.randn(n, 6)
        for p in params:
            p.grad = None
        cf(x).backward()
        got = [p.grad.clone() for p in params]
        for p in params:
            p.grad = None
        loss(x).backward()
        for p, gp in zip(params, got):
            close(gp, p.grad, 1e-5)
    assert cf.num_specializations == 1
