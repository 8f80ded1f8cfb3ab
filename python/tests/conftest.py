"""Fixtures: the mock OpenAI-compatible server (graphrag-mock-llm, on a free
loopback port) and projects whose models point at it."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import graphrag_rs

REPO = Path(__file__).resolve().parents[2]
CAROL = REPO / "examples" / "christmas-carol" / "a_christmas_carol.txt"


def _mock_binary() -> str:
    explicit = os.environ.get("GRAPHRAG_MOCK_LLM")
    if explicit:
        return explicit
    for profile in ("debug", "release"):
        candidate = REPO / "target" / profile / "graphrag-mock-llm"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("graphrag-mock-llm")
    if found:
        return found
    pytest.fail("graphrag-mock-llm not found: `cargo build -p graphrag-mock-llm` or set GRAPHRAG_MOCK_LLM")


@pytest.fixture(scope="session")
def mock_url():
    proc = subprocess.Popen(
        [_mock_binary(), "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    line = proc.stdout.readline().strip()
    assert line.startswith("listening on "), line
    yield line[len("listening on ") :]
    proc.terminate()
    proc.wait()


def passage(start: str, length: int) -> str:
    text = CAROL.read_text(encoding="utf-8")
    at = text.index(start)
    return text[at : at + length]


def make_project(root: Path, url: str, docs: dict) -> Path:
    """A project as `graphrag_rs.init` writes it, with both models on the mock server."""
    graphrag_rs.init(root)
    model = lambda name: (  # noqa: E731
        f"    model: {name}\n    api_base: {url}\n    api_key: sk-test\n"
        "    retry_base_delay: 0.001\n    max_retry_wait: 0.05\n"
    )
    (root / "settings.yaml").write_text(
        "completion_models:\n  default_completion_model:\n"
        + model("mock-gpt")
        + "embedding_models:\n  default_embedding_model:\n"
        + model("mock-embed")
        + "chunking:\n  size: 300\n  overlap: 30\n"
    )
    for name, body in docs.items():
        (root / "input" / name).write_text(body, encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def indexed(mock_url, tmp_path_factory):
    """One project indexed with the standard pipeline, shared by the query tests."""
    root = make_project(
        tmp_path_factory.mktemp("carol"), mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 5000)}
    )
    report = graphrag_rs.build_index(root)
    return root, report
