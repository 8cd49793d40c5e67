"""The Python surface generated from operator schemas (python/src/op_binding.cpp):
argument parsing, overloads, out=, in-place methods, error messages."""
import numpy as np
import pytest

import tensorplay as tp


def test_every_schema_op_is_a_function_and_self_ops_are_methods():
    schemas = tp._C._op_schemas()
    for name, text in schemas.items():
        base = name.split(".")[0]
        if base.startswith("_"):
            continue
        if not base.endswith("_"):
            assert callable(getattr(tp, base)), name
        if "(Tensor self" in text or "(Tensor(a!) self" in text:
            assert callable(getattr(tp.Tensor, base)), name


def test_positional_keyword_and_default_arguments():
    x = tp.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(tp.sum(x, 1).numpy(), [3.0, 12.0])
    np.testing.assert_array_equal(tp.sum(x, dim=1, keepdim=True).numpy(), [[3.0], [12.0]])
    np.testing.assert_array_equal(x.sum(dim=(0, 1)).numpy(), 15.0)
    assert tp.sum(x, dtype=tp.float64).dtype == tp.float64


def test_trailing_int_list_accepts_varargs():
    x = tp.arange(6)
    assert x.view(2, 3).shape == (2, 3) and x.view((3, 2)).shape == (3, 2)
    assert tp.zeros(2, 3).shape == (2, 3) and tp.ones([4]).shape == (4,)
    assert x.view(2, 3).permute(1, 0).shape == (3, 2)


def test_python_numbers_become_wrapped_scalars_for_tensor_parameters():
    x = tp.ones(3, dtype=tp.float16)
    assert tp.add(x, 2).dtype == tp.float16
    assert tp.add(2, x).dtype == tp.float16
    assert tp.mul(tp.ones(2, dtype=tp.int64), 2.5).dtype == tp.float32


def test_overloads_are_tried_in_order_and_named_results():
    x = tp.tensor([[1.0, 5.0], [7.0, 2.0]])
    assert tp.max(x).item() == 7.0
    r = tp.max(x, 1)
    assert r.values.numpy().tolist() == [5.0, 7.0] and r.indices.numpy().tolist() == [1, 0]
    v, i = x.max(dim=0)
    assert v.numpy().tolist() == [7.0, 5.0]
    assert tp.max(x, tp.zeros(2)).shape == (2, 2)


def test_no_matching_overload_lists_the_signatures():
    with pytest.raises(TypeError, match=r"max\(\) received an invalid combination of arguments.*expected one of"):
        tp.max(tp.ones(2), "a")


def test_argument_errors_name_the_operator_and_the_argument():
    x = tp.ones(2)
    with pytest.raises(TypeError, match=r"clone\(\).*takes 1 positional"):
        tp.clone(x, 3)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'bogus'"):
        tp.exp(x, bogus=1)
    with pytest.raises(TypeError, match=r"missing required argument 'other'"):
        tp.add(x)
    with pytest.raises(TypeError, match=r"multiple values for argument 'other'"):
        tp.add(x, x, other=x)
    with pytest.raises(TypeError, match=r"argument 'dim' must be"):
        tp.sum(x, "0")


def test_out_writes_resizes_and_checks_castability():
    x = tp.tensor([1.0, 4.0, 9.0])
    out = tp.empty(3)
    r = tp.sqrt(x, out=out)
    assert r is out and out.numpy().tolist() == [1.0, 2.0, 3.0]
    empty = tp.empty(0)
    tp.sqrt(x, out=empty)
    assert empty.shape == (3,)
    wrong = tp.empty(5)
    with pytest.warns(UserWarning, match="resized"):
        tp.sqrt(x, out=wrong)
    assert wrong.shape == (3,)
    wider = tp.empty(3, dtype=tp.float64)
    tp.sqrt(x, out=wider)
    assert wider.numpy().tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match=r"sqrt.*float32.*can't be cast.*int64"):
        tp.sqrt(x, out=tp.empty(3, dtype=tp.int64))


def test_out_refuses_inputs_that_require_grad():
    x = tp.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="out=.*automatic differentiation"):
        tp.exp(x, out=tp.empty(2))
    with tp.no_grad():
        tp.exp(x, out=tp.empty(2))


def test_inplace_methods_return_the_same_object_and_bump_the_version():
    x = tp.zeros(3)
    v0 = x._version
    assert x.fill_(2.0) is x and x._version > v0
    assert x.add_(1) is x and x.numpy().tolist() == [3.0, 3.0, 3.0]
    # In-place forms are methods, plus the functions PyTorch also has (torch.fill_; no torch.add_).
    assert not hasattr(tp, "add_") and tp.fill_(x, 5.0) is x


def test_requires_grad_keyword_of_factories():
    t = tp.zeros(2, 2, requires_grad=True)
    assert t.requires_grad and t.is_leaf
    assert not tp.ones(2).requires_grad


def test_tensor_list_parameters_accept_lists_and_tuples_only():
    a, b = tp.ones(2), tp.zeros(2)
    assert tp.cat([a, b]).shape == (4,) and tp.cat((a, b)).shape == (4,)
    with pytest.raises(TypeError, match="cat"):
        tp.cat([a, 3])


def test_numpy_keyword_aliases_axis_and_keepdims():
    x = tp.arange(6.0).view(2, 3)
    assert x.sum(axis=0).numpy().tolist() == [3.0, 5.0, 7.0]
    assert tp.mean(x, axis=1, keepdims=True).shape == (2, 1)
    with pytest.raises(TypeError, match="alias 'axis'"):
        x.sum(axis=0, dim=1)


def test_integer_tensor_binds_a_tensor_parameter_before_an_int_one():
    # max(x, other) with a one-element int64 tensor is max.other (elementwise), never max.dim with
    # dim=1; a tensor is read as an int only when no overload takes it as a tensor (narrow's start).
    x = tp.tensor([[1, 5], [7, 2]])
    assert tp.max(x, tp.tensor(3)).tolist() == [[3, 5], [7, 3]]
    assert tp.min(x, tp.tensor(3)).tolist() == [[1, 3], [3, 2]]
    assert x.max(tp.tensor(3)).tolist() == [[3, 5], [7, 3]]
    assert tp.arange(6).narrow(0, tp.tensor(2), 3).tolist() == [2, 3, 4]
