"""tp.profiler.profile: what ran and how long, per operator, backward node,
compiled call and user range (PyTorch's torch.profiler API).

The recorder lives in C++ (core/profiler.h): the dispatcher, the autograd
engine, tp.compile and the Stax runtime each open a range where their work
starts, so eager operators, their backward nodes, compiled functions (with
their generated regions and the GEMMs and other extern steps inside them)
and record_function blocks all land in one nested timeline. When no profile
runs, each of those places pays one relaxed atomic load.

Times are host (CPU) wall time. Operators on a CUDA device are asynchronous:
their ranges measure the launch, not the kernel; ProfilerActivity.CUDA is
accepted and records the same host ranges."""

from __future__ import annotations

import contextlib
import enum
import os
import time
from typing import Callable, Iterable, Optional

from .. import _C
from ._events import EventList, build_events


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1


def supported_activities():
    """The activities profile() accepts on this machine."""
    acts = {ProfilerActivity.CPU}
    from .. import cuda
    if cuda.is_available():
        acts.add(ProfilerActivity.CUDA)
    return acts


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """The step -> action function profile(schedule=...) follows: skip
    `skip_first` steps, then cycles of `wait` idle steps, `warmup` steps
    profiled and thrown away, `active` steps recorded (the last of them saves:
    on_trace_ready is called); `repeat` cycles (0: for ever)."""
    for name, v in (("wait", wait), ("warmup", warmup), ("active", active), ("repeat", repeat),
                    ("skip_first", skip_first)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"schedule: {name} must be a non-negative int, got {v!r}")
    if active < 1:
        raise ValueError(f"schedule: active must be at least 1, got {active}")
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD_AND_SAVE if pos == cycle - 1 else ProfilerAction.RECORD
    return action


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name: str, worker_name: Optional[str] = None, use_gzip: bool = False):
    """An on_trace_ready that writes each saved trace as
    `<dir_name>/<worker>.<ms timestamp>.pt.trace.json[.gz]` (Chrome trace
    format, which TensorBoard's profile plugin and Perfetto read)."""
    def handler(prof: "profile") -> None:
        os.makedirs(dir_name, exist_ok=True)
        import socket
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        path = os.path.join(dir_name, f"{worker}.{int(time.time() * 1000)}.pt.trace.json")
        if use_gzip:
            import gzip
            import tempfile
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
                tmp_path = tmp.name
            try:
                prof.export_chrome_trace(tmp_path)
                with open(tmp_path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                    dst.write(src.read())
            finally:
                os.unlink(tmp_path)
        else:
            prof.export_chrome_trace(path)
    return handler


class record_function(contextlib.ContextDecorator):
    """A named range in the profile around a block or a function (decorator).
    Outside a profile it does nothing. Inside tp.compile it is seen only while
    the function is captured: the compiled code has no Python to run."""

    def __init__(self, name: str, args: Optional[str] = None):
        if not isinstance(name, str):
            raise TypeError(f"record_function: name must be a str, got {type(name).__name__}")
        self.name = name if args is None else f"{name}({args})"
        self._handles = []

    def __enter__(self):
        self._handles.append(_C._profiler_open_range(self.name))
        return self

    def __exit__(self, *exc):
        if self._handles:
            _C._profiler_close_range(self._handles.pop())
        return False


class profile:
    """Records what the program runs between start() and stop() (or inside
    `with`), as torch.profiler.profile does. With `schedule`, only the steps
    it marks are recorded, `step()` advances it, and `on_trace_ready(prof)`
    runs after each recorded cycle; without one, everything is recorded and
    on_trace_ready runs at stop().

    record_shapes keeps each call's input sizes and dtypes; profile_memory
    each range's change in live host memory. with_stack, with_flops and
    with_modules are accepted and record nothing more."""

    def __init__(self, *, activities: Optional[Iterable[ProfilerActivity]] = None,
                 schedule: Optional[Callable[[int], ProfilerAction]] = None,
                 on_trace_ready: Optional[Callable[["profile"], None]] = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config=None, execution_trace_observer=None,
                 acc_events: bool = False, use_cuda: Optional[bool] = None):
        acts = set(activities) if activities is not None else supported_activities()
        for a in acts:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"profile: activities must be ProfilerActivity members, got {a!r}")
        if use_cuda:
            acts.add(ProfilerActivity.CUDA)
        if ProfilerActivity.CUDA in acts and ProfilerActivity.CUDA not in supported_activities():
            raise ValueError("profile: ProfilerActivity.CUDA needs a CUDA device, and none is available")
        if schedule is not None and not callable(schedule):
            raise TypeError("profile: schedule must be callable (tp.profiler.schedule(...))")
        self.activities = acts
        self.schedule = schedule or _always_record
        self._has_schedule = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack, self.with_flops, self.with_modules = with_stack, with_flops, with_modules
        self.acc_events = acc_events
        self.step_num = 0
        self._action = ProfilerAction.NONE
        self._recording = False
        self._step_range = 0
        self._events: Optional[EventList] = None
        self._accumulated = []
        self._started = False

    # -- recorder control ---------------------------------------------------
    def _begin(self):
        _C._profiler_start(self.record_shapes, self.profile_memory)
        self._recording = True
        self._open_step_range()

    def _end(self, save: bool):
        self._close_step_range()
        raw = _C._profiler_stop()
        self._recording = False
        if not save:
            return
        events = build_events(raw, self.profile_memory, self.record_shapes)
        if self.acc_events:
            self._accumulated.extend(events)
            events = EventList(self._accumulated, self.profile_memory, self.record_shapes)
        self._events = events
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _open_step_range(self):
        # Each step of a scheduled profile is a range of its own, as in PyTorch.
        if self._has_schedule and self._recording:
            self._step_range = _C._profiler_open_range(f"ProfilerStep#{self.step_num}")

    def _close_step_range(self):
        if self._step_range:
            _C._profiler_close_range(self._step_range)
            self._step_range = 0

    def _enter_action(self, new: ProfilerAction):
        recording_new = new in (ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        old = self._action
        if old == ProfilerAction.RECORD_AND_SAVE:
            self._end(save=True)
        elif old == ProfilerAction.WARMUP and new != ProfilerAction.WARMUP:
            self._end(save=False)  # warm-up steps are thrown away
        elif old == ProfilerAction.RECORD and new == ProfilerAction.NONE:
            self._end(save=True)
        self._action = new
        if recording_new and not self._recording:
            self._begin()
        elif self._recording:
            self._open_step_range()

    # -- public API -----------------------------------------------------------
    def start(self):
        if self._started:
            raise RuntimeError("profile.start: this profiler is already started")
        self._started = True
        self._action = ProfilerAction.NONE
        self._enter_action(self.schedule(self.step_num))

    def stop(self):
        if not self._started:
            return
        self._started = False
        if self._recording:
            self._end(save=self._action != ProfilerAction.WARMUP)
        self._action = ProfilerAction.NONE

    def step(self):
        """Marks the end of a training step: advances the schedule."""
        if not self._started:
            raise RuntimeError("profile.step: the profiler is not running (use it in `with` or call start())")
        self._close_step_range()
        self.step_num += 1
        self._enter_action(self.schedule(self.step_num))

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def events(self) -> EventList:
        """Every range of the last saved trace, in start order."""
        if self._events is None:
            raise RuntimeError("profile.events: no trace was saved yet (the profile is running, or its schedule "
                               "has not reached a recorded step)")
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        """The events added up per name (and per input shapes with
        group_by_input_shape, which needs record_shapes=True)."""
        if group_by_input_shape and not self.record_shapes:
            raise ValueError("key_averages(group_by_input_shape=True) needs profile(record_shapes=True)")
        return self.events().key_averages(group_by_input_shape)

    def export_chrome_trace(self, path: str) -> None:
        self.events().export_chrome_trace(path)

    def table(self, *args, **kwargs) -> str:
        return self.key_averages().table(*args, **kwargs)

