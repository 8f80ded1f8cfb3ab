"""asyncio (issue #47, items 6-8): a cancelled ``ainsert``,
``adelete_document`` or ``abuild_index`` stops the work it started (no
model request after it returns), applies nothing, and returns only once
the writer lock is free; every public function has its ``a``-twin."""

import asyncio
import inspect
import shutil

import pytest

import graphrag_rs
from conftest import make_project, mock_stats, passage, point_models_at

NEWCOMER = (
    "Zorblax Quintavian, the lamplighter of Cornhill, met Bob Cratchit on the bridge. "
    "Zorblax Quintavian carried a ladder and a lantern, and Zorblax Quintavian whistled. "
)


@pytest.fixture(scope="module")
def two_staves(mock_url, tmp_path_factory):
    """A standard index of two short staves, built through the quick mock;
    each test works on a copy whose models point at the slow one."""
    root = make_project(
        tmp_path_factory.mktemp("two"),
        mock_url,
        {"stave1.txt": passage("MARLEY'S GHOST", 1200), "stave2.txt": passage("THE FIRST OF THE THREE SPIRITS", 1200)},
    )
    graphrag_rs.build_index(root)
    return root


def slow_copy(root, tmp_path, slow_url):
    copy = tmp_path / "slow"
    shutil.copytree(root, copy)
    point_models_at(copy, slow_url)
    return copy


async def cancel_once_asking(make, url, then=None):
    """Starts ``make()`` as a task, cancels it once the model has been asked,
    and awaits it (CancelledError); then calls ``then()`` still inside the
    event loop (``asyncio.run``'s end waits for worker threads, which would
    hide one still running). Returns the mock's request count when the
    task returned."""
    start = mock_stats(url)["requests"]
    task = asyncio.create_task(make())
    for _ in range(2000):
        if mock_stats(url)["requests"] > start or task.done():
            break
        await asyncio.sleep(0.01)
    assert not task.done(), "the call ended before it asked the model"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    count = mock_stats(url)["requests"]
    if then is not None:
        then()
    return count


def no_request_since(url, count):
    """A short moment (about one slow-mock latency) later, no request was added."""
    asyncio.run(asyncio.sleep(0.5))
    assert mock_stats(url)["requests"] == count, "model requests went on after the cancelled call returned"


def test_cancelling_ainsert_stops_the_update_and_inserts_nothing(two_staves, tmp_path, mock_url, slow_mock_url):
    root = slow_copy(two_staves, tmp_path, slow_mock_url)
    index = graphrag_rs.Index(root)
    before = index.version
    report = {}

    def update_at_once():
        assert not (root / "input" / "newcomer.txt").exists(), "the cancelled insert left its document in the input"
        # The lock is free at once (no retry), and there is nothing for an update to apply.
        point_models_at(root, mock_url)  # this update asks the quick mock
        report.update(graphrag_rs.update_index(root))

    insert = lambda: index.ainsert(NEWCOMER * 30, "newcomer.txt")  # noqa: E731
    at_return = asyncio.run(cancel_once_asking(insert, slow_mock_url, then=update_at_once))
    no_request_since(slow_mock_url, at_return)
    assert report["changes"]["added"] == [] and report["changes"]["removed"] == [], report["changes"]
    assert "Zorblax" not in index.query("Zorblax Quintavian", "basic", context_only=True).context_text
    assert index.version != before or report["changes"]["unchanged"] == 2


def test_cancelling_adelete_document_keeps_the_document(two_staves, tmp_path, mock_url, slow_mock_url):
    root = slow_copy(two_staves, tmp_path, slow_mock_url)
    original = (root / "input" / "stave2.txt").read_bytes()
    index = graphrag_rs.Index(root)
    report = {}

    def update_at_once():
        assert (root / "input" / "stave2.txt").read_bytes() == original, "the cancelled delete did not put the document back"
        point_models_at(root, mock_url)  # this update asks the quick mock
        report.update(graphrag_rs.update_index(root))

    delete = lambda: index.adelete_document("stave2.txt")  # noqa: E731
    at_return = asyncio.run(cancel_once_asking(delete, slow_mock_url, then=update_at_once))
    no_request_since(slow_mock_url, at_return)
    assert report["changes"]["removed"] == [], report["changes"]
    assert len(graphrag_rs.load_tables(root)["documents"]) == 2


def test_a_cancelled_abuild_index_has_stopped_and_let_go_of_the_lock(mock_url, slow_mock_url, tmp_path):
    root = make_project(tmp_path, slow_mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 1500)})
    report = {}

    def resume_at_once():
        # No retry: the stopped run holds no lock. The rest runs on the quick mock.
        assert not (root / "output" / "entities.parquet").exists()
        point_models_at(root, mock_url)
        report.update(graphrag_rs.build_index(root, method="standard", resume=True))

    build = lambda: graphrag_rs.abuild_index(root, method="standard")  # noqa: E731
    at_return = asyncio.run(cancel_once_asking(build, slow_mock_url, then=resume_at_once))
    no_request_since(slow_mock_url, at_return)
    assert report["pipeline"] == "standard"
    assert len(graphrag_rs.load_tables(root)["entities"]) > 0


def test_a_cancelled_query_twin_returns_once_its_worker_ended(indexed, tmp_path, slow_mock_url):
    root = slow_copy(indexed[0], tmp_path, slow_mock_url)
    index = graphrag_rs.Index(root)
    at_return = asyncio.run(
        cancel_once_asking(lambda: graphrag_rs.adrift_search(root, "What does Marley's ghost warn Scrooge about?"), slow_mock_url)
    )
    no_request_since(slow_mock_url, at_return)
    at_return = asyncio.run(cancel_once_asking(lambda: index.aquery("Who is Marley?", "drift"), slow_mock_url))
    no_request_since(slow_mock_url, at_return)


def public_functions(namespace, names):
    for name in names:
        value = getattr(namespace, name)
        if inspect.isfunction(value):
            yield name, value


def test_every_public_function_has_an_async_twin():
    module = [n for n in graphrag_rs.__all__ if not n.startswith("a") and n != "api"]
    methods = [n for n, v in vars(graphrag_rs.Index).items() if not n.startswith("_") and inspect.isfunction(v)]
    missing = []
    for owner, names in ((graphrag_rs, module), (graphrag_rs.Index, methods)):
        for name, fn in public_functions(owner, names):
            if name.startswith("a") and name[1:] in names:
                continue
            twin = getattr(owner, "a" + name, None)
            streaming = inspect.isgeneratorfunction(fn) or name.endswith("_streaming")
            ok = twin is not None and (
                inspect.isasyncgenfunction(twin) if streaming else inspect.iscoroutinefunction(twin)
            )
            if not ok:
                missing.append(f"{getattr(owner, '__name__', owner)}.{name}")
    assert missing == [], missing
    # The twins keep their function's parameters (generated from it, not written out again).
    assert inspect.signature(graphrag_rs.Index.aedit_entity) == inspect.signature(graphrag_rs.Index.edit_entity)
    assert inspect.signature(graphrag_rs.agenerate_indexing_prompts) == inspect.signature(graphrag_rs.generate_indexing_prompts)


def test_graph_verb_twins_run_from_asyncio(mock_url, tmp_path):
    root = make_project(tmp_path, mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 1500)})
    graphrag_rs.build_index(root, method="fast")
    index = graphrag_rs.Index(root)

    async def main():
        await index.acreate_entity("LAMPLIGHTER OF CORNHILL", {"entity_type": "PERSON", "description": "Lights lamps."})
        labels = await index.aget_graph_labels()
        report = await index.aupdate_index()
        tables = await graphrag_rs.aload_tables(root)
        return labels, report, tables

    labels, report, tables = asyncio.run(main())
    assert "LAMPLIGHTER OF CORNHILL" in labels and labels == sorted(labels)
    assert "changes" in report
    assert "LAMPLIGHTER OF CORNHILL" in set(tables["entities"]["title"])


def test_a_cancelled_graph_edit_is_taken_back(two_staves, tmp_path, mock_url, slow_mock_url):
    root = slow_copy(two_staves, tmp_path, slow_mock_url)
    index = graphrag_rs.Index(root)
    name = index.get_graph_labels()[0]

    def update_at_once():
        assert "Cancelled edit." not in (root / "graph_edits.yaml").read_text(), "the cancelled edit was kept"
        point_models_at(root, mock_url)
        graphrag_rs.update_index(root)

    edit = lambda: index.aedit_entity(name, {"description": "Cancelled edit."})  # noqa: E731
    at_return = asyncio.run(cancel_once_asking(edit, slow_mock_url, then=update_at_once))
    no_request_since(slow_mock_url, at_return)
    assert index.to_networkx().nodes[name]["description"] != "Cancelled edit."


def test_a_cancelled_agenerate_indexing_prompts_stops_its_model_calls(mock_url, slow_mock_url, tmp_path):
    root = make_project(tmp_path, slow_mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 4000)})
    tune = lambda: graphrag_rs.agenerate_indexing_prompts(root, limit=3, skip_validation=True)  # noqa: E731
    at_return = asyncio.run(cancel_once_asking(tune, slow_mock_url))
    no_request_since(slow_mock_url, at_return)
    # Its stop was its own: a tuning started afterwards runs to the end.
    point_models_at(root, mock_url)
    extract, _, _ = graphrag_rs.generate_indexing_prompts(root, limit=3, skip_validation=True)
    assert "{{ input_text }}" in extract
