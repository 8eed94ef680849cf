#!/bin/sh
# Bounded-RAM acceptance runs (issue #19): each model explored in BFS with each store of
# $STORES (default: full comback) unbounded and under --memory 256M (or $MEMORY), LTS files
# compared byte for byte; prints time (wall and CPU), peak RSS (VmHWM, from the stats) and the
# spilled index's disk traffic per state.
# Usage: tools/bounded_bench.sh [MODELS_DIR]   (default ../shared/models/mcc)
#        MODELS="Anderson/Anderson-PT-06" STORES=comback tools/bounded_bench.sh
set -eu
M=${1:-../shared/models/mcc}
MEMORY=${MEMORY:-256M}
BIN=${BIN:-target/release/spillway}
OUT=${OUT:-$(mktemp -d)}
[ -x "$BIN" ] || cargo build --release
STORES=${STORES:-full comback}
MODELS=${MODELS:-SwimmingPool/SwimmingPool-PT-03 Anderson/Anderson-PT-06}
for m in $MODELS; do
  for store in $STORES; do
    n=$(basename "$m")-$store
    "$BIN" explore "$M/$m.pnml" -q --store "$store" -o "$OUT/$n-ref.slts" --stats-json "$OUT/$n-ref.json"
    "$BIN" explore "$M/$m.pnml" -q --store "$store" --memory "$MEMORY" -o "$OUT/$n-mem.slts" --stats-json "$OUT/$n-mem.json"
    if cmp -s "$OUT/$n-ref.slts" "$OUT/$n-mem.slts"; then same=identical; else same=DIFFERENT; fi
    python3 - "$OUT/$n-ref.json" "$OUT/$n-mem.json" "$n" "$same" "$MEMORY" <<'PY'
import json, sys
r, m = (json.load(open(f)) for f in sys.argv[1:3])
d = m.get("store_details", {})
s = m["states"]
cpu = lambda v: v.get("cpu_seconds", float("nan"))
print(f"{sys.argv[3]}: {s} states, {m['transitions']} transitions; unbounded {r['wall_seconds']:.1f} s "
      f"(CPU {cpu(r):.1f} s), {r['peak_rss_bytes'] / 2**20:.0f} MiB; --memory {sys.argv[5]} {m['wall_seconds']:.1f} s "
      f"(CPU {cpu(m):.1f} s, {cpu(m) / cpu(r):.2f}x), {m['peak_rss_bytes'] / 2**20:.0f} MiB; "
      f"index read {d.get('index_bytes_read', 0) / s:.1f} B/state, written {d.get('index_bytes_written', 0) / s:.1f} B/state, "
      f"vectors on disk {m['store_disk_bytes'] / s:.1f} B/state; LTS {sys.argv[4]}")
PY
    rm -f "$OUT/$n-ref.slts" "$OUT/$n-mem.slts"
  done
done
