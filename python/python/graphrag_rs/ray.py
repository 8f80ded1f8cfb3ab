"""Index a project on a Ray cluster: one Ray task per document shard; then
the merge's graph phase in one task, which stops before each model stage
(entity-resolution questions, description summaries, community reports a
wave at a time), with one Ray task per model shard at each stage; one Ray
task per embed shard (the entity, relationship and report embeddings); then
the merge task — calling the library functions ``graphrag-rs index --shard
K/N``, ``index --merge --phase stage`` (``graph`` without model shards),
``index --shard K/N --phase model``,
``index --shard K/N --phase embed`` and ``index --merge`` call.

    python -m graphrag_rs.ray index --root /shared/my-project --shards 16 --num-cpus 4 \
        --wheel dist/graphrag_rs-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl

    import graphrag_rs.ray
    graphrag_rs.ray.index("/shared/my-project", shards=16, num_cpus=4)

Every node reads and writes the project folder at the same path (a shared
file system: NFS, a cluster file system, a mounted volume), or the project
is a root in a bucket (``--root s3://bucket/project``, also ``az://`` and
``gs://``: each node works in its own local copy, the fragments, the cache
and the index live in the bucket, and the nodes need its credentials in
their environment). The nodes need this package: installed on each, or
shipped by the driver — ``wheel`` (``--wheel``, or ``GRAPHRAG_RS_WHEEL``),
the package's wheel (abi3, manylinux_2_34: one file for every CPython ≥ 3.10
on x86-64 Linux with glibc ≥ 2.34), goes into the ``runtime_env`` of the job the
driver starts (``py_modules``; under ``ray job submit``, give it to the job's
``--runtime-env-json`` instead), which every task inherits: a worker node
needs Python and Ray only. The published index equals a single ``graphrag-rs
index`` of the same input and settings, byte for byte. A shard whose worker
dies is retried by Ray (``max_retries``); its rerun asks the model only what
was not answered yet (the answers are in the project's cache). Rerunning the
driver runs only the shards without a done marker, then the merge. The
model and embed shards hand their answers to the graph phase and the merge
through the model cache (``cache.type: json``, the default);
``model_shards=0`` leaves the model stages to the graph phase task,
``embed_shards=0`` the embeddings to the merge task. Under
``ray job submit`` the driver connects to the job's cluster
(``ray.init()``); elsewhere it connects to ``address`` or ``RAY_ADDRESS``,
or starts a local Ray.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _native


class ShardsFailed(RuntimeError):
    """Shards that failed for good (after Ray's retries), each named with its error."""

    def __init__(self, failures: Dict[int, str], shards: int) -> None:
        self.failures = failures
        lines = [f"shard {k}/{shards}: {error}" for k, error in sorted(failures.items())]
        super().__init__(
            f"{len(failures)} of {shards} shards failed; the index was not merged. "
            "Rerunning runs only the shards that did not finish.\n" + "\n".join(lines)
        )


def _shard(root: str, shard: int, shards: int, method: str, phase: str) -> Dict[str, Any]:
    return _native.index_shard(root, shard, shards, method, phase)


def _merge_graph(root: str, shards: int, method: str, stages: bool) -> Dict[str, Any]:
    import ray

    staged = _native.merge_graph(root, shards, method, stages)
    # The next graph phase and the merge resume from what this node staged.
    staged["node"] = ray.get_runtime_context().get_node_id()
    return staged


def _merge(root: str, shards: int, method: str) -> Dict[str, Any]:
    def step(name: str, index: int, total: int, finished: Optional[str]) -> None:
        if finished is not None:
            print(f"merge: step {index + 1}/{total} {name} {finished}", flush=True)

    return _native.merge_shards(root, shards, method, step)


def _line(report: Dict[str, Any]) -> str:
    if report["phase"] == "model":
        return (
            f"model shard {report['shard']}/{report['shards']} of {report['stage']}: "
            f"{report['seconds']:.1f} s, {report['model_calls']} model calls"
        )
    if report["phase"] == "embed":
        return (
            f"embed shard {report['shard']}/{report['shards']}: {report['embedded_texts']} texts, "
            f"{report['seconds']:.1f} s, {report['model_calls']} model calls"
        )
    return (
        f"shard {report['shard']}/{report['shards']}: {report['documents']} documents, "
        f"{report['text_units']} text units, {report['seconds']:.1f} s, {report['model_calls']} model calls"
    )


def _run_shards(
    root: str, shards: int, method: str, phase: str, task: Any, echo: Callable[[str], None]
) -> List[Dict[str, Any]]:
    """Runs the shards of one phase that have not finished and returns the
    reports of those that ran; raises ``ShardsFailed`` naming those that
    failed for good."""
    import ray

    pending: Dict[Any, int] = {}
    for k, done in enumerate(_native.shard_status(root, shards, method, phase)):
        if done is not None:
            echo(_line(done) + " (finished before)")
        else:
            pending[task.remote(root, k, shards, method, phase)] = k
    failures: Dict[int, str] = {}
    label = {"embed": "embed shard", "model": "model shard"}.get(phase, "shard")
    ran: List[Dict[str, Any]] = []
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        k = pending.pop(ready[0])
        try:
            report = ray.get(ready[0])
            ran.append(report)
            echo(_line(report))
        except Exception as e:  # a task's error (RayTaskError) or its worker lost for good
            cause = getattr(e, "cause", None) or e
            failures[k] = " ".join(str(cause).split()) or type(cause).__name__
            echo(f"{label} {k}/{shards}: FAILED: {failures[k]}")
    if failures:
        raise ShardsFailed(failures, shards)
    return ran


def _serial_share(calls: Dict[str, List[int]], echo: Callable[[str], None]) -> float:
    """Prints the model calls of each stage, in shards and in the one graph
    phase or merge task (serial), and returns the serial share of them all."""
    for stage, (sharded, serial) in calls.items():
        share = serial / max(sharded + serial, 1)
        echo(f"calls: {stage}: {sharded} in shards, {serial} serial ({100 * share:.1f} %)")
    total = sum(a + b for a, b in calls.values())
    serial = sum(b for _, b in calls.values())
    share = serial / max(total, 1)
    echo(f"calls: {total} model calls, {serial} serial ({100 * share:.1f} %)")
    return share


def index(
    root: "os.PathLike[str] | str",
    shards: int,
    *,
    method: str = "auto",
    num_cpus: float = 1,
    num_gpus: float = 0,
    max_retries: int = 3,
    merge_num_cpus: Optional[float] = None,
    model_shards: Optional[int] = None,
    embed_shards: Optional[int] = None,
    wheel: "os.PathLike[str] | str | None" = None,
    address: Optional[str] = None,
    echo: Callable[[str], None] = print,
) -> Dict[str, Any]:
    """Indexes ``root`` in ``shards`` Ray tasks (each with ``num_cpus`` and
    ``num_gpus``, retried ``max_retries`` times when its worker dies), runs
    the merge's graph phase in one task up to each model stage and asks each
    stage in ``model_shards`` tasks (default ``shards``; 0: the graph phase
    asks them), embeds the staged entities, relationships and reports in
    ``embed_shards`` tasks (default ``shards``; 0: the merge embeds them),
    then publishes in one task (``merge_num_cpus``, default ``num_cpus``).
    ``wheel`` (default ``GRAPHRAG_RS_WHEEL``): this package's wheel, shipped
    to every task through the ``runtime_env`` of the job this call starts
    (nodes without the package installed). ``echo`` gets one line per shard (documents or texts,
    seconds, model calls), per graph phase, the merge's steps and the model
    calls of each stage, in shards and serial. Returns the merge's result
    (as ``build_index``'s) with ``calls`` (stage → [calls in shards, serial
    calls]), ``phases`` ([(map phase, each shard's calls)], the shards that
    ran: for a latency bound) and ``serial_share``; raises ``ShardsFailed`` naming each failed
    shard and its documents."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    model_shards = shards if model_shards is None else model_shards
    embed_shards = shards if embed_shards is None else embed_shards
    for name, count in (("model_shards", model_shards), ("embed_shards", embed_shards)):
        if count < 0:
            raise ValueError(f"{name} must be 0 or more, not {count}")
    root = os.fspath(root)
    if "://" not in root:  # a bucket's URL (s3://, az://, gs://) is the same on every node
        root = os.path.abspath(root)
    wheel = wheel or os.environ.get("GRAPHRAG_RS_WHEEL") or None
    runtime_env: Optional[Dict[str, Any]] = None
    if wheel is not None:
        wheel = os.path.abspath(os.fspath(wheel))
        if not os.path.isfile(wheel) or not wheel.endswith(".whl"):
            raise ValueError(f"{wheel} is not a wheel file (.whl)")
        # The job's: Ray uploads it once and installs it for the tasks of every node.
        runtime_env = {"py_modules": [wheel]}
    if not ray.is_initialized():
        ray.init(address=address or os.environ.get("RAY_ADDRESS"), log_to_driver=True, runtime_env=runtime_env)
    elif runtime_env is not None:
        raise ValueError(
            "a wheel is shipped with the job Ray is started with: give it to ray.init(runtime_env=…) or "
            "`ray job submit --runtime-env-json`, or call index() before Ray is initialised"
        )
    began = time.monotonic()
    shard_task = ray.remote(_shard).options(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=max_retries)
    calls: Dict[str, List[int]] = {}
    # Per map phase (a model stage's wave included), each shard's model calls.
    phases: List[Tuple[str, List[int]]] = []
    ran = _run_shards(root, shards, method, "units", shard_task, echo)
    calls["document shards"] = [sum(r["model_calls"] for r in ran), 0]
    phases.append(("document shards", [r["model_calls"] for r in ran]))
    echo(f"{shards} shards finished in {time.monotonic() - began:.1f} s; merging")
    merge_cpus = merge_num_cpus or num_cpus
    merge_options: Dict[str, Any] = dict(num_cpus=merge_cpus, max_retries=max_retries)
    if model_shards or embed_shards:
        # Staged again unchanged (a rerun), the graph keeps its finished model and embed shards.
        graph_task = ray.remote(_merge_graph)
        while True:
            staged = ray.get(graph_task.options(**merge_options).remote(root, shards, method, model_shards > 0))
            # On a bucket project the staged steps are in that node's working copy.
            merge_options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(staged["node"], soft=True)
            for step, n in staged["model_calls"]:
                calls.setdefault(step, [0, 0])[1] += n
            if staged["stage"] is None:
                break
            step, wave = staged["stage"]
            echo(f"merge: graph phase up to {step} (wave {wave}) in {staged['runtime_s']:.1f} s")
            if model_shards:
                ran = _run_shards(root, model_shards, method, "model", shard_task, echo)
                calls.setdefault(step, [0, 0])[0] += sum(r["model_calls"] for r in ran)
                phases.append((f"{step} wave {wave}", [r["model_calls"] for r in ran]))
        rows = ", ".join(f"{table} {n}" for table, n in staged["rows"])
        echo(f"merge: graph staged in {staged['runtime_s']:.1f} s ({rows}); embedding in {embed_shards} shards")
        if embed_shards:
            ran = _run_shards(root, embed_shards, method, "embed", shard_task, echo)
            calls["embed shards"] = [sum(r["model_calls"] for r in ran), 0]
            phases.append(("embed shards", [r["model_calls"] for r in ran]))
    merge_task = ray.remote(_merge).options(**merge_options)
    result: Dict[str, Any] = ray.get(merge_task.remote(root, shards, method))
    calls["merge"] = [0, sum(n for _, n in result["model_calls"])]
    echo(f"merged and published in {result['runtime_s']:.1f} s: {result['output_dir']}")
    result["calls"] = calls
    result["phases"] = phases
    result["serial_share"] = _serial_share(calls, echo)
    return result


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graphrag_rs.ray", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("index", help="index a project in document shards on Ray, then merge")
    p.add_argument("--root", required=True, help="the project folder, at the same path on every node, or its URL in a bucket (s3://, az://, gs://)")
    p.add_argument("--shards", type=int, required=True, help="how many document shards (Ray tasks)")
    p.add_argument("--method", default="auto", help="pipeline: auto, standard, light, fast or a .yaml")
    p.add_argument("--num-cpus", type=float, default=1, help="CPUs per shard task (default 1)")
    p.add_argument("--num-gpus", type=float, default=0, help="GPUs per shard task (default 0)")
    p.add_argument("--max-retries", type=int, default=3, help="Ray's retries of a task whose worker died")
    p.add_argument("--merge-num-cpus", type=float, default=None, help="CPUs of the merge task (default --num-cpus)")
    p.add_argument(
        "--model-shards",
        type=int,
        default=None,
        help="Ray tasks per model stage: resolution questions, summaries, reports (default --shards; 0: the graph phase's)",
    )
    p.add_argument(
        "--wheel",
        default=None,
        help="this package's wheel, shipped to every task through Ray's runtime_env (default GRAPHRAG_RS_WHEEL; none: installed on the nodes)",
    )
    p.add_argument(
        "--embed-shards",
        type=int,
        default=None,
        help="Ray tasks for the entity, relationship and report embeddings (default --shards; 0: the merge task's)",
    )
    p.add_argument("--address", default=None, help="the Ray cluster (default: RAY_ADDRESS, the job's, or a local one)")
    args = parser.parse_args(argv)
    try:
        index(
            args.root,
            args.shards,
            method=args.method,
            num_cpus=args.num_cpus,
            num_gpus=args.num_gpus,
            max_retries=args.max_retries,
            merge_num_cpus=args.merge_num_cpus,
            model_shards=args.model_shards,
            embed_shards=args.embed_shards,
            wheel=args.wheel,
            address=args.address,
            echo=lambda line: print(line, flush=True),
        )
    except (ShardsFailed, _native.GraphragError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
