#!/usr/bin/env bash
# Sharded fast index against a single `index` (docs/benchmarks.md, "Sharded indexing"):
#   scripts/shard_bench.sh CORPUS_DIR WORK_DIR [N...]     (default N: 1 2)
# Indexes CORPUS_DIR (e.g. from scripts/make_scale_corpus.py) with `init`'s defaults (fast method,
# local all-MiniLM-L6-v2 embeddings) once with `index`, then for each N with N shard processes at
# once (N workers) and the merge. Prints each phase's wall and CPU seconds (user + system, which a
# loaded machine distorts less) and the steps' seconds, and checks that every published file equals
# the single run's byte for byte.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${GRAPHRAG_RS:-target/debug/graphrag-rs}")
corpus=$(realpath "$1"); work=$2; shift 2
counts=("${@:-1 2}")
fresh() { rm -rf "$1"; "$BIN" -q init --root "$1" >/dev/null; cp -a "$corpus"/. "$1/input/"; }
# timed LABEL CMD...: runs CMD, appends "LABEL wall cpu" to $work/times.
timed() { local label=$1; shift; /usr/bin/time -f "$label %e %U %S" -a -o "$work/times" "$@"; }
steps() { python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("    steps (wall s): " + ", ".join(f"{k} {v['overall']:.1f}" for k, v in s["workflows"].items() if v["overall"] >= 0.05))
PY
}
mkdir -p "$work"; : > "$work/times"
fresh "$work/single"
timed single "$BIN" -q index --method fast --root "$work/single"
steps "$work/single/output/stats.json"
for n in ${counts[@]}; do
  root="$work/shards$n"; fresh "$root"
  start=$(date +%s.%N)
  pids=()
  for k in $(seq 0 $((n - 1))); do timed "n$n-shard$k" "$BIN" -q index --method fast --shard "$k/$n" --root "$root" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p"; done
  echo "n$n-shards-wall $(echo "$(date +%s.%N) - $start" | bc)" >> "$work/times"
  timed "n$n-merge" "$BIN" -q index --method fast --merge --root "$root"
  steps "$root/output/stats.json"
  for f in "$work/single/output/"*.parquet; do
    name=$(basename "$f"); [ "$name" = document_status.parquet ] && continue
    cmp -s "$f" "$root/output/$name" || { echo "DIFFERS: $name"; exit 1; }
  done
  echo "  $n shards: published tables byte-identical to the single run's"
done
echo "phase wall_s user_s sys_s:"; cat "$work/times"
