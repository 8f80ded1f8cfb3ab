#!/usr/bin/env python3
"""Builds a deterministic corpus of a given size for the scale run (docs/benchmarks.md, "Scale").

usage: scripts/make_scale_corpus.py MB OUT_DIR [--shared ../shared] [--doc-kb 64]

Sources: examples/christmas-carol, every JSON corpus under SHARED/eval/*/corpus
(lists of {title, text}, dicts of title -> text or sentences, GraphRAG-Bench's {context}), the text
files inside the zip archives there, and SHARED/bench's text corpora when present. Together they hold
about 13 MB of distinct text. The passages are shuffled with a fixed seed (any size gets the same
mixture of sources) and packed into documents of about --doc-kb KB (passages
separated by blank lines) and written as OUT_DIR/c<copy>_<n>.txt until MB megabytes (10^6 bytes) are
written.

Copy 0 is the text as it is. Later copies are the same passages with every Title-case ASCII word
given a suffix naming the copy ("Scrooge" -> "Scroogeqb" in copy 1), so that each copy brings new proper
nouns: the graph grows with the corpus, as it would with new documents, instead of mapping the copies
onto the same entities. The output is byte-identical for equal arguments and sources.
"""
import argparse
import io
import json
import os
import random
import re
import sys
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAPITALISED = re.compile(r"\b([A-Z][a-z]+)\b")


def json_passages(data):
    if isinstance(data, dict):
        for title, value in sorted(data.items()):
            text = " ".join(value) if isinstance(value, list) else str(value)
            yield f"{title}\n\n{text}"
    elif isinstance(data, list):
        for item in data:
            if isinstance(item, dict):
                if "context" in item:
                    yield str(item["context"])
                elif "text" in item:
                    title = item.get("title", "")
                    yield f"{title}\n\n{item['text']}" if title else str(item["text"])
            elif isinstance(item, str):
                yield item


def passages(shared):
    with open(os.path.join(REPO, "examples/christmas-carol/a_christmas_carol.txt"), encoding="utf-8") as f:
        yield from (p for p in f.read().split("\n\n") if p.strip())
    eval_dir = os.path.join(shared, "eval")
    for name in sorted(os.listdir(eval_dir)):
        corpus = os.path.join(eval_dir, name, "corpus")
        if not os.path.isdir(corpus):
            continue
        for fname in sorted(os.listdir(corpus)):
            path = os.path.join(corpus, fname)
            if fname.endswith(".json"):
                with open(path, encoding="utf-8") as f:
                    yield from json_passages(json.load(f))
            elif fname.endswith(".zip"):
                with zipfile.ZipFile(path) as z:
                    for member in sorted(z.namelist()):
                        if member.endswith((".txt", ".md")):
                            text = io.TextIOWrapper(z.open(member), encoding="utf-8", errors="replace").read()
                            yield from (p for p in text.split("\n\n") if p.strip())
    bench = os.path.join(shared, "bench")
    for root, dirs, files in sorted(os.walk(bench)):
        dirs.sort()
        if os.sep + "corpus" not in root + os.sep:
            continue
        for fname in sorted(files):
            if fname.endswith(".txt") or fname.endswith(".md"):
                with open(os.path.join(root, fname), encoding="utf-8", errors="replace") as f:
                    yield from (p for p in f.read().split("\n\n") if p.strip())


def copy_suffix(copy):
    """'qa', 'qb', ... : letters only, so the words stay words for the extractor."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        out = letters[copy % 26] + out
        copy //= 26
        if copy == 0:
            return "q" + out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mb", type=float)
    ap.add_argument("out")
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(REPO), "shared"))
    ap.add_argument("--doc-kb", type=int, default=64)
    args = ap.parse_args()
    source = [p.strip() for p in passages(args.shared)]
    if not source:
        sys.exit("no source text found")
    # A fixed shuffle, so that a corpus of any size has the same mixture of sources.
    random.Random(0).shuffle(source)
    os.makedirs(args.out, exist_ok=True)
    target = int(args.mb * 1_000_000)
    doc_bytes = args.doc_kb * 1000
    written, copy, docs, full = 0, 0, 0, False
    while not full:
        suffix = copy_suffix(copy) if copy else ""
        doc, doc_len, n = [], 0, 0
        for p in source:
            if suffix:
                p = CAPITALISED.sub(lambda m: m.group(1) + suffix, p)
            size = len(p.encode("utf-8")) + 2
            if written + doc_len + size > target:
                full = True
                break
            doc.append(p)
            doc_len += size
            if doc_len >= doc_bytes:
                with open(os.path.join(args.out, f"c{copy}_{n}.txt"), "w", encoding="utf-8") as f:
                    f.write("\n\n".join(doc) + "\n\n")
                written, doc, doc_len, n, docs = written + doc_len, [], 0, n + 1, docs + 1
        if doc:
            with open(os.path.join(args.out, f"c{copy}_{n}.txt"), "w", encoding="utf-8") as f:
                f.write("\n\n".join(doc) + "\n\n")
            written, docs = written + doc_len, docs + 1
        if not full:
            copy += 1
    print(f"{docs} documents, {written} bytes, {copy + 1} copies in {args.out}")


if __name__ == "__main__":
    main()
