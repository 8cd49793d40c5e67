"""Compiled training as an adversarial user writes it: things done to the model,
the optimizer and the tensors between and around compiled calls, checked
against eager TensorPlay and PyTorch (values, gradients, warnings, errors)."""

import warnings

import numpy as np
import pytest

import tensorplay as tp


def test_a_non_leaf_free_tensor_does_not_make_compile_warn():
    # The capture's search for free tensors read `.grad` of every tensor that
    # requires grad; on a non-leaf (a weight built as `randn(...) * 0.5`) that
    # is eager's "non-leaf .grad accessed" warning, which the user never
    # caused (and under -W error the search swallowed it as an exception).
    ws = [tp.randn(4, 4, requires_grad=True) * 0.5]

    def f(x):
        for w in ws:
            x = x @ w
        return x.sum()

    x = tp.randn(2, 4)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        want = f(x)
        got = tp.compile(f)(x)
    assert [str(r.message) for r in rec] == []
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    assert got.requires_grad
