#!/usr/bin/env bash
# Storage benchmark: BFS with the state vectors in RAM vs forced into segment files
# (--spill always: 4 MiB mapped hot window, 64 MiB block cache) vs under a 64 MiB budget.
# Prints a markdown table: best-of-N wall and user seconds, slowdown vs RAM, peak RSS and the
# compression ratio of each spilled structure.
#
# usage: tools/bench_storage.sh [RUNS] [MODEL.pnml ...]
# (defaults: 3 runs; Kanban-PT-00005 and SharedMemory-PT-000010 from ../shared/models)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
shift || true
MODELS=("$@")
if [ ${#MODELS[@]} -eq 0 ]; then
  MODELS=(../shared/models/mcc/Kanban/Kanban-PT-00005.pnml
          ../shared/models/mcc/SharedMemory/SharedMemory-PT-000010.pnml)
fi
cargo build --release -q
BIN=target/release/spillway
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

CONFIGS=("ram|" "forced|--spill always" "mem64M|--memory 64M")

echo "| model | config | states | transitions | wall s (best of $RUNS) | user s | slowdown (wall) | slowdown (user) | peak RSS MiB | structures: RAM MiB / disk MiB / compression |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
for m in "${MODELS[@]}"; do
  name=$(basename "$m" .pnml)
  # Interleave the configurations so that background load hits them alike.
  for r in $(seq 1 "$RUNS"); do
    for c in "${CONFIGS[@]}"; do
      tag=${c%%|*}; args=${c#*|}
      # shellcheck disable=SC2086
      /usr/bin/time -f "%e %U" -o "$TMP/$name.$tag.$r.time" \
        "$BIN" explore "$m" --no-progress -q $args --stats-json "$TMP/$name.$tag.$r.json"
    done
  done
  python3 - "$TMP" "$name" "$RUNS" <<'PY'
import json, sys
tmp, name, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = {}
for tag in ["ram", "forced", "mem64M"]:
    walls, users, stats = [], [], None
    for r in range(1, runs + 1):
        w, u = open(f"{tmp}/{name}.{tag}.{r}.time").read().split()[-2:]
        walls.append(float(w)); users.append(float(u))
        stats = json.load(open(f"{tmp}/{name}.{tag}.{r}.json"))
    rows[tag] = (min(walls), min(users), stats)
w0, u0, _ = rows["ram"]
for tag, (w, u, s) in rows.items():
    structs = "; ".join(
        f"{x['name']} {x['ram_bytes']/2**20:.1f} / {x['disk_bytes']/2**20:.1f} / "
        + (f"{x['compression_ratio']:.1f}x" if x.get('compression_ratio') else "-")
        for x in s.get("structures", [])) or "all in RAM"
    print(f"| {name} | {tag} | {s['states']} | {s['transitions']} | {w:.2f} | {u:.2f} | "
          f"{w/w0:.2f}x | {u/u0:.2f}x | {s['peak_rss_bytes']/2**20:.1f} | {structs} |")
PY
done
