"""Data gates and guard replay (Sections 2-3, Proposition 3.1): Python control
flow on tensor values inside a compiled function records a gate; each gate
value sequence gets its own captured program, chosen on every call by replaying
the computation the gates depend on."""

import re
import warnings

import numpy as np
import pytest

import tensorplay as tp
from compile_check import assert_compiled_matches_eager


def _metric(name):
    return getattr(tp.compiler.metrics, name)


def two_way(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


@pytest.mark.parametrize("backend", ["eager", "stax"])
def test_both_sides_of_a_two_way_gate_match_eager(backend):
    for sign in (1, -1):
        assert_compiled_matches_eager(two_way, tp.randn(5).abs() * sign, backends=(backend,))


def test_alternating_gate_values_compile_once_per_branch_natively():
    cf = tp.compile(two_way, strict_native=True)
    captures = _metric("captures")
    for k in range(6):
        x = tp.randn(8).abs() * (1 if k % 2 == 0 else -1)
        np.testing.assert_allclose(cf(x).numpy(), two_way(x).numpy(), rtol=1e-6)
    assert _metric("captures") - captures == 2
    assert cf.num_specializations == 2


def test_data_dependent_while_loop_unrolls_per_trip_count():
    def halve(x):
        while x.abs().max() > 1:
            x = x / 2
        return x

    cf = tp.compile(halve)
    trips = {}
    for scale in (0.5, 3.0, 30.0, 3.0, 0.5, 300.0, 30.0):
        x = tp.full((4,), scale)
        n = 0
        y = x
        while float(y.abs().max()) > 1:
            y, n = y / 2, n + 1
        trips[n] = True
        np.testing.assert_allclose(cf(x).numpy(), halve(x).numpy(), rtol=1e-6)
    assert cf.num_specializations == len(trips)


def test_gate_in_both_branches_and_nested():
    def f(x, y):
        if (x > 0).any():
            z = x + y
            if z.mean() < 0.5:
                return z * 3
            return z
        return y if y.sum() > 0 else -y

    for xs, ys in ((1, 1), (1, -1), (-1, 1), (-1, -1), (0.01, 0.01)):
        assert_compiled_matches_eager(f, tp.rand(4) * xs, tp.rand(4) * ys)


def test_recompile_log_names_the_gate_and_its_line(capfd):
    import os

    cf = tp.compile(two_way)
    os.environ["TP_LOGS"] = "recompiles"
    try:
        cf(tp.ones(3))
        cf(-tp.ones(3))
    finally:
        del os.environ["TP_LOGS"]
    err = capfd.readouterr().err
    assert re.search(r"data gate changed: bool\(Tensor\) at .*test_compile_gates\.py:\d+ gave False", err), err


def test_item_in_arithmetic_does_not_compile_per_value():
    def f(x, t):
        return x * t.item() + 1

    cf = tp.compile(f)
    for v in (0.5, 1.5, 2.5, -3.0):
        x, t = tp.randn(3), tp.tensor(v)
        np.testing.assert_allclose(cf(x, t).numpy(), f(x, t).numpy(), rtol=1e-6)
    assert cf.num_specializations == 1


def test_int_and_float_reads_are_gates_by_value():
    def f(x, t):
        return x * float(t) + int(t)

    cf = tp.compile(f)
    for v in (1.0, 2.0, 1.0):
        x, t = tp.randn(3), tp.tensor(v)
        np.testing.assert_allclose(cf(x, t).numpy(), f(x, t).numpy(), rtol=1e-6)
    assert cf.num_specializations == 2


def test_gate_on_a_free_tensor_sees_its_current_value():
    state = {"flag": tp.tensor(1.0)}

    def f(x):
        return x + 1 if state["flag"] > 0 else x - 1

    cf = tp.compile(f)
    x = tp.zeros(2)
    np.testing.assert_array_equal(cf(x).numpy(), [1, 1])
    state["flag"].fill_(-1)
    np.testing.assert_array_equal(cf(x).numpy(), [-1, -1])


def test_gate_after_an_input_write_replays_each_call():
    def f(x):
        x.add_(1)
        if x.sum() > 2:
            return x * 0
        return x

    x_c, x_e = tp.zeros(2), tp.zeros(2)
    cf = tp.compile(f)
    for _ in range(3):
        np.testing.assert_array_equal(cf(x_c).numpy(), f(x_e).numpy())
        np.testing.assert_array_equal(x_c.numpy(), x_e.numpy())


def test_gate_versions_are_capped_then_run_eagerly_with_a_warning():
    def f(x, t):
        return x * int(t)

    cf = tp.compile(f, backend="eager", options={"max_gate_artifacts": 2})
    for v in (1, 2):
        cf(tp.ones(2), tp.tensor(v))
    captures = _metric("captures")
    with pytest.warns(UserWarning, match=r"int\(Tensor\) at .*test_compile_gates\.py:\d+"):
        r = cf(tp.ones(2), tp.tensor(7))
    np.testing.assert_array_equal(r.numpy(), [7, 7])
    assert _metric("captures") == captures
    assert cf.num_specializations == 2
    # A cached value still runs compiled.
    np.testing.assert_array_equal(cf(tp.ones(2), tp.tensor(2)).numpy(), [2, 2])


def test_gated_function_stays_on_the_first_level_entry():
    cf = tp.compile(two_way)
    x = tp.ones(4)
    cf(x)
    hits = _metric("first_level_hits")
    for _ in range(3):
        cf(x)
    assert _metric("first_level_hits") - hits == 3


# ------------------------------------------------------------ errors and inspection


def test_remaining_capture_failure_names_the_operation_and_the_users_line():
    def f(x):
        y = x * 2
        tp.manual_seed(0)
        y.normal_()  # the failing line
        return y

    with pytest.raises(tp.compiler.CaptureError) as info:
        tp.compile(f, fullgraph=True)(tp.randn(3))
    msg = str(info.value)
    assert "normal_" in msg and "seed outside the compiled function" in msg
    assert re.search(r"at .*test_compile_gates\.py:\d+: y\.normal_\(\)  # the failing line", msg), msg


def test_failure_inside_the_library_names_the_users_call():
    def f(x):
        return tp.tensor(x.numpy()) + 1

    with pytest.raises(tp.compiler.CaptureError, match=r"numpy\(\)(.|\n)*test_compile_gates\.py:\d+: return tp\.tensor"):
        tp.compile(f, fullgraph=True)(tp.randn(3))


def test_capture_returns_the_functionalized_graph_gates_and_guards():
    def f(x, buf):
        buf.add_(1)
        if x.sum() > 0:
            return x * 2
        return x

    gm = tp.compiler.capture(f, tp.ones(3), tp.zeros(2))
    assert "add_(" not in gm.code
    assert gm.mutated_inputs == [1]
    assert len(gm.gates) == 1
    gate = gm.gates[0]
    assert re.match(r"bool\(Tensor\) at .*test_compile_gates\.py:\d+", gate["read"])
    assert gate["value"] is True
    assert "sum" in gate["guard"].code and "mul" not in gate["guard"].code
    assert bool(gate["guard"](-tp.ones(3), tp.zeros(2))) is False
    cf = tp.compile(f, backend="eager")
    cf(tp.ones(3), tp.zeros(2))
    assert len(cf.last_graph.gates) == 1 and cf.last_graph.mutated_inputs == [1]


def test_graph_log_shows_gates_and_guard_subgraphs(capfd):
    import os

    os.environ["TP_LOGS"] = "graph"
    try:
        tp.compile(two_way, backend="eager")(tp.ones(3))
    finally:
        del os.environ["TP_LOGS"]
    err = capfd.readouterr().err
    assert "captured graph" in err
    assert re.search(r"data gate 0: bool\(Tensor\) at .*:\d+ == True; guard-replay subgraph:", err), err


def test_a_tensor_passed_where_a_number_is_expected_is_a_data_gate():
    # Regression: addcdiv_(value=t) read t once at capture and baked it in, so a
    # later call with another t silently ran the first value's program.
    def f(x, t):
        y = x.clone()
        y.addcdiv_(x, x.abs() + 1, value=t)
        return y.add(x, alpha=t * 2)

    cf = tp.compile(f)
    x = tp.randn(5)
    for v in (0.5, 2.0, 0.5, -3.0):
        t = tp.tensor(v)
        np.testing.assert_allclose(cf(x, t).numpy(), f(x, t).numpy(), rtol=1e-6)
