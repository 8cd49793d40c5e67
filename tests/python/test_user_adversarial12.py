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
