#!/usr/bin/env bash
# Retrieval recall of the embedded default (fast method, local MiniLM embeddings, no chat model) on
# the dev sets of ../shared/eval, as reported in docs/benchmarks.md ("Retrieval quality"); with
# METHOD and MOCK_URL, of the LLM pipelines against a mock server.
#
# usage: scripts/eval_dev_sets.sh OUT_DIR [DATASET...]
#   OUT_DIR   projects go to OUT_DIR/projects/<corpus>/, results to OUT_DIR/results/<dataset>.*
#   DATASET   any of: kag-musique-100 kag-hotpotqa-100 twowiki-101 lihua-world hipporag-2wiki-1000
#             migres-musique-200 migres-hotpotqa-200 (default: all seven; hipporag-2wiki-1000 asks its
#             questions of twowiki-101's corpus and project, indexed once for both),
#             and graphrag-bench (GraphRAG-Bench's medical corpus: answers without gold evidence, so
#             scored with `eval --gold answer`, the answer's words in the context)
# env:
#   BIN       folder of graphrag-rs (default: target/release)
#   EVAL_DIR  the data sets (default: ../shared/eval next to the repository)
#   METHODS   query methods to evaluate (default: dense,bm25,basic,local,mix,drift,ppr: the baselines
#             and the methods that retrieve without a chat model; eval refuses global)
#   K         --k of graphrag-rs eval (default: the settings' own top-k values)
#   BUDGET    --budget of graphrag-rs eval, e.g. 2000,5000,10000 (default: the settings' own limits)
#   REINDEX   1: index again even when OUT_DIR/projects/<dataset>/output exists
#   METHOD    the index method (default: fast)
#   PRECISION f32, int8, bf16 or auto: the local embedding model's precision in new projects (default: init's, auto)
#   MOCK_URL  an OpenAI-compatible base URL (e.g. graphrag-mock-llm's http://127.0.0.1:8765/v1) that
#             serves both the chat and the embedding model (then the projects have an API key)
#   CACHE_FROM the projects folder of an earlier run (OUT_DIR/projects): each project starts with its
#             dataset's cache/ (e.g. a standard index reuses a light index's extraction answers)
# Per dataset: <corpus>.index.time (/usr/bin/time -v of the indexing), <dataset>.json (eval
# --output), <dataset>.txt (the printed table).
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,28p "$0"; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
shift
datasets=("$@")
[ ${#datasets[@]} -gt 0 ] ||
  datasets=(kag-musique-100 kag-hotpotqa-100 twowiki-101 lihua-world hipporag-2wiki-1000 migres-musique-200
    migres-hotpotqa-200)
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$repo/target/release}/graphrag-rs
eval_dir=$(cd "${EVAL_DIR:-$repo/../shared/eval}" && pwd)
methods=${METHODS:-dense,bm25,basic,local,mix,drift,ppr}
res=$out/results
mkdir -p "$res" "$out/projects"

# Writes the corpus of dataset $1 into project $2's input/ and sets input: in its settings.yaml.
prepare_input() {
  python3 - "$eval_dir/$1" "$2" <<'PY'
import json, pathlib, re, sys, zipfile
data, project = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
name, inp = data.name, project / "input"
corpus = data / "corpus"
if name == "lihua-world":
    # One text document per chat file; its title is the path inside the zip, as in gold_docs.
    with zipfile.ZipFile(corpus / "LiHuaWorld.zip") as z:
        z.extractall(inp)
    kind = "text"
else:
    if name == "graphrag-bench":
        # One record {corpus_name, context}: a 1 MB document.
        (src,) = corpus.glob("*.json")
        docs = [{"title": d["corpus_name"], "text": d["context"]} for d in json.loads(src.read_text())]
    elif name == "kag-hotpotqa-100":
        raw = json.loads((corpus / "train_corpus.json").read_text())
        # title -> sentences (each after the first starts with its space): one paragraph each.
        docs = [{"title": t, "text": "".join(s)} for t, s in raw.items()]
    else:
        (src,) = corpus.glob("*.json")
        docs = [{"title": d["title"], "text": d["text"]} for d in json.loads(src.read_text())]
    (inp / "corpus.json").write_text(json.dumps(docs, ensure_ascii=False))
    kind = "json"
settings = project / "settings.yaml"
text = settings.read_text()
text = re.sub(r"(?m)^(input:\n  type: )text\b", r"\g<1>" + kind, text, count=1)
if kind == "json":
    text = re.sub(r"(?m)^  # title_column: title", "  title_column: title", text, count=1)
settings.write_text(text)
PY
}

# Points project $1's chat and embedding models at MOCK_URL.
use_mock() {
  sed -i \
    -e "0,/^    # api_base: .*/s||    api_base: $MOCK_URL|" \
    -e "s|^    model_provider: local$|    model_provider: openai|" \
    -e "s|^    model: all-MiniLM-L6-v2$|    model: mock-embed\n    api_base: $MOCK_URL\n    api_key: \${GRAPHRAG_API_KEY}|" \
    "$1/settings.yaml"
  [ "$(grep -c "api_base: $MOCK_URL" "$1/settings.yaml")" = 2 ] || { echo "could not point $1 at $MOCK_URL" >&2; exit 1; }
  echo "GRAPHRAG_API_KEY=sk-eval" >"$1/.env"
}

# The project (and corpus) a dataset's questions are asked of: HippoRAG's 2Wiki questions share
# twowiki-101's corpus.
corpus_of() {
  case $1 in
    hipporag-2wiki-1000) echo twowiki-101 ;;
    *) echo "$1" ;;
  esac
}

indexed=" "
for ds in "${datasets[@]}"; do
  corpus=$(corpus_of "$ds")
  project=$out/projects/$corpus
  questions=$eval_dir/$ds/dev/questions.json
  gold=evidence
  if [ "$ds" = graphrag-bench ]; then
    questions=$eval_dir/$ds/dev/medical_questions.json
    gold=answer
  fi
  [ -f "$questions" ] || { echo "no $questions" >&2; exit 1; }
  # REINDEX indexes each corpus once per run, not once per dataset asking of it.
  if { [ "${REINDEX:-0}" = 1 ] && [[ $indexed != *" $corpus "* ]]; } || [ ! -d "$project/output" ]; then
    indexed+="$corpus "
    rm -rf "$project"
    "$bin" -q init --root "$project"
    prepare_input "$corpus" "$project"
    [ -z "${MOCK_URL:-}" ] || use_mock "$project"
    if [ -n "${PRECISION:-}" ]; then
      sed -i "s|^    precision: auto$|    precision: $PRECISION|" "$project/settings.yaml"
      grep -q "^    precision: $PRECISION$" "$project/settings.yaml" || { echo "could not set precision in $project" >&2; exit 1; }
    fi
    [ -z "${CACHE_FROM:-}" ] || [ ! -d "$CACHE_FROM/$corpus/cache" ] || cp -r "$CACHE_FROM/$corpus/cache" "$project/cache"
    echo "== $corpus: indexing (${METHOD:-fast} method)" >&2
    /usr/bin/time -v -o "$res/$corpus.index.time" "$bin" -q index --root "$project" --method "${METHOD:-fast}"
    grep -E "Elapsed|Maximum resident" "$res/$corpus.index.time" >&2
  fi
  echo "== $ds: eval ($methods)" >&2
  "$bin" -q eval --root "$project" --questions "$questions" --method "$methods" ${K:+--k "$K"} ${BUDGET:+--budget "$BUDGET"} \
    --gold "$gold" --output "$res/$ds.json" | tee "$res/$ds.txt"
done
