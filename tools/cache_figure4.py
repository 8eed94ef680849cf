#!/usr/bin/env python3
"""The shape of Figure 4 of Godefroid, Holzmann, Pirottin ("State space caching revisited")
for spillway's --store cache: per model, explored transitions relative to the true count,
and time, against the cache size as a fraction of the states, with and without sleep sets.

Usage: tools/cache_figure4.py [--timeout S] [--replacement R] MODEL.pnml ...
(true counts from ../shared/models/REFERENCE.tsv; the binary is target/release/spillway).
Prints a Markdown table; a run that exceeds the timeout is shown as "> S s" (it blew up:
the search would end, but re-explores exponentially many paths).
"""

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "spillway")
REF = os.path.join(ROOT, "..", "shared", "models", "REFERENCE.tsv")
FRACTIONS = [1.0, 0.5, 0.25, 0.1, 0.05, 0.02, 0.01]


def reference():
    rows = {}
    with open(REF) as f:
        next(f)
        for line in f:
            p = line.rstrip("\n").split("\t")
            try:
                rows[os.path.basename(p[0])] = (int(p[3]), int(p[4]))
            except ValueError:
                pass
    return rows


def run(model, args, timeout):
    cmd = [BIN, "explore", model, "--order", "dfs", "--no-progress", "-q",
           "--stats-json", "-"] + args
    t = time.time()
    try:
        out = subprocess.run(cmd, capture_output=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return None
    s = json.loads(out.stdout)
    s["_wall"] = time.time() - t
    return s


def main():
    argv = sys.argv[1:]
    timeout, replacement = 60.0, "random"
    while argv and argv[0].startswith("--"):
        if argv[0] == "--timeout":
            timeout = float(argv[1])
        elif argv[0] == "--replacement":
            replacement = argv[1]
        argv = argv[2:]
    refs = reference()
    print("| model (states, transitions) | store | cache (% of states) | states stored at peak "
          "| transitions explored / true | time (s) | max depth |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for model in argv:
        states, transitions = refs[os.path.basename(model)]
        full = run(model, [], timeout * 10)
        name = f"{os.path.basename(model)[:-5]} ({states:,}, {transitions:,})"
        print(f"| {name} | full (DFS) | — | {full['states']:,} | "
              f"{full['transitions'] / transitions:.2f} | {full['wall_seconds']:.2f} | "
              f"{full['max_depth']:,} |")
        for sleep in [False, True]:
            label = "cache + sleep sets" if sleep else "cache"
            # Sizes from the largest down, then the max stack depth of the first run. Once
            # a size blows up (the timeout), smaller ones are not run: they only get worse.
            sizes = [max(1, round(states * f)) for f in FRACTIONS]
            rows, depth, blown = [], None, False
            while sizes:
                size = sizes.pop(0)
                s = None
                if not blown:
                    args = ["--store", "cache", "--cache-size", str(size),
                            "--replacement", replacement] + (["--sleep-sets"] if sleep else [])
                    s = run(model, args, timeout)
                    blown = s is None
                if depth is None and s is not None:
                    depth = s["max_depth"]
                    sizes = sorted(set(sizes + [depth]) - {r[0] for r in rows}, reverse=True)
                rows.append((size, s))
            for size, s in sorted(rows, key=lambda r: -r[0]):
                pct = 100.0 * size / states
                tag = " (= max depth)" if size == depth else ""
                if s is None:
                    print(f"| {name} | {label} | {pct:.2f}{tag} | — | — | > {timeout:.0f} (blew up) | — |")
                else:
                    d = s["store_details"]
                    print(f"| {name} | {label} | {pct:.2f}{tag} | {d['stored_peak']:,} | "
                          f"{s['transitions'] / transitions:.2f} | {s['wall_seconds']:.2f} | "
                          f"{s['max_depth']:,} |")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
