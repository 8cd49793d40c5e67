"""Kernels of compiled optimizer steps (C++ backend), and the Stax rules behind them.

`tp.compile(optimizer.step)` ran 2-12x slower than the eager step: the update
`p + (-lr) * buf` is formed in double (as eager's `add(alpha=)` does) and a
nest with double values inside float lanes was scalar code; Adam's bias
corrections `1 - beta ** step` made the parameter's nest scalar too, computed
per element; SGD's new momentum buffer was recomputed by the parameter's update
(so it could not be written in place) and every weight's rows ran in one
kernel; a 0-d step count put Adam's nests in a one-iteration kernel whose
phases were separate passes over memory. These check the results (bitwise
against eager where eager's rounding is reproduced) and that the fast plan is
taken (the printed source), on the shapes users have: tails, 1-D parameters,
several shapes in one step."""
import re

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.optim as optim


def _kernels(src):
    return src[src.index("static void "):]  # the prelude defines no kernel


def _compiled(f, *args):
    cf = tp.compile(f, strict_native=True)
    return cf, cf(*args)


def _arr(rng, *shape):
    return tp.tensor(rng.standard_normal(shape).astype(np.float32))


# -- double arithmetic inside float lanes --------------------------------------

@pytest.mark.parametrize("n", [1000, 37, 4096, 16])
def test_float_values_widened_to_double_run_in_vector_code_with_eager_bits(n):
    rng = np.random.default_rng(n)
    x, y = _arr(rng, n), _arr(rng, n)
    a = tp.tensor(-1.2345678901234567, dtype=tp.float64)
    f = lambda x, y, a: (x.double() + y.double() * a.float().double()).float()  # noqa: E731  (add(alpha=))
    cf, out = _compiled(f, x, y, a)
    np.testing.assert_array_equal(out.numpy(), f(x, y, a).numpy())
    assert "vectorized" in _kernels(cf.last_source) and "tp_widen(" in cf.last_source


def test_every_double_operation_in_float_lanes_matches_eager():
    rng = np.random.default_rng(1)
    x, y = _arr(rng, 8, 131), _arr(rng, 8, 131).abs() + 0.5
    s = tp.tensor(0.1, dtype=tp.float64)
    f = lambda x, y, s: ((x.double() - y.double()) / (y.double() * s) + (-x.double())).float()  # noqa: E731
    cf, out = _compiled(f, x, y, s)
    np.testing.assert_array_equal(out.numpy(), f(x, y, s).numpy())
    assert "tp_narrow(" in cf.last_source


def test_double_values_in_a_masked_tail_match_eager():
    # exp makes the body costly: a 1000-float row ends in one masked vector step.
    rng = np.random.default_rng(2)
    x = _arr(rng, 3, 1000)
    a = tp.tensor(0.75, dtype=tp.float64)
    f = lambda x, a: (x.double() * a).float().exp()  # noqa: E731
    cf, out = _compiled(f, x, a)
    np.testing.assert_allclose(out.numpy(), f(x, a).numpy(), rtol=1e-6, atol=0)


def test_a_double_comparison_in_float_lanes_stays_correct():
    # Comparing doubles per lane is not vector code; the result must still be right.
    rng = np.random.default_rng(3)
    x = _arr(rng, 300)
    f = lambda x: tp.where(x.double() * 1e-3 > 1e-4, x, x * 2)  # noqa: E731
    cf, out = _compiled(f, x)
    np.testing.assert_array_equal(out.numpy(), f(x).numpy())


# -- values that do not move with the lanes --------------------------------------

def test_a_uniform_double_power_is_scalar_code_and_the_nest_stays_vectorized():
    rng = np.random.default_rng(4)
    x = _arr(rng, 2, 1000)
    beta, step = tp.tensor(0.999, dtype=tp.float64), tp.tensor(7.0)
    f = lambda x, b, t: x / (1 - b ** t.double()).sqrt().float()  # noqa: E731  (Adam's bias correction)
    cf, out = _compiled(f, x, beta, step)
    np.testing.assert_array_equal(out.numpy(), f(x, beta, step).numpy())
    src = _kernels(cf.last_source)
    assert "vectorized" in src
    assert re.search(r"double t\d+ = tp_pow\(", src)  # computed as a scalar, splatted once


def test_a_uniform_condition_selects_whole_vectors():
    rng = np.random.default_rng(5)
    x = _arr(rng, 500)
    for s in (1.0, -1.0, 0.0):
        cf, out = _compiled(lambda x, s: tp.where(s > 0, x, -x) * 2, x, tp.tensor(s))
        np.testing.assert_array_equal(out.numpy(), (tp.where(tp.tensor(s) > 0, x, -x) * 2).numpy())
        assert "vectorized" in _kernels(cf.last_source)


def test_an_integer_step_count_cast_once():
    rng = np.random.default_rng(6)
    x = _arr(rng, 64, 33)
    t = tp.tensor(5, dtype=tp.int64)
    f = lambda x, t: x * (t + 1).float() - t.float().sqrt()  # noqa: E731
    cf, out = _compiled(f, x, t)
    np.testing.assert_array_equal(out.numpy(), f(x, t).numpy())
    assert "vectorized" in _kernels(cf.last_source)


# -- outputs other operators read ---------------------------------------------

@pytest.mark.parametrize("reader", ["same", "square", "transpose", "flip", "sum", "broadcast"])
def test_an_output_read_by_other_operators_gives_eager_results(reader):
    rng = np.random.default_rng(7)
    x = _arr(rng, 48, 40)
    other = {"same": lambda y: y + 1, "square": lambda y: y * y, "transpose": lambda y: y.t() * 3,
             "flip": lambda y: y.flip(0) - y, "sum": lambda y: y.sum(0), "broadcast": lambda y: y[:1] + y}[reader]
    f = lambda x: (lambda y: (y, other(y)))(x * 2 + 1)  # noqa: E731
    cf, (y, z) = _compiled(f, x)
    ye, ze = f(x)
    np.testing.assert_array_equal(y.numpy(), ye.numpy())
    np.testing.assert_allclose(z.numpy(), ze.numpy(), rtol=1e-6, atol=1e-6)


def test_an_output_read_at_its_own_element_is_loaded_not_recomputed():
    rng = np.random.default_rng(8)
    x, g = _arr(rng, 64, 256), _arr(rng, 64, 256)
    f = lambda x, g: (lambda b: (b, x - b * 0.1))(x * 0.9 + g)  # noqa: E731  (momentum, then the update)
    cf, (b, p) = _compiled(f, x, g)
    be, pe = f(x, g)
    np.testing.assert_array_equal(b.numpy(), be.numpy())
    np.testing.assert_array_equal(p.numpy(), pe.numpy())
    src = _kernels(cf.last_source)
    assert src.count("static void ") == 1  # one kernel: the update reads the stored buffer row by row
    assert re.search(r"tp_load\(out0 \+", src)


# -- whole optimizer steps ----------------------------------------------------------

OPTIMIZERS = {
    "sgd_momentum": lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
    "sgd_nesterov_wd": lambda p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-2),
    "adam": lambda p: optim.Adam(p, lr=1e-2),
    "adamw_amsgrad": lambda p: optim.AdamW(p, lr=1e-2, amsgrad=True),
}


@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
@pytest.mark.parametrize("shapes", [[(70001,)], [(300, 257), (257,), (3, 300), (3,)], [(40000,), (40000,), (9,)]],
                         ids=["flat", "mlp", "twins"])
def test_compiled_optimizer_steps_equal_eager_steps(opt, shapes):
    rng = np.random.default_rng(9)
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    pe = [nn.Parameter(tp.tensor(a)) for a in init]
    pc = [nn.Parameter(tp.tensor(a)) for a in init]
    oe, oc = OPTIMIZERS[opt](pe), OPTIMIZERS[opt](pc)
    step = tp.compile(oc.step, options={"warn_fallback": "0"})
    for it in range(4):
        for a, b in zip(pe, pc):
            g = rng.standard_normal(a.shape).astype(np.float32)
            a.grad, b.grad = tp.tensor(g), tp.tensor(g.copy())
        oe.step()
        step()
        for a, b in zip(pe, pc):
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6, atol=1e-7,
                                       err_msg=f"{opt} step {it + 1}")
        for a, b in zip(pe, pc):
            for key, va in oe.state[a].items():
                vb = oc.state[b][key]
                if isinstance(va, tp.Tensor):
                    np.testing.assert_allclose(vb.numpy(), va.numpy(), rtol=1e-6, atol=1e-7, err_msg=key)


def test_an_sgd_step_runs_one_kernel_per_large_weight():
    # Independent large parameters are not interleaved row by row in one kernel
    # (more memory streams, nothing reused); each weight's momentum buffer and
    # update share its kernel, and small biases join one of them.
    net = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 4))
    params = list(net.parameters())
    for p in params:
        p.grad = tp.ones(*p.shape)
    opt = optim.SGD(params, lr=0.1, momentum=0.9)
    step = tp.compile(opt.step, options={"warn_fallback": "0"})
    step()
    step()  # the second version: momentum buffers exist
    src = _kernels(step.last_source)
    assert src.count("static void ") == 3, src.count("static void ")


def test_a_one_element_input_is_read_once_per_kernel():
    # Inside the kernel's OpenMP region GCC cannot prove the stores do not alias
    # the learning rate's or the step count's memory: read once before it, the
    # value (and what is computed from it: pow(beta, step)) leaves the loops.
    rng = np.random.default_rng(10)
    x = _arr(rng, 256, 300)
    beta, step = tp.tensor(0.9, dtype=tp.float64), tp.tensor(3.0)
    f = lambda x, b, t: x * (1 - b ** t.double()).float() + t  # noqa: E731
    cf, out = _compiled(f, x, beta, step)
    np.testing.assert_array_equal(out.numpy(), f(x, beta, step).numpy())
    src = _kernels(cf.last_source)
    assert re.search(r"const double (in\d+)_v = \1\[0\];", src) and re.search(r"const float (in\d+)_v = \1\[0\];", src)
    for s in (1.0, 7.0):  # the value is read at each call, not baked in
        step = tp.tensor(s)
        np.testing.assert_array_equal(cf(x, beta, step).numpy(), f(x, beta, step).numpy())
