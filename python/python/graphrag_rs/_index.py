"""``Index``: a project's index held in memory, answering many questions,
synchronously, streaming, or from asyncio; LightRAG's document and graph
verbs over it."""

from __future__ import annotations

import asyncio
import functools
import importlib
import hashlib
import json
import os
import queue
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypedDict

from . import _native
from ._native import CancelToken, GraphragError
from ._progress import Progress
from ._results import Result

if TYPE_CHECKING:
    from typing_extensions import Unpack

History = Sequence[Tuple[str, str]]


class QueryOptions(TypedDict, total=False):
    """The options of a question (``Index.query``'s keywords, also taken by
    ``query_streaming``, ``aquery``, ``aquery_streaming`` and the
    ``*_search`` functions)."""

    context_only: bool
    community_level: Optional[int]
    response_type: Optional[str]
    dynamic_community_selection: bool
    history: Optional[History]
    max_context_tokens: Optional[int]
    enable_rerank: Optional[bool]


def _check_arguments(query: str, community_level: Optional[int]) -> None:
    if community_level is not None and community_level < 0:
        raise ValueError(f"community_level must be 0 or more (the reports of levels 0 to N), not {community_level}")
    size = len(query.encode("utf-8"))
    if size > _native.MAX_QUESTION_BYTES:
        raise ValueError(
            f"the question is {size} bytes long; at most {_native.MAX_QUESTION_BYTES} are accepted "
            "(insert long text into the index and ask about it)"
        )


class Index:
    """A project's index, read whole once, answering many questions in-process.

        index = graphrag_rs.Index("my-project")
        response, context = index.query("Who is Scrooge?", method="local")

    Before each question the index checks (a few ``stat`` calls) whether a
    newer index was published (``update_index``, ``graphrag-rs update``, a
    server's upload) and reads it whole if so: every method answers from the
    same tables. ``reload()`` reads it now."""

    def __init__(self, root: "os.PathLike[str] | str") -> None:
        self._native = _native.NativeIndex(os.fspath(root))
        self.last_result: Optional[Result] = None

    @property
    def root(self) -> str:
        """The project folder."""
        return self._native.root

    @property
    def version(self) -> str:
        """A fingerprint of the published index the answers come from."""
        return self._native.version

    def reload(self) -> None:
        """Reads the published index again now."""
        self._native.reload()

    def __repr__(self) -> str:
        return f"Index({self.root!r})"

    # -- questions -----------------------------------------------------------

    def query(
        self,
        query: str,
        method: str = "local",
        *,
        context_only: bool = False,
        community_level: Optional[int] = None,
        response_type: Optional[str] = None,
        dynamic_community_selection: bool = False,
        history: Optional[History] = None,
        max_context_tokens: Optional[int] = None,
        enable_rerank: Optional[bool] = None,
        frames: bool = True,
        on_token: Optional[Callable[[str], None]] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Result:
        """Answers ``query`` with ``method`` (one of ``METHODS``).

        ``context_only``: build the context, call no chat model.
        ``community_level``: the report levels 0..N used (GraphRAG's default 2).
        ``response_type``: the answer's length and form ("Multiple Paragraphs").
        ``dynamic_community_selection``: global search rates reports from the top level down.
        ``history``: earlier turns, oldest first, as ``(role, content)`` with role ``user`` or ``assistant``.
        ``max_context_tokens``: a context budget in place of the method's own.
        ``enable_rerank``: rerank the retrieved chunks with the model settings
        ``rerank.model_id`` names (LightRAG's option; default ``rerank.by_default``).
        ``frames=False`` keeps the context as lists of dicts (no pandas needed).
        ``on_token`` gets the answer's text pieces as the model streams them.
        ``cancel``: a ``CancelToken`` whose ``cancel()`` stops the query's model
        calls (``CancelledError``); Ctrl-C does too (``KeyboardInterrupt``).
        """
        _check_arguments(query, community_level)
        raw = self._native.query(
            query,
            method,
            context_only,
            community_level,
            response_type,
            dynamic_community_selection,
            [(role, content) for role, content in history] if history else None,
            max_context_tokens,
            on_token,
            cancel,
            enable_rerank,
        )
        result = Result(method, raw, frames)
        self.last_result = result
        return result

    def query_streaming(self, query: str, method: str = "local", **options: "Unpack[QueryOptions]") -> Iterator[str]:
        """Yields the answer's text as the model streams it (``options`` as
        ``query``'s). The full result is in ``self.last_result`` once the
        iteration ends; leaving the loop early cancels the query."""
        pieces: "queue.Queue[object]" = queue.Queue()
        done = object()
        outcome: Dict[str, Any] = {}
        token = CancelToken()

        def work() -> None:
            try:
                outcome["result"] = self.query(query, method, on_token=pieces.put, cancel=token, **options)
            except BaseException as e:  # re-raised in the caller's thread
                outcome["error"] = e
            finally:
                pieces.put(done)

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        try:
            while True:
                piece = pieces.get()
                if piece is done:
                    break
                yield str(piece)
        finally:
            if worker.is_alive():
                token.cancel()
            worker.join()
        if "error" in outcome:
            raise outcome["error"]

    async def aquery(self, query: str, method: str = "local", **options: "Unpack[QueryOptions]") -> Result:
        """``query`` from asyncio: runs on a worker thread, so the event loop
        is never blocked; cancelling the awaiting task cancels the query's
        model calls."""
        token = CancelToken()
        call = functools.partial(self.query, query, method, cancel=token, **options)
        try:
            return await asyncio.get_running_loop().run_in_executor(None, call)
        except asyncio.CancelledError:
            token.cancel()
            raise

    async def aquery_streaming(
        self, query: str, method: str = "local", **options: "Unpack[QueryOptions]"
    ) -> AsyncIterator[str]:
        """``query_streaming`` from asyncio (``async for piece in ...``): the
        pieces arrive without blocking the event loop; cancelling the task
        or leaving the loop early cancels the query."""
        loop = asyncio.get_running_loop()
        pieces: "asyncio.Queue[object]" = asyncio.Queue()
        done = object()
        token = CancelToken()

        def on_token(piece: str) -> None:
            loop.call_soon_threadsafe(pieces.put_nowait, piece)

        call = functools.partial(self.query, query, method, on_token=on_token, cancel=token, **options)
        future = loop.run_in_executor(None, call)
        # Called on the loop after every piece posted before it.
        future.add_done_callback(lambda _: pieces.put_nowait(done))
        try:
            while True:
                piece = await pieces.get()
                if piece is done:
                    break
                yield str(piece)
            await future
        finally:
            if not future.done():
                token.cancel()

    # -- LightRAG's verbs: documents -----------------------------------------

    def update_index(
        self, method: str = "auto", no_cache: bool = False, progress: Optional[Progress] = None
    ) -> Dict[str, Any]:
        """Updates the index for the input folder's changes (see
        ``graphrag_rs.update_index``); this Index answers from the new one."""
        from . import update_index

        report = update_index(self.root, method=method, no_cache=no_cache, progress=progress)
        self.reload()
        return report

    def _text_input(self) -> None:
        """Raises unless the project reads text documents (what insert writes)."""
        where, file_type = _native.input_settings(self.root)
        if file_type != "text":
            raise GraphragError(
                f"insert writes text documents, and this project reads `{file_type}` files "
                f"(settings.yaml input.type): put the document in {where} yourself"
            )

    def insert(
        self, text: str, name: Optional[str] = None, *, progress: Optional[Progress] = None
    ) -> str:
        """Adds ``text`` as a document (LightRAG's ``insert``): written to the
        project's input (its folder, or its bucket prefix) as ``name``
        (default: ``doc-<sha256 prefix>.txt``) and indexed by an update.
        Returns the document's file name. If the update fails, the document
        stays in the input and the next ``update_index()`` indexes it."""
        if not text.strip():
            raise ValueError("insert: the text is empty")
        self._text_input()
        if name is None:
            name = f"doc-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}.txt"
        if os.path.basename(name) != name or name in ("", ".", "..") or name.startswith("."):
            raise ValueError(f"insert: name must be a file name without a folder, not {name!r}")
        _native.add_document(self.root, name, text)
        self.update_index(progress=progress)
        return name

    async def ainsert(self, text: str, name: Optional[str] = None) -> str:
        """``insert`` from asyncio (on a worker thread)."""
        return await asyncio.to_thread(self.insert, text, name)

    def delete_document(self, name: str, *, progress: Optional[Progress] = None) -> Dict[str, Any]:
        """Removes the document ``name`` (its file in the project's input) and
        updates the index: its text units, and the entities and
        relationships only it supported, are gone."""
        _native.remove_document(self.root, name)
        return self.update_index(progress=progress)

    async def adelete_document(self, name: str) -> Dict[str, Any]:
        """``delete_document`` from asyncio (on a worker thread)."""
        return await asyncio.to_thread(self.delete_document, name)

    # -- LightRAG's verbs: graph edits ---------------------------------------

    def _edit(self, edit: Dict[str, Any], progress: Optional[Progress]) -> Dict[str, Any]:
        """Stores ``edit`` in the project's graph_edits.yaml (applied by every
        later index and update, so it survives them) and applies it now with
        an update."""
        _native.add_graph_edit(self.root, json.dumps({k: v for k, v in edit.items() if v is not None}))
        return self.update_index(progress=progress)

    def edit_entity(
        self,
        name: str,
        *,
        rename: Optional[str] = None,
        type: Optional[str] = None,
        description: Optional[str] = None,
        progress: Optional[Progress] = None,
    ) -> Dict[str, Any]:
        """Changes entity ``name`` (LightRAG's ``edit_entity``): a new name,
        type or description. Kept in graph_edits.yaml: later updates keep it."""
        edit = {"action": "edit_entity", "name": name, "rename": rename, "type": type, "description": description}
        return self._edit(edit, progress)

    def create_entity(
        self, name: str, *, type: str = "", description: str = "", progress: Optional[Progress] = None
    ) -> Dict[str, Any]:
        """Adds entity ``name`` (LightRAG's ``create_entity``)."""
        edit = {"action": "create_entity", "name": name, "type": type, "description": description}
        return self._edit(edit, progress)

    def delete_entity(self, name: str, *, progress: Optional[Progress] = None) -> Dict[str, Any]:
        """Removes entity ``name`` and its relationships (LightRAG's ``delete_by_entity``)."""
        return self._edit({"action": "delete_entity", "name": name}, progress)

    def merge_entities(
        self, source_entities: Sequence[str], target_entity: str, *, progress: Optional[Progress] = None
    ) -> Dict[str, Any]:
        """Merges ``source_entities`` into ``target_entity`` (LightRAG's
        ``merge_entities``): text units and descriptions joined,
        relationships re-pointed."""
        edit = {"action": "merge_entities", "from": list(source_entities), "into": target_entity}
        return self._edit(edit, progress)

    def create_relation(
        self,
        source: str,
        target: str,
        *,
        description: str = "",
        weight: float = 1.0,
        progress: Optional[Progress] = None,
    ) -> Dict[str, Any]:
        """Adds a relationship (LightRAG's ``create_relation``)."""
        edit = {"action": "create_relationship", "source": source, "target": target, "description": description, "weight": weight}
        return self._edit(edit, progress)

    def edit_relation(
        self,
        source: str,
        target: str,
        *,
        description: Optional[str] = None,
        weight: Optional[float] = None,
        progress: Optional[Progress] = None,
    ) -> Dict[str, Any]:
        """Changes the relationship between ``source`` and ``target`` (LightRAG's ``edit_relation``)."""
        edit = {"action": "edit_relationship", "source": source, "target": target, "description": description, "weight": weight}
        return self._edit(edit, progress)

    def delete_relation(self, source: str, target: str, *, progress: Optional[Progress] = None) -> Dict[str, Any]:
        """Removes the relationship between ``source`` and ``target`` (LightRAG's ``delete_by_relation``)."""
        return self._edit({"action": "delete_relationship", "source": source, "target": target}, progress)

    # -- the graph ------------------------------------------------------------

    def _graph_tables(self) -> Tuple[Any, Any]:
        pq: Any = importlib.import_module("pyarrow.parquet")

        out = _native.index_dir(self.root)
        entities = pq.read_table(os.path.join(out, "entities.parquet")).to_pylist()
        relationships = pq.read_table(os.path.join(out, "relationships.parquet")).to_pylist()
        return entities, relationships

    def get_knowledge_graph(self, node_label: str = "*", max_depth: int = 3, max_nodes: int = 1000) -> Dict[str, Any]:
        """The graph around entity ``node_label`` (``*``: the whole graph, the
        most connected entities first), at most ``max_depth`` hops and
        ``max_nodes`` entities, as LightRAG returns it: ``{"nodes": [{"id",
        "labels", "properties"}], "edges": [{"id", "source", "target",
        "properties"}], "is_truncated"}``."""
        if max_depth < 0 or max_nodes < 1:
            raise ValueError("max_depth must be 0 or more and max_nodes 1 or more")
        entities, relationships = self._graph_tables()
        by_title = {e["title"]: e for e in entities}
        neighbours: Dict[str, List[str]] = {t: [] for t in by_title}
        for r in relationships:
            if r["source"] in neighbours and r["target"] in neighbours:
                neighbours[r["source"]].append(r["target"])
                neighbours[r["target"]].append(r["source"])
        if node_label == "*":
            ranked = sorted(by_title, key=lambda t: (-len(neighbours[t]), t))
            chosen = ranked[:max_nodes]
            truncated = len(ranked) > max_nodes
        else:
            if node_label not in by_title:
                raise GraphragError(f"get_knowledge_graph: no entity {node_label!r} in the index")
            chosen, seen = [], {node_label}
            frontier: "deque[Tuple[str, int]]" = deque([(node_label, 0)])
            truncated = False
            while frontier:
                title, depth = frontier.popleft()
                if len(chosen) >= max_nodes:
                    truncated = True
                    break
                chosen.append(title)
                if depth < max_depth:
                    for n in neighbours[title]:
                        if n not in seen:
                            seen.add(n)
                            frontier.append((n, depth + 1))
        keep = set(chosen)
        nodes = [
            {"id": t, "labels": [t], "properties": {k: v for k, v in by_title[t].items() if k != "title"}}
            for t in chosen
        ]
        edges = [
            {
                "id": str(r.get("id", f"{r['source']}-{r['target']}")),
                "source": r["source"],
                "target": r["target"],
                "properties": {k: v for k, v in r.items() if k not in ("source", "target")},
            }
            for r in relationships
            if r["source"] in keep and r["target"] in keep
        ]
        return {"nodes": nodes, "edges": edges, "is_truncated": truncated}

    def to_networkx(self) -> Any:
        """The entity graph as a ``networkx.Graph``: nodes are entity titles
        with the entity's columns as attributes, edges the relationships with
        theirs (``weight`` included)."""
        nx: Any = importlib.import_module("networkx")

        entities, relationships = self._graph_tables()
        graph = nx.Graph()
        for e in entities:
            graph.add_node(e["title"], **{k: v for k, v in e.items() if k != "title"})
        for r in relationships:
            graph.add_edge(r["source"], r["target"], **{k: v for k, v in r.items() if k not in ("source", "target")})
        return graph
