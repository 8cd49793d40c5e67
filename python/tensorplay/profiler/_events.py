"""The profiler's results: one FunctionEvent per recorded range, EventList to
group and print them (PyTorch's names and columns, so code and habits carry
over).

Times are microseconds (floats), as in PyTorch's profiler. A range's total
time is its duration; its self time is that minus its children's durations
(the ranges that began inside it on the same thread)."""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Dict, Iterable, List, Optional

class FunctionEvent:
    """One recorded range: an operator call, a backward node, a compiled call
    (and its regions and extern steps), or a record_function block."""

    __slots__ = ("id", "name", "kind", "thread", "start_us", "end_us", "input_shapes", "input_dtypes",
                 "cpu_memory_usage", "cpu_parent", "cpu_children", "device_type")

    def __init__(self, id, name, kind, thread, start_us, end_us, input_shapes=(), input_dtypes=(),
                 cpu_memory_usage=0):
        self.id = id
        self.name = name
        self.kind = kind
        self.thread = thread
        self.start_us = start_us
        self.end_us = end_us
        self.input_shapes = [list(s) for s in input_shapes]
        self.input_dtypes = list(input_dtypes)
        self.cpu_memory_usage = cpu_memory_usage
        self.cpu_parent: Optional[FunctionEvent] = None
        self.cpu_children: List[FunctionEvent] = []
        self.device_type = "CPU"

    key = property(lambda self: self.name)
    count = property(lambda self: 1)

    @property
    def time_range(self):
        return (self.start_us, self.end_us)

    @property
    def cpu_time_total(self) -> float:
        return self.end_us - self.start_us

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def self_cpu_memory_usage(self) -> int:
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name!r} kind={self.kind} thread={self.thread} "
                f"cpu_time_total={self.cpu_time_total:.3f}us self_cpu_time_total={self.self_cpu_time_total:.3f}us "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The events of one key (a name, or a name and input shapes) added up."""

    def __init__(self, key: str, input_shapes=None):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.kind = None
        self.device_type = "CPU"

    def add(self, e) -> "FunctionEventAvg":
        self.count += e.count
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        self.cpu_memory_usage += e.cpu_memory_usage
        self.self_cpu_memory_usage += e.self_cpu_memory_usage
        self.kind = self.kind or e.kind
        return self

    def __iadd__(self, e):
        return self.add(e)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key!r} count={self.count} cpu_time_total={self.cpu_time_total:.3f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us input_shapes={self.input_shapes}>")


# sort_by keys PyTorch's table accepts that mean something on the host, and the attribute each reads.
_SORT_KEYS = {
    "cpu_time": "cpu_time", "cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
    "cpu_memory_usage": "cpu_memory_usage", "self_cpu_memory_usage": "self_cpu_memory_usage", "count": "count",
}


def _fmt_time(us: float) -> str:
    if abs(us) >= 1e6:
        return f"{us / 1e6:.3f}s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _fmt_bytes(b: int) -> str:
    for unit, scale in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(b) >= scale:
            return f"{b / scale:.2f} {unit}"
    return f"{b} b"


def _fmt_pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole > 0 else "0.00%"


class EventList(list):
    """A list of FunctionEvent (or, from key_averages, FunctionEventAvg)."""

    def __init__(self, events: Iterable = (), profile_memory: bool = False, with_shapes: bool = False):
        super().__init__(events)
        self._profile_memory = profile_memory
        self._with_shapes = with_shapes

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes: bool = False) -> "EventList":
        groups: Dict[object, FunctionEventAvg] = OrderedDict()
        for e in self:
            shapes = str(e.input_shapes) if group_by_input_shapes else None
            key = (e.key, shapes)
            if key not in groups:
                groups[key] = FunctionEventAvg(e.key, shapes)
            groups[key].add(e)
        return EventList(groups.values(), self._profile_memory, group_by_input_shapes)

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg("Total")
        for e in self:
            total.add(e)
        return total

    def table(self, sort_by: Optional[str] = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: Optional[str] = None,
              top_level_events_only: bool = False) -> str:
        """The events as a text table, PyTorch's columns: self and total host
        time with their shares of the whole, mean time per call, memory (with
        profile_memory), calls, input shapes (grouped by shape)."""
        rows = list(self)
        if top_level_events_only:
            rows = [e for e in rows if getattr(e, "cpu_parent", None) is None]
        if sort_by is not None:
            if sort_by.startswith(("cuda", "device", "self_cuda", "self_device")):
                raise ValueError(f"table: sort_by={sort_by!r}: this profile records host (CPU) time only; "
                                 f"sort by one of {sorted(_SORT_KEYS)}")
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"table: unknown sort_by {sort_by!r}; expected one of {sorted(_SORT_KEYS)}")
            attr = _SORT_KEYS[sort_by]
            rows.sort(key=lambda e: getattr(e, attr), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        self_total = sum(e.self_cpu_time_total for e in self)
        name_w = max([len("Name")] + [min(len(e.key), max_name_column_width) for e in rows]) + 2
        cols = [("Self CPU %", 12), ("Self CPU", 12), ("CPU total %", 12), ("CPU total", 12),
                ("CPU time avg", 13)]
        if self._profile_memory:
            cols += [("CPU Mem", 12), ("Self CPU Mem", 13)]
        cols += [("# of Calls", 11)]
        shapes_w = 0
        if self._with_shapes:
            shapes_w = max([len("Input Shapes")] + [min(len(str(e.input_shapes)), max_shapes_column_width)
                                                    for e in rows]) + 2
        width = name_w + sum(w + 2 for _, w in cols) + (shapes_w + 2 if shapes_w else 0)
        line = "-" * width
        out = []
        if header:
            out += [line, header]
        head = "Name".ljust(name_w) + "".join("  " + c.rjust(w) for c, w in cols)
        if shapes_w:
            head += "  " + "Input Shapes".ljust(shapes_w)
        out += [line, head, line]
        for e in rows:
            name = e.key if len(e.key) <= max_name_column_width else e.key[:max_name_column_width - 3] + "..."
            vals = [_fmt_pct(e.self_cpu_time_total, self_total), _fmt_time(e.self_cpu_time_total),
                    _fmt_pct(e.cpu_time_total, self_total), _fmt_time(e.cpu_time_total),
                    _fmt_time(e.cpu_time_total / max(e.count, 1))]
            if self._profile_memory:
                vals += [_fmt_bytes(e.cpu_memory_usage), _fmt_bytes(e.self_cpu_memory_usage)]
            vals += [str(e.count)]
            row = name.ljust(name_w) + "".join("  " + v.rjust(w) for v, (_, w) in zip(vals, cols))
            if shapes_w:
                s = str(e.input_shapes)
                row += "  " + (s if len(s) <= max_shapes_column_width else s[:max_shapes_column_width - 3] + "...")
            out.append(row)
        out += [line, f"Self CPU time total: {_fmt_time(self_total)}", ""]
        return "\n".join(out)

    def __str__(self):
        return self.table()

    def export_chrome_trace(self, path: str) -> None:
        """Writes the events as a Chrome trace (chrome://tracing, Perfetto):
        one complete event per range, its thread as tid."""
        import json
        pid = os.getpid()
        trace = []
        for e in self:
            if not isinstance(e, FunctionEvent):
                raise TypeError("export_chrome_trace: the list holds averages (key_averages); export the events")
            ev = {"name": e.name, "ph": "X", "cat": e.kind, "pid": pid, "tid": e.thread, "ts": e.start_us,
                  "dur": e.cpu_time_total, "args": {"id": e.id}}
            if e.input_shapes:
                ev["args"]["Input Dims"] = e.input_shapes
                ev["args"]["Input type"] = e.input_dtypes
            if e.cpu_memory_usage:
                ev["args"]["CPU Mem"] = e.cpu_memory_usage
            trace.append(ev)
        with open(path, "w") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)


def build_events(raw, profile_memory: bool, record_shapes: bool) -> EventList:
    """FunctionEvents from the recorder's tuples (python/src/profiler_bind.cpp),
    in start order, each linked to its parent and children."""
    events = []
    by_id = {}
    for name, kind, id_, parent, thread, start_ns, end_ns, shapes, dtypes, mem in raw:
        e = FunctionEvent(id_, name, kind, thread, start_ns / 1e3, end_ns / 1e3, shapes, dtypes, mem)
        by_id[id_] = (e, parent)
        events.append(e)
    for e, parent in by_id.values():
        p = by_id.get(parent)
        if p is not None:
            e.cpu_parent = p[0]
            p[0].cpu_children.append(e)
    events.sort(key=lambda e: (e.start_us, e.id))
    for e in events:
        e.cpu_children.sort(key=lambda c: (c.start_us, c.id))
    return EventList(events, profile_memory, record_shapes)
