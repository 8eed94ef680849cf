#!/usr/bin/env python3
"""Benchmark table for the Δ-markings store against the full store.

For each model: one run with `--store full`, then `--store delta --k-delta K` for each K,
all in the same order (BFS by default), no LTS output. Prints a Markdown table with, per
run, CPU time (user + system of the child process; the machine is shared, so CPU time is
steadier than wall time), the ratio to the full store's CPU time, total store bytes per
state (RAM + disk, as reported in --stats-json: store_ram_bytes + store_disk_bytes) and
that as a percentage of the full store's bytes per state. The JSON of every run is
written next to the table with --json.

Usage:
  cargo build --release
  tools/delta_table.py                          # default six models, K = 5 10 20 50
  tools/delta_table.py --ks 5 50 --models mcc/Kanban/Kanban-PT-00005.pnml
  tools/delta_table.py --order dfs -- --no-backward      # extra args go to delta runs only

Models are paths relative to ../shared/models (or absolute).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "models")
DEFAULT_MODELS = [
    "mcc/Kanban/Kanban-PT-00005.pnml",
    "mcc/FMS/FMS-PT-00005.pnml",
    "mcc/TCPcondis/TCPcondis-PT-05.pnml",
    "mcc/SharedMemory/SharedMemory-PT-000010.pnml",
    "mcc/Peterson/Peterson-PT-3.pnml",
    "mcc/QuasiCertifProtocol/QuasiCertifProtocol-PT-06.pnml",
]


def run(binary, model, args):
    """Runs one exploration; returns (stats dict, cpu seconds of the child)."""
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "stats.json")
        cmd = [binary, "explore", model, "--no-progress", "--quiet", "--stats-json", stats] + args
        p = subprocess.Popen(cmd)
        _, status, usage = os.wait4(p.pid, 0)
        if status != 0:
            sys.exit(f"failed ({status}): {' '.join(cmd)}")
        with open(stats) as f:
            return json.load(f), usage.ru_utime + usage.ru_stime


def places(model):
    m = re.search(r"(\d+) places", model)
    return int(m.group(1)) if m else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--ks", nargs="*", type=int, default=[5, 10, 20, 50])
    ap.add_argument("--order", default="bfs")
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "spillway"))
    ap.add_argument("--json", help="write every run's stats to this file")
    ap.add_argument("extra", nargs="*", help="arguments passed to the delta runs (after --)")
    a = ap.parse_args()
    if not os.path.exists(a.binary):
        sys.exit(f"{a.binary} not found: run cargo build --release first")
    runs = []
    head = "| model | places | states | full: CPU s, B/state |"
    head += "".join(f" K={k}: CPU ×, B/state (% of full) |" for k in a.ks)
    print(head)
    print("|" + "---|" * (4 + len(a.ks)))
    for m in a.models:
        path = m if os.path.isabs(m) else os.path.join(SHARED, m)
        full, full_cpu = run(a.binary, path, ["--order", a.order, "--store", "full"])
        full_b = (full["store_ram_bytes"] + full.get("store_disk_bytes", 0)) / full["states"]
        runs.append({"model": m, "store": "full", "cpu_seconds": full_cpu, "stats": full})
        row = f"| {os.path.basename(m).removesuffix('.pnml')} | {places(full['model'])} | {full['states']:,} | {full_cpu:.1f} s, {full_b:.1f} |"
        for k in a.ks:
            st, cpu = run(a.binary, path, ["--order", a.order, "--store", "delta", "--k-delta", str(k)] + a.extra)
            if (st["states"], st["transitions"]) != (full["states"], full["transitions"]):
                sys.exit(f"{m} K={k}: {st['states']}/{st['transitions']} differs from full store")
            b = (st["store_ram_bytes"] + st.get("store_disk_bytes", 0)) / st["states"]
            row += f" {cpu / full_cpu:.2f}×, {b:.2f} ({100 * b / full_b:.0f}%) |"
            runs.append({"model": m, "store": "delta", "k": k, "cpu_seconds": cpu, "stats": st})
        print(row, flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
