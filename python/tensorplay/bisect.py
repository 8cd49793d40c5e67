"""Which layer of tp.compile broke a function (Algorithm 11.1 of the seed, as a tool).

``tp.compiler.bisect(fn, *args, **kwargs)`` runs ``fn(*args, **kwargs)`` eagerly
(the reference), then through ``tp.compile`` with the backends of increasing depth

    eager      capture + graph passes, the graph interpreted operator by operator
    aot_eager  + the AOT layer (the same prefix as eager until that layer exists)
    stax       + decomposition, lowering, scheduling, generated C++ (strict_native:
               a region Stax refuses counts as a failure of this layer)

and compares every result (and every tensor argument, for in-place writes) with
the reference under ``tp.testing.assert_close`` (against a float64 re-run of
``fn`` where one is possible, so reductions get a tolerance that follows their
conditioning). The first layer that differs or raises is the culprit; inside it
the tool narrows further:

    pass     the graph pass whose removal (options={"disable_passes": [p]}) makes
             the layer agree again (tp.compiler.pass_names() lists them)
    fusion   (stax) whether options={"stax_fusion": False} makes it agree: then a
             fusion decision is at fault, and the fused kernels are named
    node     the first node of the captured graph whose value, computed by the
             graph up to it through that layer, differs from the interpreter's
    kernel   (stax) the generated kernels that compute that node's operator

and writes a minimal standalone reproducer: the graph up to that node as readable
code, its inputs (literal for small tensors, else saved with tp.save next to the
script), and the comparison that fails.

``python -m tensorplay.bisect script.py [--out DIR]``: the script defines a
module-level ``bisect_target()`` returning ``(fn, args)`` or ``(fn, args, kwargs)``
(the script runs with ``__name__ == "__tp_bisect__"``, so its ``__main__`` block
does not). Exit status 0 when every layer agrees, 1 when one does not.

Steps are announced on stderr (``[tp.bisect 1.2 s] ...``); each may compile.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import tensorplay as tp

LAYERS = ("eager", "aot_eager", "stax")
# Inputs with at most this many elements in all are written into the reproducer as literals.
LITERAL_LIMIT = 256


@dataclass
class BisectResult:
    """What bisect found. layer None: every layer agrees with eager."""

    layer: Optional[str] = None
    error: Optional[str] = None            # the mismatch or exception of that layer
    passing_layers: List[str] = field(default_factory=list)
    culprit_pass: Optional[str] = None     # disabling it makes the layer agree
    passes_tried: Dict[str, str] = field(default_factory=dict)  # pass -> "fixes" / "still fails" / "refused: ..."
    fusion: Optional[bool] = None          # stax: True when disabling fusion makes it agree
    fused_kernels: List[str] = field(default_factory=list)  # "kernel0: add, relu, mul, sum"
    node: Optional[str] = None             # first graph node whose compiled value differs
    node_code: Optional[str] = None        # that node's line of the captured graph
    node_error: Optional[str] = None
    kernels: List[str] = field(default_factory=list)  # stax: the generated kernels computing that node's operator
    graph_code: Optional[str] = None       # the captured graph
    reproducer: Optional[str] = None       # the reproducer script's text
    reproducer_path: Optional[str] = None
    reproducer_fails: Optional[bool] = None  # checked by running it: False = the graph alone does not fail
    steps: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.layer is None

    def summary(self) -> str:
        if self.layer is None:
            return "tp.compiler.bisect: every layer (" + ", ".join(self.passing_layers) + ") agrees with eager"
        lines = [f"tp.compiler.bisect: first failing layer: {self.layer}"
                 + (f" (passing: {', '.join(self.passing_layers)})" if self.passing_layers else "")]
        lines.append("  " + (self.error or "").replace("\n", "\n  "))
        if self.culprit_pass:
            lines.append(f"  pass: disabling '{self.culprit_pass}' makes {self.layer} agree with eager")
        elif self.passes_tried:
            lines.append("  pass: no single pass is the cause (" +
                         ", ".join(f"{p}: {r}" for p, r in self.passes_tried.items()) + ")")
        if self.fusion is True:
            lines.append("  fusion: with options={'stax_fusion': False} stax agrees; fused kernels: "
                         + "; ".join(self.fused_kernels))
        elif self.fusion is False:
            lines.append("  fusion: not the cause (still fails unfused)")
        if self.node:
            lines.append(f"  node: '{self.node}' is the first node whose {self.layer} value differs: "
                         f"{(self.node_code or '').strip()}")
            if self.kernels:
                lines.append("  kernel: " + "; ".join(self.kernels))
        elif self.layer is not None:
            lines.append("  node: no single node of the captured graph differs on its own")
        if self.reproducer_path:
            lines.append(f"  reproducer: {self.reproducer_path}  (python {self.reproducer_path})")
            if self.reproducer_fails is False:
                lines.append("  (the reproducer does not fail: the fault is outside the captured graph, e.g. in "
                             "capture or argument handling; report the function itself)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


class _Progress:
    def __init__(self, enabled: bool, steps: List[str]):
        self.enabled, self.steps, self.t0 = enabled, steps, time.perf_counter()

    def __call__(self, msg: str) -> None:
        self.steps.append(msg)
        if self.enabled:
            sys.stderr.write(f"[tp.bisect {time.perf_counter() - self.t0:5.1f} s] {msg}\n")
            sys.stderr.flush()


# ------------------------------------------------------------------ comparing


def _leaves(obj) -> List[Any]:
    """Tensors and numbers of a (nested) result, in order."""
    if isinstance(obj, tp.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [x for k in obj for x in _leaves(obj[k])]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in _leaves(v)]
    if isinstance(obj, (bool, int, float)):
        return [obj]
    return []


def _clone_args(args):
    return tuple(a.clone() if isinstance(a, tp.Tensor) else a for a in args)


def _float64_args(args):
    out, changed = [], False
    for a in args:
        if isinstance(a, tp.Tensor) and a.dtype == tp.float32:
            out.append(a.double())
            changed = True
        else:
            out.append(a.clone() if isinstance(a, tp.Tensor) else a)
    return tuple(out), changed


def _run(fn, args, kwargs):
    """The outputs' leaves followed by the tensor arguments after the call (in-place writes)."""
    args = _clone_args(args)
    with tp.no_grad():
        out = fn(*args, **kwargs)
    return _leaves(out) + [a for a in args if isinstance(a, tp.Tensor)]


def _compare(actual: List[Any], expected: List[Any], reference: Optional[List[Any]]) -> Optional[str]:
    """None when every leaf agrees under tp.testing.assert_close, else the first message."""
    from . import testing

    if len(actual) != len(expected):
        return f"{len(actual)} results instead of eager's {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        r = reference[i] if reference is not None and i < len(reference) else None
        if isinstance(r, tp.Tensor) and (not isinstance(e, tp.Tensor) or tuple(r.shape) != tuple(e.shape)):
            r = None
        if not isinstance(r, tp.Tensor) or not r.dtype.is_floating_point:
            r = None
        try:
            testing.assert_close(a, e, reference=r, equal_nan=True, msg=f"result {i}")
        except AssertionError as exc:
            return str(exc)
    return None


def _reference64(fn, args, kwargs):
    a64, changed = _float64_args(args)
    if not changed:
        return None
    try:
        return _run(fn, a64, kwargs)
    except Exception:  # the function may not accept float64: compare with dtype defaults then
        return None


def _bind_kwargs(fn, kwargs):
    """fn with its keyword arguments bound (tp.compile takes positional arguments only)."""
    if not kwargs:
        return fn
    return lambda *a: fn(*a, **kwargs)


def _layer_result(fn, args, kwargs, layer, expected, reference, options) -> Optional[str]:
    """None when `layer` agrees with eager, else what went wrong."""
    opts = dict(options or {})
    opts.setdefault("warn_fallback", False)
    try:
        cf = tp.compile(_bind_kwargs(fn, kwargs), backend=layer, strict_native=(layer == "stax"), options=opts)
        actual = _run(cf, args, {})
    except Exception as exc:  # a layer that raises is a failing layer
        return f"raised {type(exc).__name__}: {exc}"
    return _compare(actual, expected, reference)


# ------------------------------------------------------------------ the graph


def _capture(fn, args, kwargs):
    """The captured graph of fn over its tensor arguments (others baked in)."""
    pos = [i for i, a in enumerate(args) if isinstance(a, tp.Tensor)]

    def over_tensors(*tensors):
        full = list(args)
        for i, t in zip(pos, tensors):
            full[i] = t
        out = fn(*full, **kwargs)
        leaves = [x for x in _leaves(out) if isinstance(x, tp.Tensor)]
        return tuple(leaves)

    tensors = [args[i] for i in pos]
    with tp.no_grad():
        gm = tp.compiler.capture(over_tensors, *_clone_args(tensors))
    return gm, tensors


def _line_of(code: str, name: str) -> Optional[str]:
    for line in code.splitlines():
        if line.strip().startswith(name + " = "):
            return line
    return None


def _find_node(gm, tensors, layer, options, progress) -> (Optional[str], Optional[str]):
    """First call_function node whose value through `layer` differs from the interpreter's."""
    names = [n for op, n, target in gm.nodes if op == "call_function"]
    opts = dict(options or {})
    opts.setdefault("warn_fallback", False)
    for k, name in enumerate(names):
        try:
            prefix = gm._prefix(name)
        except ValueError:  # a node with several results: its getitem nodes are tried
            continue
        progress(f"node {k + 1}/{len(names)}: '{name}' through {layer}")
        with tp.no_grad():
            expected = _leaves(prefix(*_clone_args(tensors)))
        ref = None
        a64, changed = _float64_args(tensors)
        if changed:
            try:
                with tp.no_grad():
                    ref = _leaves(prefix(*a64))
            except Exception:
                ref = None

        def call(*t, _p=prefix):
            return _p(*t)

        try:
            cf = tp.compile(call, backend=layer, strict_native=(layer == "stax"), options=opts)
            with tp.no_grad():
                actual = _leaves(cf(*_clone_args(tensors)))
            err = _compare(actual, expected, ref)
        except Exception as exc:
            err = f"raised {type(exc).__name__}: {exc}"
        if err is not None:
            return name, err
    return None, None


# ------------------------------------------------------------------ reproducer


def _literal(t) -> str:
    vals = t.tolist()
    dt = str(t.dtype).replace("tensorplay.", "")
    return f"tp.tensor({vals!r}, dtype=tp.{dt})"


def _reproducer(gm, tensors, layer, options, summary: str, out_dir: Optional[str]) -> (str, Optional[str]):
    code = gm.code
    constants = dict(gm._constants)
    total = sum(t.numel() for t in tensors) + sum(t.numel() for t in constants.values())
    literal = total <= LITERAL_LIMIT and all(t.dtype != tp.bfloat16 for t in tensors)
    path = None
    data_name = None
    if out_dir is None:
        import tempfile

        out_dir = tempfile.mkdtemp(prefix="tp_bisect_")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "reproducer.py")
    if not literal:
        data_name = "reproducer_data.pt"
        tp.save({"inputs": [t.clone() for t in tensors], "constants": {k: v.clone() for k, v in constants.items()}},
                os.path.join(out_dir, data_name))
    opts = dict(options or {})
    lines = [
        '"""Reproducer written by tp.compiler.bisect.',
        "",
        *summary.splitlines(),
        "",
        "Runs the captured graph (up to the first differing node) eagerly and through",
        f"tp.compile(backend={layer!r}) on the saved inputs; raises AssertionError (or the",
        'layer\'s exception) while the bug is there."""',
        "import os",
        "import types",
        "",
        "import tensorplay as tp",
        "",
    ]
    if data_name:
        lines += [
            f"_data = tp.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), {data_name!r}))",
            "inputs = _data['inputs']",
            "self = types.SimpleNamespace(**_data['constants'])  # get_attr nodes read self.<name>",
        ]
    else:
        lines.append("inputs = [" + ", ".join(_literal(t) for t in tensors) + "]")
        lines.append("self = types.SimpleNamespace(" + ", ".join(f"{k}={_literal(v)}" for k, v in constants.items())
                     + ")  # get_attr nodes read self.<name>")
    lines += [
        "",
        "",
        code.rstrip(),
        "",
        "",
        "def _leaves(out):",
        "    return list(out) if isinstance(out, (tuple, list)) else [out]",
        "",
        "",
        "def main():",
        "    with tp.no_grad():",
        "        expected = _leaves(forward(*[t.clone() for t in inputs]))",
        "        try:  # a float64 run measures the problem's conditioning (tp.testing.assert_close)",
        "            reference = _leaves(forward(*[t.double() if t.dtype == tp.float32 else t.clone() for t in inputs]))",
        "        except Exception:",
        "            reference = [None] * len(expected)",
        f"        compiled = tp.compile(forward, backend={layer!r}, strict_native={layer == 'stax'!r}, "
        f"options={opts!r})",
        "        actual = _leaves(compiled(*[t.clone() for t in inputs]))",
        "    for i, (a, e, r) in enumerate(zip(actual, expected, reference)):",
        "        if r is not None and (not r.dtype.is_floating_point or tuple(r.shape) != tuple(e.shape)):",
        "            r = None",
        "        tp.testing.assert_close(a, e, reference=r, equal_nan=True, msg=f'result {i}')",
        "    print('the compiled results agree with eager: the bug is not reproduced')",
        "",
        "",
        'if __name__ == "__main__":',
        "    main()",
        "else:",
        "    main()  # run on import too (runpy, exec): a reproducer exists to fail",
        "",
    ]
    text = "\n".join(lines)
    with open(path, "w") as fh:
        fh.write(text)
    return text, path


# ------------------------------------------------------------------ the tool


def bisect(fn, *args, out_dir: Optional[str] = None, options: Optional[dict] = None, verbose: bool = True,
           progress: bool = True, **kwargs) -> BisectResult:
    """Find the first layer of tp.compile whose result for fn(*args, **kwargs) differs
    from eager's (Algorithm 11.1), narrow it to a pass, a fusion decision and a
    graph node, and write a standalone reproducer (see the module docstring).

    out_dir: where reproducer.py (and reproducer_data.pt) go, default a new temporary
    directory. options: extra tp.compile options for every layer. verbose: print the
    summary on stdout. progress: announce each step on stderr. The names out_dir,
    options, verbose and progress are therefore not passed on to fn.
    """
    res = BisectResult()
    say = _Progress(progress, res.steps)
    say("eager reference")
    expected = _run(fn, args, kwargs)
    reference = _reference64(fn, args, kwargs)
    for layer in LAYERS:
        say(f"layer {layer}: compile and compare")
        err = _layer_result(fn, args, kwargs, layer, expected, reference, options)
        if err is None:
            res.passing_layers.append(layer)
            continue
        res.layer, res.error = layer, err
        break
    if res.layer is None:
        if verbose:
            print(res.summary())
        return res
    layer = res.layer
    base = dict(options or {})

    # Which pass: turn each off alone.
    for p in tp.compiler.pass_names():
        if p in str(base.get("disable_passes", "")):
            continue
        say(f"layer {layer}: without pass '{p}'")
        opts = dict(base, disable_passes=[p])
        err = _layer_result(fn, args, kwargs, layer, expected, reference, opts)
        if err is None:
            res.passes_tried[p] = "fixes"
            if res.culprit_pass is None:
                res.culprit_pass = p
        elif err.startswith("raised BackendError"):
            res.passes_tried[p] = "needed (stax refuses the graph without it)"
        else:
            res.passes_tried[p] = "still fails"

    # Which fusion decision.
    if layer == "stax":
        say("layer stax: without fusion")
        err = _layer_result(fn, args, kwargs, layer, expected, reference, dict(base, stax_fusion=False))
        res.fusion = err is None
        if res.fusion:
            try:
                cf = tp.compile(_bind_kwargs(fn, kwargs), backend="stax", options=dict(base, warn_fallback=False))
                _run(cf, args, {})
                res.fused_kernels = [f"{k['name']}: {k['origin']}" for k in cf.last_kernels if ";" in k["origin"]]
            except Exception:
                pass

    # Which node.
    gm = None
    try:
        say("capture the graph")
        gm, tensors = _capture(fn, args, kwargs)
        res.graph_code = gm.code
        res.node, res.node_error = _find_node(gm, tensors, layer, base, say)
        if res.node:
            res.node_code = _line_of(gm.code, res.node)
            if layer == "stax":
                res.kernels = _kernels_of(fn, args, kwargs, gm, res.node, base)
    except Exception as exc:
        res.steps.append(f"node search failed: {type(exc).__name__}: {exc}")

    # Reproducer: the graph up to the node (else the whole graph) and its inputs.
    if gm is not None:
        try:
            small = gm._prefix(res.node) if res.node else gm
            res.reproducer, res.reproducer_path = _reproducer(small, tensors, layer, base, res.summary(), out_dir)
            say("run the reproducer")
            res.reproducer_fails = _reproducer_fails(res.reproducer_path)
        except Exception as exc:
            res.steps.append(f"reproducer failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    if verbose:
        print(res.summary())
    return res


def _kernels_of(fn, args, kwargs, gm, node, options) -> List[str]:
    """The generated kernels of fn's region whose fused operators include node's operator."""
    target = next((t for op, n, t in gm.nodes if n == node), None)
    try:
        cf = tp.compile(_bind_kwargs(fn, kwargs), backend="stax", options=dict(options, warn_fallback=False))
        _run(cf, args, {})
        kernels = cf.last_kernels
    except Exception:  # noqa: BLE001  (naming the kernel is a courtesy)
        return []
    ops = lambda origin: {o.strip() for part in origin.split(";") for o in part.split(",")}  # noqa: E731
    return [f"{k['name']}: {k['origin']}" for k in kernels if target in ops(k["origin"])]


def _reproducer_fails(path: str) -> bool:
    import contextlib
    import io
    import runpy

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(path, run_name="__tp_bisect_check__")
    except Exception:  # noqa: BLE001  (any failure is the reproducer doing its job)
        return True
    return False


def _load_target(path: str):
    import runpy

    ns = runpy.run_path(path, run_name="__tp_bisect__")
    target = ns.get("bisect_target")
    if not callable(target):
        raise SystemExit(f"python -m tensorplay.bisect: {path} defines no bisect_target() "
                         "(it must return (fn, args) or (fn, args, kwargs))")
    t = target()
    if not isinstance(t, tuple) or len(t) not in (2, 3):
        raise SystemExit("python -m tensorplay.bisect: bisect_target() must return (fn, args) or (fn, args, kwargs)")
    fn, args = t[0], tuple(t[1])
    kwargs = dict(t[2]) if len(t) == 3 else {}
    return fn, args, kwargs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tensorplay.bisect", description=__doc__.split("\n\n")[0])
    p.add_argument("script", help="a Python file defining bisect_target() -> (fn, args[, kwargs])")
    p.add_argument("--out", metavar="DIR", default=None, help="directory of the reproducer (default: a temp dir)")
    a = p.parse_args(argv)
    fn, args, kwargs = _load_target(a.script)
    res = bisect(fn, *args, out_dir=a.out, **kwargs)
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
