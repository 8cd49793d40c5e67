"""Second batch of PyTorch API gaps: index_reduce, put, diagonal_scatter, matrix_exp, norm(p='nuc'),
affine_grid/grid_sample, ctc_loss, weight_norm/spectral_norm, and eager corner cases (masked_fill and clamp
with out-of-range numbers, kthvalue ties). Values, dtypes and gradients against torch (float64), compiled
against eager, and bad input raising an error that names the function."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tensorplay as tp
import tensorplay.nn.functional as F

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape)


def close(r, e, rtol=1e-7, atol=1e-9):
    assert tuple(r.shape) == tuple(e.shape), (tuple(r.shape), tuple(e.shape))
    assert str(r.dtype).split(".")[-1] == str(e.dtype).split(".")[-1], (r.dtype, e.dtype)
    np.testing.assert_allclose(np.asarray(r.detach().numpy(), dtype=np.float64), e.detach().double().numpy(),
                               rtol=rtol, atol=atol, equal_nan=True)


def grads_match(fn_tp, fn_torch, arrays, *, rtol=1e-7, atol=1e-9, value_rtol=1e-7):
    """Values and gradients of sum(f(x) * W) for a fixed random W, float64, against torch."""
    xs = [tp.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out_t = fn_torch(*ts)
    out = fn_tp(*xs)
    close(out, out_t, rtol=value_rtol, atol=atol)
    w = RNG.standard_normal(tuple(out_t.shape))
    (out_t * torch.tensor(w)).sum().backward()
    (out * tp.tensor(w)).sum().backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


def compiled_matches(fn, *args, rtol=1e-6, atol=1e-7):
    e = fn(*args)
    c = tp.compile(fn)
    for _ in range(2):  # the capture and the compiled call
        r = c(*args)
        es, rs = (e, r) if isinstance(e, (tuple, list)) else ((e,), (r,))
        for a, b in zip(rs, es):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


def both_raise(fn, exc=RuntimeError, match=None):
    with pytest.raises(Exception):
        fn(torch)
    with pytest.raises(exc, match=match):
        fn(tp)


# ---------------------------------------------------------------- index_reduce
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_reduce_values_and_grads(reduce, include_self, dim):
    x = rand(4, 5, 3)
    n = x.shape[dim]
    idx = np.array([0, n - 1, 0, 1, n - 1, 0])
    src_shape = list(x.shape)
    src_shape[dim] = len(idx)
    src = rand(*src_shape)
    if reduce in ("amax", "amin"):
        src[..., 0] = 0.25  # ties between source rows and between a source and self
        x[..., 0] = 0.25
    grads_match(lambda a, b: tp.index_reduce(a, dim, tp.tensor(idx), b, reduce, include_self=include_self),
                lambda a, b: torch.index_reduce(a, dim, torch.tensor(idx), b, reduce, include_self=include_self),
                [x, src])


def test_index_reduce_in_place_integers_and_method():
    for reduce in ("prod", "mean", "amax", "amin"):
        a = np.array([[4, 5], [6, 7], [1, -3]])
        s = np.array([[1, 2], [3, -3], [7, 8]])
        i = np.array([0, 0, 2])
        r = tp.tensor(a).index_reduce_(0, tp.tensor(i), tp.tensor(s), reduce, include_self=False)
        e = torch.tensor(a).index_reduce_(0, torch.tensor(i), torch.tensor(s), reduce, include_self=False)
        close(r, e)
        r = tp.tensor(a, dtype=tp.float32).index_reduce(0, tp.tensor(i, dtype=tp.int32), tp.tensor(s, dtype=tp.float32), reduce)
        e = torch.tensor(a, dtype=torch.float32).index_reduce(0, torch.tensor(i, dtype=torch.int32),
                                                              torch.tensor(s, dtype=torch.float32), reduce)
        close(r, e)
    # in place through a non-contiguous view writes the base
    base = tp.zeros(3, 4)
    base.t().index_reduce_(0, tp.tensor([1, 1]), tp.ones(2, 3) * 2, "amax")
    tb = torch.zeros(3, 4)
    tb.t().index_reduce_(0, torch.tensor([1, 1]), torch.ones(2, 3) * 2, "amax")
    close(base, tb)


def test_index_reduce_compiled():
    x, s = tp.tensor(rand(5, 3)), tp.tensor(rand(4, 3))
    i = tp.tensor([0, 4, 0, 2])
    for reduce in ("prod", "mean", "amax", "amin"):
        compiled_matches(lambda a, b: tp.index_reduce(a, 0, i, b, reduce, include_self=False), x, s)


def test_index_reduce_errors():
    both_raise(lambda m: m.zeros(3).index_reduce(0, m.tensor([3]), m.ones(1), "prod"), IndexError, "index_reduce")
    both_raise(lambda m: m.zeros(3).index_reduce(0, m.tensor([-1]), m.ones(1), "prod"), IndexError, "index_reduce")
    both_raise(lambda m: m.zeros(3).index_reduce(0, m.tensor([0]), m.ones(1), "sum"), RuntimeError, "index_reduce")
    both_raise(lambda m: m.zeros(3).index_reduce(0, m.tensor([0.0]), m.ones(1), "prod"), RuntimeError, "index_reduce")
    both_raise(lambda m: m.zeros(3).index_reduce(0, m.tensor([0]), m.ones(1, dtype=m.float64), "prod"),
               RuntimeError, "index_reduce")
    both_raise(lambda m: m.zeros(3).index_reduce(0, m.tensor([0, 1]), m.ones(1), "prod"), RuntimeError, "index_reduce")
    both_raise(lambda m: m.zeros(3, 2).index_reduce(2, m.tensor([0]), m.ones(3, 1), "prod"), IndexError, "index_reduce")


# ---------------------------------------------------------------- put
@pytest.mark.parametrize("accumulate", [False, True])
def test_put_values_and_grads(accumulate):
    x = rand(3, 4)
    src = rand(2, 3)
    idx = np.array([[0, -1, 5], [11, 2, -12]])  # negative indices count from the end; no repeats (undefined)
    grads_match(lambda a, b: tp.put(a, tp.tensor(idx), b, accumulate=accumulate),
                lambda a, b: torch.put(a, torch.tensor(idx), b, accumulate=accumulate), [x, src])
    if accumulate:  # repeated positions add up
        rep = np.array([1, 1, -11, 3])
        grads_match(lambda a, b: a.put(tp.tensor(rep), b, True), lambda a, b: a.put(torch.tensor(rep), b, True),
                    [x, rand(4)])


def test_put_in_place_non_contiguous_and_integer():
    t = torch.arange(12).reshape(3, 4).t()
    u = tp.arange(12).reshape(3, 4).t()
    t.put_(torch.tensor([1, 2, -1]), torch.tensor([50, 60, 70]), accumulate=True)
    u.put_(tp.tensor([1, 2, -1]), tp.tensor([50, 60, 70]), accumulate=True)
    close(u, t)
    compiled_matches(lambda a, b: a.put(tp.tensor([0, 3, -2]), b), tp.tensor(rand(2, 3)), tp.tensor(rand(3)))
    compiled_matches(lambda a, b: a.put(tp.tensor([0, 0, -2]), b, accumulate=True), tp.tensor(rand(2, 3)),
                     tp.tensor(rand(3)))


def test_put_errors():
    both_raise(lambda m: m.zeros(3).put(m.tensor([3]), m.ones(1)), IndexError, "put")
    both_raise(lambda m: m.zeros(3).put(m.tensor([-4]), m.ones(1)), IndexError, "put")
    both_raise(lambda m: m.zeros(3).put_(m.tensor([0], dtype=m.int32), m.ones(1)), RuntimeError, "put")
    both_raise(lambda m: m.zeros(3).put(m.tensor([0]), m.ones(1, dtype=m.float64)), RuntimeError, "put")
    both_raise(lambda m: m.zeros(3).put(m.tensor([0, 1]), m.ones(1)), IndexError, "put")


# ---------------------------------------------------------------- diagonal / select / slice scatter
@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 1, 2), (-2, 2, 1), (0, 0, 2), (3, 1, 2)])
def test_diagonal_scatter(offset, d1, d2):
    x = rand(3, 4, 5)
    sv = rand(*torch.zeros(3, 4, 5).diagonal(offset, d1, d2).shape)
    grads_match(lambda a, b: tp.diagonal_scatter(a, b, offset, d1, d2),
                lambda a, b: torch.diagonal_scatter(a, b, offset, d1, d2), [x, sv])
    compiled_matches(lambda a, b: a.diagonal_scatter(b, offset, d1, d2), tp.tensor(x), tp.tensor(sv))


def test_select_and_slice_scatter_exist_and_match():
    x, s = rand(4, 5), rand(4)
    grads_match(lambda a, b: tp.select_scatter(a, b, 1, -2), lambda a, b: torch.select_scatter(a, b, 1, -2), [x, s])
    s2 = rand(4, 2)
    grads_match(lambda a, b: tp.slice_scatter(a, b, 1, 1, 5, 2), lambda a, b: torch.slice_scatter(a, b, 1, 1, 5, 2),
                [x, s2])


def test_diagonal_scatter_errors():
    both_raise(lambda m: m.diagonal_scatter(m.zeros(3, 3), m.ones(2)), RuntimeError, "diagonal_scatter")
    both_raise(lambda m: m.diagonal_scatter(m.zeros(3), m.ones(3)), RuntimeError, "diagonal_scatter")
    both_raise(lambda m: m.diagonal_scatter(m.zeros(3, 3), m.ones(3), 0, 0, 0), RuntimeError, "diagonal")


# ---------------------------------------------------------------- matrix_exp
@pytest.mark.parametrize("scale", [1e-3, 0.5, 3.0, 40.0])
def test_matrix_exp_values_and_grads(scale):
    a = rand(2, 3, 4, 4) * scale
    a[1, 2] *= 0.01  # the batch mixes matrices that need different numbers of squarings
    grads_match(tp.linalg.matrix_exp, torch.linalg.matrix_exp, [a], rtol=1e-9 if scale < 10 else 1e-7,
                atol=1e-9, value_rtol=1e-10 if scale < 10 else 1e-8)


def test_matrix_exp_special_cases_and_aliases():
    close(tp.matrix_exp(tp.zeros(3, 3)), torch.eye(3))
    x = rand(1, 1)
    close(tp.matrix_exp(tp.tensor(x)), torch.matrix_exp(torch.tensor(x)))
    close(tp.matrix_exp(tp.zeros(2, 0, 0)), torch.matrix_exp(torch.zeros(2, 0, 0)))
    nil = np.triu(rand(5, 5), 1)  # nilpotent: a finite series
    close(tp.matrix_exp(tp.tensor(nil)), torch.matrix_exp(torch.tensor(nil)), rtol=1e-12)
    f = rand(3, 3).astype(np.float32) * 4
    close(tp.tensor(f).matrix_exp(), torch.tensor(f).matrix_exp(), rtol=2e-5, atol=1e-5)
    diag = np.diag([1.0, -2.0, 30.0])
    close(tp.linalg.matrix_exp(tp.tensor(diag)), torch.tensor(np.diag(np.exp([1.0, -2.0, 30.0]))), rtol=1e-12)
    compiled_matches(tp.linalg.matrix_exp, tp.tensor(rand(2, 4, 4) * 5), rtol=1e-9)
    compiled_matches(tp.linalg.matrix_exp, tp.tensor(rand(4, 4)).float(), rtol=1e-5, atol=1e-5)


def test_matrix_exp_errors():
    both_raise(lambda m: m.linalg.matrix_exp(m.zeros(3, 4)), ValueError, "matrix_exp")
    both_raise(lambda m: m.linalg.matrix_exp(m.zeros(3)), ValueError, "matrix_exp")
    both_raise(lambda m: m.matrix_exp(m.zeros(3, 3, dtype=m.int64)), TypeError, "matrix_exp")


# ---------------------------------------------------------------- norm(p='nuc')
def test_norm_nuc():
    x = rand(4, 3)
    grads_match(lambda a: tp.norm(a, "nuc"), lambda a: torch.norm(a, "nuc"), [x])
    y = rand(2, 4, 3)
    grads_match(lambda a: a.norm(p="nuc", dim=(0, 2), keepdim=True), lambda a: a.norm(p="nuc", dim=(0, 2), keepdim=True),
                [y])
    close(tp.linalg.matrix_norm(tp.tensor(y), ord="nuc"), torch.linalg.matrix_norm(torch.tensor(y), ord="nuc"))
    close(tp.linalg.norm(tp.tensor(x), "nuc"), torch.linalg.norm(torch.tensor(x), "nuc"))
    # the other norms still reach the operator
    close(tp.norm(tp.tensor(y)), torch.norm(torch.tensor(y)))
    close(tp.tensor(y).norm(1, 2), torch.tensor(y).norm(1, 2))
    close(tp.tensor(y).norm(dim=1, keepdim=True), torch.tensor(y).norm(dim=1, keepdim=True))
    compiled_matches(lambda a: tp.norm(a, p="nuc"), tp.tensor(x))
    both_raise(lambda m: m.norm(m.zeros(2, 3, 4), "nuc"), RuntimeError, "norm")
    both_raise(lambda m: m.norm(m.zeros(2, 3, dtype=m.int64), "nuc"), TypeError, "norm")


# ---------------------------------------------------------------- affine_grid / grid_sample
@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid(nd, align_corners):
    theta = rand(2, nd, nd + 1)
    size = [2, 3, 4, 5] if nd == 2 else [2, 3, 4, 1, 6]
    grads_match(lambda t: F.affine_grid(t, size, align_corners=align_corners),
                lambda t: TF.affine_grid(t, size, align_corners=align_corners), [theta], rtol=1e-12, atol=1e-12)
    t32 = tp.tensor(theta).float()
    compiled_matches(lambda t: F.affine_grid(t, size, align_corners=align_corners), t32)


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(nd, mode, padding_mode, align_corners):
    if mode == "bicubic" and nd == 3:
        both_raise(lambda m: m.nn.functional.grid_sample(m.zeros(1, 1, 2, 3, 3), m.zeros(1, 2, 2, 2, 3), "bicubic"),
                   RuntimeError, "grid_sample")
        return
    x = rand(2, 3, *(4, 5, 6)[:nd])
    g = rand(2, *(3, 4, 2)[:nd], nd) * 1.6  # many samples outside [-1, 1]: every padding rule is used
    grads_match(lambda a, b: F.grid_sample(a, b, mode, padding_mode, align_corners),
                lambda a, b: TF.grid_sample(a, b, mode, padding_mode, align_corners), [x, g], rtol=1e-10, atol=1e-12)
    compiled_matches(lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=padding_mode,
                                                align_corners=align_corners),
                     tp.tensor(x).float(), tp.tensor(g).float(), rtol=1e-5, atol=1e-6)


def test_grid_sample_identity_grid_and_float32_training():
    x = rand(1, 2, 5, 7)
    theta = np.array([[[1.0, 0, 0], [0, 1.0, 0]]])
    grid = F.affine_grid(tp.tensor(theta), [1, 2, 5, 7], align_corners=False)
    close(F.grid_sample(tp.tensor(x), grid, align_corners=False), torch.tensor(x), rtol=1e-12, atol=1e-12)
    # a spatial transformer step: gradients reach theta through the grid
    th = tp.tensor(theta + rand(1, 2, 3) * 0.1, requires_grad=True)
    tht = torch.tensor(th.detach().numpy(), requires_grad=True)
    out = F.grid_sample(tp.tensor(x), F.affine_grid(th, [1, 2, 4, 4], align_corners=True), align_corners=True)
    ref = TF.grid_sample(torch.tensor(x), TF.affine_grid(tht, [1, 2, 4, 4], align_corners=True), align_corners=True)
    (out ** 2).sum().backward()
    (ref ** 2).sum().backward()
    np.testing.assert_allclose(th.grad.numpy(), tht.grad.numpy(), rtol=1e-9)


def test_grid_sample_and_affine_grid_errors():
    both_raise(lambda m: m.nn.functional.grid_sample(m.zeros(1, 1, 3, 3), m.zeros(1, 2, 2, 2), mode="cubic"),
               ValueError, "grid_sample")
    both_raise(lambda m: m.nn.functional.grid_sample(m.zeros(1, 1, 3, 3), m.zeros(1, 2, 2, 2), padding_mode="wrap"),
               ValueError, "grid_sample")
    both_raise(lambda m: m.nn.functional.grid_sample(m.zeros(1, 1, 3, 3), m.zeros(1, 2, 2, 3)), RuntimeError,
               "grid_sample")
    both_raise(lambda m: m.nn.functional.grid_sample(m.zeros(1, 1, 3, 3), m.zeros(2, 2, 2, 2)), RuntimeError,
               "grid_sample")
    both_raise(lambda m: m.nn.functional.grid_sample(m.zeros(1, 1, 3, 3), m.zeros(1, 2, 2, 2, dtype=m.float64)),
               RuntimeError, "grid_sample")
    both_raise(lambda m: m.nn.functional.grid_sample(m.zeros(1, 3, 3), m.zeros(1, 2, 2)), RuntimeError, "grid_sample")
    both_raise(lambda m: m.nn.functional.affine_grid(m.zeros(1, 2, 3), [1, 1, 3]), NotImplementedError, "affine_grid")
    both_raise(lambda m: m.nn.functional.affine_grid(m.zeros(1, 2, 3), [1, 1, 3, 3, 3]), ValueError, "affine_grid")
    both_raise(lambda m: m.nn.functional.affine_grid(m.zeros(1, 2, 3, dtype=m.int64), [1, 1, 3, 3]), ValueError,
               "affine_grid")
    both_raise(lambda m: m.nn.functional.affine_grid(m.zeros(2, 2, 3), [1, 1, 3, 3]), ValueError, "affine_grid")


# ---------------------------------------------------------------- ctc_loss
def _ctc_case(T=7, N=3, C=5):
    lp = torch.tensor(rand(T, N, C)).log_softmax(2).numpy()
    tg = np.array([[1, 2, 2, 3], [3, 1, 4, 4], [4, 4, 4, 1]])
    return lp, tg, [7, 5, 6], [4, 2, 3]


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("blank", [0, 2])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_values_and_grads(reduction, blank, concatenated):
    lp, tg, il, tl = _ctc_case()
    tg = np.where(tg == blank, (blank + 1) % 5, tg)
    if concatenated:
        tg = np.concatenate([tg[n, :tl[n]] for n in range(3)])
    grads_match(lambda a: F.ctc_loss(a, tp.tensor(tg), tp.tensor(il), tp.tensor(tl), blank=blank, reduction=reduction),
                lambda a: TF.ctc_loss(a, torch.tensor(tg), torch.tensor(il), torch.tensor(tl), blank=blank,
                                      reduction=reduction), [lp], rtol=1e-9, atol=1e-12, value_rtol=1e-10)


def test_ctc_loss_zero_infinity_empty_targets_unbatched_and_lists():
    lp, tg, _, _ = _ctc_case()
    il, tl = [2, 7, 6], [4, 0, 3]  # sample 0 has no alignment (4 labels in 2 frames): infinite loss
    for zi in (False, True):
        a, t = tp.tensor(lp, requires_grad=True), torch.tensor(lp, requires_grad=True)
        r = F.ctc_loss(a, tp.tensor(tg), il, tl, reduction="none", zero_infinity=zi)
        e = TF.ctc_loss(t, torch.tensor(tg), il, tl, reduction="none", zero_infinity=zi)
        close(r, e, rtol=1e-10)
        if zi:
            r.sum().backward()
            e.sum().backward()
            np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-12)
    # padding past a target length may hold any value (here -1 and C)
    padded = tg.copy()
    padded[1, 2:] = [-1, 5]
    grads_match(lambda a: F.ctc_loss(a, tp.tensor(padded), [7, 5, 6], [4, 2, 3], reduction="sum"),
                lambda a: TF.ctc_loss(a, torch.tensor(tg), [7, 5, 6], [4, 2, 3], reduction="sum"), [lp],
                rtol=1e-9, atol=1e-12)
    # unbatched: (T, C) log_probs, (S,) targets, lengths as tuples or 0-d tensors
    grads_match(lambda a: F.ctc_loss(a, tp.tensor(tg[0, :3]), (6,), (3,)),
                lambda a: TF.ctc_loss(a, torch.tensor(tg[0, :3]), (6,), (3,)),
                [lp[:, 0]], rtol=1e-9, atol=1e-12)
    grads_match(lambda a: F.ctc_loss(a, tp.tensor(tg[0, :3]), tp.tensor(6), tp.tensor(3), reduction="none"),
                lambda a: TF.ctc_loss(a, torch.tensor(tg[0, :3]), torch.tensor(6), torch.tensor(3), reduction="none"),
                [lp[:, 0]], rtol=1e-9, atol=1e-12)


def test_ctc_loss_module_float32_through_log_softmax_and_compiled():
    x = rand(12, 2, 6).astype(np.float32)
    tg = np.array([[1, 2, 3], [5, 5, 0]])
    il, tl = [12, 9], [3, 2]
    mod, ref = tp.nn.CTCLoss(blank=0, zero_infinity=True), torch.nn.CTCLoss(blank=0, zero_infinity=True)
    a, t = tp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    r = mod(a.log_softmax(2), tp.tensor(tg), tp.tensor(il), tp.tensor(tl))
    e = ref(t.log_softmax(2), torch.tensor(tg), torch.tensor(il), torch.tensor(tl))
    close(r, e, rtol=1e-5)
    r.backward()
    e.backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-6)
    itg, iil, itl = tp.tensor(tg), tp.tensor(il), tp.tensor(tl)
    compiled_matches(lambda v: F.ctc_loss(v.log_softmax(2), itg, iil, itl, reduction="sum"), tp.tensor(x),
                     rtol=1e-5, atol=1e-5)
    # compiled training step: same gradient as eager
    step = tp.compile(lambda v: F.ctc_loss(v.log_softmax(2), itg, iil, itl))
    a2 = tp.tensor(x, requires_grad=True)
    step(a2).backward()
    np.testing.assert_allclose(a2.grad.numpy(), a.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_ctc_loss_errors():
    lp = torch.zeros(5, 2, 4).log_softmax(2)

    def call(m, **kw):
        args = dict(log_probs=m.tensor(lp.numpy()), targets=m.tensor([[1, 2], [1, 1]]),
                    input_lengths=m.tensor([5, 5]), target_lengths=m.tensor([2, 2]))
        args.update({k: (v(m) if callable(v) else v) for k, v in kw.items()})
        return m.nn.functional.ctc_loss(**args)
    both_raise(lambda m: call(m, blank=4), RuntimeError, "ctc_loss")
    both_raise(lambda m: call(m, input_lengths=lambda m: m.tensor([6, 5])), RuntimeError, "ctc_loss")
    both_raise(lambda m: call(m, target_lengths=lambda m: m.tensor([3, 2])), RuntimeError, "ctc_loss")
    both_raise(lambda m: call(m, input_lengths=lambda m: m.tensor([5, 5, 5])), RuntimeError, "ctc_loss")
    both_raise(lambda m: call(m, reduction="avg"), ValueError, "ctc_loss")
    both_raise(lambda m: call(m, log_probs=lambda m: m.zeros(5, 2, 4, 1)), RuntimeError, "ctc_loss")


# ---------------------------------------------------------------- weight_norm / spectral_norm
def _twin(tp_mod, torch_mod):
    """Gives torch_mod tp_mod's parameters (float32)."""
    with torch.no_grad():
        for (n, p), (m, q) in zip(tp_mod.named_parameters(), torch_mod.named_parameters()):
            assert n == m
            q.copy_(torch.tensor(p.detach().numpy()))


def _grads_equal(tp_mod, torch_mod, rtol=1e-5, atol=1e-6):
    a = dict(tp_mod.named_parameters())
    b = dict(torch_mod.named_parameters())
    assert sorted(a) == sorted(b)
    for n in a:
        np.testing.assert_allclose(a[n].grad.numpy(), b[n].grad.numpy(), rtol=rtol, atol=atol, err_msg=n)


@pytest.mark.parametrize("dim", [0, 1, None, -1])
def test_parametrizations_weight_norm(dim):
    from tensorplay.nn.utils import parametrizations as P
    lin, ref = tp.nn.Conv2d(2, 3, 3), torch.nn.Conv2d(2, 3, 3)
    _twin(lin, ref)
    P.weight_norm(lin, dim=dim)
    torch.nn.utils.parametrizations.weight_norm(ref, dim=dim)
    assert list(lin.state_dict()) == list(ref.state_dict())
    for k, v in lin.state_dict().items():
        close(v, ref.state_dict()[k], rtol=1e-6)
    x = rand(2, 2, 5, 5).astype(np.float32)
    out, e = lin(tp.tensor(x)), ref(torch.tensor(x))
    close(out, e, rtol=1e-5, atol=1e-6)
    (out ** 2).sum().backward()
    (e ** 2).sum().backward()
    _grads_equal(lin, ref, rtol=1e-4, atol=1e-4)  # float32 gradients of size ~10 with cancellation
    # training moves the originals; the parametrized weight follows, and the state loads into a fresh module
    opt = tp.optim.SGD(lin.parameters(), lr=0.1)
    opt.step()
    w_after = lin.weight.detach().numpy().copy()
    fresh = tp.nn.Conv2d(2, 3, 3)
    P.weight_norm(fresh, dim=dim)
    fresh.load_state_dict(lin.state_dict())
    np.testing.assert_allclose(fresh.weight.detach().numpy(), w_after, rtol=1e-6)
    # assigning the weight writes the originals through right_inverse
    w = rand(3, 2, 3, 3).astype(np.float32)
    lin.weight = tp.tensor(w)
    np.testing.assert_allclose(lin.weight.detach().numpy(), w, rtol=1e-5, atol=1e-6)
    tp.nn.utils.parametrize.remove_parametrizations(lin, "weight")
    assert type(lin) is tp.nn.Conv2d and sorted(lin.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(lin.weight.detach().numpy(), w, rtol=1e-5, atol=1e-6)


def test_parametrizations_spectral_norm_and_compiled():
    from tensorplay.nn.utils import parametrizations as P
    for make, tmake in ((lambda: tp.nn.Linear(5, 4), lambda: torch.nn.Linear(5, 4)),
                        (lambda: tp.nn.Conv2d(2, 3, 3), lambda: torch.nn.Conv2d(2, 3, 3))):
        m, ref = make(), tmake()
        _twin(m, ref)
        P.spectral_norm(m)
        torch.nn.utils.parametrizations.spectral_norm(ref)
        assert list(m.state_dict()) == list(ref.state_dict())
        # the power iteration starts from random vectors: take torch's, through state_dict
        m.load_state_dict({k: tp.tensor(v.numpy()) for k, v in ref.state_dict().items()})
        shape = (3, 5) if isinstance(m, tp.nn.Linear) else (1, 2, 6, 6)
        for training in (True, False):
            m.train(training)
            ref.train(training)
            x = rand(*shape).astype(np.float32)
            out, e = m(tp.tensor(x)), ref(torch.tensor(x))
            close(out, e, rtol=1e-4, atol=1e-5)
            out.sum().backward()
            e.sum().backward()
            _grads_equal(m, ref, rtol=1e-4, atol=1e-5)
            close(m.parametrizations.weight[0]._u, ref.parametrizations.weight[0]._u, rtol=1e-4, atol=1e-5)
    # sigma converges to the largest singular value
    m = tp.nn.Linear(6, 4)
    P.spectral_norm(m, n_power_iterations=50)
    w = m.parametrizations.weight.original.detach()
    s = tp.linalg.svdvals(w)
    np.testing.assert_allclose(tp.linalg.svdvals(m.weight.detach()).numpy()[0], 1.0, rtol=1e-4)
    assert s.numpy()[0] > 0
    # compiled forward (eval: no buffer update) equals eager
    m.eval()
    x = tp.tensor(rand(3, 6).astype(np.float32))
    compiled_matches(lambda v: m(v), x, rtol=1e-5, atol=1e-6)


def test_weight_norm_compiled_training_step():
    from tensorplay.nn.utils import parametrizations as P
    m = tp.nn.Linear(4, 3)
    P.weight_norm(m)
    x = tp.tensor(rand(5, 4).astype(np.float32))
    eager = (m(x) ** 2).sum()
    eager.backward()
    g_eager = {n: p.grad.numpy().copy() for n, p in m.named_parameters()}
    m.zero_grad()
    step = tp.compile(lambda v: (m(v) ** 2).sum())
    for _ in range(2):
        m.zero_grad()
        r = step(x)
        r.backward()
        np.testing.assert_allclose(r.detach().numpy(), eager.detach().numpy(), rtol=1e-5)
        for n, p in m.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), g_eager[n], rtol=1e-5, atol=1e-6)


def test_old_weight_norm_and_remove():
    lin, ref = tp.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    _twin(lin, ref)
    tp.nn.utils.weight_norm(lin)
    torch.nn.utils.weight_norm(ref)
    assert sorted(lin.state_dict()) == sorted(ref.state_dict()) == ["bias", "weight_g", "weight_v"]
    x = rand(2, 4).astype(np.float32)
    out, e = lin(tp.tensor(x)), ref(torch.tensor(x))
    close(out, e, rtol=1e-5, atol=1e-6)
    out.sum().backward()
    e.sum().backward()
    _grads_equal(lin, ref)
    step = tp.compile(lambda v: lin(v).sum())
    for _ in range(2):
        np.testing.assert_allclose(step(tp.tensor(x)).detach().numpy(), out.sum().detach().numpy(), rtol=1e-5)
    tp.nn.utils.remove_weight_norm(lin)
    torch.nn.utils.remove_weight_norm(ref)
    assert sorted(lin.state_dict()) == ["bias", "weight"]
    close(lin.weight, ref.weight, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="weight_norm"):
        tp.nn.utils.remove_weight_norm(lin)
    with pytest.raises(ValueError, match="weight_norm"):
        tp.nn.utils.weight_norm(lin, name="nope")


def test_parametrize_errors_and_custom_parametrization():
    from tensorplay.nn.utils import parametrize

    class Symmetric(tp.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(0, 1)

    m = tp.nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    w = m.weight.detach().numpy()
    np.testing.assert_allclose(w, w.T)
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")
    with pytest.raises(ValueError, match="nope"):
        parametrize.register_parametrization(m, "nope", Symmetric())
    with pytest.raises(ValueError, match="shape"):
        class Bad(tp.nn.Module):
            def forward(self, x):
                return x[0]
        parametrize.register_parametrization(tp.nn.Linear(3, 3), "weight", Bad())
    with pytest.raises(ValueError, match="parametrization"):
        parametrize.remove_parametrizations(m, "bias")
    with pytest.raises(ValueError):
        tp.nn.utils.parametrizations.spectral_norm(tp.nn.Linear(3, 3), n_power_iterations=0)
    with parametrize.cached():
        assert m.weight is m.weight


# ---------------------------------------------------------------- eager corner cases
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "bool", "float16"])
@pytest.mark.parametrize("value", [300, -1, -300, 2.5, 1e10, 127, -129, 70000.0, True])
def test_masked_fill_number_out_of_the_dtype_range(dtype, value):
    """PyTorch refuses a Python number its dtype cannot hold (unsigned types take -max..-1, which wrap);
    a 0-d tensor value is converted (wrapping) instead."""
    base = [1, 2, 3]
    mask = [True, False, True]
    e_err = r_err = None
    try:
        e = torch.tensor(base, dtype=getattr(torch, dtype)).masked_fill(torch.tensor(mask), value)
    except RuntimeError as ex:
        e_err = ex
    try:
        r = tp.tensor(base, dtype=getattr(tp, dtype)).masked_fill(tp.tensor(mask), value)
    except RuntimeError as ex:
        r_err = ex
    assert (e_err is None) == (r_err is None), (e_err, r_err)
    if r_err is not None:
        assert "masked_fill" in str(r_err) and "overflow" in str(r_err)
        with pytest.raises(RuntimeError, match="masked_fill"):
            tp.tensor(base, dtype=getattr(tp, dtype)).masked_fill_(tp.tensor(mask), value)
    else:
        close(r, e)


def test_masked_fill_tensor_value_out_of_range_and_compiled():
    both_raise(lambda m: m.tensor([1, 2], dtype=m.uint8).masked_fill(m.tensor([True, False]), m.tensor(300)),
               RuntimeError, "masked_fill")
    close(tp.tensor([1, 2], dtype=tp.uint8).masked_fill(tp.tensor([True, False]), tp.tensor(-1)),
          torch.tensor([1, 2], dtype=torch.uint8).masked_fill(torch.tensor([True, False]), torch.tensor(-1)))
    f = tp.compile(lambda x, m: x.masked_fill(m, 300))
    with pytest.raises(RuntimeError, match="masked_fill"):
        f(tp.tensor([1, 2], dtype=tp.uint8), tp.tensor([True, False]))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
@pytest.mark.parametrize("bounds", [dict(min=-20, max=30), dict(min=-20), dict(max=-1), dict(max=300),
                                    dict(min=300), dict(min=2.5, max=30.7), dict(min=-200, max=200),
                                    dict(min=5, max=3)])
def test_integer_clamp_with_out_of_range_bounds(dtype, bounds):
    """PyTorch converts integer bounds to the tensor's own dtype first: uint8.clamp(-20, 30) is all 30,
    because -20 becomes 236; a bound the dtype cannot hold raises."""
    vals = {"uint8": [0, 5, 100, 255], "int8": [-128, -5, 100, 127]}.get(dtype, [-40000, -5, 100, 40000])
    if dtype == "int16":
        vals = [-32768, -5, 100, 32767]
    e_err = r_err = None
    try:
        e = torch.tensor(vals, dtype=getattr(torch, dtype)).clamp(**bounds)
    except RuntimeError as ex:
        e_err = ex
    try:
        r = tp.tensor(vals, dtype=getattr(tp, dtype)).clamp(**bounds)
    except RuntimeError as ex:
        r_err = ex
    assert (e_err is None) == (r_err is None), (e_err, r_err)
    if r_err is None:
        close(r, e)
        if not any(isinstance(b, float) for b in bounds.values()):  # a float bound makes a float result
            x = tp.tensor(vals, dtype=getattr(tp, dtype))
            x.clamp_(**bounds)
            close(x, e)
        close(tp.compile(lambda t: t.clamp(**bounds))(tp.tensor(vals, dtype=getattr(tp, dtype))), e)
    else:
        assert "clamp" in str(r_err)


def test_clamp_tensor_bound_and_min_max_ops_of_uint8():
    x = [0, 5, 100, 255]
    close(tp.tensor(x, dtype=tp.uint8).clamp(min=tp.tensor(-20)), torch.tensor(x, dtype=torch.uint8).clamp(
        min=torch.tensor(-20)))
    close(tp.clamp_min(tp.tensor(x, dtype=tp.uint8), -20), torch.clamp_min(torch.tensor(x, dtype=torch.uint8), -20))
    close(tp.clamp_max(tp.tensor(x, dtype=tp.uint8), -20), torch.clamp_max(torch.tensor(x, dtype=torch.uint8), -20))


def test_kthvalue_ties_pick_torchs_index():
    """PyTorch's CPU kthvalue is a deterministic quickselect; among equal values it returns the index its
    swaps leave at position k, which tensorplay reproduces (so gradients land on the same element)."""
    rng = np.random.default_rng(5)
    for _ in range(400):
        n = int(rng.integers(1, 30))
        x = rng.integers(0, int(rng.integers(1, 5)), n).astype(np.float64)
        if rng.random() < 0.2:
            x[rng.integers(0, n)] = np.nan
        k = int(rng.integers(1, n + 1))
        r, e = tp.kthvalue(tp.tensor(x), k), torch.kthvalue(torch.tensor(x), k)
        assert int(r.indices) == int(e.indices), (x, k)
        close(r.values, e.values)
    x = rng.integers(0, 3, (4, 7, 5))
    for d in range(3):
        for keepdim in (False, True):
            r, e = tp.kthvalue(tp.tensor(x), 3, d, keepdim), torch.kthvalue(torch.tensor(x), 3, d, keepdim)
            close(r.values, e.values)
            close(r.indices, e.indices)
    a = rng.integers(0, 3, (3, 6)).astype(np.float64)
    grads_match(lambda t: tp.kthvalue(t, 2, 1).values, lambda t: torch.kthvalue(t, 2, 1).values, [a])
    compiled_matches(lambda t: tp.kthvalue(t, 4, 1).indices, tp.tensor(a))
