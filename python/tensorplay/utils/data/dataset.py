"""Datasets: PyTorch's torch.utils.data dataset classes over tensorplay tensors.

A map-style dataset answers `ds[i]` and `len(ds)`; an iterable one answers
`iter(ds)`. Nothing here depends on tensors except TensorDataset and
random_split (which draws its permutation with tp.randperm).
"""
import bisect
import itertools
import math
import warnings

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset",
           "Subset", "random_split"]


class DatasetArgumentError(ValueError, AssertionError):
    """Bad arguments to a dataset class. PyTorch raises AssertionError for some of these (it uses
    `assert`); deriving from both lets code written for either spelling catch it."""


class Dataset:
    """A map-style dataset: subclasses define __getitem__ (and usually __len__)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of Dataset should define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset of a stream of samples: subclasses define __iter__."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of IterableDataset should define __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is the tuple of every tensor's row i; all tensors need the same first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise DatasetArgumentError("TensorDataset: expected at least one tensor")
        n = tensors[0].shape[0] if tensors[0].dim() > 0 else None
        if n is None or any(t.dim() == 0 or t.shape[0] != n for t in tensors):
            raise DatasetArgumentError("TensorDataset: Size mismatch between tensors (every tensor needs the "
                                       f"same size in dim 0; got {[tuple(t.shape) for t in tensors]})")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class StackDataset(Dataset):
    """Sample i is a tuple (positional datasets) or a dict (keyword datasets) of each dataset's sample i."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("StackDataset: supported either ``tuple``- (via ``args``) or ``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        sets = list(args) if args else list(kwargs.values())
        if not sets:
            raise ValueError("StackDataset: at least one dataset should be passed")
        self._length = len(sets[0])
        if any(len(d) != self._length for d in sets):
            raise ValueError("StackDataset: Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """The datasets one after another (map-style only)."""

    @staticmethod
    def cumsum(sequence):
        return list(itertools.accumulate(len(d) for d in sequence))

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise DatasetArgumentError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise DatasetArgumentError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("ConcatDataset: absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        if which >= len(self.datasets):
            raise IndexError(f"ConcatDataset: index {idx} is out of range for a dataset of length {len(self)}")
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise DatasetArgumentError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise DatasetArgumentError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        # Batched fetch: forwarded when the wrapped dataset can fetch a batch at once.
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Splits `dataset` into non-overlapping Subsets of the given lengths, or of the given fractions of
    len(dataset) (the remainder of flooring goes one by one to the first subsets), by a random permutation
    drawn from `generator` (the default generator when None)."""
    from ... import _C
    from ..._C import default_generator
    from ... import randperm
    if generator is None:
        generator = default_generator
    lengths = list(lengths)
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"random_split: fraction at index {i} is not between 0 and 1")
        sizes = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.")
        lengths = sizes
    for k in lengths:
        if isinstance(k, float) and not k.is_integer():
            raise ValueError(f"random_split: lengths must be integers or fractions summing to 1, got {lengths}")
        if k < 0:
            raise ValueError(f"random_split: lengths must be non-negative, got {lengths}")
    lengths = [int(k) for k in lengths]
    if sum(lengths) != n:
        raise ValueError("random_split: Sum of input lengths does not equal the length of the input dataset! "
                         f"(lengths sum to {sum(lengths)}, the dataset has {n} samples)")
    if not isinstance(generator, _C.Generator):
        raise TypeError(f"random_split: generator must be a tensorplay.Generator, got {type(generator).__name__}")
    indices = randperm(n, generator=generator).tolist()
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, indices[start:start + k]))
        start += k
    return out
