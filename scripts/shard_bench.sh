#!/usr/bin/env bash
# Sharded fast index against a single `index` (docs/benchmarks.md, "Sharded indexing"):
#   scripts/shard_bench.sh CORPUS_DIR WORK_DIR [N...]     (default N: 1 2)
# Indexes CORPUS_DIR (e.g. from scripts/make_scale_corpus.py) with `init`'s defaults (fast method,
# local all-MiniLM-L6-v2 embeddings) once with `index`, then for each N with N shard processes at
# once (N workers), the merge's graph phase (`--merge --phase graph`), N embed shards at once
# (`--shard K/N --phase embed`) and the merge. Prints each phase's wall and CPU seconds (user +
# system, which a loaded machine distorts less) and the steps' seconds, and checks that every
# published file equals the single run's byte for byte. EMBED_PHASE=0 merges without the embed
# phase (the merge embeds the entities and reports itself). EMBED_NAMES sets embed_text.names
# (e.g. EMBED_NAMES='[]': the graph stages only, no embed shards; the merge's graph phase still runs).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${GRAPHRAG_RS:-target/debug/graphrag-rs}")
corpus=$(realpath "$1"); work=$2; shift 2
counts=("${@:-1 2}")
embed_phase=${EMBED_PHASE:-1}
embed_names=${EMBED_NAMES:-}
fresh() {
  rm -rf "$1"; "$BIN" -q init --root "$1" >/dev/null; cp -a "$corpus"/. "$1/input/"
  [ -z "$embed_names" ] || python3 scripts/set_embed_names.py "$1/settings.yaml" "$embed_names"
}
# timed LABEL CMD...: runs CMD, appends "LABEL wall user sys peak_rss_kb" to $work/times.
timed() { local label=$1; shift; /usr/bin/time -f "$label %e %U %S %M" -a -o "$work/times" "$@"; }
steps() { python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("    steps (wall s): " + ", ".join(f"{k} {v['overall']:.1f}" for k, v in s["workflows"].items() if v["overall"] >= 0.05))
PY
}
# at_once LABEL N ARGS...: N processes `index ARGS --shard K/N` at once, each timed; then the set's wall.
at_once() {
  local label=$1 n=$2; shift 2
  local start pids=()
  start=$(date +%s.%N)
  for k in $(seq 0 $((n - 1))); do timed "$label$k" "$BIN" -q index "$@" --shard "$k/$n" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p"; done
  echo "$label-wall $(echo "$(date +%s.%N) - $start" | bc)" >> "$work/times"
}
mkdir -p "$work"; : > "$work/times"
fresh "$work/single"
timed single "$BIN" -q index --method fast --root "$work/single"
steps "$work/single/output/stats.json"
for n in ${counts[@]}; do
  root="$work/shards$n"; fresh "$root"
  at_once "n$n-shard" "$n" --method fast --root "$root"
  if [ "$embed_phase" = 1 ]; then
    timed "n$n-merge-graph" "$BIN" -q index --method fast --merge --phase graph --root "$root"
    steps "$root/output/.update/stats.json"
    [ "$embed_names" = "[]" ] || at_once "n$n-embed" "$n" --method fast --phase embed --root "$root"
  fi
  timed "n$n-merge" "$BIN" -q index --method fast --merge --root "$root"
  steps "$root/output/stats.json"
  (cd "$work/single/output" && find . -path ./.\* -prune -o -type f -print) | while read -r f; do
    case "$f" in ./document_status.parquet|./stats.json) continue ;; esac
    cmp -s "$work/single/output/$f" "$root/output/$f" || { echo "DIFFERS: $f"; exit 1; }
  done
  echo "  $n shards: published files byte-identical to the single run's"
done
echo "phase wall_s user_s sys_s peak_rss_kb:"; cat "$work/times"
