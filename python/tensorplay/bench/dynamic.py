"""Dynamic shapes (Section 10): how many versions a function builds when the
batch size changes, what the symbolic path costs per call, and the cold compile
of a symbolic capture against a static one.

* compilations: Example 1.1 (f(x, w) = ((x + w).relu() * 2).sum(-1)) called
  with 64 different batch sizes under dynamic=True, and with 8 under the default
  (automatic dynamic: the first call is static, a dim that changes is recompiled
  as symbolic);
* per-call overhead: g(x) = x * 2 + 1 on 8 elements, a new tensor object each
  call, through a static version (exact key) and a symbolic one (exact key miss,
  then the symbolic version's shape spec and guards); a new size each call
  through the symbolic version too. Both versions run the same backend, so the
  difference is the selection;
* cold compile: capture + passes + backend of Example 1.1, symbolic vs static,
  in a fresh compiled function each time.

The front-end figures use backend="aot_eager" (the interpreter), so that they
show the selection alone. The Stax figures, measured in the same run:

* kernel time: Example 1.1 at 8192x2048 and the five-op softmax at 16384x1000,
  compiled with dynamic=True (both dims size variables) against dynamic=False,
  rotated readings and the paired ratio (target <= 1.05x);
* cold compile with real code generation: a new process with an empty
  TP_CACHE_DIR, first call of the symbolic vs the static version (target <= 1.2x);
* a transformer block called with 16 sequence lengths: versions, first pass and
  time per call for dynamic=None / True / False, eager, and torch.compile(dynamic=True)
  when torch is importable (its compile time reported apart from the per-call time)."""

from __future__ import annotations

import time

import tensorplay as tp

from .cases import OVERHEAD_SIZE, OVERHEAD_SOURCE
from .report import Report, verdict
from .stats import ratio_interval, rotate

EXAMPLE_1_1_SOURCE = "f = lambda x, w: ((x + w).relu() * 2).sum(-1)"
OVERHEAD_TARGET_US = 1.0
COLD_RATIO_TARGET = 1.2


def _example():
    ns: dict = {"tp": tp}
    exec(EXAMPLE_1_1_SOURCE, ns)
    return ns["f"]


def compilations(report: Report, quick: bool) -> dict:
    report.section("Dynamic shapes: versions built when the batch size changes")
    f = _example()
    cols = 256
    w = tp.randn(cols)
    out: dict = {}
    for backend in ("aot_eager", "stax"):
        cf = tp.compile(f, backend=backend, dynamic=True, options={"warn_fallback": False})
        sizes = list(range(2, 2 + 64))
        for n in sizes:
            cf(tp.randn(n, cols), w)
        n_true = cf.num_specializations
        cd = tp.compile(f, backend=backend, options={"warn_fallback": False})
        for n in [8, 16, 3, 5, 64, 11, 12, 100]:
            cd(tp.randn(n, cols), w)
        n_default = cd.num_specializations
        report.figure(f"{backend}: 64 batch sizes, dynamic=True", f"{n_true} version(s)",
                      "target <= 2: " + verdict(n_true <= 2))
        report.figure(f"{backend}: 8 batch sizes, default (automatic)", f"{n_default} version(s)",
                      "target <= 3: " + verdict(n_default <= 3))
        out[backend] = {"dynamic_true_64_sizes": n_true, "default_8_sizes": n_default}
    return out


def overhead(report: Report, quick: bool) -> dict:
    calls = 1000 if quick else 10000
    runs, warmup = (7, 1) if quick else (15, 3)
    report.section("Dynamic shapes: per-call overhead of the symbolic path (8 elements, aot_eager)")
    ns: dict = {"tp": tp}
    exec(OVERHEAD_SOURCE, ns)
    g = ns["g"]
    xs = [tp.randn(OVERHEAD_SIZE) for _ in range(calls)]
    sizes = [OVERHEAD_SIZE + (i % 5) for i in range(calls)]
    ys = [tp.randn(n) for n in sizes]
    static = tp.compile(g, backend="aot_eager", dynamic=False)
    symbolic = tp.compile(g, backend="aot_eager", dynamic=True)
    static(xs[0])
    symbolic(xs[0])
    symbolic(ys[1])
    assert symbolic.num_specializations == 1

    def static_loop():
        for t in xs:
            static(t)

    def symbolic_loop():
        for t in xs:
            symbolic(t)

    def symbolic_sizes_loop():
        for t in ys:
            symbolic(t)

    ts, tsym, tsz = rotate([static_loop, symbolic_loop, symbolic_sizes_loop], runs=runs, warmup=warmup,
                           labels=["static", "symbolic", "symbolic, new size"])
    for t in (ts, tsym, tsz):
        t.readings_s = [r / calls for r in t.readings_s]
        t.calls_per_reading = calls
    extra = tsym.in_unit("median", "us") - ts.in_unit("median", "us")
    report.figure("static version, new tensor each call", ts.fmt("us"))
    report.figure("symbolic version, new tensor each call", tsym.fmt("us"),
                  f"{extra:+.2f} us vs static; target <= +{OVERHEAD_TARGET_US:.0f} us: "
                  + verdict(extra <= OVERHEAD_TARGET_US))
    report.figure("symbolic version, a new size each call", tsz.fmt("us"))
    return {"static_us": ts.to_dict("us"), "symbolic_us": tsym.to_dict("us"),
            "symbolic_new_size_us": tsz.to_dict("us"), "extra_us": extra,
            "within_target": extra <= OVERHEAD_TARGET_US}


def cold_compile(report: Report, quick: bool) -> dict:
    report.section("Dynamic shapes: cold compile of Example 1.1, symbolic vs static (aot_eager)")
    f = _example()
    x, w = tp.randn(64, 256), tp.randn(256)
    reps = 5 if quick else 20

    def one(dynamic):
        cf = tp.compile(f, backend="aot_eager", dynamic=dynamic)
        t0 = time.perf_counter()
        cf(x, w)
        return time.perf_counter() - t0

    s, d = [], []
    for _ in range(reps):  # alternated so both see the same machine periods
        s.append(one(False))
        d.append(one(True))
    s.sort()
    d.sort()
    ms, md = s[len(s) // 2] * 1e3, d[len(d) // 2] * 1e3
    ratio = md / ms
    report.figure("static capture + compile", f"{ms:.3f} ms (median of {reps})")
    report.figure("symbolic capture + compile", f"{md:.3f} ms",
                  f"{ratio:.2f}x static; target <= {COLD_RATIO_TARGET}x: " + verdict(ratio <= COLD_RATIO_TARGET))
    return {"static_ms": ms, "symbolic_ms": md, "ratio": ratio, "within_target": ratio <= COLD_RATIO_TARGET}


# --- Stax figures: kernel time, cold compile, a transformer block -----------------

KERNEL_RATIO_TARGET = 1.05


def kernel_time(report: Report, quick: bool) -> dict:
    """Symbolic (dynamic=True: both dims size variables) vs static kernels of the
    same function at the same size, rotated readings, paired ratio."""
    from .cases import EXAMPLE_1_1, SOFTMAX

    report.section("Dynamic shapes: symbolic vs static generated kernels (Stax, strict_native)")
    report.code("cs = tp.compile(f, dynamic=False, strict_native=True)\n"
                "cd = tp.compile(f, dynamic=True, strict_native=True)   # every dim a size variable\n"
                "# rotated readings of cs(*args) and cd(*args); ratio = paired median symbolic/static")
    runs, warmup = (7, 1) if quick else (15, 3)
    out: dict = {}
    for case in (EXAMPLE_1_1, SOFTMAX):
        shape = case.quick_shape if quick else case.shape
        f = case.make_fn()
        args = case.make_inputs(shape)
        cs = tp.compile(f, dynamic=False, strict_native=True)
        cd = tp.compile(f, dynamic=True, strict_native=True)
        ys, yd = cs(*args), cd(*args)
        diff = float((ys - yd).abs().max())
        small = case.make_inputs((37, 53))  # the symbolic version serves other sizes too
        cd(*small)
        assert cd.num_specializations == 1, "the symbolic version did not serve another size"
        ts, td = rotate([lambda: cs(*args), lambda: cd(*args)], runs=runs, warmup=warmup,
                        labels=["static", "symbolic"])
        r, lo, hi = ratio_interval(td, ts)
        label = f"{case.key} {shape[0]}x{shape[1]}"
        report.figure(label + " static", ts.fmt())
        report.figure(label + " symbolic", td.fmt(),
                      f"symbolic/static {r:.3f} [{lo:.3f}, {hi:.3f}]; target <= {KERNEL_RATIO_TARGET}: "
                      + verdict(r <= KERNEL_RATIO_TARGET) + f"; max |diff| {diff:.2g}")
        out[case.key] = {"shape": list(shape), "static": ts.to_dict(), "symbolic": td.to_dict(), "ratio": r,
                         "ratio_interval": [lo, hi], "max_abs_diff": diff,
                         "within_target": r <= KERNEL_RATIO_TARGET}
    return out


_COLD_CHILD = """\
import json, resource, time
import tensorplay as tp
{fn_source}
{inputs_source}
def _cpu():  # this process and the compiler processes it waited for
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
_c0 = _cpu()
_t0 = time.perf_counter()
cf = tp.compile(f, strict_native=True, dynamic={dynamic})
out = cf(*args)
_t1 = time.perf_counter()
_c1 = _cpu()
print({marker!r} + json.dumps({{"s": _t1 - _t0, "cpu_s": _c1 - _c0, "versions": cf.num_specializations}}), flush=True)
"""


def cold_compile_stax(report: Report, quick: bool) -> dict:
    """First call in a new process with an empty TP_CACHE_DIR (the C++ compiler
    runs), dynamic=True vs dynamic=False, alternated. Each case at the size its
    kernel-time figure uses and at a toy size: at 64x128 the static kernel's
    loops fold away entirely (known trip counts), so that row shows the most the
    general-size loops can cost."""
    from .cases import EXAMPLE_1_1, SOFTMAX
    from .coldstart import MARKER, CacheDirs, run_child

    report.section("Dynamic shapes: cold compile with Stax codegen, symbolic vs static (new process, empty cache)")
    report.code("cf = tp.compile(f, strict_native=True, dynamic=D)   # D = False / True\n"
                "t = time of tp.compile + first call cf(*args), fresh TP_CACHE_DIR per process")
    reps = 2 if quick else 5
    dirs = CacheDirs()
    out: dict = {}
    full = {EXAMPLE_1_1.key: (8192, 2048), SOFTMAX.key: (16384, 1000)}
    try:
        for case in (EXAMPLE_1_1, SOFTMAX):
            for shape in ((64, 128),) if quick else (full[case.key], (64, 128)):
                times = {False: [], True: []}
                cpu = {False: [], True: []}
                for _ in range(reps):
                    for dyn in (False, True):
                        script = _COLD_CHILD.format(fn_source=case.fn_source.rstrip("\n"),
                                                    inputs_source=case.inputs_source(shape), dynamic=dyn,
                                                    marker=MARKER)
                        child = run_child(script, dirs.fresh())
                        times[dyn].append(child["s"])
                        cpu[dyn].append(child["cpu_s"])
                med = lambda xs: sorted(xs)[len(xs) // 2] * 1e3
                ms, md = med(times[False]), med(times[True])
                cs, cd = med(cpu[False]), med(cpu[True])
                ratio = md / ms
                label = f"{case.key} {shape[0]}x{shape[1]}"
                # The verdict is on wall time; CPU time (the process and its
                # compiler runs, OpenMP threads included) is shown beside it
                # because it hardly moves when other work shares the cores.
                report.figure(f"{label} static", f"{ms:.0f} ms (median of {reps}); CPU {cs:.0f} ms")
                report.figure(f"{label} symbolic", f"{md:.0f} ms; CPU {cd:.0f} ms",
                              f"{ratio:.2f}x static (CPU {cd / cs:.2f}x); target <= {COLD_RATIO_TARGET}x: " +
                              verdict(ratio <= COLD_RATIO_TARGET))
                out[f"{case.key}_{shape[0]}x{shape[1]}"] = {
                    "static_ms": ms, "symbolic_ms": md, "ratio": ratio,
                    "static_cpu_ms": cs, "symbolic_cpu_ms": cd, "cpu_ratio": cd / cs,
                    "readings_s": {"static": times[False], "symbolic": times[True]},
                    "cpu_readings_s": {"static": cpu[False], "symbolic": cpu[True]},
                    "within_target": ratio <= COLD_RATIO_TARGET}
    finally:
        dirs.cleanup(report)
    return out


SEQ_LENGTHS = [17, 23, 31, 32, 41, 48, 57, 64, 73, 80, 96, 101, 111, 127, 128, 150]


def _block(nn, F, d: int, heads: int):
    """The pre-LN transformer block, in TensorPlay (tensorplay.nn) or PyTorch (torch.nn)."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4).unbind(0)
            a = F.softmax((q @ k.transpose(-2, -1)) * (1.0 / (d // heads) ** 0.5), -1) @ v
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    return Block()


def _tp_block(d: int, heads: int):
    import tensorplay.nn as nn
    import tensorplay.nn.functional as F
    return _block(nn, F, d, heads)


def _torch_block(torch, d: int, heads: int):
    return _block(torch.nn, torch.nn.functional, d, heads)


def transformer_block(report: Report, quick: bool) -> dict:
    """A pre-LN transformer block (attention + LayerNorm + GELU MLP) called with 16
    sequence lengths: versions built, the first pass over the lengths (captures and
    compiles included; the C++ compiler's output may come from TP_CACHE_DIR), then
    the time per call once every length has a version."""
    d, heads, batch = 64, 4, 4
    report.section(f"Dynamic shapes: transformer block (d={d}, {heads} heads, batch {batch}), 16 sequence lengths")
    report.code("cf = tp.compile(block, dynamic=D, strict_native=True)   # D = None / True / False\n"
                "for t in lengths: cf(x[t])     # first pass: versions + time incl. compiles\n"
                "per call: rotated readings of a pass over the 16 lengths / 16 (no_grad)")
    runs, warmup = (5, 1) if quick else (11, 2)
    # One thread on both sides: on this shared machine a 2-thread OpenBLAS GEMM of
    # these sizes waits milliseconds for its second thread (scheduler slices), which
    # would swamp every other figure here.
    report.note("one thread (tp.set_num_threads(1), torch.set_num_threads(1)): with two, a small "
                "OpenBLAS GEMM on this loaded machine takes 8-24 ms instead of ~50 us.")
    prev = tp.get_num_threads()
    tp.set_num_threads(1)
    try:
        return _transformer_block(report, d, heads, batch, runs, warmup)
    finally:
        tp.set_num_threads(prev)


def _transformer_block(report: Report, d: int, heads: int, batch: int, runs: int, warmup: int) -> dict:
    tp.manual_seed(0)
    block = _tp_block(d, heads)
    xs = [tp.randn(batch, t, d) for t in SEQ_LENGTHS]
    loops, out = [], {}
    labels = []
    with tp.no_grad():
        ref = [block(x) for x in xs]
        for name, dyn in (("tp dynamic=None", None), ("tp dynamic=True", True), ("tp static (False)", False)):
            cf = tp.compile(block, dynamic=dyn, strict_native=True)
            t0 = time.perf_counter()
            got = [cf(x) for x in xs]
            first = time.perf_counter() - t0
            err = max(float((g - r).abs().max()) for g, r in zip(got, ref))
            out[name] = {"versions": cf.num_specializations, "first_pass_s": first, "max_abs_diff_vs_eager": err}
            loops.append(lambda cf=cf: [cf(x) for x in xs])
            labels.append(name)
        loops.append(lambda: [block(x) for x in xs])
        labels.append("tp eager")
        torch = None
        try:
            import torch
        except ImportError:
            pass
        tnames = []
        torch_threads = torch.get_num_threads() if torch is not None else None
        if torch is not None:
            torch.set_num_threads(1)
            torch.manual_seed(0)
            tb = _torch_block(torch, d, heads).eval()
            txs = [torch.randn(batch, t, d) for t in SEQ_LENGTHS]
            with torch.no_grad():
                tc = torch.compile(tb, dynamic=True)
                t0 = time.perf_counter()
                for x in txs:
                    tc(x)
                first = time.perf_counter() - t0
            try:
                frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
            except Exception:
                frames = None
            out["torch.compile(dynamic=True)"] = {"graphs": frames, "first_pass_s": first}

            def tloop(fn):
                def run():
                    with torch.no_grad():
                        for x in txs:
                            fn(x)
                return run

            loops += [tloop(tc), tloop(tb)]
            labels += ["torch.compile(dynamic=True)", "torch eager"]
            tnames = labels[-2:]
        try:
            timings = rotate(loops, runs=runs, warmup=warmup, labels=labels)
        finally:
            if torch_threads is not None:
                torch.set_num_threads(torch_threads)
    n = len(SEQ_LENGTHS)
    for t in timings:
        t.readings_s = [r / n for r in t.readings_s]
    for name, t in zip(labels, timings):
        info = out.setdefault(name, {})
        info["per_call_us"] = t.to_dict("us")
        extra = ""
        if "versions" in info:
            extra = (f"{info['versions']} version(s), first pass {info['first_pass_s']:.2f} s, "
                     f"max |diff| vs eager {info['max_abs_diff_vs_eager']:.1g}")
        elif name == "torch.compile(dynamic=True)":
            extra = f"{info['graphs']} graph(s), compile + first pass {info['first_pass_s']:.2f} s (not in per call)"
        report.figure(name, t.fmt("us", 1), extra)
    if tnames:
        out["torch_version"] = torch.__version__
    v_none, v_true = out["tp dynamic=None"]["versions"], out["tp dynamic=True"]["versions"]
    report.figure("versions: dynamic=True / None", f"{v_true} / {v_none}",
                  "targets <= 2 / <= 3: " + verdict(v_true <= 2 and v_none <= 3))
    return out


TRAIN_BATCHES = [32, 48, 17, 64, 5, 23, 40, 11, 57, 29, 8, 61, 36, 13, 50, 3]


def training_step(report: Report, quick: bool) -> dict:
    """An MLP training step (Linear/ReLU/Linear, cross_entropy, forward + backward)
    over 16 batch sizes: versions built and AOT partitions computed, the first pass
    (captures, joint traces, compiles), then the time per step once every size has a
    version, for dynamic=None / True against static (dynamic=False) and eager. The
    configurations run in this order in one process: a later one's first pass may
    find an earlier one's generated code in the kernel cache (dynamic=True reuses
    the symbolic version dynamic=None built)."""
    import tensorplay.nn as nn
    import tensorplay.nn.functional as F

    d_in, hidden, classes = 128, 256, 10
    report.section(f"Dynamic shapes: MLP training step ({d_in}-{hidden}-{classes}), 16 batch sizes")
    report.code("loss = F.cross_entropy(model(x), y); loss.backward()   # compiled: tp.compile(step, dynamic=D)\n"
                "for n in batches: step(x[n], y[n])   # first pass: versions + time incl. compiles\n"
                "per step: rotated readings of a pass over the 16 sizes / 16")
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def step(x, y):
        return F.cross_entropy(model(x), y)

    data = [(tp.randn(n, d_in), tp.randint(0, classes, (n,))) for n in TRAIN_BATCHES]
    return _train_over_sizes(report, quick, model, step, data)


def _train_over_sizes(report: Report, quick: bool, model, step, data) -> dict:
    """Versions, AOT partitions, compilations and the first pass of `step` over
    the batches for dynamic=None / True / False, then the time per step (rotated
    readings of a pass over the batches / their number) against eager."""
    params = list(model.parameters())

    def loop(fn):
        def run():
            for x, y in data:
                for p in params:
                    p.grad = None
                fn(x, y).backward()
        return run

    out: dict = {}
    loops, labels = [], []
    for name, dyn in (("dynamic=None", None), ("dynamic=True", True), ("static (False)", False)):
        tp.compiler.reset()
        cf = tp.compile(step, dynamic=dyn, options={"warn_fallback": False})
        t0 = time.perf_counter()
        loop(cf)()
        first = time.perf_counter() - t0
        out[name] = {"versions": cf.num_specializations, "aot_partitions": tp.compiler.metrics.aot_regions,
                     "compilations": tp.compiler.metrics.compile_count,
                     "fallbacks": tp.compiler.metrics.fallback_count, "first_pass_s": first}
        loops.append(loop(cf))
        labels.append(name)
    loops.append(loop(step))
    labels.append("eager")
    runs, warmup = (5, 1) if quick else (11, 2)
    timings = rotate(loops, runs=runs, warmup=warmup, labels=labels)
    n = len(data)
    for name, t in zip(labels, timings):
        t.readings_s = [r / n for r in t.readings_s]
        info = out.setdefault(name, {})
        info["per_step_us"] = t.to_dict("us")
        extra = ""
        if "versions" in info:
            extra = (f"{info['versions']} version(s), {info['aot_partitions']} partition(s), "
                     f"{info['compilations']} compilation(s), first pass {info['first_pass_s']:.2f} s")
        report.figure(name, t.fmt("us", 1), extra)
    v_none, v_true = out["dynamic=None"]["versions"], out["dynamic=True"]["versions"]
    report.figure("versions: dynamic=True / None", f"{v_true} / {v_none}",
                  "targets 1 / <= 2: " + verdict(v_true <= 1 and v_none <= 2))
    return out


CNN_BATCHES = [32, 48, 17, 64, 5, 23, 40, 11, 57, 29, 8, 61, 36, 13, 50, 3]


def cnn_training_step(report: Report, quick: bool) -> dict:
    """A small CNN training step (conv2d, batch_norm, relu, max_pool2d, conv2d,
    avg_pool2d, linear, cross_entropy; forward + backward, batch norm in training
    mode) over 16 batch sizes, as the MLP case: the gradient operators of conv2d
    and pooling run as extern calls whose `size` attribute is evaluated per call,
    so one symbolic version serves every size."""
    import tensorplay.nn as nn
    import tensorplay.nn.functional as F

    report.section("Dynamic shapes: CNN training step (2x16x16 input, conv-bn-relu-maxpool, conv-avgpool, "
                   "linear), 16 batch sizes")
    report.code("loss = F.cross_entropy(net(x), y); loss.backward()   # compiled: tp.compile(step, dynamic=D)\n"
                "for n in batches: step(x[n], y[n])   # first pass: versions + time incl. compiles\n"
                "per step: rotated readings of a pass over the 16 sizes / 16")

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.bn = nn.Conv2d(2, 8, 3, padding=1), nn.BatchNorm2d(8)
            self.c2, self.fc = nn.Conv2d(8, 16, 3), nn.Linear(16 * 3 * 3, 10)

        def forward(self, x):
            h = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
            return self.fc(F.avg_pool2d(self.c2(h), 2).flatten(1))

    tp.manual_seed(0)
    model = Net()

    def step(x, y):
        return F.cross_entropy(model(x), y)

    batches = CNN_BATCHES[:8] if quick else CNN_BATCHES
    data = [(tp.randn(n, 2, 16, 16), tp.randint(0, 10, (n,))) for n in batches]
    # One thread, as for the transformer block: a 2-thread OpenBLAS GEMM of these
    # sizes on this shared machine waits milliseconds for its second thread.
    report.note("one thread (tp.set_num_threads(1))")
    prev = tp.get_num_threads()
    tp.set_num_threads(1)
    try:
        return _train_over_sizes(report, quick, model, step, data)
    finally:
        tp.set_num_threads(prev)


# ---------------------------------------------------------------- int arguments


def _decode_step(q, k, v, kc, vc, pos):
    kc[:, pos] = k
    vc[:, pos] = v
    keys = kc[:, :pos + 1]
    vals = vc[:, :pos + 1]
    scores = (q.unsqueeze(1) * keys).sum(-1) * (q.shape[-1] ** -0.5)
    return (scores.softmax(-1).unsqueeze(-1) * vals).sum(1)


def decode_step(report: Report, quick: bool) -> dict:
    """A KV-cache attention decode step f(q, k, v, kc, vc, pos) over every position
    pos = 0..steps-1 (automatic dynamic ints: pos symbolic after it changed), per
    call, against eager and dynamic=False (a version per position until
    max_versions, then eager)."""
    import warnings

    b, d, steps = 4, 64, (64 if quick else 256)
    runs, warmup = (3, 1) if quick else (7, 1)
    report.section(f"Dynamic int arguments: KV-cache decode step (b={b}, d={d}, {steps} positions, per call)")
    auto = tp.compile(_decode_step, options={"warn_fallback": False})
    static = tp.compile(_decode_step, dynamic=False, options={"warn_fallback": False})
    qs = [(tp.randn(b, d), tp.randn(b, d), tp.randn(b, d)) for _ in range(steps)]

    def loop(fn):
        def run():
            kc, vc = tp.zeros(b, steps, d), tp.zeros(b, steps, d)
            for pos in range(steps):
                q, k, v = qs[pos]
                fn(q, k, v, kc, vc, pos)
        return run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        loop(auto)()
        first = time.perf_counter() - t0
        te, ta, ts = rotate([loop(_decode_step), loop(auto), loop(static)], runs=runs, warmup=warmup,
                            labels=["eager", "automatic dynamic int", "dynamic=False"])
    for t in (te, ta, ts):
        t.readings_s = [r / steps for r in t.readings_s]
        t.calls_per_reading = steps
    report.figure("eager", te.fmt("us"))
    report.figure("compiled, automatic dynamic int", ta.fmt("us"),
                  f"{auto.num_specializations} version(s); first pass {first:.2f} s; target <= 2 versions: "
                  + verdict(auto.num_specializations <= 2))
    report.figure("compiled, dynamic=False", ts.fmt("us"), f"{static.num_specializations} version(s), then eager")
    return {"eager_us": te.to_dict("us"), "auto_us": ta.to_dict("us"), "static_us": ts.to_dict("us"),
            "versions_auto": auto.num_specializations, "versions_static": static.num_specializations,
            "first_pass_s": first}
