"""tensorplay.nn.utils: helpers for training loops."""
from .clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm  # noqa: F401
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401,E402
from . import parametrize, parametrizations  # noqa: F401,E402
from .weight_norm import weight_norm, remove_weight_norm  # noqa: F401,E402
from . import rnn  # noqa: F401,E402
from .rnn import PackedSequence  # noqa: F401,E402
