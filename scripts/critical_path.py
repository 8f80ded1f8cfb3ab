#!/usr/bin/env python3
"""The model-latency bounds of an index run, from its stats.json.

usage: scripts/critical_path.py STATS_JSON LATENCY_MS CONCURRENCY [WALL_S]

With every request taking LATENCY_MS and at most CONCURRENCY in flight per
model, no run can be faster than either bound:
  - N x latency / C: all N requests (chat and embedding) packed perfectly;
  - the critical path: the longest chain of steps (a step starts when the
    steps it reads from are done: stats.json `after`, and a step with model
    calls also waits for the start-up check's one round trip when the run
    made one: stats.json `startup_check`), each step costing
    sum over its dependent waves of ceil(calls / C) x latency. A step's
    waves are stats.json `llm_waves` (chat calls per wave: an extraction's
    first turns, then its gleaning turns; a report waits for its
    sub-communities' reports only when its context does not fit); a step
    with model calls but no waves (embedding) is one wave of its requests.
Prints both, the larger (the bound), and with WALL_S the ratios; then
where the wall time went: per step of the chain, its seconds against its
waves' bound, the step that ended the run when it is not on the chain
(stats.json `start`: seconds after the run began), the start-up check
(which runs beside the steps without a model) and the time outside the
pipeline (process start, settings, publication).
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
    # The start-up check (one request per endpoint, at once) runs beside the
    # steps without a model; those with one wait for it.
    check = latency if "startup_check" in stats else 0.0

    def path_with(check):
        done = {}

        def finish(name):
            # Earliest finish of a step: its own cost after the latest of the steps it waits for.
            if name not in done:
                waits = [finish(a) for a in steps[name].get("after", []) if a in steps]
                if step_waves(steps[name]):
                    waits.append(check)
                done[name] = cost[name] + max(waits, default=0.0)
            return done[name]

        return finish

    finish = path_with(check)
    path = max((finish(n) for n in steps), default=0.0)
    without_check = max((path_with(0.0)(n) for n in steps), default=0.0)
    chat = sum(sum(s.get("llm_waves") or []) for s in steps.values())
    requests = sum(sum(step_waves(s)) for s in steps.values())
    packed = requests * latency / c
    # The chain that sets the critical path, for the record.
    chain, at = [], max(steps, key=finish) if steps else None
    while at:
        chain.append(f"{at} {step_waves(steps[at])}")
        before = [a for a in steps[at].get("after", []) if a in steps]
        at = max(before, key=finish) if before else None
        if check and step_waves(steps[chain[-1].split(" [")[0]]) and (not at or finish(at) < check):
            chain.append("startup_check [1]")
            break
    line = (f"requests {requests} (chat {chat}); N x latency / C = {packed:.2f} s; "
            f"critical path = {path:.2f} s")
    if check:
        line += f" ({without_check:.2f} s + the start-up check's round trip, which the model steps wait for)"
    line += f"; bound = {max(path, packed):.2f} s"
    if wall is not None and packed and path:
        line += f"; wall {wall:.2f} s = {wall / packed:.2f} x N x latency / C, {wall / path:.2f} x critical path"
        if check:
            line += f" ({wall / without_check:.2f} x without the check)"
    print(line)
    print("critical path: " + " <- ".join(chain))
    if all("start" in s for s in steps.values()):
        print(gap(stats, steps, cost, chain, wall))


def gap(stats, steps, cost, chain, wall):
    """Where the run's time went beyond the critical path."""
    names = [n for n in (c.split(" [")[0] for c in reversed(chain)) if n in steps]
    parts = [f"{n} {steps[n]['overall']:.2f}/{cost[n]:.2f}" for n in names if steps[n]["overall"] - cost[n] >= 0.01]
    end = lambda n: steps[n]["start"] + steps[n]["overall"]
    last = max(steps, key=end)
    first = steps[names[0]]["start"] if names else 0.0
    line = f"gap: chain starts at {first:.2f} s; steps over their bound (s/bound): " + (", ".join(parts) or "none")
    if last not in names:
        line += f"; run ended by {last} at {end(last):.2f} s (chain at {end(names[-1]):.2f} s)"
    if stats.get("startup_check") is not None:
        line += f"; start-up check {stats['startup_check']:.2f} s"
    if wall is not None:
        line += f"; outside the pipeline {wall - stats['total_runtime']:.2f} s"
    return line


if __name__ == "__main__":
    main()
