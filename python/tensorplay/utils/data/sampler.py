"""Samplers: iterables of dataset indices (or of batches of them, BatchSampler), as PyTorch's.

Random samplers draw with tp.randperm / tp.randint / tp.multinomial from `generator`. Without
one, RandomSampler and SubsetRandomSampler take a fresh seed from the default generator at each
iteration, so `tp.manual_seed` makes the whole sequence of epochs reproducible while two epochs
still differ.
"""
import numbers

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]


def _tp():
    import tensorplay
    return tensorplay


def _fresh_generator():
    """A generator seeded from the default one (one draw), like PyTorch's samplers without generator=."""
    tp = _tp()
    seed = int(tp.randint(0, 2 ** 63 - 1, (1,)).item())
    g = tp.Generator()
    g.manual_seed(seed)
    return g


class Sampler:
    """Base class: subclasses define __iter__ (indices) and, when they can, __len__."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of Sampler should define __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _check_bool(name, owner, value):
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: {name} should be a boolean value, but got {name}={value}")


def _check_positive_int(name, owner, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{owner}: {name} should be a positive integer value, but got {name}={value}")


class RandomSampler(Sampler):
    """A random permutation of the indices (num_samples of them: whole permutations then part of one),
    or, with replacement, num_samples independent uniform draws."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        _check_bool("replacement", "RandomSampler", replacement)
        _check_positive_int("num_samples", "RandomSampler", self.num_samples)

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        tp = _tp()
        n = len(self.data_source)
        g = self.generator if self.generator is not None else _fresh_generator()
        if self.replacement:
            # Drawn in chunks of 32 so a long epoch does not hold all indices at once.
            for _ in range(self.num_samples // 32):
                yield from tp.randint(0, n, (32,), dtype=tp.int64, generator=g).tolist()
            rest = self.num_samples % 32
            if rest:
                yield from tp.randint(0, n, (rest,), dtype=tp.int64, generator=g).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from tp.randperm(n, generator=g).tolist()
            rest = self.num_samples % n
            if rest:
                yield from tp.randperm(n, generator=g).tolist()[:rest]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        tp = _tp()
        g = self.generator if self.generator is not None else _fresh_generator()
        for i in tp.randperm(len(self.indices), generator=g).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probabilities proportional to `weights` (with or without replacement)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        tp = _tp()
        _check_positive_int("num_samples", "WeightedRandomSampler", num_samples)
        _check_bool("replacement", "WeightedRandomSampler", replacement)
        w = weights.to(tp.float64) if isinstance(weights, tp.Tensor) else tp.tensor(weights, dtype=tp.float64)
        if w.dim() != 1:
            raise ValueError("WeightedRandomSampler: weights should be a 1d sequence but given weights have "
                             f"shape {tuple(w.shape)}")
        if not replacement and num_samples > w.shape[0]:
            raise ValueError(f"WeightedRandomSampler: cannot draw {num_samples} samples without replacement "
                             f"from {w.shape[0]} weights")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        tp = _tp()
        drawn = tp.multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from drawn.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of batch_size (the last one shorter unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        _check_positive_int("batch_size", "BatchSampler", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
