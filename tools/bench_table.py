#!/usr/bin/env python3
"""End-to-end benchmark table: run `spillway explore` on models and print states/s, peak RSS,
bytes per state in RAM and (with --output) on disk.

Usage:
  cargo build --release
  tools/bench_table.py                               # default models, BFS, full store
  tools/bench_table.py --order dfs --runs 3 -- --store full
  tools/bench_table.py --models mcc/Kanban/Kanban-PT-00005.pnml --output

Models are paths relative to ../shared/models (or absolute). Extra arguments after `--` are
passed to `spillway explore`. Each model runs --runs times; the fastest run is reported (the
machine is shared and noisy; the minimum is the most repeatable figure).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "models")
DEFAULT_MODELS = [
    "mcc/Kanban/Kanban-PT-00005.pnml",
    "mcc/SharedMemory/SharedMemory-PT-000010.pnml",
    "mcc/Peterson/Peterson-PT-3.pnml",
    "mcc/FMS/FMS-PT-00005.pnml",
    "mcc/TCPcondis/TCPcondis-PT-05.pnml",
    "mcc/LamportFastMutEx/LamportFastMutEx-PT-4.pnml",
]
# LTSmin pnml2lts-mc, one thread, BFS, no LTS output, on this machine kind (states/s).
LTSMIN = {
    "Kanban-PT-00005": 380_000,
    "SharedMemory-PT-000010": 100_000,
    "Peterson-PT-3": 140_000,
}


def run(binary, model, args, output):
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "stats.json")
        cmd = [binary, "explore", model, "--no-progress", "--quiet", "--stats-json", stats] + args
        if output:
            cmd += ["-o", os.path.join(tmp, "out.slts")]
        subprocess.run(cmd, check=True)
        with open(stats) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--order", default="bfs")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--output", action="store_true", help="also write the native LTS and report its size")
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "spillway"))
    ap.add_argument("extra", nargs="*", help="arguments passed to spillway explore (after --)")
    a = ap.parse_args()
    if not os.path.exists(a.binary):
        sys.exit(f"{a.binary} not found: run `cargo build --release` first")
    print("| model | states | transitions | time (s) | states/s | vs LTSmin | peak RSS (MiB) | RAM B/state | disk B/transition |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m in a.models:
        path = m if os.path.isabs(m) else os.path.join(SHARED, m)
        best = None
        for _ in range(a.runs):
            s = run(a.binary, path, ["--order", a.order] + a.extra, a.output)
            if best is None or s["wall_seconds"] < best["wall_seconds"]:
                best = s
        name = os.path.basename(path).rsplit(".", 1)[0]
        ref = LTSMIN.get(name)
        vs = f"{best['states_per_second'] / ref:.1f}x" if ref else "-"
        disk = f"{best['output_bytes'] / max(best['transitions'], 1):.2f}" if best.get("output_bytes") else "-"
        print(
            f"| {name} | {best['states']:,} | {best['transitions']:,} | {best['wall_seconds']:.2f} | "
            f"{best['states_per_second']:,.0f} | {vs} | {best['peak_rss_bytes'] / 2**20:.0f} | "
            f"{best['store_ram_bytes_per_state']:.1f} | {disk} |"
        )


if __name__ == "__main__":
    main()
