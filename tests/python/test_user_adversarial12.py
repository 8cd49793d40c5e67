"""Outside testing, twelfth round: a user's training code under tp.compile
(recurrent and attention models, GEMMs over permuted intermediates, warnings
filters) compared with eager TensorPlay."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import tensorplay as tp

nn = tp.nn


def _no_fallback(f, *args):
    # A fallback to eager says so in a UserWarning (recorded, not turned into an
    # error: the error filter is itself under test below).
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = f(*args)
    fallbacks = [str(w.message) for w in seen if "running eagerly" in str(w.message)]
    assert not fallbacks, fallbacks
    return out


# ------------------- GEMM operands that are permutations of computed values

def test_a_gemm_operand_permuted_without_a_unit_stride_compiles():
    # tanh(x).permute(2, 0, 1) leaves no unit stride in the last two dims, so
    # BLAS cannot read it in place; the lowering wrote the tanh in its source
    # order first and then a contiguous copy, and the first buffer, read by
    # nobody, got no slot: the unit did not compile and the call ran eagerly.
    tp.manual_seed(0)
    w = tp.randn(3, 5)

    def f(x):
        return tp.tanh(x).permute(2, 0, 1) @ w

    x = tp.randn(2, 3, 4)
    y = _no_fallback(tp.compile(f), x)
    np.testing.assert_allclose(y.numpy(), f(x).numpy(), rtol=1e-5, atol=1e-6)


def test_a_batch_first_rnn_feeding_a_linear_over_changing_batch_and_length():
    # The recurrent layers stack their steps time-major and permute to batch
    # first; with a symbolic batch the permuted stack is not BLAS-readable and
    # hit the same unread buffer (a bidirectional LSTM language model fell back
    # to eager once its batch size changed).
    tp.manual_seed(0)
    rnn = nn.LSTM(8, 6, batch_first=True, bidirectional=True)
    head = nn.Linear(12, 5)

    def f(x):
        return head(rnn(x)[0])

    cf = tp.compile(f)
    for b, n in [(3, 5), (2, 7), (4, 7), (1, 4)]:
        x = tp.randn(b, n, 8, requires_grad=True)
        y = _no_fallback(cf, x)
        ye = f(x)
        np.testing.assert_allclose(y.detach().numpy(), ye.detach().numpy(), rtol=1e-5, atol=1e-6)
        g, = tp.autograd.grad(y.pow(2).sum(), [x])
        ge, = tp.autograd.grad(ye.pow(2).sum(), [x])
        np.testing.assert_allclose(g.numpy(), ge.numpy(), rtol=1e-4, atol=1e-5)


# ------------------- warnings from C++ under an "error" filter

def test_a_fallback_warning_raises_under_the_error_filter(tmp_path):
    # PyErr_WarnEx fails when a filter turns the warning into an error; the
    # binding cleared that error, so `python -W error` (or pytest's
    # filterwarnings = error) silently ran the fallback the user wanted to stop at.
    # A compiler that always fails forces the fallback (its own process: the
    # compiler is found once per process).
    cxx = tmp_path / "failing-cxx"
    cxx.write_text("#!/bin/sh\nexit 1\n")
    cxx.chmod(0o755)
    code = textwrap.dedent("""
        import warnings
        import tensorplay as tp
        f = tp.compile(lambda x: tp.sin(x) * 2.5)
        x = tp.randn(3)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                f(x)
                print("not raised")
            except UserWarning as e:
                print("raised:", "running eagerly" in str(e))
        print("later call:", (f(x) - tp.sin(x) * 2.5).abs().max().item() == 0)
    """)
    env = dict(os.environ, CXX=str(cxx), TP_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "raised: True" in out.stdout, out.stdout + out.stderr
    assert "later call: True" in out.stdout, out.stdout + out.stderr


# ------------------- state reached through a functools.partial, __slots__ or a deque

def test_a_compiled_partial_over_a_model_follows_eval_and_keeps_batch_norm_statistics():
    # tp.compile(functools.partial(loss_fn, model)): the partial's bound model was
    # never searched (partial.__call__ is a C slot and its arguments are not in a
    # __dict__), so its running statistics' writes were dropped and model.eval()
    # kept running the train-mode program.
    import functools

    F = tp.nn.functional
    rng = np.random.default_rng(0)
    data = [(tp.tensor(rng.standard_normal((4, 6)).astype(np.float32)), tp.tensor(rng.integers(0, 3, 4)))
            for _ in range(6)]

    def loss_fn(model, x, y, smoothing):
        return F.cross_entropy(model(x), y, label_smoothing=smoothing)

    def run(compiled):
        tp.manual_seed(0)
        m = nn.Sequential(nn.Linear(6, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
        opt = tp.optim.SGD(m.parameters(), lr=0.1)
        f = functools.partial(loss_fn, m, smoothing=0.1)
        f = tp.compile(f) if compiled else f
        losses = []
        for i, (x, y) in enumerate(data):
            m.train(i < 4)
            opt.zero_grad()
            loss = f(x, y)
            if m.training:
                loss.backward()
                opt.step()
            losses.append(loss.item())
        return losses, [b.numpy().copy() for b in m.buffers()]

    (le, be), (lc, bc) = run(False), run(True)
    np.testing.assert_allclose(lc, le, rtol=1e-5, atol=1e-6)
    assert int(bc[2]) == int(be[2]) == 4  # num_batches_tracked: four training steps
    for a, b in zip(bc[:2], be[:2]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_writes_into_tensors_held_in_slots_or_a_deque_persist_and_rebinding_is_seen():
    # Such a tensor had no owner path: it was re-read as the capture's object and,
    # with no owner, its in-place writes were dropped, even at the first call.
    import collections

    class State:
        __slots__ = ("buf", "scale")

    s = State()
    s.buf = tp.zeros(3)
    s.scale = tp.ones(3)
    dq = collections.deque([tp.zeros(3)])

    def f(x):
        s.buf.add_(x)
        dq[0].mul_(0.5).add_(x)
        return x * s.scale

    cf = tp.compile(f)
    for _ in range(3):
        cf(tp.ones(3))
    np.testing.assert_allclose(s.buf.numpy(), [3.0] * 3)
    np.testing.assert_allclose(dq[0].numpy(), [1.75] * 3)
    s.scale = tp.full((3,), 5.0)  # another tensor bound to the slot
    np.testing.assert_allclose(cf(tp.ones(3)).numpy(), [5.0] * 3)



def test_a_compiled_callable_object_with_slots_follows_its_models_eval():
    # The modules a compiled callable reaches were searched through __dict__
    # only: a step object with __slots__ hid its model, so model.eval() kept the
    # train-mode program (dropout on, batch statistics) running.
    class Step:
        __slots__ = ("model",)

        def __init__(self, model):
            self.model = model

        def __call__(self, x):
            return self.model(x).sum()

    tp.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.BatchNorm1d(4))
    step = Step(m)
    cstep = tp.compile(step)
    x = tp.randn(5, 4)
    cstep(x)
    mean_after_train = m[2].running_mean.numpy().copy()
    assert np.abs(mean_after_train).max() > 0
    m.eval()
    np.testing.assert_allclose(cstep(x).item(), step(x).item(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m[2].running_mean.numpy(), mean_after_train)  # eval: no update


def test_a_model_reached_through_a_weak_reference_keeps_its_statistics_and_follows_eval():
    # `ref = weakref.ref(model)` (a callback or trainer that must not keep the
    # model alive) then `ref()(x)` in the compiled function: the search did not
    # follow the reference, so the batch-norm statistics' writes were dropped and
    # model.eval() kept the train-mode program.
    import weakref

    tp.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    ref = weakref.ref(m)

    def f(x):
        return ref()(x).sum()

    cf = tp.compile(f)
    x = tp.randn(5, 4)
    cf(x)
    assert int(m[1].num_batches_tracked) == 1
    assert np.abs(m[1].running_mean.numpy()).max() > 0
    m.eval()
    np.testing.assert_allclose(cf(x).item(), f(x).item(), rtol=1e-5, atol=1e-5)
    assert int(m[1].num_batches_tracked) == 1


@pytest.mark.parametrize("kind", ["mappingproxy", "chainmap"])
def test_writes_into_a_tensor_held_by_a_mapping_that_is_no_dict_persist(kind):
    # The free-tensor search walked dicts but no other Mapping: a tensor held only
    # by a MappingProxyType or a ChainMap had no owner, so its writes were dropped.
    import collections
    import types

    acc = tp.zeros(3)
    cache = types.MappingProxyType({"acc": acc}) if kind == "mappingproxy" else \
        collections.ChainMap({}, {"acc": acc})

    def f(x):
        cache["acc"].add_(x)
        return x * 2

    cf = tp.compile(f)
    cf(tp.ones(3))
    cf(tp.ones(3))
    np.testing.assert_allclose(acc.numpy(), [2.0] * 3)

# ------------------- verified behaviours no other test covered

def test_compiled_backward_accumulates_into_gradients_that_are_views_of_one_bucket():
    # A data-parallel style bucket: each p.grad a view into one flat buffer. The
    # compiled backward must accumulate into those very objects, as eager does.
    def run(compiled):
        tp.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
        f = tp.compile(m) if compiled else m
        ps = list(m.parameters())
        flat = tp.zeros(sum(p.numel() for p in ps))
        off = 0
        for p in ps:
            p.grad = flat[off:off + p.numel()].view_as(p)
            off += p.numel()
        grads = [p.grad for p in ps]
        tp.manual_seed(1)
        x = tp.randn(5, 4)
        for _ in range(2):
            f(x).pow(2).sum().backward()
        assert all(p.grad is g for p, g in zip(ps, grads))
        return flat.numpy().copy()

    eager, compiled = run(False), run(True)
    assert np.abs(eager).max() > 0
    np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)


def test_optimizer_in_backward_through_post_accumulate_grad_hooks_with_a_compiled_model():
    def run(compiled):
        tp.manual_seed(0)
        m = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))
        f = tp.compile(m) if compiled else m

        def update(p):
            p.data.add_(p.grad, alpha=-0.1)
            p.grad = None

        for p in m.parameters():
            p.register_post_accumulate_grad_hook(update)
        tp.manual_seed(1)
        for _ in range(4):
            f(tp.randn(4, 6)).pow(2).sum().backward()
        assert all(p.grad is None for p in m.parameters())
        return [p.detach().numpy().copy() for p in m.parameters()]

    for a, b in zip(run(False), run(True)):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_parameter_and_module_containers_changed_between_compiled_training_steps():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.pl = nn.ParameterList([nn.Parameter(tp.randn(4, 4) * 0.3) for _ in range(2)])
            self.pd = nn.ParameterDict({"a": nn.Parameter(tp.randn(4)), "b": nn.Parameter(tp.randn(4))})
            self.md = nn.ModuleDict({"x": nn.Linear(4, 4), "y": nn.Linear(4, 4)})
            self.order = ["x", "y"]

        def forward(self, x):
            for w in self.pl:
                x = (x @ w).tanh()
            for k in self.order:
                x = self.md[k](x)
            return x * self.pd["a"] + self.pd["b"]

    def run(compiled):
        tp.manual_seed(0)
        m = Net()
        f = tp.compile(m) if compiled else m
        x = tp.randn(3, 4)
        losses = []
        for i in range(6):
            if i == 2:
                m.pl.append(nn.Parameter(tp.eye(4) * 0.5))
            if i == 3:
                m.pd["a"] = nn.Parameter(tp.ones(4) * 2)
            if i == 4:
                m.order = ["y", "x"]
            if i == 5:
                m.md["x"] = nn.Identity()
            for p in m.parameters():
                p.grad = None
            loss = f(x).pow(2).sum()
            loss.backward()
            losses.append(loss.item())
            with tp.no_grad():
                for p in m.parameters():
                    p -= 0.05 * p.grad
        return losses, [p.detach().numpy().copy() for p in m.parameters()]

    (le, pe), (lc, pc) = run(False), run(True)
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    assert len(pc) == len(pe)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
