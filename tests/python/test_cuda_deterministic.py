"""tp.use_deterministic_algorithms (core/deterministic.h, issue 12).

On, the CUDA operators that accumulate floats with atomic additions
(index_put_ with accumulate=True, index_add_, scatter_add_, scatter_reduce
sum/prod/mean, advanced index_put_ with several index tensors, and through
them the gradients of embedding, index_select, gather and x[i]) sort the
destinations and fold each one's run in index order, rounding every step as
the CPU does (no FMA). So their results are the same bits on every run and,
since the CPU also adds in index order in the same compute dtype, the CPU's
bits exactly, float32 and the 16-bit floats included (not only within the
order-of-summation error). Puts and scatters of a src with repeated positions
write the last occurrence. An operator without a deterministic form raises
RuntimeError naming it, or warns with warn_only=True (on CUDA: a cuDNN
convolution pass for which cuDNN offers no deterministic algorithm).

The CPU kernels are sequential already (one thread, index order): the mode
changes nothing there, which the CPU tests below check against NumPy's
sequential np.add.at and a Python loop.

Also here: the table of checked index sites (cuda/device_status.h) is keyed
by (operator, dim), the size travelling with the status word, so many
distinct sizes do not grow it, and messages still name the call's size."""
import contextlib

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from test_cuda_index_async import _sync_checks

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")

FLOATS = [tp.float32, tp.float64, tp.float16, tp.bfloat16]


@contextlib.contextmanager
def _deterministic(on=True, warn_only=False):
    old = (tp.are_deterministic_algorithms_enabled(), tp.is_deterministic_algorithms_warn_only_enabled())
    tp.use_deterministic_algorithms(on, warn_only=warn_only)
    try:
        yield
    finally:
        tp.use_deterministic_algorithms(old[0], warn_only=old[1])


def _bits(t):
    """The values' bits (16-bit floats widen exactly to float32 first)."""
    t = t.detach().cpu()
    if t.dtype in (tp.float16, tp.bfloat16):
        t = t.float()
    a = np.ascontiguousarray(t.numpy())
    return a.view({4: np.uint32, 8: np.uint64}[a.itemsize]) if a.dtype.kind == "f" else a


def _same_bits(a, b):
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(_bits(a), _bits(b))


def _dups(n, size, seed=0):
    """n indices into `size` positions, heavily repeated, in a shuffled order."""
    return tp.tensor(np.random.default_rng(seed).integers(0, size, n))


def _values(*shape, dtype=tp.float32, seed=1):
    # Mixed magnitudes: float sums then depend on their order.
    r = np.random.default_rng(seed)
    v = r.standard_normal(shape) * np.exp(r.uniform(-6, 6, shape))
    return tp.tensor(v).to(dtype)


# ---- the switch (no GPU needed) ----

def test_flag_round_trip():
    with _deterministic(False):
        assert tp.are_deterministic_algorithms_enabled() is False
        assert tp.is_deterministic_algorithms_warn_only_enabled() is False
        tp.use_deterministic_algorithms(True)
        assert tp.are_deterministic_algorithms_enabled() is True
        assert tp.is_deterministic_algorithms_warn_only_enabled() is False
        tp.use_deterministic_algorithms(True, warn_only=True)
        assert tp.are_deterministic_algorithms_enabled() is True
        assert tp.is_deterministic_algorithms_warn_only_enabled() is True
        tp.use_deterministic_algorithms(False)
        assert tp.are_deterministic_algorithms_enabled() is False
        assert tp.is_deterministic_algorithms_warn_only_enabled() is False
    with pytest.raises(TypeError, match="use_deterministic_algorithms"):
        tp.use_deterministic_algorithms(1)
    with pytest.raises(TypeError, match="warn_only"):
        tp.use_deterministic_algorithms(True, warn_only="yes")
    with pytest.raises(TypeError):
        tp.use_deterministic_algorithms(True, True)  # warn_only is keyword-only


def test_an_operator_without_a_deterministic_form_raises_or_warns():
    alert = tp._C._alert_not_deterministic  # what such an operator calls before its kernel
    with _deterministic(False):
        alert("my_scatter_op")  # off: silent
    with _deterministic(True):
        with pytest.raises(RuntimeError, match="my_scatter_op.*deterministic"):
            alert("my_scatter_op")
    with _deterministic(True, warn_only=True):
        with pytest.warns(UserWarning, match="my_scatter_op.*deterministic"):
            alert("my_scatter_op")


# ---- the CPU: sequential already, the mode changes nothing ----

@pytest.mark.parametrize("on", [False, True])
def test_cpu_accumulations_are_sequential_in_index_order(on):
    i = _dups(3000, 7)
    v = _values(3000, 5)
    x = _values(7, 5, seed=2)
    want = x.numpy().copy()
    np.add.at(want, i.numpy(), v.numpy())  # unbuffered: one addition at a time, in index order
    with _deterministic(on):
        np.testing.assert_array_equal(tp.index_add(x, 0, i, v).numpy(), want)
        np.testing.assert_array_equal(tp.index_put(x, (i,), v, accumulate=True).numpy(), want)
        ii = i.reshape(-1, 1).expand(3000, 5)
        np.testing.assert_array_equal(tp.scatter_add(x, 0, ii, v).numpy(), want)
        np.testing.assert_array_equal(tp.scatter_reduce(x, 0, ii, v, "sum").numpy(), want)


@pytest.mark.parametrize("on", [False, True])
def test_cpu_put_with_repeated_indices_keeps_the_last(on):
    i = _dups(200, 6, seed=3)
    v = _values(200, 3)
    want = np.zeros((6, 3), np.float32)
    for k, row in enumerate(i.numpy()):
        want[row] = v.numpy()[k]
    with _deterministic(on):
        np.testing.assert_array_equal(tp.index_put(tp.zeros(6, 3), (i,), v).numpy(), want)


# ---- the kernels' sources (NVRTC, no GPU needed) ----

DET_PREFIXES = ("tp_det_", "tp_sreduce_det_", "tp_sreduce_keys_")


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
def test_deterministic_kernel_sources_compile(arch):
    srcs = [(n, s) for n, s in tp.cuda._kernel_sources() if n.startswith(DET_PREFIXES)]
    names = {n for n, _ in srcs}
    for dt in ["float32", "float64", "float16", "bfloat16"]:
        assert {f"tp_det_row_add_{dt}", f"tp_det_scatter_add_{dt}", f"tp_det_advidx_acc_{dt}"} <= names
    for k in ["sum", "mean", "prod"]:
        assert {f"tp_sreduce_det_{k}_float32", f"tp_sreduce_det_{k}_float64"} <= names
    for b in [1, 2, 4, 8]:
        assert {f"tp_det_row_put_b{b}", f"tp_det_scatter_b{b}", f"tp_det_advidx_put_b{b}"} <= names
    for n, s in srcs:
        assert tp.cuda._nvrtc_compile(s, n, arch)[:4] == b"\x7fELF", n


@nvrtc
def test_deterministic_folds_use_no_atomics_and_no_fma():
    for n, s in tp.cuda._kernel_sources():
        if not n.startswith(DET_PREFIXES) or "keys" in n:
            continue
        body = s[s.index('extern "C"'):]  # the prelude may define the atomic helper; the kernel must not call it
        assert "atomic" not in body and "tp_acc" not in body, n
        if "_add_" in n or "_sum_" in n or "_mean_" in n or "_prod_" in n:
            assert "_rn(" in body or "tp_add(" in body, n  # each step rounded on its own


# ---- on the GPU ----

def _runs(fn, n=3):
    """fn() n times on the GPU: every result the same bits; the first returned."""
    first = fn()
    for _ in range(n - 1):
        _same_bits(fn(), first)
    return first


@gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_index_add_and_index_put_accumulate_are_the_cpus_bits(dtype):
    i = _dups(4096, 7)
    v = _values(4096, 33, dtype=dtype)
    x = _values(7, 33, dtype=dtype, seed=2)
    ic, vc, xc = i.cuda(), v.cuda(), x.cuda()
    with _deterministic():
        for alpha in (1, 0.75):
            got = _runs(lambda: tp.index_add(xc, 0, ic, vc, alpha=alpha))
            _same_bits(got, tp.index_add(x, 0, i, v, alpha=alpha))
        got = _runs(lambda: tp.index_put(xc, (ic,), vc, accumulate=True))
        _same_bits(got, tp.index_put(x, (i,), v, accumulate=True))
        # along a middle dim, with negative indices (index_put counts them from the end)
        x3, v3 = _values(3, 7, 5, dtype=dtype), _values(3, 4096, 5, dtype=dtype, seed=4)
        ineg = i - 7
        got = _runs(lambda: tp.index_put(x3.cuda(), (None, ineg.cuda()), v3.cuda(), accumulate=True))
        _same_bits(got, tp.index_put(x3, (None, ineg), v3, accumulate=True))
        _same_bits(got, tp.index_add(x3, 1, i, v3))  # the same positions, counted from the start
        # in place
        y = xc.clone()
        y.index_add_(0, ic.to(tp.int32), vc)
        _same_bits(y, tp.index_add(x, 0, i, v))


@gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_scatter_add_is_the_cpus_bits(dtype):
    idx = tp.tensor(np.random.default_rng(5).integers(0, 6, (1500, 9)))
    src = _values(1500, 9, dtype=dtype)
    x = _values(6, 9, dtype=dtype, seed=2)
    with _deterministic():
        got = _runs(lambda: tp.scatter_add(x.cuda(), 0, idx.cuda(), src.cuda()))
        _same_bits(got, tp.scatter_add(x, 0, idx, src))
        got = _runs(lambda: tp.scatter(x.cuda(), 0, idx.cuda(), src.cuda(), reduce="add"))
        _same_bits(got, tp.scatter_add(x, 0, idx, src))
        # along the last dim of a non-contiguous (transposed) target, in place
        xt = _values(9, 6, dtype=dtype, seed=3).cuda().t()
        it = tp.tensor(np.random.default_rng(6).integers(0, 9, (6, 700)))
        st = _values(6, 700, dtype=dtype, seed=7)
        want = tp.scatter_add(xt.cpu(), 1, it, st)
        xt.scatter_add_(1, it.cuda(), st.cuda())
        _same_bits(xt, want)


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.float16])
@pytest.mark.parametrize("reduce", ["sum", "mean", "prod"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_is_the_cpus_bits(dtype, reduce, include_self):
    idx = tp.tensor(np.random.default_rng(8).integers(0, 5, (900, 4)))
    src = _values(900, 4, dtype=dtype)
    if reduce == "prod":  # products of values near 1, so they neither vanish nor overflow
        src = (1 + tp.tensor(np.random.default_rng(9).uniform(-0.01, 0.01, (900, 4)))).to(dtype)
    x = _values(5, 4, dtype=dtype, seed=2)
    with _deterministic():
        got = _runs(lambda: tp.scatter_reduce(x.cuda(), 0, idx.cuda(), src.cuda(), reduce, include_self=include_self))
        _same_bits(got, tp.scatter_reduce(x, 0, idx, src, reduce, include_self=include_self))


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float16])
def test_index_put_accumulate_with_several_index_tensors_is_the_cpus_bits(dtype):
    r = np.random.default_rng(10)
    i, j = tp.tensor(r.integers(0, 4, 2000)), tp.tensor(r.integers(-5, 5, 2000))
    v = _values(2000, 3, dtype=dtype)
    x = _values(4, 5, 3, dtype=dtype, seed=2)
    with _deterministic():
        got = _runs(lambda: tp.index_put(x.cuda(), (i.cuda(), j.cuda()), v.cuda(), accumulate=True))
        _same_bits(got, tp.index_put(x, (i, j), v, accumulate=True))


@gpu
def test_gradients_of_embedding_index_select_gather_and_indexing_are_the_cpus_bits():
    tok = _dups(5000, 11, seed=11).reshape(50, 100)
    w = _values(11, 16)
    g = _values(50, 100, 16, seed=12)
    r = np.random.default_rng(13)
    gi = tp.tensor(r.integers(0, 11, (3000, 16)))
    gg = _values(3000, 16, seed=14)
    i2, j2 = tp.tensor(r.integers(0, 11, 2500)), tp.tensor(r.integers(0, 16, 2500))
    g2 = _values(2500, seed=15)

    def grads(dev):
        out = []
        for f, up in ((lambda w_: F.embedding(tok.to(dev), w_), g),
                      (lambda w_: tp.index_select(w_, 0, tok.reshape(-1).to(dev)), g.reshape(5000, 16)),
                      (lambda w_: tp.gather(w_, 0, gi.to(dev)), gg),
                      (lambda w_: w_[tok.reshape(-1).to(dev)], g.reshape(5000, 16)),
                      (lambda w_: w_[i2.to(dev), j2.to(dev)], g2)):
            p = w.to(dev).detach().clone().requires_grad_()  # a fresh leaf (w.to("cpu") is w itself)
            f(p).backward(up.to(dev))
            out.append(p.grad)
        return out

    with _deterministic():
        want = grads("cpu")
        first = grads("cuda")
        for _ in range(2):
            for a, b in zip(grads("cuda"), first):
                _same_bits(a, b)
        for a, b in zip(first, want):
            _same_bits(a, b)


@gpu
def test_puts_with_repeated_positions_keep_the_last_occurrence():
    i = _dups(3000, 6, seed=16)
    v = _values(3000, 8)
    want = np.zeros((6, 8), np.float32)
    for k, row in enumerate(i.numpy()):
        want[row] = v.numpy()[k]
    r = np.random.default_rng(17)
    a, b = tp.tensor(r.integers(0, 3, 2000)), tp.tensor(r.integers(0, 4, 2000))
    vab = _values(2000, seed=18)
    want_ab = np.zeros((3, 4), np.float32)
    for k in range(2000):
        want_ab[a.numpy()[k], b.numpy()[k]] = vab.numpy()[k]
    si = tp.tensor(r.integers(0, 5, (1000, 3)))
    ss = _values(1000, 3, seed=19)
    want_s = np.zeros((5, 3), np.float32)
    for e in range(1000):
        for c in range(3):
            want_s[si.numpy()[e, c], c] = ss.numpy()[e, c]
    with _deterministic():
        for _ in range(3):
            np.testing.assert_array_equal(tp.index_put(tp.zeros(6, 8).cuda(), (i.cuda(),), v.cuda()).cpu().numpy(), want)
            y = tp.zeros(6, 8).cuda()
            y[i.cuda()] = v.cuda()
            np.testing.assert_array_equal(y.cpu().numpy(), want)
            z = tp.zeros(3, 4).cuda()
            z[a.cuda(), b.cuda()] = vab.cuda()
            np.testing.assert_array_equal(z.cpu().numpy(), want_ab)
            np.testing.assert_array_equal(tp.scatter(tp.zeros(5, 3).cuda(), 0, si.cuda(), ss.cuda()).cpu().numpy(),
                                          want_s)


@gpu
def test_integer_and_mode_off_accumulations_still_match():
    i = _dups(2000, 9, seed=20)
    v = tp.tensor(np.random.default_rng(21).integers(-100, 100, (2000, 3)))
    x = tp.zeros(9, 3, dtype=tp.int64)
    want = tp.index_add(x, 0, i, v)
    for on in (False, True):
        with _deterministic(on):
            np.testing.assert_array_equal(tp.index_add(x.cuda(), 0, i.cuda(), v.cuda()).cpu().numpy(), want.numpy())
    vf = _values(2000, 3)
    with _deterministic(False):  # atomic: equal within the order-of-summation error
        got = tp.index_add(tp.zeros(9, 3).cuda(), 0, i.cuda(), vf.cuda()).cpu().numpy()
    ref = tp.index_add(tp.zeros(9, 3), 0, i, vf).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(vf.numpy()).max())


@gpu
def test_a_bad_index_is_still_reported_in_deterministic_mode():
    x = tp.zeros(5, 2).cuda()
    with _deterministic(), _sync_checks(True):
        with pytest.raises(IndexError, match=r"index_add.*index 9 is out of bounds for dimension 0 with size 5"):
            tp.index_add(x, 0, tp.tensor([0, 9, 1]).cuda(), tp.ones(3, 2).cuda())
        with pytest.raises(IndexError, match=r"scatter_add.*index 7 is out of bounds for dimension 0 with size 5"):
            tp.scatter_add(x, 0, tp.tensor([[0, 0], [7, 1]]).cuda(), tp.ones(2, 2).cuda())
    assert x.sum().item() == 0


# ---- the site table of checked launches ----

@gpu
def test_many_sizes_do_not_grow_the_site_table_and_messages_name_the_calls_size():
    x = tp.randn(400, 3).cuda()
    i = tp.tensor([0]).cuda()
    tp.index_select(x, 0, i)
    before = tp.cuda._status_site_count()
    for n in range(1, 400):
        tp.index_select(x[:n].contiguous(), 0, i)
        tp.gather(x[:n].contiguous(), 0, tp.zeros(1, 3, dtype=tp.int64).cuda())
    tp.cuda.synchronize()
    assert tp.cuda._status_site_count() <= before + 1  # gather along dim 0: one more site, whatever the sizes
    with _sync_checks(True):
        for n, bad in ((37, 40), (123, 200)):
            with pytest.raises(IndexError,
                               match=f"index_select: index {bad} is out of bounds for dimension 0 with size {n}"):
                tp.index_select(x[:n].contiguous(), 0, tp.tensor([1, bad]).cuda())
    # asynchronously too: the size comes back with the status word
    tp.index_select(x[:55].contiguous(), 0, tp.tensor([60]).cuda())
    with pytest.raises(RuntimeError, match="index_select: index 60 is out of bounds for dimension 0 with size 55"):
        tp.cuda.synchronize()
    assert tp.cuda._status_site_count() <= before + 1


@gpu
def test_a_graph_region_captured_in_the_other_mode_is_captured_again():
    # reduce-overhead records index_add's launches (an extern call): atomic ones
    # before the switch, so the graph must be recorded again with the sorted ones.
    i, v, x = _dups(4096, 7).cuda(), _values(4096, 33).cuda(), _values(7, 33, seed=2).cuda()
    f = tp.compile(lambda x, i, v: tp.index_add(x, 0, i, v) * 2.0, mode="reduce-overhead")
    want = tp.index_add(x.cpu(), 0, i.cpu(), v.cpu()) * 2.0
    with _deterministic(False):
        for _ in range(3):
            f(x, i, v)  # warm-up, capture, replay
    before = tp.cuda._graph_region_stats()
    with _deterministic(True):
        for _ in range(3):
            _same_bits(f(x, i, v), want)
    after = tp.cuda._graph_region_stats()
    assert after["captures"] - before["captures"] == 1 and after["replays"] - before["replays"] >= 2
