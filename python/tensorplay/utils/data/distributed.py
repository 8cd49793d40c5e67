"""DistributedSampler: each of num_replicas processes (ranks) draws a disjoint
share of the dataset's indices, the same permutation on every rank for a
given seed and epoch (set_epoch), padded (or trimmed, drop_last=True) to an
equal share per rank -- PyTorch's assignment. TensorPlay has no process
group, so num_replicas and rank are given explicitly (e.g. from the launcher's
WORLD_SIZE / RANK environment variables)."""
import math
import os

from .sampler import Sampler


def _tp():
    import tensorplay
    return tensorplay


def _from_env(name, value, env):
    if value is not None:
        return value
    if env in os.environ:
        return int(os.environ[env])
    raise ValueError(f"DistributedSampler: {name} is required (TensorPlay has no distributed process group to ask; "
                     f"pass {name}=..., or set the {env} environment variable)")


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        num_replicas = _from_env("num_replicas", num_replicas, "WORLD_SIZE")
        rank = _from_env("rank", rank, "RANK")
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be a positive int, got {num_replicas!r}")
        if not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.drop_last, self.shuffle, self.seed = 0, drop_last, shuffle, seed
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = _tp().Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = _tp().randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        assert len(indices) == self.total_size
        own = indices[self.rank:self.total_size:self.num_replicas]
        assert len(own) == self.num_samples
        return iter(own)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The permutation of the next pass (call once per epoch, before iterating, on every rank)."""
        self.epoch = epoch
