#!/usr/bin/env bash
# S3 requests (GET/PUT/LIST/HEAD/DELETE, as moto's request log records them) of
# a fast index, a cached re-index and an update (+1 document) of the example
# corpus with input, output and cache on S3 (moto on loopback, the mock LLM).
# Usage: scripts/object_store_requests.sh [path/to/graphrag-rs] [path/to/graphrag-mock-llm]
set -euo pipefail
bin=${1:-target/release/graphrag-rs}
mock_bin=${2:-target/release/graphrag-mock-llm}
corpus=$(cd "$(dirname "$0")/.." && pwd)/examples/christmas-carol/a_christmas_carol.txt
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
s3_port=$(free_port); mock_port=$(free_port)
moto_server -H 127.0.0.1 -p "$s3_port" >"$work/moto.log" 2>&1 & pids+=($!)
"$mock_bin" --port "$mock_port" >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$s3_port/" && break; sleep 0.1; done
s3="http://127.0.0.1:$s3_port"
curl -sf -X PUT "$s3/graphrag" >/dev/null
curl -sf -X PUT -H "Content-Type: text/plain" -H "Expect:" --data-binary @"$corpus" "$s3/graphrag/input/a_christmas_carol.txt" >/dev/null
root=$work/project
mkdir -p "$root"
model() { printf '    model: %s\n    api_base: http://127.0.0.1:%s/v1\n    api_key: sk-test\n' "$1" "$mock_port"; }
section() { printf '%stype: s3\n%sbucket: graphrag\n%sbase_dir: %s\n%sendpoint_url: %s\n' "$2" "$2" "$2" "$1" "$2" "$s3"; }
{
  printf 'completion_models:\n  default_completion_model:\n'; model mock-gpt
  printf 'embedding_models:\n  default_embedding_model:\n'; model mock-embed
  printf 'input_storage:\n'; section input '  '
  printf 'output_storage:\n'; section output '  '
  printf 'cache:\n  type: json\n  storage:\n'; section cache '    '
} >"$root/settings.yaml"
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing-secret
count() { # requests logged since line $1
  tail -n +"$(($1 + 1))" "$work/moto.log" | grep -o '"[A-Z]* /[^ ]*' | awk '
    { m = substr($1, 2); if (m == "GET" && $2 ~ /list-type=/) m = "LIST"; n[m]++ }
    END { printf "GET %d, PUT %d, LIST %d, HEAD %d, DELETE %d, POST %d", n["GET"], n["PUT"], n["LIST"], n["HEAD"], n["DELETE"], n["POST"] }'
}
phase() {
  local name=$1; shift
  local from; from=$(wc -l <"$work/moto.log")
  local t0; t0=$(date +%s.%N)
  "$bin" -q "$@" --root "$root" >/dev/null
  printf '%-18s %6.1f s  %s\n' "$name" "$(echo "$(date +%s.%N) - $t0" | bc)" "$(count "$from")"
}
phase "index (fast)" index --method fast
phase "cached re-index" index --method fast
head -c 20000 "$corpus" | tail -c 8000 >"$work/extra.txt"
curl -sf -X PUT -H "Content-Type: text/plain" -H "Expect:" --data-binary @"$work/extra.txt" "$s3/graphrag/input/extra.txt" >/dev/null
phase "update (+1 doc)" update
