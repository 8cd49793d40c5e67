"""tensorplay.cuda: the CUDA device, loaded at run time.

Nothing here needs a CUDA toolkit: the driver (libcuda.so.1) and NVRTC are
opened with dlopen on first use. NVRTC comes from the system or from NVIDIA's
``nvidia-cuda-nvrtc`` wheel (``pip install tensorplay[cuda]``), whose library
folder is found on ``sys.path`` below. Without a GPU, ``is_available()`` is
False, ``device_count()`` is 0 and every move to "cuda" raises RuntimeError.
"""
import glob as _glob
import os as _os
import sys as _sys

from . import _C

_rt = _C._cuda


def _wheel_libraries(env, patterns, skip=None):
    """Paths of a CUDA library from NVIDIA's wheels inside a site-packages
    folder (newest first), after the path an environment variable names."""
    found = []
    if _os.environ.get(env):
        found.append(_os.environ[env])
    for base in _sys.path:
        for pattern in patterns:
            for path in sorted(_glob.glob(_os.path.join(base or ".", pattern)), reverse=True):
                if path not in found and not (skip and skip in _os.path.basename(path)):
                    found.append(path)
    return found


# NVRTC: nvidia/cu13/lib (CUDA 13) or nvidia/cuda_nvrtc/lib (CUDA 12); its
# libnvrtc-builtins is a helper it loads itself.
_rt.add_nvrtc_candidates(_wheel_libraries(
    "TP_NVRTC_PATH", ("nvidia/cu*/lib/libnvrtc.so*", "nvidia/cuda_nvrtc/lib/libnvrtc.so*"), skip="builtins"))
# cuBLASLt (nvidia-cublas): nvidia/cu13/lib (CUDA 13) or nvidia/cublas/lib (CUDA 12).
_rt.add_cublaslt_candidates(_wheel_libraries(
    "TP_CUBLASLT_PATH", ("nvidia/cu*/lib/libcublasLt.so*", "nvidia/cublas/lib/libcublasLt.so*")))

# cuDNN (nvidia-cudnn-cu13 / -cu12, which torch installs): nvidia/cudnn/lib;
# conv2d runs through it where it loads, else im2col + cuBLASLt.
_rt.add_cudnn_candidates(_wheel_libraries(
    "TP_CUDNN_PATH", ("nvidia/cudnn/lib/libcudnn.so.9", "nvidia/cu*/lib/libcudnn.so.9")))


def is_cudnn_available():
    """True when cuDNN 9 (the CUDA convolution library) can be loaded; no GPU needed."""
    return _rt.cudnn_available()


def is_cublaslt_available():
    """True when cuBLASLt (the CUDA matmul library) can be loaded; no GPU needed."""
    return _rt.cublaslt_available()


def is_available():
    """True when the CUDA driver is loadable and at least one GPU is present."""
    return _rt.is_available()


def device_count():
    return _rt.device_count()


def current_device():
    return _rt.current_device()


def set_device(device):
    _rt.set_device(device)


def synchronize(device=None):
    """Waits until every kernel and copy queued on `device` has finished.

    Like every synchronization (downloads, stream and event synchronize), it
    raises the RuntimeError of an out-of-range index that a checked index
    kernel (embedding, index_select, gather, scatter, index_add, index_put,
    x[i]) recorded since the last check; the status is then cleared."""
    _rt.synchronize(device)


def set_sync_checks(on):
    """Synchronous index checks, for debugging: each checked index kernel waits
    for its stream and raises IndexError from the call that passed the bad
    index (default: from the env TP_CUDA_SYNC_CHECKS=1). Off, a bad index is
    reported at the next synchronization point without stalling each call."""
    _rt.set_sync_checks(bool(on))


def get_sync_checks():
    """True when checked index kernels raise at the call (see set_sync_checks)."""
    return _rt.sync_checks()


def _host_sync_count():
    """Host synchronizations made by the CUDA layer so far (tests)."""
    return _rt.host_sync_count()


def _status_site_count():
    """Entries in the table of checked index sites (tests: bounded by (operator, dim), not sizes)."""
    return _rt.status_site_count()


def _report_pending_index_error():
    # At exit: a bad index recorded after the last synchronization would go unseen.
    try:
        msg = _rt.take_device_status()
    except Exception:  # the driver may already be gone
        return
    if msg:
        _sys.stderr.write("tensorplay: a CUDA index error was never reported before exit: " + msg + "\n")


import atexit as _atexit  # noqa: E402

_atexit.register(_report_pending_index_error)


def get_device_name(device=None):
    return _rt.get_device_name(device)


def get_device_capability(device=None):
    return _rt.get_device_capability(device)


def memory_allocated(device=None):
    """Bytes held by live tensors (block sizes, rounded to 512 bytes) on `device`."""
    return _rt.memory_stats(device)[0]


def max_memory_allocated(device=None):
    return _rt.memory_stats(device)[1]


def memory_reserved(device=None):
    """Bytes the caching allocator holds from the driver, in use or cached."""
    return _rt.memory_stats(device)[2]


def reset_peak_memory_stats(device=None):
    _rt.reset_peak_memory_stats(device)


def empty_cache():
    """Returns every cached, unused segment to the driver."""
    _rt.empty_cache()


def is_nvrtc_available():
    return _rt.nvrtc_available()


def _kernel_sources():
    """Every CUDA kernel source the eager CUDA kernels generate, as (name, source) pairs."""
    return _rt.kernel_sources()


def _nvrtc_compile(source, name, arch):
    """Compiles `source` with NVRTC for sm_<arch>; returns the CUBIN bytes (no GPU needed)."""
    return _rt.nvrtc_compile(source, name, arch)


class device:
    """Context manager that makes `device` the current CUDA device (``None`` or a
    negative index: no change), restoring the previous one on exit. Like
    ``set_device``, it decides which GPU ``"cuda"`` without an index names;
    tensors already on a GPU keep running there."""

    def __init__(self, device):
        self.idx = _index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = current_device()
            if self.prev_idx != self.idx:
                set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """``device`` of a tensor's GPU; a CPU tensor changes nothing."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)


# Random numbers. CUDA random operators (dropout, and the factories, which
# draw on the host and upload) use TensorPlay's default generator, shared by
# every device: one seed reproduces a run on any GPU, and a CPU and a CUDA
# call after the same seed draw the same values. These are PyTorch's names for
# seeding that generator (in PyTorch each GPU has its own; here all share one,
# so manual_seed and manual_seed_all are the same call).
def manual_seed(seed):
    """Seeds the generator CUDA random operators draw from (the default one)."""
    from . import _factories
    _factories.manual_seed(seed)


def manual_seed_all(seed):
    """Seeds the generator every GPU's random operators draw from (the default one)."""
    manual_seed(seed)


def seed():
    """Seeds the generator CUDA random operators draw from with a random number."""
    from . import _factories
    _factories.seed()


def seed_all():
    seed()


def initial_seed():
    from . import _factories
    return _factories.initial_seed()


# ---------------------------------------------------------------------------
# Streams and events (Section 9.9). Handles are the driver's, as integers; 0 is
# the legacy default stream, where all work goes unless a `stream(s)` context
# says otherwise (per thread and per device, like PyTorch).

def _index(device, optional=False):
    """The GPU index `device` names (an int, "cuda:N", a tp/torch device, or
    None / "cuda" for the current one); with `optional`, None and negative
    ints give -1 (no device)."""
    if device is None or (isinstance(device, int) and device < 0):
        if optional:
            return -1
        if device is None:
            return current_device()
    if isinstance(device, int):
        i = device
    else:
        d = _C.device(device)
        if d.type != "cuda":
            raise ValueError(f"expected a CUDA device but got '{device}'")
        i = d.index if d.index is not None and d.index >= 0 else current_device()
    if is_available() and not 0 <= i < device_count():
        raise RuntimeError(f"CUDA error: invalid device ordinal {i} ({device_count()} device(s) present)")
    return i


class Stream:
    """A CUDA stream: work queued on it runs in order, concurrently with other streams.

    ``Stream()`` hands out a non-blocking stream from the device's pool of 32 (as
    PyTorch does: streams are reused, never destroyed). Use it with
    ``with tp.cuda.stream(s):``; order it against others with ``wait_stream`` /
    ``wait_event``; ``Tensor.record_stream(s)`` tells the allocator a tensor made
    on another stream is used on ``s``.
    """

    def __init__(self, device=None, priority=0, *, _handle=None):
        self.device_index = _index(device)
        self.priority = priority
        self.cuda_stream = _rt.pool_stream(self.device_index) if _handle is None else _handle

    @property
    def device(self):
        return _C.device(f"cuda:{self.device_index}")

    def synchronize(self):
        """Waits on the host until all work queued on this stream has finished."""
        _rt.stream_synchronize(self.device_index, self.cuda_stream)

    def query(self):
        """True when all work queued on this stream has finished."""
        return _rt.stream_query(self.device_index, self.cuda_stream)

    def wait_event(self, event):
        """Work queued later on this stream waits (on the device) for `event`."""
        _rt.stream_wait_event(self.device_index, self.cuda_stream, event._handle())

    def wait_stream(self, stream):
        """Work queued later on this stream waits for everything queued on `stream` so far."""
        _rt.stream_wait_device(self.device_index, self.cuda_stream, stream.device_index, stream.cuda_stream)

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self.cuda_stream, self.device_index) == (
            other.cuda_stream, other.device_index)

    def __hash__(self):
        return hash((self.cuda_stream, self.device_index))

    def __repr__(self):
        return f"<tensorplay.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x}>"


def current_stream(device=None):
    """The stream this thread queues work for `device` on."""
    i = _index(device)
    return Stream(i, _handle=_rt.current_stream(i))


def default_stream(device=None):
    """The legacy default stream (handle 0), where work goes outside any `stream(s)` context."""
    i = _index(device)
    if not is_available():
        _rt.current_stream(i)  # raises the "not available" error
    return Stream(i, _handle=0)


def set_stream(stream):
    _rt.set_current_stream(stream.device_index, stream.cuda_stream)


class stream:
    """Context manager: makes `s` the current stream of its device (None: no change)."""

    def __init__(self, s):
        self.stream = s
        self._prev = None

    def __enter__(self):
        if self.stream is None:
            return None
        self._prev = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            set_stream(self._prev)
        return False


class Event:
    """A CUDA event: a marker in a stream, to wait for or to time between."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        if interprocess:
            raise NotImplementedError("tensorplay.cuda.Event: interprocess events are not supported")
        self.enable_timing = enable_timing
        self._ev = None
        self._device = None

    def _handle(self):
        if self._ev is None:
            self._device = current_device()
            self._ev = _rt.event_create(self._device, self.enable_timing)
        return self._ev

    def record(self, stream=None):
        stream = current_stream() if stream is None else stream
        if self._ev is None:
            self._device = stream.device_index
            self._ev = _rt.event_create(self._device, self.enable_timing)
        _rt.event_record(stream.device_index, self._ev, stream.cuda_stream)

    def wait(self, stream=None):
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self):
        return True if self._ev is None else _rt.event_query(self._ev)

    def synchronize(self):
        if self._ev is not None:
            _rt.event_synchronize(self._ev)

    def elapsed_time(self, end_event):
        """Milliseconds between this event and `end_event` (both recorded, timing enabled)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Event.elapsed_time: both events must be created with enable_timing=True")
        if self._ev is None or end_event._ev is None:
            raise RuntimeError("Event.elapsed_time: both events must be recorded first")
        return _rt.event_elapsed_time(self._ev, end_event._ev)

    def __del__(self):
        if getattr(self, "_ev", None) is not None:
            try:
                _rt.event_destroy(self._ev)
            except Exception:
                pass


def _record_stream(self, stream):
    """The allocator will not reuse this tensor's memory before `stream`'s work queued up to its free is done."""
    _rt.record_stream(self, stream.cuda_stream)


_C.Tensor.record_stream = _record_stream


class CUDAGraph:
    """A CUDA graph recorded with ``with tp.cuda.graph(g):`` and replayed with ``g.replay()``.

    Kernels queued inside the context are recorded, not run; tensors created
    there live in the graph's private memory pool and are rewritten by each
    replay. Inputs must be read from tensors made before the capture (fill
    them with ``copy_`` before each replay).
    """

    def __init__(self, device=None):
        self.device_index = _index(device)
        self._g = _rt.Graph(self.device_index)

    def capture_begin(self):
        self._g.begin_capture()

    def capture_end(self):
        self._g.end_capture()

    def replay(self):
        self._g.replay()

    def node_count(self):
        return self._g.node_count()


class graph:
    """Context manager that captures the work queued inside it into `cuda_graph`."""

    def __init__(self, cuda_graph):
        self.cuda_graph = cuda_graph

    def __enter__(self):
        synchronize(self.cuda_graph.device_index)  # the graph's GPU, not the current one
        self.cuda_graph.capture_begin()
        return self.cuda_graph

    def __exit__(self, exc_type, *exc):
        if exc_type is not None:
            self.cuda_graph._g.abort_capture()
            return False
        self.cuda_graph.capture_end()
        return False


def _graph_region_stats():
    """(captures, replays, plain calls, copied inputs) over every reduce-overhead region (tests)."""
    c, r, p, i = _rt.graph_region_stats()
    return {"captures": c, "replays": r, "plain_calls": p, "copied_inputs": i}


from .amp.device_spellings import device_amp_module as _device_amp_module  # noqa: E402

amp = _device_amp_module(__name__ + ".amp", "cuda", custom_decorators=True)
