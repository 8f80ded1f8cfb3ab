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
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
)

from . import _lightrag, _native
from ._aio import twin
from ._lightrag import ExportFormat, QueryParam
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


# The roles an earlier turn may have: the system prompt is the project's (prompts/), not the caller's.
_HISTORY_ROLES = ("user", "assistant")


def _check_arguments(query: str, community_level: Optional[int], history: Optional[History]) -> None:
    if community_level is not None and community_level < 0:
        raise ValueError(f"community_level must be 0 or more (the reports of levels 0 to N), not {community_level}")
    size = len(query.encode("utf-8"))
    if size > _native.MAX_QUESTION_BYTES:
        # GraphragError, as the library raises for the same question (and for other misuse).
        raise GraphragError(
            f"the question is {size} bytes long; at most {_native.MAX_QUESTION_BYTES} are accepted "
            "(insert long text into the index and ask about it)"
        )
    for role, _ in history or ():
        if role not in _HISTORY_ROLES:
            raise GraphragError(
                f"history: an earlier turn's role is `user` or `assistant`, not {role!r} "
                "(the system prompt is the project's: prompts/ and settings.yaml)"
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
        method: "str | QueryParam" = "local",
        *,
        param: Optional[QueryParam] = None,
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
        """Answers ``query`` with ``method`` (one of ``METHODS``), or as LightRAG's
        ``query(query, param=QueryParam(...))`` (``param`` in place of
        ``method`` and the options below; ``str(result)`` is the answer).

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
        if isinstance(method, QueryParam):
            param = method
        if param is not None:
            method, lightrag = _lightrag.query_options(param)
            context_only = context_only or lightrag["context_only"]
            response_type = response_type or lightrag["response_type"]
            history = history or lightrag["history"]
            max_context_tokens = max_context_tokens or lightrag.get("max_context_tokens")
        assert isinstance(method, str)
        _check_arguments(query, community_level, history)
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
            # As every twin's: the query's worker has ended when the generator has.
            await asyncio.wait([future])
            if not future.cancelled():
                future.exception()  # consumed: an error raised above, or a cancelled query's

    # -- LightRAG's verbs: documents -----------------------------------------

    def update_index(
        self,
        method: str = "auto",
        no_cache: bool = False,
        progress: Optional[Progress] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """Updates the index for the input folder's changes (see
        ``graphrag_rs.update_index``); this Index answers from the new one."""
        from . import update_index

        report = update_index(self.root, method=method, no_cache=no_cache, progress=progress, cancel=cancel)
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

    def _update_or_undo(
        self, undo: Callable[[], None], progress: Optional[Progress], cancel: Optional[CancelToken]
    ) -> Dict[str, Any]:
        """The update that applies a document change; if it is stopped
        (``cancel``, Ctrl-C: the previous index stays published), ``undo``
        puts the input back as it was, so that no later update applies the
        change either."""
        try:
            return self.update_index(progress=progress, cancel=cancel)
        except KeyboardInterrupt:
            undo()
            raise

    def insert(
        self,
        text: "str | Sequence[str]",
        name: "str | Sequence[str] | None" = None,
        *,
        progress: Optional[Progress] = None,
        cancel: Optional[CancelToken] = None,
    ) -> "str | List[str]":
        """Adds ``text`` as a document (LightRAG's ``insert``), or each text
        of a list: written to the project's input (its folder, or its bucket
        prefix) as ``name`` (a list of names for a list; default:
        ``doc-<sha256 prefix>.txt``) and indexed by one update. Returns the
        document's file name (a list of them for a list). If the update
        fails, the documents stay in the input and the next
        ``update_index()`` indexes them; if it is stopped (``cancel``,
        Ctrl-C, a cancelled ``ainsert``), they are removed again: nothing
        was inserted."""
        texts = [text] if isinstance(text, str) else list(text)
        if name is None:
            names = [f"doc-{hashlib.sha256(t.encode('utf-8')).hexdigest()[:16]}.txt" for t in texts]
        else:
            names = [name] if isinstance(name, str) else list(name)
        if len(names) != len(texts):
            raise ValueError(f"insert: {len(texts)} texts and {len(names)} names")
        for t, n in zip(texts, names):
            if not isinstance(t, str) or not t.strip():
                raise ValueError("insert: a text is empty")
            if os.path.basename(n) != n or n in ("", ".", "..") or n.startswith("."):
                raise ValueError(f"insert: name must be a file name without a folder, not {n!r}")
        if len(set(names)) != len(names):
            raise ValueError("insert: two documents have the same name (or the same text)")
        self._text_input()
        written: List[str] = []

        def undo() -> None:
            for n in written:
                _native.remove_document(self.root, n)

        try:
            for t, n in zip(texts, names):
                _native.add_document(self.root, n, t.encode("utf-8"))
                written.append(n)
        except GraphragError:
            undo()
            raise
        self._update_or_undo(undo, progress, cancel)
        return names[0] if isinstance(text, str) else names

    def delete_document(
        self, name: str, *, progress: Optional[Progress] = None, cancel: Optional[CancelToken] = None
    ) -> Dict[str, Any]:
        """Removes the document ``name`` (its file in the project's input) and
        updates the index: its text units, and the entities and
        relationships only it supported, are gone. If the update is stopped
        (``cancel``, Ctrl-C, a cancelled ``adelete_document``), the document
        is put back: nothing was deleted."""
        content = _native.remove_document(self.root, name)
        return self._update_or_undo(lambda: _native.add_document(self.root, name, content), progress, cancel)

    # -- LightRAG's verbs: graph edits ---------------------------------------

    def _edit(
        self,
        edit: Dict[str, Any],
        progress: Optional[Progress],
        cancel: Optional[CancelToken],
        allow_merge: bool = False,
        then: Optional[Dict[str, Any]] = None,
    ) -> Dict[str, Any]:
        """Checks ``edit`` against the published graph (an entity or
        relationship it names that is not there is refused, as LightRAG
        raises), stores it (and ``then``, an edit that applies after it) in
        the project's graph_edits.yaml (applied by every later index and
        update, so it survives them) and applies it now with an update. If
        that update is stopped (``cancel``, Ctrl-C, a cancelled twin), the
        edits are taken back: none applies later either."""
        as_json = [json.dumps({k: v for k, v in e.items() if v is not None}) for e in (edit, then) if e]
        _native.check_graph_edit(self.root, as_json[0], allow_merge)
        for one in as_json:
            _native.add_graph_edit(self.root, one)

        def undo() -> None:
            for one in reversed(as_json):
                _native.remove_graph_edit(self.root, one)

        return self._update_or_undo(undo, progress, cancel)

    def edit_entity(
        self,
        name: str,
        updated_data: Optional[Mapping[str, Any]] = None,
        allow_rename: bool = True,
        allow_merge: bool = False,
        *,
        rename: Optional[str] = None,
        type: Optional[str] = None,
        description: Optional[str] = None,
        progress: Optional[Progress] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """Changes entity ``name`` (LightRAG's ``edit_entity``): a new name,
        type or description, as keywords or as LightRAG's ``updated_data``
        dict (``entity_name``, ``entity_type``, ``description``). Renaming
        onto an existing entity merges the two only with ``allow_merge``.
        An entity the index does not have is an error. Kept in
        graph_edits.yaml: later updates keep it."""
        data = _lightrag.fields_of(updated_data, "edit_entity", ("entity_name", "entity_type", "description"))
        rename = rename if rename is not None else data.get("entity_name")
        if rename is not None and rename != name and not allow_rename:
            raise GraphragError(f"edit_entity: renaming {name!r} to {rename!r} needs allow_rename=True")
        edit = {
            "action": "edit_entity",
            "name": name,
            "rename": rename,
            "type": type if type is not None else data.get("entity_type"),
            "description": description if description is not None else data.get("description"),
        }
        return self._edit(edit, progress, cancel, allow_merge)

    def create_entity(
        self,
        name: str,
        entity_data: Optional[Mapping[str, Any]] = None,
        *,
        type: str = "",
        description: str = "",
        progress: Optional[Progress] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """Adds entity ``name`` (LightRAG's ``create_entity``; ``entity_data``:
        ``entity_type``, ``description``)."""
        data = _lightrag.fields_of(entity_data, "create_entity", ("entity_type", "description"))
        edit = {
            "action": "create_entity",
            "name": name,
            "type": data.get("entity_type", type),
            "description": data.get("description", description),
        }
        return self._edit(edit, progress, cancel)

    def delete_entity(
        self, name: str, *, progress: Optional[Progress] = None, cancel: Optional[CancelToken] = None
    ) -> Dict[str, Any]:
        """Removes entity ``name`` and its relationships (LightRAG's ``delete_by_entity``)."""
        return self._edit({"action": "delete_entity", "name": name}, progress, cancel)

    def delete_by_entity(
        self, entity_name: str, *, progress: Optional[Progress] = None, cancel: Optional[CancelToken] = None
    ) -> Dict[str, Any]:
        """LightRAG's name for ``delete_entity``."""
        return self.delete_entity(entity_name, progress=progress, cancel=cancel)

    def merge_entities(
        self,
        source_entities: Sequence[str],
        target_entity: str,
        merge_strategy: Optional[Mapping[str, str]] = None,
        target_entity_data: Optional[Mapping[str, Any]] = None,
        *,
        progress: Optional[Progress] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """Merges ``source_entities`` into ``target_entity`` (LightRAG's
        ``merge_entities``): text units and descriptions joined
        (LightRAG's ``concatenate``, the only ``merge_strategy`` offered),
        relationships re-pointed; ``target_entity_data`` (``entity_type``,
        ``description``) then set on the merged entity."""
        strategies = set((merge_strategy or {}).values()) - {"concatenate"}
        if strategies:
            raise GraphragError(f"merge_entities: merge strategies {sorted(strategies)} are not offered (descriptions are concatenated)")
        data = _lightrag.fields_of(target_entity_data, "merge_entities", ("entity_type", "description"))
        edit = {"action": "merge_entities", "from": list(source_entities), "into": target_entity}
        then = None
        if data:
            then = {"action": "edit_entity", "name": target_entity, "type": data.get("entity_type"), "description": data.get("description")}
        return self._edit(edit, progress, cancel, then=then)

    def create_relation(
        self,
        source: str,
        target: str,
        relation_data: Optional[Mapping[str, Any]] = None,
        *,
        description: str = "",
        weight: float = 1.0,
        progress: Optional[Progress] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """Adds a relationship between two existing entities (LightRAG's
        ``create_relation``; ``relation_data``: ``description``, ``weight``)."""
        data = _lightrag.fields_of(relation_data, "create_relation", ("description", "weight"))
        edit = {
            "action": "create_relationship",
            "source": source,
            "target": target,
            "description": data.get("description", description),
            "weight": data.get("weight", weight),
        }
        return self._edit(edit, progress, cancel)

    def edit_relation(
        self,
        source: str,
        target: str,
        updated_data: Optional[Mapping[str, Any]] = None,
        *,
        description: Optional[str] = None,
        weight: Optional[float] = None,
        progress: Optional[Progress] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """Changes the relationship between ``source`` and ``target`` (LightRAG's
        ``edit_relation``; ``updated_data``: ``description``, ``weight``)."""
        data = _lightrag.fields_of(updated_data, "edit_relation", ("description", "weight"))
        edit = {
            "action": "edit_relationship",
            "source": source,
            "target": target,
            "description": description if description is not None else data.get("description"),
            "weight": weight if weight is not None else data.get("weight"),
        }
        return self._edit(edit, progress, cancel)

    def delete_relation(
        self, source: str, target: str, *, progress: Optional[Progress] = None, cancel: Optional[CancelToken] = None
    ) -> Dict[str, Any]:
        """Removes the relationship between ``source`` and ``target`` (LightRAG's ``delete_by_relation``)."""
        edit = {"action": "delete_relationship", "source": source, "target": target}
        return self._edit(edit, progress, cancel)

    def delete_by_relation(
        self,
        source_entity: str,
        target_entity: str,
        *,
        progress: Optional[Progress] = None,
        cancel: Optional[CancelToken] = None,
    ) -> Dict[str, Any]:
        """LightRAG's name for ``delete_relation``."""
        return self.delete_relation(source_entity, target_entity, progress=progress, cancel=cancel)

    # -- LightRAG's reads -----------------------------------------------------

    def get_graph_labels(self) -> List[str]:
        """Every entity name, sorted (LightRAG's ``get_graph_labels``)."""
        return _native.entity_titles(self.root)

    def query_data(
        self, query: str, param: Optional[QueryParam] = None, *, cancel: Optional[CancelToken] = None
    ) -> Dict[str, Any]:
        """What a question retrieves, without an answer (LightRAG's
        ``query_data``, as the server's ``/query/data``): ``{"status",
        "message", "data": {"entities", "relationships", "chunks",
        "references", "reports"}, "metadata"}``; no chat model is asked."""
        param = param or QueryParam()
        result = self.query(query, param=param, context_only=True, frames=False, cancel=cancel)
        return _lightrag.query_data(param.mode, result.context, result.notice, self._native.source_documents)

    def export_data(
        self, output_path: str, file_format: ExportFormat = "csv", include_vector_data: bool = False
    ) -> None:
        """Writes the graph's entities and relations to ``output_path``
        (LightRAG's ``export_data``): ``csv``, ``excel`` (needs openpyxl),
        ``md`` or ``txt``. The vectors are not exported (they are in the
        index's vector store): ``include_vector_data=True`` is refused."""
        if include_vector_data:
            raise GraphragError("export_data: include_vector_data is not offered (the vectors are in output/'s vector store)")
        entities, relationships = self._graph_tables()
        _lightrag.export(entities, relationships, os.fspath(output_path), file_format)

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

    # -- the async twins (graphrag_rs._aio.twin): one per public method ----------

    areload = twin(reload)
    aquery = twin(query)
    aupdate_index = twin(update_index)
    ainsert = twin(insert)
    adelete_document = twin(delete_document)
    aedit_entity = twin(edit_entity)
    acreate_entity = twin(create_entity)
    adelete_entity = twin(delete_entity)
    adelete_by_entity = twin(delete_by_entity)
    amerge_entities = twin(merge_entities)
    acreate_relation = twin(create_relation)
    aedit_relation = twin(edit_relation)
    adelete_relation = twin(delete_relation)
    adelete_by_relation = twin(delete_by_relation)
    aget_graph_labels = twin(get_graph_labels)
    aquery_data = twin(query_data)
    aexport_data = twin(export_data)
    aget_knowledge_graph = twin(get_knowledge_graph)
    ato_networkx = twin(to_networkx)
