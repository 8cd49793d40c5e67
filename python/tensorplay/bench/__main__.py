"""python -m tensorplay.bench [--suite default|eager|codegen|gpu|dynamic|section13] [--quick] [--json PATH] [--out DIR] [--threads N]

Prints a readable report (every figure with the code that produced it) and,
with --json, writes the same results as JSON.  Exit status 1 when a measurement
could not be taken (an exception), 0 otherwise; performance targets that are
missed are reported as FAIL in the text but do not change the exit status.

--suite section13 reproduces the measurements of Section 13 of the seed
(Tables 13.1 and 13.2 in two rounds, B and P, roofline, Figure 13.1, error
model, break-even, validity) and writes a Markdown report with PNG figures
(when matplotlib is installed) to --out."""

from __future__ import annotations

import argparse
import json
import sys
import time

import tensorplay as tp

from .machine import describe_machine
from .report import Report
from .suites import SUITES, Options


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tensorplay.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", default="default", choices=sorted(list(SUITES) + ["section13"]),
                   help="which measurements to run")
    p.add_argument("--out", metavar="DIR", default="section13_report",
                   help="--suite section13: directory of report.md and the figures (default ./section13_report)")
    p.add_argument("--quick", action="store_true", help="fewer runs, smaller sizes (for tests; figures not meaningful)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    p.add_argument("--threads", type=int, default=None, help="tp.set_num_threads(N) first, when tensorplay has it")
    p.add_argument("--keep-cache", action="store_true", help="keep the temporary cache directories of section 3")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    report = Report()
    threads_set = None
    if args.threads is not None:
        set_threads = getattr(tp, "set_num_threads", None)
        if callable(set_threads):
            set_threads(args.threads)
            threads_set = args.threads
        else:
            print("note: tensorplay has no set_num_threads; --threads ignored", file=sys.stderr)

    if args.suite == "section13":
        return _section13(args, threads_set)

    info = describe_machine()
    report.title(f"tensorplay.bench --suite {args.suite}" + (" --quick" if args.quick else ""))
    for k, v in info.items():
        report.figure(k, str(v))
    if args.quick:
        report.note("--quick: small sizes and few runs; the figures check the harness, not the machine.")

    started = time.time()
    t0 = time.perf_counter()
    results = SUITES[args.suite](report, Options(quick=args.quick, keep_cache=args.keep_cache))
    doc = {
        "suite": args.suite,
        "quick": bool(args.quick),
        "threads_set": threads_set,
        "machine": info,
        "started_unix": started,
        "wall_s": time.perf_counter() - t0,
        **results,
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=2, sort_keys=False)
        report.note(f"results written to {args.json}")
    errors = results.get("errors", {})
    if errors:
        report.note(f"{len(errors)} measurement(s) failed: {', '.join(errors)}")
        return 1
    return 0


def _section13(args, threads_set) -> int:
    from . import s13report, section13

    doc = section13.run(section13.Options(quick=args.quick))
    doc["threads_set"] = threads_set
    written = s13report.write(doc, args.out)
    print(written["text"])
    print(f"report written to {written['report']}" + (f" with {len(written['figures'])} figure(s)"
                                                       if written["figures"] else " (text only)"))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(_finite(doc), fh, indent=2, default=_json_default)
        print(f"results written to {args.json}")
    return 1 if doc.get("errors") else 0


def _json_default(x):
    return str(x)


def _finite(x):
    """inf / nan as strings ("inf": m* when compiling never pays), so the file is strict JSON."""
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return str(x)
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


if __name__ == "__main__":
    sys.exit(main())
