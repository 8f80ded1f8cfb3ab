"""In-process query latency of graphrag_rs.Index (loaded once) on an existing
project, to compare with the Rust library's (`cargo bench --bench query` with
BENCH_PROJECT on the same project and the same questions).

    python3 python/benches/query_latency.py demo --questions /tmp/carol_questions.json
    BENCH_PROJECT=demo BENCH_QUESTIONS=/tmp/carol_questions.json BENCH_ENTITIES=0 \\
      BENCH_BIN=none cargo bench --workspace --bench query

It writes the questions file (the Christmas Carol questions of benches/query.rs)
when it does not exist. Like the Rust bench, each method gets a fresh index,
one cold question, then BENCH_QUERIES (default 200) questions with
context_only=True, cycling through the list after the first one. "query()" is
the whole Python call (its context's tables become DataFrames when read);
"+ sources" adds reading `context["sources"]` (one DataFrame built); "native"
the extension call alone (Rust, GIL released, context records as JSON), to
show where time goes.
"""

import argparse
import json
import os
import time
from pathlib import Path

import graphrag_rs

MASK = (1 << 64) - 1
# The methods benches/query.rs measures on BENCH_PROJECT (PROJECT_METHODS).
METHODS = ("ppr", "basic", "dense", "bm25", "local")


def mix(x: int) -> int:
    """splitmix64, as benches/query.rs."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def christmas_questions() -> list:
    """benches/query.rs's christmas_questions(), the same 1000 in the same order."""
    who = [
        "Scrooge", "Bob Cratchit", "Tiny Tim", "Jacob Marley", "Fred", "Fezziwig", "Belle",
        "the Ghost of Christmas Past", "the Ghost of Christmas Present", "the Ghost of Christmas Yet to Come",
        "Mrs. Cratchit", "London",
    ]  # fmt: skip
    templates = [
        "Who is {a}?", "What is the relationship between {a} and {b}?", "How does {a} change over the story?",
        "What does {a} show Scrooge?", "What happens to {a} at Christmas?", "Why is {a} important to the story?",
        "Describe the home of {a}.", "What does {a} say about {b}?",
    ]  # fmt: skip
    out = []
    for q in range(1000):
        a = who[mix(q ^ 1) % len(who)]
        b = who[mix(q ^ 2) % len(who)]
        out.append(templates[q % len(templates)].replace("{a}", a).replace("{b}", b))
    return out


def pct(sorted_ms: list, p: float) -> float:
    return sorted_ms[round((len(sorted_ms) - 1) * p)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--questions", required=True, help="JSON list of {question}; written when missing")
    parser.add_argument("--methods", default=",".join(METHODS))
    args = parser.parse_args()
    nq = int(os.environ.get("BENCH_QUERIES", "200"))
    path = Path(args.questions)
    if not path.exists():
        path.write_text(json.dumps([{"question": q} for q in christmas_questions()]))
    questions = [q["question"] for q in json.loads(path.read_text()) if "question" in q]
    asked = [questions[(i + 1) % len(questions)] for i in range(nq)]

    print(f"{nq} queries per row after one cold query, context_only=True; times in ms")
    print("| method | cold first query | query() p50 | query() p95 | query() p99 | + sources p50 | native p50 | native p95 |")
    print("|---|---|---|---|---|---|---|---|")
    for method in args.methods.split(","):
        index = graphrag_rs.Index(args.root)
        t = time.perf_counter()
        index.query(questions[0], method=method, context_only=True)
        cold = (time.perf_counter() - t) * 1e3
        wall, with_frame, native = [], [], []
        for q in asked:
            t = time.perf_counter()
            result = index.query(q, method=method, context_only=True)
            wall.append((time.perf_counter() - t) * 1e3)
            result.context["sources"]
            with_frame.append((time.perf_counter() - t) * 1e3)
        for q in asked:
            t = time.perf_counter()
            index._native.query(q, method, True, None, None, False, None)
            native.append((time.perf_counter() - t) * 1e3)
        wall.sort()
        with_frame.sort()
        native.sort()
        print(
            f"| {method} | {cold:.1f} | {pct(wall, 0.5):.2f} | {pct(wall, 0.95):.2f} | {pct(wall, 0.99):.2f} "
            f"| {pct(with_frame, 0.5):.2f} | {pct(native, 0.5):.2f} | {pct(native, 0.95):.2f} |"
        )


if __name__ == "__main__":
    main()
