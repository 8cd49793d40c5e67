"""tp.amp: automatic mixed precision (autocast + GradScaler), as torch.amp."""
from .autocast_mode import (  # noqa: F401
    autocast, custom_bwd, custom_fwd, is_autocast_available,
)
from .grad_scaler import GradScaler  # noqa: F401

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available"]
