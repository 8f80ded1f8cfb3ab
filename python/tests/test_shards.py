"""The sharded-indexing functions the Ray driver calls (graphrag_rs.ray),
without Ray: shards, their status and the merge against a single build."""

import os
from pathlib import Path

from conftest import make_project, mock_stats, passage

from graphrag_rs import _native, build_index

FIXED_MTIME = 1_767_225_600


def _docs() -> dict:
    at = ["MARLEY'S GHOST", "THE FIRST OF THE THREE SPIRITS", "THE SECOND OF THE THREE SPIRITS", "THE LAST OF THE SPIRITS"]
    return {f"part{i}.txt": passage(start, 2500) for i, start in enumerate(at)}


def _project(root: Path, url: str) -> Path:
    make_project(root, url, _docs())
    for f in (root / "input").iterdir():
        os.utime(f, (FIXED_MTIME, FIXED_MTIME))
    return root


def _published(root: Path) -> dict:
    out = root / "output"
    return {
        p.name: p.read_bytes()
        for p in out.glob("*.parquet")
        if p.name != "document_status.parquet"
    }


def test_shards_then_merge_equal_a_single_build(mock_url, tmp_path):
    single = _project(tmp_path / "single", mock_url)
    build_index(single, method="standard")
    sharded = _project(tmp_path / "sharded", mock_url)
    root = str(sharded)
    assert _native.shard_status(root, 2, "standard") == [None, None]
    reports = [_native.index_shard(root, k, 2, "standard") for k in range(2)]
    assert sum(r["documents"] for r in reports) == 4
    assert all(r["model_calls"] > 0 for r in reports if r["documents"])
    status = _native.shard_status(root, 2, "standard")
    assert [s["shard"] for s in status] == [0, 1]
    # A finished shard again: nothing asked.
    before = mock_stats(mock_url)["chat_requests"]
    again = _native.index_shard(root, 0, 2, "standard")
    assert mock_stats(mock_url)["chat_requests"] - before <= 1, "at most the start-up check"
    assert again["model_calls"] == 0
    steps = []
    result = _native.merge_shards(root, None, "standard", lambda step, i, n, done: steps.append((step, done)))
    assert result["pipeline"] == "standard"
    assert "extract_graph" not in dict(result["model_calls"]), "the shards extracted"
    assert ("extract_graph", "ran") in steps
    assert _published(sharded) == _published(single)


def test_merge_names_the_shards_not_finished(mock_url, tmp_path):
    root = _project(tmp_path / "p", mock_url)
    _native.index_shard(str(root), 1, 3, "fast")
    try:
        _native.merge_shards(str(root), None, "fast", None)
    except _native.GraphragError as e:
        assert "shards 0/3, 2/3 have not finished" in str(e)
    else:
        raise AssertionError("a merge with shards missing succeeded")


def test_embed_shards_then_merge_equal_a_single_build(mock_url, tmp_path):
    single = _project(tmp_path / "single", mock_url)
    build_index(single, method="fast")
    sharded = _project(tmp_path / "sharded", mock_url)
    root = str(sharded)
    for k in range(2):
        _native.index_shard(root, k, 2, "fast")
    # The graph phase stops before the model's reports; two model shards ask them.
    staged = _native.merge_graph(root, None, "fast", True)
    stages = []
    while staged["stage"] is not None:
        step, wave = staged["stage"]
        stages.append((step, wave))
        assert _native.shard_status(root, 2, "fast", "model") == [None, None]
        reports = [_native.index_shard(root, k, 2, "fast", "model") for k in range(2)]
        assert all(r["phase"] == "model" and r["stage"] == f"{step} wave {wave}" for r in reports)
        assert sum(r["model_calls"] for r in reports) > 0
        staged = _native.merge_graph(root, None, "fast", True)
        assert dict(staged["model_calls"]).get(step, 0) == 0, "the model shards answered the stage"
    assert stages == [("community_reports", 0)]
    assert dict(staged["rows"])["entities"] > 0
    assert not (sharded / "output" / "entities.parquet").exists(), "the graph phase publishes nothing"
    assert _native.shard_status(root, 3, "fast", "embed") == [None, None, None]
    reports = [_native.index_shard(root, k, 3, "fast", "embed") for k in range(3)]
    assert all(r["phase"] == "embed" for r in reports)
    assert sum(r["embedded_texts"] for r in reports) >= dict(staged["rows"])["entities"]
    assert [s["shard"] for s in _native.shard_status(root, 3, "fast", "embed")] == [0, 1, 2]
    # Staged again unchanged (a driver's rerun): the finished embed shards are kept.
    _native.merge_graph(root, None, "fast")
    assert all(s is not None for s in _native.shard_status(root, 3, "fast", "embed"))
    before = mock_stats(mock_url)["embedded_texts"]
    _native.merge_shards(root, None, "fast", None)
    # Exactly none in tests/shards.rs, which skips the start-up check.
    assert mock_stats(mock_url)["embedded_texts"] - before <= 1, "at most the start-up check's text"
    assert _published(sharded) == _published(single)
    assert _native.shard_status(root, 3, "fast", "embed") == [None, None, None], "cleared once published"
