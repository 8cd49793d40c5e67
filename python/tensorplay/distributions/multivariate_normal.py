"""Multivariate normal parameterized by exactly one of covariance_matrix,
precision_matrix or scale_tril; everything is computed from the Cholesky
factor L (covariance = L L^T)."""
import math

import tensorplay as tp

from . import constraints
from .distribution import Distribution
from .utils import lazy_property


def _batch_mahalanobis(L, x):
    """x^T (L L^T)^{-1} x over the broadcast batch, by one triangular solve."""
    n = x.shape[-1]
    batch = tp.broadcast_shapes(tuple(L.shape[:-2]), tuple(x.shape[:-1]))
    Lb = L.expand((tuple(batch) + (n, n)))
    xb = x.expand((tuple(batch) + (n,)))
    z = tp.linalg.solve_triangular(Lb, xb.unsqueeze(-1), upper=False).squeeze(-1)
    return z.pow(2).sum(-1)


class MultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if not tp.is_tensor(loc) or loc.dim() < 1:
            raise ValueError("MultivariateNormal: loc must be at least one-dimensional")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("MultivariateNormal: exactly one of covariance_matrix, precision_matrix or "
                             "scale_tril may be specified")
        mat = given[0]
        if mat.dim() < 2 or mat.shape[-1] != mat.shape[-2] or mat.shape[-1] != loc.shape[-1]:
            raise ValueError(f"MultivariateNormal: the matrix argument (shape {tuple(mat.shape)}) must be "
                             f"square with size matching loc (shape {tuple(loc.shape)})")
        batch_shape = tuple(tp.broadcast_shapes(tuple(mat.shape[:-2]), tuple(loc.shape[:-1])))
        n = loc.shape[-1]
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand((batch_shape + (n, n)))
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand((batch_shape + (n, n)))
        else:
            self.precision_matrix = precision_matrix.expand((batch_shape + (n, n)))
        self.loc = loc.expand((batch_shape + (n,)))
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = tp.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = tp.linalg.cholesky(tp.linalg.inv(precision_matrix))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        n = self._event_shape[0]
        new.loc = self.loc.expand((batch_shape + (n,)))
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand((batch_shape + (n, n))))
        return self._finish_expand(new, MultivariateNormal, batch_shape)

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.transpose(-1, -2)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        return tp.linalg.inv(L @ L.transpose(-1, -2)).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand((self._batch_shape + self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = tp.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(self._batch_shape) if self._batch_shape else h
