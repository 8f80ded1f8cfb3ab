"""Fixtures: the mock OpenAI-compatible server (graphrag-mock-llm, on a free
loopback port) and projects whose models point at it."""

import json
import os
import shutil
import subprocess
import urllib.request
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


def _start_mock(*args: str):
    proc = subprocess.Popen(
        [_mock_binary(), "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    line = proc.stdout.readline().strip()
    assert line.startswith("listening on "), line
    return proc, line[len("listening on ") :]


@pytest.fixture(scope="session")
def mock_url():
    proc, url = _start_mock()
    yield url
    proc.terminate()
    proc.wait()


@pytest.fixture(scope="session")
def slow_mock_url():
    """A mock that answers each request after 400 ms: a query's model calls
    are still in flight when a test cancels it."""
    proc, url = _start_mock("--latency-ms", "400")
    yield url
    proc.terminate()
    proc.wait()


def mock_stats(url: str) -> dict:
    """The mock's request counters (its `/stats`)."""
    with urllib.request.urlopen(url.rstrip("/") + "/stats", timeout=10) as r:
        return json.load(r)


def point_models_at(root: Path, url: str) -> None:
    """Rewrites the project's settings so that both models use `url`."""
    settings = root / "settings.yaml"
    text = settings.read_text()
    start = text.index("api_base: ") + len("api_base: ")
    old = text[start : text.index("\n", start)]
    settings.write_text(text.replace(old, url))


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
