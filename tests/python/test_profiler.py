"""tp.profiler: what users of torch.profiler do -- profile a training step,
read key_averages().table(), group by shapes, follow a schedule, export a
Chrome trace -- and that profiling changes nothing it watches."""

import json
import threading

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
from tensorplay.profiler import ProfilerAction, profile, record_function, schedule


def names(events):
    return [e.name for e in events]


def by_name(events, name):
    return [e for e in events if e.name == name]


def test_operators_are_recorded_once_per_call():
    a, b = tp.ones(4), tp.ones(4)
    with profile() as prof:
        a + b
        a + b
        a * b
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["add"].count == 2
    assert avg["mul"].count == 1
    assert not tp._C._profiler_active()


def test_nothing_is_recorded_outside_the_profile():
    a = tp.ones(3)
    with profile() as prof:
        a + a
    a * a  # after the profile: not in it
    assert "mul" not in names(prof.events())


def test_self_time_splits_total_time():
    x = tp.randn(64, 64)
    with profile() as prof:
        with record_function("outer"):
            with record_function("inner"):
                (x @ x).relu()
            x.sum()
    ev = prof.events()
    outer = by_name(ev, "outer")[0]
    inner = by_name(ev, "inner")[0]
    assert inner.cpu_parent is outer
    assert {c.name for c in outer.cpu_children} == {"inner", "sum"}
    assert {c.name for c in inner.cpu_children} >= {"matmul", "relu"}
    for e in ev:
        assert e.cpu_time_total >= 0
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total + 1e-9
        # children lie inside their parent
        for c in e.cpu_children:
            assert e.start_us <= c.start_us and c.end_us <= e.end_us
    # self times of everything add up to the top-level ranges' totals
    top = sum(e.cpu_time_total for e in ev if e.cpu_parent is None)
    assert abs(sum(e.self_cpu_time_total for e in ev) - top) < 1e-6 * max(top, 1)


def test_backward_nodes_and_their_kernels_are_recorded():
    m = nn.Linear(8, 4)
    x = tp.randn(5, 8)
    with profile() as prof:
        m(x).relu().sum().backward()
    ev = prof.events()
    bw = [e for e in ev if e.kind == "backward"]
    assert any(e.name.startswith("autograd::") and "Relu" in e.name for e in bw), names(bw)
    acc = [e for e in bw if e.name == "autograd::AccumulateGrad"]
    assert len(acc) == 2  # weight and bias
    # the backward formulas' operators run inside their node
    assert any(c.kind == "op" for e in bw for c in e.cpu_children)
    assert m.weight.grad is not None


def test_compiled_call_shows_its_regions_and_externs():
    w = tp.randn(32, 32, requires_grad=True)

    def f(x):
        return (x @ w).relu().sum()

    c = tp.compile(f)
    x = tp.randn(16, 32)
    with profile() as prof:
        c(x).backward()  # first call: capture and compile inside the profile
        c(x).backward()
    ev = prof.events()
    calls = by_name(ev, "tp.compile: f")
    assert len(calls) == 2
    first, second = calls
    assert "tp.compile: capture and compile" in names(first.cpu_children)
    assert "tp.compile: capture and compile" not in names(second.cpu_children)
    regions = [c for c in second.cpu_children if c.kind == "region"]
    assert regions, names(second.cpu_children)
    externs = [e for e in ev if e.kind == "extern" and e.cpu_parent in regions]
    assert any("matmul" in e.name or "mm" in e.name for e in externs), names(externs)
    # the capture's tracing is not a run: no eager matmul/relu operator ranges in the compiled call
    def descendants(e):
        for c in e.cpu_children:
            yield c
            yield from descendants(c)
    assert not [d for d in descendants(second) if d.kind == "op" and d.name in ("relu", "matmul")]
    assert any(e.kind == "backward" and e.name.startswith("autograd::") for e in ev)


def test_profiling_changes_no_result():
    tp.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 1))
    x = tp.randn(4, 6)
    c = tp.compile(lambda x: m(x).pow(2).mean())
    ref = c(x)
    ref.backward()
    g_ref = [p.grad.numpy().copy() for p in m.parameters()]
    for p in m.parameters():
        p.grad = None
    with profile(record_shapes=True, profile_memory=True):
        out = c(x)
        out.backward()
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    for p, g in zip(m.parameters(), g_ref):
        np.testing.assert_array_equal(p.grad.numpy(), g)
    before = int(tp.compiler.metrics.recompiles)  # profiling itself never forces a recompile
    with profile():
        c(x)
    assert int(tp.compiler.metrics.recompiles) == before


def test_record_shapes_and_grouping():
    a, b = tp.ones(2, 3), tp.ones(5, 3)
    with profile(record_shapes=True) as prof:
        a.sum(0)
        b.sum(0)
        b.sum(0)
    sums = by_name(prof.events(), "sum")
    assert sorted(e.input_shapes[0] for e in sums) == [[2, 3], [5, 3], [5, 3]]
    assert all(e.input_dtypes[0] == "float32" for e in sums)
    grouped = [e for e in prof.key_averages(group_by_input_shape=True) if e.key == "sum"]
    assert sorted(e.count for e in grouped) == [1, 2]
    table = prof.key_averages(group_by_input_shape=True).table()
    assert "Input Shapes" in table and "[[5, 3]]" in table


def test_group_by_shape_needs_record_shapes():
    with profile() as prof:
        tp.ones(2) + 1
    with pytest.raises(ValueError, match="record_shapes"):
        prof.key_averages(group_by_input_shape=True)


def test_profile_memory_sees_an_allocation():
    with profile(profile_memory=True) as prof:
        keep = tp.zeros(1 << 20)  # 4 MiB, kept alive past the call
    z = by_name(prof.events(), "zeros")[0]
    assert z.cpu_memory_usage >= 4 << 20
    assert "CPU Mem" in prof.key_averages().table()
    del keep


def test_table_sorting_and_errors():
    x = tp.randn(200, 200)
    with profile() as prof:
        for _ in range(3):
            x @ x
        x + x
    t = prof.key_averages().table(sort_by="cpu_time_total", row_limit=1)
    rows = [line for line in t.splitlines() if line.startswith(("matmul", "add"))]
    assert len(rows) == 1 and rows[0].startswith("matmul")
    assert "Self CPU time total" in t
    assert prof.key_averages().table(sort_by="count", row_limit=1).splitlines()[3].startswith("matmul")
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="nonsense")
    with pytest.raises(ValueError, match="host"):
        prof.key_averages().table(sort_by="cuda_time_total")


def test_chrome_trace(tmp_path):
    with profile(record_shapes=True) as prof:
        with record_function("block"):
            tp.ones(3, 3).exp()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    evs = data["traceEvents"]
    assert {"block", "exp", "ones"} <= {e["name"] for e in evs}
    for e in evs:
        assert e["ph"] == "X" and e["dur"] >= 0 and "ts" in e and "tid" in e
    exp = [e for e in evs if e["name"] == "exp"][0]
    assert exp["args"]["Input Dims"] == [[3, 3]]


def test_schedule_records_only_active_steps():
    assert [schedule(wait=1, warmup=1, active=2, repeat=1)(i) for i in range(6)] == [
        ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE,
        ProfilerAction.NONE, ProfilerAction.NONE]
    traces = []

    def ready(p):
        traces.append(p.events())

    a = tp.ones(2)
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2), on_trace_ready=ready) as prof:
        for step in range(10):
            with record_function(f"work{step}"):
                a + a
            prof.step()
    assert len(traces) == 2
    assert [n for n in names(traces[0]) if n.startswith("work")] == ["work2", "work3"]
    assert [n for n in names(traces[0]) if n.startswith("ProfilerStep")] == ["ProfilerStep#2", "ProfilerStep#3"]
    assert [n for n in names(traces[1]) if n.startswith("work")] == ["work6", "work7"]
    # each step's work is inside its step range
    step2 = by_name(traces[0], "ProfilerStep#2")[0]
    assert "work2" in names(step2.cpu_children)


def test_schedule_validation():
    with pytest.raises(ValueError, match="active"):
        schedule(wait=0, warmup=0, active=0)
    with pytest.raises(ValueError, match="wait"):
        schedule(wait=-1, warmup=0, active=1)


def test_events_before_a_saved_trace_raise():
    prof = profile(schedule=schedule(wait=5, warmup=0, active=1))
    with prof:
        prof.step()
    with pytest.raises(RuntimeError, match="no trace"):
        prof.events()


def test_profiles_do_not_nest_and_stop_on_error():
    with profile():
        with pytest.raises(ValueError, match="already running"):
            with profile():
                pass
    assert not tp._C._profiler_active()
    with pytest.raises(ZeroDivisionError):
        with profile():
            1 / 0
    assert not tp._C._profiler_active()


def test_record_function_outside_a_profile_and_as_decorator():
    with record_function("idle"):
        pass  # no profile: nothing to record, no error

    @record_function("decorated")
    def f(x):
        return x * 2

    with profile() as prof:
        f(tp.ones(2))
        f(tp.ones(2))
    d = by_name(prof.events(), "decorated")
    assert len(d) == 2 and all("mul" in names(e.cpu_children) for e in d)
    with pytest.raises(TypeError):
        record_function(3)


def test_unclosed_inner_range_ends_with_its_outer_range():
    with profile() as prof:
        outer = record_function("outer").__enter__()
        record_function("leaked").__enter__()  # never exited
        outer.__exit__(None, None, None)
        tp.ones(1)
    ev = prof.events()
    leaked = by_name(ev, "leaked")[0]
    assert leaked.cpu_parent is by_name(ev, "outer")[0]
    assert by_name(ev, "ones")[0].cpu_parent is None


def test_other_threads_get_their_own_thread_id():
    def work():
        tp.ones(3).neg()

    with profile() as prof:
        tp.ones(3).abs()
        t = threading.Thread(target=work)
        t.start()
        t.join()
    ev = prof.events()
    assert by_name(ev, "neg")[0].thread != by_name(ev, "abs")[0].thread


def test_legacy_autograd_profiler():
    x = tp.randn(10, 10, requires_grad=True)
    with tp.autograd.profiler.profile(record_shapes=True) as prof:
        (x * x).sum().backward()
    assert "mul" in prof.table()
    assert any(e.name.startswith("autograd::") for e in prof.function_events)
    assert prof.total_average().count == len(prof.function_events)
    with tp.autograd.profiler.profile(enabled=False) as off:
        x + x
    assert off.function_events is None


def test_tensorboard_trace_handler(tmp_path):
    handler = tp.profiler.tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w0")
    with profile(schedule=schedule(wait=0, warmup=0, active=1, repeat=1), on_trace_ready=handler) as prof:
        tp.ones(2).exp()
        prof.step()
    files = list((tmp_path / "tb").iterdir())
    assert len(files) == 1 and files[0].name.startswith("w0.") and files[0].name.endswith(".pt.trace.json")
    assert json.loads(files[0].read_text())["traceEvents"]


def test_bad_activity():
    with pytest.raises(TypeError, match="ProfilerActivity"):
        profile(activities=["cpu"])
