"""PyTorch arguments and names that TensorPlay used to refuse although the operation exists.

Each case is one call written once and run with both libraries (`m` is torch or tensorplay,
`F` its nn.functional, `T` builds a tensor of that library from a NumPy array); the results
(tensors, tuples of tensors, or plain Python values such as strides) must agree.
"""
import re

import numpy as np
import pytest
torch = pytest.importorskip("torch")
tF = torch.nn.functional

import tensorplay as tp
import tensorplay.nn.functional as pF

RNG = np.random.default_rng(0)
A23 = RNG.standard_normal((2, 3)).astype(np.float32)
A4 = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
A5 = RNG.standard_normal((1, 2, 3, 2, 2)).astype(np.float32)
POS = np.abs(RNG.standard_normal((2, 3))).astype(np.float32) * 0.5 + 0.25  # in (0, 1) mostly: acos, atanh, ...
BIG = np.abs(RNG.standard_normal((2, 3))).astype(np.float32) + 1.5         # > 1: acosh
I16 = (np.arange(32).reshape(1, 2, 4, 4) * 7 % 23 - 11).astype(np.int64)
SEQ = np.array([1, 3, 5, 7, 9], dtype=np.int64)
VALS = np.array([[3, 6, 9], [0, 10, 5]], dtype=np.int64)


def _lib(m):
    return (torch, tF) if m == "torch" else (tp, pF)


def _to_tensor(mod):
    return lambda a: mod.tensor(a)


def _plain(x):
    """Results as comparable Python / NumPy values."""
    if isinstance(x, (torch.Tensor, tp.Tensor)):
        dt = str(x.dtype).rsplit(".", 1)[-1]
        return ("tensor", dt, tuple(x.shape), x.detach().double().numpy() if dt == "bfloat16" else x.detach().numpy())
    if isinstance(x, (tuple, list)):
        return tuple(_plain(v) for v in x)
    if isinstance(x, (torch.dtype, tp.dtype)):
        return ("dtype", str(x).rsplit(".", 1)[-1])
    return x


def _assert_same(a, b, where):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        assert isinstance(b, tuple) and b and b[0] == "tensor", f"{where}: torch gave a tensor, tensorplay {b!r}"
        assert a[1] == b[1], f"{where}: dtype {a[1]} (torch) vs {b[1]} (tensorplay)"
        assert a[2] == b[2], f"{where}: shape {a[2]} (torch) vs {b[2]} (tensorplay)"
        np.testing.assert_allclose(b[3], a[3], rtol=1e-5, atol=1e-6, err_msg=where)
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} (torch) vs {b!r} (tensorplay)"


def run_both(case):
    out = []
    for name in ("torch", "tp"):
        m, F = _lib(name)
        out.append(_plain(case(m, F, _to_tensor(m))))
    return out


# (id, call): each call runs with torch and with tensorplay.
PAIRS = [
    # ---- device= on every factory, *_like, new_*, tensor/as_tensor ----
    ("zeros", lambda m, F, T: m.zeros(2, 3, device="cpu")),
    ("ones_cpu0", lambda m, F, T: m.ones(2, device="cpu:0")),
    ("empty_device_obj", lambda m, F, T: m.empty(2, 3, device=m.device("cpu")).shape),
    ("full", lambda m, F, T: m.full((2,), 3.5, device="cpu")),
    ("arange", lambda m, F, T: m.arange(5, device="cpu")),
    ("arange_start", lambda m, F, T: m.arange(1, 7, 2, device=m.device("cpu"))),
    ("linspace", lambda m, F, T: m.linspace(0, 1, 5, device="cpu")),
    ("logspace", lambda m, F, T: m.logspace(0, 2, 5, device="cpu")),
    ("logspace_base", lambda m, F, T: m.logspace(-1, 3, 5, base=2.0, dtype=m.float64)),
    ("eye", lambda m, F, T: m.eye(3, device="cpu")),
    ("eye_m", lambda m, F, T: m.eye(2, 3, device="cpu")),
    ("rand", lambda m, F, T: m.rand(2, 3, device="cpu").shape),
    ("randn", lambda m, F, T: m.randn(4, device="cpu").dtype),
    ("randint", lambda m, F, T: (m.randint(0, 5, (3,), device="cpu").dtype, m.randint(5, (2,), device="cpu").shape)),
    ("randperm", lambda m, F, T: m.randperm(6, device="cpu").sort().values),
    ("tensor", lambda m, F, T: m.tensor([1, 2], device="cpu")),
    ("tensor_dev_obj", lambda m, F, T: m.tensor([1.5], dtype=m.float64, device=m.device("cpu", 0))),
    ("as_tensor", lambda m, F, T: m.as_tensor([1.0, 2.0], device="cpu")),
    ("zeros_like", lambda m, F, T: m.zeros_like(T(A23), device="cpu")),
    ("ones_like", lambda m, F, T: m.ones_like(T(A23), dtype=m.int32, device="cpu")),
    ("full_like", lambda m, F, T: m.full_like(T(A23), 2, device="cpu")),
    ("empty_like", lambda m, F, T: m.empty_like(T(A23), device="cpu").shape),
    ("rand_like", lambda m, F, T: m.rand_like(T(A23), device="cpu").shape),
    ("randn_like", lambda m, F, T: m.randn_like(T(A23), device="cpu").shape),
    ("randint_like", lambda m, F, T: m.randint_like(T(A23), 5, device="cpu").shape),
    ("new_zeros", lambda m, F, T: T(A23).new_zeros(2, device="cpu")),
    ("new_ones", lambda m, F, T: T(A23).new_ones((2, 2), device=m.device("cpu"))),
    ("new_full", lambda m, F, T: T(A23).new_full((2,), 7.0, device="cpu")),
    ("new_empty", lambda m, F, T: T(A23).new_empty(3, device="cpu").shape),
    ("new_tensor", lambda m, F, T: T(A23).new_tensor([1.0, 2.0], device="cpu")),
    # ---- .to() / conversions / device objects ----
    ("to_cpu", lambda m, F, T: T(A23).to("cpu")),
    ("to_device_dtype_kw", lambda m, F, T: T(A23).to(device="cpu", dtype=m.float64)),
    ("to_device_obj_dtype", lambda m, F, T: T(A23).to(m.device("cpu"), m.float16)),
    ("to_cpu0", lambda m, F, T: T(A23).to("cpu:0")),
    ("cpu", lambda m, F, T: T(A23).cpu()),
    ("float_mf", lambda m, F, T: T(I16).float(memory_format=m.contiguous_format)),
    ("double_mf", lambda m, F, T: T(A23).double(memory_format=m.preserve_format)),
    ("long_mf", lambda m, F, T: T(A23).long(memory_format=m.contiguous_format)),
    ("device_str", lambda m, F, T: (str(T(A23).device), T(A23).device.type, T(A23).device.index)),
    ("device_eq", lambda m, F, T: (T(A23).device == m.device("cpu"), m.device("cpu") == m.device("cpu:0"))),
    ("device_parse", lambda m, F, T: (str(m.device("cpu:0")), m.device("cpu", 0).index, repr(m.device("cpu")))),
    ("generator_device", lambda m, F, T: (str(m.Generator(device="cpu").device), m.Generator().device.type)),
    ("module_device", lambda m, F, T: m.nn.Linear(2, 3, device="cpu:0").to("cpu", m.float64).weight.dtype),
    ("is_cpu", lambda m, F, T: (T(A23).is_cpu, T(A23).is_cuda, T(A23).get_device())),
    # ---- memory_format= ----
    ("contiguous_cl_stride", lambda m, F, T: T(A4).contiguous(memory_format=m.channels_last).stride()),
    ("contiguous_cl_values", lambda m, F, T: T(A4).contiguous(memory_format=m.channels_last)),
    ("contiguous_cf", lambda m, F, T: T(A4).contiguous(memory_format=m.channels_last)
     .contiguous(memory_format=m.contiguous_format).stride()),
    ("is_contiguous_cl", lambda m, F, T: (T(A4).contiguous(memory_format=m.channels_last).is_contiguous(),
                                          T(A4).contiguous(memory_format=m.channels_last)
                                          .is_contiguous(memory_format=m.channels_last),
                                          T(A4).is_contiguous(memory_format=m.channels_last))),
    ("clone_cl", lambda m, F, T: T(A4).clone(memory_format=m.channels_last).stride()),
    ("clone_preserve", lambda m, F, T: T(A23).clone(memory_format=m.preserve_format)),
    ("empty_cl", lambda m, F, T: m.empty(2, 3, 4, 5, memory_format=m.channels_last).stride()),
    ("zeros_like_cl", lambda m, F, T: m.zeros_like(T(A4), memory_format=m.channels_last).stride()),
    ("ones_like_cf", lambda m, F, T: m.ones_like(T(A23), memory_format=m.contiguous_format)),
    ("to_cl", lambda m, F, T: T(A4).to(memory_format=m.channels_last).stride()),
    ("float_cl", lambda m, F, T: T(A4).float(memory_format=m.channels_last).stride()),
    ("cl3d", lambda m, F, T: T(A5).contiguous(memory_format=m.channels_last_3d).stride()),
    ("module_to_cl", lambda m, F, T: m.nn.Conv2d(3, 4, 3).to(memory_format=m.channels_last).weight.stride()),
    ("cl_math", lambda m, F, T: (T(A4).contiguous(memory_format=m.channels_last) * 2 + 1).sum((0, 2))),
    # ---- searchsorted / bucketize ----
    ("searchsorted_int32", lambda m, F, T: m.searchsorted(T(SEQ), T(VALS), out_int32=True)),
    ("searchsorted_right", lambda m, F, T: m.searchsorted(T(SEQ), T(VALS), right=True)),
    ("searchsorted_side", lambda m, F, T: m.searchsorted(T(SEQ), T(VALS), side="right")),
    ("bucketize_int32", lambda m, F, T: m.bucketize(T(VALS), T(SEQ), out_int32=True, right=True)),
    # ---- unbiased= ----
    ("var_mean_unbiased", lambda m, F, T: m.var_mean(T(A23), 1, unbiased=False)),
    ("std_mean_unbiased", lambda m, F, T: m.std_mean(T(A23), unbiased=False)),
    ("var_mean_positional", lambda m, F, T: m.var_mean(T(A23), [0, 1], True, True)),
    ("var_mean_bool", lambda m, F, T: m.var_mean(T(A23), False)),
    ("var_bool", lambda m, F, T: (T(A23).var(False), T(A23).std(True))),
    # ---- narrow with a tensor start, cdist compute_mode, repeat_interleave output_size ----
    ("narrow_tensor", lambda m, F, T: T(A23).narrow(1, m.tensor(1), 2)),
    ("narrow_fn_tensor", lambda m, F, T: m.narrow(T(A23), 0, m.tensor(1), 1)),
    ("cdist_mm", lambda m, F, T: m.cdist(T(A23), T(A23[::-1].copy()), compute_mode="use_mm_for_euclid_dist")),
    ("cdist_if", lambda m, F, T: m.cdist(T(A23), T(A23), compute_mode="use_mm_for_euclid_dist_if_necessary")),
    ("cdist_no", lambda m, F, T: m.cdist(T(A23), T(A23), p=1.0, compute_mode="donot_use_mm_for_euclid_dist")),
    ("repeat_interleave_os", lambda m, F, T: m.repeat_interleave(T(A23), 2, dim=0, output_size=4)),
    ("repeat_interleave_t_os", lambda m, F, T: T(A23).repeat_interleave(m.tensor([1, 2]), dim=0, output_size=3)),
    ("repeat_interleave_only_os", lambda m, F, T: m.repeat_interleave(m.tensor([1, 2]), output_size=3)),
    # ---- pooling: return_indices, divisor_override, integers ----
    ("max_pool1d_ri", lambda m, F, T: F.max_pool1d(T(A4[0]), 2, return_indices=True)),
    ("max_pool1d_ri_pad", lambda m, F, T: F.max_pool1d(T(A4[0]), 3, 2, 1, return_indices=True)),
    ("max_pool2d_ri", lambda m, F, T: F.max_pool2d(T(A4), 2, return_indices=True)),
    ("MaxPool1d_ri", lambda m, F, T: m.nn.MaxPool1d(2, return_indices=True)(T(A4[0]))),
    ("MaxPool2d_ri", lambda m, F, T: m.nn.MaxPool2d(2, 1, return_indices=True)(T(A4))),
    ("AvgPool1d", lambda m, F, T: m.nn.AvgPool1d(2)(T(A4[0]))),
    ("avg_pool2d_divisor", lambda m, F, T: F.avg_pool2d(T(A4), 2, divisor_override=3)),
    ("avg_pool2d_divisor_pad", lambda m, F, T: F.avg_pool2d(T(A4), 3, 1, 1, divisor_override=2)),
    ("AvgPool2d_divisor", lambda m, F, T: m.nn.AvgPool2d(2, divisor_override=5)(T(A4))),
    ("max_pool2d_int64", lambda m, F, T: F.max_pool2d(T(I16), 2)),
    ("max_pool2d_int_ri", lambda m, F, T: F.max_pool2d(T(I16).to(m.int32), 3, 1, 1, return_indices=True)),
    ("max_pool2d_uint8", lambda m, F, T: F.max_pool2d(T(np.abs(I16)).to(m.uint8), 2)),
    ("avg_pool2d_int64", lambda m, F, T: F.avg_pool2d(T(I16), 2)),
    ("avg_pool2d_int64_pad", lambda m, F, T: F.avg_pool2d(T(I16), 3, 1, 1, count_include_pad=False)),
    # ---- integer convolution (PyTorch allows it on the CPU) ----
    ("conv2d_int", lambda m, F, T: F.conv2d(T(I16), T(I16[:, :, :2, :3].repeat(3, 0)[:3]), T(np.array([1, -2, 3])),
                                             padding=1, stride=(1, 2))),
    ("conv2d_int_groups", lambda m, F, T: F.conv2d(T(I16), T(I16[:, :1, :2, :2].repeat(2, 0)[:4]), groups=2)),
    ("conv1d_int", lambda m, F, T: F.conv1d(T(I16[0]), T(I16[0, :, :, :2]), padding=2, dilation=2)),
    # ---- F.pad with negative amounts crops ----
    ("pad_crop", lambda m, F, T: F.pad(T(A23), (-1, -1))),
    ("pad_mixed", lambda m, F, T: F.pad(T(A4), (-1, 2, 1, -2))),
    ("pad_crop_value", lambda m, F, T: F.pad(T(A23), (2, -1, -1, 0), value=3.0)),
    ("pad_replicate_crop", lambda m, F, T: F.pad(T(A4), (-1, 2, 1, -1), mode="replicate")),
    # ---- alternative names (functions and methods) ----
    ("arccos", lambda m, F, T: (m.arccos(T(POS)), T(POS).arccos())),
    ("arcsin", lambda m, F, T: (m.arcsin(T(POS)), T(POS).arcsin())),
    ("arctan", lambda m, F, T: (m.arctan(T(A23)), T(A23).arctan())),
    ("arccosh", lambda m, F, T: (m.arccosh(T(BIG)), T(BIG).arccosh())),
    ("arcsinh", lambda m, F, T: (m.arcsinh(T(A23)), T(A23).arcsinh())),
    ("arctanh", lambda m, F, T: (m.arctanh(T(POS) * 0.5), (T(POS) * 0.5).arctanh())),
    ("arctan2", lambda m, F, T: (m.arctan2(T(A23), T(POS)), T(A23).arctan2(T(POS)))),
    ("arc_inplace", lambda m, F, T: (T(POS).arccos_(), T(POS).arcsin_(), T(A23).arctan_(), T(BIG).arccosh_(),
                                     T(A23).arcsinh_(), (T(POS) * 0.5).arctanh_(), T(A23).arctan2_(T(POS)))),
    ("greater", lambda m, F, T: (m.greater(T(A23), 0), T(A23).greater(T(POS)))),
    ("greater_equal", lambda m, F, T: (m.greater_equal(T(A23), 0), T(A23).greater_equal(0))),
    ("less", lambda m, F, T: (m.less(T(A23), 0), T(A23).less(T(POS)))),
    ("less_equal", lambda m, F, T: (m.less_equal(T(A23), 0), T(A23).less_equal(0))),
    ("not_equal", lambda m, F, T: (m.not_equal(T(A23), T(A23)), T(A23).not_equal(0))),
    ("compare_inplace", lambda m, F, T: (T(A23).greater_(0), T(A23).greater_equal_(0), T(A23).less_(0),
                                         T(A23).less_equal_(0), T(A23).not_equal_(0))),
    ("concat", lambda m, F, T: (m.concat([T(A23), T(POS)]), m.concatenate([T(A23), T(POS)], dim=1))),
    ("ger", lambda m, F, T: (m.ger(T(SEQ), T(SEQ[:3])), T(SEQ).ger(T(SEQ[:2])))),
    ("argwhere", lambda m, F, T: (m.argwhere(T(A23) > 0), (T(A23) > 0).argwhere())),
    ("clip", lambda m, F, T: (m.clip(T(A23), -0.5, 0.5), T(A23).clip(max=0.1), T(A23).clip_(-0.2, 0.2))),
    ("absolute_negative", lambda m, F, T: (m.absolute(T(A23)), T(A23).negative(), T(A23).absolute_())),
    ("multiply_divide", lambda m, F, T: (m.multiply(T(A23), 3), m.divide(T(A23), 2, rounding_mode="floor"),
                                         m.true_divide(T(SEQ), 2), m.subtract(T(A23), 1, alpha=2))),
    ("fix", lambda m, F, T: (m.fix(T(A23) * 3), (T(A23) * 3).fix())),
    ("swap_move", lambda m, F, T: (m.swapaxes(T(A4), 0, 2).shape, T(A4).swapdims(1, 3).shape,
                                   m.moveaxis(T(A4), 0, -1).shape, T(A4).moveaxis([0, 1], [2, 3]).shape)),
    ("row_stack", lambda m, F, T: m.row_stack([T(A23), T(POS)])),
    ("broadcast_to", lambda m, F, T: (m.broadcast_to(T(A23[0]), (4, 3)), T(A23[:1]).broadcast_to((2, 3)))),
    ("ndimension_nelement", lambda m, F, T: (T(A4).ndimension(), T(A4).nelement())),
    ("inplace_functions", lambda m, F, T: tuple(getattr(m, n)(T(POS)) for n in (
        "abs_", "acos_", "arccos_", "asin_", "arcsinh_", "atan_", "ceil_", "cos_", "cosh_", "erf_", "erfc_", "exp2_",
        "exp_", "expm1_", "fix_", "floor_", "frac_", "log10_", "log1p_", "log2_", "log_", "logit_", "neg_",
        "negative_", "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinh_", "sqrt_", "square_",
        "tan_", "tanh_", "trunc_", "zero_", "nan_to_num_"))),
    ("inplace_functions_args", lambda m, F, T: (m.clamp_(T(A23), -0.1, 0.1), m.clip_(T(A23), max=0.0),
                                                m.clamp_min_(T(A23), 0.2), m.clamp_max_(T(A23), 0.2),
                                                m.fill_(T(A23), 2.5), m.arccosh_(T(BIG)), m.arctanh_(T(POS) * 0.5))),
    ("where_method_detach", lambda m, F, T: (T(A23).where(T(A23) > 0, T(POS)), m.detach(T(A23)),
                                             m.get_device(T(A23)))),
]


def _documented_aliases(namespace):
    """(alias, target) for every public callable whose docstring says it is an alias."""
    found = []
    for name in dir(namespace):
        f = getattr(namespace, name, None) if not name.startswith("_") else None
        doc = getattr(f, "__doc__", None) if callable(f) else None
        m = re.search(r"[Aa]lias (?:for|of) :?(?:func|meth|attr)?:?`?(?:torch\.|Tensor\.)?([\w.]+)`?",
                      doc if isinstance(doc, str) else "")
        if m:
            found.append((name, m.group(1).split(".")[-1].rstrip("()")))
    return found


def test_every_documented_torch_alias_of_an_existing_op_exists():
    # Walks torch's namespace and Tensor: a name PyTorch documents as an alias of an operation that
    # TensorPlay has must exist here too (so a new alias in PyTorch fails this test until added).
    documented = _documented_aliases(torch)
    assert len(documented) > 20 and ("arccos", "acos") in documented  # the walk itself works
    missing = [f"torch.{a} -> {t}" for a, t in documented
               if not hasattr(tp, a) and (hasattr(tp, t) or hasattr(tp.Tensor, t))]
    missing += [f"Tensor.{a} -> {t}" for a, t in _documented_aliases(torch.Tensor)
                if not hasattr(tp.Tensor, a) and hasattr(tp.Tensor, t)]
    assert not missing, missing
    # and the in-place functions of methods TensorPlay has (torch.relu_(x) ...)
    inplace = [n for n in dir(torch) if n.endswith("_") and not n.startswith("_") and callable(getattr(torch, n))
               and hasattr(tp.Tensor, n) and not hasattr(tp, n)]
    assert not inplace, inplace


@pytest.mark.parametrize("case", [c for _, c in PAIRS], ids=[n for n, _ in PAIRS])
def test_torch_call_matches(case):
    want, got = run_both(case)
    _assert_same(want, got, "result")


def test_alias_is_the_same_operator_under_autograd():
    x = tp.tensor(POS, requires_grad=True)
    tp.arccos(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), -1 / np.sqrt(1 - POS.astype(np.float64) ** 2), rtol=1e-5)


def test_channels_last_result_keeps_autograd():
    x = tp.tensor(A4, requires_grad=True)
    y = x.contiguous(memory_format=tp.channels_last)
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * A4, rtol=1e-6)


def test_memory_format_objects():
    assert repr(tp.channels_last) == "tensorplay.channels_last"
    assert tp.contiguous_format != tp.channels_last and tp.preserve_format == tp.memory_format.preserve_format
    # torch's own objects are understood too (interop code passes them through).
    assert tp.ones(2, 3, 4, 5).contiguous(memory_format=torch.channels_last).stride() == (60, 1, 15, 3)


# ---- devices that do not exist here raise, never silently run on the CPU ----
BAD_DEVICES = ["cuda", "cuda:1", "meta", "mps", tp.device("cuda"), tp.device("cuda", 0), 0, torch.device("meta")]


@pytest.mark.parametrize("dev", BAD_DEVICES, ids=[str(d) for d in BAD_DEVICES])
@pytest.mark.parametrize("call", [
    lambda d: tp.zeros(2, device=d),
    lambda d: tp.arange(3, device=d),
    lambda d: tp.linspace(0, 1, 3, device=d),
    lambda d: tp.logspace(0, 1, 3, device=d),
    lambda d: tp.eye(2, device=d),
    lambda d: tp.randn(2, device=d),
    lambda d: tp.randperm(2, device=d),
    lambda d: tp.zeros_like(tp.ones(2), device=d),
    lambda d: tp.tensor([1.0], device=d),
    lambda d: tp.as_tensor([1.0], device=d),
    lambda d: tp.ones(2).new_zeros(2, device=d),
    lambda d: tp.ones(2).new_tensor([1], device=d),
    lambda d: tp.ones(2).to(d),
    lambda d: tp.ones(2).to(device=d, dtype=tp.float64),
    lambda d: tp.nn.Linear(2, 2, device=d),
    lambda d: tp.nn.Linear(2, 2).to(d),
    lambda d: tp.Generator(device=d),
], ids=["zeros", "arange", "linspace", "logspace", "eye", "randn", "randperm", "zeros_like", "tensor", "as_tensor",
        "new_zeros", "new_tensor", "to", "to_kw", "Linear", "Module.to", "Generator"])
def test_unavailable_device_raises(call, dev):
    if tp.cuda.is_available() and (isinstance(dev, int) or "cuda" in str(dev)):
        pytest.skip("a CUDA GPU is present: test_cuda.py covers the CUDA device")
    with pytest.raises(RuntimeError, match="is not available.*'cpu'"):
        call(dev)


def test_device_errors_and_cuda():
    with pytest.raises(RuntimeError, match="device type at start of device string: foo"):
        tp.device("foo")
    with pytest.raises(RuntimeError, match="Invalid device string"):
        tp.device("cpu:x")
    if not tp.cuda.is_available():  # with a GPU, test_cuda.py covers .cuda()
        with pytest.raises(RuntimeError, match="cuda.*not available"):
            tp.ones(2).cuda()
    with pytest.raises(RuntimeError, match="pin_memory"):
        tp.tensor([1.0], pin_memory=True)
    with pytest.raises(TypeError, match="device"):
        tp.zeros(2, device=1.5)


def test_memory_format_errors():
    with pytest.raises(RuntimeError, match="contiguous: required rank 4 tensor to use channels_last"):
        tp.ones(2, 3).contiguous(memory_format=tp.channels_last)
    with pytest.raises(RuntimeError, match="empty: required rank 5 tensor to use channels_last_3d"):
        tp.empty(2, 3, memory_format=tp.channels_last_3d)
    with pytest.raises(TypeError, match="memory_format"):
        tp.ones(2).float(memory_format="channels_last")
    with pytest.raises(TypeError, match="unexpected keyword argument 'memory_format'"):
        tp.zeros(2, memory_format=tp.contiguous_format)  # torch.zeros has none either


def test_argument_value_errors():
    with pytest.raises(ValueError, match="repeat_interleave: output_size=5"):
        tp.repeat_interleave(tp.ones(2), 2, output_size=5)
    with pytest.raises(ValueError, match="cdist: bogus is not a valid value for compute_mode"):
        tp.cdist(tp.ones(2, 3), tp.ones(2, 3), compute_mode="bogus")
    with pytest.raises(ValueError, match="searchsorted: side and right can't be set to opposites"):
        tp.searchsorted(tp.arange(3), tp.arange(3), right=True, side="left")
    with pytest.raises(TypeError, match="must be int, not bool|int\\[1\\]\\?, not bool"):
        tp.ones(2, 3).sum(True)  # a bool is no dim (PyTorch refuses it too)
    with pytest.raises(TypeError, match="conv2d.*bool"):
        pF.conv2d(tp.ones(1, 1, 3, 3, dtype=tp.bool), tp.ones(1, 1, 2, 2, dtype=tp.bool))


def test_tensor_int_argument_refused_while_capturing():
    def f(x, start):
        return x.narrow(0, start, 1) * 2

    cf = tp.compile(f, fullgraph=True)
    with pytest.raises(tp.compiler.CaptureError, match="narrow"):
        cf(tp.ones(3), tp.tensor(1))


# ---- errors name the function that was called (and the shapes), not an internal part ----
o = tp.ones
ERROR_CASES = [
    ("conv1d", lambda: pF.conv1d(o(1, 3, 5), o(2, 4, 3)), r"\[1, 3, 5\].*\[2, 4, 3\]"),
    ("conv1d", lambda: pF.conv1d(o(1, 3, 2), o(2, 3, 3)), r"\[1, 3, 2\]"),
    ("einsum", lambda: tp.einsum("ij,jk->ik", o(2, 3), o(4, 5)), r"\[2, 3\] and \[4, 5\]"),
    ("pad", lambda: pF.pad(o(1, 4), (-3, -3)), r"\(1, 4\)"),
    ("max_pool1d", lambda: pF.max_pool1d(o(1, 2, 1), 3), r"\(1, 2, 1\)"),
    ("avg_pool1d", lambda: pF.avg_pool1d(o(1, 2, 1), 3), r"\(1, 2, 1\)"),
    ("max_pool2d", lambda: pF.max_pool2d(o(1, 2, 1, 1), 3, return_indices=True), r"\[1, 2, 1, 1\]"),
    ("batch_norm", lambda: pF.batch_norm(o(2, 3), o(4), o(4)), r"\[2, 3\]"),
    ("cross_entropy", lambda: pF.cross_entropy(o(2, 3), tp.tensor([0, 1, 2])), r"\[2, 3\]"),
    ("mse_loss", lambda: pF.mse_loss(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("l1_loss", lambda: pF.l1_loss(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("smooth_l1_loss", lambda: pF.smooth_l1_loss(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("huber_loss", lambda: pF.huber_loss(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("kl_div", lambda: pF.kl_div(o(2, 3), o(3, 2)), r"\[3, 2\] and \[2, 3\]"),
    ("binary_cross_entropy", lambda: pF.binary_cross_entropy(o(2, 3) * 0.5, o(3, 2)), r"\(3, 2\)"),
    ("cosine_similarity", lambda: pF.cosine_similarity(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("normalize", lambda: pF.normalize(o(2, 3), dim=5), "5"),
    ("scaled_dot_product_attention",
     lambda: pF.scaled_dot_product_attention(o(2, 3, 4), o(2, 5, 6), o(2, 5, 4)), r"\[2, 3, 4\]"),
    ("hstack", lambda: tp.hstack([o(2, 3), o(3, 2)]), r"\[2, 3\] and \[3, 2\]"),
    ("vstack", lambda: tp.vstack([o(2, 3), o(3, 2)]), r"\[2, 3\] and \[3, 2\]"),
    ("concat", lambda: tp.concat([o(2, 3), o(3, 2)]), r"\[2, 3\] and \[3, 2\]"),
    ("dist", lambda: tp.dist(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("expand_as", lambda: o(2, 3).expand_as(o(4, 5)), r"\[4, 5\]"),
    ("view_as", lambda: o(2, 3).view_as(o(4, 5)), r"\[4, 5\]"),
    ("reshape_as", lambda: o(2, 3).reshape_as(o(4, 5)), r"\[4, 5\]"),
    ("swapaxes", lambda: o(2, 3).swapaxes(0, 5), "5"),
    ("moveaxis", lambda: o(2, 3).moveaxis(0, 5), "5"),
    ("tile", lambda: o(2, 3).tile(-1), "-1"),
    ("argsort", lambda: o(2, 3).argsort(5), "5"),
    ("bucketize", lambda: tp.bucketize(o(3), o(2, 3)), r"\[2, 3\]"),
    ("arctan2", lambda: tp.arctan2(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("greater", lambda: tp.greater(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("logaddexp", lambda: tp.logaddexp(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("xlogy", lambda: tp.xlogy(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("isclose", lambda: tp.isclose(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("float_power", lambda: tp.float_power(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("multiply", lambda: tp.multiply(o(2, 3), o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("subtract", lambda: o(2, 3).subtract(o(3, 2)), r"\[2, 3\] and \[3, 2\]"),
    ("count_nonzero", lambda: tp.count_nonzero(o(2, 3), 5), "5"),
    ("index_copy", lambda: tp.index_copy(o(2, 3), 1, tp.tensor([0]), o(2, 2)), r"\[2, 2\]"),
    ("index_fill", lambda: tp.index_fill(o(2, 3), 1, tp.tensor([5]), 1.0), "5"),
    ("selu", lambda: pF.selu(o(2, 3, dtype=tp.int64)), "int64"),
    ("logsigmoid", lambda: pF.logsigmoid(o(2, 3, dtype=tp.int64)), "int64"),
    ("softmin", lambda: pF.softmin(o(2, 3, dtype=tp.int64), 1), "int64"),
]


@pytest.mark.parametrize("name,call,shapes", ERROR_CASES, ids=[f"{n}{i}" for i, (n, _, _) in enumerate(ERROR_CASES)])
def test_error_names_the_called_function(name, call, shapes):
    with pytest.raises((RuntimeError, ValueError, IndexError, TypeError)) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(name + ":") or msg.startswith(name + "()"), msg
    assert re.search(shapes, msg), msg



def test_warnings_from_composed_functions_point_at_the_caller():
    # The error-naming wrapper adds a frame; warnings must still name the user's line.
    with pytest.warns(UserWarning) as rec:
        pF.softmin(tp.ones(2, 3))
        pF.l1_loss(tp.ones(2), tp.ones(2), size_average=True)
    assert [r.filename for r in rec] == [__file__, __file__]
