"""tp.profiler: where a program's time goes, per operator, backward node,
compiled call (with its Stax regions and extern GEMMs) and user range
(torch.profiler's API: profile, record_function, schedule,
tensorboard_trace_handler, key_averages().table(), export_chrome_trace).

    with tp.profiler.profile(record_shapes=True) as prof:
        loss = model(x).sum(); loss.backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
"""
from ._events import EventList, FunctionEvent, FunctionEventAvg  # noqa: F401
from ._profile import (  # noqa: F401
    ProfilerAction, ProfilerActivity, profile, record_function, schedule, supported_activities,
    tensorboard_trace_handler,
)

__all__ = ["profile", "record_function", "schedule", "ProfilerAction", "ProfilerActivity", "supported_activities",
           "tensorboard_trace_handler", "EventList", "FunctionEvent", "FunctionEventAvg"]
