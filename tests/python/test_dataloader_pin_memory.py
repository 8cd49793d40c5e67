"""DataLoader(pin_memory=True): with CUDA every tensor of a batch comes back in page-locked memory,
with the batch's structure and values kept, in the calling process and from worker processes;
without CUDA the loader warns and hands the batches over unchanged."""
import collections
import dataclasses

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.utils.data import DataLoader, Dataset
from tensorplay.utils.data._pin_memory import pin_memory

Pair = collections.namedtuple("Pair", ["x", "label"])
needs_cuda = pytest.mark.skipif(not tp.cuda.is_available(), reason="needs a CUDA device")


class Records(Dataset):
    """Sample i: a dict holding a non-contiguous tensor, a namedtuple, a list and a string."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        x = tp.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) * i).t()
        return {"x": x, "pair": Pair(tp.tensor([i, -i]), i), "seq": [tp.tensor(float(i))], "name": f"s{i}"}


@dataclasses.dataclass
class Batch:
    """A user's batch class with its own pin_memory(), as PyTorch's loader supports."""
    value: object
    pinned: bool = False

    def pin_memory(self):
        return Batch(self.value, True)


def test_structure_is_rebuilt_and_custom_batches_pin_themselves():
    # No tensors: runs on any machine, checks the containers and the pin_memory() protocol.
    data = {"a": [Batch(1), (Batch(2), "keep")], "b": Pair(Batch(3), 7), "c": b"raw"}
    out = pin_memory(data)
    assert isinstance(out, dict) and isinstance(out["a"], list) and isinstance(out["a"][1], tuple)
    assert isinstance(out["b"], Pair) and out["b"].label == 7
    assert [out["a"][0].pinned, out["a"][1][0].pinned, out["b"].x.pinned] == [True, True, True]
    assert out["a"][1][1] == "keep" and out["c"] == b"raw"
    assert [out["a"][0].value, out["a"][1][0].value, out["b"].x.value] == [1, 2, 3]


@pytest.mark.skipif(tp.cuda.is_available(), reason="the warning is for machines without CUDA")
def test_without_cuda_it_warns_and_batches_are_unchanged():
    with pytest.warns(UserWarning, match="pin_memory"):
        batches = list(DataLoader(Records(), batch_size=4, pin_memory=True))
    plain = list(DataLoader(Records(), batch_size=4))
    for b, p in zip(batches, plain):
        np.testing.assert_array_equal(b["x"].numpy(), p["x"].numpy())


def _tensors(batch):
    return [batch["x"], batch["pair"].x, batch["pair"].label, batch["seq"][0]]


@needs_cuda
@pytest.mark.parametrize("num_workers", [0, 2])
def test_batches_are_pinned_with_values_kept(num_workers):
    loader = DataLoader(Records(), batch_size=4, pin_memory=True, num_workers=num_workers)
    plain = list(DataLoader(Records(), batch_size=4))
    batches = list(loader)
    assert len(batches) == len(plain) == 3
    for b, p in zip(batches, plain):
        assert b["name"] == p["name"]
        for t, ref in zip(_tensors(b), _tensors(p)):
            assert t.is_pinned() and t.device.type == "cpu" and t.dtype == ref.dtype
            np.testing.assert_array_equal(t.numpy(), ref.numpy())
        assert not p["x"].is_pinned()


@needs_cuda
def test_pinned_batches_copy_to_the_device_asynchronously():
    # The use pinning is for: a non_blocking upload, then compute on the device.
    loader = DataLoader(Records(), batch_size=5, pin_memory=True, persistent_workers=True, num_workers=1)
    for epoch in range(2):
        for b in loader:
            x = b["x"].to("cuda", non_blocking=True)
            got = (x * 2).cpu().numpy()
            np.testing.assert_array_equal(got, b["x"].numpy() * 2)
            assert b["x"].is_pinned()
