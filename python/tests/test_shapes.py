"""GraphRAG's and LightRAG's shapes (issue #47, items 9-11): the
``graphrag_rs.api`` coroutines named and ordered as ``graphrag.api``'s,
LightRAG's ``QueryParam`` and dict-style graph verbs, edits of entities that
do not exist refused, empty context tables that keep their columns, and
the small things (``insert([...])``, stubs)."""

import asyncio
import inspect
import re
import subprocess
import sys

import pytest

import graphrag_rs
from conftest import make_project, passage

# graphrag.api's query functions in GraphRAG 3.x: their parameters, in order.
GRAPHRAG_PARAMETERS = {
    "global_search": ["config", "entities", "communities", "community_reports", "community_level",
                      "dynamic_community_selection", "response_type", "query", "callbacks", "verbose"],
    "local_search": ["config", "entities", "communities", "community_reports", "text_units", "relationships",
                     "covariates", "community_level", "response_type", "query", "callbacks", "verbose"],
    "drift_search": ["config", "entities", "communities", "community_reports", "text_units", "relationships",
                     "community_level", "response_type", "query", "callbacks", "verbose"],
    "basic_search": ["config", "text_units", "response_type", "query", "callbacks", "verbose"],
}


def test_the_api_module_has_graphrags_coroutines_and_parameters():
    from graphrag_rs import api

    for name, parameters in GRAPHRAG_PARAMETERS.items():
        search, streaming = getattr(api, name), getattr(api, name + "_streaming")
        assert inspect.iscoroutinefunction(search), name
        assert inspect.isasyncgenfunction(streaming), name
        assert list(inspect.signature(search).parameters) == parameters, name
        assert list(inspect.signature(streaming).parameters) == parameters, name
    # The synchronous functions of the same names stay where they were.
    assert not inspect.iscoroutinefunction(graphrag_rs.local_search)


def test_ported_graphrag_notebook_code_runs(indexed):
    from graphrag_rs import api

    root, _ = indexed
    tables = graphrag_rs.load_tables(root)
    seen = []

    class Callbacks:
        def on_context(self, context):
            seen.append(("context", sorted(context)))

        def on_llm_new_token(self, token):
            seen.append(("token", token))

    async def main():
        # As GraphRAG's notebooks call it: every table by keyword.
        response, context = await api.local_search(
            config=root, entities=tables["entities"], communities=tables["communities"],
            community_reports=tables["community_reports"], text_units=tables["text_units"],
            relationships=tables["relationships"], covariates=None, community_level=2,
            response_type="Multiple Paragraphs", query="Who is Scrooge?",
        )
        global_answer, global_context = await api.global_search(
            root, tables["entities"], tables["communities"], tables["community_reports"], 2, False,
            "Single Paragraph", "What are the main themes?",
        )
        index = graphrag_rs.Index(root)
        basic = await api.basic_search(index, query="Who is Marley?")
        drift = await api.drift_search(root, query="What does Marley warn Scrooge about?")
        pieces = [p async for p in api.local_search_streaming(root, query="Who is Scrooge?", callbacks=[Callbacks()])]
        return response, context, global_answer, global_context, basic, drift, pieces

    response, context, global_answer, global_context, basic, drift, pieces = asyncio.run(main())
    assert response and {"entities", "relationships", "sources"} <= set(context)
    assert global_answer and "reports" in global_context
    assert basic[0] and "sources" in basic[1]
    assert drift[0]
    assert "".join(pieces) and [p for kind, p in seen if kind == "token"] == pieces
    assert seen[-1][0] == "context"
    with pytest.raises(graphrag_rs.GraphragError, match="query= is required"):
        asyncio.run(api.basic_search(root))


@pytest.fixture
def fast(mock_url, tmp_path):
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 2500)})
    graphrag_rs.build_index(root, method="fast")
    return root


def test_edits_naming_what_the_index_lacks_are_refused(fast):
    index = graphrag_rs.Index(fast)
    edits = fast / "graph_edits.yaml"
    labels = index.get_graph_labels()
    a, b = labels[0], labels[1]
    refused = [
        (lambda: index.edit_entity("NOBODY AT ALL", description="x"), "entity 'NOBODY AT ALL' does not exist"),
        (lambda: index.delete_entity("NOBODY AT ALL"), "does not exist"),
        (lambda: index.merge_entities([a, "NOBODY AT ALL"], a), "entity 'NOBODY AT ALL' does not exist"),
        (lambda: index.create_relation(a, "NOBODY AT ALL"), "entity 'NOBODY AT ALL' does not exist"),
        (lambda: index.edit_relation("NOBODY", "AT ALL", {"description": "x"}), "relation from 'NOBODY' to 'AT ALL'"),
        (lambda: index.delete_by_relation("NOBODY", "AT ALL"), "does not exist"),
        (lambda: index.edit_entity(a, {"entity_name": b}), "allow_merge=True"),
        (lambda: index.edit_entity(a, {"entity_name": "NEW NAME"}, allow_rename=False), "allow_rename=True"),
        (lambda: index.edit_entity(a, {"rank": 3}), "'rank' cannot be edited here"),
    ]
    for edit, message in refused:
        with pytest.raises(graphrag_rs.GraphragError, match=re.escape(message)):
            edit()
    assert not edits.exists(), edits.read_text()
    # Names match as the edits apply them: ignoring case and spacing.
    index.edit_entity(a.lower(), description="Edited.")
    assert "Edited." in edits.read_text()


def test_lightrag_shapes(fast, tmp_path):
    index = graphrag_rs.Index(fast)
    labels = index.get_graph_labels()
    assert labels == sorted(labels) and len(labels) > 2
    a, b = labels[0], labels[1]
    # Dict-style verbs, as LightRAG's.
    index.create_entity("LAMPLIGHTER OF CORNHILL", {"entity_type": "PERSON", "description": "Lights the lamps."})
    index.edit_entity("LAMPLIGHTER OF CORNHILL", {"description": "Lights every lamp."})
    index.create_relation("LAMPLIGHTER OF CORNHILL", a, {"description": "lights the way", "weight": 2.0})
    graph = index.to_networkx()
    assert graph.nodes["LAMPLIGHTER OF CORNHILL"]["description"] == "Lights every lamp."
    assert graph.edges["LAMPLIGHTER OF CORNHILL", a]["weight"] == 2.0
    index.delete_by_entity(b)
    assert b not in index.get_graph_labels()

    param = graphrag_rs.QueryParam(mode="naive", only_need_context=True)
    result = index.query("Who is Marley?", param=param)
    assert result.method == "basic" and result.response is None and str(result) == result.context_text
    data = index.query_data("Who is Marley?", graphrag_rs.QueryParam(mode="local"))
    assert data["status"] == "success" and data["metadata"]["query_mode"] == "local"
    assert {"entities", "relationships", "chunks", "references"} <= set(data["data"])
    chunks = data["data"]["chunks"]
    assert chunks and all(c["content"] and c["chunk_id"] for c in chunks), data
    assert [r["file_path"] for r in data["data"]["references"]] == ["stave1.txt"], data["data"]["references"]
    hybrid = index.query_data("Who is Marley?", graphrag_rs.QueryParam(mode="hybrid"))["data"]
    assert all(e["entity_name"] == e["entity"] for e in hybrid["entities"]), hybrid["entities"][:2]
    assert all({"src_id", "tgt_id", "weight"} <= set(r) for r in hybrid["relationships"])
    with pytest.raises(graphrag_rs.GraphragError, match="top_k"):
        index.query("Who is Marley?", param=graphrag_rs.QueryParam(top_k=5))
    with pytest.raises(graphrag_rs.GraphragError, match="bypass"):
        index.query("Who is Marley?", param=graphrag_rs.QueryParam(mode="bypass"))

    for file_format in ("csv", "md", "txt"):
        out = tmp_path / f"graph.{file_format}"
        index.export_data(str(out), file_format=file_format)
        text = out.read_text()
        assert "LAMPLIGHTER OF CORNHILL" in text and "lights the way" in text, file_format
    assert (tmp_path / "graph.csv").read_text().startswith("# ENTITIES\ntitle,")
    with pytest.raises(graphrag_rs.GraphragError, match="include_vector_data"):
        index.export_data(str(tmp_path / "v.csv"), include_vector_data=True)


def test_empty_local_tables_keep_their_columns(fast):
    # A fast index (no chat model wrote descriptions): local search retrieves no entities.
    context = graphrag_rs.Index(fast).query("Who is Scrooge?", "local", context_only=True).context
    for key, columns in {
        "entities": ["id", "entity", "description", "number of relationships", "in_context"],
        "relationships": ["id", "source", "target", "description", "weight", "in_context"],
        "reports": ["id", "title", "content"],
        "sources": ["id", "text"],
    }.items():
        assert list(context[key].columns)[: len(columns)] == columns, (key, list(context[key].columns))


def test_insert_a_list_of_texts(fast):
    index = graphrag_rs.Index(fast)
    names = index.insert([passage("THE FIRST OF THE THREE SPIRITS", 800), passage("THE LAST OF THE SPIRITS", 800)])
    assert isinstance(names, list) and len(names) == 2
    assert all((fast / "input" / n).is_file() for n in names)
    assert len(graphrag_rs.load_tables(fast)["documents"]) == 3
    with pytest.raises(ValueError, match="2 texts and 1 names"):
        index.insert(["a text", "another"], ["one.txt"])


def test_the_stubs_match_the_runtime(tmp_path):
    """mypy's stubtest compares _native.pyi with the compiled module: every
    function's parameters and defaults, and the classes (pyo3's are final
    and built by ``__new__``)."""
    # pyo3 defines no __all__ the stub should repeat.
    allowlist = tmp_path / "allowlist.txt"
    allowlist.write_text("graphrag_rs._native.__all__\n")
    run = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "graphrag_rs._native", "--allowlist", str(allowlist)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    for cls in (graphrag_rs.CancelToken, graphrag_rs._native.NativeIndex):
        with pytest.raises(TypeError):
            type("Sub", (cls,), {})
