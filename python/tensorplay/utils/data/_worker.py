"""What runs inside a DataLoader worker process, and what crosses the process boundary.

A worker reads tasks `(send_idx, index)` from its own index queue, fetches and collates the batch
(map-style: `dataset[i]` / `__getitems__`; iterable: the next items of the worker's own iterator
over its copy of the dataset) and sends `(send_idx, batch)` back on its own result pipe. The main
process (`_multiprocess_iter.py`) puts the batches back in sampler order.

Messages on an index queue: a task, `_ResumeIteration` (a persistent worker starts a new epoch:
an iterable dataset's iterator is made again; answered with the same marker), or None (exit).
Messages on a result pipe: `(send_idx, batch)`, `(send_idx, _ExceptionWrapper)` when the fetch,
the collate or pickling the batch raised, `(send_idx, _IterableDatasetStopIteration)` when the
worker's iterator is exhausted, or `(None, _ResumeIteration)`.
"""
import os
import queue
import random
import struct
import sys
import threading
import time
import traceback
from dataclasses import dataclass

# How often a waiting worker checks that the process that started it is still alive, and how often
# the main process checks that its workers are (seconds).
_STATUS_CHECK_INTERVAL = 0.5


class WorkerInfo:
    """What `get_worker_info()` returns inside a worker: id, num_workers, seed, dataset (read-only)."""

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id, num_workers, seed, dataset):  # noqa: A002 - PyTorch's attribute names
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "num_workers", num_workers)
        object.__setattr__(self, "seed", seed)
        object.__setattr__(self, "dataset", dataset)

    def __setattr__(self, name, value):
        raise RuntimeError(f"Cannot assign attributes to {type(self).__name__} objects")

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={type(self.dataset).__name__})")


_worker_info = None


def get_worker_info():
    """In a DataLoader worker process: its WorkerInfo (id in [0, num_workers), num_workers, the seed
    it was given, and its own copy of the dataset). In any other process: None.

    An IterableDataset reads it in `__iter__` to give each worker its own share of the stream."""
    return _worker_info


@dataclass(frozen=True)
class _IterableDatasetStopIteration:
    worker_id: int


@dataclass(frozen=True)
class _ResumeIteration:
    pass


class _KeyErrorMessage(str):
    """KeyError shows its argument's repr; this keeps a multi-line message readable."""

    def __repr__(self):
        return self


class _ExceptionWrapper:
    """An exception raised in a worker, carried to the main process as its type and traceback text."""

    def __init__(self, exc_info, where):
        exc_type = exc_info[0]
        self.exc_type = exc_type
        self.type_name = exc_type.__name__
        self.where = where
        self.text = "".join(traceback.format_exception(*exc_info))

    def __reduce__(self):
        # The type travels by reference; one the main process cannot import (a class made inside a
        # function) is replaced by None, and the error is raised as a RuntimeError there.
        from multiprocessing.reduction import ForkingPickler
        exc_type = self.exc_type
        try:
            ForkingPickler.dumps(exc_type)
        except Exception:
            exc_type = None
        return _rebuild_exception_wrapper, (exc_type, self.type_name, self.where, self.text)

    def reraise(self):
        # The new exception is never bound to a local name here: a frame of its own traceback holding
        # it would make a reference cycle that keeps the iterator (and its workers) alive until the
        # garbage collector runs.
        msg = f"Caught {self.type_name} {self.where}.\nOriginal {self.text}"
        raise _rebuilt_exception(self.exc_type, msg)


def _rebuilt_exception(exc_type, msg):
    if exc_type is KeyError:
        msg = _KeyErrorMessage(msg)
    if exc_type is not None:
        try:
            return exc_type(msg)
        except Exception:
            pass  # an exception type whose constructor wants other arguments
    return RuntimeError(msg)


def _rebuild_exception_wrapper(exc_type, type_name, where, text):
    w = _ExceptionWrapper.__new__(_ExceptionWrapper)
    w.exc_type, w.type_name, w.where, w.text = exc_type, type_name, where, text
    return w


def _pickler_class():
    """ForkingPickler whose tensors leave their elements out of band (pickle protocol 5): they are
    written to the pipe straight from the tensor's memory and read into buffers the rebuilt tensors
    then own, instead of being copied into and out of the pickle stream."""
    global _BatchPickler
    if _BatchPickler is None:
        from multiprocessing.reduction import ForkingPickler
        from ... import _C
        from ...serialization import _reduce_tensor_out_of_band

        class BatchPickler(ForkingPickler):
            def reducer_override(self, obj):
                if type(obj) is _C.Tensor:
                    return _reduce_tensor_out_of_band(obj)
                return NotImplemented

        _BatchPickler = BatchPickler
    return _BatchPickler


_BatchPickler = None


class _ResultPipe:
    """Worker -> main process: one pipe per worker, so no lock is shared between processes (a worker
    killed while holding one would stall every other worker, or the main process at shutdown).

    The worker pickles each batch itself (not a feeder thread as in multiprocessing.Queue), so a
    batch that cannot be pickled becomes an error the main process sees instead of an item
    silently dropped while the main process waits for it. A message: its pickle's length and its
    number of out-of-band buffers (two 8-byte words), the buffers' lengths, the pickle, the
    buffers. The main process reads only what has arrived (`read_some` on a non-blocking reader,
    after `wait` says it is readable), never blocking on the rest of a message: a worker killed in
    the middle of one leaves a partial message and a wait that times out, so its death is noticed."""

    _HEADER = struct.Struct("<QQ")
    _PIPE_SIZE = 1 << 20  # fewer wake-ups per large batch than the default 64 KiB

    def __init__(self, ctx):
        self.reader, self._writer = ctx.Pipe(duplex=False)
        try:
            import fcntl
            fcntl.fcntl(self.reader.fileno(), fcntl.F_SETPIPE_SZ, self._PIPE_SIZE)
        except (ImportError, AttributeError, OSError):
            pass  # not Linux, or over /proc/sys/fs/pipe-max-size: the default size works too
        self._reset_reading()

    def __getstate__(self):  # what a spawned worker gets: the writing end only
        return {"_writer": self._writer}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.reader = None

    def _reset_reading(self):
        self._parts = [bytearray(self._HEADER.size)]  # header, [lengths], pickle, buffers...
        self._index = 0  # the part being read
        self._pos = 0  # bytes of it read
        self._lengths = None  # (pickle length, number of buffers) once the header is in

    def start_writing(self):
        """Worker side, once at start: a forked worker drops its copy of the main process's end."""
        if self.reader is not None:
            self.reader.close()

    def put(self, obj):
        """Worker side. Raises what pickling raises; OSError when the main process has closed the pipe."""
        import io
        buffers = []
        stream = io.BytesIO()
        _pickler_class()(stream, 5, True, buffers.append).dump(obj)  # ForkingPickler takes no keywords
        raws = [b.raw() for b in buffers]
        data = stream.getbuffer()
        parts = [self._HEADER.pack(len(data), len(raws))]
        if raws:
            parts.append(struct.pack(f"<{len(raws)}Q", *(r.nbytes for r in raws)))
        fd = self._writer.fileno()
        for part in parts + [data] + raws:
            view = memoryview(part).cast("B")
            while len(view):
                view = view[os.write(fd, view):]

    def close_writer(self):
        """Main side, once the worker has started: then the pipe ends (EOF) when the worker is gone.
        The reading end becomes non-blocking: read_some takes what is there and returns."""
        self._writer.close()
        os.set_blocking(self.reader.fileno(), False)

    @staticmethod
    def _buffer(n):
        # Uninitialized: a bytearray would zero every page first, then the read writes them again.
        import numpy as np
        return np.empty(n, dtype=np.uint8)

    def _part_done(self):
        """The part being read is complete: work out the parts that follow from it."""
        self._index += 1
        self._pos = 0
        if self._lengths is None:
            self._lengths = self._HEADER.unpack(self._parts[0])
            size, count = self._lengths
            self._parts.append(bytearray(8 * count) if count else self._buffer(size))
        elif len(self._parts) == 2 and self._lengths[1]:
            size, count = self._lengths
            self._parts.append(self._buffer(size))
            self._parts += [self._buffer(n) for n in struct.unpack(f"<{count}Q", self._parts[1])]

    def read_some(self):
        """Main side: reads what is there; the message once it is complete (unpickled), else None.
        EOFError when the worker has closed its end."""
        from multiprocessing.reduction import ForkingPickler
        fd = self.reader.fileno()
        while True:
            part = self._parts[self._index]
            try:
                n = os.readv(fd, [memoryview(part)[self._pos:]]) if len(part) > self._pos else 0
            except BlockingIOError:
                return None
            if n == 0 and len(part) > self._pos:
                raise EOFError
            self._pos += n
            while self._pos == len(self._parts[self._index]):
                self._part_done()
                if self._index == len(self._parts):
                    first = 2 if self._lengths[1] else 1
                    pickled, buffers = self._parts[first], self._parts[first + 1:]
                    self._reset_reading()
                    return ForkingPickler.loads(pickled, buffers=buffers)

    def drain(self):
        """Main side, at shutdown: reads and drops whatever is waiting (so a worker blocked writing a
        batch can go on and see its exit message)."""
        try:
            while self.reader.poll(0):
                if not os.read(self.reader.fileno(), 1 << 20):
                    break
        except (OSError, EOFError, ValueError):
            pass

    def close(self):
        for conn in (self.reader, self._writer):
            try:
                conn.close()
            except OSError:
                pass


def _seed_worker(seed, worker_id):
    """Seeds every generator a transform may draw from: tensorplay's default generator, Python's
    `random`, and NumPy's global generator when NumPy is imported."""
    import tensorplay as tp
    tp.manual_seed(seed)
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        # NumPy's legacy seed takes 32-bit words; the worker id keeps workers apart even when two
        # seeds share their low bits.
        np.random.seed([seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF, worker_id])


class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        getitems = getattr(self.dataset, "__getitems__", None)
        samples = getitems(index) if callable(getitems) else [self.dataset[i] for i in index]
        return self.collate_fn(samples)


class _IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.it = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.it))
        batch = []
        for _ in index:
            try:
                batch.append(next(self.it))
            except StopIteration:
                self.ended = True
                break
        if not batch or (self.drop_last and len(batch) < len(index)):
            raise StopIteration
        return self.collate_fn(batch)


def _make_fetcher(kind, dataset, auto_collation, collate_fn, drop_last):
    if kind == "iterable":
        return _IterableFetcher(dataset, auto_collation, collate_fn, drop_last)
    return _MapFetcher(dataset, auto_collation, collate_fn)


def _watch_parent(parent_pid):
    """Ends the worker when the process that started it is gone, whatever the worker is doing: a main
    process SIGKILLed while this worker's batch fills the pipe would otherwise leave it blocked in the
    write forever (the workers forked after it, and itself, hold copies of the reading end, so the
    write never fails)."""
    while True:
        time.sleep(_STATUS_CHECK_INTERVAL)
        if os.getppid() != parent_pid:
            os._exit(0)


def _worker_loop(kind, dataset, index_queue, result_pipe, done_flag, auto_collation, collate_fn, drop_last,
                 base_seed, init_fn, worker_id, num_workers):
    """The body of a worker process (the target given to multiprocessing). `done_flag` is a shared
    boolean without a lock (RawValue): set by the main process at shutdown, after which tasks
    still queued are skipped until the None that ends the loop."""
    global _worker_info
    try:
        import tensorplay as tp
        # A forked child must not enter the parent's OpenMP pool (libgomp's threads are gone after
        # fork and its first parallel region never returns); one thread per worker, as PyTorch does.
        tp.set_num_threads(1)
        parent_pid = os.getppid()
        result_pipe.start_writing()
        threading.Thread(target=_watch_parent, args=(parent_pid,), name="DataLoader worker watchdog",
                         daemon=True).start()
        seed = base_seed + worker_id
        _seed_worker(seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"

        init_error = None  # worker_init_fn or iter(dataset) raised: every task answers with it
        init_error_sent = False
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = _make_fetcher(kind, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_error = _ExceptionWrapper(sys.exc_info(), where)

        iteration_end = False
        while True:
            try:
                task = index_queue.get(timeout=_STATUS_CHECK_INTERVAL)
            except queue.Empty:
                if os.getppid() != parent_pid:
                    return  # the main process is gone: nobody will read what we would make
                continue
            if task is None:
                return
            if done_flag.value or iteration_end and not isinstance(task, _ResumeIteration):
                continue  # shutting down, or exhausted until the next epoch: drop the task
            if isinstance(task, _ResumeIteration):
                result_pipe.put((None, task))
                iteration_end = init_error_sent = False
                if kind == "iterable" and init_error is None:
                    try:
                        fetcher = _make_fetcher(kind, dataset, auto_collation, collate_fn, drop_last)
                    except Exception:
                        init_error = _ExceptionWrapper(sys.exc_info(), where)
                continue
            idx, index = task
            if init_error is not None:
                data = init_error
                if kind == "iterable" and init_error_sent:
                    # An iterable dataset that could not start has nothing more to give this epoch.
                    data = _IterableDatasetStopIteration(worker_id)
                    iteration_end = True
                init_error_sent = True
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if kind != "iterable":
                        data = _ExceptionWrapper(sys.exc_info(), where)
                    else:
                        data = _IterableDatasetStopIteration(worker_id)
                        iteration_end = True
                except Exception:
                    data = _ExceptionWrapper(sys.exc_info(), where)
            try:
                result_pipe.put((idx, data))
            except (OSError, EOFError):
                return  # the pipe is closed: the main process is gone or has shut us down
            except Exception:
                # The batch could not be pickled: say so instead of leaving the main process waiting.
                result_pipe.put((idx, _ExceptionWrapper(sys.exc_info(), where)))
            data = task = index = None
    except KeyboardInterrupt:
        pass  # the main process sees it too and shuts the workers down
