"""Worked example: index the example corpus (A Christmas Carol) from Python,
ask it with each method, and plot the community sizes. Typed: CI checks it
with `mypy --strict` against the package's stubs (docs/notebook.ipynb is the
notebook version, executed by CI).

    python3 -m pip install ./python pandas pyarrow   # matplotlib optional
    python3 docs/python_example.py demo-py [--api-base http://127.0.0.1:8765/v1]

Without --api-base the project has no chat model: it is indexed with the
fast method and each method returns its retrieved context (context_only);
with --api-base (any OpenAI-compatible server, e.g. graphrag-mock-llm) it
is indexed with the standard method and every method answers.
"""

import argparse
import asyncio
import logging
import shutil
from pathlib import Path

import graphrag_rs

REPO = Path(__file__).resolve().parents[1]

parser = argparse.ArgumentParser()
parser.add_argument("root")
parser.add_argument("--api-base", help="an OpenAI-compatible server for the chat and embedding models")
parser.add_argument("--chars", type=int, default=20000, help="index only this many characters of the book")
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

root = Path(args.root)
if root.exists():
    shutil.rmtree(root)
graphrag_rs.init(root)
book = (REPO / "examples/christmas-carol/a_christmas_carol.txt").read_text(encoding="utf-8")
(root / "input" / "carol.txt").write_text(book[: args.chars], encoding="utf-8")
if args.api_base:

    def model(name: str) -> str:
        return f"    model: {name}\n    api_base: {args.api_base}\n    api_key: sk-example\n"

    (root / "settings.yaml").write_text(
        "completion_models:\n  default_completion_model:\n" + model("gpt-4o-mini")
        + "embedding_models:\n  default_embedding_model:\n" + model("text-embedding-3-small")
    )

report = graphrag_rs.build_index(root)
print(f"indexed with {report['pipeline']} in {report['runtime_s']:.1f} s")

index = graphrag_rs.Index(root)
question = "Who is Scrooge and how does he change?"
for method in ("local", "global", "drift", "basic", "hybrid", "mix", "ppr"):
    try:
        result = index.query(question, method=method, context_only=not args.api_base)
    except graphrag_rs.GraphragError as e:  # e.g. a method this index cannot answer
        print(f"--- {method}: {e}")
        continue
    rows = ", ".join(f"{k}: {len(v)} rows" for k, v in result.context.items() if hasattr(v, "columns"))
    print(f"--- {method} ({result.stats['latency_ms']:.0f} ms; {rows})")
    print((result.response or result.context_text)[:300])



async def from_asyncio() -> None:
    """The same from asyncio: every function and Index method has an
    ``a``-prefixed twin, and graphrag_rs.api has GraphRAG's coroutines."""
    result = await index.aquery(question, "basic", context_only=not args.api_base)
    labels = await index.aget_graph_labels()
    print(f"--- from asyncio: {len(labels)} entities; basic: {len(str(result))} characters")
    if args.api_base:
        response, _ = await graphrag_rs.api.global_search(root, query=question)
        print(f"--- api.global_search: {(response or '')[:200]}")


asyncio.run(from_asyncio())

tables = graphrag_rs.load_tables(root)
sizes = tables["communities"]["entity_ids"].map(len).sort_values(ascending=False)
print(f"{len(tables['entities'])} entities, {len(sizes)} communities, largest {list(sizes[:5])}")
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed: no plot")
else:
    plt.bar(range(len(sizes)), sizes.values)
    plt.xlabel("community (by size)")
    plt.ylabel("entities")
    plt.title("A Christmas Carol: community sizes")
    plt.savefig(root / "community_sizes.png")
    print(f"plot: {root / 'community_sizes.png'}")
