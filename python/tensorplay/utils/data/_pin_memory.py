"""Page-locked copies of a batch, for DataLoader(pin_memory=True).

A host-to-device copy from page-locked (pinned) memory can run asynchronously
(`.to("cuda", non_blocking=True)`) and skips the driver's staging copy, which is
why users ask the loader for pinned batches. The batch's structure is kept:
tensors are pinned, containers are rebuilt around their pinned contents, and an
object with its own `pin_memory()` method (a user's batch class) is asked to pin
itself, as PyTorch's loader does.
"""
import collections.abc

from ..._C import Tensor


def pin_memory(data):
    if isinstance(data, Tensor):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        pinned = {k: pin_memory(v) for k, v in data.items()}
        try:
            return type(data)(pinned)
        except TypeError:  # a mapping type that cannot be built from a dict
            return pinned
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(pin_memory(v) for v in data))
    if isinstance(data, tuple):
        return tuple(pin_memory(v) for v in data)
    if isinstance(data, collections.abc.Sequence):
        pinned = [pin_memory(v) for v in data]
        try:
            return type(data)(pinned)
        except TypeError:
            return pinned
    if hasattr(data, "pin_memory"):
        return data.pin_memory()
    return data
