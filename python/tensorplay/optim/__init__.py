"""tensorplay.optim: optimizers and learning-rate schedulers with PyTorch's API."""
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
from .adam import Adam  # noqa: F401
from .adamw import AdamW  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .adagrad import Adagrad  # noqa: F401
from ._more_adaptive import Adamax, NAdam, RAdam, Adadelta, ASGD, Rprop  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from .adafactor import Adafactor  # noqa: F401
from . import lr_scheduler  # noqa: F401
from . import swa_utils  # noqa: F401,E402
