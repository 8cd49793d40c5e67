"""In-place storage reuse (ARCHITECTURE.md step 11): a compiled function that
writes into its inputs returns their final values as extra graph outputs; where
the program reads each element of such an input only at the point that
overwrites it, Stax computes the final value straight into the input's memory
and the call skips its write-back copy. Every case is checked against eager,
and `tp.compiler.metrics.inplace_writes` tells where the reuse happened."""

import warnings

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn, optim


def writes():
    return tp.compiler.metrics.inplace_writes


def run_both(f, make_args, calls=3, options=None):
    """Runs f eagerly and compiled (stax) `calls` times on fresh copies of the
    same arguments; checks results, final argument values and per-call version
    bumps (after the first call, which captures) agree. Returns the number of
    in-place writes the compiled calls made."""
    eager_args = make_args()
    comp_args = [tp.tensor(a.numpy()) if isinstance(a, tp.Tensor) else a for a in eager_args]
    cf = tp.compile(f, backend="stax", options=options or {"warn_fallback": "0"})
    before = writes()
    for call in range(calls):
        ve = [a._version for a in eager_args if isinstance(a, tp.Tensor)]
        vc = [a._version for a in comp_args if isinstance(a, tp.Tensor)]
        re, rc = f(*eager_args), cf(*comp_args)
        if re is not None:
            np.testing.assert_allclose(rc.numpy(), re.numpy(), rtol=1e-6, atol=1e-6)
        for a, b in zip(comp_args, eager_args):
            if isinstance(a, tp.Tensor):
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)
        if call > 0:  # the capturing call runs the function once more
            de = [a._version - v for a, v in zip([a for a in eager_args if isinstance(a, tp.Tensor)], ve)]
            dc = [a._version - v for a, v in zip([a for a in comp_args if isinstance(a, tp.Tensor)], vc)]
            # One bump per written input per call (the write-back is one write).
            assert dc == [min(d, 1) for d in de], (dc, de)
    return writes() - before


def test_add_inplace_is_written_in_place():
    def f(x):
        x.add_(1)

    assert run_both(f, lambda: [tp.randn(1000)]) == 3


def test_chain_of_inplace_ops_with_another_input_is_written_in_place():
    def f(x, y):
        x.mul_(2).add_(y)

    assert run_both(f, lambda: [tp.randn(64, 33), tp.randn(64, 33)]) == 3


def test_broadcast_operand_is_written_in_place():
    def f(x, b):
        x.mul_(b)

    assert run_both(f, lambda: [tp.randn(8, 16), tp.randn(16)]) == 3


def test_stax_inplace_option_off_copies_and_matches():
    def f(x, y):
        x.mul_(2).add_(y)

    assert run_both(f, lambda: [tp.randn(64), tp.randn(64)], options={"stax_inplace": "0", "warn_fallback": "0"}) == 0


def test_input_read_transposed_falls_back_to_the_copy():
    # x[i, j] = x[i, j] + x[j, i]: element (j, i) is read after (j, i) may have
    # been overwritten; in place would be wrong.
    def f(x):
        x.add_(x.t())

    assert run_both(f, lambda: [tp.randn(32, 32)]) == 0


def test_input_read_by_a_reduction_falls_back_to_the_copy():
    def f(x):
        x.sub_(x.mean())

    assert run_both(f, lambda: [tp.randn(100)]) == 0


def test_input_also_read_for_a_result_falls_back_and_matches():
    def f(x):
        y = x * 3
        x.add_(1)
        return y

    run_both(f, lambda: [tp.randn(50)])


def test_setitem_and_slice_writes_match_eager():
    def f(x):
        x[0] = 0
        x[2:5].mul_(3)

    run_both(f, lambda: [tp.randn(8, 4)])


def test_mutated_input_that_is_also_returned_is_the_callers_object():
    def f(x):
        x.add_(1)
        return x

    x = tp.randn(20)
    ref = x.numpy() + 2
    cf = tp.compile(f, backend="stax")
    before = writes()
    r = cf(x)
    r = cf(x)
    assert r is x
    np.testing.assert_allclose(x.numpy(), ref, rtol=1e-6)
    # The returned value is the input object itself, not a graph output (it was
    # a second buffer the input's final value was copied from): the add writes
    # straight into x, once per call.
    assert writes() - before == 2


def test_returned_clone_of_the_written_value_does_not_alias_the_input():
    def f(x):
        x.add_(1)
        return x.clone()

    x = tp.randn(20)
    cf = tp.compile(f, backend="stax")
    r = cf(x)
    x.add_(100)
    assert not np.allclose(r.numpy(), x.numpy())
    np.testing.assert_allclose(r.numpy() + 100, x.numpy(), rtol=1e-6)


def test_view_held_by_the_caller_sees_the_new_values():
    def f(x):
        x.mul_(2).add_(1)

    x = tp.randn(6, 5)
    row = x[2]
    col = x[:, 1]
    ref = x.numpy() * 2 + 1
    before = writes()
    tp.compile(f, backend="stax")(x)
    assert writes() - before == 1
    np.testing.assert_allclose(row.numpy(), ref[2], rtol=1e-6)
    np.testing.assert_allclose(col.numpy(), ref[:, 1], rtol=1e-6)


def test_two_arguments_over_the_same_memory_do_not_reuse():
    # y is x itself: writing x in place while the kernel reads y (at another
    # element) would be wrong, so the call keeps the copy.
    def f(x, y):
        x.add_(y.flip(0))

    base_c = tp.arange(10.0)
    base_e = tp.arange(10.0)
    cf = tp.compile(f, backend="stax", options={"warn_fallback": "0"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cf(base_c, base_c)
        except Exception as e:  # refused as overlapping inputs: also correct
            assert "overlap" in str(e) or "memory" in str(e)
            return
    f(base_e, base_e.clone())
    np.testing.assert_allclose(base_c.numpy(), base_e.numpy(), rtol=1e-6)


def test_non_contiguous_argument_matches_eager():
    def f(x):
        x.add_(1)

    base_c, base_e = tp.zeros(8, 6), tp.zeros(8, 6)
    xc, xe = base_c.t(), base_e.t()
    cf = tp.compile(f, backend="stax", options={"warn_fallback": "0"})
    for _ in range(2):
        cf(xc)
        f(xe)
    np.testing.assert_allclose(base_c.numpy(), base_e.numpy())


def test_grad_recorded_write_keeps_its_history():
    def f(x):
        x.mul_(3)
        return x.sum()

    w_c = tp.randn(5).requires_grad_(True)
    w_e = tp.tensor(w_c.detach().numpy()).requires_grad_(True)
    cf = tp.compile(f, backend="stax", options={"warn_fallback": "0"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x_c, x_e = w_c * 2, w_e * 2
        r_c, r_e = cf(x_c), f(x_e)
    (r_c + x_c.sum()).backward()
    (r_e + x_e.sum()).backward()
    np.testing.assert_allclose(x_c.detach().numpy(), x_e.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(w_c.grad.numpy(), w_e.grad.numpy(), rtol=1e-6)


def test_write_into_a_leaf_that_requires_grad_is_still_refused():
    def f(x):
        x.add_(1)
        return x * 2

    x = tp.randn(3).requires_grad_(True)
    keep = x.detach().numpy().copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception, match="leaf Variable"):
            tp.compile(f, backend="stax")(x)
    np.testing.assert_array_equal(x.detach().numpy(), keep)


def test_batchnorm_running_stats_match_eager():
    tp.manual_seed(0)
    m_eager = nn.BatchNorm2d(3)
    m_comp = nn.BatchNorm2d(3)
    m_comp.load_state_dict(m_eager.state_dict())
    cf = tp.compile(m_comp, backend="stax")
    before = writes()
    with tp.no_grad():
        for step in range(4):
            x = tp.randn(4, 3, 5, 5) * (step + 1) + step
            np.testing.assert_allclose(cf(x).numpy(), m_eager(x).numpy(), rtol=1e-4, atol=1e-5)
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                np.testing.assert_allclose(getattr(m_comp, name).numpy(), getattr(m_eager, name).numpy(),
                                           rtol=1e-5, atol=1e-6, err_msg=f"{name} after call {step + 1}")
    # running_mean = (1 - m) * running_mean + m * batch_mean reads each element
    # once at its own index: legal; the batch statistics are separate reductions.
    assert writes() - before > 0


@pytest.mark.parametrize("opt", ["sgd", "sgd_momentum", "adam"])
def test_compiled_optimizer_step_writes_parameters_in_place(opt):
    rng = np.random.default_rng(0)
    shapes = [(16, 8), (8,), (4, 16), (4,)]
    params = [[nn.Parameter(tp.tensor(rng.standard_normal(s).astype(np.float32))) for s in shapes] for _ in range(2)]
    for p_e, p_c in zip(*params):
        p_c.data.copy_(p_e.data)
    make = {"sgd": lambda p: optim.SGD(p, lr=0.1),
            "sgd_momentum": lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
            "adam": lambda p: optim.Adam(p, lr=1e-2)}[opt]
    opts = [make(ps) for ps in params]
    step_c = tp.compile(opts[1].step, backend="stax", options={"warn_fallback": "0"})
    before = writes()
    for it in range(4):
        for k, step in enumerate([opts[0].step, step_c]):
            for p in params[k]:
                p.grad = tp.tensor(np.sin(np.arange(p.numel(), dtype=np.float32) + it).reshape(p.shape))
            step()
        for p_e, p_c in zip(*params):
            np.testing.assert_allclose(p_c.detach().numpy(), p_e.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert writes() - before > 0


def test_sgd_momentum_step_writes_every_parameter_in_place():
    # p.add_(buf) with buf = momentum * buf + grad: the parameter's nest reads p
    # only where it stores it (in place). The new buffer is an output that the
    # parameter's update reads too, so it is written once and the parameter's
    # nest loads it (it used to recompute it from the old buffer: two nests read
    # the old buffer, which then kept its copy). Both are in place now.
    params = [nn.Parameter(tp.randn(*s)) for s in [(32, 16), (16,), (7, 5)]]
    ref = [nn.Parameter(tp.tensor(p.detach().numpy())) for p in params]
    opt, opt_ref = optim.SGD(params, lr=0.1, momentum=0.9), optim.SGD(ref, lr=0.1, momentum=0.9)
    step = tp.compile(opt.step, backend="stax")
    per_call = []
    for it in range(4):
        for p, q in zip(params, ref):
            p.grad = tp.randn(*p.shape)
            q.grad = tp.tensor(p.grad.numpy())
        before = writes()
        step()
        opt_ref.step()
        per_call.append(writes() - before)
        for p, q in zip(params, ref):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert per_call[1:] == [2 * len(params)] * 3, per_call
