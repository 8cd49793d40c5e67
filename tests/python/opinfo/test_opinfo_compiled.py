"""tp.compile against eager TensorPlay over PyTorch's OpInfo samples: forward
in float32, and forward + gradients in float64 (compile_walk.py says how).

A few samples of every operator TensorPlay covers; the known differences are
listed below with their reason, and a listed case that starts to pass fails
the test too (so the list shrinks with the fixes)."""
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("expecttest")  # torch's OpInfo module imports it

from . import harness as H  # noqa: E402
from .compile_walk import run_compiled_case  # noqa: E402

FWD_SAMPLES, GRAD_SAMPLES = 3, 2

# (key, "fwd" | "grad") -> why compiled differs from eager there.
KNOWN = {
    ("narrow", "fwd"): "a tensor start is data: the capture raises CaptureError asking for an int",
    ("narrow", "grad"): "a tensor start is data: the capture raises CaptureError asking for an int",
    ("resize_", "fwd"): "resize_ may reallocate memory, which a capture cannot record: it raises CaptureError",
    ("resize_as_", "fwd"): "resize_ may reallocate memory, which a capture cannot record: it raises CaptureError",
    ("zero_", "grad"): "x.clone().zero_() does not depend on x: the compiled result has no grad_fn "
                       "(eager's has one, with zero gradient)",
}
# With TP_OPINFO_COMPILED_DEVICE=cuda (none at the moment: `to` between devices,
# the last entry, is a graph operator now).
KNOWN_CUDA = {}

try:
    KEYS = sorted({k for k, _ in H.covered_cases()})
except Exception as e:  # pragma: no cover - torch without its testing package
    pytest.skip(f"PyTorch's OpInfo database is unavailable: {e}", allow_module_level=True)
# TP_OPINFO_COMPILED_DEVICE=cuda runs the same walk with CUDA tensors (eager CUDA as reference).
DEVICE = os.environ.get("TP_OPINFO_COMPILED_DEVICE", "cpu")
if DEVICE == "cuda":
    KNOWN = {**KNOWN, **KNOWN_CUDA}


@pytest.mark.parametrize("key", KEYS)
def test_compiled_matches_eager(key):
    got = {}
    for kind, dtype, limit, grads in (("fwd", "float32", FWD_SAMPLES, False),
                                      ("grad", "float64", GRAD_SAMPLES, True)):
        failures = run_compiled_case(key, dtype, limit, grads, DEVICE)
        if failures:
            got[kind] = failures
    unexpected = {k: v for k, v in got.items() if (key, k) not in KNOWN}
    assert not unexpected, f"{key}: compiled differs from eager: {unexpected}"
    fixed = [k for (kk, k) in KNOWN if kk == key and k not in got and DEVICE == "cpu"]
    assert not fixed, f"{key}: {fixed} now match eager; remove them from KNOWN"
