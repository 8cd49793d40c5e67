#!/usr/bin/env python
"""Runs PyTorch's OpInfo samples against TensorPlay and reports the pass rates.

    python scripts/opinfo_report.py                  # full run, text report
    python scripts/opinfo_report.py --json out.json  # also write the numbers (and every failure)
    python scripts/opinfo_report.py --update-xfails  # full run, rewrite tests/python/opinfo/xfails.json
    python scripts/opinfo_report.py --ops 'add|nn.functional.relu' --dtypes float32,float64

The cases run in a forked worker process (harness.IsolatedRunner), so a
segfault or a hang is reported as a failure ("crash" / "timeout") of that case,
a fresh worker is forked and the run goes on. Needs torch and expecttest (torch's test helpers).
Run it with the tensorplay under test importable (PYTHONPATH or installed).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python"))

from opinfo import harness as h  # noqa: E402


def pct(a, b):
    return f"{100.0 * a / b:5.1f}%" if b else "   - "


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", help="regular expression on the OpInfo key (name or name.variant), full match")
    ap.add_argument("--dtypes", help="comma-separated dtype names (default: all ten)")
    ap.add_argument("--limit", type=int, default=None,
                    help="at most this many samples per case, evenly spread (default: all)")
    ap.add_argument("--no-grads", action="store_true", help="forward only")
    ap.add_argument("--json", metavar="PATH", help="write the summary and every failing sample as JSON")
    ap.add_argument("--update-xfails", action="store_true",
                    help="rewrite tests/python/opinfo/xfails.json from this run (cases outside "
                         "--ops/--dtypes keep their entries)")
    ap.add_argument("--top", type=int, default=25, help="how many failure classes / ops to list")
    ap.add_argument("--by-op", action="store_true", help="also list every OpInfo's passed/run samples")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress line per OpInfo")
    args = ap.parse_args(argv)
    if args.update_xfails and (args.limit is not None or args.no_grads):
        ap.error("--update-xfails needs every sample: drop --limit / --no-grads")

    t0 = time.time()
    db = h.op_db()
    dtypes = args.dtypes.split(",") if args.dtypes else list(h.DTYPE_NAMES)
    pattern = re.compile(args.ops) if args.ops else None
    all_keys = [h.op_key(op) for op in db]
    covered_ops, uncovered_ops = [], []
    cases = []
    for op in db:
        key = h.op_key(op)
        if pattern and not pattern.fullmatch(key):
            continue
        if h.find_tp_callable(op) is None:
            uncovered_ops.append(key)
            continue
        covered_ops.append(key)
        cases += [(key, d) for d in h.supported_dtypes(op) if d in dtypes]

    results = []
    runner = h.IsolatedRunner()
    for i, (key, d) in enumerate(cases):
        res = runner.run(key, d, limit=args.limit, grads=not args.no_grads)
        results.append(res)
        if not args.quiet:
            f = len(res.failures())
            print(f"[{i + 1}/{len(cases)}] {key} {d}: {len(res.samples) - f}/{len(res.samples)} "
                  f"({res.seconds:.2f}s)", file=sys.stderr, flush=True)
    runner.close()
    elapsed = time.time() - t0

    summary = summarize(results, covered_ops, uncovered_ops, len(all_keys), elapsed)
    xfails = h.load_xfails()
    summary["newly_passing"], summary["unexpected"] = compare_with_xfails(results, xfails)
    print_report(summary, args.top)
    if args.by_op:
        print("\nby OpInfo (samples passed/run, all dtypes):")
        for k, v in summary["by_op"].items():
            print(f"  {k:45s} {v['passed']:5d}/{v['run']:5d} = {pct(v['passed'], v['run'])}")

    if args.json:
        out = dict(summary)
        out["failures"] = [{"op": r.op, "dtype": r.dtype, "index": s.index, "kind": s.kind,
                            "reason": s.reason, "detail": s.detail}
                           for r in results for s in r.failures()]
        Path(args.json).write_text(json.dumps(out, indent=1))
        print(f"\nwrote {args.json}")
    if args.update_xfails:
        write_xfails(results, xfails, {(r.op, r.dtype) for r in results}, summary)
        print(f"\nwrote {h.XFAILS_PATH.relative_to(ROOT)}")
    return 0


def summarize(results, covered_ops, uncovered_ops, n_opinfos, elapsed):
    by_dtype = collections.defaultdict(lambda: {"passed": 0, "run": 0, "cases": 0, "cases_passed": 0,
                                                "fwd_passed": 0, "fwd_run": 0})
    kinds = {k: {"passed": 0, "run": 0} for k in ("fwd", "method", "grad")}
    reasons = collections.Counter()
    reason_cases = collections.defaultdict(set)
    reason_example = {}
    op_fail = collections.Counter()
    op_run = collections.Counter()
    skipped = 0
    case_errors = []
    for r in results:
        d = by_dtype[r.dtype]
        n = len(r.samples)
        f = r.failures()
        d["run"] += n
        d["passed"] += n - len(f)
        d["cases"] += 1
        d["cases_passed"] += int(not f)
        skipped += r.skipped
        if r.error:
            case_errors.append(f"{r.op}|{r.dtype}: {r.error.splitlines()[0]}")
        op_run[r.op] += n
        op_fail[r.op] += len(f)
        for s in r.samples:
            if s.kind == "fwd":
                d["fwd_run"] += 1
                d["fwd_passed"] += int(s.ok)
            kinds[s.kind]["run"] += 1
            kinds[s.kind]["passed"] += int(s.ok)
            if not s.ok:
                reasons[s.reason] += 1
                reason_cases[s.reason].add(f"{r.op}|{r.dtype}")
                reason_example.setdefault(s.reason, f"{r.op} {r.dtype} #{s.index}: {s.detail}")
    ops_all_pass = sum(1 for k in op_run if op_fail[k] == 0)
    total_run = sum(d["run"] for d in by_dtype.values())
    total_pass = sum(d["passed"] for d in by_dtype.values())
    return {
        "opinfos": n_opinfos,
        "covered": len(covered_ops),
        "not_covered": len(uncovered_ops),
        "not_covered_list": uncovered_ops,
        "cases": len(results),
        "samples_run": total_run,
        "samples_passed": total_pass,
        "samples_skipped": skipped,
        "forward": kinds["fwd"],
        "method": kinds["method"],
        "gradient": kinds["grad"],
        "by_dtype": {k: by_dtype[k] for k in h.DTYPE_NAMES if k in by_dtype},
        "opinfos_all_passing": ops_all_pass,
        "reasons": [{"reason": k, "samples": v, "cases": len(reason_cases[k]), "example": reason_example[k]}
                    for k, v in reasons.most_common()],
        "worst_ops": [{"op": k, "failed": op_fail[k], "run": op_run[k]} for k, _ in op_fail.most_common() if op_fail[k]],
        "by_op": {k: {"passed": op_run[k] - op_fail[k], "run": op_run[k]} for k in sorted(op_run)},
        "case_errors": case_errors,
        "seconds": round(elapsed, 1),
    }


def compare_with_xfails(results, xfails):
    newly, unexpected = [], []
    for r in results:
        cid = h.case_id(r.op, r.dtype)
        entry = xfails.get(cid)
        bad = {(s.kind, s.index) for s in r.failures()}
        if entry is not None:
            known = sorted(h.known_failures(entry))
            now_ok = [k for k in known if k not in bad]
            if now_ok or (entry.get("all") and not bad):
                newly.append({"case": cid, "now_passing": len(now_ok), "was_failing": len(known),
                              "case_passes": not bad})
        for s in h.unexpected_failures(r, entry):
            unexpected.append({"case": cid, "index": s.index, "kind": s.kind, "reason": s.reason, "detail": s.detail})
    return newly, unexpected


def print_report(s, top):
    print(f"OpInfo oracle: {s['covered']} of {s['opinfos']} OpInfos covered by tensorplay "
          f"({s['not_covered']} not covered), {s['cases']} (OpInfo, dtype) cases, {s['seconds']} s")
    print(f"samples passed: {s['samples_passed']}/{s['samples_run']} = {pct(s['samples_passed'], s['samples_run'])}"
          f"   ({s['samples_skipped']} skipped: rejected by torch itself or no differentiable output)")
    for k, name in (("forward", "forward (function)"), ("method", "Tensor methods"),
                    ("gradient", "float64 gradients")):
        print(f"  {name:18s} {s[k]['passed']:6d}/{s[k]['run']:6d} = {pct(s[k]['passed'], s[k]['run'])}")
    print(f"OpInfos passing every sample in every dtype: {s['opinfos_all_passing']}/{s['covered']}")
    print("\nby dtype       all samples              forward (function) only     cases (all samples pass)")
    for d, v in s["by_dtype"].items():
        print(f"  {d:9s} {v['passed']:6d}/{v['run']:6d} = {pct(v['passed'], v['run'])}"
              f"     {v['fwd_passed']:6d}/{v['fwd_run']:6d} = {pct(v['fwd_passed'], v['fwd_run'])}"
              f"      {v['cases_passed']:4d}/{v['cases']:4d} = {pct(v['cases_passed'], v['cases'])}")
    print(f"\ntop failure classes (samples, cases, first example):")
    for r in s["reasons"][:top]:
        print(f"  {r['samples']:6d} {r['cases']:5d}  {r['reason']}\n{'':16s}e.g. {r['example'][:200]}")
    print(f"\nOpInfos with most failing samples:")
    print("  " + ", ".join(f"{w['op']} {w['failed']}/{w['run']}" for w in s["worst_ops"][:top]))
    if s["case_errors"]:
        print(f"\ncases that could not run ({len(s['case_errors'])}):")
        for e in s["case_errors"][:top]:
            print("  " + e[:200])
    print(f"\nnewly passing vs xfails.json ({len(s['newly_passing'])} cases; shrink the list with --update-xfails):")
    for n in s["newly_passing"][:top]:
        print(f"  {n['case']}: {n['now_passing']}/{n['was_failing']} known failures now pass"
              + (" (whole case passes)" if n["case_passes"] else ""))
    print(f"\nunexpected failures (not in xfails.json): {len(s['unexpected'])}")
    for u in s["unexpected"][:top]:
        print(f"  {u['case']} {u['kind']} #{u['index']}: {u['reason']}: {u['detail'][:160]}")


def write_xfails(results, old, rerun, summary):
    cases = {k: v for k, v in old.items() if tuple(k.rsplit("|", 1)) not in rerun}
    for r in results:
        entry = h.xfail_entry(r)
        if entry is not None:
            cases[h.case_id(r.op, r.dtype)] = entry
    import torch
    data = {
        "_comment": "Known failures of the OpInfo oracle, per (OpInfo key | dtype): the main reason class, "
                    "counts per class, and the indices of the failing forward / float64-gradient samples. "
                    "Generated by `python scripts/opinfo_report.py --update-xfails`; do not edit by hand.",
        "torch": torch.__version__,
        "cases": dict(sorted(cases.items())),
    }
    h.XFAILS_PATH.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")


if __name__ == "__main__":
    sys.exit(main())
