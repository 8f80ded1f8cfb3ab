#!/usr/bin/env bash
# Cold start of a `serve --read-only` replica on an S3 bucket (docs/benchmarks.md, "Replica cold start"):
#   scripts/replica_cold_start.sh WORK_DIR [RUNS]        (default RUNS: 10)
# Starts the mock LLM and moto (`pip install "moto[server]"`) on loopback, publishes the example's fast
# index to a bucket from a writer project, then times with farm-bench, from the process start to the
# first /health that says the index is loaded: a replica with no local copy (its .graphrag-rs removed
# before each run) that reads the manifest, downloads the version and loads it. Ports 18765-18767.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${GRAPHRAG_RS:-target/debug/graphrag-rs}")
MOCK=$(realpath "${GRAPHRAG_MOCK_LLM:-target/debug/graphrag-mock-llm}")
example=$(realpath examples/christmas-carol/a_christmas_carol.txt)
work=$1; runs=${2:-10}
rm -rf "$work"; mkdir -p "$work/writer/input" "$work/replica"; work=$(realpath "$work")
"$MOCK" --port 18765 >"$work/mock.log" 2>&1 & mock=$!
moto_server -H 127.0.0.1 -p 18766 >"$work/moto.log" 2>&1 & moto=$!
trap 'kill $mock $moto 2>/dev/null || true' EXIT
for _ in $(seq 200); do
  curl -s -o /dev/null http://127.0.0.1:18766/ && curl -s -o /dev/null http://127.0.0.1:18765/ && break
  sleep 0.1
done
curl -sf -X PUT http://127.0.0.1:18766/index -o /dev/null
settings="completion_models:
  default_completion_model:
    model: gpt-4.1-mini
embedding_models:
  default_embedding_model:
    model: mock-embed
    api_base: http://127.0.0.1:18765/v1
    api_key: sk-test
output_storage:
  type: s3
  bucket: index
  base_dir: carol/output
  endpoint_url: http://127.0.0.1:18766
  region: us-east-1"
echo "$settings" >"$work/writer/settings.yaml"
echo "$settings" >"$work/replica/settings.yaml"
cp "$example" "$work/writer/input/"
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing-secret
"$BIN" -q index -r "$work/writer" --method fast --skip-validation
cat >"$work/start.sh" <<START
rm -rf "$work/replica/.graphrag-rs"
"$BIN" -q serve -r "$work/replica" --read-only --port 18767 --skip-validation & pid=\$!
for _ in \$(seq 2400); do
  curl -s http://127.0.0.1:18767/health | grep -q '"loaded":true' && break
  sleep 0.025
done
kill \$pid; wait \$pid 2>/dev/null || true
START
curl -s http://127.0.0.1:18767/health >/dev/null && { echo "port 18767 is taken" >&2; exit 1; }
farm-bench -n "$runs" --timeout 300 -- bash "$work/start.sh"
