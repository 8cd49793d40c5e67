"""tensorplay.nn.functional: PyTorch-signature functions over registered operators.

Each function normalizes its arguments (PyTorch's conveniences: an int for a
pair, stride=None meaning the kernel size, legacy size_average/reduce flags,
padding='same') and then calls the C++ operator of the same name, looked up
on the tensorplay package *at call time*: importing this module never fails
because an operator is missing from the build; calling a function whose
operator is missing raises a NotImplementedError that names it.
"""
import functools
import math
import re
import sys
import warnings

import tensorplay as _tp
from ..amp.autocast_mode import _autocast_composite

__all__ = [
    "relu", "relu6", "gelu", "silu", "mish", "softplus", "elu", "leaky_relu", "hardtanh", "sigmoid", "tanh",
    "logsigmoid", "softmax", "log_softmax", "layer_norm", "rms_norm", "batch_norm", "dropout", "embedding",
    "linear", "conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool2d",
    "mse_loss", "l1_loss", "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "one_hot", "scaled_dot_product_attention", "selu", "celu", "softsign", "hardsigmoid", "hardswish", "glu",
    "softmin", "normalize", "cosine_similarity", "group_norm", "smooth_l1_loss", "huber_loss", "kl_div", "pad",
]


def _op(name):
    fn = getattr(_tp, name, None)
    if fn is None:
        raise NotImplementedError(f"tensorplay.nn.functional needs the operator '{name}', "
                                  "which this build of tensorplay does not register")
    return fn


_OP_PREFIX = re.compile(r"([A-Za-z_][\w.]*)(?:\(\))?: ")


def _names_errors(fn):
    """An error raised by an operator this composed function calls ("sub: shapes ...")
    is re-raised naming the function the user called: "l1_loss: shapes ... (in sub)"."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (RuntimeError, ValueError, IndexError, TypeError) as e:
            if isinstance(e, (_tp._C.CaptureError, _tp._C.BackendError)):
                raise
            msg = str(e)
            m = _OP_PREFIX.match(msg)
            if m and (m.group(1) == name or m.group(1).startswith(name + ".")):
                raise
            renamed = f"{name}: {msg[m.end():]} (in {m.group(1)})" if m else f"{name}: {msg}"
            try:
                new = type(e)(renamed)
            except Exception:  # an exception class with another constructor: keep it as it is
                raise e from None
            raise new.with_traceback(e.__traceback__) from None
    return wrapper


def _pair(x, n=2):
    if isinstance(x, (list, tuple)):
        if len(x) == 1:
            return tuple(x) * n
        return tuple(x)
    return (x,) * n


_MORE = __name__.rpartition(".")[0] + "._functional_more"
_AUTOCAST = "tensorplay.amp.autocast_mode"  # its composite wrapper adds a frame too


def _user_stacklevel():
    """The stacklevel of the first caller outside this module, for warnings.warn called by
    the function that calls this one (composed functions and their error-naming wrapper
    add frames, so a fixed number would point inside tensorplay)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__") in (__name__, _MORE, _AUTOCAST):
        frame, level = frame.f_back, level + 1
    return level


def _reduction(size_average, reduce, reduction):
    """Maps the legacy size_average/reduce flags onto reduction, as PyTorch does."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction instead.",
                  stacklevel=_user_stacklevel())
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _check_reduction(fn, reduction):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{fn}: {reduction} is not a valid value for reduction (expected 'none', 'mean' or 'sum')")


# ---------------------------------------------------------------- activations
def _maybe_inplace(input, fn, inplace, saves_input=True):
    """fn(input), written into input when inplace=True (the module's `inplace=True`).

    When autograd records the call, fn runs on a copy: most activations save their
    input for backward (leaky_relu, elu, silu, hardtanh, ...), and the write into input
    would invalidate what they saved, so backward raised a version-counter error
    where PyTorch's in-place kernels (which save the result) train normally.
    saves_input=False (relu: its derivative reads the result; dropout: its mask)
    skips the copy."""
    if not inplace:
        return fn(input)
    copy = saves_input and input.requires_grad and _tp.is_grad_enabled()
    return input.copy_(fn(input.clone() if copy else input))


def relu(input, inplace=False):
    return _maybe_inplace(input, _op("relu"), inplace, saves_input=False)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _op("gelu")(input, approximate=approximate)


def silu(input, inplace=False):
    return _maybe_inplace(input, _op("silu"), inplace)


def mish(input, inplace=False):
    return _maybe_inplace(input, _op("mish"), inplace)


def softplus(input, beta=1.0, threshold=20.0):
    return _op("softplus")(input, beta=beta, threshold=threshold)


def elu(input, alpha=1.0, inplace=False):
    return _maybe_inplace(input, lambda x: _op("elu")(x, alpha=alpha), inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _maybe_inplace(input, lambda x: _op("leaky_relu")(x, negative_slope=negative_slope), inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    return _maybe_inplace(input, lambda x: _op("hardtanh")(x, min_val=min_val, max_val=max_val), inplace)


def sigmoid(input):
    return _op("sigmoid")(input)


def tanh(input):
    return _op("tanh")(input)


@_names_errors
def logsigmoid(input):
    # log(sigmoid(x)) = -softplus(-x), the stable form.
    return -softplus(-input)


# SELU's constants: the fixed point of mean 0 / variance 1 (Klambauer et al., 2017).
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _rounded_once(fn, input):
    """fn(input), computed in float32 and rounded once for 16-bit inputs (PyTorch's kernels do; the
    composite's intermediate roundings would double the error)."""
    if input.dtype in (_tp.float16, _tp.bfloat16):
        return fn(input.float()).to(input.dtype)
    return fn(input)


@_names_errors
def selu(input, inplace=False):
    return _maybe_inplace(input, lambda t: _rounded_once(lambda x: elu(x, _SELU_ALPHA) * _SELU_SCALE, t), inplace)


def celu(input, alpha=1.0, inplace=False):
    # max(0,x) + min(0, alpha*(exp(x/alpha)-1)) is alpha * elu(x/alpha).
    if alpha == 0:
        raise ValueError("celu: alpha cannot be 0")
    return _maybe_inplace(input, lambda t: _rounded_once(lambda x: elu(x / alpha) * alpha, t), inplace)


def softsign(input):
    return _rounded_once(lambda x: x / (x.abs() + 1), input)


def hardsigmoid(input, inplace=False):
    return _maybe_inplace(input, lambda t: _rounded_once(lambda x: hardtanh(x + 3.0, 0.0, 6.0) / 6.0, t), inplace)


def hardswish(input, inplace=False):
    return _maybe_inplace(input, lambda t: _rounded_once(lambda x: x * (hardtanh(x + 3.0, 0.0, 6.0) / 6.0), t), inplace)


@_names_errors
def glu(input, dim=-1):
    if input.shape[dim] % 2:
        raise ValueError(f"glu: halving dimension must be even, but dimension {dim} is size {input.shape[dim]}")
    a, b = _op("chunk")(input, 2, dim)
    return a * sigmoid(b)


def _softmax_dim(name, ndim):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=_user_stacklevel())
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmax", input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return _op("softmax")(input, dim)


@_names_errors
def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmin", input.dim())
    return softmax(-input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return _op("log_softmax")(input, dim)


# ---------------------------------------------------------------- normalization
def _shape_list(normalized_shape, keep_symbolic=False):
    # A symbolic size (dynamic shapes) is fixed by int() unless the operator's
    # compiled form takes it symbolic (layer_norm: the Stax rule reads the count at run time).
    fix = (lambda s: s if isinstance(s, _tp.SymInt) else int(s)) if keep_symbolic else int
    if isinstance(normalized_shape, (int, _tp.SymInt)):
        return [fix(normalized_shape)]
    return [fix(s) for s in normalized_shape]


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _op("layer_norm")(input, _shape_list(normalized_shape, keep_symbolic=True), weight, bias, eps=eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return _op("rms_norm")(input, _shape_list(normalized_shape), weight, eps=eps)


def _is_half(t):
    return t.dtype in (_tp.float16, _tp.bfloat16)


@_names_errors
@_autocast_composite("group_norm")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalizes each group of num_groups channel groups over (its channels x spatial dims)."""
    if input.dim() < 2:
        raise ValueError(f"group_norm: expected at least 2 dims (N, C, ...), got input of shape {tuple(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise ValueError(f"group_norm: num_channels ({c}) must be divisible by num_groups ({num_groups})")
    if _is_half(input):
        # Statistics and the affine step in float32, one rounding at the end (as PyTorch does).
        out = group_norm(input.float(), num_groups, None if weight is None else weight.float(),
                         None if bias is None else bias.float(), eps)
        return out.to(input.dtype)
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ValueError(f"group_norm: expected {name} to be a vector of size equal to the number of channels "
                             f"in input, but got {name} of shape {tuple(t.shape)} and input of shape "
                             f"{tuple(input.shape)}")
    grouped = input.reshape([n, num_groups, -1])
    out = layer_norm(grouped, [grouped.shape[-1]], eps=eps).reshape(list(input.shape))
    affine_shape = [1, c] + [1] * (input.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(affine_shape)
    if bias is not None:
        out = out + bias.reshape(affine_shape)
    return out


@_names_errors
def normalize(input, p=2.0, dim=1, eps=1e-12):
    """input / max(||input||_p over dim, eps)."""
    return input / _op("clamp_min")(_op("norm")(input, p, dim, True), eps)


def _broadcast_pair(a, b):
    n = max(a.dim(), b.dim())
    sa, sb = [1] * (n - a.dim()) + list(a.shape), [1] * (n - b.dim()) + list(b.shape)
    shape = []
    for x, y in zip(sa, sb):
        if x != y and 1 not in (x, y):
            raise ValueError(f"cosine_similarity: the shapes {list(a.shape)} and {list(b.shape)} do not broadcast")
        shape.append(y if x == 1 else x)
    return a.expand(*shape), b.expand(*shape)


@_names_errors
@_autocast_composite("cosine_similarity")
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    # Broadcast first: the norms are over `dim` of the broadcast shape (a size-1 side is repeated).
    x1, x2 = _broadcast_pair(x1, x2)
    # Each side is divided by its own (clamped) norm before the dot product, which stays
    # accurate when the norms are far apart.
    n1 = _op("clamp_min")(_op("norm")(x1, 2, dim, True), eps)
    n2 = _op("clamp_min")(_op("norm")(x2, 2, dim, True), eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


@_names_errors
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Updates running_mean/running_var in place when training (and they are given)."""
    if training and input.dim() >= 2:
        # Batch statistics need more than one value per channel (N * spatial size).
        per_channel = input.shape[0] * math.prod(input.shape[2:])
        if per_channel == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {tuple(input.shape)}")
    return _op("batch_norm")(input, running_mean, running_var, weight, bias,
                             training=training, momentum=momentum, eps=eps)


# ---------------------------------------------------------------- dropout, embedding, linear
def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    return _maybe_inplace(input, lambda x: _op("dropout")(x, p, True), inplace, saves_input=False)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of `weight` at the indices `input`.

    max_norm: first, under no_grad, every row that `input` looks up whose `norm_type` norm exceeds
    max_norm is rescaled in place to norm max_norm (PyTorch's renormalization: the weight changes).
    scale_grad_by_freq: a row's gradient is divided by how often its index occurs in `input`.
    """
    if sparse:
        raise NotImplementedError("embedding: sparse=True (sparse gradients) is not supported; use sparse=False")
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise ValueError(f"embedding: padding_idx ({padding_idx}) must be within num_embeddings ({n})")
        if padding_idx < 0:
            padding_idx += n
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    out = _op("embedding")(input, weight, padding_idx=padding_idx)
    if scale_grad_by_freq:
        # Not conditioned on out.requires_grad: tp.compile captures without autograd and would drop it.
        out = _scale_grad_by_freq(out, input, weight.shape[0])
    return out


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """Rescales, in place and outside autograd, the looked-up rows whose norm exceeds max_norm to
    max_norm / (norm + 1e-7) times themselves; the factor is computed in float64 and rounded to the
    weight's dtype once, as PyTorch's renorm multiplies by a double scalar.
    Under tp.compile the write is a mutation of the weight like any other in-place update."""
    if not isinstance(input, _tp.Tensor) or input.dtype not in (_tp.int64, _tp.int32):
        raise TypeError("embedding: with max_norm, the indices must be an int64 or int32 tensor, got "
                        f"{getattr(input, 'dtype', type(input).__name__)}")
    if weight.dim() != 2:
        raise ValueError(f"embedding: weight must be 2-D, got {weight.dim()}-D")
    max_norm = float(max_norm)
    with _tp.no_grad():
        # Every looked-up position, duplicates included: a repeated row is rescaled from the same old
        # value each time, so the copies write equal values; no unique() keeps the shapes static,
        # so tp.compile can generate code for it.
        flat = input.reshape(-1).to(_tp.int64)
        if flat.numel() == 0:
            return weight
        try:
            picked = weight.index_select(0, flat)
        except IndexError as e:
            raise IndexError(f"embedding: {e}") from None
        # The norm in the weight's dtype (as PyTorch's), the factor in float64.
        norms = _tp.linalg.vector_norm(picked, ord=float(norm_type), dim=1).to(_tp.float64)
        scale = _tp.where(norms > max_norm, max_norm / (norms + 1e-7), _tp.ones_like(norms))
        weight.index_copy_(0, flat, picked * scale.to(weight.dtype).unsqueeze(1))
    return weight


_scale_grad_by_freq_fn = []


def _scale_grad_by_freq(out, input, num_weights):
    """out unchanged; its gradient at each position divided by the number of times that position's
    index occurs in the whole input, so a looked-up row receives the mean of its gradients.
    (The autograd Function is made on first use: tp.autograd is imported after this module.)"""
    if not _scale_grad_by_freq_fn:
        class EmbeddingScaleGradByFreq(_tp.autograd.Function):
            @staticmethod
            def forward(ctx, out, input, num_weights):
                flat = input.reshape(-1).to(_tp.int64)
                # index_add rather than bincount: its shape does not depend on the data (compilable)
                ones = _tp.ones_like(flat)
                freq = _tp.zeros(num_weights, dtype=_tp.int64).index_add(0, flat, ones).index_select(0, flat)
                ctx.save_for_backward(freq.reshape(tuple(input.shape) + (1,)))
                return out.view_as(out)

            @staticmethod
            def backward(ctx, grad):
                freq, = ctx.saved_tensors
                # times 1/count rounded to grad's dtype, as PyTorch's backward scales each row
                return grad * (1.0 / freq.to(_tp.float64)).to(grad.dtype), None, None

        _scale_grad_by_freq_fn.append(EmbeddingScaleGradByFreq)
    return _scale_grad_by_freq_fn[0].apply(out, input, num_weights)


def linear(input, weight, bias=None):
    return _op("linear")(input, weight, bias)


# ---------------------------------------------------------------- padding
@_names_errors
def pad(input, pad, mode="constant", value=None):
    """Pads the last len(pad)//2 dims; pad = (left_last, right_last, left_2nd_last, ...).

    Composed from narrow/flip/expand/cat, so autograd and capture see ordinary ops.
    Negative amounts crop. Modes: constant (value, default 0), reflect, replicate, circular.
    """
    if len(pad) % 2:
        raise ValueError(f"pad: padding length must be divisible by 2, got {len(pad)}")
    if len(pad) // 2 > input.dim():
        raise ValueError(f"pad: padding length ({len(pad)}) is too large for an input of {input.dim()} dims")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode {mode!r} is not supported")
    if mode != "constant" and value not in (None, 0, 0.0):
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in value argument")
    for i in range(len(pad) // 2):
        d = input.dim() - 1 - i
        if input.shape[d] + int(pad[2 * i]) + int(pad[2 * i + 1]) < 0:
            raise ValueError(f"pad: the input size {input.shape[d]} plus the padding {int(pad[2 * i])} and "
                             f"{int(pad[2 * i + 1])} gives a negative output size at dimension {d} "
                             f"(input of shape {tuple(input.shape)})")
    out = input
    for i in range(len(pad) // 2):
        out = _pad_dim(out, input.dim() - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1]), mode, value or 0)
    return out


def _pad_dim(x, dim, left, right, mode, value):
    if left < 0:
        x = x.narrow(dim, -left, x.shape[dim] + left)
    if right < 0:
        x = x.narrow(dim, 0, x.shape[dim] + right)
    left, right = max(left, 0), max(right, 0)
    if left == 0 and right == 0:
        return x
    n = x.shape[dim]

    def edge(amount, side):
        if mode == "constant":
            shape = [amount if d == dim else s for d, s in enumerate(x.shape)]
            return x.new_full(shape, value)  # on x's device
        if mode == "replicate":
            one = x.narrow(dim, 0 if side == "left" else n - 1, 1)
            return one.expand(*[amount if d == dim else s for d, s in enumerate(x.shape)])
        if mode == "reflect":
            if amount >= n:
                raise ValueError(f"pad: reflect padding ({amount}) must be smaller than the input size ({n}) "
                                 f"at dim {dim}")
            start = 1 if side == "left" else n - 1 - amount
            return x.narrow(dim, start, amount).flip([dim])
        if amount > n:
            raise ValueError(f"pad: circular padding ({amount}) must not exceed the input size ({n}) at dim {dim}")
        return x.narrow(dim, n - amount if side == "left" else 0, amount)

    parts = ([edge(left, "left")] if left else []) + [x] + ([edge(right, "right")] if right else [])
    return _op("cat")(parts, dim)


# ---------------------------------------------------------------- convolution and pooling
def _conv(name, nd, input, weight, bias, stride, padding, dilation, groups):
    if isinstance(padding, str):
        # The op's "padding" overload computes 'same'/'valid' itself.
        if padding not in ("valid", "same"):
            raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of 'valid', 'same'")
        if padding == "same" and any(s != 1 for s in _pair(stride, nd)):
            raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
    else:
        padding = list(_pair(padding, nd))
    return _op(name)(input, weight, bias, list(_pair(stride, nd)), padding, list(_pair(dilation, nd)), groups)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def _stride_or_kernel(stride, kernel_size, n):
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        return list(_pair(kernel_size, n))
    return list(_pair(stride, n))


@_names_errors
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    k = list(_pair(kernel_size))
    args = dict(stride=_stride_or_kernel(stride, kernel_size, 2), padding=list(_pair(padding)),
                dilation=list(_pair(dilation)), ceil_mode=ceil_mode)
    if return_indices:
        return _op("max_pool2d_with_indices")(input, k, **args)
    return _op("max_pool2d")(input, k, **args)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _op("avg_pool2d")(input, list(_pair(kernel_size)), stride=_stride_or_kernel(stride, kernel_size, 2),
                             padding=list(_pair(padding)), ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                             divisor_override=divisor_override)


def _pool1d_via_2d(name, fn, input, kernel_size, stride, padding, **kw):
    # A 1-d pool is the 2-d pool over a height-1 image (so indices are positions along L).
    if input.dim() not in (2, 3):
        raise ValueError(f"{name}: expected 2D (unbatched) or 3D (batched) input, but got input of shape "
                         f"{tuple(input.shape)}")
    k, s, p = _pair(kernel_size, 1)[0], _stride_or_kernel(stride, kernel_size, 1)[0], _pair(padding, 1)[0]
    d = kw.get("dilation", (1, 1))[1]
    n = input.shape[-1]
    if k > 0 and d > 0 and 0 <= p <= k // 2 and n + 2 * p < d * (k - 1) + 1:
        # Checked here so that the message shows the 1-d shapes, not the 2-d pool's.
        raise ValueError(f"{name}: output size is too small: a window of {d * (k - 1) + 1} (kernel_size={k}, "
                         f"dilation={d}) does not fit the padded length {n + 2 * p} of input of shape "
                         f"{tuple(input.shape)}")
    out = fn(input.unsqueeze(-2), (1, k), (1, s), (0, p), **kw)
    if isinstance(out, tuple):
        return tuple(o.squeeze(-2) for o in out)
    return out.squeeze(-2)


@_names_errors
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _pool1d_via_2d("max_pool1d", max_pool2d, input, kernel_size, stride, padding,
                          dilation=(1, _pair(dilation, 1)[0]), ceil_mode=ceil_mode, return_indices=return_indices)


@_names_errors
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _pool1d_via_2d("avg_pool1d", avg_pool2d, input, kernel_size, stride, padding, ceil_mode=ceil_mode,
                          count_include_pad=count_include_pad)


def adaptive_avg_pool2d(input, output_size):
    size = list(_pair(output_size))
    size = [input.shape[input.dim() - 2 + i] if s is None else int(s) for i, s in enumerate(size)]
    return _op("adaptive_avg_pool2d")(input, size)


# ---------------------------------------------------------------- losses
def _warn_if_broadcast(input, target):
    """Regression losses broadcast target against input. A (N, 1) prediction against a
    (N,) target then averages an N x N table of differences: a plausible, wrong loss that
    trains to the wrong answer without an error. Warn, as PyTorch does."""
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"the target size {tuple(target.shape)} differs from the input size {tuple(input.shape)}: "
                      "the two are broadcast against each other, which usually gives a wrong loss. Give them "
                      "the same shape.", UserWarning, stacklevel=_user_stacklevel())


def _weighted_loss(name, loss, weight, input, reduction, mean_by_weight):
    """PyTorch's weight= of mse/l1/huber loss: elementwise loss * weight (same size as input),
    then 'mean' divides by sum(weight) (mse, l1) or by the element count (huber)."""
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{name}: Weights and input must have the same size, got weight of shape "
                         f"{tuple(weight.shape)} and input of shape {tuple(input.shape)}")
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("mse_loss", reduction)
    _warn_if_broadcast(input, target)
    if weight is not None:
        return _weighted_loss("mse_loss", (input - target).pow(2), weight, input, reduction, True)
    return _op("mse_loss")(input, target, reduction=reduction)


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


@_names_errors
@_autocast_composite("l1_loss")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("l1_loss", reduction)
    _warn_if_broadcast(input, target)
    if weight is not None:
        return _weighted_loss("l1_loss", (input - target).abs(), weight, input, reduction, True)
    return _reduce((input - target).abs(), reduction)


@_names_errors
@_autocast_composite("smooth_l1_loss")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("smooth_l1_loss", reduction)
    _warn_if_broadcast(input, target)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(_tp.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)


@_names_errors
@_autocast_composite("huber_loss")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    _check_reduction("huber_loss", reduction)
    _warn_if_broadcast(input, target)
    if not delta > 0:
        raise ValueError(f"huber_loss: does not support non-positive values for delta, got delta={delta}")
    d = (input - target).abs()
    loss = _tp.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    if weight is not None:
        return _weighted_loss("huber_loss", loss, weight, input, reduction, False)
    return _reduce(loss, reduction)


@_names_errors
@_autocast_composite("kl_div")
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise target * (log target - input) with input given as log-probabilities."""
    reduction = _reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"kl_div: {reduction} is not a valid value for reduction")
    if log_target:
        loss = _tp.exp(target) * (target - input)
    else:
        # 0 * log 0 is taken as 0.
        safe = _tp.where(target > 0, target, _tp.ones_like(target))
        loss = _tp.where(target > 0, target * (_tp.log(safe) - input), 0.0)
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.dim() else 1)
    return _reduce(loss, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    return _op("cross_entropy")(input, target, weight, ignore_index=ignore_index, reduction=reduction,
                                label_smoothing=label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("nll_loss", reduction)
    return _op("nll_loss")(input, target, weight, ignore_index=ignore_index, reduction=reduction)


@_names_errors
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("binary_cross_entropy", reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                         f"({tuple(input.shape)}) is deprecated. Please ensure they have the same size.")
    # Probabilities outside [0, 1] raise (eager and compiled): the decomposition's _value_check.
    return _op("binary_cross_entropy")(input, target, weight, reduction=reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({tuple(target.shape)}) must be the same as input size ({tuple(input.shape)})")
    return _op("binary_cross_entropy_with_logits")(input, target, weight, pos_weight=pos_weight,
                                                   reduction=reduction)


def one_hot(tensor, num_classes=-1):
    return _op("one_hot")(tensor, num_classes=num_classes)


# ---------------------------------------------------------------- attention
def _causal_mask(L, S, device):
    # Query i may attend to keys j <= i (top-left aligned, like PyTorch's is_causal), on the query's device.
    return _tp.arange(L, device=device).unsqueeze(1) >= _tp.arange(S, device=device).unsqueeze(0)


@_names_errors
@_autocast_composite("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q k^T * scale + mask) v, composed from matmul/softmax (autograd and tracing see each step)."""
    if enable_gqa and query.dim() >= 3 and key.dim() >= 3:
        # Grouped-query attention: each group of Hq / Hkv query heads shares one key/value head
        # (PyTorch's math kernel repeats key and value along the head dim, -3).
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hk != hv or hk == 0 or hq % hk:
            raise RuntimeError(f"scaled_dot_product_attention: with enable_gqa=True the number of query heads "
                               f"({hq}) must be a multiple of the number of key/value heads (key {hk}, value {hv})")
        if hq != hk:
            key = key.repeat_interleave(hq // hk, -3)
            value = value.repeat_interleave(hq // hk, -3)
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True")
    if _is_half(query):
        # 16-bit attention accumulates in float32 and rounds once, as PyTorch's CPU kernel does.
        if attn_mask is not None and attn_mask.dtype != _tp.bool:
            attn_mask = attn_mask.float()
        out = scaled_dot_product_attention(query.float(), key.float(), value.float(), attn_mask, dropout_p,
                                           is_causal, scale, enable_gqa)
        return out.to(query.dtype)
    L, S = query.shape[-2], key.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = _tp.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        attn_mask = _causal_mask(L, S, query.device)
    if attn_mask is not None:
        if attn_mask.dtype == _tp.bool:
            scores = _tp.where(attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask
        # A query whose every key is masked attends to nothing: its output (and gradient) is 0, as in
        # PyTorch, not softmax's NaN. The row is made finite before softmax so no NaN reaches backward.
        dead = _op("amax")(scores, [-1], True) == float("-inf")
        weights = _tp.where(dead, 0.0, softmax(_tp.where(dead, 0.0, scores), -1))
    else:
        weights = softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    return _tp.matmul(weights, value)


# The rest of the functional API lives in a second file (it imports the helpers above).
from ._functional_more import *  # noqa: E402,F401,F403
from ._functional_more import __all__ as _more_all  # noqa: E402

__all__ += _more_all
from ._functional_extra import *  # noqa: E402,F401,F403
from ._functional_extra import __all__ as _extra_all  # noqa: E402

__all__ += _extra_all
from ._functional_blocks import *  # noqa: E402,F401,F403
from ._functional_blocks import __all__ as _blocks_all  # noqa: E402

__all__ += _blocks_all
from ._functional_sampling import *  # noqa: E402,F401,F403
from ._functional_sampling import __all__ as _sampling_all  # noqa: E402

__all__ += _sampling_all
from ._functional_ctc import *  # noqa: E402,F401,F403
from ._functional_ctc import __all__ as _ctc_all  # noqa: E402

__all__ += _ctc_all
from ._functional_inplace_activations import *  # noqa: E402,F401,F403
from ._functional_inplace_activations import __all__ as _all_0  # noqa: E402

__all__ += _all_0
from ._functional_pooling import *  # noqa: E402,F401,F403
from ._functional_pooling import __all__ as _all_1  # noqa: E402

__all__ += _all_1
from ._functional_pool3d import *  # noqa: E402,F401,F403
from ._functional_pool3d import __all__ as _all_2  # noqa: E402

__all__ += _all_2
from ._functional_channel_shuffle import *  # noqa: E402,F401,F403
from ._functional_channel_shuffle import __all__ as _all_3  # noqa: E402

__all__ += _all_3
from ._functional_feature_alpha_dropout import *  # noqa: E402,F401,F403
from ._functional_feature_alpha_dropout import __all__ as _all_4  # noqa: E402

__all__ += _all_4
from ._functional_bilinear import *  # noqa: E402,F401,F403
from ._functional_bilinear import __all__ as _all_5  # noqa: E402

__all__ += _all_5
from ._functional_pdist import *  # noqa: E402,F401,F403
from ._functional_pdist import __all__ as _all_6  # noqa: E402

__all__ += _all_6
from ._functional_margin_losses import *  # noqa: E402,F401,F403
from ._functional_margin_losses import __all__ as _all_7  # noqa: E402

__all__ += _all_7
from ._functional_unpool import *  # noqa: E402,F401,F403
from ._functional_unpool import __all__ as _unpool_all  # noqa: E402

__all__ += _unpool_all
from ._functional_conv_transpose3d import conv_transpose3d  # noqa: E402,F401
from ._functional_fractional_pool import *  # noqa: E402,F401,F403
from ._functional_fractional_pool import __all__ as _fractional_all  # noqa: E402

__all__ += ["conv_transpose3d"] + _fractional_all


def multi_head_attention_forward(*args, **kwargs):
    """PyTorch's functional multi-head attention ((L, N, E) inputs, weights passed in); see
    modules/attention.py, which MultiheadAttention shares."""
    from .modules.attention import multi_head_attention_forward as impl
    return impl(*args, **kwargs)


__all__ += ["multi_head_attention_forward"]
