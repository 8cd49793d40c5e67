"""tp.autograd.profiler: PyTorch's older profiler spelling over the same
recorder as tp.profiler (`with profile() as prof: ...; prof.table()`,
`prof.function_events`, record_function)."""
from ..profiler._events import EventList, FunctionEvent, FunctionEventAvg  # noqa: F401
from ..profiler._profile import ProfilerActivity, profile as _profile, record_function  # noqa: F401


class profile:
    """Records everything between enter and exit (enabled=False: nothing)."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device=None, record_shapes: bool = False,
                 with_flops: bool = False, profile_memory: bool = False, with_stack: bool = False,
                 with_modules: bool = False, use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config=None, acc_events: bool = False):
        self.enabled = enabled
        acts = {ProfilerActivity.CPU}
        if use_cuda or (use_device is not None and str(use_device).startswith("cuda")):
            acts.add(ProfilerActivity.CUDA)
        self._prof = _profile(activities=acts, record_shapes=record_shapes, profile_memory=profile_memory,
                              with_stack=with_stack, with_flops=with_flops, with_modules=with_modules)
        self.function_events = None

    def __enter__(self):
        if self.enabled:
            self._prof.start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self._prof.stop()
            self.function_events = self._prof.events()
        return False

    def _events(self) -> EventList:
        if self.function_events is None:
            raise RuntimeError("profiler: the results are available after the `with` block ends")
        return self.function_events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        return self._prof.key_averages(group_by_input_shape, group_by_stack_n)

    def table(self, *args, **kwargs) -> str:
        return self._events().table(*args, **kwargs)

    def total_average(self):
        return self._events().total_average()

    @property
    def self_cpu_time_total(self) -> float:
        return self._events().self_cpu_time_total

    def export_chrome_trace(self, path: str) -> None:
        self._events().export_chrome_trace(path)

    def __str__(self):
        return self.table() if self.function_events is not None else "<unfinished profile>"
