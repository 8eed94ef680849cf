#!/usr/bin/env bash
# Benchmark table of parallel BFS (`--threads`): each model with --threads 1 and with
# --threads N (default 2), full store, in one batch, optionally with -o (OUTPUT=1; then the
# two files are compared byte for byte).
#
#   tools/bench_threads.sh [MODEL.pnml ...]
#
# Environment: SPILLWAY (binary, default target/release/spillway), MODELS_DIR (default
# ../shared/models/mcc), THREADS (default 2), STORE (default full), REPEAT (runs per
# configuration, the fastest wall time is kept; default 3), OUTPUT (1: write .slts files),
# MEMORY (a --memory budget, e.g. 256M: the bounded path, vectors in segment files),
# STEAL_MAX (default 0.02: a run during which the hypervisor took more than this fraction
# of the machine's CPU time, the `steal` column of /proc/stat, is discarded and run again,
# at most 3 × REPEAT attempts in all).
# Prints a Markdown table: wall and CPU time, states/s, the speed-up of N threads over one,
# and peak RSS (VmHWM of the whole process, from /usr/bin/time); the last column counts the
# runs discarded for steal. On this project's shared 2-core VM the steal reached 35-47% of
# the CPU time in some hours and none in others: a wall time taken then measures the
# neighbours, not the threads.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SPILLWAY:-target/release/spillway}
DIR=${MODELS_DIR:-../shared/models/mcc}
THREADS=${THREADS:-2}
STORE=${STORE:-full}
REPEAT=${REPEAT:-3}
OUTPUT=${OUTPUT:-0}
MEMORY=${MEMORY:-}
STEAL_MAX=${STEAL_MAX:-0.02}
CORES=$(nproc)
# The machine's steal so far, in clock ticks (USER_HZ, 100 a second), all CPUs together.
steal() { awk '/^cpu /{ print $9 }' /proc/stat; }
if [ $# -eq 0 ]; then
  set -- "$DIR/Kanban/Kanban-PT-00005.pnml" "$DIR/SharedMemory/SharedMemory-PT-000010.pnml" \
    "$DIR/Peterson/Peterson-PT-3.pnml" "$DIR/Anderson/Anderson-PT-06.pnml"
fi
[ -x "$BIN" ] || cargo build --release
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -n "$MEMORY" ] && echo "(--memory $MEMORY)"
echo "| model | store | threads | states | transitions | wall s | CPU s | states/s | speed-up | peak RSS MiB | LTS | runs discarded (steal) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
for m in "$@"; do
  name=$(basename "$m" .pnml)
  one=""
  for t in 1 "$THREADS"; do
    best=""
    kept=0
    dropped=0
    while [ "$kept" -lt "$REPEAT" ] && [ $((kept + dropped)) -lt $((3 * REPEAT)) ]; do
      out=()
      [ "$OUTPUT" = 1 ] && out=(-o "$tmp/$name-$t.slts" --force)
      [ -n "$MEMORY" ] && out+=(--memory "$MEMORY")
      s0=$(steal)
      /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$BIN" explore "$m" --store "$STORE" \
        --threads "$t" --no-progress -q --stats-json "$tmp/stats.json" "${out[@]}"
      s1=$(steal)
      read -r wall user sys rss < "$tmp/time"
      if awk -v d=$((s1 - s0)) -v w="$wall" -v c="$CORES" -v m="$STEAL_MAX" \
        'BEGIN { exit !(d / 100 > m * w * c) }'; then
        dropped=$((dropped + 1))
        continue
      fi
      kept=$((kept + 1))
      if [ -z "$best" ] || awk -v a="$wall" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then
        best="$wall $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }') $rss"
        states=$(python3 -c "import json; print(json.load(open('$tmp/stats.json'))['states'])")
        trans=$(python3 -c "import json; print(json.load(open('$tmp/stats.json'))['transitions'])")
      fi
    done
    if [ -z "$best" ]; then
      echo "| $name | $STORE | $t | every run lost more than $STEAL_MAX of the CPU to steal |"
      continue
    fi
    read -r wall cpu rss <<< "$best"
    [ -z "$one" ] && one=$wall
    lts="-"
    if [ "$OUTPUT" = 1 ] && [ "$t" != 1 ]; then
      cmp -s "$tmp/$name-1.slts" "$tmp/$name-$t.slts" && lts="identical" || lts="DIFFERS"
    fi
    awk -v n="$name" -v st="$STORE" -v t="$t" -v s="$states" -v tr="$trans" -v w="$wall" \
      -v c="$cpu" -v o="$one" -v r="$rss" -v l="$lts" -v d="$dropped" \
      'BEGIN { printf "| %s | %s | %d | %d | %d | %.2f | %.2f | %.0f | %.2f× | %.0f | %s | %d |\n", n, st, t, s, tr, w, c, s / w, o / w, r / 1024, l, d }'
  done
done
