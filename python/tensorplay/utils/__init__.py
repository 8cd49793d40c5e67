"""tp.utils: PyTorch's torch.utils names that apply here (checkpoint, data, _pytree)."""
from . import _pytree  # noqa: F401
from . import checkpoint  # noqa: F401
from . import data  # noqa: F401
