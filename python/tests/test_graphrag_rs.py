"""graphrag_rs against the mock server: index, query every method, context
DataFrames, streaming, update, interrupt -> resume, errors."""

import os
import signal
import threading
from collections.abc import Mapping

import pytest

import graphrag_rs
from conftest import make_project, passage


def test_build_index_writes_graphrag_tables(indexed):
    root, report = indexed
    assert report["pipeline"] == "standard"
    assert report["documents"] == 1
    tables = graphrag_rs.load_tables(root)
    for name in ("documents", "text_units", "entities", "relationships", "communities", "community_reports"):
        assert name in tables, sorted(tables)
        assert len(tables[name]) > 0, name
    assert {"title", "description"} <= set(tables["entities"].columns)
    arrow = graphrag_rs.load_tables(root, format="arrow")
    assert arrow["entities"].num_rows == len(tables["entities"])


@pytest.mark.parametrize("method", graphrag_rs.METHODS)
def test_every_method_answers(indexed, method):
    root, _ = indexed
    index = graphrag_rs.Index(root)
    response, context = index.query("Who is Marley and what does he tell Scrooge?", method=method)
    assert isinstance(response, str) and response.strip(), method
    assert isinstance(context, Mapping) and len(context) > 0, method


def test_search_functions_return_graphrag_shaped_contexts(indexed):
    root, _ = indexed
    q = "What does Marley's ghost tell Scrooge?"
    response, context = graphrag_rs.local_search(root, q)
    assert response
    assert {"entities", "relationships", "sources"} <= set(context), sorted(context)
    assert {"id", "entity", "description"} <= set(context["entities"].columns), list(context["entities"].columns)
    # GraphRAG's columns in its order; `links` when the first relationship has one, as GraphRAG
    # (query/tests/query_e2e.rs pins it; scripts/graphrag_api_check.py relationships compares
    # the whole table with GraphRAG's own).
    columns = list(context["relationships"].columns)
    assert columns in (
        ["id", "source", "target", "description", "weight", "in_context"],
        ["id", "source", "target", "description", "weight", "links", "in_context"],
    ), columns
    assert {"id", "text"} <= set(context["sources"].columns)
    response, context = graphrag_rs.global_search(root, q)
    assert response and "reports" in context, sorted(context)
    assert {"id", "title"} <= set(context["reports"].columns), list(context["reports"].columns)
    for search in (graphrag_rs.drift_search, graphrag_rs.basic_search, graphrag_rs.hybrid_search, graphrag_rs.mix_search):
        response, context = search(root, q)
        assert response, search.__name__
    response, context = graphrag_rs.basic_search(root, q)
    assert {"id", "text"} <= set(context["sources"].columns)
    response, context = graphrag_rs.ppr_search(root, q)
    assert response and {"id", "text"} <= set(context["sources"].columns), sorted(context)
    response, context = graphrag_rs.hybrid_search(root, q)
    assert {"entities", "relationships", "sources"} <= set(context), sorted(context)


def test_context_only_calls_no_model(indexed):
    root, _ = indexed
    result = graphrag_rs.Index(root).query("Scrooge", method="local", context_only=True)
    assert result.response is None
    assert result.stats["llm_calls"] == 0 and result.context_text


def test_streaming_yields_the_answer_in_pieces(indexed):
    root, _ = indexed
    index = graphrag_rs.Index(root)
    pieces = list(index.query_streaming("Who is Jacob Marley?", method="basic"))
    assert pieces and "".join(pieces) == index.last_result.response
    assert "".join(graphrag_rs.local_search_streaming(root, "Who is Jacob Marley?"))
    assert "".join(graphrag_rs.ppr_search_streaming(root, "Who is Jacob Marley?"))


def test_update_indexes_an_added_document(mock_url, tmp_path):
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 2500)})
    graphrag_rs.build_index(root, method="fast")
    (root / "input" / "stave2.txt").write_text(passage("THE FIRST OF THE THREE SPIRITS", 2500), encoding="utf-8")
    report = graphrag_rs.update_index(root)
    assert report["changes"]["added"] == ["stave2.txt"], report["changes"]
    assert len(graphrag_rs.load_tables(root)["documents"]) == 2


def test_enable_rerank_reranks_the_chunks_with_the_configured_model(mock_url, tmp_path):
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 2500)})
    with open(root / "settings.yaml", "a") as f:
        f.write(
            "rerank_models:\n  default_rerank_model:\n    model_provider: jina\n    model: mock-rerank\n"
            f"    api_base: {mock_url}\n    api_key: sk-test\n"
            "rerank:\n  model_id: default_rerank_model\n  by_default: false\n"
        )
    graphrag_rs.build_index(root, method="fast")
    index = graphrag_rs.Index(root)
    reranked = index.query("Who is Marley?", "basic", context_only=True, enable_rerank=True)
    assert reranked.context["rerank"]["model"] == "default_rerank_model"
    plain = index.query("Who is Marley?", "basic", context_only=True)
    assert "rerank" not in plain.context, "rerank.by_default is false"


def test_light_method_indexes_without_community_reports(mock_url, tmp_path):
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 2500)})
    report = graphrag_rs.build_index(root, method="light")
    assert report["pipeline"] == "light"
    tables = graphrag_rs.load_tables(root)
    assert len(tables["entities"]) > 0 and "community_reports" not in tables, sorted(tables)
    index = graphrag_rs.Index(root)
    for method in ("hybrid", "mix", "local"):
        response, context = index.query("What does Marley's ghost tell Scrooge?", method=method)
        assert response and "entities" in context, (method, sorted(context))
    with pytest.raises(graphrag_rs.GraphragError, match="this index has none"):
        index.query("What are the themes?", method="global")


def test_keyboard_interrupt_leaves_a_resumable_run(mock_url, tmp_path):
    """Ctrl-C (SIGINT to this process) mid-run: KeyboardInterrupt, no index
    published; the resumed run skips the finished steps and completes."""
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 2500)})
    events = []
    token = graphrag_rs.CancelToken()

    def ctrl_c_at_third_step(step, index, total, status):
        events.append((step, status))
        if index == 2 and status is None:
            os.kill(os.getpid(), signal.SIGINT)
            # Hold this step until the waiting call has seen the signal and
            # asked the run to stop (no fixed sleep: a bounded wait on it).
            tick = threading.Event()
            for _ in range(3000):
                if token.cancelled:
                    break
                tick.wait(0.01)

    with pytest.raises(KeyboardInterrupt):
        graphrag_rs.build_index(root, method="fast", progress=ctrl_c_at_third_step, cancel=token)
    assert not (root / "output" / "entities.parquet").exists()
    finished = [step for step, status in events if status == "ran"]
    assert finished, events

    resumed = []
    graphrag_rs.build_index(root, method="fast", resume=True, progress=lambda s, i, n, st: resumed.append((s, st)))
    skipped = [step for step, status in resumed if status == "skipped"]
    assert set(finished) <= set(skipped), (finished, resumed)
    assert len(graphrag_rs.load_tables(root)["entities"]) > 0


def test_an_exception_from_the_progress_callback_stops_the_run(mock_url, tmp_path):
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 1500)})

    def stop(step, index, total, status):
        if index == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        graphrag_rs.build_index(root, method="fast", progress=stop)
    graphrag_rs.build_index(root, method="fast", resume=True)


def test_errors_are_exceptions_with_the_cli_message(tmp_path):
    (tmp_path / "settings.yaml").write_text("completion_models:\n  m:\n    model: [unclosed\n")
    with pytest.raises(graphrag_rs.ConfigError) as err:
        graphrag_rs.build_index(tmp_path)
    assert "settings.yaml" in str(err.value) and ":3" in str(err.value), str(err.value)
    assert isinstance(err.value, graphrag_rs.GraphragError)

    empty = tmp_path / "empty"
    graphrag_rs.init(empty)
    with pytest.raises(graphrag_rs.GraphragError, match="no index in"):
        graphrag_rs.Index(empty)


def test_an_unknown_method_is_a_config_error(indexed):
    with pytest.raises(graphrag_rs.ConfigError, match="unknown query method `nope`"):
        graphrag_rs.Index(indexed[0]).query("x", method="nope")


def test_generate_indexing_prompts_tunes_and_writes(mock_url, tmp_path):
    root = make_project(tmp_path / "tune", mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 6000)})
    before = (root / "prompts" / "extract_graph.txt").read_text()
    extract, summarize, report = graphrag_rs.generate_indexing_prompts(root, limit=3, language="English")
    assert "exactly one of these types: [CHARACTER,PLACE,GROUP," in extract
    assert "{{ input_text }}" in extract and "Example 1:" in extract
    assert "{{ description_list }}" in summarize and "{{ max_report_length }}" in report
    assert (root / "prompts" / "extract_graph.txt").read_text() == before, "nothing written without output="
    written = graphrag_rs.generate_indexing_prompts(root, limit=3, language="English", output="prompts")
    assert written == (extract, summarize, report), "the same answers, from the cache"
    assert (root / "prompts" / "extract_graph.txt").read_text() == extract
    with pytest.raises(ValueError, match="did you mean `auto`"):
        graphrag_rs.generate_indexing_prompts(root, selection_method="autoo")
