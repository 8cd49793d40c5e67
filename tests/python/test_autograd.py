"""Reverse-mode gradients, checked against central finite differences in float64."""

import numpy as np
import pytest

import tensorplay as tp
from fd_check import check_gradients


def away_from_zero(shape, seed=0, low=0.2):
    """float64 values with |v| >= low, so relu/abs/maximum have no kink nearby."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    return np.sign(a) * (np.abs(a) + low)


def positive(shape, seed=0):
    return np.abs(np.random.default_rng(seed).standard_normal(shape)) + 0.5


def gradcheck(fn, *arrays, eps=1e-6, rtol=1e-6, atol=1e-8):
    return check_gradients(fn, *arrays, eps=eps, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- pointwise

BINARY_CASES = {
    "add": (lambda a, b: a + b, lambda a, b: tp.add(a, b)),
    "sub": (lambda a, b: a - b, lambda a, b: tp.sub(a, b)),
    "mul": (lambda a, b: a * b, lambda a, b: tp.mul(a, b)),
    "div": (lambda a, b: a / b, lambda a, b: tp.div(a, b)),
}


@pytest.mark.parametrize("name", sorted(BINARY_CASES))
def test_grad_binary_same_shape(name):
    op, fn = BINARY_CASES[name]
    a, b = away_from_zero((3, 4), 0), positive((3, 4), 1)
    gradcheck(op, a, b)
    gradcheck(fn, a, b)


@pytest.mark.parametrize("name", sorted(BINARY_CASES))
def test_grad_binary_broadcasting_reduces_to_input_shape(name):
    op, _ = BINARY_CASES[name]
    gradcheck(op, away_from_zero((3, 1), 0), positive((1, 4), 1))
    gradcheck(op, away_from_zero((2, 3, 4), 2), positive((4,), 3))


def test_grad_python_scalar_operands():
    a = positive((5,), 0)
    gradcheck(lambda x: x * 3.0 + 1.0, a)
    gradcheck(lambda x: 1.0 - x, a)
    gradcheck(lambda x: 2.0 / x, a)
    gradcheck(lambda x: x / 4.0 - 0.5, a)


def test_grad_zero_dim_tensor_broadcast():
    gradcheck(lambda x, s: x * s, away_from_zero((3, 2), 0), np.array(1.7))


def test_grad_neg():
    gradcheck(lambda x: -x, away_from_zero((4,)))
    gradcheck(lambda x: tp.neg(x), away_from_zero((4,)))


UNARY = {
    "relu": (away_from_zero, 0),
    "exp": (away_from_zero, 0),
    "log": (positive, 0),
    "sqrt": (positive, 0),
    "tanh": (away_from_zero, 0),
    "sigmoid": (away_from_zero, 0),
    "abs": (away_from_zero, 0),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_grad_unary_method_and_function(name):
    make, seed = UNARY[name]
    a = make((3, 5), seed)
    gradcheck(lambda x: getattr(x, name)(), a)
    gradcheck(lambda x: getattr(tp, name)(x), a)


def test_grad_maximum_minimum():
    a = away_from_zero((6,), 0)
    b = a + np.where(np.arange(6) % 2 == 0, 0.5, -0.5)  # |a - b| = 0.5: no tie
    gradcheck(lambda x, y: tp.maximum(x, y), a, b)
    gradcheck(lambda x, y: tp.minimum(x, y), a, b)


def test_grad_where_routes_to_selected_input():
    cond = tp.tensor(np.array([[True, False, True], [False, True, False]]))
    gradcheck(lambda x, y: tp.where(cond, x, y), away_from_zero((2, 3), 0), away_from_zero((2, 3), 1))


def test_grad_where_exact_values():
    cond = tp.tensor([True, False, True])
    x = tp.tensor([1.0, 2.0, 3.0], dtype=tp.float64, requires_grad=True)
    y = tp.tensor([4.0, 5.0, 6.0], dtype=tp.float64, requires_grad=True)
    tp.where(cond, x, y).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 1.0]
    assert y.grad.tolist() == [0.0, 1.0, 0.0]


# ---------------------------------------------------------------- reductions


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_grad_sum_dims(dim, keepdim):
    gradcheck(lambda x: x.sum(dim, keepdim=keepdim), away_from_zero((3, 4)))


def test_grad_sum_all_and_function_form():
    a = away_from_zero((3, 4))
    gradcheck(lambda x: x.sum(), a)
    gradcheck(lambda x: tp.sum(x, -1), a)


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_grad_mean_dims(dim, keepdim):
    gradcheck(lambda x: x.mean(dim, keepdim=keepdim), away_from_zero((3, 4)))


def test_grad_mean_all():
    gradcheck(lambda x: tp.mean(x), away_from_zero((3, 4)))


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_grad_amax_unique_maximum(dim, keepdim):
    a = np.random.default_rng(5).permutation(12).reshape(3, 4).astype(np.float64)  # no ties
    gradcheck(lambda x: x.amax(dim, keepdim=keepdim), a)
    gradcheck(lambda x: tp.amax(x, dim, keepdim=keepdim), a)


def test_grad_broadcast_then_reduce():
    # The reduction-over-broadcast pattern of Example 1.1 and of bias addition.
    gradcheck(lambda x, b: ((x + b).relu() * 2).sum(-1), away_from_zero((4, 5), 0), away_from_zero((5,), 1))


@pytest.mark.parametrize("dim", [0, -1])
def test_grad_softmax(dim):
    a = away_from_zero((3, 5))
    gradcheck(lambda x: x.softmax(dim), a)
    gradcheck(lambda x: tp.softmax(x, dim), a)


def test_grad_five_operator_softmax():
    def sm(x):
        m = x.amax(-1, keepdim=True)
        e = (x - m).exp()
        return e / e.sum(-1, keepdim=True)

    gradcheck(sm, np.random.default_rng(3).permutation(15).reshape(3, 5) / 4.0)


# ---------------------------------------------------------------- matmul and views


def test_grad_matmul():
    a, b = away_from_zero((3, 4), 0), away_from_zero((4, 2), 1)
    gradcheck(lambda x, y: x @ y, a, b)
    gradcheck(lambda x, y: tp.matmul(x, y), a, b)
    gradcheck(lambda x, y: x.matmul(y), a, b)


def test_grad_matmul_transposed_operand():
    gradcheck(lambda x, y: x.t() @ y, away_from_zero((4, 3), 0), away_from_zero((4, 2), 1))


def test_grad_linear_layer_chain():
    gradcheck(
        lambda x, w, b: (x @ w + b).tanh().sum(-1),
        away_from_zero((3, 4), 0),
        away_from_zero((4, 5), 1) / 2,
        away_from_zero((5,), 2),
    )


def test_grad_views():
    a = away_from_zero((2, 3, 4))
    gradcheck(lambda x: x.view(6, 4) * 2, a)
    gradcheck(lambda x: x.reshape(4, 6).exp(), a)
    gradcheck(lambda x: x.transpose(0, 2) * x.permute(2, 1, 0), a)
    gradcheck(lambda x: x.permute(1, 2, 0).contiguous().tanh(), a)
    gradcheck(lambda x: x.clone() * x, a)


def test_grad_expand():
    gradcheck(lambda x: x.expand(3, 4) * tp.tensor(np.arange(12.0).reshape(3, 4)), away_from_zero((3, 1)))


def test_grad_getitem():
    a = away_from_zero((4, 5))
    gradcheck(lambda x: x[1], a)
    gradcheck(lambda x: x[1:3, ::2] * 3, a)
    gradcheck(lambda x: x[None, ..., -1], a)


def test_grad_used_twice_accumulates_within_graph():
    gradcheck(lambda x: x * x + x.exp() * x, away_from_zero((4,)))


# ---------------------------------------------------------------- engine behaviour


def test_backward_accumulates_into_grad():
    x = tp.tensor([1.0, 2.0, 3.0], dtype=tp.float64, requires_grad=True)
    assert x.grad is None
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0, 5.0]


def test_backward_exact_values_example_1_1():
    x = tp.tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    w = tp.tensor([[0.5, 1.0], [-4.0, 1.0]], requires_grad=True)
    ((x + w).relu() * 2).sum(-1).sum().backward()
    # relu'(x + w) * 2: x + w = [[1.5, -1.0], [-1.0, 1.5]]
    assert x.grad.tolist() == [[2.0, 0.0], [0.0, 2.0]]
    assert w.grad.tolist() == [[2.0, 0.0], [0.0, 2.0]]


def test_grad_dtype_matches_input():
    x = tp.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.dtype == tp.float32
    assert x.grad.tolist() == [2.0, 4.0]


def test_requires_grad_propagates():
    x = tp.tensor([1.0], requires_grad=True)
    y = tp.tensor([2.0])
    assert x.requires_grad and not y.requires_grad
    assert (x + y).requires_grad
    assert not (y * 2).requires_grad


def test_requires_grad_can_be_set_on_leaf():
    x = tp.tensor([1.0, 2.0])
    x.requires_grad = True
    (x * 4).sum().backward()
    assert x.grad.tolist() == [4.0, 4.0]


def test_no_grad_records_nothing():
    x = tp.tensor([1.0, 2.0], requires_grad=True)
    with tp.no_grad():
        y = x * 2
        z = y.exp().sum()
    assert not y.requires_grad
    assert not z.requires_grad
    # Gradients work again after the block.
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_no_grad_restores_mode_after_exception():
    x = tp.tensor([1.0], requires_grad=True)
    with pytest.raises(ZeroDivisionError):
        with tp.no_grad():
            1 / 0
    assert (x * 2).requires_grad


def test_detach_shares_storage_and_stops_gradient():
    x = tp.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad
    assert d.tolist() == [1.0, 2.0]
    (x * d).sum().backward()  # d is a constant: d/dx (x * d) = d
    assert x.grad.tolist() == [1.0, 2.0]
    with tp.no_grad():
        x.add_(1.0)
    assert d.tolist() == [2.0, 3.0]


def test_leaf_grad_only_for_inputs_that_require_it():
    x = tp.tensor([1.0, 2.0], requires_grad=True)
    c = tp.tensor([3.0, 4.0])
    (x * c).sum().backward()
    assert x.grad.tolist() == [3.0, 4.0]
    assert c.grad is None
