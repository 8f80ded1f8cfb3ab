"""CPU per query of graphrag_rs's native call, to compare with the Rust
bench under `perf stat -e task-clock` (the same 5 methods, fresh index per
method, one cold question, then N questions). Run it with -n N and -n 0 and
subtract: what is left is N × 5 queries.

    perf stat -e task-clock python3 python/benches/query_loop.py demo --questions q.json -n 200
    BENCH_QUERIES=201 BENCH_PROJECT=demo BENCH_QUESTIONS=q.json BENCH_ENTITIES=0 BENCH_BIN=none \\
      perf stat -e task-clock target/release/deps/query-<hash> --bench
"""

import argparse
import json
from pathlib import Path

import graphrag_rs
from query_latency import METHODS  # this script's folder is on sys.path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--questions", required=True, help="JSON list of {question} (query_latency.py writes it)")
    parser.add_argument("-n", type=int, default=200, help="questions per method after the cold one")
    args = parser.parse_args()
    questions = [q["question"] for q in json.loads(Path(args.questions).read_text()) if "question" in q]
    for method in METHODS:
        index = graphrag_rs.Index(args.root)
        for i in range(args.n + 1):
            index._native.query(questions[i % len(questions)], method, True, None, None, False, None)


if __name__ == "__main__":
    main()
