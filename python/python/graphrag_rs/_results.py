"""What a query returns: ``Result`` and its ``Context`` of DataFrames."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Dict, Iterator, List, Optional, Tuple

# The context tables' section names in the context text, and their keys.
_SECTIONS = {
    "Entities": "entities",
    "Relationships": "relationships",
    "Sources": "sources",
    "Reports": "reports",
    "Claims": "claims",
}

# The columns of each method's tables (query/src/methods: the headers the
# model sees), for a table that came back empty: its section is then missing
# from the context text, and a DataFrame built from no rows has no columns,
# where a caller (and GraphRAG's own frames) expects them.
_COLUMNS = {
    "local": {
        "entities": ["id", "entity", "description", "number of relationships"],
        "relationships": ["id", "source", "target", "description", "weight"],
        "claims": ["id", "entity", "object_id", "type", "status", "start_date", "end_date", "description"],
        "reports": ["id", "title", "content"],
        "sources": ["id", "text"],
    },
    "global": {"reports": ["id", "title", "occurrence weight", "content", "rank"]},
    "basic": {"sources": ["id", "text"]},
}

# The tables GraphRAG's local context builder gives an ``in_context`` column
# (its reports and sources, and global and basic search's tables, have none).
_IN_CONTEXT_TABLES = ("entities", "relationships", "claims")


def _column_orders(context_text: str) -> Dict[str, List[str]]:
    """The column order of each context table, as the model saw it: the
    header line under each ``-----Name-----`` line of the context text."""
    orders: Dict[str, List[str]] = {}
    lines = context_text.splitlines()
    for line, header in zip(lines, lines[1:]):
        if line.startswith("-----") and line.endswith("-----"):
            key = _SECTIONS.get(line.strip("-"))
            if key is not None and key not in orders:
                orders[key] = header.split("|")
    return orders


class Context(Mapping[str, Any]):
    """A search's context keyed like GraphRAG's (``entities``,
    ``relationships``, ``reports``, ``sources``, ``claims``, ...): each table
    becomes a pandas DataFrame when first read (building one costs about as
    much as a fast query, so a caller that reads one table pays for one),
    with its columns in the order the model saw them and, on entities,
    relationships and claims, GraphRAG's ``in_context`` column (every row
    given is in the context); other details
    (``retrieval``, ``walk``, ...) are given as they are."""

    __slots__ = ("_records", "_frames", "_orders")

    def __init__(self, records: Dict[str, Any], context_text: str = "", method: str = "") -> None:
        self._records = records
        self._frames: Dict[str, Any] = {}
        self._orders = {**_COLUMNS.get(method, {}), **_column_orders(context_text)}

    def __getitem__(self, key: str) -> Any:
        value = self._records[key]
        if not isinstance(value, list):
            return value
        frame = self._frames.get(key)
        if frame is None:
            import pandas as pd

            frame = pd.DataFrame(value) if value else pd.DataFrame(columns=self._orders.get(key, []))
            order = [c for c in self._orders.get(key, []) if c in frame.columns]
            frame = frame[order + [c for c in frame.columns if c not in order]]
            if key in _IN_CONTEXT_TABLES and "in_context" not in frame.columns:
                frame["in_context"] = True
            self._frames[key] = frame
        return frame

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return f"Context({list(self._records)})"


class Result:
    """One answer: ``response`` (None when no model was asked: see
    ``notice``), ``context`` (a ``Context`` of DataFrames keyed like
    GraphRAG's: entities, relationships, reports, sources, claims, ...),
    ``context_text`` (what the model saw), ``stats`` (calls, tokens, times),
    ``notice`` (why there is no response), ``method``.

    ``response, context = result`` unpacks as GraphRAG's API returns."""

    __slots__ = ("response", "context", "context_text", "stats", "notice", "method")

    response: Optional[str]
    context: Any
    context_text: str
    stats: Dict[str, Any]
    notice: Optional[str]
    method: str

    def __init__(self, method: str, raw: Tuple[Optional[str], str, str, str, Optional[str]], frames: bool = True) -> None:
        answer, text, records_json, stats, notice = raw
        self.method = method
        self.response = answer
        records = json.loads(records_json) if records_json else {}
        self.context = Context(records, text, method) if frames else records
        self.context_text = text
        self.stats = json.loads(stats)
        self.notice = notice

    def __iter__(self) -> Iterator[Any]:
        return iter((self.response, self.context))

    def __str__(self) -> str:
        """The answer, or with none (``context_only``, no chat model) the
        context the model would see: what LightRAG's ``query`` returns."""
        return self.response if self.response is not None else self.context_text

    def __repr__(self) -> str:
        def short(text: Optional[str]) -> str:
            if text is None:
                return "None"
            return repr(text[:60] + "…") if len(text) > 60 else repr(text)

        notice = f", notice={short(self.notice)}" if self.notice else ""
        return (
            f"Result(method={self.method!r}, response={short(self.response)}{notice}, "
            f"context={list(self.context)}, llm_calls={self.stats.get('llm_calls')})"
        )
