#!/usr/bin/env bash
# Indexing-cost benchmark of graphrag-rs against a mock OpenAI-compatible LLM, as reported in
# docs/benchmarks.md ("Indexing"; earlier runs in docs/benchmarks-history.md).
#
# usage: scripts/bench_index.sh CORPUS_DIR WORK_DIR [RUNS...]
#   CORPUS_DIR  a folder of *.txt documents (e.g. the GraphRAG bench's corpus/main)
#   WORK_DIR    project roots and results go here: WORK_DIR/<run>/ and WORK_DIR/results/<run>.*
#   RUNS        any of: std0 std200 light0 light200 fast fastmock updN (default: std0 std200 fast)
#                 stdN      --method standard, chat + embeddings through the mock at N ms latency;
#                           at N > 0 also prints the run's latency bounds (scripts/critical_path.py:
#                           N x latency / C and the critical path) beside its wall time
#                 lightN    the same with --method light
#                 updN      incremental update at N ms: index all documents but UPDATE_DOC (default:
#                           the last by name), add it, `graphrag-rs update`; and a full index of all
#                           of them, for the ratio (results/updN.update.*, results/updN.full.*)
#                 fast      --method fast, no LLM at all (empty API key, local embedding model)
#                 fastmock  --method fast with the mock configured at 0 ms (as GraphRAG's fast
#                           method: LLM community reports, embeddings through the mock)
# env:
#   BIN         folder of graphrag-rs and graphrag-mock-llm (default: target/release)
#   MOCK_CMD    a different mock to use, started as "$MOCK_CMD" with MOCK_PORT/MOCK_LATENCY_MS/
#               MOCK_EMBED_DIM in its environment (e.g. "python3 ../shared/bench/graphrag/mock_llm.py")
#   PORT        mock port (default 18900)
#   EMBED_DIM   mock embedding dimension (default 3072, the GraphRAG mock's default)
#   EMBED_NAMES embed_text.names for the mock runs (default: GraphRAG 3.x's default three fields)
#   PROMPTS_FROM a folder whose *.txt replace the project's prompts/ files of the same name (e.g.
#               GraphRAG's own prompts, so that GraphRAG's mock recognises every request)
#   RESOLVE_MODE resolve_entities.mode (auto | rules | llm); default: the settings' default (auto),
#               but rules when PROMPTS_FROM is set: GraphRAG has no entity-resolution step, so its
#               mock does not answer our resolution prompt (the run would fail at resolve_entities)
#   UPDATE_DOC  the document updN adds (a file name in CORPUS_DIR)
#   CONCURRENCY concurrent_requests of both models (default: the settings' default, 25)
# Each run starts from a fresh project (no cache/), runs under /usr/bin/time -v and leaves
# results/<run>.stats.json (the pipeline's stats.json), <run>.time (time -v), <run>.mock.json (the
# mock's /stats, when a mock is used), <run>.load (uptime before and after) and a one-line summary.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,35p "$0"; exit 2; }
corpus=$(cd "$1" && pwd)
work=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(std0 std200 fast)
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$repo/target/release}
port=${PORT:-18900}
embed_dim=${EMBED_DIM:-3072}
embed_names=${EMBED_NAMES:-"[entity_description, community_full_content, text_unit_text]"}
res=$work/results
mkdir -p "$res"
mock_pid=

stop_mock() {
  if [ -n "$mock_pid" ]; then
    kill "$mock_pid" 2>/dev/null || true
    wait "$mock_pid" 2>/dev/null || true
    mock_pid=
  fi
}
trap stop_mock EXIT

start_mock() { # latency_ms
  if [ -n "${MOCK_CMD:-}" ]; then
    MOCK_PORT=$port MOCK_LATENCY_MS=$1 MOCK_EMBED_DIM=$embed_dim $MOCK_CMD >"$res/mock.log" 2>&1 &
  else
    "$bin/graphrag-mock-llm" --port "$port" --latency-ms "$1" --embed-dim "$embed_dim" >"$res/mock.log" 2>&1 &
  fi
  mock_pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "mock did not start on port $port" >&2
  cat "$res/mock.log" >&2
  exit 1
}

new_root() { # root with_mock(0|1)
  local root=$1
  rm -rf "$root"
  "$bin/graphrag-rs" init --root "$root" >/dev/null
  cp "$corpus"/*.txt "$root/input/"
  if [ -n "${PROMPTS_FROM:-}" ]; then cp "$PROMPTS_FROM"/*.txt "$root/prompts/"; fi
  if [ "$2" = 1 ]; then
    local base="http://127.0.0.1:$port/v1"
    sed -i \
      -e "0,/^    # api_base: .*/s||    api_base: $base|" \
      -e "s|^    model_provider: local$|    model_provider: openai|" \
      -e "s|^    model: all-MiniLM-L6-v2$|    model: mock-embed\n    api_base: $base\n    api_key: \${GRAPHRAG_API_KEY}|" \
      -e "s|^  names: \[.*\]$|  names: $embed_names|" \
      "$root/settings.yaml"
    grep -q "^    api_base: $base" "$root/settings.yaml" || { echo "could not set api_base" >&2; exit 1; }
    [ "$(grep -c "api_base: $base" "$root/settings.yaml")" = 2 ] || { echo "could not point embeddings at the mock" >&2; exit 1; }
    echo "GRAPHRAG_API_KEY=sk-bench" >"$root/.env"
  fi
  local resolve=${RESOLVE_MODE:-${PROMPTS_FROM:+rules}}
  if [ -n "$resolve" ]; then
    sed -i "/^resolve_entities:/,/^[a-z]/s|^  mode: auto |  mode: $resolve |" "$root/settings.yaml"
    sed -n "/^resolve_entities:/,/^[a-z]/p" "$root/settings.yaml" | grep -q "^  mode: $resolve " \
      || { echo "could not set resolve_entities.mode" >&2; exit 1; }
  fi
  if [ -n "${CONCURRENCY:-}" ]; then
    sed -i -e "s|^    concurrent_requests: 25$|    concurrent_requests: $CONCURRENCY|" \
      -e "s|^# concurrent_requests: 25 .*|concurrent_requests: $CONCURRENCY|" "$root/settings.yaml"
    grep -q "^concurrent_requests: $CONCURRENCY$" "$root/settings.yaml" || { echo "could not set concurrent_requests" >&2; exit 1; }
  fi
}

run_one() { # name method with_mock latency
  local name=$1 method=$2 mock=$3 lat=$4 root=$work/$1
  new_root "$root" "$mock"
  if [ "$mock" = 1 ]; then
    start_mock "$lat"
    curl -sf -X POST "http://127.0.0.1:$port/stats/reset" -d '{}' >/dev/null
  fi
  uptime >"$res/$name.load"
  local rc=0
  /usr/bin/time -v -o "$res/$name.time" "$bin/graphrag-rs" -q index --root "$root" --method "$method" \
    >"$res/$name.log" 2>&1 || rc=$?
  uptime >>"$res/$name.load"
  if [ "$mock" = 1 ]; then
    curl -sf "http://127.0.0.1:$port/stats" >"$res/$name.mock.json" || true
    stop_mock
  fi
  cp "$root/output/stats.json" "$res/$name.stats.json" 2>/dev/null || true
  local wall rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$res/$name.time")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$res/$name.time")
  echo "$name: rc=$rc wall=$wall peak_rss_kb=$rss load: $(tr '\n' ' ' <"$res/$name.load")" | tee "$res/$name.summary"
  [ "$rc" = 0 ] || tail -5 "$res/$name.log" >&2
  if [ "$mock" = 1 ] && [ "$lat" != 0 ] && [ "$rc" = 0 ]; then
    python3 "$repo/scripts/critical_path.py" "$res/$name.stats.json" "$lat" "${CONCURRENCY:-25}" "$(seconds "$wall")" \
      | tee -a "$res/$name.summary"
  fi
}

seconds() { # h:mm:ss or m:ss -> seconds
  python3 -c 'import sys; print(sum(float(p) * 60 ** i for i, p in enumerate(reversed(sys.argv[1].split(":")))))' "$1"
}

mock_stats() { # file
  curl -sf "http://127.0.0.1:$port/stats" >"$1"
  curl -sf -X POST "http://127.0.0.1:$port/stats/reset" -d '{}' >/dev/null
}

run_update() { # name latency
  local name=$1 lat=$2 full=$work/$1-full root=$work/$1
  start_mock "$lat"
  new_root "$full" 1
  mock_stats /dev/null
  /usr/bin/time -v -o "$res/$name.full.time" "$bin/graphrag-rs" -q index --root "$full" --method standard \
    >"$res/$name.full.log" 2>&1
  mock_stats "$res/$name.full.mock.json"
  new_root "$root" 1
  local last
  last=${UPDATE_DOC:-$(cd "$root/input" && ls | sort | tail -1)}
  [ -f "$root/input/$last" ] || { echo "UPDATE_DOC $last is not in $corpus" >&2; exit 1; }
  mv "$root/input/$last" "$work/$name.held-back"
  "$bin/graphrag-rs" -q index --root "$root" --method standard >"$res/$name.base.log" 2>&1
  mv "$work/$name.held-back" "$root/input/$last"
  mock_stats /dev/null
  /usr/bin/time -v -o "$res/$name.update.time" "$bin/graphrag-rs" update --root "$root" >"$res/$name.update.log" 2>&1
  mock_stats "$res/$name.update.mock.json"
  stop_mock
  python3 - "$res/$name" "$last" <<'PY' | tee "$res/$name.summary"
import json, re, sys
base, last = sys.argv[1], sys.argv[2]
def wall(f):
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", open(f).read())
    parts = [float(x) for x in m.group(1).split(":")]
    return sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
full, upd = (json.load(open(f"{base}.{k}.mock.json")) for k in ("full", "update"))
fw, uw = wall(f"{base}.full.time"), wall(f"{base}.update.time")
print(f"added {last}: update {upd['chat_requests']} chat calls, {upd['prompt_tokens']} prompt tokens, {uw:.2f} s; "
      f"full re-index {full['chat_requests']} calls, {full['prompt_tokens']} tokens, {fw:.2f} s; "
      f"ratio calls {upd['chat_requests']/full['chat_requests']:.3f}, tokens {upd['prompt_tokens']/full['prompt_tokens']:.3f}, "
      f"time {uw/fw:.3f}; update calls by kind {upd['by_kind']}")
PY
}

for r in "${runs[@]}"; do
  case $r in
    std[0-9]*) run_one "$r" standard 1 "${r#std}" ;;
    light[0-9]*) run_one "$r" light 1 "${r#light}" ;;
    fast) run_one fast fast 0 0 ;;
    fastmock) run_one fastmock fast 1 0 ;;
    upd[0-9]*) run_update "$r" "${r#upd}" ;;
    *) echo "unknown run $r" >&2; exit 2 ;;
  esac
done
