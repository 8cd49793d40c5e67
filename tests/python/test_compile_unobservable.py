"""Compiling is unobservable (Sections 11.3, 12.1): parameters, globals and closure
variables are read at every call; `.data` swaps are seen; modules whose
parameters require grad give results with grad_fn and eager's gradients; results
alias arguments exactly where eager's do; the output structure is eager's on
every call; strict_native never runs eager autograd silently; fallbacks warn.
Most checks go through compile_check.assert_compiled_matches_eager, which
compares every backend with eager on three calls."""

import collections
import types
import warnings

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from compile_check import DEFAULT_BACKENDS, aliasing, assert_compiled_matches_eager

ALL_BACKENDS = DEFAULT_BACKENDS


def passthrough_backend(gm, example_inputs):
    """A user backend that runs the graph as given."""
    return gm


BACKENDS_AND_CALLABLE = ALL_BACKENDS + (passthrough_backend,)


def vals(t):
    return np.array(t.detach().contiguous().numpy(), dtype=np.float64, copy=True)


def metric(name):
    return int(getattr(tp.compiler.metrics, name))


@pytest.fixture(autouse=True)
def quiet_fallbacks():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="tp.compile: running eagerly")
        yield


# ------------------------------------------------------ 1. free tensors


G = {"w": tp.ones(4)}
W = tp.ones(4)


def times_global_dict(x):
    return x * G["w"]


def times_global_name(x):
    return x * W


@pytest.mark.parametrize("backend", BACKENDS_AND_CALLABLE)
def test_rebound_global_dict_entry_is_read_at_every_call(backend):
    G["w"] = tp.ones(4)
    cf = tp.compile(times_global_dict, backend=backend)
    x = tp.full((4,), 2.0)
    np.testing.assert_array_equal(vals(cf(x)), [2.0] * 4)
    G["w"] = tp.full((4,), 3.0)
    np.testing.assert_array_equal(vals(cf(x)), [6.0] * 4)  # the same x: first-level entry path
    np.testing.assert_array_equal(vals(cf(tp.full((4,), 2.0))), [6.0] * 4)  # a new x: specialization path


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_rebound_global_name_is_read_without_recapture(backend):
    global W
    W = tp.ones(4)
    cf = tp.compile(times_global_name, backend=backend)
    x = tp.full((4,), 2.0)
    cf(x)
    captures = metric("captures")
    W = tp.full((4,), 5.0)
    np.testing.assert_array_equal(vals(cf(x)), [10.0] * 4)
    assert metric("captures") == captures  # same metadata: the same artifact, fed the new tensor


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_inplace_update_of_a_global_is_seen(backend):
    G["w"] = tp.ones(4)
    cf = tp.compile(times_global_dict, backend=backend)
    x = tp.full((4,), 2.0)
    cf(x)
    with tp.no_grad():
        G["w"].mul_(2)
    np.testing.assert_array_equal(vals(cf(x)), [4.0] * 4)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_global_rebound_to_another_shape_recompiles(backend):
    G["w"] = tp.ones(4)
    cf = tp.compile(times_global_dict, backend=backend)
    x = tp.full((4,), 2.0)
    cf(x)
    G["w"] = tp.full((3, 1), 3.0)  # broadcasts to (3, 4)
    y = cf(x)
    assert tuple(y.shape) == (3, 4)
    np.testing.assert_array_equal(vals(y), np.full((3, 4), 6.0))


def test_global_rebound_to_a_number_behaves_as_eager():
    G["w"] = tp.ones(4)
    cf = tp.compile(times_global_dict)
    x = tp.full((4,), 2.0)
    cf(x)
    G["w"] = 7.0
    np.testing.assert_array_equal(vals(cf(x)), [14.0] * 4)
    G["w"] = tp.ones(4)


def make_closure(w):
    def f(x):
        return (x + w).relu()

    def set_w(v):
        nonlocal w
        w = v

    return f, set_w


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_rebound_closure_variable_is_read_at_every_call(backend):
    f, set_w = make_closure(tp.ones(4))
    cf = tp.compile(f, backend=backend)
    x = tp.zeros(4)
    np.testing.assert_array_equal(vals(cf(x)), [1.0] * 4)
    set_w(tp.full((4,), 4.0))
    np.testing.assert_array_equal(vals(cf(x)), [4.0] * 4)


class Holder:
    pass


H = Holder()
H.scale = tp.full((4,), 2.0)


def times_object_attribute(x):
    return x * H.scale


def test_attribute_of_a_global_object_is_read_at_every_call():
    cf = tp.compile(times_object_attribute)
    x = tp.ones(4)
    np.testing.assert_array_equal(vals(cf(x)), [2.0] * 4)
    H.scale = tp.full((4,), -1.0)
    np.testing.assert_array_equal(vals(cf(x)), [-1.0] * 4)


CFG = types.ModuleType("cfg")  # stands for `import config` holding module-level tensors
CFG.W = tp.ones(4)


def times_module_attribute(x):
    return x * CFG.W


def test_attribute_of_an_imported_module_is_read_at_every_call():
    cf = tp.compile(times_module_attribute)
    x = tp.full((4,), 3.0)
    np.testing.assert_array_equal(vals(cf(x)), [3.0] * 4)
    CFG.W = tp.full((4,), 2.0)
    np.testing.assert_array_equal(vals(cf(x)), [6.0] * 4)


def test_bound_method_reads_its_module_state_at_every_call():
    lin = nn.Linear(2, 2, bias=False)
    cf = tp.compile(lin.forward)
    x = tp.ones(1, 2)
    with tp.no_grad():
        cf(x)
        lin.weight = nn.Parameter(tp.full((2, 2), 0.5))
        np.testing.assert_array_equal(vals(cf(x)), [[1.0, 1.0]])


def helper_times_w(x):
    return x * W


def calls_a_helper(x):
    return helper_times_w(x) + 1


def test_global_read_by_a_called_helper_is_read_at_every_call():
    global W
    W = tp.ones(4)
    cf = tp.compile(calls_a_helper)
    x = tp.ones(4)
    np.testing.assert_array_equal(vals(cf(x)), [2.0] * 4)
    W = tp.full((4,), 3.0)
    np.testing.assert_array_equal(vals(cf(x)), [4.0] * 4)


INNER = tp.compile(helper_times_w)


def calls_a_compiled_function(x):
    return INNER(x) - 1


def test_global_read_by_an_inlined_compiled_function_is_read_at_every_call():
    global W
    W = tp.ones(4)
    cf = tp.compile(calls_a_compiled_function)
    x = tp.full((4,), 2.0)
    np.testing.assert_array_equal(vals(cf(x)), [1.0] * 4)
    W = tp.full((4,), 3.0)
    np.testing.assert_array_equal(vals(cf(x)), [5.0] * 4)
    np.testing.assert_array_equal(vals(INNER(x)), [6.0] * 4)


def test_search_survives_objects_that_refuse_inspection():
    class Hostile:
        def __getattribute__(self, name):
            raise RuntimeError("no")

    hostile = Hostile()
    w = tp.ones(3)

    def f(x):
        _ = hostile
        return x + w

    assert_compiled_matches_eager(f, tp.randn(3))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_reassigned_module_parameter_is_seen(backend):
    lin = nn.Linear(4, 4)
    cf = tp.compile(lin, backend=backend)
    x = tp.randn(2, 4)
    with tp.no_grad():
        cf(x)
        lin.weight = nn.Parameter(tp.zeros(4, 4))
        got = cf(x)
        np.testing.assert_allclose(vals(got), vals(lin(x)), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(vals(got), np.broadcast_to(vals(lin.bias), (2, 4)), atol=1e-7)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_inplace_parameter_update_and_load_state_dict_are_seen(backend):
    lin = nn.Linear(4, 3)
    cf = tp.compile(lin, backend=backend)
    x = tp.randn(5, 4)
    with tp.no_grad():
        cf(x)
        lin.weight.mul_(2)
        np.testing.assert_allclose(vals(cf(x)), vals(lin(x)), rtol=1e-5, atol=1e-6)
        other = nn.Linear(4, 3)
        lin.load_state_dict(other.state_dict())
        np.testing.assert_allclose(vals(cf(x)), vals(other(x)), rtol=1e-5, atol=1e-6)


def test_optimizer_steps_are_seen_by_a_compiled_module():
    tp.manual_seed(0)
    lin = nn.Linear(4, 2)
    cf = tp.compile(lin)
    opt = tp.optim.SGD(lin.parameters(), lr=0.5)
    x = tp.randn(8, 4)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = (cf(x) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        with tp.no_grad():
            np.testing.assert_allclose(vals(cf(x)), vals(lin(x)), rtol=1e-5, atol=1e-6)
    assert losses[2] < losses[0]


def test_parameter_of_a_submodule_is_read_at_every_call():
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    cf = tp.compile(m)
    x = tp.randn(3, 4)
    with tp.no_grad():
        cf(x)
        m[2].bias = nn.Parameter(tp.full((2,), 100.0))
        np.testing.assert_allclose(vals(cf(x)), vals(m(x)), rtol=1e-5, atol=1e-5)


def test_unchanged_parameters_keep_the_first_level_entry():
    ln = nn.LayerNorm(8)
    cf = tp.compile(ln)
    x = tp.randn(3, 8)
    with tp.no_grad():
        cf(x)
        hits, spec, captures = metric("first_level_hits"), metric("specialization_hits"), metric("captures")
        cf(x)
        assert metric("first_level_hits") == hits + 1
        ln.weight.add_(1)  # a new version: re-read, same artifact through the specialization cache
        np.testing.assert_allclose(vals(cf(x)), vals(ln(x)), rtol=1e-5, atol=1e-6)
        assert metric("specialization_hits") == spec + 1
        assert metric("captures") == captures


def test_tensor_made_inside_the_function_stays_correct():
    def f(x):
        return x * tp.tensor([1.0, 2.0, 3.0]) + tp.ones(3)

    assert_compiled_matches_eager(f, tp.randn(3))


def test_detach_of_an_argument_inside_a_compiled_function_is_a_view_without_gradient():
    # It used to be refused (a tensor made outside the operators); now it is a
    # view recorded with grad mode off: eager's values, memory and gradients.
    def f(x):
        x.detach().mul_(2)
        return x.detach() * 2 + x

    assert_compiled_matches_eager(f, tp.ones(3))
    w = tp.randn(3, requires_grad=True)
    cf = tp.compile(lambda: (w * w.detach()).sum())
    cf().backward()
    np.testing.assert_allclose(vals(w.grad), vals(w), rtol=1e-6)


# ------------------------------------------------------ 2. .data swaps


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_data_swap_to_a_larger_or_smaller_tensor_is_seen(backend):
    cf = tp.compile(lambda x: x * 2, backend=backend)
    x = tp.ones(4)
    np.testing.assert_array_equal(vals(cf(x)), [2.0] * 4)
    x.data = tp.full((6,), 5.0)
    np.testing.assert_array_equal(vals(cf(x)), [10.0] * 6)
    x.data = tp.full((2,), -1.0)
    np.testing.assert_array_equal(vals(cf(x)), [-2.0] * 2)


def test_data_swap_to_a_view_of_the_same_memory_is_seen():
    cf = tp.compile(lambda x: x + 1)
    x = tp.arange(6.0)
    cf(x)
    x.data = x.data.view(2, 3).t()
    np.testing.assert_array_equal(vals(cf(x)), np.arange(6.0).reshape(2, 3).T + 1)


def test_data_swap_of_a_parameter_is_seen():
    lin = nn.Linear(3, 3, bias=False)
    cf = tp.compile(lin)
    x = tp.ones(1, 3)
    with tp.no_grad():
        cf(x)
        lin.weight.data = tp.full((3, 3), 2.0)
        np.testing.assert_array_equal(vals(cf(x)), [[6.0, 6.0, 6.0]])


# ------------------------------------------------------ 3. modules whose parameters require grad


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_layernorm_module_result_has_grad_fn_and_eager_gradients(backend):
    ln = nn.LayerNorm(16)
    y = tp.compile(ln, backend=backend)(tp.randn(2, 16))
    assert y.grad_fn is not None
    y.sum().backward()
    assert ln.weight.grad is not None
    assert_compiled_matches_eager(ln, tp.randn(4, 16), backends=(backend,))


def test_mlp_module_gradients_match_eager():
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
    assert_compiled_matches_eager(m, tp.randn(5, 8), rtol=1e-4, atol=1e-5)


def test_global_that_requires_grad_gets_gradients():
    G["w"] = tp.randn(4).requires_grad_(True)
    try:
        assert_compiled_matches_eager(times_global_dict, tp.randn(4), params=[G["w"]])
    finally:
        G["w"] = tp.ones(4)


# ------------------------------------------------------ 4. aliasing of results and arguments


@pytest.mark.parametrize("backend", BACKENDS_AND_CALLABLE)
def test_simplified_result_never_aliases_the_argument(backend):
    cf = tp.compile(lambda x: x + 0, backend=backend)
    x = tp.zeros(3)
    y = cf(x)
    assert y is not x
    y.add_(1)
    np.testing.assert_array_equal(vals(x), [0.0] * 3)


@pytest.mark.parametrize("backend", BACKENDS_AND_CALLABLE)
def test_returning_an_argument_returns_that_object(backend):
    x = tp.zeros(3)
    cf = tp.compile(lambda a: a, backend=backend)
    assert cf(x) is x
    assert cf(x) is x


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + 0,
        lambda x: x * 1,
        lambda x: x,
        lambda x: (x, x * 2),
        lambda x: x.view(2, 3),
        lambda x: x.t(),
        lambda x: x[1],
        lambda x: (x[0], x + 1, x),
        lambda x: (x * 2, x.sum()),
    ],
    ids=["add0", "mul1", "identity", "identity_and_new", "view", "t", "select", "mixed", "fresh"],
)
def test_aliasing_matches_eager(fn):
    assert_compiled_matches_eager(fn, tp.randn(2, 3), backends=BACKENDS_AND_CALLABLE)


def test_same_result_twice_is_one_object():
    def f(x):
        y = x * 2
        return y, y

    for backend in BACKENDS_AND_CALLABLE:
        a, b = tp.compile(f, backend=backend)(tp.ones(3))
        assert a is b, backend


def test_aliasing_helper_tells_views_from_copies():
    x = tp.randn(2, 3)
    assert aliasing((x, x[0], x + 1, x.t()), [x]) == [("is", 0), ("view", 0), ("fresh",), ("view", 0)]


# ------------------------------------------------------ 5. strict_native and grad


def test_strict_native_compiles_forward_and_backward_of_an_input_that_requires_grad():
    # Was refused before the AOT layer existed: both regions are generated code now.
    cf = tp.compile(lambda x: x * 2 + 1, strict_native=True)
    x = tp.ones(3, requires_grad=True)
    before = metric("generated_kernel_count")
    y = cf(x)
    assert y.requires_grad
    np.testing.assert_array_equal(vals(y), [3.0] * 3)
    y.sum().backward()
    np.testing.assert_array_equal(vals(x.grad), [2.0] * 3)
    assert metric("generated_kernel_count") >= before + 2


def test_strict_native_module_whose_parameters_require_grad_trains_natively():
    ln = nn.LayerNorm(8)
    ref = nn.LayerNorm(8)
    cf = tp.compile(ln, strict_native=True)
    x = tp.randn(2, 8)
    before = metric("fallback_count")
    cf(x).sum().backward()
    ref(x).sum().backward()
    assert metric("fallback_count") == before
    np.testing.assert_allclose(vals(ln.weight.grad), vals(ref.weight.grad), atol=1e-6)
    np.testing.assert_allclose(vals(ln.bias.grad), vals(ref.bias.grad), atol=1e-6)
    with tp.no_grad():
        np.testing.assert_allclose(vals(cf(tp.ones(2, 8))), vals(ln(tp.ones(2, 8))), atol=1e-6)


# ------------------------------------------------------ 6. output structure


Pair = collections.namedtuple("Pair", "a b")

STRUCTURES = {
    "one_tuple": lambda a: (a * 2,),
    "list": lambda a: [a * 2, a + 1],
    "one_list": lambda a: [a * 2],
    "nested": lambda a: (a * 2, [a + 1, (a - 1,)]),
    "none_and_numbers": lambda a: (a * 2, None, 3, 2.5, True),
    "dict": lambda a: {"y": a * 2, "z": (a + 1,)},
    "namedtuple": lambda a: Pair(a * 2, a + 1),
    "tensor": lambda a: a * 2,
    "matmul_extern_tuple": lambda a: (a @ a.t(),),
    "nonzero_fallback_tuple": lambda a: (tp.nonzero(a > 0),),
}


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_output_structure_matches_eager_on_every_call(name):
    assert_compiled_matches_eager(STRUCTURES[name], tp.randn(2, 2), backends=BACKENDS_AND_CALLABLE)


@pytest.mark.parametrize("backend", BACKENDS_AND_CALLABLE)
def test_one_tuple_is_a_tuple_on_the_first_call(backend):
    r = tp.compile(lambda a: (a * 2,), backend=backend)(tp.ones(1))
    assert isinstance(r, tuple) and len(r) == 1


def test_structure_of_a_nested_compiled_function_is_kept():
    inner = tp.compile(lambda a: (a * 2,))
    outer = tp.compile(lambda a: inner(a)[0] + 1)
    np.testing.assert_array_equal(vals(outer(tp.ones(2))), [3.0, 3.0])


def test_unsupported_result_type_is_a_capture_error():
    with pytest.raises(tp.compiler.CaptureError, match="object"):
        tp.compile(lambda a: object(), fullgraph=True)(tp.ones(2))


# ------------------------------------------------------ 7. fallback warnings


def test_fallback_warns_once_per_compiled_function_naming_the_operator():
    # (matmul runs inside the region now; a data-dependent result shape cannot.)
    f = tp.compile(lambda a, b: tp.nonzero(a > b) * 2)
    a, b = tp.randn(3, 4), tp.randn(4)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        f(a, b)
        f(a, b)
        f(tp.randn(6, 4), b)  # a new specialization that falls back too: still one warning
    msgs = [str(w.message) for w in rec if "tp.compile" in str(w.message)]
    assert len(msgs) == 1, msgs
    assert "'nonzero'" in msgs[0]
    g = tp.compile(lambda a, b: tp.nonzero(a > b) * 2)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        g(a, b)
    assert sum("tp.compile" in str(w.message) for w in rec) == 1  # another compiled function warns again


def test_fallback_warning_can_be_silenced():
    a, b = tp.randn(3, 4), tp.randn(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message="tp.compile: running eagerly")
        tp.compile(lambda a, b: tp.nonzero(a > b))(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tp.compile(lambda a, b: tp.nonzero(a > b), options={"warn_fallback": False})(a, b)


def test_grad_path_is_generated_code_and_does_not_warn():
    # The AOT layer compiles forward and backward: no eager-autograd fallback to report.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = tp.ones(2, requires_grad=True)
        tp.compile(lambda x: x * 2)(x).sum().backward()
    np.testing.assert_array_equal(vals(x.grad), [2.0, 2.0])


def test_grad_path_fallback_warns_naming_the_operator():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        tp.compile(lambda a, b: (a @ b).sum() + tp.nonzero(a > 0).float().sum())(tp.ones(2, 3),
                                                                                tp.ones(3, 2, requires_grad=True))
    msgs = [str(w.message) for w in rec if "tp.compile" in str(w.message)]
    assert len(msgs) == 1 and "'nonzero'" in msgs[0] and "depends on the data" in msgs[0]


def test_native_call_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tp.compile(lambda x: x * 2 + 1)(tp.ones(8))


# ------------------------------------------------------ 8. the property check over common functions


def example_1_1(x, w):
    return ((x + w).relu() * 2).sum(-1)


def softmax5(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


CASES = {
    "example_1_1": (example_1_1, lambda: (tp.randn(4, 8), tp.randn(4, 8))),
    "example_1_1_grad": (example_1_1, lambda: (tp.randn(4, 8, requires_grad=True), tp.randn(4, 8))),
    "softmax": (softmax5, lambda: (tp.randn(3, 7),)),
    "scalar_arg": (lambda x, s: x * s + 1, lambda: (tp.randn(5), 3.0)),
    "transposed_input": (lambda x: (x * 2).sum(0), lambda: (tp.randn(4, 3).t(),)),
    "same_tensor_twice": (lambda a, b: a * b + a, lambda: (lambda t: (t, t))(tp.randn(6))),
    "max_dim": (lambda x: x.max(1), lambda: (tp.randn(3, 4),)),
    "chunk": (lambda x: x.chunk(2, 0), lambda: (tp.randn(4, 2),)),
    "matmul": (lambda a, b: (a @ b).relu(), lambda: (tp.randn(3, 4), tp.randn(4, 2))),
    "int_dtype": (lambda a: a * 2 + 1, lambda: (tp.arange(6).view(2, 3),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_matches_eager_property(name):
    fn, make = CASES[name]
    assert_compiled_matches_eager(fn, *make(), backends=BACKENDS_AND_CALLABLE)
