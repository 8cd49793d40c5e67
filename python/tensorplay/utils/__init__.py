"""tp.utils: PyTorch's torch.utils names that apply here (checkpoint)."""
from . import checkpoint  # noqa: F401
