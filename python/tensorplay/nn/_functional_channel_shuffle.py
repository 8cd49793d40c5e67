"""F.channel_shuffle (and native_channel_shuffle): ShuffleNet's channel interleave as a reshape /
transpose / reshape. Re-exported by functional.py."""
from .functional import _names_errors

__all__ = ["channel_shuffle", "native_channel_shuffle"]


@_names_errors
def channel_shuffle(input, groups):
    """(N, g*k, *) -> channels reordered as (k, g): the ShuffleNet interleave."""
    if input.dim() < 3:
        raise ValueError(f"channel_shuffle: expected input with at least 3 dims, got shape {tuple(input.shape)}")
    if not isinstance(groups, int) or groups <= 0:
        raise ValueError(f"channel_shuffle: number of groups must be positive, got {groups}")
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise ValueError(f"channel_shuffle: number of channels ({c}) must be divisible by groups ({groups})")
    rest = list(input.shape[2:])
    return input.reshape([n, groups, c // groups] + rest).transpose(1, 2).reshape([n, c] + rest)


native_channel_shuffle = channel_shuffle
