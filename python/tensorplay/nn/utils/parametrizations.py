"""tensorplay.nn.utils.parametrizations: weight_norm, spectral_norm and orthogonal as parametrizations
(nn.utils.parametrize), with PyTorch's state_dict layout: weight_norm keeps
`parametrizations.weight.original0` (the magnitude g) and `original1` (the direction v);
spectral_norm keeps `parametrizations.weight.original` and the power-iteration vectors
`parametrizations.weight.0._u` / `_v`."""
import tensorplay as _tp

from .. import functional as F
from ..modules.module import Module
from . import parametrize

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


def _norm_except_dim(v, dim):
    """The 2-norm of v over every dim but `dim` (all of v when dim is -1), keeping dims."""
    if dim == -1:
        return _tp.linalg.vector_norm(v)
    dims = [d for d in range(v.dim()) if d != dim]
    return _tp.linalg.vector_norm(v, 2, dims, keepdim=True) if dims else v.abs()


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrizes module.<name> as g * v / ||v|| (the norm over every dim but `dim`; over all of v when
    dim is None), with g and v trained instead of the weight."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _tp.Tensor):
        raise ValueError(f"weight_norm: module {type(module).__name__} has no parameter or buffer '{name}'")
    if dim is not None and not -weight.dim() <= dim < max(weight.dim(), 1):
        raise IndexError(f"weight_norm: dim {dim} out of range for a weight of {weight.dim()} dimensions")
    if dim is not None and dim < -1:
        dim += weight.dim()
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"spectral_norm: dim {dim} out of range for a weight of {ndim} dimensions")
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        self.n_power_iterations = n_power_iterations
        if ndim > 1:
            mat = self._reshape_weight_to_matrix(weight.detach())
            h, w = mat.shape
            u = _tp.randn(h, dtype=mat.dtype, device=mat.device)
            v = _tp.randn(w, dtype=mat.dtype, device=mat.device)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.reshape(weight.shape[0], -1)

    def _power_method(self, mat, n):
        # in place: the buffers stay the same tensors (state_dict, optimizers, compiled regions see them)
        with _tp.no_grad():
            for _ in range(n):
                self._u.copy_(F.normalize(_tp.matmul(mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(_tp.matmul(mat.transpose(0, 1), self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.dim() == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(mat.detach(), self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = (u * _tp.matmul(mat, v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Reparametrizes module.<name> as W / sigma(W), sigma estimated by power iteration (one step per
    training-mode access; the vectors are buffers)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _tp.Tensor):
        raise ValueError(f"spectral_norm: module {type(module).__name__} has no parameter or buffer '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__ in ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d") else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# ---------------------------------------------------------------- orthogonal
def _is_orthogonal(q):
    n, k = q.shape[-2], q.shape[-1]
    eye = _tp.eye(k, dtype=q.dtype)
    eps = 10.0 * n * _tp.finfo(q.dtype).eps
    return bool(_tp.allclose(q.mT @ q, eye.expand(*q.shape[:-2], k, k), atol=eps))


def _make_orthogonal(a):
    """The Q of a's QR factorization with the signs of R's diagonal, which makes it unique (PyTorch's
    geqrf + householder_product, whose Q is LAPACK's, as linalg.qr's)."""
    q, r = _tp.linalg.qr(a)
    return q * r.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


class _Orthogonal(Module):
    """PyTorch's orthogonal parametrization: X (its lower triangle) mapped to an orthogonal matrix by
    the matrix exponential or the Cayley map of the skew-symmetric A = X - X^T, or by a product of
    Householder reflectors; with use_trivialization the result multiplies the buffer `base`."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                X = _tp.cat([X, _tp.zeros(*X.shape[:-2], n, n - k, dtype=X.dtype)], dim=-1)
            A = X - X.mT
            if self.orthogonal_map == "matrix_exp":
                Q = _tp.linalg.matrix_exp(A)
            else:
                eye = _tp.eye(n, dtype=A.dtype)
                Q = _tp.linalg.solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _tp.linalg.householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        with _tp.no_grad():
            if tuple(Q.shape) != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                                 f"Got a tensor of shape {tuple(Q.shape)}.")
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            if n < k:
                Q = Q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in ("cayley", "matrix_exp"):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                              "parametrizations when use_trivialization=False.")
                raise NotImplementedError("orthogonal: the householder map with use_trivialization=False needs "
                                          "geqrf, which TensorPlay does not have; use use_trivialization=True")
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                N = _tp.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype)
                Q = _make_orthogonal(_tp.cat([Q, N], dim=-1))
            self.base = Q
            neg_id = _tp.zeros_like(Q_init)
            neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_id


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Constrains module.<name> (a matrix or batch of matrices) to be orthogonal (or to have
    orthonormal rows/columns when not square), as PyTorch's parametrizations.orthogonal."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _tp.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.dim() < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.dim()} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in ("matrix_exp", "cayley", "householder"):
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
