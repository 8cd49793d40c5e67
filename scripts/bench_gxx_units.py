"""CPU time of the host compiler on generated C++ units, interleaved (issue 11).

Compiles each source with the code cache's flags (AVX-512 host) plus optional
extra flags, alternating the order every round so that all sources see the
same machine periods, and prints the median / min CPU time of the compiler
processes (user + sys of the children) and the ratio to the first source.
Get the sources from a fresh TP_CACHE_DIR (<dir>/<xx>/<key>/kernel.cpp) after
one tp.compile call each.

    python scripts/bench_gxx_units.py 15 static:s.cpp symbolic:d.cpp
    python scripts/bench_gxx_units.py 15 static:s.cpp sym_no_ch:d.cpp:-fno-tree-ch --mode S

label:path[:flag,flag...]; --mode so (the whole build: cc1plus, as, ld; the
default), c (object) or S (cc1plus alone).
"""
import argparse
import os
import resource
import statistics
import subprocess
import tempfile

BASE = ["-O3", "-fPIC", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-fno-plt", "-std=c++17",
        "-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl", "-mavx2", "-mfma", "-mprefer-vector-width=512"]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", type=int)
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--mode", choices=["so", "c", "S"], default="so")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    a = ap.parse_args()
    cases = []
    for spec in a.cases:
        label, path, *rest = spec.split(":", 2)
        cases.append((label, path, rest[0].split(",") if rest else []))
    times = {label: [] for label, _, _ in cases}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.rounds):
            for label, path, extra in (cases if i % 2 == 0 else cases[::-1]):
                if a.mode == "so":
                    cmd = [a.cxx, "-shared"] + BASE + extra + ["-x", "c++", path, "-o", tmp + "/k.so",
                                                               "-Wl,--as-needed", "-lmvec"]
                else:
                    cmd = [a.cxx] + BASE + extra + ["-" + a.mode, "-x", "c++", path, "-o", tmp + "/k.out"]
                c0 = children_cpu()
                subprocess.run(cmd, check=True)
                times[label].append(children_cpu() - c0)
    ref = statistics.median(times[cases[0][0]])
    for label, _, _ in cases:
        m = statistics.median(times[label])
        print(f"{label:24s} median {m * 1e3:6.1f} ms  min {min(times[label]) * 1e3:6.1f} ms  ratio {m / ref:.3f}")


if __name__ == "__main__":
    main()
