"""The Section 13 report: Markdown tables from the results of section13.run, and
PNG figures when matplotlib is installed (``pip install tensorplay[bench]``):
Figure 13.1 (S against rho with the line S = rho) and the roofline with every
case placed on it."""

from __future__ import annotations

import math
import os
from typing import List, Optional

_INF = float("inf")


def _f(x, digits=2, unit="") -> str:
    if x is None:
        return "n/a"
    if isinstance(x, str):  # from JSON: "inf" / "nan"
        return "never" if x == "inf" else x
    if isinstance(x, float) and math.isinf(x):
        return "never" if x > 0 else "-inf"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return f"{x:.{digits}f}{unit}"


def _g(x, digits=2) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return "never" if x == "inf" else x
    if isinstance(x, float) and math.isinf(x):
        return "never"
    return f"{x:.{digits}g}"


def _ab(rounds: dict, key: str, fmt) -> str:
    vals = [rounds.get(r, {}).get(key) for r in ("A", "B")]
    return " / ".join(fmt(v) for v in vals)


def _table(header: List[str], rows: List[List[str]]) -> List[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _iv(pr: dict, what: str) -> str:
    m = pr.get(f"{what}_ms")
    iv = pr.get(f"{what}_interval")
    if m is None:
        return "n/a"
    return f"{m:.2f} [{iv[0]:.2f}, {iv[1]:.2f}]"


def _timing_table(doc: dict, table: str) -> List[str]:
    rows = []
    for key, c in doc["cases"].items():
        if c["table"] != table:
            continue
        r = c["rounds"]
        if not c["native"]:
            rows.append([c["title"], "x".join(map(str, c["shapes"][0])), _ab(r, "Te_ms", _f),
                         "not native: " + (c["native_error"] or ""), "", "", "", ""])
            continue
        rho = c.get("rho")
        beta_e = [r[x].get("beta_e_over_B") for x in ("A", "B")]
        beta_c = [r[x].get("beta_c_over_B") for x in ("A", "B")]
        v = c.get("validity", {})
        rows.append([
            c["title"], "x".join(map(str, c["shapes"][0])), _ab(r, "Te_ms", _f), _ab(r, "Tc_ms", _f),
            _ab(r, "S", _f), _f(rho) if rho else "not modelled",
            (" / ".join(_f(b * 100 if b is not None else None, 0, "%") for b in beta_e) + " ; "
             + " / ".join(_f(b * 100 if b is not None else None, 0, "%") for b in beta_c)) if rho else "n/a",
            _verdict(c, v),
        ])
    return _table(["case", "shape", "Te ms (A / B)", "Tc ms (A / B)", "S = Te/Tc (A / B)", "rho",
                   "beta_e ; beta_c (% of B, A / B)", "13.5 verdict"], rows)


def _verdict(c: dict, v: dict) -> str:
    if c["table"] == "13.1" and c.get("rho") is None:
        return "no speedup reported (outside the byte model)"
    if not v:
        return "n/a"
    if v["established"]:
        return v["verdict"]
    return "not established: " + "; ".join(v["flags"])


def _interval_table(doc: dict) -> List[str]:
    rows = []
    for key, c in doc["cases"].items():
        for rn in ("A", "B"):
            pr = c["rounds"].get(rn, {})
            sp = pr.get("S_paired")
            rows.append([key, rn, _iv(pr, "Te"), _iv(pr, "Tc"),
                         f"{sp['median']:.2f} [{sp['lo']:.2f}, {sp['hi']:.2f}]" if sp else "n/a"])
    return _table(["case", "round", "Te ms median [4th, 12th]", "Tc ms median [4th, 12th]",
                   "paired Te/Tc per reading: median [interval]"], rows)


def _decomp_table(doc: dict) -> List[str]:
    rows = []
    for key, c in doc["cases"].items():
        if c.get("rho") is None or not c["native"]:
            continue
        for rn in ("A", "B"):
            d = c["rounds"][rn].get("decomposition")
            if not d:
                continue
            rows.append([key, rn, _f(d["S"]), _f(d["rho"]), _f(d["beta_e"] / 1e9, 1), _f(d["beta_c"] / 1e9, 1),
                         _f(d["kernel_factor"]), _f(d["rho"] * d["kernel_factor"])])
    return _table(["case", "round", "S", "rho = b_e/b_c", "beta_e GB/s", "beta_c GB/s", "beta_c/beta_e",
                   "rho * beta_c/beta_e"], rows)


def _roofline_table(doc: dict) -> List[str]:
    rows = []
    for key, c in doc["cases"].items():
        for way in ("eager", "compiled"):
            p = c["rounds"].get("A", {}).get(f"roofline_{way}")
            q = c["rounds"].get("B", {}).get(f"roofline_{way}")
            if not p:
                continue
            rows.append([key, way, _g(p["intensity"], 3), f"{p['achieved'] / 1e9:.2f} / {q['achieved'] / 1e9:.2f}",
                         _g(p["attainable"] / 1e9, 3), f"{p['fraction']:.0%} / {q['fraction']:.0%}", p["bound"]])
    return _table(["case", "way", "I (FLOP/byte)", "achieved GFLOP/s (A / B)", "roof min(P, I*B) GFLOP/s",
                   "fraction of roof (A / B)", "bound"], rows)


def _error_table(doc: dict) -> List[str]:
    rows = []
    for key, c in doc["cases"].items():
        e = c.get("error_model")
        if not e or "skipped" in e:
            rows.append([key, "n/a", "", "", "", "", "", "", "", "", ""])
            continue
        rows.append([
            key, e["kind"], str(e.get("n", "")), str(e.get("W", "")), _g(e.get("data_mean"), 3),
            _g(e.get("sigma_row"), 2), _g(e.get("sigma_row_without_merge"), 2), _g(e.get("predicted_max"), 2),
            f"{e['measure']}: {_g(e['measured'], 2)}",
            _g(e.get("kappa_worst_row"), 3), "yes" if e.get("within_model") else "NO",
        ])
    return _table(["case", "kind", "n", "W", "data mean", "predicted sigma per row", "(without merge term)",
                   "predicted max (x sqrt 2, over rows)",
                   "measured", "kappa worst row", "within model"], rows)


def _break_even_table(doc: dict) -> List[str]:
    rows = []
    for key, c in doc["cases"].items():
        b = c.get("break_even", {})
        ms = lambda k: _f(b[k] * 1e3, 2) if k in b else "n/a"  # noqa: E731
        us = lambda k: _f(b[k] * 1e6, 1) if k in b else "n/a"  # noqa: E731
        rows.append([
            key, ms("C_cold_s"), ms("C_warm_s"), us("tau_e_s"), us("tau_c_s"),
            f"{ms('saving_A_s')} / {ms('saving_B_s')}",
            f"{_g(b.get('m_star_cold_A'), 3)} / {_g(b.get('m_star_cold_B'), 3)}",
            f"{_g(b.get('m_star_warm_A'), 3)} / {_g(b.get('m_star_warm_B'), 3)}",
            _g(b.get("N_star"), 3),
        ])
    return _table(["case", "C cold ms", "C warm ms", "tau_e us/call", "tau_c us/call", "saving per call ms (A / B)",
                   "m* cold (A / B)", "m* warm (A / B)", "N* elements"], rows)


def markdown(doc: dict, figures: Optional[List[str]] = None, figures_note: str = "") -> str:
    m, cap = doc["machine"], doc["capability"]
    L: List[str] = []
    L.append("# Section 13 report: models and measurement on this machine")
    L.append("")
    L.append(f"Produced by `python -m tensorplay.bench --suite section13{' --quick' if doc['quick'] else ''}` "
             f"in {doc['wall_s']:.0f} s.")
    if doc["quick"]:
        L.append("")
        L.append("**--quick**: small sizes; the figures check the harness, not the machine (the inputs are not "
                 "larger than the last-level cache, so the byte model does not describe them).")
    L.append("")
    L.append(f"Machine: {m.get('cpu_model', m.get('processor'))}, {m.get('cpu_count')} CPUs, "
             f"{m.get('num_threads')} threads, ISA {m.get('isa')}, Python {m.get('python')}.  "
             f"Each case: warm-up {doc['warmup']}, {doc['runs']} readings of eager and compiled in rotation "
             "(median, distribution-free 95 % interval = 4th and 12th of 15 readings).  Compiled runs use "
             "`strict_native=True`.  Rounds A and B ran at "
             + " and ".join(f"{r} {v['started_s']:.0f}-{v['finished_s']:.0f} s" for r, v in doc["rounds"].items())
             + " after the start.")
    L.append("")
    L.append("## Machine parameters (Section 13.1; capability = best reading, Proposition 13.1)")
    L.append("")
    bp = cap["bandwidth_probe"]["A"]
    L.append(f"- B = **{cap['B'] / 1e9:.1f} GB/s**: row-wise sum over {bp['shape'][0]}x{bp['shape'][1]} float32 "
             f"(round A {cap['B_rounds']['A'] / 1e9:.1f}, round B {cap['B_rounds']['B'] / 1e9:.1f} GB/s from the "
             f"minimum; medians {cap['B_median_rounds']['A'] / 1e9:.1f} / {cap['B_median_rounds']['B'] / 1e9:.1f} GB/s).")
    if cap.get("copy_rate"):
        below = cap["copy_rate"] < cap["B"]
        L.append(f"- `y.copy_(x)` on the same size: {cap['copy_rate'] / 1e9:.1f} GB/s counting one read and one "
                 "write, " + ("below B: write allocate (the read of each destination line) makes the real traffic "
                              "exceed the count, so the byte model underestimates writes here."
                              if below else "not below B: this machine shows no write-allocate penalty at this "
                              "size (e.g. streaming stores), so the byte model's write count holds here."))
    mm = cap.get("matmul") or {}
    if mm:
        L.append(f"- P = **{cap['P'] / 1e9:.1f} GFLOP/s**: {mm['n']}x{mm['n']} float32 matmul, minimum of "
                 f"{mm['timing']['n']} readings.")
        L.append(f"- ridge point P/B = {cap['ridge']:.1f} FLOP/byte.")
    L.append("")
    L.append("## Table 13.1: fusion cases (medians, rounds A / B)")
    L.append("")
    L += _timing_table(doc, "13.1")
    L.append("")
    for key, c in doc["cases"].items():
        if c["table"] == "13.1" and c.get("rho"):
            L.append(f"- {key}: eager traffic {c['traffic_e']}; compiled {c['traffic_c']} (elements; N inputs, R rows)"
                     + (f"; {c['kernels']} generated kernel(s)" if c.get("kernels") is not None else "")
                     + (f". {c['note']}" if c["note"] else ""))
        elif c["table"] == "13.1" and c["note"]:
            L.append(f"- {key}: {c['note']}")
    L.append("")
    L.append("## Table 13.2: single operators, rho = 1 (medians, rounds A / B)")
    L.append("")
    L += _timing_table(doc, "13.2")
    L.append("")
    L.append("## Intervals of every reading set")
    L.append("")
    L += _interval_table(doc)
    L.append("")
    L.append("## Decomposition S = rho * beta_c / beta_e (Proposition 13.3)")
    L.append("")
    L += _decomp_table(doc)
    L.append("")
    L.append("## Roofline (Section 13.1): each case at its model arithmetic intensity")
    L.append("")
    L.append("FLOP counts: every elementwise operation or reduction step is one operation (exp included).")
    L.append("")
    L += _roofline_table(doc)
    L.append("")
    L.append("## Rounding error against the statistical model (Section 13.3)")
    L.append("")
    L.append(f"u = 2^-24, W = {doc['W']} accumulators (float32 lanes of this ISA).  Predicted sigma per row from "
             "Corollary 13.1 with the data's mean and variance, merge term included; the prediction for the "
             "difference of two independent sums is sqrt 2 times that, and for the maximum over R rows z_R times "
             "more (Pr[|Z| > z_R] = 1/R).  For outputs divided by a row sum the relative error of the sum reaches "
             "every element: predicted max relative = sqrt 2 * max over rows of sigma/|sum| plus a few u for "
             "elementwise steps that differ between the implementations (softmax: 8 u for a vector exp against "
             "the library's and the division; normalization: 1 u).  kappa = "
             "sum|x|/|sum x| of the worst row.  'within model' = measured <= 4 x predicted.")
    L.append("")
    L += _error_table(doc)
    L.append("")
    L.append("## Break-even (Section 13.4)")
    L.append("")
    L.append("C = first call - second call of `tp.compile(f, strict_native=True)` in a new process: cold = empty "
             "cache directory, warm = the same directory again.  m* = C / (Te - Tc) (Proposition 13.4, per round); "
             "N* = (tau_c - k tau_e) B / (4 (e - c)) with e, c the elements moved per input element "
             "(Proposition 13.6; 'never' = fusion saves no bytes, 0 = pays at any size).  tau measured on "
             "2x8 inputs, same tensors each call.")
    L.append("")
    L += _break_even_table(doc)
    L.append("")
    L.append("## Construct validity (Section 13.5)")
    L.append("")
    llc = m.get("last_level_cache_bytes")
    sizes = []
    for key, c in doc["cases"].items():
        if c.get("b_e"):
            r, k = c["shapes"][0][0], c["shapes"][0][1]
            sizes.append((key, 4 * r * k * len(c["shapes"])))
    if llc and sizes:
        small = [k for k, b in sizes if b <= llc]
        L.append(f"The byte model counts main-memory traffic, so inputs must be far larger than the last-level "
                 f"cache ({llc / 2**20:.0f} MiB here).  Input bytes per case: "
                 + ", ".join(f"{k} {b / 2**20:.0f} MiB" for k, b in sizes) + ".  "
                 + ("Not larger than the cache, so caching inflates beta and the byte model does not apply: "
                    + ", ".join(small) + "." if small else "All exceed the cache (the seed: 64 MiB against 33 MB)."))
    else:
        L.append("Last-level cache size unknown: compare the input sizes above with it before trusting beta.")
    L.append("Compiled runs use strict_native=True: what is timed is the generated kernel, not a fallback; "
             "a case Stax cannot lower is listed as not native.")
    L.append("")
    L.append("## Internal validity (Section 13.5)")
    L.append("")
    L.append("A speedup counts as established only when both rounds agree in direction, the smaller effect (|log S|) "
             "exceeds the round-to-round difference, and neither round's paired interval contains 1.")
    L.append("")
    for key, c in doc["cases"].items():
        v = c.get("validity")
        if v and not v["established"]:
            L.append(f"- **{key}**: not established ({'; '.join(v['flags'])})")
    if not any(c.get("validity") and not c["validity"]["established"] for c in doc["cases"].values()):
        L.append("- every measured effect is established.")
    L.append("")
    L.append("## Figures")
    L.append("")
    if figures:
        for f in figures:
            L.append(f"![{os.path.splitext(f)[0]}]({f})")
            L.append("")
    L.append(figures_note or "")
    if doc.get("errors"):
        L.append("")
        L.append("## Errors")
        for k, v in doc["errors"].items():
            L.append(f"- {k}: {v}")
    return "\n".join(L).rstrip() + "\n"


def figures(doc: dict, out_dir: str) -> List[str]:
    """Writes the PNGs; returns their file names.  Raises ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    # Figure 13.1: S against rho, hollow = round A, filled = round B; Table 13.2 squares shifted left.
    fig, ax = plt.subplots(figsize=(6, 4.5))
    top = 1.0
    for key, c in doc["cases"].items():
        rho = c.get("rho")
        if rho is None or not c["native"]:
            continue
        x = rho * (0.96 if c["table"] == "13.2" else 1.0)
        marker = "s" if c["table"] == "13.2" else "o"
        for rn, fill in (("A", "none"), ("B", None)):
            s = c["rounds"][rn].get("S")
            if s is None:
                continue
            top = max(top, s, rho)
            ax.scatter([x], [s], marker=marker, facecolors=fill if fill else "C0", edgecolors="C0")
        if c["table"] == "13.1":
            ax.annotate(key, (x, c["rounds"]["B"].get("S", 1.0)), textcoords="offset points", xytext=(5, -3),
                        fontsize=7)
    xs = [0.5, top * 1.1]
    ax.plot(xs, xs, "k-", lw=1, label="S = rho")
    ax.set_xlabel("model byte ratio rho = b_e / b_c")
    ax.set_ylabel("measured speedup S = Te / Tc")
    ax.set_title("Figure 13.1: S against rho (hollow A, filled B; squares: Table 13.2)")
    ax.legend(loc="upper left")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "figure_13_1_speedup_vs_rho.png"), dpi=120)
    plt.close(fig)
    names.append("figure_13_1_speedup_vs_rho.png")

    # Roofline
    cap = doc["capability"]
    B, P = cap["B"], cap["P"]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    keys = list(doc["cases"])
    lo = min([0.01] + [c["rounds"][r][f"roofline_{w}"]["intensity"] for c in doc["cases"].values()
                       for r in ("A", "B") for w in ("eager", "compiled") if c["rounds"].get(r, {}).get(f"roofline_{w}")])
    if P and P == P:
        ridge = P / B
        i = [lo / 2, ridge, max(ridge * 16, 16.0)]
        ax.loglog(i, [min(P, x * B) / 1e9 for x in i], "k-", lw=1,
                  label=f"min(P, I*B): B={B / 1e9:.0f} GB/s, P={P / 1e9:.0f} GFLOP/s")
    cmap = plt.get_cmap("tab20")
    for n, key in enumerate(keys):
        c = doc["cases"][key]
        for way, marker in (("eager", "x"), ("compiled", "o")):
            pts = [c["rounds"][rn].get(f"roofline_{way}") for rn in ("A", "B")]
            pts = [p for p in pts if p]
            if pts:
                ax.scatter([p["intensity"] for p in pts], [p["achieved"] / 1e9 for p in pts], marker=marker,
                           color=cmap(n % 20), label=key if way == "compiled" else None, s=22)
    ax.set_xlabel("arithmetic intensity I (FLOP / model byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Roofline (x eager, o compiled; rounds A and B)")
    ax.legend(fontsize=6, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "roofline.png"), dpi=120)
    plt.close(fig)
    names.append("roofline.png")
    return names


def write(doc: dict, out_dir: str) -> dict:
    """Writes report.md (and PNGs when matplotlib is importable) into out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    try:
        names = figures(doc, out_dir)
        note = ""
    except ImportError:
        names = []
        note = ("No figures: matplotlib is not installed (`pip install tensorplay[bench]` or "
                "`pip install matplotlib`); this report is text only.")
    text = markdown(doc, names, note)
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as fh:
        fh.write(text)
    return {"report": path, "figures": [os.path.join(out_dir, n) for n in names], "text": text}
