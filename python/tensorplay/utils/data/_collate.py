"""default_collate / default_convert: how DataLoader turns a list of samples into a batch.

The rules are PyTorch's: tensors are stacked along a new dim 0; NumPy arrays and NumPy scalars
become tensors and are stacked; Python floats become a float64 tensor, ints an int64 tensor
(bools a bool tensor); strings and bytes stay a list; a dict (or other mapping) is collated key by
key, a namedtuple field by field, and any other sequence position by position (tuples come back
as lists, as in PyTorch). default_convert (batch_size=None) only converts arrays to tensors.
"""
import collections.abc
import copy
import re

__all__ = ["default_collate", "default_convert"]

_NP_STRING = re.compile(r"[SaUO]")
_ERR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}")


def _tp():
    import tensorplay
    return tensorplay


def _is_ndarray(x):
    t = type(x)
    return t.__module__ == "numpy" and t.__name__ in ("ndarray", "memmap")


def _is_np_scalar(x):
    return type(x).__module__ == "numpy" and hasattr(x, "dtype") and hasattr(x, "shape") and x.shape == ()


def _array_to_tensor(a, who):
    tp = _tp()
    if _NP_STRING.search(a.dtype.str) is not None:
        raise TypeError(_ERR.replace("default_collate", who).format(a.dtype))
    try:
        return tp.as_tensor(a)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"{who}: cannot turn a NumPy array of dtype {a.dtype} into a tensor ({e})") from None


def default_collate(batch):
    """Stacks a list of samples into a batch (see the module docstring for the rules)."""
    tp = _tp()
    if not isinstance(batch, (list, tuple)) or not batch:
        if isinstance(batch, (list, tuple)):
            raise ValueError("default_collate: the batch is empty")
        raise TypeError(f"default_collate: expected a list of samples, got {type(batch).__name__}")
    elem = batch[0]
    elem_type = type(elem)
    if isinstance(elem, tp.Tensor):
        return tp.stack(list(batch), 0)
    if _is_ndarray(elem):
        return default_collate([_array_to_tensor(b, "default_collate") for b in batch])
    if _is_np_scalar(elem):
        if _NP_STRING.search(elem.dtype.str) is not None:
            raise TypeError(_ERR.format(elem.dtype))
        import numpy as np
        return _array_to_tensor(np.asarray(batch), "default_collate")
    if isinstance(elem, float):
        return tp.tensor(batch, dtype=tp.float64)
    if isinstance(elem, int):
        # bool is an int: a batch of bools is a bool tensor, as tp.tensor makes it.
        return tp.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        if isinstance(elem, collections.abc.MutableMapping):
            # A copy keeps the mapping's type and its other attributes (an OrderedDict, a user dict class).
            out = copy.copy(elem)
            out.update({key: default_collate([d[key] for d in batch]) for key in elem})
            return out
        try:
            return elem_type({key: default_collate([d[key] for d in batch]) for key in elem})
        except TypeError:
            return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        transposed = [list(s) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return [default_collate(s) for s in transposed]
        try:
            return elem_type([default_collate(s) for s in transposed])
        except TypeError:
            return [default_collate(s) for s in transposed]
    raise TypeError(_ERR.format(elem_type))


def default_convert(data):
    """Turns NumPy arrays (inside containers too) into tensors and leaves everything else alone."""
    if _is_ndarray(data):
        if _NP_STRING.search(data.dtype.str) is not None:
            return data
        return _array_to_tensor(data, "default_convert")
    if _is_np_scalar(data):
        if _NP_STRING.search(data.dtype.str) is not None:
            return data
        return _tp().as_tensor(data)
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        if isinstance(data, collections.abc.MutableMapping):
            out = copy.copy(data)
            out.update({k: default_convert(v) for k, v in data.items()})
            return out
        try:
            return type(data)({k: default_convert(v) for k, v in data.items()})
        except TypeError:
            return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
