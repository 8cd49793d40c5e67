"""PyTorch's OpInfo database as the oracle of every TensorPlay operator.

One test per (OpInfo, dtype) runs all of that OpInfo's samples in that dtype
(forward; float64 also first-order gradients) and compares with PyTorch (see
harness.py). Known failures are listed per case and per sample in xfails.json
(`python scripts/opinfo_report.py --update-xfails` regenerates it): a case whose
failing samples are all listed is xfail; a sample that fails without being
listed fails the test. Samples run in a forked worker, so a crash is a failed
test, not a dead test run.
"""

import faulthandler
import os
import signal
import threading
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")  # torch's OpInfo module imports it

import tensorplay as tp  # noqa: E402

from . import harness as h  # noqa: E402

try:
    CASES = h.covered_cases()
except Exception as e:  # pragma: no cover - torch without its testing package
    pytest.skip(f"PyTorch's OpInfo database is unavailable: {e}", allow_module_level=True)
XFAILS = h.load_xfails()


@pytest.fixture(scope="module")
def runner():
    r = h.IsolatedRunner()
    yield r
    r.close()


@pytest.mark.parametrize("key,dtype", CASES, ids=[f"{k}-{d}" for k, d in CASES])
def test_opinfo(runner, key, dtype):
    res = runner.run(key, dtype)
    entry = XFAILS.get(h.case_id(key, dtype))
    unexpected = h.unexpected_failures(res, entry)
    if unexpected:
        lines = "\n".join(f"  {s.kind} sample #{s.index}: {s.reason}: {s.detail}" for s in unexpected[:20])
        pytest.fail(f"{len(unexpected)} of {len(res.samples)} samples of OpInfo {key!r} in {dtype} fail and are "
                    f"not listed in opinfo/xfails.json:\n{lines}\n(a known failure moved, e.g. after a fix "
                    f"elsewhere? regenerate: python scripts/opinfo_report.py --update-xfails)", pytrace=False)
    if res.failures():
        pytest.xfail(f"{entry['reason']}: {len(res.failures())} of {len(res.samples)} samples (xfails.json)")


# ---- the harness itself -----------------------------------------------------------------


def test_xfails_name_only_covered_cases():
    """Every xfails.json entry names a case the suite runs (no stale keys after a rename)."""
    cases = {h.case_id(k, d) for k, d in CASES}
    stale = sorted(set(XFAILS) - cases)
    assert not stale, f"xfails.json lists cases that no longer run: {stale[:10]}"


def test_samples_keep_strides_and_storage_offset():
    base = torch.arange(60.0, dtype=torch.float64).reshape(5, 12)
    t = base[1:, 2::3].t()  # non-contiguous, storage offset 14
    x = h.tensor_to_tp(t, requires_grad=False)
    assert tuple(x.shape) == tuple(t.shape)
    assert tuple(x.stride()) == tuple(t.stride())
    assert x.storage_offset() == t.storage_offset() == 14
    assert not x.is_contiguous()
    assert torch.equal(h.tp_to_torch(x), t)
    # a copy: writing through tensorplay leaves the torch sample alone
    x.fill_(0.0)
    assert base[1, 2].item() == 14.0


def test_expanded_sample_stays_expanded():
    t = torch.tensor([1, 2, 3], dtype=torch.int16).expand(4, 3)
    x = h.tensor_to_tp(t, requires_grad=False)
    assert tuple(x.stride()) == (0, 1)
    assert torch.equal(h.tp_to_torch(x), t)


def test_compare_reports_dtype_shape_and_value():
    e = torch.tensor([1.0, 2.0])
    assert h.compare(e, tp.tensor([1.0, 2.0]), "float32") is None
    assert h.compare(e, tp.tensor([1.0, 2.5]), "float32")[0] == "wrong value"
    assert h.compare(e, tp.tensor([1.0, 2.0 + 3e-5]), "float32")[0] == "wrong value (rounding)"
    assert h.compare(e, tp.tensor([1.0, 2.0], dtype=tp.float64), "float32")[0] == "wrong dtype"
    assert h.compare(e, tp.tensor([[1.0, 2.0]]), "float32")[0] == "wrong shape"
    assert h.compare((e, e), (tp.tensor([1.0, 2.0]),), "float32")[0] == "wrong structure"
    assert h.compare(torch.tensor([float("nan")]), tp.tensor([float("nan")]), "float32") is None


def test_tied_indices_accepted_only_when_they_pick_equal_elements():
    from torch.testing._internal.opinfo.core import SampleInput
    ok = h.tie_checker("sort", SampleInput(torch.tensor([0, 0, 1])))
    e = torch.tensor([0, 1, 2])
    assert ok(e, torch.tensor([1, 0, 2]))       # the tied zeros in the other order
    assert not ok(e, torch.tensor([0, 0, 2]))   # not a permutation
    assert not ok(e, torch.tensor([2, 1, 0]))   # picks different values
    assert h.tie_checker("sort", SampleInput(torch.tensor([0, 0]), kwargs={"stable": True})) is None
    kth = h.tie_checker("kthvalue", SampleInput(torch.tensor([[3, 1, 1]]), args=(2, 1)))
    assert kth(torch.tensor([1]), torch.tensor([2])) and not kth(torch.tensor([1]), torch.tensor([0]))


def test_unlisted_failure_is_unexpected():
    res = h.CaseResult("add", "float32")
    res.samples = [h.SampleResult(0, "fwd", False, "wrong value"), h.SampleResult(1, "fwd", True),
                   h.SampleResult(3, "grad", False, "wrong gradient")]
    entry = h.xfail_entry(res)
    assert entry["fwd"] == "0" and entry["grad"] == "3" and entry["reason"] in ("wrong value", "wrong gradient")
    assert h.unexpected_failures(res, entry) == []
    res.samples[1] = h.SampleResult(1, "fwd", False, "raises ValueError")
    assert [s.index for s in h.unexpected_failures(res, entry)] == [1]
    assert len(h.unexpected_failures(res, None)) == 3


def test_classify_exception():
    assert h.classify_exception(TypeError("f(): got an unexpected keyword argument 'device'")) == \
        "missing kwarg device"
    assert h.classify_exception(
        TypeError("f() received an invalid combination of arguments - got (int, device=str), but expected "
                  "one of:\n f(Scalar end, *, ScalarType? dtype=None)"), "int8", {"device": "cpu"}) == \
        "missing kwarg device"
    assert h.classify_exception(RuntimeError("erfinv: int8 is not supported"), "int8") == "unsupported dtype"
    assert h.classify_exception(ValueError("shape mismatch"), "int8") == "raises ValueError"


def _segfault(*args):
    faulthandler.disable()  # a deliberate crash: no traceback on the test's stderr
    # to this thread, so it acts before pthread_kill returns (a signal to the process
    # may land on another thread while this one goes on and answers)
    signal.pthread_kill(threading.get_ident(), signal.SIGSEGV)
    time.sleep(30)


def _hang(*args):
    time.sleep(60)


def test_crash_in_a_sample_is_a_failed_case_not_a_dead_run():
    r = h.IsolatedRunner(target=_segfault)
    try:
        res = r.run("add", "float32")
        assert [s.reason for s in res.failures()] == ["crash"], res.failures()
        assert "SIGSEGV" in res.failures()[0].detail
        r.target = h.run_case  # the next case gets a fresh worker
        res = r.run("add", "float32")
        assert res.samples and r.restarts == 1
    finally:
        r.close()


def test_hanging_case_times_out():
    r = h.IsolatedRunner(timeout=1.0, target=_hang)
    try:
        res = r.run("add", "float32")
        assert [s.reason for s in res.failures()] == ["timeout"]
    finally:
        r.close()


def test_worker_as_new_interpreter_where_cuda_driver_is_loaded(monkeypatch):
    # On a GPU host a forked worker cannot use CUDA once this process has
    # initialized the driver: the runner starts a new interpreter instead.
    monkeypatch.setattr(h, "_cuda_driver_loaded", lambda: True)
    r = h.IsolatedRunner()
    try:
        res = r.run("abs", "float32")
        assert res.samples and not res.failures() and not res.error, (res.error, res.failures())
        r.target = _segfault
        r._stop(kill=True)  # the next case starts a worker with the new target
        res = r.run("add", "float32")
        assert [s.reason for s in res.failures()] == ["crash"], res.failures()
    finally:
        r.close()


def test_a_result_no_less_accurate_than_pytorchs_passes():
    # Two rounding errors on each side of the float64 result: TensorPlay's
    # passes when it is no further from it than PyTorch's (plus the tolerance).
    exact = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    ulp = 2.0 ** -23
    torch_res = (exact + torch.tensor([3, 0, 0]) * ulp * 2).float()
    close = tp.from_numpy((exact - torch.tensor([2, 0, 0]) * ulp * 2).float().numpy())
    far = tp.from_numpy((exact + torch.tensor([0, 40, 0]) * ulp * 4).float().numpy())
    assert h._no_less_accurate(torch_res, close, exact, "float32")
    assert not h._no_less_accurate(torch_res, far, exact, "float32")
    ints = torch.tensor([1, 2]), tp.tensor([1, 3])
    assert not h._no_less_accurate(ints[0], ints[1], ints[0].double(), "float32")
