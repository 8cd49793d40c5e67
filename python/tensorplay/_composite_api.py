"""PyTorch functions that are compositions of existing tensor operators (ravel,
tensordot, kron, tensor_split, fmax, cov, quantile, ...). Written in Python on
top of the operators so autograd and tp.compile capture see only ops they
already know. `install()` puts them on the tensorplay namespace and Tensor."""
import math
import sys

from ._C import Tensor
from .amp.autocast_mode import _autocast_composite
from .linalg import _finish  # out=: resized and written as PyTorch does


def _tp():
    return sys.modules[__package__]


def _check_tensor(fn, name, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: {name} must be a Tensor, got {type(x).__name__}")


def _wrap_dim(fn, dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{fn}: dim {dim} out of range for a tensor of {ndim} dimensions")
    return dim % n


def type_as(self, other):
    """self converted to other's dtype."""
    _check_tensor("type_as", "other", other)
    return self.to(other.dtype)


def ravel(input):
    """input as a contiguous 1-D tensor."""
    return input.reshape(-1)


def mv(input, vec):
    """Matrix (n, m) times vector (m,)."""
    _check_tensor("mv", "input", input)
    _check_tensor("mv", "vec", vec)
    if input.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"mv: expected a 2-D matrix and a 1-D vector, got {input.dim()}-D and {vec.dim()}-D")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"mv: size mismatch, matrix {tuple(input.shape)} and vector {tuple(vec.shape)}")
    return _tp().matmul(input, vec)


@_autocast_composite("tensordot")
def tensordot(a, b, dims=2, out=None):
    """Sum of products over the dims of `a` and `b` named by `dims` (an int: the last dims of a with the
    first of b; or a pair of lists)."""
    _check_tensor("tensordot", "a", a)
    _check_tensor("tensordot", "b", b)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot: dims must be non-negative, got {dims}")
        if dims > a.dim() or dims > b.dim():
            raise RuntimeError(f"tensordot: dims {dims} exceeds the dimensions of a ({a.dim()}) or b ({b.dim()})")
        da = list(range(a.dim() - dims, a.dim()))
        db = list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError("tensordot: dims must be an int or a pair of dimension lists")
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
        if len(da) != len(db):
            raise RuntimeError(f"tensordot: both dimension lists must have the same length, got {da} and {db}")
        da = [_wrap_dim("tensordot", d, a.dim()) for d in da]
        db = [_wrap_dim("tensordot", d, b.dim()) for d in db]
    for i, j in zip(da, db):
        # a contracted dim of size 1 broadcasts against the other side's: sum that side's dim first
        if a.shape[i] == 1 and b.shape[j] != 1:
            b = b.sum(j, keepdim=True).to(b.dtype)
        elif b.shape[j] == 1 and a.shape[i] != 1:
            a = a.sum(i, keepdim=True).to(a.dtype)
        elif a.shape[i] != b.shape[j]:
            raise RuntimeError(f"tensordot: contracted dimensions differ in size: a dim {i} has {a.shape[i]}, "
                               f"b dim {j} has {b.shape[j]}")
    free_a = [d for d in range(a.dim()) if d not in da]
    free_b = [d for d in range(b.dim()) if d not in db]
    k = 1
    for d in da:
        k *= a.shape[d]
    ma = 1
    for d in free_a:
        ma *= a.shape[d]
    nb = 1
    for d in free_b:
        nb *= b.shape[d]
    a2 = a.permute(*(free_a + da)).reshape(ma, k)
    b2 = b.permute(*(db + free_b)).reshape(k, nb)
    res = _tp().matmul(a2, b2).reshape([a.shape[d] for d in free_a] + [b.shape[d] for d in free_b])
    return _finish(res, out)


def inner(input, other):
    """Sum of products over the last dimension of both (a plain product when either is 0-d)."""
    _check_tensor("inner", "input", input)
    _check_tensor("inner", "other", other)
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner: last dimensions differ: {tuple(input.shape)} and {tuple(other.shape)}")
    return tensordot(input, other, dims=([-1], [-1]))


def kron(input, other):
    """Kronecker product: block (i, j, ...) of the result is input[i, j, ...] * other."""
    _check_tensor("kron", "input", input)
    _check_tensor("kron", "other", other)
    nd = max(input.dim(), other.dim())
    a_shape = [1] * (nd - input.dim()) + list(input.shape)
    b_shape = [1] * (nd - other.dim()) + list(other.shape)
    a = input.reshape([s for d in a_shape for s in (d, 1)]) if nd else input
    b = other.reshape([s for d in b_shape for s in (1, d)]) if nd else other
    return (a * b).reshape([x * y for x, y in zip(a_shape, b_shape)]) if nd else a * b


def tensor_split(input, indices_or_sections, dim=0):
    """Views of `input` split along `dim` into n nearly equal parts (an int) or at the given indices."""
    _check_tensor("tensor_split", "input", input)
    if input.dim() == 0:
        raise RuntimeError("tensor_split: expected at least a 1-dimensional tensor")
    dim = _wrap_dim("tensor_split", dim, input.dim())
    size = input.shape[dim]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios.dim() > 1 or ios.is_floating_point():
            raise RuntimeError("tensor_split: a tensor indices_or_sections must be a 0-D or 1-D integer tensor")
        # int() of each element (not tolist()) so that tp.compile can capture it as a data gate
        ios = int(ios) if ios.dim() == 0 else [int(ios[i]) for i in range(ios.shape[0])]
    if isinstance(ios, int):
        if ios <= 0:
            raise RuntimeError(f"tensor_split: number of sections must be larger than 0, got {ios}")
        q, r = divmod(size, ios)
        bounds, start = [], 0
        for i in range(ios):
            n = q + (1 if i < r else 0)
            bounds.append((start, n))
            start += n
    else:
        # consecutive indices bound the parts like Python slices input[prev:idx] (so a part may be empty)
        def clip(i):
            i = int(i)
            return min(max(i + size if i < 0 else i, 0), size)

        cuts = [0] + [clip(i) for i in ios] + [size]
        bounds = [(lo, max(hi - lo, 0)) for lo, hi in zip(cuts[:-1], cuts[1:])]
    return tuple(input.narrow(dim, s, n) for s, n in bounds)


def _split_even(fn, input, ios, dim):
    if isinstance(ios, int):
        if ios <= 0 or input.shape[dim] % ios != 0:
            raise RuntimeError(f"{fn}: dimension {dim} of size {input.shape[dim]} is not divisible by "
                               f"the split size {ios}")
    return tensor_split(input, ios, dim)


def hsplit(input, indices_or_sections):
    if input.dim() < 1:
        raise RuntimeError("hsplit: requires a tensor with at least 1 dimension")
    return _split_even("hsplit", input, indices_or_sections, 1 if input.dim() > 1 else 0)


def vsplit(input, indices_or_sections):
    if input.dim() < 2:
        raise RuntimeError(f"vsplit: requires a tensor with at least 2 dimensions, got {input.dim()}")
    return _split_even("vsplit", input, indices_or_sections, 0)


def dsplit(input, indices_or_sections):
    if input.dim() < 3:
        raise RuntimeError(f"dsplit: requires a tensor with at least 3 dimensions, got {input.dim()}")
    return _split_even("dsplit", input, indices_or_sections, 2)


def _as_tensor_like(fn, x, like):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float)):
        return _tp().tensor(x, dtype=like.dtype if isinstance(x, int) or like.is_floating_point() else None, device=like.device)
    raise TypeError(f"{fn}: expected a Tensor or a number, got {type(x).__name__}")


def _fminmax(fn, input, other, prefer):
    _check_tensor(fn, "input", input)
    other = _as_tensor_like(fn, other, input)
    tp = _tp()
    # NaN is ignored: pick the other side when one is NaN; ties go to `input` (its gradient too).
    if input.is_floating_point() or other.is_floating_point():
        keep = prefer(input, other) | tp.isnan(other)
    else:
        keep = prefer(input, other)
    return tp.where(keep, input, other)


def fmax(input, other):
    """Elementwise maximum that ignores NaN (NaN only when both are NaN)."""
    return _fminmax("fmax", input, other, lambda a, b: a >= b)


def fmin(input, other):
    """Elementwise minimum that ignores NaN (NaN only when both are NaN)."""
    return _fminmax("fmin", input, other, lambda a, b: a <= b)


def sgn(input):
    """sign(x) for real tensors; x / |x| (0 at 0) for complex ones."""
    tp = _tp()
    if getattr(input, "is_complex", lambda: False)():
        mag = input.abs()
        return tp.where(mag == 0, tp.zeros_like(input), input / tp.where(mag == 0, tp.ones_like(mag), mag))
    return tp.sign(input)


_LOW_PRECISION = ("float16", "bfloat16")


def _scaled_add(fn, input, prod_fn, beta, alpha):
    tp = _tp()
    if input.dtype == tp.bool:  # booleans: (beta and input) or (alpha and prod)
        prod = prod_fn(lambda t: t.to(tp.int64)) != 0
        if not beta:
            return prod & tp.ones_like(input) if bool(alpha) else tp.zeros_like(input) & prod
        return (input | prod) if bool(alpha) else input & tp.ones_like(prod)
    low = str(input.dtype).split(".")[-1] in _LOW_PRECISION
    if low:  # 16-bit floats: one rounding at the end, as PyTorch's fused kernels do
        res = _scaled_add(fn, input.float(), lambda cast: prod_fn(lambda t: cast(t.float())), beta, alpha)
        return res.to(input.dtype)
    prod = prod_fn(lambda t: t)
    if not (input.is_floating_point() or prod.is_floating_point()):
        beta, alpha = int(beta), int(alpha)  # integer kernels truncate the scalars (PyTorch's results)
    if beta == 0:  # PyTorch ignores input (NaN included) when beta is 0
        base = None
    else:
        base = input if beta == 1 else input * beta
    term = prod if alpha == 1 else prod * alpha
    if base is None:
        return term + _tp().zeros_like(input) if tuple(input.shape) != tuple(term.shape) else term
    return base + term


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    return _scaled_add("addmv", input, lambda cast: mv(cast(mat), cast(vec)), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    if vec1.dim() != 1 or vec2.dim() != 1:
        raise RuntimeError(f"addr: vec1 and vec2 must be 1-D, got {vec1.dim()}-D and {vec2.dim()}-D")
    return _scaled_add("addr", input, lambda cast: _tp().outer(cast(vec1), cast(vec2)), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum over the batch of batch1[i] @ batch2[i]."""
    if batch1.dim() != 3 or batch2.dim() != 3:
        raise RuntimeError(f"addbmm: batch1 and batch2 must be 3-D, got {batch1.dim()}-D and {batch2.dim()}-D")
    if batch1.shape[0] != batch2.shape[0] or batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"addbmm: incompatible batches {tuple(batch1.shape)} and {tuple(batch2.shape)}")
    b, n, m = batch1.shape
    p = batch2.shape[2]

    def prod(cast):  # the batch sum as one (n, b*m) @ (b*m, p) product: keeps integer dtypes
        return _tp().matmul(cast(batch1).permute(1, 0, 2).reshape(n, b * m), cast(batch2).reshape(b * m, p))
    return _scaled_add("addbmm", input, prod, beta, alpha)


def chain_matmul(*matrices, out=None):
    """Product of 2-D matrices left to right (deprecated in PyTorch in favour of linalg.multi_dot)."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul: expected one or more matrices")
    for m in matrices:
        if m.dim() != 2:
            raise RuntimeError(f"chain_matmul: every argument must be 2-D, got {m.dim()}-D")
    res = matrices[0]
    for m in matrices[1:]:
        res = _tp().matmul(res, m)
    if len(matrices) == 1:
        res = res.clone()
    return _finish(res, out)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose diagonal (offset, dim1, dim2) holds the last dimension of input; zeros elsewhere."""
    _check_tensor("diag_embed", "input", input)
    tp = _tp()
    nd = input.dim() + 1
    d1, d2 = _wrap_dim("diag_embed", dim1, nd), _wrap_dim("diag_embed", dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diag_embed: dim1 and dim2 cannot be the same dimension, got {dim1} and {dim2}")
    x = input if input.dim() > 0 else input.reshape(1)
    n = x.shape[-1]
    eye = tp.eye(n, dtype=x.dtype, device=x.device)
    d = x.unsqueeze(-1) * eye  # (..., n, n), diag(x)
    k = abs(offset)
    if k:
        lead = tuple(d.shape[:-2])
        zr = tp.zeros(list(lead) + [k, n], dtype=d.dtype, device=d.device)
        zc = tp.zeros(list(lead) + [n + k, k], dtype=d.dtype, device=d.device)
        if offset > 0:  # out[i, i + k]: extra rows below, extra columns on the left
            d = tp.cat([d, zr], -2)
            d = tp.cat([zc, d], -1)
        else:  # out[i + k, i]: extra rows on top, extra columns on the right
            d = tp.cat([zr, d], -2)
            d = tp.cat([d, zc], -1)
    return d.movedim((nd - 2, nd - 1), (d1, d2))


def diagflat(input, offset=0):
    """2-D tensor with the flattened input on its `offset` diagonal."""
    return diag_embed(input.reshape(-1), offset)


def _index_copy_(self, dim, index, source):
    self.copy_(self.index_copy(dim, index, source))
    return self


def _index_fill_(self, dim, index, value):
    self.copy_(self.index_fill(dim, index, value))
    return self


def take(input, index):
    """Elements of input, read as 1-D, at `index` (negative indices count from the end); index's shape."""
    _check_tensor("take", "input", input)
    _check_tensor("take", "index", index)
    if index.is_floating_point() or index.dtype == _tp().bool:
        raise RuntimeError(f"take: index must be an integer tensor, got {index.dtype}")
    n = input.numel()
    if index.numel():
        lo, hi = int(index.min().item()), int(index.max().item())
        if lo < -n or hi >= n:
            raise IndexError(f"take: index out of range for a tensor of {n} elements")
    flat = index.reshape(-1).to(_tp().int64)
    flat = _tp().where(flat < 0, flat + n, flat)
    return input.reshape(-1).index_select(0, flat).reshape(list(index.shape))


def _int_pair(fn, input, other):
    _check_tensor(fn, "input", input)
    other = _as_tensor_like(fn, other, input)
    tp = _tp()
    for t in (input, other):
        if t.is_floating_point() or t.dtype == tp.bool:
            raise RuntimeError(f"{fn}: expected integer tensors, got {t.dtype}")
    return input, other


def gcd(input, other):
    """Elementwise greatest common divisor of integer tensors (non-negative; gcd(0, 0) = 0)."""
    input, other = _int_pair("gcd", input, other)
    tp = _tp()
    a, b = input.abs(), other.abs()
    a, b = a + b * 0, b + a * 0  # broadcast both to the common shape
    while bool((b != 0).any().item()):
        nz = b != 0
        safe = tp.where(nz, b, tp.ones_like(b))
        a, b = tp.where(nz, b, a), tp.where(nz, tp.remainder(a, safe), b)
    return a


def lcm(input, other):
    """Elementwise least common multiple of integer tensors (non-negative; 0 when either is 0)."""
    input, other = _int_pair("lcm", input, other)
    tp = _tp()
    g = gcd(input, other)
    safe = tp.where(g == 0, tp.ones_like(g), g)
    return tp.where(g == 0, tp.zeros_like(g), (tp.div(input, safe, rounding_mode="trunc") * other).abs())


def ldexp(input, other):
    """input * 2 ** other (a floating result)."""
    _check_tensor("ldexp", "input", input)
    tp = _tp()
    other = _as_tensor_like("ldexp", other, input)
    x = input if input.is_floating_point() else input.to(tp.get_default_dtype())
    e = other if other.is_floating_point() else other.to(x.dtype)
    return x * tp.exp2(e)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance matrix of the variables in the rows of `input` (a 1-D input is one variable)."""
    _check_tensor("cov", "input", input)
    tp = _tp()
    if input.dim() > 2:
        raise RuntimeError(f"cov: expected input to have two or fewer dimensions, got {input.dim()}")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    if not x.is_floating_point():
        x = x.to(tp.get_default_dtype())
    if aweights is not None and aweights.is_floating_point():
        x = x.to(tp.promote_types(x.dtype, aweights.dtype))  # the result type includes aweights'
    nobs = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.dim() > 1 or fweights.numel() != nobs:
            raise RuntimeError(f"cov: fweights must be 1-D with {nobs} elements")
        if fweights.is_floating_point():
            raise RuntimeError("cov: fweights must be integral")
        if fweights.numel() and bool((fweights < 0).any().item()):
            raise RuntimeError("cov: fweights cannot be negative")
        w = fweights
    if aweights is not None:
        if aweights.dim() > 1 or aweights.numel() != nobs:
            raise RuntimeError(f"cov: aweights must be 1-D with {nobs} elements")
        if not aweights.is_floating_point():
            raise RuntimeError("cov: aweights must be floating point")
        if aweights.numel() and bool((aweights < 0).any().item()):
            raise RuntimeError("cov: aweights cannot be negative")
        # the weights keep their own dtype: their sums (and the normalizer) are computed in it, as PyTorch does
        w = aweights if w is None else w * aweights
    if w is None:
        wsum = tp.tensor(float(nobs), dtype=x.dtype, device=x.device)
        avg = x.mean(1) if nobs else x.sum(1) * float("nan")
    else:
        wsum = w.sum()
        avg = (x * w).sum(1) / wsum
    if w is None:
        norm = wsum - correction
    elif correction == 0:
        norm = wsum
    elif aweights is None:
        norm = wsum - correction
    else:
        norm = wsum - correction * (w * aweights).sum() / wsum
    norm = norm.clamp(min=0)
    xc = x - avg.unsqueeze(1)
    xw = xc if w is None else xc * w
    c = tp.matmul(xw, xc.transpose(0, 1)) / norm
    return c.reshape([]) if c.shape[0] == 1 else c  # a single variable: a 0-d variance


def corrcoef(input):
    """Pearson correlation coefficients of the variables in the rows of `input`."""
    _check_tensor("corrcoef", "input", input)
    if input.dim() > 2:
        raise RuntimeError(f"corrcoef: expected input to have two or fewer dimensions, got {input.dim()}")
    tp = _tp()
    c = cov(input)
    if c.dim() == 0:
        return c / c
    d = tp.diagonal(c)
    s = d.sqrt()
    c = c / s.unsqueeze(1) / s.unsqueeze(0)
    return c.clamp(-1, 1)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(fn, input, q, dim, keepdim, interpolation, ignore_nan):
    _check_tensor(fn, "input", input)
    tp = _tp()
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{fn}: interpolation must be one of {_INTERPOLATIONS}, got {interpolation!r}")
    if not input.is_floating_point():
        raise RuntimeError(f"{fn}: input tensor must be either float or double dtype, got {input.dtype}")
    scalar_q = not isinstance(q, Tensor)
    if scalar_q:
        qt = tp.tensor([float(q)], dtype=input.dtype, device=input.device)
    else:
        if q.dim() > 1:
            raise RuntimeError(f"{fn}: q must be a scalar or a 1-D tensor, got {q.dim()}-D")
        if q.dtype != input.dtype:
            raise RuntimeError(f"{fn}: q tensor must be the same dtype as the input tensor, got {q.dtype}")
        scalar_q = q.dim() == 0
        qt = q.reshape(-1)
    if qt.numel() and bool(((qt < 0) | (qt > 1)).any().item()):
        raise RuntimeError(f"{fn}: q values must be in the range [0, 1]")
    if dim is None:
        x = input.reshape(-1)
        red_dim = 0
        out_shape = [1] * input.dim() if keepdim else []
    else:
        red_dim = _wrap_dim(fn, dim, input.dim())
        x = input if input.dim() else input.reshape(1)
        out_shape = list(input.shape)
        if keepdim:
            if input.dim():
                out_shape[red_dim] = 1
        elif input.dim():
            del out_shape[red_dim]
    if x.shape[red_dim] == 0:
        raise RuntimeError(f"{fn}: input tensor cannot be empty")
    x = x.movedim(red_dim, -1)
    lead = list(x.shape[:-1])
    n = x.shape[-1]
    srt = tp.sort(x, -1).values  # NaN sorts last
    nq = qt.numel()
    isn = tp.isnan(x)
    if ignore_nan:
        cnt = (~isn).sum(-1, keepdim=True).to(x.dtype)  # (..., 1)
        last = cnt - 1
    else:
        last = tp.full(lead + [1], float(n - 1), dtype=x.dtype, device=x.device)
    rank = qt.reshape([1] * len(lead) + [nq]) * tp.where(last < 0, tp.zeros_like(last), last)  # (..., nq)
    if interpolation == "lower":
        rank = rank.floor()
    elif interpolation == "higher":
        rank = rank.ceil()
    elif interpolation == "nearest":
        rank = rank.round()
    lo_i = rank.floor().to(tp.int64).clamp(0, n - 1)
    hi_i = rank.ceil().to(tp.int64).clamp(0, n - 1)
    lo = tp.gather(srt, -1, lo_i)
    hi = tp.gather(srt, -1, hi_i)
    if interpolation == "midpoint":
        res = lo + (hi - lo) * 0.5
    elif interpolation == "linear":
        res = lo + (hi - lo) * (rank - rank.floor())
    else:
        res = lo
    nan_slice = isn.any(-1, keepdim=True) if not ignore_nan else (last < 0)
    res = tp.where(nan_slice, tp.full_like(res, float("nan")), res)  # (..., nq)
    res = res.movedim(-1, 0)  # (nq, ...)
    res = res.reshape([nq] + list(out_shape))
    return res[0] if scalar_q else res


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """q-th quantiles of input along dim (of all elements when dim is None); NaN in a slice gives NaN."""
    return _finish(_quantile("quantile", input, q, dim, keepdim, interpolation, False), out)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """quantile that ignores NaN (a slice of only NaN gives NaN)."""
    return _finish(_quantile("nanquantile", input, q, dim, keepdim, interpolation, True), out)


def vander(x, N=None, increasing=False):
    """Vandermonde matrix: columns are powers of the 1-D x (decreasing unless increasing=True)."""
    _check_tensor("vander", "x", x)
    tp = _tp()
    if x.dim() != 1:
        raise RuntimeError(f"vander: x must be a one-dimensional tensor, got {x.dim()}-D")
    if N is None:
        N = x.shape[0]
    if N < 0:
        raise RuntimeError(f"vander: N must be non-negative, got {N}")
    dt = x.dtype if x.is_floating_point() else tp.int64
    xs = x.to(dt)
    if N == 0:
        return tp.zeros(x.shape[0], 0, dtype=dt, device=x.device)
    cols = [tp.ones(x.shape[0], 1, dtype=dt, device=x.device)]
    if N > 1:
        # cumulative products, as powers through pow would give NaN gradients at 0
        cols.append(xs.unsqueeze(1).expand(x.shape[0], N - 1).cumprod(1))
    res = tp.cat(cols, 1)
    return res if increasing else res.flip(1)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """torch.gradient (NumPy's): per dim, central differences inside and one-sided ones of
    order `edge_order` at the ends; `spacing` a number (per dim or for all) or 1-D coordinate
    tensors (non-uniform second-order differences). A tuple, one tensor per dim."""
    tp = _tp()
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    nd = input.dim()
    dims = list(range(nd)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    dims = [d + nd if d < 0 else d for d in dims]
    if spacing is None:  # torch's default, also when passed explicitly
        spacing = 1
    if isinstance(spacing, (int, float)) or (isinstance(spacing, Tensor) and spacing.dim() == 0):
        spacings = [spacing] * len(dims)
    else:
        spacings = list(spacing)
        if len(spacings) != len(dims):
            raise RuntimeError("torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                               f"arguments to have the same length, but got a spacing argument of length "
                               f"{len(spacings)} and a dim argument of length {len(dims)}.")
    f = input if input.is_floating_point() else input.to(tp.get_default_dtype())
    out = []
    for d, h in zip(dims, spacings):
        n = f.shape[d]
        if n < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")

        def part(a, b, d=d):
            return f.narrow(d, a, b - a)

        if isinstance(h, Tensor) and h.dim() == 1:
            shape = [1] * nd
            shape[d] = -1
            dx = (h[1:] - h[:-1]).to(f.dtype).reshape(shape)

            def at(k, dx=dx, d=d):
                return dx.narrow(d, k % dx.shape[d], 1)
            hl, hr = dx.narrow(d, 0, n - 2), dx.narrow(d, 1, n - 2)
            inner = (-hr / (hl * (hl + hr)) * part(0, n - 2) + (hr - hl) / (hl * hr) * part(1, n - 1)
                     + hl / (hr * (hl + hr)) * part(2, n))
            if edge_order == 1:
                first = (part(1, 2) - part(0, 1)) / at(0)
                last = (part(n - 1, n) - part(n - 2, n - 1)) / at(-1)
            else:
                d1, d2 = at(0), at(1)
                first = (-(2 * d1 + d2) / (d1 * (d1 + d2)) * part(0, 1) + (d1 + d2) / (d1 * d2) * part(1, 2)
                         - d1 / (d2 * (d1 + d2)) * part(2, 3))
                d1, d2 = at(-2), at(-1)
                last = (d2 / (d1 * (d1 + d2)) * part(n - 3, n - 2) - (d2 + d1) / (d1 * d2) * part(n - 2, n - 1)
                        + (2 * d2 + d1) / (d2 * (d1 + d2)) * part(n - 1, n))
        else:
            h = h.item() if isinstance(h, Tensor) else h
            inner = (part(2, n) - part(0, n - 2)) / (2 * h)
            if edge_order == 1:
                first = (part(1, 2) - part(0, 1)) / h
                last = (part(n - 1, n) - part(n - 2, n - 1)) / h
            else:
                first = (-1.5 * part(0, 1) + 2 * part(1, 2) - 0.5 * part(2, 3)) / h
                last = (0.5 * part(n - 3, n - 2) - 2 * part(n - 2, n - 1) + 1.5 * part(n - 1, n)) / h
        out.append(tp.cat([first, inner, last], d))
    return tuple(out)


def angle(input):
    """torch.angle of a real tensor: 0 where x >= 0, pi where x < 0, NaN kept (floating result)."""
    tp = _tp()
    x = input if input.is_floating_point() else input.to(tp.get_default_dtype())
    return tp.where(x.isnan(), x, tp.where(x < 0, tp.full_like(x, 3.141592653589793), tp.zeros_like(x)))


_FUNCTIONS = (gradient, angle, ravel, mv, inner, tensordot, kron, tensor_split, hsplit, vsplit, dsplit, fmax, fmin, sgn,
              addmv, addr, addbmm, chain_matmul, diag_embed, diagflat, take, gcd, lcm, ldexp, cov, corrcoef,
              quantile, nanquantile, vander)
_METHODS = (angle, type_as, ravel, mv, inner, kron, tensor_split, hsplit, vsplit, dsplit, fmax, fmin, sgn,
            addmv, addr, addbmm, diag_embed, diagflat, take, gcd, lcm, ldexp, cov, corrcoef, quantile,
            nanquantile)


def install():
    tp = _tp()
    for fn in _FUNCTIONS:
        if not hasattr(tp, fn.__name__):
            setattr(tp, fn.__name__, fn)
    for fn in _METHODS:
        if not hasattr(Tensor, fn.__name__):
            setattr(Tensor, fn.__name__, fn)
    for name, fn in (("index_copy_", _index_copy_), ("index_fill_", _index_fill_)):
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
