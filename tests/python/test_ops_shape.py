"""Shape operators (views and shape-changing copies) against NumPy, and PyTorch
where installed: every dtype, non-contiguous inputs, zero-size tensors,
negative dims, errors that name the operator, gradients vs finite differences."""
import numpy as np
import pytest

import tensorplay as tp

DTYPES = [tp.bool, tp.uint8, tp.int8, tp.int16, tp.int32, tp.int64, tp.float16, tp.bfloat16, tp.float32, tp.float64]


def make(arr, dtype=tp.float32):
    """A tensor of `dtype` holding the small integers of `arr` (exact in every dtype)."""
    arr = np.asarray(arr)
    t = tp.tensor(arr.astype(np.float32) if arr.dtype != np.bool_ else arr)
    return t.to(dtype)


def to_np(t):
    if t.dtype in (tp.bfloat16, tp.float16):
        return t.float().numpy()
    return np.ascontiguousarray(t.numpy())


def np_like(arr, dtype):
    """What make(arr, dtype) holds, as NumPy values (compared after to_np)."""
    arr = np.asarray(arr)
    if dtype == tp.bool:
        return arr.astype(bool)
    return arr.astype(np.float32) if dtype in (tp.float16, tp.bfloat16) else arr


def assert_same(t, want):
    got = to_np(t)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def values(shape, lo=0, hi=7, seed=0):
    return np.random.default_rng(seed).integers(lo, hi, size=shape)


def grads_match(f, arrays, seed=0, eps=1e-6, tol=1e-6):
    """f's gradient by autograd vs central differences, in float64, through a random weighting."""
    ts = [tp.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]
    out = f(*ts)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal(o.shape) for o in outs]
    loss = None
    for o, w in zip(outs, ws):
        term = (o * tp.tensor(w)).sum()
        loss = term if loss is None else loss + term
    loss.backward()

    def scalar(arrs):
        res = f(*[tp.tensor(a) for a in arrs])
        res = list(res) if isinstance(res, (list, tuple)) else [res]
        return sum(float((r.numpy() * w).sum()) for r, w in zip(res, ws))

    for i, a in enumerate(arrays):
        a = np.asarray(a, dtype=np.float64)
        num = np.zeros_like(a)
        for k in np.ndindex(a.shape):
            up = [np.asarray(x, dtype=np.float64).copy() for x in arrays]
            dn = [np.asarray(x, dtype=np.float64).copy() for x in arrays]
            up[i][k] += eps
            dn[i][k] -= eps
            num[k] = (scalar(up) - scalar(dn)) / (2 * eps)
        got = ts[i].grad.numpy() if ts[i].grad is not None else np.zeros_like(a)
        np.testing.assert_allclose(got, num, rtol=1e-5, atol=tol)


def variants(arr, dtype):
    """The same logical values as a contiguous, a transposed and a sliced tensor."""
    base = make(arr, dtype)
    yield "contiguous", base
    t = make(np.ascontiguousarray(np.swapaxes(arr, 0, -1)), dtype).transpose(0, -1)
    assert not t.is_contiguous() or arr.ndim < 2 or min(arr.shape) <= 1
    yield "transposed", t
    wide = np.concatenate([arr, arr], axis=-1) if arr.ndim else arr
    s = make(wide, dtype)[..., : arr.shape[-1]] if arr.ndim else base
    yield "sliced", s


# ---------------------------------------------------------------------------
# views
@pytest.mark.parametrize("dtype", DTYPES)
def test_views_share_storage_and_version(dtype):
    x = make(values((2, 3, 4)), dtype)
    for v in [x.view(6, 4), x.reshape(-1), x.flatten(1), tp.unflatten(x, 2, [2, 2]), x.transpose(0, 2), x.permute(2, 0, 1),
              x.unsqueeze(1), x[:, 1:], x.narrow(2, 1, 2), x.select(1, 0), tp.diagonal(x, 0, 1, 2), x.movedim(0, -1),
              x.expand(3, 2, 3, 4), tp.as_strided(x, [2, 2], [1, 2]), x.squeeze(), x.split(2, 2)[1], x.chunk(3, 1)[0],
              x.unbind(0)[1], x.t() if x.dim() <= 2 else x[0].t()]:
        end = x.data_ptr() + x.numel() * dtype.itemsize
        assert x.data_ptr() <= v.data_ptr() < end and v.dtype == dtype
        assert v._version == x._version
    y = x.view(-1)
    before = x._version
    y[0] = 1
    assert x._version == before + 1
    assert to_np(x).reshape(-1)[0] == 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["flatten", "unflatten", "transpose", "permute", "squeeze", "unsqueeze", "narrow",
                                  "diagonal", "movedim", "expand", "t", "mT"])
def test_view_values(dtype, case):
    a = values((2, 1, 3, 4))
    for name, x in variants(a, dtype):
        got, want = {
            "flatten": lambda: (x.flatten(-3, -2), a.reshape(2, 3, 4)),
            "unflatten": lambda: (tp.unflatten(x, -1, [2, -1]), a.reshape(2, 1, 3, 2, 2)),
            "transpose": lambda: (x.transpose(-1, 0), np.swapaxes(a, -1, 0)),
            "permute": lambda: (x.permute(3, 0, -2, 1), a.transpose(3, 0, 2, 1)),
            "squeeze": lambda: (x.squeeze(1), a.squeeze(1)),
            "unsqueeze": lambda: (x.unsqueeze(-1), a[..., None]),
            "narrow": lambda: (x.narrow(-1, -3, 2), a[..., 1:3]),
            "diagonal": lambda: (tp.diagonal(x, -1, -1, -2), np.diagonal(a, -1, -1, -2)),
            "movedim": lambda: (x.movedim([0, 1], [-1, 0]), np.moveaxis(a, [0, 1], [-1, 0])),
            "expand": lambda: (x.expand(3, -1, 5, -1, -1), np.broadcast_to(a, (3, 2, 5, 3, 4))),
            "t": lambda: (x[0, 0].t(), a[0, 0].T),
            "mT": lambda: (x.mT, np.swapaxes(a, -1, -2)),
        }[case]()
        assert_same(got, np_like(want, dtype))


def test_squeeze_forms():
    x = tp.zeros(1, 2, 1, 3)
    assert x.squeeze().shape == (2, 3)
    assert x.squeeze(0).shape == (2, 1, 3)
    assert x.squeeze(1).shape == (1, 2, 1, 3)  # not size 1: unchanged
    assert x.squeeze((0, 2)).shape == (2, 3)
    assert x.squeeze(-2).shape == (1, 2, 3)
    assert tp.zeros(()).squeeze(0).shape == ()


def test_split_chunk_unbind_match_torch():
    torch = pytest.importorskip("torch")
    a = np.arange(7 * 3, dtype=np.float32).reshape(7, 3)
    x, t = tp.tensor(a), torch.tensor(a)
    for args in [(2, 0), (3, 0), (7, 0), (10, 0), ([2, 5], 0), ([1, 0, 2], -1), (1, -1)]:
        got, want = x.split(*args), t.split(*args)
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    for n in [1, 2, 3, 4, 6, 7, 9]:
        got, want = x.chunk(n), t.chunk(n)
        assert [g.shape for g in got] == [tuple(w.shape) for w in want]
    for d in [0, 1, -1]:
        assert [g.numpy().tolist() for g in x.unbind(d)] == [w.numpy().tolist() for w in t.unbind(d)]
    empty = tp.zeros(0, 3)
    assert [p.shape for p in empty.split(2)] == [tuple(p.shape) for p in torch.zeros(0, 3).split(2)]
    assert [p.shape for p in empty.chunk(2)] == [tuple(p.shape) for p in torch.zeros(0, 3).chunk(2)]


def test_view_dtype_reinterprets_bits():
    a = np.array([1.5, -2.0, 0.0, np.inf], dtype=np.float32)
    x = tp.tensor(a)
    np.testing.assert_array_equal(x.view(tp.int32).numpy(), a.view(np.int32))
    assert x.view(tp.float32).data_ptr() == x.data_ptr()
    b = x.to(tp.bfloat16).view(tp.int16)
    np.testing.assert_array_equal(b.numpy(), (a.view(np.uint32) >> 16).astype(np.uint16).view(np.int16))
    h = x.to(tp.float16).view(tp.int16)
    np.testing.assert_array_equal(h.numpy(), a.astype(np.float16).view(np.int16))
    back = b.view(tp.bfloat16)
    np.testing.assert_array_equal(back.float().numpy(), a)
    # another element size scales the last dim, as PyTorch (and NumPy) do
    np.testing.assert_array_equal(x.view(tp.int16).numpy(), a.view(np.int16))
    with pytest.raises(ValueError, match=r"view.dtype.*float32.*int16"):
        x[0].view(tp.int16)  # a 0-d tensor has no last dim to scale


def test_as_strided():
    x = tp.arange(0, 12).float()
    y = tp.as_strided(x, [3, 3], [2, 1], 1)
    np.testing.assert_array_equal(y.numpy(), np.lib.stride_tricks.as_strided(np.arange(12.0)[1:], (3, 3), (16, 8)))
    with pytest.raises(ValueError, match="as_strided"):
        tp.as_strided(x, [4, 4], [4, 1], 1)
    with pytest.raises(ValueError, match="as_strided"):
        tp.as_strided(x, [2], [1, 1])
    grads_match(lambda t: tp.as_strided(t, [2, 2], [1, 2], 1), [np.arange(6.0)])
    grads_match(lambda t: tp.as_strided(t[1:], [3], [2]), [np.arange(8.0)])


@pytest.mark.parametrize("fn,shape", [
    (lambda t: t.view(3, 2), (2, 3)),
    (lambda t: t.reshape(-1), (2, 3)),
    (lambda t: t.t().reshape(6), (2, 3)),
    (lambda t: t.flatten(), (2, 2, 2)),
    (lambda t: tp.unflatten(t, 1, [3, 1]), (2, 3)),
    (lambda t: t.transpose(0, 1) * 1.0, (2, 3)),
    (lambda t: t.permute(1, 0), (2, 3)),
    (lambda t: t.expand(4, 2, 3), (2, 3)),
    (lambda t: t.expand_as(tp.zeros(2, 2, 3)), (1, 3)),
    (lambda t: t.squeeze(1), (2, 1, 3)),
    (lambda t: t.unsqueeze(-1), (2, 3)),
    (lambda t: t.narrow(1, 1, 2), (2, 3)),
    (lambda t: t[:, ::2], (2, 5)),
    (lambda t: t.select(0, -1), (2, 3)),
    (lambda t: tp.diagonal(t, 1), (3, 4)),
    (lambda t: tp.diagonal(t, -1, 0, 2), (3, 2, 4)),
    (lambda t: t.movedim(0, 1), (2, 3)),
    (lambda t: t.split(2, 1), (2, 5)),
    (lambda t: t.chunk(2, 0), (3, 2)),
    (lambda t: t.unbind(1), (2, 3)),
])
def test_view_gradients(fn, shape):
    grads_match(fn, [np.random.default_rng(1).standard_normal(shape)])


def test_view_errors_name_the_op():
    x = tp.zeros(2, 3)
    with pytest.raises(ValueError, match=r"flatten.*start_dim"):
        x.flatten(1, 0)
    with pytest.raises(ValueError, match=r"unflatten.*\[4, -1\].*3"):
        tp.unflatten(x, 1, [4, -1])
    with pytest.raises(IndexError, match="transpose"):
        x.transpose(0, 2)
    with pytest.raises(ValueError, match=r"narrow.*exceeds"):
        x.narrow(1, 2, 2)
    with pytest.raises(ValueError, match=r"diagonal.*identical"):
        tp.diagonal(x, 0, 1, -1)
    with pytest.raises(ValueError, match=r"split.*sum"):
        x.split([1, 1], 1)
    with pytest.raises(ValueError, match="chunk"):
        x.chunk(0)
    with pytest.raises(ValueError, match=r"t: .*3D"):
        tp.zeros(1, 2, 3).t()
    with pytest.raises(ValueError, match=r"movedim"):
        x.movedim([0, 1], [0])
    with pytest.raises(IndexError, match="unbind"):
        tp.zeros(()).unbind()


# ---------------------------------------------------------------------------
# copies
@pytest.mark.parametrize("dtype", DTYPES)
def test_cat_stack_all_dtypes(dtype):
    a, b = values((2, 3)), values((2, 5), seed=1)
    for name, x in variants(a, dtype):
        y = make(b, dtype)
        assert_same(tp.cat([x, y], 1), np_like(np.concatenate([a, b], 1), dtype))
        assert_same(tp.cat((x, y), -1), np_like(np.concatenate([a, b], -1), dtype))
        assert_same(tp.stack([x, x, x], 1), np_like(np.stack([a, a, a], 1), dtype))
        assert_same(tp.stack([x, x], -1), np_like(np.stack([a, a], -1), dtype))
        assert tp.cat([x, y], 1).dtype == dtype


def test_cat_promotes_skips_legacy_empty_and_checks():
    x = tp.tensor([[1, 2]])
    y = tp.tensor([[0.5, 1.5]])
    r = tp.cat([x, y])
    assert r.dtype == tp.float32
    np.testing.assert_array_equal(r.numpy(), [[1, 2], [0.5, 1.5]])
    assert tp.cat([x.to(tp.int8), x.to(tp.uint8)]).dtype == tp.int16
    assert tp.cat([x, tp.zeros(0, dtype=tp.int64), x]).shape == (2, 2)
    assert tp.cat([tp.zeros(0, 2), tp.ones(3, 2)]).shape == (3, 2)
    assert tp.cat([tp.zeros(0), tp.zeros(0)]).shape == (0,)
    with pytest.raises(ValueError, match=r"cat.*\[1, 2\].*\[1, 3\]"):
        tp.cat([x, tp.zeros(1, 3, dtype=tp.int64)])
    with pytest.raises(ValueError, match=r"cat.*dimensions"):
        tp.cat([x, tp.zeros(2, dtype=tp.int64)])
    with pytest.raises(ValueError, match=r"cat.*zero-dimensional"):
        tp.cat([tp.zeros(())])
    with pytest.raises(ValueError, match=r"stack.*equal size"):
        tp.stack([tp.zeros(2), tp.zeros(3)])
    with pytest.raises(IndexError, match="cat"):
        tp.cat([x, x], 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_flip_roll_repeat_tile_tri(dtype):
    a = values((3, 4, 5))
    for name, x in variants(a, dtype):
        assert_same(tp.flip(x, [0, -1]), np_like(np.flip(a, (0, -1)), dtype))
        assert_same(x.flip(1), np_like(np.flip(a, 1), dtype))
        assert_same(tp.roll(x, [1, -7], [0, 2]), np_like(np.roll(a, (1, -7), (0, 2)), dtype))
        assert_same(tp.roll(x, 4), np_like(np.roll(a, 4), dtype))
        assert_same(tp.roll(x, [2, 1], [1, 1]), np_like(np.roll(a, 3, 1), dtype))
        assert_same(x.repeat(2, 1, 1, 3), np_like(np.tile(a, (2, 1, 1, 3)), dtype))
        assert_same(x.repeat(1, 2, 1), np_like(np.tile(a, (1, 2, 1)), dtype))
        assert_same(x.tile(2), np_like(np.tile(a, 2), dtype))
        assert_same(x.tile((2, 1, 1, 1)), np_like(np.tile(a, (2, 1, 1, 1)), dtype))
        for k in [-5, -1, 0, 2, 9]:
            assert_same(tp.tril(x, k), np_like(np.tril(a, k), dtype))
            assert_same(tp.triu(x, k), np_like(np.triu(a, k), dtype))


def test_float_special_values_move_bitwise():
    a = np.array([[0.0, -0.0, np.nan], [np.inf, -np.inf, 1e-40]], dtype=np.float32)
    x = tp.tensor(a)
    for got, want in [(tp.flip(x, [1]), np.flip(a, 1)), (x.repeat(2, 1), np.tile(a, (2, 1))),
                      (tp.cat([x, x]), np.concatenate([a, a])), (tp.roll(x, 1, 1), np.roll(a, 1, 1))]:
        np.testing.assert_array_equal(got.numpy().view(np.int32), np.ascontiguousarray(want).view(np.int32))
    t = tp.tril(x)
    assert np.signbit(t.numpy()[0, 1]) == np.signbit(np.float32(0.0))  # zeroed, not copied -0.0
    assert np.isnan(tp.triu(x).numpy()[0, 2])


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4), (3, 0)])
def test_zero_size(shape):
    a = np.zeros(shape, dtype=np.float32)
    x = tp.tensor(a)
    assert tp.cat([x, x], -1).shape == np.concatenate([a, a], -1).shape
    assert tp.stack([x, x], 0).shape == np.stack([a, a]).shape
    assert tp.flip(x, [0]).shape == shape
    assert tp.roll(x, 1, 0).shape == shape
    assert x.repeat(*([2] * len(shape))).shape == np.tile(a, [2] * len(shape)).shape
    assert x.flatten().shape == (0,)
    if len(shape) >= 2:
        assert tp.tril(x).shape == shape and tp.triu(x, 1).shape == shape
        assert tp.diagonal(x).shape == np.diagonal(a).shape


def test_copy_errors_name_the_op():
    x = tp.zeros(2, 3)
    with pytest.raises(ValueError, match=r"repeat.*\[2\].*\[2, 3\]"):
        x.repeat(2)
    with pytest.raises(ValueError, match=r"repeat.*negative"):
        x.repeat(-1, 1)
    with pytest.raises(ValueError, match=r"flip.*multiple times"):
        tp.flip(x, [0, -2])
    with pytest.raises(IndexError, match="flip"):
        tp.flip(x, [2])
    with pytest.raises(ValueError, match=r"roll.*align"):
        tp.roll(x, [1, 2], [0])
    with pytest.raises(ValueError, match=r"tril.*at least 2"):
        tp.tril(tp.zeros(3))


@pytest.mark.parametrize("fn,shapes", [
    (lambda a, b: tp.cat([a, b], 1), [(2, 3), (2, 1)]),
    (lambda a, b: tp.cat([a.t(), b.t()], 0), [(2, 3), (2, 1)]),
    (lambda a, b: tp.stack([a, b], -1), [(2, 3), (2, 3)]),
    (lambda a: tp.flip(a, [0, 1]), [(2, 3)]),
    (lambda a: tp.roll(a, [1, -1], [0, 1]), [(3, 4)]),
    (lambda a: tp.roll(a, 2), [(2, 3)]),
    (lambda a: a.repeat(2, 1, 3), [(2, 3)]),
    (lambda a: a.tile(2), [(2, 3)]),
    (lambda a: tp.tril(a, -1), [(3, 4)]),
    (lambda a: tp.triu(a[:, 1:], 1), [(2, 3, 4)]),
])
def test_copy_gradients(fn, shapes):
    rng = np.random.default_rng(2)
    grads_match(fn, [rng.standard_normal(s) for s in shapes])


def test_contiguous_all_dtypes():
    for dtype in DTYPES:
        x = make(values((3, 4)), dtype).t()
        assert not x.is_contiguous()
        c = x.contiguous()
        assert c.is_contiguous() and c.dtype == dtype
        assert_same(c, np_like(values((3, 4)).T, dtype))
        assert c.contiguous().data_ptr() == c.data_ptr()


def test_against_torch_on_mixed_cases():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    x, t = tp.tensor(a), torch.tensor(a)
    cases = [
        (lambda m: m.flatten(0, 1), "flatten"),
        (lambda m: m.movedim((0, 2), (2, 0)), "movedim"),
        (lambda m: m.diagonal(1, 0, 2), "diagonal"),
        (lambda m: m.repeat(1, 2, 1, 1), "repeat"),
        (lambda m: m.roll((1, 2), (0, -1)), "roll"),
        (lambda m: m.tril(1), "tril"),
        (lambda m: m.triu(-1), "triu"),
        (lambda m: m.narrow(1, -2, 2), "narrow"),
    ]
    for f, name in cases:
        np.testing.assert_array_equal(f(x).numpy(), f(t).numpy(), err_msg=name)


def test_numpy_style_stacking_and_rotation():
    a = np.arange(24.0).reshape(2, 3, 4)
    v = np.arange(3.0)
    x, tv = tp.tensor(a), tp.tensor(v)
    assert_same(tp.hstack([x, x]), np.hstack([a, a]))
    assert_same(tp.hstack([tv, tv]), np.hstack([v, v]))
    assert_same(tp.vstack([tv, tv]), np.vstack([v, v]))
    assert_same(tp.row_stack([x[0], x[1]]), np.vstack([a[0], a[1]]))
    assert_same(tp.dstack([tv, tv]), np.dstack([v, v]))
    assert_same(tp.column_stack([tv, x[0, :, :1]]), np.column_stack([v, a[0, :, :1]]))
    for f, g in [(tp.atleast_1d, np.atleast_1d), (tp.atleast_2d, np.atleast_2d), (tp.atleast_3d, np.atleast_3d)]:
        for arr in [np.array(5.0), v, a[0], a]:
            assert_same(f(tp.tensor(arr)), g(arr))
    assert_same(tp.fliplr(x), np.flip(a, 1))
    assert_same(tp.flipud(x), np.flipud(a))
    for k in range(-2, 6):
        assert_same(tp.rot90(x, k, [1, 2]), np.rot90(a, k, (1, 2)))
    assert_same(x.swapdims(0, -1), np.swapaxes(a, 0, -1))


def test_unfold_windows_and_gradient():
    a = np.arange(10.0)
    x = tp.tensor(a)
    assert_same(x.unfold(0, 3, 1), np.lib.stride_tricks.sliding_window_view(a, 3))
    assert_same(x.unfold(0, 4, 3), np.lib.stride_tricks.sliding_window_view(a, 4)[::3])
    b = np.arange(24.0).reshape(2, 3, 4)
    assert_same(tp.tensor(b).unfold(-1, 2, 2), np.stack([b[..., 0:2], b[..., 2:4]], -2))
    with pytest.raises(ValueError, match="unfold"):
        x.unfold(0, 11, 1)
    grads_match(lambda t: t.unfold(0, 3, 1), [np.random.default_rng(0).standard_normal(6)])
    grads_match(lambda t: t.unfold(1, 2, 2), [np.random.default_rng(1).standard_normal((2, 5))])


def test_flip_takes_dims_as_keyword_and_atleast_takes_sequences():
    # PyTorch's spellings, found by the OpInfo oracle.
    x = tp.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(x.flip(dims=(1,)).numpy(), x.numpy()[:, ::-1])
    np.testing.assert_array_equal(x.flip(dims=[0, 1]).numpy(), x.numpy()[::-1, ::-1])
    with pytest.raises(TypeError):
        x.flip(0, dims=(1,))
    a, b = tp.tensor(1.0), tp.arange(2)
    assert [t.shape for t in tp.atleast_2d([a, b])] == [(1, 1), (1, 2)]
    assert [t.shape for t in tp.atleast_3d(a, b)] == [(1, 1, 1), (1, 2, 1)]
    assert tp.atleast_1d(a).shape == (1,)
    assert x.float(memory_format=tp.contiguous_format).dtype == tp.float32
