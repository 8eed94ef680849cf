#!/usr/bin/env bash
# Cost of checkpoints: uninterrupted runs in RAM (the default) and with segment files
# (--spill always) against the same run with --checkpoint-every INTERVAL, for each interval
# given (without --memory a checkpointed run keeps its vectors in RAM and copies them to
# segment files at each checkpoint); prints wall and CPU seconds, the checkpoints written
# and the mean time of one. SPILLWAY: the binary (default target/release/spillway).
#
#   tools/bench_checkpoint.sh MODEL [INTERVAL...]      (default intervals: 1m 10s)
#
# Output files go to $BENCH_DIR (default: a fresh directory under /tmp); they are removed.
set -euo pipefail
model=${1:?usage: tools/bench_checkpoint.sh MODEL [INTERVAL...]}
shift
intervals=("$@")
[ ${#intervals[@]} -eq 0 ] && intervals=(1m 10s)
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${SPILLWAY:-$here/target/release/spillway}
[ -x "$bin" ] || (cd "$here" && cargo build --release --quiet)
dir=${BENCH_DIR:-$(mktemp -d /tmp/spillway-bench-XXXXXX)}
mkdir -p "$dir"
trap 'rm -rf "$dir"/run "$dir"/*.slts "$dir"/*.partial' EXIT

run() { # label, extra args...
    local label=$1; shift
    rm -rf "$dir/run" "$dir/out.slts"
    /usr/bin/time -f "%e %U %S %M" -o "$dir/time" \
        "$bin" explore "$model" -o "$dir/out.slts" -q --no-progress --stats-json "$dir/stats.json" "$@"
    read -r wall user sys rss < "$dir/time"
    python3 - "$label" "$wall" "$user" "$sys" "$rss" "$dir/stats.json" <<'PY'
import json, sys
label, wall, user, sys_, rss, path = sys.argv[1:]
s = json.load(open(path))
n = s.get("checkpoints", 0)
t = s.get("checkpoint_seconds", 0.0)
print(f"| {label} | {s['states']:,} | {float(wall):.1f} | {float(user)+float(sys_):.1f} | {n} | "
      f"{(t / n if n else 0):.3f} | {int(rss) / 1024:.0f} |")
PY
}

echo "model: $model"
echo "| run | states | wall s | CPU s | checkpoints | s per checkpoint | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|"
run "no checkpoints (in RAM)"
run "no checkpoints (--spill always)" --spill always
for iv in "${intervals[@]}"; do
    run "--checkpoint-every $iv" --workdir "$dir/run" --checkpoint-every "$iv"
done
