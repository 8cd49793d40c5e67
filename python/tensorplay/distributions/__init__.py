"""tensorplay.distributions: probability distributions with PyTorch's API
(torch.distributions), sampled with TensorPlay's RNG."""
from . import constraints, transforms  # noqa: F401
from .distribution import Distribution  # noqa: F401
from .normal import Normal, Laplace, Cauchy  # noqa: F401
from .uniform import Uniform  # noqa: F401
from .bernoulli import Bernoulli, Geometric, Binomial  # noqa: F401
from .categorical import Categorical, OneHotCategorical  # noqa: F401
from .gamma import Gamma, Exponential, Chi2  # noqa: F401
from .dirichlet import Dirichlet, Beta  # noqa: F401
from .poisson import Poisson  # noqa: F401
from .studentT import StudentT  # noqa: F401
from .multivariate_normal import MultivariateNormal  # noqa: F401
from .independent import Independent  # noqa: F401
from .transforms import (Transform, ComposeTransform, ExpTransform, AffineTransform,  # noqa: F401
                         SigmoidTransform, TanhTransform, PowerTransform)
from .transformed_distribution import TransformedDistribution, LogNormal  # noqa: F401
from .relaxed import (LogitRelaxedBernoulli, RelaxedBernoulli,  # noqa: F401
                      ExpRelaxedCategorical, RelaxedOneHotCategorical)
from .heavy_tails import HalfNormal, HalfCauchy, Gumbel, Weibull, Pareto  # noqa: F401
from .multinomial import Multinomial, NegativeBinomial, MixtureSameFamily  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
