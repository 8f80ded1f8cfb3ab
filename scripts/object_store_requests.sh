#!/usr/bin/env bash
# Requests and seconds of an index, a cached re-index (a new output, the same cache) and an update
# (+1 document) with input, output and cache on S3 (moto on loopback) against the same runs with all
# three in local folders, both against the mock LLM (docs/benchmarks.md, "Object storage").
# S3 requests are counted from moto's request log (a GET with `list-type` is a LIST) and, beside
# them, the run's own count of the requests its steps made (stats.json `storage_requests`).
#
# Usage: scripts/object_store_requests.sh [BIN_DIR] [CORPUS_DIR] [UPDATE_DOC] [METHOD]
#   BIN_DIR     folder of graphrag-rs and graphrag-mock-llm (default target/release)
#   CORPUS_DIR  a folder of *.txt documents (default: examples/christmas-carol)
#   UPDATE_DOC  the document the update adds (default: 8 KB cut from the first document)
#   METHOD      index method (default fast)
# env: EMBED_DIM (mock embedding dimension, default 3072), BACKENDS (default "s3 local"),
#      RUNS (with both backends: also time the cached re-index RUNS times, S3 against local, farm-bench)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$repo/target/release}" && pwd)
corpus=$(cd "${2:-$repo/examples/christmas-carol}" && pwd)
update_doc=${3:-}
method=${4:-fast}
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
s3_port=$(free_port); mock_port=$(free_port)
moto_server -H 127.0.0.1 -p "$s3_port" >"$work/moto.log" 2>&1 & pids+=($!)
"$bin/graphrag-mock-llm" --port "$mock_port" --embed-dim "${EMBED_DIM:-3072}" >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$s3_port/" && break; sleep 0.1; done
s3="http://127.0.0.1:$s3_port"
curl -sf -X PUT "$s3/graphrag" >/dev/null
if [ -z "$update_doc" ]; then
  update_doc=$work/extra.txt
  head -c 20000 "$(ls "$corpus"/*.txt | head -1)" | tail -c 8000 >"$update_doc"
fi
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing-secret
model() { printf '    model: %s\n    api_base: http://127.0.0.1:%s/v1\n    api_key: sk-test\n' "$1" "$mock_port"; }
section() { # base_dir indent backend
  if [ "$3" = s3 ]; then
    printf '%stype: s3\n%sbucket: graphrag\n%sbase_dir: %s\n%sendpoint_url: %s\n' "$2" "$2" "$2" "$1" "$2" "$s3"
  else
    printf '%stype: file\n%sbase_dir: %s\n' "$2" "$2" "$1"
  fi
}
settings() { # root backend output_base_dir
  {
    printf 'completion_models:\n  default_completion_model:\n'; model mock-gpt
    printf 'embedding_models:\n  default_embedding_model:\n'; model mock-embed
    printf 'input_storage:\n'; section input '  ' "$2"
    printf 'output_storage:\n'; section "$3" '  ' "$2"
    printf 'cache:\n  type: json\n  storage:\n'; section cache '    ' "$2"
  } >"$1/settings.yaml"
}
add_document() { # root backend file
  if [ "$2" = s3 ]; then
    curl -sf -X PUT -H "Content-Type: text/plain" -H "Expect:" --data-binary @"$3" "$s3/graphrag/input/$(basename "$3")" >/dev/null
  else
    cp "$3" "$1/input/"
  fi
}
count() { # requests logged since line $1
  tail -n +"$(($1 + 1))" "$work/moto.log" | grep -o '"[A-Z]* /[^ ]*' | awk '
    { m = substr($1, 2); if (m == "GET" && $2 ~ /list-type=/) m = "LIST"; n[m]++ }
    END { printf "moto: GET %d, PUT %d, LIST %d, HEAD %d, DELETE %d, POST %d", n["GET"], n["PUT"], n["LIST"], n["HEAD"], n["DELETE"], n["POST"] }'
}
own_count() { # stats.json -> the run's own count per storage
  python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
calls = sum(m.get("calls", 0) for m in s.get("llm", {}).values())
hits = sum(m.get("cache_hits", 0) for m in s.get("llm", {}).values())
parts = [f"model calls {calls}, cache hits {hits}"]
for key, c in sorted(s.get("storage_requests", {}).items()):
    parts.append(f"{key}: GET {c['gets']} PUT {c['puts']} LIST {c['lists']} DELETE {c['deletes']} "
                 f"read {c['bytes_read'] / 1e6:.2f} MB written {c['bytes_written'] / 1e6:.2f} MB")
print("; ".join(parts))
PY
}
phase() { # name backend root output_dir (local) args...
  local name=$1 backend=$2 root=$3 out=$4; shift 4
  local from; from=$(wc -l <"$work/moto.log")
  local t0; t0=$(date +%s.%N)
  "$bin/graphrag-rs" -q "$@" --root "$root" >/dev/null
  local secs; secs=$(echo "$(date +%s.%N) - $t0" | bc)
  local stats=$out/stats.json
  # On S3 the run's stats.json is in its working copy, one per output URL
  # (ROOT/.graphrag-rs/output_storage-<hash of the URL>/): the newest is this run's.
  [ "$backend" = local ] || stats=$(ls -t "$root"/.graphrag-rs/output_storage-*/stats.json | head -1)
  printf '%-6s %-16s %6.2f s  ' "$backend" "$name" "$secs"
  if [ "$backend" = s3 ]; then printf '%s; ' "$(count "$from")"; fi
  own_count "$stats"
}
for backend in ${BACKENDS:-s3 local}; do
  root=$work/$backend
  mkdir -p "$root/input"
  if [ "$backend" = s3 ]; then
    for f in "$corpus"/*.txt; do add_document "$root" s3 "$f"; done
    out=""
  else
    cp "$corpus"/*.txt "$root/input/"
    out=$root/output
  fi
  settings "$root" "$backend" output
  phase "index" "$backend" "$root" "$out" index --method "$method"
  settings "$root" "$backend" output-reindex
  reout=${out:+${out/%output/output-reindex}}
  phase "cached re-index" "$backend" "$root" "$reout" index --method "$method"
  settings "$root" "$backend" output
  add_document "$root" "$backend" "$update_doc"
  phase "update (+1 doc)" "$backend" "$root" "$out" update
done
# With RUNS=N: the cached re-index timed N times on S3 against local disk, in turn, as ratios
# (farm-bench: whole processes; each run publishes a new version from the same cache).
if [ -n "${RUNS:-}" ] && [ "${BACKENDS:-s3 local}" = "s3 local" ]; then
  for backend in s3 local; do settings "$work/$backend" "$backend" output-reindex; done
  farm-bench -n "$RUNS" --timeout 1800 \
    --vs "$bin/graphrag-rs -q index --method $method --root $work/local" \
    -- "$bin/graphrag-rs" -q index --method "$method" --root "$work/s3"
fi
