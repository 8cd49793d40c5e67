"""Dynamic shapes in training (issue 11, item 5): a compiled function whose
inputs require grad goes through the AOT layer; its joint forward+backward
graph is traced with the capture's symbolic sizes, partitioned once, and the
forward and backward are each one Stax artifact that reads its sizes per call.
Tested as a user would: training steps at many batch sizes / sequence lengths,
the loss and every parameter's .grad compared with eager's at every size, and
the number of versions (num_specializations) and AOT partitions
(metrics.aot_regions) counted. strict_native=True makes a region Stax cannot
generate an error instead of a silent eager fallback."""
import math
import os

os.environ.setdefault("TP_SYMBOLIC_STRICT", "1")  # a wrong shape rule is an error here, not a specialization

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tensorplay as tp  # noqa: E402
import tensorplay.nn as nn  # noqa: E402
import tensorplay.nn.functional as F  # noqa: E402


def close(a, b, tol=1e-4):
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)


def check_step(cf, fn, params, inputs, tol=1e-4):
    """One training step compiled and eager: same loss, same .grad for every parameter."""
    for p in params:
        p.grad = None
    loss = cf(*inputs)
    loss.backward()
    got = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    ref = fn(*inputs)
    ref.backward()
    close(loss.detach(), ref.detach(), tol)
    for p, g in zip(params, got):
        assert p.grad is not None
        close(g, p.grad, tol)


def mlp():
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 5))

    def step(x, y):
        return F.cross_entropy(model(x), y)

    return model, step


def batch(n, seed):
    tp.manual_seed(seed)
    return tp.randn(n, 12), tp.randint(0, 5, (n,))


BATCHES = [32, 48, 17, 64, 2, 3, 5, 7, 13, 31, 97, 257]


def test_mlp_varying_batch_dynamic_true_one_version_one_partition():
    tp.compiler.reset()
    model, step = mlp()
    cf = tp.compile(step, dynamic=True, strict_native=True)
    for i, n in enumerate(BATCHES):
        check_step(cf, step, list(model.parameters()), batch(n, i))
    assert cf.num_specializations == 1
    assert tp.compiler.metrics.aot_regions == 1  # one joint graph, one partition
    assert tp.compiler.metrics.compile_count == 2  # one forward and one backward artifact
    assert tp.compiler.metrics.fallback_count == 0


def test_mlp_varying_batch_automatic_dynamic_at_most_two_versions():
    tp.compiler.reset()
    model, step = mlp()
    cf = tp.compile(step, strict_native=True)  # dynamic=None: the default
    for i, n in enumerate(BATCHES):
        check_step(cf, step, list(model.parameters()), batch(n, i))
    assert cf.num_specializations == 2  # 32 static, then one symbolic version for the rest
    assert tp.compiler.metrics.aot_regions == 2


def test_mlp_static_training_still_compiles_one_version_per_size():
    model, step = mlp()
    cf = tp.compile(step, dynamic=False)
    for i, n in enumerate([8, 9, 10]):
        check_step(cf, step, list(model.parameters()), batch(n, i))
    assert cf.num_specializations == 3


def test_mark_dynamic_applies_to_training():
    model, step = mlp()
    cf = tp.compile(step, strict_native=True)
    for i, n in enumerate([40, 11, 23]):
        x, y = batch(n, i)
        tp.mark_dynamic(x, 0)
        tp.mark_dynamic(y, 0)
        check_step(cf, step, list(model.parameters()), (x, y))
    assert cf.num_specializations == 1


def test_size_one_and_two_and_large_batches():
    # 1 is never symbolic (0/1 specialization): its own static version, correct.
    model, step = mlp()
    cf = tp.compile(step, dynamic=True, strict_native=True)
    for i, n in enumerate([2, 1, 1031, 1, 2, 4099]):
        check_step(cf, step, list(model.parameters()), batch(n, i))
    assert cf.num_specializations == 2


D = 16


class Block(nn.Module):
    """A small pre-LN attention block: Linear, layer_norm, softmax attention."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.o = nn.Linear(D, D)
        self.ff = nn.Linear(D, D)

    def forward(self, x):
        h = self.ln(x)
        q, k, v = self.qkv(h).split(D, dim=-1)
        a = ((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))).softmax(-1)
        x = x + self.o(a @ v)
        return x + F.gelu(self.ff(x))


def test_attention_block_varying_sequence_length_one_version():
    tp.compiler.reset()
    tp.manual_seed(1)
    blk = Block()

    def step(x):
        return blk(x).pow(2).mean()

    cf = tp.compile(step, dynamic=True, strict_native=True)
    for i, t in enumerate([9, 12, 5, 17, 2, 33, 64]):
        tp.manual_seed(100 + i)
        check_step(cf, step, list(blk.parameters()), (tp.randn(3, t, D),))
    assert cf.num_specializations == 1
    assert tp.compiler.metrics.aot_regions == 1


W_IN, W_OUT = 6, 10


@pytest.mark.parametrize(
    "name,fn",
    [
        ("mean", lambda x, w, b: ((x @ w + b).relu()).mean()),
        ("sum_dim", lambda x, w, b: (x @ w + b).tanh().sum(0).pow(2).sum()),
        ("mean_dim", lambda x, w, b: (x @ w + b).sigmoid().mean(0).pow(2).sum() + (x @ w).mean(1).sum()),
        ("reshape_transpose", lambda x, w, b: (x.reshape(-1, W_IN) @ w + b).reshape(2, -1, W_OUT).transpose(0, 1).sin().sum()),
        ("broadcast_bias", lambda x, w, b: ((x @ w) * b + b).exp().mean()),
        ("mse", lambda x, w, b: F.mse_loss(x @ w + b, x.sum(1, keepdim=True).expand(-1, W_OUT))),
        ("transpose_sum", lambda x, w, b: ((x @ w + b).t() @ x).pow(2).sum()),
    ],
)
def test_views_and_reductions_over_symbolic_dims_in_the_backward(name, fn):
    tp.compiler.reset()
    tp.manual_seed(2)
    w = tp.randn(W_IN, W_OUT, requires_grad=True)
    b = tp.randn(W_OUT, requires_grad=True)
    cf = tp.compile(fn, dynamic=True, strict_native=True)
    for i, n in enumerate([8, 2, 3, 7, 13, 31, 128, 509]):
        tp.manual_seed(10 + i)
        shape = (2, n, W_IN) if name == "reshape_transpose" else (n, W_IN)
        x = tp.randn(*shape)
        check_step(lambda x: cf(x, w, b), lambda x: fn(x, w, b), [w, b], (x,))
    assert cf.num_specializations == 1, name
    assert tp.compiler.metrics.aot_regions == 1, name


def test_input_gradient_has_the_call_size():
    f = lambda x, w: (x @ w).relu().sum()  # noqa: E731
    cf = tp.compile(f, dynamic=True, strict_native=True)
    w = tp.randn(4, 3, requires_grad=True)
    for n in [5, 9, 2]:
        x = tp.randn(n, 4, requires_grad=True)
        cf(x, w).backward()
        gx = x.grad.clone()
        x.grad = None
        f(x, w).backward()
        close(gx, x.grad)
    assert cf.num_specializations == 1


def test_a_result_without_gradient_gets_zeros_of_the_call_size():
    def f(x, w):
        h = x @ w
        return h.sum(), h * 2  # the second result takes no part in the loss

    cf = tp.compile(f, dynamic=True, strict_native=True)
    w = tp.randn(4, 3, requires_grad=True)
    for n in [6, 11]:
        x = tp.randn(n, 4)
        w.grad = None
        loss, h2 = cf(x, w)
        assert tuple(h2.shape) == (n, 3)
        loss.backward()
        close(w.grad, x.t().sum(1, keepdim=True).expand(4, 3))


def test_guard_failure_in_training_recompiles_with_a_correct_result():
    # reshape(-1, 2 * W) needs an even element count: a guard of the version.
    w = tp.randn(2 * W_IN, 3, requires_grad=True)

    def f(x):
        return (x.reshape(-1, 2 * W_IN) @ w).tanh().sum()

    cf = tp.compile(f, dynamic=True, strict_native=True)
    for n in [8, 12, 30]:
        check_step(cf, f, [w], (tp.randn(n, W_IN),))
    assert cf.num_specializations == 1
    check_step(cf, f, [w], (tp.randn(2, 5, W_IN),))  # another rank: a new version
    assert cf.num_specializations == 2

    def g(x):
        if x.shape[0] > 16:  # a shape branch: the guard x.size(0) > 16
            return (x @ w[:W_IN]).relu().sum()
        return (x @ w[:W_IN]).sigmoid().sum()

    cg = tp.compile(g, dynamic=True, strict_native=True)
    check_step(cg, g, [w], (tp.randn(20, W_IN),))
    check_step(cg, g, [w], (tp.randn(40, W_IN),))
    assert cg.num_specializations == 1
    check_step(cg, g, [w], (tp.randn(5, W_IN),))  # guard fails: recompiled, the other branch
    assert cg.num_specializations == 2
    check_step(cg, g, [w], (tp.randn(9, W_IN),))
    check_step(cg, g, [w], (tp.randn(33, W_IN),))
    assert cg.num_specializations == 2


def test_partition_is_computed_once_across_sizes(monkeypatch, capfd):
    monkeypatch.setenv("TP_LOGS", "aot")
    model, step = mlp()
    cf = tp.compile(step, dynamic=True)
    for i, n in enumerate([16, 9, 40, 3]):
        check_step(cf, step, list(model.parameters()), batch(n, i))
    err = capfd.readouterr().err
    assert err.count("AOT min cut of") == 1
    # The partitioned graphs carry the symbol: sizes read per call.
    assert "symbols: s0=primal_x.size(0)" in err


def test_create_graph_still_raises_with_symbolic_training():
    def region_fn(x, w):
        return (x @ w).sin().sum()

    cf = tp.compile(region_fn, dynamic=True)
    w = tp.randn(3, 2, requires_grad=True)
    for n in [4, 7]:
        y = cf(tp.randn(n, 3), w)
        with pytest.raises(RuntimeError, match=r"double backward \(create_graph=True\).*'region_fn'"):
            tp.autograd.grad(y, w, create_graph=True)
    assert cf.num_specializations == 1


def test_cat_trains_symbolically_one_version(monkeypatch, capfd):
    # cat's derivative slices the gradient at bounds computed from the inputs'
    # sizes (x.size(0)); the formula keeps how it computed them (ops/size_expr.h),
    # so the joint trace slices at s0 and 2 * s0: one version for every size.
    monkeypatch.setenv("TP_LOGS", "recompiles")
    w = tp.randn(4, 4, requires_grad=True)

    def f(x):
        return tp.cat([x @ w, x], 0).pow(2).sum()

    cf = tp.compile(f, dynamic=True, strict_native=True)
    for i, n in enumerate([3, 5, 6, 9]):
        tp.manual_seed(i)
        check_step(cf, f, [w], (tp.randn(n, 4),))
    assert cf.num_specializations == 1
    assert "made static" not in capfd.readouterr().err


def test_a_formula_without_a_symbolic_form_trains_statically_and_correctly(monkeypatch, capfd):
    # A formula that slices at plain ints computed from sizes (here cat's, with
    # its size expressions dropped by a test hook): the joint trace specializes
    # the batch size, and the capture is made static (one version per size),
    # never a wrong gradient.
    monkeypatch.setenv("TP_LOGS", "recompiles")
    tp._C._testing_drop_size_recipes(True)
    try:
        w = tp.randn(4, 4, requires_grad=True)

        def f(x):
            return tp.cat([x @ w, x], 0).pow(2).sum()

        cf = tp.compile(f, dynamic=True)
        for i, n in enumerate([3, 5, 6, 9]):
            tp.manual_seed(i)
            check_step(cf, f, [w], (tp.randn(n, 4),))
    finally:
        tp._C._testing_drop_size_recipes(False)
    assert cf.num_specializations == 4
    err = capfd.readouterr().err
    assert err.count("the training capture is made static: the joint trace specialized every size") == 2
    # After two refusals the function's training captures stay static without the joint trace.
    assert err.count("its joint graph was refused twice before") == 2


def test_aot_eager_backend_trains_symbolically_too():
    model, step = mlp()
    cf = tp.compile(step, backend="aot_eager", dynamic=True)
    for i, n in enumerate([10, 21, 4]):
        check_step(cf, step, list(model.parameters()), batch(n, i))
    assert cf.num_specializations == 1


@pytest.mark.parametrize("budget", [0.5, 0.25, 1000, 0])
def test_activation_memory_budget_trains_symbolically_with_the_plan_of_the_hints(budget):
    # The checkpointing plan is a choice of what to save (the gradients do not
    # depend on it): made once at the hint sizes, it serves every size, and
    # the budget holds at the hints. A chain of 8 tanh layers: binomial
    # checkpointing; the same plan as a static capture at the hint size.
    tp.manual_seed(0)
    ws = [(tp.randn(16, 16) * 0.3).requires_grad_(True) for _ in range(8)]

    def f(x):
        for w in ws:
            x = (x @ w).tanh()
        return x.sum()

    opts = {"activation_memory_budget": budget}
    cf = tp.compile(f, dynamic=True, strict_native=True, options=opts)
    for i, n in enumerate([8, 3, 17, 2, 40]):
        tp.manual_seed(i)
        check_step(cf, f, ws, (tp.randn(n, 16),))
    assert cf.num_specializations == 1
    plan = cf.last_aot["checkpointing"]
    assert plan is not None and plan["steps"] == 9
    static = tp.compile(f, dynamic=False, strict_native=True, options=opts)
    check_step(static, f, ws, (tp.randn(8, 16),))
    assert static.last_aot["checkpointing"] == plan
    limit = budget if isinstance(budget, int) else budget * 8 * 8 * 16 * 4  # 8 states of 8 x 16 floats at the hint
    assert cf.last_aot["saved_bytes"] <= limit


def test_activation_memory_budget_greedy_relaxation_trains_symbolically():
    # Not a chain: the greedy relaxation recomputes a GEMM under the budget.
    tp.manual_seed(1)
    w1, w2 = tp.randn(16, 16, requires_grad=True), tp.randn(16, 16, requires_grad=True)

    def f(x):
        return ((x @ w1).tanh().sin() * (x @ w2).cos()).sum()

    saved = {}
    for budget in [None, 0.5, 0]:
        cf = tp.compile(f, dynamic=True, strict_native=True,
                        options={} if budget is None else {"activation_memory_budget": budget})
        for i, n in enumerate([8, 3, 17, 40]):
            tp.manual_seed(10 + i)
            check_step(cf, f, [w1, w2], (tp.randn(n, 16),), tol=1e-3)
        assert cf.num_specializations == 1
        saved[budget] = cf.last_aot["saved_bytes"]
        if budget is not None:
            assert "matmul" in cf.last_aot["recomputed"]
    assert saved[None] == 2 * 8 * 16 * 4  # both GEMM results at the hint
    assert saved[0.5] <= saved[None] // 2 and saved[0] == 0


def test_transposed_product_of_inputs_with_a_symbolic_inner_dim():
    # A linear layer's weight gradient is (x.t() @ g).t(); the graph pass that
    # rewrites it as g.t() @ x made nodes without symbolic sizes, and Stax then
    # generated the transposing copy at the example sizes (NaN / wrong values at
    # every other size, in inference too).
    f = lambda a, b: (a.t() @ b).t()  # noqa: E731
    cf = tp.compile(f, dynamic=True, strict_native=True)
    for n in [32, 17, 40, 2, 257]:
        a, b = tp.randn(n, 16), tp.randn(n, 4)
        close(cf(a, b), f(a, b))
    assert cf.num_specializations == 1


def test_cross_entropy_with_label_smoothing_is_correct_at_every_size():
    # Its decomposition builds a constant of the input's sizes for the
    # denominator and hands it to nll_loss with the symbolic target. Built at
    # the example's sizes, the capture once ran at another size with the
    # example's [n, C] against the call's [m] target ("nll_loss: expected target
    # of shape [7] ... but got [11]"); then nll_loss's rule fixed the size (a
    # static version per size). The constant now keeps the input's sizes as
    # expressions (ops::full_like_sized): one version, in inference and training.
    tp.manual_seed(3)
    lin = nn.Linear(6, 5)

    def loss(x, y):
        return F.cross_entropy(lin(x), y, label_smoothing=0.1)

    with tp.no_grad():
        cf = tp.compile(loss, dynamic=True, strict_native=True)
        for n in [7, 11, 4, 2]:
            x, y = tp.randn(n, 6), tp.randint(0, 5, (n,))
            close(cf(x, y), loss(x, y))
        assert cf.num_specializations == 1
    ct = tp.compile(loss, dynamic=True, strict_native=True)
    for i, n in enumerate([7, 11, 4, 2, 31]):
        tp.manual_seed(20 + i)
        check_step(ct, loss, list(lin.parameters()), (tp.randn(n, 6), tp.randint(0, 5, (n,))))
    assert ct.num_specializations == 1
