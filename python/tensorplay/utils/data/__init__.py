"""tp.utils.data: PyTorch's torch.utils.data (datasets, samplers, DataLoader, default_collate)."""
from .dataset import (  # noqa: F401
    Dataset, IterableDataset, TensorDataset, StackDataset, ConcatDataset, ChainDataset, Subset, random_split,
)
from .sampler import (  # noqa: F401
    Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler, WeightedRandomSampler, BatchSampler,
)
from ._collate import default_collate, default_convert  # noqa: F401
from .dataloader import DataLoader, get_worker_info  # noqa: F401
from .distributed import DistributedSampler  # noqa: F401

__all__ = [
    "DistributedSampler",
    "Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
    "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
    "BatchSampler", "DataLoader", "default_collate", "default_convert", "get_worker_info",
]
