"""Extern calls inside a Stax region (issue 8, item 4).

An operator without a loop lowering (matmul, conv, sort, ...) used to send the
whole region to eager. It now runs as an extern call between generated kernels:
GEMMs through BLAS on the planned buffers (transposed and sliced operands read
in place), every other operator through its eager kernel, while the pointwise
and reduction work before it (prologue) and after it (epilogue) is fused.
Results are compared with eager (and NumPy for the GEMMs); the structure of the
generated code (number of kernels, extern calls) is read from the source."""
import re

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F


def _compile(fn, *args, options=None):
    cf = tp.compile(fn, strict_native=True, options=options)
    return cf, cf(*args)


def _kernel_names(cf):
    return re.findall(r"^static void (\w+)\(void\* const\* bufs", cf.last_source, re.M)


def _kernels(cf):
    return len(_kernel_names(cf))


def _externs(cf):
    # "// extern 0: addmm (gemm; ...)" lines of the entry, as (op, kind)
    return re.findall(r"^  // extern \d+: (\S+) \((\w+);", cf.last_source, re.M)


def _check(fn, *args, rtol=1e-5, atol=1e-5, options=None):
    cf, out = _compile(fn, *args, options=options)
    want = fn(*args)
    if isinstance(want, tuple):
        for o, w in zip(out, want):
            tp.testing.assert_close(o, w, rtol=rtol, atol=atol)
    else:
        tp.testing.assert_close(out, want, rtol=rtol, atol=atol)
    return cf


# ------------------------------------------------------------------ GEMMs


def test_gelu_of_matmul_plus_bias_is_one_gemm_and_one_epilogue_kernel():
    x, W, b = tp.randn(64, 32), tp.randn(32, 48), tp.randn(48)
    cf = _check(lambda x, W, b: F.gelu(x @ W + b), x, W, b)
    assert _externs(cf) == [("matmul", "gemm")]
    assert _kernels(cf) == 1


def test_layer_norm_around_it_stays_native():
    x, W, b = tp.randn(64, 32), tp.randn(32, 48), tp.randn(48)
    cf = _check(lambda x, W, b: F.layer_norm(F.gelu(x @ W + b), (48,)), x, W, b)
    assert _externs(cf) == [("matmul", "gemm")]
    assert 1 <= _kernels(cf) <= 2  # the epilogue, plus at most a separate layer_norm kernel


def test_linear_fuses_its_bias_into_the_gemm_and_reads_the_weight_transposed_in_place():
    # F.linear decomposes into transpose(W) + addmm(b, x, W^T): the transposed
    # weight is passed to BLAS with its strides and the bias pre-fills C, so
    # the only kernel is the activation.
    x, W, b = tp.randn(40, 24), tp.randn(56, 24), tp.randn(56)
    cf = _check(lambda x, W, b: F.silu(F.linear(x, W, b)), x, W, b)
    assert _externs(cf) == [("addmm", "gemm")]
    assert _kernels(cf) == 1


def test_linear_on_a_batched_input():
    x, W, b = tp.randn(3, 10, 24), tp.randn(16, 24), tp.randn(16)
    cf = _check(lambda x, W, b: F.relu(F.linear(x, W, b)), x, W, b)
    assert [k for _, k in _externs(cf)] == ["gemm"]


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: (a.t() @ b).relu(),             # transposed left operand
        lambda a, b: (a.t() @ b.t().t()).relu(),
        lambda a, b: tp.mm(a[:, 1:9], b[1:9, :4]) * 2,  # sliced: offset, leading dimension > columns
        lambda a, b: (a.t() @ b[:, 3]).relu(),       # matrix @ vector: the eager kernel
    ],
    ids=["transposed", "double_transpose", "sliced", "matvec"],
)
def test_strided_operands_are_read_in_place(fn):
    a, b = tp.randn(12, 9), tp.randn(12, 7)
    cf = _check(fn, a, b)
    # No copy of an operand: one kernel, the epilogue.
    assert _kernels(cf) == 1
    assert len(_externs(cf)) == 1


def test_operand_blas_cannot_read_is_copied_first():
    a, b = tp.randn(8, 20), tp.randn(10, 5)
    cf = _check(lambda a, b: (a[:, ::2] @ b) + 1, a, b)  # column stride 2: no leading dimension
    assert _externs(cf) == [("matmul", "gemm")]
    assert _kernels(cf) == 2  # the copy, the epilogue


def test_prologue_is_fused_into_the_kernel_that_writes_the_operand():
    x, W = tp.randn(16, 8), tp.randn(8, 4)
    cf = _check(lambda x, W: ((x * 2 + 1).relu() @ W).sigmoid(), x, W)
    assert _kernels(cf) == 2  # prologue (mul, add, relu), epilogue (sigmoid)
    src = cf.last_source
    k0, k1 = _kernel_names(cf)
    entry = src[src.index('extern "C"'):]
    assert entry.index(k0 + "(bufs);") < entry.index("// extern 0") < entry.index(k1 + "(bufs);")


def test_reduction_result_as_operand():
    x, W = tp.randn(6, 5, 8), tp.randn(8, 3)
    _check(lambda x, W: (x.sum(1) @ W).exp(), x, W)


def test_addmm_with_beta_alpha_and_broadcast_bias():
    b, x, W = tp.randn(1, 6), tp.randn(5, 4), tp.randn(4, 6)
    cf = _check(lambda b, x, W: tp.addmm(b, x, W, beta=0.5, alpha=2.0).tanh(), b, x, W)
    assert _externs(cf) == [("addmm", "gemm")]
    col = tp.randn(5, 1)
    _check(lambda b, x, W: tp.addmm(b, x.t().t(), W) + 1, col, x, W)
    # beta=0 ignores the bias, NaN included (as eager and PyTorch).
    nan = tp.full((5, 6), float("nan"))
    cf, out = _compile(lambda b, x, W: tp.addmm(b, x, W, beta=0.0) * 1, nan, x, W)
    assert np.isfinite(out.numpy()).all()


def test_addmm_bias_computed_in_the_region():
    b, x, W = tp.randn(6), tp.randn(5, 4), tp.randn(4, 6)
    _check(lambda b, x, W: tp.addmm(b.exp() * 2, x, W).relu(), b, x, W)


def test_bmm_baddbmm_and_broadcast_batched_matmul():
    a, b = tp.randn(3, 5, 4), tp.randn(3, 4, 6)
    cf = _check(lambda a, b: tp.bmm(a, b.transpose(1, 2).transpose(1, 2)) * 3, a, b)
    assert _externs(cf) == [("bmm", "gemm")]
    _check(lambda a, b: tp.bmm(a.transpose(1, 2), b[:, :6].transpose(1, 2)).relu(), tp.randn(3, 4, 5), tp.randn(3, 7, 4))
    c = tp.randn(3, 5, 6)
    _check(lambda c, a, b: tp.baddbmm(c, a, b, beta=2.0, alpha=0.5) + 1, c, a, b)
    # [2, 3, 5, 4] @ [3, 4, 6] (batch broadcast), [7, 5, 4] @ [4, 6] (one GEMM over the rows)
    _check(lambda a, b: (a @ b).relu(), tp.randn(2, 3, 5, 4), tp.randn(3, 4, 6))
    _check(lambda a, b: (a @ b).relu(), tp.randn(7, 5, 4), tp.randn(4, 6))
    _check(lambda a, b: (a @ b).relu(), tp.randn(7, 5, 4).transpose(0, 1), tp.randn(4, 6))


def test_float64_and_integer_matmul():
    a, b = tp.randn(5, 4, dtype=tp.float64), tp.randn(4, 3, dtype=tp.float64)
    cf = _check(lambda a, b: (a @ b) * 2, a, b, rtol=1e-12, atol=1e-12)
    assert _externs(cf) == [("matmul", "gemm")]
    ia, ib = tp.arange(12).reshape(3, 4), tp.arange(8).reshape(4, 2)
    cf = _check(lambda a, b: (a @ b) + 1, ia, ib)
    assert _externs(cf) == [("matmul", "kernel")]  # no integer BLAS: the eager kernel


def test_gemm_result_is_a_region_output_and_read_again():
    a, b = tp.randn(6, 5), tp.randn(5, 4)
    cf = _check(lambda a, b: a @ b, a, b)
    assert _kernels(cf) == 0
    cf = _check(lambda a, b: (a @ b, (a @ b).relu()), a, b)
    assert len(_externs(cf)) == 1


def test_two_layer_mlp():
    tp.manual_seed(0)
    m = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 16), nn.ReLU())
    x = tp.randn(20, 32)
    with tp.no_grad():
        cf = tp.compile(m, strict_native=True)
        out = cf(x)
        tp.testing.assert_close(out, m(x), rtol=1e-5, atol=1e-5)
    assert [k for _, k in _externs(cf)] == ["gemm", "gemm"]
    assert _kernels(cf) == 2  # GELU, ReLU


def test_scaled_dot_product_attention():
    q, k, v = tp.randn(2, 3, 8, 16), tp.randn(2, 3, 8, 16), tp.randn(2, 3, 8, 16)
    cf = _check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)
    assert [op for op, kind in _externs(cf) if kind == "gemm"] == ["matmul", "matmul"]


# ------------------------------------------------------------------ other externs


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_conv2d(bias):
    x, w = tp.randn(2, 3, 9, 9), tp.randn(4, 3, 3, 3)
    b = tp.randn(4) if bias else None
    cf = _check(lambda x, w: F.relu(F.conv2d(x * 0.5, w, b, padding=1)) + 1, x, w)
    assert [op for op, _ in _externs(cf)] == ["conv2d"]


def test_conv1d():
    x, w, b = tp.randn(2, 3, 11), tp.randn(5, 3, 3), tp.randn(5)
    _check(lambda x, w, b: F.conv1d(x, w, b, stride=2).tanh(), x, w, b)


def test_sort_and_topk_in_a_pointwise_chain():
    x = tp.randn(6, 10)
    cf = _check(lambda x: (lambda r: r[0] * 2 + r[1])(tp.sort(x.exp() - 1, dim=-1, descending=True)), x)
    assert [op for op, _ in _externs(cf)] == ["sort"]
    assert _kernels(cf) == 2  # prologue and epilogue
    cf = _check(lambda x: (lambda r: (r.values + 1, r.indices * 2))(tp.topk(x * x, 3, dim=0)), x)
    assert [op for op, _ in _externs(cf)] == ["topk"]
    _check(lambda x: tp.argsort(x.t() + 1, dim=1) + 1, x)


def test_operator_without_a_rule_is_a_generic_extern():
    x = tp.randn(5, 7)
    cf = _check(lambda x: tp.kthvalue(x * 2, 3, dim=1).values.relu() + tp.flip(x, [0]).sum(1), x)
    assert {op for op, kind in _externs(cf)} >= {"kthvalue"}
    assert all(kind == "kernel" for op, kind in _externs(cf) if op != "matmul")


def test_data_dependent_shapes_still_raise_under_strict_native():
    x = tp.randn(5, 7)
    with pytest.raises(tp.compiler.BackendError, match="nonzero"):
        tp.compile(lambda x: tp.nonzero(x > 0) + 1, strict_native=True)(x)


def test_shape_mismatch_reaching_an_extern_is_a_clear_error():
    cf = tp.compile(lambda a, b: (a @ b).relu(), strict_native=True)
    a, b = tp.randn(4, 5), tp.randn(5, 3)
    tp.testing.assert_close(cf(a, b), (a @ b).relu())
    with pytest.raises(ValueError, match=r"matmul|mm"):
        cf(tp.randn(4, 5), tp.randn(6, 3))
    with pytest.raises(ValueError, match=r"conv2d"):
        tp.compile(lambda x, w: F.conv2d(x, w).relu(), strict_native=True)(tp.randn(1, 3, 5, 5), tp.randn(2, 4, 3, 3))
    tp.testing.assert_close(cf(a, b), (a @ b).relu())  # still usable


def test_a_rule_that_declines_a_dtype_falls_back_to_an_extern_not_to_eager():
    # The pointwise rule of remainder has no integer form: the operator runs as
    # an extern call of its kernel, the multiply before and the add after fused.
    a = tp.arange(30).reshape(5, 6) - 12
    cf = _check(lambda a: tp.remainder(a * 3, 4) + 1, a)
    assert [op for op, _ in _externs(cf)] == ["remainder"]
    assert _kernels(cf) == 2


def test_view_operator_without_a_rule_is_copied_not_aliased():
    x = tp.randn(5, 6)
    cf = _check(lambda x: (tp.diagonal(x * 2) + 1, (x * 2).as_strided((5, 3), (6, 2)) - 1), x)
    assert len(_externs(cf)) == 2


def test_unfold_is_an_index_remap_not_an_extern():
    # unfold's windows are read where the consumer needs them (im2col fused
    # into the multiply), also from an unfold of an unfold.
    x = tp.randn(2, 3, 8, 8)
    cf = _check(lambda x: (x * 2).unfold(2, 3, 1).unfold(3, 3, 2).permute(0, 1, 4, 5, 2, 3).reshape(2, 27, -1) + 1,
                x)
    assert _externs(cf) == []


def test_operand_realized_for_an_extern_is_read_not_recomputed():
    # y is written once by the prologue: the extern reads it, and it is also
    # the region's first output (the same buffer), so there is no second kernel.
    x, W = tp.randn(8, 6), tp.randn(6, 5)
    cf = _check(lambda x, W: (lambda y: (y, y @ W))(F.gelu(x) * 2), x, W)
    assert _kernels(cf) == 1
    # A residual: the epilogue reads h from memory instead of recomputing gelu(x @ W1).
    W1, W2 = tp.randn(6, 6), tp.randn(6, 6)
    cf = _check(lambda x, W1, W2: (lambda h: h @ W2 + h)(F.gelu(x @ W1)), x, W1, W2)
    kernels = cf.last_source[cf.last_source.index("static void " + _kernel_names(cf)[0]):]
    assert kernels.count("0.707") == 1  # gelu's x / sqrt(2): computed in one kernel only


@pytest.mark.parametrize("name", ["transformer_encoder_layer", "convnet"])
def test_whole_models_compile_natively(name):
    # Every operator without a loop form runs as an extern call; no fallback.
    tp.manual_seed(0)
    if name == "transformer_encoder_layer":
        m, x = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), tp.randn(2, 10, 32)
    else:
        m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
        x = tp.randn(2, 3, 8, 8)
    m.eval()
    before = tp.compiler.metrics.fallback_count
    with tp.no_grad():
        cf = tp.compile(m, strict_native=True)
        tp.testing.assert_close(cf(x), m(x), rtol=1e-4, atol=1e-5)
    assert tp.compiler.metrics.fallback_count == before
    assert any(kind == "gemm" for _, kind in _externs(cf))


def test_error_raised_inside_an_extern_call_at_run_time_is_a_python_exception():
    # The index values are data: the same shapes pass every guard, so the bad
    # index reaches the extern call at run time. The kernel's error must come
    # back as the Python exception eager raises (it cannot unwind through the
    # generated code), and the compiled function stays usable.
    x, good, bad = tp.randn(5, 3), tp.tensor([0, 4, 2]), tp.tensor([0, 7, 2])
    f = lambda x, i: tp.index_select(x * 2, 0, i) + 1  # noqa: E731
    cf = tp.compile(f, strict_native=True)
    tp.testing.assert_close(cf(x, good), f(x, good))
    with pytest.raises((IndexError, ValueError)) as eager:
        f(x, bad)
    with pytest.raises(type(eager.value), match="index_select"):
        cf(x, bad)
    tp.testing.assert_close(cf(x, good), f(x, good))


def test_same_computed_operand_twice_is_written_once():
    x = tp.randn(6, 6)
    cf = _check(lambda x: (x.exp() @ x.exp()) * 2, x)
    assert _kernels(cf) == 2  # one prologue writing exp(x), the epilogue
    k0, k1 = _kernel_names(cf)
    prologue = cf.last_source[cf.last_source.index("static void " + k0):cf.last_source.index("static void " + k1)]
    assert prologue.count("// node ") == 1, prologue  # one loop nest, one buffer


def test_transposed_product_is_computed_transposed_not_copied():
    # (A B)^T -> B^T A^T (the weight gradient of a linear layer has this form): the
    # GEMM writes the output directly, no transposing copy kernel; a computed
    # operand that is transposed is written contiguously and read with permuted
    # strides, not written transposed.
    x, g = tp.randn(64, 32), tp.randn(64, 48)
    cf = _check(lambda x, g: (x.t() @ (g * 2)).t(), x, g)
    names = _kernel_names(cf)
    assert len(names) == 1 and "copy" not in names[0], names
    cf0 = _check(lambda x, g: (x.t() @ (g * 2)).t(), x, g, options={"disable_passes": ["transpose_products"]})
    assert any("copy" in n for n in _kernel_names(cf0))
    # permute(permute(x)) and a view to the same shape do nothing
    cf = _check(lambda x: x.t().t().view(64, 32) * 3, x)
    assert _kernels(cf) == 1
