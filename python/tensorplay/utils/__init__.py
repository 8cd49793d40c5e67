"""tp.utils: PyTorch's torch.utils names that apply here (checkpoint, data)."""
from . import checkpoint  # noqa: F401
from . import data  # noqa: F401
