"""gradcheck / gradgradcheck: derivative formulas against central finite
differences.

The analytical Jacobian is built one row at a time (a vector-Jacobian product
with a one-hot gradient per output element, through tp.autograd.grad); the
numerical one one column at a time (each input element moved by +-eps in
place, the function re-run without recording). Use float64 inputs: with
float32 the finite differences are too noisy for the default tolerances.
"""
import warnings

from .._lazy_numpy import np  # imported on first gradcheck, not by `import tensorplay`

from .. import _C

Tensor = _C.Tensor


class GradcheckError(RuntimeError):
    """A Jacobian did not match (a RuntimeError, as PyTorch users expect)."""


def _as_tuple(x):
    if isinstance(x, (tuple, list)):
        return tuple(x)
    return (x,)


def _values(t):
    """A float64 copy of a tensor's values (the tensor may alias an input that moves later)."""
    return np.array(t.detach().numpy(), dtype=np.float64, copy=True).ravel()


def _is_diff_output(o):
    return isinstance(o, Tensor) and o.dtype.is_floating_point


def _element(t, k):
    """A 0-d alias of element k (row-major) of `t`, for an in-place write."""
    return _C._element_alias(t, k)


def _numerical_jacobian(func, inputs, diff_idx, eps):
    """cols[j][i]: (numel of output i) x (numel of input j) as float64 arrays."""
    from .._grad_mode import no_grad
    jac = []
    with no_grad():
        for j in diff_idx:
            x = inputs[j]
            per_output = None
            for k in range(x.numel()):
                elem = _element(x, k)
                orig = elem.item()
                elem.fill_(orig + eps)
                plus = [_values(o) if _is_diff_output(o) else None for o in _as_tuple(func(*inputs))]
                elem.fill_(orig - eps)
                minus = [_values(o) if _is_diff_output(o) else None for o in _as_tuple(func(*inputs))]
                elem.fill_(orig)
                if per_output is None:
                    per_output = [np.zeros((p.size, x.numel())) if p is not None else None for p in plus]
                for i, (p, m) in enumerate(zip(plus, minus)):
                    if p is not None:
                        per_output[i][:, k] = (p - m) / (2 * eps)
            if per_output is None:  # an empty input: no columns
                outs = _as_tuple(func(*inputs))
                per_output = [np.zeros((o.numel(), 0)) if _is_diff_output(o) else None for o in outs]
            jac.append(per_output)
    return jac


def _analytical_jacobian(outputs, inputs, diff_idx):
    """rows[j][i]: the same layout as _numerical_jacobian; None for outputs without history."""
    from . import grad as autograd_grad
    diff_inputs = [inputs[j] for j in diff_idx]
    jac = [[None] * len(outputs) for _ in diff_idx]
    for i, o in enumerate(outputs):
        if not _is_diff_output(o) or not o.requires_grad:
            continue
        mats = [np.zeros((o.numel(), x.numel())) for x in diff_inputs]
        for r in range(o.numel()):
            onehot = np.zeros(o.numel(), dtype=np.float64)
            onehot[r] = 1.0
            g_out = _C.from_numpy(onehot.reshape(tuple(o.shape))).to(o.dtype)
            grads = autograd_grad([o], diff_inputs, [g_out], retain_graph=True, allow_unused=True)
            for n, (g, x) in enumerate(zip(grads, diff_inputs)):
                if g is None:
                    continue
                _check_grad_meta(g, x, i, diff_idx[n])
                mats[n][r, :] = _values(g)
        for n in range(len(diff_idx)):
            jac[n][i] = mats[n]
    return jac


def _check_grad_meta(g, x, out_i, in_j):
    if tuple(g.shape) != tuple(x.shape):
        raise GradcheckError(f"gradcheck: the gradient of output {out_i} w.r.t. input {in_j} has shape "
                             f"{list(g.shape)} but the input has shape {list(x.shape)}")
    if g.dtype != x.dtype:
        raise GradcheckError(f"gradcheck: the gradient of output {out_i} w.r.t. input {in_j} has dtype "
                             f"{g.dtype!r} but the input has dtype {x.dtype!r}")


def _compare(num, ana, out_i, in_j, atol, rtol):
    """None if they match, else the error message."""
    if ana is None:
        if np.all(np.abs(num) <= atol):
            return None
        r, c = np.unravel_index(np.argmax(np.abs(num)), num.shape)
        return (f"gradcheck: output {out_i} does not require grad (no derivative was recorded), but its numerical "
                f"derivative w.r.t. input {in_j} is nonzero (max {np.abs(num).max():.6g} at output element {r}, "
                f"input element {c}); is a backward formula missing?")
    diff = np.abs(ana - num)
    bad = diff > atol + rtol * np.abs(num)
    if not bad.any():
        return None
    r, c = np.unravel_index(np.argmax(np.where(bad, diff, -1)), diff.shape)
    msg = (f"Jacobian mismatch for output {out_i} with respect to input {in_j}: max difference "
           f"{diff.max():.6g} (atol={atol}, rtol={rtol}); first bad entry at output element {r}, input element "
           f"{c}: numerical {num[r, c]:.10g} vs analytical {ana[r, c]:.10g}")
    if num.size <= 64:
        with np.printoptions(precision=6, suppress=True, linewidth=120):
            msg += f"\nnumerical:\n{num}\nanalytical:\n{ana}"
    return msg


def _fail(msg, raise_exception):
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, **unused):
    """Checks the derivatives of `func` at `inputs` (the tensors with
    requires_grad=True) against central differences. Returns True, or raises
    GradcheckError (or returns False with raise_exception=False)."""
    inputs = _as_tuple(inputs)
    diff_idx = [j for j, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff_idx:
        raise ValueError("gradcheck: at least one input tensor must have requires_grad=True")
    for j in diff_idx:
        x = inputs[j]
        if any(st == 0 and n > 1 for st, n in zip(x.stride(), x.shape)):
            raise ValueError(f"gradcheck: input {j} has overlapping memory (an expanded dim of stride 0, shape "
                             f"{list(x.shape)}); moving one element would move several. Pass a contiguous clone.")
        if inputs[j].dtype != _C.dtype.float64:
            warnings.warn(f"gradcheck: input {j} is {inputs[j].dtype!r}, not float64; finite differences will be "
                          "inaccurate", UserWarning, stacklevel=2)
    outputs = _as_tuple(func(*inputs))
    if not any(_is_diff_output(o) for o in outputs):
        raise ValueError("gradcheck: func returned no floating-point tensor output")
    ana = _analytical_jacobian(outputs, inputs, diff_idx)
    num = _numerical_jacobian(func, inputs, diff_idx, eps)
    for n, j in enumerate(diff_idx):
        for i, o in enumerate(outputs):
            if not _is_diff_output(o):
                continue
            msg = _compare(num[n][i], ana[n][i], i, j, atol, rtol)
            if msg:
                return _fail(msg, raise_exception)
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
                  **unused):
    """Checks second derivatives: gradcheck of (inputs, grad_outputs) ->
    autograd.grad(func(inputs), inputs, grad_outputs, create_graph=True).
    Random float64 grad_outputs (fixed seed) are used when none are given."""
    from . import grad as autograd_grad
    inputs = _as_tuple(inputs)
    diff_idx = [j for j, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff_idx:
        raise ValueError("gradgradcheck: at least one input tensor must have requires_grad=True")
    outputs = [o for o in _as_tuple(func(*inputs)) if _is_diff_output(o) and o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = []
        for o in outputs:
            g = _C.from_numpy(rng.standard_normal(tuple(o.shape))).to(o.dtype)
            grad_outputs.append(g.requires_grad_(True))
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)

    def first_derivative(*args):
        from .._grad_mode import enable_grad
        ins, gos = args[:n_in], args[n_in:]
        with enable_grad():  # also while gradcheck evaluates finite differences under no_grad
            outs = [o for o in _as_tuple(func(*ins)) if _is_diff_output(o) and o.requires_grad]
            grads = autograd_grad(outs, [ins[j] for j in diff_idx], list(gos), create_graph=True,
                                  allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivative, inputs + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
