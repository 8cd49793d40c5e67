"""Tensor identity and version counters as PyTorch users rely on them, side by side with
PyTorch: `.data` has a version counter of its own (writes through it do not invalidate
what autograd saved) while `detach()` shares it; `.grad` is the same Python object while
it is the same tensor (in-place accumulation, `p.grad = g`, zero_grad(set_to_none=False));
and the training-loop idioms around parameters and gradients."""

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")

LIBS = [tp, torch]


def _np(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _both(fn):
    """fn(lib) for TensorPlay and PyTorch; each result is ("ok", value) or ("raise", message)."""
    out = []
    for lib in LIBS:
        try:
            out.append(("ok", fn(lib)))
        except RuntimeError as e:
            out.append(("raise", str(e)))
    return out


def _same_values(a, b):
    assert a[0] == b[0] == "ok", (a, b)
    for x, y in zip(a[1], b[1]):
        np.testing.assert_allclose(x, y, rtol=1e-6)


# ---------------------------------------------------------------- .data vs detach()

@pytest.mark.parametrize("write", ["mul_", "copy_", "setitem", "view_mul_", "add_alpha"])
def test_write_through_data_after_forward_does_not_raise_and_uses_new_values(write):
    def run(lib):
        p = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = (p.sin() * p).sum()  # saves p
        d = p.data
        if write == "mul_":
            d.mul_(0.5)
        elif write == "copy_":
            d.copy_(lib.tensor([0.5, -1.0, 4.0]))
        elif write == "setitem":
            d[0] = 5.0
        elif write == "view_mul_":
            d[:2].mul_(0.0)
        else:
            d.add_(lib.ones(3), alpha=-0.1)
        y.backward()
        return [_np(p.grad), _np(p)]
    ours, theirs = _both(run)
    _same_values(ours, theirs)


def test_data_has_its_own_version_counter_and_detach_shares_it():
    def run(lib):
        p = lib.tensor([1.0, 2.0], requires_grad=True)
        d = p.data
        d.add_(1)
        after_data = (p._version, d._version)
        e = p.detach()
        e.add_(1)
        fresh = p.data
        return [after_data, (p._version, e._version, d._version), fresh._version, p.data is p.data]
    ours, theirs = _both(run)
    assert ours == theirs == ("ok", [(0, 1), (1, 1, 1), 0, False])


@pytest.mark.parametrize("how", ["add_", "zero_", "view"])
def test_write_through_detach_after_forward_raises(how):
    def run(lib):
        p = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = (p * p).sum()
        e = p.detach()
        if how == "add_":
            e.add_(1)
        elif how == "zero_":
            e.zero_()
        else:
            e[1:].mul_(2)
        y.backward()
        return [_np(p.grad)]
    ours, theirs = _both(run)
    assert theirs[0] == "raise" and "inplace" in theirs[1]
    assert ours[0] == "raise" and "modified by an inplace operation" in ours[1]


def test_detach_of_data_shares_the_data_counter_not_the_parameter_one():
    p = tp.tensor([1.0, 2.0], requires_grad=True)
    y = (p * p).sum()
    d = p.data
    e = d.detach()
    e.mul_(3)  # reaches p's memory, but not p's counter
    assert (p._version, d._version, e._version) == (0, 1, 1)
    y.backward()
    np.testing.assert_allclose(_np(p.grad), [6.0, 12.0])


def test_data_assignment_keeps_the_version_count():
    def run(lib):
        p = lib.nn.Parameter(lib.ones(3))
        with lib.no_grad():
            p.mul_(2)
        v = p._version
        src = lib.zeros(2)
        p.data = src
        same = p._version == v
        src.add_(1)  # a later write to the source is not a write to p for autograd
        return [same, p._version == v, _np(p)]
    ours, theirs = _both(run)
    assert ours[0] == theirs[0] == "ok"
    assert ours[1][:2] == theirs[1][:2] == [True, True]
    np.testing.assert_allclose(ours[1][2], theirs[1][2])


def test_manual_sgd_through_data_matches_torch():
    def run(lib):
        w = lib.nn.Parameter(lib.tensor([[1.0, 2.0], [3.0, 4.0]]))
        x = lib.tensor([[1.0, -1.0], [0.5, 2.0]])
        for _ in range(4):
            loss = (x @ w).tanh().pow(2).sum()
            w.grad = None
            loss.backward()
            w.data.add_(w.grad, alpha=-0.1)
        return [_np(w)]
    ours, theirs = _both(run)
    _same_values(ours, theirs)


def test_data_write_between_forward_and_backward_in_a_training_step():
    """The pattern that used to raise: weight decay through .data after the forward."""
    def run(lib):
        lin = lib.nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]))
            lin.bias.copy_(lib.tensor([0.01, -0.02]))
        x = lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
        loss = lin(x).tanh().sum()
        for p in lin.parameters():
            p.data.mul_(0.9)
        loss.backward()
        return [_np(lin.weight.grad), _np(lin.bias.grad), _np(lin.weight)]
    ours, theirs = _both(run)
    _same_values(ours, theirs)


# ---------------------------------------------------------------- .grad identity

def test_grad_is_the_same_object_and_accumulates_in_place():
    def run(lib):
        p = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        (p * 2).sum().backward()
        g = p.grad
        r = [p.grad is p.grad, p.grad is g, id(p.grad) == id(g)]
        (p * 3).sum().backward()
        r += [p.grad is g, _np(g).tolist()]
        g.zero_()
        r += [_np(p.grad).tolist()]
        return r
    ours, theirs = _both(run)
    assert ours == theirs
    assert ours[1] == [True, True, True, True, [5.0, 5.0, 5.0], [0.0, 0.0, 0.0]]


def test_assigned_grad_is_returned_and_accumulated_into():
    def run(lib):
        p = lib.nn.Parameter(lib.ones(2, 3))
        g = lib.zeros(3, 2).t()  # non-contiguous: accumulation keeps it
        p.grad = g
        r = [p.grad is g]
        (p * 2).sum().backward()
        r += [p.grad is g, _np(g).tolist()]
        p.grad = None
        r += [p.grad is None]
        return r
    ours, theirs = _both(run)
    assert ours == theirs
    assert ours[1][:2] == [True, True]


def test_grad_object_changes_when_the_gradient_is_replaced():
    def run(lib):
        p = lib.tensor([1.0, 2.0], requires_grad=True)
        (p * p).sum().backward(create_graph=True)
        g = p.grad
        (p * p).sum().backward(create_graph=True)  # out of place: a new tensor
        r = [p.grad is g, _np(g).tolist(), _np(p.grad).tolist(), p.grad is p.grad]
        return r
    ours, theirs = _both(run)
    assert ours == theirs


def test_retained_grad_identity_across_two_backwards():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.retain_grad()
        z = (y * y).sum()
        z.backward(retain_graph=True)
        g = y.grad
        r = [y.grad is g, _np(g).tolist()]
        z.backward()
        r += [y.grad is g, _np(y.grad).tolist(), _np(g).tolist(), y.grad is y.grad]
        return r
    ours, theirs = _both(run)
    assert ours == theirs


@pytest.mark.parametrize("owner", ["optimizer", "module"])
def test_zero_grad_without_set_to_none_keeps_the_grad_object(owner):
    def run(lib):
        m = lib.nn.Linear(2, 1)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        zero = opt.zero_grad if owner == "optimizer" else m.zero_grad
        x = lib.ones(1, 2)
        m(x).sum().backward()
        g = m.weight.grad
        zero(set_to_none=False)
        r = [m.weight.grad is g, _np(g).tolist()]
        m(x).sum().backward()
        r += [m.weight.grad is g, _np(m.weight.grad).tolist()]
        zero()
        r += [m.weight.grad is None]
        return r
    ours, theirs = _both(run)
    assert ours == theirs
    assert ours[1][0] and ours[1][2]


def test_zero_grad_without_set_to_none_cuts_create_graph_history():
    def run(lib):
        p = lib.nn.Parameter(lib.tensor([1.0, 2.0]))
        opt = lib.optim.SGD([p], lr=0.1)
        (p * p).sum().backward(create_graph=True)
        g = p.grad
        opt.zero_grad(set_to_none=False)
        return [p.grad is g, g.requires_grad, g.grad_fn is None, _np(g).tolist()]
    ours, theirs = _both(run)
    assert ours == theirs


def test_grad_detach_then_zero_keeps_identity():
    def run(lib):
        p = lib.tensor([1.0, 2.0], requires_grad=True)
        (p * p).sum().backward(create_graph=True)
        g = p.grad
        p.grad.detach_()
        p.grad.zero_()
        return [p.grad is g, p.grad.requires_grad, _np(p.grad).tolist()]
    ours, theirs = _both(run)
    assert ours == theirs


def test_grad_assignment_of_a_non_tensor_is_a_type_error():
    p = tp.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="Tensor or None"):
        p.grad = 3


def test_grad_keyed_by_id_in_a_dict():
    """Gradient-statistics code keys dicts by id(p.grad) between steps."""
    p = tp.tensor([1.0, 2.0], requires_grad=True)
    (p * 2).sum().backward()
    stats = {id(p.grad): "step0"}
    (p * 2).sum().backward()
    assert id(p.grad) in stats


def test_the_cached_grad_object_is_let_go_when_the_gradient_changes():
    """The object .grad returns is kept only while it is .grad (no old gradient kept alive)."""
    import sys
    p = tp.tensor([1.0, 2.0], requires_grad=True)
    (p * 2).sum().backward()
    g = p.grad
    held = sys.getrefcount(g)
    p.grad = None
    assert sys.getrefcount(g) == held - 1
    (p * p).sum().backward(create_graph=True)
    g = p.grad
    held = sys.getrefcount(g)
    (p * p).sum().backward(create_graph=True)  # replaced out of place by the engine
    assert sys.getrefcount(g) == held - 1
    assert p.grad is not g


# ---------------------------------------------------------------- training-loop idioms

def test_training_loop_idioms_match_torch():
    def run(lib):
        rng = np.random.default_rng(0)
        a = lib.nn.Parameter(lib.tensor(rng.standard_normal((3, 3)).astype(np.float32)))
        b = lib.nn.Parameter(lib.tensor(rng.standard_normal(3).astype(np.float32)))
        x = lib.tensor(rng.standard_normal((4, 3)).astype(np.float32))
        out = []
        for step in range(4):
            loss = ((x @ a + b).tanh() ** 2).mean()
            loss.backward()
            with lib.no_grad():
                a -= 0.1 * a.grad
                b.sub_(0.1 * b.grad)
            if step == 1:
                a.grad.data.zero_()
                b.grad = None
            else:
                a.grad.zero_()
                b.grad.detach_()
                b.grad.zero_()
            out.append(_np(a).copy())
            out.append(_np(b).copy())
        return out
    ours, theirs = _both(run)
    _same_values(ours, theirs)


def test_requires_grad_off_mid_training_keeps_the_old_grad():
    def run(lib):
        a = lib.nn.Parameter(lib.ones(2))
        b = lib.nn.Parameter(lib.tensor([2.0, 3.0]))
        (a * b).sum().backward()
        a.requires_grad_(False)
        (a * b * 2).sum().backward()
        return [_np(a.grad), _np(b.grad)]
    ours, theirs = _both(run)
    _same_values(ours, theirs)


def test_weight_tying_accumulates_both_uses():
    def run(lib):
        emb = lib.nn.Embedding(4, 3)
        lin = lib.nn.Linear(3, 4, bias=False)
        lin.weight = emb.weight
        with lib.no_grad():
            emb.weight.copy_(lib.tensor((np.arange(12.0).reshape(4, 3) / 10).astype(np.float32)))
        out = lin(emb(lib.tensor([0, 2, 2]))).pow(2).sum()
        out.backward()
        return [_np(emb.weight.grad), _np(lin.weight.grad)]
    ours, theirs = _both(run)
    _same_values(ours, theirs)


def test_hook_on_parameter_replaces_or_edits_the_gradient():
    def run(lib):
        p = lib.nn.Parameter(lib.tensor([1.0, 2.0]))
        q = lib.nn.Parameter(lib.tensor([1.0, 2.0]))
        p.register_hook(lambda g: g * 10)

        def edit(g):
            g.mul_(3)  # returns None: the edited gradient goes on
        q.register_hook(edit)
        (p * 3 + q * p).sum().backward()
        return [_np(p.grad), _np(q.grad)]
    ours, theirs = _both(run)
    _same_values(ours, theirs)


def test_leaf_and_view_of_leaf_in_place_raise_in_grad_mode():
    for lib in LIBS:
        p = lib.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf"):
            p.add_(1)
        with pytest.raises(RuntimeError, match="leaf"):
            p[:1].mul_(2)


def test_view_of_leaf_written_under_no_grad_after_forward_raises_at_backward():
    def run(lib):
        p = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        y = (p * p).sum()
        with lib.no_grad():
            p[:2].mul_(2)
        y.backward()
        return [_np(p.grad)]
    ours, theirs = _both(run)
    assert ours[0] == theirs[0] == "raise"


@pytest.mark.parametrize("case", ["leaf_view", "view_of_view", "copy_", "other_requires_grad"])
def test_view_made_under_no_grad_written_in_grad_mode_raises(case):
    def run(lib):
        p = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=case != "other_requires_grad")
        with lib.no_grad():
            v = p[:2] if case != "copy_" else p.view(4)
        if case == "view_of_view":
            v = v[1:]
        if case == "copy_":
            v.copy_(lib.zeros(4))
        elif case == "other_requires_grad":
            v.mul_(lib.ones(2, requires_grad=True))
        else:
            v.mul_(2)
        return [_np(p)]
    ours, theirs = _both(run)
    assert theirs[0] == "raise"
    assert ours[0] == "raise" and "view made under no_grad" in ours[1], ours


@pytest.mark.parametrize("case", ["no_grad_inputs", "write_under_no_grad", "detached", "grad_mode_view"])
def test_views_and_writes_that_are_not_ambiguous_do_not_raise(case):
    def run(lib):
        p = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=case != "no_grad_inputs")
        if case == "grad_mode_view":
            q = p * 1
            v = q[:2]
            v.mul_(2)
            q.sum().backward()
            return [_np(q), _np(p.grad)]
        with lib.no_grad():
            v = p[:2]
            if case == "write_under_no_grad":
                v.mul_(2)
        if case == "detached":
            v.detach().add_(1)
        elif case == "no_grad_inputs":
            v.add_(1)
        return [_np(p)]
    ours, theirs = _both(run)
    _same_values(ours, theirs)


# ---------------------------------------------------------------- compiled regions

def _compiled_loss(p, x):
    return (p.sin() * p * x).sum()


@pytest.mark.parametrize("backend", ["aot_eager", "stax"])
def test_compiled_region_follows_the_same_version_rules(backend):
    """The compiled region's saved-value check uses the autograd counter too: a write
    through .data between forward and backward is allowed (the compiled backward then
    reads the new values, as torch.compile's does; eager mixes old saved activations
    with the new primal, so the two gradients may differ), a write through detach() raises."""
    f = tp.compile(_compiled_loss, backend=backend)
    p = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = f(p, tp.tensor([0.5, -1.0, 2.0]))
    p.data.mul_(0.5)
    y.backward()
    assert p.grad is not None and np.isfinite(_np(p.grad)).all()
    q = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = f(q, tp.tensor([0.5, -1.0, 2.0]))
    q.detach().mul_(0.5)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


# ---------------------------------------------------------------- objects handed back

def test_post_accumulate_hook_gets_the_parameter_itself():
    """Optimizer-in-backward: a dict of per-parameter optimizers keyed by the parameter."""
    def run(lib):
        lin = lib.nn.Linear(2, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[1.0, 2.0], [3.0, 4.0]]))
            lin.bias.zero_()
        opts = {p: lib.optim.SGD([p], lr=0.1) for p in lin.parameters()}
        seen = []

        def step(p):
            seen.append(type(p).__name__)
            opts[p].step()
            opts[p].zero_grad()
        for p in lin.parameters():
            p.register_post_accumulate_grad_hook(step)
        lin(lib.tensor([[1.0, -1.0]])).pow(2).sum().backward()
        return [seen, _np(lin.weight).tolist(), lin.weight.grad is None]
    ours, theirs = _both(run)
    assert ours == theirs
    assert ours[1][0] == ["Parameter", "Parameter"]


def test_tensors_are_weakly_referenceable():
    import gc
    import weakref
    t = tp.ones(3)
    r = weakref.ref(t)
    assert r() is t
    cache = weakref.WeakValueDictionary({"a": t})
    del t
    gc.collect()
    assert r() is None and "a" not in cache


def test_module_dtype_move_keeps_parameter_and_grad_objects():
    def run(lib):
        m = lib.nn.Linear(2, 2)
        m(lib.ones(1, 2)).sum().backward()
        w, g = m.weight, m.weight.grad
        m.double()
        return [m.weight is w, m.weight.grad is g, str(g.dtype).split(".")[-1], _np(g).tolist()]
    ours, theirs = _both(run)
    assert ours == theirs
    assert ours[1][:2] == [True, True]


def test_methods_that_give_back_self_return_the_same_object():
    def run(lib):
        p = lib.nn.Parameter(lib.ones(3))
        q = lib.nn.Parameter(lib.ones(3)).requires_grad_(False)  # stays a Parameter
        x = lib.ones(3)
        return [p.requires_grad_() is p, type(q).__name__, q.requires_grad, p.detach_() is p,
                x.contiguous() is x, x.float() is x, x.to(lib.float32) is x, x.view(3) is x,
                x.add_(1) is x, x.double() is x]
    ours, theirs = _both(run)
    assert ours == theirs
    assert ours[1][:2] == [True, "Parameter"]
