"""tensorplay.nn.utils: helpers for training loops."""
from .clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm  # noqa: F401
