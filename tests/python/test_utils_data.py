"""tp.utils.data against torch.utils.data: datasets, samplers, DataLoader, default_collate.

Random orders cannot equal torch's (different generators), so shuffles are checked for being
permutations, reproducible with the same seed, and different across epochs; everything
deterministic (batch structure, counts, collate results, errors) is compared with torch exactly.
"""
import collections
import math

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import tensorplay as tp
import tensorplay.utils.data as tpd

Point = collections.namedtuple("Point", "x y")


def as_np(v):
    if isinstance(v, (tp.Tensor, torch.Tensor)):
        return v.numpy()
    return v


def same_structure(a, b):
    """a (tensorplay) and b (torch) are the same nested batch: types, dtypes, shapes, values."""
    if isinstance(b, torch.Tensor):
        assert isinstance(a, tp.Tensor), (type(a), type(b))
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    elif isinstance(b, dict):
        assert type(a) is type(b) and list(a) == list(b)
        for k in b:
            same_structure(a[k], b[k])
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b), (type(a), type(b))
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same_structure(x, y)
    else:
        assert a == b


def both(fn_tp, fn_torch):
    same_structure(fn_tp(), fn_torch())


# ------------------------------------------------------------------ datasets
def test_tensor_dataset_and_len():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.arange(6)
    a = tpd.TensorDataset(tp.tensor(x), tp.tensor(y))
    b = tud.TensorDataset(torch.tensor(x), torch.tensor(y))
    assert len(a) == len(b) == 6
    for i in range(6):
        same_structure(a[i], b[i])
    same_structure(a[1:3], b[1:3])


def test_tensor_dataset_size_mismatch_names_class():
    with pytest.raises(ValueError, match="TensorDataset.*Size mismatch"):
        tpd.TensorDataset(tp.zeros(3), tp.zeros(4))
    with pytest.raises(AssertionError):  # what torch raises for the same input
        tpd.TensorDataset(tp.zeros(3), tp.zeros(4))


def test_concat_dataset_and_add():
    a, b = tpd.TensorDataset(tp.arange(3)), tpd.TensorDataset(tp.arange(10, 15))
    c = a + b
    assert isinstance(c, tpd.ConcatDataset) and len(c) == 8
    assert c.cumulative_sizes == tud.ConcatDataset([range(3), range(5)]).cumulative_sizes
    assert [int(c[i][0]) for i in range(8)] == [0, 1, 2, 10, 11, 12, 13, 14]
    assert int(c[-1][0]) == 14 and int(c[-8][0]) == 0
    with pytest.raises(ValueError, match="absolute value"):
        c[-9]
    with pytest.raises(ValueError, match="empty"):
        tpd.ConcatDataset([])


def test_concat_refuses_iterable():
    class It(tpd.IterableDataset):
        def __iter__(self):
            return iter(range(3))
    with pytest.raises(ValueError, match="IterableDataset"):
        tpd.ConcatDataset([It()])
    chained = It() + It()
    assert isinstance(chained, tpd.ChainDataset) and list(chained) == [0, 1, 2, 0, 1, 2]


def test_subset():
    ds = tpd.TensorDataset(tp.arange(10))
    s = tpd.Subset(ds, [7, 2, 5])
    assert len(s) == 3 and [int(s[i][0]) for i in range(3)] == [7, 2, 5]
    assert [int(v[0]) for v in s.__getitems__([2, 0])] == [5, 7]


def test_stack_dataset():
    a = tpd.StackDataset(range(3), range(10, 13))
    assert a[1] == (1, 11) and len(a) == 3
    k = tpd.StackDataset(x=range(3), y=range(3))
    assert k[2] == {"x": 2, "y": 2}
    with pytest.raises(ValueError, match="Size mismatch"):
        tpd.StackDataset(range(3), range(4))


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.5, 0.25, 0.25], [1 / 3, 1 / 3, 1 / 3]])
def test_random_split_lengths_match_torch(lengths):
    g1 = tp.Generator()
    g1.manual_seed(0)
    ours = tpd.random_split(range(10), lengths, generator=g1)
    theirs = tud.random_split(range(10), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    everything = sorted(i for s in ours for i in s.indices)
    assert everything == list(range(10))  # disjoint and complete
    g2 = tp.Generator()
    g2.manual_seed(0)
    again = tpd.random_split(range(10), lengths, generator=g2)
    assert [s.indices for s in again] == [s.indices for s in ours]


def test_random_split_default_generator_follows_manual_seed():
    tp.manual_seed(3)
    a = [s.indices for s in tpd.random_split(range(20), [5, 15])]
    tp.manual_seed(3)
    b = [s.indices for s in tpd.random_split(range(20), [5, 15])]
    assert a == b


def test_random_split_bad_lengths():
    with pytest.raises(ValueError, match="random_split.*Sum of input lengths"):
        tpd.random_split(range(10), [3, 3])
    with pytest.raises(ValueError):
        tud.random_split(range(10), [3, 3])
    with pytest.raises(ValueError, match="random_split"):
        tpd.random_split(range(10), [-1, 11])


def test_random_split_zero_length_warns():
    with pytest.warns(UserWarning, match="Length of split at index"):
        tpd.random_split(range(1), [0.5, 0.5])


# ------------------------------------------------------------------ samplers
def test_sequential_sampler():
    assert list(tpd.SequentialSampler(range(5))) == list(tud.SequentialSampler(range(5)))
    assert len(tpd.SequentialSampler(range(5))) == 5


def _is_perm(xs, n):
    return sorted(xs) == list(range(n))


def test_random_sampler_permutation_and_reproducible():
    g = tp.Generator()
    g.manual_seed(1)
    s = tpd.RandomSampler(range(50), generator=g)
    e1, e2 = list(s), list(s)
    assert _is_perm(e1, 50) and _is_perm(e2, 50) and e1 != e2
    g.manual_seed(1)
    assert list(s) == e1
    tp.manual_seed(5)
    a = list(tpd.RandomSampler(range(30)))
    tp.manual_seed(5)
    assert list(tpd.RandomSampler(range(30))) == a


@pytest.mark.parametrize("n,num_samples", [(10, 25), (10, 4), (7, 7)])
def test_random_sampler_num_samples_without_replacement(n, num_samples):
    s = tpd.RandomSampler(range(n), num_samples=num_samples)
    got = list(s)
    assert len(got) == len(s) == len(tud.RandomSampler(range(n), num_samples=num_samples)) == num_samples
    for k in range(num_samples // n):  # whole permutations, then part of one
        assert _is_perm(got[k * n:(k + 1) * n], n)
    rest = got[(num_samples // n) * n:]
    assert len(set(rest)) == len(rest)


def test_random_sampler_with_replacement():
    s = tpd.RandomSampler(range(5), replacement=True, num_samples=70)
    got = list(s)
    assert len(got) == 70 and all(0 <= i < 5 for i in got)
    assert len(set(got)) == 5  # 70 draws over 5 values: all seen (probability 1 - 5*(4/5)^70)


def test_random_sampler_bad_arguments():
    with pytest.raises(TypeError, match="RandomSampler: replacement should be a boolean"):
        tpd.RandomSampler(range(3), replacement=1)
    with pytest.raises(ValueError, match="RandomSampler: num_samples should be a positive integer"):
        tpd.RandomSampler(range(3), num_samples=0)
    with pytest.raises(ValueError):
        tud.RandomSampler(range(3), num_samples=0)


def test_subset_random_sampler():
    g = tp.Generator()
    g.manual_seed(0)
    idx = [3, 9, 4, 11]
    s = tpd.SubsetRandomSampler(idx, generator=g)
    got = list(s)
    assert sorted(got) == sorted(idx) and len(s) == 4
    g.manual_seed(0)
    assert list(s) == got


def test_weighted_random_sampler():
    g = tp.Generator()
    g.manual_seed(0)
    w = [0.0, 1.0, 0.0, 3.0]
    s = tpd.WeightedRandomSampler(w, 400, generator=g)
    got = list(s)
    assert len(got) == len(s) == 400 and set(got) <= {1, 3}
    assert got.count(3) > got.count(1)
    no_rep = list(tpd.WeightedRandomSampler([1.0, 1.0, 1.0, 1.0], 4, replacement=False))
    assert _is_perm(no_rep, 4)
    with pytest.raises(ValueError, match="WeightedRandomSampler: weights should be a 1d"):
        tpd.WeightedRandomSampler([[1.0, 2.0]], 2)
    with pytest.raises(ValueError, match="num_samples"):
        tpd.WeightedRandomSampler([1.0], 0)
    with pytest.raises(TypeError, match="replacement"):
        tpd.WeightedRandomSampler([1.0], 1, replacement=None)


@pytest.mark.parametrize("n,bs,drop", [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False), (2, 5, True)])
def test_batch_sampler_matches_torch(n, bs, drop):
    a = tpd.BatchSampler(tpd.SequentialSampler(range(n)), bs, drop)
    b = tud.BatchSampler(tud.SequentialSampler(range(n)), bs, drop)
    assert list(a) == list(b) and len(a) == len(b)


def test_batch_sampler_bad_arguments():
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="BatchSampler: batch_size"):
            tpd.BatchSampler(range(3), bad, False)
    with pytest.raises(ValueError, match="drop_last"):
        tpd.BatchSampler(range(3), 2, 1)


# ------------------------------------------------------------------ collate
def test_default_collate_matches_torch():
    cases = [
        [1, 2, 3],
        [1.5, 2.5],
        [True, False],
        ["a", "b"],
        [np.float32(1.0), np.float32(2.0)],
        [np.int64(1), np.int64(5)],
        [np.arange(3), np.arange(3)],
        [np.ones((2, 2), dtype=np.float32), np.zeros((2, 2), dtype=np.float32)],
        [(1, 2.0), (3, 4.0)],
        [[1, 2], [3, 4]],
        [{"a": 1, "b": [1.0, 2.0]}, {"a": 2, "b": [3.0, 4.0]}],
        [collections.OrderedDict(z=1, a=2), collections.OrderedDict(z=3, a=4)],
        [Point(1, np.ones(2)), Point(2, np.zeros(2))],
    ]
    for batch in cases:
        same_structure(tpd.default_collate(batch), tud.default_collate(batch))


def test_default_collate_of_tensors():
    rows = [np.arange(4, dtype=np.float32) + i for i in range(3)]
    same_structure(tpd.default_collate([tp.tensor(r) for r in rows]),
                   tud.default_collate([torch.tensor(r) for r in rows]))
    a = tpd.default_collate([(tp.ones(2), 1), (tp.zeros(2), 0)])
    assert isinstance(a, list) and tuple(a[0].shape) == (2, 2) and a[1].tolist() == [1, 0]


def test_default_collate_errors():
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        tpd.default_collate([object(), object()])
    with pytest.raises(TypeError, match="default_collate"):
        tpd.default_collate([np.array(["a"]), np.array(["b"])])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        tpd.default_collate([[1, 2], [3]])


def test_default_convert():
    a = tpd.default_convert({"x": np.arange(3), "s": "hi", "t": (np.float64(1.5), 2)})
    assert isinstance(a["x"], tp.Tensor) and a["s"] == "hi"
    assert isinstance(a["t"], list) and isinstance(a["t"][0], tp.Tensor) and a["t"][1] == 2


# ------------------------------------------------------------------ DataLoader
def _pair_datasets(n=10):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    y = np.arange(n)
    return tpd.TensorDataset(tp.tensor(x), tp.tensor(y)), tud.TensorDataset(torch.tensor(x), torch.tensor(y))


@pytest.mark.parametrize("kw", [dict(), dict(batch_size=3), dict(batch_size=3, drop_last=True),
                                dict(batch_size=5), dict(batch_size=20), dict(batch_size=None)])
def test_dataloader_sequential_matches_torch(kw):
    a, b = _pair_datasets()
    la, lb = tpd.DataLoader(a, **kw), tud.DataLoader(b, **kw)
    assert len(la) == len(lb)
    ba, bb = list(la), list(lb)
    assert len(ba) == len(bb) == len(la)
    for x, y in zip(ba, bb):
        same_structure(x, y)
    # Iterating twice gives the same batches.
    for x, y in zip(list(la), bb):
        same_structure(x, y)


def test_dataloader_shuffle_with_generator_is_reproducible():
    a, _ = _pair_datasets(23)

    def epoch_labels(seed, epochs=2):
        g = tp.Generator()
        g.manual_seed(seed)
        dl = tpd.DataLoader(a, batch_size=4, shuffle=True, generator=g)
        return [[int(v) for _, yb in dl for v in yb.tolist()] for _ in range(epochs)]

    e = epoch_labels(7)
    assert all(_is_perm(ep, 23) for ep in e) and e[0] != e[1]
    assert epoch_labels(7) == e
    assert epoch_labels(8) != e
    dl = tpd.DataLoader(a, batch_size=4, shuffle=True)
    assert len(dl) == 6 and [len(yb) for _, yb in dl] == [4, 4, 4, 4, 4, 3]


def test_dataloader_shuffle_follows_manual_seed():
    a, _ = _pair_datasets(12)
    tp.manual_seed(11)
    one = [yb.tolist() for _, yb in tpd.DataLoader(a, batch_size=5, shuffle=True)]
    tp.manual_seed(11)
    two = [yb.tolist() for _, yb in tpd.DataLoader(a, batch_size=5, shuffle=True)]
    assert one == two


def test_dataloader_sampler_and_batch_sampler():
    a, b = _pair_datasets()
    order = [9, 1, 8, 2, 7]
    same_structure(list(tpd.DataLoader(a, batch_size=2, sampler=order)),
                   list(tud.DataLoader(b, batch_size=2, sampler=order)))
    batches = [[0, 1, 2], [5], [9, 3]]
    la, lb = tpd.DataLoader(a, batch_sampler=batches), tud.DataLoader(b, batch_sampler=batches)
    assert len(la) == len(lb) == 3
    same_structure(list(la), list(lb))
    bs = tpd.BatchSampler(tpd.SequentialSampler(a), 4, drop_last=True)
    assert [len(yb) for _, yb in tpd.DataLoader(a, batch_sampler=bs)] == [4, 4]


def test_dataloader_collate_fn_and_dict_samples():
    class D(tpd.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"img": np.full((2, 2), i, dtype=np.float32), "label": i, "name": f"s{i}",
                    "p": Point(float(i), np.int64(i))}

    class DT(tud.Dataset):
        __len__ = D.__len__
        __getitem__ = D.__getitem__

    same_structure(list(tpd.DataLoader(D(), batch_size=2)), list(tud.DataLoader(DT(), batch_size=2)))
    got = list(tpd.DataLoader(D(), batch_size=2, collate_fn=lambda s: [d["label"] for d in s]))
    assert got == [[0, 1], [2, 3], [4]]


def test_dataloader_getitems_is_used():
    class D(tpd.Dataset):
        calls = []

        def __len__(self):
            return 6

        def __getitem__(self, i):
            raise AssertionError("__getitems__ should be used")

        def __getitems__(self, idx):
            self.calls.append(list(idx))
            return [tp.tensor([float(i)]) for i in idx]

    out = list(tpd.DataLoader(D(), batch_size=4))
    assert D.calls == [[0, 1, 2, 3], [4, 5]] and tuple(out[0].shape) == (4, 1)


class _Stream(tpd.IterableDataset):
    def __init__(self, n, with_len=True):
        self.n, self.with_len = n, with_len

    def __iter__(self):
        return iter(np.arange(self.n, dtype=np.float32) * 2)

    def __len__(self):
        if not self.with_len:
            raise TypeError("no len")
        return self.n


class _TStream(tud.IterableDataset):
    __init__ = _Stream.__init__
    __iter__ = _Stream.__iter__
    __len__ = _Stream.__len__


@pytest.mark.parametrize("kw", [dict(), dict(batch_size=3), dict(batch_size=3, drop_last=True),
                                dict(batch_size=None), dict(batch_size=7)])
def test_dataloader_iterable_dataset_matches_torch(kw):
    la, lb = tpd.DataLoader(_Stream(7), **kw), tud.DataLoader(_TStream(7), **kw)
    assert len(la) == len(lb)
    ba, bb = list(la), list(lb)
    assert len(ba) == len(bb)
    for x, y in zip(ba, bb):
        same_structure(x, y)
    assert len(list(la)) == len(ba)  # a second pass


def test_dataloader_iterable_without_len():
    dl = tpd.DataLoader(_Stream(5, with_len=False), batch_size=2)
    assert [tuple(b.shape) for b in dl] == [(2,), (2,), (1,)]
    with pytest.raises(TypeError):
        len(dl)


def test_dataloader_iterable_with_batch_sampler_list_sizes():
    got = [b.tolist() for b in tpd.DataLoader(_Stream(5), batch_size=2, drop_last=False)]
    assert got == [[0.0, 2.0], [4.0, 6.0], [8.0]]


def test_dataloader_pin_memory_is_accepted():
    a, _ = _pair_datasets(4)
    if tp.cuda.is_available():
        assert len(list(tpd.DataLoader(a, batch_size=2, pin_memory=True))) == 2
    else:
        with pytest.warns(UserWarning, match="'pin_memory' argument is set as true but no accelerator"):
            assert len(list(tpd.DataLoader(a, batch_size=2, pin_memory=True))) == 2


def test_dataloader_conflicting_arguments_raise_like_torch():
    a, b = _pair_datasets()
    bad = [
        dict(shuffle=True, sampler=[0, 1]),
        dict(batch_sampler=[[0]], batch_size=2),
        dict(batch_sampler=[[0]], shuffle=True),
        dict(batch_sampler=[[0]], sampler=[0]),
        dict(batch_sampler=[[0]], drop_last=True),
        dict(batch_size=None, drop_last=True),
        dict(num_workers=-1),
        dict(timeout=-1),
        dict(persistent_workers=True),
        dict(prefetch_factor=2),
    ]
    for kw in bad:
        with pytest.raises(ValueError):
            tud.DataLoader(b, **kw)
        with pytest.raises(ValueError, match="DataLoader"):
            tpd.DataLoader(a, **kw)
    for kw in (dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]])):
        with pytest.raises(ValueError):
            tud.DataLoader(_TStream(3), **kw)
        with pytest.raises(ValueError, match="DataLoader with IterableDataset"):
            tpd.DataLoader(_Stream(3), **kw)


def test_dataloader_attributes_frozen_after_init():
    a, _ = _pair_datasets()
    dl = tpd.DataLoader(a, batch_size=2)
    with pytest.raises(ValueError, match="batch_size attribute should not be set"):
        dl.batch_size = 3
    dl.collate_fn = tpd.default_collate  # allowed, as in torch


def test_dataloader_workers_give_the_same_batches():
    # Worker processes are tested in test_dataloader_workers.py; here only that they are not refused.
    a, _ = _pair_datasets()
    tp.manual_seed(4)
    one = [yb.tolist() for _, yb in tpd.DataLoader(a, batch_size=3, shuffle=True)]
    tp.manual_seed(4)
    two = [yb.tolist() for _, yb in tpd.DataLoader(a, batch_size=3, shuffle=True, num_workers=2)]
    assert one == two
    assert tpd.get_worker_info() is None


def test_dataloader_bad_generator():
    a, _ = _pair_datasets()
    with pytest.raises(TypeError, match="DataLoader: generator must be a tensorplay.Generator"):
        tpd.DataLoader(a, shuffle=True, generator=torch.Generator())


def test_training_loop_with_dataloader():
    """The usual ported loop: a seeded shuffled DataLoader feeding an MLP; two runs give the same loss."""
    def run():
        tp.manual_seed(0)
        x = tp.randn(32, 4)
        y = (x.sum(1) > 0).long()
        model = tp.nn.Sequential(tp.nn.Linear(4, 8), tp.nn.ReLU(), tp.nn.Linear(8, 2))
        opt = tp.optim.SGD(model.parameters(), lr=0.1)
        g = tp.Generator()
        g.manual_seed(1)
        losses = []
        for _ in range(2):
            for xb, yb in tpd.DataLoader(tpd.TensorDataset(x, y), batch_size=8, shuffle=True, generator=g):
                opt.zero_grad()
                loss = tp.nn.functional.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses

    a, b = run(), run()
    assert len(a) == 8 and a == b and all(math.isfinite(v) for v in a)
