"""Errors: the right exception class, a message that names the operator and the
offending shapes/dtypes, and no crash (the process keeps working afterwards)."""

import re
import subprocess
import sys

import pytest

import tensorplay as tp

SHAPE_ERRORS = (ValueError, RuntimeError)


def shape_re(shape):
    """Matches a shape written as [2, 3] or (2, 3)."""
    inner = r",\s*".join(str(s) for s in shape)
    return r"[\[\(]\s*" + inner + r",?\s*[\]\)]"


def assert_names(message, op, *shapes):
    assert re.search(r"\b" + op + r"\b", message, re.IGNORECASE), f"{op!r} not named in: {message}"
    for s in shapes:
        assert re.search(shape_re(s), message), f"shape {list(s)} not named in: {message}"


@pytest.mark.parametrize(
    "op_name,call",
    [
        ("add", lambda a, b: a + b),
        ("sub", lambda a, b: a - b),
        ("mul", lambda a, b: a * b),
        ("div", lambda a, b: a / b),
        ("add", lambda a, b: tp.add(a, b)),
        ("maximum", lambda a, b: tp.maximum(a, b)),
    ],
)
def test_incompatible_broadcast_names_op_and_both_shapes(op_name, call):
    a, b = tp.ones(2, 3), tp.ones(4, 5)
    with pytest.raises(SHAPE_ERRORS) as info:
        call(a, b)
    assert_names(str(info.value), op_name, (2, 3), (4, 5))


def test_incompatible_broadcast_in_inplace_op():
    x = tp.ones(2, 3)
    with pytest.raises(SHAPE_ERRORS) as info:
        x.add_(tp.ones(3, 2))
    assert re.search(shape_re((2, 3)), str(info.value)) and re.search(shape_re((3, 2)), str(info.value))
    assert x.tolist() == [[1.0] * 3] * 2  # nothing was written


def test_matmul_inner_dimension_mismatch():
    a, b = tp.ones(2, 3), tp.ones(4, 5)
    with pytest.raises(SHAPE_ERRORS) as info:
        a @ b
    assert_names(str(info.value), "matmul", (2, 3), (4, 5))
    with pytest.raises(SHAPE_ERRORS) as info:
        tp.matmul(a, b)
    assert_names(str(info.value), "matmul", (2, 3), (4, 5))


def test_neg_on_bool_is_type_error_naming_op_and_dtype():
    # PyTorch promotes bool to float for sqrt/exp, but refuses negation of bool.
    b = tp.tensor([True, False])
    for call in (lambda: -b, lambda: tp.neg(b)):
        with pytest.raises(TypeError) as info:
            call()
        msg = str(info.value)
        assert re.search(r"\bneg\b", msg, re.IGNORECASE), msg
        assert "bool" in msg.lower(), msg


def test_compiled_function_wrong_number_of_args_is_type_error():
    cf = tp.compile(lambda x, w: x + w)
    x = tp.ones(2)
    with pytest.raises(TypeError):
        cf(x)
    with pytest.raises(TypeError):
        cf(x, x, x)
    assert cf(x, x).tolist() == [2.0, 2.0]  # still usable afterwards


def test_compile_non_callable_is_type_error():
    with pytest.raises(TypeError):
        tp.compile(42)


def test_unknown_backend_named_in_error():
    with pytest.raises((ValueError, KeyError, RuntimeError)) as info:
        cf = tp.compile(lambda x: x + 1, backend="no_such_backend")
        cf(tp.ones(2))
    assert "no_such_backend" in str(info.value)


def test_view_with_wrong_numel():
    with pytest.raises(SHAPE_ERRORS) as info:
        tp.zeros(2, 3).view(4)
    assert re.search(r"\bview\b", str(info.value), re.IGNORECASE), str(info.value)


def test_expand_incompatible_size():
    with pytest.raises(SHAPE_ERRORS):
        tp.zeros(3, 2).expand(3, 4)


def test_dimension_out_of_range_is_index_error():
    x = tp.zeros(2, 3)
    with pytest.raises(IndexError):
        x.sum(2)
    with pytest.raises(IndexError):
        x.amax(-3)
    with pytest.raises(IndexError):
        x.transpose(0, 5)


def test_index_out_of_range_is_index_error():
    x = tp.zeros(2, 3)
    with pytest.raises(IndexError):
        x[2]
    with pytest.raises(IndexError):
        x[0, -4]
    with pytest.raises(IndexError):
        x[0, 0, 0]


def test_item_of_many_elements():
    with pytest.raises(SHAPE_ERRORS):
        tp.zeros(3).item()


def test_ragged_nested_list():
    with pytest.raises((ValueError, TypeError)):
        tp.tensor([[1.0, 2.0], [3.0]])


def test_backward_of_non_scalar_without_gradient():
    x = tp.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError):
        (x * 2).backward()


def test_backward_of_tensor_that_does_not_require_grad():
    with pytest.raises(RuntimeError):
        tp.tensor([1.0, 2.0]).sum().backward()


def test_errors_leave_the_runtime_usable():
    a, b = tp.ones(2, 3), tp.ones(4, 5)
    for _ in range(100):
        for bad in (lambda: a + b, lambda: a @ b, lambda: a.view(7)):
            with pytest.raises(Exception):
                bad()
    cf = tp.compile(lambda x: (x * 2).sum(-1))
    assert cf(a).tolist() == [6.0, 6.0]
    assert (a + a).sum().item() == 12.0


def test_compiled_function_raises_same_broadcast_error_as_eager():
    cf = tp.compile(lambda x, w: (x + w).relu())
    with pytest.raises(SHAPE_ERRORS) as info:
        cf(tp.ones(2, 3), tp.ones(4, 5))
    assert_names(str(info.value), "add", (2, 3), (4, 5))


FUZZ = r'''
import random, sys, warnings
import tensorplay as tp
warnings.simplefilter("ignore")
random.seed(int(sys.argv[1]))
vals = [None, 0, 1, -1, 2.5, True, "x", (), (1, 2), [0], [-5, 7],
        tp.ones(3), tp.ones(2, 3), tp.zeros(0), tp.ones(3, dtype=tp.int64), tp.ones(2, 3, dtype=tp.bool),
        tp.ones(()), tp.ones(4, 1).expand(4, 5), tp.ones(3, dtype=tp.float16), tp.ones(2, 2, dtype=tp.uint8),
        tp.float64, [tp.ones(2), tp.ones(3)], tp.ones(1, 3, 4, 4), tp.arange(6).view(2, 3).t()]
errors = (TypeError, ValueError, IndexError, RuntimeError, NotImplementedError, OverflowError, ZeroDivisionError)
for name, f in sorted(tp._C._op_functions.items()):
    for _ in range(12):
        args = [random.choice(vals) for _ in range(random.randint(0, 4))]
        kw = {}
        if random.random() < 0.3:
            kw[random.choice(["dim", "keepdim", "dtype", "out", "alpha", "p", "size", "weight"])] = random.choice(vals)
        try:
            f(*args, **kw)
        except errors:
            pass
print("ok")
'''


@pytest.mark.parametrize("seed", [0, 1])
def test_random_bad_arguments_to_every_operator_never_crash_the_process(seed):
    # Every generated operator gets random wrong argument combinations (None,
    # strings, mismatched shapes, zero-size, narrow dtypes, expanded tensors):
    # only Python exceptions may come out, never a crash or another exception type.
    proc = subprocess.run([sys.executable, "-c", FUZZ, str(seed)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
