"""The main process's side of DataLoader(num_workers > 0): starts the workers, hands out indices,
puts batches back in sampler order, notices dead workers and shuts everything down.

Each worker has an index queue and a result pipe (`_worker.py`); no lock is shared between
processes, so a worker killed at any moment cannot stall the others or the main process. At most
`prefetch_factor * num_workers` tasks are outstanding; task i goes to the next worker in turn
(skipping workers whose iterable dataset is exhausted) and a batch that arrives before its
predecessors waits in `_task_info` until they have been returned (unless in_order=False).
Workers are daemonic and stopped when the iterator is exhausted (not with persistent_workers),
deleted, or at interpreter exit (an atexit hook, run before multiprocessing's own, which would
only terminate them): each gets None on its index queue, is joined for a short while (the result
pipe is drained meanwhile, so a worker blocked writing a batch can finish) and terminated after.
While waiting for a batch, the main process checks every `_STATUS_CHECK_INTERVAL` seconds that
its workers are alive, so a worker killed by a signal raises instead of hanging.
"""
import atexit
import ctypes
import itertools
import multiprocessing
import multiprocessing.connection
import multiprocessing.context
import os
import queue
import signal
import time
import warnings
import weakref

from ._pin_memory import pin_memory
from ._worker import (_STATUS_CHECK_INTERVAL, _ExceptionWrapper, _IterableDatasetStopIteration, _ResultPipe,
                      _ResumeIteration, _worker_loop)

# How long shutdown waits for workers to leave on their own before terminating them (seconds).
_JOIN_TIMEOUT = 2.0

_live_iterators = weakref.WeakSet()
_atexit_registered = False


def _shutdown_live_iterators():
    for it in list(_live_iterators):
        it._shutdown_workers()


def resolve_context(ctx):
    """The multiprocessing context for `multiprocessing_context` (None: the platform's default)."""
    if ctx is None:
        return multiprocessing.get_context()
    if isinstance(ctx, str):
        methods = multiprocessing.get_all_start_methods()
        if ctx not in methods:
            raise ValueError(f"DataLoader: multiprocessing_context option should specify a valid start method in "
                             f"{methods!r}, but got multiprocessing_context={ctx!r}")
        return multiprocessing.get_context(ctx)
    if not isinstance(ctx, multiprocessing.context.BaseContext):
        raise TypeError(f"DataLoader: multiprocessing_context option should be a valid context object or a string "
                        f"specifying the start method, but got multiprocessing_context={ctx!r}")
    return ctx


def _warn_if_more_workers_than_cpus(num_workers):
    """As PyTorch: more workers than the CPUs this process may run on only adds contention."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count()
    if cpus and num_workers > cpus:
        warnings.warn(f"DataLoader will create {num_workers} worker processes, more than the {cpus} CPUs this "
                      f"process can use: the workers compete for them (and with the main process), which can "
                      f"make loading slower; consider num_workers <= {cpus}.", UserWarning, stacklevel=4)


def _describe_exit(code):
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _MultiProcessingDataLoaderIter:
    def __init__(self, loader, base_seed, pins=False):
        global _atexit_registered
        self._kind = loader._dataset_kind
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._max_tasks = loader.prefetch_factor * loader.num_workers
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        self._in_order = loader.in_order
        self._pins = pins  # copy each batch into pinned memory (main process: the workers have no CUDA)
        self._dataset = loader.dataset
        self._batch_size, self._drop_last = loader.batch_size, loader.drop_last
        self._workers, self._index_queues, self._result_pipes = [], [], []
        self._open_pipes = {}  # reader connection -> worker id, until the worker closes its end
        self._owner_pid = os.getpid()  # a forked copy of this iterator (in any child) must not stop them
        self._shutdown = False
        _warn_if_more_workers_than_cpus(self._num_workers)
        ctx = resolve_context(loader.multiprocessing_context)
        self._done_flag = ctx.RawValue(ctypes.c_bool, False)
        if not _atexit_registered:
            atexit.register(_shutdown_live_iterators)
            _atexit_registered = True
        _live_iterators.add(self)
        try:
            for worker_id in range(self._num_workers):
                index_queue = ctx.Queue()
                # Leaving the process must not wait on a feeder thread writing to a worker that is gone.
                index_queue.cancel_join_thread()
                pipe = _ResultPipe(ctx)
                w = ctx.Process(
                    target=_worker_loop, daemon=True,
                    args=(self._kind, loader.dataset, index_queue, pipe, self._done_flag,
                          loader._auto_collation, loader.collate_fn, loader.drop_last, base_seed,
                          loader.worker_init_fn, worker_id, self._num_workers))
                self._index_queues.append(index_queue)
                self._result_pipes.append(pipe)
                w.start()
                self._workers.append(w)
                # Closed before the next worker is forked, so that only worker k holds pipe k's writing
                # end: the pipe ends (EOF) as soon as that worker is gone.
                pipe.close_writer()
                self._open_pipes[pipe.reader] = worker_id
        except BaseException:
            self._shutdown_workers()
            raise
        self._reset(first_iter=True)

    def __iter__(self):
        return self

    def __len__(self):
        if self._kind == "iterable":  # as DataLoader.__len__
            n = len(self._dataset)
            if self._batch_size is not None:
                n = n // self._batch_size if self._drop_last else -(-n // self._batch_size)
            return n
        return len(self._index_sampler)

    def _reset(self, first_iter=False):
        """Starts an epoch: a new sampler iterator and, for persistent workers after the first epoch,
        a _ResumeIteration round trip to every worker (batches of an abandoned epoch are dropped)."""
        self._sampler_iter = iter(self._index_sampler)
        self._send_idx = 0  # the next task's number
        self._rcvd_idx = 0  # the number of the next batch to return
        self._task_info = {}  # task number -> (worker id,) while outstanding, (worker id, batch) when early
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            for q in self._index_queues:
                q.put(_ResumeIteration())
            waiting = self._num_workers
            while waiting:
                _, data = self._get_data()
                if isinstance(data, _ResumeIteration):
                    waiting -= 1
        for _ in range(self._max_tasks):
            self._try_put_index()

    def _try_put_index(self):
        if self._tasks_outstanding >= self._max_tasks:
            return
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_cycle)
            if self._workers_status[worker_id]:
                break
        else:
            return  # every worker's iterable dataset is exhausted
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _check_workers(self):
        failed = [(i, w) for i, w in enumerate(self._workers) if self._workers_status[i] and not w.is_alive()]
        if failed:
            pids = ", ".join(str(w.pid) for _, w in failed)
            how = "; ".join(f"worker {i}: {_describe_exit(w.exitcode)}" for i, w in failed)
            self._shutdown_workers()
            raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly ({how})")

    def _read_message(self, timeout):
        """The next complete message from any worker's pipe; queue.Empty after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            ready = multiprocessing.connection.wait(list(self._open_pipes),
                                                    max(0.0, deadline - time.monotonic()))
            if not ready:
                raise queue.Empty
            for reader in ready:
                worker_id = self._open_pipes[reader]
                try:
                    message = self._result_pipes[worker_id].read_some()
                except (EOFError, OSError):
                    # The worker is gone; wait for its exit status, then _check_workers says whether
                    # it should have gone.
                    del self._open_pipes[reader]
                    self._workers[worker_id].join(_STATUS_CHECK_INTERVAL)
                    raise queue.Empty from None
                if message is not None:
                    return message
            if not self._open_pipes:
                time.sleep(max(0.0, min(0.01, deadline - time.monotonic())))

    def _get_data(self):
        """The next message from a worker; raises when a worker died or `timeout` passed."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _STATUS_CHECK_INTERVAL
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - time.monotonic()))
            try:
                return self._read_message(wait)
            except queue.Empty:
                pass
            self._check_workers()
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def __next__(self):
        if self._shutdown:
            raise StopIteration
        while True:
            # Skip tasks of workers that have stopped (their iterable dataset ended) before answering.
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info is not None and (len(info) == 2 or self._workers_status[info[0]]):
                    break
                self._task_info.pop(self._rcvd_idx, None)
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            info = self._task_info[self._rcvd_idx]
            if len(info) == 2:
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process_data(info[1])
            idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, _IterableDatasetStopIteration):
                self._task_info.pop(idx, None)
                self._stop_worker(data.worker_id)
                self._try_put_index()
                continue
            if idx == self._rcvd_idx or not self._in_order:
                del self._task_info[idx]
                if idx == self._rcvd_idx:
                    self._rcvd_idx += 1
                return self._process_data(data)
            self._task_info[idx] += (data,)

    def _process_data(self, data):
        self._try_put_index()
        if isinstance(data, _ExceptionWrapper):
            data.reraise()
        return pin_memory(data) if self._pins else data

    def _stop_worker(self, worker_id):
        """A worker's iterable dataset is exhausted: no more tasks for it this epoch (and, when workers
        are not persistent, it may leave now)."""
        self._workers_status[worker_id] = False
        if not self._persistent:
            self._index_queues[worker_id].put(None)

    def _shutdown_workers(self):
        if self._shutdown or os.getpid() != self._owner_pid:
            return
        self._shutdown = True
        _live_iterators.discard(self)
        try:
            self._done_flag.value = True
            for q in self._index_queues:
                try:
                    q.put(None)
                except (OSError, ValueError):
                    pass
            deadline = time.monotonic() + _JOIN_TIMEOUT
            for w in self._workers:
                while w.is_alive() and time.monotonic() < deadline:
                    for pipe in self._result_pipes:
                        pipe.drain()
                    w.join(0.01)
        finally:
            for w in self._workers:
                if w.is_alive():
                    w.terminate()
                    w.join(1.0)
                    if w.is_alive():
                        w.kill()
                        w.join()
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
            for pipe in self._result_pipes:
                pipe.close()

    def __del__(self):
        if not getattr(self, "_shutdown", True):
            self._shutdown_workers()
