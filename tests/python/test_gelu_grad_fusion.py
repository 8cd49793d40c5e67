"""The erf gelu's derivative as one call in CPU kernels (issue 10, Example 5.1).

The derivative formula emits erfc(-x/sqrt2)/2 + x exp(-x^2/2)/sqrt(2 pi); on
AVX2 / AVX-512 hosts Stax replaces that sum by tp_gelu_grad, which takes the
exp from erfc's own range reduction (stax/backend/gelu_grad_fusion.cpp,
codegen/cpp/prelude.cpp). The gradients must stay those of the unfused
formula (eager, the option "stax_gelu_grad": "0") within float rounding, in
every region of erfc and where erfc clamps (|x| > 14.3, the block falling back
to the unfused sequence), with NaN and infinities as eager.
"""
import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F

FUSED = tp.compiler.host_isa() in ("avx2", "avx512")


def inputs():
    dense = np.linspace(-20.0, 20.0, 40001)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-45, -0.7517916, 14.3, 14.32, 14.33, -14.32,
                -14.33, -14.4, 14.4, 30.0, -30.0, 3.4e38, -3.4e38, 10.125, -10.125, 0.5, -0.5, 3.0, -3.0]
    # Large |x| next to ordinary values in one vector: both paths of the block.
    mixed = np.tile(np.array([-15.0, 1.0, 0.25, -2.0, 16.0, -0.5, 7.0, -7.0]), 8)
    return np.concatenate([dense, specials, mixed]).astype(np.float32)


def grad_of_gelu_sum(x, options=None):
    t = tp.tensor(x, requires_grad=True)
    fn = (lambda a: F.gelu(a).sum()) if options is None else tp.compile(
        lambda a: F.gelu(a).sum(), strict_native=True, options=options)
    fn(t).backward()
    return t.grad.numpy()


def reference(x):
    xd = torch.tensor(x.astype(np.float64), requires_grad=True)
    torch.nn.functional.gelu(xd).sum().backward()
    return xd.grad.numpy()


def test_fused_gelu_grad_is_in_the_kernel_and_the_option_turns_it_off(cache_dir):
    x = inputs()
    grad_of_gelu_sum(x, options={})
    fused_src = [p.read_text() for p in cache_dir.rglob("kernel.cpp")]
    assert any("tp_gelu_grad(" in s for s in fused_src) == FUSED
    grad_of_gelu_sum(x, options={"stax_gelu_grad": "0"})
    all_src = [p.read_text() for p in cache_dir.rglob("kernel.cpp")]
    assert sum("tp_gelu_grad(" in s for s in all_src) == (1 if FUSED else 0)


def test_fused_gelu_grad_matches_eager_and_the_unfused_kernel():
    x = inputs()
    fused, unfused, eager = grad_of_gelu_sum(x, {}), grad_of_gelu_sum(x, {"stax_gelu_grad": "0"}), grad_of_gelu_sum(x)
    nan = np.isnan(eager)
    assert np.array_equal(np.isnan(fused), nan) and np.array_equal(np.isnan(unfused), nan)
    # gelu'(inf) = 1 + inf * 0: NaN, as eager and PyTorch's formula; gelu'(-inf) likewise.
    assert nan[np.isinf(x)].all()
    ok = ~nan
    # Phi(x) has the same bits in both (same erfc of the same argument); x phi(x)
    # is rounded differently: within about one float step of the terms (<= 1.24),
    # which is more than one step of the result where they cancel (x < -0.75).
    np.testing.assert_allclose(fused[ok], eager[ok], rtol=4e-7, atol=1.5e-7)
    np.testing.assert_allclose(fused[ok], unfused[ok], rtol=4e-7, atol=1.5e-7)
    # Where erfc clamps the block takes the unfused sequence: the same bits.
    far = ok & (np.abs(x) > 14.33)
    assert np.array_equal(fused[far], unfused[far])


def test_fused_gelu_grad_is_as_accurate_as_the_unfused_formula():
    # Against the float64 derivative, per region; the negative side cancels in
    # both forms (Phi(x) ~ -x phi(x)), so it is compared in absolute terms there.
    x = inputs()
    fin = np.isfinite(x)
    want = reference(x[fin])
    for got in (grad_of_gelu_sum(x, {}), grad_of_gelu_sum(x, {"stax_gelu_grad": "0"})):
        err = np.abs(got[fin].astype(np.float64) - want)
        pos = x[fin] >= -0.5
        assert (err[pos] / np.abs(want[pos])).max() < 2e-6
        assert err.max() < 2e-7


@pytest.mark.parametrize("m,k", [(64, 48), (33, 17)])
def test_example_5_1_step_gradient_with_fused_gelu_grad(m, k):
    # The Example 5.1 step (gelu(x @ W).mean()) through the AOT layer: the
    # backward region takes the fused call; W's gradient as eager's.
    rng = np.random.default_rng(0)
    xa = (rng.standard_normal((m, k)) * 4).astype(np.float32)
    wa = rng.standard_normal((k, k)).astype(np.float32)

    def loss(x, w):
        return F.gelu(x @ w).mean()

    w_e = tp.tensor(wa, requires_grad=True)
    loss(tp.tensor(xa), w_e).backward()
    w_c = tp.tensor(wa, requires_grad=True)
    lc = tp.compile(loss, strict_native=True)(tp.tensor(xa), w_c)
    lc.backward()
    np.testing.assert_allclose(lc.item(), loss(tp.tensor(xa), tp.tensor(wa)).item(), rtol=1e-5)
    np.testing.assert_allclose(w_c.grad.numpy(), w_e.grad.numpy(), rtol=2e-5, atol=1e-6)
    assert tp.compiler.metrics.fallback_count == 0


@pytest.mark.skipif(tp.compiler.host_isa() != "avx512", reason="needs an AVX-512 host to also run the AVX2 form")
def test_avx2_form_of_the_fused_gelu_grad(tmp_path):
    # The AVX2 prelude spells the rare-branch test differently (movmskps);
    # compile and check it in a child process pinned to avx2.
    import os
    import subprocess
    import sys
    code = ("import numpy as np, tensorplay as tp, tensorplay.nn.functional as F\n"
            "x = np.array([-15.0, 1.0, 0.25, -2.0, 16.0, -0.5, 7.0, np.nan, -40.0, 3.0, 0.0, -1.0] * 3, np.float32)\n"
            "def g(opts):\n"
            "    t = tp.tensor(x, requires_grad=True)\n"
            "    tp.compile(lambda a: F.gelu(a).sum(), strict_native=True, options=opts)(t).backward()\n"
            "    return t.grad.numpy()\n"
            "f, u = g({}), g({'stax_gelu_grad': '0'})\n"
            "np.testing.assert_allclose(f, u, rtol=4e-7, atol=1.5e-7)\n"
            "print(tp.compiler.host_isa())\n")
    env = dict(os.environ, TP_CACHE_DIR=str(tmp_path), TP_STAX_ISA="avx2")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["avx2"]
    assert any("tp_gelu_grad(" in p.read_text() and "movmskps256" in p.read_text() for p in tmp_path.rglob("kernel.cpp"))
