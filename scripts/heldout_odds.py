#!/usr/bin/env python3
"""How likely a method's margin on the dev questions is to hold on a held-out set.

usage: scripts/heldout_odds.py EVAL_JSON TARGET HELD_OUT [METHOD] [DRAWS]

EVAL_JSON is `graphrag-rs eval --output` with METHOD (default ppr) and at
least one of the baselines dense, bm25 and basic. Per budget (or k) it
prints METHOD's all-found rate minus the best baseline's on the dev
questions, then draws HELD_OUT questions with replacement from them DRAWS
times (default 4000, fixed seed) and prints the share of draws whose margin
is at least TARGET, and the 5th and 95th percentile of the margin: what a
held-out set drawn like the dev set can expect. The dev sets hold ~20
questions each, so one question moves a margin by ~0.05; this says whether
a cell that meets (or misses) its target does so by more than chance.
"""
import json
import random
import sys
from collections import defaultdict

BASELINES = ("dense", "bm25", "basic")


def rows_by_cut(path, method):
    """{budget or k: [{method: all found}]} over the questions with gold evidence."""
    data = json.load(open(path))
    cuts = defaultdict(lambda: defaultdict(dict))
    for r in data["per_question"]:
        if r["gold"] == "none":
            continue
        cut = r["budget"] if r["budget"] is not None else r["k"]
        cuts[cut][r["id"]][r["method"]] = all(r["found"])
    out = {}
    for cut, questions in cuts.items():
        rows = list(questions.values())
        if not rows or method not in rows[0]:
            sys.exit(f"{path}: no `{method}` rows at {cut}")
        if not any(b in rows[0] for b in BASELINES):
            sys.exit(f"{path}: none of {', '.join(BASELINES)} at {cut}")
        out[cut] = rows
    return out


def margin(sample, method):
    n = len(sample)
    best = max(sum(q[b] for q in sample) / n for b in BASELINES if b in sample[0])
    return sum(q[method] for q in sample) / n - best


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    path, target, held_out = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    method = sys.argv[4] if len(sys.argv) > 4 else "ppr"
    draws = int(sys.argv[5]) if len(sys.argv) > 5 else 4000
    rng = random.Random(7)
    for cut, rows in sorted(rows_by_cut(path, method).items()):
        margins = sorted(margin([rng.choice(rows) for _ in range(held_out)], method) for _ in range(draws))
        meets = sum(m >= target - 1e-9 for m in margins) / draws
        lo, hi = margins[int(0.05 * draws)], margins[int(0.95 * draws) - 1]
        print(
            f"{cut}: dev margin {margin(rows, method):+.3f} ({len(rows)} questions); "
            f"held-out {held_out}: P(margin >= {target:+.2f}) = {meets:.2f}, 90% of draws in [{lo:+.3f}, {hi:+.3f}]"
        )


if __name__ == "__main__":
    main()
