"""Outside testing, fifteenth round: dynamic shapes and data read as indices
under tp.compile, the tp.func transforms (vmap, jacfwd, jacrev) against
torch.func, activation checkpointing, eager operator edge cases and state_dict
round trips, as a PyTorch user porting code meets them. Each test reproduces a
bug the suite missed: a silent wrong result, a crash or a missing option."""

import numpy as np
import pytest

import tensorplay as tp

nn = tp.nn
F = tp.nn.functional

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")


# ------------------- a 0-d index tensor under tp.compile and tp.func.vmap

def test_compiled_indexing_with_a_0d_tensor_reads_its_value_each_call():
    # x[i] with a 0-d integer tensor i is a select by i's value. The capture
    # read the value as a plain number, so the graph held `select(x, 0, 0)`
    # and every later call returned x[first i], silently.
    x = tp.arange(12.).reshape(3, 4)
    f = tp.compile(lambda x, i: x[i] * 2)
    for i in (0, 2, 1, 2, -1):
        assert tp.equal(f(x, tp.tensor(i)), x[i] * 2)
    g = tp.compile(lambda x, i: x[:, i])
    for i in (3, 0, 1):
        assert tp.equal(g(x, tp.tensor(i)), x[:, i])

    def write(x, i):
        x = x.clone()
        x[i] = -1.0
        return x
    h = tp.compile(write)
    for i in (0, 2):
        assert tp.equal(h(x, tp.tensor(i)), write(x, tp.tensor(i)))
    m = tp.compile(lambda x, keep: x[keep])  # a 0-d bool tensor: a new dim of length 1 or 0
    assert m(x, tp.tensor(True)).shape == (1, 3, 4)
    assert m(x, tp.tensor(False)).shape == (0, 3, 4)


@needs_torch
def test_vmap_indexing_with_a_mapped_0d_index():
    # vmap(lambda x, i: x[i]) with one index per example gave x[b, i[0]] for
    # every b (the capture baked example 0's index in).
    x = np.random.RandomState(0).randn(3, 4).astype(np.float32)
    i = [0, 3, 1]
    got = tp.func.vmap(lambda x, i: x[i])(tp.tensor(x), tp.tensor(i))
    want = torch.func.vmap(lambda x, i: x[i])(torch.tensor(x), torch.tensor(i))
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# ------------------- jacfwd / jacrev options of torch.func

def test_jacfwd_refuses_random_draws_unless_told_how():
    # jacfwd runs the function once per column: with dropout inside, every
    # column had its own mask, a matrix that is no function's Jacobian.
    # torch.func.jacfwd raises by default and takes randomness='same'/'different'.
    x = tp.ones(6)
    drop = lambda x: F.dropout(x, 0.5)  # noqa: E731
    with pytest.raises(RuntimeError, match="randomness"):
        tp.func.jacfwd(drop)(x)
    tp.manual_seed(3)
    mask = drop(x)
    tp.manual_seed(3)
    j = tp.func.jacfwd(drop, randomness="same")(x)
    assert tp.equal(j, tp.diag(mask))  # every column saw the one mask
    assert tp.func.jacfwd(drop, randomness="different")(x).shape == (6, 6)
    with pytest.raises(RuntimeError, match="randomness"):
        tp.func.jacfwd(drop, randomness="sometimes")
    # deterministic functions are unaffected, also under vmap and hessian
    assert tp.allclose(tp.func.jacfwd(tp.sin)(x), tp.diag(x.cos()))
    assert tp.allclose(tp.func.hessian(lambda x: x.sin().sum())(x), tp.diag(-x.sin()))
    assert tp.func.vmap(tp.func.jacfwd(tp.sin))(tp.ones(2, 3)).shape == (2, 3, 3)


def test_jacrev_takes_chunk_size():
    # torch.func.jacrev(f, chunk_size=k) is common in ported code (memory);
    # it was a TypeError.
    x = tp.arange(4.)
    assert tp.allclose(tp.func.jacrev(tp.sin, chunk_size=1)(x), tp.diag(x.cos()))
    with pytest.raises(ValueError, match="chunk_size"):
        tp.func.jacrev(tp.sin, chunk_size=0)


# ------------------- activation checkpointing

def _ckpt_case(lib, ck, how):
    rng = np.random.RandomState(0)
    w = lib.tensor(rng.randn(4, 4).astype(np.float32)).requires_grad_()
    x = lib.tensor(rng.randn(3, 4).astype(np.float32)).requires_grad_()
    h = x * 2  # the inputs have a history before the checkpoint
    if how == "list":
        out = ck.checkpoint(lambda a, extra: (a @ w + extra[0]).tanh(), h, [h * 3], use_reentrant=False)
    else:  # a cross-attention-like keyword tensor
        out = ck.checkpoint(lambda a, memory=None: (a @ w + memory).tanh(), h, memory=h.exp(),
                            use_reentrant=False)
    out.sum().backward()
    return [w.grad.numpy(), x.grad.numpy()]


@needs_torch
@pytest.mark.parametrize("how", ["list", "kwarg"])
def test_checkpoint_differentiates_tensors_in_lists_and_keyword_arguments(how):
    # A tensor reaching the function inside a list or as a keyword argument was
    # kept as a plain object: the recomputation backpropagated into its history
    # itself, and the outer backward then raised "Trying to backward through
    # the graph a second time" (PyTorch gives both gradients).
    from tensorplay.utils import checkpoint as tck
    import torch.utils.checkpoint as ck
    got = _ckpt_case(tp, tck, how)
    want = _ckpt_case(torch, ck, how)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@needs_torch
def test_checkpoint_recomputes_under_the_forwards_autocast():
    # Under tp.autocast the forward ran its matmul in bfloat16, but the
    # recomputation in backward ran with autocast suspended (the engine does
    # that around every node), in float32: the gradients were those of another
    # function. PyTorch's checkpoint restores the autocast state.
    from tensorplay.utils import checkpoint as tck
    import torch.utils.checkpoint as ck
    rng = np.random.RandomState(0)
    res = []
    for lib, c in ((tp, tck), (torch, ck)):
        w = lib.tensor(rng.randn(4, 4).astype(np.float32) if lib is tp else res[0][2]).requires_grad_()
        x = lib.tensor(rng.randn(3, 4).astype(np.float32) if lib is tp else res[0][3]).requires_grad_()
        with lib.autocast("cpu", dtype=lib.bfloat16):
            y = c.checkpoint(lambda a: (a @ w).relu(), x, use_reentrant=False)
        assert y.dtype == lib.bfloat16
        y.float().sum().backward()
        res.append((w.grad.numpy(), x.grad.numpy(), w.detach().numpy(), x.detach().numpy()))
    for a, b in zip(res[0][:2], res[1][:2]):
        np.testing.assert_array_equal(a, b)
    # and without checkpoint, tp's own eager gradients are the same
    w = tp.tensor(res[0][2]).requires_grad_()
    x = tp.tensor(res[0][3]).requires_grad_()
    with tp.autocast("cpu", dtype=tp.bfloat16):
        y = (x @ w).relu()
    y.float().sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), res[0][0])


# ------------------- vmap of operators that see the whole example

@needs_torch
def test_vmap_roll_without_dims_rolls_each_example():
    # roll without dims rolls the flattened tensor; the batch rule kept
    # dims=[] and rolled the flattened batch, mixing examples.
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    for shift in (1, -2, 4):
        got = tp.func.vmap(lambda x: x.roll(shift))(tp.tensor(x))
        want = torch.func.vmap(lambda x: x.roll(shift))(torch.tensor(x))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    got = tp.func.vmap(lambda x: x.roll(1), in_dims=1)(tp.tensor(x.reshape(3, 5, 1)))
    want = torch.func.vmap(lambda x: x.roll(1), in_dims=1)(torch.tensor(x.reshape(3, 5, 1)))
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@needs_torch
@pytest.mark.parametrize("name", ["take", "put", "quantile", "matrix_exp"])
def test_vmap_of_library_functions_that_read_values_internally(name):
    # take/put check their index bounds with item(), quantile checks q, and
    # matrix_exp picks its scaling steps: vmap refused them ("the function
    # calls Tensor.item()"), though the user wrote no data dependence and
    # torch.func batches them. They now run per example.
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.1 - 1
    fns = {
        "take": lambda L: (lambda x: x.take(L.tensor([0, 5, 11]))),
        "put": lambda L: (lambda x: x.put(L.tensor([0, 5]), L.tensor([9., 8.]))),
        "quantile": lambda L: (lambda x: x.quantile(0.3, dim=1)),
        "matrix_exp": lambda L: (lambda x: L.linalg.matrix_exp(x[:, :3])),
    }
    got = tp.func.vmap(fns[name](tp))(tp.tensor(x))
    want = torch.func.vmap(fns[name](torch))(torch.tensor(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    # a user's own item() still refuses
    with pytest.raises(RuntimeError, match="item"):
        tp.func.vmap(lambda x: x * x.sum().item())(tp.tensor(x))


# ------------------- NumPy scalars on the left of an operator

@needs_torch
def test_numpy_scalar_on_the_left_gives_a_tensor_with_its_history():
    # `np.float32(0.5) * loss` (a scale computed with NumPy) returned an ndarray:
    # NumPy's scalar converted the tensor with __array__, dropping autograd
    # (and raising "Can't call numpy() on Tensor that requires grad" for a
    # tensor that requires grad). torch.Tensor sets __array_priority__ so that
    # NumPy defers to its reflected operators.
    import operator
    x = tp.ones(3, requires_grad=True)
    y = np.float32(0.5) * (x * 2).sum()
    assert isinstance(y, tp.Tensor)
    y.backward()
    assert tp.equal(x.grad, tp.ones(3))
    for s in (np.float32(2.0), np.float64(2.0), np.int64(2)):
        for op in ("mul", "add", "sub", "truediv", "pow", "floordiv", "gt", "eq"):
            f = getattr(operator, op)
            got = f(s, tp.arange(1, 4))
            want = f(s, torch.arange(1, 4))
            assert isinstance(got, tp.Tensor), (s, op)
            assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (s, op)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    # NumPy functions still read tensors as arrays
    np.testing.assert_array_equal(np.asarray(tp.arange(3)), np.arange(3))


@needs_torch
def test_a_numpy_array_operand_is_a_tensor_as_in_torch():
    # `x + pe` with pe a NumPy array returned an ndarray (NumPy took the
    # operator over), detached from autograd; torch reads the array as a
    # tensor of its dtype (torch then raises for an x that requires grad; here
    # the history is kept).
    pe = np.linspace(0, 1, 3)  # float64
    for lib in (tp, torch):
        y = lib.ones(3) * np.ones(3, dtype=np.float32) + pe
        assert isinstance(y, lib.Tensor) and str(y.dtype).endswith("float64")
    x = tp.ones(3, requires_grad=True)
    y = x * np.ones(3, dtype=np.float32) + pe
    assert y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3))
    assert isinstance(tp.arange(3) == np.arange(3), tp.Tensor)
    x = tp.ones(3)
    x += pe  # in place: x keeps its dtype
    assert x.dtype == tp.float32
    np.testing.assert_allclose(x.numpy(), 1 + pe, rtol=1e-6)


# ------------------- view(dtype) to another element size

@needs_torch
def test_view_as_a_dtype_of_another_element_size():
    # x.view(torch.uint8) (bytes of a tensor: hashing, packing, quantization
    # code) and back were refused here; PyTorch scales the last dim.
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for lib in (tp, torch):
        t = lib.tensor(x)
        b = t.view(lib.uint8)
        assert tuple(b.shape) == (3, 16) and tuple(b.stride()) == (16, 1)
        np.testing.assert_array_equal(b.numpy(), x.view(np.uint8))
        assert lib.equal(b.view(lib.float32), t)
        d = t.view(lib.float64)
        assert tuple(d.shape) == (3, 2)
        np.testing.assert_array_equal(d.numpy(), x.view(np.float64))
        s = t[:, 1:3].view(lib.int16)  # a strided view with an offset
        assert tuple(s.shape) == (3, 4) and tuple(s.stride()) == (8, 1) and s.storage_offset() == 2
        np.testing.assert_array_equal(s.numpy(), x[:, 1:3].copy().view(np.int16))
        b[0, 4:8] = 0  # the bytes alias the tensor
        assert float(t[0, 1]) == 0.0
        for bad in (lambda: t.t().view(lib.int8), lambda: t[0, 0].view(lib.int8),
                    lambda: t[:, :3].view(lib.float64), lambda: t.view(lib.int8)[:, 1:5].view(lib.float32)):
            with pytest.raises(RuntimeError):
                bad()
    f = lambda x: (x * 2).view(tp.int16).long().sum(-1)  # noqa: E731
    t = tp.tensor(x)
    assert tp.equal(tp.compile(f)(t), f(t))


# ------------------- tp.tensor with an integer dtype

@needs_torch
@pytest.mark.parametrize("data,dtype", [
    ([300], "uint8"), ([-300], "uint8"), ([200], "int8"), ([1e10], "int32"), ([2 ** 40], "int32"),
    ([True, 300], "uint8"), ([[300]], "uint8"), (300, "uint8"), ([-3.7], "uint8"), ([float("nan")], "int64"),
    ([float("inf")], "int32"), ([255.5], "uint8"), ([9.3e18], "int64"),
    # these fit (unsigned types take -max .. -1, which wrap, as in PyTorch)
    ([-1], "uint8"), ([-255], "uint8"), ([255], "uint8"), ([-128, 127], "int8"), ([3.7], "uint8"),
    ([1.5], "int64"), ([70000.0], "float16"), (300, "bool"), ([], "uint8"),
])
def test_tensor_refuses_numbers_its_integer_dtype_cannot_hold(data, dtype):
    # tp.tensor([300], dtype=tp.uint8) wrapped silently to 44 (and nan to
    # int64's minimum); torch.tensor raises "value cannot be converted to type
    # uint8 without overflow".
    try:
        want = torch.tensor(data, dtype=getattr(torch, dtype)).tolist()
    except RuntimeError:
        with pytest.raises(RuntimeError, match="cannot be converted to type"):
            tp.tensor(data, dtype=getattr(tp, dtype))
    else:
        assert tp.tensor(data, dtype=getattr(tp, dtype)).tolist() == want
    # a NumPy array keeps NumPy's casting, as in PyTorch
    assert tp.tensor(np.array([300]), dtype=tp.uint8).tolist() == [44]


# ------------------- state_dict / load_state_dict machinery of PyTorch

def _hooked_results(lib):
    out = {}

    class Renamed(lib.nn.Module):  # an override with PyTorch's signature, renaming an old key
        def __init__(self):
            super().__init__()
            self.proj = lib.nn.Linear(2, 2)

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                  unexpected_keys, error_msgs):
            old = prefix + "old_proj.weight"
            if old in state_dict:
                state_dict[prefix + "proj.weight"] = state_dict.pop(old)
            out["version"] = local_metadata.get("version")
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                          unexpected_keys, error_msgs)

    m = lib.nn.Sequential(Renamed())
    sd = m.state_dict()
    sd["0.old_proj.weight"] = sd.pop("0.proj.weight") * 0 + 3
    m.load_state_dict(sd)
    out["renamed"] = m[0].proj.weight.detach().numpy().tolist()

    m = lib.nn.Linear(2, 2)
    m.register_load_state_dict_pre_hook(
        lambda mod, sd, prefix, *rest: sd.__setitem__(prefix + "bias", lib.full((2,), 7.0)))
    m.register_load_state_dict_post_hook(lambda mod, keys: keys.missing_keys.clear())
    r = m.load_state_dict({"weight": lib.ones(2, 2)})
    out["pre_post"] = (m.bias.detach().numpy().tolist(), list(r.missing_keys))

    m = lib.nn.Linear(2, 2)
    calls = []
    m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: calls.append(prefix))
    m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: sd.__setitem__(prefix + "note", lib.ones(1)))
    out["sd_hooks"] = (sorted(lib.nn.Sequential(m).state_dict()), calls)

    class Counter(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = lib.nn.Parameter(lib.ones(2))
            self.seen = 0

        def get_extra_state(self):
            return {"seen": self.seen}

        def set_extra_state(self, state):
            self.seen = state["seen"]

    a, b = Counter(), Counter()
    a.seen = 5
    sd = a.state_dict()
    b.load_state_dict(sd)
    out["extra"] = (sorted(sd), b.seen)
    with pytest.raises(RuntimeError, match="_extra_state"):
        b.load_state_dict({"w": lib.ones(2)})

    bn = lib.nn.BatchNorm1d(2)
    sd = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}  # metadata gone
    out["bn_old"] = list(bn.load_state_dict(sd).missing_keys)
    return out


@needs_torch
def test_state_dict_hooks_extra_state_and_metadata_as_in_torch():
    # _load_from_state_dict had another signature (an override written for
    # PyTorch, `(state_dict, prefix, local_metadata, strict, missing_keys,
    # unexpected_keys, error_msgs)`, got its lists shifted by one), the
    # state_dict/load_state_dict hooks did not exist, get_extra_state was never
    # saved (silently lost), and a BatchNorm state dict without its metadata
    # (rebuilt with a dict comprehension) refused a missing num_batches_tracked.
    got, want = _hooked_results(tp), _hooked_results(torch)
    assert got == want


# ------------------- one_hot with a given num_classes compiles

@pytest.mark.parametrize("dynamic", [None, True])
def test_compiled_one_hot_with_num_classes_needs_no_eager_fallback(dynamic):
    # F.one_hot(y, 10) has a known shape (the tracer records no size gate for
    # it), but Stax refused it as data-dependent and the whole function ran
    # eagerly with a fallback warning.
    import warnings
    f = tp.compile(lambda x, i: (F.one_hot(i, 5).float() * x).sum(-1), dynamic=dynamic)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (2, 3, 7, 4, 1):
            i = tp.arange(n) % 5
            x = tp.arange(n * 5.0).reshape(n, 5)
            assert tp.equal(f(x, i), (F.one_hot(i, 5).float() * x).sum(-1))


# ------------------- gradients at the edges of their domains

@needs_torch
def test_atan2_gradient_at_the_origin_is_zero_as_in_torch():
    # atan2(y, x) of a zero vector (the angle of a zero displacement) had the
    # gradient 0 * inf = NaN, poisoning every parameter; PyTorch gives 0.
    res = []
    for lib in (tp, torch):
        y = lib.tensor([0.0, 1.0, 0.0, 2.0], requires_grad=True)
        x = lib.tensor([0.0, 0.0, -3.0, 1.0], requires_grad=True)
        lib.atan2(y, x).sum().backward()
        res.append((y.grad.numpy(), x.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    f = tp.compile(lambda a, b: tp.atan2(a, b).sum())
    y = tp.tensor([0.0, 1.0], requires_grad=True)
    f(y, tp.tensor([0.0, 2.0])).backward()
    assert not bool(tp.isnan(y.grad).any())
    _, t = tp.func.jvp(lambda a: tp.atan2(a, a), (tp.tensor([0.0, 1.0]),), (tp.ones(2),))
    assert tp.equal(t, tp.zeros(2))


# ------------------- autograd.Function: PyTorch 2's setup_context form, under tp.func

def _sin_function(lib):
    class ScaledSin(lib.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x, k=1.0):
            return x.sin() * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k = inputs
            ctx.save_for_backward(x)
            ctx.k = k

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos() * ctx.k, None
    return ScaledSin


def test_function_with_setup_context_as_in_torch():
    # The form torch.func requires (forward without ctx, then
    # setup_context(ctx, inputs, output)) raised "forward() takes 2 positional
    # arguments but 3 were given". The oracle is the closed form (torch before
    # 2.13 binds apply's keyword arguments differently).
    x0 = np.random.RandomState(0).randn(4, 3).astype(np.float32)
    fn = _sin_function(tp)
    x = tp.tensor(x0, requires_grad=True)
    y = fn.apply(x, k=2.0)  # a keyword argument is bound like the others
    y.sum().backward()
    g = tp.func.grad(lambda v: fn.apply(v, 3.0).sum())(tp.tensor(x0))
    pv = tp.func.vmap(tp.func.grad(lambda v: fn.apply(v, 2.0).sum()))(tp.tensor(x0))
    got = [y.detach().numpy(), x.grad.numpy(), g.numpy(), pv.numpy(), fn.apply(tp.tensor(x0)).numpy()]
    want = [2 * np.sin(x0), 2 * np.cos(x0), 3 * np.cos(x0), 2 * np.cos(x0), np.sin(x0)]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    w = tp.tensor(x0, requires_grad=True)
    tp.compile(lambda v: fn.apply(v, 2.0).sum())(w).backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.cos(x0), rtol=1e-6, atol=1e-6)


def test_vmap_keeps_a_custom_functions_backward_and_jvp():
    # In vmap's capture a custom Function became its forward's operators
    # recorded without gradient: vmap(grad(f)) returned zeros, a vmapped output
    # had no grad_fn, and jvp differentiated the implementation (round: 0)
    # instead of the Function's jvp (straight-through: 1).
    class Exp(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.exp()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.exp()

    class STE(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def jvp(ctx, t):
            return t

    x = tp.randn(4, 3)
    assert tp.allclose(tp.func.vmap(tp.func.grad(lambda v: Exp.apply(v).sum()))(x), x.exp())
    xs = x.clone().requires_grad_()
    tp.func.vmap(Exp.apply)(xs).sum().backward()
    assert tp.allclose(xs.grad, x.exp())
    _, t = tp.func.jvp(tp.func.vmap(lambda v: STE.apply(v) * 2), (x,), (tp.ones(4, 3),))
    assert tp.equal(t, tp.full((4, 3), 2.0))
    assert tp.equal(tp.func.vmap(tp.func.grad(lambda v: STE.apply(v * 3).sum()))(x), tp.full((4, 3), 3.0))


# ------------------- writes through one copy of an expanded view, compiled

@pytest.mark.parametrize("write", [
    lambda x: x.unsqueeze(0).expand(2, *x.shape)[0].fill_(3.0),
    lambda x: x[:, None].expand(x.shape[0], 5, x.shape[1])[:, 2].add_(1.0),
    lambda x: x[None].expand(3, *x.shape).narrow(0, 1, 1).squeeze(0).mul_(2.0),
    lambda x: x[None].expand(2, *x.shape).unbind(0)[0].zero_(),
])
def test_compiled_write_through_one_copy_of_an_expanded_view(write):
    # The write was scattered into the expanded view's value and that value
    # into its base copy by copy, the last copy winning: writing through copy 0
    # was silently lost in the compiled function (eager writes x).
    def f(x):
        write(x)
        return x * 1

    for n in (4, 6):
        a = tp.arange(n * 3.0).reshape(n, 3)
        xe, xc = a.clone(), a.clone()
        assert tp.equal(tp.compile(f)(xc), f(xe))
        assert tp.equal(xc, xe)

    def g(x):  # an intermediate, differentiated
        h = x * 2
        write(h)
        return (h * h).sum()

    x1 = tp.arange(12.0).reshape(4, 3).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    g(x1).backward()
    tp.compile(g)(x2).backward()
    assert tp.equal(x1.grad, x2.grad)


@pytest.mark.parametrize("write", [
    lambda x: x.view(-1).unfold(0, 3, 1)[2].fill_(9.0),  # windows that overlap
    lambda x: x.view(tp.int32)[0].fill_(0),  # the bits of another dtype
    lambda x: x.view(tp.uint8)[:, :4].zero_(),
])
def test_compiled_write_through_overlapping_windows_and_dtype_views(write):
    # An unfold with overlapping windows was scattered back window by window,
    # the last window restoring the old values; a write through x.view(int32)
    # was reshaped back into the float32 parent, converting the integers'
    # values instead of keeping their bits (x[1:] became ~1e9).
    def f(x):
        write(x)
        return x * 1

    a = tp.arange(12.0).reshape(4, 3) + 1
    xe, xc = a.clone(), a.clone()
    assert tp.equal(tp.compile(f)(xc), f(xe))
    assert tp.equal(xc, xe)


# ------------------- torch.gradient and angle

@needs_torch
@pytest.mark.parametrize("kw", [
    {}, {"edge_order": 2}, {"dim": None, "spacing": None}, {"dim": 1, "spacing": 2.0}, {"dim": (-1, 0), "edge_order": 2, "spacing": [0.3, 2]},
    {"dim": 1, "edge_order": 2, "coords": [0.0, 0.5, 2.0, 2.5, 4.0]},
    {"dim": 1, "edge_order": 1, "coords": [0.0, 0.5, 2.0, 2.5, 4.0]},
])
def test_gradient_matches_torch(kw):
    # torch.gradient (finite differences, NumPy's rules) did not exist.
    a = np.random.RandomState(0).randn(4, 5).astype(np.float32)
    res = []
    for lib in (tp, torch):
        k = dict(kw)
        if "coords" in k:
            k["spacing"] = [lib.tensor(k.pop("coords"))]
        res.append([t.numpy() for t in lib.gradient(lib.tensor(a), **k)])
    assert len(res[0]) == len(res[1])
    for x, y in zip(*res):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)
    got = tp.gradient(tp.tensor([1, 4, 9, 16]))[0]  # integers: a floating result
    assert got.dtype == tp.float32 and got.tolist() == [3.0, 4.0, 6.0, 7.0]
    with pytest.raises(RuntimeError, match="edge_order"):
        tp.gradient(tp.tensor([1.0, 2.0]), edge_order=2)
    assert tp.angle(tp.tensor([-1.0, 2.0])).tolist() == pytest.approx([np.pi, 0.0])


# ------------------- tp.save / tp.load with PyTorch's arguments

def test_load_takes_torchs_cpu_map_locations_and_devices_pickle(tmp_path):
    # tp.load(f, map_location=tp.device("cpu")) raised a TypeError from the
    # device's __eq__, `map_location=lambda storage, loc: storage` and
    # {"cuda:0": "cpu"} raised "only the cpu device exists", a checkpoint
    # holding a device could not be saved ("cannot pickle 'device' object"),
    # and mmap= / pickle_module= were TypeErrors.
    import pickle
    path = tmp_path / "ckpt.pt"
    tp.save({"w": tp.ones(2), "device": tp.device("cpu"), "gpu": tp.device("cuda", 1)}, path,
            pickle_module=pickle)
    for loc in (None, "cpu", tp.device("cpu"), lambda storage, loc: storage, {"cuda:0": "cpu"}):
        got = tp.load(path, map_location=loc)
        assert tp.equal(got["w"], tp.ones(2))
        assert got["device"] == tp.device("cpu") and str(got["gpu"]) == "cuda:1"
    assert tp.equal(tp.load(path, mmap=True, weights_only=True)["w"], tp.ones(2))
    with pytest.raises(ValueError, match="cpu"):
        tp.load(path, map_location="cuda:0")


@needs_torch
def test_comparing_tensors_and_devices_with_none():
    # `mask == None`, `x in [None, ...]` and `x.device == None` raised
    # nanobind's "incompatible function arguments" TypeError; PyTorch gives
    # False (True for !=), and a TypeError only for ordering and arithmetic.
    for lib in (tp, torch):
        t, d = lib.ones(2), lib.device("cpu")
        assert (t == None) is False and (t != None) is True  # noqa: E711
        assert (None == t) is False and t not in [None]  # noqa: E711
        assert (d == None) is False and (d != None) is True and d not in (None, "cpu")  # noqa: E711
        assert (t.device == None) is False  # noqa: E711
        for bad in (lambda: t < None, lambda: t + None, lambda: None * t):
            with pytest.raises(TypeError):
                bad()


@needs_torch
def test_dims_none_means_the_default_as_in_torch():
    # x.amax(dim=None) / x.roll(1, dims=None) were TypeErrors ("must be int[1], not None").
    for lib in (tp, torch):
        x = lib.arange(6.0).reshape(2, 3)
        assert float(x.amax(dim=None)) == 5.0 and float(x.amin(None)) == 0.0
        assert x.view(-1).roll(1, dims=None).tolist() == [5.0, 0.0, 1.0, 2.0, 3.0, 4.0]


@needs_torch
def test_set_submodule_as_in_torch():
    # model.set_submodule("2.0", new) (LoRA / quantization code swapping layers
    # by name) was an AttributeError.
    res = []
    for lib in (tp, torch):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Sequential(lib.nn.ReLU(), lib.nn.Linear(3, 1)))
        m.set_submodule("1.0", lib.nn.Tanh())
        m.set_submodule("extra", lib.nn.Identity())
        errs = []
        for bad in (lambda: m.set_submodule("1.9", lib.nn.ReLU(), strict=True),
                    lambda: m.set_submodule("0.weight", lib.nn.ReLU()),
                    lambda: m.set_submodule("0", 3), lambda: m.set_submodule("", lib.nn.ReLU())):
            try:
                bad()
                errs.append(None)
            except (AttributeError, ValueError) as e:
                errs.append(type(e).__name__)
        res.append(([type(x).__name__ for x in m.modules()], errs))
    assert res[0] == res[1]
