#!/usr/bin/env python3
"""The tree store against the full store, side by side in one batch (issue: tree compression).

    tools/tree_table.py [--rounds N] [--threads 1,2] [MODEL.pnml ...]

Default models: Kanban-PT-00005, SharedMemory-PT-000010, Peterson-PT-3,
QuasiCertifProtocol-PT-06 and Anderson-PT-06 from ../shared/models/mcc. For each model and
round it runs, interleaved, `spillway explore MODEL --store S --threads T` (BFS, no LTS
output, no other flag) for S in full, tree and T in --threads; every figure comes from the
run's `--stats-json` (`wall_seconds`, `cpu_seconds`, `peak_rss_bytes`, the process's VmHWM,
and `store_ram_bytes`), medians over the rounds. Prints a Markdown table: store bytes per
state, peak RSS per state, wall and CPU time, and the tree's time relative to the full
store's at the same thread count. `--quick-rounds` sets the rounds of models whose full
one-thread run takes over 15 s (default 1).

Environment: SPILLWAY (binary, default target/release/spillway), MODELS_DIR (default
../shared/models/mcc).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("SPILLWAY", os.path.join(ROOT, "target/release/spillway"))
DIR = os.environ.get("MODELS_DIR", os.path.join(ROOT, "../shared/models/mcc"))
DEFAULT = [
    "Kanban/Kanban-PT-00005",
    "SharedMemory/SharedMemory-PT-000010",
    "Peterson/Peterson-PT-3",
    "QuasiCertifProtocol/QuasiCertifProtocol-PT-06",
    "Anderson/Anderson-PT-06",
]


def run(model, store, threads, tmp):
    out = os.path.join(tmp, "s.json")
    cmd = [BIN, "explore", model, "--store", store, "--threads", str(threads),
           "--no-progress", "-q", "--stats-json", out]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick-rounds", type=int, default=1)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    models = a.models or [os.path.join(DIR, m + ".pnml") for m in DEFAULT]
    threads = [int(t) for t in a.threads.split(",")]
    print(f"<!-- {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {BIN} -->")
    print("| model | states | threads | full: wall / CPU s, peak RSS B/state | "
          "tree: wall / CPU s, peak RSS B/state | tree store B/state | tree / full wall | "
          "tree / full CPU |")
    print("|---|---:|---:|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            runs = {}
            rounds = a.rounds
            r = 0
            while r < rounds:
                for t in threads:
                    for s in ("full", "tree"):
                        d = run(m, s, t, tmp)
                        runs.setdefault((s, t), []).append(d)
                        if r == 0 and s == "full" and t == threads[0] \
                                and d["wall_seconds"] > 15:
                            rounds = min(rounds, a.quick_rounds)
                r += 1
            name = os.path.basename(m)[:-len(".pnml")]
            for t in threads:
                f, tr = runs[("full", t)], runs[("tree", t)]
                n = f[0]["states"]
                if any(d["states"] != n for d in f + tr):
                    sys.exit(f"{name}: the stores disagree on the state count")
                med = lambda ds, k: statistics.median(d[k] for d in ds)
                fw, fc, fr = med(f, "wall_seconds"), med(f, "cpu_seconds"), med(f, "peak_rss_bytes")
                tw, tc, trs = (med(tr, "wall_seconds"), med(tr, "cpu_seconds"),
                               med(tr, "peak_rss_bytes"))
                store = med(tr, "store_ram_bytes")
                print(f"| {name} | {n:,} | {t} | {fw:.2f} / {fc:.2f}, {fr / n:.1f} | "
                      f"{tw:.2f} / {tc:.2f}, {trs / n:.1f} | {store / n:.1f} | "
                      f"{tw / fw:.2f}× | {tc / fc:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
