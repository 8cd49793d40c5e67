"""Property check that compiling is unobservable (Sections 11.3, 12.1).

assert_compiled_matches_eager(fn, *args) runs `fn` eagerly and compiled (one
fresh tp.compile per backend) on independent copies of the arguments and
checks, on three calls per backend (a first call that captures, the same
objects again -- the first-level entry -- and new objects of the same shapes --
the specialization cache):

- results: the same container types and structure (tuple/list/dict/None/numbers),
  tensors of the same dtype, shape, values within tolerance;
- side effects on the arguments: their values after the call equal eager's;
- aliasing: a result that is an argument (`is`), or shares memory with one (a
  view), in eager does so in compiled and vice versa; results that are the same
  object in eager are the same object in compiled;
- autograd: the same requires_grad and presence of grad_fn per result, and the
  gradients of the sum of the results that require grad, for the arguments and
  for `params` (default: the parameters of `fn` when it is an nn.Module), equal
  eager's.
"""

import warnings

import numpy as np

import tensorplay as tp
from tensorplay import nn

DEFAULT_BACKENDS = ("eager", "aot_eager", "stax")


# ---------------------------------------------------------------- copies


def _copy_tensor(t):
    """An independent tensor equal to t: same dtype, sizes, strides, requires_grad."""
    with tp.no_grad():
        if t.is_contiguous() or t.numel() == 0:
            c = t.detach().clone()
        else:
            extent = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()))
            c = tp.zeros(extent, dtype=t.dtype).as_strided(tuple(t.shape), tuple(t.stride()))
            c.copy_(t.detach())
            c = c.detach()
    if t.requires_grad:
        c.requires_grad_(True)
    return c


def copy_args(args):
    """Copies of the arguments; an argument passed twice stays one object."""
    memo = {}
    out = []
    for a in args:
        if isinstance(a, tp.Tensor):
            if id(a) not in memo:
                memo[id(a)] = _copy_tensor(a)
            out.append(memo[id(a)])
        else:
            out.append(a)
    return out


# ---------------------------------------------------------------- leaves


def leaves(obj, path="out"):
    """(path, value) for every non-container leaf of a result, in order."""
    if isinstance(obj, (tuple, list)):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, f"{path}[{k!r}]")
    else:
        yield path, obj


def assert_same_structure(got, want, path="out"):
    assert type(got) is type(want), f"{path}: compiled returned {type(got).__name__}, eager {type(want).__name__}"
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want), f"{path}: compiled returned {len(got)} items, eager {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_structure(g, w, f"{path}[{i}]")
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{path}: keys {list(got)} vs eager {list(want)}"
        for k in want:
            assert_same_structure(got[k], want[k], f"{path}[{k!r}]")
    elif not isinstance(want, tp.Tensor):
        assert got == want or (got != got and want != want), f"{path}: compiled returned {got!r}, eager {want!r}"


def _values(t):
    t = t.detach()
    if t.is_floating_point():
        t = t.to(tp.float64)
    return np.array(t.contiguous().numpy(), copy=True)


def assert_tensor_close(got, want, path, rtol, atol):
    assert isinstance(got, tp.Tensor), f"{path}: compiled returned {type(got).__name__}, eager a Tensor"
    assert got.dtype == want.dtype, f"{path}: dtype {got.dtype} vs eager {want.dtype}"
    assert tuple(got.shape) == tuple(want.shape), f"{path}: shape {tuple(got.shape)} vs eager {tuple(want.shape)}"
    np.testing.assert_allclose(_values(got), _values(want), rtol=rtol, atol=atol, equal_nan=True, err_msg=path)


def _span(t):
    """[first, last] byte addresses a tensor can touch (None when empty)."""
    if t.numel() == 0:
        return None
    lo = hi = t.data_ptr()
    for s, st in zip(t.shape, t.stride()):
        d = (s - 1) * st * t.element_size()
        lo, hi = (lo + d, hi) if d < 0 else (lo, hi + d)
    return lo, hi + t.element_size() - 1


def _overlaps(a, b):
    sa, sb = _span(a), _span(b)
    return sa is not None and sb is not None and sa[0] <= sb[1] and sb[0] <= sa[1]


def aliasing(result, args):
    """Per tensor leaf: ('is', k) / ('view', k) for argument k, ('same', j) for an
    earlier result leaf j, or ('fresh',)."""
    out = []
    tensors = [v for _, v in leaves(result)]
    for j, v in enumerate(tensors):
        if not isinstance(v, tp.Tensor):
            out.append(None)
            continue
        kind = ("fresh",)
        for i, w in enumerate(tensors[:j]):
            if w is v:
                kind = ("same", i)
                break
        if kind == ("fresh",):
            for k, a in enumerate(args):
                if a is v:
                    kind = ("is", k)
                    break
        if kind == ("fresh",):
            for k, a in enumerate(args):
                if isinstance(a, tp.Tensor) and _overlaps(a, v):
                    kind = ("view", k)
                    break
        out.append(kind)
    return out


# ---------------------------------------------------------------- gradients


def _grads(result, args, params):
    """Gradients of the sum of the float results that require grad, w.r.t. the
    arguments and params that require grad (None where there is none)."""
    outs = [v for _, v in leaves(result) if isinstance(v, tp.Tensor) and v.requires_grad]
    if not outs:
        return None
    for p in params:
        p.grad = None
    loss = None
    for o in outs:
        s = o.sum()
        loss = s if loss is None else loss + s
    loss.backward()
    g = [a.grad for a in args if isinstance(a, tp.Tensor) and a.requires_grad and a.grad_fn is None]
    g += [p.grad for p in params]
    for p in params:
        p.grad = None
    return g


def _params(fn, params):
    if params is not None:
        return list(params)
    if isinstance(fn, nn.Module):
        return [p for p in fn.parameters() if p.requires_grad]
    return []


# ---------------------------------------------------------------- the check


def _run(callable_, args, params, check_grad):
    before = [_values(a) if isinstance(a, tp.Tensor) else None for a in args]
    result = callable_(*args)
    grads = _grads(result, args, params) if check_grad and tp.is_grad_enabled() else None
    return result, before, grads


def assert_compiled_matches_eager(fn, *args, backends=DEFAULT_BACKENDS, params=None, rtol=1e-5, atol=1e-6,
                                  calls=3, check_grad=True, compile_kwargs=None):
    """Runs the checks described in the module docstring; returns the compiled
    functions by backend (for further checks such as metrics)."""
    params = _params(fn, params)
    compiled = {}
    for backend in backends:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fallbacks are reported, not errors, here
            cf = tp.compile(fn, backend=backend, **(compile_kwargs or {}))
            compiled[backend] = cf
            c_args = copy_args(args)
            e_args = copy_args(args)
            for call in range(calls):
                if call == 2:
                    c_args = copy_args(args)  # new objects: the specialization cache
                    e_args = copy_args(args)
                # Eager runs on its own objects the same way, so a function that writes
                # into its arguments is compared after the same number of writes.
                want, _, want_grads = _run(fn, e_args, params, check_grad)
                got, _, got_grads = _run(cf, c_args, params, check_grad)
                where = f"backend={backend!r}, call {call + 1}"
                try:
                    assert_same_structure(got, want)
                    for (path, g), (_, w) in zip(leaves(got), leaves(want)):
                        if isinstance(w, tp.Tensor):
                            assert_tensor_close(g, w, path, rtol, atol)
                            assert g.requires_grad == w.requires_grad, f"{path}: requires_grad {g.requires_grad}"
                            assert (g.grad_fn is None) == (w.grad_fn is None), f"{path}: grad_fn {g.grad_fn}"
                    assert aliasing(got, c_args) == aliasing(want, e_args), (
                        f"aliasing of results and arguments: compiled {aliasing(got, c_args)}, "
                        f"eager {aliasing(want, e_args)}")
                    for k, (a, b) in enumerate(zip(c_args, e_args)):
                        if isinstance(b, tp.Tensor):
                            np.testing.assert_array_equal(_values(a), _values(b),
                                                          err_msg=f"argument {k} after the call")
                    assert (got_grads is None) == (want_grads is None), "gradients: one side has none"
                    for k, (g, w) in enumerate(zip(got_grads or [], want_grads or [])):
                        assert (g is None) == (w is None), f"gradient {k}: compiled {g}, eager {w}"
                        if w is not None:
                            assert_tensor_close(g, w, f"gradient {k}", rtol, atol)
                except AssertionError as e:
                    raise AssertionError(f"{where}: {e}") from None
                # Drop the autograd state the call left on reused arguments.
                for a in list(c_args) + list(e_args):
                    if isinstance(a, tp.Tensor) and a.requires_grad:
                        a.grad = None
    return compiled


__all__ = ["assert_compiled_matches_eager", "copy_args", "aliasing", "leaves", "DEFAULT_BACKENDS"]
