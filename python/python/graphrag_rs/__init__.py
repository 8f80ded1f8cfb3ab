"""graphrag-rs from Python: index a folder, ask it questions, read its tables.

    import graphrag_rs
    graphrag_rs.build_index("my-project")
    response, context = graphrag_rs.local_search("my-project", "Who is Scrooge?")
    print(response)
    context["entities"].head()

Indexing and queries run in Rust with the GIL released. Ctrl-C
(KeyboardInterrupt) stops an index or update run cleanly: the previous index
stays as it was, and ``build_index(root, resume=True)`` continues from the
steps that finished. Progress is logged to the ``graphrag_rs`` logger (or
passed to a ``progress`` callback). Errors raise ``GraphragError`` (settings
errors: ``ConfigError``, with the file and line) carrying the CLI's message.

pandas and pyarrow are needed only for DataFrames: the search contexts and
``load_tables``.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from collections.abc import Mapping
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from . import _native
from ._native import ConfigError, GraphragError

__all__ = [
    "GraphragError",
    "ConfigError",
    "Index",
    "Context",
    "Result",
    "init",
    "build_index",
    "update_index",
    "generate_indexing_prompts",
    "load_tables",
    "local_search",
    "global_search",
    "drift_search",
    "basic_search",
    "hybrid_search",
    "mix_search",
    "ppr_search",
    "local_search_streaming",
    "global_search_streaming",
    "drift_search_streaming",
    "basic_search_streaming",
    "hybrid_search_streaming",
    "mix_search_streaming",
    "ppr_search_streaming",
    "METHODS",
]

METHODS = tuple(_native.METHODS)
logger = logging.getLogger("graphrag_rs")

Progress = Callable[[str, int, int, Optional[str]], None]


def _log_step(step: str, index: int, total: int, status: Optional[str]) -> None:
    if status is None:
        logger.info("step %d/%d %s", index + 1, total, step)
    else:
        logger.info("step %d/%d %s: %s", index + 1, total, step, status)


def init(root: "os.PathLike[str] | str", force: bool = False) -> str:
    """Writes a new project at ``root`` (settings.yaml, .env, prompts/, input/)."""
    return _native.init(os.fspath(root), force)


def build_index(
    root: "os.PathLike[str] | str",
    method: str = "auto",
    resume: bool = False,
    no_cache: bool = False,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]:
    """Indexes ``root/input`` (as ``graphrag-rs index``).

    ``method``: ``auto`` (standard with a chat model, else fast),
    ``standard`` (GraphRAG's), ``fast`` (no LLM), ``light`` (LightRAG's
    economics: LLM extraction, no community reports), a
    ``workflows/<name>.yaml`` of the project or a pipeline .yaml path. ``resume``: continue an
    interrupted run. ``progress(step, index, total, status)`` is called as
    each step starts (status None) and ends (``ran``/``skipped``/``failed``);
    by default steps are logged to the ``graphrag_rs`` logger. Raising from
    it stops the run (resumable). Returns a summary dict.
    """
    return _native.build_index(os.fspath(root), method, resume, no_cache, progress or _log_step)


def update_index(
    root: "os.PathLike[str] | str",
    method: str = "auto",
    no_cache: bool = False,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]:
    """Updates the index of ``root`` for added, changed and removed documents
    (as ``graphrag-rs update``). Returns a summary dict with ``changes``."""
    return _native.update_index(os.fspath(root), method, no_cache, progress or _log_step)


def generate_indexing_prompts(
    root: "os.PathLike[str] | str",
    limit: int = 15,
    selection_method: str = "random",
    domain: Optional[str] = None,
    language: Optional[str] = None,
    max_tokens: int = 2000,
    discover_entity_types: bool = True,
    min_examples_required: int = 2,
    n_subset_max: int = 300,
    k: int = 15,
    chunk_size: Optional[int] = None,
    overlap: Optional[int] = None,
    output: "os.PathLike[str] | str | None" = None,
    skip_validation: bool = False,
) -> Tuple[str, str, str]:
    """Prompts adapted to the corpus of ``root`` (as ``graphrag-rs prompt-tune``;
    GraphRAG's ``api.generate_indexing_prompts`` with the project's root in
    place of its config): ``(extract_graph, summarize_descriptions,
    community_report_graph)``. The parameters are GraphRAG's, with its
    defaults; ``selection_method``: ``random``, ``top``, ``all`` or ``auto``;
    ``chunk_size`` / ``overlap`` replace the settings' chunking. Nothing is
    written unless ``output`` (a folder, relative to ``root``) is given.
    Needs a chat model; Ctrl-C stops it (answers so far are cached)."""
    prompts, warnings = _native.generate_indexing_prompts(
        os.fspath(root),
        limit,
        selection_method,
        domain,
        language,
        max_tokens,
        discover_entity_types,
        min_examples_required,
        n_subset_max,
        k,
        chunk_size,
        overlap,
        None if output is None else os.fspath(output),
        skip_validation,
    )
    for warning in warnings:
        logger.warning("%s", warning)
    return tuple(prompts)


def load_tables(root: "os.PathLike[str] | str", format: str = "pandas") -> Dict[str, Any]:
    """The index's output tables by name (``entities``, ``relationships``,
    ``communities``, ``community_reports``, ``text_units``, ``documents``, ...),
    as pandas DataFrames (``format="pandas"``) or pyarrow Tables
    (``format="arrow"``). Read straight from the parquet files by Arrow."""
    if format not in ("pandas", "arrow"):
        raise ValueError(f"format must be 'pandas' or 'arrow', not {format!r}")
    import pyarrow.parquet as pq

    out = _native.output_dir(os.fspath(root))
    tables = {}
    for name in sorted(os.listdir(out)):
        if name.endswith(".parquet"):
            table = pq.read_table(os.path.join(out, name))
            tables[name[: -len(".parquet")]] = table.to_pandas() if format == "pandas" else table
    return tables


class Context(Mapping):
    """A search's context keyed like GraphRAG's (``entities``,
    ``relationships``, ``reports``, ``sources``, ``claims``, ...): each table
    becomes a pandas DataFrame when first read (building one costs about as
    much as a fast query, so a caller that reads one table pays for one);
    other details (``retrieval``, ``walk``, ...) are given as they are."""

    __slots__ = ("_records", "_frames")

    def __init__(self, records: Dict[str, Any]) -> None:
        self._records = records
        self._frames: Dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        value = self._records[key]
        if not isinstance(value, list):
            return value
        frame = self._frames.get(key)
        if frame is None:
            import pandas as pd

            frame = self._frames[key] = pd.DataFrame(value)
        return frame

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return f"Context({list(self._records)})"


class Result:
    """One answer: ``response`` (None when context_only), ``context`` (dict of
    DataFrames keyed like GraphRAG's: entities, relationships, reports,
    sources, claims, ...), ``context_text`` (what the model saw), ``stats``."""

    __slots__ = ("response", "context", "context_text", "stats", "notice", "method")

    def __init__(self, method: str, raw: Tuple[Any, ...], frames: bool = True) -> None:
        answer, text, records, stats, notice = raw
        self.method = method
        self.response = answer
        records = json.loads(records) if records else {}
        self.context = Context(records) if frames else records
        self.context_text = text
        self.stats = json.loads(stats)
        self.notice = notice

    def __iter__(self):
        # ``response, context = index.query(...)``, as GraphRAG's API returns.
        return iter((self.response, self.context))

    def __repr__(self) -> str:
        head = (self.response or self.notice or "")[:60]
        return f"Result(method={self.method!r}, response={head!r}..., context={list(self.context)})"


class Index:
    """A project's index loaded once, answering many questions in-process.

        index = graphrag_rs.Index("my-project")
        response, context = index.query("Who is Scrooge?", method="local")
    """

    def __init__(self, root: "os.PathLike[str] | str") -> None:
        self._native = _native.NativeIndex(os.fspath(root))

    @property
    def root(self) -> str:
        return self._native.root

    def query(
        self,
        query: str,
        method: str = "local",
        context_only: bool = False,
        community_level: Optional[int] = None,
        response_type: Optional[str] = None,
        dynamic_community_selection: bool = False,
        frames: bool = True,
        on_token: Optional[Callable[[str], None]] = None,
    ) -> Result:
        """Answers ``query`` with ``method`` (one of ``METHODS``). With
        ``context_only`` no chat model is called. ``frames=False`` keeps the
        context as lists of dicts (no pandas needed)."""
        raw = self._native.query(
            query, method, context_only, community_level, response_type, dynamic_community_selection, on_token
        )
        return Result(method, raw, frames)

    def query_streaming(self, query: str, method: str = "local", **kwargs: Any) -> Iterator[str]:
        """Yields the answer's text as the model streams it. The full
        result is in ``self.last_result`` once the iteration ends."""
        pieces: "queue.Queue[Any]" = queue.Queue()
        done = object()
        outcome: Dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["result"] = self.query(query, method, on_token=pieces.put, **kwargs)
            except BaseException as e:  # re-raised in the caller's thread
                outcome["error"] = e
            finally:
                pieces.put(done)

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        while True:
            piece = pieces.get()
            if piece is done:
                break
            yield piece
        worker.join()
        if "error" in outcome:
            raise outcome["error"]
        self.last_result = outcome["result"]


def _search(method: str):
    def search(root: "os.PathLike[str] | str", query: str, **kwargs: Any) -> Tuple[Optional[str], Dict[str, Any]]:
        return tuple(Index(root).query(query, method=method, **kwargs))  # type: ignore[return-value]

    search.__name__ = f"{method}_search"
    search.__doc__ = (
        f"{method} search over the index of ``root``: ``(response, context)`` with the context as a dict of "
        "DataFrames keyed like GraphRAG's. Loads the index for this one question: keep an ``Index`` for many."
    )
    return search


def _search_streaming(method: str):
    def search(root: "os.PathLike[str] | str", query: str, **kwargs: Any) -> Iterator[str]:
        yield from Index(root).query_streaming(query, method=method, **kwargs)

    search.__name__ = f"{method}_search_streaming"
    search.__doc__ = f"{method} search over ``root``, yielding the answer's text pieces as they stream."
    return search


local_search = _search("local")
global_search = _search("global")
drift_search = _search("drift")
basic_search = _search("basic")
hybrid_search = _search("hybrid")
mix_search = _search("mix")
ppr_search = _search("ppr")
local_search_streaming = _search_streaming("local")
global_search_streaming = _search_streaming("global")
drift_search_streaming = _search_streaming("drift")
basic_search_streaming = _search_streaming("basic")
hybrid_search_streaming = _search_streaming("hybrid")
mix_search_streaming = _search_streaming("mix")
ppr_search_streaming = _search_streaming("ppr")
