"""What a notebook user relies on (issue #37): an Index that follows
updates, cancellable queries, per-build stops, logs in Python, async,
LightRAG's document and graph verbs, and the small things."""

import asyncio
import logging
import os
import shutil
import signal
import threading

import pytest

import graphrag_rs
from conftest import make_project, mock_stats, passage, point_models_at

def mentions(result, word):
    """Whether a row of the result's context tables mentions ``word`` (not
    the question's echo: keywords, notices)."""
    tables = ("entities", "relationships", "sources", "reports", "claims")
    return any(word in str(row) for key in tables for row in result.context.get(key, []))


NEWCOMER = (
    "Zorblax Quintavian, the lamplighter of Cornhill, met Bob Cratchit on the bridge. "
    "Zorblax Quintavian carried a ladder and a lantern, and Zorblax Quintavian whistled. "
)


@pytest.fixture(scope="module")
def updatable(mock_url, tmp_path_factory):
    """A standard index of one stave, to be updated by the test that uses it."""
    root = make_project(tmp_path_factory.mktemp("upd"), mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 2000)})
    graphrag_rs.build_index(root)
    return root


def test_an_open_index_answers_from_the_updated_index_on_every_method(updatable):
    root = updatable
    index = graphrag_rs.Index(root)
    before = index.version
    for method in graphrag_rs.METHODS:
        # Every method answers now, so that none can be read lazily later.
        assert not mentions(index.query("Zorblax Quintavian", method, context_only=True, frames=False), "Zorblax")
    (root / "input" / "newcomer.txt").write_text(NEWCOMER * 6, encoding="utf-8")
    report = graphrag_rs.update_index(root)
    assert report["changes"]["added"] == ["newcomer.txt"], report
    for method in graphrag_rs.METHODS:
        result = index.query("Zorblax Quintavian the lamplighter", method, context_only=True, frames=False)
        assert mentions(result, "Zorblax"), (method, result.context_text[:800])
    assert index.version != before
    index.reload()
    assert index.version == graphrag_rs.Index(root).version


@pytest.fixture(scope="module")
def slow_index(indexed, slow_mock_url):
    """The shared index, asked through the slow mock (a copy of the project
    whose models point at it)."""
    root, _ = indexed
    slow = root.parent / "slow"
    shutil.copytree(root, slow)
    point_models_at(slow, slow_mock_url)
    return graphrag_rs.Index(slow)


def test_ctrl_c_and_cancel_stop_a_querys_model_calls(slow_index, slow_mock_url):
    index = slow_index

    def wait_for_requests(at_least):
        tick = threading.Event()
        for _ in range(1000):
            if mock_stats(slow_mock_url)["chat_requests"] >= at_least:
                return
            tick.wait(0.01)
        raise AssertionError("the query sent no chat request")

    # Ctrl-C while the main thread waits for a DRIFT answer.
    start = mock_stats(slow_mock_url)["chat_requests"]

    def ctrl_c_once_asking():
        wait_for_requests(start + 1)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c_once_asking, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        index.query("What does Marley's ghost warn Scrooge about, step by step?", "drift")
    asked = mock_stats(slow_mock_url)["chat_requests"]
    # Three latencies later no further request has been sent.
    threading.Event().wait(1.2)
    assert mock_stats(slow_mock_url)["chat_requests"] == asked, "model calls went on after Ctrl-C"
    assert asked - start < 10, f"{asked - start} chat requests: the query was not stopped early"

    # A CancelToken from another thread: CancelledError, and no more requests.
    token = graphrag_rs.CancelToken()
    start = mock_stats(slow_mock_url)["chat_requests"]

    def cancel_once_asking():
        wait_for_requests(start + 1)
        token.cancel()

    threading.Thread(target=cancel_once_asking, daemon=True).start()
    with pytest.raises(graphrag_rs.CancelledError):
        index.query("What does the ghost of Marley carry, and why?", "drift", cancel=token)
    asked = mock_stats(slow_mock_url)["chat_requests"]
    threading.Event().wait(1.2)
    assert mock_stats(slow_mock_url)["chat_requests"] == asked
    assert token.cancelled


def test_two_builds_in_one_process_one_stopped_the_other_completes(mock_url, tmp_path):
    a = make_project(tmp_path / "a", mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 2500)})
    b = make_project(tmp_path / "b", mock_url, {"stave2.txt": passage("THE FIRST OF THE THREE SPIRITS", 2500)})
    token_a = graphrag_rs.CancelToken()
    b_running, a_stopped = threading.Event(), threading.Event()
    outcome = {}

    def progress_a(step, index, total, status):
        if index == 1 and status is None:
            assert b_running.wait(60)
            token_a.cancel()
            a_stopped.set()

    def progress_b(step, index, total, status):
        b_running.set()
        assert a_stopped.wait(60)

    def build(name, root, progress, cancel):
        try:
            outcome[name] = graphrag_rs.build_index(root, method="fast", progress=progress, cancel=cancel)
        except BaseException as e:
            outcome[name] = e

    threads = [
        threading.Thread(target=build, args=("a", a, progress_a, token_a)),
        threading.Thread(target=build, args=("b", b, progress_b, None)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert isinstance(outcome["a"], KeyboardInterrupt), outcome["a"]
    assert isinstance(outcome["b"], dict), outcome["b"]
    assert not (a / "output" / "entities.parquet").exists()
    assert len(graphrag_rs.load_tables(b)["entities"]) > 0
    # The stopped build resumes.
    graphrag_rs.build_index(a, method="fast", resume=True)


def test_library_warnings_and_progress_reach_the_python_logger(mock_url, tmp_path, caplog):
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 1500)})
    with open(root / "settings.yaml", "a") as f:
        f.write("async_mode: threaded\n")
    with caplog.at_level(logging.INFO, logger="graphrag_rs"):
        graphrag_rs.build_index(root, method="fast")
    warnings = [r.getMessage() for r in caplog.records if r.name == "graphrag_rs" and r.levelno == logging.WARNING]
    assert any("async_mode" in w and "ignored" in w for w in warnings), warnings
    infos = [r.getMessage() for r in caplog.records if r.name == "graphrag_rs" and r.levelno == logging.INFO]
    assert any("indexing" in m for m in infos), infos


def test_async_query_and_streaming_under_asyncio_run(indexed):
    root, _ = indexed

    async def main():
        index = graphrag_rs.Index(root)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        beat = asyncio.create_task(ticker())
        result, (response, context) = await asyncio.gather(
            index.aquery("Who is Jacob Marley?", "local"),
            graphrag_rs.aglobal_search(root, "What are the main themes?"),
        )
        pieces = [p async for p in index.aquery_streaming("Who is Jacob Marley?", "basic")]
        streamed = [p async for p in graphrag_rs.alocal_search_streaming(root, "Who is Scrooge?")]
        beat.cancel()
        return result, response, context, pieces, index.last_result, streamed, ticks

    result, response, context, pieces, last, streamed, ticks = asyncio.run(main())
    assert result.response and response and "reports" in context
    assert pieces and "".join(pieces) == last.response
    assert "".join(streamed)
    assert ticks > 10, "the event loop was blocked while the queries ran"


def test_cancelling_an_asyncio_task_cancels_the_query(slow_index, slow_mock_url):
    index = slow_index

    async def main():
        start = mock_stats(slow_mock_url)["chat_requests"]
        task = asyncio.create_task(index.aquery("How does Scrooge answer the ghost's warning?", "drift"))
        for _ in range(1000):
            if mock_stats(slow_mock_url)["chat_requests"] > start:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The worker thread sees the token at once; give it a bounded moment to return.
        await asyncio.sleep(0.5)
        asked = mock_stats(slow_mock_url)["chat_requests"]
        await asyncio.sleep(1.2)
        return start, asked, mock_stats(slow_mock_url)["chat_requests"]

    start, asked, later = asyncio.run(main())
    assert later == asked, "model calls went on after the task was cancelled"
    assert asked - start < 10


def test_insert_query_delete(mock_url, tmp_path):
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 1500)})
    graphrag_rs.build_index(root, method="fast")
    index = graphrag_rs.Index(root)
    before = set(index.to_networkx().nodes)
    name = index.insert(NEWCOMER * 4)
    assert (root / "input" / name).is_file()
    result = index.query("Zorblax Quintavian", "basic", context_only=True)
    assert "Zorblax" in result.context_text
    graph = index.get_knowledge_graph("*", max_nodes=10_000)
    added = {n["id"] for n in graph["nodes"]} - before
    assert added, "the inserted document added no entity"
    nx_graph = index.to_networkx()
    assert nx_graph.number_of_nodes() == len(graph["nodes"]) and nx_graph.number_of_edges() == len(graph["edges"])
    some = sorted(added)[0]
    around = index.get_knowledge_graph(some, max_depth=1)
    assert around["nodes"][0]["id"] == some
    ids = {n["id"] for n in around["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in around["edges"])
    assert len(index.get_knowledge_graph("*", max_nodes=2)["nodes"]) == 2

    report = index.delete_document(name)
    assert report["changes"]["removed"] == [name], report["changes"]
    assert "Zorblax" not in index.query("Zorblax Quintavian", "basic", context_only=True).context_text
    assert set(index.to_networkx().nodes) == before
    with pytest.raises(graphrag_rs.GraphragError, match="no document"):
        index.delete_document(name)


def test_ainsert_from_asyncio(mock_url, tmp_path):
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 1500)})
    graphrag_rs.build_index(root, method="fast")
    index = graphrag_rs.Index(root)
    name = asyncio.run(index.ainsert(NEWCOMER * 4, "newcomer.txt"))
    assert name == "newcomer.txt"
    assert "Zorblax" in index.query("Zorblax Quintavian", "basic", context_only=True).context_text


def test_arguments_and_errors_speak_python(indexed, tmp_path):
    root, _ = indexed
    index = graphrag_rs.Index(root)
    with pytest.raises(ValueError, match="community_level must be 0 or more"):
        index.query("x", "global", community_level=-1)
    # Misuse the library would refuse is refused as it would be: GraphragError (issue #47 item 11).
    with pytest.raises(graphrag_rs.GraphragError, match="at most 65536"):
        index.query("Scrooge " * 10_000, "local")
    with pytest.raises(graphrag_rs.GraphragError, match="`user` or `assistant`, not 'system'"):
        index.query("Who is Scrooge?", "local", history=[("system", "Answer in French."), ("user", "Hello")])
    with pytest.raises(graphrag_rs.ConfigError, match=r"run `init\(root\)` to create a project") as missing:
        graphrag_rs.Index(tmp_path / "no-project")
    assert "graphrag-rs init" not in str(missing.value)
    with pytest.raises(graphrag_rs.GraphragError, match=r"force=True"):
        graphrag_rs.init(root)
    empty = tmp_path / "empty"
    graphrag_rs.init(empty)
    with pytest.raises(graphrag_rs.NoIndexError, match=r"build_index"):
        graphrag_rs.load_tables(empty)
    with pytest.raises(graphrag_rs.NoIndexError):
        graphrag_rs.Index(empty)

    result = index.query("Scrooge", "local", context_only=True)
    assert result.response is None and "notice=" in repr(result) and "response=None" in repr(result)
    entities = result.context["entities"]
    header = result.context_text.split("-----Entities-----\n", 1)[1].splitlines()[0].split("|")
    assert list(entities.columns[: len(header)]) == header, (list(entities.columns), header)
    assert entities["in_context"].all()
    # As GraphRAG's local search: reports and sources carry no in_context.
    assert "in_context" not in result.context["sources"].columns


def test_cancelling_an_abuild_index_task_stops_the_build(mock_url, tmp_path):
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 2500)})
    cancelled = threading.Event()
    started = []  # steps the cancelled run started once the task was cancelled

    async def main():
        loop = asyncio.get_running_loop()
        task = None

        def cancel_the_task_at_second_step(step, index, total, status):
            if status is None and cancelled.is_set():
                started.append(index)
            if index == 1 and status is None:
                loop.call_soon_threadsafe(task.cancel)
                cancelled.set()
                # The run is still busy (this step) a moment after the cancellation:
                # the awaiting task must wait for it to end.
                threading.Event().wait(0.3)

        task = asyncio.create_task(graphrag_rs.abuild_index(root, method="fast", progress=cancel_the_task_at_second_step))
        with pytest.raises(asyncio.CancelledError):
            await task
        # Still in the event loop (asyncio.run's end would wait for the worker
        # thread anyway): the cancelled task returned once its run had
        # stopped, so no index, no lock held, and a resumed build completes
        # at once.
        assert not (root / "output" / "entities.parquet").exists()
        graphrag_rs.build_index(root, method="fast", resume=True)

    asyncio.run(main())
    assert started == [], "the cancelled run started a step after its cancellation"
    assert len(graphrag_rs.load_tables(root)["entities"]) > 0


def test_an_entity_edit_survives_update(mock_url, tmp_path):
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 2500)})
    graphrag_rs.build_index(root)
    index = graphrag_rs.Index(root)
    graph = index.to_networkx()
    name = max(graph.degree, key=lambda nd: nd[1])[0]
    index.edit_entity(name, type="GHOSTLY", description="Edited from Python.")
    index.create_entity("LAMPLIGHTER OF CORNHILL", type="PERSON", description="Created from Python.")
    index.create_relation("LAMPLIGHTER OF CORNHILL", name, description="lights the way")

    def check():
        nodes = index.to_networkx().nodes
        assert nodes[name]["description"] == "Edited from Python." and nodes[name]["type"] == "GHOSTLY", nodes[name]
        assert nodes["LAMPLIGHTER OF CORNHILL"]["description"] == "Created from Python."
        assert index.to_networkx().has_edge("LAMPLIGHTER OF CORNHILL", name)

    check()
    (root / "input" / "stave2.txt").write_text(passage("THE FIRST OF THE THREE SPIRITS", 2500), encoding="utf-8")
    assert index.update_index()["changes"]["added"] == ["stave2.txt"]
    check()
    # The edited description is what a query's context shows.
    result = index.query(name, "local", context_only=True, frames=False)
    assert any(row.get("description") == "Edited from Python." for row in result.context["entities"]), result.context_text[:800]
    with pytest.raises(ValueError, match="not a graph edit"):
        graphrag_rs._native.add_graph_edit(str(root), '{"action": "rename_everything"}')
