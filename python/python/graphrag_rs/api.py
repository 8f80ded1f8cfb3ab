"""GraphRAG's query API, shaped as ``graphrag.api`` (3.x): coroutines
``local_search``, ``global_search``, ``drift_search``, ``basic_search``
returning ``(response, context)``, and ``*_search_streaming`` async
generators of the answer's text pieces, with GraphRAG's parameter names
and order, so that a notebook's ``await api.local_search(config=...,
entities=..., ..., query=...)`` runs unchanged with ``from graphrag_rs
import api``.

    from graphrag_rs import api
    response, context = await api.local_search("my-project", query="Who is Scrooge?")
    async for piece in api.global_search_streaming("my-project", query="What are the themes?"):
        print(piece, end="")

``config`` is the project: its root (a folder or a bucket URL), an open
``graphrag_rs.Index`` (answers without loading the index again), or
GraphRAG's ``GraphRagConfig`` (its ``root_dir``). The index is read from
there: the DataFrame parameters (``entities``, ``communities``, ...) are
accepted so that GraphRAG's calls run as written, and are not read.
``callbacks``: GraphRAG's ``QueryCallbacks`` (or any object) get
``on_context(context)`` once the context is known and, when streaming,
``on_llm_new_token(piece)`` for each piece. ``verbose`` changes nothing
(the engine's logs go to the ``graphrag_rs`` logger). Cancelling the task
stops the query's model calls (see ``graphrag_rs._aio``).

The synchronous ``graphrag_rs.local_search(root, query)`` and its
``a``-prefixed twins stay as they were: this module adds GraphRAG's names
as coroutines, beside them."""

from __future__ import annotations

import os
from typing import Any, AsyncIterator, Optional, Sequence, Tuple

from ._aio import run_stoppable
from ._index import Index
from ._native import GraphragError
from ._results import Context

__all__ = [
    "local_search",
    "local_search_streaming",
    "global_search",
    "global_search_streaming",
    "drift_search",
    "drift_search_streaming",
    "basic_search",
    "basic_search_streaming",
]

# GraphRAG's defaults for what its signatures require.
_RESPONSE_TYPE = "Multiple Paragraphs"
_COMMUNITY_LEVEL = 2

Config = Any  # a root ("os.PathLike[str] | str"), an Index, or an object with a `root_dir`


async def _index(config: Config) -> Index:
    if isinstance(config, Index):
        return config
    root = config.root_dir if hasattr(config, "root_dir") else config
    return await run_stoppable(lambda _: Index(os.fspath(root)))


def _question(query: Optional[str]) -> str:
    if query is None:
        raise GraphragError("query= is required (the question to answer)")
    return query


def _notify_context(callbacks: Optional[Sequence[Any]], context: Any) -> None:
    for callback in callbacks or ():
        on_context = getattr(callback, "on_context", None)
        if on_context is not None:
            on_context(context)


async def _search(
    config: Config, method: str, query: Optional[str], callbacks: Optional[Sequence[Any]], **options: Any
) -> Tuple[Optional[str], Context]:
    index = await _index(config)
    result = await index.aquery(_question(query), method, **options)
    _notify_context(callbacks, result.context)
    return result.response, result.context


async def _stream(
    config: Config, method: str, query: Optional[str], callbacks: Optional[Sequence[Any]], **options: Any
) -> AsyncIterator[str]:
    index = await _index(config)
    async for piece in index.aquery_streaming(_question(query), method, **options):
        for callback in callbacks or ():
            on_token = getattr(callback, "on_llm_new_token", None)
            if on_token is not None:
                on_token(piece)
        yield piece
    if index.last_result is not None:
        _notify_context(callbacks, index.last_result.context)


async def global_search(
    config: Config,
    entities: Any = None,
    communities: Any = None,
    community_reports: Any = None,
    community_level: Optional[int] = _COMMUNITY_LEVEL,
    dynamic_community_selection: bool = False,
    response_type: str = _RESPONSE_TYPE,
    query: Optional[str] = None,
    callbacks: Optional[Sequence[Any]] = None,
    verbose: bool = False,
) -> Tuple[Optional[str], Context]:
    """GraphRAG's ``api.global_search``: ``(response, context)`` for ``query``
    from the community reports of ``config``'s index."""
    return await _search(
        config, "global", query, callbacks, community_level=community_level,
        dynamic_community_selection=dynamic_community_selection, response_type=response_type,
    )


async def global_search_streaming(
    config: Config,
    entities: Any = None,
    communities: Any = None,
    community_reports: Any = None,
    community_level: Optional[int] = _COMMUNITY_LEVEL,
    dynamic_community_selection: bool = False,
    response_type: str = _RESPONSE_TYPE,
    query: Optional[str] = None,
    callbacks: Optional[Sequence[Any]] = None,
    verbose: bool = False,
) -> AsyncIterator[str]:
    """GraphRAG's ``api.global_search_streaming``: the answer's text pieces."""
    async for piece in _stream(
        config, "global", query, callbacks, community_level=community_level,
        dynamic_community_selection=dynamic_community_selection, response_type=response_type,
    ):
        yield piece


async def local_search(
    config: Config,
    entities: Any = None,
    communities: Any = None,
    community_reports: Any = None,
    text_units: Any = None,
    relationships: Any = None,
    covariates: Any = None,
    community_level: int = _COMMUNITY_LEVEL,
    response_type: str = _RESPONSE_TYPE,
    query: Optional[str] = None,
    callbacks: Optional[Sequence[Any]] = None,
    verbose: bool = False,
) -> Tuple[Optional[str], Context]:
    """GraphRAG's ``api.local_search``: ``(response, context)`` for ``query``
    from the entities around it."""
    return await _search(
        config, "local", query, callbacks, community_level=community_level, response_type=response_type
    )


async def local_search_streaming(
    config: Config,
    entities: Any = None,
    communities: Any = None,
    community_reports: Any = None,
    text_units: Any = None,
    relationships: Any = None,
    covariates: Any = None,
    community_level: int = _COMMUNITY_LEVEL,
    response_type: str = _RESPONSE_TYPE,
    query: Optional[str] = None,
    callbacks: Optional[Sequence[Any]] = None,
    verbose: bool = False,
) -> AsyncIterator[str]:
    """GraphRAG's ``api.local_search_streaming``: the answer's text pieces."""
    async for piece in _stream(
        config, "local", query, callbacks, community_level=community_level, response_type=response_type
    ):
        yield piece


async def drift_search(
    config: Config,
    entities: Any = None,
    communities: Any = None,
    community_reports: Any = None,
    text_units: Any = None,
    relationships: Any = None,
    community_level: int = _COMMUNITY_LEVEL,
    response_type: str = _RESPONSE_TYPE,
    query: Optional[str] = None,
    callbacks: Optional[Sequence[Any]] = None,
    verbose: bool = False,
) -> Tuple[Optional[str], Context]:
    """GraphRAG's ``api.drift_search``: ``(response, context)`` for ``query``."""
    return await _search(
        config, "drift", query, callbacks, community_level=community_level, response_type=response_type
    )


async def drift_search_streaming(
    config: Config,
    entities: Any = None,
    communities: Any = None,
    community_reports: Any = None,
    text_units: Any = None,
    relationships: Any = None,
    community_level: int = _COMMUNITY_LEVEL,
    response_type: str = _RESPONSE_TYPE,
    query: Optional[str] = None,
    callbacks: Optional[Sequence[Any]] = None,
    verbose: bool = False,
) -> AsyncIterator[str]:
    """GraphRAG's ``api.drift_search_streaming``: the answer's text pieces."""
    async for piece in _stream(
        config, "drift", query, callbacks, community_level=community_level, response_type=response_type
    ):
        yield piece


async def basic_search(
    config: Config,
    text_units: Any = None,
    response_type: str = _RESPONSE_TYPE,
    query: Optional[str] = None,
    callbacks: Optional[Sequence[Any]] = None,
    verbose: bool = False,
) -> Tuple[Optional[str], Context]:
    """GraphRAG's ``api.basic_search``: ``(response, context)`` for ``query``
    from the text units nearest it."""
    return await _search(config, "basic", query, callbacks, response_type=response_type)


async def basic_search_streaming(
    config: Config,
    text_units: Any = None,
    response_type: str = _RESPONSE_TYPE,
    query: Optional[str] = None,
    callbacks: Optional[Sequence[Any]] = None,
    verbose: bool = False,
) -> AsyncIterator[str]:
    """GraphRAG's ``api.basic_search_streaming``: the answer's text pieces."""
    async for piece in _stream(config, "basic", query, callbacks, response_type=response_type):
        yield piece
