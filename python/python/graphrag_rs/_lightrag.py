"""LightRAG's shapes (lightrag-hku 1.5.7): ``QueryParam`` and the free-form
dicts of its graph verbs, mapped onto this package's options and edits. A
field this engine cannot honour is refused by name rather than ignored."""

from __future__ import annotations

import csv
import importlib
import io
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Tuple

from ._native import GraphragError

# LightRAG's defaults (its constants.py), for telling a changed field from one left alone.
_TOP_K = 40
_CHUNK_TOP_K = 20
_MAX_ENTITY_TOKENS = 6000
_MAX_RELATION_TOKENS = 8000
_MAX_TOTAL_TOKENS = 30000


@dataclass
class QueryParam:
    """LightRAG's ``QueryParam``, field for field and in its order (it may be
    built positionally). Honoured: ``mode`` (``naive`` is ``basic``;
    ``local``, ``global``, ``hybrid``, ``mix``, and this engine's ``drift``,
    ``basic``, ``ppr``), ``only_need_context``, ``response_type``,
    ``conversation_history``, ``max_total_tokens`` (the context budget,
    when changed), ``enable_rerank`` (``False`` turns the rerank model of
    settings ``rerank.model_id`` off; ``True``, LightRAG's default, leaves it
    to ``rerank.by_default``). ``include_references`` and
    ``disable_user_prompt_prefix`` change nothing here (no prompt prefix). The others are refused when set: ``bypass`` mode,
    ``only_need_prompt``, ``stream`` (use ``query_streaming``), ``top_k``,
    ``chunk_top_k``, ``max_entity_tokens``, ``max_relation_tokens``,
    ``hl_keywords``, ``ll_keywords``, ``user_prompt``."""

    mode: str = "mix"
    only_need_context: bool = False
    only_need_prompt: bool = False
    response_type: str = "Multiple Paragraphs"
    stream: bool = False
    top_k: int = _TOP_K
    chunk_top_k: int = _CHUNK_TOP_K
    max_entity_tokens: int = _MAX_ENTITY_TOKENS
    max_relation_tokens: int = _MAX_RELATION_TOKENS
    max_total_tokens: int = _MAX_TOTAL_TOKENS
    hl_keywords: List[str] = field(default_factory=list)
    ll_keywords: List[str] = field(default_factory=list)
    conversation_history: List[Dict[str, str]] = field(default_factory=list)
    user_prompt: Optional[str] = None
    enable_rerank: bool = True
    include_references: bool = False
    disable_user_prompt_prefix: bool = False


# Fields whose non-default value this engine cannot honour.
_REFUSED = ("only_need_prompt", "stream", "top_k", "chunk_top_k", "max_entity_tokens", "max_relation_tokens",
            "hl_keywords", "ll_keywords", "user_prompt")


def query_options(param: QueryParam) -> Tuple[str, Dict[str, Any]]:
    """``(method, Index.query keywords)`` for ``param``."""
    defaults = QueryParam()
    refused = [f for f in _REFUSED if getattr(param, f) != getattr(defaults, f)]
    if refused:
        raise GraphragError(
            f"QueryParam: {', '.join(refused)} cannot be honoured by graphrag-rs "
            "(see graphrag_rs.QueryParam for the fields it reads)"
        )
    mode = param.mode.lower()
    if mode == "bypass":
        raise GraphragError("QueryParam: mode `bypass` (the model without the index) is not offered; use another mode")
    options: Dict[str, Any] = {
        "context_only": param.only_need_context,
        "response_type": param.response_type,
        "history": [(turn["role"], turn["content"]) for turn in param.conversation_history] or None,
    }
    if param.max_total_tokens != _MAX_TOTAL_TOKENS:
        options["max_context_tokens"] = param.max_total_tokens
    if not param.enable_rerank:
        options["enable_rerank"] = False
    return ("basic" if mode == "naive" else mode), options


def fields_of(data: Optional[Mapping[str, Any]], verb: str, allowed: Sequence[str]) -> Dict[str, Any]:
    """The fields of LightRAG's free-form ``updated_data`` / ``entity_data`` /
    ``relation_data``; a field the graph does not keep is refused by name,
    so an edit is never silently partial."""
    data = dict(data or {})
    unknown = [k for k in data if k not in allowed]
    if unknown:
        raise GraphragError(f"{verb}: {', '.join(map(repr, unknown))} cannot be edited here: the graph keeps {', '.join(allowed)}")
    return data


def query_data(
    mode: str, records: Mapping[str, Any], notice: Optional[str], documents: Callable[[List[str]], List[str]]
) -> Dict[str, Any]:
    """LightRAG's ``query_data`` answer from a context-only query's records
    (as the server's ``/query/data``): the retrieved entities,
    relationships and chunks, no answer. Each row keeps the engine's
    columns and gains LightRAG's names for them (``entity_name``,
    ``entity_type``; ``src_id``, ``tgt_id``; ``content``, ``chunk_id``);
    ``references`` are the chunks' documents (``documents`` of their ids)."""

    def rows(key: str) -> List[Dict[str, Any]]:
        value = records.get(key)
        return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []

    entities = [
        {**r, "entity_name": r.get("entity", ""), "entity_type": r.get("type", ""), "description": r.get("description", "")}
        for r in rows("entities")
    ]
    relationships = [
        {**r, "src_id": r.get("source", ""), "tgt_id": r.get("target", ""), "description": r.get("description", "")}
        for r in rows("relationships")
    ]
    chunks = [{**r, "content": r.get("text", ""), "chunk_id": str(r.get("id", ""))} for r in rows("sources")]
    references = [
        {"reference_id": str(i + 1), "file_path": path}
        for i, path in enumerate(documents([c["chunk_id"] for c in chunks]) if chunks else [])
    ]
    data = {
        "entities": entities,
        "relationships": relationships,
        "chunks": chunks,
        "references": references,
        "reports": rows("reports"),
    }
    return {
        "status": "success",
        "message": notice or "Query executed successfully",
        "data": data,
        "metadata": {
            "query_mode": mode,
            "keywords": {"high_level": [], "low_level": []},
            "processing_info": {
                "total_entities_found": len(entities),
                "total_relations_found": len(relationships),
                "final_chunks_count": len(chunks),
            },
        },
    }


ExportFormat = Literal["csv", "excel", "md", "txt"]


def export(
    entities: List[Dict[str, Any]],
    relationships: List[Dict[str, Any]],
    output_path: str,
    file_format: str,
) -> None:
    """Writes the graph's entities and relations to ``output_path`` as
    LightRAG's ``export_data`` does: one file, an entities section then a
    relations section (Excel: two sheets)."""
    # Vectors, ids and list columns are left out: what a reader of the export wants is the graph.
    def flat(rows: List[Dict[str, Any]], keep: Sequence[str]) -> Tuple[List[str], List[List[str]]]:
        columns = [c for c in keep if rows and c in rows[0]]
        return columns, [["" if r.get(c) is None else str(r[c]) for c in columns] for r in rows]

    sections = [
        ("Entities", *flat(entities, ("title", "type", "description", "frequency", "degree"))),
        ("Relations", *flat(relationships, ("source", "target", "description", "weight", "combined_degree"))),
    ]
    if file_format == "excel":
        try:
            pd: Any = importlib.import_module("pandas")
            with pd.ExcelWriter(output_path) as writer:
                for name, columns, body in sections:
                    pd.DataFrame(body, columns=columns).to_excel(writer, sheet_name=name, index=False)
        except ImportError as e:
            raise GraphragError(f"export_data: the excel format needs pandas and openpyxl ({e})") from e
        return
    out = io.StringIO()
    for name, columns, body in sections:
        if file_format == "csv":
            out.write(f"# {name.upper()}\n")
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(columns)
            writer.writerows(body)
        elif file_format == "md":
            out.write(f"# {name}\n\n| {' | '.join(columns)} |\n|{'---|' * len(columns)}\n")
            for row in body:
                out.write("| " + " | ".join(v.replace("|", "\\|").replace("\n", " ") for v in row) + " |\n")
        elif file_format == "txt":
            out.write(f"{name.upper()}\n{'=' * 80}\n")
            for row in body:
                out.write("\n".join(f"{c}: {v}" for c, v in zip(columns, row)) + "\n" + "-" * 40 + "\n")
        else:
            raise GraphragError(f"export_data: file_format must be csv, excel, md or txt, not {file_format!r}")
        out.write("\n")
    with open(output_path, "w", encoding="utf-8") as f:
        f.write(out.getvalue())

