"""Index a project on a Ray cluster: one Ray task per document shard, then
the merge's graph steps, one Ray task per embed shard (the entity,
relationship and report embeddings), then the merge task, calling the
library functions ``graphrag-rs index --shard K/N``, ``index --merge --phase
graph``, ``index --shard K/N --phase embed`` and ``index --merge`` call.

    python -m graphrag_rs.ray index --root /shared/my-project --shards 16 --num-cpus 4

    import graphrag_rs.ray
    graphrag_rs.ray.index("/shared/my-project", shards=16, num_cpus=4)

Every node reads and writes the project folder at the same path (a shared
file system: NFS, a cluster file system, a mounted volume), or the project
is a root in a bucket (``--root s3://bucket/project``, also ``az://`` and
``gs://``: each node works in its own local copy, the fragments, the cache
and the index live in the bucket, and the nodes need its credentials in
their environment); every node has this package installed. The published index equals a single ``graphrag-rs
index`` of the same input and settings, byte for byte. A shard whose worker
dies is retried by Ray (``max_retries``); its rerun asks the model only what
was not answered yet (the answers are in the project's cache). Rerunning the
driver runs only the shards without a done marker, then the merge. The
embed shards hand their vectors to the merge through the model cache
(``cache.type: json``, the default); ``embed_shards=0`` leaves the
embeddings to the merge task. Under
``ray job submit`` the driver connects to the job's cluster
(``ray.init()``); elsewhere it connects to ``address`` or ``RAY_ADDRESS``,
or starts a local Ray.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional

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


def _merge_graph(root: str, shards: int, method: str) -> Dict[str, Any]:
    return _native.merge_graph(root, shards, method)


def _merge(root: str, shards: int, method: str) -> Dict[str, Any]:
    def step(name: str, index: int, total: int, finished: Optional[str]) -> None:
        if finished is not None:
            print(f"merge: step {index + 1}/{total} {name} {finished}", flush=True)

    return _native.merge_shards(root, shards, method, step)


def _line(report: Dict[str, Any]) -> str:
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
) -> None:
    """Runs the shards of one phase that have not finished; raises
    ``ShardsFailed`` naming those that failed for good."""
    import ray

    pending: Dict[Any, int] = {}
    for k, done in enumerate(_native.shard_status(root, shards, method, phase)):
        if done is not None:
            echo(_line(done) + " (finished before)")
        else:
            pending[task.remote(root, k, shards, method, phase)] = k
    failures: Dict[int, str] = {}
    label = "embed shard" if phase == "embed" else "shard"
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        k = pending.pop(ready[0])
        try:
            echo(_line(ray.get(ready[0])))
        except Exception as e:  # a task's error (RayTaskError) or its worker lost for good
            cause = getattr(e, "cause", None) or e
            failures[k] = " ".join(str(cause).split()) or type(cause).__name__
            echo(f"{label} {k}/{shards}: FAILED: {failures[k]}")
    if failures:
        raise ShardsFailed(failures, shards)


def index(
    root: "os.PathLike[str] | str",
    shards: int,
    *,
    method: str = "auto",
    num_cpus: float = 1,
    num_gpus: float = 0,
    max_retries: int = 3,
    merge_num_cpus: Optional[float] = None,
    embed_shards: Optional[int] = None,
    address: Optional[str] = None,
    echo: Callable[[str], None] = print,
) -> Dict[str, Any]:
    """Indexes ``root`` in ``shards`` Ray tasks (each with ``num_cpus`` and
    ``num_gpus``, retried ``max_retries`` times when its worker dies), stages
    the merge's graph steps in one task, embeds the staged entities,
    relationships and reports in ``embed_shards`` tasks (default
    ``shards``; 0: the merge embeds them), then publishes in one task
    (``merge_num_cpus``, default ``num_cpus``). ``echo`` gets one line per
    shard (documents or texts, seconds, model calls) and the merge's steps.
    Returns the merge's result (as ``build_index``'s); raises
    ``ShardsFailed`` naming each failed shard and its documents."""
    import ray

    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    embed_shards = shards if embed_shards is None else embed_shards
    if embed_shards < 0:
        raise ValueError(f"embed_shards must be 0 or more, not {embed_shards}")
    root = os.fspath(root)
    if "://" not in root:  # a bucket's URL (s3://, az://, gs://) is the same on every node
        root = os.path.abspath(root)
    if not ray.is_initialized():
        ray.init(address=address or os.environ.get("RAY_ADDRESS"), log_to_driver=True)
    began = time.monotonic()
    shard_task = ray.remote(_shard).options(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=max_retries)
    _run_shards(root, shards, method, "units", shard_task, echo)
    echo(f"{shards} shards finished in {time.monotonic() - began:.1f} s; merging")
    merge_cpus = merge_num_cpus or num_cpus
    if embed_shards:
        # Staged again unchanged (a rerun), the graph keeps its finished embed shards.
        graph_task = ray.remote(_merge_graph).options(num_cpus=merge_cpus, max_retries=max_retries)
        staged = ray.get(graph_task.remote(root, shards, method))
        rows = ", ".join(f"{table} {n}" for table, n in staged["rows"])
        echo(f"merge: graph staged in {staged['runtime_s']:.1f} s ({rows}); embedding in {embed_shards} shards")
        _run_shards(root, embed_shards, method, "embed", shard_task, echo)
    merge_task = ray.remote(_merge).options(num_cpus=merge_cpus, max_retries=max_retries)
    result: Dict[str, Any] = ray.get(merge_task.remote(root, shards, method))
    echo(f"merged and published in {result['runtime_s']:.1f} s: {result['output_dir']}")
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
            embed_shards=args.embed_shards,
            address=args.address,
            echo=lambda line: print(line, flush=True),
        )
    except (ShardsFailed, _native.GraphragError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
