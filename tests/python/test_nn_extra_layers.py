"""ConvTranspose1d/2d, EmbeddingBag, InstanceNorm, LocalResponseNorm against PyTorch (values and
gradients on the same data), compiled against eager, and clear errors for bad input."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F

torch = pytest.importorskip("torch")


def T(a, grad=False):
    t = tp.tensor(np.array(a))
    if grad:
        t.requires_grad_(True)
    return t


def P(a, grad=False):
    t = torch.tensor(np.array(a))
    if grad:
        t.requires_grad_(True)
    return t


def close(a, b, tol=1e-10):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


rng = np.random.default_rng(0)

CT2D_CASES = [
    # (N, Cin, H, W), Cout, k, stride, padding, output_padding, groups, dilation, bias
    ((2, 4, 5, 6), 6, (3, 3), 1, 0, 0, 1, 1, True),
    ((2, 4, 5, 6), 6, (3, 2), 2, 1, 1, 1, 1, True),
    ((1, 4, 4, 3), 4, (2, 3), (2, 3), (0, 1), (1, 2), 2, 1, False),
    ((2, 6, 3, 4), 3, (3, 3), 2, 2, 0, 3, (2, 1), True),
    ((4, 5, 5), 2, (1, 1), 1, 0, 0, 1, 1, True),  # unbatched, 1x1
    # output_padding >= stride (allowed below dilation): x gets zero rows so the adjoint's geometry fits
    ((2, 2, 3, 4), 2, (3, 2), (1, 2), (1, 0), (2, 2), 1, (3, 3), True),
]


@pytest.mark.parametrize("case", CT2D_CASES)
def test_conv_transpose2d_values_and_grads_match_torch(case):
    xs, cout, k, s, p, op, g, d, has_bias = case
    cin = xs[-3]
    x = rng.standard_normal(xs)
    w = rng.standard_normal((cin, cout // g) + k)
    b = rng.standard_normal(cout) if has_bias else None
    tx, tw = T(x, True), T(w, True)
    tb = T(b, True) if has_bias else None
    px, pw = P(x, True), P(w, True)
    pb = P(b, True) if has_bias else None
    y = F.conv_transpose2d(tx, tw, tb, s, p, op, g, d)
    ref = torch.nn.functional.conv_transpose2d(px, pw, pb, s, p, op, g, d)
    close(y, ref)
    gy = rng.standard_normal(tuple(ref.shape))
    y.backward(T(gy))
    ref.backward(P(gy))
    close(tx.grad, px.grad)
    close(tw.grad, pw.grad)
    if has_bias:
        close(tb.grad, pb.grad)


def test_conv_transpose1d_values_and_grads_match_torch():
    x = rng.standard_normal((3, 4, 7))
    w = rng.standard_normal((4, 3, 3))
    b = rng.standard_normal(6)
    tx, tw, tb = T(x, True), T(w, True), T(b, True)
    px, pw, pb = P(x, True), P(w, True), P(b, True)
    y = F.conv_transpose1d(tx, tw, tb, stride=3, padding=1, output_padding=2, groups=2, dilation=2)
    ref = torch.nn.functional.conv_transpose1d(px, pw, pb, stride=3, padding=1, output_padding=2, groups=2, dilation=2)
    close(y, ref)
    y.sum().backward()
    ref.sum().backward()
    close(tx.grad, px.grad)
    close(tw.grad, pw.grad)
    close(tb.grad, pb.grad)


def test_conv_transpose2d_double_backward_matches_torch():
    x = rng.standard_normal((2, 3, 4, 4))
    w = rng.standard_normal((3, 2, 3, 3))
    tx, tw = T(x, True), T(w, True)
    px, pw = P(x, True), P(w, True)
    (gx,) = tp.autograd.grad(F.conv_transpose2d(tx, tw, stride=2).pow(2).sum(), [tx], create_graph=True)
    (rgx,) = torch.autograd.grad(torch.nn.functional.conv_transpose2d(px, pw, stride=2).pow(2).sum(), [px],
                                 create_graph=True)
    close(gx, rgx)
    gx.pow(2).sum().backward()
    rgx.pow(2).sum().backward()
    close(tw.grad, pw.grad)


def test_conv_transpose_modules_load_torch_state_and_match():
    tm = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2).double()
    m = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dtype=tp.float64)
    assert tuple(m.weight.shape) == tuple(tm.weight.shape)
    m.load_state_dict({k: T(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = rng.standard_normal((2, 4, 5, 5))
    close(m(T(x)), tm(P(x)))
    # output_size picks the output_padding, as in PyTorch.
    m2 = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2, dtype=tp.float64)
    m2.load_state_dict({k: T(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tm.output_padding = (0, 0)
    close(m2(T(x), output_size=[10, 9]), tm(P(x), output_size=[10, 9]))
    with pytest.raises(ValueError, match="output size"):
        m2(T(x), output_size=[20, 20])
    t1 = torch.nn.ConvTranspose1d(3, 5, 4, stride=2).double()
    m1 = nn.ConvTranspose1d(3, 5, 4, stride=2, dtype=tp.float64)
    m1.load_state_dict({k: T(v.detach().numpy()) for k, v in t1.state_dict().items()})
    x1 = rng.standard_normal((2, 3, 6))
    close(m1(T(x1)), t1(P(x1)))
    assert "ConvTranspose2d(4, 6" in repr(m)


def test_conv_transpose2d_bad_input_errors():
    x = T(rng.standard_normal((2, 4, 5, 5)))
    with pytest.raises(ValueError, match="conv_transpose2d.*channels"):
        F.conv_transpose2d(x, T(rng.standard_normal((3, 2, 3, 3))))
    with pytest.raises(ValueError, match="conv_transpose2d.*4D weight"):
        F.conv_transpose2d(x, T(rng.standard_normal((4, 2, 3))))
    with pytest.raises(ValueError, match="output_padding"):
        F.conv_transpose2d(x, T(rng.standard_normal((4, 2, 3, 3))), stride=2, output_padding=2)
    with pytest.raises(ValueError, match="bias"):
        F.conv_transpose2d(x, T(rng.standard_normal((4, 2, 3, 3))), T(rng.standard_normal(3)))
    with pytest.raises(ValueError, match="conv_transpose1d"):
        F.conv_transpose1d(x, T(rng.standard_normal((4, 2, 3))))
    # A weight of another dtype used to be read with the input's element type (garbage values).
    with pytest.raises(TypeError, match="conv_transpose2d.*same dtype"):
        F.conv_transpose2d(x.float(), T(rng.standard_normal((4, 2, 3, 3))))
    with pytest.raises(TypeError, match="conv_transpose2d.*bias of dtype"):
        F.conv_transpose2d(x, T(rng.standard_normal((4, 2, 3, 3))), T(rng.standard_normal(2)).float())


def test_conv_transpose2d_compiled_matches_eager():
    m = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)
    x = tp.tensor(rng.standard_normal((2, 3, 5, 5)).astype(np.float32))
    eager = m(x)
    cm = tp.compile(lambda a: tp.relu(m(a)))
    close(cm(x), tp.relu(eager), 1e-5)
    # Parameters are read at every call: a changed weight changes the compiled result.
    with tp.no_grad():
        m.weight.mul_(2)
    close(cm(x), tp.relu(m(x)), 1e-5)


# ---------------------------------------------------------------- EmbeddingBag
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_offsets_match_torch(mode, include_last_offset, padding_idx):
    w = rng.standard_normal((10, 3))
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9, 2, 2], dtype=np.int64)
    # An empty bag (repeated offset); with include_last_offset the last offset is len(input).
    offs = np.array([0, 3, 3, 6, 10] if include_last_offset else [0, 3, 3, 6], dtype=np.int64)
    tw, pw = T(w, True), P(w, True)
    y = F.embedding_bag(T(idx), tw, T(offs), mode=mode, include_last_offset=include_last_offset,
                        padding_idx=padding_idx)
    ref = torch.nn.functional.embedding_bag(P(idx), pw, P(offs), mode=mode, include_last_offset=include_last_offset,
                                            padding_idx=padding_idx)
    close(y, ref)
    g = rng.standard_normal(tuple(ref.shape))
    y.backward(T(g))
    ref.backward(P(g))
    close(tw.grad, pw.grad)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input_matches_torch(mode):
    w = rng.standard_normal((8, 4))
    idx = rng.integers(0, 8, (3, 5))
    tw, pw = T(w, True), P(w, True)
    y = F.embedding_bag(T(idx), tw, mode=mode)
    ref = torch.nn.functional.embedding_bag(P(idx), pw, mode=mode)
    close(y, ref)
    y.sum().backward()
    ref.sum().backward()
    close(tw.grad, pw.grad)


def test_embedding_bag_per_sample_weights_grads_match_torch():
    w = rng.standard_normal((6, 2))
    idx = np.array([0, 5, 3, 3, 1], dtype=np.int64)
    offs = np.array([0, 2], dtype=np.int64)
    psw = rng.standard_normal(5)
    tw, tpsw, pw, ppsw = T(w, True), T(psw, True), P(w, True), P(psw, True)
    y = F.embedding_bag(T(idx), tw, T(offs), mode="sum", per_sample_weights=tpsw)
    ref = torch.nn.functional.embedding_bag(P(idx), pw, P(offs), mode="sum", per_sample_weights=ppsw)
    close(y, ref)
    g = rng.standard_normal((2, 2))
    y.backward(T(g))
    ref.backward(P(g))
    close(tw.grad, pw.grad)
    close(tpsw.grad, ppsw.grad)


def test_embedding_bag_module_and_errors():
    tm = torch.nn.EmbeddingBag(7, 3, mode="sum").double()
    m = nn.EmbeddingBag(7, 3, mode="sum", dtype=tp.float64)
    m.load_state_dict({"weight": T(tm.weight.detach().numpy())})
    idx, offs = np.array([1, 2, 6, 0], dtype=np.int64), np.array([0, 1], dtype=np.int64)
    close(m(T(idx), T(offs)), tm(P(idx), P(offs)))
    with pytest.raises(ValueError, match="offsets"):
        m(T(idx))
    with pytest.raises(ValueError, match="offsets\\[0\\]"):
        m(T(idx), T(np.array([1, 2], dtype=np.int64)))
    with pytest.raises(IndexError, match="embedding_bag.*out of range"):
        m(T(np.array([1, 7], dtype=np.int64)), T(np.array([0], dtype=np.int64)))
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        F.embedding_bag(T(idx), m.weight, T(offs), mode="mean", per_sample_weights=T(np.ones(4)))
    with pytest.raises(ValueError, match="mode"):
        nn.EmbeddingBag(3, 2, mode="median")


def test_embedding_bag_compiled_matches_eager():
    m = nn.EmbeddingBag(12, 4, mode="mean")
    idx, offs = T(np.array([1, 2, 4, 5, 4, 3, 2, 9], dtype=np.int64)), T(np.array([0, 2, 2, 5], dtype=np.int64))
    cf = tp.compile(lambda i, o: m(i, o) * 2)
    close(cf(idx, offs), m(idx, offs) * 2, 1e-6)
    offs2 = T(np.array([0, 1, 6, 6], dtype=np.int64))  # other offsets, same shapes: no stale result
    close(cf(idx, offs2), m(idx, offs2) * 2, 1e-6)


# ---------------------------------------------------------------- InstanceNorm / LRN
@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (3, 4, 6)), ("InstanceNorm2d", (2, 3, 4, 5)),
                                       ("InstanceNorm3d", (2, 2, 3, 3, 2)), ("InstanceNorm1d", (4, 6))])
@pytest.mark.parametrize("affine,track", [(False, False), (True, True)])
def test_instance_norm_matches_torch_train_and_eval(cls, shape, affine, track):
    c = shape[1] if len(shape) > 2 and cls != "InstanceNorm1d" or len(shape) == 3 else shape[0]
    tm = getattr(torch.nn, cls)(c, affine=affine, track_running_stats=track).double()
    m = getattr(nn, cls)(c, affine=affine, track_running_stats=track, dtype=tp.float64)
    if affine:
        with torch.no_grad():
            tm.weight.copy_(torch.tensor(rng.standard_normal(c)))
            tm.bias.copy_(torch.tensor(rng.standard_normal(c)))
    m.load_state_dict({k: T(v.detach().numpy()) for k, v in tm.state_dict().items()})
    for _ in range(2):
        x = rng.standard_normal(shape) * 3 + 1
        tx, px = T(x, True), P(x, True)
        y, ref = m(tx), tm(px)
        close(y, ref)
        g = rng.standard_normal(shape)
        y.backward(T(g))
        ref.backward(P(g))
        close(tx.grad, px.grad)
        if affine:
            close(m.weight.grad, tm.weight.grad)
    for k, v in tm.state_dict().items():
        close(m.state_dict()[k], v)
    m.eval()
    tm.eval()
    x = rng.standard_normal(shape)
    close(m(T(x)), tm(P(x)))


def test_instance_norm_errors():
    with pytest.raises(ValueError, match="InstanceNorm2d.*4D"):
        nn.InstanceNorm2d(3)(T(rng.standard_normal((3, 4))))
    with pytest.raises(ValueError, match="num_features"):
        nn.InstanceNorm1d(3, affine=True)(T(rng.standard_normal((2, 4, 5))))
    with pytest.raises(ValueError, match="spatial"):
        F.instance_norm(T(rng.standard_normal((2, 4, 1))))


def test_instance_norm_compiled_matches_eager():
    m = nn.InstanceNorm2d(3, affine=True)
    x = tp.tensor(rng.standard_normal((2, 3, 4, 4)).astype(np.float32))
    cf = tp.compile(lambda a: m(a).relu())
    close(cf(x), m(x).relu(), 1e-5)


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_local_response_norm_matches_torch(size):
    x = rng.standard_normal((2, 5, 3, 3))
    tx, px = T(x, True), P(x, True)
    y = nn.LocalResponseNorm(size, alpha=0.3, beta=0.6, k=1.5)(tx)
    ref = torch.nn.LocalResponseNorm(size, alpha=0.3, beta=0.6, k=1.5)(px)
    close(y, ref)
    y.sum().backward()
    ref.sum().backward()
    # 1e-7: the derivative of Tensor.pow with a Python float exponent loses float64 precision
    # (~1e-8 relative; a 0-d float64 tensor exponent is exact), outside this module.
    close(tx.grad, px.grad, 1e-7)


# ---------------------------------------------------------------- BatchNorm3d, orthogonal_
def test_batch_norm3d_matches_torch():
    tm = torch.nn.BatchNorm3d(3).double()
    m = nn.BatchNorm3d(3, dtype=tp.float64)
    for _ in range(2):
        x = rng.standard_normal((2, 3, 3, 2, 4)) * 2 + 1
        tx, px = T(x, True), P(x, True)
        y, ref = m(tx), tm(px)
        close(y, ref)
        y.pow(2).sum().backward()
        ref.pow(2).sum().backward()
        close(tx.grad, px.grad)
        close(m.weight.grad, tm.weight.grad)
    for k, v in tm.state_dict().items():
        close(m.state_dict()[k], v)
    m.eval()
    tm.eval()
    x = rng.standard_normal((1, 3, 2, 2, 2))
    close(m(T(x)), tm(P(x)))
    with pytest.raises(ValueError, match="BatchNorm3d.*5D"):
        m(T(rng.standard_normal((2, 3, 4))))


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (6, 2, 2), (4, 4)])
def test_orthogonal_init(shape):
    w = tp.empty(*shape, dtype=tp.float64)
    out = nn.init.orthogonal_(w, gain=1.5)
    assert out is w
    f = w.reshape(shape[0], -1).numpy()
    small = min(f.shape)
    gram = f @ f.T if f.shape[0] == small else f.T @ f
    np.testing.assert_allclose(gram, 2.25 * np.eye(small), atol=1e-12)
    # Reproducible from a generator, different across draws.
    g1, g2 = tp.Generator().manual_seed(3), tp.Generator().manual_seed(3)
    a, b = tp.empty(*shape), tp.empty(*shape)
    nn.init.orthogonal_(a, generator=g1)
    nn.init.orthogonal_(b, generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    nn.init.orthogonal_(b, generator=g2)
    assert not np.array_equal(a.numpy(), b.numpy())


def test_orthogonal_init_on_a_parameter_and_errors():
    lin = nn.Linear(4, 4)
    nn.init.orthogonal_(lin.weight)
    assert lin.weight.requires_grad and lin.weight.is_leaf
    with pytest.raises(ValueError, match="2 or more dimensions"):
        nn.init.orthogonal_(tp.empty(3))


# ---------------------------------------------------------------- Conv3d
CONV3D_CASES = [
    # (N, C, D, H, W), out, k, stride, padding, dilation, groups, bias
    ((2, 3, 5, 6, 4), 4, (3, 3, 2), 1, 0, 1, 1, True),
    ((1, 4, 7, 5, 5), 6, (3, 2, 3), (2, 1, 2), (1, 0, 1), (1, 2, 1), 2, False),
    ((2, 2, 4, 4, 4), 2, 3, 1, "same", (2, 1, 1), 1, True),
    ((3, 4, 4, 3), 2, (2, 1, 1), 1, "valid", 1, 1, True),  # unbatched
]


@pytest.mark.parametrize("case", CONV3D_CASES)
def test_conv3d_values_and_grads_match_torch(case):
    xs, out_c, k, s, p, d, g, has_bias = case
    k = k if isinstance(k, tuple) else (k,) * 3
    cin = xs[-4]
    x = rng.standard_normal(xs)
    w = rng.standard_normal((out_c, cin // g) + k)
    b = rng.standard_normal(out_c) if has_bias else None
    tx, tw, px, pw = T(x, True), T(w, True), P(x, True), P(w, True)
    tb, pb = (T(b, True), P(b, True)) if has_bias else (None, None)
    y = F.conv3d(tx, tw, tb, s, p, d, g)
    ref = torch.nn.functional.conv3d(px, pw, pb, s, p, d, g)
    close(y, ref)
    gy = rng.standard_normal(tuple(ref.shape))
    y.backward(T(gy))
    ref.backward(P(gy))
    close(tx.grad, px.grad)
    close(tw.grad, pw.grad)
    if has_bias:
        close(tb.grad, pb.grad)


def test_conv3d_module_padding_modes_and_compile():
    for mode in ("zeros", "reflect", "circular"):
        tm = torch.nn.Conv3d(2, 3, 3, padding=1, padding_mode=mode).double()
        m = nn.Conv3d(2, 3, 3, padding=1, padding_mode=mode, dtype=tp.float64)
        m.load_state_dict({k: T(v.detach().numpy()) for k, v in tm.state_dict().items()})
        x = rng.standard_normal((1, 2, 4, 5, 3))
        close(m(T(x)), tm(P(x)))
    m = nn.Conv3d(2, 3, 2, stride=2)
    x = tp.tensor(rng.standard_normal((2, 2, 4, 4, 4)).astype(np.float32))
    cf = tp.compile(lambda a: m(a).relu())
    close(cf(x), m(x).relu(), 1e-5)
    with pytest.raises(ValueError, match="conv3d.*channels"):
        m(tp.ones(1, 3, 4, 4, 4))
    with pytest.raises(ValueError, match="conv3d.*5D weight"):
        F.conv3d(x, tp.ones(3, 2, 2, 2))


def test_lrn_refuses_integers():
    with pytest.raises(TypeError, match="local_response_norm.*floating"):
        F.local_response_norm(tp.ones(1, 2, 3, dtype=tp.int64), 2)
