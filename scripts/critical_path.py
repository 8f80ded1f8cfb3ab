#!/usr/bin/env python3
"""The model-latency bounds of an index run, from its stats.json.

usage: scripts/critical_path.py STATS_JSON LATENCY_MS CONCURRENCY [WALL_S]

With every request taking LATENCY_MS and at most CONCURRENCY in flight per
model, no run can be faster than either bound:
  - N x latency / C: all N requests (chat and embedding) packed perfectly;
  - the critical path: the longest chain of steps (a step starts when the
    steps it reads from are done: stats.json `after`), each step costing
    sum over its dependent waves of ceil(calls / C) x latency. A step's
    waves are stats.json `llm_waves` (chat calls per wave: an extraction's
    first turns, then its gleaning turns; a report waits for its
    sub-communities' reports only when its context does not fit); a step
    with model calls but no waves (embedding) is one wave of its requests.
Prints both, the larger (the bound), and with WALL_S the ratios.
"""
import json
import math
import sys


def step_waves(step):
    waves = step.get("llm_waves") or []
    if waves:
        return waves
    calls = sum(u.get("calls", 0) for u in step.get("llm", {}).values())
    return [calls] if calls else []


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    stats = json.load(open(sys.argv[1]))
    latency = float(sys.argv[2]) / 1000.0
    c = int(sys.argv[3])
    wall = float(sys.argv[4]) if len(sys.argv) > 4 else None
    steps = stats["workflows"]
    cost = {name: sum(math.ceil(w / c) for w in step_waves(s)) * latency for name, s in steps.items()}
    done = {}

    def finish(name):
        # Earliest finish of a step: its own cost after the latest of the steps it waits for.
        if name not in done:
            done[name] = cost[name] + max((finish(a) for a in steps[name].get("after", []) if a in steps), default=0.0)
        return done[name]

    path = max((finish(n) for n in steps), default=0.0)
    chat = sum(sum(s.get("llm_waves") or []) for s in steps.values())
    requests = sum(sum(step_waves(s)) for s in steps.values())
    packed = requests * latency / c
    # The chain that sets the critical path, for the record.
    chain, at = [], max(steps, key=finish) if steps else None
    while at:
        chain.append(f"{at} {step_waves(steps[at])}")
        before = [a for a in steps[at].get("after", []) if a in steps]
        at = max(before, key=finish) if before else None
    line = (f"requests {requests} (chat {chat}); N x latency / C = {packed:.2f} s; "
            f"critical path = {path:.2f} s; bound = {max(path, packed):.2f} s")
    if wall is not None:
        line += (f"; wall {wall:.2f} s = {wall / packed:.2f} x N x latency / C, "
                 f"{wall / path:.2f} x critical path" if packed and path else "")
    print(line)
    print("critical path: " + " <- ".join(chain))


if __name__ == "__main__":
    main()
