"""DataLoader: batches of a dataset, in the calling process or in worker processes.

Arguments and their conflicts follow PyTorch's DataLoader (the same ValueErrors). Map-style
datasets are read through a sampler (SequentialSampler, RandomSampler when shuffle=True, or the
user's) grouped by a BatchSampler; iterable datasets are read in order and grouped by
batch_size. `generator=` feeds the RandomSampler made for shuffle=True, so a seeded generator
gives the same order every run; each new iteration continues the generator (epochs differ).
As in PyTorch, every iteration first draws a base seed from `generator` (or the default
generator), whatever num_workers is, so the sampler's order does not depend on num_workers.

num_workers > 0 loads in worker processes (`_multiprocess_iter.py` for the main process's side,
`_worker.py` for the workers'), started with `multiprocessing_context` (default: the platform's
start method; 'spawn' and 'forkserver' need a picklable dataset). The main process sends each
worker batches of indices (at most prefetch_factor per worker outstanding), workers fetch and
collate, and batches come back in sampler order. Worker k is seeded with base seed + k
(tensorplay's default generator, `random`, NumPy) and sees its WorkerInfo through
get_worker_info(); an IterableDataset is iterated by every worker on its own copy, so the
dataset shards itself with get_worker_info() as in PyTorch. Each worker runs operators on one
thread: a forked child entering the parent's OpenMP pool would hang. pin_memory=True copies each
batch's tensors into page-locked memory in the main process (`_pin_memory.py`) when CUDA is
available; without CUDA it warns and hands the batches over as they are, as PyTorch does.
"""
import warnings

from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from ._collate import default_collate, default_convert
from ._pin_memory import pin_memory
from ._worker import get_worker_info  # noqa: F401 - public here, as in PyTorch

__all__ = ["DataLoader", "get_worker_info"]


class _InfiniteConstantSampler(Sampler):
    """Stands in for the sampler of an iterable dataset: yields None forever."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """Iterates over batches of `dataset` (see the module docstring)."""

    _frozen = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
            raise ValueError("DataLoader: num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("DataLoader: timeout option should be non-negative")
        if num_workers == 0:
            if prefetch_factor is not None:
                raise ValueError("DataLoader: prefetch_factor option could only be specified in multiprocessing. "
                                 "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor "
                                 "to None.")
            if persistent_workers:
                raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
            if multiprocessing_context is not None:
                raise ValueError("DataLoader: multiprocessing_context can only be used with multi-process loading "
                                 "(num_workers > 0), but got num_workers=0")
        else:
            if prefetch_factor is None:
                prefetch_factor = 2
            elif isinstance(prefetch_factor, bool) or not isinstance(prefetch_factor, int) or prefetch_factor <= 0:
                raise ValueError(f"DataLoader: prefetch_factor option should be a positive integer, but got "
                                 f"prefetch_factor={prefetch_factor!r}")
            if multiprocessing_context is not None:
                from ._multiprocess_iter import resolve_context
                resolve_context(multiprocessing_context)  # the same ValueError/TypeError as PyTorch, early
        if generator is not None:
            from ..._C import Generator
            if not isinstance(generator, Generator):
                raise TypeError(f"DataLoader: generator must be a tensorplay.Generator, got "
                                f"{type(generator).__name__}")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._iterator = None  # the live iterator of persistent workers

        if isinstance(dataset, IterableDataset):
            self._dataset_kind = "iterable"
            if shuffle not in (False, None):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        else:
            self._dataset_kind = "map"
            shuffle = bool(shuffle)

        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None:
            if drop_last:
                raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually "
                                 "exclusive with drop_last")
        elif isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")

        if sampler is None:
            if self._dataset_kind == "iterable":
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._frozen = True

    def __setattr__(self, name, value):
        # As in PyTorch: these decide the samplers built in __init__, so changing them later would be ignored.
        if self._frozen and name in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                     "persistent_workers"):
            raise ValueError(f"DataLoader: {name} attribute should not be set after DataLoader is initialized")
        super().__setattr__(name, value)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _draw_base_seed(self):
        """One draw from `generator` (or the default generator) per iteration, as PyTorch: the workers'
        seeds, drawn whatever num_workers is so that the sampler sees the same generator state."""
        from ... import randint
        return int(randint(0, 2 ** 63 - 1, (1,), generator=self.generator).item())

    def _pins(self):
        """Whether batches are copied into pinned memory (pin_memory=True and CUDA is available)."""
        if not self.pin_memory:
            return False
        from ... import cuda
        if cuda.is_available():
            return True
        warnings.warn("DataLoader: 'pin_memory' argument is set as true but no accelerator is found, "
                      "then device pinned memory won't be used.", stacklevel=3)
        return False

    def __iter__(self):
        pins = self._pins()
        base_seed = self._draw_base_seed()
        if self.num_workers > 0:
            from ._multiprocess_iter import _MultiProcessingDataLoaderIter
            if not self.persistent_workers:
                return _MultiProcessingDataLoaderIter(self, base_seed, pins)
            # Persistent workers keep their first seeds; later epochs reuse them (and their processes).
            if self._iterator is None or self._iterator._shutdown:
                self._iterator = _MultiProcessingDataLoaderIter(self, base_seed, pins)
            else:
                self._iterator._reset()
            return self._iterator
        batches = self._iter_iterable() if self._dataset_kind == "iterable" else self._iter_map()
        return map(pin_memory, batches) if pins else batches

    def _iter_map(self):
        dataset, collate = self.dataset, self.collate_fn
        if not self._auto_collation:
            for idx in self.sampler:
                yield collate(dataset[idx])
            return
        getitems = getattr(dataset, "__getitems__", None)
        for indices in self.batch_sampler:
            samples = getitems(indices) if callable(getitems) else [dataset[i] for i in indices]
            yield collate(samples)

    def _iter_iterable(self):
        collate = self.collate_fn
        it = iter(self.dataset)
        if not self._auto_collation:
            for sample in it:
                yield collate(sample)
            return
        if not isinstance(self.batch_sampler, BatchSampler) or not isinstance(self.sampler, _InfiniteConstantSampler):
            # A user's batch sampler over an iterable dataset: only the batch sizes it gives matter.
            for indices in self.batch_sampler:
                batch = []
                for _ in indices:
                    try:
                        batch.append(next(it))
                    except StopIteration:
                        break
                if not batch or (self.drop_last and len(batch) < len(indices)):
                    return
                yield collate(batch)
                if len(batch) < len(indices):
                    return
            return
        size = self.batch_size
        while True:
            batch = []
            for sample in it:
                batch.append(sample)
                if len(batch) == size:
                    break
            if not batch or (len(batch) < size and self.drop_last):
                return
            yield collate(batch)
            if len(batch) < size:
                return

    def __len__(self):
        if self._dataset_kind == "iterable":
            n = len(self.dataset)  # TypeError when the dataset has no length, as in PyTorch
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)
