"""graphrag-rs from Python: index a folder, ask it questions, read its tables.

    import graphrag_rs
    graphrag_rs.build_index("my-project")
    response, context = graphrag_rs.local_search("my-project", "Who is Scrooge?")
    print(response)
    context["entities"].head()

    index = graphrag_rs.Index("my-project")         # many questions, one load
    result = await index.aquery("Who is Scrooge?")  # from asyncio

Indexing and queries run in Rust with the GIL released. Ctrl-C
(KeyboardInterrupt) stops an index or update run cleanly (the previous index
stays as it was, and ``build_index(root, resume=True)`` continues from the
steps that finished) and stops a query's model calls; a ``CancelToken``
does the same from another thread, and cancelling an asyncio task does it
for ``a*`` functions. The library's warnings and progress go to the
``graphrag_rs`` logger; a build shows a tqdm bar when tqdm is installed.
Errors raise ``GraphragError`` (settings errors: ``ConfigError``, naming the
file and line; no index yet: ``NoIndexError``; a cancelled query:
``CancelledError``).

A ``root`` may also be a project in a bucket, ``"s3://bucket/prefix"``,
``"az://container/prefix"`` or ``"gs://bucket/prefix"`` (``init``,
``build_index``, ``update_index``, ``Index``, ``load_tables``): its settings,
prompts, documents and index stay there, worked on through a local copy in
the user's cache (``Index(...).root`` is that copy).

pandas and pyarrow are needed only for DataFrames (the search contexts and
``load_tables``), networkx only for ``Index.to_networkx``.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Dict, Iterator, Optional, Protocol, Tuple

from . import _native, _progress, api
from ._aio import run_stoppable, twin
from ._index import History, Index, QueryOptions
from ._lightrag import QueryParam
from ._native import CancelledError, CancelToken, ConfigError, GraphragError, NoIndexError
from ._progress import Progress
from ._results import Context, Result

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "GraphragError",
    "ConfigError",
    "NoIndexError",
    "CancelledError",
    "CancelToken",
    "Index",
    "Context",
    "Result",
    "Progress",
    "QueryOptions",
    "History",
    "QueryParam",
    "api",
    "init",
    "ainit",
    "build_index",
    "update_index",
    "abuild_index",
    "aupdate_index",
    "generate_indexing_prompts",
    "agenerate_indexing_prompts",
    "load_tables",
    "aload_tables",
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
    "alocal_search",
    "aglobal_search",
    "adrift_search",
    "abasic_search",
    "ahybrid_search",
    "amix_search",
    "appr_search",
    "alocal_search_streaming",
    "aglobal_search_streaming",
    "adrift_search_streaming",
    "abasic_search_streaming",
    "ahybrid_search_streaming",
    "amix_search_streaming",
    "appr_search_streaming",
    "METHODS",
    "MAX_QUESTION_BYTES",
]

METHODS: Tuple[str, ...] = tuple(_native.METHODS)
MAX_QUESTION_BYTES: int = _native.MAX_QUESTION_BYTES

def init(root: "os.PathLike[str] | str", force: bool = False) -> str:
    """Writes a new project at ``root`` (settings.yaml, .env, prompts/,
    input/); ``force=True`` overwrites an existing project's files."""
    return _native.init(os.fspath(root), force)


def _with_display(run: Callable[[Progress], Dict[str, Any]], progress: Optional[Progress]) -> Dict[str, Any]:
    display = progress or _progress.default()
    try:
        return run(display)
    finally:
        close = getattr(display, "close", None)
        if close is not None:
            close()
        _native.forward_logs()


def build_index(
    root: "os.PathLike[str] | str",
    method: str = "auto",
    resume: bool = False,
    no_cache: bool = False,
    progress: Optional[Progress] = None,
    cancel: Optional[CancelToken] = None,
) -> Dict[str, Any]:
    """Indexes ``root/input`` (as ``graphrag-rs index``); returns a summary dict.

    ``method``: ``auto`` (standard with a chat model, else fast),
    ``standard`` (GraphRAG's), ``fast`` (no LLM), ``light`` (LightRAG's
    economics: LLM extraction, no community reports), a
    ``workflows/<name>.yaml`` of the project or a pipeline .yaml path.
    ``resume``: continue an interrupted run. ``no_cache``: neither read nor
    write the model answer cache. ``progress(step, index, total, status)``
    is called as each step starts (status None) and ends
    (``ran``/``skipped``/``failed``); by default a tqdm bar (when tqdm is
    installed) or log lines. Raising from it stops this run (resumable),
    as do ``cancel.cancel()`` and Ctrl-C; other builds in the process go on.
    """
    return _with_display(
        lambda display: _native.build_index(os.fspath(root), method, resume, no_cache, display, cancel), progress
    )


def update_index(
    root: "os.PathLike[str] | str",
    method: str = "auto",
    no_cache: bool = False,
    progress: Optional[Progress] = None,
    cancel: Optional[CancelToken] = None,
) -> Dict[str, Any]:
    """Updates the index of ``root`` for added, changed and removed documents
    (as ``graphrag-rs update``); returns a summary dict with ``changes``. An
    open ``Index`` of the project answers from the new index at its next
    question. ``progress`` and ``cancel`` as for ``build_index``."""
    return _with_display(
        lambda display: _native.update_index(os.fspath(root), method, no_cache, display, cancel), progress
    )


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
    cancel: Optional[CancelToken] = None,
) -> Tuple[str, str, str]:
    """Prompts adapted to the corpus of ``root`` (as ``graphrag-rs prompt-tune``;
    GraphRAG's ``api.generate_indexing_prompts`` with the project's root in
    place of its config): ``(extract_graph, summarize_descriptions,
    community_report_graph)``. The parameters are GraphRAG's, with its
    defaults; ``selection_method``: ``random``, ``top``, ``all`` or ``auto``;
    ``chunk_size`` / ``overlap`` replace the settings' chunking. Nothing is
    written unless ``output`` (a folder, relative to ``root``) is given.
    Needs a chat model; Ctrl-C or ``cancel.cancel()`` stops it
    (KeyboardInterrupt; answers so far are cached, and other runs of the
    process go on)."""
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
        cancel,
    )
    for warning in warnings:
        _progress.logger.warning("%s", warning)
    extract_graph, summarize_descriptions, community_report_graph = prompts
    return extract_graph, summarize_descriptions, community_report_graph


def load_tables(root: "os.PathLike[str] | str", format: str = "pandas") -> Dict[str, Any]:
    """The index's output tables by name (``entities``, ``relationships``,
    ``communities``, ``community_reports``, ``text_units``, ``documents``, ...),
    as pandas DataFrames (``format="pandas"``) or pyarrow Tables
    (``format="arrow"``), read straight from the parquet files by Arrow.
    ``NoIndexError`` when the project has no index yet."""
    if format not in ("pandas", "arrow"):
        raise ValueError(f"format must be 'pandas' or 'arrow', not {format!r}")
    pq: Any = importlib.import_module("pyarrow.parquet")

    out = _native.index_dir(os.fspath(root))
    tables = {}
    for name in sorted(os.listdir(out)):
        if name.endswith(".parquet"):
            table = pq.read_table(os.path.join(out, name))
            tables[name[: -len(".parquet")]] = table.to_pandas() if format == "pandas" else table
    return tables


# -- one question per call, as GraphRAG's api.*_search --------------------------


class Search(Protocol):
    def __call__(
        self,
        root: "os.PathLike[str] | str",
        query: str,
        *,
        cancel: Optional[CancelToken] = None,
        **options: "Unpack[QueryOptions]",
    ) -> Tuple[Optional[str], Context]:
        """``(response, context)`` for ``query`` over the index of ``root``,
        the context a ``Context`` of DataFrames keyed like GraphRAG's;
        ``options`` as ``Index.query``'s (``QueryOptions``). Loads the index
        for this one question: keep an ``Index`` for many."""
        ...


class SearchStreaming(Protocol):
    def __call__(self, root: "os.PathLike[str] | str", query: str, **options: "Unpack[QueryOptions]") -> Iterator[str]:
        """The answer's text pieces as the model streams them."""
        ...


class AsyncSearchStreaming(Protocol):
    def __call__(
        self, root: "os.PathLike[str] | str", query: str, **options: "Unpack[QueryOptions]"
    ) -> AsyncIterator[str]:
        """``async for piece in ...``: the answer's text pieces as they stream."""
        ...


def _search(method: str) -> Search:
    def search(
        root: "os.PathLike[str] | str",
        query: str,
        *,
        cancel: Optional[CancelToken] = None,
        **options: "Unpack[QueryOptions]",
    ) -> Tuple[Optional[str], Context]:
        result = Index(root).query(query, method, cancel=cancel, **options)
        return result.response, result.context

    search.__name__ = search.__qualname__ = f"{method}_search"
    search.__doc__ = f"{method} search over the index of ``root``." + (Search.__call__.__doc__ or "")
    return search


def _search_streaming(method: str) -> SearchStreaming:
    def search(root: "os.PathLike[str] | str", query: str, **options: "Unpack[QueryOptions]") -> Iterator[str]:
        yield from Index(root).query_streaming(query, method, **options)

    search.__name__ = search.__qualname__ = f"{method}_search_streaming"
    search.__doc__ = f"{method} search over ``root``, yielding the answer's text pieces as they stream."
    return search


def _asearch_streaming(method: str) -> AsyncSearchStreaming:
    async def search(
        root: "os.PathLike[str] | str", query: str, **options: "Unpack[QueryOptions]"
    ) -> AsyncIterator[str]:
        # Loaded as every twin works: a cancellation waits for the load to end.
        index = await run_stoppable(lambda _: Index(root))
        async for piece in index.aquery_streaming(query, method, **options):
            yield piece

    search.__name__ = search.__qualname__ = f"a{method}_search_streaming"
    search.__doc__ = f"{method} search over ``root`` from asyncio: ``async for`` over the answer's text pieces."
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
alocal_search = twin(local_search)
aglobal_search = twin(global_search)
adrift_search = twin(drift_search)
abasic_search = twin(basic_search)
ahybrid_search = twin(hybrid_search)
amix_search = twin(mix_search)
appr_search = twin(ppr_search)
alocal_search_streaming = _asearch_streaming("local")
aglobal_search_streaming = _asearch_streaming("global")
adrift_search_streaming = _asearch_streaming("drift")
abasic_search_streaming = _asearch_streaming("basic")
ahybrid_search_streaming = _asearch_streaming("hybrid")
amix_search_streaming = _asearch_streaming("mix")
appr_search_streaming = _asearch_streaming("ppr")

# The async twins of the functions above (graphrag_rs._aio.twin: cancelling
# the task stops the work, and returns once it has stopped).
ainit = twin(init)
abuild_index = twin(build_index)
aupdate_index = twin(update_index)
agenerate_indexing_prompts = twin(generate_indexing_prompts)
aload_tables = twin(load_tables)
