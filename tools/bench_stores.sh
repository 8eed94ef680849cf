#!/usr/bin/env bash
# Benchmark table: the full store against ComBack (several variant combinations) and the two
# lossy baselines, in BFS, on the models named below (default: the three of the ComBack issue).
#
#   tools/bench_stores.sh [MODEL.pnml ...]
#
# Environment: SPILLWAY (binary, default target/release/spillway), MODELS_DIR (default
# ../shared/models/mcc), CONFIGS (override the list of store configurations, one per line:
# "name|flags"), REPEAT (runs per configuration, the fastest is kept; default 1).
# Prints a Markdown table: wall and CPU (user + system) time, both relative to the full store
# (CPU time is the fairer figure on a shared machine), RAM bytes per state of
# the store (ComBack: state table + cache + search path; the backedge table separately, as it
# moves to disk), reconstructions and the firings (forward) or unfirings (backward) spent in them, peak RSS of the whole process.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SPILLWAY:-target/release/spillway}
DIR=${MODELS_DIR:-../shared/models/mcc}
REPEAT=${REPEAT:-1}
if [ $# -eq 0 ]; then
  set -- "$DIR/Kanban/Kanban-PT-00005.pnml" "$DIR/SharedMemory/SharedMemory-PT-000010.pnml" "$DIR/Peterson/Peterson-PT-3.pnml"
fi
CONFIGS=${CONFIGS:-"full|--store full
comback (defaults: automatic cache)|--store comback
comback (cache 2^16)|--store comback --comback-cache 65536
comback (cache 2^17)|--store comback --comback-cache 131072
comback (cache 2^18)|--store comback --comback-cache 262144
comback (cache 2^18, backward)|--store comback --comback-cache 262144 --comback-backward
comback (cache 2^18, vector waiting set)|--store comback --comback-cache 262144 --comback-waiting vectors
comback (cache 2^18, no path-opt, no MTF)|--store comback --comback-cache 262144 --no-comback-path-opt --no-comback-mtf
hashcompact (64 bits)|--store hashcompact --hash-bits 64
bitstate (2^32 bits, k=3)|--store bitstate --bitstate-log2-bits 32 --bitstate-k 3"}
[ -x "$BIN" ] || cargo build --release
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| model | store | states | wall s | × full | CPU s | × full | RAM B/state | backedge B/state | reconstructions | replay fires | peak RSS MiB |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for m in "$@"; do
  name=$(basename "$m" .pnml)
  full_time=""
  full_cpu=""
  while IFS='|' read -r label flags; do
    [ -z "$label" ] && continue
    best=""
    for _ in $(seq "$REPEAT"); do
      # shellcheck disable=SC2086
      /usr/bin/time -f "%U %S" -o "$tmp/t" "$BIN" explore "$m" --no-progress -q $flags --stats-json "$tmp/s.json"
      t=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["wall_seconds"])' "$tmp/s.json")
      if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if $t < $best else 1)"; then
        best=$t; cp "$tmp/s.json" "$tmp/best.json"
        cpu=$(awk '{print $1 + $2}' "$tmp/t")
      fi
    done
    [ -z "$full_time" ] && full_time=$best && full_cpu=$cpu
    python3 - "$tmp/best.json" "$name" "$label" "$full_time" "$cpu" "$full_cpu" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
name, label, full = sys.argv[2], sys.argv[3], float(sys.argv[4])
cpu, full_cpu = float(sys.argv[5]), float(sys.argv[6])
n = max(s["states"], 1)
g = lambda k, d="": s.get("store_details", {}).get(k, s.get(k, d))
be = g("backedge_bytes")
be = f'{be / n:.1f}' if be != "" else ""
fires = g("reconstruction_fires", None)
fires = "" if fires is None else fires + g("backward_unfires", 0)
exact = "" if s["exact"] else f' (inexact, P(omission) ≤ {s["omission_probability"]:.1e})'
print(f'| {name} | {label}{exact} | {s["states"]} | {s["wall_seconds"]:.2f} | {s["wall_seconds"] / full:.2f} | '
      f'{cpu:.2f} | {cpu / max(full_cpu, 1e-9):.2f} | '
      f'{s["store_ram_bytes_per_state"]:.1f} | {be} | {g("reconstructions")} | {fires} | '
      f'{s["peak_rss_bytes"] / 2**20:.0f} |')
PY
  done <<< "$CONFIGS"
done
