#!/usr/bin/env python3
"""Benchmark table of `--store snapshots` presets against standard BFS (full store).

For each model: standard BFS (`--store full`, no output) gives the time baseline; each
preset (with and without --backtrack) is run with no output and reports its peak of states
held (snapshots + Open + Backtrack set) as a fraction of the true states, its output LTS size
(states and transitions) relative to the true state space, and its CPU time (user + system)
relative to standard BFS. True counts come from REFERENCE.tsv.

usage: tools/snapshots_table.py [--runs N] [--timeout S] [--shared ../shared/models] MODEL_REL...
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(HERE, "..", "target", "release", "spillway")
CONFIGS = [
    ("frontier-safety-net", ["--preset", "frontier-safety-net"]),
    ("frontier-safety-net + backtrack", ["--preset", "frontier-safety-net", "--backtrack"]),
    ("pebble", ["--preset", "pebble"]),
    ("pebble + backtrack", ["--preset", "pebble", "--backtrack"]),
]


def reference(shared):
    rows = {}
    with open(os.path.join(shared, "REFERENCE.tsv")) as f:
        next(f)
        for line in f:
            p = line.rstrip("\n").split("\t")
            try:
                rows[p[0]] = (int(p[3]), int(p[4]))
            except ValueError:
                pass
    return rows


def run(model, args, runs, timeout=None):
    """Best CPU time of `runs` runs, and the stats of that run; None when a run takes
    longer than `timeout` seconds (wall)."""
    best = None
    for _ in range(runs):
        with tempfile.NamedTemporaryFile(suffix=".json") as js:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            try:
                r = subprocess.run([BIN, "explore", model, "-q", "--no-progress",
                                    "--stats-json", js.name] + args, timeout=timeout)
            except subprocess.TimeoutExpired:
                return None
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r.returncode != 0:
                sys.exit(f"{model} {args}: exit {r.returncode}")
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            stats = json.load(open(js.name))
        if best is None or cpu < best[0]:
            best = (cpu, stats)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=None,
                    help="stop a snapshots run after this many seconds (wall) and say so")
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "models"))
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    refs = reference(a.shared)
    print("| model | states | configuration | peak held / states | output states / states | output transitions / transitions | CPU / standard BFS |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for rel in a.models:
        states, transitions = refs[rel]
        model = os.path.join(a.shared, rel)
        base_cpu, base = run(model, [], a.runs)
        assert base["states"] == states, rel
        name = os.path.basename(rel).rsplit(".", 1)[0]
        for label, args in CONFIGS:
            got = run(model, ["--store", "snapshots"] + args, a.runs, a.timeout)
            if got is None:
                print(f"| {name} | {states:,} | {label} | stopped after {a.timeout:.0f} s | | | |",
                      flush=True)
                continue
            cpu, s = got
            d = s["store_details"]
            print(f"| {name} | {states:,} | {label} | {d['peak_states_held'] / states:.2f} | "
                  f"{s['states'] / states:.2f} | {s['transitions'] / transitions:.2f} | "
                  f"{cpu / base_cpu:.2f} ({cpu:.2f} s vs {base_cpu:.2f} s) |", flush=True)


if __name__ == "__main__":
    main()
