"""tp.random.fork_rng and its interplay with manual_seed / get_rng_state / set_rng_state,
eager and compiled random draws (compared with torch.random.fork_rng's contract)."""
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F


def _equal(a, b):
    return bool((a == b).all())


def test_module_names_match_torch():
    for name in ("fork_rng", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
                 "default_generator"):
        assert hasattr(torch.random, name) and hasattr(tp.random, name), name
    assert tp.random.manual_seed is tp.manual_seed


@pytest.mark.parametrize("lib", [torch, tp], ids=["torch", "tp"])
def test_fork_rng_restores_state(lib):
    lib.manual_seed(0)
    expected = lib.rand(4)
    lib.manual_seed(0)
    with lib.random.fork_rng():
        inside = lib.rand(4)
        lib.randn(10)
    after = lib.rand(4)
    assert _equal(inside, expected) and _equal(after, expected)


@pytest.mark.parametrize("lib", [torch, tp], ids=["torch", "tp"])
def test_fork_rng_undoes_manual_seed_and_set_rng_state(lib):
    lib.manual_seed(5)
    state = lib.get_rng_state()
    with lib.random.fork_rng():
        lib.manual_seed(9)
        lib.rand(3)
    assert _equal(lib.get_rng_state(), state) and lib.initial_seed() == 5
    other = lib.get_rng_state()
    with lib.random.fork_rng():
        lib.rand(7)
        lib.set_rng_state(other)
        lib.rand(2)
    assert _equal(lib.get_rng_state(), state)


@pytest.mark.parametrize("lib", [torch, tp], ids=["torch", "tp"])
def test_fork_rng_disabled_and_nested_and_exception(lib):
    lib.manual_seed(1)
    s0 = lib.get_rng_state()
    with lib.random.fork_rng(enabled=False):
        lib.rand(3)
    assert not _equal(lib.get_rng_state(), s0)
    s1 = lib.get_rng_state()
    with lib.random.fork_rng(devices=[]):
        lib.rand(1)
        with lib.random.fork_rng():
            lib.rand(5)
        s_inner = lib.get_rng_state()
        lib.rand(1)
    assert _equal(lib.get_rng_state(), s1)
    assert not _equal(s_inner, s1)
    with pytest.raises(KeyError):
        with lib.random.fork_rng():
            lib.rand(2)
            raise KeyError("x")
    assert _equal(lib.get_rng_state(), s1)


def test_fork_rng_bad_devices_names_function():
    with pytest.raises(TypeError, match="fork_rng: devices must be an iterable"):
        with tp.random.fork_rng(devices=3):
            pass


def test_fork_rng_other_generators_untouched():
    g = tp.Generator()
    g.manual_seed(3)
    with tp.random.fork_rng():
        a = tp.rand(3, generator=g)
    b = tp.rand(3, generator=g)
    assert not _equal(a, b)  # only the default generator is forked, as in torch


def test_compiled_dropout_inside_fork_rng_restores_state():
    f = tp.compile(lambda x: F.dropout(x, 0.5, True) * 2)
    x = tp.ones(64)
    tp.manual_seed(1)
    ref = f(x)
    tp.manual_seed(1)
    with tp.random.fork_rng():
        inside = f(x)
        f(x)
    after = f(x)
    assert _equal(inside, ref) and _equal(after, ref)


def test_compiled_training_dropout_inside_fork_rng():
    lin = tp.nn.Linear(8, 8)
    f = tp.compile(lambda x: F.dropout(lin(x), 0.3, True).sum())
    x = tp.randn(4, 8)
    tp.manual_seed(2)
    ref = f(x)
    ref.backward()
    gref = lin.weight.grad.clone()
    lin.weight.grad = None
    tp.manual_seed(2)
    with tp.random.fork_rng():
        out = f(x)
    out.backward()
    assert _equal(out, ref) and _equal(lin.weight.grad, gref)
    assert _equal(f(x), ref)  # the state is back where the seed put it


def test_eager_dropout_module_inside_fork_rng():
    drop = tp.nn.Dropout(0.5)
    x = tp.ones(32)
    tp.manual_seed(4)
    ref = drop(x)
    tp.manual_seed(4)
    with tp.random.fork_rng(devices=[0], device_type="cuda"):
        drop(x)
    assert _equal(drop(x), ref)
