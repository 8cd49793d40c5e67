"""DataLoader(num_workers > 0): worker processes give the same batches as num_workers=0, in sampler
order; worker info, seeding, persistent workers, errors, dead workers, timeouts and shutdown."""
import multiprocessing
import os
import pickle
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.utils.data import (BatchSampler, DataLoader, Dataset, IterableDataset, SequentialSampler,
                                   TensorDataset, get_worker_info)


# Several tests use more workers than the 2 CPUs of the test machine; that warning is tested once.
pytestmark = pytest.mark.filterwarnings("ignore:DataLoader will create")


# ------------------------------------------------------------------ datasets (module level: picklable)
class Squares(Dataset):
    """Sample i: (a transposed (non-contiguous) 2x2 float tensor, the int i)."""

    def __init__(self, n=37):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return tp.tensor([[float(i), float(i * i)], [float(-i), 1.0]]).t(), i


class WhoAmI(Dataset):
    """Sample i: where it was made (pid, worker id, num_workers, seed, init calls) and random draws."""

    def __init__(self, n=8):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = get_worker_info()
        return {"i": i, "pid": os.getpid(), "id": info.id, "num_workers": info.num_workers, "seed": info.seed,
                "same_type": type(info.dataset) is WhoAmI, "init_calls": _INIT_CALLS[0],
                "initial_seed": tp.initial_seed(),
                "tp": tp.rand(1).item(), "random": random.random(), "np": float(np.random.rand())}


class Range(IterableDataset):
    """range(start, stop), split between workers in contiguous shards (get_worker_info)."""

    def __init__(self, start, stop):
        self.start, self.stop = start, stop

    def __len__(self):
        return self.stop - self.start

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.start, self.stop))
        per = -(-(self.stop - self.start) // info.num_workers)
        lo = self.start + info.id * per
        return iter(range(lo, min(lo + per, self.stop)))


class Unsharded(IterableDataset):
    def __iter__(self):
        return iter(range(4))


class Failing(Dataset):
    def __init__(self, bad, exc):
        self.bad, self.exc = bad, exc

    def __len__(self):
        return 12

    def __getitem__(self, i):
        if i == self.bad:
            raise self.exc
        return i


class Slow(Dataset):
    def __init__(self, seconds, n=6):
        self.seconds, self.n = seconds, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.seconds)
        return os.getpid()


class NeedsTwoArgs(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


_INIT_CALLS = [0]


def _count_init(worker_id):
    _INIT_CALLS[0] += 1


def _pids(loader):
    return {int(p) for b in loader for p in b.tolist()}


def _batches(loader):
    return [(x.tolist(), y.tolist()) for x, y in loader]


def _no_children():
    """No live child processes: waits a moment for ones being reaped (active_children joins them)."""
    deadline = time.monotonic() + 5
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    return multiprocessing.active_children() == []


# ------------------------------------------------------------------ same batches as num_workers=0
@pytest.mark.parametrize("num_workers,batch_size,drop_last", [(1, 4, False), (2, 5, True), (3, 1, False),
                                                              (4, 6, False)])
def test_same_batches_as_single_process_with_shuffle(num_workers, batch_size, drop_last):
    ds = Squares()
    kw = dict(batch_size=batch_size, shuffle=True, drop_last=drop_last)
    tp.manual_seed(3)
    ref_loader = DataLoader(ds, **kw)
    ref = [_batches(ref_loader) for _ in range(2)]
    tp.manual_seed(3)
    loader = DataLoader(ds, num_workers=num_workers, **kw)
    got = [_batches(loader) for _ in range(2)]
    assert got == ref and ref[0] != ref[1]
    assert len(loader) == len(ref_loader) == len(ref[0])
    if drop_last:
        assert all(len(y) == batch_size for _, y in ref[0])


def test_same_batches_with_generator_and_persistent_workers():
    ds = Squares(23)
    ref, got = [], []
    for workers, out in ((0, ref), (2, got)):
        g = tp.Generator()
        g.manual_seed(9)
        kw = dict(num_workers=workers, persistent_workers=True) if workers else {}
        loader = DataLoader(ds, batch_size=4, shuffle=True, generator=g, **kw)
        out += [_batches(loader) for _ in range(3)]
    assert got == ref


def test_custom_collate_sampler_batch_sampler_and_no_batching():
    ds = Squares(20)
    order = [19, 3, 3, 7, 0, 11, 5, 8, 2]

    def collate(samples):
        return {"ids": [i for _, i in samples], "pid": os.getpid()}

    ref = list(DataLoader(ds, batch_size=2, sampler=order, collate_fn=collate))
    got = list(DataLoader(ds, batch_size=2, sampler=order, collate_fn=collate, num_workers=2))
    assert [b["ids"] for b in got] == [b["ids"] for b in ref] == [[19, 3], [3, 7], [0, 11], [5, 8], [2]]
    assert all(b["pid"] != os.getpid() for b in got)  # collate_fn runs in the worker
    assert len({b["pid"] for b in got}) == 2

    sampler = BatchSampler(SequentialSampler(range(20)), 6, drop_last=False)
    assert _batches(DataLoader(ds, batch_sampler=sampler, num_workers=2)) == _batches(
        DataLoader(ds, batch_sampler=sampler))

    # batch_size=None: one sample at a time, converted, not collated into a batch.
    ref = [(x.tolist(), y) for x, y in DataLoader(ds, batch_size=None)]
    got = [(x.tolist(), y) for x, y in DataLoader(ds, batch_size=None, num_workers=3)]
    assert got == ref and got[4] == ([[4.0, -4.0], [16.0, 1.0]], 4)


def test_tensors_cross_the_process_boundary_intact():
    x = tp.arange(60, dtype=tp.float32).reshape(10, 6)
    y = tp.arange(10).to(tp.int32)
    flags = tp.tensor([True, False] * 5)
    ds = TensorDataset(x, y, flags, x.to(tp.bfloat16))
    for ref, got in zip(DataLoader(ds, batch_size=4), DataLoader(ds, batch_size=4, num_workers=2)):
        for a, b in zip(ref, got):
            assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and not b.requires_grad
            assert a.tolist() == b.tolist()
    # Unbatched transposed samples keep their layout.
    assert [x.stride() for x, _ in DataLoader(Squares(3), batch_size=None, num_workers=1)] == [(1, 2)] * 3


def test_tensor_pickle_keeps_values_dtype_shape_and_permuted_strides():
    a = tp.arange(24, dtype=tp.float32).reshape(2, 3, 4)
    cases = [a, a.permute(2, 0, 1), a.transpose(0, 1), a[:, 1:, ::2], a.to(tp.bfloat16).permute(1, 2, 0),
             a.to(tp.int64)[1].t(), a[0, 0, 0], tp.zeros(0, 3),
             tp.tensor([True, False]).expand(3, 2)]
    for t in cases:
        u = pickle.loads(pickle.dumps(t))
        assert u.dtype == t.dtype and tuple(u.shape) == tuple(t.shape) and u.tolist() == t.tolist()
        assert not u.requires_grad
    for t in (a.permute(2, 0, 1), a.transpose(0, 1), a.to(tp.bfloat16).permute(1, 2, 0)):
        assert pickle.loads(pickle.dumps(t)).stride() == t.stride()
    assert pickle.loads(pickle.dumps(a[:, 1:, ::2])).is_contiguous()
    assert pickle.loads(pickle.dumps(tp.ones(2, 2, requires_grad=True))).requires_grad


class BigOps(Dataset):
    """Operators large enough to run on OpenMP threads, in the worker."""

    def __len__(self):
        return 2

    def __getitem__(self, i):
        a = tp.full((1000, 1000), 0.001 * (i + 1))
        return float((a.exp() @ a).sum())


def test_forked_workers_run_large_operators_after_the_parent_used_its_thread_pool():
    # A forked child that enters the parent's OpenMP pool hangs; workers run on one thread.
    a = tp.full((1000, 1000), 0.001)
    ref = [float((a.exp() @ a).sum()), float((tp.full((1000, 1000), 0.002).exp() @ (2 * a)).sum())]
    got = list(DataLoader(BigOps(), batch_size=None, num_workers=2, multiprocessing_context="fork", timeout=30))
    assert got == pytest.approx(ref, rel=1e-5)


# ------------------------------------------------------------------ iterable datasets, worker info, seeds
@pytest.mark.parametrize("batch_size", [None, 3])
def test_iterable_dataset_sharded_with_worker_info(batch_size):
    ds = Range(5, 30)
    loader = DataLoader(ds, batch_size=batch_size, num_workers=3)
    items = []
    for b in loader:
        items += b.tolist() if batch_size else [int(b)]
    assert sorted(items) == list(range(5, 30))  # every item exactly once
    assert len(loader) == len(iter(loader)) == (25 if batch_size is None else 9)
    # Without sharding every worker reads its own full copy, as in PyTorch.
    items = []
    for b in DataLoader(Unsharded(), batch_size=batch_size, num_workers=2):
        items += b.tolist() if batch_size else [b]
    assert sorted(items) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_iterable_dataset_drop_last_per_worker_and_persistent_epochs():
    loader = DataLoader(Range(0, 10), batch_size=3, drop_last=True, num_workers=2, persistent_workers=True)
    for _ in range(2):
        batches = [b.tolist() for b in loader]
        # worker 0: 0..4 -> [0,1,2]; worker 1: 5..9 -> [5,6,7]; partial batches dropped in each worker.
        assert batches == [[0, 1, 2], [5, 6, 7]]


def test_worker_info_and_worker_init_fn():
    _INIT_CALLS[0] = 0
    loader = DataLoader(WhoAmI(9), batch_size=None, num_workers=3, worker_init_fn=_count_init)
    samples = list(loader)
    assert [s["i"] for s in samples] == list(range(9))
    assert [s["id"] for s in samples] == [0, 1, 2] * 3  # tasks go round the workers
    assert all(s["num_workers"] == 3 and s["same_type"] and s["init_calls"] == 1 for s in samples)
    assert len({s["pid"] for s in samples}) == 3 and os.getpid() not in {s["pid"] for s in samples}
    seeds = {s["id"]: s["seed"] for s in samples}
    assert seeds[1] == seeds[0] + 1 and seeds[2] == seeds[0] + 2
    assert all(s["initial_seed"] == s["seed"] for s in samples)  # tp's default generator is seeded with it
    assert _INIT_CALLS[0] == 0 and get_worker_info() is None  # nothing ran in this process


def test_worker_seeds_differ_between_workers_and_follow_manual_seed():
    def draws(seed):
        tp.manual_seed(seed)
        return [(s["id"], s["tp"], s["random"], s["np"])
                for s in DataLoader(WhoAmI(4), batch_size=None, num_workers=2)]

    a, b, c = draws(5), draws(5), draws(6)
    assert a == b and a != c
    first = {w: (t, r, n) for w, t, r, n in a[:2]}
    assert all(x != y for x, y in zip(first[0], first[1]))  # each generator differs between the workers
    loader = DataLoader(WhoAmI(2), batch_size=None, num_workers=2)
    assert [s["tp"] for s in loader] != [s["tp"] for s in loader]  # a new epoch draws new seeds


# ------------------------------------------------------------------ persistent workers
def test_persistent_workers_keep_their_processes():
    x = Slow(0, n=8)
    loader = DataLoader(x, batch_size=2, num_workers=2, persistent_workers=True)
    first = _pids(loader)
    it = iter(loader)
    next(it)  # an abandoned epoch: the next one must still give every batch
    assert _pids(loader) == first and len(first) == 2
    assert len(multiprocessing.active_children()) >= 2
    del loader, it
    assert _no_children()

    loader = DataLoader(x, batch_size=2, num_workers=2)
    assert _pids(loader).isdisjoint(_pids(loader))
    assert _no_children()


# ------------------------------------------------------------------ errors
def _error_of(exc_type, loader):
    """The message of the exc_type that iterating over loader raises. `info` is deleted: its traceback
    holds this frame, a cycle that would keep the iterator (and its workers) until a gc pass."""
    with pytest.raises(exc_type) as info:
        list(loader)
    msg = str(info.value)
    del info
    return msg


def test_worker_exception_is_reraised_with_worker_id_and_traceback():
    msg = _error_of(ValueError, DataLoader(Failing(7, ValueError("bad sample 7")), batch_size=None, num_workers=2))
    assert "Caught ValueError in DataLoader worker process 1" in msg
    assert "Original Traceback (most recent call last)" in msg and "in __getitem__" in msg
    assert "bad sample 7" in msg
    msg = _error_of(KeyError, DataLoader(Failing(2, KeyError("k")), batch_size=None, num_workers=2))
    assert msg.startswith("Caught KeyError in DataLoader worker process 0")
    msg = _error_of(RuntimeError, DataLoader(Failing(0, NeedsTwoArgs(1, 2)), batch_size=None, num_workers=1))
    assert "Caught NeedsTwoArgs in DataLoader worker process 0" in msg

    # An exception in worker_init_fn, and a batch that cannot be pickled, are errors too (not hangs).
    def bad_init(worker_id):
        raise TypeError(f"init of {worker_id}")

    msg = _error_of(TypeError, DataLoader(Squares(4), num_workers=2, worker_init_fn=bad_init, timeout=20))
    assert "Caught TypeError in DataLoader worker process 0" in msg and "init of 0" in msg
    msg = _error_of(Exception, DataLoader(Squares(2), batch_size=None, num_workers=1, timeout=20,
                                          collate_fn=lambda s: (lambda: s)))
    assert "in DataLoader worker process 0" in msg and "pickle" in msg
    assert _no_children()

    # An iterable dataset whose worker could not start: the error, then the end (not a hang).
    it = iter(DataLoader(Range(0, 6), num_workers=1, worker_init_fn=bad_init, timeout=20))
    with pytest.raises(TypeError, match="init of 0"):
        next(it)
    assert list(it) == []
    del it

    # The iterator stays usable after an error, as in PyTorch: the other samples still come.
    it = iter(DataLoader(Failing(1, ValueError("one")), batch_size=None, num_workers=2))
    got = [next(it)]
    with pytest.raises(ValueError, match="one"):
        next(it)
    got += list(it)
    assert got == [0] + list(range(2, 12))


def test_killed_worker_raises_instead_of_hanging():
    loader = DataLoader(Slow(0.05, n=40), batch_size=1, num_workers=2, timeout=30)
    it = iter(loader)
    victim = int(next(it))
    os.kill(victim, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"DataLoader worker \(pid\(s\) {victim}\) exited unexpectedly.*SIGKILL"):
        for _ in it:
            pass
    assert time.monotonic() - start < 10
    del it
    assert _no_children()


class BigSecond(Dataset):
    """Task 2 (worker 0's second) is a 32 MB batch: its worker is still writing it while nobody reads."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        return tp.zeros(8 << 20) if i == 2 else tp.tensor([os.getpid()])


def test_worker_killed_while_writing_a_batch_raises(subprocess_env):
    # Run in a child so that a hang (the main process blocked reading the rest of a message that
    # never comes) fails the test instead of stalling the suite.
    script = textwrap.dedent("""
        import os, signal, sys, time
        sys.path.insert(0, sys.argv[1])
        from test_dataloader_workers import BigSecond, DataLoader
        it = iter(DataLoader(BigSecond(), batch_size=None, num_workers=2, timeout=60))
        victim = int(next(it))
        time.sleep(1.0)  # worker 0 has made batch 2 and is blocked part way through writing it
        os.kill(victim, signal.SIGKILL)
        try:
            list(it)
        except RuntimeError as e:
            print("raised:", e)
    """)
    out = subprocess.run([sys.executable, "-c", script, os.path.dirname(__file__)], env=subprocess_env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "raised: DataLoader worker (pid(s)" in out.stdout and "SIGKILL" in out.stdout


def _gone(pid):
    """The process has exited (a zombie left to a parent that does not reap counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_workers_leave_when_the_main_process_is_killed(subprocess_env):
    script = textwrap.dedent("""
        import multiprocessing, sys, time
        sys.path.insert(0, sys.argv[1])
        from test_dataloader_workers import BigSecond, DataLoader
        it = iter(DataLoader(BigSecond(), batch_size=None, num_workers=2))
        next(it)
        print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script, os.path.dirname(__file__)], env=subprocess_env,
                            stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        time.sleep(1.0)  # worker 0 is blocked writing its 32 MB batch into the full pipe
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert len(pids) == 2
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if not _gone(p)]
    for p in left:  # do not leave them running if the test fails
        os.kill(p, signal.SIGKILL)
    assert not left


def test_timeout_raises():
    loader = DataLoader(Slow(1.0, n=2), batch_size=1, num_workers=1, timeout=0.2)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0.2 seconds"):
        next(iter(loader))
    assert time.monotonic() - start < 5
    assert _no_children()


def test_workers_are_shut_down_on_break_exception_and_del():
    ds = Squares(200)
    for _ in DataLoader(ds, batch_size=2, num_workers=2):
        break
    assert _no_children()

    with pytest.raises(ZeroDivisionError):
        for _ in DataLoader(ds, batch_size=2, num_workers=2):
            1 / 0
    assert _no_children()

    it = iter(DataLoader(ds, batch_size=2, num_workers=2))
    next(it)
    assert len(multiprocessing.active_children()) == 2
    del it
    assert _no_children()

    # Exhaustion stops them without waiting for the iterator to be dropped.
    it = iter(DataLoader(Squares(4), batch_size=2, num_workers=2))
    assert len(list(it)) == 2 and _no_children()


def test_interpreter_exit_with_live_workers_does_not_hang(subprocess_env):
    script = textwrap.dedent("""
        import os, sys, tensorplay as tp
        from tensorplay.utils.data import DataLoader
        sys.path.insert(0, sys.argv[1])
        from test_dataloader_workers import Squares
        loader = DataLoader(Squares(50), batch_size=2, num_workers=2, persistent_workers=True)
        it = iter(loader)
        next(it)
        import multiprocessing
        print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", script, os.path.dirname(__file__)], env=subprocess_env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2
    for pid in pids:  # the workers are gone (not left running as orphans)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# ------------------------------------------------------------------ arguments
def test_argument_validation():
    ds = Squares(4)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified in multiprocessing"):
        DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(ds, num_workers=2, prefetch_factor=0)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="multiprocessing_context"):
        DataLoader(ds, num_workers=2, multiprocessing_context="no-such-method")
    with pytest.raises(ValueError, match="multiprocessing_context can only be used with multi-process"):
        DataLoader(ds, multiprocessing_context="spawn")
    assert DataLoader(ds, num_workers=2).prefetch_factor == 2
    assert DataLoader(ds).prefetch_factor is None
    loader = DataLoader(ds, batch_size=1, num_workers=3, prefetch_factor=1)
    assert [int(y) for _, y in loader] == [0, 1, 2, 3]
    many = len(os.sched_getaffinity(0)) + 1
    with pytest.warns(UserWarning, match=f"DataLoader will create {many} worker processes, more than the"):
        assert len(list(DataLoader(ds, batch_size=2, num_workers=many))) == 2


def test_in_order_false_gives_every_batch_and_pin_memory_warns_without_cuda():
    got = [int(y) for _, y in DataLoader(Squares(12), batch_size=1, num_workers=3, in_order=False)]
    assert sorted(got) == list(range(12))
    if not tp.cuda.is_available():
        with pytest.warns(UserWarning, match="pin_memory"):
            assert len(list(DataLoader(Squares(4), batch_size=2, num_workers=1, pin_memory=True))) == 2


def test_spawn_and_forkserver_contexts_with_module_level_dataset():
    ctx = multiprocessing.get_context("spawn")
    tp.manual_seed(1)
    ref = _batches(DataLoader(Squares(11), batch_size=3, shuffle=True))
    tp.manual_seed(1)
    got = _batches(DataLoader(Squares(11), batch_size=3, shuffle=True, num_workers=2, multiprocessing_context=ctx))
    assert got == ref
    items = [int(v) for b in DataLoader(Range(0, 7), batch_size=2, num_workers=2, multiprocessing_context="spawn")
             for v in b.tolist()]
    assert sorted(items) == list(range(7))
    got = _batches(DataLoader(Squares(5), batch_size=2, num_workers=1, multiprocessing_context="forkserver"))
    assert got == _batches(DataLoader(Squares(5), batch_size=2))
    assert _no_children()


def test_training_loop_gives_the_same_losses_with_workers():
    """A ported training loop: a seeded shuffled DataLoader with a random augmentation done in the
    dataset (drawn from the default generator), two epochs; with workers the run is reproducible,
    and without augmentation it equals the single-process run."""

    class Noisy(Dataset):
        def __init__(self, x, y, noise):
            self.x, self.y, self.noise = x, y, noise

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            # Without noise nothing is drawn: in the calling process a draw would advance the default
            # generator that the next epoch's shuffle uses (so would PyTorch's).
            return (self.x[i] + self.noise * tp.randn(4) if self.noise else self.x[i]), self.y[i]

    def run(noise, **kw):
        tp.manual_seed(0)
        x = tp.randn(40, 4)
        y = (x.sum(1) > 0).long()
        model = tp.nn.Sequential(tp.nn.Linear(4, 8), tp.nn.ReLU(), tp.nn.Linear(8, 2))
        opt = tp.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(Noisy(x, y, noise), batch_size=8, shuffle=True, **kw)
        losses = []
        for _ in range(2):
            for xb, yb in loader:
                opt.zero_grad()
                loss = tp.nn.functional.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses

    ref = run(0.0)
    assert len(ref) == 10
    assert run(0.0, num_workers=2) == ref
    assert run(0.0, num_workers=2, persistent_workers=True) == ref
    noisy = run(0.1, num_workers=2)
    assert noisy == run(0.1, num_workers=2) and noisy != ref
